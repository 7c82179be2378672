/**
 * What both file-based key stores (encrypted key files, offline public keys)
 * do with their folder: write a new key file atomically and only if the label
 * is free, and report a file-system failure as a `keystore_io` KeyError that
 * names what failed (never the file's content).
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, open, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { KeyError } from './backend.js';

export function ioError(what: string, e: unknown): KeyError {
  const code = (e as NodeJS.ErrnoException)?.code;
  return new KeyError('keystore_io', `${what}${code ? ` (${code})` : ''}`);
}

/**
 * Writes `text` to `final` in `dir`: a temp file (0600), fsync, then a hard
 * link to the final name — atomic, and `key_exists` (`existsMessage`) when
 * that name is taken. Other failures are `keystore_io` (`failMessage`).
 */
export async function writeExclusive(
  dir: string,
  label: string,
  final: string,
  text: string,
  messages: { exists: string; fail: string },
): Promise<void> {
  const temp = join(dir, `.${label}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const fh = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      await fh.writeFile(text, 'utf8');
      await fh.sync();
    } finally {
      await fh.close();
    }
    try {
      await link(temp, final);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new KeyError('key_exists', messages.exists);
      throw e;
    }
  } catch (e) {
    if (e instanceof KeyError) throw e;
    throw ioError(messages.fail, e);
  } finally {
    await unlink(temp).catch(() => {});
  }
}

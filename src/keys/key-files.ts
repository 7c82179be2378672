/**
 * What the file-based key stores (encrypted key files, offline public keys,
 * the key state file, and the party book and journal beside them) do with
 * their folder: read a file that may not exist, write a new key file atomically
 * and only if the label is free, make a new name durable (the folder fsynced
 * after the link or rename), take turns with other processes through a lock
 * file, and report a file-system failure as a `keystore_io` KeyError that
 * names what failed (never the file's content).
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, link, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, join } from 'node:path';
import { KeyError } from './backend.js';

export function ioError(what: string, e: unknown): KeyError {
  const code = (e as NodeJS.ErrnoException)?.code;
  return new KeyError('keystore_io', `${what}${code ? ` (${code})` : ''}`, { cause: e });
}

/** Where a folder cannot be opened or fsynced (Windows, some network and FUSE file systems). */
const NO_DIR_SYNC = new Set(['EISDIR', 'EPERM', 'EINVAL', 'ENOTSUP', 'EBADF']);

/**
 * Fsyncs the folder `dir`, so that a name just linked, renamed or removed in
 * it survives a power loss (the file's own fsync does not cover its entry in
 * the folder). Platforms that cannot open or fsync a folder are skipped
 * quietly; any other failure is thrown.
 */
export async function syncDir(dir: string): Promise<void> {
  let fh: FileHandle;
  try {
    fh = await open(dir, 'r');
  } catch (e) {
    if (NO_DIR_SYNC.has((e as NodeJS.ErrnoException).code ?? '')) return;
    throw e;
  }
  try {
    await fh.sync();
  } catch (e) {
    if (!NO_DIR_SYNC.has((e as NodeJS.ErrnoException).code ?? '')) throw e;
  } finally {
    await fh.close();
  }
}

/** Creates `path` (0600) with `text`, fsynced; fails with EEXIST when it exists. */
export async function writeNewFile(path: string, text: string): Promise<void> {
  const fh = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    await fh.writeFile(text, 'utf8');
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Writes `text` to `final` in `dir`: a temp file (0600), fsync, then a hard
 * link to the final name — atomic, and `key_exists` (`existsMessage`) when
 * that name is taken — and the folder fsynced so that the name is durable.
 * Other failures are `keystore_io` (`failMessage`).
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
    await writeNewFile(temp, text);
    try {
      await link(temp, final);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new KeyError('key_exists', messages.exists);
      throw e;
    }
    await unlink(temp).catch(() => {});
    await syncDir(dir);
  } catch (e) {
    if (e instanceof KeyError) throw e;
    throw ioError(messages.fail, e);
  } finally {
    await unlink(temp).catch(() => {});
  }
}

/** A text file's content, or undefined when there is no such file (other failures throw). */
export async function readTextIfAny(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/**
 * Replaces `final` in `dir` with `text` atomically and durably: a temp file
 * (0600) written and fsynced, renamed over `final`, then the folder fsynced.
 * Throws the file system's error (the temp file removed).
 */
export async function replaceFile(dir: string, final: string, text: string): Promise<void> {
  const temp = join(dir, `.${basename(final)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await writeNewFile(temp, text);
    await rename(temp, final);
  } catch (e) {
    await unlink(temp).catch(() => {});
    throw e;
  }
  await syncDir(dir);
}

export interface LockFileOptions {
  /** How long to wait for another holder (default 15 s); then `keystore_io`. */
  waitMs?: number;
  /** A lock file older than this was left by a process that died holding it and is removed (default 10 s). */
  staleMs?: number;
  /** Pause between attempts (default 25 ms, plus up to as much again at random). */
  pollMs?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `fn` while holding the lock file `path`: created with O_CREAT|O_EXCL
 * (so only one process at a time holds it, on any local file system, without
 * native code), removed afterwards. A holder keeps it for milliseconds (one
 * read-modify-write), so a lock file older than `staleMs` is one a crashed
 * process left behind: it is broken. Waits at most `waitMs`, then fails with
 * `keystore_io` naming the lock file.
 */
export async function withLockFile<T>(
  path: string,
  fn: () => Promise<T>,
  opts: LockFileOptions = {},
): Promise<T> {
  const waitMs = opts.waitMs ?? 15_000;
  const staleMs = opts.staleMs ?? 10_000;
  const pollMs = opts.pollMs ?? 25;
  const deadline = Date.now() + waitMs;
  let fh: FileHandle | undefined;
  while (!fh) {
    try {
      fh = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
        throw ioError(`cannot create the lock file ${path}`, e);
    }
    if (await breakStaleLock(path, staleMs)) continue;
    if (Date.now() >= deadline)
      throw new KeyError(
        'keystore_io',
        `${path} is held by another process (waited ${Math.round(waitMs / 1000)} s); if no canton-signer process is using this folder, delete the file`,
      );
    await sleep(pollMs + Math.random() * pollMs);
  }
  let ino: number;
  try {
    // Who holds it, for a person looking at a lock that stays.
    await fh.writeFile(
      `${JSON.stringify({ pid: process.pid, host: hostname(), at: new Date().toISOString() })}\n`,
    );
    ino = (await fh.stat()).ino;
  } catch (e) {
    await fh.close().catch(() => {});
    await unlink(path).catch(() => {});
    throw ioError(`cannot write the lock file ${path}`, e);
  }
  await fh.close();
  try {
    return await fn();
  } finally {
    // Only our own lock: if it was broken as stale meanwhile, the file there now is another holder's.
    const now = await stat(path).catch(() => undefined);
    if (now?.ino === ino) await unlink(path).catch(() => {});
  }
}

/**
 * Removes the lock file when it is older than `staleMs`; true when the name
 * is free now (removed here or by its holder). Moved aside before removal and
 * checked to be the same file, so that a lock another process has just taken
 * (after breaking the same stale one) is put back, never removed.
 */
async function breakStaleLock(path: string, staleMs: number): Promise<boolean> {
  const seen = await stat(path).catch(() => undefined);
  if (!seen) return true;
  if (Date.now() - seen.mtimeMs < staleMs) return false;
  const aside = `${path}.${randomBytes(6).toString('hex')}.stale`;
  try {
    await rename(path, aside);
  } catch {
    return true; // gone already: try again
  }
  const moved = await stat(aside).catch(() => undefined);
  if (moved && moved.ino === seen.ino && moved.dev === seen.dev) {
    await unlink(aside).catch(() => {});
    return true;
  }
  // Someone else's fresh lock: back under its name (unless the name was taken again meanwhile).
  await link(aside, path).catch(() => {});
  await unlink(aside).catch(() => {});
  return false;
}

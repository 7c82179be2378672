/**
 * Where development mode's sandbox listens, for the CLI: `npm start` puts
 * its in-process sandbox on a free port and notes the origin (and its own
 * process id) in `<data dir>/dev-sandbox.json` (0600); `canton-signer sandbox
 * deposit` without `--url` reads it, and ignores a note whose process is gone.
 */
import { readFileSync } from 'node:fs';
import { chmod, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

export const DEV_SANDBOX_NOTE = 'dev-sandbox.json';
const FORMAT = 'canton-signer/dev-sandbox@1';

export function devSandboxNotePath(dataDir: string): string {
  return join(resolve(dataDir), DEV_SANDBOX_NOTE);
}

/** Notes `origin` as this process's sandbox in `dataDir` (which exists: the database lives there). */
export async function writeDevSandboxNote(dataDir: string, origin: string): Promise<string> {
  const file = devSandboxNotePath(dataDir);
  const doc = { format: FORMAT, url: origin, pid: process.pid };
  await writeFile(file, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o600 });
  // A note left by an earlier start keeps its mode through writeFile: owner-only either way.
  await chmod(file, 0o600);
  return file;
}

/** Removes the note (at shutdown); a note already gone is fine. */
export async function removeDevSandboxNote(dataDir: string): Promise<void> {
  await rm(devSandboxNotePath(dataDir), { force: true });
}

/** The origin noted in `dataDir` by a development-mode process that still runs, if any. */
export function readDevSandboxNote(dataDir: string): { url: string; file: string } | undefined {
  const file = devSandboxNotePath(dataDir);
  let doc: { format?: unknown; url?: unknown; pid?: unknown };
  try {
    doc = JSON.parse(readFileSync(file, 'utf8')) as typeof doc;
  } catch {
    return undefined;
  }
  if (doc.format !== FORMAT || typeof doc.url !== 'string' || typeof doc.pid !== 'number') return undefined;
  try {
    process.kill(doc.pid, 0);
  } catch (e) {
    // ESRCH: that process has ended, the note is stale. EPERM: it runs (as another user).
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
  }
  return { url: doc.url, file };
}

/**
 * One process at a time in an embedded database folder. PGlite takes no
 * lock between processes, and two engines writing one folder corrupt it (a
 * second `npm start` in the same folder would). A lock file
 * (`.canton-signer.lock`, created exclusively) names the holder: its process
 * id and host. A lock whose process is gone from this host is taken over; a
 * live holder, or one on another host (a shared file system), is refused
 * with a message naming it. The lock is released when the database closes.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

export const LOCK_FILE = '.canton-signer.lock';

interface Holder {
  pid: number;
  host: string;
  since: string;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists, under another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function holderOf(path: string): Holder | undefined {
  try {
    const h = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>;
    return typeof h.pid === 'number' && typeof h.host === 'string'
      ? { pid: h.pid, host: h.host, since: String(h.since ?? '') }
      : undefined;
  } catch {
    return undefined;
  }
}

/** Takes the folder's lock or throws naming its holder; returns the release. */
export function lockFolder(dir: string): () => void {
  const path = join(dir, LOCK_FILE);
  const me: Holder = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o600);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const h = holderOf(path);
      const gone = h !== undefined && h.host === me.host && h.pid !== process.pid && !alive(h.pid);
      if (gone && attempt === 0) {
        unlinkSync(path);
        continue;
      }
      throw new Error(
        h
          ? `the embedded database in ${dir} is in use by process ${h.pid} on ${h.host} (since ${h.since}): stop it first, or use another database.dataDir; if that process is gone, delete ${path}`
          : `the embedded database in ${dir} is locked by ${path}, which names no holder: if no other canton-signer uses the folder, delete it`,
      );
    }
    try {
      writeSync(fd, `${JSON.stringify(me)}\n`);
    } finally {
      closeSync(fd);
    }
    return () => {
      const h = holderOf(path);
      if (h?.pid === me.pid && h.host === me.host && h.since === me.since) unlinkSync(path);
    };
  }
}

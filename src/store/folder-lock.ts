/**
 * One process at a time in an embedded database folder. PGlite takes no
 * lock between processes, and two engines writing one folder corrupt it (a
 * second `npm start` in the same folder would).
 *
 * The lock is a Unix domain socket the holder listens on in the folder
 * (`.canton-signer.sock`): while the holder lives, a connect to it succeeds;
 * once it dies — killed, crashed, a container stopped — the kernel closes
 * the socket and a connect is refused, whatever became of its process id.
 * So a crash can never leave the folder locked (a restarted container is
 * PID 1 again on the same host name; a killed process may not be reaped
 * yet: neither matters). The socket is made under a name of its own and
 * hard-linked to the lock name, which fails when the name exists: two
 * processes cannot both create it. A dead socket under the lock name is
 * moved aside and checked to be the one found dead before it is removed,
 * so a process taking over never removes a live newcomer's lock.
 *
 * Beside it, `.canton-signer.lock` names the holder (process id, host, since)
 * for messages, and the holder touches it every HEARTBEAT_MS as a sign of
 * life. On a shared file system another host's socket cannot be reached from
 * here, so a folder whose lock file names another host is refused while that
 * file shows life (touched within STALE_MS), and taken over after: a pod
 * replaced on another node, or a container recreated under a new host name,
 * starts again without anyone deleting the file. Both files go when the
 * holder closes the database.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  linkSync,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';

export const LOCK_FILE = '.canton-signer.lock';
export const LOCK_SOCKET = '.canton-signer.sock';
/** How often the holder touches its lock file. */
export const HEARTBEAT_MS = 10_000;
/** A lock file of another host untouched for this long names no live holder. */
export const STALE_MS = 60_000;

export interface FolderHolder {
  pid: number;
  host: string;
  since: string;
  /** Where the holder serves its API, once it listens (for the messages of whoever finds it). */
  url?: string;
}

/** The folder is held by another process (running here, or named by a lock file from another host). */
export class FolderInUseError extends Error {
  constructor(
    readonly dir: string,
    /** Who holds it, when its lock file says. */
    readonly holder: FolderHolder | undefined,
    /** The holder is on another host (its lock file says so): nothing here can tell whether it still runs. */
    readonly otherHost: boolean,
  ) {
    const who = holder
      ? `process ${holder.pid} on ${holder.host} (since ${holder.since})`
      : 'another process';
    super(
      otherHost
        ? `the embedded database in ${dir} is in use by ${who}, according to ${join(dir, LOCK_FILE)}, which that process touched less than ${STALE_MS / 1000} s ago: stop that process first; once it has shown no life for ${STALE_MS / 1000} s the folder is taken over`
        : `the embedded database in ${dir} is in use by ${who}: stop it first, or use another data folder`,
    );
    this.name = 'FolderInUseError';
  }
}

function holderOf(path: string): FolderHolder | undefined {
  try {
    const h = JSON.parse(readFileSync(path, 'utf8')) as Partial<FolderHolder>;
    return typeof h.pid === 'number' && typeof h.host === 'string'
      ? {
          pid: h.pid,
          host: h.host,
          since: String(h.since ?? ''),
          ...(typeof h.url === 'string' ? { url: h.url } : {}),
        }
      : undefined;
  } catch {
    return undefined;
  }
}

/** When the file was last touched (ms since the epoch); 0 when it cannot be read. */
function mtimeOf(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function code(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException).code;
}

/**
 * A socket path for `name` in the folder open as `fd`: the plain path, or on
 * Linux, when that is longer than a socket address may be (108 bytes), the
 * same file reached through /proc/self/fd.
 */
function socketPath(dir: string, fd: number | undefined, name: string): string {
  const plain = join(dir, name);
  return Buffer.byteLength(plain) < 100 || fd === undefined ? plain : `/proc/self/fd/${fd}/${name}`;
}

/**
 * Whether a process listens on the socket: 'live', 'dead' (the kernel refuses
 * the connect: nobody listens), 'gone' (no file). Any other failure (no
 * permission to connect, a full backlog) proves nothing about the holder,
 * so it counts as live: the folder is never taken from a holder that may run.
 */
function probe(path: string): Promise<'live' | 'dead' | 'gone'> {
  return new Promise((resolve) => {
    const s = connect(path);
    // A holder always answers a local connect at once (the kernel queues it); silence is a live holder too.
    const timer = setTimeout(() => finish('live'), 2000);
    const finish = (r: 'live' | 'dead' | 'gone') => {
      clearTimeout(timer);
      s.destroy();
      resolve(r);
    };
    s.once('connect', () => finish('live'));
    s.once('error', (e) => {
      const c = code(e);
      finish(c === 'ENOENT' ? 'gone' : c === 'ECONNREFUSED' ? 'dead' : 'live');
    });
  });
}

function listen(path: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((c) => c.destroy());
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      // The lock must not keep the process alive.
      server.unref();
      resolve(server);
    });
  });
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/**
 * Removes the dead socket `ino` from `path`: moved aside first, then removed
 * if it is that socket; anything else found there (a newcomer's live lock)
 * is put back.
 */
function removeDead(path: string, ino: number): void {
  const aside = `${path}.dead-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    renameSync(path, aside);
  } catch (e) {
    if (code(e) === 'ENOENT') return;
    throw e;
  }
  if (lstatSync(aside).ino !== ino) {
    try {
      linkSync(aside, path);
    } catch (e) {
      if (code(e) !== 'EEXIST') throw e;
    }
  }
  unlinkQuietly(aside);
}

/** Takes the folder's lock or throws FolderInUseError naming its holder; resolves to the release. */
export async function lockFolder(dir: string): Promise<() => void> {
  const infoPath = join(dir, LOCK_FILE);
  const lockPath = join(dir, LOCK_SOCKET);
  const me: FolderHolder = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  const recorded = holderOf(infoPath);
  if (recorded && recorded.host !== me.host && Date.now() - mtimeOf(infoPath) < STALE_MS)
    throw new FolderInUseError(dir, recorded, true);

  let dirFd: number | undefined;
  if (process.platform === 'linux') dirFd = openSync(dir, 'r');
  const mine = `${LOCK_SOCKET}.${process.pid}-${randomBytes(4).toString('hex')}`;
  let server: Server | undefined;
  try {
    server = await listen(socketPath(dir, dirFd, mine));
    for (let attempt = 0; ; attempt++) {
      try {
        linkSync(join(dir, mine), lockPath);
        break;
      } catch (e) {
        if (code(e) !== 'EEXIST') throw e;
      }
      let ino: number;
      try {
        ino = lstatSync(lockPath).ino;
      } catch (e) {
        if (code(e) === 'ENOENT') continue;
        throw e;
      }
      const state = await probe(socketPath(dir, dirFd, LOCK_SOCKET));
      if (state === 'live' || attempt >= 5) throw new FolderInUseError(dir, holderOf(infoPath), false);
      if (state === 'dead') removeDead(lockPath, ino);
    }
  } catch (e) {
    server?.close();
    unlinkQuietly(join(dir, mine));
    if (dirFd !== undefined) closeSync(dirFd);
    throw e;
  }
  unlinkQuietly(join(dir, mine));
  const held = server;
  const ino = lstatSync(lockPath).ino;
  const tmp = `${infoPath}.${process.pid}-${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, `${JSON.stringify(me)}\n`, { mode: 0o600 });
  renameSync(tmp, infoPath);
  const heartbeat = setInterval(() => {
    const now = new Date();
    try {
      utimesSync(infoPath, now, now);
    } catch {
      // removed by hand: the socket still holds the folder
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();

  let released = false;
  return () => {
    if (released) return;
    released = true;
    clearInterval(heartbeat);
    const h = holderOf(infoPath);
    if (h?.pid === me.pid && h.host === me.host && h.since === me.since) unlinkQuietly(infoPath);
    try {
      if (lstatSync(lockPath).ino === ino) unlinkSync(lockPath);
    } catch {
      // gone already
    }
    held.close();
    if (dirFd !== undefined) closeSync(dirFd);
  };
}

/**
 * Adds `url`, where this process serves its API, to the lock file it wrote
 * for the folder `dir` (nothing when the file names another holder): a
 * process that finds the folder held can then name the running service.
 */
export function noteHolderUrl(dir: string, url: string): void {
  const infoPath = join(dir, LOCK_FILE);
  const h = holderOf(infoPath);
  if (!h || h.pid !== process.pid || h.host !== hostname()) return;
  const tmp = `${infoPath}.${process.pid}-${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, `${JSON.stringify({ ...h, url })}\n`, { mode: 0o600 });
  renameSync(tmp, infoPath);
}

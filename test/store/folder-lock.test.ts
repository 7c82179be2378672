/**
 * One process at a time in an embedded database folder (src/store/folder-lock.ts):
 * a second open of a folder in use is refused naming the holder, before the
 * engine touches it; closing releases it; a holder that died (kill -9) never
 * leaves the folder locked, whatever its lock file says — also when it names
 * the new process's own id, as after a container restart as PID 1; of
 * processes racing to take over a dead lock exactly one wins; a lock file
 * from another host is taken over only once it has shown no life for
 * STALE_MS. Needs dist/ (`npm run build`) for
 * the child processes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dumpPglite, openPglite } from '../../src/store/db.js';
import {
  FolderInUseError,
  LOCK_FILE,
  LOCK_SOCKET,
  lockFolder,
  STALE_MS,
} from '../../src/store/folder-lock.js';
import { ROOT } from '../support/cli.js';

const root = mkdtempSync(join(tmpdir(), 'cs-lock-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const DIST_LOCK = join(ROOT, 'dist', 'store', 'folder-lock.js');
beforeAll(() => {
  if (!existsSync(DIST_LOCK)) throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
});

/** A child process that takes the folder's lock (the compiled module) and reports "got" or "refused". */
function locker(dir: string, holdMs = 60_000): { child: ChildProcess; said: Promise<string> } {
  const script = `
    const { lockFolder } = await import(${JSON.stringify(DIST_LOCK)});
    try { await lockFolder(${JSON.stringify(dir)}); process.stdout.write('got\\n'); }
    catch (e) { process.stdout.write(e.name === 'FolderInUseError' ? 'refused\\n' : 'error ' + e.message + '\\n'); process.exit(0); }
    setTimeout(() => {}, ${holdMs});`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const said = new Promise<string>((resolve) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('\n')) resolve(out.trim());
    });
    child.on('exit', () => resolve(out.trim()));
  });
  return { child, said };
}

function killed(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

describe('the embedded database folder lock', () => {
  it('refuses a second open while the first is open, names the holder; closing releases it', async () => {
    const dir = join(root, 'data');
    const db = await openPglite(dir, { maintenance: false });
    const held = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'));
    expect(held.pid).toBe(process.pid);
    expect(statSync(join(dir, LOCK_SOCKET)).isSocket()).toBe(true);
    // the engine's archiver cannot read a folder with a socket in it: refused, saying what to do
    await expect(dumpPglite(db)).rejects.toThrow(/only an in-memory database; .*copy the folder/);
    const second = openPglite(dir, { maintenance: false });
    await expect(second).rejects.toBeInstanceOf(FolderInUseError);
    await expect(second).rejects.toThrow(new RegExp(`in use by process ${process.pid} on `));
    await db.close();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    expect(existsSync(join(dir, LOCK_SOCKET))).toBe(false);
    const again = await openPglite(dir, { maintenance: false });
    await again.close();
  }, 60_000);

  it('a holder killed with SIGKILL leaves nothing held, even with a lock file naming the new process itself', async () => {
    const dir = join(root, 'killed');
    mkdirSync(dir, { recursive: true });
    const { child, said } = locker(dir);
    expect(await said).toBe('got');
    // alive: refused, naming it
    await expect(lockFolder(dir)).rejects.toThrow(new RegExp(`in use by process ${child.pid} on `));
    await killed(child);
    // what a crash leaves: the socket file and a lock file; make it name this very process (a
    // container restarted as PID 1 finds its own pid there), on this host
    expect(existsSync(join(dir, LOCK_SOCKET))).toBe(true);
    writeFileSync(
      join(dir, LOCK_FILE),
      JSON.stringify({ pid: process.pid, host: hostname(), since: 'then' }),
    );
    const release = await lockFolder(dir);
    const h = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'));
    expect(h.pid).toBe(process.pid);
    expect(h.since).not.toBe('then');
    release();
    expect(readdirSync(dir)).toEqual([]);
  }, 30_000);

  it('of processes taking over a dead lock at once, exactly one gets it', async () => {
    for (let round = 0; round < 3; round++) {
      const dir = join(root, `race-${round}`);
      mkdirSync(dir, { recursive: true });
      const first = locker(dir);
      expect(await first.said).toBe('got');
      await killed(first.child);
      const racers = Array.from({ length: 4 }, () => locker(dir, 5_000));
      try {
        const answers = await Promise.all(racers.map((r) => r.said));
        expect(
          answers.filter((a) => a === 'got'),
          answers.join(','),
        ).toHaveLength(1);
        expect(answers.filter((a) => a === 'refused')).toHaveLength(3);
      } finally {
        await Promise.all(racers.map((r) => killed(r.child)));
      }
    }
  }, 60_000);

  it('works in a folder whose path is longer than a socket address may be', async () => {
    const dir = join(root, 'x'.repeat(60), 'y'.repeat(60));
    mkdirSync(dir, { recursive: true });
    const release = await lockFolder(dir);
    await expect(lockFolder(dir)).rejects.toBeInstanceOf(FolderInUseError);
    release();
    const again = await lockFolder(dir);
    again();
  });

  it('takes over a lock file naming no holder; one naming another host only once it shows no life', async () => {
    const dir = join(root, 'files');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, LOCK_FILE), 'garbage');
    const release = await lockFolder(dir);
    release();
    const lockFile = join(dir, LOCK_FILE);
    writeFileSync(lockFile, JSON.stringify({ pid: 4242, host: 'elsewhere', since: 'then' }));
    const refused = lockFolder(dir);
    await expect(refused).rejects.toThrow(/in use by process 4242 on elsewhere .*touched less than 60 s ago/);
    await expect(refused).rejects.toMatchObject({ otherHost: true });
    // Untouched for longer than STALE_MS: its holder (a replaced pod, a recreated container) is gone.
    const then = new Date(Date.now() - STALE_MS - 5_000);
    utimesSync(lockFile, then, then);
    const taken = await lockFolder(dir);
    expect(JSON.parse(readFileSync(lockFile, 'utf8'))).toMatchObject({ pid: process.pid, host: hostname() });
    taken();
  });
});

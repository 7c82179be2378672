/**
 * One process at a time in an embedded database folder (src/store/folder-lock.ts):
 * a second open of a folder in use is refused naming the holder, before the
 * engine touches it; closing releases it; a lock left by a process that is
 * gone is taken over; a lock from another host is never taken over.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openPglite } from '../../src/store/db.js';
import { LOCK_FILE, lockFolder } from '../../src/store/folder-lock.js';

const root = mkdtempSync(join(tmpdir(), 'cs-lock-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the embedded database folder lock', () => {
  it('refuses a second open while the first is open, names the holder; closing releases it', async () => {
    const dir = join(root, 'data');
    const db = await openPglite(dir, { maintenance: false });
    const held = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'));
    expect(held.pid).toBe(process.pid);
    await expect(openPglite(dir, { maintenance: false })).rejects.toThrow(
      new RegExp(`in use by process ${process.pid} on `),
    );
    await db.close();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    const again = await openPglite(dir, { maintenance: false });
    await again.close();
  }, 60_000);

  it('takes over a lock whose process is gone; never one from another host', () => {
    const dir = join(root, 'stale');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    // A process that has exited: its pid is free.
    const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    const deadPid = Number(child.stdout.toString());
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: deadPid, host: hostname(), since: 'then' }));
    const release = lockFolder(dir);
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')).pid).toBe(process.pid);
    release();
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: deadPid, host: 'elsewhere', since: 'then' }));
    expect(() => lockFolder(dir)).toThrow(/in use by process \d+ on elsewhere/);
    writeFileSync(join(dir, LOCK_FILE), 'garbage');
    expect(() => lockFolder(dir)).toThrow(/names no holder/);
  });
});

/**
 * Key files and the key state file on disk (src/keys/key-files.ts): each new
 * name is durable — the file fsynced before it is linked or renamed into
 * place, the folder fsynced after — and the state file's read-modify-write is
 * exclusive across processes (a lock file), so that two instances changing
 * different keys at once both keep their change.
 *
 * node:fs/promises is wrapped (not replaced) to record the order of fsyncs,
 * links and renames and to make opening a folder fail on demand.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KeyError } from '../../src/keys/backend.js';
import { FileBackend } from '../../src/keys/file-backend.js';
import { OfflineBackend } from '../../src/keys/offline-backend.js';
import { Signer } from '../../src/keys/signer.js';

const fsLog: string[] = [];
/** When set, opening a folder read-only fails with this code (a platform that cannot fsync folders). */
let dirOpenFails: string | undefined;
let isDir = (_p: string) => false;

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  const open = async (...args: Parameters<typeof real.open>) => {
    const path = String(args[0]);
    const folder = isDir(path);
    if (folder && dirOpenFails) throw Object.assign(new Error(`open ${path}`), { code: dirOpenFails });
    const fh = await real.open(...args);
    const sync = fh.sync.bind(fh);
    fh.sync = async () => {
      fsLog.push(`${folder ? 'fsync-dir' : 'fsync'} ${basename(path)}`);
      return sync();
    };
    return fh;
  };
  const link = async (a: string, b: string) => {
    await real.link(a, b);
    fsLog.push(`link ${basename(a)} ${basename(b)}`);
  };
  const rename = async (a: string, b: string) => {
    await real.rename(a, b);
    fsLog.push(`rename ${basename(a)} ${basename(b)}`);
  };
  return { ...real, default: { ...real, open, link, rename }, open, link, rename };
});

let dir: string;
const fileBackend = (d: string) =>
  new FileBackend({ dir: d, passphrase: () => 'durable', scrypt: { N: 2 ** 14, r: 8, p: 1 } });
const signerAt = (d: string) =>
  new Signer({ file: fileBackend(d), offline: new OfflineBackend({ dir: join(d, 'offline') }) });

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cs-durable-'));
  fsLog.length = 0;
  dirOpenFails = undefined;
  isDir = (p) => {
    try {
      return statSync(p).isDirectory();
    } catch {
      return false;
    }
  };
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The entries of `fsLog` from `from` on, with the random part of temp names replaced by `*`. */
const steps = (from = 0) => fsLog.slice(from).map((s) => s.replace(/\.[0-9a-f]{12}\.tmp/g, '.*.tmp'));

describe('durable writes: the file fsynced before its name is made, the folder after', () => {
  it('a new key file: fsync temp → link → fsync folder', async () => {
    const ks = join(dir, 'ks');
    const s = signerAt(ks);
    await s.generate({ label: 'k1', scheme: 'ed25519', backend: 'file' });
    // The first key of a keystore writes its passphrase marker first, the same way.
    expect(steps()).toEqual([
      'fsync .keystore.*.tmp',
      'link .keystore.*.tmp .keystore.json',
      'fsync-dir ks',
      'fsync .k1.*.tmp',
      'link .k1.*.tmp k1.key.json',
      'fsync-dir ks',
    ]);
    expect(JSON.parse(readFileSync(join(ks, 'k1.key.json'), 'utf8')).label).toBe('k1');
  });

  it('a cold key (offline public key file): the same', async () => {
    const ks = join(dir, 'ks');
    const s = signerAt(ks);
    const { publicKeySpki } = await s.generate({ label: 'hot', scheme: 'ed25519', backend: 'file' });
    const from = fsLog.length;
    await s.importPublicKey('cold', 'ed25519', publicKeySpki);
    expect(steps(from)).toEqual([
      'fsync .cold.*.tmp',
      expect.stringMatching(/^link \.cold\.\*\.tmp cold\./),
      'fsync-dir offline',
    ]);
  });

  it('the key state file: fsync temp → rename → fsync folder', async () => {
    const ks = join(dir, 'ks');
    const s = signerAt(ks);
    await s.generate({ label: 'k1', scheme: 'ed25519', backend: 'file' });
    const from = fsLog.length;
    await s.disable('k1', 'incident');
    expect(steps(from)).toEqual([
      'fsync .key-state.json.*.tmp',
      'rename .key-state.json.*.tmp key-state.json',
      'fsync-dir ks',
    ]);
    const state = JSON.parse(readFileSync(join(ks, 'key-state.json'), 'utf8'));
    expect(state.disabled.k1.reason).toBe('incident');
  });

  for (const code of ['EISDIR', 'EPERM', 'EINVAL'])
    it(`a platform that cannot open a folder for fsync (${code}): skipped quietly, files complete`, async () => {
      dirOpenFails = code;
      const ks = join(dir, 'ks');
      const s = signerAt(ks);
      await s.generate({ label: 'k2', scheme: 'ecdsa-p256', backend: 'file' });
      await s.disable('k2');
      expect(steps().filter((x) => x.startsWith('fsync-dir'))).toEqual([]);
      expect(JSON.parse(readFileSync(join(ks, 'k2.key.json'), 'utf8')).label).toBe('k2');
      expect(JSON.parse(readFileSync(join(ks, 'key-state.json'), 'utf8')).disabled.k2).toBeDefined();
      expect((await s.describe('k2')).disabled).toBe(true);
    });

  it('any other failure to open the folder is a keystore_io error, not silence', async () => {
    dirOpenFails = 'EIO';
    const s = signerAt(join(dir, 'ks'));
    const e = await s.generate({ label: 'k3', scheme: 'ed25519', backend: 'file' }).catch((x) => x);
    expect(e).toBeInstanceOf(KeyError);
    expect((e as KeyError).code).toBe('keystore_io');
  });
});

describe('the key state file: exclusive across instances', () => {
  it('two instances changing different keys at the same time: both changes survive', async () => {
    const ks = join(dir, 'ks');
    const setup = signerAt(ks);
    const labels = ['a0', 'a1', 'a2', 'b0', 'b1', 'b2'];
    for (const label of labels) await setup.generate({ label, scheme: 'ed25519', backend: 'file' });
    // Two processes' worth of Signers: each has its own in-process queue, so only the lock file orders them.
    const a = signerAt(ks);
    const b = signerAt(ks);
    for (const label of labels) {
      await a.describe(label);
      await b.describe(label);
    }
    for (let round = 0; round < 5; round++) {
      await Promise.all([
        ...['a0', 'a1', 'a2'].map((l) => a.disable(l, `round ${round}`)),
        ...['b0', 'b1', 'b2'].map((l) => b.disable(l, `round ${round}`)),
      ]);
      const state = JSON.parse(readFileSync(join(ks, 'key-state.json'), 'utf8'));
      expect(Object.keys(state.disabled).sort(), `round ${round}`).toEqual(labels);
      await Promise.all([
        ...['a0', 'a1', 'a2'].map((l) => a.enable(l)),
        ...['b0', 'b1', 'b2'].map((l) => b.enable(l)),
      ]);
      const after = JSON.parse(readFileSync(join(ks, 'key-state.json'), 'utf8'));
      expect(Object.keys(after.disabled), `round ${round}`).toEqual([]);
    }
    expect(() => statSync(join(ks, 'key-state.json.lock'))).toThrow();
  });

  it('a lock held by another process: waits, then keystore_io naming the lock file; nothing written', async () => {
    const ks = join(dir, 'ks');
    const s = new Signer({ file: fileBackend(ks), stateLock: { waitMs: 200, staleMs: 60_000, pollMs: 10 } });
    await s.generate({ label: 'k', scheme: 'ed25519', backend: 'file' });
    writeFileSync(join(ks, 'key-state.json.lock'), '{"pid":1}\n');
    const e = await s.disable('k').catch((x) => x);
    expect(e).toBeInstanceOf(KeyError);
    expect((e as KeyError).code).toBe('keystore_io');
    expect((e as KeyError).message).toContain('key-state.json.lock');
    expect((await s.describe('k')).disabled).toBe(false);
    // The holder lets go: the next change goes through.
    rmSync(join(ks, 'key-state.json.lock'));
    await s.disable('k');
    expect((await s.describe('k')).disabled).toBe(true);
  });

  it('a lock left behind by a process that died (older than staleMs) is broken', async () => {
    const ks = join(dir, 'ks');
    const s = new Signer({ file: fileBackend(ks), stateLock: { waitMs: 5_000, staleMs: 1_000, pollMs: 10 } });
    await s.generate({ label: 'k', scheme: 'ed25519', backend: 'file' });
    const lock = join(ks, 'key-state.json.lock');
    writeFileSync(lock, '{"pid":1}\n');
    const old = new Date(Date.now() - 5_000);
    utimesSync(lock, old, old);
    await s.disable('k');
    expect((await s.describe('k')).disabled).toBe(true);
    expect(() => statSync(lock)).toThrow();
  });
});

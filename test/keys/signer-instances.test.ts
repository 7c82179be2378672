/**
 * Several Signer instances over one keystore (the service and the CLI, or two
 * service instances): label mutations are serialised, and a key deleted or
 * replaced by another instance is never used from a stale cache.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KeyError } from '../../src/keys/backend.js';
import { FileBackend } from '../../src/keys/file-backend.js';
import { verifySignature } from '../../src/keys/schemes.js';
import { Signer } from '../../src/keys/signer.js';

let dir: string;
const open = () =>
  new Signer({
    file: new FileBackend({
      dir: join(dir, 'ks'),
      passphrase: () => 'instances',
      scrypt: { N: 2 ** 14, r: 8, p: 1 },
    }),
  });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const msg = new Uint8Array(32).fill(3);

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if (e instanceof KeyError) return e.code;
    throw e;
  }
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cs-instances-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('one Signer, concurrent mutations of one label', () => {
  it('two concurrent generates of the same label: one key, one key_exists', async () => {
    const s = open();
    const results = await Promise.all([
      codeOf(s.generate({ label: 'same', scheme: 'ed25519', backend: 'file' })),
      codeOf(s.generate({ label: 'same', scheme: 'ecdsa-p256', backend: 'file' })),
    ]);
    expect(results.sort()).toEqual(['key_exists', 'ok']);
    expect((await s.list()).map((k) => k.label)).toEqual(['same']);
  });
});

describe('two Signers over one keystore', () => {
  it('a key deleted by the other instance stops signing here within ~1 s', async () => {
    const a = open();
    const b = open();
    await a.generate({ label: 'shared', scheme: 'ed25519', backend: 'file' });
    expect(await codeOf(a.sign('shared', msg))).toBe('ok');
    await b.delete('shared');
    await sleep(1100);
    expect(await codeOf(a.sign('shared', msg))).toBe('key_not_found');
  });

  it('a key deleted and re-created under the same label by the other instance: the new key signs, never the old', async () => {
    const a = open();
    const b = open();
    const old = await a.generate({ label: 'rotated', scheme: 'ed25519', backend: 'file' });
    await a.sign('rotated', msg);
    await b.delete('rotated');
    const fresh = await b.generate({ label: 'rotated', scheme: 'ed25519', backend: 'file' });
    expect(fresh.fingerprint).not.toBe(old.fingerprint);
    await sleep(1100);
    const r = await a.sign('rotated', msg);
    expect(r.signature.signedBy).toBe(fresh.fingerprint);
    expect(verifySignature('ed25519', fresh.publicKeySpki, msg, r.bytes)).toBe(true);
    expect(verifySignature('ed25519', old.publicKeySpki, msg, r.bytes)).toBe(false);
  });

  it('a disable by the other instance takes effect here within ~1 s, and so does the enable', async () => {
    const a = open();
    const b = open();
    await a.generate({ label: 'flag', scheme: 'ecdsa-p256', backend: 'file' });
    await a.sign('flag', msg);
    await b.disable('flag', 'incident');
    await sleep(1100);
    expect(await codeOf(a.sign('flag', msg))).toBe('key_disabled');
    expect((await a.describe('flag')).disabled).toBe(true);
    await b.enable('flag');
    await sleep(1100);
    expect(await codeOf(a.sign('flag', msg))).toBe('ok');
  });
});

describe('what the signer agrees to sign', () => {
  it('only a 32-byte hash or a 34-byte 1220… multihash; anything else is invalid_message', async () => {
    const s = open();
    await s.generate({ label: 'strict', scheme: 'ed25519', backend: 'file' });
    const multihash = new Uint8Array(34);
    multihash.set([0x12, 0x20]);
    expect(await codeOf(s.sign('strict', new Uint8Array(32)))).toBe('ok');
    expect(await codeOf(s.sign('strict', multihash))).toBe('ok');
    for (const bad of [0, 1, 31, 33, 34, 35, 64, 1024]) {
      const m = new Uint8Array(bad).fill(0xab);
      expect(await codeOf(s.sign('strict', m)), `${bad} bytes`).toBe('invalid_message');
    }
  });
});

/**
 * Cold keys through the signer contract: the offline backend holds public
 * keys only (one JSON file per label, no secret), registered with
 * `importPublicKey`; describe/list show them with the fingerprint every other
 * backend computes for the same public key (file keystore here; a SoftHSM2
 * token when installed); `sign` returns exactly the bytes the air-gap source
 * hands back for that message, or fails with `awaiting_offline_signature`,
 * after the same message and disabled/deleted checks as any key.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fingerprint } from '../../src/hashing/canton-hash.js';
import { KeyError } from '../../src/keys/backend.js';
import { FileBackend } from '../../src/keys/file-backend.js';
import {
  isAwaitingOfflineSignature,
  OFFLINE_KEY_FORMAT,
  OfflineBackend,
  type OfflineSignatureSource,
} from '../../src/keys/offline-backend.js';
import { Pkcs11Backend } from '../../src/keys/pkcs11-backend.js';
import { KEY_SCHEMES, type KeyScheme } from '../../src/keys/schemes.js';
import { Signer } from '../../src/keys/signer.js';
import { createSoftHsmToken, requireSoftHsm } from '../support/softhsm.js';

const PASSPHRASE = 'offline backend test passphrase';
let dir: string;
let online: Signer;
let offline: OfflineBackend;
/** The "offline machine": a separate file keystore whose keys are the cold keys. */
let cold: Signer;

const fileBackend = (d: string) =>
  new FileBackend({ dir: d, passphrase: () => PASSPHRASE, scrypt: { N: 2 ** 14, r: 8, p: 1 } });

function makeOnline(): Signer {
  offline = new OfflineBackend({ dir: join(dir, 'online', 'offline') });
  return new Signer({ file: fileBackend(join(dir, 'online')), offline });
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if (e instanceof KeyError) return e.code;
    throw e;
  }
}

/** Canton's fingerprint computed independently: SHA-256 multihash of purpose 12 ‖ key bytes. */
function expectedFingerprint(scheme: KeyScheme, spki: Uint8Array): string {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(12);
  const keyBytes = scheme === 'ed25519' ? spki.subarray(spki.length - 32) : spki;
  return `1220${createHash('sha256').update(p).update(keyBytes).digest('hex')}`;
}

/** A source holding signatures per (fingerprint, message), as the air-gap import would. */
class MapSource implements OfflineSignatureSource {
  readonly asked: { label: string; fingerprint: string; message: string }[] = [];
  private readonly sigs = new Map<string, Uint8Array>();
  put(fp: string, message: Uint8Array, sig: Uint8Array): void {
    this.sigs.set(`${fp}:${Buffer.from(message).toString('hex')}`, sig);
  }
  async signatureFor(key: { label: string; fingerprint: string }, message: Uint8Array) {
    this.asked.push({ ...key, message: Buffer.from(message).toString('hex') });
    return this.sigs.get(`${key.fingerprint}:${Buffer.from(message).toString('hex')}`);
  }
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cs-offline-'));
  online = makeOnline();
  cold = new Signer({ file: fileBackend(join(dir, 'cold')) });
});
afterEach(async () => {
  await online.close();
  await cold.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('registering cold keys', () => {
  it.each(KEY_SCHEMES)(
    '%s: the imported public key describes as backend offline, with the fingerprint the file backend computes',
    async (scheme) => {
      const c = await cold.generate({ label: 'k', scheme, backend: 'file' });
      const d = await online.importPublicKey(`cold-${scheme}`, scheme, c.publicKeySpki);
      expect(d).toMatchObject({
        label: `cold-${scheme}`,
        backend: 'offline',
        scheme,
        keySpec: c.keySpec,
        signingAlgorithmSpec: c.signingAlgorithmSpec,
        signatureFormat: c.signatureFormat,
        fingerprint: c.fingerprint,
        disabled: false,
      });
      expect(Buffer.from(d.publicKeySpki).equals(Buffer.from(c.publicKeySpki))).toBe(true);
      expect(Buffer.from(d.publicKeyRaw).equals(Buffer.from(c.publicKeyRaw))).toBe(true);
      expect(d.fingerprint).toBe(expectedFingerprint(scheme, c.publicKeySpki));
      // A fresh signer (another process) reads the same from the file.
      await online.close();
      online = makeOnline();
      const again = await online.describe(`cold-${scheme}`, { partyHint: 'alice' });
      expect(again).toMatchObject({ backend: 'offline', fingerprint: c.fingerprint });
      expect(again.partyIdPreview).toBe(`alice::${c.fingerprint}`);
      expect(Date.parse(again.createdAt)).not.toBeNaN();
    },
  );

  it('list shows offline keys beside file keys, sorted; capabilities name every scheme', async () => {
    await online.generate({ label: 'hot', scheme: 'ed25519', backend: 'file' });
    const c = await cold.generate({ label: 'c', scheme: 'ecdsa-p256', backend: 'file' });
    await online.importPublicKey('b-cold', 'ecdsa-p256', c.publicKeySpki);
    const all = await online.list();
    expect(all.map((k) => [k.label, k.backend])).toEqual([
      ['b-cold', 'offline'],
      ['hot', 'file'],
    ]);
    expect(await online.capabilities()).toContainEqual({ backend: 'offline', schemes: [...KEY_SCHEMES] });
    expect(online.offline()).toBe(offline);
    expect(online.backend('offline')).toBe(offline);
  });

  it('labels are unique across backends: a file key label, then an offline label, are refused with key_exists', async () => {
    const c = await cold.generate({ label: 'c', scheme: 'ed25519', backend: 'file' });
    await online.generate({ label: 'taken', scheme: 'ed25519', backend: 'file' });
    expect(await codeOf(online.importPublicKey('taken', 'ed25519', c.publicKeySpki))).toBe('key_exists');
    await online.importPublicKey('cold', 'ed25519', c.publicKeySpki);
    expect(await codeOf(online.importPublicKey('cold', 'ed25519', c.publicKeySpki))).toBe('key_exists');
    expect(await codeOf(online.generate({ label: 'cold', scheme: 'ed25519', backend: 'file' }))).toBe(
      'key_exists',
    );
    // The backend alone refuses a duplicate too (two processes racing).
    expect(await codeOf(offline.importPublic('cold', 'ed25519', c.publicKeySpki))).toBe('key_exists');
    expect((await online.describe('taken')).backend).toBe('file');
  });

  it('a public key that is not of the scheme is refused naming the scheme; garbage is refused too', async () => {
    const p256 = await cold.generate({ label: 'p', scheme: 'ecdsa-p256', backend: 'file' });
    const err = await online.importPublicKey('x', 'ed25519', p256.publicKeySpki).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KeyError);
    expect((err as KeyError).code).toBe('invalid_key_material');
    expect((err as KeyError).message).toBe('not an Ed25519 public key: the SPKI holds an ECDSA P-256 key');
    const k1 = await online.importPublicKey('y', 'ecdsa-secp256k1', p256.publicKeySpki).catch((e) => e);
    expect((k1 as KeyError).message).toMatch(/not an ECDSA secp256k1 public key/);
    const junk = await online.importPublicKey('z', 'ecdsa-p256', new Uint8Array(40).fill(7)).catch((e) => e);
    expect((junk as KeyError).code).toBe('invalid_key_material');
    expect((junk as KeyError).message).toContain('not an ECDSA P-256 public key');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({
      type: 'spki',
      format: 'der',
    });
    expect(await codeOf(online.importPublicKey('r', 'ed25519', rsa))).toBe('invalid_key_material');
    expect(await codeOf(online.importPublicKey('bad label!', 'ed25519', p256.publicKeySpki))).toBe(
      'invalid_label',
    );
    expect(await online.list()).toEqual([]);
  });

  it('a compressed EC point is stored in the canonical uncompressed SPKI (the fingerprint Canton knows)', async () => {
    const c = await cold.generate({ label: 'c', scheme: 'ecdsa-p256', backend: 'file' });
    const raw = Buffer.from(c.publicKeyRaw);
    const compressed = Buffer.concat([
      Buffer.from('3039301306072a8648ce3d020106082a8648ce3d030107032200', 'hex'),
      Buffer.from([raw[64]! & 1 ? 3 : 2]),
      raw.subarray(1, 33),
    ]);
    const d = await online.importPublicKey('cold', 'ecdsa-p256', compressed);
    expect(Buffer.from(d.publicKeySpki).equals(Buffer.from(c.publicKeySpki))).toBe(true);
    expect(d.fingerprint).toBe(c.fingerprint);
  });

  it('generate on the offline backend says cold keys are made on the offline machine', async () => {
    const e = await online.generate({ label: 'g', scheme: 'ed25519', backend: 'offline' }).catch((x) => x);
    expect(e).toBeInstanceOf(KeyError);
    expect((e as KeyError).code).toBe('offline_key');
    expect((e as KeyError).message).toContain('canton-signer keys create');
    expect((e as KeyError).message).toContain('import-public');
    expect(await online.list()).toEqual([]);
  });

  it('the files hold the public key only: format, version, no private material', async () => {
    const c = await cold.generate({ label: 'c', scheme: 'ed25519', backend: 'file' });
    await online.importPublicKey('cold', 'ed25519', c.publicKeySpki);
    const folder = join(dir, 'online', 'offline');
    expect(readdirSync(folder)).toEqual(['cold.public.json']);
    const text = readFileSync(join(folder, 'cold.public.json'), 'utf8');
    const f = JSON.parse(text);
    expect(Object.keys(f).sort()).toEqual(
      ['createdAt', 'fingerprint', 'format', 'label', 'publicKeySpki', 'scheme', 'version'].sort(),
    );
    expect(f).toMatchObject({
      format: OFFLINE_KEY_FORMAT,
      version: 1,
      label: 'cold',
      scheme: 'ed25519',
      fingerprint: c.fingerprint,
      publicKeySpki: Buffer.from(c.publicKeySpki).toString('base64'),
    });
    // The cold key's private key (PKCS#8, encrypted at the cold side) appears nowhere here.
    const coldFile = JSON.parse(readFileSync(join(dir, 'cold', 'c.key.json'), 'utf8'));
    expect(text).not.toContain(coldFile.cipher.ciphertext);
    expect(text).not.toMatch(/PRIVATE|cipher|kdf|passphrase/i);
  });

  it('a tampered file is not listed but reported; delete removes the file', async () => {
    const a = await cold.generate({ label: 'a', scheme: 'ed25519', backend: 'file' });
    const b = await cold.generate({ label: 'b', scheme: 'ed25519', backend: 'file' });
    await online.importPublicKey('a', 'ed25519', a.publicKeySpki);
    await online.importPublicKey('b', 'ed25519', b.publicKeySpki);
    const path = join(dir, 'online', 'offline', 'b.public.json');
    const f = JSON.parse(readFileSync(path, 'utf8'));
    f.publicKeySpki = Buffer.from(a.publicKeySpki).toString('base64');
    writeFileSync(path, JSON.stringify(f));
    const fresh = makeOnline();
    expect((await fresh.list()).map((k) => k.label)).toEqual(['a']);
    expect(fresh.keystoreProblems()).toEqual([
      expect.objectContaining({ file: join('offline', 'b.public.json'), code: 'tampered_key_file' }),
    ]);
    await fresh.delete('a');
    expect(readdirSync(join(dir, 'online', 'offline'))).toEqual(['b.public.json']);
    expect(await codeOf(fresh.describe('a'))).toBe('key_not_found');
    await fresh.close();
  });
});

describe('signing with a cold key', () => {
  const hash = new Uint8Array(32).fill(0xab);

  it('without a source, or without a signature for this hash: awaiting_offline_signature', async () => {
    const c = await cold.generate({ label: 'c', scheme: 'ed25519', backend: 'file' });
    await online.importPublicKey('cold', 'ed25519', c.publicKeySpki);
    const e = await online.sign('cold', hash).catch((x: unknown) => x);
    expect(isAwaitingOfflineSignature(e)).toBe(true);
    expect((e as KeyError).message).toContain('cold');
    expect((e as KeyError).message).toContain('air gap');
    expect((e as KeyError).message).toContain('docs/air-gap.md');
    const src = new MapSource();
    src.put(c.fingerprint, new Uint8Array(32).fill(1), new Uint8Array(64).fill(9));
    offline.setSignatureSource(src);
    expect(isAwaitingOfflineSignature(await online.sign('cold', hash).catch((x) => x))).toBe(true);
    expect(src.asked).toEqual([
      { label: 'cold', fingerprint: c.fingerprint, message: Buffer.from(hash).toString('hex') },
    ]);
    expect(isAwaitingOfflineSignature(new KeyError('key_disabled', 'x'))).toBe(false);
    expect(isAwaitingOfflineSignature(new Error('awaiting_offline_signature'))).toBe(false);
  });

  it.each(['ed25519', 'ecdsa-p256'] as const)(
    '%s: the signature made on the offline machine comes back as the Canton signature object, bytes unchanged',
    async (scheme) => {
      const c = await cold.generate({ label: 'c', scheme, backend: 'file' });
      const made = await cold.sign('c', hash);
      await online.importPublicKey('cold', scheme, c.publicKeySpki);
      const src = new MapSource();
      src.put(c.fingerprint, hash, made.bytes);
      offline.setSignatureSource(src);
      const out = await online.sign('cold', hash);
      expect(Buffer.from(out.bytes).equals(Buffer.from(made.bytes))).toBe(true);
      expect(out.signature).toEqual(made.signature);
      expect(out.signatureHex).toBe(made.signatureHex);
      expect(out.key.backend).toBe('offline');
    },
  );

  it('bytes that do not verify are passed through unchanged (verification is the pipeline’s)', async () => {
    const c = await cold.generate({ label: 'c', scheme: 'ed25519', backend: 'file' });
    await online.importPublicKey('cold', 'ed25519', c.publicKeySpki);
    const bogus = new Uint8Array([1, 2, 3, 4, 5]);
    const src = new MapSource();
    src.put(c.fingerprint, hash, bogus);
    offline.setSignatureSource(src);
    const out = await online.sign('cold', hash);
    expect([...out.bytes]).toEqual([1, 2, 3, 4, 5]);
    expect(out.signatureHex).toBe('0102030405');
    expect(out.signature.signedBy).toBe(c.fingerprint);
  });

  it('the same checks as any key first: message shape, disabled, deleted — the source is not asked', async () => {
    const c = await cold.generate({ label: 'c', scheme: 'ed25519', backend: 'file' });
    await online.importPublicKey('cold', 'ed25519', c.publicKeySpki);
    const src = new MapSource();
    src.put(c.fingerprint, hash, new Uint8Array(64));
    offline.setSignatureSource(src);
    expect(await codeOf(online.sign('cold', new Uint8Array(33)))).toBe('invalid_message');
    await online.disable('cold', 'test');
    expect((await online.describe('cold')).disabled).toBe(true);
    expect(await codeOf(online.sign('cold', hash))).toBe('key_disabled');
    await online.enable('cold');
    expect(await codeOf(online.sign('cold', hash))).toBe('ok');
    await online.delete('cold');
    expect(await codeOf(online.sign('cold', hash))).toBe('key_not_found');
    expect(src.asked).toHaveLength(1);
  });
});

const hsmModule = requireSoftHsm();

describe.skipIf(hsmModule === undefined)('a cold key whose public key came from a PKCS#11 token', () => {
  it('has the fingerprint the PKCS#11 backend computes', async () => {
    const token = await createSoftHsmToken({ module: hsmModule });
    const backend = await Pkcs11Backend.open({
      module: token.module,
      token: token.tokenLabel,
      pin: token.pin,
      sessions: 1,
    });
    const hsm = new Signer({ pkcs11: backend, stateDir: join(dir, 'hsm-state') });
    try {
      for (const scheme of ['ed25519', 'ecdsa-p256'] as const) {
        const h = await hsm.generate({ label: `h-${scheme}`, scheme, backend: 'pkcs11' });
        const d = await online.importPublicKey(`cold-${scheme}`, scheme, h.publicKeySpki);
        expect(d.fingerprint).toBe(h.fingerprint);
        expect(d.fingerprint).toBe(fingerprint(h.publicKeySpki));
        expect(Buffer.from(d.publicKeyRaw).equals(Buffer.from(h.publicKeyRaw))).toBe(true);
      }
    } finally {
      await hsm.close();
      await token.cleanup();
    }
  });
});

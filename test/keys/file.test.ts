/**
 * The file keystore: the backend-agnostic conformance suite, then what only
 * the file backend has (docs/keys.md "The file keystore"): the on-disk format
 * (checked against an independent implementation written here), scrypt cost,
 * permissions, passphrase errors, every kind of tampering, exclusive writes,
 * imports and passphrase sources.
 */

import { execFileSync } from 'node:child_process';
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  scryptSync,
} from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ed25519 } from '@noble/curves/ed25519.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { KeyError } from '../../src/keys/backend.js';
import { openSigner } from '../../src/keys/config.js';
import { FileBackend } from '../../src/keys/file-backend.js';
import { getSecret, PASSPHRASE, PKCS11_PIN, secretFromEnv } from '../../src/keys/passphrase.js';
import { pkcs11ConfigFromEnv } from '../../src/keys/pkcs11-backend.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import { Signer } from '../../src/keys/signer.js';
import {
  CANTON,
  cantonFingerprint,
  checkSignature,
  rejection,
  signerConformance,
  topologyHash,
  verifyCanton,
} from './conformance.js';

const SCHEMES: KeyScheme[] = ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1', 'ecdsa-p384'];
const FAST = { N: 2 ** 14, r: 8, p: 1 };
const PASS = `conformance ${randomBytes(9).toString('base64')} é`;

const roots: string[] = [];
function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), `cs-file-${prefix}-`));
  roots.push(d);
  return d;
}
afterAll(() => {
  for (const d of roots) rmSync(d, { recursive: true, force: true });
});

function signerAt(
  dir: string,
  passphrase: string | (() => string) = PASS,
  scrypt: { N: number; r: number; p: number } | 'default' = FAST,
): Signer {
  const pass = typeof passphrase === 'string' ? () => passphrase : passphrase;
  return new Signer({
    file: new FileBackend({ dir, passphrase: pass, ...(scrypt === 'default' ? {} : { scrypt }) }),
  });
}

/** Fails unless the promise rejects with a KeyError of this code; returns the error. */
async function expectCode(p: Promise<unknown>, code: string, what = ''): Promise<KeyError> {
  const e = await rejection(p);
  if (!(e instanceof KeyError))
    throw new Error(
      `${what}: expected KeyError ${code}, got ${(e as Error)?.name}: ${(e as Error)?.message}`,
    );
  expect(e.code, `${what}: ${e.message}`).toBe(code);
  expect(e.message, what).not.toContain(PASS);
  return e;
}

function newKey(scheme: KeyScheme): KeyObject {
  return scheme === 'ed25519'
    ? generateKeyPairSync('ed25519').privateKey
    : generateKeyPairSync('ec', { namedCurve: CANTON[scheme].curve! }).privateKey;
}
const spkiOf = (k: KeyObject): Buffer => createPublicKey(k).export({ type: 'spki', format: 'der' });
const pkcs8Of = (k: KeyObject): Buffer => k.export({ type: 'pkcs8', format: 'der' });

// ---- an independent implementation of the key file format (docs/keys.md) --------------------

interface KeyFileJson {
  format: string;
  version: number;
  label: string;
  scheme: string;
  createdAt: string;
  publicKeySpki: string;
  fingerprint: string;
  kdf: { name: string; N: number; r: number; p: number; salt: string };
  check: string;
  cipher: { name: string; iv: string; tag: string; ciphertext: string };
}
type KeyFileHeader = Omit<KeyFileJson, 'check' | 'cipher'>;

function derive(passphrase: string, h: KeyFileHeader): Buffer {
  const { N, r, p, salt } = h.kdf;
  return scryptSync(passphrase.normalize('NFC'), Buffer.from(salt, 'base64'), 64, {
    N,
    r,
    p,
    maxmem: 512 * 1024 * 1024,
  });
}
const CHECK_MESSAGE = 'canton-signer/key passphrase check';
function aadOf(h: KeyFileHeader): Buffer {
  const { format, version, label, scheme, createdAt, publicKeySpki, fingerprint, kdf } = h;
  return Buffer.from(
    JSON.stringify([
      format,
      version,
      label,
      scheme,
      createdAt,
      publicKeySpki,
      fingerprint,
      kdf.name,
      kdf.N,
      kdf.r,
      kdf.p,
      kdf.salt,
    ]),
  );
}

/** Encrypts `plaintext` under `header` the documented way. */
function seal(header: KeyFileHeader, plaintext: Buffer, passphrase = PASS): KeyFileJson {
  const derived = derive(passphrase, header);
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', derived.subarray(0, 32), iv);
  c.setAAD(aadOf(header));
  const ciphertext = Buffer.concat([c.update(plaintext), c.final()]);
  return {
    ...header,
    check: createHmac('sha256', derived.subarray(32)).update(CHECK_MESSAGE).digest('base64'),
    cipher: {
      name: 'aes-256-gcm',
      iv: iv.toString('base64'),
      tag: c.getAuthTag().toString('base64'),
      ciphertext: ciphertext.toString('base64'),
    },
  };
}

/** Decrypts a key file the documented way (throws when anything does not check). */
function unseal(f: KeyFileJson, passphrase = PASS): Buffer {
  const derived = derive(passphrase, f);
  const check = createHmac('sha256', derived.subarray(32)).update(CHECK_MESSAGE).digest('base64');
  if (check !== f.check) throw new Error('check value differs');
  const d = createDecipheriv('aes-256-gcm', derived.subarray(0, 32), Buffer.from(f.cipher.iv, 'base64'));
  d.setAAD(aadOf(f));
  d.setAuthTag(Buffer.from(f.cipher.tag, 'base64'));
  return Buffer.concat([d.update(Buffer.from(f.cipher.ciphertext, 'base64')), d.final()]);
}

function headerFor(label: string, scheme: KeyScheme, spki: Buffer, N = FAST.N): KeyFileHeader {
  return {
    format: 'canton-signer/key',
    version: 1,
    label,
    scheme,
    createdAt: new Date().toISOString(),
    publicKeySpki: spki.toString('base64'),
    fingerprint: cantonFingerprint(scheme, spki),
    kdf: { name: 'scrypt', N, r: 8, p: 1, salt: randomBytes(16).toString('base64') },
  };
}

const readKeyFile = (dir: string, label: string): KeyFileJson =>
  JSON.parse(readFileSync(join(dir, `${label}.key.json`), 'utf8')) as KeyFileJson;
const writeKeyFile = (dir: string, label: string, content: unknown): void => {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(
    join(dir, `${label}.key.json`),
    typeof content === 'string' ? content : `${JSON.stringify(content, null, 2)}\n`,
    { mode: 0o600 },
  );
};

/** Another base64 character at the middle of the text (so the decoded bytes change). */
function flipB64(s: string): string {
  const i = Math.floor(s.replace(/=+$/, '').length / 2);
  return `${s.slice(0, i)}${s[i] === 'A' ? 'B' : 'A'}${s.slice(i + 1)}`;
}
function flipHex(s: string, i = 20): string {
  return `${s.slice(0, i)}${s[i] === '0' ? '1' : '0'}${s.slice(i + 1)}`;
}
const b64Bytes = (s: string, from: number, to?: number): string =>
  Buffer.from(s, 'base64').subarray(from, to).toString('base64');

// ---------------------------------------------------------------------------------------------

signerConformance('file', async () => {
  const dir = join(tempDir('conformance'), 'keystore');
  const signer = signerAt(dir);
  return {
    signer,
    backend: 'file',
    schemes: SCHEMES,
    reopen: async () => signerAt(dir),
    cleanup: async () => {
      await signer.close();
    },
    secrets: [PASS],
  };
});

describe('file keystore: format', () => {
  it('new files use the default scrypt cost N=2^17, r=8, p=1, and unlock with it', async () => {
    const dir = join(tempDir('default-cost'), 'ks');
    const s = signerAt(dir, PASS, 'default');
    const d = await s.generate({ label: 'slow', scheme: 'ed25519', backend: 'file' });
    const f = readKeyFile(dir, 'slow');
    expect(f.kdf).toEqual({ name: 'scrypt', N: 131072, r: 8, p: 1, salt: expect.any(String) });
    expect(Buffer.from(f.kdf.salt, 'base64').length).toBe(16);
    // A new instance must derive the key again (N = 2^17) to sign.
    const msg = randomBytes(32);
    checkSignature(await signerAt(dir, PASS, 'default').sign('slow', msg), d, msg);
  });

  it('a FileBackend refuses a scrypt cost below 2^14 or not a power of two', () => {
    for (const N of [2 ** 10, 2 ** 13, 3 * 2 ** 14, 2 ** 23]) {
      let err: unknown;
      try {
        new FileBackend({ dir: tempDir('cost'), passphrase: () => PASS, scrypt: { N, r: 8, p: 1 } });
      } catch (e) {
        err = e;
      }
      expect(err, `N=${N}`).toBeInstanceOf(KeyError);
      expect((err as KeyError).code, `N=${N}`).toBe('invalid_key_file');
    }
  });

  it('each file has exactly the documented fields and sizes, and decrypts with an independent implementation', async () => {
    const dir = join(tempDir('format'), 'ks');
    const s = signerAt(dir);
    for (const scheme of SCHEMES) {
      const d = await s.generate({ label: `fmt-${scheme}`, scheme, backend: 'file' });
      const f = readKeyFile(dir, d.label);
      expect(Object.keys(f).sort()).toEqual(
        [
          'format',
          'version',
          'label',
          'scheme',
          'createdAt',
          'publicKeySpki',
          'fingerprint',
          'kdf',
          'check',
          'cipher',
        ].sort(),
      );
      expect(f.format).toBe('canton-signer/key');
      expect(f.version).toBe(1);
      expect(f.label).toBe(d.label);
      expect(f.scheme).toBe(scheme);
      expect(f.createdAt).toBe(d.createdAt);
      expect(Buffer.from(f.publicKeySpki, 'base64').equals(Buffer.from(d.publicKeySpki))).toBe(true);
      expect(f.fingerprint).toBe(cantonFingerprint(scheme, d.publicKeySpki));
      expect(f.kdf).toEqual({ name: 'scrypt', ...FAST, salt: expect.any(String) });
      expect(Buffer.from(f.check, 'base64').length).toBe(32);
      expect(f.cipher.name).toBe('aes-256-gcm');
      expect(Buffer.from(f.cipher.iv, 'base64').length).toBe(12);
      expect(Buffer.from(f.cipher.tag, 'base64').length).toBe(16);
      const pkcs8 = unseal(f);
      const priv = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
      expect(spkiOf(priv).equals(Buffer.from(d.publicKeySpki))).toBe(true);
      // Nothing of the private key is in the file in clear.
      const raw = priv.export({ format: 'jwk' }).d!;
      expect(readFileSync(join(dir, `${d.label}.key.json`), 'utf8')).not.toContain(raw);
      expect(readFileSync(join(dir, `${d.label}.key.json`))).not.toContain(pkcs8);
    }
  });

  it('a key file written by an independent implementation of the format is listed, described and signs', async () => {
    const dir = join(tempDir('indep'), 'ks');
    for (const scheme of SCHEMES) {
      const k = newKey(scheme);
      writeKeyFile(dir, `indep-${scheme}`, seal(headerFor(`indep-${scheme}`, scheme, spkiOf(k)), pkcs8Of(k)));
    }
    const s = signerAt(dir);
    expect((await s.list()).map((k) => k.label)).toEqual(SCHEMES.map((x) => `indep-${x}`).sort());
    for (const scheme of SCHEMES) {
      const d = await s.describe(`indep-${scheme}`);
      expect(d.scheme).toBe(scheme);
      const msg = topologyHash();
      checkSignature(await s.sign(d.label, msg), d, msg);
    }
  });
});

describe('file keystore: permissions', () => {
  it('key files are 0600, the folder 0700, the state file 0600', async () => {
    const dir = join(tempDir('perm'), 'new', 'ks');
    const s = signerAt(dir);
    await s.generate({ label: 'perm', scheme: 'ed25519', backend: 'file' });
    await s.import({ label: 'perm-imported', material: pkcs8Of(newKey('ecdsa-p256')) });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'perm.key.json')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'perm-imported.key.json')).mode & 0o777).toBe(0o600);
    await s.disable('perm');
    expect(statSync(join(dir, 'key-state.json')).mode & 0o777).toBe(0o600);
  });

  it('an existing folder that is 0755 (or 0777) is tightened to 0700 when a key is written', async () => {
    for (const mode of [0o755, 0o777]) {
      const dir = join(tempDir('perm-open'), 'ks');
      mkdirSync(dir);
      chmodSync(dir, mode);
      expect(statSync(dir).mode & 0o777).toBe(mode);
      await signerAt(dir).generate({ label: 'tight', scheme: 'ed25519', backend: 'file' });
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(statSync(join(dir, 'tight.key.json')).mode & 0o777).toBe(0o600);
    }
  });
});

describe('file keystore: passphrase errors', () => {
  it('a wrong passphrase → wrong_passphrase (no passphrase in the message); the right one still works afterwards', async () => {
    const dir = join(tempDir('wrong'), 'ks');
    const ds = [];
    for (const scheme of SCHEMES)
      ds.push(await signerAt(dir).generate({ label: `wp-${scheme}`, scheme, backend: 'file' }));
    const wrong = 'not the passphrase at all';
    let calls = 0;
    const flaky = signerAt(dir, () => (calls++ < SCHEMES.length ? wrong : PASS));
    for (const d of ds) {
      const e = await expectCode(flaky.sign(d.label, randomBytes(32)), 'wrong_passphrase', d.scheme);
      expect(e.message).not.toContain(wrong);
      expect(`${e.stack}`).not.toContain(wrong);
    }
    // A failed unlock is not cached: the next attempt asks again and succeeds.
    for (const d of ds) {
      const msg = randomBytes(32);
      checkSignature(await flaky.sign(d.label, msg), d, msg);
    }
  });

  it('the passphrase is NFC-normalised: composed and decomposed forms unlock the same key', async () => {
    const dir = join(tempDir('nfc'), 'ks');
    const d = await signerAt(dir, 'caf\u0065\u0301 crème').generate({
      label: 'nfc',
      scheme: 'ed25519',
      backend: 'file',
    });
    const msg = randomBytes(32);
    checkSignature(await signerAt(dir, 'caf\u00e9 cr\u00e8me').sign('nfc', msg), d, msg);
  });

  it('an empty passphrase → no_passphrase naming the variables; nothing is written', async () => {
    const dir = join(tempDir('nopass'), 'ks');
    const e = await expectCode(
      signerAt(dir, '').generate({ label: 'np', scheme: 'ed25519', backend: 'file' }),
      'no_passphrase',
    );
    expect(e.message).toContain('CANTON_SIGNER_PASSPHRASE');
    expect(e.message).toContain('CANTON_SIGNER_PASSPHRASE_FILE');
    expect(readdirSync(dir).filter((n) => n !== 'key-state.json')).toEqual([]);
  });

  it('list and describe do not need the passphrase', async () => {
    const dir = join(tempDir('nopass-read'), 'ks');
    await signerAt(dir).generate({ label: 'pub', scheme: 'ecdsa-p256', backend: 'file' });
    let calls = 0;
    const s = signerAt(dir, () => {
      calls++;
      return '';
    });
    expect((await s.list()).map((k) => k.label)).toEqual(['pub']);
    expect((await s.describe('pub')).scheme).toBe('ecdsa-p256');
    expect(calls).toBe(0);
  });
});

describe('file keystore: tampering', () => {
  const templates = new Map<KeyScheme, { dir: string; file: KeyFileJson; other: Buffer }>();
  let caseNo = 0;

  beforeAll(async () => {
    for (const scheme of SCHEMES) {
      const dir = join(tempDir('tamper-template'), 'ks');
      await signerAt(dir).generate({ label: 'victim', scheme, backend: 'file' });
      templates.set(scheme, { dir, file: readKeyFile(dir, 'victim'), other: spkiOf(newKey(scheme)) });
    }
  });

  /** Writes `content` as victim.key.json (or under `fileLabel`) in a fresh keystore; returns a fresh Signer's sign result code. */
  async function signCode(content: unknown, fileLabel = 'victim', signLabel = 'victim'): Promise<string> {
    const dir = join(tempDir('tamper'), `case-${caseNo++}`);
    writeKeyFile(dir, fileLabel, content);
    const s = signerAt(dir);
    try {
      await s.sign(signLabel, randomBytes(32));
      return 'ok';
    } catch (e) {
      if (e instanceof KeyError) {
        expect(e.message).not.toContain(PASS);
        return e.code;
      }
      return `not a KeyError: ${(e as Error).name}: ${(e as Error).message}`;
    }
  }

  type Case = { field: string; change: string; code: string; apply: (f: KeyFileJson, o: Buffer) => unknown };
  const otherScheme = (s: string): string => (s === 'ed25519' ? 'ecdsa-p256' : 'ed25519');
  const cases: Case[] = [
    { field: '(none)', change: 'untouched copy', code: 'ok', apply: (f) => f },
    {
      field: 'format',
      change: 'other value',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, format: 'x/key' }),
    },
    { field: 'version', change: '2', code: 'invalid_key_file', apply: (f) => ({ ...f, version: 2 }) },
    {
      field: 'version',
      change: '"1" (string)',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, version: '1' }),
    },
    {
      field: 'label',
      change: 'other label',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, label: 'victin' }),
    },
    {
      field: 'scheme',
      change: 'other scheme',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, scheme: otherScheme(f.scheme) }),
    },
    {
      field: 'scheme',
      change: 'unknown scheme',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, scheme: 'rsa-2048' }),
    },
    {
      field: 'createdAt',
      change: '1 ms later',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, createdAt: new Date(Date.parse(f.createdAt) + 1).toISOString() }),
    },
    {
      field: 'publicKeySpki',
      change: 'one base64 character',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, publicKeySpki: flipB64(f.publicKeySpki) }),
    },
    {
      field: 'publicKeySpki',
      change: "another key's SPKI",
      code: 'tampered_key_file',
      apply: (f, o) => ({ ...f, publicKeySpki: o.toString('base64') }),
    },
    {
      field: 'publicKeySpki + fingerprint',
      change: "another key's SPKI and its fingerprint",
      code: 'tampered_key_file',
      apply: (f, o) => ({
        ...f,
        publicKeySpki: o.toString('base64'),
        fingerprint: cantonFingerprint(f.scheme as KeyScheme, o),
      }),
    },
    {
      field: 'fingerprint',
      change: 'one hex character',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, fingerprint: flipHex(f.fingerprint) }),
    },
    {
      field: 'fingerprint',
      change: 'upper case',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, fingerprint: f.fingerprint.toUpperCase() }),
    },
    {
      field: 'kdf.name',
      change: 'argon2id',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, name: 'argon2id' } }),
    },
    // scrypt's parameters and salt decide the check key: a change cannot be told apart from a wrong passphrase.
    {
      field: 'kdf.N',
      change: '2^15 (in range)',
      code: 'wrong_passphrase',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, N: 2 ** 15 } }),
    },
    {
      field: 'kdf.N',
      change: '2^13 (below the minimum)',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, N: 2 ** 13 } }),
    },
    {
      field: 'kdf.N',
      change: '3·2^14 (not a power of two)',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, N: 3 * 2 ** 14 } }),
    },
    {
      field: 'kdf.N',
      change: '2^30',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, N: 2 ** 30 } }),
    },
    {
      field: 'kdf.N',
      change: '16384.5',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, N: 16384.5 } }),
    },
    {
      field: 'kdf.r',
      change: '9',
      code: 'wrong_passphrase',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, r: 9 } }),
    },
    {
      field: 'kdf.r',
      change: '0',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, r: 0 } }),
    },
    {
      field: 'kdf.p',
      change: '2',
      code: 'wrong_passphrase',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, p: 2 } }),
    },
    {
      field: 'kdf.p',
      change: '17',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, p: 17 } }),
    },
    {
      field: 'kdf.salt',
      change: 'one base64 character',
      code: 'wrong_passphrase',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, salt: flipB64(f.kdf.salt) } }),
    },
    {
      field: 'kdf.salt',
      change: 'not base64',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, salt: 'not base64!' } }),
    },
    // The check value is how a wrong passphrase is recognised: changing it reads as one.
    {
      field: 'check',
      change: 'one base64 character',
      code: 'wrong_passphrase',
      apply: (f) => ({ ...f, check: flipB64(f.check) }),
    },
    {
      field: 'check',
      change: 'truncated to 16 bytes',
      code: 'wrong_passphrase',
      apply: (f) => ({ ...f, check: b64Bytes(f.check, 0, 16) }),
    },
    {
      field: 'cipher.name',
      change: 'aes-128-gcm',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, name: 'aes-128-gcm' } }),
    },
    {
      field: 'cipher.iv',
      change: 'one base64 character',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, iv: flipB64(f.cipher.iv) } }),
    },
    {
      field: 'cipher.iv',
      change: 'empty',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, iv: '' } }),
    },
    {
      field: 'cipher.tag',
      change: 'one base64 character',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, tag: flipB64(f.cipher.tag) } }),
    },
    {
      field: 'cipher.tag',
      change: 'empty',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, tag: '' } }),
    },
    // GCM tags shorter than 16 bytes weaken authentication (a 4-byte tag is a 2^-32 forgery bound):
    // a file whose tag was cut short was changed and must not be accepted.
    {
      field: 'cipher.tag',
      change: 'truncated to its first 12 bytes',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, tag: b64Bytes(f.cipher.tag, 0, 12) } }),
    },
    {
      field: 'cipher.tag',
      change: 'truncated to its first 4 bytes',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, tag: b64Bytes(f.cipher.tag, 0, 4) } }),
    },
    {
      field: 'cipher.ciphertext',
      change: 'one base64 character',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, ciphertext: flipB64(f.cipher.ciphertext) } }),
    },
    {
      field: 'cipher.ciphertext',
      change: 'last byte dropped',
      code: 'tampered_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, ciphertext: b64Bytes(f.cipher.ciphertext, 0, -1) } }),
    },
    {
      field: '(root)',
      change: 'unknown extra field',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, comment: 'hi' }),
    },
    {
      field: 'kdf',
      change: 'unknown extra field',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, kdf: { ...f.kdf, dkLen: 64 } }),
    },
    {
      field: 'cipher',
      change: 'unknown extra field',
      code: 'invalid_key_file',
      apply: (f) => ({ ...f, cipher: { ...f.cipher, aad: '' } }),
    },
    { field: 'check', change: 'missing', code: 'invalid_key_file', apply: ({ check: _, ...rest }) => rest },
    {
      field: '(root)',
      change: 'not JSON',
      code: 'invalid_key_file',
      apply: (f) => JSON.stringify(f).slice(0, -1),
    },
    { field: '(root)', change: 'a JSON array', code: 'invalid_key_file', apply: (f) => [f] },
    { field: '(root)', change: 'null', code: 'invalid_key_file', apply: () => 'null' },
  ];

  describe.each(SCHEMES)('%s key file', (scheme) => {
    it.for(cases)('$field: $change → $code', async (c) => {
      const t = templates.get(scheme)!;
      expect(await signCode(c.apply(structuredClone(t.file), t.other))).toBe(c.code);
    });

    it('label changed and the file renamed to match → tampered_key_file', async () => {
      const t = templates.get(scheme)!;
      expect(await signCode({ ...t.file, label: 'renamed' }, 'renamed', 'renamed')).toBe('tampered_key_file');
    });

    it('kdf.N = 2^30 (and 2^23, 2^40) is refused before any key derivation: fast, passphrase never asked', async () => {
      const t = templates.get(scheme)!;
      for (const N of [2 ** 30, 2 ** 23, 2 ** 40]) {
        const dir = join(tempDir('bign'), 'ks');
        writeKeyFile(dir, 'victim', { ...t.file, kdf: { ...t.file.kdf, N } });
        let asked = 0;
        const s = signerAt(dir, () => {
          asked++;
          return PASS;
        });
        const t0 = performance.now();
        await expectCode(s.sign('victim', randomBytes(32)), 'invalid_key_file', `N=${N}`);
        expect(performance.now() - t0, `N=${N}`).toBeLessThan(250);
        expect(asked, `N=${N}`).toBe(0);
      }
    });

    it("the file decrypts (right passphrase, intact AAD) to another key's private key → public_key_mismatch", async () => {
      const t = templates.get(scheme)!;
      const { check: _c, cipher: _x, ...header } = t.file;
      // Same scheme, another key.
      expect(await signCode(seal(header, pkcs8Of(newKey(scheme))))).toBe('public_key_mismatch');
      // Another scheme's key.
      const foreign = scheme === 'ecdsa-p384' ? 'ecdsa-p256' : 'ecdsa-p384';
      expect(await signCode(seal(header, pkcs8Of(newKey(foreign))))).toBe('public_key_mismatch');
      // Control: the same construction with the right private key signs.
      const own = createPrivateKey({ key: unseal(t.file), format: 'der', type: 'pkcs8' });
      expect(await signCode(seal(header, pkcs8Of(own)))).toBe('ok');
    });

    it('the file decrypts (right passphrase, intact AAD) to bytes that are not a PKCS#8 key → a KeyError', async () => {
      const t = templates.get(scheme)!;
      const { check: _c, cipher: _x, ...header } = t.file;
      const code = await signCode(seal(header, randomBytes(48)));
      expect(code).toBeOneOf(['invalid_key_file', 'tampered_key_file', 'public_key_mismatch']);
    });

    it('describe refuses a file whose scheme contradicts its public key (no description with a wrong key spec)', async () => {
      const t = templates.get(scheme)!;
      const dir = join(tempDir('scheme-lie'), 'ks');
      writeKeyFile(dir, 'victim', { ...t.file, scheme: otherScheme(scheme) });
      const outcome = await signerAt(dir)
        .describe('victim')
        .then(
          (d) => `described as ${d.keySpec} with a ${d.publicKeyRaw.length}-byte publicKeyRaw`,
          (e: unknown) => (e instanceof KeyError ? e.code : `not a KeyError: ${e}`),
        );
      expect(outcome).toBeOneOf(['tampered_key_file', 'invalid_key_file']);
    });
  });
});

describe('file keystore: concurrent writers', () => {
  it('two Signers generate the same label at once: exactly one succeeds, the other gets key_exists, no temp files', async () => {
    const dir = join(tempDir('race'), 'ks');
    const a = signerAt(dir);
    const b = signerAt(dir);
    const c = signerAt(dir);
    for (let i = 0; i < 6; i++) {
      const label = `race-${i}`;
      const schemeA = SCHEMES[i % 4]!;
      const schemeB = SCHEMES[(i + 1) % 4]!;
      const racers = i % 2 === 0 ? [a, b] : [a, b, c];
      const results = await Promise.allSettled(
        racers.map((s, j) => s.generate({ label, scheme: j === 0 ? schemeA : schemeB, backend: 'file' })),
      );
      const ok = results.filter((r) => r.status === 'fulfilled');
      const failed = results.filter((r) => r.status === 'rejected');
      expect(ok.length, label).toBe(1);
      for (const f of failed) {
        expect(f.reason, label).toBeInstanceOf(KeyError);
        expect((f.reason as KeyError).code, label).toBe('key_exists');
      }
      const winner = ok[0]!.value;
      // Every instance now signs with the winner's key.
      for (const s of [a, b, c]) {
        const msg = randomBytes(32);
        const out = await s.sign(label, msg);
        expect(out.signature.signedBy, label).toBe(winner.fingerprint);
        expect(verifyCanton(winner.scheme, winner.publicKeySpki, msg, out.bytes), label).toBe(true);
      }
    }
    const names = readdirSync(dir);
    // Nothing but the key files and the keystore's passphrase marker.
    expect(names.filter((n) => n.endsWith('.tmp') || (n.startsWith('.') && n !== '.keystore.json'))).toEqual(
      [],
    );
    expect(names.filter((n) => n.endsWith('.key.json')).sort()).toEqual(
      Array.from({ length: 6 }, (_, i) => `race-${i}.key.json`),
    );
  });

  it('a generate that loses the race leaves the winner intact on disk', async () => {
    const dir = join(tempDir('race2'), 'ks');
    const first = await signerAt(dir).generate({ label: 'taken', scheme: 'ed25519', backend: 'file' });
    const before = readFileSync(join(dir, 'taken.key.json'), 'utf8');
    // A second instance that never looked at the folder before.
    await expectCode(
      signerAt(dir).generate({ label: 'taken', scheme: 'ecdsa-p256', backend: 'file' }),
      'key_exists',
    );
    await expectCode(
      signerAt(dir).import({ label: 'taken', material: pkcs8Of(newKey('ed25519')) }),
      'key_exists',
    );
    expect(readFileSync(join(dir, 'taken.key.json'), 'utf8')).toBe(before);
    expect((await signerAt(dir).describe('taken')).fingerprint).toBe(first.fingerprint);
    expect(readdirSync(dir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });
});

describe('file keystore: imports', () => {
  const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex'); // RFC 8410

  it('an Ed25519 seed in hex: RFC 8032 test vector 1 (public key and signature of the empty message)', async () => {
    const dir = join(tempDir('seed'), 'ks');
    const s = signerAt(dir);
    const d = await s.import({
      label: 'rfc8032',
      material: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
    });
    expect(d.scheme).toBe('ed25519');
    expect(Buffer.from(d.publicKeyRaw).toString('hex')).toBe(
      'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    );
    // The contract signs Canton hashes only, so the RFC's empty message goes to the backend directly.
    const backend = new FileBackend({ dir, passphrase: () => PASS, scrypt: FAST });
    const key = (await backend.find('rfc8032'))!;
    const sig = await backend.sign(key, new Uint8Array(0));
    expect(Buffer.from(sig).toString('hex')).toBe(
      'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
    );
    await expect(s.sign('rfc8032', new Uint8Array(0))).rejects.toMatchObject({ code: 'invalid_message' });
  });

  it("an Ed25519 seed in hex (any case, surrounding whitespace, as text or bytes): the public key is node:crypto's", async () => {
    const dir = join(tempDir('seed2'), 'ks');
    const s = signerAt(dir);
    const forms = [
      (h: string) => h,
      (h: string) => h.toUpperCase(),
      (h: string) => `  ${h}\n`,
      (h: string) => new TextEncoder().encode(`${h}\n`),
    ];
    for (const [i, form] of forms.entries()) {
      const seed = randomBytes(32);
      const node = createPrivateKey({
        key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]),
        format: 'der',
        type: 'pkcs8',
      });
      const d = await s.import({ label: `seed-${i}`, material: form(seed.toString('hex')) });
      expect(d.scheme).toBe('ed25519');
      expect(Buffer.from(d.publicKeySpki).equals(spkiOf(node))).toBe(true);
      expect(Buffer.from(d.publicKeyRaw).equals(Buffer.from(ed25519.getPublicKey(seed)))).toBe(true);
      const msg = randomBytes(32);
      checkSignature(await s.sign(d.label, msg), d, msg);
    }
  });

  it('PKCS#8 PEM (text and bytes) and DER for every scheme: same public key, signs', async () => {
    const dir = join(tempDir('pkcs8'), 'ks');
    const s = signerAt(dir);
    for (const scheme of SCHEMES) {
      const k = newKey(scheme);
      const pem = k.export({ type: 'pkcs8', format: 'pem' }) as string;
      const forms: [string, string | Uint8Array][] = [
        ['pem', pem],
        ['pem-bytes', new TextEncoder().encode(pem)],
        ['der', new Uint8Array(pkcs8Of(k))],
      ];
      for (const [form, material] of forms) {
        const d = await s.import({ label: `imp-${scheme}-${form}`, material });
        expect(d.scheme, `${scheme} ${form}`).toBe(scheme);
        expect(d.backend).toBe('file');
        expect(Buffer.from(d.publicKeySpki).equals(spkiOf(k)), `${scheme} ${form}`).toBe(true);
        expect(d.fingerprint).toBe(cantonFingerprint(scheme, spkiOf(k)));
        const msg = topologyHash();
        checkSignature(await s.sign(d.label, msg), d, msg);
      }
    }
    // A new instance unlocks the imported files.
    const again = signerAt(dir);
    const msg = randomBytes(32);
    const d = await again.describe('imp-ecdsa-secp256k1-der');
    checkSignature(await again.sign(d.label, msg), d, msg);
  });

  it('encrypted PKCS#8 is refused (invalid_key_material); the PEM form with a message saying so', async () => {
    const dir = join(tempDir('enc'), 'ks');
    const s = signerAt(dir);
    const k = newKey('ed25519');
    const pem = k.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'pkcs8 pass' });
    for (const material of [pem as string, new TextEncoder().encode(pem as string)]) {
      const e = await expectCode(s.import({ label: 'enc', material }), 'invalid_key_material');
      expect(e.message).toMatch(/encrypted/i);
      expect(e.message).toMatch(/decrypt/i);
    }
    const der = k.export({ type: 'pkcs8', format: 'der', cipher: 'aes-256-cbc', passphrase: 'pkcs8 pass' });
    await expectCode(s.import({ label: 'enc', material: new Uint8Array(der) }), 'invalid_key_material');
    expect(await s.list()).toEqual([]);
  });

  it('RSA, Ed448, X25519 and other EC curves → unsupported_scheme', async () => {
    const dir = join(tempDir('unsupported'), 'ks');
    const s = signerAt(dir);
    const keys: [string, KeyObject][] = [
      ['rsa', generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey],
      ['ed448', generateKeyPairSync('ed448').privateKey],
      ['x25519', generateKeyPairSync('x25519').privateKey],
      ['secp224r1', generateKeyPairSync('ec', { namedCurve: 'secp224r1' }).privateKey],
      ['brainpoolP256r1', generateKeyPairSync('ec', { namedCurve: 'brainpoolP256r1' }).privateKey],
    ];
    for (const [what, k] of keys) {
      await expectCode(
        s.import({ label: 'unsupported', material: k.export({ type: 'pkcs8', format: 'pem' }) as string }),
        'unsupported_scheme',
        `${what} PEM`,
      );
      await expectCode(
        s.import({ label: 'unsupported', material: new Uint8Array(pkcs8Of(k)) }),
        'unsupported_scheme',
        `${what} DER`,
      );
    }
    expect(await s.list()).toEqual([]);
  });

  it('garbage → invalid_key_material, and nothing is written', async () => {
    const dir = join(tempDir('garbage'), 'ks');
    const s = signerAt(dir);
    const ec = newKey('ecdsa-p256');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey;
    const garbage: [string, string | Uint8Array][] = [
      ['empty string', ''],
      ['blank', '  \n'],
      ['words', 'hello world'],
      ['63 hex characters', 'a'.repeat(63)],
      ['66 hex characters', 'a'.repeat(66)],
      ['seed with 0x prefix', `0x${'1'.repeat(64)}`],
      ['empty bytes', new Uint8Array(0)],
      ['random bytes', new Uint8Array(randomBytes(100))],
      ['32 raw seed bytes', new Uint8Array(Buffer.concat([Buffer.from([0x80]), randomBytes(31)]))],
      ['truncated DER', new Uint8Array(pkcs8Of(ec).subarray(0, 40))],
      ['PEM with a garbage body', '-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n'],
      ['a public key PEM', createPublicKey(ec).export({ type: 'spki', format: 'pem' }) as string],
      ['SEC1 EC PRIVATE KEY PEM', ec.export({ type: 'sec1', format: 'pem' }) as string],
      ['PKCS#1 RSA PRIVATE KEY PEM', rsa.export({ type: 'pkcs1', format: 'pem' }) as string],
    ];
    for (const [what, material] of garbage)
      await expectCode(s.import({ label: 'junk', material }), 'invalid_key_material', what);
    expect(await s.list()).toEqual([]);
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
  });

  it('import into a taken or invalid label → key_exists / invalid_label', async () => {
    const dir = join(tempDir('imp-label'), 'ks');
    const s = signerAt(dir);
    const d = await s.generate({ label: 'held', scheme: 'ecdsa-p256', backend: 'file' });
    await expectCode(s.import({ label: 'held', material: pkcs8Of(newKey('ecdsa-p256')) }), 'key_exists');
    await expectCode(
      s.import({ label: '../held', material: pkcs8Of(newKey('ecdsa-p256')) }),
      'invalid_label',
    );
    expect((await s.describe('held')).fingerprint).toBe(d.fingerprint);
  });
});

describe('file keystore: passphrase sources (src/keys/passphrase.ts)', () => {
  const VARS = [
    'CANTON_SIGNER_PASSPHRASE',
    'CANTON_SIGNER_PASSPHRASE_FILE',
    'CANTON_SIGNER_PKCS11_PIN',
    'CANTON_SIGNER_PKCS11_PIN_FILE',
  ];
  const clearEnv = () => {
    for (const v of VARS) vi.stubEnv(v, undefined);
  };
  afterEach(() => {
    vi.unstubAllEnvs();
  });
  const fileWith = (text: string): string => {
    const p = join(tempDir('passfile'), 'passphrase');
    writeFileSync(p, text, { mode: 0o600 });
    return p;
  };

  it('from the environment variable', async () => {
    expect(secretFromEnv(PASSPHRASE, { CANTON_SIGNER_PASSPHRASE: 'from env' })).toBe('from env');
    clearEnv();
    vi.stubEnv('CANTON_SIGNER_PASSPHRASE', 'from process env');
    expect(await getSecret(PASSPHRASE)).toBe('from process env');
  });

  it('from the file named by CANTON_SIGNER_PASSPHRASE_FILE: one trailing newline stripped, nothing else', async () => {
    const cases: [string, string][] = [
      ['secret\n', 'secret'],
      ['secret\r\n', 'secret'],
      ['secret', 'secret'],
      ['secret\n\n', 'secret\n'],
      ['  spaced secret  \n', '  spaced secret  '],
      ['ünïcödé\n', 'ünïcödé'],
    ];
    for (const [text, want] of cases)
      expect(
        secretFromEnv(PASSPHRASE, { CANTON_SIGNER_PASSPHRASE_FILE: fileWith(text) }),
        JSON.stringify(text),
      ).toBe(want);
    clearEnv();
    vi.stubEnv('CANTON_SIGNER_PASSPHRASE_FILE', fileWith('file secret\n'));
    expect(await getSecret(PASSPHRASE)).toBe('file secret');
  });

  it('the variable wins over the file; an empty variable falls through to the file', () => {
    const file = fileWith('file secret\n');
    expect(
      secretFromEnv(PASSPHRASE, {
        CANTON_SIGNER_PASSPHRASE: 'env secret',
        CANTON_SIGNER_PASSPHRASE_FILE: file,
      }),
    ).toBe('env secret');
    expect(
      secretFromEnv(PASSPHRASE, { CANTON_SIGNER_PASSPHRASE: '', CANTON_SIGNER_PASSPHRASE_FILE: file }),
    ).toBe('file secret');
  });

  it('an empty file (or one holding only a newline) → no_passphrase naming the variable', () => {
    for (const text of ['', '\n', '\r\n']) {
      let err: unknown;
      try {
        secretFromEnv(PASSPHRASE, { CANTON_SIGNER_PASSPHRASE_FILE: fileWith(text) });
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(text)).toBeInstanceOf(KeyError);
      expect((err as KeyError).code).toBe('no_passphrase');
      expect((err as KeyError).message).toContain('CANTON_SIGNER_PASSPHRASE_FILE');
    }
  });

  it('a file that cannot be read → keystore_io naming the variable', () => {
    let err: unknown;
    try {
      secretFromEnv(PASSPHRASE, { CANTON_SIGNER_PASSPHRASE_FILE: join(tempDir('nofile'), 'missing') });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KeyError);
    expect((err as KeyError).code).toBe('keystore_io');
    expect((err as KeyError).message).toContain('CANTON_SIGNER_PASSPHRASE_FILE');
  });

  it('none → no_passphrase (no_pin for the PIN) naming both variables', async () => {
    expect(secretFromEnv(PASSPHRASE, {})).toBeUndefined();
    clearEnv();
    const e = await expectCode(getSecret(PASSPHRASE), 'no_passphrase');
    expect(e.message).toContain('CANTON_SIGNER_PASSPHRASE');
    expect(e.message).toContain('CANTON_SIGNER_PASSPHRASE_FILE');
    const pin = await expectCode(getSecret(PKCS11_PIN), 'no_pin');
    expect(pin.message).toContain('CANTON_SIGNER_PKCS11_PIN');
    expect(pin.message).toContain('CANTON_SIGNER_PKCS11_PIN_FILE');
  });

  /** What a child process of this one sees in `name` ('(unset)' when it inherits nothing). */
  const childSees = (name: string): string =>
    execFileSync(
      process.execPath,
      ['-e', `process.stdout.write(process.env[${JSON.stringify(name)}] ?? '(unset)')`],
      {
        encoding: 'utf8',
      },
    );

  it('a passphrase or PIN taken from the process environment leaves it: child processes do not inherit it', async () => {
    clearEnv();
    vi.stubEnv('CANTON_SIGNER_PASSPHRASE', 'inherited?');
    expect(childSees('CANTON_SIGNER_PASSPHRASE')).toBe('inherited?');
    expect(secretFromEnv(PASSPHRASE)).toBe('inherited?');
    expect(process.env.CANTON_SIGNER_PASSPHRASE).toBeUndefined();
    expect(childSees('CANTON_SIGNER_PASSPHRASE')).toBe('(unset)');
    // Read from a copy of the environment (as the service does): the process's own copy goes too.
    vi.stubEnv('CANTON_SIGNER_PKCS11_PIN', '4321');
    vi.stubEnv('CANTON_SIGNER_PKCS11_MODULE', '/m.so');
    expect(pkcs11ConfigFromEnv({ ...process.env })?.pin).toBe('4321');
    expect(process.env.CANTON_SIGNER_PKCS11_PIN).toBeUndefined();
    expect(childSees('CANTON_SIGNER_PKCS11_PIN')).toBe('(unset)');
  });

  it('openSigner takes the passphrase from the process environment at once and keeps it for later decryption', async () => {
    clearEnv();
    vi.stubEnv('CANTON_SIGNER_PASSPHRASE', 'kept in the signer');
    const dir = join(tempDir('opensigner-scrub'), 'ks');
    const s = await openSigner({ pkcs11: false, keystore: dir });
    expect(process.env.CANTON_SIGNER_PASSPHRASE).toBeUndefined();
    expect(childSees('CANTON_SIGNER_PASSPHRASE')).toBe('(unset)');
    const d = await s.generate({ label: 'scrubbed', scheme: 'ed25519', backend: 'file' });
    const msg = randomBytes(32);
    checkSignature(await s.sign(d.label, msg), d, msg);
    checkSignature(await signerAt(dir, 'kept in the signer', 'default').sign(d.label, msg), d, msg);
  });

  it('a passphrase or PIN file readable by group or others is refused, naming the file and chmod 600', () => {
    for (const mode of [0o644, 0o640, 0o604, 0o660, 0o444]) {
      const file = fileWith('not for others\n');
      chmodSync(file, mode);
      for (const [src, fileEnv] of [
        [PASSPHRASE, 'CANTON_SIGNER_PASSPHRASE_FILE'],
        [PKCS11_PIN, 'CANTON_SIGNER_PKCS11_PIN_FILE'],
      ] as const) {
        let err: unknown;
        try {
          secretFromEnv(src, { [fileEnv]: file });
        } catch (e) {
          err = e;
        }
        const what = `${mode.toString(8)} ${fileEnv}`;
        expect(err, what).toBeInstanceOf(KeyError);
        expect((err as KeyError).code, what).toBe('keystore_io');
        expect((err as KeyError).message, what).toContain(file);
        expect((err as KeyError).message, what).toContain(`chmod 600 ${file}`);
        expect((err as KeyError).message, what).not.toContain('not for others');
      }
    }
    for (const mode of [0o600, 0o400]) {
      const file = fileWith('owner only\n');
      chmodSync(file, mode);
      expect(secretFromEnv(PASSPHRASE, { CANTON_SIGNER_PASSPHRASE_FILE: file }), mode.toString(8)).toBe(
        'owner only',
      );
    }
  });

  it('openSigner({ env }) takes the passphrase from the environment it is given, like the keystore folder', async () => {
    clearEnv();
    const dir = join(tempDir('opensigner'), 'ks');
    const s = await openSigner({
      pkcs11: false,
      env: { CANTON_SIGNER_KEYSTORE: dir, CANTON_SIGNER_PASSPHRASE: 'passphrase in config.env' },
    });
    const d = await s.generate({ label: 'from-config-env', scheme: 'ed25519', backend: 'file' });
    const msg = randomBytes(32);
    checkSignature(await signerAt(dir, 'passphrase in config.env', 'default').sign(d.label, msg), d, msg);
  });
});

describe('file keystore: list()', () => {
  it('ignores temp files, hidden files and files that are not key files', async () => {
    const dir = join(tempDir('list'), 'ks');
    const s = signerAt(dir);
    await s.generate({ label: 'real', scheme: 'ed25519', backend: 'file' });
    await s.disable('real'); // writes key-state.json
    const content = readFileSync(join(dir, 'real.key.json'));
    writeFileSync(join(dir, '.real.0a1b2c3d4e5f.tmp'), content);
    writeFileSync(join(dir, '.key-state.0a1b2c3d4e5f.tmp'), '{}');
    writeFileSync(join(dir, '.hidden.key.json'), content);
    writeFileSync(join(dir, 'real.key.json.bak'), content);
    writeFileSync(join(dir, 'real.key.json~'), content);
    writeFileSync(join(dir, 'notes.txt'), 'not a key');
    writeFileSync(join(dir, 'README'), 'not a key');
    copyFileSync(join(dir, 'real.key.json'), join(dir, 'copy.KEY.JSON'));
    const listed = await signerAt(dir).list();
    expect(listed.map((k) => k.label)).toEqual(['real']);
    expect(listed[0]!.disabled).toBe(true);
    // A moved (renamed) key file is not a key under its new name.
    renameSync(join(dir, 'real.key.json'), join(dir, 'moved.key.json'));
    await expectCode(signerAt(dir).describe('moved'), 'tampered_key_file');
    await expectCode(signerAt(dir).describe('real'), 'key_not_found');
  });

  it('an empty or missing keystore folder lists nothing', async () => {
    expect(await signerAt(join(tempDir('empty'), 'missing')).list()).toEqual([]);
    const dir = join(tempDir('empty2'), 'ks');
    mkdirSync(dir);
    expect(await signerAt(dir).list()).toEqual([]);
  });
});

describe('one keystore, one passphrase', () => {
  const backend = (dir: string, passphrase: string) =>
    new FileBackend({ dir, passphrase: () => passphrase, scrypt: FAST });

  it('the first key writes the marker; a key under another passphrase is refused, naming the folder', async () => {
    const dir = join(tempDir('one-pass'), 'ks');
    await backend(dir, 'first passphrase').generate('a', 'ed25519');
    const marker = JSON.parse(readFileSync(join(dir, '.keystore.json'), 'utf8'));
    expect(marker).toMatchObject({ format: 'canton-signer/keystore', version: 1, kdf: { name: 'scrypt' } });
    expect(statSync(join(dir, '.keystore.json')).mode & 0o777).toBe(0o600);
    expect(JSON.stringify(marker)).not.toContain('first passphrase');
    for (const write of [
      (b: FileBackend) => b.generate('b', 'ed25519'),
      (b: FileBackend) => b.import('c', randomBytes(32).toString('hex')),
    ]) {
      const e = await write(backend(dir, 'second passphrase')).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(KeyError);
      expect((e as KeyError).code).toBe('wrong_passphrase');
      expect((e as KeyError).message).toContain(`the keystore ${dir} is protected by another passphrase`);
      expect((e as KeyError).message).toMatch(
        /CANTON_SIGNER_PASSPHRASE_FILE.*--keystore DIR.*CANTON_SIGNER_KEYSTORE/,
      );
      expect((e as KeyError).message).not.toContain('second passphrase');
    }
    expect(readdirSync(dir).filter((n) => n.endsWith('.key.json'))).toEqual(['a.key.json']);
    // The keystore's own passphrase still writes keys; checkAccess refuses the other one.
    await backend(dir, 'first passphrase').generate('b', 'ed25519');
    await expect(backend(dir, 'first passphrase').checkAccess()).resolves.toBeUndefined();
    await expect(backend(dir, 'second passphrase').checkAccess()).rejects.toMatchObject({
      code: 'wrong_passphrase',
    });
  });

  it('a keystore from before the marker: checked against an existing key, then marked', async () => {
    const dir = join(tempDir('old-keystore'), 'ks');
    await backend(dir, 'old passphrase').generate('old', 'ed25519');
    unlinkSync(join(dir, '.keystore.json'));
    const e = await backend(dir, 'new passphrase')
      .generate('new', 'ed25519')
      .catch((x: unknown) => x);
    expect((e as KeyError).code).toBe('wrong_passphrase');
    expect((e as KeyError).message).toContain(`the keystore ${dir} is protected by another passphrase`);
    expect(existsSync(join(dir, '.keystore.json'))).toBe(false);
    expect(existsSync(join(dir, 'new.key.json'))).toBe(false);
    // Its own passphrase: the key is written and the marker with it.
    const b = backend(dir, 'old passphrase');
    await b.generate('new', 'ed25519');
    expect(existsSync(join(dir, '.keystore.json'))).toBe(true);
    expect((await b.list()).map((k) => k.label)).toEqual(['new', 'old']);
  });

  it('a damaged marker is refused with what to do, never overwritten', async () => {
    const dir = join(tempDir('bad-marker'), 'ks');
    await backend(dir, 'p').generate('a', 'ed25519');
    writeFileSync(join(dir, '.keystore.json'), '{"format":"x"}', { mode: 0o600 });
    await expect(backend(dir, 'p').generate('b', 'ed25519')).rejects.toMatchObject({
      code: 'invalid_key_file',
      message: expect.stringContaining('restore it from backup, or delete it'),
    });
    expect(readFileSync(join(dir, '.keystore.json'), 'utf8')).toBe('{"format":"x"}');
  });

  it('a marker asking scrypt for more memory than a key file may is refused before any derivation', async () => {
    const dir = join(tempDir('greedy-marker'), 'ks');
    await backend(dir, 'p').generate('a', 'ed25519');
    const path = join(dir, '.keystore.json');
    const marker = JSON.parse(readFileSync(path, 'utf8'));
    // 2^22 · 16 · 128 bytes = 8 GiB: allowed N, allowed r, too much together.
    marker.kdf = { ...marker.kdf, N: 2 ** 22, r: 16 };
    writeFileSync(path, JSON.stringify(marker), { mode: 0o600 });
    await expect(backend(dir, 'p').generate('b', 'ed25519')).rejects.toMatchObject({
      code: 'invalid_key_file',
      message: expect.stringContaining('is not a canton-signer keystore marker'),
    });
  });
});

/**
 * The file keystore: one JSON file per key, the private key (PKCS#8 DER)
 * encrypted with AES-256-GCM under a key derived from the passphrase with
 * scrypt (memory-hard; parameters stored in the file). Format: docs/keys.md.
 *
 *   scrypt(passphrase, salt, N, r, p) → 64 bytes = AES key ‖ check key
 *   check      = HMAC-SHA256(check key, "canton-signer/key passphrase check")
 *   ciphertext = AES-256-GCM(AES key, iv, PKCS#8, aad = the file's header)
 *
 * The check value tells a wrong passphrase apart from a tampered file (GCM
 * alone cannot); the AAD makes every header field (label, scheme, public key,
 * KDF parameters) part of what GCM authenticates; after decryption the public
 * key is derived again and compared. Writes are atomic and exclusive (temp
 * file, then a hard link that fails if the key exists); files are 0600 in a
 * 0700 folder. Unlocked keys stay in memory as node:crypto KeyObjects.
 *
 * One keystore has one passphrase: `.keystore.json` holds a check value of it
 * (same derivation, message "canton-signer/keystore passphrase check"),
 * written with the first key. Every new key is written only under that
 * passphrase; a keystore from before the marker is checked against one of its
 * keys instead, and gets the marker then.
 *
 * One file on purpose: the file format, its key derivation and the backend that
 * uses them are one security argument read top to bottom (what is
 * authenticated, what is checked after decryption, what stays in memory); the
 * folder and file handling are already beside it (keystore-dir.ts, key-
 * files.ts).
 */
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createPrivateKey,
  createPublicKey,
  sign as cryptoSign,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  scrypt,
  timingSafeEqual,
} from 'node:crypto';
import { chmod, mkdir, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { FINGERPRINT_PATTERN, fingerprint } from '../hashing/canton-hash.js';
import { STANDARD_BASE64 } from '../hashing/input.js';
import { withArticle } from '../text/english.js';
import { type BackendKey, backendKeyOf, checkLabel, type KeyBackend, KeyError } from './backend.js';
import { ioError, writeExclusive } from './key-files.js';
import { KEY_SCHEMES, type KeyScheme, SCHEMES, schemeOfKey } from './schemes.js';

export const KEY_FILE_FORMAT = 'canton-signer/key';
export const KEY_FILE_VERSION = 1;
/** Default scrypt cost: N = 2^17, r = 8, p = 1 (128 MiB, a few hundred ms per unlock). */
export const DEFAULT_SCRYPT = { N: 2 ** 17, r: 8, p: 1 } as const;
/** Files may not ask for less than this (or for absurd amounts of memory). */
const MIN_LOG_N = 14;
const MAX_LOG_N = 22;
/** scrypt needs 128·N·r bytes; a file may not ask for more than this. */
const MAX_SCRYPT_MEMORY = 1024 * 1024 * 1024;

/**
 * What is wrong with scrypt parameters read from a file (a key file or the
 * keystore marker), before any work is done with them: N a power of two in
 * range, and no more than MAX_SCRYPT_MEMORY asked for.
 */
function kdfProblem(N: number, r: number): string | undefined {
  const logN = Math.log2(N);
  if (!Number.isInteger(logN) || logN < MIN_LOG_N || logN > MAX_LOG_N)
    return `scrypt N=${N} is outside 2^${MIN_LOG_N}..2^${MAX_LOG_N}`;
  if (128 * N * r > MAX_SCRYPT_MEMORY) return `scrypt N=${N}, r=${r} would need more than 1 GiB`;
  return undefined;
}
const CHECK_MESSAGE = 'canton-signer/key passphrase check';
const KEYSTORE_CHECK_MESSAGE = 'canton-signer/keystore passphrase check';
export const KEYSTORE_MARKER = '.keystore.json';
export const KEYSTORE_FORMAT = 'canton-signer/keystore';

const b64 = z.string().regex(STANDARD_BASE64);
const KeyFileSchema = z
  .object({
    format: z.literal(KEY_FILE_FORMAT),
    version: z.literal(KEY_FILE_VERSION),
    label: z.string(),
    scheme: z.enum(KEY_SCHEMES as unknown as [KeyScheme, ...KeyScheme[]]),
    createdAt: z.string(),
    publicKeySpki: b64,
    fingerprint: z.string().regex(FINGERPRINT_PATTERN),
    kdf: z
      .object({
        name: z.literal('scrypt'),
        N: z.number().int(),
        r: z.number().int().min(1).max(16),
        p: z.number().int().min(1).max(4),
        salt: b64,
      })
      .strict(),
    check: b64,
    cipher: z.object({ name: z.literal('aes-256-gcm'), iv: b64, tag: b64, ciphertext: b64 }).strict(),
  })
  .strict();

export type KeyFile = z.infer<typeof KeyFileSchema>;

const KdfSchema = KeyFileSchema.shape.kdf;
const MarkerSchema = z
  .object({ format: z.literal(KEYSTORE_FORMAT), version: z.literal(1), kdf: KdfSchema, check: b64 })
  .strict();
type Marker = z.infer<typeof MarkerSchema>;

export interface FileBackendOptions {
  /** Keystore folder (created 0700 if missing). */
  dir: string;
  /** Returns the passphrase; called only when a key must be encrypted or unlocked. */
  passphrase: () => Promise<string> | string;
  /** scrypt cost for new files (default N = 2^17). Lower values are for tests only. */
  scrypt?: { N: number; r: number; p: number };
}

/** The header fields GCM authenticates, in a fixed order. */
function aad(f: Omit<KeyFile, 'check' | 'cipher'>): Buffer {
  return Buffer.from(
    JSON.stringify([
      f.format,
      f.version,
      f.label,
      f.scheme,
      f.createdAt,
      f.publicKeySpki,
      f.fingerprint,
      f.kdf.name,
      f.kdf.N,
      f.kdf.r,
      f.kdf.p,
      f.kdf.salt,
    ]),
    'utf8',
  );
}

function deriveKeys(passphrase: string, salt: Buffer, N: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(
      passphrase.normalize('NFC'),
      salt,
      64,
      { N, r, p, maxmem: 256 * N * r + 1024 * 1024 },
      (err, key) => (err ? reject(err) : resolve(key)),
    );
  });
}

function checkValue(checkKey: Buffer, message = CHECK_MESSAGE): Buffer {
  return createHmac('sha256', checkKey).update(message).digest();
}

/** The refusal of a passphrase that is not the keystore's, naming the folder and the ways on. */
export function otherPassphraseError(dir: string): KeyError {
  return new KeyError(
    'wrong_passphrase',
    `the keystore ${dir} is protected by another passphrase (one keystore has one passphrase): ` +
      'give its passphrase (CANTON_SIGNER_PASSPHRASE_FILE or CANTON_SIGNER_PASSPHRASE), ' +
      'or use another keystore folder (--keystore DIR, CANTON_SIGNER_KEYSTORE, or keystore.dir in the service configuration)',
  );
}

export interface KeyFileProblem {
  file: string;
  code: string;
  message: string;
}

export class FileBackend implements KeyBackend {
  readonly kind = 'file' as const;
  private problems: KeyFileProblem[] = [];
  private readonly unlocked = new Map<string, Promise<KeyObject>>();
  /** Keys whose unlock has finished (with their public key), for signing without waiting on a promise. */
  private readonly ready = new Map<string, { key: KeyObject; spki: Buffer }>();
  private readonly cost: { N: number; r: number; p: number };
  /** The passphrase was found to be the keystore's (once per process). */
  private ownPassphrase: Promise<void> | undefined;

  constructor(private readonly opts: FileBackendOptions) {
    this.cost = opts.scrypt ?? DEFAULT_SCRYPT;
    const logN = Math.log2(this.cost.N);
    if (!Number.isInteger(logN) || logN < MIN_LOG_N || logN > MAX_LOG_N)
      throw new KeyError(
        'invalid_key_file',
        `scrypt N must be a power of two between 2^${MIN_LOG_N} and 2^${MAX_LOG_N}`,
      );
  }

  get dir(): string {
    return this.opts.dir;
  }

  async schemes(): Promise<KeyScheme[]> {
    return [...KEY_SCHEMES];
  }

  private path(label: string): string {
    return join(this.opts.dir, `${label}.key.json`);
  }

  private async ensureDir(): Promise<void> {
    try {
      await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
      const st = await stat(this.opts.dir);
      if ((st.mode & 0o077) !== 0) await chmod(this.opts.dir, 0o700);
    } catch (e) {
      throw ioError(`cannot prepare keystore folder ${this.opts.dir}`, e);
    }
  }

  private async passphrase(): Promise<string> {
    const p = await this.opts.passphrase();
    if (typeof p !== 'string' || p.length === 0)
      throw new KeyError(
        'no_passphrase',
        'no passphrase for the file keystore (set CANTON_SIGNER_PASSPHRASE or CANTON_SIGNER_PASSPHRASE_FILE)',
      );
    return p;
  }

  async generate(label: string, scheme: KeyScheme): Promise<BackendKey> {
    checkLabel(label);
    const { privateKey } =
      scheme === 'ed25519'
        ? generateKeyPairSync('ed25519')
        : generateKeyPairSync('ec', { namedCurve: SCHEMES[scheme].curve! });
    return this.store(label, scheme, privateKey);
  }

  /** Imports a private key (see `parsePrivateKey` for the accepted forms). */
  async import(label: string, material: Uint8Array | string): Promise<BackendKey> {
    checkLabel(label);
    const key = parsePrivateKey(material);
    const scheme = schemeOfKey(key);
    if (!scheme)
      throw new KeyError(
        'unsupported_scheme',
        `cannot import ${withArticle(`${key.asymmetricKeyType} key`)}${key.asymmetricKeyDetails?.namedCurve ? ` on ${key.asymmetricKeyDetails.namedCurve}` : ''}: supported are Ed25519, ECDSA P-256, secp256k1 and P-384`,
      );
    return this.store(label, scheme, key);
  }

  private async readMarker(): Promise<Marker | undefined> {
    const path = join(this.opts.dir, KEYSTORE_MARKER);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw ioError(`cannot read ${path}`, e);
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {}
    const r = MarkerSchema.safeParse(raw);
    if (!r.success || kdfProblem(r.data.kdf.N, r.data.kdf.r) !== undefined)
      throw new KeyError(
        'invalid_key_file',
        `${path} is not a canton-signer keystore marker: restore it from backup, or delete it (the next new key writes it again after checking the passphrase against an existing key)`,
      );
    return r.data;
  }

  /** Whether `passphrase` is the one the marker checks. */
  private async markerAccepts(m: Marker, passphrase: string): Promise<boolean> {
    const derived = await deriveKeys(
      passphrase,
      Buffer.from(m.kdf.salt, 'base64'),
      m.kdf.N,
      m.kdf.r,
      m.kdf.p,
    );
    try {
      const check = Buffer.from(m.check, 'base64');
      const expected = checkValue(derived.subarray(32), KEYSTORE_CHECK_MESSAGE);
      return check.length === expected.length && timingSafeEqual(check, expected);
    } finally {
      derived.fill(0);
    }
  }

  private async writeMarker(passphrase: string): Promise<void> {
    const salt = randomBytes(16);
    const { N, r, p } = this.cost;
    const derived = await deriveKeys(passphrase, salt, N, r, p);
    const marker: Marker = {
      format: KEYSTORE_FORMAT,
      version: 1,
      kdf: { name: 'scrypt', N, r, p, salt: salt.toString('base64') },
      check: checkValue(derived.subarray(32), KEYSTORE_CHECK_MESSAGE).toString('base64'),
    };
    derived.fill(0);
    await writeExclusive(
      this.opts.dir,
      'keystore',
      join(this.opts.dir, KEYSTORE_MARKER),
      `${JSON.stringify(marker, null, 2)}\n`,
      { exists: 'the keystore marker exists', fail: `cannot write ${KEYSTORE_MARKER}` },
    );
  }

  /**
   * Makes sure the passphrase is the keystore's before anything is written
   * under it: checked against the marker; without one (a new keystore, or one
   * from before the marker), against an existing key, and the marker written.
   * Another passphrase is refused, naming the folder and what to do.
   */
  private ensureOwnPassphrase(): Promise<void> {
    if (!this.ownPassphrase) {
      this.ownPassphrase = this.checkOwnPassphrase();
      this.ownPassphrase.catch(() => {
        this.ownPassphrase = undefined;
      });
    }
    return this.ownPassphrase;
  }

  private async checkOwnPassphrase(): Promise<void> {
    await this.ensureDir();
    const passphrase = await this.passphrase();
    const marker = await this.readMarker();
    if (marker) {
      if (!(await this.markerAccepts(marker, passphrase))) throw otherPassphraseError(this.opts.dir);
      return;
    }
    const [first] = await this.list();
    if (first) await this.unlockAsKeystore(first.label);
    try {
      await this.writeMarker(passphrase);
    } catch (e) {
      // Written meanwhile by another process: it must accept this passphrase too.
      if (!(e instanceof KeyError && e.code === 'key_exists')) throw e;
      const now = await this.readMarker();
      if (now && !(await this.markerAccepts(now, passphrase))) throw otherPassphraseError(this.opts.dir);
    }
  }

  /** Unlocks `label`; its wrong passphrase is reported as the keystore's. */
  private async unlockAsKeystore(label: string): Promise<void> {
    try {
      await this.unlock(label);
    } catch (e) {
      if (e instanceof KeyError && e.code === 'wrong_passphrase') throw otherPassphraseError(this.opts.dir);
      throw e;
    }
  }

  private async store(label: string, scheme: KeyScheme, privateKey: KeyObject): Promise<BackendKey> {
    await this.ensureOwnPassphrase();
    await this.ensureDir();
    const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
    const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
    const salt = randomBytes(16);
    const { N, r, p } = this.cost;
    const derived = await deriveKeys(await this.passphrase(), salt, N, r, p);
    const header = {
      format: KEY_FILE_FORMAT,
      version: KEY_FILE_VERSION,
      label,
      scheme,
      createdAt: new Date().toISOString(),
      publicKeySpki: spki.toString('base64'),
      fingerprint: fingerprint(spki),
      kdf: { name: 'scrypt' as const, N, r, p, salt: salt.toString('base64') },
    } satisfies Omit<KeyFile, 'check' | 'cipher'>;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', derived.subarray(0, 32), iv);
    cipher.setAAD(aad(header));
    const ciphertext = Buffer.concat([cipher.update(pkcs8), cipher.final()]);
    const file: KeyFile = {
      ...header,
      check: checkValue(derived.subarray(32)).toString('base64'),
      cipher: {
        name: 'aes-256-gcm',
        iv: iv.toString('base64'),
        tag: cipher.getAuthTag().toString('base64'),
        ciphertext: ciphertext.toString('base64'),
      },
    };
    derived.fill(0);
    pkcs8.fill(0);
    await this.writeExclusive(label, `${JSON.stringify(file, null, 2)}\n`);
    this.unlocked.set(label, Promise.resolve(privateKey));
    return { label, scheme, spki: new Uint8Array(spki), createdAt: header.createdAt };
  }

  /** Atomic, and `key_exists` when the label is taken (src/keys/key-files.ts). */
  private async writeExclusive(label: string, text: string): Promise<void> {
    await writeExclusive(this.opts.dir, label, this.path(label), text, {
      exists: `a key labelled ${label} already exists in ${this.opts.dir}`,
      fail: `cannot write key file for ${label}`,
    });
  }

  private async readFileOf(label: string): Promise<KeyFile | undefined> {
    let text: string;
    try {
      text = await readFile(this.path(label), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw ioError(`cannot read key file for ${label}`, e);
    }
    return parseKeyFile(text, label);
  }

  async find(label: string): Promise<BackendKey | undefined> {
    checkLabel(label);
    const f = await this.readFileOf(label);
    return f && backendKeyOf(f);
  }

  async list(): Promise<BackendKey[]> {
    let names: string[];
    try {
      names = await readdir(this.opts.dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw ioError(`cannot list keystore ${this.opts.dir}`, e);
    }
    const out: BackendKey[] = [];
    const problems: KeyFileProblem[] = [];
    for (const n of names.sort()) {
      if (!n.endsWith('.key.json') || n.startsWith('.')) continue;
      try {
        const label = n.slice(0, -'.key.json'.length);
        checkLabel(label);
        const f = await this.readFileOf(label);
        if (f) out.push(backendKeyOf(f));
      } catch (e) {
        // One damaged file must not hide the other keys: it is reported, not listed.
        if (!(e instanceof KeyError)) throw e;
        problems.push({ file: n, code: e.code, message: e.message });
      }
    }
    this.problems = problems;
    return out;
  }

  /**
   * A wrong or missing passphrase shows now: checked against the keystore's
   * marker, or (a keystore from before the marker) by opening one key, kept
   * unlocked as signing would. An empty keystore needs no passphrase yet,
   * but one that is configured and cannot be read (a passphrase file that
   * is missing or readable by others) shows now too.
   */
  async checkAccess(): Promise<void> {
    const marker = await this.readMarker();
    if (marker) {
      if (!(await this.markerAccepts(marker, await this.passphrase())))
        throw otherPassphraseError(this.opts.dir);
      // The passphrase is the keystore's: the first key written need not derive the check again.
      this.ownPassphrase ??= Promise.resolve();
      return;
    }
    const [first] = await this.list();
    if (first) {
      await this.unlockAsKeystore(first.label);
      return;
    }
    await this.passphrase().catch((e: unknown) => {
      if (!(e instanceof KeyError && e.code === 'no_passphrase')) throw e;
    });
  }

  /** Key files the last `list()` could not read, with the reason. */
  lastListProblems(): readonly KeyFileProblem[] {
    return this.problems;
  }

  /** Decrypts the key once (concurrent callers share the work) and keeps it in memory. */
  private unlock(label: string): Promise<KeyObject> {
    let p = this.unlocked.get(label);
    if (!p) {
      p = this.decrypt(label);
      this.unlocked.set(label, p);
      p.catch(() => this.unlocked.delete(label));
    }
    return p;
  }

  private async decrypt(label: string): Promise<KeyObject> {
    const f = await this.readFileOf(label);
    if (!f) throw new KeyError('key_not_found', `no key labelled ${label} in ${this.opts.dir}`);
    const { N, r, p } = f.kdf;
    const problem = kdfProblem(N, r);
    if (problem !== undefined) throw new KeyError('invalid_key_file', `key file ${label}: ${problem}`);
    const iv = Buffer.from(f.cipher.iv, 'base64');
    const tag = Buffer.from(f.cipher.tag, 'base64');
    if (iv.length !== 12 || tag.length !== 16)
      throw new KeyError(
        'tampered_key_file',
        `key file ${label}: the AES-GCM IV must be 12 bytes and the tag 16`,
      );
    const derived = await deriveKeys(await this.passphrase(), Buffer.from(f.kdf.salt, 'base64'), N, r, p);
    try {
      const check = Buffer.from(f.check, 'base64');
      const expected = checkValue(derived.subarray(32));
      if (check.length !== expected.length || !timingSafeEqual(check, expected))
        throw new KeyError('wrong_passphrase', `wrong passphrase for key ${label}`);
      let pkcs8: Buffer;
      try {
        const d = createDecipheriv('aes-256-gcm', derived.subarray(0, 32), iv, { authTagLength: 16 });
        d.setAAD(aad(f));
        d.setAuthTag(tag);
        pkcs8 = Buffer.concat([d.update(Buffer.from(f.cipher.ciphertext, 'base64')), d.final()]);
      } catch {
        throw new KeyError(
          'tampered_key_file',
          `key file ${label} was modified after it was written (authentication failed with the right passphrase)`,
        );
      }
      let key: KeyObject;
      try {
        key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
      } catch {
        throw new KeyError(
          'invalid_key_file',
          `key file ${label}: the decrypted contents are not a PKCS#8 private key`,
        );
      } finally {
        pkcs8.fill(0);
      }
      const spki = createPublicKey(key).export({ type: 'spki', format: 'der' });
      if (schemeOfKey(key) !== f.scheme || !spki.equals(Buffer.from(f.publicKeySpki, 'base64')))
        throw new KeyError(
          'public_key_mismatch',
          `key file ${label}: the private key does not belong to the public key recorded in the file`,
        );
      return key;
    } finally {
      derived.fill(0);
    }
  }

  async sign(key: BackendKey, message: Uint8Array): Promise<Uint8Array> {
    let r = this.ready.get(key.label);
    if (r !== undefined && !r.spki.equals(key.spki)) {
      // The file was replaced (deleted and re-created elsewhere): never sign with the old key.
      this.ready.delete(key.label);
      this.unlocked.delete(key.label);
      r = undefined;
    }
    if (r === undefined) {
      const unlocked = await this.unlock(key.label);
      const spki = createPublicKey(unlocked).export({ type: 'spki', format: 'der' });
      if (!spki.equals(key.spki)) {
        this.unlocked.delete(key.label);
        throw new KeyError(
          'key_not_found',
          `key ${key.label} changed on disk while in use: describe it again`,
        );
      }
      r = { key: unlocked, spki };
      this.ready.set(key.label, r);
    }
    const k = r.key;
    const info = SCHEMES[key.scheme];
    return info.digest === null
      ? cryptoSign(null, message, k)
      : cryptoSign(info.digest, message, { key: k, dsaEncoding: 'der' });
  }

  async remove(label: string): Promise<void> {
    checkLabel(label);
    this.unlocked.delete(label);
    this.ready.delete(label);
    try {
      await unlink(this.path(label));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        throw new KeyError('key_not_found', `no key labelled ${label} in ${this.opts.dir}`);
      throw ioError(`cannot delete key file for ${label}`, e);
    }
  }

  async close(): Promise<void> {
    this.unlocked.clear();
    this.ready.clear();
  }
}

export function parseKeyFile(text: string, label: string): KeyFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new KeyError('invalid_key_file', `key file ${label} is not JSON`);
  }
  const r = KeyFileSchema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new KeyError(
      'invalid_key_file',
      `key file ${label} is not a canton-signer key file v${KEY_FILE_VERSION}: ${issue.path.join('.') || '(root)'}: ${issue.message}`,
    );
  }
  const f = r.data;
  if (f.label !== label)
    throw new KeyError('tampered_key_file', `key file ${label}.key.json carries the label ${f.label}`);
  // The public header must be self-consistent, so that list/show (which need no passphrase) never
  // present a key that signing would refuse.
  const spki = Buffer.from(f.publicKeySpki, 'base64');
  let spkiScheme: KeyScheme | undefined;
  try {
    spkiScheme = schemeOfKey(createPublicKey({ key: spki, format: 'der', type: 'spki' }));
  } catch {
    throw new KeyError('tampered_key_file', `key file ${label}: publicKeySpki is not a valid public key`);
  }
  if (spkiScheme !== f.scheme)
    throw new KeyError(
      'tampered_key_file',
      `key file ${label}: scheme ${f.scheme} does not match the public key`,
    );
  if (fingerprint(spki) !== f.fingerprint)
    throw new KeyError(
      'tampered_key_file',
      `key file ${label}: the fingerprint does not match the public key`,
    );
  return f;
}

const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * Private key material for import: an Ed25519 seed as 64 hex characters, or
 * PKCS#8 as PEM text or DER bytes (any supported scheme).
 */
export function parsePrivateKey(material: Uint8Array | string): KeyObject {
  try {
    if (typeof material === 'string') {
      const t = material.trim();
      if (/^[0-9a-fA-F]{64}$/.test(t))
        return createPrivateKey({
          key: Buffer.concat([ED25519_PKCS8_PREFIX, Buffer.from(t, 'hex')]),
          format: 'der',
          type: 'pkcs8',
        });
      if (t.includes('-----BEGIN PRIVATE KEY-----')) return createPrivateKey({ key: t, format: 'pem' });
      if (t.includes('-----BEGIN ENCRYPTED PRIVATE KEY-----'))
        throw new KeyError(
          'invalid_key_material',
          'encrypted PKCS#8 is not accepted: decrypt it first (openssl pkcs8)',
        );
      throw new KeyError(
        'invalid_key_material',
        'expected an Ed25519 seed as 64 hex characters, or a PKCS#8 private key (PEM "BEGIN PRIVATE KEY" or DER)',
      );
    }
    const text = Buffer.from(material).toString('latin1');
    if (/-----BEGIN /.test(text) || /^[\s0-9a-fA-F]+$/.test(text)) return parsePrivateKey(text);
    // EncryptedPrivateKeyInfo carries the PBES2 OID (1.2.840.113549.1.5.13) near its start.
    if (Buffer.from(material.subarray(0, 48)).includes(Buffer.from('2a864886f70d01050d', 'hex')))
      throw new KeyError(
        'invalid_key_material',
        'encrypted PKCS#8 is not accepted: decrypt it first (openssl pkcs8)',
      );
    return createPrivateKey({ key: Buffer.from(material), format: 'der', type: 'pkcs8' });
  } catch (e) {
    if (e instanceof KeyError) throw e;
    throw new KeyError(
      'invalid_key_material',
      'not a readable private key (PKCS#8 PEM/DER, or a 32-byte Ed25519 seed in hex)',
    );
  }
}

/**
 * Cold keys: keys whose private half lives on an air-gapped machine. This
 * backend holds their PUBLIC keys only (one small JSON file per label, in
 * `<keystore>/offline` by default) so that the online side can describe them,
 * onboard their parties and check signatures against them. It cannot make a
 * signature: `sign` hands back the signature that came in through the air gap
 * for exactly that message (asked of a pluggable `OfflineSignatureSource`),
 * or fails with `awaiting_offline_signature`. Keys are made on the offline
 * machine (`canton-signer keys create` there) and registered here with
 * `keys import-public`. Format: docs/keys.md ("Cold keys").
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { mkdir, readdir, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { FINGERPRINT_PATTERN, fingerprint } from '../hashing/canton-hash.js';
import { STANDARD_BASE64 } from '../hashing/input.js';
import { withArticle } from '../text/english.js';
import { type BackendKey, backendKeyOf, checkLabel, type KeyBackend, KeyError } from './backend.js';
import type { KeyFileProblem } from './file-backend.js';
import { ioError, writeExclusive } from './key-files.js';
import {
  aKeyOf,
  isKeyScheme,
  KEY_SCHEMES,
  type KeyScheme,
  SCHEMES,
  schemeOfKey,
  schemeTitle,
  spkiFromRaw,
} from './schemes.js';

export const OFFLINE_KEY_FORMAT = 'canton-signer/offline-public-key';
export const OFFLINE_KEY_VERSION = 1;
const SUFFIX = '.public.json';

export interface OfflineSignatureSource {
  /** The signature imported through the air gap for exactly this message by this key, if any. */
  signatureFor(
    key: { label: string; fingerprint: string },
    message: Uint8Array,
  ): Promise<Uint8Array | undefined>;
}

const OfflineKeyFileSchema = z
  .object({
    format: z.literal(OFFLINE_KEY_FORMAT),
    version: z.literal(OFFLINE_KEY_VERSION),
    label: z.string(),
    scheme: z.enum(KEY_SCHEMES as unknown as [KeyScheme, ...KeyScheme[]]),
    createdAt: z.string(),
    publicKeySpki: z.string().regex(STANDARD_BASE64),
    fingerprint: z.string().regex(FINGERPRINT_PATTERN),
  })
  .strict();

export type OfflineKeyFile = z.infer<typeof OfflineKeyFileSchema>;

export interface OfflineBackendOptions {
  /** Folder of the public key files (created 0700 if missing). */
  dir: string;
  source?: OfflineSignatureSource;
}

/** True for the error `sign` throws while a cold key's signature has not come back through the air gap. */
export function isAwaitingOfflineSignature(e: unknown): e is KeyError {
  return e instanceof KeyError && e.code === 'awaiting_offline_signature';
}

/**
 * The canonical SPKI DER of a public key of `scheme` (uncompressed point for
 * ECDSA), or a KeyError naming the scheme when `spki` is not one.
 */
export function canonicalSpki(scheme: KeyScheme, spki: Uint8Array): Buffer {
  if (!isKeyScheme(scheme))
    throw new KeyError(
      'unsupported_scheme',
      `unknown scheme ${JSON.stringify(String(scheme))}: use one of ${KEY_SCHEMES.join(', ')}`,
    );
  let key: KeyObject;
  // "an": every scheme name starts with a vowel (ed25519, ecdsa-…).
  try {
    key = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
  } catch {
    throw new KeyError(
      'invalid_key_material',
      `not ${withArticle(`${schemeTitle(scheme)} public key`)}: the ${spki.length} bytes given are not a SubjectPublicKeyInfo (SPKI) DER`,
    );
  }
  const actual = schemeOfKey(key);
  if (actual !== scheme) {
    const what = actual
      ? aKeyOf(actual)
      : withArticle(
          `${key.asymmetricKeyType ?? 'unknown'}${key.asymmetricKeyDetails?.namedCurve ? ` ${key.asymmetricKeyDetails.namedCurve}` : ''} key`,
        );
    throw new KeyError(
      'invalid_key_material',
      `not ${withArticle(`${schemeTitle(scheme)} public key`)}: the SPKI holds ${what}`,
    );
  }
  const jwk = key.export({ format: 'jwk' });
  const x = Buffer.from(jwk.x ?? '', 'base64url');
  if (scheme === 'ed25519') return spkiFromRaw(scheme, x);
  const y = Buffer.from(jwk.y ?? '', 'base64url');
  const n = SCHEMES[scheme].fieldBytes;
  const point = Buffer.alloc(1 + 2 * n);
  point[0] = 4;
  x.copy(point, 1 + n - x.length);
  y.copy(point, 1 + 2 * n - y.length);
  return spkiFromRaw(scheme, point);
}

export class OfflineBackend implements KeyBackend {
  readonly kind = 'offline' as const;
  private source: OfflineSignatureSource | undefined;
  private problems: KeyFileProblem[] = [];

  constructor(private readonly opts: OfflineBackendOptions) {
    this.source = opts.source;
  }

  get dir(): string {
    return this.opts.dir;
  }

  /** Where `sign` finds the signatures imported through the air gap. */
  setSignatureSource(source: OfflineSignatureSource | undefined): void {
    this.source = source;
  }

  /** Every scheme canton-signer can verify: the offline machine does the signing. */
  async schemes(): Promise<KeyScheme[]> {
    return [...KEY_SCHEMES];
  }

  async generate(label: string, scheme: KeyScheme): Promise<BackendKey> {
    throw new KeyError(
      'offline_key',
      `cold key ${label} (${scheme}) cannot be generated here: generate it on the offline machine (canton-signer keys create there) and register its public key here with canton-signer keys import-public`,
    );
  }

  /** Registers a cold key's public key (SPKI DER of `scheme`). Refuses a label already used here. */
  async importPublic(label: string, scheme: KeyScheme, spki: Uint8Array): Promise<BackendKey> {
    checkLabel(label);
    const der = canonicalSpki(scheme, spki);
    const file: OfflineKeyFile = {
      format: OFFLINE_KEY_FORMAT,
      version: OFFLINE_KEY_VERSION,
      label,
      scheme,
      createdAt: new Date().toISOString(),
      publicKeySpki: der.toString('base64'),
      fingerprint: fingerprint(der),
    };
    await this.writeExclusive(label, `${JSON.stringify(file, null, 2)}\n`);
    return backendKeyOf(file);
  }

  async list(): Promise<BackendKey[]> {
    let names: string[];
    try {
      names = await readdir(this.opts.dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw ioError(`cannot list offline key folder ${this.opts.dir}`, e);
    }
    const out: BackendKey[] = [];
    const problems: KeyFileProblem[] = [];
    for (const n of names.sort()) {
      if (!n.endsWith(SUFFIX) || n.startsWith('.')) continue;
      try {
        const label = n.slice(0, -SUFFIX.length);
        checkLabel(label);
        const f = await this.read(label);
        if (f) out.push(backendKeyOf(f));
      } catch (e) {
        if (!(e instanceof KeyError)) throw e;
        problems.push({ file: join('offline', n), code: e.code, message: e.message });
      }
    }
    this.problems = problems;
    return out;
  }

  /** Files the last `list()` could not read, with the reason. */
  lastListProblems(): readonly KeyFileProblem[] {
    return this.problems;
  }

  async find(label: string): Promise<BackendKey | undefined> {
    checkLabel(label);
    const f = await this.read(label);
    return f && backendKeyOf(f);
  }

  /** The signature that came back through the air gap for exactly `message`; never made here. */
  async sign(key: BackendKey, message: Uint8Array): Promise<Uint8Array> {
    const fp = fingerprint(key.spki);
    const sig = this.source
      ? await this.source.signatureFor({ label: key.label, fingerprint: fp }, message)
      : undefined;
    if (sig === undefined)
      throw new KeyError(
        'awaiting_offline_signature',
        `key ${key.label} is held offline; its signature for this hash (${Buffer.from(message).toString('hex')}) must come through the air gap: export the request, sign it on the offline machine and import the response (see docs/air-gap.md)`,
      );
    return sig;
  }

  async remove(label: string): Promise<void> {
    checkLabel(label);
    try {
      await unlink(this.path(label));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT')
        throw new KeyError('key_not_found', `no offline key labelled ${label} in ${this.opts.dir}`);
      throw ioError(`cannot delete offline key file for ${label}`, e);
    }
  }

  async close(): Promise<void> {}

  // ---- internals -------------------------------------------------------------

  private path(label: string): string {
    return join(this.opts.dir, `${label}${SUFFIX}`);
  }

  private async read(label: string): Promise<OfflineKeyFile | undefined> {
    let text: string;
    try {
      text = await readFile(this.path(label), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw ioError(`cannot read offline key file for ${label}`, e);
    }
    return parseOfflineKeyFile(text, label);
  }

  /** Atomic, and `key_exists` when the label is taken (src/keys/key-files.ts). */
  private async writeExclusive(label: string, text: string): Promise<void> {
    try {
      await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
    } catch (e) {
      throw ioError(`cannot prepare offline key folder ${this.opts.dir}`, e);
    }
    await writeExclusive(this.opts.dir, label, this.path(label), text, {
      exists: `an offline key labelled ${label} already exists in ${this.opts.dir}`,
      fail: `cannot write offline key file for ${label}`,
    });
  }
}

/** Parses and checks an offline public key file: label, scheme and fingerprint must match the key. */
export function parseOfflineKeyFile(text: string, label: string): OfflineKeyFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new KeyError('invalid_key_file', `offline key file ${label} is not JSON`);
  }
  const r = OfflineKeyFileSchema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new KeyError(
      'invalid_key_file',
      `offline key file ${label} is not a canton-signer offline public key v${OFFLINE_KEY_VERSION}: ${issue.path.join('.') || '(root)'}: ${issue.message}`,
    );
  }
  const f = r.data;
  if (f.label !== label)
    throw new KeyError(
      'tampered_key_file',
      `offline key file ${label}${SUFFIX} carries the label ${f.label}`,
    );
  let spki: Buffer;
  try {
    spki = canonicalSpki(f.scheme, Buffer.from(f.publicKeySpki, 'base64'));
  } catch (e) {
    throw new KeyError(
      'tampered_key_file',
      `offline key file ${label}: ${e instanceof KeyError ? e.message : 'publicKeySpki is not a valid public key'}`,
    );
  }
  if (!spki.equals(Buffer.from(f.publicKeySpki, 'base64')) || fingerprint(spki) !== f.fingerprint)
    throw new KeyError(
      'tampered_key_file',
      `offline key file ${label}: the fingerprint does not match the public key`,
    );
  return f;
}

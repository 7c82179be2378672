/**
 * Canton's hash primitive and the hashes built on it that are not the
 * prepared-transaction hash: topology transactions (purpose 11), public-key
 * fingerprints (12), multi-transaction hashes (55), and party ids.
 *
 *   CantonHash(purpose, x) = 0x12 ‖ 0x20 ‖ SHA-256(int32(purpose) ‖ x)   (34-byte multihash)
 */
import { createHash, createPublicKey } from 'node:crypto';
import { TransactionError } from './errors.js';
import { base64ToBytes, bytesToHex } from './input.js';
import { type KeyScheme, schemeOfKey, spkiFromRaw } from './key-encoding.js';

export const HashPurpose = {
  TopologyTransactionSignature: 11,
  PublicKeyFingerprint: 12,
  PreparedSubmission: 48,
  MultiTopologyTransaction: 55,
} as const;

/** The 34-byte multihash form: `12 20` ‖ SHA-256(purpose ‖ bytes). */
export function cantonHash(purpose: number, bytes: Uint8Array): Uint8Array {
  const h = createHash('sha256');
  const p = Buffer.alloc(4);
  p.writeUInt32BE(purpose);
  h.update(p);
  h.update(bytes);
  const out = new Uint8Array(34);
  out[0] = 0x12;
  out[1] = 0x20;
  out.set(h.digest(), 2);
  return out;
}

/**
 * Hash of one serialized topology transaction (the versioned bytes exactly as
 * received, base64 text or bytes). This 34-byte value is what a per-transaction
 * signature signs.
 */
export function topologyTransactionHash(transaction: Uint8Array | string): Uint8Array {
  const bytes =
    typeof transaction === 'string' ? base64ToBytes(transaction, 'topology transaction') : transaction;
  if (bytes.length === 0) throw new TransactionError('missing_field', '', 'topology transaction is empty');
  return cantonHash(HashPurpose.TopologyTransactionSignature, bytes);
}

/**
 * The multi-transaction hash over a set of topology transaction hashes
 * (34-byte multihash form each): de-duplicated, sorted by unsigned bytes,
 * `int32(count) ‖ (int32(34) ‖ hash)…`, hashed with purpose 55.
 * A signature over it authorises every transaction in the set.
 */
export function multiHash(hashes: readonly Uint8Array[]): Uint8Array {
  if (hashes.length === 0)
    throw new TransactionError('missing_field', '', 'multi-hash needs at least one hash');
  const unique = new Map<string, Uint8Array>();
  hashes.forEach((h, i) => {
    if (h.length !== 34 || h[0] !== 0x12 || h[1] !== 0x20)
      throw new TransactionError(
        'bad_encoding',
        `hashes[${i}]`,
        'expected a 34-byte SHA-256 multihash (1220…)',
      );
    unique.set(bytesToHex(h), h);
  });
  const sorted = [...unique.keys()].sort();
  const payload = Buffer.alloc(4 + sorted.length * 38);
  payload.writeUInt32BE(sorted.length, 0);
  sorted.forEach((hex, i) => {
    payload.writeUInt32BE(34, 4 + i * 38);
    payload.set(unique.get(hex)!, 8 + i * 38);
  });
  return cantonHash(HashPurpose.MultiTopologyTransaction, payload);
}

/** Same names as the signing schemes (src/keys/schemes.ts). */
export type KeyAlgorithm = KeyScheme;

export interface ParsedPublicKey {
  algorithm: KeyAlgorithm;
  /** The bytes Canton fingerprints: raw 32 bytes for Ed25519, the exact SPKI DER for ECDSA. */
  fingerprintBytes: Uint8Array;
  /** SubjectPublicKeyInfo DER. */
  spki: Uint8Array;
  /** Raw key bytes where the scheme has them (Ed25519: 32 bytes; ECDSA: the uncompressed point). */
  raw: Uint8Array;
}

/**
 * Accepts a raw 32-byte Ed25519 key or an SPKI DER key (Ed25519, ECDSA P-256,
 * P-384, secp256k1). The key is parsed and checked to be a valid point.
 */
export function parsePublicKey(key: Uint8Array): ParsedPublicKey {
  if (key.length === 32) {
    const spki = spkiFromRaw('ed25519', key);
    checkKey(spki);
    return {
      algorithm: 'ed25519',
      fingerprintBytes: key.slice(),
      spki: new Uint8Array(spki),
      raw: key.slice(),
    };
  }
  const obj = checkKey(Buffer.from(key));
  // Canonical form: what OpenSSL exports for the key. EC keys go through JWK first so that the
  // point is uncompressed (an SPKI re-export keeps a compressed point compressed, and the same
  // key would then have two fingerprints).
  const canonical =
    obj.asymmetricKeyType === 'ec'
      ? createPublicKey({ key: obj.export({ format: 'jwk' }), format: 'jwk' })
      : obj;
  const der = canonical.export({ type: 'spki', format: 'der' });
  if (!der.equals(Buffer.from(key)))
    throw new TransactionError(
      'invalid_key',
      '',
      'public key is not in canonical SPKI DER form (re-encoding differs)',
    );
  if (obj.asymmetricKeyType === 'ed25519') {
    const raw = new Uint8Array(key.subarray(key.length - 32));
    return { algorithm: 'ed25519', fingerprintBytes: raw, spki: key.slice(), raw };
  }
  if (obj.asymmetricKeyType === 'ec') {
    const algorithm = schemeOfKey(obj);
    if (!algorithm)
      throw new TransactionError(
        'invalid_key',
        '',
        `unsupported EC curve ${obj.asymmetricKeyDetails?.namedCurve ?? '(unknown)'}`,
      );
    const jwk = obj.export({ format: 'jwk' });
    const x = Buffer.from(jwk.x!, 'base64url');
    const y = Buffer.from(jwk.y!, 'base64url');
    const raw = new Uint8Array(Buffer.concat([Buffer.from([4]), x, y]));
    return { algorithm, fingerprintBytes: key.slice(), spki: key.slice(), raw };
  }
  throw new TransactionError('invalid_key', '', `unsupported key type ${obj.asymmetricKeyType}`);
}

function checkKey(spki: Buffer) {
  try {
    return createPublicKey({ key: spki, format: 'der', type: 'spki' });
  } catch {
    throw new TransactionError(
      'invalid_key',
      '',
      'not a valid public key (raw 32-byte Ed25519 or SPKI DER expected)',
    );
  }
}

/** Canton fingerprint of a public key: hex of CantonHash(12, key bytes), 68 characters starting `1220`. */
export function fingerprint(publicKey: Uint8Array): string {
  const id = Buffer.from(publicKey.buffer, publicKey.byteOffset, publicKey.byteLength).toString('base64');
  let fp = FINGERPRINTS.get(id);
  if (fp === undefined) {
    fp = bytesToHex(cantonHash(HashPurpose.PublicKeyFingerprint, parsePublicKey(publicKey).fingerprintBytes));
    if (FINGERPRINTS.size >= FINGERPRINT_LIMIT) FINGERPRINTS.delete(FINGERPRINTS.keys().next().value!);
    FINGERPRINTS.set(id, fp);
  }
  return fp;
}

/**
 * Fingerprints by the exact key bytes they were computed from (base64 of them),
 * so that the pipeline's check of a party's registered key before each
 * signature does not parse and re-encode its DER every time. Only keys that
 * parsed are kept; bounded, oldest dropped first.
 */
const FINGERPRINTS = new Map<string, string>();
const FINGERPRINT_LIMIT = 1024;

const HINT = /^[A-Za-z0-9:\-_ ]+$/;
/** A Canton key fingerprint in hex: the 34-byte SHA-256 multihash, 68 lowercase hex characters. */
export const FINGERPRINT_PATTERN = /^1220[0-9a-f]{64}$/;
const FINGERPRINT = FINGERPRINT_PATTERN;

/** Why a party hint is not acceptable, or undefined. */
export function partyHintProblem(hint: string): string | undefined {
  if (hint.length === 0) return 'party hint is empty';
  if (hint.length > 185) return `party hint is ${hint.length} characters long (at most 185)`;
  if (!HINT.test(hint)) return 'party hint may contain only ASCII letters, digits, space, ":", "-" and "_"';
  if (hint.includes('::')) return 'party hint must not contain "::"';
  // "alice:" + "::" + fingerprint contains ":::"; Canton splits a party id at the first "::".
  if (hint.endsWith(':')) return 'party hint must not end with ":" (the party id would contain ":::")';
  return undefined;
}

/** `hint::fingerprint`, after checking both halves. */
export function partyId(hint: string, fingerprintHex: string): string {
  const bad = partyHintProblem(hint);
  if (bad) throw new TransactionError('invalid_party', 'hint', bad);
  if (!FINGERPRINT.test(fingerprintHex))
    throw new TransactionError(
      'invalid_party',
      'fingerprint',
      'fingerprint must be 68 lowercase hex characters starting 1220',
    );
  const id = `${hint}::${fingerprintHex}`;
  if (id.length > 255)
    throw new TransactionError('invalid_party', 'hint', 'party id would exceed 255 characters');
  return id;
}

/** Splits a party id into hint and namespace fingerprint, refusing malformed ids. */
export function parsePartyId(id: string): { hint: string; fingerprint: string } {
  const at = id.lastIndexOf('::');
  if (at < 0)
    throw new TransactionError('invalid_party', '', 'party id must have the form hint::fingerprint');
  const hint = id.slice(0, at);
  const fp = id.slice(at + 2);
  partyId(hint, fp);
  return { hint, fingerprint: fp };
}

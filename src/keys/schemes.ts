/**
 * Signing schemes canton-signer supports for external parties, with every
 * Canton name that goes with them (key spec, algorithm, signature format),
 * their SPKI encodings, and the conversions and verification that do not
 * depend on where the private key lives.
 *
 * Ed25519 signs the message itself. ECDSA schemes sign SHA-256 (SHA-384 for
 * P-384) *of the message*, because Canton verifies SHA256withECDSA over the
 * bytes it is given; signatures are DER-encoded.
 */
import { createHash, createPublicKey, type KeyObject, verify } from 'node:crypto';
import { KEY_CURVES, KEY_SCHEMES, type KeyScheme, schemeOfKey } from '../hashing/key-encoding.js';
import { withArticle } from '../text/english.js';

export { KEY_SCHEMES, type KeyScheme, schemeOfKey, spkiFromRaw } from '../hashing/key-encoding.js';

export type SigningKeySpec =
  | 'SIGNING_KEY_SPEC_EC_CURVE25519'
  | 'SIGNING_KEY_SPEC_EC_P256'
  | 'SIGNING_KEY_SPEC_EC_SECP256K1'
  | 'SIGNING_KEY_SPEC_EC_P384';

export type SigningAlgorithmSpec =
  | 'SIGNING_ALGORITHM_SPEC_ED25519'
  | 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256'
  | 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_384';

export type SignatureFormat = 'SIGNATURE_FORMAT_CONCAT' | 'SIGNATURE_FORMAT_DER';

export interface SchemeInfo {
  scheme: KeyScheme;
  keySpec: SigningKeySpec;
  algorithm: SigningAlgorithmSpec;
  format: SignatureFormat;
  /** Digest applied to the message before ECDSA; none for Ed25519. */
  digest: 'sha256' | 'sha384' | null;
  /** OpenSSL curve name (ECDSA). */
  curve?: string;
  /** DER of the curve's OID, as PKCS#11 CKA_EC_PARAMS wants it. */
  ecParams: Buffer;
  /** Bytes of one coordinate / of the raw public key (Ed25519). */
  fieldBytes: number;
  /** The name people know it by, for messages: `Ed25519`, `ECDSA P-256`. */
  title: string;
}

export const SCHEMES: Readonly<Record<KeyScheme, SchemeInfo>> = {
  ed25519: {
    scheme: 'ed25519',
    keySpec: 'SIGNING_KEY_SPEC_EC_CURVE25519',
    algorithm: 'SIGNING_ALGORITHM_SPEC_ED25519',
    format: 'SIGNATURE_FORMAT_CONCAT',
    digest: null,
    ecParams: Buffer.from('06032b6570', 'hex'), // 1.3.101.112
    fieldBytes: KEY_CURVES.ed25519.fieldBytes,
    title: 'Ed25519',
  },
  'ecdsa-p256': {
    scheme: 'ecdsa-p256',
    keySpec: 'SIGNING_KEY_SPEC_EC_P256',
    algorithm: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
    format: 'SIGNATURE_FORMAT_DER',
    digest: 'sha256',
    curve: KEY_CURVES['ecdsa-p256'].curve,
    ecParams: Buffer.from('06082a8648ce3d030107', 'hex'), // 1.2.840.10045.3.1.7
    fieldBytes: KEY_CURVES['ecdsa-p256'].fieldBytes,
    title: 'ECDSA P-256',
  },
  'ecdsa-secp256k1': {
    scheme: 'ecdsa-secp256k1',
    keySpec: 'SIGNING_KEY_SPEC_EC_SECP256K1',
    algorithm: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
    format: 'SIGNATURE_FORMAT_DER',
    digest: 'sha256',
    curve: KEY_CURVES['ecdsa-secp256k1'].curve,
    ecParams: Buffer.from('06052b8104000a', 'hex'), // 1.3.132.0.10
    fieldBytes: KEY_CURVES['ecdsa-secp256k1'].fieldBytes,
    title: 'ECDSA secp256k1',
  },
  'ecdsa-p384': {
    scheme: 'ecdsa-p384',
    keySpec: 'SIGNING_KEY_SPEC_EC_P384',
    algorithm: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_384',
    format: 'SIGNATURE_FORMAT_DER',
    digest: 'sha384',
    curve: KEY_CURVES['ecdsa-p384'].curve,
    ecParams: Buffer.from('06052b81040022', 'hex'), // 1.3.132.0.34
    fieldBytes: KEY_CURVES['ecdsa-p384'].fieldBytes,
    title: 'ECDSA P-384',
  },
};

/** `an Ed25519 key`, `an ECDSA P-256 key`: a scheme's key, for messages; any other text (e.g. an algorithm name) as it is. */
export function aKeyOf(scheme: string): string {
  return `${withArticle(schemeTitle(scheme))} key`;
}

/** `Ed25519`, `ECDSA P-256`; any other text as it is. */
export function schemeTitle(scheme: string): string {
  return isKeyScheme(scheme) ? SCHEMES[scheme].title : scheme;
}

export function isKeyScheme(s: string): s is KeyScheme {
  return (KEY_SCHEMES as readonly string[]).includes(s);
}

/** The message an ECDSA key actually signs: digest(message). Ed25519 signs the message. */
export function prehash(scheme: KeyScheme, message: Uint8Array): Uint8Array {
  const d = SCHEMES[scheme].digest;
  return d === null ? message : createHash(d).update(message).digest();
}

/** Converts a fixed-width r‖s signature (as PKCS#11 CKM_ECDSA returns it) to DER, in one allocation. */
export function rawEcdsaToDer(rs: Uint8Array): Buffer {
  if (rs.length % 2 !== 0 || rs.length === 0)
    throw new Error('r‖s signature must have even, non-zero length');
  const half = rs.length / 2;
  // Each INTEGER is minimal big-endian, with a 0x00 in front when its top bit is set.
  const integer = (from: number) => {
    let start = from;
    while (start < from + half - 1 && rs[start] === 0) start++;
    const pad = rs[start]! & 0x80 ? 1 : 0;
    const len = from + half - start + pad;
    return { start, pad, len, size: 1 + derLengthSize(len) + len };
  };
  const r = integer(0);
  const s = integer(half);
  const bodyLen = r.size + s.size;
  const out = Buffer.allocUnsafe(1 + derLengthSize(bodyLen) + bodyLen);
  out[0] = 0x30;
  let p = writeDerLength(out, 1, bodyLen);
  for (const x of [r, s]) {
    out[p++] = 0x02;
    p = writeDerLength(out, p, x.len);
    if (x.pad) out[p++] = 0;
    out.set(rs.subarray(x.start, x.start + x.len - x.pad), p);
    p += x.len - x.pad;
  }
  return out;
}

function derLengthSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x100 ? 2 : 3;
}

function writeDerLength(out: Buffer, p: number, n: number): number {
  if (n < 0x80) out[p++] = n;
  else if (n < 0x100) {
    out[p++] = 0x81;
    out[p++] = n;
  } else {
    out[p++] = 0x82;
    out[p++] = n >> 8;
    out[p++] = n & 0xff;
  }
  return p;
}

/**
 * Parsed public keys by their exact SPKI bytes (base64 of them as the map key),
 * so that verifying against a party's registered key does not parse its DER
 * every time. Only keys that parsed are kept; bounded, oldest dropped first.
 */
const PUBLIC_KEYS = new Map<string, { key: KeyObject; scheme: KeyScheme | undefined }>();
const PUBLIC_KEY_LIMIT = 1024;

function publicKeyOf(spki: Uint8Array): { key: KeyObject; scheme: KeyScheme | undefined } {
  const id = Buffer.from(spki.buffer, spki.byteOffset, spki.byteLength).toString('base64');
  let e = PUBLIC_KEYS.get(id);
  if (e === undefined) {
    const key = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
    e = { key, scheme: schemeOfKey(key) };
    if (PUBLIC_KEYS.size >= PUBLIC_KEY_LIMIT) PUBLIC_KEYS.delete(PUBLIC_KEYS.keys().next().value!);
    PUBLIC_KEYS.set(id, e);
  }
  return e;
}

/**
 * Verifies a signature the way Canton does: Ed25519 over the message;
 * ECDSA (DER) as SHA256withECDSA / SHA384withECDSA over the message.
 */
export function verifySignature(
  scheme: KeyScheme,
  spki: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): boolean {
  const { key, scheme: ofKey } = publicKeyOf(spki);
  if (ofKey !== scheme) return false;
  try {
    if (scheme === 'ed25519') return signature.length === 64 && verify(null, message, key, signature);
    return verify(SCHEMES[scheme].digest!, message, { key, dsaEncoding: 'der' }, signature);
  } catch {
    return false;
  }
}

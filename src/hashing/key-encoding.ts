/**
 * What the fingerprint of a public key needs to know about key schemes: their
 * names, the curve of each, and the SPKI DER of a raw public key. The signing
 * side (src/keys/schemes.ts) builds on these and re-exports them; they live
 * here so that hashing depends on nothing outside src/hashing.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';

export type KeyScheme = 'ed25519' | 'ecdsa-p256' | 'ecdsa-secp256k1' | 'ecdsa-p384';

export const KEY_SCHEMES: readonly KeyScheme[] = ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1', 'ecdsa-p384'];

/** OpenSSL curve name (ECDSA) and bytes of one coordinate (of the raw key for Ed25519). */
export const KEY_CURVES: Readonly<Record<KeyScheme, { curve: string | undefined; fieldBytes: number }>> = {
  ed25519: { curve: undefined, fieldBytes: 32 },
  'ecdsa-p256': { curve: 'prime256v1', fieldBytes: 32 },
  'ecdsa-secp256k1': { curve: 'secp256k1', fieldBytes: 32 },
  'ecdsa-p384': { curve: 'secp384r1', fieldBytes: 48 },
};

/** Scheme of a node:crypto key object, or undefined when canton-signer cannot use it. */
export function schemeOfKey(key: KeyObject): KeyScheme | undefined {
  if (key.asymmetricKeyType === 'ed25519') return 'ed25519';
  if (key.asymmetricKeyType !== 'ec') return undefined;
  const curve = key.asymmetricKeyDetails?.namedCurve;
  return KEY_SCHEMES.find((s) => KEY_CURVES[s].curve === curve);
}

const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/**
 * SPKI DER from the raw public key: 32 bytes for Ed25519, the uncompressed
 * point (04 ‖ x ‖ y) for ECDSA. The point is checked to be on the curve.
 */
export function spkiFromRaw(scheme: KeyScheme, raw: Uint8Array): Buffer {
  const { fieldBytes } = KEY_CURVES[scheme];
  if (scheme === 'ed25519') {
    if (raw.length !== 32) throw new Error(`an Ed25519 public key is 32 bytes, got ${raw.length}`);
    return Buffer.concat([ED25519_SPKI_PREFIX, raw]);
  }
  if (raw.length !== 1 + 2 * fieldBytes || raw[0] !== 4)
    throw new Error(`expected an uncompressed ${scheme} point of ${1 + 2 * fieldBytes} bytes`);
  const x = Buffer.from(raw.subarray(1, 1 + fieldBytes)).toString('base64url');
  const y = Buffer.from(raw.subarray(1 + fieldBytes)).toString('base64url');
  const crv = { 'ecdsa-p256': 'P-256', 'ecdsa-secp256k1': 'secp256k1', 'ecdsa-p384': 'P-384' }[scheme];
  const key = createPublicKey({ key: { kty: 'EC', crv, x, y }, format: 'jwk' });
  return key.export({ type: 'spki', format: 'der' });
}

/**
 * Public keys as the sandbox's topology state sees them: the conversion
 * between Canton's `SigningPublicKey` (topology model, Ledger API JSON) and the
 * registered keys the submission checks verify with, and the fingerprints that
 * name them.
 */
import type { SigningKeySpec, SigningKeyUsage, SigningPublicKey } from '../../canton/topology/model.js';
import { fingerprint, type ParsedPublicKey, parsePublicKey } from '../../hashing/canton-hash.js';
import { TransactionError } from '../../hashing/errors.js';
import type { KeyScheme } from '../../keys/schemes.js';
import { withArticle } from '../../text/english.js';
import type { RegisteredKey } from '../ledger/parties.js';

/** Topology key spec of each scheme (`crypto.v30.SigningKeySpec`). */
export const SPEC_OF_SCHEME: Readonly<Record<KeyScheme, SigningKeySpec>> = {
  ed25519: 'ec_curve25519',
  'ecdsa-p256': 'ec_p256',
  'ecdsa-p384': 'ec_p384',
  'ecdsa-secp256k1': 'ec_secp256k1',
};

/** Parses key bytes (raw Ed25519 or SPKI DER), or returns why they are not a usable key. */
export function tryParseKey(bytes: Uint8Array): ParsedPublicKey | string {
  try {
    return parsePublicKey(bytes);
  } catch (e) {
    if (e instanceof TransactionError) return e.detail;
    throw e;
  }
}

/**
 * The topology form of a key, as Canton stores it: SPKI DER (a raw Ed25519 key
 * is converted), the key spec set, the deprecated scheme left unspecified.
 */
export function topologyKey(key: ParsedPublicKey, usage: SigningKeyUsage[]): SigningPublicKey {
  return {
    format: 'der_x509_subject_public_key_info',
    publicKey: key.spki,
    scheme: 'unspecified',
    usage,
    keySpec: SPEC_OF_SCHEME[key.algorithm],
  };
}

/**
 * The registered form of a key found in a topology transaction, or why it is
 * not acceptable: the bytes must be a valid key in the stated format and of the
 * stated key spec.
 */
export function registeredKey(key: SigningPublicKey): RegisteredKey | string {
  const f = key.format;
  if (f !== 'raw' && f !== 'der_x509_subject_public_key_info' && f !== 'der')
    return `key format ${f} is not supported for signing keys`;
  if (f === 'raw' && key.publicKey.length !== 32)
    return 'a RAW key must be a 32-byte Ed25519 key (other key specs need SPKI DER)';
  if (f !== 'raw' && key.publicKey.length === 32) return `${withArticle(f)} key cannot be 32 raw bytes`;
  const parsed = tryParseKey(key.publicKey);
  if (typeof parsed === 'string') return parsed;
  if (SPEC_OF_SCHEME[parsed.algorithm] !== key.keySpec)
    return `key spec ${key.keySpec} does not match the key, which is ${parsed.algorithm}`;
  return { fingerprint: fingerprint(key.publicKey), scheme: parsed.algorithm, spki: parsed.spki };
}

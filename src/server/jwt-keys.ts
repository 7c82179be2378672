/**
 * The JWT verification keys the configuration accepts (auth.publicKeys): the
 * algorithms allowed, the key type each needs, and a configured key (PEM or
 * JWK) read as a public JWK — refused when it is private, symmetric, too weak
 * or of an unsupported type, never quoting the key. Used by the configuration
 * schema (src/server/config.ts) and by src/server/auth.ts.
 */
import { createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';

export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;
export const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'] as const;
export const ALGORITHMS = [...ASYMMETRIC_ALGORITHMS, ...HMAC_ALGORITHMS] as const;
export type JwsAlgorithm = (typeof ALGORITHMS)[number];
export type HmacAlgorithm = (typeof HMAC_ALGORITHMS)[number];
export const DEFAULT_ALGORITHMS: readonly JwsAlgorithm[] = ['RS256', 'ES256', 'EdDSA'];

/** RFC 7518 §3.2: an HMAC key at least as long as the hash. */
export const HMAC_MIN_BYTES: Readonly<Record<HmacAlgorithm, number>> = { HS256: 32, HS384: 48, HS512: 64 };

export function isHmacAlgorithm(alg: string): alg is HmacAlgorithm {
  return (HMAC_ALGORITHMS as readonly string[]).includes(alg);
}

/** The key type (and curve) an asymmetric algorithm needs. */
function keyTypeFor(alg: string): { kty: string; crv?: string } | undefined {
  if (/^(RS|PS)\d+$/.test(alg)) return { kty: 'RSA' };
  if (alg === 'ES256') return { kty: 'EC', crv: 'P-256' };
  if (alg === 'ES384') return { kty: 'EC', crv: 'P-384' };
  if (alg === 'ES512') return { kty: 'EC', crv: 'P-521' };
  if (alg === 'EdDSA' || alg === 'Ed25519') return { kty: 'OKP', crv: 'Ed25519' };
  return undefined;
}

export function keyFitsAlgorithm(key: { kty: string; crv?: string }, alg: string): boolean {
  const need = keyTypeFor(alg);
  return need !== undefined && need.kty === key.kty && (need.crv === undefined || need.crv === key.crv);
}

export interface PublicKeyEntry {
  kid?: string;
  alg?: (typeof ASYMMETRIC_ALGORITHMS)[number];
  pem?: string;
  pemFile?: string;
  jwk?: Record<string, unknown>;
}

const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/**
 * The public JWK of a configured key (PEM or JWK), with its kid and alg, or
 * an Error whose message says what is wrong (never quoting the key).
 */
export function publicJwk(entry: PublicKeyEntry): JsonWebKey & { kty: string; crv?: string } {
  let key: KeyObject;
  if (entry.pem !== undefined) {
    if (/PRIVATE KEY/.test(entry.pem)) throw new Error('is a private key; configure only the public key');
    if (!/-----BEGIN (RSA )?PUBLIC KEY-----/.test(entry.pem))
      throw new Error('is not a PEM public key (-----BEGIN PUBLIC KEY-----)');
    try {
      key = createPublicKey(entry.pem);
    } catch {
      throw new Error('is not a readable PEM public key');
    }
  } else if (entry.jwk !== undefined) {
    const jwk = entry.jwk;
    if (jwk.kty === 'oct')
      throw new Error('is a symmetric key; a shared secret belongs in auth.sharedSecret');
    if (PRIVATE_JWK_MEMBERS.some((m) => m in jwk))
      throw new Error('contains private key material; configure only the public key');
    if (jwk.use !== undefined && jwk.use !== 'sig') throw new Error('has "use" other than "sig"');
    try {
      key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
    } catch {
      throw new Error('is not a valid public JWK');
    }
  } else {
    throw new Error('needs pem, pemFile or jwk');
  }
  if (key.type !== 'public') throw new Error('is not a public key');
  const exported = key.export({ format: 'jwk' }) as JsonWebKey & { kty: string; crv?: string };
  if (exported.kty === 'RSA') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < 2048) throw new Error(`is an RSA key of ${bits} bits; at least 2048 are required`);
  } else if (exported.kty === 'EC') {
    if (!['P-256', 'P-384', 'P-521'].includes(exported.crv ?? ''))
      throw new Error(`is on curve ${exported.crv}; JWT verification supports P-256, P-384 and P-521`);
  } else if (!(exported.kty === 'OKP' && exported.crv === 'Ed25519')) {
    throw new Error('is neither RSA, EC nor Ed25519');
  }
  const kid = entry.kid ?? (typeof entry.jwk?.kid === 'string' ? entry.jwk.kid : undefined);
  const alg = entry.alg ?? (typeof entry.jwk?.alg === 'string' ? entry.jwk.alg : undefined);
  return { ...exported, use: 'sig', ...(kid ? { kid } : {}), ...(alg ? { alg } : {}) };
}

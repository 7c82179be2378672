/**
 * The sandbox's token signing key: one ES256 (P-256) key pair per sandbox,
 * derived from the network seed so that the same seed gives the same key and
 * key id. The public half is published as a JWKS; the private half never
 * leaves the process.
 */
import {
  createECDH,
  createHash,
  createHmac,
  createPrivateKey,
  createPublicKey,
  type KeyObject,
} from 'node:crypto';
import type { JWK } from 'jose';

export interface SigningKey {
  alg: 'ES256';
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** The public key as a JWK with `kid`, `alg` and `use`, as the JWKS lists it. */
  publicJwk: JWK;
}

/** Order of the P-256 group. */
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/** The ES256 signing key of a sandbox with this seed. */
export function sandboxSigningKey(seed: string): SigningKey {
  // A private scalar in [1, n-1] from the seed; the HMAC label keeps it apart from the seed's other uses.
  const digest = createHmac('sha256', 'canton-signer sandbox token signing key').update(seed).digest();
  const d = (BigInt(`0x${digest.toString('hex')}`) % (P256_N - 1n)) + 1n;
  const dBytes = Buffer.from(d.toString(16).padStart(64, '0'), 'hex');
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(dBytes);
  const point = ecdh.getPublicKey(); // 0x04 || x || y
  const x = point.subarray(1, 33).toString('base64url');
  const y = point.subarray(33, 65).toString('base64url');
  const privateKey = createPrivateKey({
    key: { kty: 'EC', crv: 'P-256', x, y, d: dBytes.toString('base64url') },
    format: 'jwk',
  });
  const publicKey = createPublicKey(privateKey);
  // Key id: the RFC 7638 thumbprint (SHA-256 of the required members in lexicographic order).
  const kid = createHash('sha256')
    .update(JSON.stringify({ crv: 'P-256', kty: 'EC', x, y }))
    .digest('base64url');
  return {
    alg: 'ES256',
    kid,
    privateKey,
    publicKey,
    publicJwk: { kty: 'EC', crv: 'P-256', x, y, kid, alg: 'ES256', use: 'sig' },
  };
}

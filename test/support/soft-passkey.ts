/**
 * A software passkey for API tests (ES256): registers with the service's
 * passkey options exactly as a browser's authenticator would answer
 * navigator.credentials.create (attestation "none", user present and
 * verified), and signs approval challenges as navigator.credentials.get
 * would. Every field can be bent by the caller to build attacks.
 */
import { createHash, randomBytes } from 'node:crypto';
import { p256 } from '@noble/curves/nist.js';

const sha256 = (b: Uint8Array | string) => new Uint8Array(createHash('sha256').update(b).digest());
const b64u = (b: Uint8Array) => Buffer.from(b).toString('base64url');
const cat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

/** A minimal CBOR encoder (definite lengths, shortest form), enough for attestation objects and COSE keys. */
export type Cbor = number | string | Uint8Array | boolean | null | Cbor[] | Map<number | string, Cbor>;

function head(major: number, n: number): number[] {
  if (n < 24) return [(major << 5) | n];
  if (n < 0x100) return [(major << 5) | 24, n];
  if (n < 0x10000) return [(major << 5) | 25, n >> 8, n & 0xff];
  return [(major << 5) | 26, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
}

export function cbor(v: Cbor): Uint8Array {
  const out: number[] = [];
  const put = (x: Cbor): void => {
    if (typeof x === 'number') out.push(...(x >= 0 ? head(0, x) : head(1, -1 - x)));
    else if (typeof x === 'string') {
      const b = Buffer.from(x, 'utf8');
      out.push(...head(3, b.length), ...b);
    } else if (x instanceof Uint8Array) out.push(...head(2, x.length), ...x);
    else if (x === false) out.push(0xf4);
    else if (x === true) out.push(0xf5);
    else if (x === null) out.push(0xf6);
    else if (Array.isArray(x)) {
      out.push(...head(4, x.length));
      for (const i of x) put(i);
    } else {
      out.push(...head(5, x.size));
      for (const [k, i] of x) {
        put(k);
        put(i);
      }
    }
  };
  put(v);
  return new Uint8Array(out);
}

export interface SoftPasskey {
  credentialId: Uint8Array;
  secretKey: Uint8Array;
  rpId: string;
  origin: string;
  signCount: number;
}

export function softPasskey(rpId: string, origin: string): SoftPasskey {
  return {
    credentialId: randomBytes(16),
    secretKey: p256.utils.randomSecretKey(),
    rpId,
    origin,
    signCount: 0,
  };
}

function authData(k: SoftPasskey, flags: number, rest: Uint8Array = new Uint8Array(0)): Uint8Array {
  const count = new Uint8Array(4);
  new DataView(count.buffer).setUint32(0, k.signCount);
  return cat(sha256(k.rpId), new Uint8Array([flags]), count, rest);
}

/** navigator.credentials.create's answer to a challenge (base64url). */
export function registration(
  k: SoftPasskey,
  challenge: string,
  o: { origin?: string } = {},
): { clientDataJSON: string; attestationObject: string } {
  const pub = p256.getPublicKey(k.secretKey, false);
  const cose = new Map<number | string, Cbor>([
    [1, 2],
    [3, -7],
    [-1, 1],
    [-2, pub.slice(1, 33)],
    [-3, pub.slice(33)],
  ]);
  const id = k.credentialId;
  const attested = cat(
    new Uint8Array(16),
    new Uint8Array([id.length >> 8, id.length & 0xff]),
    id,
    cbor(cose),
  );
  const data = authData(k, 0x01 | 0x04 | 0x40, attested);
  const clientData = JSON.stringify({ type: 'webauthn.create', challenge, origin: o.origin ?? k.origin });
  return {
    clientDataJSON: b64u(Buffer.from(clientData)),
    attestationObject: b64u(
      cbor(
        new Map<number | string, Cbor>([
          ['fmt', 'none'],
          ['attStmt', new Map()],
          ['authData', data],
        ]),
      ),
    ),
  };
}

/** navigator.credentials.get's answer for `challenge` (the 32-byte approval message). */
export function assertion(
  k: SoftPasskey,
  challenge: Uint8Array,
  o: { origin?: string; userVerified?: boolean } = {},
): { credentialId: string; authenticatorData: string; clientDataJSON: string; signature: string } {
  k.signCount++;
  const data = authData(k, 0x01 | (o.userVerified === false ? 0 : 0x04));
  const clientData = Buffer.from(
    JSON.stringify({ type: 'webauthn.get', challenge: b64u(challenge), origin: o.origin ?? k.origin }),
  );
  const compact = p256.sign(cat(data, sha256(clientData)), k.secretKey, { prehash: true });
  const sig = p256.Signature.fromBytes(compact, 'compact').toBytes('der');
  return {
    credentialId: b64u(k.credentialId),
    authenticatorData: b64u(data),
    clientDataJSON: b64u(clientData),
    signature: b64u(sig),
  };
}

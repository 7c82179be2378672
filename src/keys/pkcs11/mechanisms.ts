/**
 * PKCS#11 mechanisms, key types and attribute encodings canton-signer uses,
 * including the PKCS#11 3.0 values pkcs11js 2.x has no names for, and how a
 * token's mechanism list turns into a plan for each signing scheme.
 */
import { KEY_SCHEMES, type KeyScheme, SCHEMES } from '../schemes.js';

// Mechanisms and key types pkcs11js 2.x has no names for (PKCS#11 3.0).
export const CKM_EC_KEY_PAIR_GEN = 0x1040;
export const CKM_ECDSA = 0x1041;
export const CKM_ECDSA_SHA256 = 0x1044;
export const CKM_ECDSA_SHA384 = 0x1045;
export const CKM_EC_EDWARDS_KEY_PAIR_GEN = 0x1055;
export const CKM_EDDSA = 0x1057;
export const CKK_EC = 0x03;
export const CKK_EC_EDWARDS = 0x40;
// Session states of a session whose user is logged in.
export const CKS_RO_USER_FUNCTIONS = 1;
export const CKS_RW_USER_FUNCTIONS = 3;

export const MECHANISM_NAMES: Record<number, string> = {
  [CKM_EC_KEY_PAIR_GEN]: 'CKM_EC_KEY_PAIR_GEN',
  [CKM_ECDSA]: 'CKM_ECDSA',
  [CKM_ECDSA_SHA256]: 'CKM_ECDSA_SHA256',
  [CKM_ECDSA_SHA384]: 'CKM_ECDSA_SHA384',
  [CKM_EC_EDWARDS_KEY_PAIR_GEN]: 'CKM_EC_EDWARDS_KEY_PAIR_GEN',
  [CKM_EDDSA]: 'CKM_EDDSA',
};

/** CKA_EC_PARAMS of Ed25519 keys as PKCS#11 3.0 also allows: PrintableString "edwards25519" (SoftHSM uses it on private keys). */
export const EDWARDS25519_NAME = Buffer.concat([Buffer.from([0x13, 12]), Buffer.from('edwards25519')]);

/** A CK_ULONG as pkcs11js returns it (native byte order, which is little-endian everywhere Node runs). */
export function ulong(b: Buffer): number {
  return b.length >= 8 ? Number(b.readBigUInt64LE(0)) : b.readUInt32LE(0);
}

export function schemeOf(keyType: number, params: Buffer | undefined): KeyScheme | undefined {
  if (params === undefined) return undefined;
  if (keyType === CKK_EC_EDWARDS)
    return params.equals(SCHEMES.ed25519.ecParams) || params.equals(EDWARDS25519_NAME)
      ? 'ed25519'
      : undefined;
  if (keyType !== CKK_EC) return undefined;
  return KEY_SCHEMES.find((s) => s !== 'ed25519' && SCHEMES[s].ecParams.equals(params));
}

/**
 * CKA_EC_POINT to the raw public key (32 bytes for Ed25519, 04‖x‖y for
 * ECDSA). Tokens return it DER-wrapped (OCTET STRING); a few return it bare.
 */
export function rawPublicKey(scheme: KeyScheme, point: Buffer): Buffer | undefined {
  const size = scheme === 'ed25519' ? 32 : 1 + 2 * SCHEMES[scheme].fieldBytes;
  if (point.length === size && (scheme === 'ed25519' || point[0] === 4)) return point;
  if (point[0] !== 0x04 || point.length < 2) return undefined;
  let header = 2;
  let length = point[1]!;
  if (length === 0x81 && point.length >= 3) {
    length = point[2]!;
    header = 3;
  }
  if (length !== size || header + length !== point.length) return undefined;
  return point.subarray(header);
}

/** CKA_START_DATE "YYYYMMDD" to ISO-8601 (midnight UTC), '' when absent or malformed. */
export function isoDate(date: Buffer | undefined): string {
  const text = date?.toString('latin1') ?? '';
  const m = /^(\d{4})(\d{2})(\d{2})$/.exec(text);
  if (!m || text === '00000000') return '';
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

export function today(): Buffer {
  return Buffer.from(new Date().toISOString().slice(0, 10).replaceAll('-', ''), 'latin1');
}

export interface Plan {
  generate: number;
  sign: number;
  /** Sign the host-computed digest (CKM_ECDSA) rather than the message. */
  hostHash: boolean;
  keyType: number;
}

/** How the token can make and use keys of a scheme, or which mechanisms it lacks. */
export function planFor(
  scheme: KeyScheme,
  mechanisms: ReadonlySet<number>,
): { plan?: Plan; missing: string[] } {
  const missing: string[] = [];
  if (scheme === 'ed25519') {
    if (!mechanisms.has(CKM_EC_EDWARDS_KEY_PAIR_GEN)) missing.push('CKM_EC_EDWARDS_KEY_PAIR_GEN');
    if (!mechanisms.has(CKM_EDDSA)) missing.push('CKM_EDDSA');
    if (missing.length > 0) return { missing };
    return {
      plan: {
        generate: CKM_EC_EDWARDS_KEY_PAIR_GEN,
        sign: CKM_EDDSA,
        hostHash: false,
        keyType: CKK_EC_EDWARDS,
      },
      missing,
    };
  }
  const withDigest = scheme === 'ecdsa-p384' ? CKM_ECDSA_SHA384 : CKM_ECDSA_SHA256;
  if (!mechanisms.has(CKM_EC_KEY_PAIR_GEN)) missing.push('CKM_EC_KEY_PAIR_GEN');
  const sign = mechanisms.has(withDigest) ? withDigest : mechanisms.has(CKM_ECDSA) ? CKM_ECDSA : undefined;
  if (sign === undefined) missing.push(`${MECHANISM_NAMES[withDigest]} or CKM_ECDSA`);
  if (missing.length > 0 || sign === undefined) return { missing };
  return {
    plan: { generate: CKM_EC_KEY_PAIR_GEN, sign, hostHash: sign === CKM_ECDSA, keyType: CKK_EC },
    missing,
  };
}

/**
 * WebAuthn for passkey approvers, the pure part: reading a registration
 * (attestation 'none' only) into the approver's public key, verifying an
 * assertion made with that key (ES256 or EdDSA), and the canonical JSON text
 * forms an assertion and a passkey key are stored as.
 *
 * Everything here reads bytes a browser relayed from a caller, so every
 * input is bounded and parsed strictly: base64url in its one canonical form,
 * a minimal CBOR decoder (definite lengths, shortest encodings, no tags or
 * floats, bounded depth, no duplicate map keys), and authenticator data that
 * must be consumed exactly. Refusals are WebAuthnError with a code and a
 * sentence; nothing secret is ever part of a message.
 *
 * One file on purpose: its parsers (base64url, CBOR, authenticator data) exist
 * only for these two messages, and their bounds are reviewed together as one
 * boundary facing untrusted input.
 */
import {
  createHash,
  createPublicKey,
  constants as cryptoConstants,
  verify as rsaVerify,
  timingSafeEqual,
} from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519.js';
import { p256 } from '@noble/curves/nist.js';
import { canonicalJson } from '../store/canonical.js';

/**
 * COSE algorithm identifiers: ES256 (P-256 with SHA-256), EdDSA (Ed25519),
 * and RS256 (RSA PKCS#1 v1.5 with SHA-256, which some platform
 * authenticators offer alone).
 */
export type CoseAlg = -7 | -8 | -257;

/** An approver's passkey, as registration yields it and the store keeps it. */
export interface PasskeyKey {
  /** base64url, no padding. */
  credentialId: string;
  alg: CoseAlg;
  /**
   * Hex: P-256 uncompressed (65 bytes, 04 || x || y), Ed25519 raw (32 bytes), or the RSA modulus
   * (256 to 512 bytes; the exponent is always 65537).
   */
  publicKey: string;
  rpId: string;
  /** The origin the passkey was registered from. */
  origin: string;
}

/** What the relying party expects of a ceremony. */
export interface Expected {
  challenge: Uint8Array;
  rpId: string;
  origins: readonly string[];
  requireUserVerification: boolean;
}

/** A navigator.credentials.create() response; base64url each. */
export interface Registration {
  clientDataJSON: string;
  attestationObject: string;
}

/** A navigator.credentials.get() response; base64url each. */
export interface Assertion {
  credentialId: string;
  authenticatorData: string;
  clientDataJSON: string;
  signature: string;
}

/**
 * A refused ceremony. `code` is one of: bad_client_data, wrong_type,
 * wrong_challenge, wrong_origin, cross_origin, wrong_rp, not_user_present,
 * not_user_verified, unsupported_attestation, unsupported_key, bad_signature,
 * wrong_credential, malformed.
 */
export class WebAuthnError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'WebAuthnError';
  }
}

// Size bounds, in decoded bytes. A credential id is at most 1023 bytes (WebAuthn
// level 2); the others are generous for what real authenticators produce.
const MAX_CREDENTIAL_ID = 1023;
const MAX_CLIENT_DATA = 4096;
const MAX_AUTH_DATA = 4096;
const MAX_ATTESTATION_OBJECT = 16384;
const MAX_SIGNATURE = 512;
const MAX_CHALLENGE = 1024;
const MAX_RP_ID = 253;
const MAX_ORIGIN = 2048;
/** Bound on stored text (decodeAssertion / decodePasskeyKey). */
const MAX_STORED_TEXT = 32768;
/** CBOR nesting bound: a COSE key or an attestation object needs far less. */
const MAX_CBOR_DEPTH = 8;

const FLAG_UP = 0x01;
const FLAG_UV = 0x04;
const FLAG_AT = 0x40;
const FLAG_ED = 0x80;

const fail = (code: string, message: string): never => {
  throw new WebAuthnError(code, message);
};

const sha256 = (data: Uint8Array | string): Uint8Array =>
  new Uint8Array(createHash('sha256').update(data).digest());

const toHex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** A short, quoted rendering of a caller's string for a message. */
const quote = (s: string): string => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}…` : s);

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * The bytes of canonical, unpadded base64url text of at most `maxBytes`
 * decoded bytes; refused as malformed otherwise. Canonical means the text is
 * exactly what encoding its bytes gives back (no stray trailing bits).
 */
function fromBase64url(text: unknown, what: string, maxBytes: number): Uint8Array {
  if (typeof text !== 'string') return fail('malformed', `The ${what} is not a string.`);
  if (text.length > Math.ceil((maxBytes * 4) / 3))
    return fail('malformed', `The ${what} is longer than ${maxBytes} bytes.`);
  if (!BASE64URL.test(text) || text.length % 4 === 1)
    return fail('malformed', `The ${what} is not unpadded base64url.`);
  const bytes = Buffer.from(text, 'base64url');
  if (bytes.toString('base64url') !== text)
    return fail('malformed', `The ${what} is not canonical base64url.`);
  return new Uint8Array(bytes);
}

const toBase64url = (b: Uint8Array): string => Buffer.from(b).toString('base64url');

// ---------------------------------------------------------------------------
// CBOR: the subset WebAuthn uses (RFC 8949 major types 0-5, and false, true,
// null), definite lengths and shortest encodings only.

type CborValue = number | Uint8Array | string | boolean | null | CborValue[] | CborMap;
type CborMap = Map<number | string, CborValue>;

class CborReader {
  pos: number;
  constructor(
    readonly bytes: Uint8Array,
    start: number,
  ) {
    this.pos = start;
  }

  private need(n: number): void {
    if (n > this.bytes.length - this.pos) fail('malformed', 'The CBOR data ends early.');
  }

  private byte(): number {
    this.need(1);
    return this.bytes[this.pos++] as number;
  }

  /** The argument of a head with additional information `ai`, shortest form required. */
  private argument(ai: number): number {
    if (ai < 24) return ai;
    let value: number;
    let min: number;
    if (ai === 24) {
      value = this.byte();
      min = 24;
    } else if (ai === 25) {
      this.need(2);
      value = ((this.bytes[this.pos] as number) << 8) | (this.bytes[this.pos + 1] as number);
      this.pos += 2;
      min = 0x100;
    } else if (ai === 26) {
      this.need(4);
      value = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.pos, 4).getUint32(0);
      this.pos += 4;
      min = 0x10000;
    } else if (ai === 27) {
      this.need(8);
      const big = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.pos, 8).getBigUint64(0);
      this.pos += 8;
      if (big > BigInt(Number.MAX_SAFE_INTEGER)) return fail('malformed', 'A CBOR integer is too large.');
      value = Number(big);
      min = 0x100000000;
    } else if (ai === 31) {
      return fail('malformed', 'The CBOR data uses an indefinite length, which is not allowed.');
    } else {
      return fail('malformed', 'The CBOR data uses a reserved encoding.');
    }
    if (value < min) fail('malformed', 'The CBOR data is not in its shortest encoding.');
    return value;
  }

  read(depth: number): CborValue {
    if (depth > MAX_CBOR_DEPTH) return fail('malformed', 'The CBOR data is nested too deeply.');
    const head = this.byte();
    const major = head >> 5;
    const ai = head & 0x1f;
    switch (major) {
      case 0:
        return this.argument(ai);
      case 1:
        return -1 - this.argument(ai);
      case 2:
      case 3: {
        const len = this.argument(ai);
        this.need(len);
        const slice = this.bytes.slice(this.pos, this.pos + len);
        this.pos += len;
        if (major === 2) return slice;
        try {
          return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(slice);
        } catch {
          return fail('malformed', 'A CBOR text string is not UTF-8.');
        }
      }
      case 4: {
        const len = this.argument(ai);
        // Every item takes at least one byte: a longer count cannot be honest.
        this.need(len);
        const out: CborValue[] = [];
        for (let i = 0; i < len; i++) out.push(this.read(depth + 1));
        return out;
      }
      case 5: {
        const len = this.argument(ai);
        this.need(len * 2);
        const out: CborMap = new Map();
        for (let i = 0; i < len; i++) {
          const key = this.read(depth + 1);
          if (typeof key !== 'number' && typeof key !== 'string')
            return fail('malformed', 'A CBOR map key is neither an integer nor a text string.');
          if (out.has(key)) return fail('malformed', 'A CBOR map has a duplicate key.');
          out.set(key, this.read(depth + 1));
        }
        return out;
      }
      case 7:
        if (ai === 20) return false;
        if (ai === 21) return true;
        if (ai === 22) return null;
        return fail('malformed', 'The CBOR data holds a float or an unsupported simple value.');
      default:
        return fail('malformed', 'The CBOR data holds a tag, which is not allowed.');
    }
  }
}

/** One CBOR item at `start`, and where it ends. */
function cborItem(bytes: Uint8Array, start: number): { value: CborValue; end: number } {
  const reader = new CborReader(bytes, start);
  const value = reader.read(0);
  return { value, end: reader.pos };
}

/** Exactly one CBOR item filling `bytes`. */
function cborExactly(bytes: Uint8Array, what: string): CborValue {
  const { value, end } = cborItem(bytes, 0);
  if (end !== bytes.length) fail('malformed', `The ${what} has bytes after its CBOR data.`);
  return value;
}

const isMap = (v: CborValue | undefined): v is CborMap => v instanceof Map;

// ---------------------------------------------------------------------------
// Client data.

function checkClientData(bytes: Uint8Array, type: 'webauthn.create' | 'webauthn.get', e: Expected): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes));
  } catch {
    return fail('bad_client_data', 'The client data is not UTF-8 JSON.');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    return fail('bad_client_data', 'The client data is not a JSON object.');
  const c = parsed as Record<string, unknown>;
  if (typeof c.type !== 'string' || typeof c.challenge !== 'string' || typeof c.origin !== 'string')
    return fail('bad_client_data', 'The client data lacks its type, challenge or origin.');
  if (c.type !== type)
    return fail('wrong_type', `The client data is for ${quote(c.type)}, not ${quote(type)}.`);
  let challenge: Uint8Array;
  try {
    challenge = fromBase64url(c.challenge, 'challenge', MAX_CHALLENGE);
  } catch {
    return fail('bad_client_data', 'The client data challenge is not unpadded base64url.');
  }
  if (
    challenge.length !== e.challenge.length ||
    !timingSafeEqual(Buffer.from(challenge), Buffer.from(e.challenge))
  )
    return fail('wrong_challenge', 'The client data answers another challenge.');
  if (!e.origins.includes(c.origin))
    return fail('wrong_origin', `The origin ${quote(c.origin)} is not one this service accepts.`);
  if (c.crossOrigin !== undefined && typeof c.crossOrigin !== 'boolean')
    return fail('bad_client_data', 'The client data crossOrigin member is not a boolean.');
  if (c.crossOrigin === true)
    return fail('cross_origin', 'The ceremony ran in a cross-origin frame, which is refused.');
  return c.origin;
}

// ---------------------------------------------------------------------------
// Authenticator data.

interface AuthData {
  flags: number;
  signCount: number;
  /** Where the data after the 37-byte fixed part begins. */
  rest: number;
}

function checkAuthDataHead(bytes: Uint8Array, e: Expected): AuthData {
  if (bytes.length < 37) return fail('malformed', 'The authenticator data is shorter than 37 bytes.');
  const rpIdHash = sha256(e.rpId);
  if (!timingSafeEqual(Buffer.from(bytes.subarray(0, 32)), Buffer.from(rpIdHash)))
    return fail('wrong_rp', `The authenticator data is for another relying party than ${quote(e.rpId)}.`);
  const flags = bytes[32] as number;
  if ((flags & FLAG_UP) === 0)
    return fail('not_user_present', 'The authenticator did not confirm the user was present.');
  if (e.requireUserVerification && (flags & FLAG_UV) === 0)
    return fail(
      'not_user_verified',
      'The authenticator did not verify the user, and verification is required.',
    );
  const signCount = new DataView(bytes.buffer, bytes.byteOffset + 33, 4).getUint32(0);
  return { flags, signCount, rest: 37 };
}

/** The extensions map after `at` when the ED flag is set; otherwise nothing may follow. */
function checkAuthDataTail(bytes: Uint8Array, flags: number, at: number): void {
  if ((flags & FLAG_ED) === 0) {
    if (at !== bytes.length) fail('malformed', 'The authenticator data has unexpected trailing bytes.');
    return;
  }
  if (at === bytes.length) fail('malformed', 'The authenticator data announces extensions but has none.');
  const { value, end } = cborItem(bytes, at);
  if (!isMap(value)) fail('malformed', 'The authenticator data extensions are not a CBOR map.');
  if (end !== bytes.length) fail('malformed', 'The authenticator data has bytes after its extensions.');
}

// ---------------------------------------------------------------------------
// Keys.

const EC2_LABELS = new Set<number | string>([1, 3, -1, -2, -3]);
const OKP_LABELS = new Set<number | string>([1, 3, -1, -2]);
const RSA_LABELS = new Set<number | string>([1, 3, -1, -2]);
const RSA_E_65537 = '010001';

const bytes32 = (v: CborValue | undefined): v is Uint8Array => v instanceof Uint8Array && v.length === 32;

/** The public key a COSE_Key names, as PasskeyKey holds it. */
function coseKey(value: CborValue): { alg: CoseAlg; publicKey: string } {
  if (!isMap(value)) return fail('malformed', 'The credential public key is not a CBOR map.');
  const kty = value.get(1);
  const alg = value.get(3);
  if (kty === 2 && alg === -7) {
    for (const k of value.keys())
      if (!EC2_LABELS.has(k))
        fail('unsupported_key', 'The ES256 public key has a member this service does not accept.');
    const x = value.get(-2);
    const y = value.get(-3);
    if (value.get(-1) !== 1) return fail('unsupported_key', 'The ES256 public key is not on curve P-256.');
    if (!bytes32(x) || !bytes32(y))
      return fail('unsupported_key', 'The ES256 public key coordinates are not 32 bytes each.');
    const publicKey = new Uint8Array(65);
    publicKey[0] = 4;
    publicKey.set(x, 1);
    publicKey.set(y, 33);
    return { alg: -7, publicKey: checkPublicKey(-7, toHex(publicKey)) };
  }
  if (kty === 1 && alg === -8) {
    for (const k of value.keys())
      if (!OKP_LABELS.has(k))
        fail('unsupported_key', 'The EdDSA public key has a member this service does not accept.');
    const x = value.get(-2);
    if (value.get(-1) !== 6) return fail('unsupported_key', 'The EdDSA public key is not an Ed25519 key.');
    if (!bytes32(x)) return fail('unsupported_key', 'The Ed25519 public key is not 32 bytes.');
    return { alg: -8, publicKey: checkPublicKey(-8, toHex(x)) };
  }
  if (kty === 3 && alg === -257) {
    for (const k of value.keys())
      if (!RSA_LABELS.has(k))
        fail('unsupported_key', 'The RS256 public key has a member this service does not accept.');
    const n = value.get(-1);
    const e = value.get(-2);
    if (!(e instanceof Uint8Array) || toHex(e) !== RSA_E_65537)
      return fail('unsupported_key', 'The RS256 public key does not use the exponent 65537.');
    if (!(n instanceof Uint8Array)) return fail('unsupported_key', 'The RS256 public key has no modulus.');
    return { alg: -257, publicKey: checkPublicKey(-257, toHex(n)) };
  }
  return fail(
    'unsupported_key',
    'The credential key is neither ES256 (P-256), EdDSA (Ed25519) nor RS256 (RSA, 2048 to 4096 bits).',
  );
}

/**
 * A valid public key for `alg`, as lowercase hex: malformed when it is not
 * hex of the right length, unsupported_key when it is no usable point.
 */
function checkPublicKey(alg: unknown, publicKey: unknown): string {
  if (alg === -257) {
    if (typeof publicKey !== 'string' || !/^([0-9a-f]{2}){256,512}$/.test(publicKey))
      return fail('malformed', 'The RSA modulus is not 256 to 512 bytes of lowercase hex.');
    if (Number.parseInt(publicKey.slice(0, 2), 16) < 0x80)
      return fail('unsupported_key', 'The RSA modulus is shorter than its length says (2048 bits at least).');
    return publicKey;
  }
  if (alg !== -7 && alg !== -8)
    return fail('unsupported_key', 'The key algorithm is neither ES256, EdDSA nor RS256.');
  const len = alg === -7 ? 65 : 32;
  if (typeof publicKey !== 'string' || !new RegExp(`^[0-9a-f]{${len * 2}}$`).test(publicKey))
    return fail('malformed', `The public key is not ${len} bytes of lowercase hex.`);
  const raw = Buffer.from(publicKey, 'hex');
  try {
    if (alg === -7) {
      if (raw[0] !== 4) throw new Error('not uncompressed');
      p256.Point.fromBytes(raw).assertValidity();
    } else if (ed25519.Point.fromBytes(raw, false).isSmallOrder()) throw new Error('small order');
  } catch {
    return fail('unsupported_key', 'The public key is not a valid point of its curve.');
  }
  return publicKey;
}

// ---------------------------------------------------------------------------
// Ceremonies.

/**
 * Reads a registration (attestation 'none') into the approver's passkey.
 * Throws WebAuthnError saying what was wrong.
 */
export function parseRegistration(r: Registration, e: Expected): PasskeyKey {
  if (typeof r !== 'object' || r === null) return fail('malformed', 'The registration is not an object.');
  const clientData = fromBase64url(r.clientDataJSON, 'client data', MAX_CLIENT_DATA);
  const attestation = fromBase64url(r.attestationObject, 'attestation object', MAX_ATTESTATION_OBJECT);
  const origin = checkClientData(clientData, 'webauthn.create', e);

  const object = cborExactly(attestation, 'attestation object');
  if (!isMap(object)) return fail('malformed', 'The attestation object is not a CBOR map.');
  for (const k of object.keys())
    if (k !== 'fmt' && k !== 'attStmt' && k !== 'authData')
      fail('malformed', 'The attestation object has a member other than fmt, attStmt and authData.');
  const fmt = object.get('fmt');
  const attStmt = object.get('attStmt');
  const authData = object.get('authData');
  if (typeof fmt !== 'string' || !isMap(attStmt) || !(authData instanceof Uint8Array))
    return fail('malformed', 'The attestation object lacks its fmt, attStmt or authData.');
  if (fmt !== 'none')
    return fail(
      'unsupported_attestation',
      `The attestation format is ${quote(fmt)}; this service requests and accepts only 'none'.`,
    );
  if (attStmt.size !== 0) return fail('malformed', "The 'none' attestation statement is not empty.");

  const head = checkAuthDataHead(authData, e);
  if ((head.flags & FLAG_AT) === 0)
    return fail('malformed', 'The authenticator data carries no attested credential data.');
  let at = head.rest;
  // aaguid (16 bytes), then the credential id's length (2 bytes, big-endian).
  if (authData.length < at + 18) return fail('malformed', 'The attested credential data ends early.');
  at += 16;
  const idLen = ((authData[at] as number) << 8) | (authData[at + 1] as number);
  at += 2;
  if (idLen === 0 || idLen > MAX_CREDENTIAL_ID)
    return fail('malformed', `The credential id length ${idLen} is outside 1..${MAX_CREDENTIAL_ID}.`);
  if (authData.length < at + idLen) return fail('malformed', 'The credential id ends early.');
  const credentialId = authData.slice(at, at + idLen);
  at += idLen;
  const { value, end } = cborItem(authData, at);
  const key = coseKey(value);
  checkAuthDataTail(authData, head.flags, end);

  return {
    credentialId: toBase64url(credentialId),
    alg: key.alg,
    publicKey: key.publicKey,
    rpId: e.rpId,
    origin,
  };
}

/**
 * Verifies an assertion made with `key` for what `e` expects; returns the
 * authenticator's signature counter. Throws WebAuthnError.
 */
export function verifyAssertion(key: PasskeyKey, a: Assertion, e: Expected): { signCount: number } {
  const k = checkKeyShape(key);
  if (typeof a !== 'object' || a === null) return fail('malformed', 'The assertion is not an object.');
  if (k.rpId !== e.rpId)
    return fail('wrong_rp', `The passkey belongs to ${quote(k.rpId)}, not ${quote(e.rpId)}.`);
  fromBase64url(a.credentialId, 'credential id', MAX_CREDENTIAL_ID);
  if (a.credentialId !== k.credentialId)
    return fail('wrong_credential', 'The assertion was made with another credential.');
  const authData = fromBase64url(a.authenticatorData, 'authenticator data', MAX_AUTH_DATA);
  const clientData = fromBase64url(a.clientDataJSON, 'client data', MAX_CLIENT_DATA);
  const signature = fromBase64url(a.signature, 'signature', MAX_SIGNATURE);

  checkClientData(clientData, 'webauthn.get', e);
  const head = checkAuthDataHead(authData, e);
  if ((head.flags & FLAG_AT) !== 0)
    return fail('malformed', 'The authenticator data of an assertion carries attested credential data.');
  checkAuthDataTail(authData, head.flags, head.rest);

  const message = new Uint8Array(authData.length + 32);
  message.set(authData, 0);
  message.set(sha256(clientData), authData.length);
  let ok = false;
  try {
    const publicKey = Buffer.from(k.publicKey, 'hex');
    if (k.alg === -7) {
      // DER, as WebAuthn specifies; authenticators may emit high-S, which is valid ECDSA.
      ok = p256.verify(signature, message, publicKey, { format: 'der', prehash: true, lowS: false });
    } else if (k.alg === -8) {
      ok = signature.length === 64 && ed25519.verify(signature, message, publicKey, { zip215: false });
    } else {
      const key = createPublicKey({
        key: { kty: 'RSA', n: publicKey.toString('base64url'), e: 'AQAB' },
        format: 'jwk',
      });
      ok =
        signature.length === publicKey.length &&
        rsaVerify('sha256', message, { key, padding: cryptoConstants.RSA_PKCS1_PADDING }, signature);
    }
  } catch {
    ok = false;
  }
  if (!ok) return fail('bad_signature', 'The assertion signature does not verify with the passkey.');
  return { signCount: head.signCount };
}

/** Whether `a` is a valid assertion by `key` for `e`; false for anything malformed, never throws. */
export function checkAssertion(key: PasskeyKey, a: unknown, e: Expected): boolean {
  try {
    verifyAssertion(key, checkAssertionShape(a), e);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------
// Stored forms.

const ASSERTION_FIELDS = ['authenticatorData', 'clientDataJSON', 'credentialId', 'signature'] as const;
const KEY_FIELDS = ['alg', 'credentialId', 'origin', 'publicKey', 'rpId'] as const;

/** A plain object with exactly `fields` as its own members. */
function exactObject(value: unknown, fields: readonly string[], what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return fail('malformed', `The ${what} is not an object.`);
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null)
    return fail('malformed', `The ${what} is not a plain object.`);
  const keys = Object.keys(value);
  if (keys.length !== fields.length || !fields.every((f) => Object.hasOwn(value, f)))
    return fail('malformed', `The ${what} must have exactly the members ${fields.join(', ')}.`);
  return value as Record<string, unknown>;
}

function checkAssertionShape(value: unknown): Assertion {
  const o = exactObject(value, ASSERTION_FIELDS, 'assertion');
  fromBase64url(o.credentialId, 'credential id', MAX_CREDENTIAL_ID);
  fromBase64url(o.authenticatorData, 'authenticator data', MAX_AUTH_DATA);
  fromBase64url(o.clientDataJSON, 'client data', MAX_CLIENT_DATA);
  fromBase64url(o.signature, 'signature', MAX_SIGNATURE);
  return {
    credentialId: o.credentialId as string,
    authenticatorData: o.authenticatorData as string,
    clientDataJSON: o.clientDataJSON as string,
    signature: o.signature as string,
  };
}

const boundedText = (v: unknown, what: string, max: number): string => {
  if (typeof v !== 'string' || v.length === 0 || v.length > max)
    return fail('malformed', `The ${what} is not a text of 1 to ${max} characters.`);
  return v;
};

function checkKeyShape(value: unknown): PasskeyKey {
  const o = exactObject(value, KEY_FIELDS, 'passkey');
  const credentialId = o.credentialId;
  if (fromBase64url(credentialId, 'credential id', MAX_CREDENTIAL_ID).length === 0)
    fail('malformed', 'The credential id is empty.');
  const publicKey = checkPublicKey(o.alg, o.publicKey);
  return {
    credentialId: credentialId as string,
    alg: o.alg as CoseAlg,
    publicKey,
    rpId: boundedText(o.rpId, 'relying party id', MAX_RP_ID),
    origin: boundedText(o.origin, 'origin', MAX_ORIGIN),
  };
}

/** Parses stored text that must be exactly the canonical JSON of what it holds. */
function parseCanonical(text: unknown, what: string): unknown {
  if (typeof text !== 'string' || text.length > MAX_STORED_TEXT)
    return fail('malformed', `The stored ${what} is not a text of at most ${MAX_STORED_TEXT} characters.`);
  try {
    return JSON.parse(text);
  } catch {
    return fail('malformed', `The stored ${what} is not JSON.`);
  }
}

/** The canonical JSON text an assertion is stored as (approvals.signature). */
export function encodeAssertion(a: Assertion): string {
  return canonicalJson(checkAssertionShape({ ...a }));
}

/** The assertion stored as `text`; refuses anything but the canonical form encodeAssertion writes. */
export function decodeAssertion(text: string): Assertion {
  const a = checkAssertionShape(parseCanonical(text, 'assertion'));
  if (canonicalJson(a) !== text) fail('malformed', 'The stored assertion is not in its canonical form.');
  return a;
}

/** The canonical JSON text a passkey is stored as (approver_credentials.public_key). */
export function encodePasskeyKey(k: PasskeyKey): string {
  return canonicalJson(checkKeyShape({ ...k }));
}

/** The passkey stored as `text`; refuses anything but the canonical form encodePasskeyKey writes. */
export function decodePasskeyKey(text: string): PasskeyKey {
  const k = checkKeyShape(parseCanonical(text, 'passkey'));
  if (canonicalJson(k) !== text) fail('malformed', 'The stored passkey is not in its canonical form.');
  return k;
}

/**
 * src/policy/webauthn.ts against a software authenticator built here (P-256
 * and Ed25519 keys, client data, authenticator data, and a CBOR encoder for
 * the attestation object): valid ceremonies pass, each mutation is refused
 * with its code, high-S ES256 signatures are accepted, checkAssertion never
 * throws on junk, and the stored text forms round-trip and refuse anything
 * but their canonical shape.
 */
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519.js';
import { p256 } from '@noble/curves/nist.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Assertion,
  checkAssertion,
  decodeAssertion,
  decodePasskeyKey,
  type Expected,
  encodeAssertion,
  encodePasskeyKey,
  type PasskeyKey,
  parseRegistration,
  type Registration,
  verifyAssertion,
  WebAuthnError,
} from '../../src/policy/webauthn.js';
import { type Cbor, cbor } from '../support/soft-passkey.js';

// --- the software authenticator ----------------------------------------------

const sha256 = (b: Uint8Array | string) => new Uint8Array(createHash('sha256').update(b).digest());
const b64u = (b: Uint8Array) => Buffer.from(b).toString('base64url');
const unb64u = (s: string) => new Uint8Array(Buffer.from(s, 'base64url'));
const cat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

const RP_ID = 'signer.example.com';
const ORIGIN = 'https://signer.example.com';
const CHALLENGE = new Uint8Array(32).map((_, i) => i * 7 + 3);
const EXPECTED: Expected = {
  challenge: CHALLENGE,
  rpId: RP_ID,
  origins: [ORIGIN, 'https://console.example.com'],
  requireUserVerification: true,
};

const UP = 0x01;
const UV = 0x04;
const AT = 0x40;
const ED = 0x80;

type Alg = -7 | -8;

interface Authenticator {
  alg: Alg;
  credentialId: Uint8Array;
  secretKey: Uint8Array;
  publicKeyHex: string;
  cose: Map<number | string, Cbor>;
}

function authenticator(alg: Alg, seed: number): Authenticator {
  const credentialId = new Uint8Array(20).map((_, i) => (i + seed) & 0xff);
  if (alg === -7) {
    const secretKey = new Uint8Array(32).fill(seed);
    const pub = p256.getPublicKey(secretKey, false);
    const cose = new Map<number | string, Cbor>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, pub.slice(1, 33)],
      [-3, pub.slice(33)],
    ]);
    return { alg, credentialId, secretKey, publicKeyHex: hex(pub), cose };
  }
  const secretKey = new Uint8Array(32).fill(seed);
  const pub = ed25519.getPublicKey(secretKey);
  const cose = new Map<number | string, Cbor>([
    [1, 1],
    [3, -8],
    [-1, 6],
    [-2, pub],
  ]);
  return { alg, credentialId, secretKey, publicKeyHex: hex(pub), cose };
}

interface ClientDataOpts {
  type?: string;
  challenge?: Uint8Array | string;
  origin?: string;
  crossOrigin?: unknown;
}

function clientData(type: string, o: ClientDataOpts = {}): Uint8Array {
  const challenge = o.challenge ?? CHALLENGE;
  const body: Record<string, unknown> = {
    type: o.type ?? type,
    challenge: typeof challenge === 'string' ? challenge : b64u(challenge),
    origin: o.origin ?? ORIGIN,
  };
  if ('crossOrigin' in o) body.crossOrigin = o.crossOrigin;
  return new Uint8Array(Buffer.from(JSON.stringify(body), 'utf8'));
}

function authDataHead(flags: number, signCount: number, rpId = RP_ID): Uint8Array {
  const count = new Uint8Array(4);
  new DataView(count.buffer).setUint32(0, signCount);
  return cat(sha256(rpId), new Uint8Array([flags]), count);
}

interface RegOpts extends ClientDataOpts {
  flags?: number;
  rpId?: string;
  fmt?: string;
  attStmt?: Cbor;
  /** Replaces the encoded COSE key. */
  coseBytes?: Uint8Array;
  /** Appended after the COSE key inside authData. */
  authDataTail?: Uint8Array;
  /** Replaces the encoded attestation object. */
  object?: (authData: Uint8Array) => Uint8Array;
}

function register(a: Authenticator, o: RegOpts = {}): Registration {
  const idLen = new Uint8Array([a.credentialId.length >> 8, a.credentialId.length & 0xff]);
  const authData = cat(
    authDataHead(o.flags ?? UP | UV | AT, 0, o.rpId),
    new Uint8Array(16), // aaguid: zeros, as with attestation 'none'
    idLen,
    a.credentialId,
    o.coseBytes ?? cbor(a.cose),
    o.authDataTail ?? new Uint8Array(0),
  );
  const object =
    o.object?.(authData) ??
    cbor(
      new Map<number | string, Cbor>([
        ['fmt', o.fmt ?? 'none'],
        ['attStmt', o.attStmt ?? new Map()],
        ['authData', authData],
      ]),
    );
  return { clientDataJSON: b64u(clientData('webauthn.create', o)), attestationObject: b64u(object) };
}

interface AssertOpts extends ClientDataOpts {
  flags?: number;
  rpId?: string;
  signCount?: number;
  credentialId?: Uint8Array;
  authDataTail?: Uint8Array;
  /** Sign these bytes instead of the real message. */
  signOver?: Uint8Array;
  highS?: boolean;
}

function assert(a: Authenticator, o: AssertOpts = {}): Assertion {
  const authData = cat(
    authDataHead(o.flags ?? UP | UV, o.signCount ?? 7, o.rpId),
    o.authDataTail ?? new Uint8Array(0),
  );
  const cd = clientData('webauthn.get', o);
  const message = o.signOver ?? cat(authData, sha256(cd));
  let signature: Uint8Array;
  if (a.alg === -7) {
    const compact = p256.sign(message, a.secretKey, { prehash: true, lowS: true });
    let sig = p256.Signature.fromBytes(compact, 'compact');
    if (o.highS) sig = new p256.Signature(sig.r, p256.Point.CURVE().n - sig.s);
    signature = sig.toBytes('der');
  } else {
    signature = ed25519.sign(message, a.secretKey);
  }
  return {
    credentialId: b64u(o.credentialId ?? a.credentialId),
    authenticatorData: b64u(authData),
    clientDataJSON: b64u(cd),
    signature: b64u(signature),
  };
}

function keyOf(a: Authenticator): PasskeyKey {
  return {
    credentialId: b64u(a.credentialId),
    alg: a.alg,
    publicKey: a.publicKeyHex,
    rpId: RP_ID,
    origin: ORIGIN,
  };
}

/** The WebAuthnError code `f` throws (and fails the test if it does not throw one). */
function codeOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(WebAuthnError);
    expect((err as Error).message.length).toBeGreaterThan(10);
    return (err as WebAuthnError).code;
  }
  throw new Error('expected a WebAuthnError, nothing was thrown');
}

const ES = authenticator(-7, 5);
const ED25519 = authenticator(-8, 9);
const OTHER_ES = authenticator(-7, 11);

// --- registration ------------------------------------------------------------

describe('parseRegistration', () => {
  it.each([ES, ED25519])('yields the key of a valid registration (alg %#)', (a) => {
    const key = parseRegistration(register(a), EXPECTED);
    expect(key).toEqual(keyOf(a));
  });

  it('accepts a registration without user verification when it is not required', () => {
    const reg = register(ES, { flags: UP | AT });
    expect(codeOf(() => parseRegistration(reg, EXPECTED))).toBe('not_user_verified');
    expect(parseRegistration(reg, { ...EXPECTED, requireUserVerification: false })).toEqual(keyOf(ES));
  });

  it('accepts the second accepted origin and records it', () => {
    const key = parseRegistration(register(ED25519, { origin: 'https://console.example.com' }), EXPECTED);
    expect(key.origin).toBe('https://console.example.com');
  });

  it('accepts extensions after the key when the ED flag says so, refuses them otherwise', () => {
    const ext = cbor(new Map<number | string, Cbor>([['credProtect', 2]]));
    const withEd = register(ES, { flags: UP | UV | AT | ED, authDataTail: ext });
    expect(parseRegistration(withEd, EXPECTED)).toEqual(keyOf(ES));
    expect(codeOf(() => parseRegistration(register(ES, { authDataTail: ext }), EXPECTED))).toBe('malformed');
    expect(codeOf(() => parseRegistration(register(ES, { flags: UP | UV | AT | ED }), EXPECTED))).toBe(
      'malformed',
    );
  });

  const refusals: [string, RegOpts, string][] = [
    ['wrong challenge', { challenge: new Uint8Array(32) }, 'wrong_challenge'],
    ['challenge one byte short', { challenge: CHALLENGE.slice(1) }, 'wrong_challenge'],
    ['padded challenge', { challenge: `${b64u(CHALLENGE)}=` }, 'bad_client_data'],
    ['wrong type', { type: 'webauthn.get' }, 'wrong_type'],
    ['wrong origin', { origin: 'https://evil.example.com' }, 'wrong_origin'],
    ['crossOrigin true', { crossOrigin: true }, 'cross_origin'],
    ['crossOrigin not a boolean', { crossOrigin: 'yes' }, 'bad_client_data'],
    ['rpIdHash of another rp', { rpId: 'evil.example.com' }, 'wrong_rp'],
    ['UP cleared', { flags: UV | AT }, 'not_user_present'],
    ['UV cleared', { flags: UP | AT }, 'not_user_verified'],
    ['AT cleared', { flags: UP | UV }, 'malformed'],
    [
      'fmt packed',
      { fmt: 'packed', attStmt: new Map<number | string, Cbor>([['alg', -7]]) },
      'unsupported_attestation',
    ],
    ['non-empty none statement', { attStmt: new Map<number | string, Cbor>([['x', 1]]) }, 'malformed'],
    ['trailing bytes in authData', { authDataTail: new Uint8Array([0]) }, 'malformed'],
    [
      'RS256 key',
      {
        coseBytes: cbor(
          new Map<number | string, Cbor>([
            [1, 3],
            [3, -257],
            [-1, new Uint8Array(256)],
            [-2, new Uint8Array([1, 0, 1])],
          ]),
        ),
      },
      'unsupported_key',
    ],
    [
      'P-256 point off the curve',
      {
        coseBytes: cbor(
          new Map<number | string, Cbor>([
            [1, 2],
            [3, -7],
            [-1, 1],
            [-2, new Uint8Array(32).fill(1)],
            [-3, new Uint8Array(32).fill(2)],
          ]),
        ),
      },
      'unsupported_key',
    ],
    [
      'ES256 key on another curve',
      {
        coseBytes: cbor(new Map<number | string, Cbor>([...ES.cose].map(([k, v]) => [k, k === -1 ? 2 : v]))),
      },
      'unsupported_key',
    ],
    [
      'Ed25519 small-order key',
      {
        coseBytes: cbor(
          new Map<number | string, Cbor>([
            [1, 1],
            [3, -8],
            [-1, 6],
            [-2, new Uint8Array(32).map((_, i) => (i === 0 ? 1 : 0))],
          ]),
        ),
      },
      'unsupported_key',
    ],
    [
      'COSE key with an extra member',
      { coseBytes: cbor(new Map<number | string, Cbor>([...ED25519.cose, [-4, new Uint8Array(32)]])) },
      'unsupported_key',
    ],
  ];
  it.each(refusals)('refuses %s', (_, opts, code) => {
    expect(codeOf(() => parseRegistration(register(ES, opts), EXPECTED))).toBe(code);
  });

  it('refuses truncated authenticator data', () => {
    const reg = register(ES, {
      object: (authData) =>
        cbor(
          new Map<number | string, Cbor>([
            ['fmt', 'none'],
            ['attStmt', new Map()],
            ['authData', authData.slice(0, authData.length - 1)],
          ]),
        ),
    });
    expect(codeOf(() => parseRegistration(reg, EXPECTED))).toBe('malformed');
    const short = register(ES, {
      object: (authData) =>
        cbor(
          new Map<number | string, Cbor>([
            ['fmt', 'none'],
            ['attStmt', new Map()],
            ['authData', authData.slice(0, 40)],
          ]),
        ),
    });
    expect(codeOf(() => parseRegistration(short, EXPECTED))).toBe('malformed');
  });

  describe('malformed CBOR', () => {
    const objectWith = (build: (authData: Uint8Array) => Uint8Array) => register(ES, { object: build });
    const good = (authData: Uint8Array) =>
      cbor(
        new Map<number | string, Cbor>([
          ['fmt', 'none'],
          ['attStmt', new Map()],
          ['authData', authData],
        ]),
      );

    it('accepts the well-formed object (the control case)', () => {
      expect(parseRegistration(objectWith(good), EXPECTED)).toEqual(keyOf(ES));
    });

    it('refuses an indefinite-length map', () => {
      const reg = objectWith((authData) => {
        const definite = good(authData);
        // 0xa3 (map of 3) becomes 0xbf (indefinite map) ... 0xff (break).
        return cat(new Uint8Array([0xbf]), definite.slice(1), new Uint8Array([0xff]));
      });
      expect(codeOf(() => parseRegistration(reg, EXPECTED))).toBe('malformed');
    });

    it('refuses trailing bytes after the object', () => {
      const reg = objectWith((authData) => cat(good(authData), new Uint8Array([0x00])));
      expect(codeOf(() => parseRegistration(reg, EXPECTED))).toBe('malformed');
    });

    it('refuses nesting that is too deep', () => {
      let deep: Cbor = 0;
      for (let i = 0; i < 40; i++) deep = [deep];
      const reg = register(ES, { attStmt: new Map<number | string, Cbor>([['x', deep]]) });
      const err = (() => {
        try {
          parseRegistration(reg, EXPECTED);
        } catch (e) {
          return e as WebAuthnError;
        }
        throw new Error('not refused');
      })();
      expect(err.code).toBe('malformed');
      expect(err.message).toMatch(/nested too deeply/);
    });

    it('refuses a non-shortest length, a duplicate key, a tag and a float', () => {
      const variants: ((authData: Uint8Array) => Uint8Array)[] = [
        // 'fmt' with its length in a one-byte argument (0x78 0x03) instead of inline (0x63).
        (authData) => {
          const g = good(authData);
          return cat(g.slice(0, 1), new Uint8Array([0x78, 0x03]), g.slice(2));
        },
        (authData) => {
          const g = good(authData);
          // a map of 4 with 'fmt' twice.
          return cat(new Uint8Array([0xa4]), cbor('fmt'), cbor('none'), g.slice(1));
        },
        (authData) => cat(new Uint8Array([0xc0]), good(authData)),
        (authData) => {
          const g = good(authData);
          return cat(new Uint8Array([0xa4]), g.slice(1), cbor('x'), new Uint8Array([0xf9, 0x3c, 0x00]));
        },
        () => new Uint8Array([0xa3]),
        () => new Uint8Array([0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
      ];
      for (const v of variants)
        expect(codeOf(() => parseRegistration(objectWith(v), EXPECTED))).toBe('malformed');
    });
  });

  it('refuses base64 that is not canonical base64url', () => {
    const reg = register(ES);
    expect(
      codeOf(() => parseRegistration({ ...reg, clientDataJSON: `${reg.clientDataJSON}==` }, EXPECTED)),
    ).toBe('malformed');
    const std = Buffer.from(unb64u(reg.attestationObject)).toString('base64');
    expect(std).toMatch(/[+/=]/);
    expect(codeOf(() => parseRegistration({ ...reg, attestationObject: std }, EXPECTED))).toBe('malformed');
  });

  it('refuses client data that is not JSON', () => {
    const reg = { ...register(ES), clientDataJSON: b64u(new Uint8Array([0xff, 0xfe, 0x7b])) };
    expect(codeOf(() => parseRegistration(reg, EXPECTED))).toBe('bad_client_data');
    const arr = { ...register(ES), clientDataJSON: b64u(Buffer.from('[1]')) };
    expect(codeOf(() => parseRegistration(arr, EXPECTED))).toBe('bad_client_data');
  });
});

// --- assertions --------------------------------------------------------------

describe('verifyAssertion', () => {
  it.each([ES, ED25519])('passes a valid assertion and returns the counter (alg %#)', (a) => {
    expect(verifyAssertion(keyOf(a), assert(a, { signCount: 42 }), EXPECTED)).toEqual({ signCount: 42 });
    expect(checkAssertion(keyOf(a), assert(a), EXPECTED)).toBe(true);
  });

  it('passes with a key that registration produced', () => {
    const key = parseRegistration(register(ED25519), EXPECTED);
    expect(verifyAssertion(key, assert(ED25519), EXPECTED).signCount).toBe(7);
  });

  it('accepts a high-S ES256 signature', () => {
    const a = assert(ES, { highS: true });
    const sig = p256.Signature.fromBytes(unb64u(a.signature), 'der');
    expect(sig.hasHighS()).toBe(true);
    expect(verifyAssertion(keyOf(ES), a, EXPECTED).signCount).toBe(7);
  });

  it('accepts extensions when the ED flag is set', () => {
    const ext = cbor(new Map<number | string, Cbor>([['appid', false]]));
    expect(
      verifyAssertion(keyOf(ES), assert(ES, { flags: UP | UV | ED, authDataTail: ext }), EXPECTED),
    ).toEqual({
      signCount: 7,
    });
  });

  it('accepts a missing UV flag only when verification is not required', () => {
    const a = assert(ED25519, { flags: UP });
    expect(codeOf(() => verifyAssertion(keyOf(ED25519), a, EXPECTED))).toBe('not_user_verified');
    expect(
      verifyAssertion(keyOf(ED25519), a, { ...EXPECTED, requireUserVerification: false }).signCount,
    ).toBe(7);
  });

  const refusals: [string, AssertOpts, string][] = [
    ['wrong challenge', { challenge: new Uint8Array(32).fill(9) }, 'wrong_challenge'],
    ['wrong type', { type: 'webauthn.create' }, 'wrong_type'],
    ['wrong origin', { origin: 'https://signer.example.com.evil.net' }, 'wrong_origin'],
    ['crossOrigin true', { crossOrigin: true }, 'cross_origin'],
    ['rpIdHash of another rp', { rpId: 'example.com' }, 'wrong_rp'],
    ['UP cleared', { flags: UV }, 'not_user_present'],
    ['UV cleared', { flags: UP }, 'not_user_verified'],
    ['AT set', { flags: UP | UV | AT }, 'malformed'],
    ['signature over other data', { signOver: new Uint8Array([1, 2, 3]) }, 'bad_signature'],
    ['credential id of another credential', { credentialId: OTHER_ES.credentialId }, 'wrong_credential'],
    ['extra bytes in authData', { authDataTail: new Uint8Array([0xa0]) }, 'malformed'],
    ['ED set without extensions', { flags: UP | UV | ED }, 'malformed'],
  ];
  for (const a of [ES, ED25519])
    it.each(refusals)(`refuses %s (alg ${a.alg})`, (_, opts, code) => {
      expect(codeOf(() => verifyAssertion(keyOf(a), assert(a, opts), EXPECTED))).toBe(code);
      expect(checkAssertion(keyOf(a), assert(a, opts), EXPECTED)).toBe(false);
    });

  it('refuses truncated authenticator data', () => {
    const a = assert(ES);
    const truncated = { ...a, authenticatorData: b64u(unb64u(a.authenticatorData).slice(0, 36)) };
    expect(codeOf(() => verifyAssertion(keyOf(ES), truncated, EXPECTED))).toBe('malformed');
  });

  it("refuses another key's signature, and a key registered for another rp", () => {
    const forged = { ...assert(OTHER_ES), credentialId: b64u(ES.credentialId) };
    expect(codeOf(() => verifyAssertion(keyOf(ES), forged, EXPECTED))).toBe('bad_signature');
    expect(codeOf(() => verifyAssertion({ ...keyOf(ES), rpId: 'other.example' }, assert(ES), EXPECTED))).toBe(
      'wrong_rp',
    );
  });

  it('refuses a compact (non-DER) ES256 signature and a truncated Ed25519 one', () => {
    const a = assert(ES);
    const compact = p256.Signature.fromBytes(unb64u(a.signature), 'der').toBytes('compact');
    expect(codeOf(() => verifyAssertion(keyOf(ES), { ...a, signature: b64u(compact) }, EXPECTED))).toBe(
      'bad_signature',
    );
    const e = assert(ED25519);
    const short = { ...e, signature: b64u(unb64u(e.signature).slice(0, 63)) };
    expect(codeOf(() => verifyAssertion(keyOf(ED25519), short, EXPECTED))).toBe('bad_signature');
  });
});

describe('checkAssertion', () => {
  it('never throws on junk, and accepts none of it', () => {
    const key = keyOf(ES);
    const real = assert(ES);
    const b64uArb = fc.uint8Array({ maxLength: 80 }).map(b64u);
    const junk = fc.oneof(
      fc.anything(),
      fc.record({
        credentialId: fc.oneof(fc.constant(real.credentialId), b64uArb, fc.string()),
        authenticatorData: fc.oneof(b64uArb, fc.string()),
        clientDataJSON: fc.oneof(fc.constant(real.clientDataJSON), b64uArb, fc.string()),
        signature: fc.oneof(fc.constant(real.signature), b64uArb, fc.string()),
      }),
    );
    fc.assert(
      fc.property(junk, (a) => {
        expect(checkAssertion(key, a, EXPECTED)).toBe(false);
      }),
      { numRuns: 200 },
    );
  });

  it('answers false (never throws) for a malformed key or a non-object', () => {
    const a = assert(ES);
    expect(checkAssertion({ ...keyOf(ES), publicKey: 'zz' }, a, EXPECTED)).toBe(false);
    expect(checkAssertion(null as unknown as PasskeyKey, a, EXPECTED)).toBe(false);
    expect(checkAssertion(keyOf(ES), null, EXPECTED)).toBe(false);
    expect(checkAssertion(keyOf(ES), { ...a, extra: 1 }, EXPECTED)).toBe(false);
    expect(checkAssertion(keyOf(ES), a, EXPECTED)).toBe(true);
  });
});

// --- stored forms ------------------------------------------------------------

describe('stored forms', () => {
  it('round-trips an assertion through canonical JSON', () => {
    const a = assert(ED25519);
    const text = encodeAssertion(a);
    expect(text.startsWith('{"authenticatorData":')).toBe(true);
    expect(decodeAssertion(text)).toEqual(a);
    expect(checkAssertion(keyOf(ED25519), decodeAssertion(text), EXPECTED)).toBe(true);
  });

  it('round-trips a passkey through canonical JSON', () => {
    for (const a of [ES, ED25519]) {
      const text = encodePasskeyKey(keyOf(a));
      expect(decodePasskeyKey(text)).toEqual(keyOf(a));
    }
  });

  it('refuses extra fields, missing fields, non-canonical text and bad alphabets', () => {
    const a = assert(ES);
    const text = encodeAssertion(a);
    const obj = JSON.parse(text) as Record<string, unknown>;
    const bad = [
      `${text.slice(0, -1)},"extra":1}`,
      JSON.stringify({ ...obj, signature: undefined }),
      JSON.stringify(obj, null, 1),
      JSON.stringify({ signature: a.signature, ...obj }).replace(/^\{/, '{ '),
      JSON.stringify({ ...obj, signature: `${a.signature}=` }),
      JSON.stringify({ ...obj, signature: a.signature.replace(/.$/, '+') }),
      JSON.stringify({ ...obj, signature: 12 }),
      JSON.stringify({ ...obj, authenticatorData: 'A'.repeat(10000) }),
      '[]',
      'null',
      'not json',
    ];
    for (const t of bad) expect(codeOf(() => decodeAssertion(t))).toBe('malformed');

    const k = encodePasskeyKey(keyOf(ED25519));
    const kobj = JSON.parse(k) as Record<string, unknown>;
    const badKeys = [
      `${k.slice(0, -1)},"signCount":1}`,
      JSON.stringify({ ...kobj, origin: undefined }),
      JSON.stringify({ ...kobj, publicKey: (kobj.publicKey as string).toUpperCase() }),
      JSON.stringify({ ...kobj, rpId: '' }),
      JSON.stringify({ ...kobj, credentialId: 'a/b' }),
    ];
    for (const t of badKeys) expect(codeOf(() => decodePasskeyKey(t))).toBe('malformed');
    expect(codeOf(() => decodePasskeyKey(JSON.stringify({ ...kobj, alg: -35 })))).toBe('unsupported_key');
    expect(codeOf(() => encodeAssertion({ ...a, credentialId: 'not base64url!' }))).toBe('malformed');
    expect(codeOf(() => encodePasskeyKey({ ...keyOf(ES), publicKey: ED25519.publicKeyHex }))).toBe(
      'malformed',
    );
  });
});

describe('RS256 passkeys', () => {
  // An RSA authenticator: COSE kty 3, alg -257, n and e (65537), PKCS#1 v1.5 signatures over SHA-256.
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const n = new Uint8Array(Buffer.from(publicKey.export({ format: 'jwk' }).n as string, 'base64url'));
  const rsa: Authenticator = {
    alg: -8, // unused for RSA: the helpers below build and sign it themselves
    credentialId: new Uint8Array(20).fill(9),
    secretKey: new Uint8Array(0),
    publicKeyHex: hex(n),
    cose: new Map<number | string, Cbor>([
      [1, 3],
      [3, -257],
      [-1, n],
      [-2, new Uint8Array([1, 0, 1])],
    ]),
  };
  const rsaAssertion = (challenge = CHALLENGE): Assertion => {
    const authData = authDataHead(UP | UV, 3);
    const cd = clientData('webauthn.get', { challenge });
    const sig = sign('sha256', cat(authData, sha256(cd)), privateKey);
    return {
      credentialId: b64u(rsa.credentialId),
      authenticatorData: b64u(authData),
      clientDataJSON: b64u(cd),
      signature: b64u(new Uint8Array(sig)),
    };
  };

  it('registers, verifies, and refuses a signature over another challenge or with e ≠ 65537', () => {
    const key = parseRegistration(register(rsa), EXPECTED);
    expect(key).toMatchObject({ alg: -257, publicKey: hex(n) });
    expect(verifyAssertion(key, rsaAssertion(), EXPECTED).signCount).toBe(3);
    expect(codeOf(() => verifyAssertion(key, rsaAssertion(new Uint8Array(32)), EXPECTED))).toBe(
      'wrong_challenge',
    );
    const forged = { ...rsaAssertion(), signature: b64u(new Uint8Array(256).fill(1)) };
    expect(codeOf(() => verifyAssertion(key, forged, EXPECTED))).toBe('bad_signature');
    const e3 = new Map(rsa.cose);
    e3.set(-2, new Uint8Array([3]));
    expect(codeOf(() => parseRegistration(register({ ...rsa, cose: e3 }), EXPECTED))).toBe('unsupported_key');
    const short = new Map(rsa.cose);
    short.set(-1, n.subarray(0, 128));
    expect(codeOf(() => parseRegistration(register({ ...rsa, cose: short }), EXPECTED))).toBe('malformed');
    expect(decodePasskeyKey(encodePasskeyKey(key))).toEqual(key);
  });
});

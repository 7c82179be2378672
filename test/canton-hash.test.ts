/**
 * Canton hashes other than the prepared-transaction hash (canton-apis.md §4):
 * key fingerprints, topology-transaction hashes, multi-hashes, party ids.
 * Expected values are the documented vectors or are computed independently
 * here with node:crypto and hand-written DER.
 */
import { createECDH, createHash, createPublicKey, generateKeyPairSync } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  cantonHash,
  fingerprint,
  HashPurpose,
  multiHash,
  parsePartyId,
  parsePublicKey,
  partyHintProblem,
  partyId,
  topologyTransactionHash,
} from '../src/hashing/canton-hash.js';
import { bytesToHex } from '../src/hashing/input.js';
import { expectRefusal } from './support/fixtures.js';

const hex = (b: Uint8Array) => bytesToHex(b);
const fromHex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));

/** CantonHash(purpose, x) = 12 20 ‖ SHA-256(be32(purpose) ‖ x), computed here from scratch. */
function expectedCantonHash(purpose: number, data: Uint8Array): string {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(purpose);
  return `1220${createHash('sha256').update(p).update(data).digest('hex')}`;
}

// ---- keys ----------------------------------------------------------------------

const TUTORIAL_KEY_B64 = '2RwUiIHVUVdulxzD8NKtPmIaaBqMer1A90rDjoklJPY=';
const TUTORIAL_FINGERPRINT = '1220205057e331cc8929dd217e2f8e63f503b7081773de60d01fb46839700bc5caaa';
const ED25519_SPKI_PREFIX = '302a300506032b6570032100';

// SubjectPublicKeyInfo prefixes (SEQUENCE, AlgorithmIdentifier{id-ecPublicKey, curve}, BIT STRING header).
const SPKI_PREFIX = {
  prime256v1: '3059301306072a8648ce3d020106082a8648ce3d030107034200',
  secp256k1: '3056301006072a8648ce3d020106052b8104000a034200',
  secp384r1: '3076301006072a8648ce3d020106052b81040022036200',
} as const;

/** A fixed EC key: uncompressed public point and its hand-built SPKI DER. */
function ecKey(curve: keyof typeof SPKI_PREFIX, privateFill: number) {
  const ecdh = createECDH(curve);
  ecdh.setPrivateKey(Buffer.alloc(curve === 'secp384r1' ? 48 : 32, privateFill));
  const point = ecdh.getPublicKey(); // 04 ‖ X ‖ Y
  const compressed = ecdh.getPublicKey(null, 'compressed');
  return { point, compressed, der: fromHex(SPKI_PREFIX[curve] + point.toString('hex')) };
}

describe('fingerprint', () => {
  const raw = new Uint8Array(Buffer.from(TUTORIAL_KEY_B64, 'base64'));

  it('Canton tutorial Ed25519 key (canton-apis §4.2)', () => {
    expect(raw.length).toBe(32);
    expect(fingerprint(raw)).toBe(TUTORIAL_FINGERPRINT);
    expect(expectedCantonHash(12, raw)).toBe(TUTORIAL_FINGERPRINT);
  });

  it('the same Ed25519 key given as SPKI DER has the same fingerprint (raw key is hashed)', () => {
    const spki = fromHex(ED25519_SPKI_PREFIX + Buffer.from(raw).toString('hex'));
    expect(fingerprint(spki)).toBe(TUTORIAL_FINGERPRINT);
    const parsed = parsePublicKey(spki);
    expect(parsed.algorithm).toBe('ed25519');
    expect(hex(parsed.fingerprintBytes)).toBe(hex(raw));
    expect(hex(parsePublicKey(raw).spki)).toBe(hex(spki));
  });

  const curves: [keyof typeof SPKI_PREFIX, string][] = [
    ['prime256v1', 'ecdsa-p256'],
    ['secp256k1', 'ecdsa-secp256k1'],
    ['secp384r1', 'ecdsa-p384'],
  ];
  for (const [curve, algorithm] of curves) {
    it(`ECDSA ${curve}: fingerprint = CantonHash(12, exact SPKI DER)`, () => {
      const { der, point } = ecKey(curve, 0x07);
      // the hand-built DER is what OpenSSL itself produces for this key
      const viaNode = createPublicKey({ key: Buffer.from(der), format: 'der', type: 'spki' });
      expect(hex(viaNode.export({ type: 'spki', format: 'der' }))).toBe(hex(der));
      expect(fingerprint(der)).toBe(expectedCantonHash(12, der));
      const parsed = parsePublicKey(der);
      expect(parsed.algorithm).toBe(algorithm);
      expect(hex(parsed.fingerprintBytes)).toBe(hex(der));
      expect(hex(parsed.raw)).toBe(point.toString('hex'));
    });
  }

  it('ECDSA keys from the Node key generator fingerprint as their SPKI DER', () => {
    for (const namedCurve of ['prime256v1', 'secp256k1']) {
      const { publicKey } = generateKeyPairSync('ec', { namedCurve });
      const der = new Uint8Array(publicKey.export({ type: 'spki', format: 'der' }));
      expect(fingerprint(der)).toBe(expectedCantonHash(12, der));
    }
  });

  it('a compressed-point SPKI is refused (another encoding of the key = another fingerprint)', () => {
    const { compressed } = ecKey('prime256v1', 0x07);
    const der = fromHex(`3039301306072a8648ce3d020106082a8648ce3d030107032200${compressed.toString('hex')}`);
    // it is a valid key for OpenSSL ...
    expect(createPublicKey({ key: Buffer.from(der), format: 'der', type: 'spki' }).asymmetricKeyType).toBe(
      'ec',
    );
    // ... but not the canonical encoding Canton would fingerprint
    expectRefusal(() => fingerprint(der), 'invalid_key', '');
  });

  const garbage: [string, () => Uint8Array][] = [
    ['empty', () => new Uint8Array(0)],
    ['31 bytes', () => new Uint8Array(31).fill(1)],
    ['33 bytes', () => new Uint8Array(33).fill(1)],
    ['random bytes of SPKI length', () => new Uint8Array(91).fill(0x5a)],
    ['a truncated P-256 SPKI', () => ecKey('prime256v1', 0x07).der.subarray(0, 60)],
    ['a P-256 SPKI with a trailing byte', () => Uint8Array.from([...ecKey('prime256v1', 0x07).der, 0])],
    ['a P-256 point not on the curve', () => fromHex(`${SPKI_PREFIX.prime256v1}04${'01'.repeat(64)}`)],
    ['an X25519 key', () => fromHex(`302a300506032b656e032100${'11'.repeat(32)}`)],
    [
      'an Ed25519 SPKI with a 31-byte key',
      () => fromHex(`302930050603 2b6570032000${'11'.repeat(31)}`.replace(' ', '')),
    ],
    [
      'an RSA key',
      () =>
        new Uint8Array(
          generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({
            type: 'spki',
            format: 'der',
          }),
        ),
    ],
    [
      'a P-521 key (unsupported curve)',
      () =>
        new Uint8Array(
          generateKeyPairSync('ec', { namedCurve: 'secp521r1' }).publicKey.export({
            type: 'spki',
            format: 'der',
          }),
        ),
    ],
  ];
  for (const [name, key] of garbage) {
    it(`refuses ${name}`, () => {
      const k = key();
      expectRefusal(() => parsePublicKey(k), 'invalid_key', '');
      expectRefusal(() => fingerprint(k), 'invalid_key', '');
    });
  }
});

// ---- topology and multi hashes ---------------------------------------------------

describe('topology transaction hash and multiHash', () => {
  const a = new TextEncoder().encode('a');
  const b = new TextEncoder().encode('b');
  const MULTI_AB = '1220021ba558984d6d7e8a8866400ebb78b04dd5177096238ed83b3b6298765d50f8';

  /** canton-apis §4.5, computed from scratch. */
  function expectedMultiHash(hashes: Uint8Array[]): string {
    const unique = [...new Set(hashes.map((h) => hex(h)))].sort();
    const parts: Buffer[] = [Buffer.alloc(4)];
    parts[0]!.writeUInt32BE(unique.length);
    for (const h of unique) {
      const len = Buffer.alloc(4);
      len.writeUInt32BE(h.length / 2);
      parts.push(len, Buffer.from(h, 'hex'));
    }
    return expectedCantonHash(55, Buffer.concat(parts));
  }

  it('topologyTransactionHash = CantonHash(11, bytes), from bytes or base64', () => {
    expect(hex(topologyTransactionHash(a))).toBe(expectedCantonHash(11, a));
    expect(hex(topologyTransactionHash('YQ=='))).toBe(expectedCantonHash(11, a));
    expect(topologyTransactionHash(b).length).toBe(34);
  });

  it('multiHash(topologyTransactionHash("a"), ("b")) = canton-apis §4.8 vector', () => {
    const ha = topologyTransactionHash(a);
    const hb = topologyTransactionHash(b);
    expect(hex(multiHash([ha, hb]))).toBe(MULTI_AB);
    expect(expectedMultiHash([ha, hb])).toBe(MULTI_AB);
  });

  it('multiHash is independent of order and de-duplicates', () => {
    const ha = topologyTransactionHash(a);
    const hb = topologyTransactionHash(b);
    expect(hex(multiHash([hb, ha]))).toBe(MULTI_AB);
    expect(hex(multiHash([ha, hb, ha, hb, hb]))).toBe(MULTI_AB);
    expect(hex(multiHash([ha, ha]))).toBe(hex(multiHash([ha])));
    expect(hex(multiHash([ha]))).toBe(expectedMultiHash([ha]));
    expect(hex(multiHash([ha]))).not.toBe(MULTI_AB);
  });

  it('multiHash of random sets equals the independent computation (200 sets)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 8 }),
        (txs) => {
          const hs = txs.map((t) => topologyTransactionHash(t));
          expect(hex(multiHash(hs))).toBe(expectedMultiHash(hs));
          expect(hex(multiHash([...hs].reverse()))).toBe(expectedMultiHash(hs));
        },
      ),
      { seed: 4242, numRuns: 200 },
    );
  });

  it('cantonHash and the purposes', () => {
    expect(HashPurpose).toEqual({
      TopologyTransactionSignature: 11,
      PublicKeyFingerprint: 12,
      PreparedSubmission: 48,
      MultiTopologyTransaction: 55,
    });
    expect(hex(cantonHash(48, a))).toBe(expectedCantonHash(48, a));
  });

  it('refusals: empty transaction, bad base64, empty set, hashes that are not 34-byte SHA-256 multihashes', () => {
    const ha = topologyTransactionHash(a);
    expectRefusal(() => topologyTransactionHash(new Uint8Array(0)), 'missing_field', '');
    expectRefusal(() => topologyTransactionHash('YQ='), 'bad_encoding', '');
    expectRefusal(() => multiHash([]), 'missing_field', '');
    expectRefusal(() => multiHash([ha, ha.subarray(2)]), 'bad_encoding', 'hashes[1]');
    const wrongPrefix = Uint8Array.from(ha);
    wrongPrefix[0] = 0x13;
    expectRefusal(() => multiHash([wrongPrefix]), 'bad_encoding', 'hashes[0]');
  });
});

// ---- party ids ---------------------------------------------------------------------

describe('party ids', () => {
  const FP = TUTORIAL_FINGERPRINT;

  it('hint::fingerprint, and back', () => {
    expect(partyId('alice', FP)).toBe(`alice::${FP}`);
    expect(parsePartyId(`alice::${FP}`)).toEqual({ hint: 'alice', fingerprint: FP });
    expect(partyId('a-b_c d:e 9', FP)).toBe(`a-b_c d:e 9::${FP}`);
  });

  it('maximum lengths are accepted: a 185-character hint makes a 255-character id', () => {
    const hint = 'h'.repeat(185);
    const id = partyId(hint, FP);
    expect(id.length).toBe(255);
    expect(parsePartyId(id)).toEqual({ hint, fingerprint: FP });
    expect(partyHintProblem(hint)).toBeUndefined();
  });

  const badHints: [string, string][] = [
    ['empty', ''],
    ['186 characters', 'h'.repeat(186)],
    ['containing "::"', 'ali::ce'],
    ['non-ASCII', 'alic\u00e9'],
    ['a dot', 'alice.bob'],
    ['a newline', 'alice\n'],
    ['ending in ":" (the id would contain ":::" and split at the wrong place)', 'alice:'],
  ];
  for (const [name, hint] of badHints) {
    it(`a hint ${name} is refused`, () => {
      expect(partyHintProblem(hint)).toBeTypeOf('string');
      expectRefusal(() => partyId(hint, FP), 'invalid_party', 'hint');
      expectRefusal(() => parsePartyId(`${hint}::${FP}`), 'invalid_party', 'hint');
    });
  }

  it('malformed fingerprints and ids are refused', () => {
    expectRefusal(() => partyId('alice', FP.toUpperCase()), 'invalid_party', 'fingerprint');
    expectRefusal(() => partyId('alice', FP.slice(0, -2)), 'invalid_party', 'fingerprint');
    expectRefusal(() => partyId('alice', `1221${FP.slice(4)}`), 'invalid_party', 'fingerprint');
    expectRefusal(() => parsePartyId('alice'), 'invalid_party', '');
    expectRefusal(() => parsePartyId(`alice:${FP}`), 'invalid_party', '');
    expectRefusal(() => parsePartyId(`::${FP}`), 'invalid_party', 'hint');
    expectRefusal(() => parsePartyId('alice::'), 'invalid_party', 'fingerprint');
  });

  it('every accepted hint round-trips through partyId and parsePartyId (2,000 hints)', () => {
    const hintChar = fc.constantFrom(...'aZ09:-_ '.split(''));
    fc.assert(
      fc.property(fc.array(hintChar, { minLength: 1, maxLength: 190 }), (cs) => {
        const hint = cs.join('');
        let id: string;
        try {
          id = partyId(hint, FP);
        } catch {
          return; // refused hints are covered above
        }
        expect(parsePartyId(id)).toEqual({ hint, fingerprint: FP });
        // Canton splits a unique identifier at the first "::" (UniqueIdentifier.fromProtoPrimitive_)
        expect(id.slice(0, id.indexOf('::'))).toBe(hint);
      }),
      { seed: 77, numRuns: 2000 },
    );
  });
});

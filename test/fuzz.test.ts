/**
 * Decoder fuzzing with fast-check (fixed seeds, reproducible): random bytes,
 * protobuf-shaped random messages, and mutations of the 26 real vectors (bit
 * flips, byte insert/delete/overwrite, truncation, splices of two vectors).
 * Every input must either hash or be refused with a TransactionError carrying
 * a known refusal code; any other exception is a bug. Inputs that hash must
 * also hash the same after a canonical re-encoding of their decoded model.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../src/hashing/decode.js';
import { encodePreparedTransaction } from '../src/hashing/encode.js';
import { type RefusalCode, TransactionError } from '../src/hashing/errors.js';
import { base64ToBytes, bytesToHex } from '../src/hashing/input.js';
import type { DecodedTransaction } from '../src/hashing/model.js';
import { hashPreparedTransaction } from '../src/hashing/transaction-hash.js';
import { concat, tag, varint } from './support/protobuf.js';
import { VECTORS_DIR as VECTORS } from './support/vectors.js';

const corpus: Uint8Array[] = readdirSync(join(VECTORS, 'real'))
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => {
    const v = JSON.parse(readFileSync(join(VECTORS, 'real', f), 'utf8')) as {
      prepared_transaction_base64: string;
    };
    return base64ToBytes(v.prepared_transaction_base64);
  });

const KNOWN_CODES: ReadonlySet<RefusalCode> = new Set<RefusalCode>([
  'bad_encoding',
  'truncated',
  'trailing_bytes',
  'malformed',
  'unknown_field',
  'duplicate_field',
  'invalid_utf8',
  'missing_field',
  'too_deep',
  'node_id',
  'missing_node',
  'shared_node',
  'cycle',
  'orphan_node',
  'seed',
  'unsorted',
  'duplicate',
  'non_canonical',
  'unsupported',
  'unsupported_version',
  'not_covered',
  'invalid_key',
  'invalid_party',
  'invalid_identifier',
]);

const stats = { inputs: 0, hashed: 0, refused: new Map<string, number>() };

function asRefusal(e: unknown): TransactionError {
  if (!(e instanceof TransactionError)) {
    const what = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    throw new Error(`not a TransactionError: ${what}`, { cause: e });
  }
  if (typeof e.code !== 'string' || e.code.length === 0 || !KNOWN_CODES.has(e.code))
    throw new Error(`TransactionError with an unknown code ${JSON.stringify(e.code)}`);
  if (typeof e.path !== 'string') throw new Error('TransactionError without a path');
  return e;
}

/** Decode, then hash under V2 and V3: each step returns or throws a TransactionError. */
function hashOrRefuse(input: Uint8Array | string): void {
  stats.inputs++;
  let decoded: DecodedTransaction;
  try {
    decoded = decodePreparedTransaction(input);
  } catch (e) {
    const { code } = asRefusal(e);
    stats.refused.set(code, (stats.refused.get(code) ?? 0) + 1);
    return;
  }
  for (const scheme of ['v2', 'v3'] as const) {
    let h: Uint8Array;
    try {
      h = hashPreparedTransaction(decoded, { scheme });
    } catch (e) {
      asRefusal(e);
      continue;
    }
    stats.hashed++;
    if (h.length !== 32) throw new Error(`hash of ${h.length} bytes`);
    // The hash is a function of the decoded model: a canonical re-encoding that decodes hashes the same.
    let again: DecodedTransaction | undefined;
    try {
      again = decodePreparedTransaction(encodePreparedTransaction(decoded));
    } catch (e) {
      asRefusal(e);
    }
    if (again) {
      const h2 = hashPreparedTransaction(again, { scheme });
      if (bytesToHex(h2) !== bytesToHex(h))
        throw new Error(`re-encoded model hashes differently (${scheme})`);
    }
  }
}

const SEED = 0x5eed_c0de;
const run = (name: string, arb: fc.Arbitrary<Uint8Array>, numRuns: number, seedOffset: number) => {
  it(`${name} (${numRuns} inputs)`, () => {
    fc.assert(
      fc.property(arb, (input) => {
        hashOrRefuse(input);
      }),
      { seed: SEED + seedOffset, numRuns, endOnFailure: false },
    );
  });
};

// ---- arbitraries --------------------------------------------------------------

const vectorIndex = fc.integer({ min: 0, max: corpus.length - 1 });

/** A random protobuf-looking message: known-ish field numbers, any wire type, short payloads. */
const protoLike: fc.Arbitrary<Uint8Array> = fc
  .array(
    fc.record({
      field: fc.oneof(fc.integer({ min: 0, max: 20 }), fc.constantFrom(1000, 1001, 1002)),
      wireType: fc.integer({ min: 0, max: 7 }),
      payload: fc.uint8Array({ maxLength: 24 }),
      value: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
    }),
    { maxLength: 12 },
  )
  .map((fields) =>
    concat(
      ...fields.map(({ field, wireType, payload, value }) => {
        if (wireType === 0) return concat(tag(field, 0), varint(value));
        if (wireType === 2) return concat(tag(field, 2), varint(payload.length), payload);
        return concat(tag(field, wireType), payload);
      }),
    ),
  );

/** A real transaction with a few single-bit flips. */
const bitFlips = fc
  .tuple(
    vectorIndex,
    fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 7 })), { minLength: 1, maxLength: 4 }),
  )
  .map(([v, flips]) => {
    const b = Uint8Array.from(corpus[v]!);
    for (const [pos, bit] of flips) b[pos % b.length]! ^= 1 << bit;
    return b;
  });

const byteOverwrite = fc
  .tuple(
    vectorIndex,
    fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 3 }),
  )
  .map(([v, writes]) => {
    const b = Uint8Array.from(corpus[v]!);
    for (const [pos, byte] of writes) b[pos % b.length] = byte;
    return b;
  });

const byteInsert = fc
  .tuple(vectorIndex, fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 8 }))
  .map(([v, pos, ins]) => {
    const b = corpus[v]!;
    const at = pos % (b.length + 1);
    return concat(b.subarray(0, at), ins, b.subarray(at));
  });

const byteDelete = fc.tuple(vectorIndex, fc.nat(), fc.integer({ min: 1, max: 8 })).map(([v, pos, n]) => {
  const b = corpus[v]!;
  const at = pos % b.length;
  return concat(b.subarray(0, at), b.subarray(at + n));
});

const truncation = fc.tuple(vectorIndex, fc.nat()).map(([v, n]) => {
  const b = corpus[v]!;
  return b.subarray(0, n % b.length);
});

const splice = fc.tuple(vectorIndex, vectorIndex, fc.nat(), fc.nat()).map(([a, b, i, j]) => {
  const x = corpus[a]!;
  const y = corpus[b]!;
  return concat(x.subarray(0, i % (x.length + 1)), y.subarray(j % (y.length + 1)));
});

// ---- properties -------------------------------------------------------------------

describe('decoder fuzz: every input hashes or is refused with a TransactionError', () => {
  afterAll(() => {
    const refused = [...stats.refused.entries()].sort((a, b) => b[1] - a[1]);
    console.info(`fuzz: ${stats.inputs} inputs, ${stats.hashed} hashes, refusals by code:`, refused);
  });

  it('the corpus is the 26 real vectors, all of which hash', () => {
    expect(corpus.length).toBe(26);
    for (const b of corpus) hashOrRefuse(b);
    expect(stats.hashed).toBe(52);
  });

  run('random byte strings', fc.uint8Array({ maxLength: 512 }), 4000, 1);
  run('protobuf-shaped random messages', protoLike, 3000, 2);
  run('real vectors with bit flips', bitFlips, 5000, 3);
  run('real vectors with overwritten bytes', byteOverwrite, 2000, 4);
  run('real vectors with inserted bytes', byteInsert, 2000, 5);
  run('real vectors with deleted bytes', byteDelete, 2000, 6);
  run('truncated real vectors', truncation, 2000, 7);
  run('splices of two real vectors', splice, 2000, 8);

  it('random text given as input is refused as bad_encoding or decoded like bytes (500 inputs)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 64 }), (s) => {
        hashOrRefuse(s);
      }),
      { seed: SEED + 9, numRuns: 500 },
    );
  });

  it('the fuzz campaign ran at least 10,000 inputs', () => {
    expect(stats.inputs).toBeGreaterThanOrEqual(10_000);
  });
});

// ---- base64: the fast check equals a plain strict reference ----------------------------

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Reference: RFC 4648 §4 padded base64, canonical padding bits, surrounding whitespace ignored. */
function referenceBase64(text: string): Uint8Array | undefined {
  const s = text.trim();
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(s))
    return undefined;
  if (s.endsWith('==') && B64.indexOf(s[s.length - 3]!) & 0x0f) return undefined;
  if (s.endsWith('=') && !s.endsWith('==') && B64.indexOf(s[s.length - 2]!) & 0x03) return undefined;
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const c of s.replace(/=+$/, '')) {
    acc = (acc << 6) | B64.indexOf(c);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
  }
  return Uint8Array.from(out);
}

describe('base64 input', () => {
  it('base64ToBytes accepts exactly what the strict reference accepts, with the same bytes (20,000 inputs)', () => {
    // Ł and ī: Node's decoder reads a non-ASCII character by its low byte (as A and +)
    const chars = fc.constantFrom(...`${B64}=-_ .*\n\t\u00e9\u0000\u0141\u012b`.split(''));
    const text = fc.oneof(
      fc.array(chars, { maxLength: 16 }).map((cs) => cs.join('')),
      fc.uint8Array({ maxLength: 12 }).map((b) => Buffer.from(b).toString('base64')),
      fc.tuple(fc.uint8Array({ minLength: 1, maxLength: 12 }), fc.nat(), chars).map(([b, i, c]) => {
        const s = Buffer.from(b).toString('base64');
        const at = i % s.length;
        return s.slice(0, at) + c + s.slice(at + 1);
      }),
    );
    fc.assert(
      fc.property(text, (s) => {
        const want = referenceBase64(s);
        let got: Uint8Array | undefined;
        try {
          got = base64ToBytes(s);
        } catch (e) {
          if (asRefusal(e).code !== 'bad_encoding') throw e;
        }
        expect(got === undefined ? undefined : bytesToHex(got), JSON.stringify(s)).toBe(
          want === undefined ? undefined : bytesToHex(want),
        );
      }),
      { seed: SEED + 10, numRuns: 20_000 },
    );
  });
});

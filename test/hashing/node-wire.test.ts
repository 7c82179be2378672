/**
 * From bytes, the streaming hasher encodes a node's own fields (Daml-LF
 * version, contract id, package name, template and interface ids, party
 * lists, choice id, query-by-key results) straight from the wire bytes, as it
 * already did for values; decode-then-hash encodes them from the model's
 * strings. This holds the two together where they could part: the fields of
 * node bodies and input contracts of the real vectors and of random
 * transactions, shuffled out of field-number order, repeated, dropped, given
 * edge-case payloads (each Daml-LF, package-name, contract-id, party and UTF-8
 * rule on both sides of its line), given the wrong wire type, and damaged
 * byte by byte. Whenever decode-then-hash accepts, the streaming pass and the
 * public entry point give its hashes; whenever it refuses, the streaming pass
 * refuses too and the public refusal (code, path, message) is its refusal.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { TransactionError } from '../../src/hashing/errors.js';
import { bytesToHex } from '../../src/hashing/input.js';
import {
  type HashingScheme,
  type HashParts,
  hashParts,
  hashPartsStreaming,
} from '../../src/hashing/transaction-hash.js';
import { arbPreparedTransaction } from '../support/arbitrary.js';
import {
  concat,
  editMessage,
  parseFields,
  type Step,
  tag,
  varint,
  WT_I64,
  WT_LEN,
  WT_VARINT,
} from '../support/protobuf.js';
import { VECTORS_DIR } from '../support/vectors.js';

const SEED = 0x4e_4f_44;

type Outcome = { hashes: string[] } | { refused: string; code: string };

function outcome(fn: () => HashParts): Outcome {
  try {
    const p = fn();
    return {
      hashes: [
        bytesToHex(p.hash),
        bytesToHex(p.transactionHash),
        bytesToHex(p.metadataHash),
        ...[...p.nodeHashes].map(([id, h]) => `${id}=${bytesToHex(h)}`),
      ],
    };
  } catch (e) {
    if (e instanceof TransactionError) return { refused: e.message, code: e.code };
    throw e;
  }
}

const tally = { accepted: 0, refused: 0, reorderedAccepted: 0 };

/** The model path decides; the streaming pass and the public entry point must agree with it. */
function agree(bytes: Uint8Array, scheme: HashingScheme, reordered = false): void {
  const model = outcome(() => hashParts(decodePreparedTransaction(bytes), { scheme }));
  const stream = outcome(() => hashPartsStreaming(bytes, scheme));
  const pub = outcome(() => hashParts(bytes, { scheme }));
  if ('hashes' in model) {
    tally.accepted++;
    if (reordered) tally.reorderedAccepted++;
    expect(stream).toEqual(model);
    expect(pub).toEqual(model);
  } else {
    tally.refused++;
    expect('refused' in stream, `streaming accepted what decode-then-hash refuses: ${model.refused}`).toBe(
      true,
    );
    expect(pub).toEqual(model);
  }
}

/** Paths to every node body (`transaction.nodes[k].v1.<kind>`) and input-contract create of a transaction. */
function nodeBodies(bytes: Uint8Array): Step[][] {
  const out: Step[][] = [];
  const top = parseFields(bytes);
  const tx = top.find((f) => f.field === 1);
  if (tx) {
    const txFields = parseFields(bytes.subarray(tx.payloadStart, tx.end));
    let k = 0;
    for (const n of txFields) {
      if (n.field !== 3) continue;
      const node = bytes.subarray(tx.payloadStart + n.payloadStart, tx.payloadStart + n.end);
      const v1 = parseFields(node).find((f) => f.field === 1000);
      if (v1) {
        const body = parseFields(node.subarray(v1.payloadStart, v1.end))[0];
        if (body)
          out.push([
            [1, 0],
            [3, k],
            [1000, 0],
            [body.field, 0],
          ]);
      }
      k++;
    }
  }
  const md = top.find((f) => f.field === 2);
  if (md) {
    const count = parseFields(bytes.subarray(md.payloadStart, md.end)).filter((f) => f.field === 7).length;
    for (let k = 0; k < count; k++)
      out.push([
        [2, 0],
        [7, k],
        [1, 0],
      ]);
  }
  return out;
}

const enc = (s: string) => new TextEncoder().encode(s);
const hex = (n: number, seed = 'a1') => seed.repeat(n).slice(0, 2 * n);

/** Payloads on both sides of the node-level rules, for any length-delimited field. */
const PAYLOADS: Uint8Array[] = [
  // Daml-LF versions
  enc('2.1'),
  enc('2'),
  enc('2.2'),
  enc('2.10'),
  enc(''),
  // package names
  enc('splice-amulet'),
  enc('Splice_Amulet-0'),
  enc('bad name'),
  enc('é'),
  enc('x'.repeat(255)),
  enc('x'.repeat(256)),
  // contract ids
  enc(`00${hex(32)}`),
  enc(`00${hex(127 - 1)}`),
  enc(`00${hex(127)}`),
  enc(`00${hex(31)}`),
  enc(`01${hex(12)}`),
  enc(`01${hex(45)}`),
  enc(`01${hex(46)}`),
  enc(`00${hex(32, 'A1')}`),
  enc(`00${hex(32)}a`),
  enc(`02${hex(32)}`),
  // party ids
  enc(`alice::1220${hex(32)}`),
  enc(`bob::1220${hex(32)}`),
  enc('a b:c-d_e'),
  enc('alice!'),
  enc('p'.repeat(255)),
  enc('p'.repeat(256)),
  // text and invalid UTF-8
  enc('Transfer'),
  enc('ünïcödé 😀'),
  Uint8Array.of(0xc3),
  Uint8Array.of(0xff, 0x41),
  Uint8Array.of(0xed, 0xa0, 0x80),
  Uint8Array.of(0xef, 0xbb, 0xbf, 0x41),
];

type Edit = (body: Uint8Array) => Uint8Array;

/** Field-level changes of a node body message (each keeps it a well-formed message, or breaks it on purpose). */
const arbEdit: fc.Arbitrary<Edit> = fc.oneof(
  // a permutation of the fields (valid protobuf, out of field-number order)
  fc.array(fc.nat(), { minLength: 1, maxLength: 20 }).map((keys) => (body: Uint8Array) => {
    const fields = parseFields(body);
    const order = fields.map((f, i) => ({ f, k: keys[i % keys.length]! + i * 0.001 }));
    order.sort((a, b) => a.k - b.k);
    return concat(...order.map(({ f }) => body.subarray(f.start, f.end)));
  }),
  // two fields swapped
  fc.tuple(fc.nat(), fc.nat()).map(([a, b]) => (body: Uint8Array) => {
    const fields = parseFields(body);
    if (fields.length < 2) return body;
    const i = a % fields.length;
    const j = b % fields.length;
    const parts = fields.map((f) => body.subarray(f.start, f.end));
    [parts[i], parts[j]] = [parts[j]!, parts[i]!];
    return concat(...parts);
  }),
  // a field repeated
  fc.nat().map((a) => (body: Uint8Array) => {
    const fields = parseFields(body);
    const f = fields[a % Math.max(1, fields.length)];
    return f ? concat(body, body.subarray(f.start, f.end)) : body;
  }),
  // a field dropped
  fc.nat().map((a) => (body: Uint8Array) => {
    const fields = parseFields(body);
    const f = fields[a % Math.max(1, fields.length)];
    return f ? concat(body.subarray(0, f.start), body.subarray(f.end)) : body;
  }),
  // a length-delimited field given an edge-case payload
  fc.tuple(fc.nat(), fc.nat()).map(([a, p]) => (body: Uint8Array) => {
    const fields = parseFields(body).filter((f) => f.wireType === WT_LEN);
    const f = fields[a % Math.max(1, fields.length)];
    if (!f) return body;
    const payload = PAYLOADS[p % PAYLOADS.length]!;
    return concat(
      body.subarray(0, f.start),
      tag(f.field, WT_LEN),
      varint(payload.length),
      payload,
      body.subarray(f.end),
    );
  }),
  // a new field: any number 1-18, with an edge-case payload or a varint
  fc
    .tuple(fc.integer({ min: 1, max: 18 }), fc.nat(), fc.boolean())
    .map(([field, p, len]) => (body: Uint8Array) => {
      const payload = PAYLOADS[p % PAYLOADS.length]!;
      const extra = len
        ? concat(tag(field, WT_LEN), varint(payload.length), payload)
        : concat(tag(field, WT_VARINT), varint(p % 3));
      return concat(body, extra);
    }),
  // a field's wire type changed (its payload left as it was)
  fc.tuple(fc.nat(), fc.constantFrom(WT_VARINT, WT_I64, WT_LEN)).map(([a, wt]) => (body: Uint8Array) => {
    const fields = parseFields(body);
    const f = fields[a % Math.max(1, fields.length)];
    if (!f) return body;
    const t = tag(f.field, wt);
    const oldTagEnd = f.start + tag(f.field, f.wireType).length;
    return concat(body.subarray(0, f.start), t, body.subarray(oldTagEnd));
  }),
  // byte damage inside the body
  fc
    .array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 7 })), { minLength: 1, maxLength: 2 })
    .map((flips) => (body: Uint8Array) => {
      const c = Uint8Array.from(body);
      if (c.length === 0) return c;
      for (const [pos, bit] of flips) c[pos % c.length]! ^= 1 << bit;
      return c;
    }),
);

/** Applies `edits` to node bodies picked by `picks`; whether any was a reordering that kept every field. */
function mutate(bytes: Uint8Array, picks: number[], edits: Edit[]): Uint8Array {
  let out = bytes;
  for (let i = 0; i < edits.length; i++) {
    const bodies = nodeBodies(out);
    if (bodies.length === 0) return out;
    const path = bodies[picks[i % picks.length]! % bodies.length]!;
    try {
      out = editMessage(out, path, edits[i]!);
    } catch {
      // the test parser cannot walk damaged bytes: keep what we have
    }
  }
  return out;
}

function realVectors(): Uint8Array[] {
  const dir = join(VECTORS_DIR, 'real');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => {
      const v = JSON.parse(readFileSync(join(dir, f), 'utf8'));
      return new Uint8Array(Buffer.from(v.prepared_transaction_base64, 'base64'));
    });
}

const REAL = realVectors();

describe('node fields hashed from the wire = decode-then-hash', () => {
  for (const scheme of ['v2', 'v3'] as const) {
    it(`${scheme}: the real vectors as they are, and with every node body's fields in descending field-number order`, () => {
      for (const bytes of REAL) {
        agree(bytes, scheme);
        let reversed = bytes;
        for (const path of nodeBodies(bytes))
          reversed = editMessage(reversed, path, (body) => {
            // Descending field numbers; a repeated field's occurrences keep their order (a sorted set stays sorted).
            const fields = parseFields(body).sort((a, b) => b.field - a.field);
            return concat(...fields.map((f) => body.subarray(f.start, f.end)));
          });
        agree(reversed, scheme, true);
      }
    });

    it(`${scheme}: real vectors, node bodies and input contracts edited (600 runs)`, () => {
      fc.assert(
        fc.property(
          fc.nat({ max: REAL.length - 1 }),
          fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
          fc.array(arbEdit, { minLength: 1, maxLength: 3 }),
          (v, picks, edits) => agree(mutate(REAL[v]!, picks, edits), scheme),
        ),
        { seed: SEED + (scheme === 'v2' ? 0 : 1), numRuns: 600 },
      );
    });

    it(`${scheme}: random transactions, node bodies and input contracts edited (400 runs)`, () => {
      const arbTx = arbPreparedTransaction({ scheme, maxTreeDepth: 3, maxChildren: 3 });
      fc.assert(
        fc.property(
          arbTx,
          fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
          fc.array(arbEdit, { minLength: 1, maxLength: 3 }),
          (m, picks, edits) => agree(mutate(encodePreparedTransaction(m), picks, edits), scheme),
        ),
        { seed: SEED + (scheme === 'v2' ? 2 : 3), numRuns: 400 },
      );
    });
  }

  it('both outcomes were exercised, and reordered node fields were accepted', () => {
    expect(tally.accepted).toBeGreaterThan(300);
    expect(tally.refused).toBeGreaterThan(1000);
    expect(tally.reorderedAccepted).toBeGreaterThan(20);
  });
});

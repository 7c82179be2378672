/**
 * `hashParts` from bytes hashes in one streaming pass (nodes hashed as they
 * are decoded, no decoded transaction kept) and, when that pass refuses,
 * reports the refusal of decode-then-hash. This holds the two together on
 * random transactions and on mutations of them: the same hashes (final,
 * transaction, metadata, every node, in the same order) whenever decode-then-
 * hash accepts, a refusal whenever it refuses, and the public refusal is
 * exactly its refusal. From bytes, Daml values are hashed straight from the
 * wire by the value walker (no `Value` objects); decode-then-hash encodes the
 * walker's model: the deep-value, depth-limit and field-order cases below hold
 * the two encoders to one hash.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction, visitPreparedTransaction } from '../../src/hashing/decode.js';
import { MODEL, type TopValue, WireValue, type WireValues } from '../../src/hashing/decode-values.js';
import { encodePreparedTransaction, encodeValue } from '../../src/hashing/encode.js';
import { TransactionError } from '../../src/hashing/errors.js';
import type { PreparedTransaction, Value } from '../../src/hashing/model.js';
import {
  type HashingScheme,
  type HashParts,
  hashParts,
  hashPartsStreaming,
} from '../../src/hashing/transaction-hash.js';
import { arbPreparedTransaction, arbSeed } from '../support/arbitrary.js';
import { partsHex } from '../support/hash-parts.js';

const SEED = 0x5742_4d;

type Outcome = { hashes: string[] } | { refused: TransactionError };

function outcome(fn: () => HashParts): Outcome {
  try {
    const p = fn();
    return { hashes: partsHex(p) };
  } catch (e) {
    if (e instanceof TransactionError) return { refused: e };
    throw e;
  }
}

let accepted = 0;
let refused = 0;

function agree(bytes: Uint8Array, scheme: HashingScheme): void {
  const model = outcome(() => hashParts(decodePreparedTransaction(bytes), { scheme }));
  const stream = outcome(() => hashPartsStreaming(bytes, scheme));
  const pub = outcome(() => hashParts(bytes, { scheme }));
  if ('hashes' in model) {
    accepted++;
    expect(stream).toEqual(model);
    expect(pub).toEqual(model);
  } else {
    refused++;
    expect(
      'refused' in stream,
      `streaming accepted what decode-then-hash refuses: ${model.refused.message}`,
    ).toBe(true);
    expect('refused' in pub && pub.refused.message).toBe(model.refused.message);
  }
}

/** Changes of the model that break (or keep) the node structure, the seeds or the order of nodes. */
const arbMutation = fc.oneof(
  fc.constant((m: PreparedTransaction) => m.transaction.nodes.reverse()),
  fc.constant((m: PreparedTransaction) => m.transaction.nodeSeeds.pop()),
  fc.constant((m: PreparedTransaction) => m.transaction.roots.pop()),
  fc.nat().map((k) => (m: PreparedTransaction) => {
    const n = m.transaction.nodes[k % Math.max(1, m.transaction.nodes.length)];
    if (n) m.transaction.nodes.push({ nodeId: String(m.transaction.nodes.length + 100), node: n.node });
  }),
  fc.tuple(fc.nat(), arbSeed).map(([k, s]) => (m: PreparedTransaction) => {
    m.transaction.nodeSeeds.push({ nodeId: k % (m.transaction.nodes.length + 1), seed: s });
  }),
  fc.nat().map((k) => (m: PreparedTransaction) => {
    const n = m.transaction.nodes[k % Math.max(1, m.transaction.nodes.length)];
    if (n) m.transaction.roots.push(n.nodeId);
  }),
);

/** Byte-level damage: bit flips, overwrites, deletions, truncation. */
const arbDamage = fc.oneof(
  fc
    .array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 7 })), { minLength: 1, maxLength: 3 })
    .map((flips) => (b: Uint8Array) => {
      const c = Uint8Array.from(b);
      for (const [pos, bit] of flips) c[pos % c.length]! ^= 1 << bit;
      return c;
    }),
  fc.tuple(fc.nat(), fc.integer({ min: 1, max: 6 })).map(([pos, n]) => (b: Uint8Array) => {
    const at = pos % b.length;
    return Uint8Array.from([...b.subarray(0, at), ...b.subarray(at + n)]);
  }),
  fc.nat().map((n) => (b: Uint8Array) => b.subarray(0, n % b.length)),
);

describe('streaming hash = decode-then-hash', () => {
  for (const scheme of ['v2', 'v3'] as const) {
    const arbTx = arbPreparedTransaction({ scheme, maxTreeDepth: 4, maxChildren: 4 });

    it(`${scheme}: random transactions (300 runs)`, () => {
      fc.assert(
        fc.property(arbTx, (m) => agree(encodePreparedTransaction(m), scheme)),
        { seed: SEED, numRuns: 300 },
      );
    });

    it(`${scheme}: structural mutations (300 runs)`, () => {
      fc.assert(
        fc.property(arbTx, fc.array(arbMutation, { minLength: 1, maxLength: 2 }), (m, changes) => {
          for (const change of changes) change(m);
          agree(encodePreparedTransaction(m), scheme);
        }),
        { seed: SEED + 1, numRuns: 300 },
      );
    });

    it(`${scheme}: byte damage (500 runs)`, () => {
      fc.assert(
        fc.property(arbTx, arbDamage, (m, damage) => agree(damage(encodePreparedTransaction(m)), scheme)),
        { seed: SEED + 2, numRuns: 500 },
      );
    });
  }

  for (const scheme of ['v2', 'v3'] as const) {
    it(`${scheme}: deeply nested values — records, variants, lists, maps, unicode text, numerics (150 runs)`, () => {
      const arbTx = arbPreparedTransaction({ scheme, maxValueDepth: 14, maxTreeDepth: 2, maxChildren: 3 });
      fc.assert(
        fc.property(arbTx, (m) => agree(encodePreparedTransaction(m), scheme)),
        { seed: SEED + 3, numRuns: 150 },
      );
    });

    it(`${scheme}: byte damage inside deeply nested values (300 runs)`, () => {
      const arbTx = arbPreparedTransaction({ scheme, maxValueDepth: 10, maxTreeDepth: 1, maxChildren: 2 });
      fc.assert(
        fc.property(arbTx, arbDamage, (m, damage) => agree(damage(encodePreparedTransaction(m)), scheme)),
        { seed: SEED + 4, numRuns: 300 },
      );
    });
  }

  it('the value depth limit: 100 nested values hash the same both ways, 101 are refused both ways', () => {
    for (const [depth, ok] of [
      [100, true],
      [101, false],
    ] as const) {
      const m = fc
        .sample(arbPreparedTransaction({ scheme: 'v2' }), { seed: SEED, numRuns: 50 })
        .find((x) => x.transaction.nodes.some((n) => n.node.type === 'create'))!;
      const create = m.transaction.nodes.find((n) => n.node.type === 'create');
      if (create?.node.type !== 'create') throw new Error('sample has no create node');
      let v: Value = { kind: 'text', value: 'deep é 😀' };
      for (let i = 0; i < depth; i++)
        v = i % 3 === 0 ? { kind: 'list', elements: [v] } : { kind: 'optional', value: v };
      create.node.argument = v;
      const before = refused;
      agree(encodePreparedTransaction(m), 'v2');
      expect(refused > before).toBe(!ok);
    }
  });

  it('values whose fields are not in field-number order hash as their model does (the decode-then-hash way)', () => {
    let reordered = 0;
    fc.assert(
      fc.property(arbPreparedTransaction({ scheme: 'v3' }), (m) => {
        const bytes = encodePreparedTransaction(m);
        const expected = outcome(() => hashParts(decodePreparedTransaction(bytes), { scheme: 'v3' }));
        let moved = false;
        for (const n of m.transaction.nodes)
          if (n.node.type === 'create' && reorderRecord(bytes, n.node.argument)) moved = true;
        if (!moved) return;
        reordered++;
        expect(outcome(() => hashParts(bytes, { scheme: 'v3' }))).toEqual(expected);
        expect(outcome(() => hashPartsStreaming(bytes, 'v3'))).toEqual(expected);
        agree(bytes, 'v3');
      }),
      { seed: SEED + 5, numRuns: 200 },
    );
    expect(reordered).toBeGreaterThan(20);
  });

  it('both outcomes were exercised', () => {
    expect(accepted).toBeGreaterThan(200);
    expect(refused).toBeGreaterThan(200);
  });
});

describe('visitPreparedTransaction', () => {
  it('hands out top-level values as WireValues, typed so that reading them as a Value does not compile', () => {
    let seen = 0;
    fc.assert(
      fc.property(arbPreparedTransaction({ scheme: 'v3', maxTreeDepth: 3, maxChildren: 3 }), (m) => {
        let walker: WireValues | undefined;
        const tops: TopValue[] = [];
        const { metadata } = visitPreparedTransaction(encodePreparedTransaction(m), {
          begin: (w) => {
            walker = w;
          },
          seeds: () => {},
          node: (node) => {
            const n = node.node;
            if (n.type === 'create') {
              // @ts-expect-error a deferred argument may be a WireValue, which has no `kind`
              expect(n.argument.kind).toBeUndefined();
              tops.push(n.argument);
            }
            if (n.type === 'exercise') {
              tops.push(n.chosenValue);
              if (n.exerciseResult !== undefined) tops.push(n.exerciseResult);
            }
            return { type: n.type, children: 'children' in n ? n.children : undefined };
          },
        });
        for (const ic of metadata.inputContracts) tops.push(ic.contract.argument);
        expect(walker!.deferred).toBe(tops.length);
        for (const v of tops) {
          if (!(v instanceof WireValue)) throw new Error('a top-level value was decoded, not deferred');
          walker!.walkDeferred(v, MODEL);
        }
        expect(walker!.walked).toBe(tops.length);
        seen += tops.length;
      }),
      { seed: SEED + 6, numRuns: 30 },
    );
    expect(seen).toBeGreaterThan(30);
  });
});

/** A varint at `p`: its value and where it ends. */
function varint(b: Uint8Array, p: number): [number, number] {
  let v = 0;
  let mul = 1;
  for (;;) {
    const c = b[p++]!;
    v += (c & 0x7f) * mul;
    mul *= 128;
    if (c < 0x80) return [v, p];
  }
}

/**
 * Moves a record value's `record_id` (field 1) after its fields, in place (the
 * same bytes, reordered: no length changes): valid protobuf the encoder never
 * writes. Returns whether it found the record in `bytes`.
 */
function reorderRecord(bytes: Uint8Array, v: Value): boolean {
  if (v.kind !== 'record' || !v.recordId || v.fields.length === 0) return false;
  const enc = encodeValue(v);
  const [, contentAt] = varint(enc, 1); // tag 0x72, then the record's length
  const content = enc.subarray(contentAt);
  const at = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).indexOf(Buffer.from(content));
  if (at < 0 || content[0] !== 0x0a) return false;
  const [idLen, idAt] = varint(content, 1);
  const idField = content.slice(0, idAt + idLen);
  const rest = content.slice(idAt + idLen);
  bytes.set(rest, at);
  bytes.set(idField, at + rest.length);
  return true;
}

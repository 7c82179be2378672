import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { TransactionError } from '../../src/hashing/errors.js';
import {
  type HashingScheme,
  type HashParts,
  hashParts,
  hashPartsStreaming,
} from '../../src/hashing/transaction-hash.js';
import { arbPreparedTransaction } from '../support/arbitrary.js';
import { arbFieldEdit, type FieldEdit } from '../support/field-edits.js';
import { partsHex } from '../support/hash-parts.js';
import { concat, editMessage, parseFields, type Step } from '../support/protobuf.js';
import { realPreparedBytes } from '../support/vectors.js';

const SEED = 0x4e_4f_44;

type Outcome = { hashes: string[] } | { refused: string; code: string };

function outcome(fn: () => HashParts): Outcome {
  try {
    const p = fn();
    return { hashes: partsHex(p) };
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

/** Applies `edits` to node bodies picked by `picks`; whether any was a reordering that kept every field. */
function mutate(bytes: Uint8Array, picks: number[], edits: FieldEdit[]): Uint8Array {
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

const REAL = realPreparedBytes();

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
          fc.array(arbFieldEdit, { minLength: 1, maxLength: 3 }),
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
          fc.array(arbFieldEdit, { minLength: 1, maxLength: 3 }),
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

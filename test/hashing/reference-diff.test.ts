import { join } from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import type { PreparedTransaction } from '../../src/hashing/model.js';
import {
  type HashingScheme,
  type HashParts,
  hashParts,
  hashPartsStreaming,
} from '../../src/hashing/transaction-hash.js';
import { arbPreparedTransaction } from '../support/arbitrary.js';
import { arbFieldEdit, EDGE_PAYLOADS, type FieldEdit } from '../support/field-edits.js';
import {
  ALICE,
  BOB,
  baseModel,
  cid,
  createNode,
  encode,
  exerciseNode,
  fetchNode,
  seed,
  unit,
} from '../support/fixtures.js';
import { partsHex } from '../support/hash-parts.js';
import { concat, editMessage, parseFields, type Step, tag, varint, WT_LEN } from '../support/protobuf.js';
import { realPreparedBytes } from '../support/vectors.js';

const RUNS = Number(process.env.CANTON_FUZZ_RUNS ?? 200);
const REFERENCE = process.env.CANTON_HASHING_REFERENCE;
const SEED = Number(process.env.CANTON_FUZZ_SEED ?? 0x52_45_46);

interface Impl {
  decodePreparedTransaction(b: Uint8Array): unknown;
  hashParts(input: unknown, o: { scheme: HashingScheme }): HashParts;
  hashPartsStreaming(b: Uint8Array, s: HashingScheme): HashParts;
}
const HERE: Impl = {
  decodePreparedTransaction,
  hashParts: hashParts as Impl['hashParts'],
  hashPartsStreaming,
};
let ref: Impl | undefined;

beforeAll(async () => {
  if (!REFERENCE) return;
  const th = await import(join(REFERENCE, 'transaction-hash.js'));
  const dec = await import(join(REFERENCE, 'decode.js'));
  ref = {
    decodePreparedTransaction: dec.decodePreparedTransaction,
    hashParts: th.hashParts,
    hashPartsStreaming: th.hashPartsStreaming,
  };
});

type Outcome = string;

function outcome(fn: () => HashParts): Outcome {
  try {
    const p = fn();
    return partsHex(p).join(' ');
  } catch (e) {
    const x = e as { name?: string; code?: string; path?: string; detail?: string };
    if (x?.name === 'TransactionError') return `REFUSED ${x.code} @${x.path}: ${x.detail}`;
    throw e;
  }
}
const accepted = (o: Outcome) => !o.startsWith('REFUSED');

const tally = { accepted: 0, refused: 0, streamRefusedValid: 0, refStreamOnly: 0 };

/** Every path of one implementation, then (when set) the reference's; all must agree. */
function agree(bytes: Uint8Array, scheme: HashingScheme): void {
  const b64 = Buffer.from(bytes).toString('base64');
  const model = outcome(() => HERE.hashParts(HERE.decodePreparedTransaction(bytes), { scheme }));
  const pub = outcome(() => HERE.hashParts(bytes, { scheme }));
  const pub64 = outcome(() => HERE.hashParts(b64, { scheme }));
  const stream = outcome(() => HERE.hashPartsStreaming(bytes, scheme));
  expect(pub).toBe(model);
  expect(pub64).toBe(model);
  if (accepted(stream)) expect(stream).toBe(model);
  if (accepted(model)) {
    tally.accepted++;
    if (!accepted(stream)) tally.streamRefusedValid++;
  } else tally.refused++;
  if (ref) {
    const r = ref;
    const refPub = outcome(() => r.hashParts(bytes, { scheme }));
    const refModel = outcome(() => r.hashParts(r.decodePreparedTransaction(bytes), { scheme }));
    const refStream = outcome(() => r.hashPartsStreaming(bytes, scheme));
    expect(pub).toBe(refPub);
    expect(model).toBe(refModel);
    if (accepted(refStream) && !accepted(stream)) tally.refStreamOnly++;
  }
}

// ---- payloads ------------------------------------------------------------

const _enc = (s: string) => new TextEncoder().encode(s);
const _hex = (n: number, seed = 'a1') => seed.repeat(n).slice(0, 2 * n);
const _bytes = (...b: number[]) => Uint8Array.from(b);

// ---- structure-aware edits at any depth -------------------------------------

/** Paths of every length-delimited field whose payload parses as a message, down to `depth`. */
function messagePaths(buf: Uint8Array, depth: number, prefix: Step[] = [], out: Step[][] = []): Step[][] {
  if (depth === 0) return out;
  let fields: ReturnType<typeof parseFields>;
  try {
    fields = parseFields(buf);
  } catch {
    return out;
  }
  const seen = new Map<number, number>();
  for (const f of fields) {
    const k = seen.get(f.field) ?? 0;
    seen.set(f.field, k + 1);
    if (f.wireType !== WT_LEN) continue;
    const inner = buf.subarray(f.payloadStart, f.end);
    let ok = true;
    try {
      parseFields(inner);
    } catch {
      ok = false;
    }
    if (!ok || inner.length === 0) continue;
    const p: Step[] = [...prefix, [f.field, k]];
    out.push(p);
    messagePaths(inner, depth - 1, p, out);
  }
  return out;
}

/** The byte range [start, end) of the message reached by `path` (its payload). */
function locate(buf: Uint8Array, path: readonly Step[]): [number, number] {
  let start = 0;
  let cur = buf;
  for (const [field, occ] of path) {
    const f = parseFields(cur).filter((x) => x.field === field)[occ]!;
    start += f.payloadStart;
    cur = cur.subarray(f.payloadStart, f.end);
  }
  return [start, start + cur.length];
}

function mutate(buf: Uint8Array, picks: number[], edits: FieldEdit[], flips: [number, number][]): Uint8Array {
  let out = buf;
  for (let i = 0; i < edits.length; i++) {
    const paths = messagePaths(out, 7);
    if (paths.length === 0) break;
    const path = paths[picks[i % picks.length]! % paths.length]!;
    try {
      out = editMessage(out, path, edits[i]!);
    } catch {
      // the helper cannot walk damaged bytes: keep what we have
    }
  }
  if (flips.length > 0) {
    out = Uint8Array.from(out);
    for (const [pos, bit] of flips) if (out.length) out[pos % out.length]! ^= 1 << bit;
  }
  return out;
}

const REAL = realPreparedBytes();

const arbMutation = fc.record({
  picks: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }),
  edits: fc.array(arbFieldEdit, { minLength: 0, maxLength: 4 }),
  flips: fc.oneof(
    { weight: 4, arbitrary: fc.constant([] as [number, number][]) },
    {
      weight: 1,
      arbitrary: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 7 })), { minLength: 1, maxLength: 2 }),
    },
  ),
});

// ---- model-level edits -------------------------------------------------------

const arbWeirdText = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom(
    '',
    'alice',
    ALICE,
    BOB,
    'a'.repeat(255),
    'a'.repeat(256),
    'x y',
    'é',
    '\uD800',
    '2.1',
    '2',
    '2.2',
  ),
);

type ModelEdit = (m: PreparedTransaction) => void;
const arbModelEdit: fc.Arbitrary<ModelEdit> = fc
  .tuple(
    fc.nat(),
    fc.constantFrom(
      'packageName',
      'choiceId',
      'lfVersion',
      'contractId',
      'signatories',
      'stakeholders',
      'actingParties',
      'choiceObservers',
      'swapParties',
      'dupParty',
    ),
    arbWeirdText,
  )
  .map(([i, field, text]) => (m: PreparedTransaction) => {
    const nodes = m.transaction.nodes.filter((n) => n.node.type !== 'rollback');
    if (nodes.length === 0) return;
    const n = nodes[i % nodes.length]!.node as unknown as Record<string, unknown>;
    if (field === 'swapParties' || field === 'dupParty') {
      const l = n.signatories as string[] | undefined;
      if (!l) return;
      if (field === 'dupParty' && l.length > 0) l.push(l[0]!);
      else if (l.length > 1) l.reverse();
      return;
    }
    if (['signatories', 'stakeholders', 'actingParties', 'choiceObservers'].includes(field)) {
      const l = n[field] as string[] | undefined;
      if (!l) return;
      l.push(text);
      return;
    }
    if (field in n) n[field] = text;
  });

describe('the hasher agrees with itself (and the reference, when given) on edited transactions', () => {
  for (const scheme of ['v2', 'v3'] as const) {
    it(`${scheme}: real vectors edited at any depth`, () => {
      fc.assert(
        fc.property(fc.nat({ max: REAL.length - 1 }), arbMutation, (v, { picks, edits, flips }) =>
          agree(mutate(REAL[v]!, picks, edits, flips), scheme),
        ),
        { seed: SEED + (scheme === 'v2' ? 0 : 1), numRuns: RUNS },
      );
    });

    it(`${scheme}: random transactions, edited in the model and on the wire`, () => {
      const arbTx = arbPreparedTransaction({ scheme, maxTreeDepth: 3, maxChildren: 3 });
      fc.assert(
        fc.property(arbTx, fc.array(arbModelEdit, { maxLength: 2 }), arbMutation, (m, medits, mut) => {
          for (const e of medits) e(m);
          let b: Uint8Array;
          try {
            b = encodePreparedTransaction(m);
          } catch {
            return;
          }
          agree(b, scheme);
          agree(mutate(b, mut.picks, mut.edits, mut.flips), scheme);
        }),
        { seed: SEED + (scheme === 'v2' ? 2 : 3), numRuns: Math.ceil(RUNS / 2) },
      );
    });
  }

  it('both outcomes were exercised', () => {
    expect(tally.accepted).toBeGreaterThan(RUNS / 4);
    expect(tally.refused).toBeGreaterThan(RUNS / 2);
    if (process.env.CANTON_FUZZ_TALLY) console.log(tally);
  });
});

// ---- the byte cache: crafted collisions, and nothing kept from a refused transaction ----

/** Offsets of the words the byte cache samples for a key of `n` bytes (n >= 4). */
function sampled(n: number): Set<number> {
  const s = new Set<number>();
  for (const o of [0, n >> 2, n >> 1, n - 4 - (n >> 3), n - 4]) for (let k = 0; k < 4; k++) s.add(o + k);
  return s;
}

/** A party of `n` bytes and variants that differ from it only outside the sampled words. */
function collidingParties(n: number, bad: string): { good: string; twins: string[] } {
  const base = Array.from({ length: n }, (_, i) => 'abcdefghijklmnopqrstuvwxyz'[(i * 7) % 26]!);
  const s = sampled(n);
  const free = [...Array(n).keys()].filter((i) => !s.has(i));
  const twins: string[] = [];
  for (const i of free) {
    const t = [...base];
    t[i] = bad;
    twins.push(t.join(''));
  }
  return { good: base.join(''), twins };
}

describe('byte cache', () => {
  it('a party that shares length and sampled words with a cached one is checked on its own', () => {
    for (const n of [20, 40, 76, 77, 100, 255]) {
      for (const bad of ['!', '.', '\u007f']) {
        const { good, twins } = collidingParties(n, bad);
        expect(twins.length).toBeGreaterThan(0);
        const m = baseModel();
        const accept = (p: string) => {
          const mm = baseModel();
          (mm.transaction.nodes[0]!.node as { actingParties: string[] }).actingParties = [p];
          return encode(mm);
        };
        // the good one is cached (every path), then each twin must be refused as a party
        for (const scheme of ['v2', 'v3'] as const) agree(accept(good), scheme);
        expect(outcome(() => hashParts(accept(good)))).not.toMatch(/^REFUSED/);
        for (const t of twins) {
          const o = outcome(() => hashParts(accept(t)));
          expect(o, `twin of ${good} accepted`).toMatch(/^REFUSED non_canonical/);
          agree(accept(t), 'v2');
          // and the good one still hashes as before
          expect(outcome(() => hashParts(accept(good)))).not.toMatch(/^REFUSED/);
        }
        void m;
      }
    }
  });

  it('two valid colliding parties hash as themselves, in any order, many times over', () => {
    const { good, twins } = collidingParties(76, 'z');
    const valid = [good, ...twins.filter((t) => t !== good)].slice(0, 6);
    for (let round = 0; round < 3; round++)
      for (const p of valid) {
        const mm = baseModel();
        (mm.transaction.nodes[0]!.node as { actingParties: string[] }).actingParties = [p];
        const b = encode(mm);
        agree(b, 'v2');
        // the model path (no cache on encoding) says what the party is
        const model = decodePreparedTransaction(b);
        expect((model.transaction.nodes[0]!.node as { actingParties: string[] }).actingParties).toEqual([p]);
      }
  });

  it('a refused transaction leaves nothing a later one trusts', () => {
    // A new party and template read, then the node refused (an unknown Daml-LF version after them):
    // what was cached on the way is met by the next transactions, valid and invalid alike.
    const fresh = `fresh-${'q'.repeat(60)}::1220`;
    const withParty = (p: string, lf: string, entity = 'Fresh') => {
      const m = baseModel();
      const ex = m.transaction.nodes[0]!.node as {
        actingParties: string[];
        lfVersion: string;
        templateId: { entityName: string };
      };
      ex.actingParties = [p];
      ex.templateId = { ...ex.templateId, entityName: entity };
      ex.lfVersion = lf;
      return encode(m);
    };
    for (const scheme of ['v2', 'v3'] as const) {
      expect(outcome(() => hashParts(withParty(fresh, '9.9'), { scheme }))).toMatch(
        /^REFUSED unsupported_version/,
      );
      agree(withParty(fresh, '9.9'), scheme);
      agree(withParty(fresh, '2.1'), scheme);
      const twin = `${fresh.slice(0, 10)}!${fresh.slice(11)}`;
      expect(outcome(() => hashParts(withParty(twin, '2.1'), { scheme }))).toMatch(/^REFUSED non_canonical/);
      expect(outcome(() => hashParts(withParty(fresh, '2.1', 'Fresh.bad..name'), { scheme }))).toMatch(
        /^REFUSED invalid_identifier/,
      );
    }
  });
});

describe('every text field of every node kind, given each edge-case payload', () => {
  /** The base transaction's exercise, create and fetch bodies, and their identifiers. */
  const base = encode(baseModel());
  const bodies: Step[][] = [0, 1, 2].map((k) => {
    const node = parseFields(
      base.subarray(
        ...locate(base, [
          [1, 0],
          [3, k],
          [1000, 0],
        ]),
      ),
    );
    return [
      [1, 0],
      [3, k],
      [1000, 0],
      [node[0]!.field, 0],
    ];
  });
  /** Length-delimited fields of a message (each occurrence), and of its template and interface ids. */
  const targets: [Step[], Step][] = [];
  for (const body of bodies) {
    targets.push([[...body.slice(0, 2)], [1, 0]]); // node_id
    const fields = parseFields(base.subarray(...locate(base, body)));
    const seen = new Map<number, number>();
    for (const f of fields) {
      const k = seen.get(f.field) ?? 0;
      seen.set(f.field, k + 1);
      if (f.wireType !== WT_LEN) continue;
      targets.push([body, [f.field, k]]);
      if (f.field === 4 || f.field === 8)
        for (const g of [1, 2, 3])
          targets.push([
            [...body, [f.field, k]],
            [g, 0],
          ]);
    }
  }

  // Under V3 only the Daml-LF version rule differs: the CI run takes V2; a run against a reference takes both.
  for (const scheme of REFERENCE ? (['v2', 'v3'] as const) : (['v2'] as const))
    it(`${scheme}: ${targets.length} fields x ${EDGE_PAYLOADS.length} payloads`, () => {
      let refused = 0;
      for (const [path, [field, occ]] of targets)
        for (const payload of EDGE_PAYLOADS) {
          const b = editMessage(base, path, (msg) => {
            const f = parseFields(msg).filter((x) => x.field === field)[occ]!;
            return concat(
              msg.subarray(0, f.start),
              tag(field, WT_LEN),
              varint(payload.length),
              payload,
              msg.subarray(f.end),
            );
          });
          agree(b, scheme);
          if (outcome(() => hashParts(b, { scheme })).startsWith('REFUSED')) refused++;
        }
      expect(refused).toBeGreaterThan(targets.length * 10);
    });
});

describe('the reused node scratch keeps nothing of the node before', () => {
  it('a full exercise followed by bare ones (and the reverse), every kind after every kind', () => {
    const IFACE = { packageId: 'f'.repeat(64), moduleName: 'Splice.Api', entityName: 'Holding' };
    const full = (children: string[]) =>
      exerciseNode(children, {
        interfaceId: IFACE,
        choiceObservers: [BOB],
        actingParties: [ALICE, BOB],
        signatories: [ALICE, BOB],
        consuming: true,
        choiceId: 'Full',
      });
    const bare = (children: string[]) =>
      exerciseNode(children, {
        exerciseResult: undefined,
        consuming: false,
        choiceObservers: [],
        actingParties: [],
        signatories: [],
        stakeholders: [],
        choiceId: 'B',
        chosenValue: unit,
      });
    const kinds = {
      full,
      bare,
      create: (_: string[]) => createNode(cid(200), unit, { signatories: [], stakeholders: [] }),
      fetch: (_: string[]) =>
        fetchNode({ interfaceId: undefined, actingParties: [], signatories: [], stakeholders: [] }),
      fetchIface: (_: string[]) => fetchNode({ interfaceId: IFACE }),
    };
    const names = Object.keys(kinds) as (keyof typeof kinds)[];
    for (const a of names)
      for (const b of names) {
        const m = baseModel();
        const isEx = (k: string) => k === 'full' || k === 'bare';
        const nodeA = isEx(a) ? kinds[a](['11']) : kinds[a]([]);
        const nodeB = kinds[b]([]);
        m.transaction.roots = isEx(a) ? ['10'] : ['10', '11'];
        m.transaction.nodes = [
          { nodeId: '10', node: nodeA as never },
          { nodeId: '11', node: nodeB as never },
        ];
        m.transaction.nodeSeeds = [
          { nodeId: 10, seed: seed(0xb0) },
          { nodeId: 11, seed: seed(0xb1) },
        ].filter((s) => {
          const n = s.nodeId === 10 ? nodeA : nodeB;
          return n.type === 'create' || n.type === 'exercise';
        });
        const bytes = encode(m);
        // decoding gives back the nodes as built (nothing of the node before in the next)
        expect(decodePreparedTransaction(bytes).transaction.nodes, `${a} then ${b}`).toEqual(
          m.transaction.nodes,
        );
        for (const scheme of ['v2', 'v3'] as const) {
          agree(bytes, scheme);
          expect(
            outcome(() => hashParts(bytes, { scheme })),
            `${a} then ${b}`,
          ).not.toMatch(/^REFUSED/);
        }
      }
  });
});

describe('byte cache under eviction', () => {
  it('thousands of distinct parties, read again after the table has turned over', () => {
    const party = (i: number) => `p${i.toString(36).padStart(6, '0')}::1220${'ab'.repeat(32)}`;
    const tx = (ids: number[], extra?: string) => {
      const m = baseModel();
      const list = ids.map(party);
      if (extra !== undefined) list.push(extra);
      list.sort();
      (m.transaction.nodes[0]!.node as { choiceObservers: string[] }).choiceObservers = list;
      return encode(m);
    };
    const N = 24_000;
    const batches: number[][] = [];
    for (let i = 0; i < N; i += 2000) batches.push(Array.from({ length: 2000 }, (_, k) => i + k));
    const first = batches.map((b) => outcome(() => hashParts(tx(b))));
    for (const o of first) expect(o).not.toMatch(/^REFUSED/);
    // again, in another order: the same hashes; and with a one-byte-off twin of a cached party, refused
    for (let k = batches.length - 1; k >= 0; k--) {
      expect(outcome(() => hashParts(tx(batches[k]!)))).toBe(first[k]);
      agree(tx(batches[k]!), 'v2');
      const twin = party(batches[k]![7]!).replace('::1220ab', '::1220a!');
      expect(outcome(() => hashParts(tx(batches[k]!, twin)))).toMatch(/^REFUSED non_canonical/);
    }
  });
});

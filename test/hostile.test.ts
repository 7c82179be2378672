/**
 * Bounded cost on hostile shapes (hashing-spec P11, P29): deep chains, many
 * roots, huge strings, long cycles, deep value nesting. Everything must either
 * hash (and match a hash computed independently from the spec) or be refused
 * with a TransactionError — never a stack overflow or runaway time.
 */
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../src/hashing/decode.js';
import { bytesToHex } from '../src/hashing/input.js';
import type { Node, NodeSeed, PreparedTransaction } from '../src/hashing/model.js';
import { type HashingScheme, hashPreparedTransaction } from '../src/hashing/transaction-hash.js';
import {
  ALICE,
  BOB,
  baseMetadata,
  cid,
  createNode,
  encode,
  exerciseNode,
  expectRefusal,
  MAX_LET,
  MAX_RECORD_TIME,
  PACKAGE_NAME,
  PREPARATION_TIME,
  SYNCHRONIZER,
  singleCreateExpectedHash,
  singleCreateModel,
  TEMPLATE,
  text,
  UUID,
  unit,
} from './support/fixtures.js';
import { concat, lenField, replaceField, tag, varint, WT_LEN } from './support/protobuf.js';
import {
  be32,
  createEncoding,
  exerciseEncoding,
  finalHash,
  metadataHash,
  sha256,
  transactionHash,
  u8,
} from './support/spec-hash.js';

const N = 10_000;
const SCHEMES: HashingScheme[] = ['v2', 'v3'];
const TIMEOUT = 60_000;

function seedFor(i: number): Uint8Array {
  const s = new Uint8Array(32).fill(0x77);
  new DataView(s.buffer).setUint32(0, i);
  return s;
}

function model(roots: string[], nodes: Node[], nodeSeeds: NodeSeed[]): PreparedTransaction {
  return {
    transaction: { version: '2.1', roots, nodes, nodeSeeds },
    metadata: { ...baseMetadata(), inputContracts: [] },
  };
}

/** Metadata hash of `model(...)`'s metadata (no input contracts), from the spec. */
function specMetadataHash(scheme: HashingScheme): Buffer {
  return metadataHash(scheme, {
    actAs: [ALICE],
    commandId: 'command-1',
    transactionUuid: UUID,
    mediatorGroup: 0,
    synchronizerId: SYNCHRONIZER,
    minLet: undefined,
    maxLet: MAX_LET,
    preparationTime: PREPARATION_TIME,
    inputs: [],
    maxRecordTime: MAX_RECORD_TIME,
  });
}

/** Spec encoding of the exercise built by `chainExercise` with the given child hashes. */
function specExercise(scheme: HashingScheme, i: number, childHashes: Uint8Array[]): Buffer {
  return exerciseEncoding(scheme, {
    lfVersion: '2.1',
    seed: seedFor(i),
    contractId: cid(1),
    packageName: PACKAGE_NAME,
    templateId: TEMPLATE,
    signatories: [ALICE],
    stakeholders: [ALICE, BOB],
    actingParties: [ALICE],
    choiceId: 'Transfer',
    chosenValue: u8(0x00), // unit
    consuming: true,
    choiceObservers: [],
    childHashes,
  });
}

const chainExercise = (children: string[]) =>
  exerciseNode(children, { chosenValue: unit, exerciseResult: undefined });

const hex = (b: Uint8Array) => bytesToHex(b);

describe('bounded cost', () => {
  it(
    'a 10,000-deep chain of exercises hashes under V2 and V3 (no stack overflow) and matches the spec',
    () => {
      const nodes: Node[] = [];
      const seeds: NodeSeed[] = [];
      for (let i = 0; i < N; i++) {
        nodes.push({ nodeId: String(i), node: chainExercise(i + 1 < N ? [String(i + 1)] : []) });
        seeds.push({ nodeId: i, seed: seedFor(i) });
      }
      const bytes = encode(model(['0'], nodes, seeds));
      for (const scheme of SCHEMES) {
        let h: Uint8Array | undefined;
        for (let i = N - 1; i >= 0; i--) h = sha256(specExercise(scheme, i, h ? [h] : []));
        const expected = finalHash(scheme, transactionHash('2.1', [h!]), specMetadataHash(scheme));
        expect(hex(hashPreparedTransaction(bytes, { scheme })), scheme).toBe(expected.toString('hex'));
      }
    },
    TIMEOUT,
  );

  it(
    '10,000 roots hash under V2 and V3 and match the spec',
    () => {
      const nodes: Node[] = [];
      const seeds: NodeSeed[] = [];
      const roots: string[] = [];
      for (let i = 0; i < N; i++) {
        roots.push(String(i));
        nodes.push({ nodeId: String(i), node: createNode(cid(1000 + i), unit) });
        seeds.push({ nodeId: i, seed: seedFor(i) });
      }
      const bytes = encode(model(roots, nodes, seeds));
      for (const scheme of SCHEMES) {
        const rootHashes = roots.map((_, i) =>
          sha256(
            createEncoding(scheme, {
              lfVersion: '2.1',
              seed: seedFor(i),
              contractId: cid(1000 + i),
              packageName: PACKAGE_NAME,
              templateId: TEMPLATE,
              argument: u8(0x00),
              signatories: [ALICE],
              stakeholders: [ALICE, BOB],
            }),
          ),
        );
        const expected = finalHash(scheme, transactionHash('2.1', rootHashes), specMetadataHash(scheme));
        expect(hex(hashPreparedTransaction(bytes, { scheme })), scheme).toBe(expected.toString('hex'));
      }
    },
    TIMEOUT,
  );

  const big: [string, string, number][] = [
    ['a 20 MB ASCII text value', 'a', 20_000_000],
    ['20 MB of a 2-byte UTF-8 character', '\u00e9', 10_000_000],
  ];
  for (const [name, ch, count] of big) {
    it(
      `${name} hashes to the independently computed expectation`,
      () => {
        const s = ch.repeat(count);
        const bytes = encode(singleCreateModel(text(s)));
        expect(bytes.length).toBeGreaterThan(20_000_000);
        const utf8 = Buffer.from(s, 'utf8');
        expect(utf8.length).toBe(20_000_000);
        const encoding = Buffer.concat([u8(0x07), be32(utf8.length), utf8]);
        for (const scheme of SCHEMES) {
          expect(hex(hashPreparedTransaction(bytes, { scheme })), scheme).toBe(
            singleCreateExpectedHash(scheme, encoding).toString('hex'),
          );
        }
      },
      TIMEOUT,
    );
  }

  it(
    'a cycle among 10,000 nodes is refused (strict and with the test-only non-tree option)',
    () => {
      // root 0 is a create; exercises 1 → 2 → … → 10000 → 1 form a ring unreachable from it
      const nodes: Node[] = [{ nodeId: '0', node: createNode(cid(5), unit) }];
      const seeds: NodeSeed[] = [{ nodeId: 0, seed: seedFor(0) }];
      for (let i = 1; i <= N; i++) {
        nodes.push({ nodeId: String(i), node: chainExercise([String(i < N ? i + 1 : 1)]) });
        seeds.push({ nodeId: i, seed: seedFor(i) });
      }
      const bytes = encode(model(['0'], nodes, seeds));
      for (const scheme of SCHEMES)
        expectRefusal(() => hashPreparedTransaction(bytes, { scheme }), 'cycle', 'transaction.nodes[1]');
      expectRefusal(
        () => decodePreparedTransaction(bytes, { unsafeAllowNonTreeForTests: true }),
        'cycle',
        'transaction.nodes[1]',
      );
    },
    TIMEOUT,
  );

  it(
    'a 10,000-node cycle through a root is refused as a shared node',
    () => {
      const nodes: Node[] = [];
      const seeds: NodeSeed[] = [];
      for (let i = 0; i < N; i++) {
        nodes.push({ nodeId: String(i), node: chainExercise([String((i + 1) % N)]) });
        seeds.push({ nodeId: i, seed: seedFor(i) });
      }
      const bytes = encode(model(['0'], nodes, seeds));
      expectRefusal(
        () => hashPreparedTransaction(bytes),
        'shared_node',
        `transaction.nodes[${N - 1}].v1.exercise.children[0]`,
      );
      expectRefusal(
        () => hashPreparedTransaction(bytes, { unsafeAllowNonTreeForTests: true }),
        'cycle',
        'transaction.nodes[0]',
      );
    },
    TIMEOUT,
  );

  it(
    'heavy sharing (2^1000 paths) is refused strictly and hashed in linear time with the test-only option',
    () => {
      // exercise i has children [i+1, i+1]: the naive recursive algorithm would visit 2^1000 nodes
      const depth = 1000;
      const nodes: Node[] = [];
      const seeds: NodeSeed[] = [];
      for (let i = 0; i < depth; i++) {
        const kids = i + 1 < depth ? [String(i + 1), String(i + 1)] : [];
        nodes.push({ nodeId: String(i), node: chainExercise(kids) });
        seeds.push({ nodeId: i, seed: seedFor(i) });
      }
      const bytes = encode(model(['0'], nodes, seeds));
      expectRefusal(
        () => hashPreparedTransaction(bytes),
        'shared_node',
        'transaction.nodes[0].v1.exercise.children[1]',
      );
      for (const scheme of SCHEMES) {
        let h: Uint8Array | undefined;
        for (let i = depth - 1; i >= 0; i--) h = sha256(specExercise(scheme, i, h ? [h, h] : []));
        const expected = finalHash(scheme, transactionHash('2.1', [h!]), specMetadataHash(scheme));
        const got = hashPreparedTransaction(bytes, { scheme, unsafeAllowNonTreeForTests: true });
        expect(hex(got), scheme).toBe(expected.toString('hex'));
      }
    },
    TIMEOUT,
  );
});

describe('decoder caches (identifiers and party ids are cached by their bytes)', () => {
  it(
    'identifiers and parties that differ in a single byte anywhere are never confused',
    () => {
      // Same length, one character changed at every position: most pairs differ only in bytes a
      // sampled-word hash does not look at, so they share hash buckets (and overflow them).
      const L = 48;
      const variantAt = (base: string, i: number) => `${base.slice(0, i)}B${base.slice(i + 1)}`;
      const entity = 'A'.repeat(L);
      const partyBase = `p${'a'.repeat(L - 1)}`;
      const nodes: Node[] = [];
      const seeds: NodeSeed[] = [];
      const roots: string[] = [];
      const specs: Parameters<typeof createEncoding>[1][] = [];
      for (let i = 0; i < L; i++) {
        const templateId = {
          packageId: TEMPLATE.packageId,
          moduleName: 'M',
          entityName: variantAt(entity, i),
        };
        const party = variantAt(partyBase, i === 0 ? 1 : i);
        roots.push(String(i));
        nodes.push({
          nodeId: String(i),
          node: createNode(cid(1000 + i), unit, { templateId, signatories: [party], stakeholders: [party] }),
        });
        seeds.push({ nodeId: i, seed: seedFor(i) });
        specs.push({
          lfVersion: '2.1',
          seed: seedFor(i),
          contractId: cid(1000 + i),
          packageName: PACKAGE_NAME,
          templateId,
          argument: u8(0x00),
          signatories: [party],
          stakeholders: [party],
        });
      }
      const bytes = encode(model(roots, nodes, seeds));
      // twice: the second decode runs with every entry already cached
      for (let round = 0; round < 2; round++) {
        const decoded = decodePreparedTransaction(bytes);
        decoded.transaction.nodes.forEach((n, i) => {
          const c = n.node;
          expect(c.type === 'create' && [c.templateId.entityName, c.signatories[0]]).toEqual([
            specs[i]!.templateId.entityName,
            specs[i]!.signatories[0],
          ]);
        });
        for (const scheme of SCHEMES) {
          const rootHashes = specs.map((c) => sha256(createEncoding(scheme, c)));
          const expected = finalHash(scheme, transactionHash('2.1', rootHashes), specMetadataHash(scheme));
          expect(hex(hashPreparedTransaction(bytes, { scheme })), scheme).toBe(expected.toString('hex'));
        }
      }
    },
    TIMEOUT,
  );

  it('a refused party is not remembered as valid', () => {
    const bad = 'bad!party';
    const withParty = (p: string) =>
      encode(
        model(
          ['0'],
          [{ nodeId: '0', node: createNode(cid(7), unit, { signatories: [p] }) }],
          [{ nodeId: 0, seed: seedFor(0) }],
        ),
      );
    for (let round = 0; round < 3; round++)
      expectRefusal(
        () => hashPreparedTransaction(withParty(bad)),
        'non_canonical',
        'transaction.nodes[0].v1.create.signatories[0]',
      );
  });
});

describe('deep value nesting', () => {
  /** A Value message nested `depth` times through `wrap` (raw bytes, built without recursion). */
  function nestedValue(depth: number, wrap: (inner: Uint8Array) => Uint8Array): Uint8Array {
    let v: Uint8Array = lenField(1, []); // Value{unit: Empty{}}
    for (let i = 1; i < depth; i++) v = wrap(v);
    return v;
  }
  // Value{list: List{elements: [inner]}}, Value{optional: Optional{value: inner}},
  // Value{record: Record{fields: [RecordField{label: "f", value: inner}]}}
  const list = (inner: Uint8Array) => lenField(11, lenField(1, inner));
  const optional = (inner: Uint8Array) => lenField(10, lenField(1, inner));
  const rec = (inner: Uint8Array) =>
    lenField(14, lenField(2, concat([0x0a, 0x01, 0x66], lenField(2, inner))));

  const base = encode(singleCreateModel(unit));
  const CREATE_STEPS = [
    [1, 0],
    [3, 0],
    [1000, 0],
    [1, 0],
  ] as const;
  const withArgument = (value: Uint8Array) =>
    replaceField(base, CREATE_STEPS, [5, 0], concat(tag(5, WT_LEN), varint(value.length), value));

  const cases: [string, (inner: Uint8Array) => Uint8Array, string][] = [
    ['lists', list, '.list.elements[0]'],
    ['optionals', optional, '.optional.value'],
    ['records', rec, '.record.fields[0].value'],
  ];
  for (const [name, wrap, seg] of cases) {
    it(
      `10,000 nested ${name} are refused with too_deep (not a stack overflow)`,
      () => {
        const bytes = withArgument(nestedValue(N, wrap));
        for (const scheme of SCHEMES)
          expectRefusal(
            () => hashPreparedTransaction(bytes, { scheme }),
            'too_deep',
            // refused at the first value 101 levels below the top-level one (which is level 0)
            `transaction.nodes[0].v1.create.argument${seg.repeat(101)}`,
          );
      },
      TIMEOUT,
    );
  }

  it('100 nested lists built as raw bytes hash like the spec encoding', () => {
    const bytes = withArgument(nestedValue(100, list));
    // 99 × (0a ‖ 00000001) then unit 00
    const parts: Buffer[] = [];
    for (let i = 1; i < 100; i++) parts.push(u8(0x0a), be32(1));
    parts.push(u8(0x00));
    const encoding = Buffer.concat(parts);
    for (const scheme of SCHEMES)
      expect(hex(hashPreparedTransaction(bytes, { scheme }))).toBe(
        singleCreateExpectedHash(scheme, encoding).toString('hex'),
      );
  });
});

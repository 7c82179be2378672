/**
 * Where the decoder follows Canton rather than a stricter rule of its own
 * (docs/hashing.md, "What is accepted as Canton accepts it"): seeds on nodes
 * that are never seeded and `global_key_mapping` entries are accepted and, as
 * by Canton's hasher, not hashed; gen-map entries are hashed in the order
 * given, repeated keys included. Repeated record labels and orphan nodes stay
 * refused (the reasons are in the doc).
 */
import { hashPreparedTransaction as visualizerHash } from '@canton-network/core-tx-visualizer';
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { bytesToBase64, bytesToHex } from '../../src/hashing/input.js';
import type { PreparedTransaction, Value } from '../../src/hashing/model.js';
import { type HashingScheme, hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import {
  ALICE,
  baseModel,
  cid,
  createNode,
  encode,
  exerciseOf,
  expectRefusal,
  PACKAGE_NAME,
  party,
  record,
  seed,
  singleCreateModel,
  TEMPLATE,
  text,
} from '../support/fixtures.js';
import { appendTo, concat, lenField, strField, varintField } from '../support/protobuf.js';

const SCHEMES: HashingScheme[] = ['v2', 'v3'];
const hashHex = (b: Uint8Array, scheme: HashingScheme) => bytesToHex(hashPreparedTransaction(b, { scheme }));
const variant = (change: (m: PreparedTransaction) => void): Uint8Array => {
  const m = baseModel();
  change(m);
  return encode(m);
};

describe('repeated record labels stay refused', () => {
  it('a second field labelled like the first (Canton would hash both; the display would show one)', () => {
    const bytes = encode(
      singleCreateModel(
        record([
          ['owner', party(ALICE)],
          ['owner', text('x')],
        ]),
      ),
    );
    for (const scheme of SCHEMES)
      expectRefusal(
        () => hashPreparedTransaction(bytes, { scheme }),
        'duplicate',
        'transaction.nodes[0].v1.create.argument.record.fields[1]',
      );
  });
});

describe('a seed on a node that is never seeded: accepted, not hashed, not kept', () => {
  const plain = encode(baseModel());

  it('on a fetch node', () => {
    const b = variant((m) => {
      m.transaction.nodeSeeds.push({ nodeId: 2, seed: seed(0xa2) });
    });
    for (const scheme of SCHEMES) expect(hashHex(b, scheme)).toBe(hashHex(plain, scheme));
    expect(decodePreparedTransaction(b).seedById.has('2')).toBe(false);
  });

  it('on a rollback node', () => {
    const withRollback = (m: PreparedTransaction) => {
      m.transaction.nodes.push({ nodeId: '3', node: { type: 'rollback', children: ['1'] } });
      exerciseOf(m).children = ['3', '2'];
    };
    const b = variant((m) => {
      withRollback(m);
      m.transaction.nodeSeeds.push({ nodeId: 3, seed: seed(3) });
    });
    for (const scheme of SCHEMES) expect(hashHex(b, scheme)).toBe(hashHex(variant(withRollback), scheme));
  });

  it('two seeds for one fetch node are still refused', () => {
    const b = variant((m) => {
      m.transaction.nodeSeeds.push({ nodeId: 2, seed: seed(0xa2) }, { nodeId: 2, seed: seed(0xa3) });
    });
    expectRefusal(() => decodePreparedTransaction(b), 'seed', 'transaction.node_seeds[3].node_id');
  });
});

describe('global_key_mapping entries: accepted, not hashed', () => {
  const S_META = [[2, 0]] as const;
  const identifier = concat(
    strField(1, TEMPLATE.packageId),
    strField(2, TEMPLATE.moduleName),
    strField(3, TEMPLATE.entityName),
  );
  const globalKey = (hashBytes = 32) =>
    concat(
      lenField(1, identifier),
      strField(2, PACKAGE_NAME),
      lenField(3, strField(7, ALICE)),
      lenField(4, new Uint8Array(hashBytes).fill(0x4b)),
    );
  const contractIdValue = strField(9, cid(7));
  const plain = encode(baseModel());

  it('an entry with a key and a contract id, and one without a value', async () => {
    const b = appendTo(
      appendTo(plain, S_META, lenField(8, concat(lenField(1, globalKey()), lenField(2, contractIdValue)))),
      S_META,
      lenField(8, lenField(1, globalKey())),
    );
    for (const scheme of SCHEMES) expect(hashHex(b, scheme)).toBe(hashHex(plain, scheme));
    expect(hashHex(b, 'v2')).toBe(await visualizerHash(bytesToBase64(b), 'hex'));
  });

  it('its contents are still decoded strictly', () => {
    expectRefusal(
      () => decodePreparedTransaction(appendTo(plain, S_META, lenField(8, varintField(3, 1)))),
      'unknown_field',
      'metadata.global_key_mapping[0]',
    );
    expectRefusal(
      () => decodePreparedTransaction(appendTo(plain, S_META, lenField(8, lenField(1, globalKey(31))))),
      'non_canonical',
      'metadata.global_key_mapping[0].key.hash',
    );
  });
});

describe('gen-map entries: hashed in the order given, repeated keys accepted, as Canton', () => {
  // Canton's value validator keeps a gen-map's entries as given (no order or uniqueness check) and
  // its hasher hashes them in that order; the engine itself emits keys sorted and unique.
  const genMap = (keys: string[]): Value => ({
    kind: 'genMap',
    entries: keys.map((k, i) => ({ key: text(k), value: text(`v${i}`) })),
  });
  const withMap = (keys: string[]) =>
    encode(
      singleCreateModel(
        record([
          ['owner', party(ALICE)],
          ['m', genMap(keys)],
        ]),
      ),
    );

  it('unsorted and repeated keys hash as an independent hasher hashes them, and the order counts', async () => {
    const odd = withMap(['b', 'a', 'b']);
    for (const scheme of SCHEMES) {
      expect(hashHex(odd, scheme)).not.toBe(hashHex(withMap(['a', 'b', 'b']), scheme));
      expect(hashHex(odd, scheme)).not.toBe(hashHex(withMap(['b', 'a']), scheme));
    }
    expect(hashHex(odd, 'v2')).toBe(await visualizerHash(bytesToBase64(odd), 'hex'));
  });

  it('every entry is in the decoded model, in order: nothing is hidden from what reads it', () => {
    const tx = decodePreparedTransaction(withMap(['b', 'a', 'b']));
    const node = tx.transaction.nodes[0]!.node;
    const arg = node.type === 'create' ? node.argument : undefined;
    const m = arg?.kind === 'record' ? arg.fields.find((f) => f.label === 'm')?.value : undefined;
    expect(m).toEqual(genMap(['b', 'a', 'b']));
  });
});

describe('orphan nodes stay refused', () => {
  it('a create nobody references', () => {
    const b = variant((m) => {
      m.transaction.nodes.push({ nodeId: '3', node: createNode(cid(101), text('orphan')) });
      m.transaction.nodeSeeds.push({ nodeId: 3, seed: seed(3) });
    });
    for (const scheme of SCHEMES)
      expectRefusal(() => hashPreparedTransaction(b, { scheme }), 'orphan_node', 'transaction.nodes[3]');
  });
});

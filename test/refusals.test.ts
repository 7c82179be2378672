/**
 * One test (at least) per refusal class of the strict decoder and the hasher.
 * Every test asserts the exact `code` and `path` of the TransactionError and
 * that no hash is produced (decode, V2 hash and V3 hash all refuse).
 * Inputs are the valid `baseModel()` with one change, either in the model
 * (then encoded canonically) or spliced into the raw protobuf bytes.
 */
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../src/hashing/decode.js';
import type { RefusalCode } from '../src/hashing/errors.js';
import { bytesToBase64, bytesToHex } from '../src/hashing/input.js';
import type {
  GlobalKeyWithMaintainers,
  Identifier,
  PreparedTransaction,
  QueryByKeyNode,
  Value,
} from '../src/hashing/model.js';
import { type HashingScheme, hashPreparedTransaction } from '../src/hashing/transaction-hash.js';
import {
  ALICE,
  BOB,
  baseModel,
  CAROL,
  CREATE,
  cid,
  createNode,
  createOf,
  encode,
  exerciseNode,
  exerciseOf,
  expectRefusal,
  FETCH,
  fetchOf,
  inputContract,
  numeric,
  PACKAGE_NAME,
  party,
  record,
  refusal,
  seed,
  singleCreateExpectedHash,
  singleCreateModel,
  TEMPLATE,
  text,
  UUID,
  unit,
} from './support/fixtures.js';
import {
  appendTo,
  concat,
  lenField,
  parseFields,
  removeField,
  replaceField,
  replaceOnce,
  type Step,
  strField,
  tag,
  varint,
  varintField,
  WT_EGROUP,
  WT_I32,
  WT_I64,
  WT_LEN,
  WT_SGROUP,
  WT_VARINT,
} from './support/protobuf.js';
import { be32 } from './support/spec-hash.js';

// ---- where things are in baseModel() ----------------------------------------

const EX = 'transaction.nodes[0].v1.exercise';
const CR = 'transaction.nodes[1].v1.create';
const FE = 'transaction.nodes[2].v1.fetch';
const ARG = `${CR}.argument.record`; // owner, amount, meta (text map)
const IC0 = 'metadata.input_contracts[0].v1';

const S_TX: Step[] = [[1, 0]];
const S_META: Step[] = [[2, 0]];
const S_EXERCISE: Step[] = [
  [1, 0],
  [3, 0],
  [1000, 0],
  [3, 0],
];
const S_CREATE: Step[] = [
  [1, 0],
  [3, 1],
  [1000, 0],
  [1, 0],
];
const S_ARGUMENT: Step[] = [...S_CREATE, [5, 0]];
const S_IC0_CREATE: Step[] = [
  [2, 0],
  [7, 0],
  [1, 0],
];

const SCHEMES: HashingScheme[] = ['v2', 'v3'];

function variant(change: (m: PreparedTransaction) => void): Uint8Array {
  const m = baseModel();
  change(m);
  return encode(m);
}

/** The decoder refuses: so do both hashes, with the same code and path. */
function expectDecodeRefusal(input: Uint8Array | string, code: RefusalCode, path: string): void {
  expectRefusal(() => decodePreparedTransaction(input), code, path);
  for (const scheme of SCHEMES) expectRefusal(() => hashPreparedTransaction(input, { scheme }), code, path);
}

/** The same as `expectDecodeRefusal`, for a model changed by `change`. */
function expectModelRefusal(change: (m: PreparedTransaction) => void, code: RefusalCode, path: string): void {
  expectDecodeRefusal(variant(change), code, path);
}

const hashHex = (b: Uint8Array | string, scheme: HashingScheme) =>
  bytesToHex(hashPreparedTransaction(b, { scheme }));

function argumentField(m: PreparedTransaction, i: number): { label: string; value: Value } {
  const a = createOf(m).argument;
  if (a.kind !== 'record') throw new Error('argument is not a record');
  return a.fields[i]!;
}

const KEY: GlobalKeyWithMaintainers = {
  key: { templateId: { ...TEMPLATE }, packageName: PACKAGE_NAME, key: party(ALICE), hash: seed(0x4b) },
  maintainers: [ALICE],
};

// ---- baseline ----------------------------------------------------------------

describe('baseline', () => {
  it('the unchanged fixture decodes and hashes under V2 and V3 (refusals below are due to the change)', () => {
    const b = encode(baseModel());
    const d = decodePreparedTransaction(b);
    expect(d.transaction.nodes.map((n) => n.node.type)).toEqual(['exercise', 'create', 'fetch']);
    expect(hashHex(b, 'v2')).toMatch(/^[0-9a-f]{64}$/);
    expect(hashHex(b, 'v3')).toMatch(/^[0-9a-f]{64}$/);
    expect(hashHex(b, 'v2')).not.toBe(hashHex(b, 'v3'));
  });

  it('the byte-splicing helpers keep a valid transaction valid', () => {
    const b = encode(baseModel());
    const same = replaceField(b, S_ARGUMENT.slice(0, -1), [5, 0], lenField(5, concat([])));
    // an argument with no variant set is refused, but only because of that change
    expectDecodeRefusal(same, 'missing_field', `${CR}.argument`);
    const roundTrip = appendTo(b, S_META, []);
    expect(bytesToHex(roundTrip)).toBe(bytesToHex(b));
  });
});

// ---- wire level --------------------------------------------------------------

describe('unknown fields', () => {
  const b = encode(baseModel());

  it('at top level', () => {
    expectDecodeRefusal(concat(strField(3, 'extra'), b), 'unknown_field', '');
  });

  it('deep inside: a record field value of an input contract', () => {
    const path: Step[] = [...S_IC0_CREATE, [5, 0], [14, 0], [2, 1], [2, 0]];
    expectDecodeRefusal(
      appendTo(b, path, varintField(17, 1)),
      'unknown_field',
      `${IC0}.argument.record.fields[1].value`,
    );
  });

  it('in a node body, a v1 node, an identifier, a seed', () => {
    expectDecodeRefusal(appendTo(b, S_EXERCISE, varintField(18, 1)), 'unknown_field', EX);
    expectDecodeRefusal(
      appendTo(b, S_EXERCISE.slice(0, -1), lenField(6, [])),
      'unknown_field',
      'transaction.nodes[0].v1',
    );
    expectDecodeRefusal(
      appendTo(b, [...S_CREATE, [4, 0]], strField(4, 'x')),
      'unknown_field',
      `${CR}.template_id`,
    );
    expectDecodeRefusal(
      appendTo(b, [...S_TX, [4, 1]], varintField(3, 1)),
      'unknown_field',
      'transaction.node_seeds[1]',
    );
  });

  it('reserved field numbers are unknown too (metadata 1, input contract 1001)', () => {
    expectDecodeRefusal(appendTo(b, S_META, varintField(1, 5)), 'unknown_field', 'metadata');
    expectDecodeRefusal(
      appendTo(b, [...S_META, [7, 1]], lenField(1001, [1, 2])),
      'unknown_field',
      'metadata.input_contracts[1]',
    );
  });

  it('the Empty message of a unit value must be empty', () => {
    const unitWithField = lenField(5, lenField(1, varintField(1, 1)));
    expectDecodeRefusal(
      replaceField(b, S_CREATE, [5, 0], unitWithField),
      'unknown_field',
      `${CR}.argument.unit`,
    );
  });
});

describe('truncation', () => {
  const b = encode(baseModel());

  it('the last byte missing (inside metadata)', () => {
    expectDecodeRefusal(b.subarray(0, b.length - 1), 'truncated', 'metadata');
  });

  it('cut inside the transaction message', () => {
    expectDecodeRefusal(b.subarray(0, 10), 'truncated', 'transaction');
  });

  it('cut inside a length varint', () => {
    expectDecodeRefusal(Uint8Array.from([0x0a, 0x80]), 'truncated', 'transaction');
  });

  it('cut inside a tag varint', () => {
    expectDecodeRefusal(Uint8Array.from([0x80]), 'truncated', '');
  });

  it('a timestamp (sfixed64) with fewer than 8 bytes left in its message', () => {
    const shortTs = lenField(5, concat(tag(5, WT_I64), [1, 2, 3]));
    expectDecodeRefusal(replaceField(b, S_CREATE, [5, 0], shortTs), 'truncated', `${CR}.argument`);
  });

  it('a string whose length runs past its enclosing message', () => {
    // a third stakeholder claims 50 bytes but the create message ends after 1
    const bad = appendTo(b, S_CREATE, concat(tag(7, WT_LEN), varint(50), [0x61]));
    expectDecodeRefusal(bad, 'truncated', `${CR}.stakeholders[2]`);
  });

  it('a string whose length varint is cut by the end of its message names the field', () => {
    const bad = appendTo(b, S_CREATE, concat(tag(7, WT_LEN), [0x80]));
    expectDecodeRefusal(bad, 'truncated', `${CR}.stakeholders[2]`);
  });

  it('empty input has no transaction', () => {
    expectDecodeRefusal(new Uint8Array(0), 'missing_field', 'transaction');
  });
});

describe('trailing bytes and garbage after a message', () => {
  const b = encode(baseModel());

  it('a zero byte after the complete message', () => {
    expectDecodeRefusal(concat(b, [0x00]), 'trailing_bytes', '');
  });

  it('a dangling continuation byte after the complete message', () => {
    expectDecodeRefusal(concat(b, [0xff]), 'trailing_bytes', '');
  });

  it('a second copy of the metadata after the complete message', () => {
    expectDecodeRefusal(concat(b, lenField(2, [])), 'trailing_bytes', '');
  });

  it('an unknown field after the complete message', () => {
    expectDecodeRefusal(concat(b, strField(3, 'extra')), 'trailing_bytes', '');
  });

  it('garbage after the last field inside a sub-message', () => {
    expectDecodeRefusal(appendTo(b, [...S_CREATE, [4, 0]], [0x00]), 'malformed', `${CR}.template_id`);
  });
});

describe('malformed tags and varints', () => {
  const b = encode(baseModel());

  it('field number 0', () => {
    expectDecodeRefusal(concat(tag(0, WT_LEN), [0], b), 'malformed', '');
    expectDecodeRefusal(appendTo(b, S_EXERCISE, concat(tag(0, WT_VARINT), [1])), 'malformed', EX);
  });

  it('group wire types (start and end) and wire types 6 and 7', () => {
    expectDecodeRefusal(appendTo(b, S_EXERCISE, tag(20, WT_SGROUP)), 'malformed', EX);
    expectDecodeRefusal(appendTo(b, S_EXERCISE, tag(20, WT_EGROUP)), 'malformed', EX);
    expectDecodeRefusal(appendTo(b, S_META, tag(20, 6)), 'malformed', 'metadata');
    expectDecodeRefusal(appendTo(b, S_META, tag(20, 7)), 'malformed', 'metadata');
  });

  it('a tag that does not fit in 32 bits', () => {
    expectDecodeRefusal(concat([0x80, 0x80, 0x80, 0x80, 0x10], b), 'malformed', '');
  });

  it('overlong varint: a tag', () => {
    // 0x8a 0x00 = 10 (field 1, LEN) written in two bytes
    expectDecodeRefusal(concat([0x8a, 0x00], b.subarray(1)), 'malformed', '');
  });

  it('overlong varint: uint32 mediator_group', () => {
    expectDecodeRefusal(appendTo(b, S_META, [0x20, 0x81, 0x00]), 'malformed', 'metadata.mediator_group');
  });

  it('overlong varint: uint64 preparation_time', () => {
    expectDecodeRefusal(
      replaceField(b, S_META, [6, 0], [0x30, 0x81, 0x80, 0x00]),
      'malformed',
      'metadata.preparation_time',
    );
  });

  it('overlong varint: a length prefix', () => {
    const cmd = new TextEncoder().encode('command-1');
    const overlongLen = concat(tag(2, WT_LEN), [0x80 | cmd.length, 0x00], cmd);
    expectDecodeRefusal(
      replaceField(b, [...S_META, [2, 0]], [2, 0], overlongLen),
      'malformed',
      'metadata.submitter_info.command_id',
    );
  });

  it('a varint beyond 64 bits', () => {
    const big = concat(tag(6, WT_VARINT), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]);
    expectDecodeRefusal(replaceField(b, S_META, [6, 0], big), 'malformed', 'metadata.preparation_time');
  });
});

describe('wire-type mismatch', () => {
  const b = encode(baseModel());

  it('a string field sent as a varint', () => {
    expectDecodeRefusal(
      replaceField(b, S_META, [3, 0], varintField(3, 5)),
      'malformed',
      'metadata.synchronizer_id',
    );
  });

  it('a timestamp sent as a varint, a bool sent as bytes, a message sent as fixed32', () => {
    expectDecodeRefusal(
      replaceField(b, S_CREATE, [5, 0], lenField(5, varintField(5, 1))),
      'malformed',
      `${CR}.argument.timestamp`,
    );
    expectDecodeRefusal(
      replaceField(b, S_EXERCISE, [11, 0], lenField(11, [1])),
      'malformed',
      `${EX}.consuming`,
    );
    expectDecodeRefusal(
      replaceField(b, S_CREATE, [4, 0], concat(tag(4, WT_I32), [0, 0, 0, 0])),
      'malformed',
      `${CR}.template_id`,
    );
  });
});

describe('duplicate singular fields', () => {
  const b = encode(baseModel());

  it('metadata.transaction_uuid twice', () => {
    expectDecodeRefusal(
      appendTo(b, S_META, strField(5, UUID)),
      'duplicate_field',
      'metadata.transaction_uuid',
    );
  });

  it('the transaction twice at top level (before the metadata)', () => {
    const [tx, meta] = parseFields(b);
    expectDecodeRefusal(
      concat(
        b.subarray(tx!.start, tx!.end),
        b.subarray(tx!.start, tx!.end),
        b.subarray(meta!.start, meta!.end),
      ),
      'duplicate_field',
      'transaction',
    );
  });

  it('two variants in one Value (oneof set twice)', () => {
    const twoVariants = lenField(5, concat(strField(8, 'a'), strField(8, 'b')));
    expectDecodeRefusal(
      replaceField(b, S_CREATE, [5, 0], twoVariants),
      'duplicate_field',
      `${CR}.argument.text`,
    );
  });

  it('two node types in one v1 node', () => {
    const fetchBody = lenField(2, strField(1, '2.1'));
    expectDecodeRefusal(
      appendTo(b, S_CREATE.slice(0, -1), fetchBody),
      'duplicate_field',
      'transaction.nodes[1].v1.fetch',
    );
  });

  it('a bool encoded as 2 is not canonical', () => {
    expectDecodeRefusal(
      replaceField(b, S_EXERCISE, [11, 0], varintField(11, 2)),
      'non_canonical',
      `${EX}.consuming`,
    );
  });
});

describe('UTF-8', () => {
  const MARK = 'MARK';
  const withMarker = variant((m) => {
    const a = createOf(m).argument;
    if (a.kind === 'record') a.fields.push({ label: 'note', value: text(`<${MARK}>`) });
  });
  const where = `${ARG}.fields[3].value.text`;

  const invalid: [string, number[]][] = [
    ['a 0xff byte', [0xff, 0x41, 0x41, 0x41]],
    ['an overlong encoding of "/"', [0xc0, 0xaf, 0x41, 0x41]],
    ['a UTF-16 surrogate encoded in UTF-8', [0xed, 0xa0, 0x80, 0x41]],
    ['a lone continuation byte', [0x41, 0x80, 0x41, 0x41]],
    ['a truncated 3-byte sequence', [0x41, 0x41, 0xe2, 0x82]],
  ];
  for (const [name, bytes] of invalid) {
    it(`refuses ${name} in a text value`, () => {
      expectDecodeRefusal(replaceOnce(withMarker, MARK, bytes), 'invalid_utf8', where);
    });
  }

  it('refuses invalid UTF-8 in a string field of a node', () => {
    const b = variant((m) => {
      createOf(m).packageName = `pkg-${MARK}`;
    });
    expectDecodeRefusal(replaceOnce(b, MARK, [0x41, 0xff, 0x41, 0x41]), 'invalid_utf8', `${CR}.package_name`);
  });

  it('a leading UTF-8 BOM in a text value is kept and hashed, not stripped', () => {
    const withBom = encode(singleCreateModel(text('\uFEFFhello')));
    const withoutBom = encode(singleCreateModel(text('hello')));
    const decoded = decodePreparedTransaction(withBom);
    const node = decoded.transaction.nodes[0]!.node;
    expect(node.type === 'create' && node.argument).toEqual(text('\uFEFFhello'));
    const bomEncoding = concat([0x07], be32(8), [0xef, 0xbb, 0xbf], new TextEncoder().encode('hello'));
    for (const scheme of SCHEMES) {
      expect(hashHex(withBom, scheme)).toBe(singleCreateExpectedHash(scheme, bomEncoding).toString('hex'));
      expect(hashHex(withBom, scheme)).not.toBe(hashHex(withoutBom, scheme));
    }
  });
});

// ---- tree structure ------------------------------------------------------------

describe('node structure', () => {
  it('orphan node', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodes.push({ nodeId: '3', node: createNode(cid(101), text('orphan')) });
        m.transaction.nodeSeeds.push({ nodeId: 3, seed: seed(3) });
      },
      'orphan_node',
      'transaction.nodes[3]',
    );
  });

  it('cycle (two exercises naming each other, unreachable from the roots)', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodes.push({ nodeId: '3', node: exerciseNode(['4']) });
        m.transaction.nodes.push({ nodeId: '4', node: exerciseNode(['3']) });
        m.transaction.nodeSeeds.push({ nodeId: 3, seed: seed(3) }, { nodeId: 4, seed: seed(4) });
      },
      'cycle',
      'transaction.nodes[3]',
    );
  });

  it('cycle: a node that is its own child', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodes.push({ nodeId: '3', node: exerciseNode(['3']) });
        m.transaction.nodeSeeds.push({ nodeId: 3, seed: seed(3) });
      },
      'cycle',
      'transaction.nodes[3]',
    );
  });

  it('cycles stay refused with the test-only non-tree option', () => {
    const b = variant((m) => {
      m.transaction.nodes.push({ nodeId: '3', node: exerciseNode(['4']) });
      m.transaction.nodes.push({ nodeId: '4', node: exerciseNode(['3']) });
      m.transaction.nodeSeeds.push({ nodeId: 3, seed: seed(3) }, { nodeId: 4, seed: seed(4) });
    });
    expectRefusal(
      () => hashPreparedTransaction(b, { unsafeAllowNonTreeForTests: true }),
      'cycle',
      'transaction.nodes[3]',
    );
  });

  it('a child referenced twice by the same parent', () => {
    expectModelRefusal(
      (m) => {
        exerciseOf(m).children = ['1', '2', '1'];
      },
      'shared_node',
      `${EX}.children[2]`,
    );
  });

  it('a root listed twice', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.roots = ['0', '0'];
      },
      'shared_node',
      'transaction.roots[1]',
    );
  });

  it('a root that is also a child', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.roots = ['0', '1'];
      },
      'shared_node',
      `${EX}.children[0]`,
    );
  });

  it('duplicate node id', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodes[FETCH]!.nodeId = '1';
      },
      'node_id',
      'transaction.nodes[2].node_id',
    );
  });

  for (const id of ['01', '+2', '-2', ' 2', '2.0', '', '2147483648']) {
    it(`non-canonical node id ${JSON.stringify(id)}`, () => {
      expectModelRefusal(
        (m) => {
          m.transaction.nodes[FETCH]!.nodeId = id;
          exerciseOf(m).children = ['1', id];
        },
        'node_id',
        'transaction.nodes[2].node_id',
      );
    });
  }

  it('a root naming a missing node', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.roots = ['0', '7'];
      },
      'missing_node',
      'transaction.roots[1]',
    );
  });

  it('a child naming a missing node', () => {
    expectModelRefusal(
      (m) => {
        exerciseOf(m).children = ['1', '2', '9'];
      },
      'missing_node',
      `${EX}.children[2]`,
    );
  });

  it('no roots at all', () => {
    const b = variant((m) => {
      m.transaction.roots = [];
    });
    expectDecodeRefusal(b, 'missing_field', 'transaction.roots');
  });
});

describe('node seeds', () => {
  it('missing seed on an exercise', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodeSeeds = m.transaction.nodeSeeds.filter((s) => s.nodeId !== 0);
      },
      'seed',
      'transaction.nodes[0]',
    );
  });

  it('missing seed on a create', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodeSeeds = m.transaction.nodeSeeds.filter((s) => s.nodeId !== 1);
      },
      'seed',
      'transaction.nodes[1]',
    );
  });

  for (const n of [31, 33, 0]) {
    it(`a ${n}-byte seed`, () => {
      expectModelRefusal(
        (m) => {
          m.transaction.nodeSeeds[0]!.seed = seed(0xa0, n);
        },
        'seed',
        'transaction.node_seeds[0].seed',
      );
    });
  }

  it('duplicate seeds for one node', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodeSeeds.push({ nodeId: 1, seed: seed(0xa2) });
      },
      'seed',
      'transaction.node_seeds[2].node_id',
    );
  });

  it('a seed naming a node that does not exist', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodeSeeds.push({ nodeId: 9, seed: seed(0xa9) });
      },
      'seed',
      'transaction.node_seeds[2].node_id',
    );
  });

  it('a negative seed node id', () => {
    expectModelRefusal(
      (m) => {
        m.transaction.nodeSeeds.push({ nodeId: -1, seed: seed(0xa9) });
      },
      'seed',
      'transaction.node_seeds[2].node_id',
    );
  });
});

// ---- sets and sorted maps ------------------------------------------------------

describe('sets, sorted lists and maps', () => {
  it('unsorted signatories', () => {
    expectModelRefusal(
      (m) => {
        createOf(m).signatories = [BOB, ALICE];
      },
      'unsorted',
      `${CR}.signatories`,
    );
  });

  it('duplicated stakeholder', () => {
    expectModelRefusal(
      (m) => {
        createOf(m).stakeholders = [ALICE, ALICE, BOB];
      },
      'duplicate',
      `${CR}.stakeholders`,
    );
  });

  it('unsorted acting parties, duplicated choice observers, unsorted fetch stakeholders', () => {
    expectModelRefusal(
      (m) => {
        exerciseOf(m).actingParties = [CAROL, ALICE];
      },
      'unsorted',
      `${EX}.acting_parties`,
    );
    expectModelRefusal(
      (m) => {
        exerciseOf(m).choiceObservers = [BOB, BOB];
      },
      'duplicate',
      `${EX}.choice_observers`,
    );
    expectModelRefusal(
      (m) => {
        fetchOf(m).stakeholders = [BOB, ALICE];
      },
      'unsorted',
      `${FE}.stakeholders`,
    );
  });

  it('unsorted act_as', () => {
    expectModelRefusal(
      (m) => {
        m.metadata.submitterInfo.actAs = [BOB, ALICE];
      },
      'unsorted',
      'metadata.submitter_info.act_as',
    );
  });

  it('empty act_as', () => {
    expectModelRefusal(
      (m) => {
        m.metadata.submitterInfo.actAs = [];
      },
      'missing_field',
      'metadata.submitter_info.act_as',
    );
  });

  it('unsorted input contracts', () => {
    expectModelRefusal(
      (m) => {
        m.metadata.inputContracts = [inputContract(2), inputContract(1)];
      },
      'unsorted',
      'metadata.input_contracts[1].v1.contract_id',
    );
  });

  it('duplicate input contracts', () => {
    expectModelRefusal(
      (m) => {
        m.metadata.inputContracts = [inputContract(1), inputContract(1), inputContract(2)];
      },
      'duplicate',
      'metadata.input_contracts[1]',
    );
  });

  const setKeys = (keys: string[]) => (m: PreparedTransaction) => {
    argumentField(m, 2).value = { kind: 'textMap', entries: keys.map((key) => ({ key, value: text(key) })) };
  };
  const MAP = `${ARG}.fields[2].value.text_map`;

  it('unsorted text-map keys', () => {
    expectModelRefusal(setKeys(['b', 'a']), 'unsorted', `${MAP}.entries[1].key`);
  });

  it('text-map keys are ordered by UTF-8 bytes, not UTF-16 code units', () => {
    // U+FF61 is EF BD A1 in UTF-8 and U+1F600 is F0 9F 98 80: UTF-8 order puts U+FF61 first,
    // while UTF-16 order (D83D DE00 < FF61) puts U+1F600 first.
    expect('\u{1F600}' < '\uFF61').toBe(true);
    expectModelRefusal(setKeys(['\u{1F600}', '\uFF61']), 'unsorted', `${MAP}.entries[1].key`);
    const ok = variant(setKeys(['\uFF61', '\u{1F600}']));
    for (const scheme of SCHEMES) expect(hashHex(ok, scheme)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('duplicate text-map key', () => {
    expectModelRefusal(setKeys(['a', 'b', 'b']), 'duplicate', `${MAP}.entries[2].key`);
  });

  it('the empty key sorts first', () => {
    expectModelRefusal(setKeys(['a', '']), 'unsorted', `${MAP}.entries[1].key`);
    expect(hashHex(variant(setKeys(['', 'a'])), 'v2')).toMatch(/^[0-9a-f]{64}$/);
  });
});

// ---- canonical forms -------------------------------------------------------------

describe('canonical forms', () => {
  const setAmount = (s: string) => (m: PreparedTransaction) => {
    argumentField(m, 1).value = numeric(s);
  };
  const AMOUNT = `${ARG}.fields[1].value.numeric`;

  const badNumerics = [
    '1',
    '01.0',
    '-0.0',
    '-0.',
    '1e5',
    '1.0e5',
    '.5',
    '+1.0',
    ' 1.0',
    '1.0 ',
    '1,0',
    '',
    '-',
    `0.${'1'.repeat(38)}`, // scale 38
    `${'9'.repeat(39)}.`, // precision 39
    `${'9'.repeat(30)}.${'9'.repeat(9)}`, // precision 39
  ];
  for (const n of badNumerics) {
    it(`non-canonical numeric ${JSON.stringify(n)}`, () => {
      expectModelRefusal(setAmount(n), 'non_canonical', AMOUNT);
    });
  }

  it('canonical numerics are accepted (so the refusals above are about the text)', () => {
    for (const n of ['0.0', '-1.5', '1.', '10.0000000000', `0.${'1'.repeat(37)}`, `${'9'.repeat(38)}.`]) {
      expect(hashHex(variant(setAmount(n)), 'v2'), n).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  const badCids: [string, string][] = [
    ['uppercase', cid(0xabcdef).toUpperCase()],
    ['odd length', `${cid(100)}0`],
    ['unknown version prefix', `02${cid(100).slice(2)}`],
    ['a V1 id shorter than 33 bytes', cid(100).slice(0, 64)],
    ['non-hex', `${cid(100).slice(0, -2)}zz`],
    ['a V1 id with a suffix over 94 bytes', `${cid(100).slice(0, 66)}${'ab'.repeat(95)}`],
    ['a bare V2 prefix', '01'],
    ['a V2 id shorter than 13 bytes', `01${'ab'.repeat(11)}`],
    ['a V2 id with a suffix over 33 bytes', `01${'ab'.repeat(12)}${'cd'.repeat(34)}`],
  ];
  for (const [name, id] of badCids) {
    it(`contract id: ${name}`, () => {
      expectModelRefusal(
        (m) => {
          createOf(m).contractId = id;
        },
        'non_canonical',
        `${CR}.contract_id`,
      );
    });
  }

  it('V1 and V2 contract ids at their length bounds are accepted', () => {
    for (const id of [
      cid(100).slice(0, 66),
      `${cid(100).slice(0, 66)}${'ab'.repeat(94)}`,
      `01${'ab'.repeat(12)}`,
      `01${'ab'.repeat(12)}${'cd'.repeat(33)}`,
    ]) {
      const bytes = encode(
        (() => {
          const m = baseModel();
          createOf(m).contractId = id;
          return m;
        })(),
      );
      expect(decodePreparedTransaction(bytes).transaction.nodes.length, id).toBeGreaterThan(0);
    }
  });

  it('contract ids inside values are checked too', () => {
    expectModelRefusal(
      (m) => {
        exerciseOf(m).exerciseResult = { kind: 'contractId', value: cid(0xabcdef).toUpperCase() };
      },
      'non_canonical',
      `${EX}.exercise_result.contract_id`,
    );
  });

  it('UUID in uppercase', () => {
    expectModelRefusal(
      (m) => {
        m.metadata.transactionUuid = UUID.toUpperCase();
      },
      'non_canonical',
      'metadata.transaction_uuid',
    );
  });

  it('UUID without hyphens', () => {
    expectModelRefusal(
      (m) => {
        m.metadata.transactionUuid = UUID.replaceAll('-', '');
      },
      'non_canonical',
      'metadata.transaction_uuid',
    );
  });

  it('a party that is not a valid Daml party id', () => {
    expectModelRefusal(
      (m) => {
        createOf(m).signatories = ['alice!'];
      },
      'non_canonical',
      `${CR}.signatories[0]`,
    );
  });
});

// ---- scheme coverage: keys, versions, features ------------------------------------

describe('what V2 cannot cover', () => {
  it('a contract key decodes, V2 refuses it, V3 hashes it', () => {
    const b = variant((m) => {
      createOf(m).key = structuredClone(KEY);
    });
    const decoded = decodePreparedTransaction(b);
    const node = decoded.transaction.nodes[CREATE]!.node;
    expect(node.type === 'create' && node.key?.maintainers).toEqual([ALICE]);
    expect(hashHex(b, 'v3')).not.toBe(hashHex(encode(baseModel()), 'v3'));
    expectRefusal(() => hashPreparedTransaction(b, { scheme: 'v2' }), 'unsupported', `${CR}.key`);
  });

  it('a contract key on an input contract: V2 refuses, V3 hashes', () => {
    const b = variant((m) => {
      m.metadata.inputContracts[0]!.contract.key = structuredClone(KEY);
    });
    expect(hashHex(b, 'v3')).toMatch(/^[0-9a-f]{64}$/);
    expectRefusal(() => hashPreparedTransaction(b, { scheme: 'v2' }), 'unsupported', `${IC0}.key`);
  });

  it('exercise by_key: V2 refuses, V3 hashes', () => {
    const b = variant((m) => {
      exerciseOf(m).byKey = true;
    });
    decodePreparedTransaction(b);
    expect(hashHex(b, 'v3')).not.toBe(hashHex(encode(baseModel()), 'v3'));
    expectRefusal(() => hashPreparedTransaction(b, { scheme: 'v2' }), 'unsupported', `${EX}.by_key`);
  });

  it('fetch by_key: V2 refuses, V3 hashes', () => {
    const b = variant((m) => {
      fetchOf(m).byKey = true;
    });
    expect(hashHex(b, 'v3')).toMatch(/^[0-9a-f]{64}$/);
    expectRefusal(() => hashPreparedTransaction(b, { scheme: 'v2' }), 'unsupported', `${FE}.by_key`);
  });

  it('a QueryByKey node: V2 refuses, V3 hashes', () => {
    const qbk: QueryByKeyNode = {
      type: 'queryByKey',
      lfVersion: '2.1',
      packageName: PACKAGE_NAME,
      templateId: { ...TEMPLATE },
      exhaustive: true,
      key: structuredClone(KEY),
      result: [cid(1)],
    };
    const b = variant((m) => {
      m.transaction.nodes.push({ nodeId: '3', node: qbk });
      exerciseOf(m).children = ['1', '2', '3'];
    });
    decodePreparedTransaction(b);
    expect(hashHex(b, 'v3')).toMatch(/^[0-9a-f]{64}$/);
    expectRefusal(
      () => hashPreparedTransaction(b, { scheme: 'v2' }),
      'unsupported',
      'transaction.nodes[3].v1.query_by_key',
    );
  });

  for (const v of ['2.dev', '1.17', '2.2', 'dev', '2.1 ']) {
    it(`unknown LF version ${JSON.stringify(v)} (transaction and node)`, () => {
      expectModelRefusal(
        (m) => {
          m.transaction.version = v;
        },
        'unsupported_version',
        'transaction.version',
      );
      expectModelRefusal(
        (m) => {
          createOf(m).lfVersion = v;
        },
        'unsupported_version',
        `${CR}.lf_version`,
      );
    });
  }

  it('LF "2" under V2 is unsupported_version; V3 hashes it', () => {
    const b = variant((m) => {
      m.transaction.version = '2';
      for (const n of m.transaction.nodes) if (n.node.type !== 'rollback') n.node.lfVersion = '2';
    });
    expect(hashHex(b, 'v3')).toMatch(/^[0-9a-f]{64}$/);
    expectRefusal(
      () => hashPreparedTransaction(b, { scheme: 'v2' }),
      'unsupported_version',
      'transaction.version',
    );
  });

  it('an LF "2" node in an LF "2.1" transaction under V2', () => {
    const b = variant((m) => {
      createOf(m).lfVersion = '2';
    });
    expect(hashHex(b, 'v3')).toMatch(/^[0-9a-f]{64}$/);
    expectRefusal(
      () => hashPreparedTransaction(b, { scheme: 'v2' }),
      'unsupported_version',
      `${CR}.lf_version`,
    );
  });

  it('an LF "2" input contract under V2', () => {
    const b = variant((m) => {
      m.metadata.inputContracts[0]!.contract.lfVersion = '2';
    });
    expect(hashHex(b, 'v3')).toMatch(/^[0-9a-f]{64}$/);
    expectRefusal(
      () => hashPreparedTransaction(b, { scheme: 'v2' }),
      'unsupported_version',
      `${IC0}.lf_version`,
    );
  });

  it('an unknown hashing scheme', () => {
    const b = encode(baseModel());
    expectRefusal(
      () => hashPreparedTransaction(b, { scheme: 'v4' as unknown as HashingScheme }),
      'unsupported_version',
      '',
    );
  });

  it('external_call_results on an exercise', () => {
    const result = concat(strField(1, 'ext'), strField(2, 'fn'), lenField(5, [1]));
    expectDecodeRefusal(
      appendTo(encode(baseModel()), S_EXERCISE, lenField(17, result)),
      'unsupported',
      `${EX}.external_call_results`,
    );
  });

  it('requireMaxRecordTimeSigned: refused under V2, honoured under V3', () => {
    const b = encode(baseModel());
    expectRefusal(
      () => hashPreparedTransaction(b, { scheme: 'v2', requireMaxRecordTimeSigned: true }),
      'not_covered',
      'metadata.max_record_time',
    );
    expect(bytesToHex(hashPreparedTransaction(b, { scheme: 'v3', requireMaxRecordTimeSigned: true }))).toBe(
      hashHex(b, 'v3'),
    );
  });

  it('max_record_time is bound by V3 and not by V2', () => {
    const a = encode(baseModel());
    const later = variant((m) => {
      m.metadata.maxRecordTime = (m.metadata.maxRecordTime ?? 0n) + 1n;
    });
    expect(hashHex(later, 'v2')).toBe(hashHex(a, 'v2'));
    expect(hashHex(later, 'v3')).not.toBe(hashHex(a, 'v3'));
  });
});

// ---- values and required fields ----------------------------------------------------

describe('values', () => {
  it('empty record-field label', () => {
    expectModelRefusal(
      (m) => {
        argumentField(m, 0).label = '';
      },
      'missing_field',
      `${ARG}.fields[0].label`,
    );
  });

  it('a variant or enum without constructor', () => {
    expectModelRefusal(
      (m) => {
        argumentField(m, 0).value = { kind: 'enum', enumId: undefined, constructor: '' };
      },
      'missing_field',
      `${ARG}.fields[0].value.enum.constructor`,
    );
    expectModelRefusal(
      (m) => {
        argumentField(m, 0).value = {
          kind: 'variant',
          variantId: undefined,
          constructor: '',
          value: text('x'),
        };
      },
      'missing_field',
      `${ARG}.fields[0].value.variant.constructor`,
    );
  });

  function nested(depth: number, wrap: (v: Value) => Value): Value {
    let v: Value = { kind: 'unit' };
    for (let i = 1; i < depth; i++) v = wrap(v);
    return v;
  }
  const lists = (v: Value): Value => ({ kind: 'list', elements: [v] });
  const optionals = (v: Value): Value => ({ kind: 'optional', value: v });
  const records = (v: Value): Value => record([['f', v]]);

  const cases: [string, (v: Value) => Value, string][] = [
    ['lists', lists, '.list.elements[0]'],
    ['optionals', optionals, '.optional.value'],
    ['records', records, '.record.fields[0].value'],
  ];
  for (const [name, wrap, seg] of cases) {
    // Daml counts a top-level value as nesting 0: 100 wrappers around a leaf (101 values deep) are
    // Canton's limit, and accepted; one more is refused.
    it(`nesting of ${name}: 100 levels below the top value are accepted, 101 are too_deep`, () => {
      const ok = variant((m) => {
        createOf(m).argument = nested(101, wrap);
      });
      expect(hashHex(ok, 'v2')).toMatch(/^[0-9a-f]{64}$/);
      expectModelRefusal(
        (m) => {
          createOf(m).argument = nested(102, wrap);
        },
        'too_deep',
        `${CR}.argument${seg.repeat(101)}`,
      );
    });
  }

  it('depth counts from each top-level value (chosen value, result, key)', () => {
    expectModelRefusal(
      (m) => {
        exerciseOf(m).exerciseResult = nested(102, lists);
      },
      'too_deep',
      `${EX}.exercise_result${'.list.elements[0]'.repeat(101)}`,
    );
  });
});

describe('missing required fields', () => {
  const b = encode(baseModel());

  it('create template_id', () => {
    expectDecodeRefusal(removeField(b, S_CREATE, [4, 0]), 'missing_field', `${CR}.template_id`);
  });

  it('create argument', () => {
    expectDecodeRefusal(removeField(b, S_CREATE, [5, 0]), 'missing_field', `${CR}.argument`);
  });

  it('create contract_id, package_name, lf_version', () => {
    expectDecodeRefusal(removeField(b, S_CREATE, [2, 0]), 'missing_field', `${CR}.contract_id`);
    expectDecodeRefusal(removeField(b, S_CREATE, [3, 0]), 'missing_field', `${CR}.package_name`);
    expectDecodeRefusal(removeField(b, S_CREATE, [1, 0]), 'missing_field', `${CR}.lf_version`);
  });

  it('exercise chosen_value', () => {
    expectDecodeRefusal(removeField(b, S_EXERCISE, [10, 0]), 'missing_field', `${EX}.chosen_value`);
  });

  it('exercise choice_id', () => {
    expectDecodeRefusal(removeField(b, S_EXERCISE, [9, 0]), 'missing_field', `${EX}.choice_id`);
  });

  it('metadata submitter_info', () => {
    expectDecodeRefusal(removeField(b, S_META, [2, 0]), 'missing_field', 'metadata.submitter_info');
  });

  it('metadata transaction_uuid', () => {
    expectDecodeRefusal(removeField(b, S_META, [5, 0]), 'missing_field', 'metadata.transaction_uuid');
  });

  it('the transaction or the metadata', () => {
    expectDecodeRefusal(removeField(b, [], [1, 0]), 'missing_field', 'transaction');
    expectDecodeRefusal(removeField(b, [], [2, 0]), 'missing_field', 'metadata');
  });

  it('a node without v1 body, a v1 body without node type', () => {
    expectDecodeRefusal(
      removeField(b, [...S_TX, [3, 2]], [1000, 0]),
      'missing_field',
      'transaction.nodes[2].v1',
    );
    expectDecodeRefusal(
      removeField(b, [...S_TX, [3, 2], [1000, 0]], [2, 0]),
      'missing_field',
      'transaction.nodes[2].v1',
    );
  });

  it('an input contract without its v1 create', () => {
    expectDecodeRefusal(
      removeField(b, [...S_META, [7, 0]], [1, 0]),
      'missing_field',
      'metadata.input_contracts[0].v1',
    );
  });

  it('an identifier without package id', () => {
    expectDecodeRefusal(
      removeField(b, [...S_CREATE, [4, 0]], [1, 0]),
      'missing_field',
      `${CR}.template_id.package_id`,
    );
  });
});

// ---- text input ----------------------------------------------------------------------

describe('base64 input', () => {
  const bytes = encode(baseModel());
  const b64 = bytesToBase64(bytes);

  it('the fixture as standard base64 (with surrounding whitespace) hashes like its bytes', () => {
    expect(hashHex(`  ${b64}\n`, 'v2')).toBe(hashHex(bytes, 'v2'));
  });

  it('URL-safe alphabet is refused', () => {
    expect(/[+/]/.test(b64)).toBe(true);
    expectDecodeRefusal(b64.replaceAll('+', '-').replaceAll('/', '_'), 'bad_encoding', '');
  });

  // Prefixes of the fixture whose base64 ends in "=" and in "==" (the decoder then refuses them as truncated).
  const whole = bytes.length - (bytes.length % 3);
  const pad1 = bytesToBase64(bytes.subarray(0, whole - 1));
  const pad2 = bytesToBase64(bytes.subarray(0, whole - 2));
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  /** Sets the lowest bit of the character at `at` (an unused padding bit when it precedes "=" or "=="). */
  const setLowBit = (text: string, at: number) =>
    text.slice(0, at) + ALPHABET[ALPHABET.indexOf(text[at]!) | 1]! + text.slice(at + 1);

  it('non-canonical padding bits are refused', () => {
    expect(pad1).toMatch(/[^=]=$/);
    expect(pad2).toMatch(/[^=]==$/);
    // the canonical texts pass the base64 stage (and are refused later, for the truncated protobuf)
    expect(refusal(() => decodePreparedTransaction(pad1)).code).not.toBe('bad_encoding');
    expect(refusal(() => decodePreparedTransaction(pad2)).code).not.toBe('bad_encoding');
    expectDecodeRefusal(setLowBit(pad1, pad1.length - 2), 'bad_encoding', '');
    expectDecodeRefusal(setLowBit(pad2, pad2.length - 3), 'bad_encoding', '');
  });

  it('missing padding, inner whitespace, foreign characters, misplaced "=" are refused', () => {
    expectDecodeRefusal(pad2.slice(0, -2), 'bad_encoding', '');
    expectDecodeRefusal(pad1.slice(0, -1), 'bad_encoding', '');
    expectDecodeRefusal(`${b64.slice(0, 8)}\n${b64.slice(9)}`, 'bad_encoding', '');
    expectDecodeRefusal(`${b64.slice(0, 8)} ${b64.slice(9)}`, 'bad_encoding', '');
    expectDecodeRefusal(`${b64.slice(0, 8)}*${b64.slice(9)}`, 'bad_encoding', '');
    expectDecodeRefusal(`${b64.slice(0, 8)}=${b64.slice(9)}`, 'bad_encoding', '');
    expectDecodeRefusal(`${b64.slice(0, 8)}\u00e9${b64.slice(9)}`, 'bad_encoding', '');
    expectDecodeRefusal(`${pad2}AAAA`, 'bad_encoding', '');
  });

  it('input that is neither text nor bytes is refused', () => {
    expectDecodeRefusal(42 as unknown as string, 'bad_encoding', '');
  });
});

// ---- sanity: a few inputs at the edges that must be accepted --------------------------

// ---- Daml-LF identifiers ---------------------------------------------------------

describe('Daml-LF identifiers and package names', () => {
  const TID = `${CR}.template_id`;
  const withTemplate = (over: Partial<Identifier>) => (m: PreparedTransaction) => {
    createOf(m).templateId = { ...TEMPLATE, ...over };
  };
  // `unit` as the argument: value tag 00
  const UNIT_ENCODING = Uint8Array.from([0x00]);

  /** Accepted under V2 and V3 with the hash computed by hand, the second time from the identifier cache too. */
  function expectAccepted(root: { templateId?: Identifier; packageName?: string }): void {
    const m = singleCreateModel(unit);
    const node = m.transaction.nodes[0]!.node;
    if (node.type !== 'create') throw new Error('fixture: the root is a create');
    if (root.templateId) node.templateId = root.templateId;
    if (root.packageName) node.packageName = root.packageName;
    const b = encode(m);
    for (const scheme of SCHEMES) {
      const expected = singleCreateExpectedHash(scheme, UNIT_ENCODING, root).toString('hex');
      expect(hashHex(b, scheme)).toBe(expected);
      expect(hashHex(b, scheme)).toBe(expected);
    }
  }

  const name = (n: number, first = 'A') => first + 'b'.repeat(n - 1);

  it('a package id of 64 characters (letters, digits, - _ space) is accepted; 65 are refused', () => {
    expectAccepted({ templateId: { ...TEMPLATE, packageId: 'f'.repeat(64) } });
    expectAccepted({ templateId: { ...TEMPLATE, packageId: `-dummy_Pkg 0${'x'.repeat(52)}` } });
    const e = refusal(() => decodePreparedTransaction(variant(withTemplate({ packageId: 'f'.repeat(65) }))));
    expect(e.detail).toContain('65 characters');
    expectModelRefusal(
      withTemplate({ packageId: 'f'.repeat(65) }),
      'invalid_identifier',
      `${TID}.package_id`,
    );
  });

  for (const bad of ['pkg:1', 'pkg.1', 'pkg/1', 'pkgé', 'pkg\n']) {
    it(`a package id with a character Daml-LF does not allow: ${JSON.stringify(bad)}`, () => {
      expectModelRefusal(withTemplate({ packageId: bad }), 'invalid_identifier', `${TID}.package_id`);
    });
  }

  it('a module name of 1,000 characters is accepted (one segment or many); 1,001 are refused', () => {
    expectAccepted({ templateId: { ...TEMPLATE, moduleName: name(1000) } });
    const dotted = Array.from({ length: 200 }, () => 'Abcd').join('.'); // 200 × 4 + 199 dots = 999
    expectAccepted({ templateId: { ...TEMPLATE, moduleName: `${dotted}X` } });
    expectModelRefusal(withTemplate({ moduleName: name(1001) }), 'invalid_identifier', `${TID}.module_name`);
    expectModelRefusal(
      withTemplate({ moduleName: `${dotted}.X` }),
      'invalid_identifier',
      `${TID}.module_name`,
    );
  });

  it('an entity name of 1,000 characters is accepted; 1,001 are refused', () => {
    expectAccepted({ templateId: { ...TEMPLATE, entityName: name(1000, '$') } });
    expectModelRefusal(withTemplate({ entityName: name(1001) }), 'invalid_identifier', `${TID}.entity_name`);
  });

  it('a name segment over 32 KiB (larger than half the hash buffer) is refused under V2 and V3', () => {
    const huge = name(40 * 1024);
    expectModelRefusal(
      withTemplate({ entityName: `Holding.${huge}` }),
      'invalid_identifier',
      `${TID}.entity_name`,
    );
    expectModelRefusal(withTemplate({ moduleName: huge }), 'invalid_identifier', `${TID}.module_name`);
  });

  it('name segments: a letter, $ or _ first, then letters, digits, $ and _', () => {
    expectAccepted({ templateId: { ...TEMPLATE, moduleName: '$a._b.C9$_', entityName: 'T_1.$' } });
    for (const bad of ['9Lives', 'Splice-Amulet', 'Splice Amulet', 'Amulé', 'A:B', 'A..B', '.A', 'A.']) {
      expectModelRefusal(withTemplate({ moduleName: bad }), 'invalid_identifier', `${TID}.module_name`);
      expectModelRefusal(withTemplate({ entityName: bad }), 'invalid_identifier', `${TID}.entity_name`);
    }
  });

  it('identifiers inside values are checked too (a record id)', () => {
    expectModelRefusal(
      (m) => {
        const a = createOf(m).argument;
        if (a.kind !== 'record') throw new Error('argument is not a record');
        a.recordId = { ...TEMPLATE, entityName: 'Bad-Name' };
      },
      'invalid_identifier',
      `${ARG}.record_id.entity_name`,
    );
  });

  it('a package name of 255 characters (letters, digits, - _) is accepted; 256 and other characters are refused', () => {
    expectAccepted({ packageName: `splice-amulet_${'x'.repeat(241)}` });
    expectModelRefusal(
      (m) => {
        createOf(m).packageName = 'p'.repeat(256);
      },
      'invalid_identifier',
      `${CR}.package_name`,
    );
    for (const bad of ['splice.amulet', 'splice amulet', 'splice:amulet', 'splicé']) {
      expectModelRefusal(
        (m) => {
          createOf(m).packageName = bad;
        },
        'invalid_identifier',
        `${CR}.package_name`,
      );
    }
  });
});

describe('accepted edge cases', () => {
  it('mediator_group above 2^31 is hashed as its raw 32 bits (P16)', () => {
    const b = variant((m) => {
      m.metadata.mediatorGroup = 0xffffffff;
    });
    expect(hashHex(b, 'v2')).toMatch(/^[0-9a-f]{64}$/);
    expect(hashHex(b, 'v2')).not.toBe(hashHex(encode(baseModel()), 'v2'));
  });

  it('a rollback node wrapping the create is accepted', () => {
    const b = variant((m) => {
      m.transaction.nodes.push({ nodeId: '3', node: { type: 'rollback', children: ['1'] } });
      exerciseOf(m).children = ['3', '2'];
    });
    for (const scheme of SCHEMES) expect(hashHex(b, scheme)).toMatch(/^[0-9a-f]{64}$/);
  });
});

/**
 * Unit tests of the inspect report (src/intent/inspect.ts): time and value
 * rendering, highlights, the text form (including a 10,000-deep chain), the
 * coverage warnings, and the `canton-signer/inspect@1` JSON document checked
 * against docs/inspect.schema.json with a small checker written here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { decodePreparedTransaction } from '../src/hashing/decode.js';
import { encodePreparedTransaction } from '../src/hashing/encode.js';
import { bytesToHex } from '../src/hashing/input.js';
import type {
  CreateNode,
  DecodedTransaction,
  ExerciseNode,
  FetchNode,
  GlobalKeyWithMaintainers,
  Identifier,
  Metadata,
  NodeBody,
  PreparedTransaction,
  Value,
} from '../src/hashing/model.js';
import { isoMicros, templateName, valueToJson } from '../src/hashing/render.js';
import { type HashingScheme, hashPreparedTransaction } from '../src/hashing/transaction-hash.js';
import {
  type Highlight,
  highlights,
  INSPECT_FORMAT,
  type InspectReport,
  inspectTransaction,
  renderInspectText,
} from '../src/intent/inspect.js';
import { VECTORS_DIR as VECTORS } from './support/vectors.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface RealVector {
  prepared_transaction_base64: string;
  expected_hash_hex: string;
  reference_v3_hex: string;
}

const realFiles = readdirSync(join(VECTORS, 'real'))
  .filter((f) => f.endsWith('.json'))
  .sort();
const readVector = (file: string) =>
  JSON.parse(readFileSync(join(VECTORS, 'real', file), 'utf8')) as RealVector;

// ---- a small model builder -----------------------------------------------------------

const hex64 = (n: number) => n.toString(16).padStart(64, '0');
const party = (name: string) => `${name}::1220${hex64(name.length * 4099 + name.charCodeAt(0))}`;
const ALICE = party('alice');
const BOB = party('bob');
const CAROL = party('carol');
const ISSUER = party('issuer');
const contractId = (n: number) => `00${hex64(n + 1)}`;
const PACKAGE_ID = 'c0ffee'.repeat(10).slice(0, 64);
const tid = (moduleName: string, entityName: string): Identifier => ({
  packageId: PACKAGE_ID,
  moduleName,
  entityName,
});
const TOKEN = tid('Token.Holding', 'Holding');
const FACTORY = tid('Token.Transfer', 'TransferFactory');

const v = {
  unit: { kind: 'unit' } as Value,
  text: (value: string): Value => ({ kind: 'text', value }),
  party: (value: string): Value => ({ kind: 'party', value }),
  numeric: (value: string): Value => ({ kind: 'numeric', value }),
  int64: (value: bigint): Value => ({ kind: 'int64', value }),
  time: (value: bigint): Value => ({ kind: 'timestamp', value }),
  none: { kind: 'optional', value: undefined } as Value,
  some: (value: Value): Value => ({ kind: 'optional', value }),
  list: (...elements: Value[]): Value => ({ kind: 'list', elements }),
  record: (...fields: [string, Value][]): Value => ({
    kind: 'record',
    recordId: undefined,
    fields: fields.map(([label, value]) => ({ label, value })),
  }),
  variant: (tag: string, value: Value): Value => ({
    kind: 'variant',
    variantId: undefined,
    constructor: tag,
    value,
  }),
};
const instrument = (id: string) => v.record(['admin', v.party(ISSUER)], ['id', v.text(id)]);

function create(n: number, argument: Value, over: Partial<CreateNode> = {}): CreateNode {
  return {
    type: 'create',
    lfVersion: '2.1',
    contractId: contractId(n),
    packageName: 'token-holding',
    templateId: TOKEN,
    argument,
    signatories: [ALICE],
    stakeholders: [ALICE, BOB],
    key: undefined,
    ...over,
  };
}

function exercise(n: number, children: string[], over: Partial<ExerciseNode> = {}): ExerciseNode {
  return {
    type: 'exercise',
    lfVersion: '2.1',
    contractId: contractId(n),
    packageName: 'token-transfer',
    templateId: FACTORY,
    signatories: [ISSUER],
    stakeholders: [ALICE, ISSUER],
    actingParties: [ALICE],
    interfaceId: undefined,
    choiceId: 'Step',
    chosenValue: v.unit,
    consuming: false,
    children,
    exerciseResult: undefined,
    choiceObservers: [],
    key: undefined,
    byKey: false,
    ...over,
  };
}

function fetch(n: number, over: Partial<FetchNode> = {}): FetchNode {
  return {
    type: 'fetch',
    lfVersion: '2.1',
    contractId: contractId(n),
    packageName: 'token-holding',
    templateId: TOKEN,
    signatories: [ALICE],
    stakeholders: [ALICE, BOB],
    actingParties: [ALICE],
    interfaceId: undefined,
    key: undefined,
    byKey: false,
    ...over,
  };
}

const PREPARATION_TIME = 1_770_192_033_708_533n;

function metadata(over: Partial<Metadata> = {}): Metadata {
  return {
    submitterInfo: { actAs: [ALICE], commandId: 'cmd-inspect-test' },
    synchronizerId: `global-domain::1220${hex64(7)}`,
    mediatorGroup: 0,
    transactionUuid: '6b1f0c9e-3a52-4d7e-9f10-2c4b8a7d5e31',
    preparationTime: PREPARATION_TIME,
    inputContracts: [],
    minLedgerEffectiveTime: undefined,
    maxLedgerEffectiveTime: undefined,
    maxRecordTime: undefined,
    ...over,
  };
}

/** A model with the given roots and nodes (id → body); a 32-byte seed for every create and exercise. */
function model(
  roots: string[],
  nodes: [string, NodeBody][],
  meta: Partial<Metadata> = {},
): PreparedTransaction {
  return {
    transaction: {
      version: '2.1',
      roots,
      nodes: nodes.map(([nodeId, node]) => ({ nodeId, node })),
      nodeSeeds: nodes
        .filter(([, n]) => n.type === 'create' || n.type === 'exercise')
        .map(([id]) => {
          const seed = new Uint8Array(32).fill(0x5a);
          new DataView(seed.buffer).setUint32(0, Number(id));
          return { nodeId: Number(id), seed };
        }),
    },
    metadata: metadata(meta),
  };
}

/** Through the real encoder and the strict decoder, so the report is built from a decoded transaction. */
const decoded = (m: PreparedTransaction): DecodedTransaction =>
  decodePreparedTransaction(encodePreparedTransaction(m));

/**
 * Root `0`: exercise via an interface with a choice observer, children: fetch `1`,
 * rollback `2` (child create `3`), create `4`. Root `5`: a create. One input contract.
 */
function mixedModel(meta: Partial<Metadata> = {}): PreparedTransaction {
  const holding = (owner: string, amount: string) =>
    v.record(['owner', v.party(owner)], ['instrument', instrument('TKN')], ['amount', v.numeric(amount)]);
  return model(
    ['0', '5'],
    [
      [
        '0',
        exercise(10, ['1', '2', '4'], {
          choiceId: 'TransferFactory_Transfer',
          interfaceId: tid('Token.Api', 'TransferFactory'),
          choiceObservers: [CAROL],
          consuming: true,
          chosenValue: v.record(
            [
              'transfer',
              v.record(
                ['sender', v.party(ALICE)],
                ['receiver', v.party(BOB)],
                ['amount', v.numeric('25.5000000000')],
                ['instrumentId', instrument('TKN')],
                ['executeBefore', v.time(PREPARATION_TIME + 3_600_000_000n)],
              ),
            ],
            ['memo', v.some(v.text('invoice 7'))],
          ),
          exerciseResult: { kind: 'contractId', value: contractId(4) },
        }),
      ],
      ['1', fetch(11)],
      ['2', { type: 'rollback', children: ['3'] }],
      ['3', create(3, holding(CAROL, '1.0'))],
      ['4', create(4, holding(BOB, '25.5000000000'))],
      ['5', create(5, holding(ALICE, '0.1'), { signatories: [ALICE], stakeholders: [ALICE] })],
    ],
    {
      inputContracts: [
        {
          contract: create(11, holding(ALICE, '100.0000000000')),
          createdAt: PREPARATION_TIME - 86_400_000_000n,
          eventBlob: new Uint8Array(0),
        },
      ],
      ...meta,
    },
  );
}

const KEY: GlobalKeyWithMaintainers = {
  key: {
    templateId: TOKEN,
    packageName: 'token-holding',
    key: v.party(ALICE),
    hash: new Uint8Array(32).fill(7),
  },
  maintainers: [ALICE],
};

/** V3 only: root exercise `0` by key, children: QueryByKey `1` and a keyed create `2`. */
function keyedModel(): PreparedTransaction {
  return model(
    ['0'],
    [
      [
        '0',
        exercise(12, ['1', '2'], {
          packageName: 'token-holding',
          templateId: TOKEN,
          signatories: [ALICE],
          stakeholders: [ALICE, BOB],
          key: KEY,
          byKey: true,
        }),
      ],
      [
        '1',
        {
          type: 'queryByKey',
          lfVersion: '2.1',
          packageName: 'token-holding',
          templateId: TOKEN,
          exhaustive: true,
          key: KEY,
          result: [contractId(20)],
        },
      ],
      ['2', create(20, v.record(['owner', v.party(ALICE)]), { key: KEY })],
    ],
  );
}

// ---- isoMicros -------------------------------------------------------------------------

describe('isoMicros', () => {
  it('the epoch, with six fraction digits', () => {
    expect(isoMicros(0n)).toBe('1970-01-01T00:00:00.000000Z');
  });

  it('keeps microsecond precision', () => {
    expect(isoMicros(1n)).toBe('1970-01-01T00:00:00.000001Z');
    expect(isoMicros(999_999n)).toBe('1970-01-01T00:00:00.999999Z');
    expect(isoMicros(1_000_000n)).toBe('1970-01-01T00:00:01.000000Z');
    const ms = BigInt(Date.UTC(2026, 1, 4, 8, 0, 32, 658));
    expect(isoMicros(ms * 1000n + 123n)).toBe('2026-02-04T08:00:32.658123Z');
  });

  it('negative times count back from the epoch (floor, not truncation)', () => {
    expect(isoMicros(-1n)).toBe('1969-12-31T23:59:59.999999Z');
    expect(isoMicros(-999_999n)).toBe('1969-12-31T23:59:59.000001Z');
    expect(isoMicros(-1_000_000n)).toBe('1969-12-31T23:59:59.000000Z');
    expect(isoMicros(-1_000_001n)).toBe('1969-12-31T23:59:58.999999Z');
  });

  it('the Daml timestamp range ends', () => {
    expect(isoMicros(-62_135_596_800_000_000n)).toBe('0001-01-01T00:00:00.000000Z');
    expect(isoMicros(253_402_300_799_999_999n)).toBe('9999-12-31T23:59:59.999999Z');
  });

  it('the JavaScript date range ends use extended years', () => {
    expect(isoMicros(8_640_000_000_000_000_000n)).toBe('+275760-09-13T00:00:00.000000Z');
    expect(isoMicros(-8_640_000_000_000_000_000n)).toBe('-271821-04-20T00:00:00.000000Z');
  });

  it('out of range: the raw microsecond count with a µs suffix', () => {
    expect(isoMicros(8_640_000_000_001_000_000n)).toBe('8640000000001000000µs');
    expect(isoMicros(-8_640_000_000_001_000_000n)).toBe('-8640000000001000000µs');
    expect(isoMicros(9_223_372_036_854_775_807n)).toBe('9223372036854775807µs');
    expect(isoMicros(-9_223_372_036_854_775_808n)).toBe('-9223372036854775808µs');
    expect(isoMicros(2n ** 64n - 1n)).toBe('18446744073709551615µs');
  });
});

// ---- valueToJson -----------------------------------------------------------------------

describe('valueToJson', () => {
  it('unit, bool, int64, numeric', () => {
    expect(valueToJson(v.unit)).toEqual({});
    expect(valueToJson({ kind: 'bool', value: true })).toBe(true);
    expect(valueToJson({ kind: 'bool', value: false })).toBe(false);
    expect(valueToJson(v.int64(-9_223_372_036_854_775_808n))).toBe('-9223372036854775808');
    expect(valueToJson(v.int64(9_007_199_254_740_993n))).toBe('9007199254740993');
    // exactly as hashed: trailing zeros kept, never a JavaScript number
    expect(valueToJson(v.numeric('1.0000000000'))).toBe('1.0000000000');
    expect(valueToJson(v.numeric('-0.5'))).toBe('-0.5');
  });

  it('timestamp and date', () => {
    expect(valueToJson(v.time(1_000_001n))).toBe('1970-01-01T00:00:01.000001Z');
    expect(valueToJson({ kind: 'date', value: 0 })).toBe('1970-01-01');
    expect(valueToJson({ kind: 'date', value: -1 })).toBe('1969-12-31');
    expect(valueToJson({ kind: 'date', value: -719_162 })).toBe('0001-01-01');
    expect(valueToJson({ kind: 'date', value: 2_932_896 })).toBe('9999-12-31');
    expect(valueToJson({ kind: 'date', value: 2_000_000_000 })).toBe('2000000000d');
  });

  it('party, text and contract id as strings', () => {
    expect(valueToJson(v.party(ALICE))).toBe(ALICE);
    expect(valueToJson(v.text('héllo "x"'))).toBe('héllo "x"');
    expect(valueToJson({ kind: 'contractId', value: contractId(1) })).toBe(contractId(1));
  });

  it('optional: None is null, Some(x) is x', () => {
    expect(valueToJson(v.none)).toBeNull();
    expect(valueToJson(v.some(v.text('x')))).toBe('x');
    expect(valueToJson(v.some(v.record(['a', v.int64(1n)])))).toEqual({ a: '1' });
  });

  it('nested optional: Some(None) is [], Some(Some(x)) is [x]', () => {
    expect(valueToJson(v.some(v.none))).toEqual([]);
    expect(valueToJson(v.some(v.some(v.text('x'))))).toEqual(['x']);
    expect(valueToJson(v.some(v.some(v.list())))).toEqual([[]]);
  });

  it('three levels follow the Daml JSON encoding', () => {
    expect(valueToJson(v.some(v.some(v.some(v.int64(1n)))))).toEqual([['1']]);
    expect(valueToJson(v.some(v.some(v.none)))).toEqual([[]]);
  });

  it('deeper nested optionals stay distinguishable within one type', () => {
    let values: Value[] = [v.text('x')];
    for (let depth = 1; depth <= 5; depth++) {
      // every value of Optional^depth Text with up to `depth` Somes
      values = [v.none, ...values.map((x) => v.some(x))];
      const rendered = values.map((x) => JSON.stringify(valueToJson(x)));
      expect(new Set(rendered).size, `depth ${depth}: ${rendered.join(' ')}`).toBe(values.length);
    }
  });

  it('list', () => {
    expect(valueToJson(v.list())).toEqual([]);
    expect(valueToJson(v.list(v.int64(1n), v.none, v.list(v.text('a'))))).toEqual(['1', null, ['a']]);
  });

  it('text map as an object, in entry order', () => {
    const m: Value = {
      kind: 'textMap',
      entries: [
        { key: '', value: v.text('empty key') },
        { key: 'a', value: v.int64(1n) },
        { key: 'b c', value: v.list() },
      ],
    };
    const json = valueToJson(m);
    expect(json).toEqual({ '': 'empty key', a: '1', 'b c': [] });
    expect(Object.keys(json as object)).toEqual(['', 'a', 'b c']);
  });

  it('gen map as [key, value] pairs, keys of any kind', () => {
    const m: Value = {
      kind: 'genMap',
      entries: [
        { key: v.record(['id', v.text('k1')]), value: v.numeric('1.5') },
        { key: v.party(BOB), value: v.none },
        { key: v.list(v.int64(2n)), value: v.some(v.some(v.unit)) },
      ],
    };
    expect(valueToJson(m)).toEqual([
      [{ id: 'k1' }, '1.5'],
      [BOB, null],
      [['2'], [{}]],
    ]);
    expect(valueToJson({ kind: 'genMap', entries: [] })).toEqual([]);
  });

  it('record as an object by label, nested', () => {
    const r = v.record(
      ['owner', v.party(ALICE)],
      ['inner', v.record(['n', v.numeric('2.0')], ['u', v.unit])],
    );
    expect(valueToJson(r)).toEqual({ owner: ALICE, inner: { n: '2.0', u: {} } });
    expect(valueToJson(v.record())).toEqual({});
  });

  it('variant as {tag, value}, enum as its constructor', () => {
    expect(valueToJson(v.variant('Some', v.int64(3n)))).toEqual({ tag: 'Some', value: '3' });
    expect(valueToJson(v.variant('Unit', v.unit))).toEqual({ tag: 'Unit', value: {} });
    expect(valueToJson(v.variant('Outer', v.variant('Inner', v.none)))).toEqual({
      tag: 'Outer',
      value: { tag: 'Inner', value: null },
    });
    expect(valueToJson({ kind: 'enum', enumId: TOKEN, constructor: 'Red' })).toBe('Red');
  });

  it('the result is plain JSON: it survives a stringify/parse round trip unchanged', () => {
    const big = v.record(
      ['i', v.int64(-5n)],
      ['t', v.time(-1n)],
      ['o', v.some(v.some(v.none))],
      ['m', { kind: 'genMap', entries: [{ key: v.int64(1n), value: v.variant('X', v.unit) }] }],
      ['d', { kind: 'date', value: 19_000 }],
    );
    const json = valueToJson(big);
    expect(JSON.parse(JSON.stringify(json))).toEqual(json);
  });

  it('a text-map key or record label "__proto__" is kept as data, not lost to the object prototype', () => {
    // Regression: with `o[key] = …` on a plain object literal, the __proto__
    // setter swallowed the entry (or made an object value the prototype), so
    // data the decoder accepts and the hash covers vanished from the document.
    const hidden = v.record(['to', v.party(CAROL)], ['amount', v.numeric('999.0')]);
    const tx = decoded(
      model(
        ['0'],
        [
          [
            '0',
            create(
              0,
              v.record(
                ['owner', v.party(ALICE)],
                ['__proto__', v.text('label')],
                [
                  'meta',
                  {
                    kind: 'textMap',
                    entries: [
                      { key: '__proto__', value: hidden },
                      { key: 'a', value: v.text('x') },
                    ],
                  },
                ],
              ),
            ),
          ],
        ],
      ),
    );
    const json = JSON.parse(JSON.stringify(inspectTransaction(tx, 'v3'))) as InspectReport;
    const argument = json.transaction.nodes[0]!.argument as Record<string, unknown>;
    expect(Object.keys(argument)).toEqual(['owner', '__proto__', 'meta']);
    expect(Object.getOwnPropertyDescriptor(argument, '__proto__')?.value).toBe('label');
    const meta = argument.meta as Record<string, unknown>;
    expect(Object.keys(meta)).toEqual(['__proto__', 'a']);
    expect(Object.getOwnPropertyDescriptor(meta, '__proto__')?.value).toEqual({ to: CAROL, amount: '999.0' });
  });
});

// ---- highlights ------------------------------------------------------------------------

function field(value: Value, label: string): Value {
  if (value.kind !== 'record') throw new Error(`not a record: ${value.kind}`);
  const f = value.fields.find((x) => x.label === label);
  if (!f) throw new Error(`no field ${label}`);
  return f.value;
}

describe('highlights', () => {
  const TRANSFER_FILE = 'v2_bitgo_cantontokentransferprepareresponse.json';

  it('a real token transfer: amount, receiver, instrument and deadline with their label paths', () => {
    const tx = decodePreparedTransaction(readVector(TRANSFER_FILE).prepared_transaction_base64);
    const node = [...tx.nodeById.values()].find(
      (n): n is ExerciseNode => n.type === 'exercise' && n.choiceId === 'TransferFactory_Transfer',
    );
    expect(node).toBeDefined();
    const arg = node!.chosenValue;
    const transfer = field(arg, 'transfer');
    const receiver = field(transfer, 'receiver');
    const sender = field(transfer, 'sender');
    const instrumentId = field(transfer, 'instrumentId');
    const deadline = field(transfer, 'executeBefore');
    expect(receiver.kind).toBe('party');
    expect(deadline.kind).toBe('timestamp');

    const hs = highlights(arg);
    expect(hs).toContainEqual({ kind: 'amount', path: 'transfer.amount', value: '1.0000000000' });
    expect(hs).toContainEqual({
      kind: 'party',
      path: 'transfer.receiver',
      value: (receiver as { value: string }).value,
    });
    expect(hs).toContainEqual({
      kind: 'party',
      path: 'transfer.sender',
      value: (sender as { value: string }).value,
    });
    expect(hs).toContainEqual({
      kind: 'instrument',
      path: 'transfer.instrumentId',
      value: {
        admin: (field(instrumentId, 'admin') as { value: string }).value,
        id: 'TestToken',
      },
    });
    const us = (deadline as { value: bigint }).value;
    expect(hs).toContainEqual({
      kind: 'time',
      path: 'transfer.executeBefore',
      value: '2026-02-04T09:00:32.658000Z',
    });
    expect(new Date(Number(us / 1000n)).toISOString()).toBe('2026-02-04T09:00:32.658Z');
    // the instrument is reported as one highlight, not as its admin party
    expect(hs.some((h) => h.path.startsWith('transfer.instrumentId.'))).toBe(false);

    // the report carries the same highlights on that node
    const report = inspectTransaction(tx);
    const reported = report.transaction.nodes.find((n) => n.choice === 'TransferFactory_Transfer');
    expect(reported?.highlights).toEqual(hs);
  });

  it('paths through lists, text maps, gen maps, variants and optionals', () => {
    const value = v.record(
      ['outputs', v.list(v.record(['receiver', v.party(BOB)], ['amount', v.numeric('1.0')]))],
      ['meta', { kind: 'textMap', entries: [{ key: 'by "x"', value: v.party(CAROL) }] }],
      ['locks', { kind: 'genMap', entries: [{ key: v.party(ALICE), value: v.time(0n) }] }],
      ['choice', v.variant('Pay', v.record(['to', v.party(BOB)]))],
      ['maybe', v.some(v.numeric('3.0'))],
      ['nothing', v.none],
      ['count', v.int64(5n)],
      ['note', v.text(ALICE)],
    );
    expect(highlights(value)).toEqual<Highlight[]>([
      { kind: 'party', path: 'outputs[0].receiver', value: BOB },
      { kind: 'amount', path: 'outputs[0].amount', value: '1.0' },
      { kind: 'party', path: 'meta["by \\"x\\""]', value: CAROL },
      { kind: 'party', path: 'locks{0}.key', value: ALICE },
      { kind: 'time', path: 'locks{0}.value', value: '1970-01-01T00:00:00.000000Z' },
      { kind: 'party', path: 'choice.Pay.to', value: BOB },
      { kind: 'amount', path: 'maybe', value: '3.0' },
    ]);
  });

  it('a bare value has the empty path; a list root starts with [i]', () => {
    expect(highlights(v.numeric('7.0'))).toEqual([{ kind: 'amount', path: '', value: '7.0' }]);
    expect(highlights(v.list(v.party(ALICE)))).toEqual([{ kind: 'party', path: '[0]', value: ALICE }]);
    expect(highlights(instrument('X'))).toEqual([
      { kind: 'instrument', path: '', value: { admin: ISSUER, id: 'X' } },
    ]);
  });

  it('an instrument is exactly {admin: Party, id: Text}', () => {
    const three = v.record(['admin', v.party(ISSUER)], ['id', v.text('X')], ['extra', v.unit]);
    expect(highlights(three)).toEqual([{ kind: 'party', path: 'admin', value: ISSUER }]);
    const idNotText = v.record(['admin', v.party(ISSUER)], ['id', v.party(BOB)]);
    expect(highlights(idNotText)).toEqual([
      { kind: 'party', path: 'admin', value: ISSUER },
      { kind: 'party', path: 'id', value: BOB },
    ]);
  });

  it('at most 64 highlights per value, the first 64 in order', () => {
    const many = v.list(...Array.from({ length: 100 }, (_, i) => v.numeric(`${i}.0`)));
    const hs = highlights(many);
    expect(hs.length).toBe(64);
    expect(hs[63]).toEqual({ kind: 'amount', path: '[63]', value: '63.0' });
  });
});

// ---- the report and its text -----------------------------------------------------------

describe('inspectTransaction and renderInspectText', () => {
  it('defaults to V2 and names the format', () => {
    const tx = decoded(mixedModel());
    const r = inspectTransaction(tx);
    expect(r.format).toBe(INSPECT_FORMAT);
    expect(INSPECT_FORMAT).toBe('canton-signer/inspect@1');
    expect(r.scheme).toBe('v2');
    expect(r.hash).toBe(bytesToHex(hashPreparedTransaction(tx.bytes, { scheme: 'v2' })));
    expect(inspectTransaction(tx, 'v3').hash).toBe(
      bytesToHex(hashPreparedTransaction(tx.bytes, { scheme: 'v3' })),
    );
  });

  it('nodes in pre-order with parent, depth and children; observers are non-signatory stakeholders', () => {
    const r = inspectTransaction(decoded(mixedModel()), 'v3');
    const nodes = r.transaction.nodes;
    expect(nodes.map((n) => [n.nodeId, n.parent, n.depth, n.type])).toEqual([
      ['0', null, 0, 'exercise'],
      ['1', '0', 1, 'fetch'],
      ['2', '0', 1, 'rollback'],
      ['3', '2', 2, 'create'],
      ['4', '0', 1, 'create'],
      ['5', null, 0, 'create'],
    ]);
    expect(r.transaction.nodeCount).toBe(6);
    expect(r.transaction.roots).toEqual(['0', '5']);
    const [ex, fe, rb, c3, , c5] = nodes;
    expect(ex!.children).toEqual(['1', '2', '4']);
    expect(ex!.template).toBe('token-transfer:Token.Transfer:TransferFactory');
    expect(ex!.interface).toBe(`${PACKAGE_ID}:Token.Api:TransferFactory`);
    expect(ex!.observers).toEqual([ALICE]);
    expect(ex!.choiceObservers).toEqual([CAROL]);
    expect(ex!.exerciseResult).toBe(contractId(4));
    expect(fe!.observers).toEqual([BOB]);
    expect(fe!.argument).toBeUndefined();
    expect(rb!.children).toEqual(['3']);
    expect(rb!.template).toBeUndefined();
    expect(c3!.argument).toEqual({ owner: CAROL, instrument: { admin: ISSUER, id: 'TKN' }, amount: '1.0' });
    expect(c5!.observers).toEqual([]);
    expect(r.metadata.inputContracts).toHaveLength(1);
    expect(r.metadata.inputContracts[0]!.createdAt).toBe(isoMicros(PREPARATION_TIME - 86_400_000_000n));
    expect(r.metadata.inputContracts[0]!.highlights).toContainEqual({
      kind: 'amount',
      path: 'amount',
      value: '100.0000000000',
    });
  });

  it('text: a line per node kind, indented by depth, metadata, then the hash', () => {
    const r = inspectTransaction(decoded(mixedModel()), 'v2');
    const text = renderInspectText(r);
    const lines = text.split('\n');
    expect(lines[0]).toBe('Prepared transaction: Daml-LF 2.1, 2 root nodes, 6 nodes');
    expect(lines).toContain(
      '[0] EXERCISE token-transfer:Token.Transfer:TransferFactory choice TransferFactory_Transfer (consuming)',
    );
    expect(lines).toContain(`    via interface ${PACKAGE_ID}:Token.Api:TransferFactory`);
    expect(lines).toContain(`    choice observers: ${CAROL}`);
    expect(lines).toContain(`    acting parties: ${ALICE}`);
    expect(lines).toContain('    amount transfer.amount = 25.5000000000');
    expect(lines).toContain(`    party transfer.receiver = ${BOB}`);
    expect(lines).toContain(`    instrument transfer.instrumentId = TKN (admin ${ISSUER})`);
    expect(lines).toContain(
      `    time transfer.executeBefore = ${isoMicros(PREPARATION_TIME + 3_600_000_000n)}`,
    );
    expect(lines).toContain('  [1] FETCH token-holding:Token.Holding:Holding');
    expect(lines).toContain('  [2] ROLLBACK (effects below are rolled back)');
    expect(lines).toContain('    [3] CREATE token-holding:Token.Holding:Holding');
    expect(lines).toContain(`        observers: ${BOB}`);
    expect(lines).toContain('[5] CREATE token-holding:Token.Holding:Holding');
    expect(lines).toContain('    observers: (none)');
    expect(lines).toContain('  command id:        cmd-inspect-test');
    expect(lines).toContain(`  preparation time:  ${isoMicros(PREPARATION_TIME)}`);
    expect(lines).toContain('  ledger time:       unbounded .. unbounded');
    expect(lines).toContain('  max record time:   (none) — NOT covered by the V2 hash');
    expect(lines).toContain('  input contracts:   1');
    expect(text.endsWith(`\nHash (V2): ${r.hash}\n`)).toBe(true);
  });

  it('a 10,000-deep exercise chain: no stack overflow, indentation capped, depth shown', () => {
    const N = 10_000;
    const nodes: [string, NodeBody][] = [];
    for (let i = 0; i < N; i++)
      nodes.push([String(i), exercise(i, i + 1 < N ? [String(i + 1)] : [], { choiceId: `Step${i % 3}` })]);
    const tx = decoded(model(['0'], nodes));
    const r = inspectTransaction(tx);
    expect(r.transaction.nodeCount).toBe(N);
    r.transaction.nodes.forEach((n, i) => {
      expect(n.nodeId).toBe(String(i));
      expect(n.depth).toBe(i);
      expect(n.parent).toBe(i === 0 ? null : String(i - 1));
    });
    const text = renderInspectText(r);
    const lines = text.split('\n');
    const maxIndent = Math.max(...lines.map((l) => l.length - l.trimStart().length));
    expect(maxIndent).toBe(2 * 24 + 4);
    expect(lines).toContain(
      `${' '.repeat(48)}[24] EXERCISE token-transfer:Token.Transfer:TransferFactory choice Step0 (non-consuming)`,
    );
    expect(lines).toContain(
      `${' '.repeat(48)}[25] (depth 25) EXERCISE token-transfer:Token.Transfer:TransferFactory choice Step1 (non-consuming)`,
    );
    expect(lines).toContain(
      `${' '.repeat(48)}[9999] (depth 9999) EXERCISE token-transfer:Token.Transfer:TransferFactory choice Step0 (non-consuming)`,
    );
    expect(text.endsWith(`\nHash (V2): ${bytesToHex(hashPreparedTransaction(tx.bytes))}\n`)).toBe(true);
  });

  it('V3 contract keys: a QueryByKey node, keyed create, exercise by key; V2 refuses to report them', () => {
    const tx = decoded(keyedModel());
    const r = inspectTransaction(tx, 'v3');
    expect(r.transaction.nodes.map((n) => [n.nodeId, n.type, n.depth])).toEqual([
      ['0', 'exercise', 0],
      ['1', 'queryByKey', 1],
      ['2', 'create', 1],
    ]);
    const [ex, q, c] = r.transaction.nodes;
    expect(ex!.byKey).toBe(true);
    expect(ex!.hasKey).toBe(true);
    expect(c!.hasKey).toBe(true);
    expect(q!.template).toBe('token-holding:Token.Holding:Holding');
    expect(q!.exhaustive).toBe(true);
    expect(q!.result).toEqual([contractId(20)]);
    expect(q!.children).toBeUndefined();
    const text = renderInspectText(r);
    expect(text).toContain('  [1] QUERYBYKEY token-holding:Token.Holding:Holding (exhaustive, 1 results)\n');
    expect(text).toContain(' (by key)\n');
    expect(() => inspectTransaction(tx, 'v2')).toThrow(/unsupported/);
  });

  it('templateName falls back to the package id when the package name is empty', () => {
    expect(templateName('pkg-name', TOKEN)).toBe('pkg-name:Token.Holding:Holding');
    expect(templateName('', TOKEN)).toBe(`${PACKAGE_ID}:Token.Holding:Holding`);
  });
});

describe('coverage warnings', () => {
  const MAX_RECORD_TIME = PREPARATION_TIME + 600_000_000n;

  it('V2 with max_record_time: a warning about max_record_time, not covered', () => {
    const r = inspectTransaction(decoded(mixedModel({ maxRecordTime: MAX_RECORD_TIME })), 'v2');
    expect(r.maxRecordTimeCovered).toBe(false);
    expect(r.metadata.maxRecordTime).toBe(isoMicros(MAX_RECORD_TIME));
    const w = r.warnings.filter((x) => x.includes('max_record_time'));
    expect(w).toHaveLength(1);
    expect(w[0]).toContain('NOT covered by the V2 hash');
    const text = renderInspectText(r);
    expect(text).toContain(
      `  max record time:   ${isoMicros(MAX_RECORD_TIME)} — NOT covered by the V2 hash\n`,
    );
    expect(text).toContain(`\nWARNING: ${w[0]}\n`);
  });

  it('V3 with max_record_time: covered, no max_record_time warning', () => {
    const r = inspectTransaction(decoded(mixedModel({ maxRecordTime: MAX_RECORD_TIME })), 'v3');
    expect(r.maxRecordTimeCovered).toBe(true);
    expect(r.warnings.some((x) => x.includes('max_record_time'))).toBe(false);
    expect(renderInspectText(r)).toContain(
      `  max record time:   ${isoMicros(MAX_RECORD_TIME)} — covered by the V3 hash\n`,
    );
  });

  it('V2 without max_record_time: says V2 could not cover one; V3 without: no such warning', () => {
    const tx = decoded(mixedModel());
    expect(inspectTransaction(tx, 'v2').warnings.some((x) => x.includes('no max_record_time'))).toBe(true);
    const v3 = inspectTransaction(tx, 'v3');
    expect(v3.maxRecordTimeCovered).toBe(true);
    expect(v3.warnings.some((x) => x.includes('max_record_time'))).toBe(false);
  });

  it('ledger effective time: a warning only when neither bound is set', () => {
    const unbounded = inspectTransaction(decoded(mixedModel()), 'v3');
    expect(unbounded.warnings.some((x) => x.includes('ledger effective time'))).toBe(true);
    const bounded = inspectTransaction(
      decoded(mixedModel({ minLedgerEffectiveTime: PREPARATION_TIME - 1n })),
      'v3',
    );
    expect(bounded.warnings.some((x) => x.includes('ledger effective time'))).toBe(false);
    expect(bounded.metadata.minLedgerEffectiveTime).toBe(isoMicros(PREPARATION_TIME - 1n));
    expect(bounded.metadata.maxLedgerEffectiveTime).toBeNull();
    expect(renderInspectText(bounded)).toContain(
      `  ledger time:       ${isoMicros(PREPARATION_TIME - 1n)} .. unbounded\n`,
    );
  });
});

// ---- the JSON document against docs/inspect.schema.json -----------------------------------

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Schema = boolean | { [k: string]: Json };

const ANNOTATIONS = new Set(['$schema', '$id', '$comment', '$defs', 'title', 'description', 'examples']);
const ASSERTIONS = new Set([
  'type',
  'required',
  'properties',
  'items',
  'enum',
  'const',
  'pattern',
  'minimum',
  'oneOf',
  '$ref',
]);

function typeOf(x: Json): string {
  if (x === null) return 'null';
  if (Array.isArray(x)) return 'array';
  if (typeof x === 'number') return Number.isInteger(x) ? 'integer' : 'number';
  return typeof x;
}

/**
 * A checker for the subset of JSON Schema 2020-12 the inspect schema uses:
 * type, required, properties, items, enum, const, pattern, minimum, oneOf and
 * local `#/$defs/…` references. Any other keyword is an error, so the schema
 * cannot say more than this checker enforces. Returns the list of violations.
 */
function validate(root: Schema, instance: Json): string[] {
  const errors: string[] = [];
  const resolve = (ref: string): Schema => {
    if (!ref.startsWith('#/')) throw new Error(`unsupported $ref ${ref}`);
    let s: Json = root as Json;
    for (const seg of ref.slice(2).split('/')) s = (s as Record<string, Json>)[seg] as Json;
    if (s === undefined) throw new Error(`dangling $ref ${ref}`);
    return s as Schema;
  };
  const check = (schema: Schema, x: Json, at: string): void => {
    if (schema === true) return;
    if (schema === false) {
      errors.push(`${at}: not allowed`);
      return;
    }
    for (const k of Object.keys(schema))
      if (!ANNOTATIONS.has(k) && !ASSERTIONS.has(k)) throw new Error(`schema keyword ${k} is not supported`);
    if (typeof schema.$ref === 'string') check(resolve(schema.$ref), x, at);
    if (schema.type !== undefined) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      const t = typeOf(x);
      if (!types.includes(t) && !(t === 'integer' && types.includes('number')))
        errors.push(`${at}: ${t}, expected ${types.join(' or ')}`);
    }
    if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(x))
      errors.push(`${at}: ${JSON.stringify(x)} is not ${JSON.stringify(schema.const)}`);
    if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(x)))
      errors.push(`${at}: ${JSON.stringify(x)} not in ${JSON.stringify(schema.enum)}`);
    if (
      typeof schema.pattern === 'string' &&
      typeof x === 'string' &&
      !new RegExp(schema.pattern, 'u').test(x)
    )
      errors.push(`${at}: ${JSON.stringify(x)} does not match ${schema.pattern}`);
    if (typeof schema.minimum === 'number' && typeof x === 'number' && x < schema.minimum)
      errors.push(`${at}: ${x} < ${schema.minimum}`);
    if (x !== null && typeof x === 'object' && !Array.isArray(x)) {
      if (Array.isArray(schema.required))
        for (const k of schema.required)
          if (!Object.hasOwn(x, k as string)) errors.push(`${at}: missing ${k}`);
      const props = schema.properties as Record<string, Schema> | undefined;
      if (props)
        for (const [k, s] of Object.entries(props))
          if (Object.hasOwn(x, k)) check(s, x[k] as Json, `${at}.${k}`);
    }
    if (Array.isArray(x) && schema.items !== undefined)
      x.forEach((e, i) => {
        check(schema.items as Schema, e, `${at}[${i}]`);
      });
    if (Array.isArray(schema.oneOf)) {
      const outer = errors.length;
      let matches = 0;
      for (const s of schema.oneOf) {
        check(s as Schema, x, at);
        if (errors.length === outer) matches++;
        errors.length = outer;
      }
      if (matches !== 1)
        errors.push(`${at}: matches ${matches} of the oneOf alternatives, expected exactly 1`);
    }
  };
  check(root, instance, '$');
  return errors;
}

const SCHEMA = JSON.parse(readFileSync(join(ROOT, 'docs', 'inspect.schema.json'), 'utf8')) as Schema;
const asJson = (r: InspectReport): Json => JSON.parse(JSON.stringify(r)) as Json;

describe('inspect JSON document and docs/inspect.schema.json', () => {
  it('the schema is a draft 2020-12 schema for the @1 format, and docs/inspect-json.md embeds it verbatim', () => {
    const s = SCHEMA as Record<string, Json>;
    expect(s.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect((s.properties as Record<string, Record<string, Json>>).format!.const).toBe(INSPECT_FORMAT);
    const doc = readFileSync(join(ROOT, 'docs', 'inspect-json.md'), 'utf8');
    const m = /<!-- schema:begin -->\s*```json\n([\s\S]*?)\n```\s*<!-- schema:end -->/.exec(doc);
    expect(m, 'schema block between <!-- schema:begin --> and <!-- schema:end -->').not.toBeNull();
    expect(JSON.parse(m![1]!)).toEqual(SCHEMA);
  });

  for (const file of realFiles)
    it(`${file}: V2 and V3 reports are valid`, () => {
      const vec = readVector(file);
      const tx = decodePreparedTransaction(vec.prepared_transaction_base64);
      for (const scheme of ['v2', 'v3'] as HashingScheme[]) {
        const r = inspectTransaction(tx, scheme);
        expect(r.hash).toBe(scheme === 'v2' ? vec.expected_hash_hex : vec.reference_v3_hex);
        expect(validate(SCHEMA, asJson(r))).toEqual([]);
      }
    });

  it('built transactions (every node kind, keys, max_record_time, bounds, 10,000 nodes) are valid', () => {
    const tx = decoded(
      mixedModel({ maxRecordTime: PREPARATION_TIME + 1n, minLedgerEffectiveTime: PREPARATION_TIME - 1n }),
    );
    for (const scheme of ['v2', 'v3'] as HashingScheme[])
      expect(validate(SCHEMA, asJson(inspectTransaction(tx, scheme)))).toEqual([]);
    expect(validate(SCHEMA, asJson(inspectTransaction(decoded(keyedModel()), 'v3')))).toEqual([]);
    const chain: [string, NodeBody][] = [];
    for (let i = 0; i < 10_000; i++) chain.push([String(i), exercise(i, i < 9_999 ? [String(i + 1)] : [])]);
    expect(validate(SCHEMA, asJson(inspectTransaction(decoded(model(['0'], chain)), 'v2')))).toEqual([]);
  });

  it('the checker is not vacuous: it reports missing, mistyped and unexpected values', () => {
    type Obj = Record<string, Json>;
    const good = asJson(inspectTransaction(decoded(mixedModel()), 'v2'));
    const clone = () => JSON.parse(JSON.stringify(good)) as Obj;
    const nodes = (d: Obj) => (d.transaction as Obj).nodes as Obj[];
    const highlightsOf = (d: Obj, i: number) => nodes(d)[i]!.highlights as Obj[];
    const problems = (d: Obj) => validate(SCHEMA, d).join('\n');

    const noHash = clone();
    delete noHash.hash;
    expect(validate(SCHEMA, noHash)).toContain('$: missing hash');

    const badFormat = clone();
    badFormat.format = 'canton-signer/inspect@2';
    expect(problems(badFormat)).toContain('$.format');

    const badHash = clone();
    badHash.hash = String(badHash.hash).toUpperCase();
    expect(problems(badHash)).toContain('$.hash');

    const badDepth = clone();
    nodes(badDepth)[1]!.depth = '1';
    expect(problems(badDepth)).toContain('$.transaction.nodes[1].depth');

    const noChoice = clone();
    delete nodes(noChoice)[0]!.choice;
    expect(problems(noChoice)).toContain('$.transaction.nodes[0]');

    const badKind = clone();
    highlightsOf(badKind, 0)[0]!.kind = 'price';
    expect(problems(badKind)).toContain('$.transaction.nodes[0].highlights[0]');

    const instrumentAsString = clone();
    const h = highlightsOf(instrumentAsString, 0).find((x) => x.kind === 'instrument');
    expect(h).toBeDefined();
    h!.value = 'TKN';
    expect(problems(instrumentAsString)).toContain('$.transaction.nodes[0].highlights');

    const nullActAs = clone();
    (nullActAs.metadata as Obj).actAs = null;
    expect(problems(nullActAs)).toContain('$.metadata.actAs');

    // fields added within @1 are allowed
    const extra = clone();
    extra.someFutureField = { anything: true };
    nodes(extra)[0]!.anotherFutureField = 1;
    expect(validate(SCHEMA, extra)).toEqual([]);
  });
});

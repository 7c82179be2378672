/**
 * Record labels against the pinned Daml layouts (src/intent/layouts.ts): a
 * real transfer whose labels are permuted (the hash still covers the new
 * labels, re-encoded by the project's own encoder; the ledger would execute
 * by position) is refused with `label_mismatch` naming the record and the
 * positions, whether the record carries its type id or only sits in a pinned
 * place; honest transactions (every real vector, the sandbox builders) pass.
 */
import { describe, expect, it } from 'vitest';
import type { NodeBody, PreparedTransaction, Value } from '../../src/hashing/model.js';
import { checkIntent } from '../../src/intent/check.js';
import { checkLayouts, LAYOUTS } from '../../src/intent/layouts.js';
import { type Intent, IntentSchema } from '../../src/intent/model.js';
import { recogniseActions } from '../../src/intent/recognise.js';
import { buildTransfer, decoded, modelOf, realFiles, realVector } from './fixtures.js';

const VECTOR = 'v2_bitgo_transferrawtxnwithmemo_preparecommandresponse_base64_json.json';
const TRANSFER = 'Splice.Api.Token.TransferInstructionV1:Transfer';

/** `v` with labels `a` and `b` exchanged in every record `pick` accepts (values stay in place). */
function swapLabels(v: Value, pick: (r: Value & { kind: 'record' }) => boolean, a: string, b: string): Value {
  const swap = (l: string) => (l === a ? b : l === b ? a : l);
  switch (v.kind) {
    case 'record': {
      const hit = pick(v);
      return {
        ...v,
        fields: v.fields.map((f) => ({
          label: hit ? swap(f.label) : f.label,
          value: swapLabels(f.value, pick, a, b),
        })),
      };
    }
    case 'optional':
      return v.value === undefined ? v : { kind: 'optional', value: swapLabels(v.value, pick, a, b) };
    case 'list':
      return { kind: 'list', elements: v.elements.map((e) => swapLabels(e, pick, a, b)) };
    case 'variant':
      return { ...v, value: swapLabels(v.value, pick, a, b) };
    default:
      return v;
  }
}

const ofType = (type: string) => (r: Value & { kind: 'record' }) =>
  r.recordId !== undefined && `${r.recordId.moduleName}:${r.recordId.entityName}` === type;

/** Every create argument and choice argument of the transaction's own nodes mapped by `f`. */
function mapNodes(p: PreparedTransaction, f: (v: Value, n: NodeBody) => Value): PreparedTransaction {
  const nodes = p.transaction.nodes.map(({ nodeId, node }) => {
    if (node.type === 'create') return { nodeId, node: { ...node, argument: f(node.argument, node) } };
    if (node.type === 'exercise')
      return { nodeId, node: { ...node, chosenValue: f(node.chosenValue, node) } };
    return { nodeId, node };
  });
  return { ...p, transaction: { ...p.transaction, nodes } };
}

/** The transfer intent the honest vector satisfies, read from its recognised root. */
function honestIntent(): Intent {
  const [a] = recogniseActions(realVector(VECTOR));
  return IntentSchema.parse({
    kind: 'transfer',
    sender: a!.parties.sender,
    receiver: a!.parties.receiver,
    amount: a!.amounts.amount,
    instrument: a!.instrument,
    memo: a!.memo,
    inputs: a!.inputs,
  });
}

const labelProblems = (p: PreparedTransaction) =>
  checkIntent(decoded(p), honestIntent()).problems.filter((x) => x.reason === 'label_mismatch');

describe('record labels: honest transactions pass', () => {
  it('every real vector carries its pinned records in the declared order', () => {
    for (const file of realFiles) expect(checkLayouts(realVector(file)), file).toEqual([]);
  });

  it('the real transfer re-encoded unchanged passes the intent check', () => {
    const p = modelOf(realVector(VECTOR));
    expect(checkIntent(decoded(p), honestIntent()).problems).toEqual([]);
  });

  it('a sandbox-built transfer (direct and two-step) passes', () => {
    for (const mode of ['direct', 'twoStep'] as const)
      expect(checkLayouts(decoded(buildTransfer(mode)))).toEqual([]);
  });

  it('every pinned layout has distinct labels', () => {
    for (const [type, fields] of Object.entries(LAYOUTS)) {
      const labels = fields.map((f) => (typeof f === 'string' ? f : f[0]).replace(/\?$/, ''));
      expect(new Set(labels).size, type).toBe(labels.length);
    }
  });
});

describe('record labels: permuted labels are refused', () => {
  const base = () => modelOf(realVector(VECTOR));

  it('sender and receiver swapped in the token-standard Transfer', () => {
    const p = mapNodes(base(), (v) => swapLabels(v, ofType(TRANSFER), 'sender', 'receiver'));
    // The hole: the recogniser now reads the receiver as the sender.
    const [honest] = recogniseActions(realVector(VECTOR));
    const [misread] = recogniseActions(decoded(p));
    expect(misread!.parties.sender).toBe(honest!.parties.receiver);
    const problems = labelProblems(p);
    expect(problems).toHaveLength(1);
    expect(problems[0]!.message).toContain(TRANSFER);
    expect(problems[0]!.message).toContain('position 0 is labelled receiver where Daml has sender');
    expect(problems[0]!.message).toContain('position 1 is labelled sender where Daml has receiver');
    expect(problems[0]!.where).toMatch(/^node \d+: argument of TransferFactory_Transfer\.transfer$/);
  });

  it('owner and dso swapped in a created Amulet', () => {
    const p = mapNodes(base(), (v, n) =>
      n.type === 'create' ? swapLabels(v, ofType('Splice.Amulet:Amulet'), 'owner', 'dso') : v,
    );
    const problems = labelProblems(p);
    expect(problems.length).toBeGreaterThan(0);
    for (const x of problems) {
      expect(x.message).toContain('Splice.Amulet:Amulet');
      expect(x.message).toContain('position 0 is labelled owner where Daml has dso');
      expect(x.where).toMatch(/create argument of Splice\.Amulet:Amulet$/);
    }
  });

  it('amount and receiverFeeRatio swapped in a TransferOutput', () => {
    const p = mapNodes(base(), (v) =>
      swapLabels(v, ofType('Splice.AmuletRules:TransferOutput'), 'amount', 'receiverFeeRatio'),
    );
    const problems = labelProblems(p);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems[0]!.message).toContain('Splice.AmuletRules:TransferOutput');
    expect(problems[0]!.message).toContain('position 1 is labelled amount where Daml has receiverFeeRatio');
    expect(problems[0]!.where).toContain('.outputs');
  });

  it('without type ids, the place pins the type (choice argument → transfer field)', () => {
    const strip = (v: Value): Value =>
      v.kind === 'record'
        ? {
            ...v,
            recordId: undefined,
            fields: v.fields.map((f) => ({ label: f.label, value: strip(f.value) })),
          }
        : v.kind === 'optional' && v.value !== undefined
          ? { kind: 'optional', value: strip(v.value) }
          : v;
    const stripped = mapNodes(base(), strip);
    expect(labelProblems(stripped)).toEqual([]);
    const p = mapNodes(stripped, (v) =>
      swapLabels(v, (r) => r.fields.some((f) => f.label === 'executeBefore'), 'sender', 'receiver'),
    );
    const problems = labelProblems(p);
    expect(problems).toHaveLength(1);
    expect(problems[0]!.message).toContain(TRANSFER);
  });

  it('a type id naming another type than the place holds is refused', () => {
    const p = mapNodes(base(), (v) =>
      v.kind === 'record' && ofType('Splice.Api.Token.TransferInstructionV1:TransferFactory_Transfer')(v)
        ? {
            ...v,
            fields: v.fields.map((f) =>
              f.label === 'transfer' && f.value.kind === 'record' && f.value.recordId
                ? {
                    label: f.label,
                    value: { ...f.value, recordId: { ...f.value.recordId, entityName: 'Unpinned' } },
                  }
                : f,
            ),
          }
        : v,
    );
    const problems = labelProblems(p);
    expect(problems).toHaveLength(1);
    expect(problems[0]!.message).toContain(
      `typed Splice.Api.Token.TransferInstructionV1:Unpinned, but that place holds a ${TRANSFER}`,
    );
  });

  it('a missing required field or an extra field is refused; omitted trailing Optionals are not', () => {
    const edit = (f: (fields: { label: string; value: Value }[]) => { label: string; value: Value }[]) =>
      mapNodes(base(), function go(v: Value): Value {
        if (v.kind !== 'record') return v;
        const fields = v.fields.map((x) => ({ label: x.label, value: go(x.value) }));
        return { ...v, fields: ofType('Splice.Amulet:Amulet')(v) ? f(fields) : fields };
      });
    const missing = labelProblems(edit((fs) => fs.slice(0, 2)));
    expect(missing[0]!.message).toContain('missing amount (positions 2–2), which are not Optional');
    const extra = labelProblems(
      edit((fs) => [...fs, { label: 'note', value: { kind: 'text', value: 'x' } }]),
    );
    expect(extra[0]!.message).toContain('1 extra field(s) after position 2 (note)');
    // A TransferOutput stops before its Optional lock and meta in the real vector itself.
    expect(checkLayouts(realVector(VECTOR))).toEqual([]);
  });
  it('an AmuletAllocation (the root of Allocation_Withdraw and _Cancel) is pinned down to its transfer leg', () => {
    const party = (value: string): Value => ({ kind: 'party', value });
    const record = (fields: [string, Value][]): Value => ({
      kind: 'record',
      recordId: undefined,
      fields: fields.map(([label, value]) => ({ label, value })),
    });
    const allocation = (first: string, second: string): Value =>
      record([
        ['lockedAmulet', { kind: 'contractId', value: '00ab' }],
        [
          'allocation',
          record([
            [
              'settlement',
              record([
                ['executor', party('executor::1220')],
                [
                  'settlementRef',
                  record([
                    ['id', { kind: 'text', value: 'trade-1' }],
                    ['cid', { kind: 'optional', value: undefined }],
                  ]),
                ],
                ['requestedAt', { kind: 'timestamp', value: 0n }],
                ['allocateBefore', { kind: 'timestamp', value: 1n }],
                ['settleBefore', { kind: 'timestamp', value: 2n }],
                ['meta', record([['values', { kind: 'textMap', entries: [] }]])],
              ]),
            ],
            ['transferLegId', { kind: 'text', value: 'leg-0' }],
            [
              'transferLeg',
              record([
                [first, party('alice::1220')],
                [second, party('bob::1220')],
                ['amount', { kind: 'numeric', value: '10.0000000000' }],
                [
                  'instrumentId',
                  record([
                    ['admin', party('dso::1220')],
                    ['id', { kind: 'text', value: 'Amulet' }],
                  ]),
                ],
                ['meta', record([['values', { kind: 'textMap', entries: [] }]])],
              ]),
            ],
          ]),
        ],
      ]);
    const tx = (argument: Value) =>
      ({
        nodeById: new Map(),
        metadata: {
          inputContracts: [
            {
              contract: {
                type: 'create',
                contractId: '00ab',
                templateId: {
                  packageId: 'p',
                  moduleName: 'Splice.AmuletAllocation',
                  entityName: 'AmuletAllocation',
                },
                argument,
              },
            },
          ],
        },
      }) as unknown as Parameters<typeof checkLayouts>[0];
    expect(checkLayouts(tx(allocation('sender', 'receiver')))).toEqual([]);
    const swapped = checkLayouts(tx(allocation('receiver', 'sender')));
    expect(swapped.map((p) => p.message).join('\n')).toMatch(
      /TransferLeg.*position 0 is labelled receiver where Daml has sender/,
    );
  });
});

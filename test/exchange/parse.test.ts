/**
 * The token-standard parser (src/exchange/parse.ts) on DA's three exchange samples
 * (test/fixtures/exchange, expected values read off the JSON by hand), on hand-made edge
 * cases (nesting, offers' outcomes, unresolved archives), and a property: whatever the shape of
 * a transaction, the movements' deltas plus the unexplained changes are each book party's net
 * holding change, and agree with the `holdings` list.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { JsTransaction } from '../../src/canton/ledger-api/schemas.js';
import {
  archivedHoldingIds,
  type HoldingInfo,
  type Instrument,
  outcomeOf,
  parseTransaction,
} from '../../src/exchange/parse.js';
import { addDecimals, compareDecimals } from '../../src/intent/decimal.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'exchange');
function sample(name: string): JsTransaction {
  const raw = JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8'));
  return raw.update.Transaction.value as JsTransaction;
}

const none = new Map<string, HoldingInfo>();

describe('DA sample: 1-step transfer (TransferPreapproval_Send marked tx-kind transfer)', () => {
  const tx = sample('1-step-transfer');
  const treasury = 'treasury-party::1220278a4a0eb2c244b425dff62853ef1cd04ca1095bffcea465c0de766faf9ab8cd';
  const sender = 'sender::1220278a4a0eb2c244b425dff62853ef1cd04ca1095bffcea465c0de766faf9ab8cd';
  const dso = 'DSO::12204b8b621ec1dedd51ee2510085f8164cad194953496494d32f541f3f2c170e962';
  const amulet = { admin: dso, id: 'Amulet' };
  const input =
    '009b939ae451ef1a0cb81d1606391406690e055b5be301fd2f51efb6be5675577eca1112200f58604ac538224f73bdc57117d73830ed1e3167f956d66f9e3ecdacbf2359a7';

  it('the treasury receives 200 with memo, sender and burned from the result meta', () => {
    const p = parseTransaction(tx, { parties: new Set([treasury]), known: none });
    expect(p).toMatchObject({
      updateId: '122008a4699e61ce682917c9515ecb3b4426adf276441e41edede8b3862efa2de80e',
      offset: 107,
      recordTime: '1970-01-01T00:01:00.000114Z',
      synchronizerId: 'global-domain::12204b8b621ec1dedd51ee2510085f8164cad194953496494d32f541f3f2c170e962',
      commandId: '582f81e4-86e4-48fa-ad95-607e9ebe8c9b',
    });
    expect(p.movements).toEqual([
      {
        nodeId: 4,
        kind: 'transfer',
        memo: 'deposit-account-id',
        sender,
        burned: '14.0',
        choice: 'TransferPreapproval_Send',
        deltas: [{ party: treasury, instrument: amulet, amount: '200.0000000000', locked: '0.0000000000' }],
      },
    ]);
    expect(p.holdings).toEqual([
      {
        op: 'create',
        nodeId: 11,
        contractId:
          '008f783cd288ce926f8bc973df7ddb719e0b8c941dd84cd9a6ca0240fb7ecff390ca111220f5d7073ad68f0746851954e570f348d099a323b796f71807caf71871fce6d956',
        owner: treasury,
        instrument: amulet,
        amount: '200.0000000000',
        locked: false,
      },
    ]);
    expect(p.offers).toEqual([]);
    expect(p.unexplained).toEqual([]);
    // The sender's input (node 8) was created elsewhere and is not resolved here.
    expect(p.unresolvedArchives).toEqual([input]);
    expect(archivedHoldingIds(tx)).toEqual([input]);
  });

  it('with the sender in the book and its input resolved, the sender nets -214 (200 + fees)', () => {
    const known = new Map([
      [
        input,
        { contractId: input, owner: sender, instrument: amulet, amount: '199877.3600000000', locked: false },
      ],
    ]);
    const p = parseTransaction(tx, { parties: new Set([treasury, sender]), known });
    expect(p.movements[0]!.deltas).toEqual([
      { party: sender, instrument: amulet, amount: '-214.0000000000', locked: '0.0000000000' },
      { party: treasury, instrument: amulet, amount: '200.0000000000', locked: '0.0000000000' },
    ]);
    expect(p.holdings.map((h) => [h.op, h.nodeId, h.owner === sender])).toEqual([
      ['archive', 8, true],
      ['create', 11, false],
      ['create', 12, true],
    ]);
    expect(p.unresolvedArchives).toEqual([]);
  });
});

describe('DA sample: transfer instruction created (an offer to the treasury)', () => {
  const tx = sample('transfer-instruction-create');
  const treasury = 'treasury-party::12207bd11907b9b3c11ade702d30b556bfe635314d3d0f708f9677e09a4ff096ef87';
  it('is one created offer with memo, amount and deadlines; no movement, no holding', () => {
    const p = parseTransaction(tx, { parties: new Set([treasury]), known: none });
    expect(p.offers).toEqual([
      {
        op: 'created',
        nodeId: 0,
        instructionCid:
          '00fc774936c91f423c117744102a5996e4dc117f2b6496ef337967a7d2c5d02e4aca1112203c35266c980ae19508cc690cb501f8c767c02bfdbe838f1f89105de6fe59439f',
        sender: 'sender::1220f37942af4f4d062006155d504f1adfa1565260cd499e62325b011c06db635d8c',
        receiver: treasury,
        amount: '1000.0000000000',
        instrument: {
          admin: 'DSO::1220d26d73867a428814de451fdd8e716acf45fe59c6569d76ad77d42270629f3ce9',
          id: 'Amulet',
        },
        memo: 'deposit-account-id',
        requestedAt: '1970-01-01T00:01:00Z',
        executeBefore: '1970-01-01T00:02:00Z',
        status: 'TransferPendingReceiverAcceptance',
      },
    ]);
    expect(p.movements).toEqual([]);
    expect(p.holdings).toEqual([]);
    expect(p.unexplained).toEqual([]);
    expect(p.commandId).toBeUndefined(); // the sample's commandId is ""
  });

  it('an offer between two parties outside the book is not reported', () => {
    expect(parseTransaction(tx, { parties: new Set(['someone::1220']), known: none }).offers).toEqual([]);
  });
});

describe('DA sample: transfer instruction accepted (no tx-kind on the accept; a nested unlock marked)', () => {
  const tx = sample('transfer-instruction-accept');
  const treasury = 'treasury-party::12207bd11907b9b3c11ade702d30b556bfe635314d3d0f708f9677e09a4ff096ef87';
  const sender = 'sender::1220f37942af4f4d062006155d504f1adfa1565260cd499e62325b011c06db635d8c';
  const amulet = {
    admin: 'DSO::1220d26d73867a428814de451fdd8e716acf45fe59c6569d76ad77d42270629f3ce9',
    id: 'Amulet',
  };
  const instruction =
    '00fc774936c91f423c117744102a5996e4dc117f2b6496ef337967a7d2c5d02e4aca1112203c35266c980ae19508cc690cb501f8c767c02bfdbe838f1f89105de6fe59439f';
  const lockedCid =
    '004ef3ae401af384aa37391f3a975647b1ca3d9ca3dc97f7b1e19c47d013ed4956ca11122015cac2e81f6d2e2735ed64c16326230234cc374c85ed42657b7801bf62233ddc';

  it('the accept is one transfer movement (the unlock inside it is not a movement of its own); the offer completed', () => {
    const p = parseTransaction(tx, { parties: new Set([treasury]), known: none });
    expect(p.movements).toEqual([
      {
        nodeId: 0,
        kind: 'transfer',
        burned: '22.0',
        choice: 'TransferInstruction_Accept',
        instructionCid: instruction,
        deltas: [{ party: treasury, instrument: amulet, amount: '1000.0000000000', locked: '0.0000000000' }],
      },
    ]);
    expect(p.offers).toEqual([
      {
        op: 'consumed',
        nodeId: 0,
        instructionCid: instruction,
        choice: 'TransferInstruction_Accept',
        outcome: 'completed',
      },
    ]);
    expect(p.unexplained).toEqual([]);
    expect(p.holdings).toHaveLength(1);
    expect(p.holdings[0]).toMatchObject({
      op: 'create',
      nodeId: 11,
      owner: treasury,
      amount: '1000.0000000000',
    });
    expect(archivedHoldingIds(tx)).toEqual([lockedCid]); // node 8 archives node 4's amulet: not asked for
  });

  it("the sender's side: its locked 1064.0015220800 goes, 42.0015220800 of change comes back (-1022, lock -1064)", () => {
    const known = new Map([
      [
        lockedCid,
        { contractId: lockedCid, owner: sender, instrument: amulet, amount: '1064.0015220800', locked: true },
      ],
    ]);
    const p = parseTransaction(tx, { parties: new Set([sender]), known });
    expect(p.movements).toHaveLength(1);
    expect(p.movements[0]!.deltas).toEqual([
      { party: sender, instrument: amulet, amount: '-1022.0000000000', locked: '-1064.0015220800' },
    ]);
    // The transient amulet of node 4 (archived at node 8) is in no holdings list.
    expect(p.holdings.map((h) => [h.op, h.nodeId])).toEqual([
      ['archive', 2],
      ['create', 12],
    ]);
  });
});

// ---- hand-made transactions ------------------------------------------------------------------------

const DSO = 'dso::1220aa';
const CC: Instrument = { admin: DSO, id: 'Amulet' };
const HOLDING_IFACE = 'f00d:Splice.Api.Token.HoldingV1:Holding';
const INSTR_IFACE = 'beef:Splice.Api.Token.TransferInstructionV1:TransferInstruction';

type Ev = JsTransaction['events'][number];

function createHolding(
  nodeId: number,
  cid: string,
  owner: string,
  amount: string,
  locked = false,
  inst = CC,
): Ev {
  return {
    CreatedEvent: {
      offset: 1,
      nodeId,
      contractId: cid,
      templateId: 'pkg:Some.Token:Coin',
      contractKey: null,
      createArgument: {},
      interfaceViews: [
        {
          interfaceId: HOLDING_IFACE,
          viewStatus: { code: 0, message: '', details: [] },
          viewValue: {
            owner,
            instrumentId: inst,
            amount,
            lock: locked ? { holders: [DSO] } : null,
            meta: { values: {} },
          },
        },
      ],
      witnessParties: [owner],
      signatories: [owner],
      observers: [],
      createdAt: '2026-01-01T00:00:00Z',
      packageName: 'some-token',
      representativePackageId: 'pkg',
      acsDelta: true,
    },
  };
}

function exercise(
  nodeId: number,
  last: number,
  cid: string,
  choice: string,
  o: { consuming?: boolean; ifaces?: string[]; result?: unknown; arg?: unknown } = {},
): Ev {
  return {
    ExercisedEvent: {
      offset: 1,
      nodeId,
      contractId: cid,
      templateId: 'pkg:Some.Token:Thing',
      choice,
      choiceArgument: o.arg ?? {},
      actingParties: [],
      consuming: o.consuming ?? false,
      witnessParties: [],
      lastDescendantNodeId: last,
      exerciseResult: o.result ?? {},
      packageName: 'some-token',
      implementedInterfaces: o.ifaces ?? [],
      acsDelta: false,
    },
  };
}

const archiveHolding = (nodeId: number, cid: string) =>
  exercise(nodeId, nodeId, cid, 'Archive', { consuming: true, ifaces: [HOLDING_IFACE] });
const marked = (kind: string, extra: Record<string, string> = {}) => ({
  meta: { values: { 'splice.lfdecentralizedtrust.org/tx-kind': kind, ...extra } },
});

function tx(events: Ev[]): JsTransaction {
  return {
    updateId: 'u1',
    commandId: 'c1',
    effectiveAt: '2026-01-01T00:00:00Z',
    events,
    offset: 9,
    synchronizerId: 'sync::1220',
    recordTime: '2026-01-01T00:00:00Z',
  } as JsTransaction;
}

describe('hand-made transactions', () => {
  const A = 'alice::1220aa';
  const B = 'bob::1220bb';

  it('a factory transfer carries its memo in the argument; two sibling movements stay separate; outside changes are unexplained', () => {
    const t = tx([
      exercise(0, 2, 'factory', 'TransferFactory_Transfer', {
        arg: {
          transfer: { sender: A, meta: { values: { 'splice.lfdecentralizedtrust.org/reason': 'acct-7' } } },
        },
        result: marked('transfer'),
      }),
      archiveHolding(1, 'a1'),
      createHolding(2, 'b1', B, '5.0000000000'),
      exercise(3, 4, 'x', 'Whatever_Merge', { result: marked('merge-split') }),
      createHolding(4, 'b2', B, '1.0000000000'),
      createHolding(5, 'b3', B, '0.5000000000'),
    ]);
    const known = new Map([
      ['a1', { contractId: 'a1', owner: A, instrument: CC, amount: '7.0000000000', locked: false }],
    ]);
    const p = parseTransaction(t, { parties: new Set([A, B]), known });
    expect(
      p.movements.map((m) => [m.nodeId, m.kind, m.memo, m.sender, m.deltas.map((d) => [d.party, d.amount])]),
    ).toEqual([
      [
        0,
        'transfer',
        'acct-7',
        A,
        [
          [A, '-7.0000000000'],
          [B, '5.0000000000'],
        ],
      ],
      [3, 'merge-split', undefined, undefined, [[B, '1.0000000000']]],
    ]);
    expect(p.unexplained).toEqual([{ party: B, instrument: CC, amount: '0.5000000000', nodeIds: [5] }]);
  });

  it('the result meta wins over the argument; a tx-kind in the sender-written argument meta is no marker', () => {
    const t = tx([
      exercise(0, 1, 'x', 'Something', {
        arg: { transfer: { meta: { values: { 'splice.lfdecentralizedtrust.org/tx-kind': 'transfer' } } } },
      }),
      createHolding(1, 'b1', B, '3.0'),
      exercise(2, 3, 'y', 'Other', {
        arg: { transfer: { meta: { values: { 'splice.lfdecentralizedtrust.org/reason': 'arg' } } } },
        result: marked('transfer', { 'splice.lfdecentralizedtrust.org/reason': 'result' }),
      }),
      createHolding(3, 'b2', B, '1.0'),
    ]);
    const p = parseTransaction(t, { parties: new Set([B]), known: none });
    expect(p.movements.map((m) => [m.nodeId, m.memo])).toEqual([[2, 'result']]);
    expect(p.unexplained).toEqual([{ party: B, instrument: CC, amount: '3.0000000000', nodeIds: [1] }]);
  });

  it('a lock nets zero in amount and shows in locked; instruments are kept apart', () => {
    const other = { admin: 'reg::1220cc', id: 'USDX' };
    const t = tx([
      exercise(0, 4, 'f', 'TransferFactory_Transfer', { result: marked('transfer') }),
      archiveHolding(1, 'a1'),
      createHolding(2, 'l1', A, '10.0', true),
      createHolding(3, 'x1', A, '2.0', false, other),
      createHolding(4, 'a2', A, '0.0'),
    ]);
    const known = new Map([
      ['a1', { contractId: 'a1', owner: A, instrument: CC, amount: '10.0', locked: false }],
    ]);
    const p = parseTransaction(t, { parties: new Set([A]), known });
    expect(p.movements[0]!.deltas).toEqual([
      { party: A, instrument: CC, amount: '0.0000000000', locked: '10.0000000000' },
      { party: A, instrument: other, amount: '2.0000000000', locked: '0.0000000000' },
    ]);
  });

  it('offer outcomes: result tag first, then Reject/Withdraw by name, Failed, Accept without tag, expiry, else unknown', () => {
    const ex = (choice: string, result: unknown = {}) => {
      const e = exercise(0, 0, 'i', choice, { consuming: true, ifaces: [INSTR_IFACE], result });
      return (e as { ExercisedEvent: Parameters<typeof outcomeOf>[0] }).ExercisedEvent;
    };
    const out = (tag: string, value: unknown = {}) => ({ output: { tag, value } });
    expect(outcomeOf(ex('TransferInstruction_Accept', out('TransferInstructionResult_Completed')))).toEqual({
      outcome: 'completed',
    });
    expect(
      outcomeOf(
        ex(
          'TransferInstruction_Accept',
          out('TransferInstructionResult_Pending', { transferInstructionCid: 'next' }),
        ),
      ),
    ).toEqual({ outcome: 'pending', nextInstructionCid: 'next' });
    expect(outcomeOf(ex('TransferInstruction_Reject', out('TransferInstructionResult_Failed')))).toEqual({
      outcome: 'rejected',
    });
    expect(outcomeOf(ex('TransferInstruction_Withdraw', out('TransferInstructionResult_Failed')))).toEqual({
      outcome: 'withdrawn',
    });
    expect(outcomeOf(ex('TransferInstruction_Accept', out('TransferInstructionResult_Failed')))).toEqual({
      outcome: 'failed',
    });
    expect(outcomeOf(ex('TransferInstruction_Accept'))).toEqual({ outcome: 'pending' });
    expect(outcomeOf(ex('TransferInstruction_Update'))).toEqual({ outcome: 'pending' });
    expect(outcomeOf(ex('SomeRegistry_ExpireInstruction'))).toEqual({ outcome: 'expired' });
    expect(outcomeOf(ex('Archive'))).toEqual({ outcome: 'unknown' });
  });

  it('a consuming TransferInstruction exercise is a consumption and a movement, also under another name', () => {
    const t = tx([
      exercise(0, 2, 'instr-1', 'Registry_Settle', {
        consuming: true,
        ifaces: [INSTR_IFACE],
        result: { output: { tag: 'TransferInstructionResult_Completed', value: {} } },
      }),
      createHolding(1, 'b1', B, '4.0'),
      exercise(2, 2, 'lock-1', 'Unlock', {
        consuming: true,
        ifaces: [HOLDING_IFACE],
        result: marked('unlock'),
      }),
    ]);
    const p = parseTransaction(t, { parties: new Set([B]), known: none });
    expect(p.offers).toEqual([
      {
        op: 'consumed',
        nodeId: 0,
        instructionCid: 'instr-1',
        choice: 'Registry_Settle',
        outcome: 'completed',
      },
    ]);
    expect(p.movements).toHaveLength(1);
    expect(p.movements[0]).toMatchObject({ kind: 'transfer', instructionCid: 'instr-1' });
    expect(p.unresolvedArchives).toEqual(['lock-1']);
  });
});

// ---- the netting property ---------------------------------------------------------------------------

const PARTIES = ['p0::1220', 'p1::1220', 'other::1220'];
const BOOK = new Set(PARTIES.slice(0, 2));
const INSTRUMENTS: Instrument[] = [CC, { admin: 'reg::1220', id: 'X' }];

type Op =
  | { t: 'create'; owner: number; amount: number; locked: boolean; inst: number }
  | { t: 'archive'; pick: number }
  | { t: 'group'; marked: boolean; ops: Op[] };

const leaf: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    t: fc.constant('create' as const),
    owner: fc.nat(2),
    amount: fc.nat(10_000_000),
    locked: fc.boolean(),
    inst: fc.nat(1),
  }),
  fc.record({ t: fc.constant('archive' as const), pick: fc.nat(50) }),
);
const { op } = fc.letrec<{ op: Op }>((tie) => ({
  op: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.record({
      t: fc.constant('group' as const),
      marked: fc.boolean(),
      ops: fc.array(tie('op'), { maxLength: 4 }),
    }),
  ),
}));

const dec = (n: number) => (n / 1e4).toFixed(4);

describe('property: movements + unexplained = net holding change, per book party and instrument', () => {
  it('holds for random nestings of creates, archives (known or transient) and marked/unmarked exercises', () => {
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 8 }),
        fc.array(
          fc.record({ owner: fc.nat(2), amount: fc.nat(10_000_000), locked: fc.boolean(), inst: fc.nat(1) }),
          { maxLength: 4 },
        ),
        (ops, pre) => {
          const known = new Map<string, HoldingInfo>();
          pre.forEach((h, i) => {
            const cid = `known-${i}`;
            known.set(cid, {
              contractId: cid,
              owner: PARTIES[h.owner]!,
              instrument: INSTRUMENTS[h.inst]!,
              amount: dec(h.amount),
              locked: h.locked,
            });
          });
          const live = [...known.keys()];
          const info = new Map(known);
          const events: Ev[] = [];
          const expected = new Map<string, string[]>();
          const book = (h: HoldingInfo, signed: string) => {
            if (!BOOK.has(h.owner)) return;
            const k = JSON.stringify([h.owner, h.instrument]);
            expected.set(k, [...(expected.get(k) ?? []), signed]);
          };
          let next = 0;
          const emit = (o: Op): void => {
            const nodeId = next++;
            if (o.t === 'create') {
              const h = {
                contractId: `c-${nodeId}`,
                owner: PARTIES[o.owner]!,
                instrument: INSTRUMENTS[o.inst]!,
                amount: dec(o.amount),
                locked: o.locked,
              };
              events.push(createHolding(nodeId, h.contractId, h.owner, h.amount, h.locked, h.instrument));
              info.set(h.contractId, h);
              live.push(h.contractId);
              book(h, h.amount);
            } else if (o.t === 'archive') {
              if (live.length === 0) {
                events.push(exercise(nodeId, nodeId, `noop-${nodeId}`, 'Noop'));
                return;
              }
              const [cid] = live.splice(o.pick % live.length, 1);
              events.push(archiveHolding(nodeId, cid!));
              const h = info.get(cid!)!;
              book(h, `-${h.amount}`);
            } else {
              const at = events.length;
              events.push(
                exercise(nodeId, nodeId, `g-${nodeId}`, 'Group', {
                  result: o.marked ? marked('merge-split') : {},
                }),
              );
              for (const child of o.ops) emit(child);
              (
                events[at] as { ExercisedEvent: { lastDescendantNodeId: number } }
              ).ExercisedEvent.lastDescendantNodeId = next - 1;
            }
          };
          for (const o of ops) emit(o);
          const p = parseTransaction(tx(events), { parties: BOOK, known });

          const got = new Map<string, string[]>();
          const add = (party: string, inst: Instrument, amount: string) => {
            const k = JSON.stringify([party, inst]);
            got.set(k, [...(got.get(k) ?? []), amount]);
          };
          for (const m of p.movements) for (const d of m.deltas) add(d.party, d.instrument, d.amount);
          for (const u of p.unexplained) add(u.party, u.instrument, u.amount);
          const fromHoldings = new Map<string, string[]>();
          for (const h of p.holdings) {
            const k = JSON.stringify([h.owner, h.instrument]);
            fromHoldings.set(k, [
              ...(fromHoldings.get(k) ?? []),
              h.op === 'create' ? h.amount : `-${h.amount}`,
            ]);
          }
          for (const k of new Set([...expected.keys(), ...got.keys(), ...fromHoldings.keys()])) {
            const want = addDecimals(['0', ...(expected.get(k) ?? [])])!;
            expect(compareDecimals(addDecimals(['0', ...(got.get(k) ?? [])])!, want), k).toBe(0);
            expect(compareDecimals(addDecimals(['0', ...(fromHoldings.get(k) ?? [])])!, want), k).toBe(0);
          }
          for (const m of p.movements) for (const d of m.deltas) expect(BOOK.has(d.party)).toBe(true);
          expect(p.unresolvedArchives).toEqual([]);
        },
      ),
      { numRuns: 300 },
    );
  });
});

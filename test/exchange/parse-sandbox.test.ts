/**
 * The token-standard parser on transactions our sandbox commits, read back the way the
 * ingestion reads them (POST /v2/updates, one filter per book party: wildcard plus Holding and
 * TransferInstruction interface views, ledger effects, verbose): DevNet tap (mint), an
 * automation tap (no marker: unexplained), a direct transfer through a preapproval, offers
 * accepted, rejected, withdrawn and expired, a merge. At the end each party's parsed history
 * adds up to what it holds: movements plus unexplained equal its ACS balance, and the holdings
 * list replays to its active holdings.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsTransaction } from '../../src/canton/ledger-api/schemas.js';
import {
  archivedHoldingIds,
  type HoldingInfo,
  type ParsedTransaction,
  parseTransaction,
} from '../../src/exchange/parse.js';
import { addDecimals, compareDecimals } from '../../src/intent/decimal.js';
import { holdingView } from '../../src/sandbox/amulet.js';
import { step } from '../../src/sandbox/automation.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';
import { HOLDING_IFACE, INSTRUCTION_IFACE, tokenKit } from '../support/sandbox-token.js';

let sb: RunningSandbox;
let kit: ReturnType<typeof tokenKit>;
let alice: TestParty;
let bob: TestParty;
let carol: TestParty;

/** One book party's ingestion: its position, its holdings as ingested, everything parsed so far. */
interface Book {
  party: string;
  after: number;
  holdings: Map<string, HoldingInfo>;
  parsed: ParsedTransaction[];
}
const books = new Map<string, Book>();

const view = (interfaceId: string) => ({
  identifierFilter: { InterfaceFilter: { value: { interfaceId, includeInterfaceView: true } } },
});

/** Reads and parses what `p` has not read yet; returns those transactions. */
async function ingest(p: TestParty): Promise<ParsedTransaction[]> {
  let b = books.get(p.id);
  if (!b) {
    b = { party: p.id, after: 0, holdings: new Map(), parsed: [] };
    books.set(p.id, b);
  }
  const end = (await kit.ledger.ledgerEnd()).offset;
  const items = await kit.ledger.updates({
    beginExclusive: b.after,
    endInclusive: end,
    updateFormat: {
      includeTransactions: {
        eventFormat: {
          filtersByParty: {
            [p.id]: {
              cumulative: [
                { identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: false } } } },
                view(HOLDING_IFACE),
                view(INSTRUCTION_IFACE),
              ],
            },
          },
          verbose: true,
        },
        transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
      },
    },
  });
  const out: ParsedTransaction[] = [];
  for (const item of items) {
    const u = item.update;
    if (!u || !('Transaction' in u) || !u.Transaction) continue;
    const tx = u.Transaction.value as JsTransaction;
    // What the ingestion resolves first: archived holdings created earlier (here: from its own table).
    const known = new Map<string, HoldingInfo>();
    for (const cid of archivedHoldingIds(tx)) {
      const h = b.holdings.get(cid);
      if (h) known.set(cid, h);
    }
    const parsed = parseTransaction(tx, { parties: new Set([p.id]), known });
    for (const h of parsed.holdings)
      if (h.op === 'create') b.holdings.set(h.contractId, h);
      else b.holdings.delete(h.contractId);
    out.push(parsed);
  }
  b.after = end;
  b.parsed.push(...out);
  return out;
}

/** The one parsed transaction with this update id. */
async function parsedUpdate(p: TestParty, updateId: string): Promise<ParsedTransaction> {
  const fresh = await ingest(p);
  const hit = [...fresh, ...books.get(p.id)!.parsed].find((t) => t.updateId === updateId);
  expect(hit, `update ${updateId} in ${p.id}'s history`).toBeDefined();
  return hit!;
}

const amulet = () => ({ admin: sb.ctx.net.dso, id: 'Amulet' });

/** The one offer `p` has pending now. */
async function pendingOffer(p: TestParty): Promise<string> {
  const cids = await kit.instructions(p);
  expect(cids).toHaveLength(1);
  return cids[0]!;
}

beforeAll(async () => {
  sb = await startSandbox({ seed: 'parse-sandbox', timers: false });
  kit = tokenKit(sb);
  alice = addExternalParty(sb.ctx.net, 'alice');
  bob = addExternalParty(sb.ctx.net, 'bob');
  carol = addExternalParty(sb.ctx.net, 'carol');
});
afterAll(async () => sb?.close());

describe('parsing what the sandbox commits', () => {
  it('DevNet tap signed by the party: one mint movement, no unexplained change', async () => {
    const done = await kit.tap(alice, '1000');
    const p = await parsedUpdate(alice, done.updateId);
    expect(p.movements).toEqual([
      expect.objectContaining({
        kind: 'mint',
        choice: 'AmuletRules_DevNet_Tap',
        deltas: [
          { party: alice.id, instrument: amulet(), amount: '1000.0000000000', locked: '0.0000000000' },
        ],
      }),
    ]);
    expect(p.unexplained).toEqual([]);
    expect(p.holdings).toEqual([
      expect.objectContaining({ op: 'create', owner: alice.id, amount: '1000.0000000000' }),
    ]);
  });

  it("the sandbox's own tap (automation, no Daml exercise): the holding is there, unexplained", async () => {
    const c = sb.ctx.net.tap(carol.id, '5');
    const [p] = (await ingest(carol)).filter((t) => t.offset === c.createdOffset);
    expect(p!.movements).toEqual([]);
    expect(p!.unexplained).toEqual([
      { party: carol.id, instrument: amulet(), amount: '5.0000000000', nodeIds: [0] },
    ]);
    expect(p!.holdings).toEqual([expect.objectContaining({ op: 'create', contractId: c.contractId })]);
  });

  it('1-step transfer through a preapproval: the receiver sees +200 with memo and sender; the sender pays the fees', async () => {
    await kit.preapprove(bob);
    const done = await kit.transfer(alice, bob, '200', 'deposit-bob-1');
    expect(done.transferKind).toBe('direct');
    const forBob = await parsedUpdate(bob, done.updateId);
    expect(forBob.movements).toEqual([
      expect.objectContaining({
        kind: 'transfer',
        memo: 'deposit-bob-1',
        sender: alice.id,
        deltas: [{ party: bob.id, instrument: amulet(), amount: '200.0000000000', locked: '0.0000000000' }],
      }),
    ]);
    expect(forBob.unexplained).toEqual([]);
    expect(forBob.offers).toEqual([]);
    const forAlice = await parsedUpdate(alice, done.updateId);
    expect(forAlice.movements).toHaveLength(1);
    const [d] = forAlice.movements[0]!.deltas;
    expect(d!.party).toBe(alice.id);
    expect(compareDecimals(d!.amount, '-200')).toBeLessThanOrEqual(0); // 200 and any fee
    expect(forAlice.unresolvedArchives).toEqual([]); // its inputs were ingested before
  });

  it('2-step: the offer is seen by the receiver with its memo; the accept completes it and credits the receiver', async () => {
    const offered = await kit.transfer(alice, carol, '50', 'deposit-carol-1');
    expect(offered.transferKind).toBe('offer');
    const cid = await pendingOffer(carol);
    const created = await parsedUpdate(carol, offered.updateId);
    expect(created.offers).toEqual([
      expect.objectContaining({
        op: 'created',
        instructionCid: cid,
        sender: alice.id,
        receiver: carol.id,
        amount: '50.0000000000',
        instrument: amulet(),
        memo: 'deposit-carol-1',
        status: 'TransferPendingReceiverAcceptance',
      }),
    ]);
    expect(created.movements).toEqual([]); // carol witnesses the instruction, not the factory call
    const aliceSide = await parsedUpdate(alice, offered.updateId);
    expect(aliceSide.movements[0]!.deltas[0]!.locked).toBe('50.0000000000');

    const accepted = await kit.answer(carol, cid, 'accept');
    const p = await parsedUpdate(carol, accepted.updateId);
    expect(p.offers).toEqual([
      {
        op: 'consumed',
        nodeId: 0,
        instructionCid: cid,
        choice: 'TransferInstruction_Accept',
        outcome: 'completed',
      },
    ]);
    expect(p.movements).toEqual([
      expect.objectContaining({
        nodeId: 0,
        kind: 'transfer',
        instructionCid: cid,
        choice: 'TransferInstruction_Accept',
        deltas: [{ party: carol.id, instrument: amulet(), amount: '50.0000000000', locked: '0.0000000000' }],
      }),
    ]);
    expect(p.unexplained).toEqual([]);
    const senderSide = await parsedUpdate(alice, accepted.updateId);
    expect(senderSide.movements[0]!.deltas).toEqual([
      { party: alice.id, instrument: amulet(), amount: '-50.0000000000', locked: '-50.0000000000' },
    ]);
  });

  it('2-step rejected and withdrawn: outcomes by choice, the lock returns to the sender', async () => {
    await kit.transfer(alice, carol, '30', 'deposit-carol-2');
    const rejectedCid = await pendingOffer(carol);
    const rejected = await kit.answer(carol, rejectedCid, 'reject');
    const r = await parsedUpdate(carol, rejected.updateId);
    expect(r.offers).toEqual([
      expect.objectContaining({ op: 'consumed', instructionCid: rejectedCid, outcome: 'rejected' }),
    ]);
    expect(r.movements.flatMap((m) => m.deltas)).toEqual([]); // nothing of carol's moved
    const back = await parsedUpdate(alice, rejected.updateId);
    expect(back.movements[0]!.deltas).toEqual([
      { party: alice.id, instrument: amulet(), amount: '0.0000000000', locked: '-30.0000000000' },
    ]);

    await kit.transfer(alice, carol, '20', 'deposit-carol-3');
    const withdrawnCid = await pendingOffer(carol);
    const withdrawn = await kit.answer(alice, withdrawnCid, 'withdraw');
    const w = await parsedUpdate(carol, withdrawn.updateId);
    expect(w.offers).toEqual([
      expect.objectContaining({
        op: 'consumed',
        instructionCid: withdrawnCid,
        choice: 'TransferInstruction_Withdraw',
        outcome: 'withdrawn',
      }),
    ]);
  });

  it('a merge (transfer to oneself): one movement, the amount only changes by fees', async () => {
    await kit.tap(alice, '1');
    const done = await kit.transfer(alice, alice, '5');
    expect(done.transferKind).toBe('self');
    const p = await parsedUpdate(alice, done.updateId);
    expect(p.movements).toHaveLength(1);
    expect(p.movements[0]!.sender).toBe(alice.id);
    expect(p.unexplained).toEqual([]);
    expect(p.holdings.filter((h) => h.op === 'archive').length).toBeGreaterThanOrEqual(2);
  });

  it("an offer past its deadline, archived by the sandbox's expiry: consumed, outcome unknown (no expiry choice to tell)", async () => {
    const offered = await kit.transfer(alice, carol, '10', 'deposit-carol-4');
    const cid = await pendingOffer(carol);
    await ingest(carol);
    sb.ctx.net.clock.advance(2 * 3_600_000);
    step(sb.ctx.net);
    expect(await kit.instructions(carol)).toEqual([]);
    const fresh = await ingest(carol);
    const consumed = fresh.flatMap((t) => t.offers).filter((o) => o.op === 'consumed');
    expect(consumed).toEqual([
      expect.objectContaining({ instructionCid: cid, choice: 'Archive', outcome: 'unknown' }),
    ]);
    // The sender's lock came back, outside any marked exercise: unexplained for alice.
    const aliceFresh = await ingest(alice);
    expect(aliceFresh.some((t) => t.updateId === offered.updateId)).toBe(true);
    expect(aliceFresh.flatMap((t) => t.unexplained)).toEqual([]); // amount unchanged (lock released in place)
  });

  it("each party's parsed history adds up to what it holds", async () => {
    for (const p of [alice, bob, carol]) {
      await ingest(p);
      const b = books.get(p.id)!;
      const deltas = b.parsed.flatMap((t) => [
        ...t.movements.flatMap((m) => m.deltas.filter((d) => d.party === p.id).map((d) => d.amount)),
        ...t.unexplained.filter((u) => u.party === p.id).map((u) => u.amount),
      ]);
      const active = await kit.ledger.activeContracts({
        activeAtOffset: b.after,
        eventFormat: { filtersByParty: { [p.id]: { cumulative: [view(HOLDING_IFACE)] } }, verbose: false },
      });
      const acs = active.flatMap((item) => {
        const e = item.contractEntry;
        const ev = e && 'JsActiveContract' in e ? e.JsActiveContract.createdEvent : undefined;
        const v = ev?.interfaceViews[0]?.viewValue as { owner: string; amount: string } | undefined;
        return ev && v?.owner === p.id ? [{ cid: ev.contractId, amount: v.amount }] : [];
      });
      const balance = addDecimals(['0', ...acs.map((h) => h.amount)])!;
      expect(compareDecimals(addDecimals(['0', ...deltas])!, balance), p.id).toBe(0);
      expect([...b.holdings.keys()].sort(), p.id).toEqual(acs.map((h) => h.cid).sort());
      // What stays unresolved is others' holdings the party witnessed being spent (a sender's
      // inputs): the ingestion's events-by-contract-id lookup would find them not its own.
      for (const cid of b.parsed.flatMap((t) => t.unresolvedArchives)) {
        const created = sb.ctx.net.store.contractEvents(cid)?.created;
        const c = created?.update.events.find((e) => e.contract.contractId === cid)?.contract;
        expect(c && holdingView(c, 0n)?.owner, cid).not.toBe(p.id);
        expect(c, cid).toBeDefined();
      }
    }
  });
});

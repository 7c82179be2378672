/**
 * Reconciliation of a treasury party on the sandbox, against a small
 * stand-in ingestion (in memory: cursor with record times, holdings with the
 * offsets that created and archived them, one movement per party and
 * instrument per update) and the sandbox's Scan. Clean state: no difference,
 * Scan matched. A transfer made outside the service while ingestion stands
 * still: the ledger holding ingestion does not know and the ingested one gone
 * from the ledger are named, with the lag, and the ledger as of the cursor
 * shows they are only lag; once ingestion catches up, no difference. An
 * update ingestion skipped while its cursor moved past: named, not lag, and
 * Scan has a transfer ingestion lacks. Without Scan: `unavailable`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsTransaction } from '../../src/canton/ledger-api/schemas.js';
import { ScanClient } from '../../src/canton/scan/client.js';
import { archivedHoldingIds, type HoldingInfo, parseTransaction } from '../../src/exchange/parse.js';
import {
  type HoldingRow,
  type IngestedSide,
  type MovementRow,
  reconcile,
  scanNetChange,
  updateIdOfEvent,
} from '../../src/exchange/reconcile.js';
import { addDecimals } from '../../src/intent/decimal.js';
import { step } from '../../src/sandbox/automation.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';
import { HOLDING_IFACE, INSTRUCTION_IFACE, tokenKit } from '../support/sandbox-token.js';

let sb: RunningSandbox;
let kit: ReturnType<typeof tokenKit>;
let scan: ScanClient;
let treasury: TestParty;

// ---- stand-in ingestion ------------------------------------------------------------------------

interface Row extends HoldingInfo {
  createdOffset: number;
  archivedOffset?: number;
}
const state = {
  offset: 0,
  recordTimes: {} as Record<string, string>,
  holdings: new Map<string, Row>(),
  movements: [] as MovementRow[],
  updates: [] as { updateId: string; offset: number; recordTime: string }[],
};

/** Reads up to the ledger end; `skip` leaves one update out (as a faulty ingestion would). */
async function ingest(skip?: string): Promise<void> {
  const end = (await kit.ledger.ledgerEnd()).offset;
  if (end <= state.offset) return;
  const view = (interfaceId: string) => ({
    identifierFilter: { InterfaceFilter: { value: { interfaceId, includeInterfaceView: true } } },
  });
  const items = await kit.ledger.updates(
    {
      beginExclusive: state.offset,
      endInclusive: end,
      updateFormat: {
        includeTransactions: {
          eventFormat: {
            filtersByParty: {
              [treasury.id]: {
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
    },
    { limit: 1000 },
  );
  for (const item of items) {
    const u = item.update;
    if (u && 'OffsetCheckpoint' in u && u.OffsetCheckpoint)
      for (const s of u.OffsetCheckpoint.value.synchronizerTimes ?? [])
        state.recordTimes[s.synchronizerId] = s.recordTime;
    if (!u || !('Transaction' in u) || !u.Transaction) continue;
    const tx = u.Transaction.value as JsTransaction;
    state.recordTimes[tx.synchronizerId] = tx.recordTime;
    if (tx.updateId === skip) continue;
    state.updates.push({ updateId: tx.updateId, offset: tx.offset, recordTime: tx.recordTime });
    const known = new Map<string, HoldingInfo>();
    for (const cid of archivedHoldingIds(tx)) {
      const h = state.holdings.get(cid);
      if (h) known.set(cid, h);
    }
    const p = parseTransaction(tx, { parties: new Set([treasury.id]), known });
    for (const h of p.holdings)
      if (h.op === 'create') state.holdings.set(h.contractId, { ...h, createdOffset: tx.offset });
      else {
        const row = state.holdings.get(h.contractId);
        if (row) row.archivedOffset = tx.offset;
      }
    const net = new Map<string, MovementRow>();
    const add = (instrument: HoldingInfo['instrument'], amount: string) => {
      const k = `${instrument.admin}|${instrument.id}`;
      const prior = net.get(k);
      net.set(k, {
        updateId: tx.updateId,
        offset: tx.offset,
        recordTime: tx.recordTime,
        instrument,
        amount: prior ? addDecimals([prior.amount, amount])! : amount,
      });
    };
    for (const m of p.movements)
      for (const d of m.deltas) if (d.party === treasury.id) add(d.instrument, d.amount);
    for (const x of p.unexplained) if (x.party === treasury.id) add(x.instrument, x.amount);
    state.movements.push(...net.values());
  }
  state.offset = end;
}

const row = (h: Row): HoldingRow => ({
  contractId: h.contractId,
  instrument: h.instrument,
  amount: h.amount,
  locked: h.locked,
});
const ingested: IngestedSide = {
  cursor: async () =>
    state.offset === 0 ? undefined : { offset: state.offset, recordTimes: { ...state.recordTimes } },
  holdings: async (party) =>
    [...state.holdings.values()].filter((h) => h.owner === party && h.archivedOffset === undefined).map(row),
  holdingsAt: async (party, offset) =>
    [...state.holdings.values()]
      .filter(
        (h) =>
          h.owner === party &&
          h.createdOffset <= offset &&
          (h.archivedOffset === undefined || h.archivedOffset > offset),
      )
      .map(row),
  firstRecordTimeAfter: async (offset) => state.updates.find((u) => u.offset > offset)?.recordTime,
  movements: async (_party, after) => state.movements.filter((m) => m.offset > after),
};

async function control(path: string, body: unknown) {
  const r = await fetch(`${sb.urls.ledgerApi}/sandbox${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await r.json()) as Record<string, string>;
  expect(r.status, JSON.stringify(json)).toBe(200);
  return json;
}

const cc = () => ({ admin: sb.ctx.net.dso, id: 'Amulet' });
const deps = () => ({ ledger: kit.ledger, ingested, scan, cantonCoin: cc() });

beforeAll(async () => {
  sb = await startSandbox({ seed: 'reconcile', timers: false });
  kit = tokenKit(sb);
  scan = new ScanClient({ baseUrl: sb.urls.scan, retry: { attempts: 1 } });
  treasury = addExternalParty(sb.ctx.net, 'treasury');
  await kit.preapprove(treasury);
  step(sb.ctx.net);
  await kit.tap(treasury, '100');
  await control('/customer/deposit', { to: treasury.id, amount: '25', memo: 'acct-1' });
  await control('/customer/deposit', { to: treasury.id, amount: '5', memo: 'acct-2' });
});
afterAll(async () => sb?.close());

describe('reconciliation', () => {
  it('clean state: the ledger, the ingested holdings and the movements agree; Scan matched', async () => {
    await ingest();
    const r = await reconcile(deps(), treasury.id);
    expect(r.lag).toBe(0);
    expect(r.instruments).toEqual([
      expect.objectContaining({
        instrument: cc(),
        ledger: expect.objectContaining({ amount: '130.0000000000', holdings: 3 }),
        ingested: expect.objectContaining({ amount: '130.0000000000', holdings: 3 }),
        movements: expect.objectContaining({ opening: '0.0000000000', expected: '130.0000000000' }),
        differences: [],
      }),
    ]);
    expect(r.scan).toMatchObject({ status: 'matched', onlyInScan: [], onlyIngested: [], amountDiffers: [] });
    expect((r.scan as { matched: number }).matched).toBe(3);
    expect(r.clean).toBe(true);
    // From an offset: the opening balance there plus what moved after it.
    const mid = state.movements[1]!.offset;
    const from = await reconcile(deps(), treasury.id, mid);
    expect(from.instruments[0]!.movements).toMatchObject({
      opening: '125.0000000000',
      sum: '5.0000000000',
      count: 1,
    });
    expect(from.clean).toBe(true);
  });

  it('a transfer made elsewhere while ingestion stands still: named, and only lag; none once caught up', async () => {
    const before = [...state.holdings.values()].filter((h) => h.archivedOffset === undefined);
    const out = await control('/customer/transfer-out', { from: treasury.id, amount: '40' });
    const r = await reconcile(deps(), treasury.id);
    expect(r.lag).toBeGreaterThan(0);
    const d = r.instruments[0]!.differences;
    const gone = d.find((x) => x.kind === 'ingested_holding_not_on_ledger');
    const extra = d.find((x) => x.kind === 'ledger_holding_not_ingested');
    expect(gone).toBeDefined();
    expect(before.map((h) => h.contractId)).toEqual(
      expect.arrayContaining((gone as { contractIds: string[] }).contractIds),
    );
    expect(extra).toBeDefined(); // the change the transfer left
    expect(r.instruments[0]!.ledger.amount).toBe('90.0000000000');
    expect(r.instruments[0]!.ingested.amount).toBe('130.0000000000');
    expect(r.clean).toBe(false);
    expect(r.onlyLag).toBe(true);
    expect(r.note).toMatch(/only lag/);

    await ingest();
    const after = await reconcile(deps(), treasury.id);
    expect(after.lag).toBe(0);
    expect(after.instruments[0]!.differences).toEqual([]);
    expect(state.movements.at(-1)).toMatchObject({ updateId: out.updateId, amount: '-40.0000000000' });
    expect(after.scan).toMatchObject({ status: 'matched' });
    expect(after.clean).toBe(true);
  });

  it('an update ingestion skipped while its cursor moved on: named, not lag; Scan has what ingestion lacks', async () => {
    const dep = await control('/customer/deposit', { to: treasury.id, amount: '7', memo: 'acct-3' });
    await ingest(dep.updateId);
    const r = await reconcile(deps(), treasury.id);
    expect(r.lag).toBe(0);
    expect(r.onlyLag).toBeUndefined();
    expect(r.instruments[0]!.differences).toEqual([
      expect.objectContaining({ kind: 'ledger_holding_not_ingested', amount: '7.0000000000' }),
    ]);
    expect(r.scan).toMatchObject({
      status: 'differences',
      onlyInScan: [expect.objectContaining({ updateId: dep.updateId, amount: '7.0000000000' })],
    });
    expect(r.clean).toBe(false);
  });

  it('without Scan the cross-check is unavailable', async () => {
    const r = await reconcile({ ledger: kit.ledger, ingested }, treasury.id);
    expect(r.scan).toEqual({ status: 'unavailable', reason: 'no Scan is configured' });
  });

  it("reads a party's net change out of Scan items", () => {
    const p = 'p::1';
    const base = { event_id: '#u1:0', date: '2026-01-01T00:00:00Z', domain_id: 'd' };
    expect(updateIdOfEvent('#1220ab:3')).toBe('1220ab');
    expect(
      scanNetChange(
        { ...base, transaction_type: 'devnet_tap', tap: { amulet_owner: p, amulet_amount: '2.5' } },
        p,
      ),
    ).toBe(25_000_000_000n);
    const transfer = (sender: string) => ({
      ...base,
      transaction_type: 'transfer',
      transfer: {
        sender: {
          party: sender,
          sender_change_fee: '0.1',
          sender_change_amount: '3',
          sender_fee: '0.2',
          holding_fees: '0.3',
        },
        receivers: [
          { party: 'q::1', amount: '4', receiver_fee: '0' },
          { party: p, amount: '1', receiver_fee: '0.5' },
        ],
        balance_changes: [],
      },
    });
    expect(scanNetChange(transfer(p), p)).toBe(-46_000_000_000n); // −(4 + 0.3 + 0.2 + 0.1)
    expect(scanNetChange(transfer('q::1'), p)).toBe(5_000_000_000n); // 1 − 0.5
  });
});

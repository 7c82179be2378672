/**
 * Reconciliation of a treasury party on the sandbox, against the real ledger
 * ingestion (exchange/ingest.ts over a PGlite store, caught up by hand) and
 * the sandbox's Scan. Clean state: no difference, Scan matched. A transfer
 * made outside the service while ingestion is stopped: the ledger holding
 * ingestion does not know and the ingested one gone from the ledger are
 * named, with the lag, and the ledger as of the cursor shows they are only
 * lag; once ingestion catches up, no difference. A deposit the cursor was
 * moved past unread while ingestion goes on: named, not lag, and Scan has a transfer
 * ingestion lacks. Without Scan: `unavailable`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScanClient } from '../../src/canton/scan/client.js';
import { attributionOf } from '../../src/exchange/deposits.js';
import { createIngestion, type Ingestion } from '../../src/exchange/ingest.js';
import { reconcile, scanNetChange, updateIdOfEvent } from '../../src/exchange/reconcile.js';
import { step } from '../../src/sandbox/automation.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { migrate, openPglite, type Store, storeOn } from '../../src/store/index.js';
import { pgliteMigratedBlob } from '../support/pg.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';
import { tokenKit } from '../support/sandbox-token.js';

let sb: RunningSandbox;
let kit: ReturnType<typeof tokenKit>;
let scan: ScanClient;
let treasury: TestParty;
let store: Store;
let ingestion: Ingestion;

/** Ingests up to the ledger end, then stops (lets go of the lease). */
async function ingest(): Promise<void> {
  try {
    await ingestion.catchUp();
  } finally {
    await ingestion.stop();
  }
}

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
const deps = () => ({ ledger: kit.ledger, ingested: ingestion.access.ingested, scan, cantonCoin: cc() });

beforeAll(async () => {
  sb = await startSandbox({ seed: 'reconcile', timers: false });
  kit = tokenKit(sb);
  scan = new ScanClient({ baseUrl: sb.urls.scan, retry: { attempts: 1 } });
  treasury = addExternalParty(sb.ctx.net, 'treasury');
  const db = await openPglite('memory', { loadDataDir: await pgliteMigratedBlob() });
  await migrate(db);
  store = storeOn(db, 'test');
  // The treasury is in the book: ingestion follows it from the start of the ledger.
  await store.parties.put({
    partyId: treasury.id,
    hint: 'treasury',
    keyLabel: 'treasury',
    scheme: 'ed25519',
    fingerprint: treasury.fp,
    publicKeySpki: '',
    via: 'ledger-api',
    createdAt: new Date().toISOString(),
  });
  ingestion = createIngestion({
    store,
    ledger: kit.ledger,
    attribute: attributionOf([{ name: 'accounts', match: 'prefix', value: 'acct-' }]),
    owner: 'test',
  });
  await kit.preapprove(treasury);
  step(sb.ctx.net);
  await kit.tap(treasury, '100');
  await control('/customer/deposit', { to: treasury.id, amount: '25', memo: 'acct-1' });
  await control('/customer/deposit', { to: treasury.id, amount: '5', memo: 'acct-2' });
});
afterAll(async () => {
  await ingestion?.stop();
  await store?.close();
  await sb?.close();
});

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
    const mid = (await store.ledger.movements(treasury.id, 0))[1]!.offset;
    const from = await reconcile(deps(), treasury.id, mid);
    expect(from.instruments[0]!.movements).toMatchObject({
      opening: '125.0000000000',
      sum: '5.0000000000',
      count: 1,
    });
    expect(from.clean).toBe(true);
  });

  it('a transfer made elsewhere while ingestion stands still: named, and only lag; none once caught up', async () => {
    const before = await store.ledger.holdings(treasury.id);
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
    expect((await store.ledger.movements(treasury.id, 0)).at(-1)).toMatchObject({
      updateId: out.updateId,
      amount: '-40.0000000000',
    });
    expect(after.scan).toMatchObject({ status: 'matched' });
    expect(after.clean).toBe(true);
  });

  it('a deposit the cursor was moved past unread: named, not lag; Scan has what ingestion lacks', async () => {
    const dep = await control('/customer/deposit', { to: treasury.id, amount: '7', memo: 'acct-3' });
    // A wrong forward move (as a faulty control would make): ingestion never reads the deposit.
    await store.ledger.moveCursor(store.db, (await kit.ledger.ledgerEnd()).offset);
    // Ingestion goes on past it: the next deposit is read (and its record time closes Scan's window).
    const next = await control('/customer/deposit', { to: treasury.id, amount: '1', memo: 'acct-4' });
    await ingest();
    expect((await store.ledger.lastUpdate())?.updateId).toBe(next.updateId);
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
    const r = await reconcile({ ledger: kit.ledger, ingested: ingestion.access.ingested }, treasury.id);
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

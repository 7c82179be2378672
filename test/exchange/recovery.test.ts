/**
 * Recovery of ledger ingestion after a participant restore and after a major
 * upgrade, on the sandbox. A small stand-in ingestion (parse, skip update ids
 * it has, one deposit per incoming transfer, imports at 0001-01-01 only
 * recorded as holdings) reads from a cursor the controls move. Restore: the
 * offsets shift down (rejections' offsets are not replayed), so resuming at
 * the stored offset would miss a deposit; a rewind to the last ingested record
 * time ingests every later deposit exactly once. Upgrade: resume-after-upgrade
 * reads the new ledger from its start, makes nothing of the imports and
 * ingests the new deposit. Both controls refuse while another instance holds
 * the ingestion lease, fence it out when forced, and are audited.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsTransaction } from '../../src/canton/ledger-api/schemas.js';
import {
  INGEST_LEASE,
  type IngestControlDeps,
  IngestControlError,
  type IngestCursorAccess,
  IngestLeaseHeldError,
  resumeAfterUpgrade,
  rewindIngestion,
} from '../../src/exchange/ingest-control.js';
import { archivedHoldingIds, type HoldingInfo, parseTransaction } from '../../src/exchange/parse.js';
import { isImportTransaction } from '../../src/exchange/resume-point.js';
import { parseInstantMicros } from '../../src/intent/time.js';
import { step } from '../../src/sandbox/automation.js';
import { isoMicros } from '../../src/sandbox/ledger/clock.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import {
  holdLease,
  listAudit,
  migrate,
  openPglite,
  type Queryable,
  type Store,
  storeOn,
} from '../../src/store/index.js';
import { pgliteTemplateBlob } from '../support/pg.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';
import { HOLDING_IFACE, INSTRUCTION_IFACE, tokenKit } from '../support/sandbox-token.js';

let sb: RunningSandbox;
let kit: ReturnType<typeof tokenKit>;
let store: Store;
let treasury: TestParty;
let customer: TestParty;

// ---- a stand-in ingestion over a cursor table of its own ------------------------------------

const cursor: IngestCursorAccess = {
  async read(q) {
    const r = await q.query<{ off: string; times: Record<string, string> }>(
      'SELECT off::text AS off, times FROM test_cursor WHERE id = 1',
    );
    const row = r.rows[0];
    return row ? { offset: Number(row.off), recordTimes: row.times } : undefined;
  },
  async moveTo(q, offset) {
    await q.query(
      `INSERT INTO test_cursor (id, off, times) VALUES (1, $1, '{}')
       ON CONFLICT (id) DO UPDATE SET off = EXCLUDED.off`,
      [offset],
    );
  },
  async lastUpdate() {
    const last = [...ingested.values()].at(-1);
    return last && { updateId: last.updateId, offset: last.offset, recordTime: last.recordTime };
  },
};

const ingested = new Map<string, { updateId: string; offset: number; recordTime: string }>();
const holdings = new Map<string, HoldingInfo>();
const deposits: { updateId: string; amount: string }[] = [];
let replaysSkipped = 0;

/** Reads everything after the cursor once, as the ingestion does, and moves the cursor. */
async function ingestOnce(q: Queryable = store.db): Promise<void> {
  const at = (await cursor.read(q))?.offset ?? 0;
  const end = (await kit.ledger.ledgerEnd()).offset;
  if (end <= at) return;
  const view = (interfaceId: string) => ({
    identifierFilter: { InterfaceFilter: { value: { interfaceId, includeInterfaceView: true } } },
  });
  const items = await kit.ledger.updates(
    {
      beginExclusive: at,
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
    if (!u || !('Transaction' in u) || !u.Transaction) continue;
    const tx = u.Transaction.value as JsTransaction;
    if (ingested.has(tx.updateId)) {
      replaysSkipped++;
      continue;
    }
    ingested.set(tx.updateId, { updateId: tx.updateId, offset: tx.offset, recordTime: tx.recordTime });
    const known = new Map<string, HoldingInfo>();
    for (const cid of archivedHoldingIds(tx)) {
      const h = holdings.get(cid);
      if (h) known.set(cid, h);
    }
    const parsed = parseTransaction(tx, { parties: new Set([treasury.id]), known });
    if (isImportTransaction(tx)) {
      // An import: the holding is recorded (kept when known), nothing is credited.
      for (const h of parsed.holdings)
        if (h.op === 'create' && !holdings.has(h.contractId)) holdings.set(h.contractId, h);
      continue;
    }
    for (const h of parsed.holdings)
      if (h.op === 'create') holdings.set(h.contractId, h);
      else holdings.delete(h.contractId);
    for (const m of parsed.movements)
      for (const d of m.deltas)
        if (m.kind === 'transfer' && d.party === treasury.id && !d.amount.startsWith('-'))
          deposits.push({ updateId: tx.updateId, amount: d.amount });
  }
  await cursor.moveTo(q, end);
}

const deps = (): IngestControlDeps => ({
  db: store.db,
  leases: store.leases,
  cursor,
  ledger: kit.ledger,
  parties: async () => [treasury.id],
});

async function control(path: string, body: unknown = {}) {
  const r = await fetch(`${sb.urls.ledgerApi}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(r.status).toBe(200);
  return (await r.json()) as Record<string, number>;
}

/** A rejected command on the participant: an offset a restore does not replay. */
function rejection(): void {
  const net = sb.ctx.net;
  net.store.complete({
    commandId: 'refused',
    submissionId: 'refused',
    userId: 'u',
    actAs: [treasury.id],
    updateId: undefined,
    status: { code: 9, message: 'refused' },
    recordTime: net.clock.now(),
    synchronizerId: net.synchronizerId,
  });
}

const deposit = (amount: string) => kit.transfer(customer, treasury, amount, 'acct-1');
const sortedIds = (xs: { updateId: string }[]) => xs.map((x) => x.updateId).sort();

beforeAll(async () => {
  sb = await startSandbox({ seed: 'ingest-recovery', timers: false });
  kit = tokenKit(sb);
  // From the template cluster (about 1 s) rather than a fresh initdb.
  const db = await openPglite('memory', { loadDataDir: await pgliteTemplateBlob() });
  await migrate(db);
  store = storeOn(db, 'test');
  await store.db.query(
    'CREATE TABLE test_cursor (id int PRIMARY KEY, off bigint NOT NULL, times jsonb NOT NULL)',
  );
  treasury = addExternalParty(sb.ctx.net, 'treasury');
  customer = addExternalParty(sb.ctx.net, 'customer');
  await kit.preapprove(treasury);
  step(sb.ctx.net);
  await kit.tap(customer, '1000');
});
afterAll(async () => {
  await store?.close();
  await sb?.close();
});

describe('after a participant restore', () => {
  it('a rewind to the last ingested record time ingests every later deposit exactly once', async () => {
    const d1 = await deposit('10');
    const backup = sb.ctx.net.store.ledgerEnd();
    rejection();
    rejection();
    const d2 = await deposit('20');
    await ingestOnce();
    expect(sortedIds(deposits)).toEqual(sortedIds([d1, d2]));
    const stored = (await cursor.read(store.db))!.offset;
    const tRecovery = ingested.get(d2.updateId)!.recordTime;
    // Ingestion stops; the participant goes on, then is restored from the backup.
    rejection();
    const d3 = await deposit('30');
    const restored = await control('/sandbox/participant/restore', { keepUntilOffset: backup });
    expect(restored.droppedRejections).toBe(3);
    const d4 = await deposit('40');
    // The stored offset is stale: d3 now sits at or below it, and resuming there would miss it.
    const d3Now = sb.ctx.net.store.updateById(d3.updateId)!.offset;
    expect(d3Now).toBeLessThanOrEqual(stored);

    const r = await rewindIngestion(deps(), { recordTime: tRecovery }, { actor: 'ops@test' });
    // The largest offset whose update the treasury sees has a record time before tRecovery − 1 µs.
    const bound = parseInstantMicros(tRecovery)! - 1n;
    const visible = sb.ctx.net.store
      .updates()
      .filter((u) => u.events.some((e) => e.contract.stakeholders.includes(treasury.id)))
      .filter((u) => u.recordTime < bound);
    expect(r.to).toBe(visible.at(-1)!.offset);
    expect(r.from).toBe(stored);
    expect(r.resume?.recordTime).toBe(isoMicros(visible.at(-1)!.recordTime));

    const skippedBefore = replaysSkipped;
    await ingestOnce();
    expect(sortedIds(deposits)).toEqual(sortedIds([d1, d2, d3, d4]));
    expect(replaysSkipped - skippedBefore).toBeGreaterThanOrEqual(1); // d2 came again, skipped by id

    const audit = await listAudit(store.db, { subject: 'ingest' });
    expect(audit.at(-1)).toMatchObject({
      actor: 'ops@test',
      action: 'ingest.rewind',
      details: expect.objectContaining({ recordTime: tRecovery, fromOffset: stored, toOffset: r.to }),
    });
  });

  it('refuses while another instance holds the ingestion lease; forced, fences it out', async () => {
    const other = (await store.leases.acquire(INGEST_LEASE, 'instance-b', 60_000))!;
    const before = (await cursor.read(store.db))!.offset;
    await expect(rewindIngestion(deps(), { offset: 1 }, { actor: 'ops@test' })).rejects.toThrow(
      IngestLeaseHeldError,
    );
    expect((await cursor.read(store.db))!.offset).toBe(before);
    const r = await rewindIngestion(deps(), { offset: 1 }, { actor: 'ops@test', force: true });
    expect(r).toMatchObject({ from: before, to: 1, fencedOut: 'instance-b' });
    // The fenced-out holder's next write fails: it stops, having written nothing.
    await expect(store.db.transaction((tx) => holdLease(tx, other))).rejects.toThrow(/no longer held/);
    // Read again from offset 1: everything is a replay.
    const count = deposits.length;
    await ingestOnce();
    expect(deposits).toHaveLength(count);
  });

  it('refuses resume-after-upgrade on a ledger that did not start with imports', async () => {
    await expect(resumeAfterUpgrade(deps(), { actor: 'ops@test' })).rejects.toThrow(IngestControlError);
  });
});

describe('after a major upgrade', () => {
  it('resume-after-upgrade makes nothing of the imports and ingests the new deposits', async () => {
    await ingestOnce();
    const count = deposits.length;
    const known = new Set(holdings.keys());
    expect(known.size).toBeGreaterThan(0);
    const up = await control('/sandbox/participant/major-upgrade');
    expect(up.migrationId).toBe(1);
    const r = await resumeAfterUpgrade(deps(), { actor: 'ops@test' });
    expect(r.to).toBe(0);
    await ingestOnce();
    // The imports: no deposit, the holdings as they were.
    expect(deposits).toHaveLength(count);
    expect(new Set(holdings.keys())).toEqual(known);
    const d5 = await deposit('50');
    await ingestOnce();
    expect(deposits.slice(count)).toEqual([{ updateId: d5.updateId, amount: '50.0000000000' }]);
    const audit = await listAudit(store.db, { subject: 'ingest' });
    expect(audit.at(-1)).toMatchObject({ action: 'ingest.resume_after_upgrade', details: { toOffset: 0 } });
  });
});

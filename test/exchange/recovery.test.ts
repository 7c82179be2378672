/**
 * Recovery of the real ledger ingestion (exchange/ingest.ts) after a
 * participant restore and after a major upgrade, on the sandbox: a treasury
 * party in the book receives one-step deposits through its preapproval, and
 * ingestion catches up after each change. Restore: the offsets shift down
 * (rejections' offsets are not replayed), so resuming at the stored offset
 * would miss a deposit; a rewind to the last ingested record time ingests
 * every later deposit exactly once. Upgrade: resume-after-upgrade reads the
 * new ledger from its start, makes no deposit and no movement of the imports
 * and ingests the new deposit once. Both controls refuse while another
 * instance holds the ingestion lease, fence it out when forced, and are
 * audited.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attributionOf } from '../../src/exchange/deposits.js';
import { createIngestion, type Ingestion } from '../../src/exchange/ingest.js';
import {
  INGEST_LEASE,
  type IngestControlDeps,
  IngestControlError,
  IngestLeaseHeldError,
  resumeAfterUpgrade,
  rewindIngestion,
} from '../../src/exchange/ingest-control.js';
import { parseInstantMicros } from '../../src/intent/time.js';
import { step } from '../../src/sandbox/automation.js';
import { isoMicros } from '../../src/sandbox/ledger/clock.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { holdLease, listAudit, migrate, openPglite, type Store, storeOn } from '../../src/store/index.js';
import { pgliteMigratedBlob } from '../support/pg.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';
import { tokenKit } from '../support/sandbox-token.js';

let sb: RunningSandbox;
let kit: ReturnType<typeof tokenKit>;
let store: Store;
let ingestion: Ingestion;
let treasury: TestParty;
let customer: TestParty;

/** Ingests up to the ledger end, then lets go of the lease (as a stopped service would). */
async function ingestOnce(): Promise<number> {
  try {
    return await ingestion.catchUp();
  } finally {
    await ingestion.stop();
  }
}

const deposits = async () =>
  (
    await store.db.query<{ updateId: string; amount: string }>(
      `SELECT update_id AS "updateId", amount::text AS amount FROM deposits ORDER BY "offset", update_id`,
    )
  ).rows;
const count = async (table: string) =>
  (await store.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;
const activeHoldings = async () =>
  new Set((await store.ledger.holdings(treasury.id)).map((h) => h.contractId));

const deps = (): IngestControlDeps => ({
  db: store.db,
  leases: store.leases,
  cursor: ingestion.access.cursor,
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
  const db = await openPglite('memory', { loadDataDir: await pgliteMigratedBlob() });
  await migrate(db);
  store = storeOn(db, 'test');
  treasury = addExternalParty(sb.ctx.net, 'treasury');
  customer = addExternalParty(sb.ctx.net, 'customer');
  // The treasury is in the book (ingestion follows the book's parties); the customer is outside it.
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
    owner: 'instance-a',
  });
  await kit.preapprove(treasury);
  step(sb.ctx.net);
  await kit.tap(customer, '1000');
});
afterAll(async () => {
  await ingestion?.stop();
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
    expect(sortedIds(await deposits())).toEqual(sortedIds([d1, d2]));
    const stored = (await store.ledger.cursor())!.offset;
    // tRecovery: the record time of the last transaction ingested, as the operator reads it.
    const last = (await store.ledger.lastUpdate())!;
    expect(last.updateId).toBe(d2.updateId);
    const tRecovery = last.recordTime;
    const movementsOfD2 = await store.db.query('SELECT id FROM ledger_movements WHERE update_id = $1', [
      d2.updateId,
    ]);
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
    expect((await store.ledger.cursor())!.offset).toBe(r.to);

    await ingestOnce();
    const all = await deposits();
    expect(sortedIds(all)).toEqual(sortedIds([d1, d2, d3, d4]));
    expect(all.find((d) => d.updateId === d4.updateId)?.amount).toBe('40.0000000000');
    // d2 was read again and recognised by its update id: no second movement of it.
    const again = await store.db.query('SELECT id FROM ledger_movements WHERE update_id = $1', [d2.updateId]);
    expect(again.rows).toEqual(movementsOfD2.rows);
    expect((await store.ledger.cursor())!.offset).toBe(sb.ctx.net.store.ledgerEnd());

    const audit = await listAudit(store.db, { subject: 'ingest' });
    expect(audit.at(-1)).toMatchObject({
      actor: 'ops@test',
      action: 'ingest.rewind',
      details: expect.objectContaining({ recordTime: tRecovery, fromOffset: stored, toOffset: r.to }),
    });
  });

  it('refuses while another instance holds the ingestion lease; forced, fences it out', async () => {
    const other = (await store.leases.acquire(INGEST_LEASE, 'instance-b', 60_000))!;
    const before = (await store.ledger.cursor())!.offset;
    await expect(rewindIngestion(deps(), { offset: 1 }, { actor: 'ops@test' })).rejects.toThrow(
      IngestLeaseHeldError,
    );
    // The ingestion of this instance cannot take the lease either.
    await expect(ingestion.catchUp()).rejects.toThrow(/another instance holds the ingestion lease/);
    await ingestion.stop();
    expect((await store.ledger.cursor())!.offset).toBe(before);
    const r = await rewindIngestion(deps(), { offset: 1 }, { actor: 'ops@test', force: true });
    expect(r).toMatchObject({ from: before, to: 1, fencedOut: 'instance-b' });
    // The fenced-out holder's next write fails: it stops, having written nothing.
    await expect(store.db.transaction((tx) => holdLease(tx, other))).rejects.toThrow(/no longer held/);
    // Read again from offset 1: everything is a replay.
    const [n, m] = [await count('deposits'), await count('ledger_movements')];
    await ingestOnce();
    expect(await count('deposits')).toBe(n);
    expect(await count('ledger_movements')).toBe(m);
    expect((await store.ledger.cursor())!.offset).toBe(sb.ctx.net.store.ledgerEnd());
  });

  it('refuses resume-after-upgrade on a ledger that did not start with imports', async () => {
    await expect(resumeAfterUpgrade(deps(), { actor: 'ops@test' })).rejects.toThrow(IngestControlError);
  });
});

describe('after a major upgrade', () => {
  it('resume-after-upgrade makes nothing of the imports and ingests the new deposits', async () => {
    await ingestOnce();
    const n = await count('deposits');
    const movements = await count('ledger_movements');
    const known = await activeHoldings();
    expect(known.size).toBeGreaterThan(0);
    const up = await control('/sandbox/participant/major-upgrade');
    expect(up.migrationId).toBe(1);
    const r = await resumeAfterUpgrade(deps(), { actor: 'ops@test' });
    expect(r.to).toBe(0);
    expect(await ingestOnce()).toBeGreaterThan(0);
    // The imports: no deposit, no movement, the holdings as they were.
    expect(await count('deposits')).toBe(n);
    expect(await count('ledger_movements')).toBe(movements);
    expect(await activeHoldings()).toEqual(known);
    const d5 = await deposit('50');
    await ingestOnce();
    expect((await deposits()).filter((d) => d.updateId === d5.updateId)).toEqual([
      { updateId: d5.updateId, amount: '50.0000000000' },
    ]);
    expect(await count('deposits')).toBe(n + 1);
    const audit = await listAudit(store.db, { subject: 'ingest' });
    expect(audit.at(-1)).toMatchObject({ action: 'ingest.resume_after_upgrade', details: { toOffset: 0 } });
  });
});

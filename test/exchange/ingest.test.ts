/**
 * Ledger ingestion in a service on a real sandbox: customers outside the
 * book deposit into a treasury party one step (through its preapproval) and
 * two step (offers accepted, rejected, left to expire), with and without
 * attributable memos; a holding moved without the service is an alert; a
 * withdrawal's offer accepted by its receiver is settled by ingestion.
 * Afterwards ingestion starts again from its cursor and repeats nothing, and
 * two ingestions over one database take turns through the lease.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attributionOf } from '../../src/exchange/deposits.js';
import { createIngestion } from '../../src/exchange/ingest.js';
import { acceptSetupProposal } from '../../src/flows/setup-accept.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

let env: ServiceEnv;
let treasury: PartyRecord;
let auth: { authorization: string };

const RULES = [
  { name: 'accounts', match: 'prefix' as const, value: 'acct-' },
  { name: 'numbers', match: 'regex' as const, value: '^customer ([0-9]{3,8})$' },
];

beforeAll(async () => {
  env = await serviceEnv({
    seed: 'ingest',
    service: {
      config: testConfig({ exchange: { deposits: { attribution: RULES } } }),
      ingestionOptions: { pollMs: 30 },
    },
  });
  treasury = await env.addParty('treasury', { fund: '500' });
  await env.flow.validator.createSetupProposal({ user_party_id: treasury.partyId });
  await acceptSetupProposal(env.service.deps.flows, treasury.partyId);
  auth = await env.auth(['operator', 'auditor', 'withdrawer'], [treasury.partyId]);
}, 60_000);
afterAll(async () => env?.close());

async function control(path: string, body: unknown): Promise<Record<string, unknown>> {
  const r = await fetch(`${env.flow.sb.urls.origin}/sandbox/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const j = (await r.json()) as Record<string, unknown>;
  if (!r.ok) throw new Error(`${path}: ${r.status} ${JSON.stringify(j)}`);
  return j;
}

async function api(method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) {
  const r = await env.service.app.inject({
    method: method as 'GET',
    url,
    headers: { ...auth, ...headers },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
  return { status: r.statusCode, body: r.json() as Record<string, unknown> };
}

async function until<T>(f: () => Promise<T | undefined>, what: string, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const depositOf = (updateId: string) =>
  until(async () => {
    const r = await env.store.db.query<{ id: string }>('SELECT id FROM deposits WHERE update_id = $1', [
      updateId,
    ]);
    return r.rows[0]
      ? ((await api('GET', `/v1/deposits/${r.rows[0].id}`)).body as Record<string, unknown>)
      : undefined;
  }, `the deposit of ${updateId}`);

const eventsOf = async (subject: string) =>
  (await env.store.events.list({ subject, limit: 1000 })).map((e) => e.type);

describe('deposits', () => {
  it('a one-step deposit with an attributable memo is credited to its account, with its events', async () => {
    const r = await control('customer/deposit', { to: treasury.partyId, amount: '12.5', memo: 'acct-1001' });
    expect(r.mode).toBe('one-step');
    const d = await depositOf(r.updateId as string);
    expect(d).toMatchObject({
      party: treasury.partyId,
      sender: r.sender,
      amount: '12.5000000000',
      memo: 'acct-1001',
      account: '1001',
      attribution: 'rule:accounts',
      kind: 'one_step',
      state: 'credited',
      settledUpdateId: r.updateId,
    });
    expect(await eventsOf(`deposit:${d.id}`)).toEqual(['deposit.credited']);
  });

  it('a regex rule names the account from its capture group; no memo is unattributed until assigned', async () => {
    const a = await depositOf(
      (await control('customer/deposit', { to: treasury.partyId, amount: '3', memo: 'customer 4242' }))
        .updateId as string,
    );
    expect(a).toMatchObject({ account: '4242', attribution: 'rule:numbers' });
    const b = await depositOf(
      (await control('customer/deposit', { to: treasury.partyId, amount: '4' })).updateId as string,
    );
    expect(b.account).toBeUndefined();
    expect(await eventsOf(`deposit:${b.id}`)).toEqual(['deposit.credited', 'deposit.unattributed']);
    const list = await api('GET', '/v1/deposits?unattributed=true');
    expect((list.body.items as { id: string }[]).map((x) => x.id)).toContain(b.id);
    const assigned = await api('POST', `/v1/deposits/${b.id}/assign`, {
      account: '77',
      reason: 'support ticket 9',
    });
    expect(assigned.status).toBe(200);
    expect(assigned.body).toMatchObject({ account: '77', attribution: 'operator' });
    const again = await api('POST', `/v1/deposits/${b.id}/assign`, { account: '78' });
    expect(again.status).toBe(409);
    expect(JSON.stringify(again.body)).toMatch(/already credited to account 77/);
    expect(await eventsOf(`deposit:${b.id}`)).toEqual([
      'deposit.credited',
      'deposit.unattributed',
      'deposit.assigned',
    ]);
  });

  it('a two-step deposit is pending, then credited when the offer is accepted; a rejected one is returned', async () => {
    const offered = await control('customer/deposit', {
      to: treasury.partyId,
      amount: '20',
      memo: 'acct-2002',
      mode: 'two-step',
    });
    const d = await depositOf(offered.updateId as string);
    expect(d).toMatchObject({
      state: 'pending',
      kind: 'two_step',
      instructionCid: offered.instructionCid,
      account: '2002',
    });
    expect(await eventsOf(`deposit:${d.id}`)).toEqual(['offer.received', 'deposit.pending']);
    const cid = encodeURIComponent(offered.instructionCid as string);
    const party = encodeURIComponent(treasury.partyId);
    const ok = await api('POST', `/v1/parties/${party}/offers/${cid}/accept`, {});
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    await until(
      async () => ((await depositOf(offered.updateId as string)).state === 'credited' ? true : undefined),
      'credited',
    );
    const credited = await depositOf(offered.updateId as string);
    expect(credited).toMatchObject({ state: 'credited', outcome: 'completed' });
    expect(await eventsOf(`deposit:${d.id}`)).toEqual([
      'offer.received',
      'deposit.pending',
      'deposit.credited',
    ]);

    const second = await control('customer/deposit', { to: treasury.partyId, amount: '7', mode: 'two-step' });
    const p = await depositOf(second.updateId as string);
    const rejected = await api(
      'POST',
      `/v1/parties/${party}/offers/${encodeURIComponent(second.instructionCid as string)}/reject`,
      {},
    );
    expect(rejected.status, JSON.stringify(rejected.body)).toBe(200);
    await until(
      async () => ((await depositOf(second.updateId as string)).state === 'returned' ? true : undefined),
      'returned',
    );
    expect(await depositOf(second.updateId as string)).toMatchObject({
      state: 'returned',
      outcome: 'rejected',
    });
    expect(await eventsOf(`deposit:${p.id}`)).toEqual([
      'offer.received',
      'deposit.pending',
      'deposit.unattributed',
      'deposit.returned',
    ]);
  });

  it('funds moved without the service raise transfer.unexpected', async () => {
    const before = await env.store.events.head();
    const r = await control('customer/transfer-out', { from: treasury.partyId, amount: '5' });
    const e = await until(async () => {
      const evs = await env.store.events.list({ after: before, types: ['transfer.unexpected'] });
      return evs.find((x) => x.data.updateId === r.updateId);
    }, 'the alert');
    expect(e.subject).toBe(`party:${treasury.partyId}`);
    expect(e.data).toMatchObject({ party: treasury.partyId, kind: 'transfer' });
    expect(Number(e.data.amount)).toBeLessThan(0);
  });

  it('a withdrawal made by the service is no alert, and its offer accepted by the receiver is delivered', async () => {
    const before = await env.store.events.head();
    const shop = (await control('customer/allocate', { name: 'walk-in' })).party as string;
    const w = await api(
      'POST',
      '/v1/withdrawals',
      {
        party: treasury.partyId,
        receiver: shop,
        amount: '2',
        memo: 'w-1',
      },
      { 'idempotency-key': 'ingest-w-1' },
    );
    expect(w.status, JSON.stringify(w.body)).toBe(201);
    const id = w.body.id as string;
    await until(
      async () => ((await env.store.withdrawals.get(id))?.delivery === 'offered' ? true : undefined),
      'offered',
    );
    await control('customer/respond', { action: 'accept', customer: 'walk-in' });
    await until(
      async () => ((await env.store.withdrawals.get(id))?.delivery === 'delivered' ? true : undefined),
      'delivered',
    );
    const alerts = await env.store.events.list({ after: before, types: ['transfer.unexpected'] });
    expect(alerts).toEqual([]);
    const moved = await env.store.db.query<{ ours: boolean; withdrawal_id: string | null }>(
      `SELECT ours, withdrawal_id FROM ledger_movements WHERE party = $1 AND withdrawal_id = $2`,
      [treasury.partyId, id],
    );
    expect(moved.rows.length).toBeGreaterThan(0);
    expect(moved.rows.every((m) => m.ours)).toBe(true);
  });

  it('the ingested balance is the ledger balance, and reconciliation finds nothing', async () => {
    const ingestion = env.service.ingestion!;
    await ingestion.catchUp().catch(() => 0); // the running loop holds the lease: it catches up itself
    const r = await until(async () => {
      const x = await api('GET', `/v1/parties/${encodeURIComponent(treasury.partyId)}/reconciliation`);
      return x.body.lag === 0 ? x : undefined;
    }, 'ingestion at the ledger end');
    expect(r.status).toBe(200);
    expect(r.body.clean, JSON.stringify(r.body)).toBe(true);
  });
});

describe('restart and takeover', () => {
  it('a second ingestion over the same database repeats nothing, and takes over when the first stops', async () => {
    const count = async () =>
      (await env.store.db.query<{ n: number }>('SELECT count(*)::int AS n FROM deposits')).rows[0]!.n;
    const events = await env.store.events.head();
    const deposits = await count();
    const other = createIngestion({
      store: env.store,
      ledger: env.flow.ledger,
      attribute: attributionOf(RULES),
      pollMs: 30,
      leaseMs: 600,
      owner: 'second',
    });
    other.start();
    // The service's ingestion holds the lease: the second waits. Stop the first: the second takes over.
    await env.service.ingestion!.stop();
    await until(
      async () => ((await env.store.leases.holder('ingest'))?.owner === 'second' ? true : undefined),
      'takeover',
    );
    // Rewind the cursor: everything read again is recognised and skipped.
    await env.store.ledger.moveCursor(env.store.db, 0);
    const r = await control('customer/deposit', { to: treasury.partyId, amount: '1', memo: 'acct-9' });
    const d = await depositOf(r.updateId as string);
    expect(d.state).toBe('credited');
    expect(await count()).toBe(deposits + 1);
    const after = await env.store.events.list({
      after: events,
      limit: 1000,
      types: ['deposit.*', 'offer.*'],
    });
    expect(after.map((e) => e.type)).toEqual(['deposit.credited']);
    await other.stop();
  });
});

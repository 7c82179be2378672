/**
 * /v1/withdrawals over HTTP (fastify inject) with the service's worker
 * running against the sandbox: created withdrawals reach committed with one
 * transaction; Idempotency-Key rules (replay, conflict, concurrent identical
 * requests); cancel rules; cursor pagination and filters (a cursor not
 * issued here is a 400); the withdrawer's party scope (refusals audited) and
 * the auditor's read-only access; a tampered preparation
 * ends rejected with the refusal reason.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
let alice: PartyRecord;
let carol: PartyRecord;
let bob: PartyRecord;
type Auth = { authorization: string };
let operator: Auth;

beforeAll(async () => {
  env = await serviceEnv({ seed: 'withdrawal-routes', worker: true });
  alice = await env.addParty('alice', { fund: '5000' });
  carol = await env.addParty('carol', { fund: '5000' });
  bob = await env.addParty('bob');
  operator = await env.auth(['operator']);
}, 60_000);
afterAll(async () => env?.close());

const updatesOf = (commandId: string) =>
  env.flow.net.store.updates().filter((u) => u.commandId === commandId);

function post(body: unknown, headers: Record<string, string>) {
  return env.service.app.inject({ method: 'POST', url: '/v1/withdrawals', headers, payload: body as object });
}

function get(url: string, headers: Auth) {
  return env.service.app.inject({ method: 'GET', url, headers });
}

async function settled(id: string): Promise<Record<string, unknown>> {
  const end = Date.now() + 20_000;
  for (;;) {
    const r = await get(`/v1/withdrawals/${id}`, operator);
    const w = r.json();
    if (['committed', 'rejected', 'failed', 'cancelled', 'expired'].includes(w.state)) return w;
    if (Date.now() > end) throw new Error(`withdrawal ${id} still ${w.state}`);
    await new Promise((res) => setTimeout(res, 25));
  }
}

const body = (amount = '10', party = alice.partyId) => ({
  party,
  receiver: bob.partyId,
  amount,
  memo: 'payout',
});

describe('POST /v1/withdrawals', () => {
  it('creates a withdrawal (201) that the worker carries to committed, exactly once', async () => {
    const r = await post(body('10.50'), { ...operator, 'idempotency-key': randomUUID() });
    expect(r.statusCode).toBe(201);
    const w = r.json();
    expect(w).toMatchObject({
      state: 'received',
      party: alice.partyId,
      receiver: bob.partyId,
      amount: '10.5',
      memo: 'payout',
      attempts: 0,
      commandId: `cs-wd-${w.id}`,
    });
    const done = await settled(w.id);
    expect(done.state).toBe('committed');
    expect(updatesOf(w.commandId)).toHaveLength(1);
    expect(done.updateId).toBe(updatesOf(w.commandId)[0]!.updateId);
  });

  it('same key and body: the same withdrawal, 200 and Idempotent-Replayed; another body: 409', async () => {
    const key = randomUUID();
    const a = await post(body('7'), { ...operator, 'idempotency-key': key });
    expect(a.statusCode).toBe(201);
    const b = await post(body('7.000'), { ...operator, 'idempotency-key': key });
    expect(b.statusCode).toBe(200);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(b.json().id).toBe(a.json().id);
    const c = await post(body('8'), { ...operator, 'idempotency-key': key });
    expect(c.statusCode).toBe(409);
    expect(c.json().code).toBe('idempotency_conflict');
    await settled(a.json().id);
    expect(updatesOf(a.json().commandId)).toHaveLength(1);
  });

  it('concurrent identical requests: one withdrawal', async () => {
    const key = randomUUID();
    const rs = await Promise.all(
      Array.from({ length: 6 }, () => post(body('3'), { ...operator, 'idempotency-key': key })),
    );
    expect(rs.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 200, 200, 201]);
    expect(new Set(rs.map((r) => r.json().id)).size).toBe(1);
    const done = await settled(rs[0]!.json().id);
    expect(done.state).toBe('committed');
    expect(updatesOf(rs[0]!.json().commandId)).toHaveLength(1);
  });

  it('validates the Idempotency-Key header and the body, naming the field', async () => {
    const none = await post(body(), operator);
    expect(none.statusCode).toBe(400);
    expect(none.json()).toMatchObject({ code: 'invalid_request', field: 'headers.idempotency-key' });
    const long = await post(body(), { ...operator, 'idempotency-key': 'k'.repeat(256) });
    expect(long.json().field).toBe('headers.idempotency-key');
    const amount = await post(body('1.12345678901'), { ...operator, 'idempotency-key': 'x' });
    expect(amount.json()).toMatchObject({ code: 'invalid_request', field: 'body.amount' });
    const zero = await post(body('0.0'), { ...operator, 'idempotency-key': 'x' });
    expect(zero.json().field).toBe('body.amount');
    const past = await post(
      { ...body(), executeBefore: '2020-01-01T00:00:00Z' },
      { ...operator, 'idempotency-key': randomUUID() },
    );
    expect(past.json()).toMatchObject({ code: 'invalid_request', field: 'body.executeBefore' });
  });

  it('a tampered preparation ends rejected with the refusal reason, nothing on the ledger', async () => {
    env.flow.sb.ctx.faults.inject({
      fault: { kind: 'tamper', change: 'amount', hash: 'tampered' },
      operation: 'ledger-api.prepare',
      times: 1,
    });
    const r = await post(body('9'), { ...operator, 'idempotency-key': randomUUID() });
    const done = await settled(r.json().id);
    expect(done.state).toBe('rejected');
    expect(done.lastError).toMatch(/^intent_mismatch: /);
    expect(updatesOf(r.json().commandId)).toEqual([]);
  });
});

describe('cancel, list and scope (worker paused)', () => {
  const made: { id: string; party: string }[] = [];
  beforeAll(async () => {
    await env.service.deps.worker.stop();
    for (const [party, n] of [
      [alice.partyId, 5],
      [carol.partyId, 2],
    ] as const)
      for (let i = 0; i < n; i++) {
        const r = await post(body(`${i + 1}`, party), { ...operator, 'idempotency-key': randomUUID() });
        made.push({ id: r.json().id, party });
      }
  });
  afterAll(async () => {
    for (const m of made) await env.store.withdrawals.cancel(m.id).catch(() => {});
    await env.service.deps.worker.start();
  });

  it('cancels a withdrawal not yet signed; again is a no-op; a committed one is 409', async () => {
    const id = made[0]!.id;
    const c = await env.service.app.inject({
      method: 'POST',
      url: `/v1/withdrawals/${id}/cancel`,
      headers: operator,
      payload: { reason: 'customer asked' },
    });
    expect(c.statusCode).toBe(200);
    expect(c.json().state).toBe('cancelled');
    const again = await env.service.app.inject({
      method: 'POST',
      url: `/v1/withdrawals/${id}/cancel`,
      headers: operator,
    });
    expect(again.statusCode).toBe(200);
    const committed = (await env.store.withdrawals.list({ state: 'committed', limit: 1 })).items[0]!;
    const late = await env.service.app.inject({
      method: 'POST',
      url: `/v1/withdrawals/${committed.id}/cancel`,
      headers: operator,
    });
    expect(late.statusCode).toBe(409);
    expect(late.json().code).toBe('invalid_state');
  });

  it('a cancel once signing has started (prepared) is 409 invalid_state saying so, and changes nothing', async () => {
    const r = await post(body('7', carol.partyId), { ...operator, 'idempotency-key': randomUUID() });
    const id = r.json().id as string;
    // As the worker does right before it signs.
    await env.store.withdrawals.transition(id, ['received'], 'prepared');
    const c = await env.service.app.inject({
      method: 'POST',
      url: `/v1/withdrawals/${id}/cancel`,
      headers: operator,
      payload: { reason: 'too late' },
    });
    expect(c.statusCode).toBe(409);
    expect(c.json()).toMatchObject({ code: 'invalid_state' });
    expect(c.json().message).toMatch(
      /^too late to cancel withdrawal .*: signing has started \(it is prepared\)/,
    );
    expect((await env.store.withdrawals.get(id))!.state).toBe('prepared');
    // Out of the worker's way when it starts again.
    await env.store.withdrawals.transition(id, ['prepared'], 'failed', { lastError: 'test' });
  });

  it('pages with a cursor and filters by party and state', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const r = await get(
        `/v1/withdrawals?party=${encodeURIComponent(alice.partyId)}&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        operator,
      );
      expect(r.statusCode).toBe(200);
      const page = r.json();
      expect(page.items.length).toBeLessThanOrEqual(2);
      seen.push(...page.items.map((w: { id: string; party: string }) => w.id));
      for (const w of page.items) expect(w.party).toBe(alice.partyId);
      cursor = page.nextCursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    for (const m of made.filter((x) => x.party === alice.partyId)) expect(seen).toContain(m.id);
    const received = (await get('/v1/withdrawals?state=received&limit=500', operator)).json();
    expect(received.items.map((w: { id: string }) => w.id).sort()).toEqual(
      made
        .slice(1)
        .map((m) => m.id)
        .sort(),
    );
    const bad = await get('/v1/withdrawals?state=nope', operator);
    expect(bad.json()).toMatchObject({ code: 'invalid_request', field: 'query.state' });
    const badCursor = await get('/v1/withdrawals?cursor=abc', operator);
    expect(badCursor.statusCode).toBe(400);
  });

  it("a withdrawer sees and acts on only its token's parties (others: 404 / 403)", async () => {
    const w = await env.auth(['withdrawer'], [carol.partyId]);
    const mine = made.find((m) => m.party === carol.partyId)!;
    const other = made.find((m) => m.party === alice.partyId)!;
    expect((await get(`/v1/withdrawals/${mine.id}`, w)).statusCode).toBe(200);
    expect((await get(`/v1/withdrawals/${other.id}`, w)).statusCode).toBe(404);
    const list = (await get('/v1/withdrawals?limit=500', w)).json();
    expect(list.items.length).toBeGreaterThan(0);
    for (const x of list.items) expect(x.party).toBe(carol.partyId);
    expect((await get(`/v1/withdrawals?party=${encodeURIComponent(alice.partyId)}`, w)).statusCode).toBe(403);
    const forbidden = await post(body('1', alice.partyId), { ...w, 'idempotency-key': randomUUID() });
    expect(forbidden.statusCode).toBe(403);
    const cancelOther = await env.service.app.inject({
      method: 'POST',
      url: `/v1/withdrawals/${other.id}/cancel`,
      headers: w,
    });
    expect(cancelOther.statusCode).toBe(404);
    const ok = await post(body('1', carol.partyId), { ...w, 'idempotency-key': randomUUID() });
    expect(ok.statusCode).toBe(201);
    made.push({ id: ok.json().id, party: carol.partyId });
  });

  it("a withdrawer's refusals are audited: subject, route, party, status", async () => {
    const w = await env.auth(['withdrawer'], [carol.partyId]);
    const other = made.find((m) => m.party === alice.partyId)!;
    const refusals = async () =>
      (
        await env.store.db.query<{ actor: string; subject: string | null; details: Record<string, unknown> }>(
          `SELECT actor, subject, details FROM audit_log WHERE action = 'access.refused' ORDER BY seq`,
        )
      ).rows;
    const before = (await refusals()).length;
    expect((await post(body('1', alice.partyId), { ...w, 'idempotency-key': randomUUID() })).statusCode).toBe(
      403,
    );
    expect((await get(`/v1/withdrawals?party=${encodeURIComponent(alice.partyId)}`, w)).statusCode).toBe(403);
    const cancel = await env.service.app.inject({
      method: 'POST',
      url: `/v1/withdrawals/${other.id}/cancel`,
      headers: w,
    });
    expect(cancel.statusCode).toBe(404);
    const rows = (await refusals()).slice(before);
    const of = (route: string, status: number) => ({
      actor: 'test-withdrawer',
      subject: `party:${alice.partyId}`,
      details: { route, party: alice.partyId, code: 'forbidden', status },
    });
    expect(rows).toMatchObject([
      of('POST /v1/withdrawals', 403),
      of('GET /v1/withdrawals', 403),
      of('POST /v1/withdrawals/:id/cancel', 404),
    ]);
    // a role the route does not declare: audited too, without a party
    const a = await env.auth(['auditor']);
    expect((await post(body(), { ...a, 'idempotency-key': randomUUID() })).statusCode).toBe(403);
    expect((await refusals()).at(-1)).toMatchObject({
      actor: 'test-auditor',
      subject: null,
      details: { route: 'POST /v1/withdrawals', code: 'forbidden', status: 403 },
    });
  });

  it('a cursor the service did not issue is a 400 naming it, never a 500', async () => {
    const uuid = randomUUID();
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v), 'utf8').toString('base64url');
    for (const cursor of [
      b64(['1', uuid]),
      b64(['2024', uuid]),
      b64(['+275760-09-13T00:00:00.000Z', uuid]),
      b64(['-000001-01-01T00:00:00.000Z', uuid]),
      b64(['2024-02-30T00:00:00.000Z', uuid]),
      b64(['2024-01-01T00:00:00Z', uuid]),
      b64(['2024-01-01 00:00:00.000+00', uuid]),
      b64(['Tue, 01 Jan 2024 00:00:00 GMT', uuid]),
      b64(['2024-01-01T00:00:00.000Z', 'not-a-uuid']),
      b64(['2024-01-01T00:00:00.000Z']),
      '1',
      'abc',
      '!!!!',
      Buffer.from([0xff, 0xfe, 0x00, 0x7b]).toString('base64url'),
    ]) {
      const r = await get(`/v1/withdrawals?cursor=${encodeURIComponent(cursor)}`, operator);
      expect(r.statusCode, cursor).toBe(400);
      expect(r.json(), cursor).toMatchObject({ code: 'bad_request', field: 'cursor' });
    }
    const issued = b64(['2024-01-01T00:00:00.000Z', uuid]);
    expect((await get(`/v1/withdrawals?cursor=${issued}`, operator)).statusCode).toBe(200);
  });

  it('an auditor reads but cannot create or cancel; no token is 401', async () => {
    const a = await env.auth(['auditor']);
    expect((await get(`/v1/withdrawals/${made[1]!.id}`, a)).statusCode).toBe(200);
    expect((await post(body(), { ...a, 'idempotency-key': randomUUID() })).statusCode).toBe(403);
    const none = await env.service.app.inject({ method: 'GET', url: '/v1/withdrawals' });
    expect(none.statusCode).toBe(401);
    expect((await get('/v1/withdrawals/not-a-uuid', operator)).json().field).toBe('params.id');
  });
});

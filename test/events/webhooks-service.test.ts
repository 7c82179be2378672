/**
 * Events and webhooks in the running service (sandbox, worker, PGlite): a
 * withdrawal carried to committed leaves one event per state move in the
 * outbox, in the order of the moves (the audit log's order), each carrying
 * the withdrawal as the API shows it; the configured receiver gets them
 * signed with both secrets of a rotation, its URL's credentials as Basic
 * authorization; a receiver that is down has its delivery dead once the
 * horizon passed, visible in GET /v1/webhooks/deliveries?state=dead, and
 * the redeliver route sends it once it is up; the receivers route shows no
 * secret and no URL credentials; GET /v1/events reads by cursor and type;
 * approval requests emit approval.required and approval.<outcome>; metrics
 * count the outcomes.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/events/signature.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { WITHDRAWAL_STATES } from '../../src/store/repos/withdrawals.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';
import { freePort, type TestReceiver, testReceiver, until } from '../support/webhook-receiver.js';

const SECRET = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const NEXT = 'the-next-webhook-secret-of-32-bytes-or-more';
const DOWN_SECRET = `whsec_${Buffer.alloc(40, 2).toString('base64')}`;

let env: ServiceEnv;
let good: TestReceiver;
let down: TestReceiver | undefined;
let downPort: number;
let alice: PartyRecord;
let bob: PartyRecord;
type Auth = { authorization: string };
let operator: Auth;
let auditor: Auth;

beforeAll(async () => {
  good = await testReceiver();
  downPort = await freePort();
  env = await serviceEnv({
    seed: 'webhooks-service',
    service: {
      config: testConfig({
        webhooks: {
          receivers: [
            {
              name: 'exchange',
              url: `http://hook-user:hunter2-password@127.0.0.1:${good.port}/hook`,
              events: ['withdrawal.*'],
              secretEnv: ['WH_EXCHANGE', 'WH_EXCHANGE_NEXT'],
            },
            {
              name: 'down',
              url: `http://127.0.0.1:${downPort}/hook`,
              events: ['withdrawal.committed'],
              secretEnv: ['WH_DOWN'],
              timeoutMs: 1000,
            },
          ],
          retry: { horizonSeconds: 1, initialSeconds: 0.05, maxIntervalSeconds: 0.2 },
          pollMs: 200,
        },
      }),
      env: { WH_EXCHANGE: SECRET, WH_EXCHANGE_NEXT: NEXT, WH_DOWN: DOWN_SECRET },
    },
  });
  alice = await env.addParty('alice', { fund: '1000' });
  bob = await env.addParty('bob');
  operator = await env.auth(['operator']);
  auditor = await env.auth(['auditor']);
}, 60_000);
afterAll(async () => {
  await env?.close();
  await good?.close();
  await down?.close();
});

const get = (url: string, headers: Auth) => env.service.app.inject({ method: 'GET', url, headers });

type Ev = { id: string; seq: number; type: string; subject: string; data: Record<string, unknown> };

describe('withdrawal events and their webhooks', () => {
  let wid: string;
  let events: Ev[];

  it('one event per state move, in the order of the moves, each the withdrawal as the API shows it', async () => {
    const r = await env.service.app.inject({
      method: 'POST',
      url: '/v1/withdrawals',
      headers: { ...operator, 'idempotency-key': randomUUID() },
      payload: { party: alice.partyId, receiver: bob.partyId, amount: '12.5', memo: 'to bob' },
    });
    expect(r.statusCode).toBe(201);
    wid = r.json().id;
    const view = await until(async () => {
      const w = (await get(`/v1/withdrawals/${wid}`, operator)).json();
      return w.state === 'committed' && w.delivery !== 'pending' ? w : undefined;
    }, 'the withdrawal committed and its delivery read');
    const page = await get(`/v1/events?after=0&type=withdrawal.*&limit=1000`, auditor);
    expect(page.statusCode).toBe(200);
    events = (page.json().items as Ev[]).filter((e) => e.subject === `withdrawal:${wid}`);
    // The moves as the audit log recorded them, in its order.
    const audit = await env.store.db.query<{ action: string }>(
      `SELECT action FROM audit_log WHERE subject = $1 ORDER BY seq`,
      [`withdrawal:${wid}`],
    );
    const moves = audit.rows
      .map((a) => a.action)
      .flatMap((a) => {
        if (a === 'withdrawal.create') return ['withdrawal.received'];
        const delivery = /^withdrawal\.delivery\.([a-z]+)$/.exec(a)?.[1];
        if (delivery) return [`withdrawal.${delivery}`];
        const state = /^withdrawal\.([a-z_]+)$/.exec(a)?.[1];
        return state && (WITHDRAWAL_STATES as readonly string[]).includes(state) ? [a] : [];
      });
    expect(moves.slice(0, 2)).toEqual(['withdrawal.received', 'withdrawal.prepared']);
    expect(moves).toContain('withdrawal.committed');
    expect(events.map((e) => e.type)).toEqual(moves);
    for (let i = 1; i < events.length; i++) expect(events[i]!.seq).toBeGreaterThan(events[i - 1]!.seq);
    for (const e of events) {
      const state = e.type.slice('withdrawal.'.length);
      if ((WITHDRAWAL_STATES as readonly string[]).includes(state)) expect(e.data.state).toBe(state);
      else expect(e.data.delivery).toBe(state);
    }
    // The last event is the withdrawal as it is now, field for field.
    expect(events.at(-1)!.data).toEqual(view);
    const one = await get(`/v1/events/${events[0]!.id}`, operator);
    expect(one.json()).toMatchObject({ id: events[0]!.id, seq: events[0]!.seq, type: 'withdrawal.received' });
    expect((await get(`/v1/events/${events[0]!.seq}`, operator)).json().id).toBe(events[0]!.id);
    const after = await get(`/v1/events?after=${events.at(-1)!.seq}&type=withdrawal.*`, auditor);
    expect(after.json()).toEqual({ items: [], nextAfter: events.at(-1)!.seq });
  });

  it('the receiver gets them, in seq order, signed with both secrets, with Basic authorization from its URL', async () => {
    const last = events.at(-1)!;
    await until(
      () => good.got.some((r) => r.headers['webhook-id'] === last.id),
      'the last event at the receiver',
    );
    const mine = good.got.filter((r) => JSON.parse(r.body).subject === `withdrawal:${wid}`);
    expect(mine.map((r) => JSON.parse(r.body).seq)).toEqual(events.map((e) => e.seq));
    for (const r of mine) {
      const h = r.headers as Record<string, string>;
      expect(h['webhook-signature']!.split(' ')).toHaveLength(2);
      expect(verifyWebhook([SECRET], h, r.body)).toBe(JSON.parse(r.body).id);
      expect(verifyWebhook([NEXT], h, r.body)).toBe(JSON.parse(r.body).id);
      expect(() => verifyWebhook([DOWN_SECRET], h, r.body)).toThrow('no signature matches');
      expect(h.authorization).toBe(`Basic ${Buffer.from('hook-user:hunter2-password').toString('base64')}`);
    }
  });

  it('a receiver down past the horizon: dead, listed; redelivered once it is up', async () => {
    const committed = events.find((e) => e.type === 'withdrawal.committed')!;
    const deadList = await until(async () => {
      const r = (await get(`/v1/webhooks/deliveries?receiver=down&state=dead`, auditor)).json();
      return r.items.length > 0 ? r : undefined;
    }, 'the dead delivery');
    expect(deadList.items).toEqual([
      expect.objectContaining({
        receiver: 'down',
        seq: committed.seq,
        eventId: committed.id,
        type: 'withdrawal.committed',
        state: 'dead',
        lastError: 'connection failed (ECONNREFUSED)',
      }),
    ]);
    expect(deadList.items[0].attempts).toBeGreaterThanOrEqual(2);
    // An auditor only reads.
    const url = `/v1/webhooks/deliveries/down/${committed.seq}/redeliver`;
    expect((await env.service.app.inject({ method: 'POST', url, headers: auditor })).statusCode).toBe(403);
    down = await testReceiver({ port: downPort });
    const r = await env.service.app.inject({ method: 'POST', url, headers: operator });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ state: 'pending', attempts: 0 });
    await until(() => down!.got.length > 0, 'the redelivery');
    const got = down.got[0]!;
    expect(verifyWebhook([DOWN_SECRET], got.headers as Record<string, string>, got.body)).toBe(committed.id);
    await until(
      async () => (await env.store.webhooks.get('down', committed.seq))?.state === 'delivered',
      'delivered',
    );
    const bulk = await env.service.app.inject({
      method: 'POST',
      url: '/v1/webhooks/receivers/down/redeliver',
      headers: operator,
      payload: { fromSeq: 1 },
    });
    expect(bulk.json()).toEqual({ redelivered: 0, cursor: 0 });
    const unknown = await env.service.app.inject({
      method: 'POST',
      url: '/v1/webhooks/receivers/nobody/redeliver',
      headers: operator,
      payload: { fromSeq: 1 },
    });
    expect(unknown.statusCode).toBe(404);
    const audit = await env.store.db.query<{ actor: string; subject: string }>(
      `SELECT actor, subject FROM audit_log WHERE action = 'webhook.redeliver' ORDER BY seq`,
    );
    expect(audit.rows.map((a) => a.subject)).toEqual(['webhook:down', 'webhook:down']);
  });

  it('lists the receivers without secrets or URL credentials; metrics count the outcomes', async () => {
    const r = await get('/v1/webhooks/receivers', auditor);
    expect(r.statusCode).toBe(200);
    const text = r.body;
    for (const secret of [SECRET, NEXT, DOWN_SECRET, 'hunter2', 'hook-user', SECRET.slice(6, 20)])
      expect(text).not.toContain(secret);
    const items = r.json().items as Record<string, unknown>[];
    expect(items.map((i) => [i.name, i.url, i.secrets])).toEqual([
      ['exchange', `http://127.0.0.1:${good.port}/hook`, 2],
      ['down', `http://127.0.0.1:${downPort}/hook`, 1],
    ]);
    expect(items[1]).toMatchObject({
      counts: { pending: 0, delivered: 1, dead: 0 },
      events: ['withdrawal.committed'],
    });
    const metrics = (await env.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/canton_signer_webhook_deliveries_total\{receiver="down",outcome="dead"\} 1/);
    expect(metrics).toMatch(
      /canton_signer_webhook_deliveries_total\{receiver="down",outcome="delivered"\} 1/,
    );
    expect(metrics).toMatch(/canton_signer_webhook_dead_deliveries\{receiver="down"\} 0/);
    expect(metrics).toMatch(/canton_signer_webhook_oldest_pending_seconds\{receiver="exchange"\} 0/);
  });
});

describe('approval events', () => {
  it('approval.required when a request opens, approval.<outcome> when it closes, superseded when replaced', async () => {
    const head = (await get('/v1/events?after=0&limit=1000', auditor)).json().nextAfter as number;
    const open = (request: string, hash: string) =>
      env.store.approvals.open({
        subject: 'withdrawal:00000000-0000-4000-8000-000000000001',
        statement: { request, party: alice.partyId },
        statementHash: hash,
        party: alice.partyId,
        requester: 'tester',
        entryPoint: 'withdrawal',
        policyVersion: 0,
        rule: 'two-eyes',
        requirement: [{ group: 'treasury', count: 1 }],
        expiresAt: new Date(Date.now() + 60_000),
      });
    const a = await open(randomUUID(), 'a'.repeat(64));
    const b = await open(randomUUID(), 'b'.repeat(64));
    await env.store.approvals.close(b.id, 'rejected', { actor: 'carol', reason: 'no' });
    const page = (await get(`/v1/events?after=${head}&type=approval.*`, auditor)).json().items as Ev[];
    expect(page.map((e) => [e.type, e.subject])).toEqual([
      ['approval.required', `approval:${a.id}`],
      ['approval.superseded', `approval:${a.id}`],
      ['approval.required', `approval:${b.id}`],
      ['approval.rejected', `approval:${b.id}`],
    ]);
    expect(page[3]!.data).toMatchObject({
      id: b.id,
      status: 'rejected',
      statementHash: 'b'.repeat(64),
      requirement: [{ group: 'treasury', count: 1 }],
      approvals: [],
      decidedBy: 'carol',
      reason: 'no',
    });
  });
});

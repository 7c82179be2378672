/**
 * The Canton services unreachable (the sandbox's `unreachable` fault on
 * every operation: connections dropped as requests arrive), with the
 * service's worker running: /ready says so; a withdrawal not yet submitted
 * waits for the network, showing the network error as its `lastError`,
 * and commits once the network is back (an outage shorter than its
 * deadline fails nothing); an outage past its `executeBefore` expires it,
 * and without one, past the configured wait, fails it — each saying why.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

/** The configured wait for the network of a withdrawal without executeBefore (here: short). */
const NETWORK_WAIT_MS = 5000;

let env: ServiceEnv;
let alice: PartyRecord;
let carol: PartyRecord;
let bob: PartyRecord;
let operator: { authorization: string };

beforeAll(async () => {
  env = await serviceEnv({
    seed: 'network-outage',
    worker: true,
    service: { workerOptions: { pollMs: 50, retryMs: 20, networkWaitMs: NETWORK_WAIT_MS } },
  });
  alice = await env.addParty('alice', { fund: '5000' });
  carol = await env.addParty('carol', { fund: '5000' });
  bob = await env.addParty('bob');
  operator = await env.auth(['operator']);
}, 60_000);
afterAll(async () => env?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const updatesOf = (commandId: string) =>
  env.flow.net.store.updates().filter((u) => u.commandId === commandId);

/** Every Canton service drops its connections until the returned function is called. */
function outage(): () => void {
  const id = env.flow.sb.ctx.faults.inject({ fault: { kind: 'unreachable' } });
  return () => void env.flow.sb.ctx.faults.remove(id);
}

async function create(party: PartyRecord, executeBefore?: string, key = randomUUID()) {
  const r = await env.service.app.inject({
    method: 'POST',
    url: '/v1/withdrawals',
    headers: { ...operator, 'idempotency-key': key },
    payload: {
      party: party.partyId,
      receiver: bob.partyId,
      amount: '3',
      ...(executeBefore ? { executeBefore } : {}),
    },
  });
  expect(r.statusCode, r.body).toBe(201);
  return { ...(r.json() as { id: string; commandId: string }), key };
}

async function show(id: string): Promise<Record<string, unknown>> {
  return (
    await env.service.app.inject({ method: 'GET', url: `/v1/withdrawals/${id}`, headers: operator })
  ).json();
}

async function settled(id: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const w = await show(id);
    if (['committed', 'rejected', 'failed', 'cancelled', 'expired'].includes(w.state as string)) return w;
    if (Date.now() > end) throw new Error(`withdrawal ${id} still ${w.state as string}`);
    await sleep(50);
  }
}

describe('the Canton network unreachable', () => {
  it('an outage shorter than the deadline: /ready says the network is down, the withdrawals wait and then commit', async () => {
    const restore = outage();
    let a: Awaited<ReturnType<typeof create>>;
    let b: Awaited<ReturnType<typeof create>>;
    try {
      a = await create(alice);
      b = await create(alice, new Date(Date.now() + 120_000).toISOString());
      const ready = await env.service.app.inject({ method: 'GET', url: '/ready' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json().checks.ledgerApi).toEqual({ ok: false, code: 'ledger_api_unavailable' });
      // Far longer than the worker's retries used to last (5 errors, 20 ms doubling).
      await sleep(2500);
      for (const w of [a, b]) {
        const now = await show(w.id);
        expect(now.state, JSON.stringify(now)).toBe('received');
        expect(now.lastError).toMatch(/^NETWORK: /);
      }
    } finally {
      restore();
    }
    expect((await env.service.app.inject({ method: 'GET', url: '/ready' })).statusCode).toBe(200);
    for (const w of [a, b]) {
      const done = await settled(w.id);
      expect(done.state).toBe('committed');
      expect(done.lastError).toBeUndefined();
      expect(updatesOf(w.commandId)).toHaveLength(1);
    }
    // The same request again (same Idempotency-Key) answers the committed withdrawal.
    const again = await env.service.app.inject({
      method: 'POST',
      url: '/v1/withdrawals',
      headers: { ...operator, 'idempotency-key': a.key },
      payload: { party: alice.partyId, receiver: bob.partyId, amount: '3' },
    });
    expect(again.json()).toMatchObject({ id: a.id, state: 'committed' });
  });

  it('an outage past the deadline: expired (own executeBefore) or failed (the configured wait), saying why; nothing sent', async () => {
    const restore = outage();
    try {
      const withDeadline = await create(alice, new Date(Date.now() + 1500).toISOString());
      const without = await create(carol);
      const expired = await settled(withDeadline.id);
      expect(expired.state).toBe('expired');
      expect(expired.lastError).toMatch(/^executeBefore passed before the withdrawal committed \(NETWORK: /);
      const failed = await settled(without.id);
      expect(failed.state).toBe('failed');
      expect(failed.lastError).toMatch(
        /^the Canton network did not answer for \d+ s \(the limit: 5 s\) before anything was submitted; nothing was sent\. Last error: NETWORK: /,
      );
      for (const w of [withDeadline, without]) expect(updatesOf(w.commandId)).toEqual([]);
    } finally {
      restore();
    }
  });
});

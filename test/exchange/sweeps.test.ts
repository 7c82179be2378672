/**
 * Sweeps in a service on a real sandbox: a treasury party whose available
 * balance (as ingestion keeps it) goes above maxBalance is swept down to
 * minBalance into a target with a transfer preapproval (one sweep, the
 * target's holdings grew by its amount); below maxBalance nothing happens;
 * a target without a preapproval blocks the sweep (announced once, nothing
 * signed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listSweeps, type Sweep } from '../../src/exchange/sweeps.js';
import { acceptSetupProposal } from '../../src/flows/setup-accept.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

let env: ServiceEnv;
let treasury: PartyRecord;
let hot: PartyRecord;
let cold: string;
let nopre: string;
let auth: { authorization: string };

beforeAll(async () => {
  env = await serviceEnv({
    seed: 'sweeps',
    service: {
      config: testConfig({
        exchange: {
          // A rule from nobody: the automation runs; the sweep rules are added once the parties exist.
          autoAccept: {
            rules: [{ name: 'nobody', party: '*', senders: ['nobody::1220'], action: 'reject' }],
          },
          automationPollMs: 100,
        },
      }),
      ingestionOptions: { pollMs: 30 },
    },
  });
  treasury = await env.addParty('treasury', { fund: '100' });
  await env.flow.validator.createSetupProposal({ user_party_id: treasury.partyId });
  await acceptSetupProposal(env.service.deps.flows, treasury.partyId);
  hot = await env.addParty('hot', { fund: '100' });
  await env.flow.validator.createSetupProposal({ user_party_id: hot.partyId });
  await acceptSetupProposal(env.service.deps.flows, hot.partyId);
  cold = (await control('customer/allocate', { name: 'cold', preapproval: true })).party as string;
  nopre = (await control('customer/allocate', { name: 'nopre' })).party as string;
  auth = await env.auth(['operator', 'auditor']);
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

async function until<T>(f: () => Promise<T | undefined>, what: string, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const available = async (party: string) =>
  Number((await env.store.ledger.balances(party)).find((b) => b.instrument.id === 'Amulet')?.available ?? 0);
const balanceOf = async (name: string) => Number((await control('customer/allocate', { name })).balance);
const sweepsOf = async (from: string) =>
  (await listSweeps(env.store.db, { limit: 500 })).filter((s) => s.from === from);
const eventTypes = async (s: Sweep) =>
  (await env.store.events.list({ subject: `sweep:${s.id}`, limit: 100 })).map((e) => e.type);

describe('sweeps', () => {
  it('below maxBalance nothing is swept; above it, one sweep down to minBalance into the target', async () => {
    const rules = env.service.deps.config.exchange.sweeps;
    rules.push({
      name: 'treasury-to-cold',
      from: treasury.partyId,
      to: cold,
      maxBalance: '1000',
      minBalance: '200',
    });
    // Deposits ingested: the balance the sweep looks at.
    await control('customer/deposit', { to: treasury.partyId, amount: '300', customer: 'payer' });
    await until(async () => ((await available(treasury.partyId)) >= 300 ? true : undefined), 'the deposit');
    await env.service.deps.automation.runner.runNow();
    await env.service.deps.automation.runner.runNow();
    expect(await sweepsOf(treasury.partyId)).toEqual([]);

    const coldBefore = await balanceOf('cold');
    await control('customer/deposit', { to: treasury.partyId, amount: '900', customer: 'payer' });
    const done = await until(async () => {
      const s = await sweepsOf(treasury.partyId);
      return s[0]?.state === 'completed' ? s : undefined;
    }, 'a completed sweep');
    expect(done).toHaveLength(1);
    const sweep = done[0] as Sweep;
    expect(sweep).toMatchObject({ rule: 'treasury-to-cold', to: cold, instrument: { id: 'Amulet' } });
    expect(sweep.updateId).toBeTruthy();
    // What was available when it ran (above 1000) less the 200 kept.
    expect(Number(sweep.amount)).toBeGreaterThan(800);
    expect(await balanceOf('cold')).toBeCloseTo(coldBefore + Number(sweep.amount), 6);
    expect(await eventTypes(sweep)).toEqual(['sweep.submitted', 'sweep.completed']);
    // Once ingested, the balance is about minBalance (less fees): further passes sweep nothing.
    await until(
      async () => ((await available(treasury.partyId)) <= 200 ? true : undefined),
      'the swept balance',
    );
    await env.service.deps.automation.runner.runNow();
    expect(await sweepsOf(treasury.partyId)).toHaveLength(1);

    const listed = await env.service.app.inject({ method: 'GET', url: '/v1/sweeps', headers: auth });
    expect(listed.statusCode).toBe(200);
    expect((listed.json() as { items: Sweep[] }).items.map((s) => s.id)).toContain(sweep.id);
  });

  it('a target without a transfer preapproval blocks the sweep, announced once, nothing signed', async () => {
    env.service.deps.config.exchange.sweeps.push({
      name: 'hot-to-nopre',
      from: hot.partyId,
      to: nopre,
      maxBalance: '150',
      minBalance: '50',
    });
    const nopreBefore = await balanceOf('nopre');
    await control('customer/deposit', { to: hot.partyId, amount: '200', customer: 'payer' });
    const blocked = await until(async () => {
      const s = await sweepsOf(hot.partyId);
      return s[0]?.state === 'blocked' ? (s[0] as Sweep) : undefined;
    }, 'a blocked sweep');
    expect(blocked.error).toMatch(/no valid transfer preapproval/);
    const run = await env.service.app.inject({ method: 'POST', url: '/v1/sweeps/run', headers: auth });
    expect(run.statusCode).toBe(200);
    await env.service.deps.automation.runner.runNow();
    expect(await sweepsOf(hot.partyId)).toHaveLength(1);
    expect(await eventTypes(blocked)).toEqual(['sweep.blocked']);
    expect(await balanceOf('nopre')).toBe(nopreBefore);
    const steps = (await env.store.recorder.records(`command:${blocked.commandId}`)).map((r) => r.step);
    expect(steps).toEqual(['refused']);
  });
});

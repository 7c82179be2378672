/**
 * Auto-accept in a service on a real sandbox: customers outside the book
 * offer (two-step) transfers to a treasury party; the service's automation
 * answers them by rule through the pipeline. A known sender's attributable
 * offer is accepted (credited, journalled as signed); an unknown sender's
 * and an offer above maxAmount wait (announced once); with `otherwise:
 * reject`, an offer without an account is sent back (returned).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAutoAccept, recentDecisions } from '../../src/exchange/auto-accept.js';
import { createAutomation } from '../../src/exchange/automation.js';
import { acceptSetupProposal } from '../../src/flows/setup-accept.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

let env: ServiceEnv;
let treasury: PartyRecord;
let auth: { authorization: string };
let known: string;

const RULES = [{ name: 'accounts', match: 'prefix' as const, value: 'acct-' }];

beforeAll(async () => {
  env = await serviceEnv({
    seed: 'auto-accept',
    service: {
      config: testConfig({
        exchange: {
          deposits: { attribution: RULES },
          autoAccept: {
            // A rule from nobody: automation runs; the known customer's rule is added once it exists.
            rules: [{ name: 'nobody', party: '*', senders: ['nobody::1220'], action: 'reject' }],
            otherwise: 'wait',
          },
          automationPollMs: 100,
        },
      }),
      ingestionOptions: { pollMs: 30 },
      automationOptions: { backoffMs: 20 },
    },
  });
  treasury = await env.addParty('treasury', { fund: '500' });
  await env.flow.validator.createSetupProposal({ user_party_id: treasury.partyId });
  await acceptSetupProposal(env.service.deps.flows, treasury.partyId);
  auth = await env.auth(['operator', 'auditor'], [treasury.partyId]);
  known = (await control('customer/allocate', { name: 'known' })).party as string;
  // The known customer is named once its party id exists (the rules array is the one in force).
  env.service.deps.config.exchange.autoAccept.rules.push({
    name: 'known-small',
    party: '*',
    senders: [known],
    requireAccount: true,
    maxAmount: '100',
    action: 'accept',
  });
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

interface Dep {
  id: string;
  state: string;
  account?: string;
}
const depositOf = (updateId: string, state?: string) =>
  until(
    async () => {
      const r = await env.store.db.query<{ id: string }>('SELECT id FROM deposits WHERE update_id = $1', [
        updateId,
      ]);
      const d = r.rows[0] && (await env.store.deposits.get(r.rows[0].id));
      return d && (state === undefined || d.state === state) ? (d as Dep) : undefined;
    },
    `the deposit of ${updateId}${state ? ` ${state}` : ''}`,
  );

const decisionOf = (cid: string, state: string) =>
  until(async () => {
    const d = (await recentDecisions(env.store.db, 500)).find((x) => x.instructionCid === cid);
    return d?.state === state ? d : undefined;
  }, `the decision on ${cid} (${state})`);

const eventsOf = async (subject: string) => await env.store.events.list({ subject, limit: 1000 });

const offer = (body: Record<string, unknown>) =>
  control('customer/deposit', { to: treasury.partyId, mode: 'two-step', ...body });

describe('auto-accept', () => {
  it("a known sender's attributable offer is accepted through the pipeline: credited, journalled as signed", async () => {
    const o = await offer({ customer: 'known', amount: '25', memo: 'acct-3003' });
    expect(o.sender).toBe(known);
    const d = await depositOf(o.updateId as string, 'credited');
    expect(d.account).toBe('3003');
    const decision = await decisionOf(o.instructionCid as string, 'done');
    expect(decision).toMatchObject({ action: 'accept', rule: 'known-small', attempts: 1 });
    const evs = await eventsOf(`deposit:${d.id}`);
    const accepted = evs.filter((e) => e.type === 'offer.accepted');
    expect(accepted).toHaveLength(1);
    const commandId = accepted[0]?.data.commandId as string;
    const steps = (await env.store.recorder.records(`command:${commandId}`)).map((r) => r.step);
    expect(steps).toContain('signed');
    expect(steps).toContain('committed');
  });

  it("an unknown sender's offer waits, announced once; one above maxAmount waits too", async () => {
    const stranger = await offer({ customer: 'stranger', amount: '10', memo: 'acct-4004' });
    const big = await offer({ customer: 'known', amount: '150', memo: 'acct-5005' });
    const w1 = await decisionOf(stranger.instructionCid as string, 'waiting');
    const w2 = await decisionOf(big.instructionCid as string, 'waiting');
    expect(w1).toMatchObject({ action: 'wait' });
    expect(w1.rule).toBeUndefined();
    expect(w2).toMatchObject({ action: 'wait' });
    // Several more passes: still pending, and still one offer.waiting each.
    await env.service.deps.automation.runner.runNow();
    await env.service.deps.automation.runner.runNow();
    for (const o of [stranger, big]) {
      const d = await depositOf(o.updateId as string);
      expect(d.state).toBe('pending');
      const types = (await eventsOf(`deposit:${d.id}`)).map((e) => e.type);
      expect(types.filter((t) => t === 'offer.waiting')).toHaveLength(1);
    }
    const view = await env.service.app.inject({ method: 'GET', url: '/v1/auto-accept', headers: auth });
    expect(view.statusCode).toBe(200);
    const body = view.json() as {
      rules: { name: string }[];
      otherwise: string;
      decisions: { instructionCid: string }[];
    };
    expect(body.otherwise).toBe('wait');
    expect(body.rules.map((r) => r.name)).toEqual(['nobody', 'known-small']);
    expect(body.decisions.map((x) => x.instructionCid)).toContain(stranger.instructionCid);
  });

  it('with otherwise reject, an offer without an account is sent back (returned)', async () => {
    // Another configuration in force: the service's runner steps aside and this one takes the lease.
    await env.service.deps.automation.runner.stop();
    const rejecting = createAutomation({
      store: env.store,
      tasks: [
        createAutoAccept({
          store: env.store,
          flows: env.service.deps.flows,
          rules: env.service.deps.config.exchange.autoAccept.rules,
          otherwise: 'reject',
          backoffMs: 20,
        }),
      ],
      owner: 'test-rejecting',
    });
    const o = await offer({ customer: 'known', amount: '7' });
    const pending = await depositOf(o.updateId as string, 'pending');
    expect(pending.account).toBeUndefined();
    await until(async () => {
      if ((await recentDecisions(env.store.db, 500)).some((x) => x.instructionCid === o.instructionCid))
        return true;
      await rejecting.runNow();
      return undefined;
    }, 'the decision on the offer');
    const decision = await decisionOf(o.instructionCid as string, 'done');
    expect(decision).toMatchObject({ action: 'reject' });
    expect(decision.rule).toBeUndefined();
    const d = await depositOf(o.updateId as string, 'returned');
    const types = (await eventsOf(`deposit:${d.id}`)).map((e) => e.type);
    expect(types.filter((t) => t === 'offer.rejected')).toHaveLength(1);
    await rejecting.stop();
  });
});

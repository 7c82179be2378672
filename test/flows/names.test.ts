/**
 * Names of the book's parties against the sandbox's name service, through the
 * service (REST and its keeper): registration to `active` with a file key and
 * a SoftHSM2 key; a taken and an invalid name refused before anything is
 * signed, and with this signer's checks bypassed, refused by the DSO with the
 * payment returned; auto-renew across three lifetimes as the clock moves; a
 * renewal missed for lack of funds (warnings, then expiry, and the entry gone
 * from Scan); a participant that tampers the payment's amount or receiver
 * gets nothing signed; a keeper that dies right after paying pays once.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { registerName } from '../../src/flows/names-register.js';
import { amuletContract, ansEntryContract, balanceOf } from '../../src/sandbox/amulet.js';
import { ansAutomationLog } from '../../src/sandbox/ans-automation.js';
import { str } from '../../src/sandbox/ledger/value-json.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

const DAY_MS = 86_400_000;
let env: ServiceEnv;
let hdr: { authorization: string };

beforeAll(async () => {
  env = await serviceEnv({
    seed: 'names',
    hsm: true,
    worker: false,
    sandboxClock: true,
    service: { config: testConfig({ names: { pollMs: 0, retrySeconds: 1, expiringHours: 24 * 10 } }) },
  });
  hdr = await env.auth(['operator']);
}, 60_000);
afterAll(async () => env?.close());

const deps = () => env.service.deps;
const net = () => env.flow.net;
const unlocked = (p: PartyRecord) =>
  balanceOf(net().store, p.partyId, net().latestRound().number).totalUnlocked;

async function api(method: string, url: string, body?: unknown) {
  const r = await env.service.app.inject({
    method: method as 'GET',
    url,
    headers: hdr,
    ...(body !== undefined ? { payload: body as object } : {}),
  });
  return { status: r.statusCode, body: r.json() as Record<string, unknown> };
}

/** One keeper pass (as the automation runner makes them). */
async function pass() {
  expect(await deps().automation.runner.runNow()).toBe(true);
}

/** Time moves on, and with it the mining rounds (their timers are off here). */
async function advanceDays(days: number) {
  net().clock.advance(days * DAY_MS);
  net().advanceRound();
  net().advanceRound();
  net().sweep();
  await pass();
}

const row = async (p: PartyRecord, name: string) =>
  (await api('GET', `/v1/parties/${p.partyId}/names/${name}`)).body as Record<string, unknown> & {
    state: string;
    expiresAt?: string;
    renewals: number;
    paidCc: string;
    error?: string;
  };

async function eventsOf(name: string): Promise<string[]> {
  const r = await api('GET', '/v1/events?after=0&limit=500');
  return (r.body.items as { type: string; data: { name?: string } }[])
    .filter((e) => e.type.startsWith('name.') && e.data.name === name)
    .map((e) => e.type);
}

const scanByName = async (name: string) =>
  fetch(`${env.flow.sb.urls.scan}/v0/ans-entries/by-name/${name}`).then((r) => r.status);

describe('registering a name', () => {
  it.each([
    ['file', 'ed25519'],
    ['pkcs11', 'ecdsa-p256'],
  ] as const)(
    'registers a name for a party with a %s key: requested, paid, then active once the DSO collects',
    async (backend, scheme) => {
      const p = await env.addParty(`reg-${backend}`, { fund: '1000', backend, scheme });
      const name = `reg-${backend}.unverified.cns`;
      const before = unlocked(p);
      const r = await api('POST', `/v1/parties/${p.partyId}/names`, {
        name,
        description: `${backend} party`,
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      expect(r.body.name).toMatchObject({ name, autoRenew: true, partyId: p.partyId });
      // the DSO collects right after the payment commits: the answer may already show the entry
      expect(['paid', 'active']).toContain((r.body.name as { state: string }).state);
      expect(r.body.quote).toMatchObject({ available: true, feeUsd: '1.0000000000' });
      const feeCc = (r.body.quote as { feeCc: string }).feeCc;
      await pass();
      const n = await row(p, name);
      expect(n).toMatchObject({ state: 'active', paidCc: feeCc });
      expect(Date.parse(n.expiresAt!) - Number(net().clock.now() / 1000n)).toBeGreaterThan(89 * DAY_MS);
      expect(await scanByName(name)).toBe(200);
      expect(Number(unlocked(p))).toBeCloseTo(Number(before) - Number(feeCc), 6);
      expect(await eventsOf(name)).toEqual(['name.registered']);
      // its own name next to its id in the party list
      const list = await api('GET', '/v1/parties');
      expect(
        (list.body.parties as { partyId: string; ansName?: string }[]).find((x) => x.partyId === p.partyId),
      ).toMatchObject({ ansName: name });
    },
  );

  it('refuses a taken and an invalid name before anything is signed', async () => {
    const p = await env.addParty('refused', { fund: '100' });
    const sign = vi.spyOn(env.flow.signer, 'sign');
    const taken = await api('POST', `/v1/parties/${p.partyId}/names`, { name: 'reg-file.unverified.cns' });
    expect(taken.status).toBe(400);
    expect(taken.body.message).toMatch(/reg-file\.unverified\.cns is taken: Scan shows it registered to/);
    const invalid = await api('POST', `/v1/parties/${p.partyId}/names`, { name: 'Refused.unverified.cns' });
    expect(invalid.status).toBe(400);
    expect(invalid.body.message).toMatch(/nothing was signed: name: .*names are lower case/);
    const quote = await api('GET', '/v1/names/quote?name=refused.unverified.com');
    expect(quote.body).toMatchObject({ available: false });
    expect(sign).not.toHaveBeenCalled();
    sign.mockRestore();
    expect((await api('GET', `/v1/parties/${p.partyId}/names`)).body.names).toEqual([]);
  });

  it('with the local checks bypassed, the DSO rejects a taken and an invalid name and returns the payment', async () => {
    const p = await env.addParty('bypass', { fund: '1000' });
    // a name someone outside this signer holds: only Scan knows it
    net().commitInternal({
      archives: [],
      creates: [
        ansEntryContract(
          net().dso,
          net().validatorParty,
          'outsider.unverified.cns',
          net().clock.now() + 10n * 86_400_000_000n,
        ),
      ],
      commandId: 'outsider-name',
    });
    expect(await scanByName('outsider.unverified.cns')).toBe(200);
    for (const name of ['outsider.unverified.cns', 'Bypass.unverified.cns']) {
      const before = unlocked(p);
      const r = await registerName(deps().flows, deps().store, deps().names, {
        partyId: p.partyId,
        name,
        actor: 'test',
        skipLocalChecks: true,
      });
      expect(['paid', 'rejected']).toContain(r.name.state);
      await pass();
      const n = await row(p, name);
      expect(n.state).toBe('rejected');
      // the sandbox's transfers cost no fees (CIP-0078): the whole payment comes back
      expect(unlocked(p)).toBe(before);
      expect(await eventsOf(name)).toEqual(['name.rejected']);
      // what came back is not counted as spent
      expect(n.paidCc).toBe('0.0000000000');
    }
    expect(ansAutomationLog(net()).filter((e) => e.kind === 'rejected').length).toBeGreaterThanOrEqual(2);
  });
});

describe('keeping a name', () => {
  it('renews automatically across three lifetimes as the clock moves', async () => {
    const p = await env.addParty('renew', { fund: '5000' });
    const name = 'renew.unverified.cns';
    await api('POST', `/v1/parties/${p.partyId}/names`, { name });
    await pass();
    const first = await row(p, name);
    expect(first.state).toBe('active');
    let expires = Date.parse(first.expiresAt!);
    for (let i = 1; i <= 3; i++) {
      // into the renewal window (30 days before the due date): announced, paid, collected
      await advanceDays(61);
      await pass();
      const n = await row(p, name);
      expect(n, `lifetime ${i}: ${JSON.stringify(n)}`).toMatchObject({ state: 'active', renewals: i });
      expect(Date.parse(n.expiresAt!)).toBe(expires + 90 * DAY_MS);
      expires = Date.parse(n.expiresAt!);
      await advanceDays(29);
    }
    const events = await eventsOf(name);
    expect(events.filter((e) => e === 'name.renewed')).toHaveLength(3);
    expect(events.filter((e) => e === 'name.renewal_due')).toHaveLength(3);
    expect(events).not.toContain('name.expired');
    expect(await scanByName(name)).toBe(200);
  });

  it('misses a renewal without funds: warnings, then expiry, and the entry gone from Scan', async () => {
    const p = await env.addParty('poor', { fund: '250' });
    const name = 'poor.unverified.cns';
    await api('POST', `/v1/parties/${p.partyId}/names`, { name });
    await pass();
    const registered = await row(p, name);
    expect(registered, JSON.stringify(registered)).toMatchObject({ state: 'active' });
    // what is left goes elsewhere, so the renewal cannot be paid
    const rest = unlocked(p);
    const amulets = net()
      .store.activeContracts('Amulet')
      .filter((c) => str(c.argument, 'owner') === p.partyId)
      .map((c) => c.contractId);
    net().commitInternal({ archives: amulets, creates: [], commandId: `spend-${p.partyId}` });
    expect(Number(unlocked(p))).toBe(0);
    await advanceDays(61);
    let n = await row(p, name);
    expect(n.state).toBe('active');
    expect(n.error).toMatch(/cannot pay/);
    await advanceDays(22);
    n = await row(p, name);
    expect(await eventsOf(name)).toEqual(['name.registered', 'name.renewal_due', 'name.expiring']);
    await advanceDays(8);
    n = await row(p, name);
    expect(n.state).toBe('expired');
    expect(await eventsOf(name)).toContain('name.expired');
    expect(await scanByName(name)).toBe(404);
    expect(Number(rest)).toBeGreaterThan(0);
  });

  it.each(['amount', 'receiver'] as const)(
    'signs nothing when the participant tampers the renewal payment’s %s',
    async (change) => {
      const p = await env.addParty(`tamper-${change}`, { fund: '1000' });
      const name = `tamper-${change}.unverified.cns`;
      await api('POST', `/v1/parties/${p.partyId}/names`, { name, autoRenew: false });
      await pass();
      expect((await row(p, name)).state).toBe('active');
      await advanceDays(61);
      const before = unlocked(p);
      const sign = vi.spyOn(env.flow.signer, 'sign');
      env.flow.sb.ctx.faults.inject({
        fault: { kind: 'tamper', change },
        operation: 'ledger-api.prepare',
        times: 3,
      });
      const r = await api('POST', `/v1/parties/${p.partyId}/names/${name}/renew`);
      env.flow.sb.ctx.faults.clear();
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(/was not paid: .*(does not|not the|mismatch|expected)/i);
      expect(sign).not.toHaveBeenCalled();
      sign.mockRestore();
      expect(unlocked(p)).toBe(before);
      expect(await row(p, name)).toMatchObject({ state: 'active', renewals: 0 });
    },
  );

  it('pays a renewal once when the keeper dies right after paying, before recording it', async () => {
    const p = await env.addParty('crash', { fund: '1000' });
    const name = 'crash.unverified.cns';
    await api('POST', `/v1/parties/${p.partyId}/names`, { name });
    await pass();
    const first = await row(p, name);
    await advanceDays(59);
    const before = unlocked(p);
    // the write after the payment fails: the keeper stops there, as a killed process would
    const move = deps().store.names.move.bind(deps().store.names);
    const spy = vi.spyOn(deps().store.names, 'move').mockImplementation(async (id, from, to, patch, o) => {
      if (to === 'renewing' && patch.paid !== undefined) throw new Error('killed');
      return move(id, from, to, patch, o);
    });
    const sign = vi.spyOn(env.flow.signer, 'sign');
    await advanceDays(1); // the window opens: announced, then paid
    spy.mockRestore();
    expect(sign).toHaveBeenCalledTimes(1);
    // the next passes find the payment on the ledger (collected by now) and pay nothing more
    await pass();
    await pass();
    expect(sign).toHaveBeenCalledTimes(1);
    sign.mockRestore();
    const n = await row(p, name);
    expect(n).toMatchObject({ state: 'active', renewals: 1 });
    expect(Date.parse(n.expiresAt!)).toBe(Date.parse(first.expiresAt!) + 90 * DAY_MS);
    // 200 CC once (holding fees of the rounds that passed aside), not twice
    expect(Number(unlocked(p))).toBeCloseTo(Number(before) - 200, 3);
    // and counted once in what the entry cost, from the journal of the run that paid it
    expect(Number(n.paidCc)).toBe(Number(first.paidCc) + 200);
  });

  it('puts name payments through the policy: money leaving the party, to the DSO', async () => {
    const p = await env.addParty('policed', { fund: '1000' });
    const admin = await env.auth(['admin']);
    const put = async (document: string) => {
      const r = await env.service.app.inject({
        method: 'PUT',
        url: '/v1/policy',
        headers: admin,
        payload: { document },
      });
      expect(r.statusCode, r.body).toBe(200);
    };
    await put(
      [
        'version: 1',
        'name: names capped',
        'default: allow',
        'rules:',
        '  - id: no-dear-names',
        '    when: { actions: [ans-entry-pay, ans-renewal-pay], amount: { gt: "150" } }',
        '    decision: deny',
        '    reason: names cost at most 150 CC here',
      ].join('\n'),
    );
    const sign = vi.spyOn(env.flow.signer, 'sign');
    const r = await api('POST', `/v1/parties/${p.partyId}/names`, { name: 'policed.unverified.cns' });
    // the request itself moves nothing and is signed; its 200 CC payment is denied and waits
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.name).toMatchObject({ state: 'requested' });
    expect((r.body.name as { error: string }).error).toMatch(/no-dear-names/);
    expect(sign).toHaveBeenCalledTimes(1);
    sign.mockRestore();
    await put(
      'version: 1\nname: names allowed\ndefault: allow\nrules:\n  - id: names\n    when: { actions: [ans-entry-pay] }\n    decision: allow\n',
    );
    net().clock.advance(2000);
    await pass();
    expect((await row(p, 'policed.unverified.cns')).state).toBe('active');
  });

  it('takes back a renewal the DSO did not collect (its round closed) and pays again in the same window', async () => {
    const p = await env.addParty('uncollected', { fund: '5000' });
    const name = 'uncollected.unverified.cns';
    await api('POST', `/v1/parties/${p.partyId}/names`, { name });
    await pass();
    const first = await row(p, name);
    await advanceDays(59);
    // the SVs' automation is down while the renewal is paid
    const commit = net().commitInternal.bind(net());
    const down = vi.spyOn(net(), 'commitInternal').mockImplementation((u) => {
      // nothing happens in its place: the payment stays locked
      return commit(
        u.commandId.startsWith('sv-ans-renew-')
          ? { archives: [], creates: [], commandId: `${u.commandId}-down` }
          : u,
      );
    });
    await advanceDays(1);
    expect((await row(p, name)).state).toBe('renewing');
    down.mockRestore();
    // rounds move on: the payment's round closes before it is collected; its lock expires
    for (let d = 0; d < 3; d++) await advanceDays(1);
    await pass();
    const n = await row(p, name);
    expect(n, JSON.stringify(n)).toMatchObject({ state: 'active', renewals: 1 });
    // paid twice, the first taken back: spent once
    expect(n.paidCc).toBe('400.0000000000');
    expect(Date.parse(n.expiresAt!)).toBe(Date.parse(first.expiresAt!) + 90 * DAY_MS);
    const events = await eventsOf(name);
    expect(events).toContain('name.payment_reclaimed');
    expect(events).not.toContain('name.expired');
  });

  it('gives up a registration the party cannot pay, and no other', async () => {
    const p = await env.addParty('broke', { fund: '10' });
    const name = 'broke.unverified.cns';
    const r = await api('POST', `/v1/parties/${p.partyId}/names`, { name });
    expect(r.status).toBe(201);
    expect(r.body.name).toMatchObject({ state: 'requested', error: expect.stringMatching(/cannot pay 220/) });
    expect((await api('GET', `/v1/names/quote?name=${name}`)).body.available).toBe(false);
    const c = await api('DELETE', `/v1/parties/${p.partyId}/names/${name}`);
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({
      state: 'failed',
      error: expect.stringMatching(/cancelled by .* before anything was paid/),
    });
    const after = (await api('GET', `/v1/names/quote?name=${name}`)).body;
    expect(after.available, JSON.stringify(after)).toBe(true);
    expect((await api('DELETE', `/v1/parties/${p.partyId}/names/reg-file.unverified.cns`)).status).toBe(404);
    // funded, the same name registers again (the request left on the ledger is taken up)
    net().commitInternal({
      archives: [],
      creates: [amuletContract(net().dso, p.partyId, '500', net().latestRound().number)],
      commandId: `fund-${p.partyId}`,
    });
    const again = await api('POST', `/v1/parties/${p.partyId}/names`, { name });
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    await pass();
    expect((await row(p, name)).state).toBe('active');
  });

  it('refuses to cancel while a payment is in flight', async () => {
    const p = await env.addParty('inflight', { fund: '1000' });
    const name = 'inflight.unverified.cns';
    const admin = await env.auth(['admin']);
    const put = (document: string) =>
      env.service.app.inject({ method: 'PUT', url: '/v1/policy', headers: admin, payload: { document } });
    // payments wait for an approver
    const approve = [
      'version: 1',
      'name: names approved',
      'default: allow',
      'approverGroups: { treasury: [tara] }',
      'rules:',
      '  - id: name-payments',
      '    when: { actions: [ans-entry-pay] }',
      '    decision: approve',
      '    approvals: [{ group: treasury, count: 1 }]',
    ].join('\n');
    expect((await put(approve)).statusCode).toBe(200);
    const r = await api('POST', `/v1/parties/${p.partyId}/names`, { name });
    expect(r.body.name).toMatchObject({ state: 'requested', waiting: { for: 'approval' } });
    const c = await api('DELETE', `/v1/parties/${p.partyId}/names/${name}`);
    expect(c.status).toBe(400);
    expect(c.body.message).toMatch(/cannot be cancelled now: its payment waits for approval request/);
    expect(
      (
        await put(
          'version: 1\nname: names allowed\ndefault: allow\nrules:\n  - id: names\n    when: { actions: [ans-entry-pay] }\n    decision: allow\n',
        )
      ).statusCode,
    ).toBe(200);
  });
});

/**
 * A name of a cold party (its key held offline), through the service and its
 * keeper against the sandbox: the request and the first payment are each
 * exported, signed offline and imported, and the entry becomes active; the
 * renewal is exported on the keeper's first pass after the window opens and,
 * once signed and imported, recorded; an export whose window closes unsigned
 * is replaced by a new one (the renewal is still paid once); and with less
 * time left than the configured air-gap turnaround, the renewal_due and
 * expiring events say so.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ansSnapshot } from '../../src/flows/ans-ledger.js';
import { parseRequestEnvelope } from '../../src/offline/format.js';
import { reviewRequest } from '../../src/offline/review.js';
import { balanceOf } from '../../src/sandbox/amulet.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type AirGapEnv, airGapEnv } from '../support/air-gap-env.js';
import { testConfig } from '../support/service.js';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
/** Longer than the 30-day renewal window: every renewal of a cold party is warned about. */
const TURNAROUND_HOURS = 24 * 40;

let ag: AirGapEnv;
let party: PartyRecord;
const name = 'cold-name.unverified.cns';

beforeAll(async () => {
  ag = await airGapEnv({
    seed: 'names-air-gap',
    sandboxClock: true,
    worker: false,
    service: {
      config: testConfig({
        names: { pollMs: 0, retrySeconds: 1, airGapTurnaroundHours: TURNAROUND_HOURS },
      }),
    },
  });
  party = await ag.coldParty('cold-name');
}, 60_000);
afterAll(async () => ag?.close());

const deps = () => ag.env.service.deps;
const net = () => ag.env.flow.net;
const api = (method: 'GET' | 'POST', url: string, body?: unknown) =>
  ag.inject(method, url, ag.operator, body);
const unlocked = () =>
  Number(balanceOf(net().store, party.partyId, net().latestRound().number).totalUnlocked);

interface Row {
  state: string;
  paidCc: string;
  expiresAt?: string;
  renewalWindowOpensAt?: string;
  renewals: number;
  waiting?: { for: string; exportId: string };
  error?: string;
}
const row = async () =>
  (await api('GET', `/v1/parties/${party.partyId}/names/${name}`)).body as unknown as Row;

/** One keeper pass (as the automation runner makes them). */
async function pass() {
  expect(await deps().automation.runner.runNow()).toBe(true);
}

/** Time moves on, with the mining rounds (their timers are off here); then a keeper pass. */
async function advance(ms: number) {
  net().clock.advance(ms);
  net().advanceRound();
  net().advanceRound();
  net().sweep();
  await pass();
}

const nowMs = () => Number(net().clock.now() / 1000n);

/** The export the row waits for, with its sealed request. */
async function waitingExport(r: Row) {
  expect(r.waiting, JSON.stringify(r)).toMatchObject({ for: 'signature' });
  const x = await api('GET', `/v1/air-gap/exports/${r.waiting!.exportId}`);
  expect(x.status, JSON.stringify(x.body)).toBe(200);
  return x.body as unknown as {
    export: { id: string; status: string; windowLatest: string };
    envelope: unknown;
  };
}

/** The offline machine signs the export; the import makes the service submit it. */
async function signAndImport(envelope: unknown) {
  const response = await ag.signOffline(envelope);
  const imp = await api('POST', '/v1/air-gap/imports', response);
  expect(imp.status, JSON.stringify(imp.body)).toBe(200);
  expect(imp.body.executed).toMatchObject({ updateId: expect.any(String) });
  return imp.body;
}

/** What the sealed request asks to be signed, as the offline machine's review sees it. */
function actionsOf(envelope: unknown) {
  return reviewRequest(parseRequestEnvelope(JSON.stringify(envelope)), {
    trusted: ag.trusted,
    minWindowMs: 60_000,
    nowUs: () => net().clock.now(),
  }).actions;
}

async function nameEvents() {
  const r = await api('GET', '/v1/events?after=0&limit=500');
  return (r.body.items as { type: string; data: { name?: string; warnings?: string[] } }[]).filter(
    (e) => e.type.startsWith('name.') && e.data.name === name,
  );
}

async function openExports() {
  const r = await api('GET', `/v1/air-gap/exports?party=${encodeURIComponent(party.partyId)}&status=open`);
  return (r.body.items as { id: string }[]).map((x) => x.id);
}

/** The subscription's idle state on the ledger (what a renewal exercises). */
async function idleState() {
  const snap = await ansSnapshot(deps().flows, party.partyId);
  expect(snap.idleStates).toHaveLength(1);
  return snap.idleStates[0]!;
}

const feeCc = { value: 0, text: '' };
let registeredExpires = 0;

describe('a name of a cold party, across the air gap', () => {
  it('registers: the request exported, signed, imported; the keeper pays (a second export); signed, imported: active', async () => {
    const before = unlocked();
    const r = await api('POST', `/v1/parties/${party.partyId}/names`, { name });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    feeCc.text = (r.body.quote as { feeCc: string }).feeCc;
    feeCc.value = Number(feeCc.text);
    const asked = r.body.name as unknown as Row;
    expect(asked.state).toBe('requesting');
    const req = await waitingExport(asked);
    expect(actionsOf(req.envelope).map((a) => a.choice)).toContain('AnsRules_RequestEntry');
    await signAndImport(req.envelope);

    // the keeper finds the request on the ledger and pays: that is exported too
    await pass();
    const requested = await row();
    expect(requested.state).toBe('requested');
    const pay = await waitingExport(requested);
    expect(pay.export.id).not.toBe(req.export.id);
    const payActions = actionsOf(pay.envelope);
    expect(payActions.map((a) => a.choice)).toContain('SubscriptionRequest_AcceptAndMakePayment');
    expect(payActions.find((a) => a.choice)?.name).toBe(name);
    // nothing is paid before the signature comes back
    expect(unlocked()).toBeCloseTo(before, 6);
    await signAndImport(pay.envelope);

    await pass();
    const active = await row();
    // paid once, and the payment its import made is on the row
    expect(active, JSON.stringify(active)).toMatchObject({
      state: 'active',
      renewals: 0,
      paidCc: feeCc.text,
    });
    expect(active.waiting).toBeUndefined();
    registeredExpires = Date.parse(active.expiresAt!);
    expect(registeredExpires - nowMs()).toBeGreaterThan(89 * DAY_MS);
    const scan = await fetch(`${ag.env.flow.sb.urls.scan}/v0/ans-entries/by-name/${name}`);
    expect(scan.status).toBe(200);
    expect(unlocked()).toBeCloseTo(before - feeCc.value, 3);
    expect((await nameEvents()).map((e) => e.type)).toEqual(['name.registered']);
    expect(await openExports()).toEqual([]);
  });

  it('exports the renewal on the first pass after its window opens; signed and imported, it is recorded', async () => {
    const opens = Date.parse((await row()).renewalWindowOpensAt!);
    // an hour before the window opens: nothing to do yet
    await advance(opens - HOUR_MS - nowMs());
    expect((await row()).waiting).toBeUndefined();
    expect(await openExports()).toEqual([]);
    // the first pass after it opens exports the payment
    await advance(2 * HOUR_MS);
    const due = await row();
    expect(due.state).toBe('active');
    const x = await waitingExport(due);
    expect(await openExports()).toEqual([x.export.id]);
    const idle = await idleState();
    const pays = actionsOf(x.envelope).filter((a) => a.choice === 'SubscriptionIdleState_MakePayment');
    expect(pays).toHaveLength(1);
    expect(pays[0]).toMatchObject({ contractId: idle.contractId, name });

    // the window is shorter than the configured turnaround: the announcement says so
    const renewalDue = (await nameEvents()).filter((e) => e.type === 'name.renewal_due');
    expect(renewalDue).toHaveLength(1);
    expect(renewalDue[0]!.data.warnings?.join(' ')).toMatch(
      /across the air gap .* less than the configured turnaround of 40 days/,
    );

    const before = unlocked();
    await signAndImport(x.envelope);
    await pass();
    const renewed = await row();
    expect(renewed, JSON.stringify(renewed)).toMatchObject({ state: 'active', renewals: 1 });
    expect(renewed.waiting).toBeUndefined();
    expect(Number(renewed.paidCc)).toBeCloseTo(2 * feeCc.value, 6);
    expect(Date.parse(renewed.expiresAt!)).toBe(registeredExpires + 90 * DAY_MS);
    expect(unlocked()).toBeCloseTo(before - feeCc.value, 3);
    expect((await nameEvents()).map((e) => e.type)).toEqual([
      'name.registered',
      'name.renewal_due',
      'name.renewed',
    ]);
  });

  it('replaces an export whose window closed unsigned, warns as expiry nears, and pays the renewal once', async () => {
    const expires = Date.parse((await row()).expiresAt!);
    const opens = Date.parse((await row()).renewalWindowOpensAt!);
    await advance(opens + HOUR_MS - nowMs());
    const first = await waitingExport(await row());
    const idle = await idleState();
    // signed offline, but the response is not brought back before the window closes
    const late = await ag.signOffline(first.envelope);
    expect(Date.parse(first.export.windowLatest)).toBeLessThan(expires);
    const before = unlocked();
    await advance(Date.parse(first.export.windowLatest) + HOUR_MS - nowMs());
    const second = await waitingExport(await row());
    expect(second.export.id).not.toBe(first.export.id);
    expect(
      actionsOf(second.envelope).find((a) => a.choice === 'SubscriptionIdleState_MakePayment'),
    ).toMatchObject({ contractId: idle.contractId, name });

    // less than the expiring horizon (7 days) left, still unsigned: warned, with the turnaround
    await advance(expires - 6 * DAY_MS - nowMs());
    const third = await waitingExport(await row());
    const expiring = (await nameEvents()).filter((e) => e.type === 'name.expiring');
    expect(expiring).toHaveLength(1);
    expect(expiring[0]!.data.warnings?.join(' ')).toMatch(
      /across the air gap and 6(\.\d+)? days are left .* less than the configured turnaround of 40 days/,
    );
    const due = (await nameEvents()).filter((e) => e.type === 'name.renewal_due');
    expect(due).toHaveLength(2);
    expect(due[1]!.data.warnings?.join(' ')).toMatch(/less than the configured turnaround/);

    // the late response to the first export pays nothing
    const lateImport = await api('POST', '/v1/air-gap/imports', late);
    expect(lateImport.status, JSON.stringify(lateImport.body)).toBe(422);
    expect(lateImport.body).toMatchObject({ reason: 'window_closed' });
    expect(unlocked()).toBeCloseTo(before, 3);

    await signAndImport(third.envelope);
    await pass();
    await pass();
    const renewed = await row();
    expect(renewed, JSON.stringify(renewed)).toMatchObject({ state: 'active', renewals: 2 });
    expect(Date.parse(renewed.expiresAt!)).toBe(expires + 90 * DAY_MS);
    // one payment for this due date, not one per export
    expect(unlocked()).toBeCloseTo(before - feeCc.value, 3);
    expect(Number(renewed.paidCc)).toBeCloseTo(3 * feeCc.value, 6);
    const types = (await nameEvents()).map((e) => e.type);
    expect(types.filter((t) => t === 'name.renewed')).toHaveLength(2);
    expect(types).not.toContain('name.expired');
  });
});

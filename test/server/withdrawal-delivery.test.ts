/**
 * Where a committed withdrawal's funds are (`delivery`, src/flows/withdrawal-delivery.ts),
 * over HTTP with the service's worker and delivery tracker against the sandbox:
 * a receiver with a transfer preapproval is delivered at commit; one without
 * gets an offer, followed to accepted (delivered), rejected or expired (the
 * amount back with the sender); an operator takes a pending offer back through
 * the pipeline; and with `withdrawals.requireDelivery` a withdrawal that would
 * only be an offer is refused before anything is signed.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import type { FlowContext } from '../../src/flows/context.js';
import { listHoldings, toUnits } from '../../src/flows/holdings.js';
import { acceptOffer, listOffers, rejectOffer } from '../../src/flows/offers.js';
import { transferPreapprovalContract } from '../../src/sandbox/amulet.js';
import type { SandboxNetwork } from '../../src/sandbox/network.js';
import { listAudit } from '../../src/store/audit.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

type Auth = { authorization: string };
type View = Record<string, unknown> & {
  id: string;
  state: string;
  delivery?: string;
  offer?: { instructionCid: string; expiresAt?: string; outcome?: string; updateId?: string };
  lastError?: string;
  commandId: string;
};

const TERMINAL = ['committed', 'rejected', 'failed', 'cancelled', 'expired'];

function givePreapproval(net: SandboxNetwork, receiver: string): void {
  net.commitInternal({
    archives: [],
    creates: [transferPreapprovalContract(net.dso, receiver, net.validatorParty, net.clock.now())],
    commandId: `test-preapproval-${randomUUID()}`,
  });
}

/** The HTTP helpers of one service. */
function client(env: () => ServiceEnv, auth: () => Auth) {
  const get = async (id: string): Promise<View> =>
    (await env().service.app.inject({ method: 'GET', url: `/v1/withdrawals/${id}`, headers: auth() })).json();
  return {
    async create(
      party: PartyRecord,
      receiver: PartyRecord,
      amount: string,
      extra: object = {},
    ): Promise<View> {
      const r = await env().service.app.inject({
        method: 'POST',
        url: '/v1/withdrawals',
        headers: { ...auth(), 'idempotency-key': randomUUID() },
        payload: { party: party.partyId, receiver: receiver.partyId, amount, ...extra },
      });
      expect(r.statusCode).toBe(201);
      return r.json();
    },
    get,
    /** Polls until `done` holds for the withdrawal. */
    async until(id: string, what: string, done: (w: View) => boolean): Promise<View> {
      const end = Date.now() + 20_000;
      for (;;) {
        const w = await get(id);
        if (done(w)) return w;
        if (Date.now() > end)
          throw new Error(`withdrawal ${id}: still not ${what} (state ${w.state}, delivery ${w.delivery})`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/** Unlocked and locked amounts a party holds, in units. */
async function held(ctx: FlowContext, party: string): Promise<{ unlocked: bigint; locked: bigint }> {
  const hs = await listHoldings(ctx, party);
  const sum = (xs: typeof hs) => xs.reduce((a, h) => a + toUnits(h.amount), 0n);
  return { unlocked: sum(hs.filter((h) => !h.locked)), locked: sum(hs.filter((h) => h.locked)) };
}

describe('delivery of a withdrawal', () => {
  let env: ServiceEnv;
  let alice: PartyRecord;
  let bob: PartyRecord;
  let carol: PartyRecord;
  let operator: Auth;
  /** The flows as the receivers answer offers (their parties are in the service's book). */
  let ctx: FlowContext;
  const api = client(
    () => env,
    () => operator,
  );
  const committedAs = async (w: View, delivery: string) => {
    const c = await api.until(w.id, 'committed', (x) => TERMINAL.includes(x.state));
    expect(c.state).toBe('committed');
    return api.until(w.id, delivery, (x) => x.delivery === delivery);
  };

  beforeAll(async () => {
    env = await serviceEnv({
      seed: 'withdrawal-delivery',
      service: { config: testConfig({ withdrawals: { offerPollMs: 100 } }) },
    });
    alice = await env.addParty('alice', { fund: '5000' });
    bob = await env.addParty('bob');
    carol = await env.addParty('carol');
    givePreapproval(env.flow.net, carol.partyId);
    operator = await env.auth(['operator']);
    ctx = { ...env.flow.ctx, parties: env.store.parties };
  }, 60_000);
  afterAll(async () => env?.close());

  it('to a receiver with a transfer preapproval: delivered at commit, no offer', async () => {
    const before = await held(ctx, carol.partyId);
    const w = await committedAs(await api.create(alice, carol, '10'), 'delivered');
    expect(w.offer).toBeUndefined();
    const after = await held(ctx, carol.partyId);
    expect(after.unlocked - before.unlocked).toBe(toUnits('10'));
    expect(await listOffers(ctx, carol.partyId)).toEqual([]);
  });

  it('to a receiver without one: offered (listed by delivery), then accepted → delivered', async () => {
    const w = await committedAs(await api.create(alice, bob, '7'), 'offered');
    const [incoming] = await listOffers(ctx, bob.partyId);
    expect(incoming).toMatchObject({ direction: 'in', sender: alice.partyId });
    expect(w.offer?.instructionCid).toBe(incoming?.instructionCid);
    expect(w.offer?.expiresAt).toBeDefined();
    expect(w.offer?.outcome).toBeUndefined();
    const listed = (
      await env.service.app.inject({
        method: 'GET',
        url: `/v1/withdrawals?delivery=offered&party=${encodeURIComponent(alice.partyId)}`,
        headers: operator,
      })
    ).json() as { items: View[] };
    expect(listed.items.map((x) => x.id)).toContain(w.id);
    expect((await held(ctx, bob.partyId)).unlocked).toBe(0n);

    const accepted = await acceptOffer(ctx, bob.partyId, incoming!.instructionCid);
    const done = await api.until(w.id, 'delivered', (x) => x.delivery === 'delivered');
    expect(done.offer).toMatchObject({
      instructionCid: incoming!.instructionCid,
      outcome: 'accepted',
      updateId: accepted.updateId,
    });
    expect((await held(ctx, bob.partyId)).unlocked).toBe(toUnits('7'));
    const actions = (await listAudit(env.store.db, { subject: `withdrawal:${w.id}` })).map((a) => a.action);
    expect(actions).toEqual(
      expect.arrayContaining([
        'withdrawal.committed',
        'withdrawal.delivery.offered',
        'withdrawal.delivery.delivered',
      ]),
    );
  });

  it('the accept is found also when the participant answers the sender’s updates a page of one at a time', async () => {
    const w = await committedAs(await api.create(alice, bob, '2'), 'offered');
    // Updates of the sender between the commit and the accept: a short page is no end of the range.
    await committedAs(await api.create(alice, carol, '1'), 'delivered');
    await committedAs(await api.create(alice, carol, '1'), 'delivered');
    const updates = LedgerApiClient.prototype.updates;
    const short = vi.spyOn(LedgerApiClient.prototype, 'updates').mockImplementation(async function (
      this: LedgerApiClient,
      ...a: Parameters<typeof updates>
    ) {
      return (await updates.apply(this, a)).slice(0, 1);
    });
    try {
      await acceptOffer(ctx, bob.partyId, w.offer!.instructionCid);
      const done = await api.until(w.id, 'delivered', (x) => x.delivery !== 'offered');
      expect(done.delivery).toBe('delivered');
      expect(short).toHaveBeenCalled();
    } finally {
      short.mockRestore();
    }
  });

  it('rejected by the receiver → returned (rejected), the amount back with the sender', async () => {
    const before = await held(ctx, alice.partyId);
    const w = await committedAs(await api.create(alice, bob, '3'), 'offered');
    expect((await held(ctx, alice.partyId)).locked).toBe(before.locked + toUnits('3'));
    const rejected = await rejectOffer(ctx, bob.partyId, w.offer!.instructionCid);
    const done = await api.until(w.id, 'returned', (x) => x.delivery === 'returned');
    expect(done.state).toBe('committed');
    expect(done.offer).toMatchObject({ outcome: 'rejected', updateId: rejected.updateId });
    expect(await held(ctx, alice.partyId)).toEqual(before);
  });

  it('an operator takes a pending offer back: signed once through the pipeline → returned (withdrawn)', async () => {
    const before = await held(ctx, alice.partyId);
    const w = await committedAs(await api.create(alice, bob, '4'), 'offered');
    const withdrawer = await env.auth(['withdrawer'], [alice.partyId]);
    const url = `/v1/withdrawals/${w.id}/withdraw-offer`;
    const denied = await env.service.app.inject({ method: 'POST', url, headers: withdrawer });
    expect(denied.statusCode).toBe(403);
    const sign = vi.spyOn(env.flow.signer, 'sign');
    try {
      const r = await env.service.app.inject({ method: 'POST', url, headers: operator });
      expect(r.statusCode).toBe(200);
      const done = r.json() as View;
      expect(done).toMatchObject({ state: 'committed', delivery: 'returned' });
      expect(done.offer).toMatchObject({ instructionCid: w.offer!.instructionCid, outcome: 'withdrawn' });
      expect(done.offer?.updateId).toBeDefined();
      expect(sign).toHaveBeenCalledTimes(1);
    } finally {
      sign.mockRestore();
    }
    expect(await listOffers(ctx, bob.partyId)).toEqual([]);
    expect(await held(ctx, alice.partyId)).toEqual(before);
    const audit = await listAudit(env.store.db, { subject: `withdrawal:${w.id}` });
    const signed = audit.filter(
      (a) => a.action === 'flow.signed' && (a.details as { flow?: string }).flow === 'offer-withdraw',
    );
    expect(signed).toHaveLength(1);
    expect(audit.at(-1)?.action).toBe('withdrawal.delivery.returned');
    // Nothing left to take back.
    const again = await env.service.app.inject({ method: 'POST', url, headers: operator });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'invalid_state' });
    expect(again.json().message).toBe(
      `withdrawal ${w.id} has no pending offer to withdraw: it is committed, delivery returned (offer withdrawn)`,
    );
    // A withdrawal delivered in one step has no offer to take back.
    const direct = await committedAs(await api.create(alice, carol, '1'), 'delivered');
    const none = await env.service.app.inject({
      method: 'POST',
      url: `/v1/withdrawals/${direct.id}/withdraw-offer`,
      headers: operator,
    });
    expect(none.statusCode).toBe(409);
  });

  it('a receiver hosted on the sandbox as a local party accepts through the sandbox control → delivered', async () => {
    const net = env.flow.net;
    const validator = { partyId: net.validatorParty } as PartyRecord;
    const w = await committedAs(await api.create(alice, validator, '6'), 'offered');
    const base = env.flow.sb.urls.ledgerApi.replace(/\/$/, '');
    const cid = w.offer!.instructionCid;
    const bad = await fetch(
      `${base}/sandbox/transfer-instructions/${cid}/accept`.replace(cid, `00${'ab'.repeat(33)}`),
      {
        method: 'POST',
      },
    );
    expect(bad.status).toBe(404);
    const r = await fetch(`${base}/sandbox/transfer-instructions/${cid}/accept`, { method: 'POST' });
    expect(r.status).toBe(200);
    const { updateId } = (await r.json()) as { updateId: string };
    const done = await api.until(w.id, 'delivered', (x) => x.delivery === 'delivered');
    expect(done.offer).toMatchObject({ outcome: 'accepted', updateId });
  });

  it('expired: the receiver did not answer before executeBefore → returned (expired)', async () => {
    const before = await held(ctx, alice.partyId);
    const executeBefore = new Date(Date.now() + 40_000).toISOString();
    const w = await committedAs(await api.create(alice, bob, '2', { executeBefore }), 'offered');
    const net = env.flow.net;
    net.clock.advance(45_000);
    net.sweep();
    const done = await api.until(w.id, 'returned', (x) => x.delivery === 'returned');
    expect(done.offer).toMatchObject({ outcome: 'expired' });
    expect(await held(ctx, alice.partyId)).toEqual(before);
    const metrics = await env.service.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/canton_signer_withdrawal_deliveries\{delivery="returned"\} 3/);
    expect(metrics.body).toMatch(/canton_signer_withdrawal_deliveries\{delivery="delivered"\} 7/);
  });
});

describe('withdrawals.requireDelivery', () => {
  let env: ServiceEnv;
  let alice: PartyRecord;
  let bob: PartyRecord;
  let carol: PartyRecord;
  let operator: Auth;
  const api = client(
    () => env,
    () => operator,
  );

  beforeAll(async () => {
    env = await serviceEnv({
      seed: 'withdrawal-require-delivery',
      service: { config: testConfig({ withdrawals: { requireDelivery: true, offerPollMs: 100 } }) },
    });
    alice = await env.addParty('alice', { fund: '1000' });
    bob = await env.addParty('bob');
    carol = await env.addParty('carol');
    givePreapproval(env.flow.net, carol.partyId);
    operator = await env.auth(['operator']);
  }, 60_000);
  afterAll(async () => env?.close());

  const signatures = async () => {
    const text = (await env.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    return [...text.matchAll(/^canton_signer_signatures_total\{[^}]*\} (\d+)$/gm)].reduce(
      (a, m) => a + Number(m[1]),
      0,
    );
  };

  it('refuses a withdrawal to a receiver without a preapproval before anything is signed', async () => {
    const sign = vi.spyOn(env.flow.signer, 'sign');
    const counted = await signatures();
    try {
      const w = await api.create(alice, bob, '5');
      const done = await api.until(w.id, 'final', (x) => TERMINAL.includes(x.state));
      expect(done.state).toBe('rejected');
      expect(done.lastError).toMatch(
        /^delivery_required: .*no valid transfer preapproval.*Nothing was signed/,
      );
      expect(done.delivery).toBeUndefined();
      expect(sign).not.toHaveBeenCalled();
      expect(await signatures()).toBe(counted);
      expect(env.flow.net.store.updates().filter((u) => u.commandId === w.commandId)).toEqual([]);
      const actions = (await listAudit(env.store.db, { subject: `withdrawal:${w.id}` })).map((a) => a.action);
      expect(actions).not.toContain('flow.signed');
      expect(actions).toEqual(expect.arrayContaining(['flow.refused', 'withdrawal.rejected']));
      const metrics = (await env.service.app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(metrics).toMatch(/canton_signer_refusals_total\{reason="delivery_required"\} 1/);
      expect(await listOffers({ ...env.flow.ctx, parties: env.store.parties }, bob.partyId)).toEqual([]);
    } finally {
      sign.mockRestore();
    }
  });

  it('a receiver with a valid preapproval is paid in one step', async () => {
    const w = await api.create(alice, carol, '5');
    const c = await api.until(w.id, 'delivered', (x) => x.delivery === 'delivered');
    expect(c.state).toBe('committed');
  });
});

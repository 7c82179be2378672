/**
 * Incoming and outgoing transfer offers (src/flows/offers.ts) against the
 * sandbox: the listing's fields and direction; who may act (only the receiver
 * accepts or rejects, only the sender withdraws: the participant refuses to
 * prepare anything else, nothing is signed); bad instruction ids and parties
 * outside the party book refused before any request; a tampered accept (an
 * extra root) refused before signing; an ambiguous accept resolved from the
 * completion stream with one transaction.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { CantonApiError } from '../../src/canton/errors.js';
import { listHoldings } from '../../src/flows/holdings.js';
import { acceptOffer, listOffers, rejectOffer, withdrawOffer } from '../../src/flows/offers.js';
import { Refusal } from '../../src/flows/refusal.js';
import { transfer } from '../../src/flows/transfer.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { ambiguousExecute, type FlowEnv, flowEnv } from '../support/flow-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;

beforeAll(async () => {
  env = await flowEnv({ seed: 'offers' });
  alice = await env.addParty('alice', { fund: '500' });
  bob = await env.addParty('bob', { scheme: 'ecdsa-p256' });
});
afterAll(async () => env?.close());

beforeEach(() => env.reset());

async function offer(amount: string, memo?: string): Promise<string> {
  const before = new Set((await listOffers(env.ctx, bob.partyId)).map((o) => o.instructionCid));
  await transfer(env.ctx, { from: alice.partyId, to: bob.partyId, amount, ...(memo ? { memo } : {}) });
  const fresh = (await listOffers(env.ctx, bob.partyId)).filter((o) => !before.has(o.instructionCid));
  expect(fresh).toHaveLength(1);
  return fresh[0]!.instructionCid;
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('expected a failure');
    },
    (e: unknown) => e,
  );
}

describe('listOffers', () => {
  it('is empty without offers; lists each pending offer for both sides with its fields', async () => {
    expect(await listOffers(env.ctx, bob.partyId)).toEqual([]);
    const cid = await offer('20', 'rent');
    const [incoming] = await listOffers(env.ctx, bob.partyId);
    expect(incoming).toMatchObject({
      instructionCid: cid,
      direction: 'in',
      sender: alice.partyId,
      receiver: bob.partyId,
      memo: 'rent',
      status: 'TransferPendingReceiverAcceptance',
    });
    expect(incoming!.amount).toMatch(/^20(\.0+)?$/);
    expect(Date.parse(incoming!.executeBefore!)).toBeGreaterThan(Date.parse(incoming!.requestedAt!));
    const [outgoing] = await listOffers(env.ctx, alice.partyId);
    expect(outgoing).toMatchObject({ instructionCid: cid, direction: 'out' });
    await withdrawOffer(env.ctx, alice.partyId, cid);
    expect(await listOffers(env.ctx, bob.partyId)).toEqual([]);
  });
});

describe('who may act', () => {
  it('the sender cannot accept or reject, the receiver cannot withdraw: nothing is signed', async () => {
    const cid = await offer('5');
    const sign = vi.spyOn(env.signer, 'sign');
    for (const run of [
      () => acceptOffer(env.ctx, alice.partyId, cid),
      () => rejectOffer(env.ctx, alice.partyId, cid),
      () => withdrawOffer(env.ctx, bob.partyId, cid),
    ]) {
      const e = await failure(run());
      expect(e).toBeInstanceOf(CantonApiError);
      expect((e as CantonApiError).code).toBe('DAML_AUTHORIZATION_ERROR');
    }
    expect(sign).not.toHaveBeenCalled();
    await rejectOffer(env.ctx, bob.partyId, cid);
    expect(await listOffers(env.ctx, alice.partyId)).toEqual([]);
  });

  it('refuses a malformed instruction id and a party outside the party book before any request', async () => {
    const ctxCalls = vi.spyOn(env.ledger, 'prepare');
    const e1 = await failure(acceptOffer(env.ctx, bob.partyId, 'not-a-cid'));
    expect(e1).toBeInstanceOf(Refusal);
    expect((e1 as Refusal).message).toMatch(/not a contract id/);
    const e2 = await failure(acceptOffer(env.ctx, env.net.mallory, `00${'a'.repeat(64)}`));
    expect(e2).toBeInstanceOf(Refusal);
    expect((e2 as Refusal).message).toMatch(/not in this signer's party book/);
    expect(ctxCalls).not.toHaveBeenCalled();
  });

  it('a contract that is not a transfer instruction: the registry answers 404', async () => {
    const [h] = await listHoldings(env.ctx, alice.partyId);
    const e = await failure(acceptOffer(env.ctx, bob.partyId, h!.cid));
    expect(e).toBeInstanceOf(CantonApiError);
    expect((e as CantonApiError).status).toBe(404);
    expect((e as CantonApiError).service).toBe('registry');
  });
});

describe('the pipeline around an answer', () => {
  it('a tampered accept (an extra root creating amulet for mallory) is refused before signing', async () => {
    const cid = await offer('6');
    env.sb.ctx.faults.inject({
      fault: { kind: 'tamper', change: 'extraRoot' },
      operation: 'ledger-api.prepare',
      times: 1,
    });
    const sign = vi.spyOn(env.signer, 'sign');
    const end = (await env.ledger.ledgerEnd()).offset;
    const e = await failure(acceptOffer(env.ctx, bob.partyId, cid));
    expect(e).toBeInstanceOf(Refusal);
    expect((e as Refusal).reason).toBe('intent_mismatch');
    expect((e as Refusal).problems.map((p) => p.reason)).toContain('root_count');
    expect(sign).not.toHaveBeenCalled();
    expect((await env.ledger.ledgerEnd()).offset).toBe(end);
    expect((await listOffers(env.ctx, bob.partyId)).map((o) => o.instructionCid)).toEqual([cid]);
    expect(env.journal.steps().slice(-1)).toEqual(['refused']);
    await rejectOffer(env.ctx, bob.partyId, cid);
  });

  it("refuses a withdrawal's command id (cs-wd-…) before anything is prepared", async () => {
    const cid = await offer('3');
    env.journal.records.length = 0;
    const e = await acceptOffer(env.ctx, bob.partyId, cid, { commandId: 'cs-wd-0000' }).then(
      () => undefined,
      (x: unknown) => x as Refusal,
    );
    expect(e?.reason).toBe('bad_request');
    expect(e?.message).toMatch(/is a withdrawal's command id/);
    expect(env.journal.records).toEqual([]);
    await rejectOffer(env.ctx, bob.partyId, cid);
  });

  it('an ambiguous accept is resolved from the completion stream: one transaction', async () => {
    const cid = await offer('7');
    env.journal.records.length = 0;
    const ctx = ambiguousExecute(env);
    const r = await acceptOffer(ctx, bob.partyId, cid, { commandId: `accept-${Date.now()}` });
    expect(r.outcome).toBe('committed-after-ambiguous');
    expect(env.net.store.updates().filter((u) => u.commandId === r.commandId)).toHaveLength(1);
    expect(await listOffers(env.ctx, bob.partyId)).toEqual([]);
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'ambiguous', 'resolved', 'committed']);
    expect(env.journal.records.at(-1)!.facts).toMatchObject({ instructionCid: cid, action: 'accept' });
  });
});

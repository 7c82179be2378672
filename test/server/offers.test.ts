/**
 * /v1/parties/:id/offers against the sandbox: a two-step transfer from alice
 * to bob is listed for both (in / out); bob accepts or rejects it, alice
 * withdraws one, each signed once through the pipeline and committed; the
 * wrong side is refused (nothing signed); an unknown party 404, a malformed
 * contract id 400; operators act, auditors only read.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { transfer } from '../../src/flows/transfer.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
let alice: PartyRecord;
let bob: PartyRecord;
let operator: { authorization: string };

beforeAll(async () => {
  env = await serviceEnv({ seed: 'offers-routes', worker: false });
  alice = await env.addParty('alice', { fund: '500' });
  bob = await env.addParty('bob', { scheme: 'ecdsa-p256' });
  operator = await env.auth(['operator']);
}, 60_000);
afterAll(async () => env?.close());

const get = (url: string, headers = operator) => env.service.app.inject({ method: 'GET', url, headers });
const post = (url: string, headers = operator, payload?: object) =>
  env.service.app.inject({ method: 'POST', url, headers, ...(payload ? { payload } : {}) });

/** A new offer from alice to bob; its instruction contract id. */
async function offer(amount: string): Promise<string> {
  const before = new Set(
    (await get(`/v1/parties/${bob.partyId}/offers`))
      .json()
      .offers.map((o: { instructionCid: string }) => o.instructionCid),
  );
  await transfer(env.service.deps.flows, { from: alice.partyId, to: bob.partyId, amount });
  const fresh = (await get(`/v1/parties/${bob.partyId}/offers`))
    .json()
    .offers.filter((o: { instructionCid: string }) => !before.has(o.instructionCid));
  expect(fresh).toHaveLength(1);
  return fresh[0].instructionCid;
}

describe('offers', () => {
  it('lists an offer for both sides, to operators and auditors', async () => {
    const cid = await offer('12');
    for (const h of [operator, await env.auth(['auditor'])]) {
      const incoming = await get(`/v1/parties/${encodeURIComponent(bob.partyId)}/offers`, h);
      expect(incoming.statusCode).toBe(200);
      expect(incoming.json().offers).toContainEqual(
        expect.objectContaining({ instructionCid: cid, direction: 'in', sender: alice.partyId }),
      );
      const outgoing = await get(`/v1/parties/${alice.partyId}/offers`, h);
      expect(outgoing.json().offers).toContainEqual(
        expect.objectContaining({ instructionCid: cid, direction: 'out' }),
      );
    }
  });

  it.each(['accept', 'reject'])(
    'the receiver may %s: signed once, committed, gone from the list',
    async (action) => {
      const cid = await offer('3');
      const sign = vi.spyOn(env.flow.signer, 'sign');
      const commandId = `offer-${action}-${Date.now()}`;
      const r = await post(`/v1/parties/${bob.partyId}/offers/${cid}/${action}`, operator, { commandId });
      expect(r.statusCode, r.body).toBe(200);
      expect(r.json()).toMatchObject({
        action,
        partyId: bob.partyId,
        instructionCid: cid,
        commandId,
        outcome: 'committed',
      });
      expect(sign).toHaveBeenCalledTimes(1);
      sign.mockRestore();
      const left = (await get(`/v1/parties/${bob.partyId}/offers`)).json().offers;
      expect(left.map((o: { instructionCid: string }) => o.instructionCid)).not.toContain(cid);
    },
  );

  it('the sender withdraws without a body; the wrong side is refused with nothing signed', async () => {
    const cid = await offer('4');
    const sign = vi.spyOn(env.flow.signer, 'sign');
    const wrong = await post(`/v1/parties/${alice.partyId}/offers/${cid}/accept`);
    expect(wrong.statusCode).toBeGreaterThanOrEqual(400);
    expect(wrong.statusCode).not.toBe(500);
    expect(sign).not.toHaveBeenCalled();
    sign.mockRestore();
    const r = await post(`/v1/parties/${alice.partyId}/offers/${cid}/withdraw`);
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json().action).toBe('withdraw');
  });

  it('errors: unknown party 404, malformed contract id and body 400; auditors cannot act', async () => {
    const cid = `00${'ab'.repeat(32)}`;
    const stranger = encodeURIComponent(`stranger::1220${'ab'.repeat(32)}`);
    const unknown = await post(`/v1/parties/${stranger}/offers/${cid}/accept`);
    expect(unknown.statusCode).toBe(404);
    expect((await get(`/v1/parties/${stranger}/offers`)).statusCode).toBe(404);
    const badCid = await post(`/v1/parties/${bob.partyId}/offers/xyz/accept`);
    expect(badCid.statusCode).toBe(400);
    expect(badCid.json().field).toBe('params.contractId');
    const badBody = await post(`/v1/parties/${bob.partyId}/offers/${cid}/accept`, operator, {
      commandId: '',
    });
    expect(badBody.json().field).toBe('body.commandId');
    const auditor = await post(
      `/v1/parties/${bob.partyId}/offers/${cid}/accept`,
      await env.auth(['auditor']),
    );
    expect(auditor.statusCode).toBe(403);
  });
});

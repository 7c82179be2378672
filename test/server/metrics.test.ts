/**
 * /metrics counts what the service did: a withdrawal carried to the ledger
 * (signature by backend and scheme, flow latency, withdrawals by state), a
 * refused sign request (refusals by reason) and a key backend error.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceMetrics } from '../../src/server/metrics.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { preapprovalProposal } from '../support/flow-env.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
let alice: PartyRecord;
let bob: PartyRecord;

beforeAll(async () => {
  env = await serviceEnv({ seed: 'metrics', worker: true });
  alice = await env.addParty('alice', { fund: '1000' });
  bob = await env.addParty('bob', { scheme: 'ecdsa-p256' });
}, 60_000);
afterAll(async () => env?.close());

const metrics = async () => (await env.service.app.inject({ method: 'GET', url: '/metrics' })).body;

/** The value of one sample line, 0 when absent. */
function sample(text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

async function waitFor<T>(f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('/metrics', () => {
  it('counts a committed withdrawal: signature, flow latency, state', async () => {
    const before = await metrics();
    const r = await env.service.app.inject({
      method: 'POST',
      url: '/v1/withdrawals',
      headers: { ...(await env.auth(['withdrawer'], [alice.partyId])), 'idempotency-key': randomUUID() },
      payload: { party: alice.partyId, receiver: bob.partyId, amount: '12.5' },
    });
    expect(r.statusCode).toBe(201);
    const id = r.json().id as string;
    await waitFor(async () =>
      (await env.store.withdrawals.get(id))?.state === 'committed' ? true : undefined,
    );
    const after = await metrics();
    const sig = 'canton_signer_signatures_total';
    expect(sample(after, sig, 'backend="file",scheme="ed25519"')).toBe(
      sample(before, sig, 'backend="file",scheme="ed25519"') + 1,
    );
    expect(
      sample(after, 'canton_signer_flow_duration_seconds_count', 'flow="withdrawal",outcome="committed"'),
    ).toBe(1);
    expect(sample(after, 'canton_signer_withdrawals', 'state="committed"')).toBe(1);
    expect(sample(after, 'canton_signer_withdrawals', 'state="received"')).toBe(0);
  });

  it('counts a refusal by its reason, and a key backend error by backend and code', async () => {
    const res = await env.flow.ledger.prepare({
      userId: env.flow.ctx.userId,
      commandId: randomUUID(),
      actAs: [alice.partyId],
      synchronizerId: env.flow.net.synchronizerId,
      commands: [preapprovalProposal(env.flow.net, alice.partyId, bob.partyId)],
    });
    const body = {
      party: alice.partyId,
      preparedTransaction: res.preparedTransaction,
      hash: Buffer.alloc(32, 7).toString('base64'),
      hashingScheme: 'v2',
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
    };
    const operator = await env.auth(['operator']);
    const refused = await env.service.app.inject({
      method: 'POST',
      url: '/v1/sign',
      headers: operator,
      payload: body,
    });
    expect(refused.statusCode).toBe(422);
    expect(sample(await metrics(), 'canton_signer_refusals_total', 'reason="hash_mismatch"')).toBe(1);

    await env.flow.signer.disable(alice.keyLabel);
    try {
      const r = await env.service.app.inject({
        method: 'POST',
        url: '/v1/sign',
        headers: operator,
        payload: { ...body, hash: res.preparedTransactionHash },
      });
      expect(r.statusCode).toBe(409);
      expect(r.json().code).toBe('key_disabled');
      expect(
        sample(
          await metrics(),
          'canton_signer_key_backend_errors_total',
          'backend="file",code="key_disabled"',
        ),
      ).toBe(1);
    } finally {
      await env.flow.signer.enable(alice.keyLabel);
    }
  });
});

describe('the oldest pending withdrawal', () => {
  it("is exposed per pending state, as the service's store reports it", async () => {
    const m = new ServiceMetrics({
      defaults: false,
      oldestPendingAges: async () => ({ received: 0, submitted: 3600.5 }),
    });
    const text = await m.text();
    expect(text).toContain('canton_signer_withdrawal_oldest_pending_seconds{state="submitted"} 3600.5');
    expect(text).toContain('canton_signer_withdrawal_oldest_pending_seconds{state="received"} 0');
  });

  it('is wired to the store in the service', async () => {
    const text = (await env.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toMatch(/canton_signer_withdrawal_oldest_pending_seconds\{state="awaiting_signature"\} \d/);
    expect(text).toMatch(/canton_signer_withdrawal_oldest_pending_seconds\{state="awaiting_approval"\} \d/);
    expect(text).toMatch(/canton_signer_withdrawals\{state="awaiting_approval"\} \d/);
  });
});

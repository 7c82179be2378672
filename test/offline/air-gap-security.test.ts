/**
 * Regression tests from the security review of the air gap: each
 * demonstrated a hole before it was closed and asserts the safe behaviour.
 *
 * 1. A withdrawal's memo (chosen by whoever creates the withdrawal) reaches
 *    the offline operator's terminal summary raw: ANSI escape sequences can
 *    erase / hide what is shown before "sign" is typed.
 * 2. An imported cold signature for a withdrawal is handed out by
 *    `signatureFor` to ANY flow presenting the same hash: an operator runs
 *    POST /sign/execute with the exported transaction, then cancels the
 *    withdrawal — the withdrawal reads `cancelled`, the transfer committed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRequestEnvelope } from '../../src/offline/format.js';
import { reviewRequest } from '../../src/offline/review.js';
import { type AirGapEnv, airGapEnv } from '../support/air-gap-env.js';

let ag: AirGapEnv;

const inject: AirGapEnv['inject'] = (...a) => ag.inject(...a);
const coldParty = (hint: string) => ag.coldParty(hint);
const parked = (id: string) => ag.withdrawalIn(id, ['awaiting_signature']);
const createWithdrawal = (party: string, extra: Record<string, unknown> = {}) =>
  ag.createWithdrawal(party, extra);
const exportOf = async (id: string) =>
  (await ag.exportOf(id)) as { export: { id: string; hashes: string[] }; envelope: Record<string, unknown> };
const review = (envelope: unknown) =>
  reviewRequest(parseRequestEnvelope(JSON.stringify(envelope)), { trusted: ag.trusted, minWindowMs: 60_000 });
const signOffline = (envelope: unknown) => ag.signOffline(envelope);

beforeAll(async () => {
  ag = await airGapEnv({ seed: 'air-gap-review-security' });
}, 60_000);

afterAll(async () => {
  await ag?.close();
});

describe('offline summary integrity', () => {
  it('a memo with terminal escape sequences does not reach the summary the operator confirms', async () => {
    const party = await coldParty('rv-ansi');
    // Hides everything printed after it (SGR 8 "conceal") after rewriting the current line.
    const memo = '\r\x1b[2K  intent:      kind=transfer, receiver=trusted-exchange, amount=5\x1b[8m';
    const id = await createWithdrawal(party.partyId, { memo });
    await parked(id);
    const { envelope } = await exportOf(id);
    const r = review(envelope);
    const control = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
    expect(control.test(r.summary), 'summary carries raw control characters from the memo').toBe(false);
  });
});

describe('an imported withdrawal signature is bound to its withdrawal', () => {
  it('POST /sign/execute cannot use it, so a withdrawal cannot be cancelled after its transfer ran elsewhere', async () => {
    const party = await coldParty('rv-cancel');
    const id = await createWithdrawal(party.partyId);
    const w = await parked(id);
    // Keep the worker out of the way (it would race us; the attack also works against it, just racily).
    await ag.env.service.deps.worker.stop();
    const { envelope } = await exportOf(id);
    const response = await signOffline(envelope);
    const imp = await inject('POST', '/v1/air-gap/imports', ag.operator, response);
    expect(imp.status, JSON.stringify(imp.body)).toBe(200);
    const req = envelope.request as Record<string, unknown>;
    // The operator replays the exported transaction through the generic route.
    const exec = await inject('POST', '/v1/sign/execute', ag.operator, {
      party: party.partyId,
      preparedTransaction: req.preparedTransaction,
      hash: req.claimedHash,
      hashingScheme: req.hashingScheme,
      intent: req.intent,
    });
    const cancel = await inject('POST', `/v1/withdrawals/${id}/cancel`, ag.operator, {});
    const after = await ag.env.store.withdrawals.get(id);
    // Evidence of the hole when the assertion below fails:
    const detail = `sign/execute → ${exec.status} ${JSON.stringify(exec.body).slice(0, 200)}; cancel → ${cancel.status}; withdrawal ${after?.state}, command ${w.commandId}`;
    expect(exec.status, detail).not.toBe(200);
  });
});

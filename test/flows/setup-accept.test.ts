/**
 * setup-accept against the sandbox validator: the operator proposes, the
 * signer accepts through the one pipeline (TransferPreapproval and
 * ValidatorRight appear; the journal shows each step); a second call signs
 * nothing; a proposal for another party, a party without proposal, a
 * non-Ed25519 key and a tampered prepare-accept are refused before any
 * signature; a lost submit-accept answer is resolved by looking the
 * preapproval up.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { acceptSetupProposal } from '../../src/flows/setup-accept.js';
import { str } from '../../src/sandbox/ledger/value-json.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type FlowEnv, flowEnv, refusal } from '../support/flow-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;

beforeAll(async () => {
  env = await flowEnv({ seed: 'setup-accept' });
  alice = await env.addParty('alice');
  bob = await env.addParty('bob');
});
afterAll(async () => env?.close());
beforeEach(() => env.reset());

const preapprovalsOf = (p: PartyRecord) =>
  env.net.store
    .activeContracts('TransferPreapproval')
    .filter((c) => str(c.argument, 'receiver') === p.partyId);
const validatorRightsOf = (p: PartyRecord) =>
  env.net.store.activeContracts('ValidatorRight').filter((c) => str(c.argument, 'user') === p.partyId);

describe('acceptSetupProposal', () => {
  it('accepts the proposal: TransferPreapproval from the validator and ValidatorRight', async () => {
    const { contract_id } = await env.validator.createSetupProposal({ user_party_id: alice.partyId });
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await acceptSetupProposal(env.ctx, alice.partyId);
    expect(sign).toHaveBeenCalledTimes(1);
    expect(r.alreadyAccepted).toBe(false);
    expect(r.proposalCid).toBe(contract_id);
    expect(r.provider).toBe(env.net.validatorParty);
    expect(r.updateId).toMatch(/^1220[0-9a-f]{64}$/);
    const pre = env.net.store.get(r.preapprovalCid)!;
    expect(pre.templateId.entityName).toBe('TransferPreapproval');
    expect(str(pre.argument, 'receiver')).toBe(alice.partyId);
    expect(str(pre.argument, 'provider')).toBe(env.net.validatorParty);
    expect(validatorRightsOf(alice)).toHaveLength(1);
    expect(env.net.store.get(contract_id)).toBeUndefined(); // the proposal is consumed
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'committed']);
    const committed = env.journal.records.at(-1)!;
    expect(committed.facts).toMatchObject({ preapprovalCid: r.preapprovalCid, proposalCid: contract_id });
    expect(committed.intent).toEqual({
      kind: 'setup-proposal-accept',
      party: alice.partyId,
      proposalCid: contract_id,
      validator: env.net.validatorParty,
    });
  });

  it('is idempotent: the second call returns the preapproval and signs nothing', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const first = preapprovalsOf(alice)[0]!;
    const r = await acceptSetupProposal(env.ctx, alice.partyId);
    expect(r).toMatchObject({
      alreadyAccepted: true,
      preapprovalCid: first.contractId,
      provider: env.net.validatorParty,
    });
    expect(sign).not.toHaveBeenCalled();
    expect(preapprovalsOf(alice)).toHaveLength(1);
    expect(env.journal.records).toEqual([]);
  });

  it("refuses another party's proposal and a party without one, before signing", async () => {
    const { contract_id } = await env.validator.createSetupProposal({ user_party_id: bob.partyId });
    const carol = await env.addParty('carol');
    const sign = vi.spyOn(env.signer, 'sign');
    const prep = vi.spyOn(env.validator, 'prepareAcceptSetupProposal');
    const other = await refusal(acceptSetupProposal(env.ctx, carol.partyId, { proposalCid: contract_id }));
    expect(other.reason).toBe('bad_request');
    expect(other.message).toBe(
      `proposal ${contract_id} is for party ${bob.partyId}, not for ${carol.partyId}`,
    );
    const none = await refusal(acceptSetupProposal(env.ctx, carol.partyId));
    expect(none.reason).toBe('bad_request');
    expect(none.message).toMatch(/has no ExternalPartySetupProposal for carol::/);
    expect(sign).not.toHaveBeenCalled();
    expect(prep).not.toHaveBeenCalled();
    expect(env.net.store.get(contract_id)).toBeDefined();
  });

  it('refuses a tampered prepare-accept (extra root) with zero signatures; the proposal stays', async () => {
    env.sb.ctx.faults.inject({
      fault: { kind: 'tamper', change: 'extraRoot' },
      operation: 'validator.prepareAcceptExternalPartySetupProposal',
      times: 1,
    });
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(acceptSetupProposal(env.ctx, bob.partyId));
    expect(e.reason).toBe('intent_mismatch');
    expect(e.problems.map((p) => p.reason)).toContain('root_count');
    expect(sign).not.toHaveBeenCalled();
    expect(preapprovalsOf(bob)).toHaveLength(0);
    expect(env.journal.steps()).toEqual(['refused']);
  });

  it('resolves a lost submit-accept answer by finding the preapproval (committed-after-ambiguous)', async () => {
    env.sb.ctx.faults.inject({
      fault: { kind: 'lostResponse' },
      operation: 'validator.submitAcceptExternalPartySetupProposal',
      times: 1,
    });
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await acceptSetupProposal(env.ctx, bob.partyId);
    expect(sign).toHaveBeenCalledTimes(1);
    expect(r.flow?.outcome).toBe('committed-after-ambiguous');
    expect(r.updateId).toBeUndefined();
    expect(preapprovalsOf(bob).map((c) => c.contractId)).toEqual([r.preapprovalCid]);
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'ambiguous', 'resolved', 'committed']);
  });

  it('refuses a party whose key is not Ed25519 before anything is prepared', async () => {
    const dave = await env.addParty('dave', { scheme: 'ecdsa-p256' });
    await env.validator.createSetupProposal({ user_party_id: dave.partyId });
    const prep = vi.spyOn(env.validator, 'prepareAcceptSetupProposal');
    const e = await refusal(acceptSetupProposal(env.ctx, dave.partyId));
    expect(e.reason).toBe('bad_request');
    expect(e.message).toMatch(/Ed25519 keys only/);
    expect(prep).not.toHaveBeenCalled();
  });
});

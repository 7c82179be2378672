/**
 * setup-accept against the sandbox validator: the operator proposes, the
 * signer accepts through the one pipeline (TransferPreapproval and
 * ValidatorRight appear; the journal shows each step); a second call signs
 * nothing; a proposal for another party, a party without proposal, a
 * non-Ed25519 key and a tampered prepare-accept are refused before any
 * signature; a lost submit-accept answer is resolved by looking the
 * preapproval up. Against an untrusted validator: a proposal naming another
 * validator than the pinned `validatorParty`, a DSO other than Scan's and a
 * preapproval expiring more than 366 days ahead are refused before any
 * signature; "already accepted" and the preapproval watch check the receiver,
 * the provider (when pinned) and the DSO of what the validator reports.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FlowContext } from '../../src/flows/context.js';
import { watchPreapprovals } from '../../src/flows/preapproval-watch.js';
import { acceptSetupProposal, MAX_PREAPPROVAL_LIFETIME_MS } from '../../src/flows/setup-accept.js';
import type { Intent } from '../../src/intent/model.js';
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
    const { expires, ...rest } = committed.intent as Intent & { kind: 'setup-proposal-accept' };
    expect(rest).toEqual({
      kind: 'setup-proposal-accept',
      party: alice.partyId,
      proposalCid: contract_id,
      validator: env.net.validatorParty,
      dso: env.net.dso,
    });
    // The expiry bound: from the signer's now (before the preapproval's validFrom) to 366 days on.
    const after = Date.parse(expires!.after);
    expect(Date.parse(expires!.notAfter) - after).toBe(MAX_PREAPPROVAL_LIFETIME_MS);
    expect(BigInt(after) * 1000n).toBeLessThanOrEqual(env.net.clock.now());
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

// ---- an untrusted validator: the provider, the DSO and the expiry do not come from it alone ----------

/** A party that is not the sandbox's validator, in the validator's namespace (as an operator could make). */
const otherValidator = () => `other-validator::${env.net.validatorParty.split('::')[1]}`;
const pinned = (party: string): FlowContext => ({ ...env.ctx, validatorParty: party }) as FlowContext;
const DAY_US = 86_400_000_000n;

describe('acceptSetupProposal against an untrusted validator', () => {
  it('refuses a proposal whose validator is not the pinned validator party, before preparing', async () => {
    const erin = await env.addParty('erin');
    const { contract_id } = await env.validator.createSetupProposal({ user_party_id: erin.partyId });
    const sign = vi.spyOn(env.signer, 'sign');
    const prep = vi.spyOn(env.validator, 'prepareAcceptSetupProposal');
    const e = await refusal(acceptSetupProposal(pinned(otherValidator()), erin.partyId));
    expect(e.reason).toBe('bad_request');
    expect(e.message).toBe(
      `proposal ${contract_id} names ${env.net.validatorParty} as validator, not the configured validator party ${otherValidator()}`,
    );
    expect(prep).not.toHaveBeenCalled();
    expect(sign).not.toHaveBeenCalled();
    // Pinned to the real validator party, the same proposal is accepted.
    const r = await acceptSetupProposal(pinned(env.net.validatorParty), erin.partyId);
    expect(r).toMatchObject({ alreadyAccepted: false, provider: env.net.validatorParty });
    expect(env.journal.records.at(-1)!.intent).toMatchObject({ validator: env.net.validatorParty });
  });

  it('refuses an acceptance under another DSO than Scan names, with zero signatures', async () => {
    const fred = await env.addParty('fred');
    await env.validator.createSetupProposal({ user_party_id: fred.partyId });
    const realDso = env.net.dso;
    const fakeDso = `DSO::${realDso.split('::')[1]!.replace(/.$/, (c) => (c === '0' ? '1' : '0'))}`;
    vi.spyOn(env.scan, 'getDsoPartyId').mockResolvedValue({ dso_party_id: fakeDso });
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(acceptSetupProposal(env.ctx, fred.partyId));
    expect(e.reason).toBe('intent_mismatch');
    expect(e.problems.map((p) => [p.reason, p.where])).toEqual([['party_mismatch', 'node 0: dso']]);
    expect(e.problems[0]!.message).toBe(
      `the setup proposal names ${realDso} as dso but the DSO is ${fakeDso}.`,
    );
    expect(sign).not.toHaveBeenCalled();
    expect(preapprovalsOf(fred)).toHaveLength(0);
  });

  it('refuses a preapproval expiring more than 366 days ahead', async () => {
    const gina = await env.addParty('gina');
    await env.validator.createSetupProposal({ user_party_id: gina.partyId });
    // The signer's clock 300 days behind the network's: the 90-day preapproval lies 390 days ahead.
    const behind = { ...env.ctx, nowUs: () => env.net.clock.now() - 300n * DAY_US };
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(acceptSetupProposal(behind, gina.partyId));
    expect(e.reason).toBe('intent_mismatch');
    expect(e.problems.map((p) => p.reason)).toEqual(['deadline_mismatch']);
    expect(e.problems[0]!.message).toMatch(
      /^expiresAt is .* but the intent wants it after .* and no later than /,
    );
    expect(sign).not.toHaveBeenCalled();
  });

  it('does not take "already accepted" from a preapproval for another receiver or provider', async () => {
    const hugo = await env.addParty('hugo');
    const real = env.validator.lookupTransferPreapproval.bind(env.validator);
    const alices = await real(alice.partyId); // accepted in the first test
    const lie = vi.spyOn(env.validator, 'lookupTransferPreapproval').mockResolvedValue(alices);
    const e = await refusal(acceptSetupProposal(env.ctx, hugo.partyId));
    expect(e.reason).toBe('intent_mismatch');
    expect(e.problems.map((p) => p.where)).toEqual([
      `preapproval ${alices.transfer_preapproval.contract.contract_id}: receiver`,
    ]);
    expect(e.message).toMatch(`names ${alice.partyId} as receiver, but it is looked up for ${hugo.partyId}`);
    lie.mockRestore();
    // Alice's own preapproval, when the pinned validator party is another: not taken either.
    const other = await refusal(acceptSetupProposal(pinned(otherValidator()), alice.partyId));
    expect(other.reason).toBe('intent_mismatch');
    expect(other.problems.map((p) => p.where)).toEqual([
      `preapproval ${alices.transfer_preapproval.contract.contract_id}: provider`,
    ]);
    expect((await acceptSetupProposal(pinned(env.net.validatorParty), alice.partyId)).alreadyAccepted).toBe(
      true,
    );
  });
});

describe('watchPreapprovals against an untrusted validator', () => {
  const one = (ctx: FlowContext, p: PartyRecord) =>
    watchPreapprovals({ ...ctx, parties: { ...ctx.parties, list: async () => [p] } } as FlowContext);

  it('reports a preapproval the proxy returns for another receiver as missing, with the problem', async () => {
    const [ok] = await one(env.ctx, alice);
    expect(ok).toMatchObject({ status: 'ok', willRenew: true, provider: env.net.validatorParty });
    expect(ok!.problem).toBeUndefined();
    const ivan = await env.addParty('ivan');
    const alices = await env.validator.scanProxyTransferPreapproval(alice.partyId);
    vi.spyOn(env.validator, 'scanProxyTransferPreapproval').mockResolvedValue(alices);
    const [r] = await one(env.ctx, ivan);
    expect(r).toMatchObject({ partyId: ivan.partyId, status: 'missing', willRenew: false });
    expect(r!.problem).toMatch(`names ${alice.partyId} as receiver, but it is looked up for ${ivan.partyId}`);
  });

  it('does not report renewal by the validator when the provider is not the pinned validator party', async () => {
    const [r] = await one(pinned(otherValidator()), alice);
    expect(r).toMatchObject({ status: 'ok', willRenew: false, provider: env.net.validatorParty });
    expect(r!.problem).toMatch(`but the validator party is ${otherValidator()}`);
    const [pinnedOk] = await one(pinned(env.net.validatorParty), alice);
    expect(pinnedOk).toMatchObject({ status: 'ok', willRenew: true });
  });
});

/**
 * Generic sign-and-execute with a prepared transaction from the sandbox
 * Ledger API (a TransferPreapprovalProposal create): with the right intent it
 * is signed once and executed; with an intent naming another template, choice,
 * contract or provider it is refused as intent_mismatch with no signature;
 * verify-only signs nothing; a caller's command id must be the transaction's;
 * a lost execute answer is resolved from completions by the metadata's
 * command id; the same transaction twice is a definite rejection.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { signAndExecute, signOnly, verifyOnly } from '../../src/flows/sign-execute.js';
import { base64ToBytes, bytesToHex } from '../../src/hashing/input.js';
import { str } from '../../src/sandbox/ledger/value-json.js';
import type { PartyRecord } from '../../src/store/parties.js';
import {
  type FlowEnv,
  flowEnv,
  PREAPPROVAL_PROPOSAL_TEMPLATE,
  preapprovalProposal,
  refusal,
  takenCommandError,
} from '../support/flow-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;

beforeAll(async () => {
  env = await flowEnv({ seed: 'sign-execute' });
  alice = await env.addParty('alice');
  bob = await env.addParty('bob', { scheme: 'ecdsa-p256' });
});
afterAll(async () => env?.close());
beforeEach(() => env.reset());

/** A proposal create prepared by the participant for `p`, naming `provider`. */
async function prepareProposal(p: PartyRecord, provider: string, commandId = randomUUID()) {
  const res = await env.ledger.prepare({
    userId: env.ctx.userId,
    commandId,
    actAs: [p.partyId],
    synchronizerId: env.net.synchronizerId,
    commands: [preapprovalProposal(env.net, p.partyId, provider)],
  });
  return {
    commandId,
    preparedTransaction: res.preparedTransaction,
    claimedHash: res.preparedTransactionHash,
    scheme: 'v2' as const,
  };
}

const proposalsFor = (p: PartyRecord) =>
  env.net.store
    .activeContracts('TransferPreapprovalProposal')
    .filter((c) => str(c.argument, 'receiver') === p.partyId);

describe('signAndExecute', () => {
  it('executes a supplied transaction whose intent matches; one signature', async () => {
    const prep = await prepareProposal(alice, bob.partyId);
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await signAndExecute(env.ctx, {
      partyId: alice.partyId,
      ...prep,
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
      commandId: prep.commandId,
    });
    expect(sign).toHaveBeenCalledTimes(1);
    expect(r.outcome).toBe('committed');
    expect(r.attempts).toBe(1);
    expect(r.result.commandId).toBe(prep.commandId);
    expect(r.result.updateId).toMatch(/^1220[0-9a-f]{64}$/);
    expect(r.hash).toBe(bytesToHex(base64ToBytes(prep.claimedHash)));
    expect(proposalsFor(alice)).toHaveLength(1);
    expect(str(proposalsFor(alice)[0]!.argument, 'provider')).toBe(bob.partyId);
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'committed']);
  });

  it.each([
    [
      'another template',
      { kind: 'create', template: '#splice-amulet:Splice.Amulet:Amulet' },
      'kind_mismatch',
    ],
    [
      'an exercise',
      {
        kind: 'exercise',
        template: PREAPPROVAL_PROPOSAL_TEMPLATE,
        choice: 'Archive',
        contractId: `00${'ab'.repeat(32)}`,
      },
      'kind_mismatch',
    ],
    ['another provider', { kind: 'preapproval-proposal', provider: 'x' }, 'party_mismatch'],
  ])(
    'refuses the transaction under an intent naming %s: intent_mismatch, no signature',
    async (_, partial, reason) => {
      const prep = await prepareProposal(alice, env.net.validatorParty);
      const before = proposalsFor(alice).length;
      const sign = vi.spyOn(env.signer, 'sign');
      const intent =
        partial.kind === 'preapproval-proposal'
          ? { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId }
          : { ...partial, party: alice.partyId };
      const e = await refusal(signAndExecute(env.ctx, { partyId: alice.partyId, ...prep, intent }));
      expect(e.reason).toBe('intent_mismatch');
      expect(e.problems.map((p) => p.reason)).toContain(reason);
      expect(sign).not.toHaveBeenCalled();
      expect(proposalsFor(alice)).toHaveLength(before);
      expect(env.journal.steps()).toEqual(['refused']);
    },
  );

  it('verifyOnly reports what signing would authorise and signs nothing', async () => {
    const prep = await prepareProposal(alice, bob.partyId);
    const before = proposalsFor(alice).length;
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await verifyOnly(env.ctx, {
      partyId: alice.partyId,
      ...prep,
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
    });
    expect(r.hash).toBe(bytesToHex(base64ToBytes(prep.claimedHash)));
    expect(r.commandId).toBe(prep.commandId);
    expect(r.actions.map((a) => a.kind)).toEqual(['preapproval-proposal']);
    expect(r.window.latestSource).toBe('preparation-time tolerance');
    expect(sign).not.toHaveBeenCalled();
    expect(proposalsFor(alice)).toHaveLength(before);
    const bad = await refusal(
      verifyOnly(env.ctx, {
        partyId: alice.partyId,
        ...prep,
        intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: alice.partyId },
      }),
    );
    expect(bad.reason).toBe('intent_mismatch');
    expect(sign).not.toHaveBeenCalled();
  });

  it('refuses an invalid intent naming the field, a foreign command id and a wrong claimed hash', async () => {
    const prep = await prepareProposal(alice, bob.partyId);
    const sign = vi.spyOn(env.signer, 'sign');
    const field = await refusal(
      signAndExecute(env.ctx, {
        partyId: alice.partyId,
        ...prep,
        intent: { kind: 'preapproval-proposal', receiver: alice.partyId },
      }),
    );
    expect(field.reason).toBe('bad_request');
    expect(field.message).toMatch(/^intent\.provider: /);
    const cmd = await refusal(
      signAndExecute(env.ctx, {
        partyId: alice.partyId,
        ...prep,
        commandId: 'another-command',
        intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
      }),
    );
    expect(cmd.reason).toBe('bad_request');
    expect(cmd.message).toMatch(/^commandId: the transaction's metadata carries command id /);
    const hash = await refusal(
      signAndExecute(env.ctx, {
        partyId: alice.partyId,
        ...prep,
        claimedHash: 'ab'.repeat(32),
        intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
      }),
    );
    expect(hash.reason).toBe('hash_mismatch');
    expect(sign).not.toHaveBeenCalled();
  });

  it("refuses a transaction under a withdrawal's command id (cs-wd-…): signing or executing it, nothing signed", async () => {
    const prep = await prepareProposal(alice, bob.partyId, `cs-wd-${randomUUID()}`);
    const { commandId: _caller, ...noId } = prep;
    const sign = vi.spyOn(env.signer, 'sign');
    const intent = { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId } as const;
    for (const run of [signAndExecute, signOnly]) {
      const e = await refusal(run(env.ctx, { partyId: alice.partyId, ...noId, intent }));
      expect(e.reason).toBe('bad_request');
      expect(e.message).toMatch(/is a withdrawal's command id/);
    }
    expect(sign).not.toHaveBeenCalled();
  });

  it('signs with a non-Ed25519 key on the Ledger API path', async () => {
    const prep = await prepareProposal(bob, alice.partyId);
    const r = await signAndExecute(env.ctx, {
      partyId: bob.partyId,
      ...prep,
      intent: { kind: 'preapproval-proposal', receiver: bob.partyId, provider: alice.partyId },
    });
    expect(r.signature.signingAlgorithmSpec).toMatch(/EC_DSA/);
    expect(proposalsFor(bob)).toHaveLength(1);
  });

  it('resolves a lost execute answer from completions by the command id in the metadata', async () => {
    const prep = await prepareProposal(alice, bob.partyId);
    const before = proposalsFor(alice).length;
    env.sb.ctx.faults.inject({
      fault: { kind: 'lostResponse' },
      operation: 'ledger-api.executeAndWait',
      times: 1,
    });
    const r = await signAndExecute(env.ctx, {
      partyId: alice.partyId,
      ...prep,
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
    });
    expect(r.outcome).toBe('committed-after-ambiguous');
    expect(r.result.commandId).toBe(prep.commandId);
    expect(proposalsFor(alice)).toHaveLength(before + 1);
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'ambiguous', 'resolved', 'committed']);
  });

  it('the same transaction executed twice answers with the first commit (duplicate found in completions), never a second commit nor a rejection', async () => {
    const prep = await prepareProposal(alice, bob.partyId);
    const intent = { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId };
    const before = proposalsFor(alice).length;
    const first = await signAndExecute(env.ctx, { partyId: alice.partyId, ...prep, intent });
    const again = await signAndExecute(env.ctx, { partyId: alice.partyId, ...prep, intent });
    expect(again.result.updateId).toBe(first.result.updateId);
    expect(again.result.commandId).toBe(first.result.commandId);
    expect(proposalsFor(alice)).toHaveLength(before + 1);
  });

  it('a command id still in flight (or whose completion cannot be found) is outcome_unknown, not a rejection', async () => {
    const prep = await prepareProposal(alice, bob.partyId);
    const intent = { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId };
    // The ledger answers "already in flight" and the completion stream has nothing for it.
    vi.spyOn(env.ledger, 'executeAndWait').mockRejectedValueOnce(
      takenCommandError('SUBMISSION_ALREADY_IN_FLIGHT'),
    );
    const e = await refusal(signAndExecute(env.ctx, { partyId: alice.partyId, ...prep, intent }));
    expect(e.reason).toBe('outcome_unknown');
    expect(e.details.code).toBe('SUBMISSION_ALREADY_IN_FLIGHT');
  });
});

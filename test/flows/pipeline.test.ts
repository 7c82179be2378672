/**
 * The signing pipeline on its own, against the sandbox participant, with the
 * simplest transaction a party signs (creating a TransferPreapprovalProposal):
 * each refusal happens before any signature exists (the signer is spied on),
 * names its reason, and leaves nothing on the ledger; the journal shows each
 * step; an ambiguous execute is resolved from the completion stream; a stale
 * rejection is re-prepared under the same command id; an outcome that cannot
 * be established is never retried.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { CantonApiError } from '../../src/canton/errors.js';
import type { FlowContext } from '../../src/flows/context.js';
import { type LedgerOutcome, ledgerFlow, type PrepareBody } from '../../src/flows/ledger.js';
import {
  type Flow,
  type PreparedInput,
  runFlow,
  type SigningParty,
  verifyPrepared,
} from '../../src/flows/pipeline.js';
import { Refusal } from '../../src/flows/refusal.js';
import { bytesToBase64 } from '../../src/hashing/input.js';
import type { Intent } from '../../src/intent/model.js';
import { verifySignature } from '../../src/keys/schemes.js';
import { ALLOW_ALL_REF } from '../../src/policy/hook.js';
import { LeaseLostError } from '../../src/store/errors.js';
import type { PartyRecord } from '../../src/store/parties.js';
import {
  ambiguousExecute,
  type FlowEnv,
  flowEnv,
  preapprovalProposal,
  refusal,
  takenCommandError,
} from '../support/flow-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;

beforeAll(async () => {
  env = await flowEnv({ seed: 'pipeline' });
  alice = await env.addParty('alice');
  bob = await env.addParty('bob', { scheme: 'ecdsa-p256' });
});
afterAll(async () => env?.close());

beforeEach(() => env.reset());

const proposalBody = (p: SigningParty, provider = env.net.validatorParty): PrepareBody => ({
  synchronizerId: env.net.synchronizerId,
  commands: [preapprovalProposal(env.net, p.partyId, provider)],
});

const intentFor = (p: SigningParty, provider = env.net.validatorParty): Intent => ({
  kind: 'preapproval-proposal',
  receiver: p.partyId,
  provider,
});

function proposalFlow(p: SigningParty, o: { provider?: string; intent?: Intent; commandId?: string } = {}) {
  return ledgerFlow(env.ctx, {
    name: 'test-proposal',
    party: p,
    intent: o.intent ?? intentFor(p),
    commandId: o.commandId ?? randomUUID(),
    request: async () => proposalBody(p, o.provider),
  });
}

/** Transactions that created a proposal for `p` (the sandbox validator accepts proposals right away, so count creations). */
const proposalsOf = (p: SigningParty) =>
  env.net.store
    .updates()
    .filter((u) =>
      u.events.some(
        (e) =>
          e.kind === 'created' &&
          e.contract.templateId.entityName === 'TransferPreapprovalProposal' &&
          e.contract.signatories.includes(p.partyId),
      ),
    ).length;

describe('the signing pipeline', () => {
  it('verifies, signs with the registered key, executes and journals each step (Ed25519 and ECDSA P-256)', async () => {
    for (const p of [alice, bob]) {
      const before = proposalsOf(p);
      const sign = vi.spyOn(env.signer, 'sign');
      const calls = sign.mock.calls.length;
      const r = await runFlow(proposalFlow(p), env.ctx);
      expect(r.outcome).toBe('committed');
      expect(r.attempts).toBe(1);
      expect(r.result.updateId).toMatch(/./);
      expect(r.actions.map((a) => a.kind)).toEqual(['preapproval-proposal']);
      expect(sign.mock.calls.length - calls).toBe(1);
      const sig = Buffer.from(r.signature.signature, 'base64');
      expect(
        verifySignature(p.scheme, Buffer.from(p.publicKeySpki, 'base64'), Buffer.from(r.hash, 'hex'), sig),
      ).toBe(true);
      expect(r.signature.signedBy).toBe(p.fingerprint);
      expect(proposalsOf(p)).toBe(before + 1);
    }
    expect(env.journal.steps()).toEqual([
      'signed',
      'submitted',
      'committed',
      'signed',
      'submitted',
      'committed',
    ]);
    expect(JSON.stringify(env.journal.records)).not.toMatch(/passphrase/);
  });

  it('a claimed hash that is not the recomputed one is refused before signing (tampered participant)', async () => {
    env.sb.ctx.faults.inject({
      fault: { kind: 'tamper', change: 'receiver', hash: 'original' },
      operation: 'ledger-api.prepare',
      times: 1,
    });
    const sign = vi.spyOn(env.signer, 'sign');
    const before = proposalsOf(alice);
    const e = await refusal(runFlow(proposalFlow(alice), env.ctx));
    expect(e.reason).toBe('hash_mismatch');
    expect(e.details.claimed).not.toBe(e.details.computed);
    expect(sign).not.toHaveBeenCalled();
    expect(proposalsOf(alice)).toBe(before);
    expect(env.journal.steps()).toEqual(['refused']);
    expect(env.journal.records[0]!.reason).toBe('hash_mismatch');
  });

  it('a transaction that does not do what the intent says is refused (wrong provider), nothing signed', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(runFlow(proposalFlow(alice, { provider: env.net.mallory }), env.ctx));
    expect(e.reason).toBe('intent_mismatch');
    expect(e.problems.map((p) => p.reason)).toContain('party_mismatch');
    expect(e.message).toContain(env.net.mallory);
    expect(sign).not.toHaveBeenCalled();
  });

  it('V3 required: a V3 preparation is signed; a participant that answers V2 instead is refused', async () => {
    const ctx: FlowContext = { ...env.ctx, requireScheme: 'v3' };
    const ok = await runFlow(
      ledgerFlow(ctx, {
        name: 'v3',
        party: alice,
        intent: intentFor(alice),
        commandId: randomUUID(),
        request: async () => proposalBody(alice),
      }),
      ctx,
    );
    expect(ok.outcome).toBe('committed');
    env.sb.ctx.faults.inject({
      fault: { kind: 'downgradeScheme' },
      operation: 'ledger-api.prepare',
      times: 1,
    });
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(
      runFlow(
        ledgerFlow(ctx, {
          name: 'v3',
          party: alice,
          intent: intentFor(alice),
          commandId: randomUUID(),
          request: async () => proposalBody(alice),
        }),
        ctx,
      ),
    );
    expect(e.reason).toBe('scheme_not_allowed');
    expect(e.message).toMatch(/max_record_time/);
    expect(sign).not.toHaveBeenCalled();
  });

  it('bytes that are not a PreparedTransaction are refused as decode_failed', () => {
    const input: PreparedInput = {
      preparedTransaction: bytesToBase64(new Uint8Array([0x0a, 0x05, 1, 2])),
      claimedHash: '00'.repeat(32),
      scheme: 'v2',
    };
    let e: unknown;
    try {
      verifyPrepared('t', input, alice, intentFor(alice));
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(Refusal);
    expect((e as Refusal).reason).toBe('decode_failed');
  });

  it('an intent for another party than the signing one is a bad request', async () => {
    const e = await refusal(runFlow(proposalFlow(alice, { intent: intentFor(bob) }), env.ctx));
    expect(e.reason).toBe('bad_request');
  });

  it('the key must be the registered one: another key label is refused before signing', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const wrongKey = { ...alice, keyLabel: bob.keyLabel };
    const e = await refusal(runFlow(proposalFlow(wrongKey), env.ctx));
    expect(e.reason).toBe('key_mismatch');
    expect(sign).not.toHaveBeenCalled();
    // A party record whose key is not the party's namespace key.
    const foreign = {
      ...alice,
      fingerprint: bob.fingerprint,
      publicKeySpki: bob.publicKeySpki,
      keyLabel: bob.keyLabel,
    };
    const e2 = await refusal(runFlow(proposalFlow(foreign), env.ctx));
    expect(e2.reason).toBe('key_mismatch');
    expect(sign).not.toHaveBeenCalled();
  });

  it('the policy hook can refuse; it sees the recognised actions and the hash', async () => {
    const seen: string[] = [];
    const ctx: FlowContext = {
      ...env.ctx,
      policy: {
        decide: async (req) => {
          seen.push(req.actions[0]!.kind, req.hash);
          return { outcome: 'deny', reason: 'no proposals on Sundays', policy: ALLOW_ALL_REF };
        },
        settle: async () => {},
      },
    };
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(runFlow(proposalFlow(alice), ctx));
    expect(e.reason).toBe('policy_denied');
    expect(e.message).toContain('no proposals on Sundays');
    expect(seen[0]).toBe('preapproval-proposal');
    expect(seen[1]).toMatch(/^[0-9a-f]{64}$/);
    expect(sign).not.toHaveBeenCalled();
  });

  it('a failure before signing gives back what the policy reserved, except when another worker carries the subject now', async () => {
    const settled: string[] = [];
    const withPolicy = (fail: Error): FlowContext => ({
      ...env.ctx,
      policy: {
        decide: async () => ({ outcome: 'allow', policy: ALLOW_ALL_REF }),
        settle: async (subject, outcome) => {
          settled.push(`${subject}:${outcome}`);
        },
      },
      policyContext: { subject: 'withdrawal:w1' },
      signer: Object.assign(Object.create(env.signer), {
        sign: async () => {
          throw fail;
        },
      }),
    });
    await expect(runFlow(proposalFlow(alice), withPolicy(new Error('key backend down')))).rejects.toThrow(
      'key backend down',
    );
    expect(settled).toEqual(['withdrawal:w1:released']);
    settled.length = 0;
    const lost = new LeaseLostError('w1', 'worker-a');
    await expect(runFlow(proposalFlow(alice), withPolicy(lost))).rejects.toBe(lost);
    expect(settled).toEqual([]);
  });

  it('a signature that does not verify against the registered key is discarded, never submitted', async () => {
    const real = env.signer.sign.bind(env.signer);
    vi.spyOn(env.signer, 'sign').mockImplementation(async (label, msg) => {
      const out = await real(label, msg);
      const bytes = new Uint8Array(out.bytes);
      bytes[5]! ^= 1;
      return { ...out, bytes };
    });
    const before = proposalsOf(alice);
    const e = await refusal(runFlow(proposalFlow(alice), env.ctx));
    expect(e.reason).toBe('signature_invalid');
    expect(env.journal.steps()).toEqual(['refused']);
    expect(proposalsOf(alice)).toBe(before);
  });

  it('a closed window, or one shorter than the configured minimum, is refused', async () => {
    const later: FlowContext = { ...env.ctx, nowUs: () => env.net.clock.now() + 25n * 3600n * 1_000_000n };
    const e = await refusal(runFlow({ ...proposalFlow(alice), maxAttempts: 1 }, later));
    expect(e.reason).toBe('window_closed');
    expect(e.details.source).toBe('preparation-time tolerance');
    const strict: FlowContext = { ...env.ctx, minWindowMs: 25 * 3600 * 1000 };
    const e2 = await refusal(runFlow(proposalFlow(alice), strict));
    expect(e2.reason).toBe('window_closed');
    expect(e2.message).toMatch(/sooner than the required/);
  });

  it('a preparation time more than 5 minutes ahead of this host is refused before signing (the signature would outlive what the caller expects)', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const behind: FlowContext = { ...env.ctx, nowUs: () => env.net.clock.now() - 6n * 60_000_000n };
    const e = await refusal(runFlow({ ...proposalFlow(alice), maxAttempts: 1 }, behind));
    expect(e.reason).toBe('window_closed');
    expect(e.details.source).toBe('preparation time');
    expect(e.message).toMatch(/ahead of this host's clock/);
    expect(sign).not.toHaveBeenCalled();
    // within the tolerated skew it is signed
    const skewed: FlowContext = { ...env.ctx, nowUs: () => env.net.clock.now() - 4n * 60_000_000n };
    expect((await runFlow(proposalFlow(alice), skewed)).outcome).toBe('committed');
  });

  it('an ambiguous execute (timeout after commit) is resolved from completions: one transaction, no retry', async () => {
    const ctx = ambiguousExecute(env);
    const before = proposalsOf(alice);
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await runFlow(
      ledgerFlow(ctx, {
        name: 'ambiguous',
        party: alice,
        intent: intentFor(alice),
        commandId: randomUUID(),
        request: async () => proposalBody(alice),
      }),
      ctx,
    );
    expect(r.outcome).toBe('committed-after-ambiguous');
    expect(r.result.updateId).toMatch(/./);
    expect(sign).toHaveBeenCalledTimes(1);
    expect(proposalsOf(alice)).toBe(before + 1);
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'ambiguous', 'resolved', 'committed']);
  });

  it('an ambiguous outcome that cannot be established is reported, never retried', async () => {
    let submits = 0;
    const base = proposalFlow(alice);
    const flow: Flow<LedgerOutcome> = {
      ...base,
      submit: async () => {
        submits++;
        throw new CantonApiError({
          status: 0,
          service: 'ledger-api',
          method: 'POST',
          path: '/v2/interactive-submission/executeAndWait',
          code: 'TIMEOUT',
          retryable: false,
          ambiguous: true,
        });
      },
      resolveAmbiguous: async () => ({ status: 'unknown' }),
    };
    const e = await refusal(runFlow(flow, env.ctx));
    expect(e.reason).toBe('outcome_unknown');
    expect(e.details.commandId).toBe(flow.commandId);
    expect(submits).toBe(1);
  });

  it('a stale rejection is re-prepared under the same command id; the ledger deduplicates', async () => {
    const commandId = randomUUID();
    const base = proposalFlow(alice, { commandId });
    const seenCommandIds: string[] = [];
    let first = true;
    const flow: Flow<LedgerOutcome> = {
      ...base,
      prepare: async (n) => {
        const p = await base.prepare(n);
        const { decodePreparedTransaction } = await import('../../src/hashing/decode.js');
        seenCommandIds.push(
          decodePreparedTransaction(p.preparedTransaction).metadata.submitterInfo.commandId,
        );
        return p;
      },
      submit: async (s) => {
        if (first) {
          first = false;
          throw new CantonApiError({
            status: 404,
            service: 'ledger-api',
            method: 'POST',
            path: '/v2/interactive-submission/executeAndWait',
            code: 'LOCAL_VERDICT_INACTIVE_CONTRACTS',
            retryable: false,
            ambiguous: false,
          });
        }
        return base.submit(s);
      },
    };
    const before = proposalsOf(alice);
    const r = await runFlow(flow, env.ctx);
    expect(r.attempts).toBe(2);
    expect(seenCommandIds).toEqual([commandId, commandId]);
    expect(proposalsOf(alice)).toBe(before + 1);
    expect(env.journal.steps()).toEqual([
      'signed',
      'submitted',
      'rejected',
      'reprepared',
      'signed',
      'submitted',
      'committed',
    ]);
    // The same command again: the ledger's deduplication answers with the first commit.
    const again = await runFlow(proposalFlow(alice, { commandId }), env.ctx);
    expect(again.result.updateId).toBe(r.result.updateId);
    expect(proposalsOf(alice)).toBe(before + 1);
  });

  it('a definite rejection that is not staleness ends the flow with the ledger code', async () => {
    const base = proposalFlow(alice);
    const flow: Flow<LedgerOutcome> = {
      ...base,
      submit: async () => {
        throw new CantonApiError({
          status: 400,
          service: 'ledger-api',
          method: 'POST',
          path: '/v2/interactive-submission/executeAndWait',
          code: 'FAILED_TO_EXECUTE_TRANSACTION',
          retryable: false,
          ambiguous: false,
        });
      },
    };
    const e = await refusal(runFlow(flow, env.ctx));
    expect(e.reason).toBe('submission_rejected');
    expect(e.details.code).toBe('FAILED_TO_EXECUTE_TRANSACTION');
  });

  it('a transaction prepared under another command id than the flow asked for is refused before signing', async () => {
    const commandId = randomUUID();
    const base = proposalFlow(alice, { commandId });
    // A participant that swaps the command id (defeating deduplication): prepare under another one.
    const other = proposalFlow(alice, { commandId: randomUUID() });
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(runFlow({ ...base, prepare: (n) => other.prepare(n) }, env.ctx));
    expect(e.reason).toBe('intent_mismatch');
    expect(e.details.commandId).toBe(commandId);
    expect(e.message).toMatch(/deduplicate/);
    expect(sign).not.toHaveBeenCalled();
  });

  it('"already submitted" without a completion that proves the commit is an unknown outcome, not a rejection', async () => {
    for (const code of ['DUPLICATE_COMMAND', 'SUBMISSION_ALREADY_IN_FLIGHT'] as const) {
      vi.spyOn(env.ledger, 'executeAndWait').mockRejectedValueOnce(takenCommandError(code));
      const flow = proposalFlow(alice);
      const e = await refusal(runFlow(flow, env.ctx));
      expect(e.reason).toBe('outcome_unknown');
      expect(e.details.commandId).toBe(flow.commandId);
      expect(env.journal.steps().at(-1)).toBe('ambiguous');
    }
  });

  it('an error that is not a refusal (key backend) is journalled as failed before it propagates', async () => {
    vi.spyOn(env.signer, 'sign').mockRejectedValueOnce(new Error('token removed'));
    const e = await runFlow(proposalFlow(alice), env.ctx).then(
      () => undefined,
      (x: unknown) => x,
    );
    expect((e as Error).message).toBe('token removed');
    expect(env.journal.records.at(-1)).toMatchObject({ step: 'failed', message: 'token removed' });
  });
});

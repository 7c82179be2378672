/**
 * What onboarding takes as proof that the party is hosted, and what it books:
 * the permission the participant reports (confirmation, as asked), the
 * synchronizer it was seen on, this signer's journal as evidence before a
 * hosted-but-unbooked party is booked, the caller's expected participant id;
 * the order after the submission (hosted and booked first, then the rights
 * grant) and the journal's terminal entry when anything fails after it; the
 * synchronizer looked up only when an export needs it.
 */
import { describe, expect, it, vi } from 'vitest';
import { CantonApiError } from '../../src/canton/errors.js';
import type { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import type { FlowContext } from '../../src/flows/context.js';
import { onboardViaLedgerApi, onboardViaValidator } from '../../src/flows/onboard.js';
import { hostExternalParty } from '../../src/sandbox/host-party.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { type JournalStep, MemoryRecorder } from '../../src/store/journal.js';
import { MemoryPartyBook } from '../../src/store/parties.js';
import { type FlowEnv, onboardingSuite, refusal } from '../support/flow-env.js';

let env: FlowEnv;
const { newKey } = onboardingSuite('onboard-hosting', (e) => {
  env = e;
});

function withLedger(patch: Partial<LedgerApiClient>, base: FlowContext = env.ctx): FlowContext {
  return { ...base, ledger: Object.assign(Object.create(env.ledger), patch) as LedgerApiClient };
}

type Synchronizers = Awaited<ReturnType<LedgerApiClient['connectedSynchronizers']>>;
type Params = Parameters<LedgerApiClient['connectedSynchronizers']>[0];

/** The participant's answers about the party rewritten by `f` (other queries as they are). */
function partyHosting(f: (r: Synchronizers, p: Params) => Synchronizers): Partial<LedgerApiClient> {
  return {
    connectedSynchronizers: async (p, o) => {
      const r = await env.ledger.connectedSynchronizers(p, o);
      return p?.party ? f(r, p) : r;
    },
  };
}

const lastRecord = () => env.journal.records.at(-1)!;

describe('hosting as asked', () => {
  it('a party reported hosted with observation permission is not booked: outcome_unknown, journaled', async () => {
    const key = await newKey();
    const ctx = withLedger(
      partyHosting((r) => ({
        connectedSynchronizers: r.connectedSynchronizers.map((s) => ({
          ...s,
          permission: 'PARTICIPANT_PERMISSION_OBSERVATION' as const,
        })),
      })),
    );
    const e = await refusal(
      onboardViaLedgerApi(ctx, { hint: 'obs-only', keyLabel: key.label, hostedTimeoutMs: 200 }),
    );
    expect(e.reason).toBe('outcome_unknown');
    expect(e.message).toContain('PARTICIPANT_PERMISSION_OBSERVATION');
    expect(await env.parties.list()).not.toContainEqual(
      expect.objectContaining({ partyId: `obs-only::${key.fingerprint}` }),
    );
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'refused']);
    expect(lastRecord().reason).toBe('outcome_unknown');
  });

  it('books the synchronizer the party was seen hosted on with confirmation, not the first one listed', async () => {
    const key = await newKey();
    const ctx = withLedger(
      partyHosting((r) => ({
        connectedSynchronizers: r.connectedSynchronizers.length
          ? [
              {
                synchronizerAlias: 'elsewhere',
                synchronizerId: 'elsewhere::1220aa',
                permission: 'PARTICIPANT_PERMISSION_OBSERVATION' as const,
              },
              ...r.connectedSynchronizers,
            ]
          : [],
      })),
    );
    const r = await onboardViaValidator(ctx, { hint: 'seen-there', keyLabel: key.label });
    expect(r.party.synchronizerId).toBe(env.net.synchronizerId);
    expect(r.party.participantUid).toBe(env.net.participantId);
  });

  it('the Ledger API path waits for the party on the synchronizer it allocated on', async () => {
    const key = await newKey();
    const ctx = withLedger(
      partyHosting((r) => ({
        connectedSynchronizers: r.connectedSynchronizers.map((s) => ({
          ...s,
          synchronizerId: 'other::1220bb',
        })),
      })),
    );
    const e = await refusal(
      onboardViaLedgerApi(ctx, { hint: 'wrong-sync', keyLabel: key.label, hostedTimeoutMs: 200 }),
    );
    expect(e.reason).toBe('outcome_unknown');
    expect(e.message).toContain(`synchronizer ${env.net.synchronizerId}`);
  });
});

describe('a party hosted but not booked', () => {
  it('is refused, nothing signed, when this signer has no record of onboarding it', async () => {
    const key = await newKey();
    const partyId = `planted::${key.fingerprint}`;
    hostExternalParty(env.net, {
      partyId,
      fingerprint: key.fingerprint,
      scheme: key.scheme,
      publicKeySpki: key.publicKeySpki,
    });
    const sign = vi.spyOn(env.signer, 'sign');
    for (const run of [onboardViaLedgerApi, onboardViaValidator]) {
      const e = await refusal(run(env.ctx, { hint: 'planted', keyLabel: key.label }));
      expect(e.reason).toBe('topology_mismatch');
      expect(e.message).toContain('no record of signing and submitting');
    }
    expect(sign).not.toHaveBeenCalled();
    expect(await env.parties.get(partyId)).toBeUndefined();
  });

  it('a journal written before runs were named: records are paired by their order', async () => {
    const key = await newKey();
    const partyId = `legacy::${key.fingerprint}`;
    hostExternalParty(env.net, {
      partyId,
      fingerprint: key.fingerprint,
      scheme: key.scheme,
      publicKeySpki: key.publicKeySpki,
    });
    const old = (steps: JournalStep[]) => {
      const journal = new MemoryRecorder();
      for (const step of steps)
        journal.records.push({
          at: new Date().toISOString(),
          flow: 'onboard-ledger-api',
          step,
          partyId,
          ...(step === 'signed' ? { signedBy: key.fingerprint } : {}),
          ...(step === 'resolved' ? { reason: 'rejected' } : {}),
        });
      return { ...env.ctx, recorder: journal, parties: new MemoryPartyBook() };
    };
    // One old run, rejected: no evidence.
    const e = await refusal(
      onboardViaLedgerApi(old(['signed', 'submitted', 'rejected']), { hint: 'legacy', keyLabel: key.label }),
    );
    expect(e.reason).toBe('topology_mismatch');
    // A rejected run, then one that submitted and stopped: the second is evidence.
    const r = await onboardViaLedgerApi(old(['signed', 'submitted', 'rejected', 'signed', 'submitted']), {
      hint: 'legacy',
      keyLabel: key.label,
    });
    expect(r.status).toBe('recovered');
  });

  it('is refused when the journal cannot be read back', async () => {
    const key = await newKey();
    await onboardViaLedgerApi(env.ctx, { hint: 'no-journal', keyLabel: key.label });
    const { recorder: _, ...rest } = env.ctx;
    const ctx: FlowContext = { ...rest, parties: new MemoryPartyBook() };
    const e = await refusal(onboardViaLedgerApi(ctx, { hint: 'no-journal', keyLabel: key.label }));
    expect(e.message).toContain('cannot be read back');
  });

  it('reported hosted with another permission is refused, even with our journal', async () => {
    const key = await newKey();
    await onboardViaLedgerApi(env.ctx, { hint: 'perm-later', keyLabel: key.label });
    const ctx = withLedger(
      partyHosting((r) => ({
        connectedSynchronizers: r.connectedSynchronizers.map((s) => ({
          ...s,
          permission: 'PARTICIPANT_PERMISSION_SUBMISSION' as const,
        })),
      })),
      { ...env.ctx, parties: new MemoryPartyBook() },
    );
    const e = await refusal(onboardViaLedgerApi(ctx, { hint: 'perm-later', keyLabel: key.label }));
    expect(e.reason).toBe('topology_mismatch');
    expect(e.message).toContain('PARTICIPANT_PERMISSION_SUBMISSION');
  });

  it('"already exists" on submit is only taken with an earlier run in the journal', async () => {
    const key = await newKey();
    // The participant allocates, then answers 409 as if the party had been there before.
    const ctx = withLedger({
      allocateExternalParty: async (req, o) => {
        await env.ledger.allocateExternalParty(req, o);
        throw new CantonApiError({
          status: 409,
          service: 'ledger-api',
          method: 'POST',
          path: '/v2/parties/external/allocate',
          code: 'PARTY_ALREADY_EXISTS',
          retryable: false,
          ambiguous: false,
        });
      },
    });
    const e = await refusal(onboardViaLedgerApi(ctx, { hint: 'exists-409', keyLabel: key.label }));
    expect(e.reason).toBe('submission_rejected');
    expect(e.message).toContain('no earlier onboarding');
    expect(await env.parties.get(`exists-409::${key.fingerprint}`)).toBeUndefined();
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'ambiguous', 'resolved', 'rejected']);
    // The rejected run is no evidence: running again does not book the party as recovered.
    const again = await refusal(onboardViaLedgerApi(env.ctx, { hint: 'exists-409', keyLabel: key.label }));
    expect(again.reason).toBe('topology_mismatch');
    expect(again.message).toContain('no record of signing and submitting');
    expect(await env.parties.get(`exists-409::${key.fingerprint}`)).toBeUndefined();
  });
});

describe('the expected participant', () => {
  it('another participant id than the caller expects → refused before anything is generated', async () => {
    const key = await newKey();
    const gen = vi.spyOn(env.ledger, 'generateExternalPartyTopology');
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(
      onboardViaLedgerApi(env.ctx, {
        hint: 'exp-part',
        keyLabel: key.label,
        participantId: 'PAR::someone-else::1220cc',
      }),
    );
    expect(e.reason).toBe('topology_mismatch');
    expect(e.message).toContain('someone-else::1220cc');
    expect(gen).not.toHaveBeenCalled();
    expect(sign).not.toHaveBeenCalled();
    expect(env.journal.steps()).toEqual(['refused']);
  });

  it('the expected id, with or without PAR::, onboards', async () => {
    const key = await newKey();
    const r = await onboardViaValidator(env.ctx, {
      hint: 'exp-ok',
      keyLabel: key.label,
      participantId: `PAR::${env.net.participantId}`,
    });
    expect(r.status).toBe('new');
  });
});

describe('after the submission', () => {
  it('hosted and booked before the rights grant; a failed grant is journaled and a re-run grants', async () => {
    const key = await newKey();
    const partyId = `grant-late::${key.fingerprint}`;
    const ctx = withLedger({
      grantUserRights: async () => {
        throw new Error('grant refused by the test');
      },
    });
    await expect(onboardViaLedgerApi(ctx, { hint: 'grant-late', keyLabel: key.label })).rejects.toThrow(
      'grant refused by the test',
    );
    expect(await env.parties.get(partyId)).toBeDefined();
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'committed', 'failed']);
    expect(lastRecord().reason).toBe('grant_failed');
    expect(env.net.users.get(LEDGER_API_USER)!.actAs.has(partyId)).toBe(false);

    // A retry while the grant still fails stays a safe 'existing', with a warning.
    const retry = await onboardViaLedgerApi(ctx, { hint: 'grant-late', keyLabel: key.label });
    expect(retry.status).toBe('existing');
    expect(retry.warnings?.[0]).toMatch(/grant refused by the test/);
    const again = await onboardViaLedgerApi(env.ctx, { hint: 'grant-late', keyLabel: key.label });
    expect(again.status).toBe('existing');
    expect(again.warnings).toBeUndefined();
    expect(env.net.users.get(LEDGER_API_USER)!.actAs.has(partyId)).toBe(true);
  });

  it('without the grant the user gets no rights', async () => {
    const key = await newKey();
    const r = await onboardViaLedgerApi(env.ctx, {
      hint: 'no-grant',
      keyLabel: key.label,
      grantRights: false,
    });
    expect(env.net.users.get(LEDGER_API_USER)!.actAs.has(r.party.partyId)).toBe(false);
  });

  it('an error while checking the hosting is journaled as outcome_unknown', async () => {
    const key = await newKey();
    let submitted = false;
    const ctx = withLedger({
      allocateExternalParty: async (req, o) => {
        submitted = true;
        return env.ledger.allocateExternalParty(req, o);
      },
      connectedSynchronizers: async (p, o) => {
        if (submitted && p?.party) throw new Error('participant went away');
        return env.ledger.connectedSynchronizers(p, o);
      },
    });
    const e = await refusal(onboardViaLedgerApi(ctx, { hint: 'lost-check', keyLabel: key.label }));
    expect(e.reason).toBe('outcome_unknown');
    expect(e.message).toContain('participant went away');
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'refused']);
    expect(lastRecord().reason).toBe('outcome_unknown');
  });

  it('another party named by a successful submit is an unknown outcome, not a plain refusal', async () => {
    const key = await newKey();
    const ctx = withLedger({
      allocateExternalParty: async (req, o) => {
        await env.ledger.allocateExternalParty(req, o);
        return { partyId: `someone::${key.fingerprint}` };
      },
    });
    const e = await refusal(onboardViaLedgerApi(ctx, { hint: 'renamed', keyLabel: key.label }));
    expect(e.reason).toBe('outcome_unknown');
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'ambiguous', 'resolved', 'refused']);
    expect(lastRecord().reason).toBe('outcome_unknown');
    expect(await env.parties.get(`renamed::${key.fingerprint}`)).toBeUndefined();
  });
});

describe('the synchronizer lookup', () => {
  it('a synchronizer the participant is not connected to is refused before anything is generated or signed', async () => {
    const key = await newKey();
    const gen = vi.spyOn(env.ledger, 'generateExternalPartyTopology');
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(
      onboardViaLedgerApi(env.ctx, { hint: 'sync-x', keyLabel: key.label, synchronizerId: 'other::1220ab' }),
    );
    expect(e.reason).toBe('bad_request');
    expect(e.message).toContain(`connected: ${env.net.synchronizerId}`);
    expect(gen).not.toHaveBeenCalled();
    expect(sign).not.toHaveBeenCalled();
  });

  it('a physical synchronizer id (with its protocol version) is taken as the connected one it names', async () => {
    const key = await newKey();
    const r = await onboardViaLedgerApi(env.ctx, {
      hint: 'sync-phys',
      keyLabel: key.label,
      synchronizerId: `${env.net.synchronizerId}::34-0`,
    });
    expect(r.status).toBe('new');
    expect(r.party.synchronizerId).toBe(env.net.synchronizerId);
  });

  it('an online key on the validator path needs no synchronizer listed by the participant', async () => {
    const key = await newKey();
    const { synchronizerId: _, ...rest } = env.ctx;
    const ctx = withLedger(
      {
        connectedSynchronizers: async (p, o) =>
          p?.party ? env.ledger.connectedSynchronizers(p, o) : { connectedSynchronizers: [] },
      },
      rest,
    );
    const r = await onboardViaValidator(ctx, { hint: 'no-sync', keyLabel: key.label });
    expect(r.status).toBe('new');
    expect(r.party.synchronizerId).toBe(env.net.synchronizerId);
  });
});

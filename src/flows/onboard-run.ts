/**
 * One onboarding run, the steps both paths (src/flows/onboard.ts) share: the
 * run and its journal records, the checks before anything is generated (hint,
 * party book, participant id), signing each hash through the policy hook (or
 * exporting it across the air gap), what a failed or surprising submission
 * means, and booking the party once it is seen hosted as asked (then granting
 * the Ledger API user's rights).
 */
import { randomUUID } from 'node:crypto';
import { isAccessDenied, isCantonApiError } from '../canton/errors.js';
import type { RightRequest } from '../canton/ledger-api/schemas.js';
import { partyId as makePartyId, partyHintProblem } from '../hashing/canton-hash.js';
import { bytesToBase64, bytesToHex } from '../hashing/input.js';
import type { Intent } from '../intent/model.js';
import { participantUidOf, type TopologyProblem } from '../intent/topology.js';
import { isAwaitingOfflineSignature } from '../keys/offline-backend.js';
import type { KeyDescription, SignOutput } from '../keys/signer.js';
import { AwaitingApproval, allowAll } from '../policy/hook.js';
import type { JournalStep } from '../store/journal.js';
import type { PartyRecord } from '../store/parties.js';
import type { TopologyExport } from './air-gap.js';
import type { FlowContext } from './context.js';
import {
  describeSeen,
  describeWanted,
  type HostingWanted,
  hostedAsAsked,
  hostingOf,
  journalEvidence,
} from './onboard-hosting.js';
import { type SigningParty, signAndVerify } from './pipeline.js';
import { Refusal } from './refusal.js';

export type OnboardPath = 'validator' | 'ledger-api';

export interface OnboardResult {
  party: PartyRecord;
  /** `new`: onboarded now; `existing`: already in the party book; `recovered`: hosted, now booked. */
  status: 'new' | 'existing' | 'recovered';
  /** Hex of each hash signed (none for existing / recovered). */
  signedHashes: string[];
  /** What did not work but did not stop the onboarding (a failed rights grant for a booked party). */
  warnings?: string[];
}

export interface OnboardOptions {
  hint: string;
  keyLabel: string;
  /** Give `ctx.userId` CanActAs + CanReadAs on the party (default true). */
  grantRights?: boolean;
  /** How long to wait for the participant to report the party hosted (default 5 s). */
  hostedTimeoutMs?: number;
  /**
   * The participant the party must be hosted on (`PAR::` prefix optional). When given, the
   * participant's own id must be this one, else nothing is generated or signed.
   */
  participantId?: string;
}

/** The intent the policy hook sees for an onboarding signature: the party's own onboarding. */
function onboardingIntent(partyId: string): Intent {
  return { kind: 'create', party: partyId, template: 'canton-topology:Onboarding:ExternalParty' };
}

export interface Run {
  flow: string;
  /** Tells this run's `submitted` record from earlier runs' in the journal. */
  id: string;
  partyId: string;
  intent: Intent;
  rec(step: JournalStep, extra?: Record<string, unknown>): Promise<void>;
}

export function startRun(ctx: FlowContext, flow: string, partyId: string): Run {
  const intent = onboardingIntent(partyId);
  const id = randomUUID();
  return {
    flow,
    id,
    partyId,
    intent,
    // Every record names its run, so that the journal tells one run's outcome from another's.
    rec: async (step, extra = {}) => {
      const facts = { ...((extra.facts as Record<string, string> | undefined) ?? {}), run: id };
      await ctx.recorder?.record({ flow, step, partyId, intent, ...extra, facts });
    },
  };
}

/** Refusal → journal `refused` → rethrow. */
export async function refuse(run: Run, e: Refusal): Promise<never> {
  await run.rec('refused', { reason: e.reason, message: e.message });
  throw e;
}

export async function describeKey(ctx: FlowContext, label: string): Promise<KeyDescription> {
  return ctx.signer.describe(label);
}

/** Hint check, the party id, and the party book: existing record, or a conflict. */
export async function prelude(
  ctx: FlowContext,
  opts: OnboardOptions,
  key: KeyDescription,
): Promise<{ partyId: string; existing?: PartyRecord }> {
  const bad = partyHintProblem(opts.hint);
  if (bad) throw new Refusal('bad_request', `--hint: ${bad}`);
  const partyId = makePartyId(opts.hint, key.fingerprint);
  const existing = await ctx.parties.get(partyId);
  if (existing) {
    if (existing.fingerprint !== key.fingerprint)
      throw new Refusal(
        'bad_request',
        `party ${partyId} is already in the party book with key ${existing.keyLabel} (${existing.fingerprint}), not ${key.label}`,
      );
    return { partyId, existing };
  }
  const clash = (await ctx.parties.list()).find(
    (p) => p.hint === opts.hint && p.fingerprint !== key.fingerprint,
  );
  if (clash)
    throw new Refusal(
      'bad_request',
      `hint ${opts.hint} is already used by party ${clash.partyId} with key ${clash.keyLabel}; key ${key.label} would make a different party — choose another hint`,
    );
  return { partyId };
}

async function waitHosted(
  ctx: FlowContext,
  run: Run,
  want: HostingWanted,
  timeoutMs: number,
): Promise<{ synchronizerId: string }> {
  const until = Date.now() + timeoutMs;
  let seen: { synchronizerId: string; permission?: string }[] = [];
  for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
    seen = await hostingOf(ctx, run.partyId, want.participantId);
    const h = hostedAsAsked(seen, want);
    if (h) return h;
    if (Date.now() + delay > until) break;
    await new Promise((r) => setTimeout(r, delay));
  }
  return refuse(
    run,
    new Refusal(
      'outcome_unknown',
      `the onboarding was accepted but the participant does not report ${run.partyId} hosted ${describeWanted(want)} after ${timeoutMs} ms (it reports: ${describeSeen(seen)}); the party may exist but is not booked; run the onboarding again to check (it does not sign twice once the party is hosted)`,
      [],
      { seen: describeSeen(seen) },
    ),
  );
}

async function grant(ctx: FlowContext, partyId: string): Promise<void> {
  const rights: RightRequest[] = [
    { kind: { CanActAs: { value: { party: partyId } } } },
    { kind: { CanReadAs: { value: { party: partyId } } } },
  ];
  await ctx.ledger.grantUserRights(ctx.userId, rights);
}

export function signingParty(partyId: string, key: KeyDescription): SigningParty {
  return {
    partyId,
    keyLabel: key.label,
    scheme: key.scheme,
    fingerprint: key.fingerprint,
    publicKeySpki: bytesToBase64(key.publicKeySpki),
  };
}

/**
 * `signHashes`, or — for a key held offline with no imported signatures yet —
 * the checked topology exported across the air gap (the flow stops with
 * `AwaitingSignature`; after the import the same onboarding is run again:
 * the participant generates the same transactions, and the imported
 * signatures are found). The export's arguments are only worked out (the
 * synchronizer looked up) when an export is made.
 */
export async function signOrExport(
  ctx: FlowContext,
  run: Run,
  party: SigningParty,
  messages: Uint8Array[],
  exportArgs: () => Promise<Omit<TopologyExport, 'partyId' | 'key' | 'messages'>>,
): Promise<SignOutput[]> {
  try {
    return await signHashes(ctx, run, party, messages);
  } catch (e) {
    if (!isAwaitingOfflineSignature(e) || !ctx.airGap?.exportTopology) throw e;
    const a = await ctx.airGap.exportTopology({
      ...(await exportArgs()),
      partyId: party.partyId,
      key: { fingerprint: party.fingerprint, scheme: party.scheme, publicKeySpki: party.publicKeySpki },
      messages,
    });
    await run.rec('exported', { hash: a.hashes[0], facts: { export: a.exportId } });
    throw a;
  }
}

async function signHashes(
  ctx: FlowContext,
  run: Run,
  party: SigningParty,
  hashes: Uint8Array[],
): Promise<SignOutput[]> {
  const out: SignOutput[] = [];
  for (const h of hashes) {
    const hash = bytesToHex(h);
    const subject = ctx.policyContext?.subject ?? `onboard:${run.partyId}`;
    const decision = await (ctx.policy ?? allowAll).decide({
      flow: run.flow,
      partyId: run.partyId,
      keyLabel: party.keyLabel,
      intent: run.intent,
      actions: [],
      hash,
      subject,
      ...(ctx.policyContext?.caller ? { caller: ctx.policyContext.caller } : {}),
      ...(ctx.policyContext?.requester !== undefined ? { requester: ctx.policyContext.requester } : {}),
    });
    if (decision.outcome === 'deny')
      return refuse(run, new Refusal('policy_denied', `policy refused: ${decision.reason}`));
    if (decision.outcome === 'approve') {
      const a = new AwaitingApproval(
        decision.request,
        subject,
        decision.missing,
        decision.expiresAt,
        decision.policy,
      );
      await run.rec('awaiting_approval', {
        hash,
        reason: 'approvals_required',
        message: a.message,
        facts: { approvalRequest: a.requestId },
      });
      throw a;
    }
    let s: SignOutput;
    try {
      s = await signAndVerify(ctx.signer, party, h);
    } catch (e) {
      if (e instanceof Refusal) return refuse(run, e);
      throw e;
    }
    await run.rec('signed', { hash, signedBy: s.signature.signedBy });
    out.push(s);
  }
  return out;
}

export function mismatch(what: string, problems: TopologyProblem[]): Refusal {
  return new Refusal(
    'topology_mismatch',
    `the ${what} onboarding transactions are not the ones asked for: ${problems.map((p) => p.message).join('; ')}`,
    problems,
  );
}

/**
 * The submission failed. Definite → `rejected` + Refusal('submission_rejected');
 * ambiguous: the truth is whether the party is hosted as asked now (our own
 * submission may have made it). "Already exists": the party existed before this
 * run's submission, so it is taken only if it is hosted as asked and the
 * journal shows an earlier run of this signer signed and submitted it.
 */
export async function afterFailedSubmit(
  ctx: FlowContext,
  run: Run,
  e: unknown,
  want: HostingWanted,
  fingerprint: string,
): Promise<{ synchronizerId: string }> {
  if (!isCantonApiError(e)) return unknownAfterSubmit(run, e);
  const exists = e.status === 409 || e.code === 'PARTY_ALREADY_EXISTS';
  let note = '';
  if (e.ambiguous || exists) {
    await run.rec('ambiguous', { reason: e.code, message: e.message });
    const seen = await hostingOf(ctx, run.partyId, want.participantId).catch(() => undefined);
    const h = seen && hostedAsAsked(seen, want);
    if (e.ambiguous) {
      await run.rec('resolved', { reason: h ? 'committed' : 'unknown' });
      if (h) return h;
      return refuse(
        run,
        new Refusal(
          'outcome_unknown',
          `the onboarding submission's outcome is unknown (${e.code}) and ${run.partyId} is not hosted ${describeWanted(want)} yet; run it again later (it signs again only if the party does not exist)`,
          [],
          { code: e.code },
        ),
      );
    }
    const ev = h ? await journalEvidence(ctx, run.partyId, fingerprint).catch(() => undefined) : undefined;
    const earlier = ev?.some((id) => id !== run.id) === true;
    await run.rec('resolved', { reason: h && earlier ? 'committed' : 'rejected' });
    if (h && earlier) return h;
    note = h
      ? `; the participant reports ${run.partyId} hosted, but this signer's journal has no earlier onboarding of it: not booked`
      : `; ${run.partyId} is not reported hosted ${describeWanted(want)}`;
  }
  const message = `${e.detail ? `${e.message}: ${e.detail}` : e.message}${note}`;
  await run.rec('rejected', { reason: e.code, message });
  // Our credentials, not the onboarding, were refused: an upstream error naming the service.
  if (isAccessDenied(e)) throw e;
  throw new Refusal('submission_rejected', `the onboarding was rejected: ${message}`, [], { code: e.code });
}

/** An error after the submission (the party may exist): journaled and refused as `outcome_unknown`. */
async function unknownAfterSubmit(run: Run, e: unknown): Promise<never> {
  if (e instanceof Refusal && e.reason === 'outcome_unknown') throw e; // journaled already
  const why = e instanceof Error ? e.message : String(e);
  return refuse(
    run,
    new Refusal(
      'outcome_unknown',
      `after the onboarding of ${run.partyId} was submitted: ${why}; the party may exist but is not booked; run the onboarding again to check (it does not sign twice once the party is hosted)`,
      e instanceof Refusal ? e.problems : [],
      e instanceof Refusal ? { ...e.details, cause: e.reason } : {},
    ),
  );
}

/**
 * Books the party once the participant reports it hosted as asked (`hosted`
 * when already seen so), journals `committed`, then grants the rights. The
 * booked participant and synchronizer are those it was seen hosted on.
 */
export async function finish(
  ctx: FlowContext,
  run: Run,
  args: {
    opts: OnboardOptions;
    key: KeyDescription;
    via: OnboardPath;
    want: HostingWanted;
    hosted?: { synchronizerId: string };
    status: 'new' | 'recovered';
    signed: SignOutput[];
    hashes: Uint8Array[];
  },
): Promise<OnboardResult> {
  const participantUid = participantUidOf(args.want.participantId);
  let record: PartyRecord;
  try {
    const hosted = args.hosted ?? (await waitHosted(ctx, run, args.want, args.opts.hostedTimeoutMs ?? 5000));
    record = {
      partyId: run.partyId,
      hint: args.opts.hint,
      keyLabel: args.key.label,
      scheme: args.key.scheme,
      fingerprint: args.key.fingerprint,
      publicKeySpki: bytesToBase64(args.key.publicKeySpki),
      via: args.via,
      participantUid,
      synchronizerId: hosted.synchronizerId,
      createdAt: new Date().toISOString(),
    };
    await ctx.parties.put(record);
  } catch (e) {
    return unknownAfterSubmit(run, e);
  }
  await run.rec('committed', {
    ...(args.hashes.length === 1 ? { hash: bytesToHex(args.hashes[0]!) } : {}),
    facts: {
      via: args.via,
      participantUid,
      synchronizerId: record.synchronizerId ?? '',
      ...(args.status === 'recovered' ? { recovered: 'true' } : {}),
      ...(args.hashes.length > 1 ? { hashes: args.hashes.map(bytesToHex).join(',') } : {}),
    },
  });
  if (args.opts.grantRights ?? true) await grantOrJournal(ctx, run);
  return {
    party: record,
    status: args.status,
    signedHashes: args.signed.length ? args.hashes.map(bytesToHex) : [],
  };
}

/** The rights grant, after the party is booked: a failure is journaled (`failed`) and thrown; a re-run grants again. */
async function grantOrJournal(ctx: FlowContext, run: Run): Promise<void> {
  try {
    await grant(ctx, run.partyId);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    await run.rec('failed', {
      reason: 'grant_failed',
      message: `${run.partyId} is onboarded and booked, but granting ${ctx.userId} CanActAs + CanReadAs failed: ${why}; run the onboarding again to grant them`,
    });
    throw e;
  }
}

/**
 * An already booked party: returned as it is, the rights granted again when
 * asked (a grant is idempotent). A retry stays safe: a grant that fails here
 * is journaled and reported as a warning, not thrown.
 */
export async function existingResult(
  ctx: FlowContext,
  opts: OnboardOptions,
  flow: string,
  existing: PartyRecord,
): Promise<OnboardResult> {
  const warnings: string[] = [];
  if (opts.grantRights ?? true)
    await grantOrJournal(ctx, startRun(ctx, flow, existing.partyId)).catch((e: unknown) => {
      warnings.push(
        `granting ${ctx.userId} CanActAs + CanReadAs on ${existing.partyId} failed: ${e instanceof Error ? e.message : String(e)}`,
      );
    });
  return {
    party: existing,
    status: 'existing',
    signedHashes: [],
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

/**
 * The participant's id, checked against the one the caller expects (when given),
 * before anything is generated or signed.
 */
export async function participantOf(ctx: FlowContext, run: Run, opts: OnboardOptions): Promise<string> {
  const reported = (await ctx.ledger.participantId()).participantId;
  if (opts.participantId !== undefined && participantUidOf(opts.participantId) !== participantUidOf(reported))
    return refuse(
      run,
      new Refusal(
        'topology_mismatch',
        `expected the participant to be ${participantUidOf(opts.participantId)}, but it reports itself as ${participantUidOf(reported)}`,
        [],
        { expected: participantUidOf(opts.participantId), found: participantUidOf(reported) },
      ),
    );
  return reported;
}

/**
 * The participant already reports the party (a run that stopped after
 * submitting, or a party made elsewhere with our key). Booked without signing
 * only if it is hosted as asked and this signer's journal shows it signed and
 * submitted this party's onboarding; refused otherwise.
 */
export async function recoverHosted(
  ctx: FlowContext,
  run: Run,
  seen: { synchronizerId: string; permission?: string }[],
  want: HostingWanted,
  key: KeyDescription,
): Promise<{ synchronizerId: string }> {
  const h = hostedAsAsked(seen, want);
  if (!h)
    return refuse(
      run,
      new Refusal(
        'topology_mismatch',
        `the participant reports ${run.partyId} hosted, but not ${describeWanted(want)} (it reports: ${describeSeen(seen)}); nothing signed, not booked`,
        [],
        { seen: describeSeen(seen) },
      ),
    );
  const ev = await journalEvidence(ctx, run.partyId, key.fingerprint);
  if (!ev || ev.length === 0)
    return refuse(
      run,
      new Refusal(
        'topology_mismatch',
        `the participant reports ${run.partyId} hosted, but ${
          ev
            ? "this signer's journal has no record of signing and submitting its onboarding (not rejected)"
            : "this signer's journal cannot be read back"
        }: nothing signed, not booked`,
      ),
    );
  return h;
}

/**
 * The submission succeeded but names another party: what was created is not
 * known (ours may exist), so it is journaled as an ambiguous outcome and refused
 * as `outcome_unknown`, not booked.
 */
export async function partyMismatchAfterSubmit(run: Run, message: string): Promise<never> {
  await run.rec('ambiguous', { reason: 'party_mismatch', message });
  await run.rec('resolved', { reason: 'unknown' });
  return refuse(
    run,
    new Refusal(
      'outcome_unknown',
      `${message} after the submission; ${run.partyId} may exist but is not booked; run the onboarding again to check`,
      [{ reason: 'party_mismatch', message }],
    ),
  );
}

/** The options an onboarding run again after an air-gap import must keep (see `TopologyExport.onboarding`). */
export function carried(opts: OnboardOptions): { participantId?: string; grantRights?: boolean } {
  return {
    ...(opts.participantId !== undefined ? { participantId: opts.participantId } : {}),
    ...(opts.grantRights === false ? { grantRights: false } : {}),
  };
}

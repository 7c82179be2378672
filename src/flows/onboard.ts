/**
 * External-party onboarding on both paths, and `showParty`.
 *
 * - validator (`/v0/admin/external-party/topology/*`, Ed25519 only): generate →
 *   check every transaction (src/intent/topology.ts) → sign each 34-byte
 *   topology hash → submit;
 * - Ledger API (`/v2/parties/external/*`, Ed25519 / P-256 / secp256k1):
 *   generate-topology → check → sign the recomputed multi-hash → allocate →
 *   grant the Ledger API user CanActAs + CanReadAs.
 *
 * Nothing is signed unless the topology is exactly the requested one, and
 * every signature goes through the policy hook and `signAndVerify`. After the
 * submission the participant must report the party hosted with confirmation
 * permission on the participant the topology names (and, on the Ledger API
 * path, on the synchronizer it was allocated on) before it enters the party
 * book; only then are the Ledger API user's rights granted. What is booked is
 * where the party was seen hosted. A failure after the submission is journaled
 * as `outcome_unknown` (the party may exist). A re-run with the same key
 * returns the booked party (and grants the rights again, if asked); a party
 * already hosted but not booked (a run that stopped after submitting) is
 * booked without signing again only if this signer's journal shows it signed
 * and submitted that party's onboarding.
 */
import { randomUUID } from 'node:crypto';
import { isAccessDenied, isCantonApiError } from '../canton/errors.js';
import type { RightRequest } from '../canton/ledger-api/schemas.js';
import type { ParticipantPermission } from '../canton/topology/model.js';
import { partyId as makePartyId, multiHash, partyHintProblem } from '../hashing/canton-hash.js';
import { base64ToBytes, bytesToBase64, bytesToHex } from '../hashing/input.js';
import type { Intent } from '../intent/model.js';
import {
  checkTopology,
  participantUidOf,
  type TopologyExpectation,
  type TopologyProblem,
  type TopologyTxInput,
} from '../intent/topology.js';
import { isAwaitingOfflineSignature } from '../keys/offline-backend.js';
import type { KeyScheme } from '../keys/schemes.js';
import type { KeyDescription, SignOutput } from '../keys/signer.js';
import { AwaitingApproval, allowAll } from '../policy/hook.js';
import type { JournalStep } from '../store/journal.js';
import type { PartyRecord } from '../store/parties.js';
import type { TopologyExport } from './air-gap.js';
import type { FlowContext } from './context.js';
import { nameOfParty } from './names.js';
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

const LEDGER_API_SCHEMES: readonly KeyScheme[] = ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'];

/** The intent the policy hook sees for an onboarding signature: the party's own onboarding. */
function onboardingIntent(partyId: string): Intent {
  return { kind: 'create', party: partyId, template: 'canton-topology:Onboarding:ExternalParty' };
}

interface Run {
  flow: string;
  /** Tells this run's `submitted` record from earlier runs' in the journal. */
  id: string;
  partyId: string;
  intent: Intent;
  rec(step: JournalStep, extra?: Record<string, unknown>): Promise<void>;
}

function startRun(ctx: FlowContext, flow: string, partyId: string): Run {
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
async function refuse(run: Run, e: Refusal): Promise<never> {
  await run.rec('refused', { reason: e.reason, message: e.message });
  throw e;
}

async function describeKey(ctx: FlowContext, label: string): Promise<KeyDescription> {
  return ctx.signer.describe(label);
}

/** Hint check, the party id, and the party book: existing record, or a conflict. */
async function prelude(
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

/** Whether the participant reports the party hosted on some synchronizer (its permission, when it says). */
async function hostedOn(
  ctx: FlowContext,
  partyId: string,
): Promise<{ synchronizerId: string; permission?: string } | undefined> {
  const r = await ctx.ledger.connectedSynchronizers({ party: partyId });
  const s = r.connectedSynchronizers[0];
  return s
    ? { synchronizerId: s.synchronizerId, ...(s.permission ? { permission: s.permission } : {}) }
    : undefined;
}

/** Where the onboarding must find the party hosted: the participant (as it names itself), permission, synchronizer. */
interface HostingWanted {
  /** The participant id exactly as `participantId()` answered (the query parameter wants that form). */
  participantId: string;
  /** Required on the Ledger API path (the synchronizer allocated on); any synchronizer on the validator path. */
  synchronizerId?: string;
}

const CONFIRMATION = 'PARTICIPANT_PERMISSION_CONFIRMATION';

/** Every synchronizer on which `participantId` reports hosting the party, with the permission it reports. */
async function hostingOf(
  ctx: FlowContext,
  partyId: string,
  participantId: string,
): Promise<{ synchronizerId: string; permission?: string }[]> {
  const r = await ctx.ledger.connectedSynchronizers({ party: partyId, participantId });
  return r.connectedSynchronizers.map((s) => ({
    synchronizerId: s.synchronizerId,
    ...(s.permission ? { permission: s.permission } : {}),
  }));
}

/** The entry that shows the party hosted as asked (confirmation, on the wanted synchronizer), if any. */
function hostedAsAsked(
  seen: { synchronizerId: string; permission?: string }[],
  want: HostingWanted,
): { synchronizerId: string } | undefined {
  const s = seen.find(
    (x) =>
      x.permission === CONFIRMATION &&
      (want.synchronizerId === undefined || x.synchronizerId === want.synchronizerId),
  );
  return s ? { synchronizerId: s.synchronizerId } : undefined;
}

function describeSeen(seen: { synchronizerId: string; permission?: string }[]): string {
  return seen.length === 0
    ? 'not hosted'
    : seen.map((x) => `${x.synchronizerId} (${x.permission ?? 'permission not reported'})`).join(', ');
}

function describeWanted(want: HostingWanted): string {
  return `with confirmation permission on participant ${participantUidOf(want.participantId)}${
    want.synchronizerId ? ` and synchronizer ${want.synchronizerId}` : ''
  }`;
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

/**
 * The runs of this signer that may have created the party, by the journal:
 * each signed its onboarding with our key and submitted it, and its
 * submission was not definitely rejected (no `rejected` record, no
 * `resolved: rejected`). `undefined`: the journal cannot be read back (no
 * recorder, or one without `partyRecords`).
 */
async function journalEvidence(
  ctx: FlowContext,
  partyId: string,
  fingerprint: string,
): Promise<string[] | undefined> {
  const records = await ctx.recorder?.partyRecords?.(partyId);
  if (records === undefined) return undefined;
  const runs = new Map<string, { signed: boolean; submitted: boolean; rejected: boolean }>();
  // Records written before runs were named carry no run id: they are paired by their order
  // (a run starts with its first `signed` record after another step).
  let legacy = 0;
  let previous: string | undefined;
  for (const x of records) {
    if (!x.flow.startsWith('onboard-')) continue;
    if (x.facts?.run === undefined && x.step === 'signed' && previous !== 'signed') legacy += 1;
    if (x.facts?.run === undefined) previous = x.step;
    const id = x.facts?.run ?? `legacy-${legacy}`;
    const r = runs.get(id) ?? { signed: false, submitted: false, rejected: false };
    if (x.step === 'signed' && x.signedBy === fingerprint) r.signed = true;
    if (x.step === 'submitted') r.submitted = true;
    if (x.step === 'rejected' || (x.step === 'resolved' && x.reason === 'rejected')) r.rejected = true;
    runs.set(id, r);
  }
  return [...runs].filter(([, r]) => r.signed && r.submitted && !r.rejected).map(([id]) => id);
}

async function grant(ctx: FlowContext, partyId: string): Promise<void> {
  const rights: RightRequest[] = [
    { kind: { CanActAs: { value: { party: partyId } } } },
    { kind: { CanReadAs: { value: { party: partyId } } } },
  ];
  await ctx.ledger.grantUserRights(ctx.userId, rights);
}

function signingParty(partyId: string, key: KeyDescription): SigningParty {
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
async function signOrExport(
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

function mismatch(what: string, problems: TopologyProblem[]): Refusal {
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
async function afterFailedSubmit(
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
async function finish(
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
async function existingResult(
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
async function participantOf(ctx: FlowContext, run: Run, opts: OnboardOptions): Promise<string> {
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
async function recoverHosted(
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

/** Onboards `hint::fingerprint(key)` through the validator (Ed25519 keys only). */
export async function onboardViaValidator(ctx: FlowContext, opts: OnboardOptions): Promise<OnboardResult> {
  const flow = 'onboard-validator';
  if (!ctx.validator)
    throw new Refusal(
      'bad_request',
      'onboarding through the validator needs the validator API: no validator URL is configured',
    );
  const validator = ctx.validator;
  const key = await describeKey(ctx, opts.keyLabel);
  if (key.scheme !== 'ed25519')
    throw new Refusal(
      'bad_request',
      `the validator onboards Ed25519 keys only; key ${key.label} is ${key.scheme}: onboard it through the Ledger API (--via ledger-api)`,
    );
  const { partyId, existing } = await prelude(ctx, opts, key);
  if (existing) return existingResult(ctx, opts, flow, existing);
  const run = startRun(ctx, flow, partyId);
  const participantId = await participantOf(ctx, run, opts);
  const participantUid = participantUidOf(participantId);
  const want: HostingWanted = { participantId };
  const base = { opts, key, via: 'validator' as const, want };
  const seen = await hostingOf(ctx, partyId, participantId);
  if (seen.length > 0) {
    const hosted = await recoverHosted(ctx, run, seen, want, key);
    return finish(ctx, run, { ...base, hosted, status: 'recovered', signed: [], hashes: [] });
  }

  const publicKeyHex = bytesToHex(key.publicKeyRaw);
  const gen = await validator.generateTopology({ party_hint: opts.hint, public_key: publicKeyHex });
  const expect: TopologyExpectation = {
    partyId,
    publicKeySpki: key.publicKeySpki,
    scheme: key.scheme,
    participantUid,
    permission: 'confirmation',
    threshold: 1,
    path: 'validator',
  };
  const inputs: TopologyTxInput[] = gen.topology_txs.map((t) => ({
    transaction: t.topology_tx,
    claimedHash: t.hash,
  }));
  const { hashes, problems } = checkTopology(inputs, expect);
  if (gen.party_id !== partyId)
    problems.unshift({
      reason: 'party_mismatch',
      message: `expected the validator to name the party ${partyId}, found ${gen.party_id}`,
    });
  if (problems.length > 0) return refuse(run, mismatch('validator', problems));

  const signed = await signOrExport(ctx, run, signingParty(partyId, key), hashes, async () => ({
    transactions: gen.topology_txs.map((t) => t.topology_tx),
    expect: { participantUid, permission: 'confirmation', threshold: 1, path: 'validator' },
    synchronizerId: ctx.synchronizerId ?? (await connectedSynchronizer(ctx, undefined)),
    onboarding: { hint: opts.hint, keyLabel: opts.keyLabel, path: 'validator', ...carried(opts) },
  }));
  await run.rec('submitted');
  let hosted: { synchronizerId: string } | undefined;
  let reported: string | undefined;
  try {
    const r = await validator.submitTopology({
      public_key: publicKeyHex,
      signed_topology_txs: gen.topology_txs.map((t, i) => ({
        topology_tx: t.topology_tx,
        signed_hash: signed[i]!.signatureHex,
      })),
    });
    reported = r.party_id;
  } catch (e) {
    if (e instanceof Refusal) throw e;
    hosted = await afterFailedSubmit(ctx, run, e, want, key.fingerprint);
  }
  if (reported !== undefined && reported !== partyId)
    await partyMismatchAfterSubmit(run, `the validator reports party ${reported}, expected ${partyId}`);
  return finish(ctx, run, { ...base, ...(hosted ? { hosted } : {}), status: 'new', signed, hashes });
}

/**
 * The submission succeeded but names another party: what was created is not
 * known (ours may exist), so it is journaled as an ambiguous outcome and refused
 * as `outcome_unknown`, not booked.
 */
async function partyMismatchAfterSubmit(run: Run, message: string): Promise<never> {
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

/** Onboards `hint::fingerprint(key)` through the participant's Ledger API. */
export async function onboardViaLedgerApi(
  ctx: FlowContext,
  opts: OnboardOptions & { synchronizerId?: string },
): Promise<OnboardResult> {
  const flow = 'onboard-ledger-api';
  const key = await describeKey(ctx, opts.keyLabel);
  if (!LEDGER_API_SCHEMES.includes(key.scheme))
    throw new Refusal(
      'bad_request',
      `key ${key.label} is ${key.scheme}; external parties are onboarded with ${LEDGER_API_SCHEMES.join(', ')} keys`,
    );
  const { partyId, existing } = await prelude(ctx, opts, key);
  if (existing) return existingResult(ctx, opts, flow, existing);
  const run = startRun(ctx, flow, partyId);
  const participantId = await participantOf(ctx, run, opts);
  const participantUid = participantUidOf(participantId);
  const synchronizerId = await connectedSynchronizer(ctx, opts.synchronizerId ?? ctx.synchronizerId);
  const want: HostingWanted = { participantId, synchronizerId };
  const base = { opts, key, via: 'ledger-api' as const, want };
  const seen = await hostingOf(ctx, partyId, participantId);
  if (seen.length > 0) {
    const hosted = await recoverHosted(ctx, run, seen, want, key);
    return finish(ctx, run, { ...base, hosted, status: 'recovered', signed: [], hashes: [] });
  }

  const gen = await ctx.ledger.generateExternalPartyTopology({
    synchronizer: synchronizerId,
    partyHint: opts.hint,
    publicKey: {
      format: 'CRYPTO_KEY_FORMAT_DER_X509_SUBJECT_PUBLIC_KEY_INFO',
      keyData: bytesToBase64(key.publicKeySpki),
      keySpec: key.keySpec,
    },
  });
  const expect: TopologyExpectation = {
    partyId,
    publicKeySpki: key.publicKeySpki,
    scheme: key.scheme,
    participantUid,
    permission: 'confirmation' satisfies ParticipantPermission,
    threshold: 1,
    path: 'ledger-api',
  };
  const { hashes, problems } = checkTopology(
    gen.topologyTransactions.map((transaction) => ({ transaction })),
    expect,
  );
  if (gen.partyId !== partyId)
    problems.unshift({
      reason: 'party_mismatch',
      message: `expected the participant to name the party ${partyId}, found ${gen.partyId}`,
    });
  if (gen.publicKeyFingerprint !== key.fingerprint)
    problems.push({
      reason: 'key_mismatch',
      message: `expected the participant to report our key's fingerprint ${key.fingerprint}, found ${gen.publicKeyFingerprint}`,
    });
  let combined: Uint8Array | undefined;
  if (hashes.length > 0 && hashes.length === gen.topologyTransactions.length) {
    combined = multiHash(hashes);
    let claimed: Uint8Array | undefined;
    try {
      claimed = base64ToBytes(gen.multiHash, 'multiHash');
    } catch {
      claimed = undefined;
    }
    if (!claimed || bytesToHex(claimed) !== bytesToHex(combined))
      problems.push({
        reason: 'hash_mismatch',
        message: `expected the multi-hash ${bytesToHex(combined)} (recomputed from the transactions), found ${claimed ? bytesToHex(claimed) : gen.multiHash}`,
      });
  }
  if (problems.length > 0 || !combined) return refuse(run, mismatch('Ledger API', problems));

  const [signed] = await signOrExport(ctx, run, signingParty(partyId, key), [combined], async () => ({
    transactions: gen.topologyTransactions,
    expect: { participantUid, permission: 'confirmation', threshold: 1, path: 'ledger-api' },
    synchronizerId,
    onboarding: {
      hint: opts.hint,
      keyLabel: opts.keyLabel,
      path: 'ledger-api',
      ...(opts.synchronizerId ? { synchronizerId: opts.synchronizerId } : {}),
      ...carried(opts),
    },
  }));
  await run.rec('submitted', { hash: bytesToHex(combined) });
  let hosted: { synchronizerId: string } | undefined;
  let reported: string | undefined;
  try {
    const r = await ctx.ledger.allocateExternalParty({
      synchronizer: synchronizerId,
      onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
      multiHashSignatures: [signed!.signature],
    });
    reported = r.partyId;
  } catch (e) {
    if (e instanceof Refusal) throw e;
    hosted = await afterFailedSubmit(ctx, run, e, want, key.fingerprint);
  }
  if (reported !== undefined && reported !== partyId)
    await partyMismatchAfterSubmit(run, `the participant allocated party ${reported}, expected ${partyId}`);
  return finish(ctx, run, {
    ...base,
    ...(hosted ? { hosted } : {}),
    status: 'new',
    signed: [signed!],
    hashes: [combined],
  });
}

/** The options an onboarding run again after an air-gap import must keep (see `TopologyExport.onboarding`). */
function carried(opts: OnboardOptions): { participantId?: string; grantRights?: boolean } {
  return {
    ...(opts.participantId !== undefined ? { participantId: opts.participantId } : {}),
    ...(opts.grantRights === false ? { grantRights: false } : {}),
  };
}

/**
 * The synchronizer to host the party on, as the participant names it among
 * its connected synchronizers: `wanted` (also given as a physical id, i.e.
 * with its protocol-version suffix), else the first. Refused before anything
 * is generated or signed when the participant is not connected to it, so
 * that the hosting checked after the submission is looked for under the
 * id the participant reports.
 */
async function connectedSynchronizer(ctx: FlowContext, wanted: string | undefined): Promise<string> {
  const ids = (await ctx.ledger.connectedSynchronizers({})).connectedSynchronizers.map(
    (s) => s.synchronizerId,
  );
  if (wanted === undefined) {
    const first = ids[0];
    if (first === undefined)
      throw new Refusal(
        'bad_request',
        'the participant is connected to no synchronizer: give --synchronizer ID',
      );
    return first;
  }
  // Either side may carry the physical id (the logical one with its protocol-version suffix).
  const found =
    ids.find((id) => id === wanted) ??
    ids.find((id) => wanted.startsWith(`${id}::`) || id.startsWith(`${wanted}::`));
  if (found === undefined)
    throw new Refusal(
      'bad_request',
      `the participant is not connected to synchronizer ${wanted} (connected: ${ids.length > 0 ? ids.join(', ') : 'none'})`,
    );
  return found;
}

export interface PartyView {
  partyId: string;
  /** The party book's record; absent for a party this signer does not hold. */
  record?: PartyRecord;
  /** Whether the participant reports the party hosted (and where). */
  hosted?: { synchronizerId: string; permission?: string } | null;
  ansName?: string | null;
  preapproval?: { contractId: string; provider?: string; expiresAt?: string } | null;
  /** What could not be looked up, one sentence each. */
  notes: string[];
}

const reason = (e: unknown) =>
  isCantonApiError(e)
    ? `${e.message}${e.detail ? `: ${e.detail}` : ''}`
    : e instanceof Error
      ? e.message
      : String(e);

/**
 * The party as this signer and the network see it: the book record, whether it
 * is hosted, its ANS name and its transfer preapproval. `null` means "looked
 * up: none"; an absent field means it could not be looked up (see `notes`).
 */
export async function showParty(ctx: FlowContext, partyId: string): Promise<PartyView> {
  const notes: string[] = [];
  const view: PartyView = { partyId, notes };
  const record = await ctx.parties.get(partyId);
  if (record) view.record = record;
  else notes.push(`${partyId} is not in this signer's party book`);
  try {
    view.hosted = (await hostedOn(ctx, partyId)) ?? null;
  } catch (e) {
    notes.push(`hosting could not be checked: ${reason(e)}`);
  }
  if (ctx.validator || ctx.scan) {
    try {
      view.ansName = (await nameOfParty(ctx, partyId)) ?? null;
    } catch (e) {
      notes.push(`the ANS name could not be looked up: ${reason(e)}`);
    }
  }
  if (ctx.validator) {
    try {
      const c = (await ctx.validator.scanProxyTransferPreapproval(partyId)).transfer_preapproval.contract;
      const p = c.payload as Record<string, unknown>;
      view.preapproval = {
        contractId: c.contract_id,
        ...(typeof p.provider === 'string' ? { provider: p.provider } : {}),
        ...(typeof p.expiresAt === 'string' ? { expiresAt: p.expiresAt } : {}),
      };
    } catch (e) {
      if (isCantonApiError(e) && e.status === 404) view.preapproval = null;
      else notes.push(`the transfer preapproval could not be looked up: ${reason(e)}`);
    }
  }
  return view;
}

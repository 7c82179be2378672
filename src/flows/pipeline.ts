/**
 * The one signing pipeline. Every flow, the service, the automation and the
 * offline signer sign through it:
 *
 *   prepare → strict decode → recomputed hash = claimed hash → intent check →
 *   execution window → policy (allow, deny, or wait for approvals:
 *   `AwaitingApproval`) → sign (signer contract) → verify the signature
 *   against the party's registered key → submit → definite outcome → record
 *   (and the policy told: what was reserved against its limits counts, or,
 *   when nothing was signed, is given back).
 *
 * `verifyPrepared` is the pure part (no key is touched); `signVerified` adds
 * the policy, the signature and its verification (`verifyAndSign`: both,
 * journalled, once); `runFlow` drives a whole
 * flow with re-preparation under the same command id when a transaction goes
 * stale and with the truth looked up after an ambiguous submission, never a
 * blind retry. A refusal is a `Refusal`; no signature exists after one.
 */

import { isAccessDenied, isCantonApiError } from '../canton/errors.js';
import { fingerprint, parsePartyId } from '../hashing/canton-hash.js';
import { decodePreparedTransaction } from '../hashing/decode.js';
import { TransactionError } from '../hashing/errors.js';
import { base64ToBytes, bytesToBase64, bytesToHex, hexToBytes } from '../hashing/input.js';
import type { DecodedTransaction } from '../hashing/model.js';
import { isoMicros } from '../hashing/render.js';
import { type HashingScheme, hashParts } from '../hashing/transaction-hash.js';
import { checkIntent } from '../intent/check.js';
import { actingParty, type Intent, type RecognisedAction } from '../intent/model.js';
import { isAwaitingOfflineSignature } from '../keys/offline-backend.js';
import { verifySignature } from '../keys/schemes.js';
import type { CantonSignature, Signer, SignOutput } from '../keys/signer.js';
import {
  AwaitingApproval,
  allowAll,
  type PolicyCaller,
  type PolicyGate,
  type PolicyRef,
} from '../policy/hook.js';
import { LeaseLostError } from '../store/errors.js';
import type { FlowRecorder, JournalStep } from '../store/journal.js';
import type { PartyRecord } from '../store/parties.js';
import { type AirGapExporter, AwaitingSignature } from './air-gap.js';
import { Refusal } from './refusal.js';
import {
  commitDeadlineUs,
  describeWindow,
  type ExecutionWindow,
  executionWindow,
  type WindowOptions,
} from './window.js';

/** A prepared transaction as a participant or validator handed it out. */
export interface PreparedInput {
  /** Base64 (Ledger API, validator) or raw bytes. */
  preparedTransaction: string | Uint8Array;
  /** The hash the participant claims: base64 (Ledger API) or hex (validator), or raw bytes. */
  claimedHash: string | Uint8Array;
  /** The scheme the participant says it hashed with. */
  scheme: HashingScheme;
}

/** The party that signs: its key label and the key registered for it on the ledger. */
export type SigningParty = Pick<
  PartyRecord,
  'partyId' | 'keyLabel' | 'scheme' | 'fingerprint' | 'publicKeySpki'
>;

export interface PipelineOptions {
  signer: Signer;
  policy?: PolicyGate;
  /**
   * Who the flow runs for and what its decision is about: the caller
   * (request to the service), the subject its reservations and approvals are
   * keyed by (default `<flow>:<party>:<command id>`) and its requester.
   */
  policyContext?: { caller?: PolicyCaller; subject?: string; requester?: string };
  recorder?: FlowRecorder;
  /** Refuse anything not hashed with this scheme (V3: `max_record_time` is signed). */
  requireScheme?: HashingScheme;
  /** Refuse transactions whose window closes sooner than this from now (ms). Default 0. */
  minWindowMs?: number;
  window?: WindowOptions;
  /** Current time in µs since the epoch (tests move it). */
  nowUs?: () => bigint;
  /** Where a verified transaction goes when the party's key is held offline. */
  airGap?: AirGapExporter;
}

export interface Verified {
  flow: string;
  party: SigningParty;
  intent: Intent;
  tx: DecodedTransaction;
  scheme: HashingScheme;
  hash: Uint8Array;
  actions: RecognisedAction[];
  window: ExecutionWindow;
  /**
   * When the transaction came as base64 text: that text (trimmed), which the strict decoder
   * accepted as the canonical base64 of `tx.bytes` — sent back as is, not encoded again.
   */
  preparedBase64?: string;
}

export interface SignedTransaction extends Verified {
  /** The policy version and rule that allowed it, who approved it, and the subject decided on. */
  policy: SignedPolicy;
  signature: CantonSignature;
  /** Signature bytes in hex (the validator's endpoints take this). */
  signatureHex: string;
  /** The prepared transaction exactly as decoded and signed, base64. */
  preparedTransactionBase64: string;
}

const systemNowUs = (): bigint => BigInt(Date.now()) * 1000n;

function hashBytes(h: string | Uint8Array): Uint8Array {
  if (typeof h !== 'string') return h;
  if (/^[0-9a-fA-F]{64}$/.test(h)) return hexToBytes(h, 'claimed hash');
  return base64ToBytes(h, 'claimed hash');
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i]! ^ b[i]!;
  return d === 0;
}

/** Steps 2–5: decode, hash, intent, window. Pure: throws a `Refusal`, touches no key. */
export function verifyPrepared(
  flow: string,
  input: PreparedInput,
  party: SigningParty,
  intent: Intent,
  opts: Pick<PipelineOptions, 'requireScheme' | 'minWindowMs' | 'window' | 'nowUs'> & {
    /** The command id the flow prepared under: the transaction must carry exactly it. */
    commandId?: string;
  } = {},
): Verified {
  if (actingParty(intent) !== party.partyId)
    throw new Refusal(
      'bad_request',
      `the intent acts for ${actingParty(intent)} but the signing party is ${party.partyId}`,
    );
  if (opts.requireScheme !== undefined && input.scheme !== opts.requireScheme)
    throw new Refusal(
      'scheme_not_allowed',
      `the transaction was hashed with ${input.scheme.toUpperCase()} but ${opts.requireScheme.toUpperCase()} is required` +
        (opts.requireScheme === 'v3' ? ' (only V3 signs max_record_time)' : ''),
      [],
      { scheme: input.scheme, required: opts.requireScheme },
    );
  let tx: DecodedTransaction;
  let hash: Uint8Array;
  // The text itself, kept to be sent back as is: the strict decoder refuses any text that is not
  // the canonical base64 of the bytes it yields, so it is exactly the base64 of what is hashed.
  const text = typeof input.preparedTransaction === 'string' ? input.preparedTransaction.trim() : undefined;
  try {
    const bytes =
      text !== undefined
        ? base64ToBytes(text, 'prepared transaction')
        : (input.preparedTransaction as Uint8Array);
    tx = decodePreparedTransaction(bytes);
    hash = hashParts(tx, { scheme: input.scheme }).hash;
  } catch (e) {
    if (e instanceof TransactionError)
      throw new Refusal('decode_failed', `the prepared transaction was refused: ${e.message}`, [], {
        code: e.code,
        path: e.path,
      });
    throw e;
  }
  let claimed: Uint8Array;
  try {
    claimed = hashBytes(input.claimedHash);
  } catch {
    throw new Refusal('hash_mismatch', 'the claimed hash is neither 32 bytes of hex nor base64');
  }
  if (!equalBytes(claimed, hash))
    throw new Refusal(
      'hash_mismatch',
      'the hash the participant claims is not the hash of the transaction it sent: something between here and the participant changed one of them',
      [],
      { claimed: bytesToHex(claimed), computed: bytesToHex(hash), scheme: input.scheme },
    );
  // A participant that hands out another command id defeats the ledger's deduplication.
  const carried = tx.metadata.submitterInfo.commandId;
  if (opts.commandId !== undefined && carried !== opts.commandId)
    throw new Refusal(
      'intent_mismatch',
      `the transaction carries command id ${carried}, not ${opts.commandId} under which it was prepared: the ledger could not deduplicate it`,
      [],
      { hash: bytesToHex(hash), commandId: opts.commandId, carried },
    );
  const { actions, problems } = checkIntent(tx, intent);
  if (problems.length > 0)
    throw new Refusal(
      'intent_mismatch',
      `the transaction does not do what was asked: ${problems.map((p) => p.message).join('; ')}`,
      problems,
      { hash: bytesToHex(hash) },
    );
  const window = executionWindow(tx, actions, opts.window, input.scheme);
  const now = (opts.nowUs ?? systemNowUs)();
  const min = BigInt(opts.minWindowMs ?? 0) * 1000n;
  if (window.latestUs <= now + min) {
    const w = describeWindow(window);
    throw new Refusal(
      'window_closed',
      window.latestUs <= now
        ? `the transaction can no longer be executed: its window closed at ${w.latest} (${w.latestSource})`
        : `the transaction's window closes at ${w.latest} (${w.latestSource}), sooner than the required ${opts.minWindowMs} ms from now`,
      [],
      { latest: w.latest, source: w.latestSource },
    );
  }
  // A preparation time ahead of this host's clock would keep the signature usable for that much
  // longer than the caller expects (the window counts from it): only clock skew is tolerated.
  const prepared = tx.metadata.preparationTime;
  if (prepared > now + PREPARATION_SKEW_US) {
    const w = describeWindow(window);
    throw new Refusal(
      'window_closed',
      `the transaction's preparation time ${isoMicros(prepared)} is more than ${PREPARATION_SKEW_US / 60_000_000n} minutes ahead of this host's clock: its signature would stay usable until ${w.latest}`,
      [],
      { preparationTime: isoMicros(prepared), latest: w.latest, source: 'preparation time' },
    );
  }
  return {
    flow,
    party,
    intent,
    tx,
    scheme: input.scheme,
    hash,
    actions,
    window,
    ...(text !== undefined ? { preparedBase64: text } : {}),
  };
}

/** How far a transaction's preparation time may be ahead of this host's clock (skew). */
export const PREPARATION_SKEW_US = 5n * 60_000_000n;

export type SignedPolicy = PolicyRef & { approvedBy?: readonly string[]; subject: string };

/**
 * The subject a flow's policy decision is about: the one the flow names (a
 * withdrawal, an answer to one offer: the same across preparations), else
 * `<flow>:<party>:<command id>:<hash>` — this very transaction, so that an
 * approval or a limit reservation of one transaction never covers another
 * brought under the same command id.
 */
export function policySubject(v: Verified, opts: Pick<PipelineOptions, 'policyContext'>): string {
  return (
    opts.policyContext?.subject ??
    `${v.flow}:${v.party.partyId}:${v.tx.metadata.submitterInfo.commandId}:${bytesToHex(v.hash)}`
  );
}

/** Step 6: the policy's decision on what was verified; a refusal or `AwaitingApproval` when it is not allow. */
export async function applyPolicy(
  v: Verified,
  opts: Pick<PipelineOptions, 'policy' | 'policyContext'>,
): Promise<SignedPolicy> {
  const ctx = opts.policyContext;
  const subject = policySubject(v, opts);
  const decision = await (opts.policy ?? allowAll).decide({
    flow: v.flow,
    partyId: v.party.partyId,
    keyLabel: v.party.keyLabel,
    intent: v.intent,
    actions: v.actions,
    hash: bytesToHex(v.hash),
    subject,
    ...(ctx?.caller ? { caller: ctx.caller } : {}),
    ...(ctx?.requester !== undefined ? { requester: ctx.requester } : {}),
  });
  const ref = (p: PolicyRef) => ({
    policyVersion: String(p.version),
    policySha256: p.sha256,
    rule: p.rule,
  });
  if (decision.outcome === 'deny')
    throw new Refusal('policy_denied', `policy refused: ${decision.reason}`, [], {
      ...ref(decision.policy),
      hash: bytesToHex(v.hash),
    });
  if (decision.outcome === 'approve')
    throw new AwaitingApproval(
      decision.request,
      subject,
      decision.missing,
      decision.expiresAt,
      decision.policy,
    );
  return {
    ...decision.policy,
    subject,
    ...(decision.approvedBy ? { approvedBy: decision.approvedBy } : {}),
  };
}

/**
 * Tells the policy the flow for `subject` ended. Best effort: a failed write
 * leaves a reservation that ages out of its window (it only ever makes a
 * limit stricter), and must not turn a committed flow into an error.
 */
export async function settlePolicy(
  opts: Pick<PipelineOptions, 'policy'>,
  subject: string,
  outcome: 'committed' | 'released',
): Promise<void> {
  await (opts.policy ?? allowAll).settle(subject, outcome).catch(() => undefined);
}

/** Steps 6–8: policy, sign, verify the signature against the registered key. */
export async function signVerified(v: Verified, opts: PipelineOptions): Promise<SignedTransaction> {
  const policy = await applyPolicy(v, opts);
  let out: SignOutput;
  try {
    out = await signAndVerify(opts.signer, v.party, v.hash);
  } catch (e) {
    // An offline key with no imported signature for this hash: the request goes across the air gap.
    if (isAwaitingOfflineSignature(e) && opts.airGap) throw await opts.airGap.exportPrepared(v);
    throw e;
  }
  return {
    ...v,
    policy,
    signature: out.signature,
    signatureHex: out.signatureHex,
    preparedTransactionBase64: v.preparedBase64 ?? bytesToBase64(v.tx.bytes),
  };
}

/**
 * Signs `message` (a prepared-transaction hash, a topology hash or a
 * multi-hash) with the party's key: the key must be the registered one
 * (fingerprint, namespace), and the signature must verify against the
 * registered public key before anything else sees it.
 */
export async function signAndVerify(
  signer: Signer,
  party: SigningParty,
  message: Uint8Array,
): Promise<SignOutput> {
  const spki = base64ToBytes(party.publicKeySpki, 'registered public key');
  checkRegisteredKey(party, spki);
  const key = await signer.describe(party.keyLabel);
  if (key.fingerprint !== party.fingerprint)
    throw new Refusal(
      'key_mismatch',
      `key ${party.keyLabel} (${key.fingerprint}) is not the key registered for ${party.partyId} (${party.fingerprint})`,
    );
  const out = await signer.sign(party.keyLabel, message);
  if (!verifySignature(party.scheme, spki, message, out.bytes))
    throw new Refusal(
      'signature_invalid',
      `the signature from key ${party.keyLabel} does not verify against the registered key; it was discarded`,
    );
  return out;
}

/** The registered key must be the party's: its fingerprint is the one on record and the party's namespace. */
function checkRegisteredKey(party: SigningParty, spki: Uint8Array): void {
  const fp = fingerprint(spki);
  if (fp !== party.fingerprint)
    throw new Refusal(
      'key_mismatch',
      `the registered key of ${party.partyId} does not have the recorded fingerprint`,
    );
  if (parsePartyId(party.partyId).fingerprint !== fp)
    throw new Refusal(
      'key_mismatch',
      `party ${party.partyId} is not in the namespace of its registered key ${fp}`,
    );
}

/** What the flow's submit function resolved to after an ambiguous submission. */
export type Resolution<T> =
  | { status: 'committed'; result: T }
  | { status: 'not-committed' }
  | { status: 'unknown' };

/** One flow: how to prepare (again), submit, and find the truth after an ambiguous submit. */
export interface Flow<T> {
  name: string;
  party: SigningParty;
  intent: Intent;
  /** The command id every preparation of this flow uses (the ledger deduplicates on it). */
  commandId?: string;
  prepare(attempt: number): Promise<PreparedInput>;
  submit(signed: SignedTransaction): Promise<T>;
  /** After a submission whose outcome is unknown (timeout after commit, lost response): look it up. */
  resolveAmbiguous?(signed: SignedTransaction, error: unknown): Promise<Resolution<T>>;
  /** Whether a definite rejection means "went stale, re-prepare under the same command id". */
  isStale?(error: unknown): boolean;
  /** Preparations at most (default 3). */
  maxAttempts?: number;
  /** Small facts to keep in the journal (offsets, contract ids). */
  facts?(result: T): Record<string, string>;
}

export interface FlowResult<T> {
  result: T;
  hash: string;
  signature: CantonSignature;
  attempts: number;
  actions: RecognisedAction[];
  window: { earliest?: string; latest: string; latestSource: string };
  /** How the outcome was established. */
  outcome: 'committed' | 'committed-after-ambiguous';
}

function errorSummary(e: unknown): { code: string; message: string } {
  if (isCantonApiError(e))
    return { code: e.code, message: e.detail ? `${e.message}: ${e.detail}` : e.message };
  return { code: 'ERROR', message: e instanceof Error ? e.message : String(e) };
}

/** Journals one step of a flow: the flow's name, party, intent and command id plus the step's facts. */
export type StepRecorder = (step: JournalStep, extra?: Record<string, unknown>) => Promise<void>;

export function stepRecorder(
  recorder: FlowRecorder | undefined,
  base: { flow: string; partyId: string; intent: Intent; commandId?: string },
): StepRecorder {
  return async (step, extra = {}) => {
    await recorder?.record({ ...base, step, ...extra });
  };
}

/**
 * Steps 2–8 once, journalled: verify, policy, sign, check the signature. A
 * refusal is journalled as `refused` (another error as `failed`) and thrown;
 * a signature is journalled as `signed`. `runFlow` and one-shot signing
 * (src/flows/sign-execute.ts `signOnly`) both sign through this.
 */
export async function verifyAndSign(
  flow: string,
  input: PreparedInput,
  party: SigningParty,
  intent: Intent,
  opts: PipelineOptions & { commandId?: string },
  rec: StepRecorder,
  extra: Record<string, unknown> = {},
): Promise<SignedTransaction> {
  let signed: SignedTransaction;
  let subject: string | undefined;
  try {
    const v = verifyPrepared(flow, input, party, intent, opts);
    subject = policySubject(v, opts);
    signed = await signVerified(v, opts);
  } catch (e) {
    // Nothing was signed: what the decision reserved is given back (an approval or an offline
    // signature still to come keeps it; so does a subject another worker carries now, whose own
    // decision holds the same reservation).
    if (
      subject !== undefined &&
      !(e instanceof AwaitingApproval) &&
      !(e instanceof AwaitingSignature) &&
      !(e instanceof LeaseLostError)
    )
      await settlePolicy(opts, subject, 'released');
    if (e instanceof AwaitingSignature)
      await rec('exported', { ...extra, hash: e.hashes[0], facts: { export: e.exportId } });
    else if (e instanceof AwaitingApproval)
      await rec('awaiting_approval', {
        ...extra,
        reason: 'approvals_required',
        message: e.message,
        facts: { approvalRequest: e.requestId, ...policyFacts(e.policy) },
      });
    else if (e instanceof Refusal)
      await rec('refused', {
        ...extra,
        reason: e.reason,
        message: e.message,
        ...(e.details.hash ? { hash: e.details.hash } : {}),
        ...(e.reason === 'policy_denied' ? { facts: pick(e.details, POLICY_FACTS) } : {}),
      });
    else {
      const { code, message } = errorSummary(e);
      await rec('failed', { ...extra, reason: code, message });
    }
    throw e;
  }
  await rec('signed', {
    ...extra,
    hash: bytesToHex(signed.hash),
    signedBy: signed.signature.signedBy,
    facts: policyFacts(signed.policy),
  });
  return signed;
}

const POLICY_FACTS = ['policyVersion', 'policySha256', 'rule'] as const;

/** The policy a decision was made under, as journal facts (the audit log keeps every decision). */
function policyFacts(p: PolicyRef & { approvedBy?: readonly string[] }): Record<string, string> {
  return {
    policyVersion: String(p.version),
    policySha256: p.sha256,
    rule: p.rule,
    ...(p.approvedBy && p.approvedBy.length > 0 ? { approvedBy: p.approvedBy.join(',') } : {}),
  };
}

function pick(o: Record<string, string>, keys: readonly string[]): Record<string, string> {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k] as string]));
}

export async function runFlow<T>(flow: Flow<T>, opts: PipelineOptions): Promise<FlowResult<T>> {
  // Built at each step: a flow may refine its intent once prepared (e.g. the transfer kind the registry chose).
  const rec: StepRecorder = (step, extra) =>
    stepRecorder(opts.recorder, {
      flow: flow.name,
      partyId: flow.party.partyId,
      intent: flow.intent,
      ...(flow.commandId !== undefined ? { commandId: flow.commandId } : {}),
    })(step, extra);
  const max = flow.maxAttempts ?? 3;
  let lastStale: unknown;
  for (let attempt = 1; attempt <= max; attempt++) {
    if (attempt > 1) await rec('reprepared', { attempt });
    const input = await flow.prepare(attempt);
    let signed: SignedTransaction;
    try {
      signed = await verifyAndSign(
        flow.name,
        input,
        flow.party,
        flow.intent,
        { ...opts, ...(flow.commandId !== undefined ? { commandId: flow.commandId } : {}) },
        rec,
        { attempt },
      );
    } catch (e) {
      // A fresh preparation whose window already closed is stale data from the participant: try once more.
      if (e instanceof Refusal && e.reason === 'window_closed' && attempt < max) {
        lastStale = e;
        continue;
      }
      throw e;
    }
    const hash = bytesToHex(signed.hash);
    const done = async (result: T, outcome: FlowResult<T>['outcome']): Promise<FlowResult<T>> => {
      await rec('committed', { attempt, hash, ...(flow.facts ? { facts: flow.facts(result) } : {}) });
      // Counts against the limits from now on. (A failure after submission keeps the reservation:
      // a participant's word that nothing committed is not proof.)
      await settlePolicy(opts, signed.policy.subject, 'committed');
      return {
        result,
        hash,
        signature: signed.signature,
        attempts: attempt,
        actions: signed.actions,
        window: describeWindow(signed.window),
        outcome,
      };
    };
    try {
      // Until when this transaction could still commit (its signed bounds only): a withdrawal
      // that may have submitted it does not end before then.
      const commitBy = isoMicros(commitDeadlineUs(signed.tx, signed.scheme, opts.window));
      await rec('submitted', { attempt, hash, facts: { commitDeadline: commitBy } });
      return await done(await flow.submit(signed), 'committed');
    } catch (e) {
      if (e instanceof Refusal) {
        await rec(e.reason === 'outcome_unknown' ? 'ambiguous' : 'rejected', {
          attempt,
          hash,
          reason: e.reason,
          message: e.message,
        });
        throw e;
      }
      const { code, message } = errorSummary(e);
      // Not the ledger's answer (one of our own writes around the submission failed, or a bug):
      // nothing says the ledger refused anything, so it is not reported as a rejection.
      if (!isCantonApiError(e)) {
        await rec('failed', { attempt, hash, reason: code, message });
        throw e;
      }
      if (e.ambiguous) {
        await rec('ambiguous', { attempt, hash, reason: code, message });
        const r: Resolution<T> = flow.resolveAmbiguous
          ? await flow.resolveAmbiguous(signed, e)
          : { status: 'unknown' };
        await rec('resolved', { attempt, hash, reason: r.status });
        if (r.status === 'committed') return await done(r.result, 'committed-after-ambiguous');
        if (r.status === 'unknown')
          throw new Refusal(
            'outcome_unknown',
            `the submission's outcome is unknown (${code}); it was not retried, so at most one transaction exists — look it up before trying again`,
            [],
            { hash, code, ...(flow.commandId ? { commandId: flow.commandId } : {}) },
          );
        lastStale = e;
        continue; // definitely not committed: prepare again under the same command id
      }
      await rec('rejected', { attempt, hash, reason: code, message });
      if (flow.isStale?.(e) && attempt < max) {
        lastStale = e;
        continue;
      }
      // Our credentials, not the transaction, were refused: nothing was processed, and the caller
      // is told which service refused what (an upstream error), not that the ledger rejected it.
      if (isAccessDenied(e)) throw e;
      throw new Refusal('submission_rejected', `the ledger rejected the transaction: ${message}`, [], {
        hash,
        code,
      });
    }
  }
  const { code, message } = errorSummary(lastStale);
  throw new Refusal(
    'window_closed',
    `gave up after ${max} preparations: each went stale before it could be executed (${message})`,
    [],
    { code },
  );
}

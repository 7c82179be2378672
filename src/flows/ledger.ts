/**
 * The Ledger API half of a flow: prepare (`/v2/interactive-submission/prepare`)
 * under one command id for every attempt, `executeAndWait` with the pipeline's
 * signature, and the truth after an ambiguous execute read from the
 * completion stream from the offset taken before the first submission. A
 * `DUPLICATE_COMMAND` means an earlier attempt of this command committed: the
 * completion says which update it was.
 */
import { randomUUID } from 'node:crypto';
import { isCantonApiError } from '../canton/errors.js';
import type { JsPrepareSubmissionRequest } from '../canton/ledger-api/schemas.js';
import type { HashingScheme } from '../hashing/transaction-hash.js';
import type { Intent } from '../intent/model.js';
import type { FlowContext } from './context.js';
import type { Flow, Resolution, SignedTransaction, SigningParty } from './pipeline.js';
import { Refusal } from './refusal.js';

export interface LedgerOutcome {
  updateId: string;
  completionOffset: number;
  commandId: string;
  /** The submission that committed, when found among completions (not known after executeAndWait). */
  submissionId?: string;
}

/** What a flow prepares, minus what the flow machinery fills in (user, command id, actAs, scheme). */
export type PrepareBody = Omit<
  JsPrepareSubmissionRequest,
  'userId' | 'commandId' | 'actAs' | 'hashingSchemeVersion'
>;

export interface LedgerFlowSpec {
  name: string;
  party: SigningParty;
  intent: Intent;
  commandId: string;
  /** The prepare request for attempt n (n > 1: re-fetch whatever went stale, e.g. the choice context). */
  request(attempt: number): Promise<PrepareBody>;
  maxAttempts?: number;
}

/** Rejections that mean "this preparation went stale": re-prepare under the same command id. */
export const STALE_CODES: ReadonlySet<string> = new Set([
  'LOCAL_VERDICT_LEDGER_TIME_OUT_OF_BOUND',
  'LOCAL_VERDICT_PREPARATION_TIME_OUT_OF_BOUND',
  'LOCAL_VERDICT_SUBMISSION_TIME_OUT_OF_BOUND',
  'NOT_SEQUENCED_TIMEOUT',
  'LOCAL_VERDICT_INACTIVE_CONTRACTS',
]);

const SCHEME_NAMES: Record<HashingScheme, 'HASHING_SCHEME_VERSION_V2' | 'HASHING_SCHEME_VERSION_V3'> = {
  v2: 'HASHING_SCHEME_VERSION_V2',
  v3: 'HASHING_SCHEME_VERSION_V3',
};

function schemeOf(name: string): HashingScheme {
  if (name === 'HASHING_SCHEME_VERSION_V2') return 'v2';
  if (name === 'HASHING_SCHEME_VERSION_V3') return 'v3';
  // Refused later by the pipeline's scheme rule; V2 is the participant default.
  throw new Error(`the participant used hashing scheme ${name}, which this signer does not support`);
}

/**
 * The truth about `commandId` from the completion stream after `beginExclusive`:
 * a success completion of any submission of the command proves the commit; a
 * rejection completion proves none only for the submission it names (an
 * earlier attempt's rejection says nothing about a later attempt); anything
 * else, after the idle timeout, leaves it unknown.
 */
export async function lookupCompletion(
  ctx: FlowContext,
  q: { party: string; commandId: string; beginExclusive: number; submissionId?: string },
): Promise<Resolution<LedgerOutcome>> {
  const items = await ctx.ledger.completions(
    { userId: ctx.userId, parties: [q.party], beginExclusive: q.beginExclusive },
    { streamIdleTimeoutMs: 1500, limit: 1000 },
  );
  let rejected = false;
  for (const item of items) {
    const r = item.completionResponse;
    if (!r || !('Completion' in r)) continue;
    const c = r.Completion.value;
    if (c.commandId !== q.commandId) continue;
    if (c.status === undefined || c.status.code === 0)
      return {
        status: 'committed',
        result: {
          updateId: c.updateId ?? '',
          completionOffset: c.offset,
          commandId: q.commandId,
          ...(c.submissionId ? { submissionId: c.submissionId } : {}),
        },
      };
    if (q.submissionId === undefined || c.submissionId === q.submissionId) rejected = true;
  }
  return rejected ? { status: 'not-committed' } : { status: 'unknown' };
}

/** `executeAndWait` of a signed transaction for its one acting party, under `submissionId`. */
export async function executeSigned(
  ctx: FlowContext,
  signed: SignedTransaction,
  submissionId: string = randomUUID(),
): Promise<{ updateId: string; completionOffset: number }> {
  const r = await ctx.ledger.executeAndWait({
    preparedTransaction: signed.preparedTransactionBase64,
    partySignatures: {
      signatures: [{ party: signed.party.partyId, signatures: [signed.signature] }],
    },
    submissionId,
    userId: ctx.userId,
    hashingSchemeVersion: SCHEME_NAMES[signed.scheme],
  });
  return { updateId: r.updateId, completionOffset: r.completionOffset };
}

/**
 * Answers that say "this command id is already taken" (committed, or still in
 * flight): never a definite rejection. Unless the completion stream proves the
 * commit, the outcome is unknown and nothing is retried.
 */
export const TAKEN_CODES: ReadonlySet<string> = new Set([
  'DUPLICATE_COMMAND',
  'SUBMISSION_ALREADY_IN_FLIGHT',
]);

export function ledgerFlow(ctx: FlowContext, spec: LedgerFlowSpec): Flow<LedgerOutcome> {
  let beginExclusive: number | undefined;
  const party = spec.party.partyId;

  let submissionId: string | undefined;
  const lookup = (from = beginExclusive): Promise<Resolution<LedgerOutcome>> =>
    from === undefined
      ? Promise.resolve({ status: 'unknown' })
      : lookupCompletion(ctx, {
          party,
          commandId: spec.commandId,
          beginExclusive: from,
          ...(submissionId !== undefined ? { submissionId } : {}),
        });

  return {
    name: spec.name,
    party: spec.party,
    intent: spec.intent,
    commandId: spec.commandId,
    ...(spec.maxAttempts !== undefined ? { maxAttempts: spec.maxAttempts } : {}),
    async prepare(attempt) {
      const body = await spec.request(attempt);
      const res = await ctx.ledger.prepare({
        ...body,
        userId: ctx.userId,
        commandId: spec.commandId,
        actAs: [party],
        ...(ctx.requireScheme ? { hashingSchemeVersion: SCHEME_NAMES[ctx.requireScheme] } : {}),
      });
      return {
        preparedTransaction: res.preparedTransaction,
        claimedHash: res.preparedTransactionHash,
        scheme: schemeOf(res.hashingSchemeVersion),
      };
    },
    async submit(signed: SignedTransaction) {
      if (beginExclusive === undefined) beginExclusive = (await ctx.ledger.ledgerEnd()).offset;
      submissionId = randomUUID();
      try {
        return { ...(await executeSigned(ctx, signed, submissionId)), commandId: spec.commandId };
      } catch (e) {
        // The command id is taken: an earlier attempt committed (the error names its completion
        // offset; read the completion there) or is in flight. Only a success completion settles it.
        if (isCantonApiError(e) && TAKEN_CODES.has(e.code)) {
          const at = Number(e.cantonError?.context?.completion_offset);
          const r = await lookup(Number.isSafeInteger(at) && at > 0 ? at - 1 : beginExclusive);
          if (r.status === 'committed') return r.result;
          throw new Refusal(
            'outcome_unknown',
            `the ledger says command ${spec.commandId} was already submitted (${e.code}), but its completion could not be found: look it up before trying again`,
            [],
            { code: e.code, commandId: spec.commandId },
          );
        }
        throw e;
      }
    },
    resolveAmbiguous: () => lookup(),
    isStale: (e) => isCantonApiError(e) && STALE_CODES.has(e.code),
  };
}

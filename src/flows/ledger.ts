/**
 * The Ledger API half of a flow: prepare (`/v2/interactive-submission/prepare`)
 * under one command id for every attempt, `executeAndWait` with the pipeline's
 * signature, and the truth after an ambiguous execute read from the
 * completion stream (read to its end, page by page) from the offset taken
 * before the first submission. A `DUPLICATE_COMMAND` or
 * `SUBMISSION_ALREADY_IN_FLIGHT` means an earlier submission of this command
 * committed or is in flight: the completion says which update it was, and
 * without it the outcome is unknown, never a rejection.
 */
import { randomUUID } from 'node:crypto';
import { type CantonApiError, isCantonApiError } from '../canton/errors.js';
import type { JsPrepareSubmissionRequest, JsTransaction } from '../canton/ledger-api/schemas.js';
import type { HashingScheme } from '../hashing/transaction-hash.js';
import type { Intent } from '../intent/model.js';
import type { FlowContext } from './context.js';
import {
  completionsRequest,
  executeRequest,
  FROM_BUILDER,
  partyUpdatesRequest,
  SCHEME_NAMES,
} from './ledger-requests.js';
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

function schemeOf(name: string): HashingScheme {
  if (name === 'HASHING_SCHEME_VERSION_V2') return 'v2';
  if (name === 'HASHING_SCHEME_VERSION_V3') return 'v3';
  // Refused later by the pipeline's scheme rule; V2 is the participant default.
  throw new Error(`the participant used hashing scheme ${name}, which this signer does not support`);
}

/** How long a completion read waits for more before it ends, unless the context says otherwise. */
const COMPLETION_IDLE_MS = 1500;
/** Completions read per request while scanning; a full page means there may be more. */
const COMPLETION_PAGE = 1000;
/** Pages read at most in one scan (a longer history leaves the scan incomplete: unknown, not "none"). */
const MAX_COMPLETION_PAGES = 100;

/** What the completion stream says about one command id after an offset. */
export interface CompletionScan {
  /** A success completion of any submission of the command: it committed. */
  committed?: LedgerOutcome;
  /** Submissions of the command with a rejection completion ('' when one carried no submission id). */
  rejected: ReadonlySet<string>;
  /**
   * The whole stream up to the time of the scan was read (a page came back
   * short of the limit: the stream ran dry). Only a complete scan that found
   * no success says a completion is not there.
   */
  complete: boolean;
}

/**
 * Reads the completions of `party` after `beginExclusive` page by page until
 * the stream runs dry, looking for `commandId`: stops at its first success.
 */
export async function scanCompletions(
  ctx: FlowContext,
  q: { party: string; commandId: string; beginExclusive: number },
): Promise<CompletionScan> {
  const rejected = new Set<string>();
  let from = q.beginExclusive;
  for (let page = 0; page < MAX_COMPLETION_PAGES; page++) {
    const items = await ctx.ledger.completions(completionsRequest(ctx.userId, q.party, from), {
      streamIdleTimeoutMs: ctx.completionIdleMs ?? COMPLETION_IDLE_MS,
      limit: COMPLETION_PAGE,
      ...FROM_BUILDER,
    });
    let last = from;
    for (const item of items) {
      const r = item.completionResponse;
      if (!r) continue;
      if ('OffsetCheckpoint' in r) {
        last = Math.max(last, r.OffsetCheckpoint.value.offset);
        continue;
      }
      if (!('Completion' in r)) continue;
      const c = r.Completion.value;
      last = Math.max(last, c.offset);
      if (c.commandId !== q.commandId) continue;
      if (c.status === undefined || c.status.code === 0)
        return {
          committed: {
            updateId: c.updateId ?? '',
            completionOffset: c.offset,
            commandId: q.commandId,
            ...(c.submissionId ? { submissionId: c.submissionId } : {}),
          },
          rejected,
          complete: true,
        };
      rejected.add(c.submissionId ?? '');
    }
    if (items.length < COMPLETION_PAGE) return { rejected, complete: true };
    // A full page that did not move the offset forward: reading on would return it again.
    if (last <= from) break;
    from = last;
  }
  return { rejected, complete: false };
}

/** Updates read per request while looking for the transaction that consumed a contract. */
const UPDATES_PAGE = 500;

type TxEvent = JsTransaction['events'][number];
/** A consuming exercise, as the party's updates show it. */
export type ConsumingExercise = Extract<TxEvent, { ExercisedEvent: unknown }>['ExercisedEvent'];

/**
 * The first of `party`'s transactions after `from` (up to `end`) that
 * exercises a consuming choice on a contract `wanted` accepts, with that
 * exercise. When none was found, `readTo` is the offset the read really
 * reached: a page may come back short of `end` (the participant cuts a stream
 * that idles), so pages are asked for until `end` is reached or a page brings
 * nothing new, and no offset past what was read is claimed.
 */
export async function findConsumer(
  ctx: FlowContext,
  q: { party: string; from: number; end: number; wanted: (contractId: string) => boolean },
): Promise<{ tx: JsTransaction; exercise: ConsumingExercise } | { readTo: number }> {
  let after = q.from;
  while (after < q.end) {
    const page = await ctx.ledger.updates(partyUpdatesRequest(q.party, after, q.end), {
      limit: UPDATES_PAGE,
      ...FROM_BUILDER,
    });
    let last = after;
    for (const item of page) {
      const u = item.update;
      if (!u) continue;
      if ('OffsetCheckpoint' in u) {
        last = Math.max(last, u.OffsetCheckpoint.value.offset);
        continue;
      }
      if (!('Transaction' in u)) continue;
      const tx = u.Transaction.value;
      last = Math.max(last, tx.offset);
      for (const ev of tx.events)
        if ('ExercisedEvent' in ev && ev.ExercisedEvent.consuming && q.wanted(ev.ExercisedEvent.contractId))
          return { tx, exercise: ev.ExercisedEvent };
    }
    if (last <= after) return { readTo: after };
    after = last;
  }
  return { readTo: Math.min(after, q.end) };
}

/**
 * The truth about `commandId` from the completion stream after `beginExclusive`:
 * a success completion of any submission of the command proves the commit; a
 * rejection completion proves none only for the submission it names (an
 * earlier attempt's rejection says nothing about a later attempt); anything
 * else leaves it unknown.
 */
export async function lookupCompletion(
  ctx: FlowContext,
  q: { party: string; commandId: string; beginExclusive: number; submissionId?: string },
): Promise<Resolution<LedgerOutcome>> {
  const scan = await scanCompletions(ctx, q);
  if (scan.committed) return { status: 'committed', result: scan.committed };
  const rejected = q.submissionId === undefined ? scan.rejected.size > 0 : scan.rejected.has(q.submissionId);
  return rejected ? { status: 'not-committed' } : { status: 'unknown' };
}

/**
 * After an answer that the command id is already taken (`TAKEN_CODES`): an
 * earlier submission of the command committed or is still in flight. The
 * earlier commit when the completions show it (from the offset the error
 * names, else from `from`); otherwise the outcome is unknown — never a
 * rejection, since the ledger may hold (or be about to hold) the transaction.
 */
export async function takenOutcome(
  ctx: FlowContext,
  e: CantonApiError,
  q: { party: string; commandId: string; from?: number | undefined },
): Promise<LedgerOutcome> {
  const at = Number(e.cantonError?.context?.completion_offset);
  const begin = Number.isSafeInteger(at) && at > 0 ? at - 1 : q.from;
  if (begin !== undefined) {
    const r = await lookupCompletion(ctx, { party: q.party, commandId: q.commandId, beginExclusive: begin });
    if (r.status === 'committed') return r.result;
  }
  throw new Refusal(
    'outcome_unknown',
    `the ledger says command ${q.commandId} was already submitted (${e.code}), but its completion could not be found: look it up before trying again`,
    [],
    { code: e.code, commandId: q.commandId },
  );
}

/** `executeAndWait` of a signed transaction for its one acting party, under `submissionId`. */
export async function executeSigned(
  ctx: FlowContext,
  signed: SignedTransaction,
  submissionId: string = randomUUID(),
): Promise<{ updateId: string; completionOffset: number }> {
  const r = await ctx.ledger.executeAndWait(executeRequest(ctx.userId, signed, submissionId), FROM_BUILDER);
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
  const lookup = (): Promise<Resolution<LedgerOutcome>> =>
    beginExclusive === undefined
      ? Promise.resolve({ status: 'unknown' })
      : lookupCompletion(ctx, {
          party,
          commandId: spec.commandId,
          beginExclusive,
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
        if (isCantonApiError(e) && TAKEN_CODES.has(e.code))
          return await takenOutcome(ctx, e, { party, commandId: spec.commandId, from: beginExclusive });
        throw e;
      }
    },
    resolveAmbiguous: () => lookup(),
    isStale: (e) => isCantonApiError(e) && STALE_CODES.has(e.code),
  };
}

/**
 * What one run of one withdrawal shares (`Run`: the row as the run last
 * read or moved it, its flags, its crash points) and the actions of the
 * lifecycle table (withdrawal-lifecycle.ts) that move the run's own row
 * outside the pipeline's steps: each a small named function. The pipeline's
 * steps are withdrawal-context.ts; which action runs when is the table.
 *
 * Every move of a worker's run is fenced by its lease (`owner`): once
 * another worker holds the row, the run's next move fails and nothing more
 * is sent. `lastError` is the latest reason a run did not finish (recorded
 * when it changes, as `withdrawal.error`), cleared by each move forward.
 */
import { isCantonApiError } from '../canton/errors.js';
import { KeyError } from '../keys/backend.js';
import type { SignOutput } from '../keys/signer.js';
import type { OnlineAirGap } from '../offline/online.js';
import { AwaitingApproval } from '../policy/hook.js';
import type { Queryable } from '../store/db.js';
import { StoreError } from '../store/errors.js';
import type { Store } from '../store/index.js';
import type { TransitionOptions, Withdrawal, WithdrawalState } from '../store/repos/withdrawals.js';
import type { AwaitingSignature } from './air-gap.js';
import type { FlowContext } from './context.js';
import { Refusal } from './refusal.js';
import type { Truth } from './withdrawal-lifecycle.js';
import { mayStillCommit } from './withdrawal-truth.js';

/** Where a test may stop the process (crash tests): after each durable step. */
export type WithdrawalPoint = 'received' | 'prepared' | 'signed' | 'submitted' | 'executed';

export interface RunEnv {
  ctx: FlowContext;
  store: Store;
  /** The online side of the air gap, for parties whose key is held offline. */
  airGap?: OnlineAirGap;
  /** Test-only: called after each durable step (a crash test kills the process here). */
  at?: (point: WithdrawalPoint, w: Withdrawal) => void | Promise<void>;
  /** The worker holding the withdrawal's lease: every move of the run is fenced by it. */
  owner?: string;
  /** Refuse, before signing, a transfer that would only be an offer (transfer.ts `requireDelivery`). */
  requireDelivery?: boolean;
}

/** What one run ended with: a terminal state, or "look again later". */
export type RunOutcome =
  | { done: true; state: WithdrawalState }
  | { done: false; reason: string; error?: unknown; transient: boolean };

const TERMINAL: readonly WithdrawalState[] = ['committed', 'rejected', 'failed', 'cancelled', 'expired'];

export function isTerminal(s: WithdrawalState): boolean {
  return TERMINAL.includes(s);
}

/** What a withdrawal's policy decision, limit reservations and approvals are keyed by. */
export function withdrawalSubject(id: string): string {
  return `withdrawal:${id}`;
}

/** The withdrawal's own deadline (`options.executeBefore`), if it has one. */
export function deadlineOf(w: Withdrawal): number | undefined {
  const v = w.options.executeBefore;
  if (typeof v !== 'string') return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
}

/**
 * Why a run failed, as the withdrawal shows it to its callers (`lastError`)
 * and the worker logs it: refusals, ledger answers and the store's and key
 * backends' own errors say what happened; anything else (a bug, a driver's
 * message) is named by its kind only, its text left to the service log.
 */
export function errorText(e: unknown): string {
  if (e instanceof Refusal) return `${e.reason}: ${e.message}`;
  if (e instanceof AwaitingApproval) return `approvals_required: ${e.message}`;
  if (isCantonApiError(e)) return `${e.code}: ${e.message}`;
  if (e instanceof StoreError || e instanceof KeyError) return `${e.code}: ${e.message}`;
  return `internal error (${e instanceof Error ? e.name : typeof e}); the service log has the details`;
}

/** Per-run facts the flow context's proxies and the recorder share. */
export interface RunState {
  /** The ledger definitely did not commit what was submitted in this run (so re-preparing is allowed). */
  definitelyNot: boolean;
  prepared?: { bytes: string; scheme: string };
  /** The id of the preparation on record that this run signs (its signature and submission name it). */
  preparedId?: string | undefined;
  signed?: SignOutput;
  ledgerEnd?: number;
  /**
   * The ledger end this attempt just read before submitting, not yet handed
   * out: the flow's own "ledger end before the first submission" is this same
   * offset (read after nothing of this attempt was sent), so it is not read twice.
   */
  unusedEnd?: number;
  /**
   * The first ledger end this run read from the ledger (for its holdings
   * snapshot) while nothing of it had been submitted: read before any
   * submission of this run, it bounds where their completions can be, so the
   * first submission uses it instead of reading the end again.
   */
  seenEnd?: number;
  /** This run has sent a submission (later ones read the ledger end afresh). */
  sent?: boolean;
  /** An execute of this run returned success (whatever fails afterwards, it is on the ledger). */
  executedOk: boolean;
  /**
   * That execute's outcome, not yet written to its submission record: written
   * in the transaction of the move to `committed`, or on its own when the run
   * ends without that move.
   */
  outcome?: { submissionId: string; completionOffset: number; updateId: string };
  /** A write of ours failed inside the pipeline (it may report it as a rejection): not the ledger's answer. */
  ownFailure: boolean;
  /** The latest record time at which the transaction about to be submitted could commit, ISO. */
  commitDeadline?: string;
  /** The submission this run sent last. */
  lastSubmissionId?: string;
}

export function freshState(): RunState {
  return { definitelyNot: false, executedOk: false, ownFailure: false };
}

/** The lease fence of a worker's moves (none when the run is not a worker's). */
export function fenced(env: RunEnv): Pick<TransitionOptions, 'owner'> {
  return env.owner !== undefined ? { owner: env.owner } : {};
}

type Patch = Parameters<Store['withdrawals']['transition']>[3];
/** A guarded move of one row, as the worker (fenced by its lease); resolves to the moved row. */
export type Move = (
  from: WithdrawalState[],
  to: WithdrawalState,
  patch?: Patch,
  opts?: TransitionOptions,
) => Promise<Withdrawal>;

export function workerMove(env: RunEnv, id: string, moved: (w: Withdrawal) => void = () => {}): Move {
  return async (from, to, patch = {}, opts = {}) => {
    const w = await env.store.withdrawals.transition(id, from, to, patch, {
      actor: 'worker',
      ...fenced(env),
      ...opts,
    });
    moved(w);
    return w;
  };
}

/** One run of one withdrawal: its row as last read or moved, its flags, its crash points. */
export interface Run {
  env: RunEnv;
  w: Withdrawal;
  flags: RunState;
  move: Move;
  at(p: WithdrawalPoint): Promise<void>;
}

export function startRun(env: RunEnv, w0: Withdrawal): Run {
  const r: Run = {
    env,
    w: w0,
    flags: freshState(),
    move: workerMove(env, w0.id, (w) => {
      r.w = w;
    }),
    at: async (p) => env.at?.(p, r.w),
  };
  return r;
}

/** The withdrawal shows `lastError` as why it is not finished yet (written when it changed; best effort). */
export async function showError(env: RunEnv, w: Withdrawal, lastError: string): Promise<void> {
  const text = lastError.slice(0, 2000);
  if (w.lastError === text || isTerminal(w.state)) return;
  // A row that moved on meanwhile (cancelled, another worker's) keeps what it shows.
  await env.store.withdrawals
    .noteError(w.id, w.state, text, { actor: 'worker', ...fenced(env) })
    .catch(() => undefined);
}

/** The submission record of a successful execute (see `RunState.outcome`). */
export function recordOutcome(
  env: RunEnv,
  o: NonNullable<RunState['outcome']>,
  q?: Queryable,
): Promise<unknown> {
  const { submissionId, ...facts } = o;
  return env.store.artifacts.setSubmissionOutcome(submissionId, { outcome: 'committed', ...facts }, q);
}

/**
 * The move's `also` that writes a committed submission's outcome (a record gone: the move goes on),
 * nothing read back: it travels with the move's next statement.
 */
export function outcomeWith(env: RunEnv, o: RunState['outcome']): Pick<TransitionOptions, 'also'> {
  if (!o) return {};
  const { submissionId, ...facts } = o;
  return {
    also: (tx) =>
      env.store.artifacts.writeSubmissionOutcome(submissionId, { outcome: 'committed', ...facts }, tx),
  };
}

/** A committed withdrawal's imported offline signature is used up. */
export async function exportUsed(env: RunEnv, id: string): Promise<void> {
  if (!env.airGap) return;
  const x = await env.store.airGap.currentFor(id);
  if (x?.status === 'imported') await env.store.airGap.settle(x.id, 'done', 'worker', { withdrawal: id });
}

// ---- the actions (withdrawal-lifecycle.ts names them) ---------------------------------------

const COMMITTED: RunOutcome = { done: true, state: 'committed' };

/** `commit-found`: the ledger shows the commit the row does not (completions): recorded as such. */
export async function commitFound(
  env: RunEnv,
  move: Move,
  id: string,
  truth: Truth | undefined,
): Promise<RunOutcome> {
  if (truth?.status !== 'committed') throw new Error('commit-found needs a commit the ledger shows');
  await move(
    ['submitted'],
    'committed',
    { updateId: truth.updateId, lastError: null },
    { details: { resolvedFrom: 'completions' }, ...outcomeWith(env, truth.outcome) },
  );
  await exportUsed(env, id);
  return COMMITTED;
}

/** `expire`: executeBefore passed; saying what kept it from committing (`cause`), when known. */
export async function expire(move: Move, w: Withdrawal, cause: string | undefined): Promise<RunOutcome> {
  const why = cause !== undefined ? ` (${cause})` : '';
  await move([w.state], 'expired', {
    lastError: `executeBefore passed before the withdrawal committed${why}`,
  });
  return { done: true, state: 'expired' };
}

/** `wait-past-deadline`: too late to prepare anew, but what was submitted may still commit. */
export async function waitPastDeadline(
  env: RunEnv,
  w: Withdrawal,
  truth: Truth | undefined,
): Promise<RunOutcome> {
  const reason = `executeBefore passed; ${mayStillCommit(truth)}`;
  await showError(env, w, reason);
  return { done: false, reason, transient: true };
}

/** `resume`: nothing of it is on the ledger (never sent, or definitely not committed): prepare again. */
export async function resume(move: Move, w: Withdrawal): Promise<undefined> {
  const details = w.state === 'submitted' ? { resumed: true, ledger: 'not committed' } : { resumed: true };
  await move([w.state], 'prepared', {}, { details });
  return undefined;
}

/** `await-approval`: people must approve it first; nothing was signed. */
export async function awaitApproval(move: Move, w: Withdrawal, e: AwaitingApproval): Promise<RunOutcome> {
  await move(
    [w.state],
    'awaiting_approval',
    { lastError: null },
    {
      details: {
        approvalRequest: e.requestId,
        missing: e.missing.map((m) => `${m.need} of ${m.group}`),
      },
    },
  );
  return { done: true, state: 'awaiting_approval' };
}

/** `await-signature`: parked until the response is imported (or the request goes stale); nothing signed or sent. */
export async function awaitSignature(move: Move, e: AwaitingSignature): Promise<RunOutcome> {
  await move(
    ['prepared'],
    'awaiting_signature',
    { lastError: null },
    { details: { export: e.exportId, hashes: [...e.hashes], windowLatest: e.windowLatest } },
  );
  return { done: true, state: 'awaiting_signature' };
}

/** Look again later; the withdrawal shows why (`lastError`: the error's own text unless given). */
export async function again(
  env: RunEnv,
  w: Withdrawal,
  e: unknown,
  reason: string,
  lastError = errorText(e),
): Promise<RunOutcome> {
  await showError(env, w, lastError);
  return { done: false, reason, error: e, transient: true };
}

/** `wait-for-outcome`: what was sent may still commit (or the refusal says the outcome is unknown). */
export function waitForOutcome(
  env: RunEnv,
  w: Withdrawal,
  e: unknown,
  truth: Truth | undefined,
): Promise<RunOutcome> {
  const lastError = errorText(e);
  const why =
    e instanceof Refusal && e.reason === 'outcome_unknown'
      ? e.reason
      : `${lastError}; ${mayStillCommit(truth)}`;
  return again(env, w, e, why, lastError);
}

/** `unsign`: a signed row sent nothing: back to `prepared` before it ends. */
export async function unsign(move: Move): Promise<undefined> {
  await move(['signed'], 'prepared');
  return undefined;
}

/** `reject`: refused for good before anything sent can commit. */
export async function reject(move: Move, w: Withdrawal, e: unknown): Promise<RunOutcome> {
  await move([w.state], 'rejected', { lastError: errorText(e) });
  return { done: true, state: 'rejected' };
}

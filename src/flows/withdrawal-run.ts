/**
 * Carrying ONE withdrawal one step further (the worker in withdrawal.ts
 * decides when and holds the lease). A withdrawal is a token-standard
 * transfer (transfer.ts) through the one pipeline under the withdrawal's
 * command id; its row moves from the pipeline's own steps, each write
 * finished before the pipeline goes on (a failed write aborts the flow):
 *
 *   about to sign   → prepared (the prepared transaction recorded; a cancelled
 *                     withdrawal fails here, so it is never signed, and a
 *                     cancel after this move is refused: it authorises signing)
 *   journal signed  → signed (the signature recorded; nothing sent yet)
 *   journal submitted → submitted, with the ledger end read first
 *                     (write-ahead: the row says "maybe on the ledger" before
 *                     execute is called)
 *   journal committed → committed with the update id.
 *
 * The journal record of each of the last three steps is written in the same
 * transaction as the move it causes.
 *
 * Resuming a `submitted` row looks for the truth first (`ledgerTruth`: the
 * completions of the command id after the recorded ledger end, read to the
 * stream's end): committed → committed; definitely not committed → prepared
 * and run again; unknown → run again under the SAME command id while the row
 * stays `submitted`, spending the same input holdings as what was sent (the
 * participant deduplicates the command id, and the synchronizer lets at most
 * one of two transactions spending the same holdings commit; a
 * DUPLICATE_COMMAND or SUBMISSION_ALREADY_IN_FLIGHT without a completion is
 * `outcome_unknown`).
 *
 * "Definitely not committed" needs every submission ever sent for the
 * withdrawal past its transaction's commit deadline (the bounds its signature
 * covers, plus a margin for clock skew) — a rejection the participant reports
 * is not proof — with a complete read of the completions showing no success.
 * Until then a `submitted` row never becomes `rejected` or `expired`, whatever
 * a later run meets (a refusal, the deadline): an earlier submission may still
 * commit, and a terminal answer would invite the client to pay again. A
 * refusal of a row that was never submitted is terminal (`rejected`, reason
 * kept); other errors are retried by the worker. `lastError` is the latest
 * reason a run did not finish (recorded when it changes, as
 * `withdrawal.error`), cleared by each move forward. Every move of a worker's run
 * is fenced by its lease (`owner`): once another worker holds the row, the
 * run's next move fails and nothing more is sent.
 */
import { isCantonApiError } from '../canton/errors.js';
import type { LedgerApiClient } from '../canton/ledger-api/client.js';
import { decodePreparedTransaction } from '../hashing/decode.js';
import { base64ToBytes, bytesToHex } from '../hashing/input.js';
import { recogniseActions } from '../intent/recognise.js';
import { KeyError } from '../keys/backend.js';
import type { Signer, SignOutput } from '../keys/signer.js';
import { type OnlineAirGap, SUBMIT_MARGIN_MS } from '../offline/online.js';
import { AwaitingApproval } from '../policy/hook.js';
import type { Queryable } from '../store/db.js';
import { LeaseLostError, NotFoundError, StoreError } from '../store/errors.js';
import type { Store } from '../store/index.js';
import type { FlowRecorder, JournalRecord } from '../store/journal.js';
import type { ExportRecord } from '../store/repos/air-gap.js';
import type { SubmissionRecord } from '../store/repos/artifacts.js';
import { DbRecorder } from '../store/repos/recorder.js';
import type { TransitionOptions, Withdrawal, WithdrawalState } from '../store/repos/withdrawals.js';
import { AwaitingSignature } from './air-gap.js';
import type { FlowContext } from './context.js';
import { type Holding, listHoldings } from './holdings.js';
import { scanCompletions, TAKEN_CODES } from './ledger.js';
import { Refusal } from './refusal.js';
import { transfer } from './transfer.js';
import { LEDGER_TIME_TOLERANCE_US, PREPARATION_TIME_TOLERANCE_US } from './window.js';
import { exportedTransfer, stillOpen } from './withdrawal-air-gap.js';

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

function schemeName(v: string): string {
  const m = /_V(\d+)$/.exec(v);
  return m ? `v${m[1]}` : 'v2';
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

/**
 * How long after a submission's commit deadline (a record time, on the
 * synchronizer's clock) this host still counts it as possibly committed:
 * for clock skew between the two, the ledger-time tolerance twice over.
 */
export const SETTLE_MARGIN_MS = Number((2n * LEDGER_TIME_TOLERANCE_US) / 1000n);

/** Until when a submission may still commit (ms since the epoch). */
export function openUntil(s: SubmissionRecord): number {
  // Rows of older builds have no deadline (nor would an unreadable one count as passed): the
  // preparation-time tolerance from when it was sent.
  const recorded = s.commitDeadline !== undefined ? Date.parse(s.commitDeadline) : Number.NaN;
  const closes = Number.isFinite(recorded)
    ? recorded
    : Date.parse(s.createdAt) + Number(PREPARATION_TIME_TOLERANCE_US / 1000n);
  return closes + SETTLE_MARGIN_MS;
}

/**
 * Submissions that may still commit: those before their commit deadline. A
 * rejection the participant reports does not close one — the participant is
 * not trusted, and its deduplication is its own — only the deadline the
 * synchronizer enforces does. (A reported rejection still lets the worker try
 * again at once, with the same input holdings: see `pinnedInputs`.)
 */
function openSubmissions(subs: readonly SubmissionRecord[], now: number): SubmissionRecord[] {
  return subs.filter((s) => openUntil(s) > now);
}

/**
 * The input holdings of the withdrawal's last prepared transaction: while a
 * transaction sent for it may still commit, every new preparation spends
 * these same holdings, so that any two conflict on the synchronizer and at
 * most one commits. Undefined when none was prepared or it names none.
 */
async function pinnedInputs(env: RunEnv, w: Withdrawal): Promise<string[] | undefined> {
  const last = (await env.store.artifacts.preparedFor(w.id)).at(-1);
  if (!last) return undefined;
  const tx = decodePreparedTransaction(base64ToBytes(last.bytes, 'the prepared transaction'));
  const inputs = recogniseActions(tx)[0]?.inputs;
  return inputs && inputs.length > 0 ? inputs : undefined;
}

/** The holdings `cids` of the sender, all still active, or outcome_unknown (something spent them). */
async function activeHoldings(env: RunEnv, w: Withdrawal, cids: readonly string[]): Promise<Holding[]> {
  const held = new Map((await listHoldings(env.ctx, w.party)).map((h) => [h.cid, h]));
  const missing = cids.filter((c) => !held.has(c));
  if (missing.length > 0)
    throw new Refusal(
      'outcome_unknown',
      `the holdings an earlier submission of this withdrawal spends are no longer active (${missing.join(', ')}): it may have committed. The withdrawal waits for its outcome or its commit deadline before spending other holdings`,
      [],
      { commandId: w.commandId },
    );
  return cids.map((c) => held.get(c) as Holding);
}

type Truth =
  | { status: 'committed'; updateId: string; outcome?: NonNullable<RunState['outcome']> }
  | { status: 'not-committed' }
  /** `until`: when the last submission that may still commit is past its deadline (ms), if known. */
  | { status: 'unknown'; until?: number };

/**
 * The truth about a withdrawal that may have been submitted: the completions
 * of its command id after the recorded ledger end, read to the stream's end,
 * and the record of every submission sent for it. Committed when a success
 * completion is found; not committed only when the read was complete and no
 * submission can still commit (each past its commit deadline).
 */
export async function ledgerTruth(env: RunEnv, w: Withdrawal): Promise<Truth> {
  const from = await env.store.withdrawals.lookupFrom(w.id);
  if (from === undefined) return { status: 'unknown' };
  const subs = await env.store.artifacts.submissionsFor(w.commandId);
  const scan = await scanCompletions(env.ctx, {
    party: w.party,
    commandId: w.commandId,
    beginExclusive: from,
  });
  if (!scan.committed) {
    const open = openSubmissions(subs, Date.now());
    if (scan.complete && open.length === 0) return { status: 'not-committed' };
    return open.length > 0
      ? { status: 'unknown', until: Math.max(...open.map(openUntil)) }
      : { status: 'unknown' };
  }
  const { updateId, completionOffset, submissionId } = scan.committed;
  // The submission record of ours that committed, when the run that sent it stopped before
  // writing its outcome: written with the move to committed.
  const ours =
    submissionId !== undefined &&
    subs.some((s) => s.submissionId === submissionId && s.outcome !== 'committed');
  return {
    status: 'committed',
    updateId,
    ...(ours ? { outcome: { submissionId, completionOffset, updateId } } : {}),
  };
}

/** The move's `also` that writes a committed submission's outcome (a record gone: the move goes on). */
function outcomeWith(env: RunEnv, o: RunState['outcome']): Pick<TransitionOptions, 'also'> {
  if (!o) return {};
  return {
    also: async (tx) => {
      await recordOutcome(env, o, tx).catch((e: unknown) => {
        if (!(e instanceof NotFoundError)) throw e;
      });
    },
  };
}

/** Per-run facts the proxies and the recorder share. */
interface RunState {
  /** The row stays `submitted` for this attempt (resubmission under the same command id). */
  stay: boolean;
  /** The ledger definitely did not commit what was submitted in this run (so re-preparing is allowed). */
  definitelyNot: boolean;
  prepared?: { bytes: string; scheme: string };
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

/** The lease fence of a worker's moves (none when the run is not a worker's). */
function fenced(env: RunEnv): Pick<TransitionOptions, 'owner'> {
  return env.owner !== undefined ? { owner: env.owner } : {};
}

/** Why a `submitted` withdrawal waits instead of ending (an earlier submission may still commit). */
function mayStillCommit(truth: Truth | undefined): string {
  const until = truth?.status === 'unknown' && truth.until !== undefined ? truth.until : undefined;
  return until !== undefined
    ? `a submission may still commit until ${new Date(until).toISOString()}: the withdrawal stays submitted until its outcome is known`
    : 'the outcome of a submission is not known yet: the withdrawal stays submitted until it is';
}

/**
 * One run of withdrawal `w` (claimed by the caller). Returns a terminal
 * state or why to look again later (an error before the flow starts, such
 * as the ledger unreachable while looking for the truth, is settled like
 * one of the flow's).
 */
export async function runWithdrawal(env: RunEnv, w0: Withdrawal): Promise<RunOutcome> {
  try {
    return await runOnce(env, w0);
  } catch (e) {
    return settle(env, w0.id, e, { stay: false, definitelyNot: false, executedOk: false, ownFailure: false });
  }
}

/** The withdrawal shows `lastError` as why it is not finished yet (written when it changed; best effort). */
async function showError(env: RunEnv, w: Withdrawal, lastError: string): Promise<void> {
  const text = lastError.slice(0, 2000);
  if (w.lastError === text || isTerminal(w.state)) return;
  // A row that moved on meanwhile (cancelled, another worker's) keeps what it shows.
  await env.store.withdrawals
    .noteError(w.id, w.state, text, { actor: 'worker', ...fenced(env) })
    .catch(() => undefined);
}

async function runOnce(env: RunEnv, w0: Withdrawal): Promise<RunOutcome> {
  const repo = env.store.withdrawals;
  let w = w0;
  const at = async (p: WithdrawalPoint) => env.at?.(p, w);
  const move = async (
    from: WithdrawalState[],
    to: WithdrawalState,
    patch: Parameters<typeof repo.transition>[3] = {},
    opts: Parameters<typeof repo.transition>[4] = {},
  ) => {
    w = await repo.transition(w.id, from, to, patch, { actor: 'worker', ...fenced(env), ...opts });
    return w;
  };
  await at('received');

  // A withdrawal that may be on the ledger: find the truth before acting again.
  const run: RunState = { stay: false, definitelyNot: false, executedOk: false, ownFailure: false };
  let truth: Truth | undefined;
  if (w.state === 'submitted') {
    truth = await ledgerTruth(env, w);
    if (truth.status === 'committed') {
      await move(
        ['submitted'],
        'committed',
        { updateId: truth.updateId, lastError: null },
        { details: { resolvedFrom: 'completions' }, ...outcomeWith(env, truth.outcome) },
      );
      await exportUsed(env, w.id);
      return { done: true, state: 'committed' };
    }
    if (truth.status === 'not-committed') run.definitelyNot = true;
  }
  const deadline = deadlineOf(w);
  if (deadline !== undefined && deadline <= Date.now()) {
    // Too late to prepare anew; but what was submitted may still commit: wait for its outcome.
    if (w.state === 'submitted' && !run.definitelyNot) {
      const reason = `executeBefore passed; ${mayStillCommit(truth)}`;
      await showError(env, w, reason);
      return { done: false, reason, transient: true };
    }
    // Saying what kept it from committing, when an earlier run met an error.
    const why = w.lastError !== undefined ? ` (${w.lastError})` : '';
    await move([w.state], 'expired', {
      lastError: `executeBefore passed before the withdrawal committed${why}`,
    });
    return { done: true, state: 'expired' };
  }
  // Signed but not submitted (write-ahead): nothing reached the ledger; prepare again.
  if (w.state === 'signed') await move(['signed'], 'prepared', {}, { details: { resumed: true } });
  if (w.state === 'submitted' && run.definitelyNot)
    await move(['submitted'], 'prepared', {}, { details: { resumed: true, ledger: 'not committed' } });
  run.definitelyNot = false;

  // An offline key's signature came back through the air gap: submit exactly the exported transaction.
  let signedOffline: { x: ExportRecord; airGap: OnlineAirGap } | undefined;
  // (Nothing moves back to `received`: a withdrawal still there was never exported.)
  if (env.airGap && w.state !== 'received') {
    const x = await env.store.airGap.currentFor(w.id);
    if (x?.status === 'imported') {
      if (stillOpen(x, SUBMIT_MARGIN_MS)) signedOffline = { x, airGap: env.airGap };
      else
        await env.store.airGap.settle(x.id, 'stale', 'worker', { reason: 'window closed before submission' });
    }
  }
  const base = withdrawalContext(
    env,
    () => w,
    (x) => (w = x),
    run,
    at,
  );
  const withPolicy: FlowContext = {
    ...base,
    policyContext: {
      subject: withdrawalSubject(w.id),
      requester: w.caller,
      caller: { id: w.caller, roles: ['withdrawer'] },
    },
  };
  const ctx: FlowContext = env.airGap
    ? {
        ...withPolicy,
        airGap: env.airGap.exporter({ subject: `withdrawal:${w.id}`, withdrawalId: w.id, actor: 'worker' }),
      }
    : withPolicy;
  try {
    try {
      if (signedOffline) {
        const { x, airGap } = signedOffline;
        await airGap.withExport(x.id, () => exportedTransfer(ctx, w, x));
        await exportUsed(env, w.id);
        return { done: true, state: 'committed' };
      }
      // Still `submitted`: what was sent may commit; spend the same holdings (see pinnedInputs).
      const pinned = w.state === 'submitted' ? await pinnedInputs(env, w) : undefined;
      await transfer(ctx, {
        from: w.party,
        to: w.receiver,
        amount: w.amount,
        ...(pinned ? { inputs: await activeHoldings(env, w, pinned) } : {}),
        ...(w.instrument ? { instrument: w.instrument } : {}),
        ...(w.memo !== undefined ? { memo: w.memo } : {}),
        ...(typeof w.options.executeBefore === 'string' ? { executeBefore: w.options.executeBefore } : {}),
        commandId: w.commandId,
        flowName: 'withdrawal',
        ...(env.requireDelivery ? { requireDelivery: true } : {}),
      });
      return { done: true, state: 'committed' };
    } catch (e) {
      if (e instanceof AwaitingApproval) {
        // People must approve it first; nothing was signed. What was sent earlier (a resubmission
        // after an unknown outcome) may still commit: such a withdrawal stays submitted and waits.
        if (w.state === 'received' || w.state === 'prepared') {
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
        return settle(env, w.id, e, run);
      }
      if (e instanceof AwaitingSignature && w.state === 'prepared') {
        // Parked until the response is imported (or the request goes stale); nothing was signed or sent.
        await move(
          ['prepared'],
          'awaiting_signature',
          { lastError: null },
          {
            details: { export: e.exportId, hashes: [...e.hashes], windowLatest: e.windowLatest },
          },
        );
        return { done: true, state: 'awaiting_signature' };
      }
      return settle(env, w.id, e, run);
    }
  } finally {
    // A successful execute whose outcome the committed move did not write: written on its own.
    const o = run.outcome;
    if (o) await recordOutcome(env, o).catch(() => {});
  }
}

/** The submission record of a successful execute (see `RunState.outcome`). */
function recordOutcome(env: RunEnv, o: NonNullable<RunState['outcome']>, q?: Queryable): Promise<unknown> {
  const { submissionId, ...facts } = o;
  return env.store.artifacts.setSubmissionOutcome(submissionId, { outcome: 'committed', ...facts }, q);
}

/** A committed withdrawal's imported offline signature is used up. */
async function exportUsed(env: RunEnv, id: string): Promise<void> {
  if (!env.airGap) return;
  const x = await env.store.airGap.currentFor(id);
  if (x?.status === 'imported') await env.store.airGap.settle(x.id, 'done', 'worker', { withdrawal: id });
}

/** After a failed run: a terminal state (refusal, deadline) or "again later". */
async function settle(env: RunEnv, id: string, e: unknown, run: RunState): Promise<RunOutcome> {
  const repo = env.store.withdrawals;
  const worker = { actor: 'worker', ...fenced(env) };
  // Another worker carries the withdrawal now: touch nothing.
  if (e instanceof LeaseLostError) return { done: false, reason: errorText(e), error: e, transient: true };
  const w = await repo.get(id);
  if (!w) return { done: true, state: 'failed' };
  if (isTerminal(w.state)) return { done: true, state: w.state };
  /** Look again later; the withdrawal shows why (`lastError`: the error's own text unless given). */
  const again = async (reason: string, lastError = errorText(e)): Promise<RunOutcome> => {
    await showError(env, w, lastError);
    return { done: false, reason, error: e, transient: true };
  };
  const to = async (state: WithdrawalState, lastError: string) => {
    if (w.state === 'signed') await repo.transition(id, ['signed'], 'prepared', {}, worker);
    await repo.transition(id, [w.state === 'signed' ? 'prepared' : w.state], state, { lastError }, worker);
    return { done: true as const, state };
  };
  // Executed but recording the commit failed, or one of our writes failed: not terminal; look again later.
  if (run.ownFailure || (w.state === 'submitted' && run.executedOk)) return again(errorText(e));
  // Before a terminal answer for something that may be on the ledger: look once more, and end it
  // only when nothing submitted can still commit.
  if (w.state === 'submitted') {
    const truth: Truth = await ledgerTruth(env, w).catch(() => ({ status: 'unknown' as const }));
    if (truth.status === 'committed') {
      await repo.transition(
        id,
        ['submitted'],
        'committed',
        { updateId: truth.updateId, lastError: null },
        { ...worker, details: { resolvedFrom: 'completions' }, ...outcomeWith(env, truth.outcome) },
      );
      await exportUsed(env, id);
      return { done: true, state: 'committed' };
    }
    if (truth.status === 'unknown') {
      const lastError = errorText(e);
      const why =
        e instanceof Refusal && e.reason === 'outcome_unknown'
          ? e.reason
          : `${lastError}; ${mayStillCommit(truth)}`;
      return again(why, lastError);
    }
  }
  const deadline = deadlineOf(w);
  if (deadline !== undefined && deadline <= Date.now())
    return to('expired', `executeBefore passed before the withdrawal committed (${errorText(e)})`);
  if (e instanceof Refusal) {
    if (e.reason === 'outcome_unknown') return again(e.reason);
    // Gave up on stale preparations: the network, not the request; try again later.
    if (e.reason === 'window_closed') return again(e.reason);
    return to('rejected', errorText(e));
  }
  return again(errorText(e));
}

/**
 * The flow context of one run: the ledger client and the signer wrapped to
 * record the evidence (prepared transaction, signature, submission) and to
 * move the row before signing, and a recorder that moves it on the
 * pipeline's journal steps.
 */
function withdrawalContext(
  env: RunEnv,
  current: () => Withdrawal,
  set: (w: Withdrawal) => void,
  run: RunState,
  at: (p: WithdrawalPoint) => Promise<void>,
): FlowContext {
  const { ctx, store } = env;
  const repo = store.withdrawals;
  const id = current().id;
  const move = async (
    from: WithdrawalState[],
    to: WithdrawalState,
    patch: Parameters<typeof repo.transition>[3] = {},
    opts: Parameters<typeof repo.transition>[4] = {},
  ) => set(await repo.transition(id, from, to, patch, { actor: 'worker', ...fenced(env), ...opts }));
  /** A move forward clears the error an earlier attempt left. */
  const cleared = (): { lastError?: null } => (current().lastError !== undefined ? { lastError: null } : {});

  const ledger = Object.create(ctx.ledger) as LedgerApiClient;
  ledger.ledgerEnd = async (o) => {
    const end = run.unusedEnd;
    run.unusedEnd = undefined;
    if (end !== undefined) return { offset: end };
    const read = await ctx.ledger.ledgerEnd(o);
    if (!run.sent) run.seenEnd ??= read.offset;
    return read;
  };
  ledger.prepare = async (req, o) => {
    const res = await ctx.ledger.prepare(req, o);
    run.prepared = { bytes: res.preparedTransaction, scheme: schemeName(res.hashingSchemeVersion) };
    return res;
  };
  ledger.executeAndWait = async (req, o) => {
    run.unusedEnd = undefined;
    run.seenEnd = undefined;
    run.sent = true;
    const sid = req.submissionId ?? `${current().commandId}:${Date.now()}`;
    // Written ahead of the execute, with the transaction's commit deadline: what was sent is always on record.
    try {
      await store.artifacts.recordSubmission({
        submissionId: sid,
        commandId: current().commandId,
        withdrawalId: id,
        ...(run.ledgerEnd !== undefined ? { ledgerEndBefore: run.ledgerEnd } : {}),
        ...(run.commitDeadline !== undefined ? { commitDeadline: run.commitDeadline } : {}),
      });
    } catch (e) {
      run.ownFailure = true;
      throw e;
    }
    run.lastSubmissionId = sid;
    try {
      const res = await ctx.ledger.executeAndWait(req, o);
      run.executedOk = true;
      // Written with the move to `committed`, which follows (or when the run ends without it).
      run.outcome = { submissionId: sid, completionOffset: res.completionOffset, updateId: res.updateId };
      return res;
    } catch (e) {
      const unknown = isCantonApiError(e) && (e.ambiguous || TAKEN_CODES.has(e.code));
      await store.artifacts
        .setSubmissionOutcome(sid, {
          outcome: unknown ? 'ambiguous' : 'rejected',
          reason: errorText(e).slice(0, 1000),
        })
        .catch(() => {});
      throw e;
    }
  };

  const signer = Object.create(ctx.signer) as Signer;
  signer.sign = async (label, message) => {
    const hash = bytesToHex(message);
    const w = current();
    run.stay = w.state === 'submitted' && !run.definitelyNot;
    const prepared = run.prepared;
    const recordPrepared = prepared
      ? (tx: Parameters<typeof store.artifacts.recordPrepared>[1], attempt: number) =>
          store.artifacts.recordPrepared(
            { withdrawalId: id, attempt, hash, hashingScheme: prepared.scheme, bytes: prepared.bytes },
            tx,
          )
      : undefined;
    if (run.stay) {
      await recordPrepared?.(undefined, w.attempts + 1);
    } else {
      // Fails (WithdrawalStateError) when the withdrawal was cancelled meanwhile: nothing is signed.
      await move(
        ['received', 'prepared', 'submitted'],
        'prepared',
        { incrementAttempts: true, ...cleared() },
        {
          details: { hash },
          ...(recordPrepared ? { also: async (tx, x) => void (await recordPrepared(tx, x.attempts)) } : {}),
        },
      );
      await at('prepared');
    }
    const out = await ctx.signer.sign(label, message);
    run.signed = out;
    return out;
  };

  const base: FlowRecorder | undefined =
    ctx.recorder instanceof DbRecorder ? ctx.recorder.with({ subject: `withdrawal:${id}` }) : ctx.recorder;
  const recorder: FlowRecorder = {
    async record(r: Omit<JournalRecord, 'at'>) {
      try {
        await step(r);
      } catch (e) {
        run.ownFailure = true;
        throw e;
      }
    },
  };
  async function step(r: Omit<JournalRecord, 'at'>): Promise<void> {
    if (r.step === 'committed') await at('executed');
    // The journal record of a step that moves the row is written in the move's own transaction
    // (both committed, or neither); any other record on its own.
    const moves = r.step === 'signed' || r.step === 'committed' || (r.step === 'submitted' && !run.stay);
    const entry = moves && base instanceof DbRecorder ? base.entry(r) : undefined;
    const journal = entry ? { audit: [entry] } : undefined;
    if (!entry) await base?.record(r);
    // A move refused (the lease was lost) or failed: the step happened all the same (a signature
    // was made, a transaction committed), so its record is written on its own, as before the move.
    const recorded = async (moveIt: () => Promise<unknown>) => {
      try {
        await moveIt();
      } catch (e) {
        if (entry && base instanceof DbRecorder) await base.append(entry).catch(() => {});
        throw e;
      }
    };
    switch (r.step) {
      case 'signed': {
        const sig = run.signed;
        const also = sig
          ? async (tx: Parameters<typeof store.artifacts.recordSignature>[1]) =>
              void (await store.artifacts.recordSignature(
                {
                  withdrawalId: id,
                  hash: r.hash ?? '',
                  signedBy: sig.signature.signedBy,
                  keyLabel: sig.key.label,
                  scheme: sig.key.scheme,
                  signatureFormat: sig.signature.format,
                  signature: sig.signature.signature,
                },
                tx,
              ))
          : undefined;
        const details = { hash: r.hash ?? null, signedBy: r.signedBy ?? null };
        if (run.stay)
          await recorded(() =>
            move(
              ['submitted'],
              'submitted',
              { incrementAttempts: true, ...cleared() },
              {
                details: { ...details, resubmission: true },
                ...journal,
                ...(also ? { also } : {}),
              },
            ),
          );
        else
          await recorded(() =>
            move(['prepared'], 'signed', cleared(), { details, ...journal, ...(also ? { also } : {}) }),
          );
        await at('signed');
        return;
      }
      case 'submitted': {
        run.commitDeadline = r.facts?.commitDeadline;
        const end = run.seenEnd ?? (await ctx.ledger.ledgerEnd()).offset;
        run.ledgerEnd = end;
        run.unusedEnd = end;
        if (run.stay) await repo.setLookupFrom(id, end);
        else
          await recorded(() =>
            move(
              ['signed'],
              'submitted',
              { lookupFrom: end, ...cleared() },
              { details: { hash: r.hash ?? null, ledgerEndBefore: end }, ...journal },
            ),
          );
        await at('submitted');
        return;
      }
      case 'committed': {
        const outcome = run.outcome;
        await recorded(() =>
          move(
            ['submitted'],
            'committed',
            {
              ...(r.facts?.updateId ? { updateId: r.facts.updateId } : {}),
              lastError: null,
            },
            { ...journal, ...outcomeWith(env, outcome) },
          ),
        );
        if (run.outcome === outcome) run.outcome = undefined;
        return;
      }
      case 'rejected':
        // After a successful execute, or a failed write of ours, a "rejection" is not the ledger's.
        // It settles this run's submission; the row may leave `submitted` only when no earlier one
        // can still commit either.
        if (!run.executedOk && !run.ownFailure) run.definitelyNot = await noneOpen();
        return;
      case 'resolved':
        if (r.reason === 'not-committed') {
          const sid = run.lastSubmissionId;
          if (sid !== undefined)
            await store.artifacts.setSubmissionOutcome(sid, {
              outcome: 'rejected',
              reason: 'a rejection completion was found after an ambiguous execute',
            });
          run.definitelyNot = await noneOpen();
        }
        return;
      default:
        return;
    }
  }
  /** No submission of the withdrawal can still commit, going by their records (each past its commit deadline). */
  async function noneOpen(): Promise<boolean> {
    const subs = await store.artifacts.submissionsFor(current().commandId);
    return openSubmissions(subs, Date.now()).length === 0;
  }
  return { ...ctx, ledger, signer, recorder };
}

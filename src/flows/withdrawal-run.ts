/**
 * Carrying ONE withdrawal one step further (the worker in withdrawal.ts
 * decides when and holds the lease). What a run does is the lifecycle table
 * (withdrawal-lifecycle.ts, printed in docs/api.md); this module gathers
 * what each event of a run needs to know and runs the table:
 *
 *   `run`    the row as the run finds it: a `submitted` one may be on the
 *            ledger, so the truth is looked up first (`ledgerTruth`: the
 *            completions of the command id after the recorded ledger end,
 *            read to the stream's end) — committed → committed; definitely
 *            not committed → prepared and run again; unknown → run again
 *            under the SAME command id while the row stays `submitted`,
 *            spending the same input holdings as what was sent (the
 *            participant deduplicates the command id, and the synchronizer
 *            lets at most one of two transactions spending the same holdings
 *            commit; a DUPLICATE_COMMAND or SUBMISSION_ALREADY_IN_FLIGHT
 *            without a completion is `outcome_unknown`);
 *   `carry`  the send: a token-standard transfer (transfer.ts) through the
 *            one pipeline under the withdrawal's command id, or exactly the
 *            transaction an offline key signed; the pipeline's steps move
 *            the row (withdrawal-context.ts);
 *   `needs-approval`, `needs-offline-signature`, `failed`: how a send that
 *            did not commit ends.
 *
 * "Definitely not committed" needs every submission ever sent for the
 * withdrawal past its commit deadline (withdrawal-truth.ts). Until then a
 * `submitted` row never becomes `rejected` or `expired`, whatever a later
 * run meets (a refusal, the deadline): an earlier submission may still
 * commit, and a terminal answer would invite the client to pay again. A
 * refusal of a row that was never submitted is terminal (`rejected`, reason
 * kept); other errors are retried by the worker.
 */
import { SUBMIT_MARGIN_MS } from '../offline/online.js';
import { AwaitingApproval } from '../policy/hook.js';
import { LeaseLostError } from '../store/errors.js';
import type { ExportRecord } from '../store/repos/air-gap.js';
import type { Withdrawal } from '../store/repos/withdrawals.js';
import { AwaitingSignature } from './air-gap.js';
import type { FlowContext } from './context.js';
import { Refusal } from './refusal.js';
import { transfer } from './transfer.js';
import { exportedTransfer, stillOpen } from './withdrawal-air-gap.js';
import { withdrawalContext } from './withdrawal-context.js';
import { drive, type Machine, type WithdrawalFacts } from './withdrawal-lifecycle.js';
import {
  again,
  awaitApproval,
  awaitSignature,
  commitFound,
  deadlineOf,
  errorText,
  expire,
  exportUsed,
  freshState,
  isTerminal,
  type Run,
  type RunEnv,
  type RunOutcome,
  type RunState,
  recordOutcome,
  reject,
  resume,
  startRun,
  unsign,
  waitForOutcome,
  waitPastDeadline,
  withdrawalSubject,
  workerMove,
} from './withdrawal-steps.js';
import { activeHoldings, ledgerTruth, pinnedInputs } from './withdrawal-truth.js';

export {
  deadlineOf,
  errorText,
  isTerminal,
  type RunEnv,
  type RunOutcome,
  type WithdrawalPoint,
  withdrawalSubject,
} from './withdrawal-steps.js';
export { ledgerTruth, openUntil, SETTLE_MARGIN_MS } from './withdrawal-truth.js';

/**
 * One run of withdrawal `w` (claimed by the caller). Returns a terminal
 * state or why to look again later (an error before the send starts, such
 * as the ledger unreachable while looking for the truth, is settled like
 * one of the send's).
 */
export async function runWithdrawal(env: RunEnv, w0: Withdrawal): Promise<RunOutcome> {
  try {
    const r = startRun(env, w0);
    await r.at('received');
    return await drive('run', runMachine(r));
  } catch (e) {
    return drive('failed', endMachine(env, w0.id, e, freshState()));
  }
}

const passed = (w: Withdrawal) => {
  const deadline = deadlineOf(w);
  return deadline !== undefined && deadline <= Date.now();
};

/** The events `run` and `carry` of run `r`. */
function runMachine(r: Run): Machine<'run' | 'carry', RunOutcome> {
  const { env } = r;
  /** The imported export `carry` found (its signature submitted, or dropped as stale). */
  let imported: ExportRecord | undefined;
  return {
    async look(event) {
      if (event === 'run') {
        // A withdrawal that may be on the ledger: find the truth before acting again.
        const truth = r.w.state === 'submitted' ? await ledgerTruth(env, r.w) : undefined;
        return { state: r.w.state, facts: { ...(truth ? { truth } : {}), deadlinePassed: passed(r.w) } };
      }
      // An offline key's signature came back through the air gap: submit exactly the exported
      // transaction. (Nothing moves back to `received`: a withdrawal still there was never exported.)
      const facts: WithdrawalFacts = {};
      if (env.airGap && r.w.state !== 'received') {
        const x = await env.store.airGap.currentFor(r.w.id);
        if (x?.status === 'imported') {
          imported = x;
          facts.offline = stillOpen(x, SUBMIT_MARGIN_MS) ? 'open' : 'closed';
        }
      }
      return { state: r.w.state, facts };
    },
    state: () => r.w.state,
    actions: {
      'commit-found': (_l, f) => commitFound(env, r.move, r.w.id, f.truth),
      'wait-past-deadline': (_l, f) => waitPastDeadline(env, r.w, f.truth),
      // Saying what kept it from committing, when an earlier run met an error.
      expire: () => expire(r.move, r.w, r.w.lastError),
      resume: () => resume(r.move, r.w),
      'go-on': async () => undefined,
      'drop-stale-export': async (_l, f) => {
        const x = imported as ExportRecord;
        await env.store.airGap.settle(x.id, 'stale', 'worker', { reason: 'window closed before submission' });
        // The export is gone: the row has no imported signature any more.
        delete f.offline;
        return undefined;
      },
      'submit-offline': () =>
        send(r, async (ctx) => {
          const x = imported as ExportRecord;
          await (env.airGap as NonNullable<RunEnv['airGap']>).withExport(x.id, () =>
            exportedTransfer(ctx, r.w, x),
          );
          await exportUsed(env, r.w.id);
          return { done: true, state: 'committed' };
        }),
      transfer: () => send(r, (ctx) => transferOf(r, ctx, undefined)),
      // What was sent may commit: spend the same holdings (see pinnedInputs).
      resubmit: () => send(r, async (ctx) => transferOf(r, ctx, await pinnedInputs(env, r.w))),
    },
  };
}

/** The withdrawal's transfer through the pipeline, spending `pinned` when given. */
async function transferOf(r: Run, ctx: FlowContext, pinned: string[] | undefined): Promise<RunOutcome> {
  const { env, w } = r;
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
}

/**
 * A send: `go` with the run's flow context (the policy's subject, the air
 * gap's exporter); how it ended when it did not commit is the table's.
 */
async function send(r: Run, go: (ctx: FlowContext) => Promise<RunOutcome>): Promise<RunOutcome> {
  const { env } = r;
  const withPolicy: FlowContext = {
    ...withdrawalContext(r),
    policyContext: {
      subject: withdrawalSubject(r.w.id),
      requester: r.w.caller,
      caller: { id: r.w.caller, roles: ['withdrawer'] },
    },
  };
  const ctx: FlowContext = env.airGap
    ? {
        ...withPolicy,
        airGap: env.airGap.exporter({
          subject: `withdrawal:${r.w.id}`,
          withdrawalId: r.w.id,
          actor: 'worker',
          ...(env.owner !== undefined ? { lease: env.owner } : {}),
        }),
      }
    : withPolicy;
  try {
    try {
      return await go(ctx);
    } catch (e) {
      const event =
        e instanceof AwaitingApproval
          ? 'needs-approval'
          : e instanceof AwaitingSignature
            ? 'needs-offline-signature'
            : 'failed';
      return await drive(event, endMachine(env, r.w.id, e, r.flags, r));
    }
  } finally {
    // A successful execute whose outcome the committed move did not write: written on its own.
    const o = r.flags.outcome;
    if (o) await recordOutcome(env, o).catch(() => {});
  }
}

type End = 'needs-approval' | 'needs-offline-signature' | 'failed';

/**
 * How a run that did not commit ends (`e`: why; `flags`: what the run did;
 * `r`: the run, when it got as far as sending). `failed` reads the row again
 * and looks once more at the ledger before a terminal answer for something
 * that may be on it; a run whose lease was lost touches nothing.
 */
function endMachine(env: RunEnv, id: string, e: unknown, flags: RunState, r?: Run): Machine<End, RunOutcome> {
  let cur: Withdrawal | undefined;
  const move = workerMove(env, id, (w) => {
    cur = w;
  });
  const row = () => cur as Withdrawal;
  return {
    async look(event) {
      if (event !== 'failed') return { state: (r as Run).w.state, facts: {} };
      // Another worker carries the withdrawal now: touch nothing.
      if (e instanceof LeaseLostError)
        return { outcome: { done: false, reason: errorText(e), error: e, transient: true } };
      const w = await env.store.withdrawals.get(id);
      if (!w) return { outcome: { done: true, state: 'failed' } };
      if (isTerminal(w.state)) return { outcome: { done: true, state: w.state } };
      cur = w;
      // Executed but recording the commit failed, or one of our writes failed: not the ledger's answer.
      const ours = flags.ownFailure || (w.state === 'submitted' && flags.executedOk);
      const truth =
        w.state === 'submitted' && !ours
          ? await ledgerTruth(env, w).catch(() => ({ status: 'unknown' as const }))
          : undefined;
      return {
        state: w.state,
        facts: {
          ours,
          ...(truth ? { truth } : {}),
          deadlinePassed: passed(w),
          ...(e instanceof Refusal ? { refusal: e.reason } : {}),
        },
      };
    },
    state: () => row().state,
    actions: {
      'await-approval': () => awaitApproval((r as Run).move, (r as Run).w, e as AwaitingApproval),
      'await-signature': () => awaitSignature((r as Run).move, e as AwaitingSignature),
      none: async () => undefined,
      retry: () => again(env, row(), e, errorText(e)),
      'commit-found': (_l, f) => commitFound(env, move, id, f.truth),
      'wait-for-outcome': (_l, f) => waitForOutcome(env, row(), e, f.truth),
      unsign: () => unsign(move),
      expire: () => expire(move, row(), errorText(e)),
      // Gave up on stale preparations: the network, not the request; try again later.
      'retry-stale': () => again(env, row(), e, (e as Refusal).reason),
      reject: () => reject(move, row(), e),
    },
  };
}

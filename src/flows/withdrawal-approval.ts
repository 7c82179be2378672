/**
 * Withdrawals waiting for approvals by people (state `awaiting_approval`).
 * The policy engine collects the approvals on the withdrawal's approval
 * request; this module moves the withdrawal when the request is answered:
 *
 *   request approved  → prepared (signing is authorised: the worker prepares
 *                       again, and the pipeline counts the approvals again
 *                       on the new transaction's decoded intent)
 *   request rejected  → rejected (who rejected it, and why)
 *   request expired   → expired
 *   executeBefore passed → expired (the request is closed)
 *
 * `followApproval` is called when an answer arrives (on the instance that
 * took it) and by the worker's sweep (every instance, every poll), so a crash
 * between the answer and the move, or an answer taken by another instance,
 * is caught up. Each move is guarded by the state (`awaiting_approval`), so
 * two instances doing it at once move it once.
 */
import { WithdrawalStateError } from '../store/errors.js';
import type { Store } from '../store/index.js';
import type { ApprovalRequest } from '../store/repos/approvals.js';
import type { WithdrawalState } from '../store/repos/withdrawals.js';
import { type ActionOf, lineFor } from './withdrawal-lifecycle.js';
import { deadlineOf, withdrawalSubject } from './withdrawal-steps.js';

export interface ApprovalFollowOptions {
  store: Store;
  /** The withdrawal may run again (approved): the worker should look at it. */
  kick?: (id: string, party: string) => void;
  /** What the withdrawal reserved against the limits is given back (it ended). */
  release?: (subject: string) => Promise<void>;
  actor?: string;
}

/**
 * The actions of the `answered` lines of the lifecycle table: what the move
 * records as `lastError` (none: the move clears nothing), after what.
 */
const ANSWERED: {
  [A in Exclude<ActionOf<'answered'>, 'none'>]: (
    request: ApprovalRequest | undefined,
    close: (reason: string) => Promise<unknown>,
  ) => Promise<string | undefined>;
} = {
  'close-expired': async (request, close) => {
    const lastError = 'executeBefore passed while the withdrawal awaited approvals';
    if (request?.status === 'pending') await close(lastError);
    return lastError;
  },
  approve: async () => undefined,
  'end-rejected': async (request) =>
    `approval request ${request?.id} was rejected by ${request?.decidedBy ?? 'an approver'}${request?.reason ? `: ${request.reason}` : ''}`,
  'end-expired': async (request) =>
    `approval request ${request?.id} expired at ${request?.expiresAt} before enough approvals were given`,
  'end-cancelled': async () => undefined,
};

/** Moves withdrawal `id` on if its approval request was answered; returns the state it moved to. */
export async function followApproval(
  opts: ApprovalFollowOptions,
  id: string,
): Promise<WithdrawalState | undefined> {
  const { store } = opts;
  const w = await store.withdrawals.get(id);
  if (w?.state !== 'awaiting_approval') return undefined;
  const subject = withdrawalSubject(id);
  const request = await store.approvals.latestFor(subject);
  const actor = opts.actor ?? 'policy';
  const deadline = deadlineOf(w);
  const line = lineFor(w.state, 'answered', {
    deadlinePassed: deadline !== undefined && deadline <= Date.now(),
    request: request?.status ?? 'none',
  });
  if (!line || line.action === 'none' || line.next === 'same') return undefined;
  const to = line.next;
  const lastError = await ANSWERED[line.action as keyof typeof ANSWERED](request, (reason) =>
    store.approvals
      .close((request as ApprovalRequest).id, 'expired', { actor, reason })
      .catch(() => undefined),
  );
  try {
    await store.withdrawals.transition(
      id,
      ['awaiting_approval'],
      to,
      lastError !== undefined ? { lastError } : {},
      { actor, details: { ...(request ? { approvalRequest: request.id, request: request.status } : {}) } },
    );
  } catch (e) {
    // Moved meanwhile (another instance, a cancel): nothing to do.
    if (e instanceof WithdrawalStateError) return undefined;
    throw e;
  }
  if (to === 'prepared') opts.kick?.(id, w.party);
  else await opts.release?.(subject);
  return to;
}

/** Follows every withdrawal awaiting approval (the worker's poll). */
export async function sweepApprovals(opts: ApprovalFollowOptions, limit = 200): Promise<void> {
  const page = await opts.store.withdrawals.list({ state: 'awaiting_approval', limit, order: 'asc' });
  for (const w of page.items) await followApproval(opts, w.id);
}

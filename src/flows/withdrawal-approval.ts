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
import type { WithdrawalState } from '../store/repos/withdrawals.js';
import { deadlineOf, withdrawalSubject } from './withdrawal-run.js';

/** Where an answered approval request takes its withdrawal. */
const ANSWERED: Readonly<Record<string, WithdrawalState>> = {
  approved: 'prepared',
  rejected: 'rejected',
  expired: 'expired',
  cancelled: 'cancelled',
};

export interface ApprovalFollowOptions {
  store: Store;
  /** The withdrawal may run again (approved): the worker should look at it. */
  kick?: (id: string, party: string) => void;
  /** What the withdrawal reserved against the limits is given back (it ended). */
  release?: (subject: string) => Promise<void>;
  actor?: string;
}

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
  let to: WithdrawalState | undefined;
  let lastError: string | undefined;
  if (deadline !== undefined && deadline <= Date.now() && request?.status !== 'approved') {
    to = 'expired';
    lastError = 'executeBefore passed while the withdrawal awaited approvals';
    if (request?.status === 'pending')
      await store.approvals.close(request.id, 'expired', { actor, reason: lastError }).catch(() => undefined);
  } else if (!request) {
    // No request (it was never opened, or removed): decide again.
    to = 'prepared';
  } else if (request.status === 'superseded') {
    to = 'prepared';
  } else {
    to = ANSWERED[request.status];
    if (request.status === 'rejected')
      lastError = `approval request ${request.id} was rejected by ${request.decidedBy ?? 'an approver'}${request.reason ? `: ${request.reason}` : ''}`;
    if (request.status === 'expired')
      lastError = `approval request ${request.id} expired at ${request.expiresAt} before enough approvals were given`;
  }
  if (to === undefined) return undefined;
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

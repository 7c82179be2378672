/**
 * The withdrawal's states and the moves the store allows between them (the
 * repository is withdrawals.ts; the lifecycle the service runs over these
 * states is src/flows/withdrawal-lifecycle.ts, kept within them by a test).
 *
 * States and allowed transitions (also enforced by the `withdrawals_guard`
 * trigger, so a bug elsewhere cannot skip a step):
 *
 *   received  → prepared | awaiting_approval | rejected | failed | cancelled | expired
 *   prepared  → prepared (re-prepared, e.g. after the window passed)
 *             | signed | awaiting_signature | awaiting_approval
 *             | rejected | failed | cancelled | expired
 *   awaiting_signature → prepared | rejected | failed | cancelled | expired
 *   awaiting_approval  → prepared | rejected | failed | cancelled | expired
 *   signed    → submitted | prepared (re-prepare: nothing was submitted)
 *             | failed | expired
 *   submitted → submitted (resubmitted after an ambiguous outcome)
 *             | committed | rejected | expired
 *             | prepared (the earlier submission definitely did not commit)
 *   committed, rejected, failed, cancelled, expired: terminal.
 *
 * Meaning: `received` nothing done yet; `prepared` a prepared transaction is
 * recorded; `signed` a signature is recorded and NOTHING was sent (a worker
 * moves to `submitted` BEFORE it calls execute, write-ahead); `submitted` it
 * may be on the ledger: resume looks the command id up on the ledger before
 * acting again. `rejected` = refused by the pipeline or rejected by the
 * ledger; `failed` = gave up (no commit possible); `expired` = its deadline
 * passed uncommitted; `cancelled` = by the caller, only before signing
 * starts: while `received`, `awaiting_signature` (the request across the
 * air gap is then void) or `awaiting_approval`. `awaiting_approval`: the
 * policy asks for approvals before it goes on (the approval request is in
 * approvals.ts); the worker does not poll it (not in UNFINISHED_STATES): an
 * approval, rejection or expiry moves it on. The move to `prepared` is what
 * authorises signing (the worker makes it right before it signs), so a
 * cancel and that move
 * exclude each other on the row: a cancel that answered `cancelled` was
 * never followed by a signature, on any instance, and one that comes after
 * the move is refused ("signing has started"). The `prepared → cancelled`
 * edge stays in the table and the trigger for schema compatibility; cancel
 * does not take it.
 *
 * `lastError` is why the latest attempt did not finish: set by the move that
 * ends it, or by `noteError` while it waits (audited as `withdrawal.error`).
 *
 * The command id is derived from the withdrawal id (`cs-wd-<uuid>`), so a
 * resumed withdrawal submits under the same id and the ledger deduplicates.
 *
 * Delivery: where the funds of a `committed` withdrawal are. A second table
 * (`DELIVERY_EDGES`, also enforced by the `withdrawals_delivery_guard`
 * trigger), entered when the row becomes `committed`:
 *
 *   pending   → delivered | offered | returned
 *   offered   → delivered | returned   (and offered again: a new instruction)
 *   delivered, returned: terminal.
 *
 * `pending` the committed transaction's result is not read yet; `delivered`
 * the receiver holds the amount (the transfer completed in one step, or the
 * offer was accepted: `offer.outcome`); `offered` a transfer instruction
 * waits for the receiver, the amount locked in the sender's holdings;
 * `returned` the offer ended without delivery (rejected, expired, withdrawn
 * or failed: `offer.outcome`) and the amount is back with the sender.
 * Rows committed before delivery was tracked have none.
 *
 * Events (the outbox, events.ts), appended last in the transaction of the
 * change, `data` the withdrawal as `GET /v1/withdrawals/{id}` shows it
 * (`withdrawalEventData`): `withdrawal.received` when one is created,
 * `withdrawal.<state>` at every move of the state machine (a move to the
 * same state, e.g. re-prepared, again), and for delivery
 * `withdrawal.offered`, `withdrawal.delivered`, `withdrawal.returned` (the
 * delivery state it moved to; `pending` is entered with `committed`, whose
 * event shows it). `noteError` changes no state and emits nothing.
 */
export const WITHDRAWAL_STATES = [
  'received',
  'prepared',
  'signed',
  'submitted',
  'awaiting_signature',
  'awaiting_approval',
  'committed',
  'rejected',
  'failed',
  'cancelled',
  'expired',
] as const;
export type WithdrawalState = (typeof WITHDRAWAL_STATES)[number];

export const WITHDRAWAL_EDGES: Readonly<Record<WithdrawalState, readonly WithdrawalState[]>> = {
  received: ['prepared', 'awaiting_approval', 'rejected', 'failed', 'cancelled', 'expired'],
  prepared: [
    'prepared',
    'signed',
    'awaiting_signature',
    'awaiting_approval',
    'rejected',
    'failed',
    'cancelled',
    'expired',
  ],
  /** The party's key is held offline: its signing request is across the air gap. */
  awaiting_signature: ['prepared', 'rejected', 'failed', 'cancelled', 'expired'],
  /** The policy asks for approvals: it waits for them (or a rejection, or their expiry). */
  awaiting_approval: ['prepared', 'rejected', 'failed', 'cancelled', 'expired'],
  signed: ['submitted', 'prepared', 'failed', 'expired'],
  submitted: ['submitted', 'committed', 'rejected', 'expired', 'prepared'],
  committed: [],
  rejected: [],
  failed: [],
  cancelled: [],
  expired: [],
};

export const DELIVERY_STATES = ['pending', 'delivered', 'offered', 'returned'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

export const DELIVERY_EDGES: Readonly<Record<DeliveryState, readonly DeliveryState[]>> = {
  pending: ['delivered', 'offered', 'returned'],
  offered: ['offered', 'delivered', 'returned'],
  delivered: [],
  returned: [],
};

/** How an offer ended: `accepted` delivered it; the others returned the amount to the sender. */
export const OFFER_OUTCOMES = ['accepted', 'rejected', 'expired', 'withdrawn', 'failed'] as const;
export type OfferOutcome = (typeof OFFER_OUTCOMES)[number];

export function canDeliver(from: DeliveryState, to: DeliveryState): boolean {
  return DELIVERY_EDGES[from].includes(to);
}

export const UNFINISHED_STATES: readonly WithdrawalState[] = ['received', 'prepared', 'signed', 'submitted'];

/** States a withdrawal waits in before its outcome: the worker's, the air gap's and the approvers'. */
export const PENDING_STATES = [
  'received',
  'prepared',
  'signed',
  'submitted',
  'awaiting_signature',
  'awaiting_approval',
] as const;
export type PendingState = (typeof PENDING_STATES)[number];
/** Where a caller's cancel is accepted: before signing is authorised (see the header). */
export const CANCELLABLE_STATES: readonly WithdrawalState[] = [
  'received',
  'awaiting_signature',
  'awaiting_approval',
];

/** Why a cancel of a withdrawal in `state` comes too late, and what follows. */
export function tooLate(id: string, state: WithdrawalState): string {
  if (['prepared', 'signed', 'submitted'].includes(state))
    return `too late to cancel withdrawal ${id}: signing has started (it is ${state}); it goes on to its outcome, which GET /v1/withdrawals/${id} shows`;
  return `withdrawal ${id} is ${state}: it is finished and cannot be cancelled`;
}

export function canTransition(from: WithdrawalState, to: WithdrawalState): boolean {
  return WITHDRAWAL_EDGES[from].includes(to);
}

/**
 * The prefix of withdrawals' command ids. Reserved: no other flow may submit
 * under such an id (transfer.ts `checkCallerCommandId`), or the withdrawal
 * would find that transaction's commit under its command id and take it for
 * its own.
 */
export const WITHDRAWAL_COMMAND_PREFIX = 'cs-wd-';

/** The ledger command id of a withdrawal. */
export function withdrawalCommandId(id: string): string {
  return `${WITHDRAWAL_COMMAND_PREFIX}${id}`;
}

/**
 * The event catalogue: every event type the service emits, what it is about
 * (`subject`) and what its `data` carries. `data` is always the resource as
 * the REST API shows it at that moment (amounts as decimal strings), so a
 * receiver can act on the event alone or re-read the resource by its id.
 * Receivers subscribe with patterns: an exact type, a family (`deposit.*`)
 * or `*` (everything).
 */
import { WITHDRAWAL_STATES } from '../store/repos/withdrawals.js';

export { typeMatches } from '../store/repos/webhooks.js';

export interface EventTypeInfo {
  type: string;
  subject: string;
  about: string;
}

const withdrawal = (type: string, about: string): EventTypeInfo => ({
  type,
  subject: 'withdrawal:<id>',
  about: `${about}; data: the withdrawal as GET /v1/withdrawals/{id} shows it`,
});

const approval = (type: string, about: string): EventTypeInfo => ({
  type,
  subject: 'approval:<id>',
  about: `${about}; data: the approval request as GET /v1/approvals/{id} shows it, without missing, summary and transaction`,
});

export const EVENT_TYPES: readonly EventTypeInfo[] = [
  {
    type: 'deposit.pending',
    subject: 'deposit:<id>',
    about: 'an incoming transfer offer waits to be accepted',
  },
  { type: 'deposit.credited', subject: 'deposit:<id>', about: 'the deposit is in the party’s holdings' },
  {
    type: 'deposit.returned',
    subject: 'deposit:<id>',
    about: 'the offer was rejected, withdrawn or expired',
  },
  { type: 'deposit.unattributed', subject: 'deposit:<id>', about: 'no account matched the memo: assign one' },
  {
    type: 'deposit.assigned',
    subject: 'deposit:<id>',
    about: 'an operator assigned the deposit to an account',
  },
  { type: 'offer.received', subject: 'party:<id>', about: 'a transfer offer to one of the book’s parties' },
  {
    type: 'transfer.unexpected',
    subject: 'party:<id>',
    about: 'an outgoing transfer this service did not make',
  },
  ...WITHDRAWAL_STATES.map((s) =>
    withdrawal(
      `withdrawal.${s}`,
      s === 'received' ? 'a withdrawal was recorded' : `the withdrawal moved to state ${s}`,
    ),
  ),
  withdrawal(
    'withdrawal.offered',
    'the committed withdrawal made a transfer offer that waits for the receiver',
  ),
  withdrawal('withdrawal.delivered', 'the receiver holds the amount (one-step transfer, or offer accepted)'),
  withdrawal('withdrawal.returned', 'the offer ended without delivery; the amount is back with the sender'),
  approval('approval.required', 'an approval request was opened: approvers must answer'),
  approval('approval.approved', 'the approval request got the approvals it needed'),
  approval('approval.rejected', 'an approver rejected the request'),
  approval('approval.expired', 'the request expired before it was approved'),
  approval('approval.cancelled', 'the request ended because what it was for was cancelled'),
  approval('approval.superseded', 'a new request (changed statement or policy) replaced this one'),
  { type: 'sweep.submitted', subject: 'sweep:<id>', about: 'a sweep (hot to cold) was submitted' },
  { type: 'sweep.completed', subject: 'sweep:<id>', about: 'a sweep committed' },
  { type: 'sweep.failed', subject: 'sweep:<id>', about: 'a sweep failed' },
  ...(
    [
      ['name.registered', 'the DSO collected the first payment: the entry exists'],
      [
        'name.rejected',
        'the DSO refused the name (invalid or taken) and returned the payment, minus the fees of locking it',
      ],
      ['name.failed', 'the entry could not be requested; nothing was paid'],
      [
        'name.renewal_due',
        'the renewal window opened (auto-renew pays it now; with auto-renew off, renew it yourself)',
      ],
      ['name.renewed', 'the DSO collected a renewal: the entry lives one more lifetime'],
      ['name.expiring', 'the entry expires within the configured horizon and its renewal is not paid'],
      ['name.expired', 'the entry expired'],
      [
        'name.payment_reclaimed',
        'a payment the DSO did not collect came back to the party after its lock expired',
      ],
    ] as const
  ).map(([type, about]) => ({
    type,
    subject: 'name:<id>',
    about: `${about}; data: the registration as GET /v1/parties/{id}/names/{name} shows it`,
  })),
  { type: 'topup.requested', subject: 'party:<id>', about: 'a hot party’s balance is below its floor' },
];

/** A subscription pattern: `*`, `family.*` or a dotted lower-case type. */
export const EVENT_PATTERN = /^(\*|[a-z][a-z_]*(\.[a-z][a-z_]*)*\.\*|[a-z][a-z_]*(\.[a-z][a-z_]*)+)$/;

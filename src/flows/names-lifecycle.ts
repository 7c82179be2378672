/**
 * The lifecycle of a name, as one table the keeper executes: for the row's
 * state, the first line whose condition holds over what the ledger shows
 * (`NameFacts`) names the action to take, the state it leads to and the
 * event it announces. Conditions are pure; actions are the keeper's small
 * functions (names-keeper.ts). The table is printed in docs/names.md.
 *
 * Nothing is ever paid on a guess: a state that pays first looks whether the
 * payment is already on the ledger (a run that died after paying), and the
 * contract a payment exercises (the request, the idle state) is consumed by
 * it, so a second payment for the same due date cannot commit.
 */
import type { NameRecord, NameState } from '../store/repos/names.js';

/** What the party's participant shows about one registration right now. */
export interface NameFacts {
  nowUs: bigint;
  /** Our SubscriptionRequest is still there (not yet paid). */
  request: boolean;
  /**
   * Before the request is recorded: a SubscriptionRequest of the party for
   * this name (its description names it), e.g. one submitted after an
   * offline signature, or by a run that stopped before recording it.
   */
  ownRequest?: string;
  /** The first payment is locked, waiting for the DSO. */
  initialPayment?: { cid: string; lockExpiresUs?: bigint; targetAmount?: string };
  /** The subscription is idle: the next payment is due at `dueUs`. */
  idle?: { cid: string; dueUs: bigint };
  /** A renewal payment is locked, waiting for the DSO. */
  payment?: { cid: string; dueUs: bigint; lockExpiresUs?: bigint; targetAmount?: string };
  /** The entry, as the DSO keeps it. */
  entry?: { cid: string; expiresUs: bigint };
  /** An air-gap export of this row's step is open (its window not yet closed). */
  exportOpen: boolean;
  /** The keeper's retry pause for this row has not passed yet. */
  backingOff: boolean;
}

export type NameAction =
  | 'none'
  | 'request' // AnsRules_RequestEntry
  | 'pay-initial' // SubscriptionRequest_AcceptAndMakePayment
  | 'pay-renewal' // SubscriptionIdleState_MakePayment
  | 'reclaim' // SubscriptionPayment_Expire / SubscriptionInitialPayment_Expire
  | 'record' // only write what the ledger shows
  | 'warn'; // only announce a horizon

/** The horizons the keeper warns at, in µs before the entry expires. */
export interface NameHorizons {
  /** `name.expiring` when less than this is left and the renewal is not paid. */
  expiringUs: bigint;
}

export interface LifecycleLine {
  state: NameState;
  when: string;
  test: (r: NameRecord, f: NameFacts, h: NameHorizons) => boolean;
  action: NameAction;
  next: NameState;
  /** The event announced when the line is taken (once per due date for warnings). */
  event?: string;
}

const notified = (r: NameRecord, what: string) => r.notified.split(',').includes(what);
// Open from `due − renewal window` until the due date: a payment at or after it cannot be collected.
const windowOpen = (r: NameRecord, f: NameFacts) =>
  f.idle !== undefined && f.nowUs >= f.idle.dueUs - r.renewalUs && f.nowUs < f.idle.dueUs;
const expiring = (r: NameRecord, f: NameFacts, h: NameHorizons) =>
  f.entry !== undefined &&
  f.nowUs >= f.entry.expiresUs - h.expiringUs &&
  f.nowUs < f.entry.expiresUs &&
  !notified(r, 'expiring');
/**
 * Payments the DSO left uncollected and that were taken back, per due date,
 * after which the keeper pays no more for it (each costs the lock's fees):
 * something on the network is wrong, and `name.expiring` says so in time.
 */
export const MAX_REPAYMENTS = 2;
const expired = (r: NameRecord, f: NameFacts) =>
  f.entry === undefined && r.expiresUs !== undefined && f.nowUs >= r.expiresUs;
const lockExpired = (lockUs: bigint | undefined, f: NameFacts) => lockUs !== undefined && f.nowUs > lockUs;
const mayAct = (f: NameFacts) => !f.exportOpen && !f.backingOff;

/** The table. Lines of a state are tried in order; the first that holds is taken. */
export const NAME_LIFECYCLE: readonly LifecycleLine[] = [
  // Asking for the entry.
  {
    state: 'requesting',
    when: 'the request is on the ledger',
    test: (r, f) => r.requestCid !== undefined || f.ownRequest !== undefined,
    action: 'record',
    next: 'requested',
  },
  {
    state: 'requesting',
    when: 'otherwise',
    test: (_r, f) => mayAct(f),
    action: 'request',
    next: 'requested',
  },
  // The first payment.
  {
    state: 'requested',
    when: 'the DSO already made the entry',
    test: (_r, f) => f.entry !== undefined && f.idle !== undefined,
    action: 'record',
    next: 'active',
    event: 'name.registered',
  },
  {
    state: 'requested',
    when: 'the first payment is locked',
    test: (_r, f) => f.initialPayment !== undefined,
    action: 'record',
    next: 'paid',
  },
  {
    state: 'requested',
    when: 'the request is gone without a payment or an entry',
    test: (_r, f) => !f.request,
    action: 'record',
    next: 'rejected',
    event: 'name.rejected',
  },
  { state: 'requested', when: 'otherwise', test: (_r, f) => mayAct(f), action: 'pay-initial', next: 'paid' },
  // Waiting for the DSO to collect (or refuse).
  {
    state: 'paid',
    when: 'the entry exists',
    test: (_r, f) => f.entry !== undefined && f.idle !== undefined,
    action: 'record',
    next: 'active',
    event: 'name.registered',
  },
  {
    state: 'paid',
    when: 'the payment is stuck past its lock',
    test: (_r, f) =>
      f.initialPayment !== undefined && lockExpired(f.initialPayment.lockExpiresUs, f) && mayAct(f),
    action: 'reclaim',
    next: 'rejected',
    event: 'name.rejected',
  },
  {
    state: 'paid',
    when: 'the payment is still locked',
    test: (_r, f) => f.initialPayment !== undefined,
    action: 'none',
    next: 'paid',
  },
  {
    state: 'paid',
    when: 'the payment is gone without an entry: the DSO refused it',
    test: () => true,
    action: 'record',
    next: 'rejected',
    event: 'name.rejected',
  },
  // The entry lives; renewals.
  {
    state: 'active',
    when: 'a renewal payment is locked',
    test: (_r, f) => f.payment !== undefined,
    action: 'record',
    next: 'renewing',
  },
  {
    state: 'active',
    when: 'the entry expired',
    test: (r, f) => expired(r, f),
    action: 'record',
    next: 'expired',
    event: 'name.expired',
  },
  {
    state: 'active',
    when: 'the entry is later than recorded (renewed)',
    test: (r, f) => f.entry !== undefined && r.expiresUs !== undefined && f.entry.expiresUs > r.expiresUs,
    action: 'record',
    next: 'active',
    event: 'name.renewed',
  },
  {
    state: 'active',
    when: 'the renewal window opened (announce once)',
    test: (r, f) => windowOpen(r, f) && !notified(r, 'renewal_due'),
    action: 'warn',
    next: 'active',
    event: 'name.renewal_due',
  },
  {
    state: 'active',
    when: 'less than the expiring horizon is left (announce once)',
    test: (r, f, h) => expiring(r, f, h),
    action: 'warn',
    next: 'active',
    event: 'name.expiring',
  },
  {
    state: 'active',
    when: 'the window is open, auto-renew is on, not paid too often',
    test: (r, f) => windowOpen(r, f) && r.autoRenew && r.repaid <= MAX_REPAYMENTS && mayAct(f),
    action: 'pay-renewal',
    next: 'renewing',
  },
  { state: 'active', when: 'otherwise', test: () => true, action: 'none', next: 'active' },
  // A renewal waits for the DSO.
  {
    state: 'renewing',
    when: 'the entry was extended',
    test: (r, f) => f.entry !== undefined && r.expiresUs !== undefined && f.entry.expiresUs > r.expiresUs,
    action: 'record',
    next: 'active',
    event: 'name.renewed',
  },
  {
    state: 'renewing',
    when: 'the entry expired with the payment uncollected',
    test: (r, f) =>
      f.entry === undefined && f.payment !== undefined && r.expiresUs !== undefined && f.nowUs >= r.expiresUs,
    action: 'record',
    next: 'lapsed',
    event: 'name.expired',
  },
  {
    state: 'renewing',
    when: 'the entry expired',
    test: (r, f) => expired(r, f),
    action: 'record',
    next: 'expired',
    event: 'name.expired',
  },
  {
    state: 'renewing',
    when: 'the payment’s lock expired uncollected while the entry lives: take it back, pay again',
    test: (_r, f) =>
      f.entry !== undefined &&
      f.payment !== undefined &&
      lockExpired(f.payment.lockExpiresUs, f) &&
      mayAct(f),
    action: 'reclaim',
    next: 'active',
    event: 'name.payment_reclaimed',
  },
  {
    state: 'renewing',
    when: 'the payment is gone and the subscription idle again',
    test: (_r, f) => f.payment === undefined && f.idle !== undefined,
    action: 'record',
    next: 'active',
  },
  {
    state: 'renewing',
    when: 'less than the expiring horizon is left, not yet collected (announce once)',
    test: (r, f, h) => expiring(r, f, h),
    action: 'warn',
    next: 'renewing',
    event: 'name.expiring',
  },
  { state: 'renewing', when: 'otherwise', test: () => true, action: 'none', next: 'renewing' },
  // Expired with CC still locked: take it back once the lock allows.
  {
    state: 'lapsed',
    when: 'the payment is gone',
    test: (_r, f) => f.payment === undefined,
    action: 'record',
    next: 'expired',
  },
  {
    state: 'lapsed',
    when: 'its lock expired',
    test: (_r, f) => f.payment !== undefined && lockExpired(f.payment.lockExpiresUs, f) && mayAct(f),
    action: 'reclaim',
    next: 'expired',
    event: 'name.payment_reclaimed',
  },
  { state: 'lapsed', when: 'otherwise', test: () => true, action: 'none', next: 'lapsed' },
];

/** The line the table takes for `r` and `f`; undefined for an ended registration. */
export function nextStep(r: NameRecord, f: NameFacts, h: NameHorizons): LifecycleLine | undefined {
  for (const line of NAME_LIFECYCLE) if (line.state === r.state && line.test(r, f, h)) return line;
  return undefined;
}

/**
 * Owns the intent check's rules on what the name service's actions create
 * and run below their root (Splice.Ans and Splice.Wallet.Subscriptions), for
 * ./check.ts:
 *
 * - an entry request (AnsRules_RequestEntry, non-consuming) runs no choice
 *   and creates exactly one SubscriptionRequest (sender the party; receiver,
 *   provider and dso the DSO; description `prefix "name"`; fee in USD,
 *   lifetime and renewal window as the DSO's rules say) and one
 *   AnsEntryContext (the DSO, the party, the name, URL and description asked
 *   for, referencing that request);
 * - a first payment or renewal runs one AmuletRules_Transfer, by and for the
 *   party, creates exactly one LockedAmulet held by the
 *   DSO alone and one SubscriptionInitialPayment / SubscriptionPayment for
 *   the intent's subscription, target amount and due date, naming that lock
 *   and repeating the subscription it pays for; reward coupons only for the
 *   party;
 * - an expiry releases exactly one lock (the payment's), returns exactly one
 *   Amulet of the locked amount, and creates exactly one SubscriptionIdleState
 *   (a renewal's) or TerminatedSubscription (a first payment's) repeating the
 *   payment.
 *
 * Every create below these roots, whoever it is for, must be of a template
 * the kind explains (./allow.ts). Each difference is reported once: a field
 * that repeats what the root already reports is not reported again.
 */

import type { DecodedTransaction, ExerciseNode, Value } from '../hashing/model.js';
import { templateName, valueToJson } from '../hashing/render.js';
import { withArticle } from '../text/english.js';
import { ALLOWED_CREATES, PKG, templateKey } from './allow.js';
import { decimalEquals } from './decimal.js';
import { type Add, type Created, exactlyOne, partiesText } from './effects.js';
import type {
  AnsEntryRequestIntent,
  AnsPaymentExpireIntent,
  AnsPaymentIntent,
  RecognisedAction,
} from './model.js';
import { ansDescription } from './recognise.js';
import { sameInstant } from './time.js';
import { descendants, inputContractsById } from './tree.js';
import { at, contractIdAt, int64At, numericAt, partyAt, textAt, timeAt } from './values.js';

const wp = (entity: string) => `${PKG.walletPayments}:${entity}`;
const SUBSCRIPTION_REQUEST = wp('SubscriptionRequest');
const ENTRY_CONTEXT = `${PKG.nameService}:AnsEntryContext`;
/** The context text the lock step puts on the LockedAmulet, before the subscription's description. */
export const LOCK_CONTEXT_PREFIX = 'amulet-subscription: ';

const isTemplate = (key: string) => (c: Created) => templateKey(c.node) === key;
const isEntity = (entity: string) => (c: Created) => c.node.templateId.entityName === entity;

/**
 * Compares fields of one contract (`what`, e.g. "the SubscriptionRequest at
 * node 1") with the intent. `root`: the root's own reading of the same field,
 * whose difference is already reported there.
 */
function checker(what: string, where: string, v: Value | undefined, add: Add) {
  const w = (path: string) => `${where}: ${path}`;
  return {
    party(path: string, expected: string, root?: string) {
      const found = partyAt(v, path);
      if (found === expected || (found !== undefined && found === root)) return;
      add(
        'party_mismatch',
        `${what} names ${found ?? 'no party'} as ${path} but the intent says ${expected}.`,
        w(path),
      );
    },
    amount(path: string, expected: string, root?: string) {
      const found = numericAt(v, path);
      if (
        found !== undefined &&
        (decimalEquals(found, expected) || (root !== undefined && decimalEquals(found, root)))
      )
        return;
      add(
        'amount_mismatch',
        `${what} has ${path} ${found ?? '(none)'} but the intent says ${expected}.`,
        w(path),
      );
    },
    text(path: string, expected: string, root?: string) {
      const found = textAt(v, path);
      if (found === expected || (found !== undefined && found === root)) return;
      add(
        'memo_mismatch',
        `${what} carries ${path} ${found === undefined ? '(none)' : JSON.stringify(found)} but the intent says ${JSON.stringify(expected)}.`,
        w(path),
      );
    },
    /** A `RelTime` (`{microseconds}`) against a whole number of microseconds. */
    micros(path: string, expected: string, meaning: string) {
      const found = int64At(v, `${path}.microseconds`);
      if (found !== undefined && found === BigInt(expected)) return;
      add(
        'deadline_mismatch',
        `${what} has ${path} (the ${meaning}) of ${found === undefined ? '(none)' : `${found} µs`} but the intent says ${expected} µs.`,
        w(path),
      );
    },
    time(path: string, expected: string, root?: string) {
      const found = timeAt(v, path);
      if (
        found !== undefined &&
        (sameInstant(found, expected) || (root !== undefined && sameInstant(found, root)))
      )
        return;
      add(
        'deadline_mismatch',
        `${what} has ${path} ${found ?? '(none)'} but the intent says ${expected}.`,
        w(path),
      );
    },
    /** A contract id that must be `expected`, a contract of this transaction described by `which`. */
    cid(path: string, expected: string, which: string) {
      const found = contractIdAt(v, path);
      if (found === expected) return;
      add(
        'contract_mismatch',
        `${what} names ${found ?? 'no contract'} as ${path} but ${which} is ${expected}.`,
        w(path),
      );
    },
  };
}

/** A value for comparison, without type ids (which differ between package versions) or absent optionals. */
function comparable(v: Value | undefined): string {
  if (v === undefined) return 'undefined';
  return JSON.stringify(valueToJson(v), (k, x) => (x === null && k !== '' ? undefined : x));
}

/**
 * `copy`'s fields `labels` must equal `source`'s: what a choice carries over
 * from the contract it consumes (subscription data, pay data, references).
 */
function sameFields(
  copy: Value,
  source: Value,
  labels: readonly string[],
  what: string,
  from: string,
  where: string,
  add: Add,
): void {
  for (const label of labels)
    if (comparable(at(copy, label)) !== comparable(at(source, label)))
      add(
        'contract_mismatch',
        `${what} carries a ${label} different from ${from}'s; the choice copies it unchanged.`,
        `${where}: ${label}`,
      );
}

/**
 * Creates of templates the kind does not explain, where the party is neither
 * signatory nor stakeholder (those where it is are reported by the check's
 * walk): a name-service action creates nothing for anyone else either.
 */
function onlyExplainedCreates(
  kind: RecognisedAction['kind'],
  party: string,
  created: readonly Created[],
  add: Add,
): void {
  const allowed = ALLOWED_CREATES[kind];
  if (!allowed) return;
  for (const c of created) {
    const n = c.node;
    if (allowed.has(templateKey(n)) || n.signatories.includes(party) || n.stakeholders.includes(party))
      continue;
    add(
      'unexplained_create',
      `node ${c.nodeId} creates ${withArticle(templateName(n.packageName, n.templateId))} for ${partiesText(n.stakeholders)}, which ${withArticle(kind)} does not create.`,
      `node ${c.nodeId}`,
    );
  }
}

// ---- entry request ----------------------------------------------------------------------------------

/** The request and its entry context, as AnsRules_RequestEntry writes them from the DSO's rules. */
export function checkAnsRequest(
  tx: DecodedTransaction,
  intent: AnsEntryRequestIntent,
  a: RecognisedAction,
  root: ExerciseNode,
  created: readonly Created[],
  add: Add,
): void {
  const where = `node ${a.nodeId}`;
  if (root.consuming)
    add(
      'unexplained_archive',
      `the root consumes the AnsRules ${root.contractId}; AnsRules_RequestEntry leaves the DSO's rules in place.`,
      `${where}: consuming`,
    );
  // The root's own text: URL and description exactly as asked (the name is compared with the root's fields).
  const arg = checker('the entry request', where, root.chosenValue, add);
  arg.text('url', intent.url);
  arg.text('description', intent.description);
  for (const d of descendants(tx, a.nodeId))
    if (!d.rolledBack && d.node.type === 'exercise')
      add(
        'unexplained_exercise',
        `node ${d.nodeId} exercises ${d.node.choiceId} on ${templateName(d.node.packageName, d.node.templateId)}; AnsRules_RequestEntry runs no choice.`,
        `node ${d.nodeId}`,
      );
  onlyExplainedCreates(intent.kind, intent.party, created, add);

  const request = exactlyOne(
    created,
    isTemplate(SUBSCRIPTION_REQUEST),
    'SubscriptionRequest',
    'entry request',
    `${where}: SubscriptionRequest`,
    add,
  );
  if (request) {
    const f = checker(
      `the SubscriptionRequest at node ${request.nodeId}`,
      `node ${request.nodeId}`,
      request.node.argument,
      add,
    );
    f.party('subscriptionData.sender', intent.party, a.parties.user);
    for (const role of ['receiver', 'provider', 'dso'])
      f.party(`subscriptionData.${role}`, intent.dso, a.parties.dso);
    f.text(
      'subscriptionData.description',
      ansDescription(intent.descriptionPrefix, intent.name),
      a.name === undefined ? undefined : ansDescription(intent.descriptionPrefix, a.name),
    );
    f.amount('payData.paymentAmount.amount', intent.entryFee);
    const unit = at(request.node.argument, 'payData.paymentAmount.unit');
    const unitName = unit?.kind === 'enum' || unit?.kind === 'variant' ? unit.constructor : undefined;
    if (unitName !== 'USDUnit')
      add(
        'instrument_mismatch',
        `the SubscriptionRequest at node ${request.nodeId} prices the entry in ${unitName ?? 'no readable unit'} but the intent's fee is in USD (USDUnit).`,
        `node ${request.nodeId}: payData.paymentAmount.unit`,
      );
    f.micros('payData.paymentInterval', intent.entryLifetimeUs, 'entry lifetime');
    f.micros('payData.paymentDuration', intent.renewalDurationUs, 'renewal window');
  }

  const context = exactlyOne(
    created,
    isTemplate(ENTRY_CONTEXT),
    'AnsEntryContext',
    'entry request',
    `${where}: AnsEntryContext`,
    add,
  );
  if (context) {
    const f = checker(
      `the AnsEntryContext at node ${context.nodeId}`,
      `node ${context.nodeId}`,
      context.node.argument,
      add,
    );
    f.party('dso', intent.dso, a.parties.dso);
    f.party('user', intent.party, a.parties.user);
    f.text('name', intent.name, a.name);
    f.text('url', intent.url, textAt(root.chosenValue, 'url'));
    f.text('description', intent.description, textAt(root.chosenValue, 'description'));
    if (request) f.cid('reference', request.node.contractId, 'the SubscriptionRequest the request creates');
  }
}

// ---- first payment and renewal ------------------------------------------------------------------------

/**
 * The lock and the payment record: one LockedAmulet held by the DSO alone,
 * one payment of the intent's subscription naming it, reward coupons only
 * for the party.
 */
export function checkAnsPayment(
  tx: DecodedTransaction,
  intent: AnsPaymentIntent,
  a: RecognisedAction,
  root: ExerciseNode,
  created: readonly Created[],
  add: Add,
): void {
  const where = `node ${a.nodeId}`;
  const renewal = intent.kind === 'ans-renewal-pay';
  const entity = renewal ? 'SubscriptionPayment' : 'SubscriptionInitialPayment';
  const what = renewal ? 'renewal payment' : 'first payment';
  onlyExplainedCreates(intent.kind, intent.party, created, add);

  const locked = exactlyOne(
    created,
    isEntity('LockedAmulet'),
    'LockedAmulet',
    what,
    `${where}: LockedAmulet`,
    add,
  );
  if (locked) {
    const holders = at(locked.node.argument, 'lock.holders');
    const parties =
      holders?.kind === 'list'
        ? holders.elements.map((e) => (e.kind === 'party' ? e.value : '(not a party)'))
        : [];
    // Held by the transaction's own DSO alone: a DSO other than the intent's is the root's mismatch.
    const alone = (p: string | undefined) => parties.length === 1 && parties[0] === p;
    if (!alone(intent.dso) && !alone(a.instrument?.admin))
      add(
        'party_mismatch',
        `the LockedAmulet at node ${locked.nodeId} is held by ${partiesText(parties)} but the intent says the DSO ${intent.dso} alone.`,
        `node ${locked.nodeId}: lock.holders`,
      );
  }

  // One transfer, by the party for the party: the lock step (its provider earns the app reward).
  const transfers = descendants(tx, a.nodeId).filter(
    (d) => !d.rolledBack && d.node.type === 'exercise' && d.node.choiceId === 'AmuletRules_Transfer',
  );
  if (transfers.length !== 1)
    add(
      'unexplained_exercise',
      `the ${what} runs AmuletRules_Transfer ${transfers.length} times; locking the payment runs it exactly once.`,
      `${where}: AmuletRules_Transfer`,
    );
  for (const d of transfers) {
    if (d.node.type !== 'exercise') continue;
    const f = checker(
      `the AmuletRules_Transfer at node ${d.nodeId}`,
      `node ${d.nodeId}`,
      d.node.chosenValue,
      add,
    );
    f.party('transfer.sender', intent.party, a.parties.sender);
    f.party('transfer.provider', intent.party, a.parties.walletProvider);
  }

  const payment = exactlyOne(created, isTemplate(wp(entity)), entity, what, `${where}: ${entity}`, add);
  for (const c of created)
    if (
      c.node.templateId.entityName === 'AppRewardCoupon' ||
      c.node.templateId.entityName === 'ValidatorRewardCoupon'
    )
      checkCoupon(c, intent.party, add);
  if (!payment) return;

  const v = payment.node.argument;
  const label = `the ${entity} at node ${payment.nodeId}`;
  const f = checker(label, `node ${payment.nodeId}`, v, add);
  f.party('subscriptionData.sender', intent.party, a.parties.sender);
  f.party('subscriptionData.receiver', intent.dso, a.parties.receiver);
  f.party('subscriptionData.provider', intent.dso, a.instrument?.admin);
  f.party('subscriptionData.dso', intent.dso, a.instrument?.admin);
  f.amount('targetAmount', intent.targetAmount, a.amounts.targetAmount);
  if (locked) f.cid('lockedAmulet', locked.node.contractId, 'the LockedAmulet the payment creates');
  if (renewal && intent.dueAt !== undefined) f.time('thisPaymentDueAt', intent.dueAt, a.deadlines.dueAt);
  if (!renewal) f.cid('reference', root.contractId, 'the SubscriptionRequest accepted');

  // The payment repeats the request or idle state it pays for (when the transaction discloses it).
  const paidFor = inputContractsById(tx).get(root.contractId)?.argument;
  const rootEntity = root.templateId.entityName;
  if (paidFor) {
    const labels = renewal
      ? ['subscriptionData', 'payData', 'subscription', 'reference']
      : ['subscriptionData', 'payData'];
    sameFields(
      v,
      paidFor,
      labels,
      label,
      `the ${rootEntity} ${root.contractId}`,
      `node ${payment.nodeId}`,
      add,
    );
    if (renewal) {
      const due = timeAt(paidFor, 'nextPaymentDueAt');
      const paid = timeAt(v, 'thisPaymentDueAt');
      if (due !== undefined && (paid === undefined || !sameInstant(paid, due)))
        add(
          'deadline_mismatch',
          `${label} pays the due date ${paid ?? '(none)'} but the SubscriptionIdleState ${root.contractId} is due ${due}.`,
          `node ${payment.nodeId}: thisPaymentDueAt`,
        );
    }
  }

  // The lock's context is the subscription's description, as the lock step writes it.
  if (locked) {
    const description = textAt(v, 'subscriptionData.description');
    const context = textAt(locked.node.argument, 'lock.optContext');
    const expected = description === undefined ? undefined : `${LOCK_CONTEXT_PREFIX}${description}`;
    if (expected !== undefined && context !== expected)
      add(
        'memo_mismatch',
        `the LockedAmulet at node ${locked.nodeId} carries the lock context ${context === undefined ? '(none)' : JSON.stringify(context)} but the payment's is ${JSON.stringify(expected)}.`,
        `node ${locked.nodeId}: lock.optContext`,
      );
  }
}

/** A reward coupon the lock step's transfer creates: its beneficiary is the party. */
function checkCoupon(c: Created, party: string, add: Add): void {
  const v = c.node.argument;
  const entity = c.node.templateId.entityName;
  const role = entity === 'AppRewardCoupon' ? 'provider' : 'user';
  const found = partyAt(v, role);
  const beneficiary = entity === 'AppRewardCoupon' ? partyAt(v, 'beneficiary') : undefined;
  if (found === party && (beneficiary === undefined || beneficiary === party)) return;
  const who =
    beneficiary !== undefined && beneficiary !== party ? beneficiary : (found ?? 'no readable party');
  add(
    'unexplained_create',
    `node ${c.nodeId} creates ${withArticle(entity)} whose rewards go to ${who}; a name-service payment earns rewards for ${party} only.`,
    `node ${c.nodeId}`,
  );
}

// ---- taking back an uncollected payment ---------------------------------------------------------------

/**
 * One LockedAmulet_OwnerExpireLock on the payment's lock, one Amulet back to
 * the party of the locked amount, and one idle state (a renewal's payment)
 * or terminated subscription (a first payment's) repeating the payment.
 */
export function checkAnsExpire(
  tx: DecodedTransaction,
  intent: AnsPaymentExpireIntent,
  a: RecognisedAction,
  root: ExerciseNode,
  created: readonly Created[],
  add: Add,
): void {
  const where = `node ${a.nodeId}`;
  const rootEntity = root.templateId.entityName;
  const initial = rootEntity === 'SubscriptionInitialPayment';
  const stateEntity = initial ? 'TerminatedSubscription' : 'SubscriptionIdleState';
  const otherEntity = initial ? 'SubscriptionIdleState' : 'TerminatedSubscription';
  onlyExplainedCreates(intent.kind, intent.party, created, add);
  const inputs = inputContractsById(tx);

  const payment = inputs.get(root.contractId)?.argument;
  const paymentLabel = `the ${rootEntity} ${root.contractId}`;
  if (!payment)
    add(
      'contract_mismatch',
      `${paymentLabel} is not among the transaction's input contracts, so the LockedAmulet it releases and its subscription cannot be confirmed.`,
      `${where}: input contracts`,
    );
  else {
    const f = checker(paymentLabel, where, payment, add);
    f.party('subscriptionData.sender', intent.party);
    f.party('subscriptionData.receiver', intent.dso, a.parties.dso);
    f.party('subscriptionData.provider', intent.dso, a.parties.dso);
    // subscriptionData.dso and the name are the root's own fields, compared there.
  }

  const releases = descendants(tx, a.nodeId).filter(
    (d) => !d.rolledBack && d.node.type === 'exercise' && d.node.choiceId === 'LockedAmulet_OwnerExpireLock',
  );
  if (releases.length !== 1)
    add(
      'unexplained_exercise',
      `the expiry runs LockedAmulet_OwnerExpireLock ${releases.length} times; it must release exactly the payment's lock, once.`,
      `${where}: LockedAmulet_OwnerExpireLock`,
    );

  const amulet = exactlyOne(created, isEntity('Amulet'), 'Amulet', 'expiry', `${where}: Amulet`, add);
  const lockedCid = contractIdAt(payment, 'lockedAmulet');
  const locked = lockedCid === undefined ? undefined : inputs.get(lockedCid)?.argument;
  const lockedAmount = numericAt(locked, 'amulet.amount.initialAmount');
  if (amulet && lockedAmount !== undefined) {
    const back = numericAt(amulet.node.argument, 'amount.initialAmount');
    if (back === undefined || !decimalEquals(back, lockedAmount))
      add(
        'amount_mismatch',
        `the Amulet at node ${amulet.nodeId} returns ${back ?? 'an unreadable amount'} but the LockedAmulet ${lockedCid} locks ${lockedAmount}.`,
        `node ${amulet.nodeId}: amount`,
      );
  }

  for (const c of created.filter(isTemplate(wp(otherEntity))))
    add(
      'unexplained_create',
      `node ${c.nodeId} creates ${withArticle(otherEntity)}, but expiring ${withArticle(rootEntity)} creates ${withArticle(stateEntity)}.`,
      `node ${c.nodeId}`,
    );
  const state = exactlyOne(
    created,
    isTemplate(wp(stateEntity)),
    stateEntity,
    'expiry',
    `${where}: ${stateEntity}`,
    add,
  );
  if (!state) return;
  const v = state.node.argument;
  const label = `the ${stateEntity} at node ${state.nodeId}`;
  if (!payment) {
    // Only the new state tells whose subscription this is (its dso and name are the root's fields).
    const f = checker(label, `node ${state.nodeId}`, v, add);
    f.party('subscriptionData.sender', intent.party);
    f.party('subscriptionData.receiver', intent.dso, a.parties.dso);
    f.party('subscriptionData.provider', intent.dso, a.parties.dso);
    return;
  }
  // The payment (checked above) decides; the new state repeats it.
  const labels = initial
    ? ['subscriptionData', 'reference']
    : ['subscriptionData', 'payData', 'subscription', 'reference'];
  sameFields(v, payment, labels, label, paymentLabel, `node ${state.nodeId}`, add);
  if (!initial) {
    const due = timeAt(payment, 'thisPaymentDueAt');
    const next = timeAt(v, 'nextPaymentDueAt');
    if (due !== undefined && (next === undefined || !sameInstant(next, due)))
      add(
        'deadline_mismatch',
        `${label} is due ${next ?? '(none)'} but ${paymentLabel} paid the due date ${due}; the idle state comes back unchanged.`,
        `node ${state.nodeId}: nextPaymentDueAt`,
      );
  }
}

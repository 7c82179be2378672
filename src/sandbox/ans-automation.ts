/**
 * What the SVs' name-service automation does on the real network, for the
 * sandbox: an initial entry payment is collected (the locked CC burnt, a
 * Subscription, its SubscriptionIdleState and the AnsEntry created, both due
 * `now + entryLifetime`) or rejected (TerminatedSubscription, the CC unlocked
 * back to the payer) after the off-ledger checks of ../canton/ans-rules.ts; a
 * renewal payment is collected while the round is open and the entry lives
 * (entry and idle state move on by one lifetime), else left alone; idle states
 * past due and entries past expiry are expired; a TerminatedSubscription is
 * archived with its AnsEntryContext. Each step is a pure decision over the
 * ledger state followed by one `commitInternal`; what was decided is logged
 * per network (`ansAutomationLog`).
 */
import { randomUUID } from 'node:crypto';
import { ansDescriptionProblem, ansUrlProblem, checkAnsName } from '../canton/ans-rules.js';
import { amuletContract, openRounds } from './amulet.js';
import { freshContractId } from './ledger/ids.js';
import type { Contract, NewContract } from './ledger/store.js';
import { InactiveContractError } from './ledger/store.js';
import { big, field, str } from './ledger/value-json.js';
import { interfacesOf, type SandboxNetwork } from './network.js';
import { termsOf } from './participant/interpret-ans.js';
import {
  ANS_ID,
  ANS_PACKAGE_NAME,
  ansEntryRecord,
  type EntryFields,
  idleStateRecord,
  type SubscriptionTerms,
  subscriptionParties,
  subscriptionRecord,
  terminatedSubscriptionRecord,
} from './prepared/ans.js';
import { partySet } from './prepared/common.js';

/** One thing the automation did (or decided not to do), for tests and demos. */
export type AnsEvent = { at: bigint; user: string; name: string | undefined } & (
  | { kind: 'collected'; paymentCid: string; entryCid: string; expiresAt: bigint }
  | { kind: 'rejected'; paymentCid: string; reason: string }
  | { kind: 'renewed'; paymentCid: string; entryCid: string; expiresAt: bigint }
  | { kind: 'renewal-not-collected'; paymentCid: string; reason: string }
  | { kind: 'subscription-expired'; idleStateCid: string }
  | { kind: 'entry-expired'; entryCid: string }
  | { kind: 'terminated'; contextCid: string }
);

interface AnsState {
  log: AnsEvent[];
  /** Renewal payments already logged as not collected (logged once). */
  noted: Set<string>;
}

const states = new WeakMap<SandboxNetwork, AnsState>();

function state(net: SandboxNetwork): AnsState {
  let s = states.get(net);
  if (!s) {
    s = { log: [], noted: new Set() };
    states.set(net, s);
  }
  return s;
}

/** What the automation did on `net`, oldest first. */
export function ansAutomationLog(net: SandboxNetwork): readonly AnsEvent[] {
  return [...state(net).log];
}

const TRIGGERS = new Set([
  'SubscriptionInitialPayment',
  'SubscriptionPayment',
  'SubscriptionIdleState',
  'TerminatedSubscription',
]);

/** Installs the name-service automation on a network (once per network). */
export function installAnsAutomation(net: SandboxNetwork): void {
  if (states.has(net)) return;
  state(net);
  let scheduled = false;
  const run = () => {
    scheduled = false;
    ansStep(net);
  };
  // As the SV triggers, it reacts after the commit that created the contracts, never inside it.
  net.onCommit((u) => {
    if (scheduled) return;
    if (
      u.events.some(
        (e) =>
          e.kind === 'created' &&
          e.contract.packageName === ANS_PACKAGE_NAME.walletPayments &&
          TRIGGERS.has(e.contract.templateId.entityName),
      )
    ) {
      scheduled = true;
      queueMicrotask(run);
    }
  });
  net.onSweep(() => ansStep(net));
}

/** One round of every name-service task over the current ledger. */
export function ansStep(net: SandboxNetwork): void {
  const tasks: [Contract, (c: Contract) => void][] = [
    ...ans(net, 'SubscriptionInitialPayment').map((c) => [c, initialPayment] as const),
    ...ans(net, 'SubscriptionPayment').map((c) => [c, renewalPayment] as const),
    ...ans(net, 'SubscriptionIdleState').map((c) => [c, expireSubscription] as const),
    ...net.store.activeContracts('Splice.Ans:AnsEntry').map((c) => [c, expireEntry] as const),
    ...ans(net, 'TerminatedSubscription').map((c) => [c, terminate] as const),
  ].map(([c, f]) => [c, (x: Contract) => f(net, x)]);
  for (const [c, t] of tasks) {
    if (!net.store.get(c.contractId)) continue;
    try {
      t(c);
    } catch (e) {
      // A contract a task read was consumed meanwhile: the next sweep looks again.
      if (!(e instanceof InactiveContractError)) throw e;
    }
  }
}

/** The DSO's subscriptions of `entity` (receiver and provider the DSO: the name service's). */
function ans(net: SandboxNetwork, entity: string): Contract[] {
  return net.store.activeContracts(`Splice.Wallet.Subscriptions:${entity}`).filter((c) => {
    const t = termsOf(c.argument) ?? subscriptionDataOnly(c);
    return t !== undefined && t.receiver === net.dso && t.provider === net.dso;
  });
}

/** Subscription and TerminatedSubscription carry no payData: their parties only. */
function subscriptionDataOnly(c: Contract) {
  const receiver = str(c.argument, 'subscriptionData', 'receiver');
  const provider = str(c.argument, 'subscriptionData', 'provider');
  return receiver && provider ? { receiver, provider } : undefined;
}

function log(net: SandboxNetwork, e: AnsEvent): void {
  state(net).log.push(e);
}

const contextOf = (net: SandboxNetwork, reference: string, user: string): Contract | undefined =>
  net.store
    .activeContracts('Splice.Ans:AnsEntryContext')
    .find(
      (c) =>
        str(c.argument, 'reference') === reference &&
        str(c.argument, 'user') === user &&
        str(c.argument, 'dso') === net.dso,
    );

const entryFieldsOf = (c: Contract): EntryFields => ({
  dso: str(c.argument, 'dso')!,
  user: str(c.argument, 'user')!,
  name: str(c.argument, 'name') ?? '',
  url: str(c.argument, 'url') ?? '',
  description: str(c.argument, 'description') ?? '',
});

const roundIsOpen = (net: SandboxNetwork, n: bigint | undefined) =>
  n !== undefined && openRounds(net.store).some((r) => r.number === n);

/** The Amulet a LockedAmulet holds, as the contract unlocking it creates (the owner's again). */
function unlocked(net: SandboxNetwork, locked: Contract): NewContract | undefined {
  const amulet = field(locked.argument, 'amulet');
  const owner = amulet && str(amulet, 'owner');
  if (!amulet || !owner) return undefined;
  const c = amuletContract(net.dso, owner, '0', 0n);
  return { ...c, argument: amulet, interfaces: interfacesOf(c.templateId) };
}

function subscriptionContract(
  t: SubscriptionTerms,
  templateId: (typeof ANS_ID)[keyof typeof ANS_ID],
  argument: NewContract['argument'],
  contractId = freshContractId(),
): NewContract {
  return {
    contractId,
    templateId,
    packageName: ANS_PACKAGE_NAME.walletPayments,
    argument,
    signatories: subscriptionParties(t),
    stakeholders: subscriptionParties(t),
    nodeId: 0,
  };
}

function entryContract(e: EntryFields, expiresAt: bigint): NewContract {
  return {
    contractId: freshContractId(),
    templateId: ANS_ID.ansEntry,
    packageName: ANS_PACKAGE_NAME.nameService,
    argument: ansEntryRecord(e, expiresAt),
    signatories: partySet(e.user, e.dso),
    stakeholders: partySet(e.user, e.dso),
    nodeId: 0,
  };
}

// ---- initial payments: collect or reject ----------------------------------------------------

export type InitialDecision = { kind: 'collect' } | { kind: 'reject'; reason: string } | { kind: 'wait' };

/**
 * The SVs' AnsSubscriptionInitialPaymentTrigger: reject when the payment's
 * round is no longer open, the name, URL or description breaks the name
 * service's rules, or a live entry already has the name; collect otherwise.
 * Without its AnsEntryContext the payment is not the name service's to decide.
 */
export function decideInitialPayment(x: {
  hasContext: boolean;
  roundOpen: boolean;
  round: bigint;
  name: string;
  url: string;
  description: string;
  acronym: string;
  nameTaken: boolean;
}): InitialDecision {
  if (!x.hasContext) return { kind: 'wait' };
  if (!x.roundOpen) return { kind: 'reject', reason: `the payment's round ${x.round} is no longer open` };
  const name = checkAnsName(x.name, x.acronym);
  if (!name.ok) return { kind: 'reject', reason: `invalid name: ${name.reason}` };
  const url = ansUrlProblem(x.url);
  if (url) return { kind: 'reject', reason: `invalid URL: ${url}` };
  const description = ansDescriptionProblem(x.description);
  if (description) return { kind: 'reject', reason: `invalid description: ${description}` };
  if (x.nameTaken) return { kind: 'reject', reason: `the name ${x.name} is already taken` };
  return { kind: 'collect' };
}

/** A live (unexpired) AnsEntry with `name`. */
const liveEntry = (net: SandboxNetwork, name: string) =>
  net.store
    .activeContracts('Splice.Ans:AnsEntry')
    .find((c) => str(c.argument, 'name') === name && (big(c.argument, 'expiresAt') ?? 0n) >= net.clock.now());

function initialPayment(net: SandboxNetwork, payment: Contract): void {
  const t = termsOf(payment.argument);
  if (!t) return;
  const reference = str(payment.argument, 'reference')!;
  const context = contextOf(net, reference, t.sender);
  const entry = context ? entryFieldsOf(context) : undefined;
  const round = big(payment.argument, 'round', 'number');
  const d = decideInitialPayment({
    hasContext: context !== undefined,
    roundOpen: roundIsOpen(net, round),
    round: round ?? -1n,
    name: entry?.name ?? '',
    url: entry?.url ?? '',
    description: entry?.description ?? '',
    acronym: net.ansLabel,
    nameTaken: entry !== undefined && liveEntry(net, entry.name) !== undefined,
  });
  if (d.kind === 'wait' || !entry) return;
  const lockedId = str(payment.argument, 'lockedAmulet')!;
  const locked = net.store.get(lockedId);
  const now = net.clock.now();
  if (d.kind === 'reject') {
    const back = locked ? unlocked(net, locked) : undefined;
    net.commitInternal({
      archives: locked ? [payment.contractId, locked.contractId] : [payment.contractId],
      creates: [
        subscriptionContract(t, ANS_ID.terminatedSubscription, terminatedSubscriptionRecord(t, reference)),
        ...(back ? [back] : []),
      ],
      commandId: `sv-ans-reject-${randomUUID()}`,
    });
    log(net, {
      kind: 'rejected',
      at: now,
      user: t.sender,
      name: entry.name,
      paymentCid: payment.contractId,
      reason: d.reason,
    });
    return;
  }
  // Collected: the locked CC goes to the DSO and is burnt (the fee part to fees): the lock is simply gone.
  const due = now + t.intervalUs;
  const subscription = subscriptionContract(t, ANS_ID.subscription, subscriptionRecord(t, reference));
  const newEntry = entryContract(entry, due);
  net.commitInternal({
    archives: locked ? [payment.contractId, locked.contractId] : [payment.contractId],
    creates: [
      subscription,
      subscriptionContract(
        t,
        ANS_ID.subscriptionIdleState,
        idleStateRecord(subscription.contractId, t, due, reference),
      ),
      newEntry,
    ],
    commandId: `sv-ans-collect-${randomUUID()}`,
  });
  log(net, {
    kind: 'collected',
    at: now,
    user: t.sender,
    name: entry.name,
    paymentCid: payment.contractId,
    entryCid: newEntry.contractId,
    expiresAt: due,
  });
}

// ---- renewal payments: collect or leave ------------------------------------------------------

export type RenewalDecision = { kind: 'collect' } | { kind: 'leave'; reason: string };

/**
 * AnsSubscriptionRenewalPaymentTrigger with AnsRules_CollectEntryRenewalPayment's
 * checks: the round still open, the entry live (`now < expiresAt`) and due when
 * the payment says (`thisPaymentDueAt == expiresAt`). Otherwise nothing happens:
 * the payment stays locked until its payer takes it back.
 */
export function decideRenewal(x: {
  now: bigint;
  roundOpen: boolean;
  round: bigint;
  entryExpiresAt: bigint | undefined;
  thisPaymentDueAt: bigint;
}): RenewalDecision {
  if (x.entryExpiresAt === undefined) return { kind: 'leave', reason: 'no entry matches the subscription' };
  if (!x.roundOpen) return { kind: 'leave', reason: `the payment's round ${x.round} is no longer open` };
  if (x.now >= x.entryExpiresAt) return { kind: 'leave', reason: 'the entry has expired' };
  if (x.thisPaymentDueAt !== x.entryExpiresAt)
    return { kind: 'leave', reason: 'the payment is not for the entry’s current expiry' };
  return { kind: 'collect' };
}

function renewalPayment(net: SandboxNetwork, payment: Contract): void {
  const t = termsOf(payment.argument);
  if (!t) return;
  const reference = str(payment.argument, 'reference')!;
  const context = contextOf(net, reference, t.sender);
  const fields = context ? entryFieldsOf(context) : undefined;
  const entry = fields
    ? net.store
        .activeContracts('Splice.Ans:AnsEntry')
        .find((c) => JSON.stringify(entryFieldsOf(c)) === JSON.stringify(fields))
    : undefined;
  const entryExpiresAt = entry ? big(entry.argument, 'expiresAt') : undefined;
  const round = big(payment.argument, 'round', 'number');
  const due = big(payment.argument, 'thisPaymentDueAt')!;
  const now = net.clock.now();
  const d = decideRenewal({
    now,
    roundOpen: roundIsOpen(net, round),
    round: round ?? -1n,
    entryExpiresAt,
    thisPaymentDueAt: due,
  });
  if (d.kind === 'leave') {
    const s = state(net);
    if (!s.noted.has(payment.contractId)) {
      s.noted.add(payment.contractId);
      log(net, {
        kind: 'renewal-not-collected',
        at: now,
        user: t.sender,
        name: fields?.name,
        paymentCid: payment.contractId,
        reason: d.reason,
      });
    }
    return;
  }
  const locked = net.store.get(str(payment.argument, 'lockedAmulet')!);
  const subscription = str(payment.argument, 'subscription')!;
  const newEntry = entryContract(fields!, entryExpiresAt! + t.intervalUs);
  net.commitInternal({
    archives: [payment.contractId, ...(locked ? [locked.contractId] : []), entry!.contractId],
    creates: [
      subscriptionContract(
        t,
        ANS_ID.subscriptionIdleState,
        idleStateRecord(subscription, t, due + t.intervalUs, reference),
      ),
      newEntry,
    ],
    commandId: `sv-ans-renew-${randomUUID()}`,
  });
  log(net, {
    kind: 'renewed',
    at: now,
    user: t.sender,
    name: fields!.name,
    paymentCid: payment.contractId,
    entryCid: newEntry.contractId,
    expiresAt: entryExpiresAt! + t.intervalUs,
  });
}

// ---- expiry and termination ----------------------------------------------------------------

/** DsoRules_ExpireSubscription: an idle state past due ends its subscription. */
function expireSubscription(net: SandboxNetwork, idle: Contract): void {
  const t = termsOf(idle.argument);
  const due = big(idle.argument, 'nextPaymentDueAt');
  const now = net.clock.now();
  if (!t || due === undefined || !(due < now)) return;
  const reference = str(idle.argument, 'reference')!;
  const subscription = str(idle.argument, 'subscription')!;
  net.commitInternal({
    archives: [idle.contractId, ...(net.store.get(subscription) ? [subscription] : [])],
    creates: [
      subscriptionContract(t, ANS_ID.terminatedSubscription, terminatedSubscriptionRecord(t, reference)),
    ],
    commandId: `sv-ans-expire-subscription-${randomUUID()}`,
  });
  log(net, {
    kind: 'subscription-expired',
    at: now,
    user: t.sender,
    name: nameOfReference(net, reference, t.sender),
    idleStateCid: idle.contractId,
  });
}

/** DsoRules_ExpireAnsEntry: an entry past its expiry is archived. */
function expireEntry(net: SandboxNetwork, entry: Contract): void {
  const expiresAt = big(entry.argument, 'expiresAt');
  const now = net.clock.now();
  if (expiresAt === undefined || !(expiresAt < now)) return;
  net.commitInternal({
    archives: [entry.contractId],
    creates: [],
    commandId: `sv-ans-expire-entry-${randomUUID()}`,
  });
  log(net, {
    kind: 'entry-expired',
    at: now,
    user: str(entry.argument, 'user') ?? '',
    name: str(entry.argument, 'name'),
    entryCid: entry.contractId,
  });
}

/** AnsEntryContext_Terminate: the terminated subscription and its context are archived together. */
function terminate(net: SandboxNetwork, terminated: Contract): void {
  const reference = str(terminated.argument, 'reference');
  const user = str(terminated.argument, 'subscriptionData', 'sender');
  const context = reference && user ? contextOf(net, reference, user) : undefined;
  if (!context || !user) return;
  net.commitInternal({
    archives: [terminated.contractId, context.contractId],
    creates: [],
    commandId: `sv-ans-terminate-${randomUUID()}`,
  });
  log(net, {
    kind: 'terminated',
    at: net.clock.now(),
    user,
    name: str(context.argument, 'name'),
    contextCid: context.contractId,
  });
}

const nameOfReference = (net: SandboxNetwork, reference: string, user: string) => {
  const c = contextOf(net, reference, user);
  return c ? str(c.argument, 'name') : undefined;
};

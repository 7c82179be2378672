/**
 * The Canton Name Service's transactions as an external party submits them,
 * following the Daml of splice-amulet-name-service (Splice.Ans) and
 * splice-wallet-payments (Splice.Wallet.Subscriptions): AnsRules_RequestEntry,
 * SubscriptionRequest_AcceptAndMakePayment, SubscriptionIdleState_MakePayment,
 * SubscriptionInitialPayment_Expire and SubscriptionPayment_Expire, plus the
 * records of every ANS and subscription contract (the DSO automation creates
 * them too). No real vector of these actions exists in ../shared/vectors/real:
 * the node structure follows the Daml and is NOT checked against a
 * participant's output.
 *
 * What is left out or fixed, against the real Daml:
 * - the two packages' ids are stand-ins (hashes of their names); the nodes
 *   carry the real package names, which is what recognisers pin;
 * - trailing `None` fields are dropped from records, as participants
 *   normalise values (the vectors' TransferContext has no featuredAppRight):
 *   TransferContext.featuredAppRight, AppTransferContext.featuredAppRight,
 *   Transfer.beneficiaries and the helpers' expectedDso do not appear;
 * - the sandbox's fee schedule is zero (see openRoundRecord): ComputeFees
 *   answers `[0.0]`, the locked amount is exactly targetAmount, and the lock
 *   step's AmuletRules_Transfer issues no AppRewardCoupon / ValidatorRewardCoupon
 *   (Daml issues them only when the usage fees are positive);
 * - only InputAmulet inputs (no reward coupons, no featured app right).
 *
 * One file on purpose: it is the list of the name service's node builders and
 * contract records, which share the record shapes (entry, subscription,
 * payment, transfer context) and are read side by side with the Daml they
 * follow.
 */
import { createHash } from 'node:crypto';
import type { NodeBody, PreparedTransaction, Value } from '../../hashing/model.js';
import { divideDecimals, fromUnits } from '../../intent/decimal.js';
import {
  type AmuletDso,
  amuletRulesInput,
  dsoRef,
  holdingRef,
  openRoundInput,
  openRoundRecord,
  relTime,
} from './amulet-inputs.js';
import {
  type AmuletHolding,
  type AmuletTransferSpec,
  addAmounts,
  amuletRulesTransferNodes,
  inputValue,
  subAmounts,
  transferOutput,
} from './amulet-transfer.js';
import {
  amuletRecord,
  amuletType,
  assemble,
  type ContractRef,
  cid,
  createNode,
  type Envelope,
  exerciseNode,
  fetchNode,
  ID,
  type InputSpec,
  ident,
  inputAmulet,
  list,
  lockedAmuletRecord,
  metadata,
  mintContractId,
  none,
  num,
  numericUnits,
  party,
  partySet,
  record,
  round,
  some,
  text,
  transferContext,
  ts,
} from './common.js';
import { inputOf, type LedgerContract, refOf } from './preapproval-manage.js';

export type { LedgerContract };

// ---- packages and identifiers ---------------------------------------------------------------

export const ANS_PACKAGE_NAME = {
  nameService: 'splice-amulet-name-service',
  walletPayments: 'splice-wallet-payments',
} as const;

/** A stand-in package id: no real vector names these packages' ids. */
const standInId = (name: string) =>
  createHash('sha256').update(`canton-signer/sandbox/package/${name}`).digest('hex');

export const ANS_PKG = {
  nameService: standInId(ANS_PACKAGE_NAME.nameService),
  walletPayments: standInId(ANS_PACKAGE_NAME.walletPayments),
} as const;

const ansType = (entity: string) => ident(ANS_PKG.nameService, 'Splice.Ans', entity);
const subType = (entity: string) => ident(ANS_PKG.walletPayments, 'Splice.Wallet.Subscriptions', entity);
const payType = (entity: string) => ident(ANS_PKG.walletPayments, 'Splice.Wallet.Payment', entity);
const rulesType = (entity: string) => amuletType('Splice.AmuletRules', entity);

export const ANS_ID = {
  ansRules: ansType('AnsRules'),
  ansRulesConfig: ansType('AnsRulesConfig'),
  ansEntryContext: ansType('AnsEntryContext'),
  ansEntry: ansType('AnsEntry'),
  subscriptionRequest: subType('SubscriptionRequest'),
  subscriptionInitialPayment: subType('SubscriptionInitialPayment'),
  subscription: subType('Subscription'),
  subscriptionIdleState: subType('SubscriptionIdleState'),
  subscriptionPayment: subType('SubscriptionPayment'),
  terminatedSubscription: subType('TerminatedSubscription'),
} as const;

const TX_KIND = 'splice.lfdecentralizedtrust.org/tx-kind';
const REASON = 'splice.lfdecentralizedtrust.org/reason';
const SENDER = 'splice.lfdecentralizedtrust.org/sender';

// ---- AnsRules configuration --------------------------------------------------------------------

const DAY_US = 86_400_000_000n;

export interface AnsConfig {
  /** USD per entry lifetime (Numeric 10). */
  entryFee: string;
  entryLifetimeUs: bigint;
  renewalDurationUs: bigint;
  descriptionPrefix: string;
}

/** The public networks' AnsRules (fee 1 USD, 90 days, renewable in the last 30). */
export const DEFAULT_ANS_CONFIG: AnsConfig = {
  entryFee: '1.0',
  entryLifetimeUs: 90n * DAY_US,
  renewalDurationUs: 30n * DAY_US,
  descriptionPrefix: 'CNS entry: ',
};

export function ansRulesRecord(dso: string, c: AnsConfig): Value {
  return record(ANS_ID.ansRules, [
    ['dso', party(dso)],
    [
      'config',
      record(ANS_ID.ansRulesConfig, [
        ['renewalDuration', relTime(c.renewalDurationUs)],
        ['entryLifetime', relTime(c.entryLifetimeUs)],
        ['entryFee', num(c.entryFee)],
        ['descriptionPrefix', text(c.descriptionPrefix)],
      ]),
    ],
  ]);
}

// ---- subscription terms ------------------------------------------------------------------------

/** SubscriptionData and SubscriptionPayData, flattened. */
export interface SubscriptionTerms {
  sender: string;
  receiver: string;
  provider: string;
  dso: string;
  description: string;
  amount: string;
  unit: 'USDUnit' | 'AmuletUnit';
  intervalUs: bigint;
  durationUs: bigint;
}

/** Daml's `show` of a Text: double-quoted, with `"` and `\` (and control characters) escaped. */
export function showText(s: string): string {
  const escaped = s.replace(/[\\"\n\r\t]/g, (c) =>
    c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : `\\${c}`,
  );
  return `"${escaped}"`;
}

/** What AnsRules_RequestEntry puts in the request: user pays the DSO the entry fee every lifetime. */
export function entryTerms(dso: string, user: string, name: string, c: AnsConfig): SubscriptionTerms {
  return {
    sender: user,
    receiver: dso,
    provider: dso,
    dso,
    description: `${c.descriptionPrefix}${showText(name)}`,
    amount: c.entryFee,
    unit: 'USDUnit',
    intervalUs: c.entryLifetimeUs,
    durationUs: c.renewalDurationUs,
  };
}

export function subscriptionDataRecord(t: SubscriptionTerms): Value {
  return record(subType('SubscriptionData'), [
    ['sender', party(t.sender)],
    ['receiver', party(t.receiver)],
    ['provider', party(t.provider)],
    ['dso', party(t.dso)],
    ['description', text(t.description)],
  ]);
}

export function payDataRecord(t: SubscriptionTerms): Value {
  return record(subType('SubscriptionPayData'), [
    [
      'paymentAmount',
      record(payType('PaymentAmount'), [
        ['amount', num(t.amount)],
        ['unit', { kind: 'enum', enumId: payType('Unit'), constructor: t.unit }],
      ]),
    ],
    ['paymentInterval', relTime(t.intervalUs)],
    ['paymentDuration', relTime(t.durationUs)],
  ]);
}

/** Signatories (and stakeholders) of every subscription template: sender, receiver, provider. */
export const subscriptionParties = (t: SubscriptionTerms): string[] =>
  partySet(t.sender, t.receiver, t.provider);

const subscriptionRef = (
  t: SubscriptionTerms,
  contractId: string,
  templateId: (typeof ANS_ID)[keyof typeof ANS_ID],
): ContractRef => ({
  contractId,
  packageName: ANS_PACKAGE_NAME.walletPayments,
  templateId,
  signatories: subscriptionParties(t),
  stakeholders: subscriptionParties(t),
});

// ---- contract records ----------------------------------------------------------------------------

export interface EntryFields {
  dso: string;
  user: string;
  name: string;
  url: string;
  description: string;
}

export const ansEntryContextRecord = (e: EntryFields, reference: string): Value =>
  record(ANS_ID.ansEntryContext, [
    ['dso', party(e.dso)],
    ['user', party(e.user)],
    ['name', text(e.name)],
    ['url', text(e.url)],
    ['description', text(e.description)],
    ['reference', cid(reference)],
  ]);

export const ansEntryRecord = (e: EntryFields, expiresAt: bigint): Value =>
  record(ANS_ID.ansEntry, [
    ['user', party(e.user)],
    ['dso', party(e.dso)],
    ['name', text(e.name)],
    ['url', text(e.url)],
    ['description', text(e.description)],
    ['expiresAt', ts(expiresAt)],
  ]);

export const subscriptionRequestRecord = (t: SubscriptionTerms): Value =>
  record(ANS_ID.subscriptionRequest, [
    ['subscriptionData', subscriptionDataRecord(t)],
    ['payData', payDataRecord(t)],
  ]);

export const subscriptionRecord = (t: SubscriptionTerms, reference: string): Value =>
  record(ANS_ID.subscription, [
    ['subscriptionData', subscriptionDataRecord(t)],
    ['reference', cid(reference)],
  ]);

export const terminatedSubscriptionRecord = (t: SubscriptionTerms, reference: string): Value =>
  record(ANS_ID.terminatedSubscription, [
    ['subscriptionData', subscriptionDataRecord(t)],
    ['reference', cid(reference)],
  ]);

export const idleStateRecord = (
  subscription: string,
  t: SubscriptionTerms,
  nextPaymentDueAt: bigint,
  reference: string,
): Value =>
  record(ANS_ID.subscriptionIdleState, [
    ['subscription', cid(subscription)],
    ['subscriptionData', subscriptionDataRecord(t)],
    ['payData', payDataRecord(t)],
    ['nextPaymentDueAt', ts(nextPaymentDueAt)],
    ['reference', cid(reference)],
  ]);

export interface PaymentFields {
  targetAmount: string;
  lockedAmulet: string;
  round: bigint;
  reference: string;
}

export const initialPaymentRecord = (t: SubscriptionTerms, p: PaymentFields): Value =>
  record(ANS_ID.subscriptionInitialPayment, [
    ['subscriptionData', subscriptionDataRecord(t)],
    ['payData', payDataRecord(t)],
    ['targetAmount', num(p.targetAmount)],
    ['lockedAmulet', cid(p.lockedAmulet)],
    ['round', round(p.round)],
    ['reference', cid(p.reference)],
  ]);

export const paymentRecord = (
  subscription: string,
  t: SubscriptionTerms,
  thisPaymentDueAt: bigint,
  p: PaymentFields,
): Value =>
  record(ANS_ID.subscriptionPayment, [
    ['subscription', cid(subscription)],
    ['subscriptionData', subscriptionDataRecord(t)],
    ['payData', payDataRecord(t)],
    ['thisPaymentDueAt', ts(thisPaymentDueAt)],
    ['targetAmount', num(p.targetAmount)],
    ['lockedAmulet', cid(p.lockedAmulet)],
    ['round', round(p.round)],
    ['reference', cid(p.reference)],
  ]);

// ---- amounts -----------------------------------------------------------------------------------

/** `a / b` on Numeric 10 values, rounded half to even (Daml-LF's Numeric division). */
export function divideNumeric(a: string, b: string): string {
  const q = divideDecimals(a, b);
  if (q === undefined) throw new Error(`cannot divide ${a} by ${b}`);
  return q;
}

/** `paymentAmountToAmulet`: USD at the round's price, Amulet as it is. */
export const targetAmountOf = (t: SubscriptionTerms, amuletPrice: string): string =>
  t.unit === 'USDUnit' ? divideNumeric(t.amount, amuletPrice) : fromUnits(numericUnits(t.amount));

/** What AmuletRules_ComputeFees answers under the sandbox's (zero) fee schedule. */
export const SANDBOX_OUTPUT_FEE = '0';

/** Lock expiry of `lockAndMakeChange`: `max (now + tickDuration) round.targetClosesAt`. */
export const lockExpiry = (now: bigint, tickUs: bigint, targetClosesAt: bigint): bigint =>
  now + tickUs > targetClosesAt ? now + tickUs : targetClosesAt;

// ---- AnsRules_RequestEntry --------------------------------------------------------------------------

export interface AnsRequestEntryInput extends Envelope {
  ansRules: LedgerContract;
  dso: string;
  user: string;
  name: string;
  url: string;
  description: string;
  config: AnsConfig;
}

/**
 * 0 AnsRules_RequestEntry (nonconsuming, the user) → 1 SubscriptionRequest
 * (user pays the DSO) and 2 AnsEntryContext (its reference is the request).
 */
export function ansRequestEntry(i: AnsRequestEntryInput): PreparedTransaction {
  const terms = entryTerms(i.dso, i.user, i.name, i.config);
  const requestCid = mintContractId(i.seeds(1));
  const contextCid = mintContractId(i.seeds(2));
  const entry: EntryFields = {
    dso: i.dso,
    user: i.user,
    name: i.name,
    url: i.url,
    description: i.description,
  };
  const root = exerciseNode(refOf(i.ansRules), {
    actingParties: [i.user],
    choiceId: 'AnsRules_RequestEntry',
    chosenValue: record(ansType('AnsRules_RequestEntry'), [
      ['name', text(i.name)],
      ['url', text(i.url)],
      ['description', text(i.description)],
      ['user', party(i.user)],
    ]),
    consuming: false,
    children: [1, 2],
    exerciseResult: record(ansType('AnsRules_RequestEntryResult'), [
      ['entryCid', cid(contextCid)],
      ['requestCid', cid(requestCid)],
    ]),
  });
  const request = createNode(
    subscriptionRef(terms, requestCid, ANS_ID.subscriptionRequest),
    subscriptionRequestRecord(terms),
  );
  const context = createNode(
    {
      contractId: contextCid,
      packageName: ANS_PACKAGE_NAME.nameService,
      templateId: ANS_ID.ansEntryContext,
      signatories: partySet(i.dso, i.user),
      stakeholders: partySet(i.dso, i.user),
    },
    ansEntryContextRecord(entry, requestCid),
  );
  return assemble(i, [root, request, context], [inputOf(i.ansRules)]);
}

// ---- the lock step of both payments -------------------------------------------------------------

export interface AnsPaymentInput extends Envelope {
  dso: AmuletDso;
  terms: SubscriptionTerms;
  walletProvider: string;
  /** The sender's amulets, valued as of the open round. */
  inputs: AmuletHolding[];
  /** `entryFee / amuletPrice` (targetAmountOf). */
  targetAmount: string;
  /** lockExpiry(ledger time, tick, round.targetClosesAt). */
  lockExpiresAt: bigint;
}

export interface AnsInitialPaymentInput extends AnsPaymentInput {
  /** The SubscriptionRequest (its id is the subscription's reference). */
  request: LedgerContract;
}

export interface AnsRenewalPaymentInput extends AnsPaymentInput {
  idleState: LedgerContract;
  /** The Subscription the idle state names (MakePayment fetches it). */
  subscription: LedgerContract;
  nextPaymentDueAt: bigint;
  reference: string;
}

/** Lock amount: targetAmount plus the fee ComputeFees answered. */
export const lockAmountOf = (targetAmount: string): string => addAmounts(targetAmount, SANDBOX_OUTPUT_FEE);

const PAYMENT_CONTEXT_PREFIX = 'amulet-subscription: ';

/**
 * `lockAndMakeChange` from node `first` on: OpenMiningRound_Fetch (the
 * sender), AmuletRules_ComputeFees (→ fetch of the round) and the
 * AmuletRules_Transfer locking targetAmount + fee to the sender with the
 * subscription's receiver and provider as holders (→ fetch of the round, each
 * input fetched and archived, the LockedAmulet, the change).
 */
function lockStep(i: AnsPaymentInput, first: number) {
  const d = i.dso;
  const t = i.terms;
  const sender = t.sender;
  const roundRef = dsoRef(d.dso, d.openRound, ID.openMiningRound);
  const rulesRef = dsoRef(d.dso, d.amuletRules);
  const roundFetch = exerciseNode(roundRef, {
    actingParties: [sender],
    choiceId: 'OpenMiningRound_Fetch',
    chosenValue: record(amuletType('Splice.Round', 'OpenMiningRound_Fetch'), [['p', party(sender)]]),
    consuming: false,
    children: [],
    exerciseResult: openRoundRecord(d.dso, d.openRound),
  });
  const feesAt = first + 1;
  const computeFees = exerciseNode(rulesRef, {
    actingParties: [sender],
    choiceId: 'AmuletRules_ComputeFees',
    chosenValue: record(rulesType('AmuletRules_ComputeFees'), [
      ['context', transferContext(d.openRound.contractId)],
      ['sender', party(sender)],
      ['outputs', list([transferOutput(t.receiver, i.targetAmount)])],
    ]),
    consuming: false,
    children: [feesAt + 1],
    exerciseResult: record(rulesType('AmuletRules_ComputeFeesResult'), [
      ['fees', list([num(SANDBOX_OUTPUT_FEE)])],
    ]),
  });
  const transferAt = feesAt + 2;
  const outAt = transferAt + 2 + 2 * i.inputs.length;
  const lockedCid = mintContractId(i.seeds(outAt));
  const lockAmount = lockAmountOf(i.targetAmount);
  const change = subAmounts(addAmounts(...i.inputs.map(inputValue)), lockAmount);
  if (change.startsWith('-')) throw new Error(`insufficient funds: the inputs hold less than ${lockAmount}`);
  const changeCid = numericUnits(change) > 0n ? mintContractId(i.seeds(outAt + 1)) : undefined;
  const holders = partySet(t.provider, t.receiver).filter((p) => p !== sender);
  const lock = {
    holders,
    expiresAt: i.lockExpiresAt,
    context: `${PAYMENT_CONTEXT_PREFIX}${t.description}`,
  };
  const spec: AmuletTransferSpec = {
    dso: d,
    sender,
    provider: i.walletProvider,
    receiver: sender,
    amount: lockAmount,
    lock,
    inputs: i.inputs,
    actingParties: partySet(sender, i.walletProvider, ...holders),
    at: transferAt,
    outputCid: lockedCid,
    change:
      changeCid === undefined
        ? undefined
        : {
            contractId: changeCid,
            argument: amuletRecord(d.dso, sender, change, d.openRound.number, d.holdingFeeRate),
          },
    outputArgument: lockedAmuletRecord(
      amuletRecord(d.dso, sender, lockAmount, d.openRound.number, d.holdingFeeRate),
      holders,
      lock.expiresAt,
      lock.context,
    ),
    extraMeta: { [SENDER]: sender, [TX_KIND]: 'transfer' },
    omitExpectedDso: true,
  };
  const transfer = amuletRulesTransferNodes(spec);
  // The LockedAmulet's signatories are its holders and the amulet's (DSO, owner).
  const lockedNode = transfer.find((n) => n.type === 'create' && n.contractId === lockedCid);
  if (lockedNode?.type === 'create') {
    lockedNode.signatories = partySet(d.dso, sender, ...holders);
    lockedNode.stakeholders = partySet(d.dso, sender, ...holders);
  }
  const nodes: NodeBody[] = [roundFetch, computeFees, fetchNode(roundRef, [d.dso]), ...transfer];
  return {
    nodes,
    children: [first, feesAt, transferAt],
    next: first + nodes.length,
    lockedCid,
    changeCid,
  };
}

const paymentContextArg = (d: AmuletDso): Value =>
  record(rulesType('PaymentTransferContext'), [
    ['amuletRules', cid(d.amuletRules.contractId)],
    ['context', transferContext(d.openRound.contractId)],
  ]);

function paymentArg(choice: string, i: AnsPaymentInput): Value {
  return record(subType(choice), [
    ['inputs', list(i.inputs.map((h) => inputAmulet(h.contractId)))],
    ['context', paymentContextArg(i.dso)],
    ['walletProvider', party(i.walletProvider)],
  ]);
}

const holdingInputs = (i: AnsPaymentInput): InputSpec[] =>
  i.inputs.map((h) => ({
    ref: holdingRef(i.dso.dso, i.terms.sender, h.contractId),
    argument: amuletRecord(i.dso.dso, i.terms.sender, h.amount, h.createdRound, h.rate),
    createdAt: h.createdAt,
  }));

/**
 * 0 SubscriptionRequest_AcceptAndMakePayment (consuming; the sender, who is
 * also the wallet provider) → the lock step, then the SubscriptionInitialPayment.
 */
export function ansInitialPayment(i: AnsInitialPaymentInput): PreparedTransaction {
  const t = i.terms;
  const step = lockStep(i, 1);
  const paymentAt = step.next;
  const paymentCid = mintContractId(i.seeds(paymentAt));
  const payment = createNode(
    subscriptionRef(t, paymentCid, ANS_ID.subscriptionInitialPayment),
    initialPaymentRecord(t, {
      targetAmount: i.targetAmount,
      lockedAmulet: step.lockedCid,
      round: i.dso.openRound.number,
      reference: i.request.contractId,
    }),
  );
  const root = exerciseNode(refOf(i.request), {
    actingParties: partySet(t.sender, i.walletProvider),
    choiceId: 'SubscriptionRequest_AcceptAndMakePayment',
    chosenValue: paymentArg('SubscriptionRequest_AcceptAndMakePayment', i),
    consuming: true,
    children: [...step.children, paymentAt],
    exerciseResult: record(subType('SubscriptionRequest_AcceptAndMakePaymentResult'), [
      ['subscriptionPayment', cid(paymentCid)],
      ['senderChange', step.changeCid === undefined ? none : some(cid(step.changeCid))],
    ]),
  });
  return assemble(
    i,
    [root, ...step.nodes, payment],
    [inputOf(i.request), amuletRulesInput(i.dso), openRoundInput(i.dso), ...holdingInputs(i)],
  );
}

/**
 * 0 SubscriptionIdleState_MakePayment (consuming; the sender) → 1 fetch of
 * the Subscription (requireMatchingContract), the lock step, then the
 * SubscriptionPayment for `nextPaymentDueAt`.
 */
export function ansRenewalPayment(i: AnsRenewalPaymentInput): PreparedTransaction {
  const t = i.terms;
  const subscriptionFetch = fetchNode(refOf(i.subscription), subscriptionParties(t));
  const step = lockStep(i, 2);
  const paymentAt = step.next;
  const paymentCid = mintContractId(i.seeds(paymentAt));
  const payment = createNode(
    subscriptionRef(t, paymentCid, ANS_ID.subscriptionPayment),
    paymentRecord(i.subscription.contractId, t, i.nextPaymentDueAt, {
      targetAmount: i.targetAmount,
      lockedAmulet: step.lockedCid,
      round: i.dso.openRound.number,
      reference: i.reference,
    }),
  );
  const root = exerciseNode(refOf(i.idleState), {
    actingParties: partySet(t.sender, i.walletProvider),
    choiceId: 'SubscriptionIdleState_MakePayment',
    chosenValue: paymentArg('SubscriptionIdleState_MakePayment', i),
    consuming: true,
    children: [1, ...step.children, paymentAt],
    exerciseResult: record(subType('SubscriptionIdleState_MakePaymentResult'), [
      ['subscriptionPayment', cid(paymentCid)],
      ['senderChange', step.changeCid === undefined ? none : some(cid(step.changeCid))],
    ]),
  });
  return assemble(
    i,
    [root, subscriptionFetch, ...step.nodes, payment],
    [
      inputOf(i.idleState),
      inputOf(i.subscription),
      amuletRulesInput(i.dso),
      openRoundInput(i.dso),
      ...holdingInputs(i),
    ],
  );
}

// ---- taking back an uncollected payment ------------------------------------------------------------

export interface AnsPaymentExpireBase extends Envelope {
  /** The AmuletRules id (passed in the AppTransferContext, not read) and the open round (fetched). */
  dso: AmuletDso;
  terms: SubscriptionTerms;
  actor: string;
  payment: LedgerContract;
  /** The payment's LockedAmulet and the Amulet record inside it (what the owner gets back). */
  lockedAmulet: LedgerContract & { amulet: Value };
  reference: string;
}

export type AnsPaymentExpireInput =
  | (AnsPaymentExpireBase & { kind: 'initial' })
  | (AnsPaymentExpireBase & { kind: 'renewal'; subscription: LedgerContract; thisPaymentDueAt: bigint });

/**
 * SubscriptionInitialPayment_Expire: 0 root → 1 TerminatedSubscription, 2
 * LockedAmulet_OwnerExpireLock (→ 3 fetch of the round, 4 the Amulet back to
 * the owner). SubscriptionPayment_Expire: 0 root → 1 fetch of the
 * Subscription, 2 SubscriptionIdleState (same due date), 3 OwnerExpireLock
 * (→ 4 fetch of the round, 5 the Amulet).
 */
export function ansPaymentExpire(i: AnsPaymentExpireInput): PreparedTransaction {
  const d = i.dso;
  const t = i.terms;
  const renewal = i.kind === 'renewal';
  const nodes: NodeBody[] = [];
  const children: number[] = [];
  let stateCid: string;
  if (i.kind === 'renewal') {
    children.push(1, 2);
    nodes.push(fetchNode(refOf(i.subscription), subscriptionParties(t)));
    stateCid = mintContractId(i.seeds(2));
    nodes.push(
      createNode(
        subscriptionRef(t, stateCid, ANS_ID.subscriptionIdleState),
        idleStateRecord(i.subscription.contractId, t, i.thisPaymentDueAt, i.reference),
      ),
    );
  } else {
    children.push(1);
    stateCid = mintContractId(i.seeds(1));
    nodes.push(
      createNode(
        subscriptionRef(t, stateCid, ANS_ID.terminatedSubscription),
        terminatedSubscriptionRecord(t, i.reference),
      ),
    );
  }
  const expireAt = nodes.length + 1;
  children.push(expireAt);
  const owner = t.sender;
  const amuletCid = mintContractId(i.seeds(expireAt + 2));
  const summary = record(amuletType('Splice.Amulet', 'AmuletCreateSummary'), [
    ['amulet', cid(amuletCid)],
    ['amuletPrice', num(d.openRound.amuletPrice)],
    ['round', round(d.openRound.number)],
  ]);
  const roundRef = dsoRef(d.dso, d.openRound, ID.openMiningRound);
  nodes.push(
    exerciseNode(refOf(i.lockedAmulet), {
      actingParties: [owner],
      choiceId: 'LockedAmulet_OwnerExpireLock',
      chosenValue: record(amuletType('Splice.Amulet', 'LockedAmulet_OwnerExpireLock'), [
        ['openRoundCid', cid(d.openRound.contractId)],
      ]),
      consuming: true,
      children: [expireAt + 1, expireAt + 2],
      exerciseResult: record(amuletType('Splice.Amulet', 'LockedAmulet_OwnerExpireLockResult'), [
        ['amuletSum', summary],
        ['meta', some(metadata({ [REASON]: text('lock expired'), [TX_KIND]: text('unlock') }))],
      ]),
    }),
    fetchNode(roundRef, [d.dso]),
    createNode(holdingRef(d.dso, owner, amuletCid), i.lockedAmulet.amulet),
  );
  const choice = renewal ? 'SubscriptionPayment_Expire' : 'SubscriptionInitialPayment_Expire';
  const root = exerciseNode(refOf(i.payment), {
    actingParties: [i.actor],
    choiceId: choice,
    chosenValue: record(subType(choice), [
      ['actor', party(i.actor)],
      [
        'transferContext',
        record(rulesType('AppTransferContext'), [
          ['amuletRules', cid(d.amuletRules.contractId)],
          ['openMiningRound', cid(d.openRound.contractId)],
        ]),
      ],
    ]),
    consuming: true,
    children,
    exerciseResult: renewal
      ? record(subType('SubscriptionPayment_ExpireResult'), [
          ['subscriptionState', cid(stateCid)],
          ['amuletSum', summary],
        ])
      : record(subType('SubscriptionInitialPayment_ExpireResult'), [['amuletSum', summary]]),
  });
  const inputs = [inputOf(i.payment), inputOf(i.lockedAmulet), openRoundInput(d)];
  if (i.kind === 'renewal') inputs.push(inputOf(i.subscription));
  return assemble(i, [root, ...nodes], inputs);
}

/**
 * The interpreter's name-service choices: AnsRules_RequestEntry,
 * SubscriptionRequest_AcceptAndMakePayment, SubscriptionIdleState_MakePayment,
 * SubscriptionInitialPayment_Expire and SubscriptionPayment_Expire, checked
 * as the Daml of Splice.Ans and Splice.Wallet.Subscriptions checks them (the
 * controllers, the DSO's AnsRules / AmuletRules / OpenMiningRound disclosed to
 * a party that is no stakeholder, the round open, the sender's own unlocked
 * amulets worth the locked amount, the renewal window, the lock's expiry, the
 * matching Subscription) and built with ../prepared/ans.ts. Also the readers
 * of subscription contracts the DSO automation shares.
 */
import type { PreparedTransaction, Value } from '../../hashing/model.js';
import { fromUnits } from '../../intent/decimal.js';
import { addAmounts, amuletDso, gte, holdingView, openRoundOf } from '../amulet.js';
import { E } from '../errors.js';
import { isoMicros } from '../ledger/clock.js';
import type { Contract } from '../ledger/store.js';
import { big, field, path, str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import type { AmuletHolding } from '../prepared/amulet-transfer.js';
import {
  type AnsConfig,
  ansInitialPayment,
  ansPaymentExpire,
  ansRenewalPayment,
  ansRequestEntry,
  lockAmountOf,
  lockExpiry,
  type SubscriptionTerms,
  subscriptionParties,
  targetAmountOf,
} from '../prepared/ans.js';
import { numericUnits } from '../prepared/common.js';
import {
  contractNotFound,
  envelope,
  interpretationError,
  invalidTransfer,
  isObj,
  type Json,
  missingAuthorization,
  type PrepareCommand,
  parseTemplateId,
  partyArg,
  textArg,
} from './interpret.js';

/** The choices this module interprets, each with the template it is exercised on. */
const TARGETS = {
  AnsRules_RequestEntry: ['Splice.Ans', 'AnsRules'],
  SubscriptionRequest_AcceptAndMakePayment: ['Splice.Wallet.Subscriptions', 'SubscriptionRequest'],
  SubscriptionIdleState_MakePayment: ['Splice.Wallet.Subscriptions', 'SubscriptionIdleState'],
  SubscriptionInitialPayment_Expire: ['Splice.Wallet.Subscriptions', 'SubscriptionInitialPayment'],
  SubscriptionPayment_Expire: ['Splice.Wallet.Subscriptions', 'SubscriptionPayment'],
} as const;

export type AnsChoice = keyof typeof TARGETS;
export const ANS_CHOICES = Object.keys(TARGETS) as AnsChoice[];

/** AmuletConfig's maxNumInputs of the sandbox's transfer configuration. */
const MAX_NUM_INPUTS = 100;

export function interpretAnsChoice(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  cmd: Json,
  choice: AnsChoice,
  arg: Json,
): PreparedTransaction {
  const target = targetOf(net, req, actor, cmd, choice);
  switch (choice) {
    case 'AnsRules_RequestEntry':
      return requestEntry(net, req, actor, target, arg);
    case 'SubscriptionRequest_AcceptAndMakePayment':
    case 'SubscriptionIdleState_MakePayment':
      return makePayment(net, req, actor, target, choice, arg);
    case 'SubscriptionInitialPayment_Expire':
    case 'SubscriptionPayment_Expire':
      return expirePayment(net, req, actor, target, choice, arg);
  }
}

// ---- readers of the contracts (shared with the DSO automation) ------------------------------------

/** SubscriptionData and SubscriptionPayData of a subscription contract's argument. */
export function termsOf(v: Value): SubscriptionTerms | undefined {
  const d = (l: string) => str(v, 'subscriptionData', l);
  const unit = path(v, 'payData', 'paymentAmount', 'unit');
  const amount = str(v, 'payData', 'paymentAmount', 'amount');
  const intervalUs = big(v, 'payData', 'paymentInterval', 'microseconds');
  const durationUs = big(v, 'payData', 'paymentDuration', 'microseconds');
  const [sender, receiver, provider, dso, description] = [
    d('sender'),
    d('receiver'),
    d('provider'),
    d('dso'),
    d('description'),
  ];
  if (!sender || !receiver || !provider || !dso || description === undefined) return undefined;
  if (amount === undefined || intervalUs === undefined || durationUs === undefined) return undefined;
  if (unit?.kind !== 'enum' || (unit.constructor !== 'USDUnit' && unit.constructor !== 'AmuletUnit'))
    return undefined;
  return {
    sender,
    receiver,
    provider,
    dso,
    description,
    amount,
    unit: unit.constructor,
    intervalUs,
    durationUs,
  };
}

/** The configuration an AnsRules contract carries. */
export function ansConfigOf(rules: Contract): AnsConfig {
  const a = rules.argument;
  return {
    entryFee: str(a, 'config', 'entryFee') ?? '1.0',
    entryLifetimeUs: big(a, 'config', 'entryLifetime', 'microseconds') ?? 0n,
    renewalDurationUs: big(a, 'config', 'renewalDuration', 'microseconds') ?? 0n,
    descriptionPrefix: str(a, 'config', 'descriptionPrefix') ?? '',
  };
}

/** The round's tick (`tickDuration`), µs. */
export const tickOf = (round: Contract): bigint => big(round.argument, 'tickDuration', 'microseconds') ?? 0n;

// ---- checks shared by the choices --------------------------------------------------------------

function targetOf(net: SandboxNetwork, req: PrepareCommand, actor: string, cmd: Json, choice: AnsChoice) {
  const [module, entity] = TARGETS[choice];
  const t = parseTemplateId(cmd.templateId);
  if (t?.module !== module || t.entity !== entity)
    throw E.failedToPrepare(
      `The sandbox participant interprets ${choice} on ${module}:${entity} only, not on ${String(cmd.templateId)}`,
    );
  const id = String(cmd.contractId);
  const c = net.store.get(id);
  if (c?.templateId.moduleName !== module || c.templateId.entityName !== entity) throw contractNotFound(id);
  if (t.pkg.startsWith('#') && t.pkg.slice(1) !== c.packageName)
    throw E.invalidArgument(
      `template ${String(cmd.templateId)}: ${module}:${entity} is in package ${c.packageName}, not ${t.pkg.slice(1)}`,
    );
  visible(req, actor, c);
  return c;
}

/** A contract the submitter is no stakeholder of exists for it only when disclosed. */
function visible(req: PrepareCommand, actor: string, c: Contract): void {
  if (c.stakeholders.includes(actor)) return;
  if (!req.disclosedContracts.some((d) => d.contractId === c.contractId))
    throw contractNotFound(c.contractId);
}

function controllerIs(actor: string, controller: string, role: string): void {
  if (actor !== controller) throw missingAuthorization(controller, `${role}, a controller of the choice`);
}

function contractIdArg(o: Json, name: string, what: string): string {
  const v = o[name];
  if (typeof v !== 'string' || v === '')
    throw E.failedToPrepare(`Missing non-optional field ${name} (ContractId ${what})`);
  return v;
}

const emptyMap = (v: unknown) =>
  v === undefined ||
  v === null ||
  (Array.isArray(v) && v.length === 0) ||
  (isObj(v) && Object.keys(v).length === 0);

/** An active OpenMiningRound of the DSO, visible to the submitter. */
function roundArg(net: SandboxNetwork, req: PrepareCommand, actor: string, id: string): Contract {
  const c = net.store.get(id);
  if (c?.templateId.entityName !== 'OpenMiningRound' || str(c.argument, 'dso') !== net.dso)
    throw contractNotFound(id);
  visible(req, actor, c);
  return c;
}

function termsOfContract(c: Contract): SubscriptionTerms {
  const t = termsOf(c.argument);
  if (!t)
    throw interpretationError(`${c.templateId.entityName} ${c.contractId} carries no subscription data`);
  return t;
}

/** `requireMatchingContract subscription (Subscription with subscriptionData, reference)`. */
function matchingSubscription(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  of: Contract,
): Contract {
  const id = str(of.argument, 'subscription') ?? '';
  const sub = net.store.get(id);
  if (sub?.templateId.entityName !== 'Subscription') throw contractNotFound(id || '(subscription)');
  visible(req, actor, sub);
  const same = (a: Value | undefined, b: Value | undefined) =>
    a !== undefined && b !== undefined && JSON.stringify(a, big2s) === JSON.stringify(b, big2s);
  if (
    !same(field(sub.argument, 'subscriptionData'), field(of.argument, 'subscriptionData')) ||
    str(sub.argument, 'reference') !== str(of.argument, 'reference')
  )
    throw interpretationError(`Subscription ${id} does not match the ${of.templateId.entityName}`);
  return sub;
}

const big2s = (_k: string, v: unknown) => (typeof v === 'bigint' ? v.toString() : v);

// ---- AnsRules_RequestEntry ----------------------------------------------------------------------

function requestEntry(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  rules: Contract,
  arg: Json,
): PreparedTransaction {
  const name = textArg(arg, 'name');
  const url = textArg(arg, 'url');
  const description = textArg(arg, 'description');
  const user = partyArg(arg, 'user');
  controllerIs(actor, user, 'user');
  // The Daml validates neither name, url nor description: the DSO checks them when the payment arrives.
  return ansRequestEntry({
    ...envelope(net, req, actor),
    ansRules: rules,
    dso: str(rules.argument, 'dso') ?? net.dso,
    user,
    name,
    url,
    description,
    config: ansConfigOf(rules),
  });
}

// ---- SubscriptionRequest_AcceptAndMakePayment / SubscriptionIdleState_MakePayment ------------------

function makePayment(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  target: Contract,
  choice: 'SubscriptionRequest_AcceptAndMakePayment' | 'SubscriptionIdleState_MakePayment',
  arg: Json,
): PreparedTransaction {
  const terms = termsOfContract(target);
  const walletProvider = partyArg(arg, 'walletProvider');
  controllerIs(actor, terms.sender, 'sender');
  // Interactive submission is single-party: only the sender itself can be the wallet provider.
  controllerIs(actor, walletProvider, 'walletProvider');
  const now = net.clock.now();
  let renewal: { subscription: Contract; due: bigint; reference: string } | undefined;
  if (choice === 'SubscriptionIdleState_MakePayment') {
    const subscription = matchingSubscription(net, req, actor, target);
    const due = big(target.argument, 'nextPaymentDueAt')!;
    if (now + terms.durationUs < due)
      throw interpretationError(
        `The next due date is close enough to make the next payment. (due ${isoMicros(due)}; payments open ${isoMicros(due - terms.durationUs)})`,
      );
    renewal = { subscription, due, reference: str(target.argument, 'reference')! };
  }
  const ctx = arg.context;
  const inner = isObj(ctx) ? ctx.context : undefined;
  if (!isObj(ctx) || !isObj(inner))
    throw E.failedToPrepare('Missing non-optional field context (PaymentTransferContext)');
  const rulesId = contractIdArg(ctx, 'amuletRules', 'AmuletRules');
  const rules = net.amuletRules();
  if (rulesId !== rules.contractId) throw contractNotFound(rulesId);
  visible(req, actor, rules);
  for (const k of ['issuingMiningRounds', 'validatorRights'] as const)
    if (!emptyMap(inner[k]))
      throw E.failedToPrepare(
        `The sandbox participant interprets ${choice} with amulet inputs only: context.context.${k} must be empty`,
      );
  if (inner.featuredAppRight !== null && inner.featuredAppRight !== undefined)
    throw E.failedToPrepare(
      `The sandbox participant interprets ${choice} without a featured app right: context.context.featuredAppRight must be null`,
    );
  const roundContract = roundArg(net, req, actor, contractIdArg(inner, 'openMiningRound', 'OpenMiningRound'));
  const round = openRoundOf(roundContract);
  if (round.opensAt > now)
    throw interpretationError(
      `OpenMiningRound ${round.number} is not open yet (opens ${isoMicros(round.opensAt)})`,
    );
  if (terms.unit === 'USDUnit' && str(roundContract.argument, 'dso') !== terms.dso)
    throw interpretationError('matching DSO party');
  const inputsJson = arg.inputs;
  if (!Array.isArray(inputsJson))
    throw E.failedToPrepare('Missing non-optional field inputs (a list of TransferInput)');
  if (inputsJson.length > MAX_NUM_INPUTS)
    throw invalidTransfer('ITR_Other {description = "More than the maximum number of inputs"}');
  const inputs: AmuletHolding[] = inputsJson.map((x, k) => {
    if (!isObj(x) || x.tag !== 'InputAmulet' || typeof x.value !== 'string')
      throw E.failedToPrepare(
        `inputs[${k}]: the sandbox participant interprets InputAmulet inputs only, got ${JSON.stringify(x)}`,
      );
    const c = net.store.get(x.value);
    const v = c?.templateId.entityName === 'Amulet' ? holdingView(c, round.number) : undefined;
    if (!c || !v) throw contractNotFound(x.value);
    visible(req, actor, c);
    if (v.owner !== terms.sender)
      throw interpretationError(
        `amulet ${x.value} is owned by ${v.owner}, not by the sender ${terms.sender}`,
      );
    return {
      contractId: c.contractId,
      createdAt: c.createdAt,
      amount: v.initialAmount,
      createdRound: v.createdRound,
      rate: v.rate,
      value: v.amount,
    };
  });
  const targetAmount = targetAmountOf(terms, round.amuletPrice);
  const lockAmount = lockAmountOf(targetAmount);
  const total = addAmounts('0', ...inputs.map((h) => h.value!));
  if (!gte(total, lockAmount))
    throw invalidTransfer(
      `ITR_InsufficientFunds {missingAmount = ${fromUnits(numericUnits(lockAmount) - numericUnits(total))}} (the inputs hold ${total} CC as of round ${round.number}; the payment locks ${lockAmount} CC)`,
    );
  const lockExpiresAt = lockExpiry(now, tickOf(roundContract), round.targetClosesAt);
  const common = {
    ...envelope(net, req, actor),
    minLedgerEffectiveTime: round.opensAt,
    maxLedgerEffectiveTime: lockExpiresAt - 1n,
    dso: amuletDso(net.dso, rules, round),
    terms,
    walletProvider,
    inputs,
    targetAmount,
    lockExpiresAt,
  };
  if (!renewal) return ansInitialPayment({ ...common, request: target });
  return ansRenewalPayment({
    ...common,
    idleState: target,
    subscription: renewal.subscription,
    nextPaymentDueAt: renewal.due,
    reference: renewal.reference,
  });
}

// ---- SubscriptionInitialPayment_Expire / SubscriptionPayment_Expire ----------------------------------

function expirePayment(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  payment: Contract,
  choice: 'SubscriptionInitialPayment_Expire' | 'SubscriptionPayment_Expire',
  arg: Json,
): PreparedTransaction {
  const terms = termsOfContract(payment);
  const actorArg = partyArg(arg, 'actor');
  controllerIs(actor, actorArg, 'actor');
  if (!subscriptionParties(terms).includes(actorArg))
    throw interpretationError(`Actor ${actorArg} is a signatory`);
  const renewal = choice === 'SubscriptionPayment_Expire';
  const subscription = renewal ? matchingSubscription(net, req, actor, payment) : undefined;
  const ctx = arg.transferContext;
  if (!isObj(ctx)) throw E.failedToPrepare('Missing non-optional field transferContext (AppTransferContext)');
  const rulesId = contractIdArg(ctx, 'amuletRules', 'AmuletRules');
  if (ctx.featuredAppRight !== null && ctx.featuredAppRight !== undefined)
    throw E.failedToPrepare(
      `The sandbox participant interprets ${choice} without a featured app right: transferContext.featuredAppRight must be null`,
    );
  const roundContract = roundArg(net, req, actor, contractIdArg(ctx, 'openMiningRound', 'OpenMiningRound'));
  const lockedId = str(payment.argument, 'lockedAmulet') ?? '';
  const locked = net.store.get(lockedId);
  if (locked?.templateId.entityName !== 'LockedAmulet') throw contractNotFound(lockedId || '(lockedAmulet)');
  visible(req, actor, locked);
  const lockExpiresAt = big(locked.argument, 'lock', 'expiresAt')!;
  if (net.clock.now() < lockExpiresAt)
    throw interpretationError(
      `Lock.expiresAt: the deadline has not passed (the lock expires ${isoMicros(lockExpiresAt)})`,
    );
  const amulet = field(locked.argument, 'amulet')!;
  const round = openRoundOf(roundContract);
  const rules = net.amuletRules();
  const base = {
    ...envelope(net, req, actor),
    minLedgerEffectiveTime: lockExpiresAt,
    dso: {
      ...amuletDso(net.dso, rules, round),
      amuletRules: { contractId: rulesId, createdAt: rules.createdAt },
    },
    terms,
    actor: actorArg,
    payment,
    lockedAmulet: { ...locked, amulet },
    reference: str(payment.argument, 'reference')!,
  };
  if (!subscription) return ansPaymentExpire({ ...base, kind: 'initial' });
  return ansPaymentExpire({
    ...base,
    kind: 'renewal',
    subscription,
    thisPaymentDueAt: big(payment.argument, 'thisPaymentDueAt')!,
  });
}

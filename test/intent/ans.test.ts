/**
 * The name service in the recogniser and the intent check: an entry request,
 * a first payment, a renewal and the expiry of an uncollected payment, built
 * here from the Daml (Splice.Ans, Splice.Wallet.Subscriptions) with the
 * sandbox's node builders. Each honest transaction passes its intent; each
 * change to where the value goes, what is created, consumed or named is
 * refused with its reason.
 */
import { describe, expect, it } from 'vitest';
import type { DecodedTransaction, NodeBody, PreparedTransaction, Value } from '../../src/hashing/model.js';
import { checkIntent } from '../../src/intent/check.js';
import {
  type AnsEntryRequestIntent,
  type AnsPaymentExpireIntent,
  type AnsPaymentIntent,
  type Intent,
  type IntentProblem,
  IntentSchema,
} from '../../src/intent/model.js';
import {
  ansDescription,
  nameFromDescription,
  recogniseActions,
  showText,
} from '../../src/intent/recognise.js';
import {
  amuletRulesInput,
  dsoRef,
  holdingRef,
  openRoundInput,
} from '../../src/sandbox/prepared/amulet-inputs.js';
import {
  addAmounts,
  amuletRulesTransferNodes,
  subAmounts,
} from '../../src/sandbox/prepared/amulet-transfer.js';
import {
  amuletRecord,
  archiveNode,
  assemble,
  type ContractRef,
  cid,
  createNode,
  emptyGenMap,
  exerciseNode,
  fetchNode,
  ID,
  type InputSpec,
  ident,
  inputAmulet,
  int,
  list,
  lockedAmuletRecord,
  mintContractId,
  none,
  num,
  PACKAGE_NAME,
  party,
  record,
  round,
  text,
  ts,
  variant,
} from '../../src/sandbox/prepared/common.js';
import {
  ALICE,
  dso as amuletDso,
  CAROL,
  DSO,
  decoded,
  envelope,
  existing,
  graft,
  holding,
  MALLORY,
  mapValue,
  T0,
} from './fixtures.js';

// ---- identifiers (package ids are made up; the signer pins templates by package name) -------------------

const ANS_PKG = 'a7f1e2d3c4b5a6978869504132231405f6e7d8c9b0a1928374655647382910ab';
const PAY_PKG = 'b8e2f3a4d5c6b7089a7a615243342516a7f8e9d0c1b2a39485766758493021bc';
const ans = (entity: string) => ident(ANS_PKG, 'Splice.Ans', entity);
const subs = (entity: string) => ident(PAY_PKG, 'Splice.Wallet.Subscriptions', entity);
const payType = (entity: string) => ident(PAY_PKG, 'Splice.Wallet.Payment', entity);
const amuletRules = (entity: string) => ident(ID.amuletRules.packageId, 'Splice.AmuletRules', entity);
const NAME_SERVICE = 'splice-amulet-name-service';
const WALLET_PAYMENTS = 'splice-wallet-payments';

const relTime = (us: bigint): Value =>
  record(
    ident('b70db8369e1c461d5c70f1c86f526a29e9776c655e6ffc2560f95b05ccb8b946', 'DA.Time.Types', 'RelTime'),
    [['microseconds', int(us)]],
  );
const usd: Value = { kind: 'enum', enumId: payType('Unit'), constructor: 'USDUnit' };

// ---- the DSO's rules and the entry ---------------------------------------------------------------------

const PREFIX = 'CNS entry: ';
const NAME = 'alice.unverified.cns';
const URL = 'https://alice.example.com';
const DESCRIPTION = "Alice's page";
const FEE = '1.0';
const LIFETIME = 7_776_000_000_000n;
const RENEWAL = 2_592_000_000_000n;
const ANS_RULES_CID = existing('ans rules');
const REQUEST_CID = existing('subscription request');
const IDLE_CID = existing('idle state');
const SUBSCRIPTION_CID = existing('subscription');
const PAYMENT_CID = existing('subscription payment');
const INITIAL_CID = existing('initial payment');
const PAID_LOCK_CID = existing('paid lock');
const DUE = T0 + 5_000_000_000_000n;
const TARGET = '13.4376622860';
const FEES = '0.0300000000';
const LOCK = addAmounts(TARGET, FEES);
const MAX = '14';

const ref = (
  contractId: string,
  packageName: string,
  templateId: ContractRef['templateId'],
  ...stakeholders: string[]
): ContractRef => ({ contractId, packageName, templateId, signatories: stakeholders, stakeholders });

interface Sub {
  sender: string;
  receiver: string;
  provider: string;
  dso: string;
  description: string;
}
const honestSub = (): Sub => ({
  sender: ALICE,
  receiver: DSO,
  provider: DSO,
  dso: DSO,
  description: ansDescription(PREFIX, NAME),
});
const subscriptionData = (s: Sub): Value =>
  record(subs('SubscriptionData'), [
    ['sender', party(s.sender)],
    ['receiver', party(s.receiver)],
    ['provider', party(s.provider)],
    ['dso', party(s.dso)],
    ['description', text(s.description)],
  ]);
const payData = (fee = FEE, unitValue: Value = usd, lifetime = LIFETIME, renewal = RENEWAL): Value =>
  record(subs('SubscriptionPayData'), [
    [
      'paymentAmount',
      record(payType('PaymentAmount'), [
        ['amount', num(fee)],
        ['unit', unitValue],
      ]),
    ],
    ['paymentInterval', relTime(lifetime)],
    ['paymentDuration', relTime(renewal)],
  ]);
const subStakeholders = (s: Sub) => [s.sender, s.receiver, s.provider];

// ---- AnsRules_RequestEntry ------------------------------------------------------------------------------

interface RequestOpts {
  rulesDso?: string;
  user?: string;
  name?: string;
  url?: string;
  description?: string;
  sub?: Partial<Sub>;
  fee?: string;
  unit?: Value;
  lifetime?: bigint;
  renewal?: bigint;
  context?: Partial<{ dso: string; user: string; name: string; url: string; description: string }>;
  /** The context's reference: the request's own id unless given. */
  reference?: string;
  consuming?: boolean;
}

function buildRequest(o: RequestOpts = {}): PreparedTransaction {
  const env = envelope(ALICE);
  const user = o.user ?? ALICE;
  const name = o.name ?? NAME;
  const url = o.url ?? URL;
  const description = o.description ?? DESCRIPTION;
  const rulesDso = o.rulesDso ?? DSO;
  const sub = {
    ...honestSub(),
    sender: user,
    receiver: rulesDso,
    provider: rulesDso,
    dso: rulesDso,
    ...o.sub,
  };
  const requestCid = mintContractId(env.seeds(1));
  const contextCid = mintContractId(env.seeds(2));
  const c = { dso: rulesDso, user, name, url, description, ...o.context };
  const rulesRef = ref(ANS_RULES_CID, NAME_SERVICE, ans('AnsRules'), rulesDso);
  const root = exerciseNode(rulesRef, {
    actingParties: [user],
    choiceId: 'AnsRules_RequestEntry',
    chosenValue: record(ans('AnsRules_RequestEntry'), [
      ['name', text(name)],
      ['url', text(url)],
      ['description', text(description)],
      ['user', party(user)],
    ]),
    consuming: o.consuming ?? false,
    children: [1, 2],
    exerciseResult: record(ans('AnsRules_RequestEntryResult'), [
      ['entryCid', cid(contextCid)],
      ['requestCid', cid(requestCid)],
    ]),
  });
  const request = createNode(
    ref(requestCid, WALLET_PAYMENTS, subs('SubscriptionRequest'), ...subStakeholders(sub)),
    record(subs('SubscriptionRequest'), [
      ['subscriptionData', subscriptionData(sub)],
      ['payData', payData(o.fee, o.unit, o.lifetime, o.renewal)],
    ]),
  );
  const context = createNode(
    ref(contextCid, NAME_SERVICE, ans('AnsEntryContext'), c.dso, c.user),
    record(ans('AnsEntryContext'), [
      ['dso', party(c.dso)],
      ['user', party(c.user)],
      ['name', text(c.name)],
      ['url', text(c.url)],
      ['description', text(c.description)],
      ['reference', cid(o.reference ?? requestCid)],
    ]),
  );
  const rules: InputSpec = {
    ref: rulesRef,
    argument: record(ans('AnsRules'), [
      ['dso', party(rulesDso)],
      [
        'config',
        record(ans('AnsRulesConfig'), [
          ['renewalDuration', relTime(RENEWAL)],
          ['entryLifetime', relTime(LIFETIME)],
          ['entryFee', num(FEE)],
          ['descriptionPrefix', text(PREFIX)],
        ]),
      ],
    ]),
    createdAt: T0 - 90_000_000_000n,
  };
  return assemble(env, [root, request, context], [rules]);
}

const requestIntent = (o: Partial<AnsEntryRequestIntent> = {}): Intent => ({
  kind: 'ans-entry-request',
  party: ALICE,
  dso: DSO,
  ansRulesCid: ANS_RULES_CID,
  name: NAME,
  url: URL,
  description: DESCRIPTION,
  entryFee: FEE,
  entryLifetimeUs: LIFETIME.toString(),
  renewalDurationUs: RENEWAL.toString(),
  descriptionPrefix: PREFIX,
  ...o,
});

// ---- SubscriptionRequest_AcceptAndMakePayment / SubscriptionIdleState_MakePayment -----------------------

interface PayOpts {
  sub?: Partial<Sub>;
  walletProvider?: string;
  /** The lock step's transfer provider (the wallet provider unless given). */
  transferProvider?: string;
  holders?: string[];
  lock?: string;
  target?: string;
  changeOwner?: string;
  dueAt?: bigint;
  /** The idle state's due date (the payment's thisPaymentDueAt unless `dueAt` is given). */
  stateDue?: bigint;
  inputs?: string[];
  lockContext?: string;
  /** The payment names this lock instead of the one created. */
  lockedAmulet?: string;
}

const INPUT_AMOUNT = '100';
const heldBy = (owner: string, label: string) => ({ ...holding(label, INPUT_AMOUNT), owner });

function buildPayment(kind: 'entry' | 'renewal', o: PayOpts = {}): PreparedTransaction {
  const env = envelope(ALICE);
  const renewal = kind === 'renewal';
  const sub = { ...honestSub(), ...o.sub };
  const walletProvider = o.walletProvider ?? ALICE;
  const inputs = (o.inputs ?? ['h0']).map((l) => heldBy(ALICE, l));
  const lockAmount = o.lock ?? LOCK;
  const rootRef = renewal
    ? ref(IDLE_CID, WALLET_PAYMENTS, subs('SubscriptionIdleState'), ...subStakeholders(honestSub()))
    : ref(REQUEST_CID, WALLET_PAYMENTS, subs('SubscriptionRequest'), ...subStakeholders(honestSub()));
  const roundRef = dsoRef(DSO, amuletDso.openRound, ID.openMiningRound);
  const subscriptionRef = ref(
    SUBSCRIPTION_CID,
    WALLET_PAYMENTS,
    subs('Subscription'),
    ...subStakeholders(honestSub()),
  );
  // 0 root; [1 fetch Subscription (renewals)]; round fetch; ComputeFees; AmuletRules_Transfer subtree; payment.
  const bodies: NodeBody[] = [];
  const first = renewal ? 2 : 1;
  const transferAt = first + 2;
  const outAt = transferAt + 2 + 2 * inputs.length;
  const lockedCid = mintContractId(env.seeds(outAt));
  const changeCid = mintContractId(env.seeds(outAt + 1));
  const inputTotal = addAmounts(...inputs.map((h) => h.amount));
  const transfer = amuletRulesTransferNodes({
    dso: amuletDso,
    sender: ALICE,
    provider: o.transferProvider ?? walletProvider,
    receiver: ALICE,
    amount: lockAmount,
    lock: {
      holders: o.holders ?? [DSO],
      expiresAt: amuletDso.openRound.targetClosesAt,
      context: o.lockContext ?? `amulet-subscription: ${sub.description}`,
    },
    inputs,
    actingParties: [ALICE],
    at: transferAt,
    outputCid: lockedCid,
    change: {
      contractId: changeCid,
      argument: amuletRecord(
        DSO,
        o.changeOwner ?? ALICE,
        subAmounts(inputTotal, lockAmount),
        amuletDso.openRound.number,
        amuletDso.holdingFeeRate,
      ),
    },
    outputArgument: lockedAmuletRecord(
      amuletRecord(DSO, ALICE, lockAmount, amuletDso.openRound.number, amuletDso.holdingFeeRate),
      o.holders ?? [DSO],
      amuletDso.openRound.targetClosesAt,
      o.lockContext ?? `amulet-subscription: ${sub.description}`,
    ),
    extraMeta: {},
  });
  // The change goes to its owner (the transfer builder names the sender as the change's stakeholder).
  const changeAt = outAt + 1;
  if (o.changeOwner !== undefined) {
    const k = changeAt - transferAt;
    transfer[k] = createNode(
      holdingRef(DSO, o.changeOwner, changeCid),
      (transfer[k] as { argument: Value }).argument,
    );
  }
  if (o.holders !== undefined) {
    const k = outAt - transferAt;
    transfer[k] = createNode(
      { ...holdingRef(DSO, ALICE, lockedCid, ID.lockedAmulet), signatories: [ALICE, ...o.holders] },
      (transfer[k] as { argument: Value }).argument,
    );
  }
  const paymentAt = transferAt + transfer.length;
  const paymentCid = mintContractId(env.seeds(paymentAt));
  const dueAt = o.dueAt ?? DUE;
  const paymentEntity = renewal ? 'SubscriptionPayment' : 'SubscriptionInitialPayment';
  const paymentFields: [string, Value][] = renewal
    ? [
        ['subscription', cid(SUBSCRIPTION_CID)],
        ['subscriptionData', subscriptionData(sub)],
        ['payData', payData()],
        ['thisPaymentDueAt', ts(dueAt)],
        ['targetAmount', num(o.target ?? TARGET)],
        ['lockedAmulet', cid(o.lockedAmulet ?? lockedCid)],
        ['round', round(amuletDso.openRound.number)],
        ['reference', cid(REQUEST_CID)],
      ]
    : [
        ['subscriptionData', subscriptionData(sub)],
        ['payData', payData()],
        ['targetAmount', num(o.target ?? TARGET)],
        ['lockedAmulet', cid(o.lockedAmulet ?? lockedCid)],
        ['round', round(amuletDso.openRound.number)],
        ['reference', cid(REQUEST_CID)],
      ];
  const payment = createNode(
    ref(paymentCid, WALLET_PAYMENTS, subs(paymentEntity), ...subStakeholders(sub)),
    record(subs(paymentEntity), paymentFields),
  );
  const context = record(amuletRules('PaymentTransferContext'), [
    ['amuletRules', cid(amuletDso.amuletRules.contractId)],
    [
      'context',
      record(amuletRules('TransferContext'), [
        ['openMiningRound', cid(amuletDso.openRound.contractId)],
        ['issuingMiningRounds', emptyGenMap],
        ['validatorRights', emptyGenMap],
        ['featuredAppRight', none],
      ]),
    ],
  ]);
  const choice = renewal ? 'SubscriptionIdleState_MakePayment' : 'SubscriptionRequest_AcceptAndMakePayment';
  const children = [...(renewal ? [1] : []), first, first + 1, transferAt, paymentAt];
  const root = exerciseNode(rootRef, {
    actingParties: [ALICE, walletProvider],
    choiceId: choice,
    chosenValue: record(subs(choice), [
      ['inputs', list(inputs.map((h) => inputAmulet(h.contractId)))],
      ['context', context],
      ['walletProvider', party(walletProvider)],
    ]),
    consuming: true,
    children,
    exerciseResult: record(subs(`${choice}Result`), [
      ['subscriptionPayment', cid(paymentCid)],
      ['senderChange', { kind: 'optional', value: cid(changeCid) }],
    ]),
  });
  bodies.push(root);
  if (renewal) bodies.push(fetchNode(subscriptionRef, [ALICE]));
  bodies.push(
    exerciseNode(roundRef, {
      actingParties: [ALICE],
      choiceId: 'OpenMiningRound_Fetch',
      chosenValue: record(ident(ID.openMiningRound.packageId, 'Splice.Round', 'OpenMiningRound_Fetch'), [
        ['p', party(ALICE)],
      ]),
      consuming: false,
      children: [],
    }),
    exerciseNode(dsoRef(DSO, amuletDso.amuletRules), {
      actingParties: [ALICE],
      choiceId: 'AmuletRules_ComputeFees',
      chosenValue: record(amuletRules('AmuletRules_ComputeFees'), [
        ['context', context],
        ['sender', party(ALICE)],
        ['outputs', list([])],
        ['expectedDso', { kind: 'optional', value: party(DSO) }],
      ]),
      consuming: false,
      children: [],
      exerciseResult: record(amuletRules('AmuletRules_ComputeFeesResult'), [['fees', list([num(FEES)])]]),
    }),
    ...transfer,
    payment,
  );
  const state: InputSpec = renewal
    ? {
        ref: rootRef,
        argument: record(subs('SubscriptionIdleState'), [
          ['subscription', cid(SUBSCRIPTION_CID)],
          ['subscriptionData', subscriptionData(honestSub())],
          ['payData', payData()],
          ['nextPaymentDueAt', ts(o.stateDue ?? dueAt)],
          ['reference', cid(REQUEST_CID)],
        ]),
        createdAt: T0 - 60_000_000_000n,
      }
    : {
        ref: rootRef,
        argument: record(subs('SubscriptionRequest'), [
          ['subscriptionData', subscriptionData(honestSub())],
          ['payData', payData()],
        ]),
        createdAt: T0 - 60_000_000n,
      };
  const holdings: InputSpec[] = inputs.map((h) => ({
    ref: holdingRef(DSO, h.owner, h.contractId),
    argument: amuletRecord(DSO, h.owner, h.amount, h.createdRound, h.rate),
    createdAt: h.createdAt,
  }));
  return assemble(env, bodies, [amuletRulesInput(amuletDso), openRoundInput(amuletDso), state, ...holdings]);
}

const payIntent = (kind: 'entry' | 'renewal', o: Partial<AnsPaymentIntent> = {}): Intent => ({
  kind: kind === 'entry' ? 'ans-entry-pay' : 'ans-renewal-pay',
  party: ALICE,
  dso: DSO,
  contractId: kind === 'entry' ? REQUEST_CID : IDLE_CID,
  name: NAME,
  targetAmount: TARGET,
  maxAmount: MAX,
  inputs: [existing('h0')],
  ...(kind === 'renewal' ? { dueAt: isoOf(DUE) } : {}),
  ...o,
});

// ---- SubscriptionPayment_Expire / SubscriptionInitialPayment_Expire --------------------------------------

interface ExpireOpts {
  sub?: Partial<Sub>;
  /** The lock the expiry releases (the payment's unless given). */
  releases?: string;
  returnTo?: string;
  returned?: string;
  stateDue?: bigint;
  /** Omit the payment from the input contracts. */
  undisclosed?: boolean;
  actor?: string;
}

function buildExpire(kind: 'payment' | 'initial', o: ExpireOpts = {}): PreparedTransaction {
  const env = envelope(ALICE);
  const initial = kind === 'initial';
  const sub = { ...honestSub(), ...o.sub };
  const entity = initial ? 'SubscriptionInitialPayment' : 'SubscriptionPayment';
  const rootCid = initial ? INITIAL_CID : PAYMENT_CID;
  const rootRef = ref(rootCid, WALLET_PAYMENTS, subs(entity), ...subStakeholders(honestSub()));
  const paymentArg = record(
    subs(entity),
    initial
      ? [
          ['subscriptionData', subscriptionData(honestSub())],
          ['payData', payData()],
          ['targetAmount', num(TARGET)],
          ['lockedAmulet', cid(PAID_LOCK_CID)],
          ['round', round(amuletDso.openRound.number)],
          ['reference', cid(REQUEST_CID)],
        ]
      : [
          ['subscription', cid(SUBSCRIPTION_CID)],
          ['subscriptionData', subscriptionData(honestSub())],
          ['payData', payData()],
          ['thisPaymentDueAt', ts(DUE)],
          ['targetAmount', num(TARGET)],
          ['lockedAmulet', cid(PAID_LOCK_CID)],
          ['round', round(amuletDso.openRound.number)],
          ['reference', cid(REQUEST_CID)],
        ],
  );
  const lockAmulet = amuletRecord(DSO, ALICE, LOCK, amuletDso.openRound.number, amuletDso.holdingFeeRate);
  const lockRef = { ...holdingRef(DSO, ALICE, o.releases ?? PAID_LOCK_CID, ID.lockedAmulet) };
  const subscriptionRef = ref(
    SUBSCRIPTION_CID,
    WALLET_PAYMENTS,
    subs('Subscription'),
    ...subStakeholders(honestSub()),
  );
  const bodies: NodeBody[] = [];
  // 0 root; [1 fetch Subscription]; state create; OwnerExpireLock (round fetch, Amulet create).
  const stateAt = initial ? 1 : 2;
  const stateCid = mintContractId(env.seeds(stateAt));
  const amuletCid = mintContractId(env.seeds(stateAt + 3));
  const state = initial
    ? createNode(
        ref(stateCid, WALLET_PAYMENTS, subs('TerminatedSubscription'), ...subStakeholders(sub)),
        record(subs('TerminatedSubscription'), [
          ['subscriptionData', subscriptionData(sub)],
          ['reference', cid(REQUEST_CID)],
        ]),
      )
    : createNode(
        ref(stateCid, WALLET_PAYMENTS, subs('SubscriptionIdleState'), ...subStakeholders(sub)),
        record(subs('SubscriptionIdleState'), [
          ['subscription', cid(SUBSCRIPTION_CID)],
          ['subscriptionData', subscriptionData(sub)],
          ['payData', payData()],
          ['nextPaymentDueAt', ts(o.stateDue ?? DUE)],
          ['reference', cid(REQUEST_CID)],
        ]),
      );
  const returnTo = o.returnTo ?? ALICE;
  const release = exerciseNode(lockRef, {
    actingParties: [ALICE],
    choiceId: 'LockedAmulet_OwnerExpireLock',
    chosenValue: record(ident(ID.lockedAmulet.packageId, 'Splice.Amulet', 'LockedAmulet_OwnerExpireLock'), [
      ['openRoundCid', cid(amuletDso.openRound.contractId)],
    ]),
    consuming: true,
    children: [stateAt + 2, stateAt + 3],
  });
  const root = exerciseNode(rootRef, {
    actingParties: [o.actor ?? ALICE],
    choiceId: `${entity}_Expire`,
    chosenValue: record(subs(`${entity}_Expire`), [
      ['actor', party(o.actor ?? ALICE)],
      [
        'transferContext',
        record(amuletRules('AppTransferContext'), [
          ['amuletRules', cid(amuletDso.amuletRules.contractId)],
          ['openMiningRound', cid(amuletDso.openRound.contractId)],
          ['featuredAppRight', none],
        ]),
      ],
    ]),
    consuming: true,
    children: [...(initial ? [] : [1]), stateAt, stateAt + 1],
  });
  bodies.push(root);
  if (!initial) bodies.push(fetchNode(subscriptionRef, [ALICE]));
  bodies.push(
    state,
    release,
    fetchNode(dsoRef(DSO, amuletDso.openRound, ID.openMiningRound), [ALICE]),
    createNode(
      holdingRef(DSO, returnTo, amuletCid),
      amuletRecord(DSO, returnTo, o.returned ?? LOCK, amuletDso.openRound.number, amuletDso.holdingFeeRate),
    ),
  );
  const inputs: InputSpec[] = [
    openRoundInput(amuletDso),
    {
      ref: { ...holdingRef(DSO, ALICE, PAID_LOCK_CID, ID.lockedAmulet) },
      argument: lockedAmuletRecord(
        lockAmulet,
        [DSO],
        T0 - 1_000_000n,
        `amulet-subscription: ${honestSub().description}`,
      ),
      createdAt: T0 - 9_000_000_000n,
    },
  ];
  if (!o.undisclosed) inputs.push({ ref: rootRef, argument: paymentArg, createdAt: T0 - 9_000_000_000n });
  return assemble(env, bodies, inputs);
}

const expireIntent = (kind: 'payment' | 'initial', o: Partial<AnsPaymentExpireIntent> = {}): Intent => ({
  kind: 'ans-payment-expire',
  party: ALICE,
  dso: DSO,
  contractId: kind === 'initial' ? INITIAL_CID : PAYMENT_CID,
  name: NAME,
  ...o,
});

// ---- helpers ------------------------------------------------------------------------------------------

function isoOf(us: bigint): string {
  const ms = Number(us / 1000n);
  const frac = (us % 1_000_000n).toString().padStart(6, '0');
  return `${new Date(ms).toISOString().slice(0, 19)}.${frac}Z`;
}

const problemsOf = (p: PreparedTransaction | DecodedTransaction, intent: Intent): IntentProblem[] =>
  checkIntent(
    'transaction' in p && 'nodeById' in p ? p : decoded(p as PreparedTransaction),
    IntentSchema.parse(intent),
  ).problems;

/** Refused with `reason`, and the sentence names `mention`. */
function refused(p: PreparedTransaction, intent: Intent, reason: string, mention?: string | RegExp): void {
  const problems = problemsOf(p, intent);
  const hit = problems.filter((x) => x.reason === reason);
  expect(hit, JSON.stringify(problems, null, 2)).not.toHaveLength(0);
  if (mention !== undefined)
    expect(
      hit.some((x) =>
        typeof mention === 'string'
          ? `${x.message} ${x.where ?? ''}`.includes(mention)
          : mention.test(x.message),
      ),
      JSON.stringify(hit, null, 2),
    ).toBe(true);
}

/** Replaces the body of the first node `match` accepts. */
function editFirst(
  p: PreparedTransaction,
  match: (n: NodeBody) => boolean,
  f: (n: NodeBody) => NodeBody,
): PreparedTransaction {
  const hit = p.transaction.nodes.find((n) => match(n.node));
  if (!hit) throw new Error('no such node');
  const nodes = p.transaction.nodes.map((n) => (n === hit ? { nodeId: n.nodeId, node: f(n.node) } : n));
  return { ...p, transaction: { ...p.transaction, nodes } };
}
const isCreateOf = (entity: string) => (n: NodeBody) =>
  n.type === 'create' && n.templateId.entityName === entity;
const isExerciseOf = (choice: string) => (n: NodeBody) => n.type === 'exercise' && n.choiceId === choice;
const nodeIdOf = (p: PreparedTransaction, match: (n: NodeBody) => boolean): string =>
  p.transaction.nodes.find((n) => match(n.node))!.nodeId;

/** An extra holding of `owner` created under node `parentId`. */
const extraAmulet = (owner: string, label: string, locked = false): NodeBody =>
  locked
    ? createNode(
        holdingRef(DSO, owner, existing(label), ID.lockedAmulet),
        lockedAmuletRecord(amuletRecord(DSO, owner, '5', 21_416n, '0.0002556626'), [DSO], T0 + 1n, 'x'),
      )
    : createNode(
        holdingRef(DSO, owner, existing(label)),
        amuletRecord(DSO, owner, '5', 21_416n, '0.0002556626'),
      );

const preapprovalCreate = (): NodeBody =>
  createNode(
    {
      contractId: existing('sneaky preapproval'),
      packageName: PACKAGE_NAME.amulet,
      templateId: ID.transferPreapproval,
      signatories: [DSO, ALICE, MALLORY],
      stakeholders: [DSO, ALICE, MALLORY],
    },
    record(ID.transferPreapproval, [
      ['dso', party(DSO)],
      ['receiver', party(ALICE)],
      ['provider', party(MALLORY)],
    ]),
  );

const foreignCreate = (): NodeBody =>
  createNode(
    ref(existing('foreign'), NAME_SERVICE, ans('AnsEntry'), DSO, MALLORY),
    record(ans('AnsEntry'), [
      ['user', party(MALLORY)],
      ['dso', party(DSO)],
      ['name', text('mallory.unverified.cns')],
      ['url', text('')],
      ['description', text('')],
      ['expiresAt', ts(T0 + 1n)],
    ]),
  );

/** An undeclared holding of ALICE archived under node `parentId` (acting for her). */
const strayArchive = (label: string) => archiveNode(holdingRef(DSO, ALICE, existing(label)), [DSO, ALICE]);

const coupon = (entity: 'AppRewardCoupon' | 'ValidatorRewardCoupon', who: string): NodeBody => {
  const templateId = ident(ID.amulet.packageId, 'Splice.Amulet', entity);
  const fields: [string, Value][] =
    entity === 'AppRewardCoupon'
      ? [
          ['dso', party(DSO)],
          ['provider', party(who)],
          ['featured', { kind: 'bool', value: false }],
          ['amount', num('0.5')],
          ['round', round(21_416n)],
          ['beneficiary', none],
        ]
      : [
          ['dso', party(DSO)],
          ['user', party(who)],
          ['amount', num('0.5')],
          ['round', round(21_416n)],
        ];
  return createNode(
    {
      contractId: existing(`${entity} ${who}`),
      packageName: PACKAGE_NAME.amulet,
      templateId,
      signatories: [DSO],
      stakeholders: [DSO, who],
    },
    record(templateId, fields),
  );
};

// ---- tests ----------------------------------------------------------------------------------------------

describe('name-service text', () => {
  it('Daml\'s show of a Text: quoted, with " and \\ escaped, and read back from a description', () => {
    expect(showText('alice.unverified.cns')).toBe('"alice.unverified.cns"');
    expect(showText('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(ansDescription('CNS entry: ', 'bob.unverified.cns')).toBe('CNS entry: "bob.unverified.cns"');
    for (const name of ['alice.unverified.cns', 'a"b', 'c\\', '', 'x\\"y'])
      expect(nameFromDescription(ansDescription('Pre "fix" ', name))).toBe(name);
    expect(nameFromDescription('no quotes')).toBeUndefined();
    expect(nameFromDescription('"open')).toBeUndefined();
    expect(nameFromDescription('ends with an escaped quote \\"')).toBeUndefined();
    expect(nameFromDescription(undefined)).toBeUndefined();
  });
});

describe('the recogniser reads the name service', () => {
  it('an entry request: the user, the DSO of the AnsRules and the name', () => {
    const [a] = recogniseActions(decoded(buildRequest()));
    expect(a).toMatchObject({
      kind: 'ans-entry-request',
      contractId: ANS_RULES_CID,
      choice: 'AnsRules_RequestEntry',
      template: 'splice-amulet-name-service:Splice.Ans:AnsRules',
      actingParties: [ALICE],
      parties: { user: ALICE, dso: DSO },
      amounts: {},
      name: NAME,
    });
  });

  it('a first payment and a renewal: the parties, the lock and the target, the inputs, the due date', () => {
    const [entry] = recogniseActions(decoded(buildPayment('entry')));
    expect(entry).toMatchObject({
      kind: 'ans-entry-pay',
      contractId: REQUEST_CID,
      parties: { sender: ALICE, receiver: DSO, walletProvider: ALICE },
      amounts: { amount: LOCK, targetAmount: TARGET },
      instrument: { admin: DSO, id: 'Amulet' },
      inputs: [existing('h0')],
      deadlines: {},
      name: NAME,
    });
    const [renewal] = recogniseActions(decoded(buildPayment('renewal')));
    expect(renewal).toMatchObject({
      kind: 'ans-renewal-pay',
      contractId: IDLE_CID,
      parties: { sender: ALICE, receiver: DSO, walletProvider: ALICE },
      amounts: { amount: LOCK, targetAmount: TARGET },
      deadlines: { dueAt: isoOf(DUE) },
      name: NAME,
    });
  });

  it("an expiry: the actor, the DSO and the name, with the payment's lock as input", () => {
    for (const kind of ['payment', 'initial'] as const) {
      const [a] = recogniseActions(decoded(buildExpire(kind)));
      expect(a).toMatchObject({
        kind: 'ans-payment-expire',
        parties: { actor: ALICE, dso: DSO },
        amounts: {},
        inputs: [PAID_LOCK_CID],
        name: NAME,
      });
    }
    // Undisclosed payment: read from the idle state created.
    const [b] = recogniseActions(decoded(buildExpire('payment', { undisclosed: true })));
    expect(b).toMatchObject({ parties: { actor: ALICE, dso: DSO }, name: NAME });
    expect(b?.inputs).toBeUndefined();
  });

  it('a name-service choice on a look-alike template, or another template of the package, is generic', () => {
    const other = editFirst(
      buildRequest(),
      (n) => n.type === 'exercise',
      (n) => ({ ...n, packageName: 'evil-ans' }) as NodeBody,
    );
    expect(recogniseActions(decoded(other))[0]?.kind).toBe('exercise');
    const wrongEntity = editFirst(
      buildExpire('payment'),
      isExerciseOf('SubscriptionPayment_Expire'),
      (n) => ({ ...n, choiceId: 'SubscriptionInitialPayment_Expire' }) as NodeBody,
    );
    expect(recogniseActions(decoded(wrongEntity))[0]?.kind).toBe('exercise');
  });
});

describe('checkIntent: the honest name-service transactions pass', () => {
  it('entry request, first payment, renewal, both expiries', () => {
    expect(problemsOf(buildRequest(), requestIntent())).toEqual([]);
    expect(problemsOf(buildPayment('entry'), payIntent('entry'))).toEqual([]);
    expect(problemsOf(buildPayment('renewal'), payIntent('renewal'))).toEqual([]);
    expect(problemsOf(buildExpire('payment'), expireIntent('payment'))).toEqual([]);
    expect(problemsOf(buildExpire('initial'), expireIntent('initial'))).toEqual([]);
  });

  it('optional intent fields may be left out; amounts written differently are equal', () => {
    const { inputs: _i, ...noInputs } = payIntent('entry') as AnsPaymentIntent;
    expect(problemsOf(buildPayment('entry'), noInputs)).toEqual([]);
    const { dueAt: _d, ...noDue } = payIntent('renewal') as AnsPaymentIntent;
    expect(problemsOf(buildPayment('renewal'), noDue)).toEqual([]);
    expect(
      problemsOf(
        buildPayment('entry'),
        payIntent('entry', { targetAmount: '13.437662286', maxAmount: LOCK }),
      ),
    ).toEqual([]);
    expect(problemsOf(buildRequest(), requestIntent({ entryFee: '1' }))).toEqual([]);
  });

  it('reward coupons for the party, and several inputs, pass', () => {
    let p = buildPayment('entry', { inputs: ['h0', 'h1'] });
    const transferId = nodeIdOf(p, isExerciseOf('AmuletRules_Transfer'));
    p = graft(p, transferId, coupon('AppRewardCoupon', ALICE));
    p = graft(p, transferId, coupon('ValidatorRewardCoupon', ALICE));
    expect(problemsOf(p, payIntent('entry', { inputs: [existing('h0'), existing('h1')] }))).toEqual([]);
  });
});

describe('checkIntent: an entry request is refused when it differs', () => {
  it('another DSO: the intent, the AnsRules exercised, or the request and context created', () => {
    refused(buildRequest(), requestIntent({ dso: CAROL }), 'party_mismatch', 'dso');
    refused(buildRequest({ rulesDso: MALLORY }), requestIntent(), 'party_mismatch', MALLORY);
    refused(
      buildRequest({ sub: { receiver: MALLORY } }),
      requestIntent(),
      'party_mismatch',
      'subscriptionData.receiver',
    );
    refused(
      buildRequest({ sub: { provider: MALLORY } }),
      requestIntent(),
      'party_mismatch',
      'subscriptionData.provider',
    );
    refused(
      buildRequest({ sub: { dso: MALLORY } }),
      requestIntent(),
      'party_mismatch',
      'subscriptionData.dso',
    );
    refused(
      buildRequest({ context: { dso: MALLORY } }),
      requestIntent(),
      'party_mismatch',
      'AnsEntryContext',
    );
  });

  it('another user or sender', () => {
    refused(buildRequest({ user: MALLORY }), requestIntent(), 'party_mismatch', 'user');
    refused(
      buildRequest({ sub: { sender: MALLORY } }),
      requestIntent(),
      'party_mismatch',
      'subscriptionData.sender',
    );
    refused(buildRequest({ context: { user: MALLORY } }), requestIntent(), 'party_mismatch');
  });

  it('wrong name, URL or description (in the choice, the request, or the context)', () => {
    refused(
      buildRequest({ name: 'mallory.unverified.cns' }),
      requestIntent(),
      'memo_mismatch',
      'mallory.unverified.cns',
    );
    refused(buildRequest({ url: 'https://evil.example' }), requestIntent(), 'memo_mismatch', 'evil.example');
    refused(buildRequest({ description: 'other' }), requestIntent(), 'memo_mismatch', 'description');
    refused(
      buildRequest({ sub: { description: 'CNS entry: "mallory.unverified.cns"' } }),
      requestIntent(),
      'memo_mismatch',
      'subscriptionData.description',
    );
    refused(
      buildRequest(),
      requestIntent({ descriptionPrefix: 'ANS entry: ' }),
      'memo_mismatch',
      'ANS entry',
    );
    refused(
      buildRequest({ context: { name: 'x.unverified.cns' } }),
      requestIntent(),
      'memo_mismatch',
      'AnsEntryContext',
    );
    refused(
      buildRequest({ context: { url: 'https://evil.example' } }),
      requestIntent(),
      'memo_mismatch',
      'url',
    );
    refused(
      buildRequest({ context: { description: 'evil' } }),
      requestIntent(),
      'memo_mismatch',
      'description',
    );
    refused(buildRequest(), requestIntent({ url: '' }), 'memo_mismatch', 'url');
  });

  it('wrong fee, unit, lifetime or renewal window', () => {
    refused(buildRequest({ fee: '100' }), requestIntent(), 'amount_mismatch', 'payData.paymentAmount.amount');
    refused(buildRequest(), requestIntent({ entryFee: '0.5' }), 'amount_mismatch');
    refused(
      buildRequest({ unit: { kind: 'enum', enumId: payType('Unit'), constructor: 'AmuletUnit' } }),
      requestIntent(),
      'instrument_mismatch',
      'AmuletUnit',
    );
    refused(
      buildRequest({ lifetime: LIFETIME - 1n }),
      requestIntent(),
      'deadline_mismatch',
      'entry lifetime',
    );
    refused(buildRequest({ renewal: RENEWAL * 3n }), requestIntent(), 'deadline_mismatch', 'renewal window');
    refused(buildRequest(), requestIntent({ entryLifetimeUs: '1' }), 'deadline_mismatch', 'paymentInterval');
  });

  it('another AnsRules, a consuming exercise, a context referencing another request', () => {
    refused(
      buildRequest(),
      requestIntent({ ansRulesCid: existing('other rules') }),
      'contract_mismatch',
      'AnsRules',
    );
    refused(buildRequest({ consuming: true }), requestIntent(), 'unexplained_archive', 'AnsRules');
    refused(
      buildRequest({ reference: existing('other request') }),
      requestIntent(),
      'contract_mismatch',
      'reference',
    );
  });

  it('an extra create or exercise, for the party or anyone else; a missing one', () => {
    refused(
      graft(buildRequest(), '0', preapprovalCreate()),
      requestIntent(),
      'unexplained_create',
      'TransferPreapproval',
    );
    refused(graft(buildRequest(), '0', foreignCreate()), requestIntent(), 'unexplained_create', 'AnsEntry');
    refused(graft(buildRequest(), '0', extraAmulet(ALICE, 'x')), requestIntent(), 'unexplained_create');
    const two = graft(buildRequest(), '0', buildRequest().transaction.nodes[1]!.node as NodeBody);
    refused(two, requestIntent(), 'unexplained_create', '2 SubscriptionRequests');
    refused(graft(buildRequest(), '0', strayArchive('stray')), requestIntent(), 'unexplained_archive');
    const noContext = {
      ...buildRequest(),
      transaction: {
        ...buildRequest().transaction,
        nodes: buildRequest()
          .transaction.nodes.map((n) =>
            n.nodeId === '0' && n.node.type === 'exercise'
              ? { ...n, node: { ...n.node, children: ['1'] } }
              : n,
          )
          .filter((n) => n.nodeId !== '2'),
        nodeSeeds: buildRequest().transaction.nodeSeeds.filter((s) => s.nodeId !== 2),
      },
    };
    refused(noContext, requestIntent(), 'unexplained_create', 'no AnsEntryContext');
  });
});

describe('checkIntent: a first payment or renewal is refused when it differs', () => {
  for (const kind of ['entry', 'renewal'] as const) {
    describe(kind, () => {
      it('another DSO, receiver or provider', () => {
        refused(buildPayment(kind), payIntent(kind, { dso: CAROL }), 'party_mismatch', 'receiver');
        refused(buildPayment(kind), payIntent(kind, { dso: CAROL }), 'instrument_mismatch');
        refused(
          buildPayment(kind, { sub: { receiver: MALLORY } }),
          payIntent(kind),
          'party_mismatch',
          MALLORY,
        );
        refused(
          buildPayment(kind, { sub: { provider: MALLORY } }),
          payIntent(kind),
          'party_mismatch',
          'provider',
        );
        refused(buildPayment(kind, { sub: { dso: MALLORY } }), payIntent(kind), 'instrument_mismatch');
        refused(
          buildPayment(kind, { sub: { sender: MALLORY } }),
          payIntent(kind),
          'party_mismatch',
          'sender',
        );
      });

      it('another lock holder, or more than one', () => {
        refused(buildPayment(kind, { holders: [MALLORY] }), payIntent(kind), 'party_mismatch', 'held by');
        refused(
          buildPayment(kind, { holders: [DSO, MALLORY] }),
          payIntent(kind),
          'party_mismatch',
          'lock.holders',
        );
      });

      it('a lock larger than maxAmount, or smaller than the target', () => {
        refused(buildPayment(kind, { lock: '20' }), payIntent(kind), 'amount_mismatch', 'at most 14');
        refused(
          buildPayment(kind),
          payIntent(kind, { maxAmount: '13.44' }),
          'amount_mismatch',
          'at most 13.44',
        );
        refused(buildPayment(kind, { lock: '13' }), payIntent(kind), 'amount_mismatch', 'less than');
      });

      it('another targetAmount', () => {
        refused(buildPayment(kind, { target: '1' }), payIntent(kind), 'amount_mismatch', 'targetAmount');
        refused(
          buildPayment(kind),
          payIntent(kind, { targetAmount: '13.4376622861' }),
          'amount_mismatch',
          'targetAmount',
        );
      });

      it('change to a third party', () => {
        refused(buildPayment(kind, { changeOwner: MALLORY }), payIntent(kind), 'unexplained_create', MALLORY);
        const p = buildPayment(kind);
        refused(
          graft(p, nodeIdOf(p, isExerciseOf('AmuletRules_Transfer')), extraAmulet(CAROL, 'c')),
          payIntent(kind),
          'unexplained_create',
          CAROL,
        );
      });

      it('an extra create: a second LockedAmulet, a TransferPreapproval, anything for anyone', () => {
        const p = buildPayment(kind);
        const transferId = nodeIdOf(p, isExerciseOf('AmuletRules_Transfer'));
        refused(
          graft(p, transferId, extraAmulet(ALICE, 'second', true)),
          payIntent(kind),
          'unexplained_create',
          '2 LockedAmulets',
        );
        refused(
          graft(p, '0', preapprovalCreate()),
          payIntent(kind),
          'unexplained_create',
          'TransferPreapproval',
        );
        refused(graft(p, '0', foreignCreate()), payIntent(kind), 'unexplained_create', 'AnsEntry');
        refused(
          graft(p, transferId, coupon('AppRewardCoupon', MALLORY)),
          payIntent(kind),
          'unexplained_create',
          MALLORY,
        );
        refused(
          graft(p, transferId, coupon('ValidatorRewardCoupon', MALLORY)),
          payIntent(kind),
          'unexplained_create',
          MALLORY,
        );
        const other = kind === 'entry' ? 'SubscriptionPayment' : 'SubscriptionInitialPayment';
        const paymentNode = p.transaction.nodes.find((n) =>
          isCreateOf(kind === 'entry' ? 'SubscriptionInitialPayment' : 'SubscriptionPayment')(n.node),
        )!.node;
        const wrong = { ...paymentNode, templateId: subs(other) } as NodeBody;
        refused(graft(p, '0', wrong), payIntent(kind), 'unexplained_create', other);
      });

      it('an undeclared input archived; inputs other than the intent lists; a coupon spent', () => {
        const p = buildPayment(kind);
        const transferId = nodeIdOf(p, isExerciseOf('AmuletRules_Transfer'));
        refused(
          graft(p, transferId, strayArchive('stray')),
          payIntent(kind),
          'unexplained_archive',
          existing('stray'),
        );
        refused(buildPayment(kind, { inputs: ['h0', 'h1'] }), payIntent(kind), 'inputs_mismatch');
        refused(
          buildPayment(kind, { inputs: ['h0', 'h1'] }),
          payIntent(kind),
          'unexplained_archive',
          existing('h1'),
        );
        refused(buildPayment(kind), payIntent(kind, { inputs: [existing('h9')] }), 'inputs_mismatch');
        const rootChoice =
          kind === 'entry' ? 'SubscriptionRequest_AcceptAndMakePayment' : 'SubscriptionIdleState_MakePayment';
        const spent = editFirst(p, isExerciseOf(rootChoice), (n) =>
          n.type === 'exercise'
            ? {
                ...n,
                chosenValue: mapValue(n.chosenValue, (v) =>
                  v.kind === 'list'
                    ? {
                        kind: 'list',
                        elements: [
                          ...v.elements,
                          variant(
                            amuletRules('TransferInput'),
                            'InputAppRewardCoupon',
                            cid(existing('coupon')),
                          ),
                        ],
                      }
                    : undefined,
                ),
              }
            : n,
        );
        refused(spent, payIntent(kind), 'inputs_mismatch', 'InputAppRewardCoupon');
      });

      it('a wallet provider other than the party; a lock step by or for someone else; a second transfer', () => {
        refused(
          buildPayment(kind, { walletProvider: MALLORY }),
          payIntent(kind),
          'party_mismatch',
          'walletProvider',
        );
        refused(
          buildPayment(kind, { transferProvider: MALLORY }),
          payIntent(kind),
          'party_mismatch',
          'transfer.provider',
        );
        const p = buildPayment(kind);
        const transfer = p.transaction.nodes.find((n) => isExerciseOf('AmuletRules_Transfer')(n.node))!.node;
        refused(
          graft(p, '0', { ...transfer, children: [] } as NodeBody),
          payIntent(kind),
          'unexplained_exercise',
          'AmuletRules_Transfer 2 times',
        );
      });

      it('another entry name, another contract', () => {
        refused(
          buildPayment(kind, { sub: { description: 'CNS entry: "mallory.unverified.cns"' } }),
          payIntent(kind),
          'memo_mismatch',
          'mallory.unverified.cns',
        );
        refused(buildPayment(kind), payIntent(kind, { name: 'bob.unverified.cns' }), 'memo_mismatch');
        refused(buildPayment(kind), payIntent(kind, { contractId: existing('other') }), 'contract_mismatch');
      });

      it('a payment naming another lock, or a lock context other than the subscription', () => {
        refused(
          buildPayment(kind, { lockedAmulet: existing('elsewhere') }),
          payIntent(kind),
          'contract_mismatch',
          'lockedAmulet',
        );
        refused(
          buildPayment(kind, { lockContext: 'something else' }),
          payIntent(kind),
          'memo_mismatch',
          'lock context',
        );
      });

      it('a subscription different from the one exercised', () => {
        const p = buildPayment(kind);
        const edited = editFirst(
          p,
          isCreateOf(kind === 'entry' ? 'SubscriptionInitialPayment' : 'SubscriptionPayment'),
          (n) =>
            n.type === 'create'
              ? {
                  ...n,
                  argument: mapValue(n.argument, (v) =>
                    v.kind === 'int64' && v.value === LIFETIME ? int(LIFETIME * 2n) : undefined,
                  ),
                }
              : n,
        );
        refused(edited, payIntent(kind), 'contract_mismatch', 'payData');
      });
    });
  }

  it('renewal: wrong dueAt (the intent, the payment, or the idle state paid)', () => {
    refused(
      buildPayment('renewal'),
      payIntent('renewal', { dueAt: isoOf(DUE + 1n) }),
      'deadline_mismatch',
      'dueAt',
    );
    refused(
      buildPayment('renewal', { dueAt: DUE + 1n, stateDue: DUE }),
      payIntent('renewal'),
      'deadline_mismatch',
    );
    refused(
      buildPayment('renewal', { dueAt: DUE + 1n, stateDue: DUE }),
      payIntent('renewal', { dueAt: isoOf(DUE + 1n) }),
      'deadline_mismatch',
      'SubscriptionIdleState',
    );
  });

  it('a first payment has no due date', () => {
    refused(
      buildPayment('entry'),
      payIntent('entry', { dueAt: isoOf(DUE) }),
      'deadline_mismatch',
      'first payment',
    );
  });

  it('the kinds are not interchangeable', () => {
    refused(buildPayment('entry'), payIntent('renewal'), 'kind_mismatch');
    refused(buildPayment('renewal'), payIntent('entry'), 'kind_mismatch');
  });
});

describe('checkIntent: an expiry is refused when it differs', () => {
  for (const kind of ['payment', 'initial'] as const) {
    describe(kind, () => {
      it('another DSO or receiver', () => {
        refused(buildExpire(kind), expireIntent(kind, { dso: CAROL }), 'party_mismatch', 'dso');
        refused(
          buildExpire(kind, { sub: { receiver: MALLORY } }),
          expireIntent(kind),
          'contract_mismatch',
          'subscriptionData',
        );
        refused(
          buildExpire(kind, { sub: { receiver: MALLORY }, undisclosed: true }),
          expireIntent(kind),
          'party_mismatch',
          MALLORY,
        );
      });

      it('the Amulet returned to a third party, or less than the lock', () => {
        refused(buildExpire(kind, { returnTo: MALLORY }), expireIntent(kind), 'unexplained_create', MALLORY);
        refused(buildExpire(kind, { returned: '1' }), expireIntent(kind), 'amount_mismatch', 'returns 1');
      });

      it("another lock released than the payment's", () => {
        refused(
          buildExpire(kind, { releases: existing('other lock') }),
          expireIntent(kind),
          'unexplained_archive',
          existing('other lock'),
        );
      });

      it('an extra create: a second Amulet, a TransferPreapproval, the other state', () => {
        const p = buildExpire(kind);
        const releaseId = nodeIdOf(p, isExerciseOf('LockedAmulet_OwnerExpireLock'));
        refused(
          graft(p, releaseId, extraAmulet(ALICE, 'second')),
          expireIntent(kind),
          'unexplained_create',
          '2 Amulets',
        );
        refused(
          graft(p, '0', preapprovalCreate()),
          expireIntent(kind),
          'unexplained_create',
          'TransferPreapproval',
        );
        refused(graft(p, '0', foreignCreate()), expireIntent(kind), 'unexplained_create', 'AnsEntry');
        const other = kind === 'payment' ? 'TerminatedSubscription' : 'SubscriptionIdleState';
        const stateNode = p.transaction.nodes.find((n) =>
          isCreateOf(kind === 'payment' ? 'SubscriptionIdleState' : 'TerminatedSubscription')(n.node),
        )!.node;
        refused(
          graft(p, '0', { ...stateNode, templateId: subs(other) } as NodeBody),
          expireIntent(kind),
          'unexplained_create',
          other,
        );
      });

      it('an undeclared holding archived', () => {
        refused(
          graft(buildExpire(kind), '0', strayArchive('stray')),
          expireIntent(kind),
          'unexplained_archive',
          existing('stray'),
        );
      });

      it('another actor, entry name, contract; the payment not disclosed', () => {
        refused(buildExpire(kind, { actor: MALLORY }), expireIntent(kind), 'party_mismatch', 'actor');
        refused(buildExpire(kind), expireIntent(kind, { name: 'bob.unverified.cns' }), 'memo_mismatch');
        refused(
          buildExpire(kind),
          expireIntent(kind, { contractId: existing('other') }),
          'contract_mismatch',
        );
        refused(
          buildExpire(kind, { undisclosed: true }),
          expireIntent(kind),
          'contract_mismatch',
          'not among',
        );
      });
    });
  }

  it('the idle state comes back with the due date paid', () => {
    refused(
      buildExpire('payment', { stateDue: DUE + 1n }),
      expireIntent('payment'),
      'deadline_mismatch',
      'nextPaymentDueAt',
    );
  });

  it('an expiry that releases no lock', () => {
    const p = buildExpire('payment');
    const gone = editFirst(
      p,
      isExerciseOf('LockedAmulet_OwnerExpireLock'),
      (n) => ({ ...n, choiceId: 'LockedAmulet_Unlock' }) as NodeBody,
    );
    refused(gone, expireIntent('payment'), 'unexplained_exercise', '0 times');
  });
});

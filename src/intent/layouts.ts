/**
 * Owns the pinned field order of every Daml record type the recogniser reads
 * fields from, and the check that a transaction's records carry exactly those
 * labels in that order.
 *
 * Why: Canton hashes record labels but drops them before execution (a Daml
 * record is positional), while the recogniser finds fields by label. A
 * participant could permute the labels of same-typed fields (sender and
 * receiver, owner and dso, amount and receiverFeeRatio): the hash still
 * matches, the ledger executes by position, and the recogniser would read the
 * other field. Pinning the declared order closes that gap.
 *
 * A record's type is where it sits when that place is pinned (a template's
 * create argument, a choice's argument, a field of a pinned record whose
 * type is pinned here; through Optional and lists), else its record id. A
 * record id naming another type than its place is refused too. Trailing
 * fields marked `?` are Optional: Canton omits trailing `None` fields, so a
 * record may stop early when every field it leaves out is one of them.
 *
 * The table is facts from the Daml sources (splice-amulet,
 * splice-token-standard, splice-amulet-name-service, splice-wallet-payments)
 * cross-checked against real prepared transactions; the registry types
 * (Utility.Registry.*) are taken from those transactions.
 */

import type { DecodedTransaction, Identifier, NodeBody, Value } from '../hashing/model.js';

/** A field: its label (`?`: Optional, may be omitted at the end), and the record type it holds when pinned. */
type Field = string | readonly [label: string, type: string];

const TS = 'Splice.Api.Token';
const TI = `${TS}.TransferInstructionV1`;
const AL = `${TS}.AllocationV1`;
const META = `${TS}.MetadataV1:Metadata`;
const EXTRA = `${TS}.MetadataV1:ExtraArgs`;
const INSTRUMENT = `${TS}.HoldingV1:InstrumentId`;
const SUB = 'Splice.Wallet.Subscriptions';
const REL = 'DA.Time.Types:RelTime';
const ROUND = 'Splice.Types:Round';
const TIMELOCK = 'Splice.Expiry:TimeLock';

/** `Module:Entity` → fields in declaration order. */
export const LAYOUTS: Readonly<Record<string, readonly Field[]>> = {
  // Token standard: metadata, instruments, transfers.
  [META]: ['values'],
  [EXTRA]: [
    ['context', `${TS}.MetadataV1:ChoiceContext`],
    ['meta', META],
  ],
  [`${TS}.MetadataV1:ChoiceContext`]: ['values'],
  [INSTRUMENT]: ['admin', 'id'],
  [`${TI}:Transfer`]: [
    'sender',
    'receiver',
    'amount',
    ['instrumentId', INSTRUMENT],
    'requestedAt',
    'executeBefore',
    'inputHoldingCids',
    ['meta', META],
  ],
  [`${TI}:TransferFactory_Transfer`]: ['expectedAdmin', ['transfer', `${TI}:Transfer`], ['extraArgs', EXTRA]],
  [`${TI}:TransferInstructionResult`]: ['output', 'senderChangeCids', ['meta', META]],
  [`${TI}:TransferInstruction_Accept`]: [['extraArgs', EXTRA]],
  [`${TI}:TransferInstruction_Reject`]: [['extraArgs', EXTRA]],
  [`${TI}:TransferInstruction_Withdraw`]: [['extraArgs', EXTRA]],

  // Token standard: allocations.
  [`${TS}.AllocationInstructionV1:AllocationFactory_Allocate`]: [
    'expectedAdmin',
    ['allocation', `${AL}:AllocationSpecification`],
    'requestedAt',
    'inputHoldingCids',
    ['extraArgs', EXTRA],
  ],
  [`${AL}:AllocationSpecification`]: [
    ['settlement', `${AL}:SettlementInfo`],
    'transferLegId',
    ['transferLeg', `${AL}:TransferLeg`],
  ],
  [`${AL}:SettlementInfo`]: [
    'executor',
    ['settlementRef', `${AL}:Reference`],
    'requestedAt',
    'allocateBefore',
    'settleBefore',
    ['meta', META],
  ],
  [`${AL}:TransferLeg`]: ['sender', 'receiver', 'amount', ['instrumentId', INSTRUMENT], ['meta', META]],
  [`${AL}:Reference`]: ['id', 'cid?'],
  [`${AL}:Allocation_Withdraw`]: [['extraArgs', EXTRA]],
  [`${AL}:Allocation_Cancel`]: [['extraArgs', EXTRA]],
  [`${TS}.AllocationRequestV1:AllocationRequest_Reject`]: ['actor', ['extraArgs', EXTRA]],

  // Canton Coin: holdings and their parts.
  'Splice.Amulet:Amulet': ['dso', 'owner', ['amount', 'Splice.Fees:ExpiringAmount']],
  'Splice.Amulet:LockedAmulet': [
    ['amulet', 'Splice.Amulet:Amulet'],
    ['lock', TIMELOCK],
  ],
  [TIMELOCK]: ['holders', 'expiresAt', 'optContext?'],
  'Splice.Fees:ExpiringAmount': [
    'initialAmount',
    ['createdAt', ROUND],
    ['ratePerRound', 'Splice.Fees:RatePerRound'],
  ],
  'Splice.Fees:RatePerRound': ['rate'],
  [ROUND]: ['number'],
  'Splice.Amulet:ValidatorRight': ['dso', 'user', 'validator'],
  'Splice.Amulet:AppRewardCoupon': [
    'dso',
    'provider',
    'featured',
    'amount',
    ['round', ROUND],
    'beneficiary?',
  ],
  'Splice.Amulet:ValidatorRewardCoupon': ['dso', 'user', 'amount', ['round', ROUND]],

  // Canton Coin: transfers, preapprovals, external-party rules.
  'Splice.AmuletRules:AmuletRules_Transfer': [
    ['transfer', 'Splice.AmuletRules:Transfer'],
    'context',
    'expectedDso?',
  ],
  'Splice.AmuletRules:Transfer': [
    'sender',
    'provider',
    'inputs',
    ['outputs', 'Splice.AmuletRules:TransferOutput'],
    'beneficiaries?',
  ],
  'Splice.AmuletRules:TransferOutput': [
    'receiver',
    'receiverFeeRatio',
    'amount',
    ['lock?', TIMELOCK],
    ['meta?', META],
  ],
  'Splice.AmuletRules:TransferPreapproval': [
    'dso',
    'receiver',
    'provider',
    'validFrom',
    'lastRenewedAt',
    'expiresAt',
  ],
  'Splice.AmuletRules:ExternalPartySetupProposal': [
    'validator',
    'user',
    'dso',
    'createdAt',
    'preapprovalExpiresAt',
  ],
  'Splice.ExternalPartyAmuletRules:ExternalPartyAmuletRules': ['dso'],
  'Splice.ExternalPartyAmuletRules:ExternalPartyAmuletRules_CreateTransferCommand': [
    'sender',
    'receiver',
    'delegate',
    'amount',
    'expiresAt',
    'nonce',
    'description?',
    'expectedDso?',
  ],
  'Splice.ExternalPartyAmuletRules:TransferCommand': [
    'dso',
    'sender',
    'receiver',
    'delegate',
    'amount',
    'expiresAt',
    'nonce',
    'description?',
  ],
  'Splice.AmuletTransferInstruction:AmuletTransferInstruction': [
    'lockedAmulet',
    ['transfer', `${TI}:Transfer`],
  ],
  'Splice.Wallet.TransferPreapproval:TransferPreapprovalProposal': ['receiver', 'provider', 'expectedDso?'],

  // Name service and subscriptions.
  'Splice.Ans:AnsRules': ['dso', 'config'],
  'Splice.Ans:AnsRules_RequestEntry': ['name', 'url', 'description', 'user'],
  'Splice.Ans:AnsEntryContext': ['dso', 'user', 'name', 'url', 'description', 'reference'],
  'Splice.Ans:AnsEntry': ['user', 'dso', 'name', 'url', 'description', 'expiresAt'],
  [`${SUB}:SubscriptionData`]: ['sender', 'receiver', 'provider', 'dso', 'description'],
  [`${SUB}:SubscriptionPayData`]: [
    ['paymentAmount', 'Splice.Wallet.Payment:PaymentAmount'],
    ['paymentInterval', REL],
    ['paymentDuration', REL],
  ],
  'Splice.Wallet.Payment:PaymentAmount': ['amount', 'unit'],
  [REL]: ['microseconds'],
  [`${SUB}:SubscriptionRequest`]: [
    ['subscriptionData', `${SUB}:SubscriptionData`],
    ['payData', `${SUB}:SubscriptionPayData`],
  ],
  [`${SUB}:SubscriptionInitialPayment`]: [
    ['subscriptionData', `${SUB}:SubscriptionData`],
    ['payData', `${SUB}:SubscriptionPayData`],
    'targetAmount',
    'lockedAmulet',
    ['round', ROUND],
    'reference',
  ],
  [`${SUB}:SubscriptionIdleState`]: [
    'subscription',
    ['subscriptionData', `${SUB}:SubscriptionData`],
    ['payData', `${SUB}:SubscriptionPayData`],
    'nextPaymentDueAt',
    'reference',
  ],
  [`${SUB}:SubscriptionPayment`]: [
    'subscription',
    ['subscriptionData', `${SUB}:SubscriptionData`],
    ['payData', `${SUB}:SubscriptionPayData`],
    'thisPaymentDueAt',
    'targetAmount',
    'lockedAmulet',
    ['round', ROUND],
    'reference',
  ],
  [`${SUB}:TerminatedSubscription`]: [['subscriptionData', `${SUB}:SubscriptionData`], 'reference'],
  [`${SUB}:Subscription`]: [['subscriptionData', `${SUB}:SubscriptionData`], 'reference'],
  [`${SUB}:SubscriptionRequest_AcceptAndMakePayment`]: ['inputs', 'context', 'walletProvider'],
  [`${SUB}:SubscriptionIdleState_MakePayment`]: ['inputs', 'context', 'walletProvider'],
  [`${SUB}:SubscriptionInitialPayment_Expire`]: ['actor', 'transferContext'],
  [`${SUB}:SubscriptionPayment_Expire`]: ['actor', 'transferContext'],

  // The token registry's holdings and transfers (from real prepared transactions).
  'Utility.Registry.Holding.V0.Holding:Holding': [
    'operator',
    'provider',
    'registrar',
    'owner',
    ['instrument', 'Utility.Registry.Holding.V0.Types:InstrumentIdentifier'],
    'label',
    'amount',
    'lock?',
  ],
  'Utility.Registry.Holding.V0.Types:InstrumentIdentifier': ['source', 'id', 'scheme'],
  'Utility.Registry.App.V0.Model.Transfer:TransferOffer': [
    'operator',
    'provider',
    ['transfer', `${TI}:Transfer`],
  ],
  'Splice.AmuletAllocation:AmuletAllocation': [
    'lockedAmulet',
    ['allocation', `${AL}:AllocationSpecification`],
  ],
  'Utility.Registry.V0.Holding.Allocation:DvpLegAllocation': [
    ['allocation', `${AL}:AllocationSpecification`],
    'lockedHoldingCid',
    'operator',
    'provider',
  ],
};

interface Layout {
  labels: string[];
  /** Index of the first field from which every later field is Optional (may be omitted). */
  optionalFrom: number;
  nested: (string | undefined)[];
}

const PARSED: ReadonlyMap<string, Layout> = new Map(
  Object.entries(LAYOUTS).map(([type, fields]) => {
    const labels: string[] = [];
    const nested: (string | undefined)[] = [];
    let optionalFrom = fields.length;
    fields.forEach((f, i) => {
      const [raw, inner] = typeof f === 'string' ? [f, undefined] : f;
      const optional = raw.endsWith('?');
      labels.push(optional ? raw.slice(0, -1) : raw);
      nested.push(inner);
      if (!optional) optionalFrom = fields.length;
      else if (optionalFrom === fields.length) optionalFrom = i;
    });
    return [type, { labels, optionalFrom, nested }];
  }),
);

export interface LayoutProblem {
  /** Node id and field path, e.g. `node 0: transfer`. */
  where: string;
  message: string;
}

const typeName = (id: Identifier): string => `${id.moduleName}:${id.entityName}`;

/**
 * Every record in the transaction's nodes and disclosed input contracts whose
 * type is pinned, checked against its layout; one problem per record.
 */
export function checkLayouts(tx: DecodedTransaction): LayoutProblem[] {
  const out: LayoutProblem[] = [];
  for (const [id, n] of tx.nodeById) checkNode(n, `node ${id}`, out);
  for (const ic of tx.metadata.inputContracts)
    checkNode(ic.contract, `input contract ${ic.contract.contractId}`, out);
  return out;
}

function checkNode(n: NodeBody, where: string, out: LayoutProblem[]): void {
  if (n.type === 'create')
    walk(n.argument, typeName(n.templateId), `${where}: create argument of ${typeName(n.templateId)}`, out);
  else if (n.type === 'exercise') {
    const choiceType = `${(n.interfaceId ?? n.templateId).moduleName}:${n.choiceId}`;
    walk(n.chosenValue, choiceType, `${where}: argument of ${n.choiceId}`, out);
    if (n.exerciseResult) walk(n.exerciseResult, undefined, `${where}: result of ${n.choiceId}`, out);
  }
}

/** Iterative walk: `expected` is the type the place pins (when it does). */
function walk(root: Value, rootType: string | undefined, rootWhere: string, out: LayoutProblem[]): void {
  const stack: { v: Value; expected: string | undefined; where: string }[] = [
    { v: root, expected: rootType, where: rootWhere },
  ];
  while (stack.length > 0) {
    const { v, expected, where } = stack.pop()!;
    switch (v.kind) {
      case 'optional':
        if (v.value) stack.push({ v: v.value, expected, where });
        continue;
      case 'list':
        for (const e of v.elements) stack.push({ v: e, expected, where });
        continue;
      case 'textMap':
        for (const e of v.entries) stack.push({ v: e.value, expected: undefined, where });
        continue;
      case 'genMap':
        for (const e of v.entries) {
          stack.push({ v: e.key, expected: undefined, where });
          stack.push({ v: e.value, expected: undefined, where });
        }
        continue;
      case 'variant':
        stack.push({ v: v.value, expected: undefined, where: `${where}.${v.constructor}` });
        continue;
      case 'record':
        break;
      default:
        continue;
    }
    const pinnedHere = expected !== undefined && PARSED.has(expected) ? expected : undefined;
    const named = v.recordId ? typeName(v.recordId) : undefined;
    if (pinnedHere !== undefined && named !== undefined && named !== pinnedHere) {
      out.push({
        where,
        message: `the record at ${where} is typed ${named}, but that place holds a ${pinnedHere}; a record's type id must name its Daml type.`,
      });
      continue;
    }
    const type = pinnedHere ?? named;
    const layout = type === undefined ? undefined : PARSED.get(type);
    if (type !== undefined && layout !== undefined) {
      const problem = compare(
        v.fields.map((f) => f.label),
        layout,
      );
      if (problem !== undefined) {
        out.push({ where, message: `the ${type} at ${where} ${problem}` });
        continue;
      }
    }
    v.fields.forEach((f, i) => {
      stack.push({ v: f.value, expected: layout?.nested[i], where: `${where}.${f.label}` });
    });
  }
}

/** Why `labels` are not the layout's (in order, trailing Optional fields omitted at most); `undefined` if they are. */
function compare(labels: readonly string[], layout: Layout): string | undefined {
  const want = layout.labels;
  const declared = `Daml declares ${want.join(', ')}`;
  const wrong: string[] = [];
  for (let i = 0; i < Math.min(labels.length, want.length); i++)
    if (labels[i] !== want[i]) wrong.push(`position ${i} is labelled ${labels[i]} where Daml has ${want[i]}`);
  if (wrong.length > 0)
    return `has its fields labelled ${labels.join(', ')} but ${declared}: ${wrong.join('; ')}. Canton executes fields by position, so the labels would name the wrong fields.`;
  if (labels.length > want.length)
    return `has ${labels.length - want.length} extra field(s) after position ${want.length - 1} (${labels.slice(want.length).join(', ')}); ${declared}.`;
  if (labels.length < layout.optionalFrom)
    return `stops after ${labels.length} field(s), missing ${want.slice(labels.length, layout.optionalFrom).join(', ')} (positions ${labels.length}–${layout.optionalFrom - 1}), which are not Optional; ${declared}.`;
  return undefined;
}

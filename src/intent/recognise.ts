/**
 * The recogniser: what each root action of a decoded transaction does, read
 * by choice name, template entity and package name (never by package id,
 * which differs between networks: the templates each kind may act on are
 * pinned in ./allow.ts) and by the argument's record labels. Token-standard and
 * Splice actions get a specific kind with their parties, amount, instrument,
 * deadlines, memo and inputs; the name service's request, payments and
 * expiries also their entry name (read from the subscription description the
 * DSO's AnsRules write, `prefix "name"`); any other create or exercise root is listed as a
 * generic `create` / `exercise` — as is a known choice on a template of
 * another package. Fetch, rollback and query-by-key roots are not
 * actions and are not listed. Used by the intent check and by `inspect`.
 */

import type { CreateNode, DecodedTransaction, ExerciseNode, Identifier, Value } from '../hashing/model.js';
import { templateName } from '../hashing/render.js';
import { PKG, ROOT_TEMPLATES, templateKey } from './allow.js';
import type { ActionKind, InstrumentId, RecognisedAction } from './model.js';
import { descendants, inputContractsById } from './tree.js';
import {
  at,
  contractIdAt,
  contractIdsAt,
  instrumentAt,
  int64At,
  numericAt,
  partyAt,
  textAt,
  textEntry,
  timeAt,
  variantTag,
} from './values.js';

/** Metadata key of a token-standard transfer's free-text reason. */
export const REASON_KEY = 'splice.lfdecentralizedtrust.org/reason';

const INSTRUCTION_CHOICES: Record<string, ActionKind> = {
  TransferInstruction_Accept: 'transfer-instruction-accept',
  TransferInstruction_Reject: 'transfer-instruction-reject',
  TransferInstruction_Withdraw: 'transfer-instruction-withdraw',
};

const ALLOCATION_CHOICES: Record<string, ActionKind> = {
  Allocation_Withdraw: 'allocation-withdraw',
  Allocation_Cancel: 'allocation-cancel',
  AllocationRequest_Reject: 'allocation-request-reject',
  AllocationRequest_Withdraw: 'allocation-request-withdraw',
};

/** Name-service choices: the kind and the one template entity each is a choice of. */
const ANS_CHOICES: Record<string, { kind: ActionKind; entity: string }> = {
  AnsRules_RequestEntry: { kind: 'ans-entry-request', entity: 'AnsRules' },
  SubscriptionRequest_AcceptAndMakePayment: { kind: 'ans-entry-pay', entity: 'SubscriptionRequest' },
  SubscriptionIdleState_MakePayment: { kind: 'ans-renewal-pay', entity: 'SubscriptionIdleState' },
  SubscriptionPayment_Expire: { kind: 'ans-payment-expire', entity: 'SubscriptionPayment' },
  SubscriptionInitialPayment_Expire: { kind: 'ans-payment-expire', entity: 'SubscriptionInitialPayment' },
};

type Inputs = ReturnType<typeof inputContractsById>;

/** One entry per create or exercise root, in root order. */
export function recogniseActions(tx: DecodedTransaction): RecognisedAction[] {
  const inputs = inputContractsById(tx);
  const out: RecognisedAction[] = [];
  for (const id of tx.transaction.roots) {
    const a = recogniseNode(tx, id, inputs);
    if (a) out.push(a);
  }
  return out;
}

/** The action node `nodeId` is, or `undefined` for fetch, rollback and query-by-key nodes. */
export function recogniseNode(
  tx: DecodedTransaction,
  nodeId: string,
  inputs: Inputs = inputContractsById(tx),
): RecognisedAction | undefined {
  const n = tx.nodeById.get(nodeId);
  if (n?.type === 'create') return recogniseCreate(nodeId, n);
  if (n?.type !== 'exercise') return undefined;
  const a = recogniseExercise(tx, nodeId, n, inputs);
  return pinned(a.kind, n) ? a : base('exercise', nodeId, n);
}

/** Whether a specific kind's root is on one of the templates that kind may act on. */
function pinned(kind: ActionKind, n: CreateNode | ExerciseNode): boolean {
  return ROOT_TEMPLATES[kind]?.has(templateKey(n)) ?? true;
}

function recogniseExercise(
  tx: DecodedTransaction,
  nodeId: string,
  n: ExerciseNode,
  inputs: Inputs,
): RecognisedAction {
  const choice = n.choiceId;
  if (choice === 'TransferFactory_Transfer') return transfer(tx, nodeId, n);
  const instructionKind = INSTRUCTION_CHOICES[choice];
  if (instructionKind) return instruction(nodeId, n, instructionKind, inputs);
  if (choice === 'ExternalPartyAmuletRules_CreateTransferCommand') return preapprovalSend(nodeId, n);
  if (choice === 'ExternalPartySetupProposal_Accept') return setupAccept(tx, nodeId, n, inputs);
  if (choice === 'AllocationFactory_Allocate') return allocate(nodeId, n);
  const allocationKind = ALLOCATION_CHOICES[choice];
  if (allocationKind) return allocation(nodeId, n, allocationKind, inputs);
  const ans = ANS_CHOICES[choice];
  if (ans && n.templateId.entityName === ans.entity) {
    if (ans.kind === 'ans-entry-request') return ansRequest(nodeId, n, inputs);
    if (ans.kind === 'ans-payment-expire') return ansExpire(tx, nodeId, n, inputs);
    return ansPayment(tx, nodeId, n, ans.kind, inputs);
  }
  return base('exercise', nodeId, n);
}

// ---- helpers -------------------------------------------------------------------------------------

function qualified(id: Identifier): string {
  return `${id.packageId}:${id.moduleName}:${id.entityName}`;
}

/** Drops `undefined` entries so absent fields stay absent in the JSON. */
function defined(o: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

function base(kind: ActionKind, nodeId: string, n: ExerciseNode): RecognisedAction {
  return {
    kind,
    nodeId,
    template: templateName(n.packageName, n.templateId),
    ...(n.interfaceId ? { interface: qualified(n.interfaceId) } : {}),
    choice: n.choiceId,
    contractId: n.contractId,
    actingParties: [...n.actingParties],
    parties: {},
    amounts: {},
    deadlines: {},
  };
}

/** Optional fields, set only when present. */
function extras(x: {
  instrument?: InstrumentId | undefined;
  memo?: string | undefined;
  inputs?: string[] | undefined;
  nonce?: string | undefined;
}): Partial<RecognisedAction> {
  const out: Partial<RecognisedAction> = {};
  if (x.instrument) out.instrument = x.instrument;
  if (x.memo !== undefined) out.memo = x.memo;
  if (x.inputs) out.inputs = x.inputs;
  if (x.nonce !== undefined) out.nonce = x.nonce;
  return out;
}

/** The fields of a token-standard `Transfer` record at `path` (a factory argument or an instruction). */
function transferFields(v: Value | undefined, path: string): Partial<RecognisedAction> {
  return {
    parties: defined({ sender: partyAt(v, `${path}.sender`), receiver: partyAt(v, `${path}.receiver`) }),
    amounts: defined({ amount: numericAt(v, `${path}.amount`) }),
    deadlines: defined({
      requestedAt: timeAt(v, `${path}.requestedAt`),
      executeBefore: timeAt(v, `${path}.executeBefore`),
    }),
    ...extras({
      instrument: instrumentAt(v, `${path}.instrumentId`),
      memo: textEntry(v, `${path}.meta.values`, REASON_KEY),
      inputs: contractIdsAt(v, `${path}.inputHoldingCids`),
    }),
  };
}

// ---- creates ---------------------------------------------------------------------------------------

function recogniseCreate(nodeId: string, n: CreateNode): RecognisedAction {
  const common = {
    nodeId,
    template: templateName(n.packageName, n.templateId),
    contractId: n.contractId,
    actingParties: [] as string[],
    signatories: [...n.signatories],
    amounts: {},
    deadlines: {},
  };
  if (n.templateId.entityName === 'TransferPreapprovalProposal' && pinned('preapproval-proposal', n))
    return {
      kind: 'preapproval-proposal',
      ...common,
      parties: defined({
        receiver: partyAt(n.argument, 'receiver'),
        provider: partyAt(n.argument, 'provider'),
        expectedDso: partyAt(n.argument, 'expectedDso'),
      }),
    };
  return { kind: 'create', ...common, parties: {} };
}

// ---- transfers ---------------------------------------------------------------------------------------

function transfer(tx: DecodedTransaction, nodeId: string, n: ExerciseNode): RecognisedAction {
  const a: RecognisedAction = {
    ...base('transfer', nodeId, n),
    ...transferFields(n.chosenValue, 'transfer'),
  };
  a.transferKind = transferKind(tx, nodeId, n, a.parties);
  return a;
}

/**
 * `self` when sender and receiver are the same party; `offer` when the
 * transfer creates a transfer instruction (an `…TransferInstruction` or
 * registry `TransferOffer` contract) or reports a pending instruction;
 * `direct` otherwise (the receiver's holdings are created at once, e.g.
 * through TransferPreapproval_Send, and the result is `…_Completed`).
 */
function transferKind(
  tx: DecodedTransaction,
  nodeId: string,
  n: ExerciseNode,
  parties: Record<string, string>,
): 'direct' | 'offer' | 'self' {
  if (parties.sender !== undefined && parties.sender === parties.receiver) return 'self';
  for (const d of descendants(tx, nodeId)) {
    if (d.rolledBack || d.node.type !== 'create') continue;
    const e = d.node.templateId.entityName;
    if (e.endsWith('TransferInstruction') || e === 'TransferOffer') return 'offer';
  }
  if (variantTag(n.exerciseResult, 'output') === 'TransferInstructionResult_Pending') return 'offer';
  return 'direct';
}

function instruction(nodeId: string, n: ExerciseNode, kind: ActionKind, inputs: Inputs): RecognisedAction {
  const contract = inputs.get(n.contractId);
  const fields = contract ? transferFields(contract.argument, 'transfer') : {};
  return { ...base(kind, nodeId, n), ...fields };
}

function preapprovalSend(nodeId: string, n: ExerciseNode): RecognisedAction {
  const v = n.chosenValue;
  const dso = partyAt(v, 'expectedDso');
  const nonce = int64At(v, 'nonce');
  return {
    ...base('preapproval-send', nodeId, n),
    parties: defined({
      sender: partyAt(v, 'sender'),
      receiver: partyAt(v, 'receiver'),
      delegate: partyAt(v, 'delegate'),
    }),
    amounts: defined({ amount: numericAt(v, 'amount') }),
    deadlines: defined({ expiresAt: timeAt(v, 'expiresAt') }),
    ...extras({
      instrument: dso === undefined ? undefined : { admin: dso, id: 'Amulet' },
      memo: textAt(v, 'description'),
      nonce: nonce === undefined ? undefined : nonce.toString(),
    }),
  };
}

/**
 * The user and validator come from the proposal (an input contract), else
 * from the TransferPreapproval the acceptance creates; `expiresAt` is the
 * preapproval's expiry.
 */
function setupAccept(
  tx: DecodedTransaction,
  nodeId: string,
  n: ExerciseNode,
  inputs: Inputs,
): RecognisedAction {
  const proposal = inputs.get(n.contractId)?.argument;
  let preapproval: Value | undefined;
  for (const d of descendants(tx, nodeId))
    if (!d.rolledBack && d.node.type === 'create' && d.node.templateId.entityName === 'TransferPreapproval') {
      preapproval = d.node.argument;
      break;
    }
  const expiresAt = timeAt(preapproval, 'expiresAt') ?? timeAt(proposal, 'preapprovalExpiresAt');
  return {
    ...base('setup-proposal-accept', nodeId, n),
    parties: defined({
      user: partyAt(proposal, 'user') ?? partyAt(preapproval, 'receiver'),
      validator: partyAt(proposal, 'validator') ?? partyAt(preapproval, 'provider'),
    }),
    deadlines: defined({ expiresAt }),
  };
}

// ---- allocations ---------------------------------------------------------------------------------------

/** The fields of a token-standard `AllocationSpecification` at `path`. */
function allocationFields(v: Value | undefined, path: string): Partial<RecognisedAction> {
  const leg = `${path}.transferLeg`;
  const settlement = `${path}.settlement`;
  return {
    parties: defined({
      sender: partyAt(v, `${leg}.sender`),
      receiver: partyAt(v, `${leg}.receiver`),
      executor: partyAt(v, `${settlement}.executor`),
    }),
    amounts: defined({ amount: numericAt(v, `${leg}.amount`) }),
    deadlines: defined({
      requestedAt: timeAt(v, `${settlement}.requestedAt`),
      allocateBefore: timeAt(v, `${settlement}.allocateBefore`),
      settleBefore: timeAt(v, `${settlement}.settleBefore`),
    }),
    ...extras({
      instrument: instrumentAt(v, `${leg}.instrumentId`),
      memo:
        textEntry(v, `${leg}.meta.values`, REASON_KEY) ??
        textEntry(v, `${settlement}.meta.values`, REASON_KEY),
    }),
  };
}

function allocate(nodeId: string, n: ExerciseNode): RecognisedAction {
  const v = n.chosenValue;
  const a: RecognisedAction = {
    ...base('allocation-allocate', nodeId, n),
    ...allocationFields(v, 'allocation'),
  };
  const inputs = contractIdsAt(v, 'inputHoldingCids');
  if (inputs) a.inputs = inputs;
  return a;
}

/**
 * Allocation_Withdraw / _Cancel read the allocation (an input contract):
 * its `allocation` specification and, for registry allocations, the
 * `lockedHoldingCid` it releases (listed as the action's input).
 * AllocationRequest_Reject / _Withdraw name only the `actor`.
 */
function allocation(nodeId: string, n: ExerciseNode, kind: ActionKind, inputs: Inputs): RecognisedAction {
  const a = base(kind, nodeId, n);
  if (kind === 'allocation-request-reject' || kind === 'allocation-request-withdraw') {
    a.parties = defined({ actor: partyAt(n.chosenValue, 'actor') });
    return a;
  }
  const contract = inputs.get(n.contractId)?.argument;
  if (!contract || at(contract, 'allocation') === undefined) return a;
  Object.assign(a, allocationFields(contract, 'allocation'));
  const locked = contractIdAt(contract, 'lockedHoldingCid');
  if (locked) a.inputs = [locked];
  return a;
}

// ---- name service ---------------------------------------------------------------------------------------

/**
 * Daml's `show` of a Text, as AnsRules_RequestEntry puts the name into the
 * subscription's description: in double quotes, `"` and `\` escaped with a
 * backslash (entry names are `[a-z0-9_-.]`, so the escapes rarely apply).
 */
export function showText(s: string): string {
  return `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** The subscription description AnsRules_RequestEntry writes for `name` under the DSO's prefix. */
export function ansDescription(prefix: string, name: string): string {
  return `${prefix}${showText(name)}`;
}

/**
 * The entry name a subscription description carries: its last double-quoted
 * string (`CNS entry: "alice.unverified.cns"` → `alice.unverified.cns`), which
 * must close the description; `undefined` when there is none.
 */
export function nameFromDescription(description: string | undefined): string | undefined {
  const d = description;
  if (d === undefined || !d.endsWith('"') || escapedAt(d, d.length - 1)) return undefined;
  // Backwards to the opening quote: the first one not escaped (linear: each backslash run is counted once).
  for (let i = d.length - 2; i >= 0; i--)
    if (d[i] === '"' && !escapedAt(d, i)) return d.slice(i + 1, -1).replace(/\\(.)/gs, '$1');
  return undefined;
}

/** Whether the character at `i` follows an odd number of backslashes. */
function escapedAt(s: string, i: number): boolean {
  let k = 0;
  while (i - 1 - k >= 0 && s[i - 1 - k] === '\\') k++;
  return k % 2 === 1;
}

/** A `TransferInput` of a payment choice: its constructor and, when it carries one, its contract id. */
export interface PaymentInput {
  tag: string;
  contractId: string | undefined;
}

/** The `inputs : [TransferInput]` at `path`; `undefined` when it is not a list of variants. */
export function transferInputsAt(v: Value | undefined, path: string): PaymentInput[] | undefined {
  const x = at(v, path);
  if (x?.kind !== 'list') return undefined;
  const out: PaymentInput[] = [];
  for (const e of x.elements) {
    if (e.kind !== 'variant') return undefined;
    out.push({ tag: e.constructor, contractId: e.value.kind === 'contractId' ? e.value.value : undefined });
  }
  return out;
}

/** The first create below `nodeId` (not rolled back) of `package-name:Entity` `key`. */
export function firstCreated(tx: DecodedTransaction, nodeId: string, key: string): CreateNode | undefined {
  for (const d of descendants(tx, nodeId))
    if (!d.rolledBack && d.node.type === 'create' && templateKey(d.node) === key) return d.node;
  return undefined;
}

const WALLET_PAYMENTS = (entity: string) => `${PKG.walletPayments}:${entity}`;

/** The DSO's AnsRules (an input contract) names the DSO; the choice argument names the user and the entry. */
function ansRequest(nodeId: string, n: ExerciseNode, inputs: Inputs): RecognisedAction {
  const v = n.chosenValue;
  const rules = inputs.get(n.contractId)?.argument;
  const a: RecognisedAction = {
    ...base('ans-entry-request', nodeId, n),
    parties: defined({ user: partyAt(v, 'user'), dso: partyAt(rules, 'dso') }),
  };
  const name = textAt(v, 'name');
  if (name !== undefined) a.name = name;
  return a;
}

/**
 * A first payment or a renewal: the subscription (sender, receiver, DSO,
 * description) and the target amount are read from the payment contract the
 * choice creates (else the subscription comes from the request or idle state
 * exercised, when disclosed); the amount is what the LockedAmulet the payment
 * names locks — the Canton Coin leaving the party. Inputs are the Amulets the
 * choice spends (other kinds of transfer input are not listed).
 */
function ansPayment(
  tx: DecodedTransaction,
  nodeId: string,
  n: ExerciseNode,
  kind: ActionKind,
  inputs: Inputs,
): RecognisedAction {
  const v = n.chosenValue;
  const renewal = kind === 'ans-renewal-pay';
  const payment = firstCreated(
    tx,
    nodeId,
    WALLET_PAYMENTS(renewal ? 'SubscriptionPayment' : 'SubscriptionInitialPayment'),
  )?.argument;
  const state = inputs.get(n.contractId)?.argument;
  const data = at(payment, 'subscriptionData') ?? at(state, 'subscriptionData');
  const lockedCid = contractIdAt(payment, 'lockedAmulet');
  let locked: Value | undefined;
  for (const d of descendants(tx, nodeId))
    if (
      !d.rolledBack &&
      d.node.type === 'create' &&
      d.node.templateId.entityName === 'LockedAmulet' &&
      (lockedCid === undefined || d.node.contractId === lockedCid)
    ) {
      locked = d.node.argument;
      break;
    }
  const dso = partyAt(data, 'dso');
  const a: RecognisedAction = {
    ...base(kind, nodeId, n),
    parties: defined({
      sender: partyAt(data, 'sender'),
      receiver: partyAt(data, 'receiver'),
      walletProvider: partyAt(v, 'walletProvider'),
    }),
    amounts: defined({
      amount: numericAt(locked, 'amulet.amount.initialAmount'),
      targetAmount: numericAt(payment, 'targetAmount'),
    }),
    deadlines: renewal
      ? defined({ dueAt: timeAt(payment, 'thisPaymentDueAt') ?? timeAt(state, 'nextPaymentDueAt') })
      : {},
    ...extras({ instrument: dso === undefined ? undefined : { admin: dso, id: 'Amulet' } }),
  };
  const paid = transferInputsAt(v, 'inputs');
  if (paid) a.inputs = paid.filter((i) => i.tag === 'InputAmulet' && i.contractId).map((i) => i.contractId!);
  const name = nameFromDescription(textAt(data, 'description'));
  if (name !== undefined) a.name = name;
  return a;
}

/**
 * Taking back an uncollected payment: the payment (an input contract) names
 * the subscription and the LockedAmulet released, listed as the action's
 * input; without it the subscription is read from the idle state or
 * terminated subscription the choice creates.
 */
function ansExpire(
  tx: DecodedTransaction,
  nodeId: string,
  n: ExerciseNode,
  inputs: Inputs,
): RecognisedAction {
  const payment = inputs.get(n.contractId)?.argument;
  const made =
    firstCreated(tx, nodeId, WALLET_PAYMENTS('SubscriptionIdleState')) ??
    firstCreated(tx, nodeId, WALLET_PAYMENTS('TerminatedSubscription'));
  const data = at(payment, 'subscriptionData') ?? at(made?.argument, 'subscriptionData');
  const a: RecognisedAction = {
    ...base('ans-payment-expire', nodeId, n),
    parties: defined({ actor: partyAt(n.chosenValue, 'actor'), dso: partyAt(data, 'dso') }),
  };
  const locked = contractIdAt(payment, 'lockedAmulet');
  if (locked) a.inputs = [locked];
  const name = nameFromDescription(textAt(data, 'description'));
  if (name !== undefined) a.name = name;
  return a;
}

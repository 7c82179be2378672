/**
 * The sandbox's customers: parties outside any signer's book, hosted here as
 * local parties (`<name>::<participant namespace>`), that send deposits to a
 * party, answer the offers a party sends them, and — as a test-only switch —
 * the sandbox moving a party's holdings without its signature. Every
 * transaction is the one a real wallet's command produces: a
 * TransferFactory_Transfer (direct through the receiver's TransferPreapproval,
 * or a two-step TransferInstruction) or a TransferInstruction_Accept/_Reject,
 * interpreted by the participant's own interpreter and committed through the
 * classic submission path. Customers are funded from the tap once when first
 * used and topped up whenever a deposit needs more than they hold.
 */
import { randomUUID } from 'node:crypto';
import { addAmounts, gte, type HoldingView, holdingView, transferPreapprovalContract } from './amulet.js';
import { SandboxError } from './errors.js';
import { isoMicros } from './ledger/clock.js';
import type { Contract, Update } from './ledger/store.js';
import { str } from './ledger/value-json.js';
import { type SandboxNetwork, VALIDATOR_USER } from './network.js';
import { interpret, localInstructionAnswer, transferOf } from './participant/interpret.js';
import { submitLocal } from './submission.js';
import { preapprovalOf } from './validator/routes.js';

/** What a customer gets from the tap when first used, and on top of a deposit it cannot cover. */
export const CUSTOMER_FUNDS = '1000000';
export const DEFAULT_CUSTOMER = 'customer';
/** The default receiver of `transferOut`: a customer with a TransferPreapproval, so the move is one step. */
export const INTRUDER = 'intruder';
/** Two-step offers a customer makes can be accepted for this long unless the request says otherwise. */
export const OFFER_LIFETIME_US = 86_400_000_000n;

export type TransferMode = 'one-step' | 'two-step' | 'auto';

export interface CustomerDeposit {
  /** Receiver: a party id, or the hint of exactly one party hosted here (`alice`). */
  to: string;
  amount: string;
  memo?: string | undefined;
  mode?: TransferMode | undefined;
  /** Customer name (default `customer`). */
  customer?: string | undefined;
  /** Deadline of a two-step offer, µs (default a day from now). */
  executeBefore?: bigint | undefined;
}

export interface TransferOutcome {
  updateId: string;
  offset: number;
  mode: 'one-step' | 'two-step';
  sender: string;
  receiver: string;
  amount: string;
  memo?: string;
  /** The TransferInstruction (offer) a two-step transfer created. */
  instructionCid?: string;
}

export interface DepositOutcome extends TransferOutcome {
  customer: string;
}

const fail = (status: number, error: string) => new SandboxError(status, { error });

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** The participant's namespace, which local parties (and so customers) live in. */
const namespaceOf = (net: SandboxNetwork) => net.participantId.slice(net.participantId.indexOf('::') + 2);

/** The party id of customer `name` (allocated or not). */
export function customerParty(net: SandboxNetwork, name: string): string {
  return `${name}::${namespaceOf(net)}`;
}

/**
 * Customer `name`'s party, allocated as a local party and funded from the tap
 * on first use; with `preapproval`, it also holds a TransferPreapproval from
 * the validator (so transfers to it are one step).
 */
export function ensureCustomer(
  net: SandboxNetwork,
  name: string,
  opts: { preapproval?: boolean } = {},
): { party: string; created: boolean } {
  if (!NAME.test(name))
    throw fail(
      400,
      `customer: ${JSON.stringify(name)} is not a customer name (1-64 letters, digits, - and _)`,
    );
  const party = customerParty(net, name);
  if (party === net.validatorParty || party === net.mallory || party === net.dso)
    throw fail(400, `customer: ${name} is a built-in party of the sandbox; choose another name`);
  const created = !net.localParties.has(party);
  if (created) {
    net.localParties.add(party);
    net.tap(party, CUSTOMER_FUNDS);
  }
  if (opts.preapproval && !preapprovalOf(net, party))
    net.commitInternal({
      archives: [],
      creates: [transferPreapprovalContract(net.dso, party, net.validatorParty, net.clock.now())],
      commandId: `sandbox-customer-preapproval-${randomUUID()}`,
    });
  return { party, created };
}

/** A party id known to the sandbox, or the id of the one hosted party whose hint is `ref`. */
export function resolveParty(net: SandboxNetwork, ref: string, field: string): string {
  const known = (p: string) => net.parties.has(p) || net.localParties.has(p);
  if (ref.includes('::')) {
    if (!known(ref)) throw fail(404, `${field}: party ${ref} is not hosted on the sandbox`);
    return ref;
  }
  const matches = [...net.parties.keys(), ...net.localParties].filter((p) => p.startsWith(`${ref}::`));
  if (matches.length === 1) return matches[0]!;
  if (matches.length === 0)
    throw fail(404, `${field}: no party with the hint ${ref} is hosted on the sandbox; give a party id`);
  throw fail(
    400,
    `${field}: the hint ${ref} names ${matches.length} parties (${matches.join(', ')}); give the party id`,
  );
}

/** `owner`'s unlocked Amulet holdings valued as of the latest round (through the store's party index). */
function unlockedOf(net: SandboxNetwork, owner: string): HoldingView[] {
  const round = net.latestRound().number;
  return net.store
    .activeAt(net.store.ledgerEnd(), owner)
    .flatMap((c) => (c.templateId.entityName === 'Amulet' ? [holdingView(c, round)] : []))
    .filter((h): h is HoldingView => h !== undefined && h.owner === owner && !h.locked);
}

/** Unlocked Amulet holdings of `owner` covering `amount` (largest first), or undefined. */
function pickInputs(net: SandboxNetwork, owner: string, amount: string): Contract[] | undefined {
  const hs = unlockedOf(net, owner).sort((a, b) =>
    gte(a.amount, b.amount) ? (gte(b.amount, a.amount) ? 0 : -1) : 1,
  );
  const picked: Contract[] = [];
  let total = '0';
  for (const h of hs) {
    if (gte(total, amount) && picked.length > 0) break;
    picked.push(h.contract);
    total = addAmounts(total, h.amount);
  }
  return picked.length > 0 && gte(total, amount) ? picked : undefined;
}

/**
 * Commits `sender`'s TransferFactory_Transfer to `receiver` as the command a
 * wallet submits: the factory, rules and round (and, one-step, the
 * receiver's preapproval) disclosed; the participant's interpreter builds it.
 */
function factoryTransfer(
  net: SandboxNetwork,
  x: {
    sender: string;
    receiver: string;
    amount: string;
    memo: string | undefined;
    mode: TransferMode;
    inputs: Contract[];
    executeBefore: bigint;
    kind: string;
  },
): TransferOutcome {
  const pre = preapprovalOf(net, x.receiver);
  if (x.mode === 'one-step' && !pre)
    throw fail(
      409,
      `mode: the receiver ${x.receiver} has no TransferPreapproval, so a one-step transfer to it is not possible; send it two-step (mode two-step or auto)`,
    );
  const oneStep = pre !== undefined && x.mode !== 'two-step';
  const rules = net.externalPartyAmuletRules();
  const amuletRules = net.amuletRules();
  const round = net.latestRound();
  const now = net.clock.now();
  const context: Record<string, { tag: string; value: string }> = {
    'amulet-rules': { tag: 'AV_ContractId', value: amuletRules.contractId },
    'open-round': { tag: 'AV_ContractId', value: round.contractId },
  };
  if (oneStep) context['transfer-preapproval'] = { tag: 'AV_ContractId', value: pre.contractId };
  const command = {
    ExerciseCommand: {
      templateId: '#splice-amulet:Splice.ExternalPartyAmuletRules:ExternalPartyAmuletRules',
      contractId: rules.contractId,
      choice: 'TransferFactory_Transfer',
      choiceArgument: {
        expectedAdmin: net.dso,
        transfer: {
          sender: x.sender,
          receiver: x.receiver,
          amount: x.amount,
          instrumentId: { admin: net.dso, id: 'Amulet' },
          requestedAt: isoMicros(now),
          executeBefore: isoMicros(x.executeBefore),
          inputHoldingCids: x.inputs.map((c) => c.contractId),
          meta: { values: x.memo === undefined ? {} : { 'splice.lfdecentralizedtrust.org/reason': x.memo } },
        },
        extraArgs: { context: { values: context }, meta: { values: {} } },
      },
    },
  };
  const disclosed = [rules, amuletRules, round.contract, ...(oneStep ? [pre] : [])];
  const prepared = interpret(net, {
    command,
    actAs: [x.sender],
    commandId: `sandbox-${x.kind}-${randomUUID()}`,
    disclosedContracts: disclosed.map((c) => ({ contractId: c.contractId })),
    local: net.localParties.has(x.sender),
  });
  const { update } = submitLocal(net, { prepared, userId: VALIDATOR_USER, submissionId: randomUUID() });
  const instructionCid = createdOf(update, 'AmuletTransferInstruction');
  return {
    updateId: update.updateId,
    offset: update.offset,
    mode: oneStep ? 'one-step' : 'two-step',
    sender: x.sender,
    receiver: x.receiver,
    amount: x.amount,
    ...(x.memo !== undefined ? { memo: x.memo } : {}),
    ...(instructionCid !== undefined ? { instructionCid } : {}),
  };
}

function createdOf(update: Update, entity: string): string | undefined {
  return update.events.find((e) => e.kind === 'created' && e.contract.templateId.entityName === entity)
    ?.contract.contractId;
}

/** Resolves what can be refused before anything commits (a batch checks all its deposits first). */
export function checkDeposit(net: SandboxNetwork, d: CustomerDeposit, field = 'to'): string {
  return resolveParty(net, d.to, field);
}

/** A customer sends `d.amount` Canton Coin to `d.to` with memo `d.memo`. */
export function customerDeposit(net: SandboxNetwork, d: CustomerDeposit): DepositOutcome {
  const receiver = checkDeposit(net, d);
  const { party: customer } = ensureCustomer(net, d.customer ?? DEFAULT_CUSTOMER);
  if (receiver === customer) throw fail(400, 'to: a customer does not deposit to itself');
  let inputs = pickInputs(net, customer, d.amount);
  if (!inputs) {
    // Topped up: a fresh tap that covers the deposit on its own.
    inputs = [net.tap(customer, addAmounts(d.amount, CUSTOMER_FUNDS))];
  }
  const out = factoryTransfer(net, {
    sender: customer,
    receiver,
    amount: d.amount,
    memo: d.memo,
    mode: d.mode ?? 'auto',
    inputs,
    executeBefore: d.executeBefore ?? net.clock.now() + OFFER_LIFETIME_US,
    kind: 'customer-deposit',
  });
  return { ...out, customer };
}

export interface TransferOut {
  /** The party whose holdings move (a party of a book: the sandbox acts for it without its key). */
  from: string;
  /** Default: the customer `intruder`, which has a TransferPreapproval. */
  to?: string | undefined;
  /** Default: the whole value of the holding moved. */
  amount?: string | undefined;
  /** Default: `from`'s largest unlocked holding. */
  holdingCid?: string | undefined;
  memo?: string | undefined;
  mode?: TransferMode | undefined;
}

/**
 * TEST-ONLY: `from`'s holding moves to another owner without `from`'s
 * signature, as if its key were stolen: the same TransferFactory_Transfer its
 * wallet would submit (tx-kind `transfer`, sender `from`), committed by the
 * sandbox.
 */
export function transferOut(net: SandboxNetwork, t: TransferOut): TransferOutcome {
  const sender = resolveParty(net, t.from, 'from');
  const receiver =
    t.to === undefined
      ? ensureCustomer(net, INTRUDER, { preapproval: true }).party
      : resolveParty(net, t.to, 'to');
  if (receiver === sender)
    throw fail(400, 'to: the receiver is the sender; a transfer-out moves holdings away');
  const unlocked = unlockedOf(net, sender);
  let inputs: Contract[];
  let amount: string;
  if (t.holdingCid !== undefined) {
    const h = unlocked.find((v) => v.contractId === t.holdingCid);
    if (!h) throw fail(404, `holdingCid: ${t.holdingCid} is not an unlocked Amulet holding of ${sender}`);
    amount = t.amount ?? h.amount;
    if (!gte(h.amount, amount))
      throw fail(400, `amount: the holding ${t.holdingCid} is worth ${h.amount}, less than ${amount}`);
    inputs = [h.contract];
  } else if (t.amount !== undefined) {
    amount = t.amount;
    const picked = pickInputs(net, sender, amount);
    if (!picked) {
      const total = addAmounts('0', ...unlocked.map((h) => h.amount));
      throw fail(400, `amount: ${sender} holds ${total} unlocked, less than ${amount}`);
    }
    inputs = picked;
  } else {
    const largest = unlocked.sort((a, b) => (gte(a.amount, b.amount) ? -1 : 1))[0];
    if (!largest) throw fail(400, `from: ${sender} has no unlocked holding to move`);
    amount = largest.amount;
    inputs = [largest.contract];
  }
  return factoryTransfer(net, {
    sender,
    receiver,
    amount,
    memo: t.memo,
    mode: t.mode ?? 'auto',
    inputs,
    executeBefore: net.clock.now() + OFFER_LIFETIME_US,
    kind: 'transfer-out',
  });
}

export interface OfferAnswer {
  action: 'accept' | 'reject';
  /** The offer (TransferInstruction); else the oldest pending one to `customer` (from `from`). */
  instructionCid?: string | undefined;
  customer?: string | undefined;
  from?: string | undefined;
}

export interface AnswerOutcome {
  updateId: string;
  offset: number;
  action: 'accept' | 'reject';
  instructionCid: string;
  sender: string;
  receiver: string;
  amount: string;
}

/** A customer (or another local receiver) accepts or rejects a transfer offer made to it. */
export function answerOffer(net: SandboxNetwork, a: OfferAnswer): AnswerOutcome {
  let cid = a.instructionCid;
  if (cid === undefined) {
    const receiver = customerParty(net, a.customer ?? DEFAULT_CUSTOMER);
    const sender = a.from === undefined ? undefined : resolveParty(net, a.from, 'from');
    const offer = net.store
      .activeContracts('Splice.AmuletTransferInstruction:AmuletTransferInstruction')
      .find(
        (c) =>
          str(c.argument, 'transfer', 'receiver') === receiver &&
          (sender === undefined || str(c.argument, 'transfer', 'sender') === sender),
      );
    if (!offer)
      throw fail(
        404,
        `no pending transfer offer to ${receiver}${sender === undefined ? '' : ` from ${sender}`}; give instructionCid`,
      );
    cid = offer.contractId;
  }
  const instr = net.store.get(cid);
  if (instr?.templateId.entityName !== 'AmuletTransferInstruction')
    throw fail(404, `instructionCid: no pending transfer instruction ${cid}`);
  const t = transferOf(instr);
  const prepared = localInstructionAnswer(net, cid, a.action === 'accept' ? 'Accept' : 'Reject');
  const { update } = submitLocal(net, { prepared, userId: VALIDATOR_USER, submissionId: randomUUID() });
  return {
    updateId: update.updateId,
    offset: update.offset,
    action: a.action,
    instructionCid: cid,
    sender: t.sender,
    receiver: t.receiver,
    amount: t.amount,
  };
}

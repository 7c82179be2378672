/**
 * What the real network does on its own after a transaction commits, for the
 * sandbox: the validator accepting TransferPreapprovalProposals it is provider of,
 * the SV automation executing TransferCommands (legacy preapproval send) and
 * recording their status for Scan, and the expiry of transfer instructions whose
 * deadline has passed. Each step is a pure decision over the ledger state followed
 * by one `commitInternal`.
 */
import { randomUUID } from 'node:crypto';
import type { Value } from '../hashing/model.js';
import {
  addAmounts,
  amuletContract,
  gte,
  holdingsOf,
  isPositive,
  subAmounts,
  transferCommandCounterContract,
  transferPreapprovalContract,
} from './amulet.js';
import type { Contract, NewContract } from './ledger/store.js';
import { InactiveContractError } from './ledger/store.js';
import { big, field, str } from './ledger/value-json.js';
import { interfacesOf, type SandboxNetwork } from './network.js';
import { instructionExpiry } from './participant/interpret.js';
import { contractWithState, preapprovalOf } from './validator/routes.js';

/** A TransferCommand's status as Scan reports it (`TransferCommandContractStatus`). */
export type CommandStatus =
  | { status: 'created' }
  | { status: 'sent' }
  | { status: 'failed'; failure_kind: 'failed' | 'expired' | 'withdrawn'; reason: string };

interface CommandRecord {
  contract: Contract;
  status: CommandStatus;
  /** When the command was settled (µs); Scan forgets settled commands after 24 h. */
  settledAt: bigint | undefined;
}

/** Settled commands per network, by contract id. */
const settled = new WeakMap<SandboxNetwork, Map<string, CommandRecord>>();
const DAY_US = 86_400_000_000n;

function records(net: SandboxNetwork): Map<string, CommandRecord> {
  let m = settled.get(net);
  if (!m) {
    m = new Map();
    settled.set(net, m);
  }
  return m;
}

/** The user the SV automation's own submissions are recorded under. */
const DSO_AUTOMATION_USER = 'sv-automation';

/** Installs the automation on a network (once per network). */
export function installAutomation(net: SandboxNetwork): void {
  if (settled.has(net)) return;
  records(net);
  let scheduled = false;
  const run = () => {
    scheduled = false;
    step(net);
  };
  // Automation reacts after the commit that triggered it, never inside it.
  net.onCommit((u) => {
    if (scheduled) return;
    if (u.events.some((e) => e.kind === 'created' && isTrigger(e.contract))) {
      scheduled = true;
      queueMicrotask(run);
    }
  });
  net.onSweep(() => step(net));
}

const isTrigger = (c: Contract) =>
  c.templateId.entityName === 'TransferPreapprovalProposal' || c.templateId.entityName === 'TransferCommand';

/** One round of every automation task over the current ledger. */
export function step(net: SandboxNetwork): void {
  const tasks: [Contract, () => void][] = [
    ...net.store
      .activeContracts('TransferPreapprovalProposal')
      .map((c) => [c, () => acceptProposal(net, c)] as [Contract, () => void]),
    ...net.store
      .activeContracts('TransferCommand')
      .sort((a, b) => Number((big(a.argument, 'nonce') ?? 0n) - (big(b.argument, 'nonce') ?? 0n)))
      .map((c) => [c, () => executeCommand(net, c)] as [Contract, () => void]),
    ...net.store
      .activeContracts('AmuletTransferInstruction')
      .map((c) => [c, () => expireInstruction(net, c)] as [Contract, () => void]),
  ];
  for (const [c, t] of tasks) {
    if (!net.store.get(c.contractId)) continue;
    try {
      t();
    } catch (e) {
      // A contract a task read was consumed meanwhile: the next sweep looks again.
      if (!(e instanceof InactiveContractError)) throw e;
    }
  }
}

// ---- (a) TransferPreapprovalProposal → TransferPreapproval ---------------------------------------

/** The validator accepts proposals naming it provider: the proposal becomes a 90-day TransferPreapproval. */
function acceptProposal(net: SandboxNetwork, proposal: Contract): void {
  const provider = str(proposal.argument, 'provider');
  const receiver = str(proposal.argument, 'receiver');
  if (provider !== net.validatorParty || !receiver) return;
  net.commitInternal({
    archives: [proposal.contractId],
    creates: [transferPreapprovalContract(net.dso, receiver, provider, net.clock.now())],
    commandId: `validator-accept-preapproval-${randomUUID()}`,
  });
}

// ---- (b) TransferCommand execution ---------------------------------------------------------------

interface Command {
  sender: string;
  receiver: string;
  amount: string;
  expiresAt: bigint;
  nonce: bigint;
}

function commandOf(c: Contract): Command | undefined {
  const a = c.argument;
  const sender = str(a, 'sender');
  const receiver = str(a, 'receiver');
  const amount = str(a, 'amount');
  const expiresAt = big(a, 'expiresAt');
  const nonce = big(a, 'nonce');
  if (!sender || !receiver || !amount || expiresAt === undefined || nonce === undefined) return undefined;
  return { sender, receiver, amount, expiresAt, nonce };
}

function counterOf(net: SandboxNetwork, sender: string): Contract | undefined {
  return net.store
    .activeContracts('Splice.ExternalPartyAmuletRules:TransferCommandCounter')
    .find((c) => str(c.argument, 'sender') === sender);
}

/** What the SV automation does with a TransferCommand now. */
export type CommandDecision =
  | { kind: 'wait' }
  | { kind: 'fail'; bumpCounter: boolean; failure_kind: 'failed' | 'expired'; reason: string }
  | { kind: 'send'; inputs: Contract[]; change: string };

/**
 * TransferCommand_Send's rules: an expired command fails as expired; a nonce below
 * the counter fails (already used); a nonce above it waits for its turn; at the
 * counter's value the counter is bumped and the transfer goes through the receiver's
 * preapproval out of the sender's unlocked holdings, or fails.
 */
export function decideCommand(
  cmd: Command,
  x: {
    now: bigint;
    nextNonce: bigint;
    receiverHasPreapproval: boolean;
    holdings: { contract: Contract; amount: string }[];
  },
): CommandDecision {
  if (x.now >= cmd.expiresAt)
    return { kind: 'fail', bumpCounter: false, failure_kind: 'expired', reason: 'TransferCommand expired' };
  if (cmd.nonce < x.nextNonce)
    return {
      kind: 'fail',
      bumpCounter: false,
      failure_kind: 'failed',
      reason: `Nonce ${cmd.nonce} was already used: the sender's TransferCommandCounter expects ${x.nextNonce}`,
    };
  if (cmd.nonce > x.nextNonce) return { kind: 'wait' };
  if (!x.receiverHasPreapproval)
    return {
      kind: 'fail',
      bumpCounter: true,
      failure_kind: 'failed',
      reason: `No TransferPreapproval for receiver ${cmd.receiver}`,
    };
  const inputs: Contract[] = [];
  let total = '0';
  for (const h of x.holdings) {
    if (gte(total, cmd.amount)) break;
    inputs.push(h.contract);
    total = addAmounts(total, h.amount);
  }
  if (!gte(total, cmd.amount))
    return {
      kind: 'fail',
      bumpCounter: true,
      failure_kind: 'failed',
      reason: `Insufficient funds: the sender holds ${total} unlocked, the transfer needs ${cmd.amount}`,
    };
  return { kind: 'send', inputs, change: subAmounts(total, cmd.amount) };
}

function executeCommand(net: SandboxNetwork, c: Contract): void {
  const cmd = commandOf(c);
  if (!cmd) return;
  const now = net.clock.now();
  const round = net.latestRound().number;
  const counter = counterOf(net, cmd.sender);
  const nextNonce = counter ? (big(counter.argument, 'nextNonce') ?? 0n) : 0n;
  const holdings = holdingsOf(net.store, cmd.sender, round)
    .filter((h) => !h.locked)
    .map((h) => ({ contract: h.contract, amount: h.amount }));
  const d = decideCommand(cmd, {
    now,
    nextNonce,
    receiverHasPreapproval: preapprovalOf(net, cmd.receiver) !== undefined,
    holdings,
  });
  if (d.kind === 'wait') return;
  const archives = [c.contractId];
  const creates: NewContract[] = [];
  if (d.kind === 'send' || d.bumpCounter) {
    if (counter) archives.push(counter.contractId);
    creates.push(transferCommandCounterContract(net.dso, cmd.sender, nextNonce + 1n));
  }
  if (d.kind === 'send') {
    archives.push(...d.inputs.map((h) => h.contractId));
    creates.push(amuletContract(net.dso, cmd.receiver, cmd.amount, round));
    if (isPositive(d.change)) creates.push(amuletContract(net.dso, cmd.sender, d.change, round));
  }
  net.commitInternal({ archives, creates, commandId: `sv-transfer-command-${randomUUID()}` });
  const status: CommandStatus =
    d.kind === 'send'
      ? { status: 'sent' }
      : { status: 'failed', failure_kind: d.failure_kind, reason: d.reason };
  records(net).set(c.contractId, { contract: c, status, settledAt: now });
}

/**
 * Scan's `transfer-command/status?sender=&nonce=` answer: the sender's commands with
 * that nonce, pending ones as `created`, settled ones from the last 24 h; undefined
 * (Scan's 404) when there are none.
 */
export function transferCommandStatus(net: SandboxNetwork, sender: string, nonce: bigint) {
  const now = net.clock.now();
  const out: Record<
    string,
    { contract: ReturnType<typeof contractWithState>['contract']; status: CommandStatus }
  > = {};
  const matches = (c: Contract) => {
    const cmd = commandOf(c);
    return cmd !== undefined && cmd.sender === sender && cmd.nonce === nonce;
  };
  for (const c of net.store.activeContracts('Splice.ExternalPartyAmuletRules:TransferCommand'))
    if (matches(c))
      out[c.contractId] = { contract: contractWithState(net, c).contract, status: { status: 'created' } };
  for (const [id, r] of records(net))
    if (matches(r.contract) && r.settledAt !== undefined && now - r.settledAt < DAY_US)
      out[id] = { contract: contractWithState(net, r.contract).contract, status: r.status };
  return Object.keys(out).length === 0 ? undefined : { transfer_commands_by_contract_id: out };
}

// ---- (c) expiry of transfer instructions -----------------------------------------------------------

/**
 * After `executeBefore` the instruction can no longer be accepted: the DSO's automation
 * expires it as Splice does, with `TransferInstruction_Update` (the LockedAmulet unlocked back
 * to the sender, result `_Failed`). An instruction whose locked amulet is gone is archived.
 */
function expireInstruction(net: SandboxNetwork, instr: Contract): void {
  const executeBefore = big(instr.argument, 'transfer', 'executeBefore');
  if (executeBefore === undefined || net.clock.now() < executeBefore) return;
  const prepared = instructionExpiry(net, instr.contractId);
  if (prepared) {
    net.commitPrepared(prepared, { userId: DSO_AUTOMATION_USER, submissionId: `sv-expire-${randomUUID()}` });
    return;
  }
  const lockedId = str(instr.argument, 'lockedAmulet');
  const locked = lockedId ? net.store.get(lockedId) : undefined;
  const archives = [instr.contractId];
  const creates: NewContract[] = [];
  const amulet: Value | undefined = locked ? field(locked.argument, 'amulet') : undefined;
  if (locked && amulet) {
    archives.push(locked.contractId);
    const back = amuletContract(net.dso, str(amulet, 'owner')!, '0', 0n);
    creates.push({ ...back, argument: amulet, interfaces: interfacesOf(back.templateId) });
  }
  net.commitInternal({ archives, creates, commandId: `sv-expire-instruction-${randomUUID()}` });
}

/**
 * Scan's transaction history (`POST /v0/transactions`) for the sandbox: one
 * `TransactionHistoryResponseItem` per committed update that moved Amulet —
 * the genesis mint, DevNet taps, transfers (AmuletRules transfers, token-standard
 * transfers and instructions, TransferCommands sent through a preapproval) and
 * rejected/withdrawn transfer instructions — derived from what the commit archived
 * and created, in commit order, with Scan's paging by event id.
 */

import { fromUnits } from '../../intent/decimal.js';
import { addAmounts, type HoldingView, holdingView, subAmounts } from '../amulet.js';
import { spliceError } from '../errors.js';
import { isoMicros } from '../ledger/clock.js';
import type { Contract, Update } from '../ledger/store.js';
import { path, str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import { canonicalNumeric, numericUnits } from '../prepared/common.js';

/** Scan's largest page (`Limit.DefaultMaxPageSize`). */
export const MAX_PAGE_SIZE = 1000;

export interface AmuletAmount {
  amulet_owner: string;
  amulet_amount: string;
}

export interface HistoryTransfer {
  sender: {
    party: string;
    input_amulet_amount: string;
    input_app_reward_amount: string;
    input_validator_reward_amount: string;
    input_sv_reward_amount: string;
    sender_change_fee: string;
    sender_change_amount: string;
    sender_fee: string;
    holding_fees: string;
  };
  receivers: { party: string; amount: string; receiver_fee: string }[];
  balance_changes: {
    party: string;
    change_to_initial_amount_as_of_round_zero: string;
    change_to_holding_fees_rate: string;
  }[];
  description?: string;
  transferInstructionReceiver?: string;
  transferInstructionAmount?: string;
  transferInstructionCid?: string;
  transfer_kind?: 'create_transfer_instruction' | 'transfer_instruction_accept' | 'preapproval_send';
}

/** `TransactionHistoryResponseItem` (scan.yaml, Splice 0.6.1). */
export interface HistoryItem {
  transaction_type: 'transfer' | 'mint' | 'devnet_tap' | 'abort_transfer_instruction';
  event_id: string;
  offset: string;
  date: string;
  domain_id: string;
  round?: number;
  transfer?: HistoryTransfer;
  mint?: AmuletAmount;
  tap?: AmuletAmount;
  abort_transfer_instruction?: { abort_kind: 'reject' | 'withdraw'; transfer_instruction_cid: string };
}

export interface PageOptions {
  pageEndEventId?: string;
  sortOrder: 'asc' | 'desc';
  pageSize: number;
}

const ZERO = '0.0000000000';

export class ScanHistory {
  private readonly items: HistoryItem[] = [];
  private readonly index = new Map<string, number>();

  constructor(net: SandboxNetwork) {
    // The genesis commits happen inside the network's constructor, before this subscribes.
    for (const u of net.store.updates()) this.record(u);
    net.onCommit((u) => this.record(u));
  }

  /**
   * One page in `sortOrder`: without `pageEndEventId` from the oldest (asc) or newest
   * (desc) item, else strictly after that event in the sort order. 400 for a page size
   * outside 1..1000, 404 for an event id Scan never handed out.
   */
  page(opts: PageOptions): HistoryItem[] {
    const n = opts.pageSize;
    if (!Number.isSafeInteger(n) || n < 1)
      throw spliceError(400, `Invalid page_size ${n}: Limit must be at least 1.`);
    if (n > MAX_PAGE_SIZE)
      throw spliceError(400, `Invalid page_size: Exceeded limit maximum (${n} > ${MAX_PAGE_SIZE}).`);
    let at: number | undefined;
    if (opts.pageEndEventId !== undefined) {
      at = this.index.get(opts.pageEndEventId);
      if (at === undefined)
        throw spliceError(
          404,
          `page_end_event_id ${opts.pageEndEventId} not found: no matching log indices found`,
        );
    }
    if (opts.sortOrder === 'asc') {
      const from = at === undefined ? 0 : at + 1;
      return this.items.slice(from, from + n);
    }
    const end = at === undefined ? this.items.length : at;
    return this.items.slice(Math.max(0, end - n), end).reverse();
  }

  private record(u: Update): void {
    const item = itemOf(u);
    if (!item) return;
    this.index.set(item.event_id, this.items.length);
    this.items.push(item);
  }
}

// ---- deriving items from an update -------------------------------------------------------------

/** The round the update's amulets were created in (all creates of one commit share it). */
function roundOf(created: HoldingView[]): number | undefined {
  const r = created[0]?.createdRound;
  return r === undefined ? undefined : Number(r);
}

function base(u: Update, type: HistoryItem['transaction_type']): HistoryItem {
  // Scan's event id of a transaction is its root node's: `#<update id>:<node id>`.
  const root = u.tree?.roots[0] ?? String(u.events[0]?.nodeId ?? 0);
  return {
    transaction_type: type,
    event_id: `#${u.updateId}:${root}`,
    offset: String(u.offset).padStart(16, '0'),
    date: isoMicros(u.effectiveAt),
    domain_id: u.synchronizerId,
  };
}

const isEntity = (c: Contract, module: string, entity: string) =>
  c.templateId.moduleName === module && c.templateId.entityName === entity;

const isHolding = (c: Contract) =>
  isEntity(c, 'Splice.Amulet', 'Amulet') || isEntity(c, 'Splice.Amulet', 'LockedAmulet');

/** Choices exercised in the committed transaction (empty for the network's own commits). */
function choicesOf(u: Update): Set<string> {
  const out = new Set<string>();
  for (const n of u.tree?.nodes ?? []) if (n.node.type === 'exercise') out.add(n.node.choiceId);
  return out;
}

function itemOf(u: Update): HistoryItem | undefined {
  const created = u.events.filter((e) => e.kind === 'created').map((e) => e.contract);
  const archived = u.events.filter((e) => e.kind === 'archived').map((e) => e.contract);
  const views = (cs: Contract[]) =>
    cs.filter(isHolding).flatMap((c) => {
      const v = holdingView(c, 0n);
      return v ? [v] : [];
    });
  const createdHoldings = views(created);
  const archivedHoldings = views(archived);

  if (archivedHoldings.length === 0) {
    // A fresh amulet out of nothing: the genesis mint or a DevNet tap.
    const only = createdHoldings.length === 1 && archived.length === 0 ? createdHoldings[0] : undefined;
    if (!only || only.locked) return undefined;
    const amount = { amulet_owner: only.owner, amulet_amount: canonicalNumeric(only.initialAmount) };
    if (u.commandId === 'sandbox-genesis-mint') return { ...base(u, 'mint'), mint: amount };
    // The sandbox's own tap (`POST /sandbox/tap`) or an executed AmuletRules_DevNet_Tap.
    if (u.commandId.startsWith('sandbox-tap-') || choicesOf(u).has('AmuletRules_DevNet_Tap'))
      return { ...base(u, 'devnet_tap'), round: Number(only.createdRound), tap: amount };
    return undefined;
  }

  const choices = choicesOf(u);
  const instruction = archived.find((c) =>
    isEntity(c, 'Splice.AmuletTransferInstruction', 'AmuletTransferInstruction'),
  );
  for (const kind of ['Reject', 'Withdraw'] as const)
    if (instruction && choices.has(`TransferInstruction_${kind}`))
      return {
        ...base(u, 'abort_transfer_instruction'),
        abort_transfer_instruction: {
          abort_kind: kind === 'Reject' ? 'reject' : 'withdraw',
          transfer_instruction_cid: instruction.contractId,
        },
      };
  return transferItem(u, { created, archived, createdHoldings, archivedHoldings, choices, instruction });
}

interface Parts {
  created: Contract[];
  archived: Contract[];
  createdHoldings: HoldingView[];
  archivedHoldings: HoldingView[];
  choices: Set<string>;
  instruction: Contract | undefined;
}

/**
 * A transfer: the holdings of one sender are consumed, and amulet is created for
 * receivers (and change or a lock for the sender). The sandbox charges no transfer
 * fees, so what the inputs lost beyond the outputs is the holding fee.
 */
function transferItem(u: Update, p: Parts): HistoryItem | undefined {
  const sender = p.archivedHoldings[0]!.owner;
  if (p.archivedHoldings.some((h) => h.owner !== sender)) return undefined;
  const received = p.createdHoldings.filter((h) => h.owner !== sender && !h.locked);
  const change = p.createdHoldings.filter((h) => h.owner === sender);
  const newInstruction = p.created.find((c) =>
    isEntity(c, 'Splice.AmuletTransferInstruction', 'AmuletTransferInstruction'),
  );
  if (received.length === 0 && !newInstruction) return undefined;

  const receivers: HistoryTransfer['receivers'] = [];
  for (const h of received) {
    const r = receivers.find((x) => x.party === h.owner);
    if (r) r.amount = addAmounts(r.amount, h.initialAmount);
    else receivers.push({ party: h.owner, amount: canonicalNumeric(h.initialAmount), receiver_fee: ZERO });
  }
  const input = addAmounts('0', ...p.archivedHoldings.map((h) => h.initialAmount));
  const changeAmount = addAmounts('0', ...change.filter((h) => !h.locked).map((h) => h.initialAmount));
  const out = addAmounts('0', ...received.map((h) => h.initialAmount), ...change.map((h) => h.initialAmount));
  const transfer: HistoryTransfer = {
    sender: {
      party: sender,
      input_amulet_amount: input,
      input_app_reward_amount: ZERO,
      input_validator_reward_amount: ZERO,
      input_sv_reward_amount: ZERO,
      sender_change_fee: ZERO,
      sender_change_amount: changeAmount,
      sender_fee: ZERO,
      holding_fees: subAmounts(input, out),
    },
    receivers,
    balance_changes: balanceChanges(p.archivedHoldings, p.createdHoldings),
  };
  const command = p.archived.find((c) => isEntity(c, 'Splice.ExternalPartyAmuletRules', 'TransferCommand'));
  const description = command ? optionalText(command, 'description') : undefined;
  if (description) transfer.description = description;
  if (newInstruction) {
    transfer.transfer_kind = 'create_transfer_instruction';
    const receiver = str(newInstruction.argument, 'transfer', 'receiver');
    const amount = str(newInstruction.argument, 'transfer', 'amount');
    if (receiver) transfer.transferInstructionReceiver = receiver;
    if (amount) transfer.transferInstructionAmount = canonicalNumeric(amount);
    transfer.transferInstructionCid = newInstruction.contractId;
  } else if (p.instruction && p.choices.has('TransferInstruction_Accept')) {
    transfer.transfer_kind = 'transfer_instruction_accept';
    transfer.transferInstructionCid = p.instruction.contractId;
  } else if (command || p.choices.has('TransferPreapproval_Send')) {
    transfer.transfer_kind = 'preapproval_send';
  }
  const round = roundOf(p.createdHoldings);
  return { ...base(u, 'transfer'), ...(round === undefined ? {} : { round }), transfer };
}

/** Per party: created minus archived amulet normalised to round 0 (`amount + rate × round`), and rates. */
function balanceChanges(archived: HoldingView[], created: HoldingView[]): HistoryTransfer['balance_changes'] {
  const acc = new Map<string, { amount: string; rate: string }>();
  const add = (h: HoldingView, sign: 1 | -1) => {
    const a = acc.get(h.owner) ?? { amount: ZERO, rate: ZERO };
    const normalised = addAmounts(h.initialAmount, mulInt(h.rate, h.createdRound));
    acc.set(h.owner, {
      amount: sign > 0 ? addAmounts(a.amount, normalised) : subAmounts(a.amount, normalised),
      rate: sign > 0 ? addAmounts(a.rate, h.rate) : subAmounts(a.rate, h.rate),
    });
  };
  for (const h of archived) add(h, -1);
  for (const h of created) add(h, 1);
  return [...acc].map(([party, v]) => ({
    party,
    change_to_initial_amount_as_of_round_zero: v.amount,
    change_to_holding_fees_rate: v.rate,
  }));
}

/** A decimal times a whole number, exactly. */
function mulInt(decimal: string, n: bigint): string {
  return fromUnits(numericUnits(decimal) * n);
}

function optionalText(c: Contract, label: string): string | undefined {
  const v = path(c.argument, label);
  if (v?.kind === 'optional' && v.value?.kind === 'text') return v.value.value;
  return undefined;
}

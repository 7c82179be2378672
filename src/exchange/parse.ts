/**
 * Owns the reading of one Ledger API transaction (ledger-effects shape) as token-standard
 * movements, offers and holding changes of the book's parties. PURE: no I/O, no clock; what it
 * cannot see in the transaction (holdings archived here but created earlier) comes in through
 * `ParseInput.known`, which the caller fills beforehand for the ids {@link archivedHoldingIds}
 * names (the ingestion looks them up by contract id; a 404 means "not ours" and stays absent).
 *
 * Recognition is by the token standard's own markers and interface choices, never by a
 * registry's own choice names (Canton Coin's `TransferPreapproval_Send` is found by its tx-kind):
 * - a Holding is a created event with a `Splice.Api.Token.HoldingV1:Holding` interface view (any
 *   package id), archived by a consuming exercise (or archived event) whose
 *   `implementedInterfaces` include Holding;
 * - a TransferInstruction likewise by `Splice.Api.Token.TransferInstructionV1:TransferInstruction`;
 * - a movement is an outermost exercise whose result meta carries
 *   `splice.lfdecentralizedtrust.org/tx-kind`, or an outermost TransferInstruction choice (an
 *   offer's accept/reject/withdraw: Splice's accept carries no tx-kind of its own, only `burned`),
 *   or a token-standard factory choice (`TransferFactory_Transfer`, `BurnMintFactory_BurnMint`).
 *   Everything in its subtree — the exercise's own node (a consuming exercise on a Holding
 *   archives that holding) through `lastDescendantNodeId` — is that movement, nested markers
 *   included (the outermost one wins).
 *
 * Netting: per book party and instrument, the holdings created minus those archived in the
 * subtree (`amount`), and the same over locked holdings only (`locked`). A holding created and
 * archived in this same transaction nets to zero and is left out of `holdings` (it never was in
 * the active contract set). Changes outside every movement are `unexplained`.
 */
import type {
  ArchivedEvent,
  CreatedEvent,
  ExercisedEvent,
  JsTransaction,
} from '../canton/ledger-api/schemas.js';
import { addDecimals, compareDecimals, decimalUnits, fromUnits, isDecimal } from '../intent/decimal.js';

export interface Instrument {
  admin: string;
  id: string;
}

export interface HoldingInfo {
  contractId: string;
  owner: string;
  instrument: Instrument;
  amount: string;
  locked: boolean;
}

export interface ParseInput {
  /** The book's parties. */
  parties: ReadonlySet<string>;
  /** Archived holdings resolved beforehand (by contract id), for those created in earlier transactions. */
  known: ReadonlyMap<string, HoldingInfo>;
}

export type HoldingChange =
  | ({ op: 'create'; nodeId: number } & HoldingInfo)
  | {
      op: 'archive';
      nodeId: number;
      contractId: string;
      owner: string;
      instrument: Instrument;
      amount: string;
      locked: boolean;
    };

export interface Delta {
  party: string;
  instrument: Instrument;
  /** Signed decimal: the change of all the party's holdings of the instrument. */
  amount: string;
  /** Signed decimal: the change of the party's locked holdings of the instrument. */
  locked: string;
}

export interface Movement {
  nodeId: number;
  /** tx-kind (`transfer`, `merge-split`, `mint`, `burn`, `unlock`, `expire-dust`, …); see {@link kindOf}. */
  kind: string;
  sender?: string;
  memo?: string;
  burned?: string;
  choice: string;
  /** Set when this exercise is a TransferInstruction choice (an offer's accept, …). */
  instructionCid?: string;
  deltas: Delta[];
}

export type OfferOutcome =
  | 'completed'
  | 'failed'
  | 'pending'
  | 'rejected'
  | 'withdrawn'
  | 'expired'
  | 'unknown';

export type OfferEvent =
  | {
      op: 'created';
      nodeId: number;
      instructionCid: string;
      originalInstructionCid?: string;
      sender: string;
      receiver: string;
      amount: string;
      instrument: Instrument;
      memo?: string;
      requestedAt?: string;
      executeBefore?: string;
      status: string;
    }
  | {
      op: 'consumed';
      nodeId: number;
      instructionCid: string;
      choice: string;
      outcome: OfferOutcome;
      nextInstructionCid?: string;
    };

export interface Unexplained {
  party: string;
  instrument: Instrument;
  /** Signed decimal: the change of all the party's holdings of the instrument. */
  amount: string;
  /** Signed decimal: the change of its locked holdings (a lock released outside any movement). */
  locked: string;
  nodeIds: number[];
}

export interface ParsedTransaction {
  updateId: string;
  offset: number;
  recordTime: string;
  synchronizerId: string;
  commandId?: string;
  /** Every Holding create / archive of a book party (drives the holdings table), in node order. */
  holdings: HoldingChange[];
  /** Each outermost movement with the net holding change of each book party in its subtree. */
  movements: Movement[];
  /** TransferInstruction views created/consumed where sender or receiver is a book party. */
  offers: OfferEvent[];
  /**
   * Net holding changes of book parties NOT under any movement (per party+instrument); an entry
   * is left out only when both its amount and its locked change are zero.
   */
  unexplained: Unexplained[];
  /**
   * Holdings this transaction archives that were neither created in it nor found in
   * `input.known`: not counted anywhere. Empty when the caller resolved {@link archivedHoldingIds}.
   */
  unresolvedArchives: string[];
}

// ---- markers ---------------------------------------------------------------------------------

const META = 'splice.lfdecentralizedtrust.org/';
export const TX_KIND_KEY = `${META}tx-kind`;
export const REASON_KEY = `${META}reason`;
export const SENDER_KEY = `${META}sender`;
export const BURNED_KEY = `${META}burned`;

const HOLDING = { module: 'Splice.Api.Token.HoldingV1', entity: 'Holding' };
const INSTRUCTION = { module: 'Splice.Api.Token.TransferInstructionV1', entity: 'TransferInstruction' };
const INSTRUCTION_CHOICE = 'TransferInstruction_';

/** Token-standard factory choices that are movements even without a tx-kind (their kind when unmarked). */
const FACTORY_CHOICES: Readonly<Record<string, string>> = {
  TransferFactory_Transfer: 'transfer',
  BurnMintFactory_BurnMint: 'merge-split',
};

/** `pkg:Module:Entity` (package id or `#name`) names the interface `want`, whatever the package. */
export function isInterface(id: string | undefined, want: { module: string; entity: string }): boolean {
  if (typeof id !== 'string') return false;
  const parts = id.split(':');
  return parts.length === 3 && parts[1] === want.module && parts[2] === want.entity;
}

type Rec = Record<string, unknown>;
const isRec = (x: unknown): x is Rec => typeof x === 'object' && x !== null && !Array.isArray(x);
const strAt = (o: unknown, k: string): string | undefined => {
  const v = isRec(o) ? o[k] : undefined;
  return typeof v === 'string' ? v : undefined;
};

/** `meta.values` of a `Metadata` record, as strings only. */
function metaValues(meta: unknown): Record<string, string> {
  const values = isRec(meta) ? meta.values : undefined;
  const out: Record<string, string> = {};
  if (isRec(values)) for (const [k, v] of Object.entries(values)) if (typeof v === 'string') out[k] = v;
  return out;
}

function instrumentOf(x: unknown): Instrument | undefined {
  const admin = strAt(x, 'admin');
  const id = strAt(x, 'id');
  return admin !== undefined && id !== undefined ? { admin, id } : undefined;
}

/** The first successfully computed view of the interface, if the event carries one. */
/** The interface views of a created event, as every reader of them has them (full or read for views only). */
type ViewsOf = {
  interfaceViews?:
    | readonly { interfaceId: string; viewStatus?: { code: number }; viewValue?: unknown }[]
    | null;
};

function viewOf(ev: ViewsOf, want: { module: string; entity: string }): Rec | undefined {
  for (const v of ev.interfaceViews ?? []) {
    if (!isInterface(v.interfaceId, want)) continue;
    if (v.viewStatus && v.viewStatus.code !== 0) continue;
    if (isRec(v.viewValue)) return v.viewValue;
  }
  return undefined;
}

/** The Holding a created event is, from its Holding view; undefined when it is none (or malformed). */
export function holdingOf(ev: ViewsOf & { contractId: string }): HoldingInfo | undefined {
  const v = viewOf(ev, HOLDING);
  if (!v) return undefined;
  const owner = strAt(v, 'owner');
  const amount = strAt(v, 'amount');
  const instrument = instrumentOf(v.instrumentId);
  if (owner === undefined || amount === undefined || !isDecimal(amount) || !instrument) return undefined;
  return {
    contractId: ev.contractId,
    owner,
    instrument,
    amount,
    locked: v.lock !== null && v.lock !== undefined,
  };
}

const implementsIface = (ev: { implementedInterfaces?: string[] }, want: typeof HOLDING) =>
  (ev.implementedInterfaces ?? []).some((i) => isInterface(i, want));

// ---- events in node order --------------------------------------------------------------------

type Node =
  | { kind: 'created'; nodeId: number; ev: CreatedEvent }
  | { kind: 'exercised'; nodeId: number; ev: ExercisedEvent }
  | { kind: 'archived'; nodeId: number; ev: ArchivedEvent };

function nodesOf(tx: JsTransaction): Node[] {
  const out: Node[] = [];
  for (const e of tx.events ?? []) {
    if ('CreatedEvent' in e && e.CreatedEvent)
      out.push({ kind: 'created', nodeId: e.CreatedEvent.nodeId, ev: e.CreatedEvent });
    else if ('ExercisedEvent' in e && e.ExercisedEvent)
      out.push({ kind: 'exercised', nodeId: e.ExercisedEvent.nodeId, ev: e.ExercisedEvent });
    else if ('ArchivedEvent' in e && e.ArchivedEvent)
      out.push({ kind: 'archived', nodeId: e.ArchivedEvent.nodeId, ev: e.ArchivedEvent });
  }
  return out.sort((a, b) => a.nodeId - b.nodeId);
}

/** Does this node archive a Holding (consuming exercise or archived event implementing Holding)? */
function archivesHolding(n: Node): boolean {
  if (n.kind === 'exercised') return n.ev.consuming && implementsIface(n.ev, HOLDING);
  if (n.kind === 'archived') return implementsIface(n.ev, HOLDING);
  return false;
}

function createdIds(nodes: Node[]): Set<string> {
  return new Set(nodes.flatMap((n) => (n.kind === 'created' ? [n.ev.contractId] : [])));
}

/**
 * Contract ids of Holding contracts the transaction archives (consuming exercise on a contract
 * whose `implementedInterfaces` include Holding) that are not created in the same transaction:
 * what the caller resolves (events by contract id) into `ParseInput.known` before parsing.
 */
export function archivedHoldingIds(tx: JsTransaction): string[] {
  const nodes = nodesOf(tx);
  const created = createdIds(nodes);
  const out: string[] = [];
  for (const n of nodes)
    if (archivesHolding(n) && !created.has(n.ev.contractId) && !out.includes(n.ev.contractId))
      out.push(n.ev.contractId);
  return out;
}

// ---- movements -------------------------------------------------------------------------------

interface Root {
  ev: ExercisedEvent;
  kind: string;
  instruction: boolean;
}

/** Is this exercise a TransferInstruction choice (by interface, or the standard's choice name)? */
function isInstructionChoice(ev: ExercisedEvent): boolean {
  return (
    implementsIface(ev, INSTRUCTION) ||
    isInterface(ev.interfaceId, INSTRUCTION) ||
    ev.choice.startsWith(INSTRUCTION_CHOICE)
  );
}

function resultOf(ev: ExercisedEvent): Rec {
  return isRec(ev.exerciseResult) ? ev.exerciseResult : {};
}

/**
 * The kind of a movement: the result's tx-kind when it carries one (only the result meta, which
 * the registry's code writes: a transfer's own meta comes from the sender); an unmarked
 * TransferInstruction choice is a `transfer` when it completed and a `merge-split` otherwise (the
 * sender's lock released or moved); an unmarked factory choice by its name.
 */
function kindOf(ev: ExercisedEvent): Root | undefined {
  const marked = metaValues(resultOf(ev).meta)[TX_KIND_KEY];
  const instruction = isInstructionChoice(ev);
  if (marked !== undefined && marked.length > 0) return { ev, kind: marked, instruction };
  if (instruction)
    return {
      ev,
      kind: outputTag(ev) === 'TransferInstructionResult_Completed' ? 'transfer' : 'merge-split',
      instruction,
    };
  const factory = FACTORY_CHOICES[ev.choice];
  return factory ? { ev, kind: factory, instruction } : undefined;
}

function outputTag(ev: ExercisedEvent): string | undefined {
  return strAt(resultOf(ev).output, 'tag');
}

/**
 * Memo, sender and burned amount of a movement: the result meta first, then the choice argument's
 * `transfer.meta`, `extraArgs.meta` and `meta` (a factory transfer's reason travels in its
 * argument). The sender falls back to the argument's `transfer.sender`, then to the `sender` meta
 * of the first exercise inside that carries one (an offer's accept names no sender itself; the
 * registry's transfer under it does).
 */
function labelsOf(
  ev: ExercisedEvent,
  inside: readonly ExercisedEvent[],
): { memo?: string; sender?: string; burned?: string } {
  const arg = isRec(ev.choiceArgument) ? ev.choiceArgument : {};
  const transfer = isRec(arg.transfer) ? arg.transfer : undefined;
  const merged: Record<string, string> = {
    ...metaValues(transfer?.meta),
    ...metaValues(isRec(arg.extraArgs) ? arg.extraArgs.meta : undefined),
    ...metaValues(arg.meta),
    ...metaValues(resultOf(ev).meta),
  };
  const sender =
    merged[SENDER_KEY] ??
    strAt(transfer, 'sender') ??
    inside.map((e) => metaValues(resultOf(e).meta)[SENDER_KEY]).find((v) => v !== undefined);
  const out: { memo?: string; sender?: string; burned?: string } = {};
  if (merged[REASON_KEY] !== undefined) out.memo = merged[REASON_KEY];
  if (sender !== undefined) out.sender = sender;
  if (merged[BURNED_KEY] !== undefined) out.burned = merged[BURNED_KEY];
  return out;
}

// ---- offers ----------------------------------------------------------------------------------

function offerCreated(n: Node & { kind: 'created' }, parties: ReadonlySet<string>): OfferEvent | undefined {
  const v = viewOf(n.ev, INSTRUCTION);
  if (!v) return undefined;
  const t = isRec(v.transfer) ? v.transfer : undefined;
  const sender = strAt(t, 'sender');
  const receiver = strAt(t, 'receiver');
  const amount = strAt(t, 'amount');
  const instrument = instrumentOf(t?.instrumentId);
  if (sender === undefined || receiver === undefined || amount === undefined || !instrument) return undefined;
  if (!parties.has(sender) && !parties.has(receiver)) return undefined;
  const memo = metaValues(t?.meta)[REASON_KEY];
  const original = strAt(v, 'originalInstructionCid');
  const requestedAt = strAt(t, 'requestedAt');
  const executeBefore = strAt(t, 'executeBefore');
  return {
    op: 'created',
    nodeId: n.nodeId,
    instructionCid: n.ev.contractId,
    ...(original !== undefined ? { originalInstructionCid: original } : {}),
    sender,
    receiver,
    amount,
    instrument,
    ...(memo !== undefined ? { memo } : {}),
    ...(requestedAt !== undefined ? { requestedAt } : {}),
    ...(executeBefore !== undefined ? { executeBefore } : {}),
    status: strAt(v.status, 'tag') ?? 'unknown',
  };
}

/**
 * How an instruction ended, from the consuming choice: a Completed or Pending result says so; a
 * Reject or Withdraw is that whatever its result (Amulet answers both with `_Failed`); an Update
 * answering `_Failed` is an expiry (Amulet's admin expires an instruction past `executeBefore`
 * that way); a Failed result of any other choice is `failed`; an Accept/Update without a result
 * tag is `pending`; a choice named for expiry is `expired`; anything else (a bare `Archive`) is
 * `unknown` — the caller compares the record time with the offer's `executeBefore` to tell an
 * expiry.
 */
export function outcomeOf(ev: ExercisedEvent): { outcome: OfferOutcome; nextInstructionCid?: string } {
  const tag = outputTag(ev);
  if (tag === 'TransferInstructionResult_Completed') return { outcome: 'completed' };
  if (tag === 'TransferInstructionResult_Pending') {
    const next = strAt(
      isRec(resultOf(ev).output) ? (resultOf(ev).output as Rec).value : undefined,
      'transferInstructionCid',
    );
    return { outcome: 'pending', ...(next !== undefined ? { nextInstructionCid: next } : {}) };
  }
  const choice = ev.choice;
  if (choice.endsWith('_Reject')) return { outcome: 'rejected' };
  if (choice.endsWith('_Withdraw')) return { outcome: 'withdrawn' };
  // Amulet expires an instruction with an Update by the admin after executeBefore, answering Failed.
  if (choice.endsWith('_Update') && tag === 'TransferInstructionResult_Failed') return { outcome: 'expired' };
  if (tag === 'TransferInstructionResult_Failed') return { outcome: 'failed' };
  if (choice.endsWith('_Accept') || choice.endsWith('_Update')) return { outcome: 'pending' };
  if (/expire/i.test(choice)) return { outcome: 'expired' };
  return { outcome: 'unknown' };
}

function touches(ev: { witnessParties?: string[] }, parties: ReadonlySet<string>): boolean {
  const w = ev.witnessParties ?? [];
  return w.length === 0 || w.some((p) => parties.has(p));
}

// ---- netting ---------------------------------------------------------------------------------

interface Change {
  nodeId: number;
  info: HoldingInfo;
  sign: 1 | -1;
}

const key = (party: string, i: Instrument) => JSON.stringify([party, i.admin, i.id]);
const neg = (s: string) => (s.startsWith('-') ? s.slice(1) : `-${s}`);
const isZero = (s: string) => compareDecimals(s, '0') === 0;

/** The exact sum, written as a Numeric 10 (`-214.0000000000`) unless a term has more decimals. */
function sum(terms: string[]): string {
  const s = addDecimals(['0', ...terms]) ?? '0';
  const units = decimalUnits(s);
  return units === undefined ? s : fromUnits(units);
}

/** Per party+instrument nets of a set of changes, in first-seen order, zero nets left out. */
function net(
  changes: Change[],
): { party: string; instrument: Instrument; amount: string; locked: string; nodeIds: number[] }[] {
  const acc = new Map<
    string,
    { party: string; instrument: Instrument; all: string[]; locked: string[]; nodeIds: number[] }
  >();
  for (const c of changes) {
    const k = key(c.info.owner, c.info.instrument);
    let a = acc.get(k);
    if (!a) {
      a = { party: c.info.owner, instrument: c.info.instrument, all: [], locked: [], nodeIds: [] };
      acc.set(k, a);
    }
    const v = c.sign === 1 ? c.info.amount : neg(c.info.amount);
    a.all.push(v);
    if (c.info.locked) a.locked.push(v);
    if (!a.nodeIds.includes(c.nodeId)) a.nodeIds.push(c.nodeId);
  }
  const out = [];
  for (const a of acc.values()) {
    const amount = sum(a.all);
    const locked = sum(a.locked);
    if (isZero(amount) && isZero(locked)) continue;
    out.push({ party: a.party, instrument: a.instrument, amount, locked, nodeIds: a.nodeIds });
  }
  return out;
}

// ---- the parser ------------------------------------------------------------------------------

export function parseTransaction(tx: JsTransaction, input: ParseInput): ParsedTransaction {
  const nodes = nodesOf(tx);
  const { parties, known } = input;
  const createdHere = new Map<string, HoldingInfo>();
  for (const n of nodes)
    if (n.kind === 'created') {
      const h = holdingOf(n.ev);
      if (h) createdHere.set(h.contractId, h);
    }
  const archivedHere = new Set(nodes.filter(archivesHolding).map((n) => n.ev.contractId));

  // Every holding change in node order (all owners: netting filters by party below).
  const changes: Change[] = [];
  const holdings: HoldingChange[] = [];
  const unresolved: string[] = [];
  for (const n of nodes) {
    if (n.kind === 'created') {
      const h = createdHere.get(n.ev.contractId);
      if (!h) continue;
      changes.push({ nodeId: n.nodeId, info: h, sign: 1 });
      if (parties.has(h.owner) && !archivedHere.has(h.contractId))
        holdings.push({ op: 'create', nodeId: n.nodeId, ...h });
    } else if (archivesHolding(n)) {
      const cid = n.ev.contractId;
      const here = createdHere.get(cid);
      const h = here ?? known.get(cid);
      if (!h) {
        if (!unresolved.includes(cid)) unresolved.push(cid);
        continue;
      }
      changes.push({ nodeId: n.nodeId, info: { ...h, contractId: cid }, sign: -1 });
      if (!here && parties.has(h.owner))
        holdings.push({
          op: 'archive',
          nodeId: n.nodeId,
          contractId: cid,
          owner: h.owner,
          instrument: h.instrument,
          amount: h.amount,
          locked: h.locked,
        });
    }
  }
  const ours = changes.filter((c) => parties.has(c.info.owner));

  // Outermost movements, and offers.
  const movements: Movement[] = [];
  const offers: OfferEvent[] = [];
  const covered = new Set<number>();
  let until = -1;
  for (const n of nodes) {
    if (n.kind === 'created') {
      const o = offerCreated(n, parties);
      if (o) offers.push(o);
      continue;
    }
    if (n.kind === 'archived') {
      if (implementsIface(n.ev, INSTRUCTION) && touches(n.ev, parties))
        offers.push({
          op: 'consumed',
          nodeId: n.nodeId,
          instructionCid: n.ev.contractId,
          choice: 'Archive',
          outcome: 'unknown',
        });
      continue;
    }
    const ev = n.ev;
    if (ev.consuming && isInstructionChoice(ev) && touches(ev, parties))
      offers.push({
        op: 'consumed',
        nodeId: n.nodeId,
        instructionCid: ev.contractId,
        choice: ev.choice,
        ...outcomeOf(ev),
      });
    if (n.nodeId <= until) continue;
    const root = kindOf(ev);
    if (!root) continue;
    const last = Math.max(ev.lastDescendantNodeId, n.nodeId);
    until = last;
    const inside = ours.filter((c) => c.nodeId >= n.nodeId && c.nodeId <= last);
    for (const c of inside) covered.add(c.nodeId);
    const nested = nodes.flatMap((m) =>
      m.kind === 'exercised' && m.nodeId > n.nodeId && m.nodeId <= last ? [m.ev] : [],
    );
    movements.push({
      nodeId: n.nodeId,
      kind: root.kind,
      ...labelsOf(ev, nested),
      choice: ev.choice,
      ...(root.instruction ? { instructionCid: ev.contractId } : {}),
      deltas: net(inside).map(({ party, instrument, amount, locked }) => ({
        party,
        instrument,
        amount,
        locked,
      })),
    });
  }

  const unexplained = net(ours.filter((c) => !covered.has(c.nodeId)));

  return {
    updateId: tx.updateId,
    offset: tx.offset,
    recordTime: tx.recordTime,
    synchronizerId: tx.synchronizerId,
    ...(tx.commandId ? { commandId: tx.commandId } : {}),
    holdings,
    movements,
    offers,
    unexplained,
    unresolvedArchives: unresolved,
  };
}

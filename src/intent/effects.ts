/**
 * Owns the intent check's rules on what an action's subtree creates and
 * carries beyond the root's own fields: the one transfer instruction of an
 * offer and the amount it locks, the one TransferCommand of a preapproval
 * send, the one TransferPreapproval and ValidatorRight of a setup acceptance,
 * the one allocation of an allocate, the holdings each kind may create (owner,
 * instrument, change; a name-service payment or expiry only the payer's own
 * Canton Coin of the intent's DSO), the instrument and owner of disclosed
 * inputs, and metadata text the intent did not ask for. Used by ./check.ts;
 * the name service's own records are checked in ./ans.ts.
 *
 * One file on purpose: it is the list of effect rules per kind of action, which
 * share the helpers that read holdings, instructions and metadata out of an
 * action's subtree.
 */

import type { CreateNode, DecodedTransaction, ExerciseNode, Value } from '../hashing/model.js';
import { templateName } from '../hashing/render.js';
import { withArticle } from '../text/english.js';
import { isInstructionEntity } from './allow.js';
import { addDecimals, decimalEquals } from './decimal.js';
import { type CreatedHolding, holdingOf, instrumentText, sameInstrument } from './holdings.js';
import {
  actingParty,
  type InstrumentId,
  type Intent,
  type IntentProblemReason,
  type RecognisedAction,
} from './model.js';
import { REASON_KEY } from './recognise.js';
import { sameInstant } from './time.js';
import { inputContractsById } from './tree.js';
import {
  at,
  contractIdAt,
  instrumentAt,
  int64At,
  numericAt,
  partyAt,
  textAt,
  textEntry,
  timeAt,
} from './values.js';

export type Add = (reason: IntentProblemReason, message: string, where?: string) => void;

/** A create below the root that is not rolled back; `transient` when the same transaction consumes it. */
export interface Created {
  nodeId: string;
  node: CreateNode;
  transient: boolean;
}

// ---- holdings -------------------------------------------------------------------------------------------

interface HoldingRules {
  /** Who may own holdings the action creates. */
  owners: ReadonlySet<string>;
  /** The instrument every created holding must be of, when the action names one. */
  instrument: InstrumentId | undefined;
  /** Accept: the sender, who may get change (see `checkHoldings`). */
  changeTo?: string | undefined;
}

/** Per kind, from the intent (and for an instruction, the instruction it acts on); `undefined`: generic. */
function holdingRules(intent: Intent, a: RecognisedAction | undefined): HoldingRules | undefined {
  const none = new Set<string>();
  switch (intent.kind) {
    case 'transfer': {
      const offer = a?.transferKind === 'offer';
      // An offer credits the receiver nothing until accepted.
      const owners = new Set(offer ? [intent.sender] : [intent.sender, intent.receiver]);
      return { owners, instrument: intent.instrument };
    }
    case 'transfer-instruction-withdraw':
      // Only the sender (the withdrawing party) gets the locked holding back.
      return { owners: new Set([intent.party]), instrument: a?.instrument };
    case 'transfer-instruction-reject': {
      const sender = a?.parties.sender;
      return { owners: sender === undefined ? none : new Set([sender]), instrument: a?.instrument };
    }
    case 'transfer-instruction-accept':
      return { owners: new Set([intent.party]), instrument: a?.instrument, changeTo: a?.parties.sender };
    case 'allocation-allocate':
    case 'allocation-withdraw':
    case 'allocation-cancel':
      return { owners: new Set([intent.party]), instrument: intent.instrument ?? a?.instrument };
    case 'ans-entry-pay':
    case 'ans-renewal-pay':
    case 'ans-payment-expire':
      // The lock, the change and the unlocked Canton Coin are all the payer's own.
      return { owners: new Set([intent.party]), instrument: { admin: intent.dso, id: 'Amulet' } };
    case 'create':
    case 'exercise':
      return undefined;
    default:
      return { owners: none, instrument: undefined };
  }
}

interface Seen {
  nodeId: string;
  h: CreatedHolding;
  transient: boolean;
}

/**
 * Every holding created below the root belongs to a party the intent names
 * and is of the action's instrument; a direct transfer credits the receiver
 * exactly the amount; an offer or allocation locks exactly the amount; an
 * accept may return change to the sender only once the receiver is credited
 * the instruction's amount (holdings the transaction itself consumes again,
 * like the unlocked holding an accept passes on, are not change).
 */
export function checkHoldings(
  intent: Intent,
  a: RecognisedAction | undefined,
  created: readonly Created[],
  add: Add,
): void {
  const rules = holdingRules(intent, a);
  if (!rules) return;
  const seen: Seen[] = [];
  for (const c of created) {
    const h = holdingOf(c.node);
    if (h) seen.push({ nodeId: c.nodeId, h, transient: c.transient });
  }
  const amount = (s: Seen) => s.h.amount ?? 'an unreadable amount';
  // A holding of the root's own instrument, when that differs from the intent's, is the root's
  // mismatch (already reported): not reported again, and counted as the root says.
  const ofInstrument = (s: Seen) =>
    sameInstrument(s.h.instrument, rules.instrument) || sameInstrument(s.h.instrument, a?.instrument);

  // The receiver's credit decides whether the sender's holdings in an accept are change.
  const receiver = actingParty(intent);
  const credited =
    rules.changeTo !== undefined && a?.amounts.amount !== undefined
      ? total(seen.filter((s) => s.h.owner === receiver && !s.transient && ofInstrument(s) && !s.h.locked))
      : undefined;
  const isChange =
    credited !== undefined && a?.amounts.amount !== undefined && decimalEquals(credited, a.amounts.amount);

  for (const s of seen) {
    const where = `node ${s.nodeId}`;
    const { owner } = s.h;
    if (owner === undefined) {
      add(
        'unexplained_create',
        `node ${s.nodeId} creates ${withArticle(s.h.entity)} whose owner cannot be read; ${withArticle(intent.kind)} may create holdings only for ${partiesText([...rules.owners])}.`,
        where,
      );
      continue;
    }
    const toSender = owner === rules.changeTo && !rules.owners.has(owner);
    if (toSender && !s.transient && !isChange)
      add(
        'unexplained_create',
        `node ${s.nodeId} creates ${withArticle(s.h.entity)} of ${amount(s)} for the sender ${owner}, which is not change: the receiver is credited ${credited ?? 'nothing readable'} but the instruction says ${a?.amounts.amount ?? 'no amount'}.`,
        where,
      );
    else if (!toSender && !rules.owners.has(owner)) {
      add(
        'unexplained_create',
        `node ${s.nodeId} creates ${withArticle(s.h.entity)} of ${amount(s)} owned by ${owner}, who is not a party to the ${intent.kind}.`,
        where,
      );
      continue;
    }
    if (rules.instrument !== undefined && !ofInstrument(s))
      add(
        'instrument_mismatch',
        `node ${s.nodeId} creates ${withArticle(s.h.entity)} of ${instrumentText(s.h.instrument)} for ${owner} but the ${intent.kind} is for ${instrumentText(rules.instrument)}.`,
        where,
      );
  }

  const at = a === undefined ? 'root' : `node ${a.nodeId}`;
  const kept = seen.filter((s) => !s.transient && ofInstrument(s));
  if (intent.kind === 'transfer' && a?.transferKind === 'direct' && intent.sender !== intent.receiver) {
    const toReceiver = kept.filter((s) => s.h.owner === intent.receiver);
    for (const s of toReceiver.filter((x) => x.h.locked))
      add(
        'unexplained_create',
        `node ${s.nodeId} creates a locked ${s.h.entity} for ${intent.receiver}; a direct transfer credits the receiver unlocked holdings.`,
        `node ${s.nodeId}`,
      );
    expectTotal(
      toReceiver.filter((s) => !s.h.locked),
      intent.amount,
      a.amounts.amount,
      (t) =>
        t === undefined
          ? `the direct transfer creates no holding of ${instrumentText(intent.instrument)} for ${intent.receiver}; the intent says ${intent.amount}.`
          : `the direct transfer creates ${t} for ${intent.receiver} but the intent says ${intent.amount}.`,
      `${at}: receiver holdings`,
      add,
    );
  }
  const locks =
    (intent.kind === 'transfer' && a?.transferKind === 'offer') || intent.kind === 'allocation-allocate';
  if (locks) {
    const locked = kept.filter((s) => s.h.locked && s.h.owner === actingParty(intent));
    const what = intent.kind === 'transfer' ? 'the offer' : 'the allocation';
    expectTotal(
      locked,
      intent.amount,
      a?.amounts.amount,
      (t) =>
        t === undefined
          ? `${what} locks no holding of ${instrumentText(intent.instrument)}; the intent says ${intent.amount}.`
          : `${what} locks ${t} of ${actingParty(intent)}'s holdings but the intent says ${intent.amount}.`,
      `${at}: locked holdings`,
      add,
    );
  }
}

function total(xs: readonly Seen[]): string | undefined {
  if (xs.some((s) => s.h.amount === undefined)) return undefined;
  return addDecimals(xs.map((s) => s.h.amount!));
}

/** `root`: the root's amount; a total equal to it is the root's mismatch, already reported. */
function expectTotal(
  xs: readonly Seen[],
  expected: string,
  root: string | undefined,
  message: (total: string | undefined) => string,
  where: string,
  add: Add,
): void {
  const unreadable = xs.filter((s) => s.h.amount === undefined);
  if (unreadable.length > 0) {
    add(
      'amount_mismatch',
      `the amount of the ${unreadable[0]!.h.entity} at node ${unreadable[0]!.nodeId} cannot be read; the intent says ${expected}.`,
      where,
    );
    return;
  }
  const t = xs.length === 0 ? undefined : total(xs);
  if (t !== undefined && root !== undefined && decimalEquals(t, root)) return;
  if (t === undefined || !decimalEquals(t, expected)) add('amount_mismatch', message(t), where);
}

/** The instrument an intent spends holdings of: its own, or Canton Coin of its DSO for name-service payments. */
function spentInstrument(intent: Intent): InstrumentId | undefined {
  switch (intent.kind) {
    case 'transfer':
    case 'allocation-allocate':
      return intent.instrument;
    case 'ans-entry-pay':
    case 'ans-renewal-pay':
      return { admin: intent.dso, id: 'Amulet' };
    default:
      return undefined;
  }
}

/** Consumed inputs disclosed in the metadata must be holdings of the party, of the intent's instrument. */
export function checkInputs(
  tx: DecodedTransaction,
  intent: Intent,
  a: RecognisedAction,
  cids: readonly string[],
  at: string,
  add: Add,
): void {
  const instrument = spentInstrument(intent);
  if (!instrument) return;
  const owner = actingParty(intent);
  const disclosed = inputContractsById(tx);
  for (const cid of cids) {
    const c = disclosed.get(cid);
    if (!c) continue;
    const h = holdingOf(c);
    if (!h)
      add(
        'inputs_mismatch',
        `input ${cid} is ${withArticle(templateName(c.packageName, c.templateId))}, not a holding.`,
        `${at}: inputs`,
      );
    else if (h.owner !== owner)
      add(
        'inputs_mismatch',
        `input ${cid} is a holding of ${h.owner ?? 'an unreadable owner'} but the intent spends ${owner}'s holdings.`,
        `${at}: inputs`,
      );
    else if (!sameInstrument(h.instrument, instrument) && !sameInstrument(h.instrument, a.instrument))
      add(
        'instrument_mismatch',
        `input ${cid} is a holding of ${instrumentText(h.instrument)} but the intent says ${instrumentText(instrument)}.`,
        `${at}: inputs`,
      );
  }
}

// ---- kind-specific creates --------------------------------------------------------------------------------

/**
 * Compares a party / decimal / instant / text read from a created contract
 * with the intent. `root` is the root's own reading of the same field: a
 * contract that repeats the root is not reported again (the root's mismatch
 * already is), so each difference is reported once, where it is.
 */
function fieldChecker(nodeId: string, what: string, v: Value, add: Add) {
  const where = (f: string) => `node ${nodeId}: ${f}`;
  return {
    party(path: string, expected: string, root?: string) {
      const found = partyAt(v, path);
      if (found !== expected && (found === undefined || found !== root))
        add(
          'party_mismatch',
          `the ${what} at node ${nodeId} names ${found ?? 'no party'} as ${path} but the intent says ${expected}.`,
          where(path),
        );
    },
    amount(path: string, expected: string, root?: string) {
      const found = numericAt(v, path);
      if (found !== undefined && root !== undefined && decimalEquals(found, root)) return;
      if (found === undefined || !decimalEquals(found, expected))
        add(
          'amount_mismatch',
          `the ${what} at node ${nodeId} has ${path} ${found ?? '(none)'} but the intent says ${expected}.`,
          where(path),
        );
    },
    instrument(path: string, expected: InstrumentId, root?: InstrumentId) {
      const found = instrumentAt(v, path);
      if (!sameInstrument(found, expected) && !sameInstrument(found, root))
        add(
          'instrument_mismatch',
          `the ${what} at node ${nodeId} is for ${instrumentText(found)} but the intent says ${instrumentText(expected)}.`,
          where(path),
        );
    },
    time(path: string, expected: string, root?: string) {
      const found = timeAt(v, path);
      if (found !== undefined && root !== undefined && sameInstant(found, root)) return;
      if (found === undefined || !sameInstant(found, expected))
        add(
          'deadline_mismatch',
          `the ${what} at node ${nodeId} has ${path} ${found ?? '(none)'} but the intent says ${expected}.`,
          where(path),
        );
    },
    text(path: string, expected: string | undefined, found: string | undefined, root: string | undefined) {
      if ((found ?? '') === (expected ?? '') || (found ?? '') === (root ?? '')) return;
      add(
        'memo_mismatch',
        expected === undefined
          ? `the ${what} at node ${nodeId} carries ${path} ${JSON.stringify(found)} but the intent gives none.`
          : `the ${what} at node ${nodeId} carries ${path} ${JSON.stringify(found ?? '')} but the intent says ${JSON.stringify(expected)}.`,
        where(path),
      );
    },
  };
}

export function exactlyOne(
  created: readonly Created[],
  match: (c: Created) => boolean,
  what: string,
  kind: string,
  at: string,
  add: Add,
): Created | undefined {
  const found = created.filter(match);
  if (found.length !== 1)
    add(
      'unexplained_create',
      found.length === 0
        ? `the ${kind} creates no ${what}; it must create exactly one.`
        : `the ${kind} creates ${found.length} ${what}s (nodes ${found.map((c) => c.nodeId).join(', ')}); it must create exactly one.`,
      at,
    );
  return found.length === 1 ? found[0] : undefined;
}

/** An offer creates exactly one transfer instruction, for the intent's transfer; other transfers none. */
export function checkInstructions(
  intent: Intent & { kind: 'transfer' },
  a: RecognisedAction,
  created: readonly Created[],
  add: Add,
): void {
  const at = `node ${a.nodeId}`;
  const isInstruction = (c: Created) => isInstructionEntity(c.node.templateId.entityName);
  if (a.transferKind !== 'offer') {
    for (const c of created.filter(isInstruction))
      add(
        'unexplained_create',
        `node ${c.nodeId} creates a transfer instruction (${templateName(c.node.packageName, c.node.templateId)}) but the transfer is ${withArticle(a.transferKind ?? 'transfer of no recognisable kind')}.`,
        `node ${c.nodeId}`,
      );
    return;
  }
  const one = exactlyOne(created, isInstruction, 'transfer instruction', 'offer', `${at}: instructions`, add);
  if (!one) return;
  const v = one.node.argument;
  const f = fieldChecker(one.nodeId, 'transfer instruction', v, add);
  f.party('transfer.sender', intent.sender, a.parties.sender);
  f.party('transfer.receiver', intent.receiver, a.parties.receiver);
  f.amount('transfer.amount', intent.amount, a.amounts.amount);
  f.instrument('transfer.instrumentId', intent.instrument, a.instrument);
  f.text('reason', intent.memo, textEntry(v, 'transfer.meta.values', REASON_KEY), a.memo);
  checkMetaValues(
    v,
    'transfer.meta.values',
    `the transfer instruction at node ${one.nodeId}`,
    add,
    `node ${one.nodeId}`,
    'reason-compared',
  );
}

/**
 * The metadata text an intent states for one `meta.values` map, key → exact
 * text; or `reason-compared` where the caller compares the reason entry
 * (REASON_KEY) with the intent's memo itself and states nothing else.
 */
export type StatedMeta = 'reason-compared' | Readonly<Record<string, string>>;

/**
 * Metadata entries at `path` with a non-empty value that the intent does not
 * state (`stated`; the reason is an entry like any other): text the party
 * did not ask to sign. One `memo_mismatch` per entry.
 */
export function checkMetaValues(
  v: Value | undefined,
  path: string,
  what: string,
  add: Add,
  where: string,
  stated: StatedMeta,
): void {
  const m = at(v, path);
  if (m?.kind !== 'textMap') return;
  for (const e of m.entries) {
    const x = e.value.kind === 'optional' ? e.value.value : e.value;
    if (x === undefined || (x.kind === 'text' && x.value === '')) continue;
    if (stated === 'reason-compared' && e.key === REASON_KEY) continue;
    const want = stated !== 'reason-compared' && Object.hasOwn(stated, e.key) ? stated[e.key] : undefined;
    if (want !== undefined && x.kind === 'text' && x.value === want) continue;
    const shown = x.kind === 'text' ? JSON.stringify(x.value) : withArticle(x.kind);
    add(
      'memo_mismatch',
      want === undefined
        ? `${what} carries the metadata entry ${JSON.stringify(e.key)} (${shown}), which the intent does not ask for.`
        : `${what} carries the metadata entry ${JSON.stringify(e.key)} (${shown}), but the intent says ${JSON.stringify(want)}.`,
      `${where}: ${path}`,
    );
  }
}

/**
 * A preapproval send creates exactly one TransferCommand, of the intent's fields, under one DSO:
 * the intent's when it names one (taken from Scan, never from the transaction), else the
 * transaction's own `expectedDso`.
 */
export function checkTransferCommand(
  tx: DecodedTransaction,
  intent: Intent & { kind: 'preapproval-send' },
  a: RecognisedAction,
  root: ExerciseNode,
  created: readonly Created[],
  add: Add,
): void {
  const at = `node ${a.nodeId}`;
  const expectedDso = partyAt(root.chosenValue, 'expectedDso');
  const rulesDso = partyAt(inputContractsById(tx).get(root.contractId)?.argument, 'dso');
  if (expectedDso === undefined)
    add(
      'party_mismatch',
      'the transaction does not name the expected DSO of the preapproval send.',
      `${at}: expectedDso`,
    );
  else {
    if (intent.dso !== undefined && expectedDso !== intent.dso)
      add(
        'party_mismatch',
        `the send expects the DSO ${expectedDso} but the DSO is ${intent.dso}.`,
        `${at}: expectedDso`,
      );
    if (rulesDso !== undefined && rulesDso !== expectedDso)
      add(
        'party_mismatch',
        `the ExternalPartyAmuletRules exercised belongs to ${rulesDso} but the send expects the DSO ${expectedDso}.`,
        `${at}: expectedDso`,
      );
  }
  const one = exactlyOne(
    created,
    (c) => c.node.templateId.entityName === 'TransferCommand',
    'TransferCommand',
    'preapproval send',
    `${at}: TransferCommand`,
    add,
  );
  if (!one) return;
  const v = one.node.argument;
  const f = fieldChecker(one.nodeId, 'TransferCommand', v, add);
  f.party('sender', intent.sender, a.parties.sender);
  f.party('receiver', intent.receiver, a.parties.receiver);
  f.amount('amount', intent.amount, a.amounts.amount);
  f.time('expiresAt', intent.expiresAt, a.deadlines.expiresAt);
  f.text('description', intent.description, textAt(v, 'description'), a.memo);
  const delegate = intent.delegate ?? a.parties.delegate;
  if (delegate !== undefined) f.party('delegate', delegate, a.parties.delegate);
  // A TransferCommand under the transaction's expectedDso differs from the intent's only as that
  // expectedDso does, reported above.
  const dso = intent.dso ?? expectedDso;
  if (dso !== undefined) f.party('dso', dso, expectedDso);
  const nonce = int64At(v, 'nonce');
  if (nonce !== BigInt(intent.nonce) && (nonce === undefined || nonce.toString() !== a.nonce))
    add(
      'nonce_mismatch',
      `the TransferCommand at node ${one.nodeId} has nonce ${nonce ?? '(none)'} but the intent says ${intent.nonce}.`,
      `node ${one.nodeId}: nonce`,
    );
}

/**
 * A setup acceptance creates exactly one TransferPreapproval and one
 * ValidatorRight, for the party, the intent's validator (else the proposal's)
 * and the intent's DSO (else the proposal's). A proposal naming another
 * validator or DSO than the intent is reported once, here for the DSO and by
 * the field comparison for the validator; creates repeating the proposal's
 * party are not reported again.
 */
export function checkSetupCreates(
  tx: DecodedTransaction,
  intent: Intent & { kind: 'setup-proposal-accept' },
  a: RecognisedAction,
  root: ExerciseNode,
  created: readonly Created[],
  add: Add,
): void {
  const at = `node ${a.nodeId}`;
  const proposal = inputContractsById(tx).get(root.contractId)?.argument;
  const proposed = partyAt(proposal, 'validator');
  const validator = intent.validator ?? proposed;
  const proposedDso = partyAt(proposal, 'dso');
  const dso = intent.dso ?? proposedDso;
  if (intent.dso !== undefined && proposal !== undefined && proposedDso !== intent.dso)
    add(
      'party_mismatch',
      `the setup proposal names ${proposedDso ?? 'no party'} as dso but the DSO is ${intent.dso}.`,
      `${at}: dso`,
    );
  if (validator === undefined)
    add(
      'party_mismatch',
      'the setup proposal is not among the input contracts and the intent names no validator, so the validator cannot be confirmed.',
      `${at}: validator`,
    );
  const roles: [string, string, string][] = [
    ['TransferPreapproval', 'receiver', 'provider'],
    ['ValidatorRight', 'user', 'validator'],
  ];
  for (const [entity, userRole, validatorRole] of roles) {
    const one = exactlyOne(
      created,
      (c) => c.node.templateId.entityName === entity,
      entity,
      'setup acceptance',
      `${at}: ${entity}`,
      add,
    );
    if (!one) continue;
    const f = fieldChecker(one.nodeId, entity, one.node.argument, add);
    f.party(userRole, intent.party);
    if (validator !== undefined) f.party(validatorRole, validator, proposed);
    if (dso !== undefined) f.party('dso', dso, proposedDso);
  }
}

/** An allocate creates exactly one allocation, whose specification is the intent's. */
export function checkAllocationCreated(
  intent: Intent & { kind: 'allocation-allocate' },
  a: RecognisedAction,
  root: Value | undefined,
  created: readonly Created[],
  add: Add,
): void {
  const one = exactlyOne(
    created,
    (c) => c.node.templateId.entityName.endsWith('Allocation'),
    'allocation',
    'allocation',
    `node ${a.nodeId}: allocation`,
    add,
  );
  if (!one) return;
  const v = one.node.argument;
  checkAllocationSpec(
    v,
    'allocation',
    intent,
    `the allocation at node ${one.nodeId}`,
    `node ${one.nodeId}`,
    add,
    root,
  );
}

/**
 * The allocation specification at `path` (a choice argument or an allocation
 * contract) against the intent. `root`: the root's argument, whose
 * `allocation` a created allocation repeats (a field equal to the root's is
 * the root's mismatch, already reported).
 */
export function checkAllocationSpec(
  v: Value | undefined,
  path: string,
  intent: Intent & { kind: 'allocation-allocate' },
  what: string,
  where: string,
  add: Add,
  root?: Value,
): void {
  const leg = `${path}.transferLeg`;
  const settlement = `${path}.settlement`;
  const asRoot = (field: string) =>
    root !== undefined &&
    JSON.stringify(valueAt(root, `allocation${field.slice(path.length)}`)) ===
      JSON.stringify(valueAt(v, field));
  const mismatch = (
    reason: IntentProblemReason,
    field: string,
    found: string | undefined,
    expected: string,
  ) => {
    if (found !== undefined && asRoot(field)) return;
    add(
      reason,
      `${what} has ${field} ${found ?? '(none)'} but the intent says ${expected}.`,
      `${where}: ${field}`,
    );
  };
  const party = (field: string, expected: string) => {
    const found = partyAt(v, field);
    if (found !== expected) mismatch('party_mismatch', field, found, expected);
  };
  party(`${leg}.sender`, intent.party);
  party(`${leg}.receiver`, intent.receiver);
  party(`${settlement}.executor`, intent.executor);
  const amount = numericAt(v, `${leg}.amount`);
  if (amount === undefined || !decimalEquals(amount, intent.amount))
    mismatch('amount_mismatch', `${leg}.amount`, amount, intent.amount);
  const instrument = instrumentAt(v, `${leg}.instrumentId`);
  if (!sameInstrument(instrument, intent.instrument))
    mismatch(
      'instrument_mismatch',
      `${leg}.instrumentId`,
      instrument && instrumentText(instrument),
      instrumentText(intent.instrument),
    );
  const refId = textAt(v, `${settlement}.settlementRef.id`);
  if (refId !== intent.settlementRef.id)
    mismatch('contract_mismatch', `${settlement}.settlementRef.id`, refId, intent.settlementRef.id);
  const refCid = contractIdAt(v, `${settlement}.settlementRef.cid`);
  if (refCid !== intent.settlementRef.cid)
    mismatch(
      'contract_mismatch',
      `${settlement}.settlementRef.cid`,
      refCid,
      intent.settlementRef.cid ?? 'none',
    );
  if (intent.transferLegId !== undefined) {
    const legId = textAt(v, `${path}.transferLegId`);
    if (legId !== intent.transferLegId)
      mismatch('contract_mismatch', `${path}.transferLegId`, legId, intent.transferLegId);
  }
}

/** A value for comparison (bigints as strings), `undefined` when absent. */
function valueAt(v: Value | undefined, path: string): unknown {
  const x = at(v, path);
  return x === undefined
    ? undefined
    : JSON.parse(JSON.stringify(x, (_k, y) => (typeof y === 'bigint' ? y.toString() : y)));
}

/** Parties for a message: comma-separated, or "no party". */
export function partiesText(xs: readonly string[]): string {
  return xs.length === 0 ? 'no party' : xs.join(', ');
}

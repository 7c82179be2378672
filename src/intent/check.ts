/**
 * The intent check: does a decoded transaction do exactly what the caller's
 * intent says, and nothing else for the signing party? Returns the recognised
 * actions and every problem found (not only the first), each a sentence for a
 * person naming what was expected and what the transaction holds.
 *
 * Rules: act_as is exactly the signing party; exactly one root; the root is
 * the intent's kind of action with the intent's fields (decimals compared
 * numerically, instants exactly); every exercise below it acting for the party
 * is one the action explains (src/intent/allow.ts), consuming only declared
 * inputs or contracts created in the same transaction; every contract it
 * creates for the party is of a template the action explains; holdings it
 * creates belong to the parties the intent names, in the intent's instrument;
 * and what the action creates matches the intent (src/intent/effects.ts): a
 * direct transfer credits exactly the amount, an offer creates one instruction
 * and locks exactly the amount, a send one TransferCommand, and so on. Text
 * the intent does not state (a memo, other metadata) is refused.
 *
 * Name-service actions (src/intent/ans.ts for what they create): a request is
 * on the intent's AnsRules for the party, for the entry named; a payment is
 * the party's own (sender and wallet provider) to the intent's DSO, of the
 * intent's target amount in that DSO's Canton Coin, locking at least that and
 * at most `maxAmount`, spending only Amulets (exactly the intent's, when it
 * lists them), for the entry named and (renewals) the due date given; an
 * expiry is the party's, on the intent's payment, for that DSO and entry.
 *
 * One file on purpose: it is the check's driver — the rules on the root and the
 * walk below it, sharing one context and one problem list; what each kind
 * creates (effects.ts), the exercises an action explains (allow.ts) and the
 * name-service records (ans.ts) are already beside it.
 */

import type { DecodedTransaction, NodeBody } from '../hashing/model.js';
import { templateName } from '../hashing/render.js';
import { withArticle } from '../text/english.js';
import { ALLOWED_CONSEQUENCES, ALLOWED_CREATES, templateKey, VALUE_MOVING_CHOICES } from './allow.js';
import { checkAnsExpire, checkAnsPayment, checkAnsRequest } from './ans.js';
import { compareDecimals, decimalEquals } from './decimal.js';
import {
  type Created,
  checkAllocationCreated,
  checkAllocationSpec,
  checkHoldings,
  checkInputs,
  checkInstructions,
  checkMetaValues,
  checkSetupCreates,
  checkTransferCommand,
  partiesText,
} from './effects.js';
import { HOLDING_ENTITIES } from './holdings.js';
import {
  actingParty,
  type Intent,
  type IntentProblem,
  type IntentProblemReason,
  type RecognisedAction,
} from './model.js';
import { REASON_KEY, recogniseActions, transferInputsAt } from './recognise.js';
import { parseInstantMicros, sameInstant } from './time.js';
import { descendants, type Visited } from './tree.js';
import { partyAt } from './values.js';

export interface IntentCheckResult {
  actions: RecognisedAction[];
  problems: IntentProblem[];
}

type Add = (reason: IntentProblemReason, message: string, where?: string) => void;

export function checkIntent(tx: DecodedTransaction, intent: Intent): IntentCheckResult {
  const actions = recogniseActions(tx);
  const problems: IntentProblem[] = [];
  const add: Add = (reason, message, where) =>
    problems.push(where === undefined ? { reason, message } : { reason, message, where });
  const party = actingParty(intent);

  const actAs = tx.metadata.submitterInfo.actAs;
  if (actAs.length !== 1 || actAs[0] !== party)
    add(
      'act_as_mismatch',
      `the transaction acts as ${partiesText(actAs)} but the intent is signed for ${party} alone.`,
      'metadata.act_as',
    );

  const roots = tx.transaction.roots;
  if (roots.length === 0) add('root_count', 'the transaction has no root action; the intent asks for one.');
  for (const extra of roots.slice(1))
    add(
      'root_count',
      `node ${extra} is an extra root action (${describe(tx.nodeById.get(extra))}); the intent allows exactly one root action.`,
      `node ${extra}`,
    );

  const rootId = roots[0];
  const action = rootId === undefined ? undefined : actions.find((a) => a.nodeId === rootId);
  let matched: RecognisedAction | undefined;
  if (rootId !== undefined) {
    if (!action)
      add(
        'unrecognised_action',
        `the root node ${rootId} is ${describe(tx.nodeById.get(rootId))}, not an action the signer recognises.`,
        `node ${rootId}`,
      );
    else if (action.kind !== intent.kind) {
      const generic = action.kind === 'create' || action.kind === 'exercise';
      add(
        generic && intent.kind !== 'create' && intent.kind !== 'exercise'
          ? 'unrecognised_action'
          : 'kind_mismatch',
        `the root node ${rootId} is ${generic ? describe(tx.nodeById.get(rootId)) : withArticle(action.kind)} but the intent asks for ${withArticle(intent.kind)}.`,
        `node ${rootId}`,
      );
    } else {
      matched = action;
      compareFields(tx, action, intent, add);
    }
  }
  checkConsequences(tx, intent, matched, add);
  return { actions, problems };
}

// ---- messages ------------------------------------------------------------------------------------------

function describe(n: NodeBody | undefined): string {
  if (!n) return 'a missing node';
  switch (n.type) {
    case 'create':
      return `a create of ${templateName(n.packageName, n.templateId)}`;
    case 'exercise':
      return `an exercise of ${n.choiceId} on ${templateName(n.packageName, n.templateId)}`;
    case 'fetch':
      return `a fetch of ${templateName(n.packageName, n.templateId)}`;
    case 'rollback':
      return 'a rollback node';
    case 'queryByKey':
      return `a key lookup of ${templateName(n.packageName, n.templateId)}`;
  }
}

// ---- field comparison -----------------------------------------------------------------------------------

function compareFields(tx: DecodedTransaction, a: RecognisedAction, intent: Intent, add: Add): void {
  const at = `node ${a.nodeId}`;
  const party = (role: string, expected: string, found = a.parties[role]) => {
    if (found === expected) return;
    add(
      'party_mismatch',
      found === undefined
        ? `the transaction does not name the ${role}; the intent says ${expected}.`
        : `${role} is ${found} but the intent says ${expected}.`,
      `${at}: ${role}`,
    );
  };
  const amount = (expected: string, role = 'amount') => {
    const found = a.amounts[role];
    if (found !== undefined && decimalEquals(found, expected)) return;
    add(
      'amount_mismatch',
      found === undefined
        ? `the transaction does not state the ${role}; the intent says ${expected}.`
        : `${role} is ${found} but the intent says ${expected}.`,
      `${at}: ${role}`,
    );
  };
  const instrument = (expected: { admin: string; id: string }) => {
    const found = a.instrument;
    if (found && found.admin === expected.admin && found.id === expected.id) return;
    add(
      'instrument_mismatch',
      found === undefined
        ? `the transaction does not name the instrument; the intent says ${expected.id} (admin ${expected.admin}).`
        : `the instrument is ${found.id} (admin ${found.admin}) but the intent says ${expected.id} (admin ${expected.admin}).`,
      `${at}: instrument`,
    );
  };
  const deadline = (role: string, expected: string) => {
    const found = a.deadlines[role];
    if (found !== undefined && sameInstant(found, expected)) return;
    add(
      'deadline_mismatch',
      found === undefined
        ? `the transaction does not state ${role}; the intent says ${expected}.`
        : `${role} is ${found} but the intent says ${expected}.`,
      `${at}: ${role}`,
    );
  };
  const memo = (expected: string | undefined, role = 'memo') => {
    if ((a.memo ?? '') === (expected ?? '')) return;
    // A party must not sign text it did not ask for: no memo in the intent means none (or empty) in the transaction.
    if (expected === undefined) {
      add(
        'memo_mismatch',
        `the ${role} is ${JSON.stringify(a.memo)} but the intent gives none.`,
        `${at}: ${role}`,
      );
      return;
    }
    add(
      'memo_mismatch',
      a.memo === undefined
        ? `the transaction carries no ${role}; the intent says ${JSON.stringify(expected)}.`
        : `the ${role} is ${JSON.stringify(a.memo)} but the intent says ${JSON.stringify(expected)}.`,
      `${at}: ${role}`,
    );
  };
  const contract = (expected: string, what: string) => {
    if (a.contractId === expected) return;
    add(
      'contract_mismatch',
      `the transaction acts on ${what} ${a.contractId ?? '(none)'} but the intent says ${expected}.`,
      `${at}: contract`,
    );
  };
  const root = tx.nodeById.get(a.nodeId);
  const expectedAdmin = (expected: string) => {
    const found = root?.type === 'exercise' ? partyAt(root.chosenValue, 'expectedAdmin') : undefined;
    // Equal to the root's own instrument admin: any difference from the intent is the instrument's, reported there.
    if (found !== undefined && (found === expected || found === a.instrument?.admin)) return;
    add(
      'instrument_mismatch',
      `the factory is called with expectedAdmin ${found ?? '(none)'} but the instrument's admin is ${expected}.`,
      `${at}: expectedAdmin`,
    );
  };
  /** Metadata text in the root choice's `extraArgs` (token-standard choices): none, as the intent states none. */
  const extraArgsMeta = (what: string, stated: Record<string, string> = {}) => {
    if (root?.type === 'exercise')
      checkMetaValues(root.chosenValue, 'extraArgs.meta.values', what, add, at, stated);
  };
  /** The action's `expiresAt` strictly after `after` and no later than `notAfter`. */
  const expiryWithin = (after: string, notAfter: string) => {
    const found = a.deadlines.expiresAt;
    const t = found === undefined ? undefined : parseInstantMicros(found);
    const lo = parseInstantMicros(after);
    const hi = parseInstantMicros(notAfter);
    if (t !== undefined && lo !== undefined && hi !== undefined && t > lo && t <= hi) return;
    add(
      'deadline_mismatch',
      found === undefined
        ? `the transaction does not state expiresAt; the intent wants it after ${after} and no later than ${notAfter}.`
        : `expiresAt is ${found} but the intent wants it after ${after} and no later than ${notAfter}.`,
      `${at}: expiresAt`,
    );
  };
  const acting = (p: string) => {
    if (a.actingParties.includes(p)) return;
    add(
      'party_mismatch',
      `the root action acts as ${partiesText(a.actingParties)}, not as the signing party ${p}.`,
      `${at}: acting parties`,
    );
  };

  /** The name-service entry the action is for. */
  const entryName = (expected: string) => {
    if (a.name === expected) return;
    add(
      'memo_mismatch',
      a.name === undefined
        ? `the transaction names no entry; the intent says ${JSON.stringify(expected)}.`
        : `the entry is ${JSON.stringify(a.name)} but the intent says ${JSON.stringify(expected)}.`,
      `${at}: name`,
    );
  };
  /** A payment's lock: at least what the DSO collects, at most what the intent allows. */
  const lockWithin = (target: string, max: string) => {
    const found = a.amounts.amount;
    if (found === undefined) {
      add(
        'amount_mismatch',
        `the transaction locks no readable amount; the intent allows up to ${max}.`,
        `${at}: amount`,
      );
      return;
    }
    if ((compareDecimals(found, max) ?? 1) > 0)
      add(
        'amount_mismatch',
        `the payment locks ${found} but the intent allows at most ${max}.`,
        `${at}: amount`,
      );
    else if ((compareDecimals(found, target) ?? -1) < 0)
      add(
        'amount_mismatch',
        `the payment locks ${found}, less than the ${target} the DSO collects.`,
        `${at}: amount`,
      );
  };
  /** When the intent lists inputs, the action consumes exactly those. */
  const sameInputs = (expected: readonly string[] | undefined) => {
    if (expected === undefined) return;
    const found = a.inputs ?? [];
    const want = new Set(expected);
    const have = new Set(found);
    if (want.size !== have.size || [...want].some((c) => !have.has(c)))
      add(
        'inputs_mismatch',
        `the ${a.kind === 'transfer' ? 'transfer' : 'payment'} consumes ${found.length === 0 ? 'no declared holdings' : found.join(', ')} but the intent says ${expected.join(', ')}.`,
        `${at}: inputs`,
      );
  };

  switch (intent.kind) {
    case 'transfer': {
      acting(intent.sender);
      party('sender', intent.sender);
      party('receiver', intent.receiver);
      amount(intent.amount);
      instrument(intent.instrument);
      expectedAdmin(intent.instrument.admin);
      memo(intent.memo);
      if (root?.type === 'exercise') {
        // The reason in transfer.meta is the memo compared above; anywhere else it may only repeat it.
        checkMetaValues(root.chosenValue, 'transfer.meta.values', 'the transfer', add, at, 'reason-compared');
        checkMetaValues(
          root.chosenValue,
          'extraArgs.meta.values',
          'the transfer',
          add,
          at,
          intent.memo === undefined ? {} : { [REASON_KEY]: intent.memo },
        );
      }
      checkInputs(tx, intent, a, intent.inputs ?? a.inputs ?? [], at, add);
      if (intent.executeBefore !== undefined) deadline('executeBefore', intent.executeBefore);
      sameInputs(intent.inputs);
      if (intent.transferKind !== undefined && a.transferKind !== intent.transferKind)
        add(
          'transfer_kind_mismatch',
          `the transfer is ${a.transferKind === undefined ? 'of no recognisable kind' : `${withArticle(a.transferKind)} transfer`} but the intent asks for ${withArticle(intent.transferKind)} transfer.`,
          `${at}: transfer kind`,
        );
      return;
    }
    case 'transfer-instruction-accept':
    case 'transfer-instruction-reject':
    case 'transfer-instruction-withdraw': {
      acting(intent.party);
      contract(intent.instructionCid, 'transfer instruction');
      // Only the receiver accepts or rejects; only the sender withdraws (when the instruction is disclosed).
      const role = intent.kind === 'transfer-instruction-withdraw' ? 'sender' : 'receiver';
      if (a.parties[role] !== undefined) party(role, intent.party);
      // The instruction's own reason is the sender's, signed before; text added by this choice is refused.
      extraArgsMeta(`the ${a.choice ?? 'choice'}`);
      return;
    }
    case 'preapproval-send':
      acting(intent.sender);
      party('sender', intent.sender);
      party('receiver', intent.receiver);
      amount(intent.amount);
      deadline('expiresAt', intent.expiresAt);
      memo(intent.description, 'description');
      if (intent.delegate !== undefined) party('delegate', intent.delegate);
      if (a.nonce !== String(intent.nonce))
        add(
          'nonce_mismatch',
          a.nonce === undefined
            ? `the transaction carries no nonce; the intent says ${intent.nonce}.`
            : `the nonce is ${a.nonce} but the intent says ${intent.nonce}.`,
          `${at}: nonce`,
        );
      return;
    case 'setup-proposal-accept':
      acting(intent.party);
      contract(intent.proposalCid, 'setup proposal');
      party('user', intent.party);
      if (intent.validator !== undefined) party('validator', intent.validator);
      if (intent.expires !== undefined) expiryWithin(intent.expires.after, intent.expires.notAfter);
      return;
    case 'preapproval-proposal': {
      party('receiver', intent.receiver);
      party('provider', intent.provider);
      if (intent.expectedDso !== undefined) party('expectedDso', intent.expectedDso);
      const sigs = a.signatories ?? [];
      if (sigs.length !== 1 || sigs[0] !== intent.receiver)
        add(
          'party_mismatch',
          `the proposal is signed by ${partiesText(sigs)} but the intent says ${intent.receiver} alone.`,
          `${at}: signatories`,
        );
      return;
    }
    case 'allocation-allocate': {
      acting(intent.party);
      expectedAdmin(intent.instrument.admin);
      // Sender, receiver, executor, amount, instrument and settlement reference, read from the argument.
      const v = root?.type === 'exercise' ? root.chosenValue : undefined;
      checkAllocationSpec(v, 'allocation', intent, 'the allocation requested', at, add);
      // Metadata text in the leg and the settlement (the reason included) only as the intent states it.
      for (const path of ['allocation.transferLeg.meta.values', 'allocation.settlement.meta.values'])
        checkMetaValues(v, path, 'the allocation requested', add, at, intent.meta ?? {});
      extraArgsMeta('the allocation requested');
      checkInputs(tx, intent, a, a.inputs ?? [], at, add);
      return;
    }
    case 'allocation-withdraw':
    case 'allocation-cancel':
    case 'allocation-request-reject':
    case 'allocation-request-withdraw': {
      acting(intent.party);
      contract(intent.contractId, 'contract');
      if (a.parties.sender !== undefined) party('sender', intent.party);
      if (a.parties.actor !== undefined) party('actor', intent.party);
      if (intent.amount !== undefined) amount(intent.amount);
      if (intent.instrument !== undefined) instrument(intent.instrument);
      // Text this choice adds (a reason for rejecting, say) only as the intent states it.
      extraArgsMeta(`the ${a.choice ?? 'choice'}`, intent.meta ?? {});
      return;
    }
    case 'ans-entry-request':
      acting(intent.party);
      contract(intent.ansRulesCid, 'AnsRules');
      party('user', intent.party);
      // The DSO of the AnsRules exercised, when the transaction discloses the contract.
      if (a.parties.dso !== undefined) party('dso', intent.dso);
      entryName(intent.name);
      return;
    case 'ans-entry-pay':
    case 'ans-renewal-pay': {
      const renewal = intent.kind === 'ans-renewal-pay';
      acting(intent.party);
      contract(intent.contractId, renewal ? 'subscription idle state' : 'subscription request');
      party('sender', intent.party);
      party('receiver', intent.dso);
      // Interactive submission is single-party: the wallet provider (who earns the lock's app reward) is the party.
      party('walletProvider', intent.party);
      instrument({ admin: intent.dso, id: 'Amulet' });
      amount(intent.targetAmount, 'targetAmount');
      lockWithin(intent.targetAmount, intent.maxAmount);
      entryName(intent.name);
      if (renewal) {
        if (intent.dueAt !== undefined) deadline('dueAt', intent.dueAt);
      } else if (intent.dueAt !== undefined)
        add(
          'deadline_mismatch',
          `the intent gives the due date ${intent.dueAt}, but a first payment pays no due date; only a renewal does.`,
          `${at}: dueAt`,
        );
      const v = root?.type === 'exercise' ? root.chosenValue : undefined;
      for (const other of (transferInputsAt(v, 'inputs') ?? []).filter((i) => i.tag !== 'InputAmulet'))
        add(
          'inputs_mismatch',
          `the payment spends ${withArticle(other.tag)} ${other.contractId ?? ''}; a name-service payment is signed only when it spends Amulets.`,
          `${at}: inputs`,
        );
      sameInputs(intent.inputs);
      checkInputs(tx, intent, a, intent.inputs ?? a.inputs ?? [], at, add);
      return;
    }
    case 'ans-payment-expire':
      acting(intent.party);
      contract(intent.contractId, 'subscription payment');
      party('actor', intent.party);
      party('dso', intent.dso);
      entryName(intent.name);
      return;
    case 'exercise': {
      const n = tx.nodeById.get(a.nodeId);
      if (n?.type === 'exercise') {
        if (!templateMatches(intent.template, n))
          add(
            'kind_mismatch',
            `the root exercises a choice of ${a.template} but the intent names ${intent.template}.`,
            `${at}: template`,
          );
        if (n.choiceId !== intent.choice)
          add(
            'kind_mismatch',
            `the root exercises ${n.choiceId} but the intent names ${intent.choice}.`,
            `${at}: choice`,
          );
        // A generic intent names no receiver, amount or inputs: a choice that moves value (of a
        // package this signer does not recognise) would be signed with whatever arguments it has.
        if (VALUE_MOVING_CHOICES.has(n.choiceId))
          add(
            'kind_mismatch',
            `the root exercises ${n.choiceId} of ${a.template}, which moves value, and a generic exercise intent does not state what it moves; only a recognised token-standard or Amulet choice with its own intent kind can be signed.`,
            `${at}: choice`,
          );
      }
      acting(intent.party);
      contract(intent.contractId, 'contract');
      return;
    }
    case 'create': {
      const n = tx.nodeById.get(a.nodeId);
      if (n?.type === 'create' && !templateMatches(intent.template, n))
        add(
          'kind_mismatch',
          `the root creates ${a.template} but the intent names ${intent.template}.`,
          `${at}: template`,
        );
      if (!(a.signatories ?? []).includes(intent.party))
        add(
          'party_mismatch',
          `the new contract is signed by ${partiesText(a.signatories ?? [])}, not by ${intent.party}.`,
          `${at}: signatories`,
        );
      return;
    }
  }
}

/**
 * `package:Module:Entity` (a leading `#` is allowed, the package is a name or
 * an id) or `Module:Entity` against a node's template.
 */
export function templateMatches(pattern: string, n: NodeBody & { type: 'create' | 'exercise' }): boolean {
  const parts = (pattern.startsWith('#') ? pattern.slice(1) : pattern).split(':');
  if (parts.length < 2) return false;
  const entity = parts[parts.length - 1];
  const module = parts[parts.length - 2];
  const pkg = parts.slice(0, -2).join(':');
  if (entity !== n.templateId.entityName || module !== n.templateId.moduleName) return false;
  return pkg === '' || pkg === n.packageName || pkg === n.templateId.packageId;
}

// ---- consequences ---------------------------------------------------------------------------------------

/** Every node in execution order except the first root itself, with extra roots and their subtrees. */
function consequenceNodes(tx: DecodedTransaction): Visited[] {
  const [first, ...rest] = tx.transaction.roots;
  const out = first === undefined ? [] : descendants(tx, first);
  for (const r of rest) {
    const node = tx.nodeById.get(r);
    if (node) out.push({ nodeId: r, node, rolledBack: false, depth: 0 });
    out.push(...descendants(tx, r));
  }
  return out;
}

/** Contract ids consumed by an exercise that is not rolled back, anywhere in the transaction. */
function consumedIds(tx: DecodedTransaction): Set<string> {
  const out = new Set<string>();
  for (const r of tx.transaction.roots) {
    const root = tx.nodeById.get(r);
    if (root?.type === 'exercise' && root.consuming) out.add(root.contractId);
    for (const d of descendants(tx, r))
      if (!d.rolledBack && d.node.type === 'exercise' && d.node.consuming) out.add(d.node.contractId);
  }
  return out;
}

function checkConsequences(
  tx: DecodedTransaction,
  intent: Intent,
  a: RecognisedAction | undefined,
  add: Add,
): void {
  const party = actingParty(intent);
  const generic = intent.kind === 'create' || intent.kind === 'exercise';
  const allowed = ALLOWED_CONSEQUENCES[intent.kind];
  const allowedCreates = ALLOWED_CREATES[intent.kind];
  const stated =
    intent.kind === 'transfer' || intent.kind === 'ans-entry-pay' || intent.kind === 'ans-renewal-pay'
      ? intent.inputs
      : undefined;
  const declared = new Set(stated ?? a?.inputs ?? []);
  const consumed = consumedIds(tx);
  const createdIds = new Set<string>();
  const created: Created[] = [];

  for (const d of consequenceNodes(tx)) {
    const n = d.node;
    const where = `node ${d.nodeId}`;
    if (n.type === 'create') {
      createdIds.add(n.contractId);
      if (d.rolledBack) continue;
      created.push({ nodeId: d.nodeId, node: n, transient: consumed.has(n.contractId) });
      const ours = n.signatories.includes(party) || n.stakeholders.includes(party);
      if (ours && allowedCreates && !allowedCreates.has(templateKey(n)))
        add(
          'unexplained_create',
          `node ${d.nodeId} creates ${withArticle(templateName(n.packageName, n.templateId))} that ${party} is a party to, which ${withArticle(intent.kind)} does not create.`,
          where,
        );
      continue;
    }
    if (n.type !== 'exercise' || !n.actingParties.includes(party)) continue;
    const entity = n.templateId.entityName;
    const template = templateName(n.packageName, n.templateId);
    const consumesUnexplained = n.consuming && !declared.has(n.contractId) && !createdIds.has(n.contractId);
    if (consumesUnexplained && (!generic || HOLDING_ENTITIES.has(entity))) {
      add(
        'unexplained_archive',
        `node ${d.nodeId} consumes ${template} ${n.contractId} (choice ${n.choiceId}) acting for ${party}, but that contract is not among the action's declared inputs.`,
        where,
      );
      continue;
    }
    const explained = generic
      ? !VALUE_MOVING_CHOICES.has(n.choiceId)
      : allowed.has(`${templateKey(n)}:${n.choiceId}`);
    if (!explained)
      add(
        'unexplained_exercise',
        `node ${d.nodeId} exercises ${n.choiceId} on ${template} acting for ${party}, which ${withArticle(intent.kind)} does not explain.`,
        where,
      );
  }

  checkHoldings(intent, a, created, add);
  if (!a) return;
  const root = tx.nodeById.get(a.nodeId);
  switch (intent.kind) {
    case 'transfer':
      checkInstructions(intent, a, created, add);
      return;
    case 'preapproval-send':
      if (root?.type === 'exercise') checkTransferCommand(tx, intent, a, root, created, add);
      return;
    case 'setup-proposal-accept':
      if (root?.type === 'exercise') checkSetupCreates(tx, intent, a, root, created, add);
      return;
    case 'allocation-allocate':
      checkAllocationCreated(
        intent,
        a,
        root?.type === 'exercise' ? root.chosenValue : undefined,
        created,
        add,
      );
      return;
    case 'ans-entry-request':
      if (root?.type === 'exercise') checkAnsRequest(tx, intent, a, root, created, add);
      return;
    case 'ans-entry-pay':
    case 'ans-renewal-pay':
      if (root?.type === 'exercise') checkAnsPayment(tx, intent, a, root, created, add);
      return;
    case 'ans-payment-expire':
      if (root?.type === 'exercise') checkAnsExpire(tx, intent, a, root, created, add);
      return;
    default:
      return;
  }
}

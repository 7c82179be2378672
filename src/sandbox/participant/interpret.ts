/**
 * What the sandbox participant interprets, for prepare (an external party
 * signs) and for submit-and-wait (a local party, the participant signs): the
 * Splice actions (token-standard transfer, transfer-instruction
 * accept/reject/withdraw, TransferPreapprovalProposal creation,
 * TransferPreapproval renew/cancel, the name service's entry requests and
 * payments in ./interpret-ans.ts) and Canton's built-in Ping (create,
 * archive). It checks the command against the ledger as the Daml code would
 * (controllers, Amulet's checks on admin, instrument, amounts, deadlines,
 * inputs valued after holding fees as of the open round; contracts the
 * submitter is no stakeholder of must be disclosed) and builds the transaction
 * with the builders in ../prepared. Anything else is refused by name: the
 * sandbox does not run arbitrary Daml.
 *
 * One file on purpose: it is the table of the commands the sandbox interprets
 * with their checks, which share the ledger lookups and the refusals; the name
 * service's part is already in ./interpret-ans.ts and DevNet's in ./interpret-
 * devnet.ts.
 */
import { randomUUID } from 'node:crypto';
import type { PreparedTransaction, Value } from '../../hashing/model.js';
import {
  addAmounts,
  amuletDso,
  gte,
  HOLDING_FEE_RATE,
  holdingView,
  isPositive,
  openRoundOf,
  subAmounts,
} from '../amulet.js';
import { cantonError, E, type SandboxError } from '../errors.js';
import { parseIsoMicros } from '../ledger/clock.js';
import type { Contract } from '../ledger/store.js';
import { big, str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import { numericUnits, type TokenTransfer } from '../prepared/common.js';
import {
  transferInstructionAccept,
  transferInstructionExpire,
  transferInstructionReject,
  transferInstructionWithdraw,
} from '../prepared/instruction.js';
import { pingArchive, pingCreate } from '../prepared/ping.js';
import { transferPreapprovalCancel, transferPreapprovalRenew } from '../prepared/preapproval-manage.js';
import { transferPreapprovalProposalCreate } from '../prepared/proposal.js';
import { tokenStandardTransfer } from '../prepared/token-transfer.js';
import { ANS_CHOICES, interpretAnsChoice } from './interpret-ans.js';
import { DEVNET_CHOICES, interpretDevNetChoice } from './interpret-devnet.js';

/** The parts of a prepare request the interpreter reads. */
export interface PrepareCommand {
  command: unknown;
  actAs: string[];
  commandId: string;
  disclosedContracts: { contractId?: string | undefined }[];
  synchronizerId?: string | undefined;
  maxRecordTime?: bigint | undefined;
  /**
   * A classic submission (submit-and-wait) by a local party the participant
   * signs for itself; otherwise an interactive one by an external party.
   */
  local?: boolean;
}

export type Json = Record<string, unknown>;

export const isObj = (x: unknown): x is Json => typeof x === 'object' && x !== null && !Array.isArray(x);

/** `#package-name:Module:Entity` or `packageId:Module:Entity` → module and entity. */
export function parseTemplateId(s: unknown): { pkg: string; module: string; entity: string } | undefined {
  if (typeof s !== 'string') return undefined;
  const parts = s.split(':');
  if (parts.length !== 3 || parts.some((p) => p.length === 0)) return undefined;
  return { pkg: parts[0]!, module: parts[1]!, entity: parts[2]! };
}

/**
 * The interpreter's refusals, as Canton reports them on prepare and on a
 * classic submission alike: a failed Daml check (an expired deadline, an
 * assertion) is DAML_INTERPRETATION_ERROR (category 9, FAILED_PRECONDITION);
 * a submitter that is not the choice's controller or the contract's signatory
 * is DAML_AUTHORIZATION_ERROR (category 8). Anything else the interpreter
 * refuses is FAILED_TO_PREPARE_TRANSACTION.
 */
export const damlInterpretationError = (cause: string) =>
  cantonError('DAML_INTERPRETATION_ERROR', 9, `Interpretation error: ${cause}`);
export const interpretationError = (what: string) => damlInterpretationError(`Error: User failure: ${what}`);
/** `role` names what the party is to the contract or choice (`signatory`, `receiver`, …). */
export const missingAuthorization = (party: string, role?: string) =>
  cantonError(
    'DAML_AUTHORIZATION_ERROR',
    8,
    `Interpretation error: missing authorization from ${party}${role === undefined ? '' : ` (the ${role})`}`,
  );

export const contractNotFound = (cid: string): SandboxError =>
  cantonError('CONTRACT_NOT_FOUND', 11, `Contract could not be found with id ${cid}`, {
    resources: [['CONTRACT_ID', cid]],
  });

/**
 * A contract the submitter reads but is no stakeholder of (the DSO's rules and
 * rounds, a receiver's preapproval) exists for it only when the prepare request
 * discloses it: otherwise CONTRACT_NOT_FOUND, as Canton answers.
 */
export function requireVisible(req: PrepareCommand, actor: string, c: Contract): void {
  if (c.stakeholders.includes(actor)) return;
  if (!req.disclosedContracts.some((d) => d.contractId === c.contractId))
    throw contractNotFound(c.contractId);
}

/** The context's `amulet-rules` (it must be the DSO's AmuletRules), visible to the submitter. */
function amuletRulesOf(net: SandboxNetwork, req: PrepareCommand, actor: string, ctx: Record<string, string>) {
  const rules = net.amuletRules();
  const id = ctx['amulet-rules'];
  if (id === undefined) throw interpretationError('Missing context entry for: amulet-rules');
  if (id !== rules.contractId) throw contractNotFound(id);
  requireVisible(req, actor, rules);
  return rules;
}

/** Builds the prepared transaction for a command, or throws the error Canton would give. */
export function interpret(net: SandboxNetwork, req: PrepareCommand): PreparedTransaction {
  if (req.synchronizerId !== undefined && req.synchronizerId !== net.synchronizerId)
    throw E.invalidArgument(
      `Unknown synchronizer ${req.synchronizerId}: this participant is connected to ${net.synchronizerId}`,
    );
  if (req.actAs.length !== 1)
    throw E.invalidArgument(
      'actAs must name exactly one party: only single-party external submissions are supported',
    );
  const actor = req.actAs[0]!;
  if (req.local ? !net.localParties.has(actor) : !net.parties.has(actor))
    throw E.invalidArgument(
      req.local
        ? `actAs party ${actor} is not a local party of this participant`
        : `actAs party ${actor} is not an external party hosted on this participant`,
    );
  const c = req.command;
  if (!isObj(c)) throw E.invalidArgument('commands[0] must be an object');
  if (isObj(c.CreateCommand)) return create(net, req, actor, c.CreateCommand);
  if (isObj(c.ExerciseCommand)) return exercise(net, req, actor, c.ExerciseCommand);
  const kind = Object.keys(c)[0] ?? '(none)';
  throw E.failedToPrepare(`The sandbox participant does not interpret ${kind} commands`);
}

export function envelope(net: SandboxNetwork, req: PrepareCommand, actor: string) {
  return {
    actAs: [actor],
    commandId: req.commandId,
    synchronizerId: net.synchronizerId,
    transactionUuid: randomUUID(),
    preparationTime: net.clock.now(),
    maxRecordTime: req.maxRecordTime,
    seeds: net.seeds(),
  };
}

function create(net: SandboxNetwork, req: PrepareCommand, actor: string, cmd: Json): PreparedTransaction {
  const t = parseTemplateId(cmd.templateId);
  if (!t) throw E.invalidField('templateId', `not a template id: ${String(cmd.templateId)}`);
  if (isPing(t)) return pingCreateOf(net, req, actor, cmd.createArguments);
  if (t.module === 'Splice.Wallet.TransferPreapproval' && t.entity === 'TransferPreapprovalProposal') {
    const a = cmd.createArguments;
    if (!isObj(a)) throw E.invalidField('createArguments', 'must be a record');
    const receiver = partyArg(a, 'receiver');
    const provider = partyArg(a, 'provider');
    const expectedDso =
      a.expectedDso === null || a.expectedDso === undefined ? undefined : partyArg(a, 'expectedDso');
    const extra = Object.keys(a).filter(
      (k) => !['receiver', 'provider', 'expectedDso'].includes(k) && a[k] !== null,
    );
    if (extra.length > 0) throw E.failedToPrepare(`Unexpected fields: ${extra.join(', ')}`);
    if (receiver !== actor) throw missingAuthorization(receiver, 'signatory');
    if (expectedDso !== undefined && expectedDso !== net.dso)
      throw interpretationError('expectedDso mismatch');
    return transferPreapprovalProposalCreate({
      ...envelope(net, req, actor),
      receiver,
      provider,
      expectedDso,
    });
  }
  throw E.failedToPrepare(`The sandbox participant does not interpret a create of ${t.module}:${t.entity}`);
}

function exercise(net: SandboxNetwork, req: PrepareCommand, actor: string, cmd: Json): PreparedTransaction {
  const t = parseTemplateId(cmd.templateId);
  if (!t) throw E.invalidField('templateId', `not a template id: ${String(cmd.templateId)}`);
  const cid = typeof cmd.contractId === 'string' ? cmd.contractId : undefined;
  if (!cid) throw E.missingField('contractId');
  const choice = typeof cmd.choice === 'string' ? cmd.choice : '';
  const arg = cmd.choiceArgument;
  if (!isObj(arg)) throw E.invalidField('choiceArgument', 'must be a record');
  // AmuletRules_DevNet_Tap, AmuletRules_DevNet_FeatureApp, AmuletRules_BuyMemberTraffic: ./interpret-devnet.ts
  const devnet = DEVNET_CHOICES.find((c) => c === choice);
  if (devnet) return interpretDevNetChoice(net, req, actor, cmd, devnet, arg);
  // The name service: requesting, paying and renewing an entry, taking back a payment: ./interpret-ans.ts
  const ans = ANS_CHOICES.find((c) => c === choice);
  if (ans) return interpretAnsChoice(net, req, actor, cmd, ans, arg);
  switch (choice) {
    case 'TransferFactory_Transfer':
      return factoryTransfer(net, req, actor, cid, arg);
    case 'TransferInstruction_Accept':
    case 'TransferInstruction_Reject':
    case 'TransferInstruction_Withdraw':
      return instructionChoice(net, req, actor, cid, choice, arg);
    case 'Archive':
      if (isPing(t)) return pingArchiveOf(net, req, actor, cid);
      break;
    case 'TransferPreapproval_Cancel':
      return preapprovalCancel(net, req, actor, cid, arg);
    case 'TransferPreapproval_Renew':
      return preapprovalRenew(net, req, actor, cid, arg);
  }
  throw E.failedToPrepare(
    `The sandbox participant does not interpret choice ${choice || '(none)'} on ${t.module}:${t.entity}`,
  );
}

const isPing = (t: { module: string; entity: string }) =>
  t.module === 'Canton.Internal.Ping' && t.entity === 'Ping';

// ---- Canton.Internal.Ping ------------------------------------------------------------------------

function pingCreateOf(net: SandboxNetwork, req: PrepareCommand, actor: string, a: unknown) {
  if (!isObj(a)) throw E.invalidField('createArguments', 'must be a record');
  if (typeof a.id !== 'string') throw E.failedToPrepare('Missing non-optional field id (text)');
  const initiator = partyArg(a, 'initiator');
  const responder = partyArg(a, 'responder');
  const extra = Object.keys(a).filter((k) => !['id', 'initiator', 'responder'].includes(k));
  if (extra.length > 0) throw E.failedToPrepare(`Unexpected fields: ${extra.join(', ')}`);
  if (initiator !== actor) throw missingAuthorization(initiator, 'initiator, signatory of the Ping');
  return pingCreate({ ...envelope(net, req, actor), id: a.id, initiator, responder });
}

function pingArchiveOf(net: SandboxNetwork, req: PrepareCommand, actor: string, cid: string) {
  const c = net.store.get(cid);
  if (!c || !isPing({ module: c.templateId.moduleName, entity: c.templateId.entityName }))
    throw contractNotFound(cid);
  requireVisible(req, actor, c);
  const ping = {
    contractId: c.contractId,
    createdAt: c.createdAt,
    id: str(c.argument, 'id')!,
    initiator: str(c.argument, 'initiator')!,
    responder: str(c.argument, 'responder')!,
  };
  if (ping.initiator !== actor) throw missingAuthorization(ping.initiator, 'signatory of the Ping');
  return pingArchive({ ...envelope(net, req, actor), ping });
}

// ---- TransferPreapproval_Cancel / _Renew ---------------------------------------------------------

function activePreapproval(net: SandboxNetwork, req: PrepareCommand, actor: string, cid: string) {
  const c = net.store.get(cid);
  if (c?.templateId.entityName !== 'TransferPreapproval') throw contractNotFound(cid);
  requireVisible(req, actor, c);
  return {
    contract: c,
    receiver: str(c.argument, 'receiver')!,
    provider: str(c.argument, 'provider')!,
    validFrom: big(c.argument, 'validFrom')!,
    expiresAt: big(c.argument, 'expiresAt')!,
  };
}

function preapprovalCancel(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  cid: string,
  arg: Json,
): PreparedTransaction {
  const pre = activePreapproval(net, req, actor, cid);
  const p = partyArg(arg, 'p');
  if (p !== actor) throw missingAuthorization(p, 'controller p');
  if (p !== pre.receiver && p !== pre.provider)
    throw interpretationError(`Controller ${p} is either receiver or provider`);
  if (net.clock.now() >= pre.expiresAt)
    throw interpretationError('TransferPreapproval.expiresAt: the deadline has passed');
  return transferPreapprovalCancel({
    ...envelope(net, req, actor),
    maxLedgerEffectiveTime: pre.expiresAt - 1n,
    preapproval: pre.contract,
    actor: p,
  });
}

/** Splice's default preapproval fee: USD per day of lifetime (roughly 1 USD a year). */
const PREAPPROVAL_FEE_USD_PER_DAY = '0.00274';
const DAY_US = 86_400_000_000n;
const E10 = 10_000_000_000n;

/** `days(extension) * fee / amuletPrice` in Amulet, each step truncated to 10 decimals. */
export function preapprovalFee(extensionUs: bigint, amuletPrice: string): string {
  const days = (extensionUs * E10) / DAY_US;
  const usd = (days * numericUnits(PREAPPROVAL_FEE_USD_PER_DAY)) / E10;
  const amulet = (usd * E10) / numericUnits(amuletPrice);
  const whole = amulet / E10;
  return `${whole}.${(amulet % E10).toString().padStart(10, '0')}`;
}

function preapprovalRenew(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  cid: string,
  arg: Json,
): PreparedTransaction {
  const pre = activePreapproval(net, req, actor, cid);
  if (pre.provider !== actor) throw missingAuthorization(pre.provider, 'provider');
  const now = net.clock.now();
  const newExpiresAt = timeArg(arg, 'newExpiresAt');
  if (pre.expiresAt <= now) throw interpretationError('Contract is not expired');
  if (newExpiresAt <= pre.expiresAt) throw interpretationError('newExpiresAt is after expiresAt');
  const ctx = arg.context;
  const inner = isObj(ctx) ? ctx.context : undefined;
  if (!isObj(ctx) || !isObj(inner) || typeof ctx.amuletRules !== 'string')
    throw E.failedToPrepare('Missing non-optional field context (PaymentTransferContext)');
  const rulesId = ctx.amuletRules;
  const rules = net.amuletRules();
  if (rulesId !== rules.contractId) throw contractNotFound(rulesId);
  requireVisible(req, actor, rules);
  const roundId = typeof inner.openMiningRound === 'string' ? inner.openMiningRound : '';
  const round = net.store.get(roundId);
  if (round?.templateId.entityName !== 'OpenMiningRound')
    throw contractNotFound(roundId || '(openMiningRound)');
  requireVisible(req, actor, round);
  const roundNo = big(round.argument, 'round', 'number')!;
  const inputsArg = arg.inputs;
  if (!Array.isArray(inputsArg))
    throw E.invalidField('choiceArgument.inputs', 'must be a list of TransferInput');
  const inputs = inputsArg.map((x) => {
    if (!isObj(x) || x.tag !== 'InputAmulet' || typeof x.value !== 'string')
      throw E.failedToPrepare('the sandbox interprets InputAmulet inputs only');
    const c = net.store.get(x.value);
    const v = c && c.templateId.entityName === 'Amulet' ? holdingView(c, roundNo) : undefined;
    if (!c || !v) throw contractNotFound(x.value);
    requireVisible(req, actor, c);
    if (v.owner !== actor) throw interpretationError(`input ${x.value} is not owned by the provider`);
    return { contract: c, value: v.amount };
  });
  const fee = preapprovalFee(newExpiresAt - pre.expiresAt, str(round.argument, 'amuletPrice')!);
  const total = addAmounts('0', ...inputs.map((h) => h.value));
  if (!gte(total, fee))
    throw interpretationError(
      `insufficient funds: the provider's inputs hold ${total}, the preapproval fee for the extension is ${fee}`,
    );
  const change = subAmounts(total, fee);
  return transferPreapprovalRenew({
    ...envelope(net, req, actor),
    maxLedgerEffectiveTime: pre.expiresAt - 1n,
    dso: net.dso,
    provider: pre.provider,
    receiver: pre.receiver,
    preapproval: { ...pre.contract, validFrom: pre.validFrom },
    amuletRules: rules,
    openRound: { ...round, number: roundNo },
    inputs: inputs.map((h) => h.contract),
    newExpiresAt,
    ledgerTime: now,
    amuletPaid: fee,
    change: isPositive(change) ? change : undefined,
    holdingFeeRate: HOLDING_FEE_RATE,
  });
}

// ---- TransferFactory_Transfer ----------------------------------------------------------------

function factoryTransfer(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  factoryId: string,
  arg: Json,
): PreparedTransaction {
  const rulesContract = net.externalPartyAmuletRules();
  if (factoryId !== rulesContract.contractId || !net.store.get(factoryId)) throw contractNotFound(factoryId);
  if (!req.disclosedContracts.some((d) => d.contractId === factoryId)) throw contractNotFound(factoryId); // the party is no stakeholder: the factory must be disclosed
  const now = net.clock.now();
  const admin = partyArg(arg, 'expectedAdmin');
  const tr = arg.transfer;
  if (!isObj(tr)) throw E.invalidField('choiceArgument.transfer', 'must be a record');
  const sender = partyArg(tr, 'sender');
  const receiver = partyArg(tr, 'receiver');
  const amount = decimalArg(tr, 'amount');
  const instrument = tr.instrumentId;
  const requestedAt = timeArg(tr, 'requestedAt');
  const executeBefore = timeArg(tr, 'executeBefore');
  const inputIds = tr.inputHoldingCids;
  if (!Array.isArray(inputIds) || inputIds.some((x) => typeof x !== 'string'))
    throw E.invalidField('choiceArgument.transfer.inputHoldingCids', 'must be a list of contract ids');
  const reason = metaValue(tr.meta, 'splice.lfdecentralizedtrust.org/reason') ?? '';
  if (sender !== actor) throw missingAuthorization(sender);
  if (admin !== net.dso) throw interpretationError(`expectedAdmin ${admin} is not the DSO party ${net.dso}`);
  if (!isObj(instrument) || instrument.admin !== net.dso || instrument.id !== 'Amulet')
    throw interpretationError('instrumentId must be {admin: DSO, id: "Amulet"}');
  if (!isPositive(amount)) throw interpretationError(`amount must be positive, got ${amount}`);
  if (requestedAt > now) throw interpretationError('requestedAt must be in the past');
  if (executeBefore <= now) throw interpretationError('executeBefore must be in the future');
  if (inputIds.length === 0) throw interpretationError('At least one holding must be provided');
  const ctx = contextValues(arg);
  const roundId = ctx['open-round'];
  const round = net.store.get(roundId ?? '');
  if (!roundId || !round || round.templateId.entityName !== 'OpenMiningRound')
    throw contractNotFound(roundId ?? '(open-round missing from the choice context)');
  requireVisible(req, actor, round);
  const rules = amuletRulesOf(net, req, actor, ctx);
  const openRound = openRoundOf(round);
  const inputs = (inputIds as string[]).map((id) => {
    const c = net.store.get(id);
    const v = c && c.templateId.entityName === 'Amulet' ? holdingView(c, openRound.number) : undefined;
    if (!c || !v) throw contractNotFound(id);
    // A contract the submitter neither sees nor was given as disclosed does not exist for it.
    if (!c.stakeholders.includes(sender) && !req.disclosedContracts.some((d) => d.contractId === id))
      throw contractNotFound(id);
    if (v.owner !== sender) throw interpretationError(`holding ${id} is not owned by the sender`);
    return {
      contractId: id,
      createdAt: c.createdAt,
      amount: v.initialAmount,
      createdRound: v.createdRound,
      rate: v.rate,
      value: v.amount,
      fees: v.fees,
    };
  });
  // Amulet values every input as of the open round it transfers in: holding fees accrued since
  // the amulet's creation round are deducted first.
  const total = addAmounts('0', ...inputs.map((h) => h.value));
  if (!gte(total, amount)) {
    const fees = addAmounts('0', ...inputs.map((h) => h.fees));
    throw interpretationError(
      `insufficient funds: inputs hold ${total} as of round ${openRound.number} (after ${fees} of holding fees), the transfer needs ${amount}`,
    );
  }
  const preapprovalId = ctx['transfer-preapproval'];
  const pre = preapprovalId ? net.store.get(preapprovalId) : undefined;
  if (preapprovalId && !pre) throw contractNotFound(preapprovalId);
  if (pre) requireVisible(req, actor, pre);
  if (pre && str(pre.argument, 'receiver') !== receiver)
    throw interpretationError('the transfer-preapproval in the context is not the receiver’s');
  if (pre && (big(pre.argument, 'expiresAt') ?? 0n) <= now)
    throw interpretationError('TransferPreapproval expired');
  const dso = amuletDso(net.dso, rules, openRound);
  const bounds = {
    minLedgerEffectiveTime: requestedAt > openRound.opensAt ? requestedAt : openRound.opensAt,
    maxLedgerEffectiveTime: executeBefore - 1n,
  };
  const common = {
    ...envelope(net, req, actor),
    ...bounds,
    dso,
    externalPartyAmuletRules: { contractId: rulesContract.contractId, createdAt: rulesContract.createdAt },
    sender,
    receiver,
    amount,
    inputs,
    requestedAt,
    executeBefore,
    reason,
  };
  if (sender === receiver) return tokenStandardTransfer({ ...common, mode: 'self' });
  if (pre)
    return tokenStandardTransfer({
      ...common,
      mode: 'direct',
      preapproval: {
        contractId: pre.contractId,
        createdAt: pre.createdAt,
        provider: str(pre.argument, 'provider')!,
        validFrom: big(pre.argument, 'validFrom')!,
        lastRenewedAt: big(pre.argument, 'lastRenewedAt')!,
        expiresAt: big(pre.argument, 'expiresAt')!,
      },
    });
  return tokenStandardTransfer({ ...common, mode: 'twoStep' });
}

// ---- TransferInstruction_* -------------------------------------------------------------------

function instructionChoice(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  cid: string,
  choice: string,
  arg: Json,
): PreparedTransaction {
  const instr = net.store.get(cid);
  if (instr?.templateId.entityName !== 'AmuletTransferInstruction') throw contractNotFound(cid);
  const transfer = transferOf(instr);
  const lockedId = str(instr.argument, 'lockedAmulet');
  const locked = lockedId ? net.store.get(lockedId) : undefined;
  if (!locked) throw contractNotFound(lockedId ?? '(locked amulet)');
  const lv = holdingView(locked, 0n)!;
  const now = net.clock.now();
  const kind = choice.slice('TransferInstruction_'.length);
  const expected = kind === 'Withdraw' ? transfer.sender : transfer.receiver;
  if (actor !== expected) throw missingAuthorization(expected, kind === 'Withdraw' ? 'sender' : 'receiver');
  if (kind === 'Accept' && transfer.executeBefore <= now)
    throw interpretationError('the transfer instruction has expired (executeBefore passed)');
  const ctx = contextValues(arg);
  const roundId = ctx['open-round'];
  const round = roundId ? net.store.get(roundId) : undefined;
  if (!roundId || !round) throw contractNotFound(roundId ?? '(open-round missing from the choice context)');
  requireVisible(req, actor, round);
  const rules = amuletRulesOf(net, req, actor, ctx);
  const openRound = openRoundOf(round);
  const input = {
    ...envelope(net, req, actor),
    dso: amuletDso(net.dso, rules, openRound),
    transfer,
    instruction: { contractId: instr.contractId, createdAt: instr.createdAt },
    lockedAmulet: {
      contractId: locked.contractId,
      createdAt: locked.createdAt,
      createdRound: lv.createdRound,
      rate: lv.rate,
    },
  };
  if (kind === 'Accept')
    return transferInstructionAccept({
      ...input,
      minLedgerEffectiveTime: openRound.opensAt,
      maxLedgerEffectiveTime: transfer.executeBefore - 1n,
    });
  return kind === 'Reject' ? transferInstructionReject(input) : transferInstructionWithdraw(input);
}

/**
 * The answer of a receiver hosted here as a local party (the validator
 * operator, mallory) to transfer instruction `cid`: the same transaction an
 * external receiver would sign, built for the sandbox's own control (no
 * external signature; the local party's participant authorises it).
 */
export function localInstructionAnswer(
  net: SandboxNetwork,
  cid: string,
  kind: 'Accept' | 'Reject',
): PreparedTransaction {
  const instr = net.store.get(cid);
  if (instr?.templateId.entityName !== 'AmuletTransferInstruction') throw contractNotFound(cid);
  const receiver = transferOf(instr).receiver;
  if (!net.localParties.has(receiver))
    throw E.invalidArgument(
      `the receiver ${receiver} is an external party: it answers by signing (TransferInstruction_${kind} through prepare and execute)`,
    );
  const round = net.latestRound();
  const ctx = { 'amulet-rules': net.amuletRules().contractId, 'open-round': round.contractId };
  const values = Object.fromEntries(
    Object.entries(ctx).map(([k, v]) => [k, { tag: 'AV_ContractId', value: v }]),
  );
  const req: PrepareCommand = {
    command: {},
    actAs: [receiver],
    commandId: `sandbox-${kind.toLowerCase()}-${randomUUID()}`,
    // The local receiver reads the DSO's contracts as disclosed ones, as an external one would.
    disclosedContracts: [{ contractId: ctx['amulet-rules'] }, { contractId: ctx['open-round'] }],
  };
  return instructionChoice(net, req, receiver, cid, `TransferInstruction_${kind}`, {
    extraArgs: { context: { values }, meta: { values: {} } },
  });
}

/**
 * The DSO's expiry of transfer instruction `cid` after its `executeBefore` (the SV automation):
 * `TransferInstruction_Update` returning the locked amount to the sender. Undefined when the
 * instruction has no locked amulet left to return.
 */
export function instructionExpiry(net: SandboxNetwork, cid: string): PreparedTransaction | undefined {
  const instr = net.store.get(cid);
  if (instr?.templateId.entityName !== 'AmuletTransferInstruction') throw contractNotFound(cid);
  const transfer = transferOf(instr);
  if (net.clock.now() < transfer.executeBefore)
    throw interpretationError('the transfer instruction has not expired (executeBefore is still ahead)');
  const lockedId = str(instr.argument, 'lockedAmulet');
  const locked = lockedId ? net.store.get(lockedId) : undefined;
  if (!locked) return undefined;
  const lv = holdingView(locked, 0n)!;
  const req: PrepareCommand = {
    command: {},
    actAs: [net.dso],
    commandId: `sv-expire-instruction-${randomUUID()}`,
    disclosedContracts: [],
  };
  return transferInstructionExpire({
    ...envelope(net, req, net.dso),
    dso: amuletDso(net.dso, net.amuletRules(), net.latestRound()),
    transfer,
    instruction: { contractId: instr.contractId, createdAt: instr.createdAt },
    lockedAmulet: {
      contractId: locked.contractId,
      createdAt: locked.createdAt,
      createdRound: lv.createdRound,
      rate: lv.rate,
    },
  });
}

/** The token-standard Transfer record stored in an AmuletTransferInstruction. */
export function transferOf(instr: Contract): TokenTransfer {
  const a = instr.argument;
  const meta: Record<string, string> = {};
  const values = a.kind === 'record' ? lookupPath(a, ['transfer', 'meta', 'values']) : undefined;
  if (values?.kind === 'textMap')
    for (const e of values.entries) if (e.value.kind === 'text') meta[e.key] = e.value.value;
  const inputs = lookupPath(a, ['transfer', 'inputHoldingCids']);
  return {
    sender: str(a, 'transfer', 'sender')!,
    receiver: str(a, 'transfer', 'receiver')!,
    amount: str(a, 'transfer', 'amount')!,
    admin: str(a, 'transfer', 'instrumentId', 'admin')!,
    instrument: str(a, 'transfer', 'instrumentId', 'id')!,
    requestedAt: big(a, 'transfer', 'requestedAt')!,
    executeBefore: big(a, 'transfer', 'executeBefore')!,
    inputHoldingCids:
      inputs?.kind === 'list'
        ? inputs.elements.flatMap((e) => (e.kind === 'contractId' ? [e.value] : []))
        : [],
    meta,
  };
}

function lookupPath(v: Value, labels: string[]): Value | undefined {
  let cur: Value | undefined = v;
  for (const l of labels)
    cur = cur?.kind === 'record' ? cur.fields.find((f) => f.label === l)?.value : undefined;
  return cur;
}

// ---- JSON argument readers (Daml-LF JSON) ---------------------------------------------------------

/** Splice's `InvalidTransfer` exception, as a failed Daml check reports it. */
export const invalidTransfer = (reason: string) =>
  damlInterpretationError(
    `Error: Unhandled Daml exception: Splice.AmuletRules:InvalidTransfer{reason = ${reason}}`,
  );

export function textArg(o: Json, name: string): string {
  const v = o[name];
  if (typeof v !== 'string') throw E.failedToPrepare(`Missing non-optional field ${name} (Text)`);
  return v;
}

export function partyArg(o: Json, name: string): string {
  const v = o[name];
  if (typeof v !== 'string' || v.length === 0)
    throw E.failedToPrepare(`Missing non-optional field ${name} (party)`);
  return v;
}

export function decimalArg(o: Json, name: string): string {
  const v = o[name];
  // Numeric 10: at most 38 digits, 10 of them after the point, so at most 28 before it.
  if (typeof v !== 'string' || !/^-?(0|[1-9]\d{0,27})(\.\d{1,10})?$/.test(v))
    throw E.failedToPrepare(
      `field ${name} must be a Numeric 10 decimal string (at most 28 digits before the point and 10 after), got ${JSON.stringify(v)}`,
    );
  return v;
}

function timeArg(o: Json, name: string): bigint {
  const v = o[name];
  const t = typeof v === 'string' ? parseIsoMicros(v) : undefined;
  if (t === undefined)
    throw E.failedToPrepare(`field ${name} must be an ISO-8601 timestamp, got ${JSON.stringify(v)}`);
  return t;
}

function metaValue(meta: unknown, key: string): string | undefined {
  if (!isObj(meta) || !isObj(meta.values)) return undefined;
  const v = meta.values[key];
  return typeof v === 'string' ? v : undefined;
}

/** `extraArgs.context.values` with AV_ContractId entries as contract ids. */
function contextValues(arg: Json): Record<string, string> {
  const extra = arg.extraArgs;
  const values =
    isObj(extra) && isObj(extra.context) && isObj(extra.context.values) ? extra.context.values : {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(values))
    if (isObj(v) && v.tag === 'AV_ContractId' && typeof v.value === 'string') out[k] = v.value;
  return out;
}

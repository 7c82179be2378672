/**
 * Shared pieces of the sandbox prepared-transaction builders: package ids and
 * template identifiers (facts read from the real vectors in
 * ../shared/vectors/real, named per entry), Daml value constructors, party-set
 * sorting, contract-id minting from node seeds, and the envelope that turns a
 * node list into a `PreparedTransaction` with its metadata.
 */

import { createHash } from 'node:crypto';
import { compareUtf8 } from '../../hashing/canonical.js';
import type {
  CreateNode,
  ExerciseNode,
  FetchNode,
  Identifier,
  InputContract,
  Node,
  NodeBody,
  PreparedTransaction,
  Value,
} from '../../hashing/model.js';
import { decimalUnits } from '../../intent/decimal.js';

/** Daml-LF version of every node in the real vectors. */
export const LF = '2.1';

/** Package ids, each seen in the vector(s) named beside it. */
export const PKG = {
  /** splice-amulet (v2_bitgo_trasferprepareresponse, v2_bitgo_transferacceptanceprepareresponse, …). */
  spliceAmulet: '3ca1343ab26b453d38c8adb70dca5f1ead8440c42b59b68f070786955cbf9ec1',
  /** splice-amulet, the ExternalPartyAmuletRules input contract of v2_bitgo_trasferprepareresponse. */
  spliceAmuletExternalRules: 'a5b055492fb8f08b2e7bc0fc94da6da50c39c2e1d7f24cd5ea8db12fc87c1332',
  /** splice-wallet (v2_splice_wallet_kernel_tx_visualizer_transfer_preapproval_proposal). */
  spliceWallet: 'eb6e01efacc3397e23c6be8b9be7db4bf37672211974d69e24b48980e2f98b7e',
  /** splice-api-token-transfer-instruction-v1 (TransferFactory / TransferInstruction interfaces). */
  tokenTransferInstruction: '55ba4deb0ad4662c4168b39859738a0e91388d252286480c7331b3f71a517281',
  /** splice-api-token-holding-v1 (InstrumentId). */
  tokenHolding: '718a0f77e505a8de22f188bd4c87fe74101274e9d4cb1bfac7d09aec7158d35b',
  /** splice-api-token-metadata-v1 (Metadata, ExtraArgs, ChoiceContext, AnyValue). */
  tokenMetadata: '4ded6b668cb3b64f7a88a30874cd41c75829f5e064b3fbbadf41ec7e8363354f',
  /** daml-prim DA.Internal.Template (Archive). */
  damlPrim: '9e70a8b3510d617f8a136213f33d6a903a10ca0eeec76bb06ba55d1ed9680f69',
} as const;

export const PACKAGE_NAME = { amulet: 'splice-amulet', wallet: 'splice-wallet' } as const;

export function ident(packageId: string, moduleName: string, entityName: string): Identifier {
  return { packageId, moduleName, entityName };
}

const A = PKG.spliceAmulet;
/** Identifiers used by the builders (templates, choices' argument records, data types). */
export const ID = {
  amulet: ident(A, 'Splice.Amulet', 'Amulet'),
  lockedAmulet: ident(A, 'Splice.Amulet', 'LockedAmulet'),
  validatorRight: ident(A, 'Splice.Amulet', 'ValidatorRight'),
  amuletRules: ident(A, 'Splice.AmuletRules', 'AmuletRules'),
  transferPreapproval: ident(A, 'Splice.AmuletRules', 'TransferPreapproval'),
  setupProposal: ident(A, 'Splice.AmuletRules', 'ExternalPartySetupProposal'),
  openMiningRound: ident(A, 'Splice.Round', 'OpenMiningRound'),
  transferInstruction: ident(A, 'Splice.AmuletTransferInstruction', 'AmuletTransferInstruction'),
  externalRules: ident(A, 'Splice.ExternalPartyAmuletRules', 'ExternalPartyAmuletRules'),
  /** The ExternalPartyAmuletRules input contract is created by an older package (vectors). */
  externalRulesInput: ident(
    PKG.spliceAmuletExternalRules,
    'Splice.ExternalPartyAmuletRules',
    'ExternalPartyAmuletRules',
  ),
  transferCommand: ident(A, 'Splice.ExternalPartyAmuletRules', 'TransferCommand'),
  preapprovalProposal: ident(
    PKG.spliceWallet,
    'Splice.Wallet.TransferPreapproval',
    'TransferPreapprovalProposal',
  ),
  transferFactory: ident(
    PKG.tokenTransferInstruction,
    'Splice.Api.Token.TransferInstructionV1',
    'TransferFactory',
  ),
  transferInstructionIface: ident(
    PKG.tokenTransferInstruction,
    'Splice.Api.Token.TransferInstructionV1',
    'TransferInstruction',
  ),
} as const;

/** Record/variant id in splice-amulet. */
export const amuletType = (moduleName: string, entityName: string): Identifier =>
  ident(A, moduleName, entityName);
/** Record/variant id in the token-standard transfer-instruction API. */
export const tiType = (entityName: string): Identifier =>
  ident(PKG.tokenTransferInstruction, 'Splice.Api.Token.TransferInstructionV1', entityName);
/** Record/variant id in the token-standard metadata API. */
export const mdType = (entityName: string): Identifier =>
  ident(PKG.tokenMetadata, 'Splice.Api.Token.MetadataV1', entityName);

// ---- values --------------------------------------------------------------------

export const party = (value: string): Value => ({ kind: 'party', value });
export const text = (value: string): Value => ({ kind: 'text', value });
export const num = (value: string): Value => ({ kind: 'numeric', value: canonicalNumeric(value) });
export const int = (value: bigint | number): Value => ({ kind: 'int64', value: BigInt(value) });
export const ts = (value: bigint): Value => ({ kind: 'timestamp', value });
export const bool = (value: boolean): Value => ({ kind: 'bool', value });
export const cid = (value: string): Value => ({ kind: 'contractId', value });
export const unit: Value = { kind: 'unit' };
export const some = (value: Value): Value => ({ kind: 'optional', value });
export const none: Value = { kind: 'optional', value: undefined };
export const list = (elements: Value[]): Value => ({ kind: 'list', elements });
export const variant = (variantId: Identifier, ctor: string, value: Value): Value => ({
  kind: 'variant',
  variantId,
  constructor: ctor,
  value,
});
export function record(recordId: Identifier | undefined, fields: [string, Value][]): Value {
  return { kind: 'record', recordId, fields: fields.map(([label, value]) => ({ label, value })) };
}
export function textMap(entries: Record<string, Value>): Value {
  const keys = Object.keys(entries).sort(compareUtf8);
  return { kind: 'textMap', entries: keys.map((key) => ({ key, value: entries[key]! })) };
}
export const emptyGenMap: Value = { kind: 'genMap', entries: [] };

/** Decimal string in Daml's canonical Numeric 10 form (`5` → `5.0000000000`). */
export function canonicalNumeric(decimal: string): string {
  const m = /^(-?)(0|[1-9]\d*)(?:\.(\d{0,10}))?$/.exec(decimal);
  if (!m) throw new Error(`not a decimal amount with at most 10 decimals: ${decimal}`);
  const [, sign, whole, frac = ''] = m;
  return `${sign}${whole}.${frac.padEnd(10, '0')}`;
}

/** A Daml Numeric 10 amount (checked as `canonicalNumeric` checks it) as units of 10⁻¹⁰. */
export const numericUnits = (decimal: string): bigint => decimalUnits(canonicalNumeric(decimal)) as bigint;

// ---- token-standard shapes --------------------------------------------------------

export const metadata = (values: Record<string, Value> = {}): Value =>
  record(mdType('Metadata'), [['values', textMap(values)]]);

export const anyCid = (c: string): Value => variant(mdType('AnyValue'), 'AV_ContractId', cid(c));
export const anyBool = (b: boolean): Value => variant(mdType('AnyValue'), 'AV_Bool', bool(b));

/** `ExtraArgs { context = ChoiceContext { values }, meta = Metadata {} }`. */
export function extraArgs(context: Record<string, Value>): Value {
  return record(mdType('ExtraArgs'), [
    ['context', record(mdType('ChoiceContext'), [['values', textMap(context)]])],
    ['meta', metadata()],
  ]);
}

/** `TransferInstructionResult_Output` constructor with its record payload. */
export const instructionOutput = (ctor: string, fields: [string, Value][]): Value =>
  variant(
    tiType('TransferInstructionResult_Output'),
    ctor,
    record(tiType(`TransferInstructionResult_Output.${ctor}`), fields),
  );

export const instrumentId = (admin: string, id: string): Value =>
  record(ident(PKG.tokenHolding, 'Splice.Api.Token.HoldingV1', 'InstrumentId'), [
    ['admin', party(admin)],
    ['id', text(id)],
  ]);

// ---- Amulet shapes -----------------------------------------------------------------

export const round = (n: bigint): Value => record(amuletType('Splice.Types', 'Round'), [['number', int(n)]]);

/** `Amulet { dso, owner, amount = ExpiringAmount { initialAmount, createdAt = Round, ratePerRound } }`. */
export function amuletRecord(
  dso: string,
  owner: string,
  amount: string,
  createdRound: bigint,
  rate: string,
): Value {
  return record(ID.amulet, [
    ['dso', party(dso)],
    ['owner', party(owner)],
    [
      'amount',
      record(amuletType('Splice.Fees', 'ExpiringAmount'), [
        ['initialAmount', num(amount)],
        ['createdAt', round(createdRound)],
        ['ratePerRound', record(amuletType('Splice.Fees', 'RatePerRound'), [['rate', num(rate)]])],
      ]),
    ],
  ]);
}

/** `LockedAmulet { amulet, lock = TimeLock { holders, expiresAt, optContext } }`. */
export function lockedAmuletRecord(
  amulet: Value,
  holders: string[],
  expiresAt: bigint,
  context: string,
): Value {
  return record(ID.lockedAmulet, [
    ['amulet', amulet],
    [
      'lock',
      record(amuletType('Splice.Expiry', 'TimeLock'), [
        ['holders', list(holders.map(party))],
        ['expiresAt', ts(expiresAt)],
        ['optContext', some(text(context))],
      ]),
    ],
  ]);
}

/** `TransferContext { openMiningRound, issuingMiningRounds = {}, validatorRights = {} }`. */
export const transferContext = (openRound: string): Value =>
  record(amuletType('Splice.AmuletRules', 'TransferContext'), [
    ['openMiningRound', cid(openRound)],
    ['issuingMiningRounds', emptyGenMap],
    ['validatorRights', emptyGenMap],
  ]);

export const inputAmulet = (c: string): Value =>
  variant(amuletType('Splice.AmuletRules', 'TransferInput'), 'InputAmulet', cid(c));

/** Token-standard `Transfer` record (TransferFactory_Transfer.transfer, AmuletTransferInstruction.transfer). */
export interface TokenTransfer {
  sender: string;
  receiver: string;
  amount: string;
  admin: string;
  instrument: string;
  requestedAt: bigint;
  executeBefore: bigint;
  inputHoldingCids: string[];
  meta: Record<string, string>;
}
export function tokenTransferRecord(t: TokenTransfer): Value {
  const meta: Record<string, Value> = {};
  for (const [k, v] of Object.entries(t.meta)) meta[k] = text(v);
  return record(tiType('Transfer'), [
    ['sender', party(t.sender)],
    ['receiver', party(t.receiver)],
    ['amount', num(t.amount)],
    ['instrumentId', instrumentId(t.admin, t.instrument)],
    ['requestedAt', ts(t.requestedAt)],
    ['executeBefore', ts(t.executeBefore)],
    ['inputHoldingCids', list(t.inputHoldingCids.map(cid))],
    ['meta', metadata(meta)],
  ]);
}

// ---- parties and contract ids --------------------------------------------------------

/** A party set as the participant hashes it: distinct, ascending. */
export function partySet(...parties: string[]): string[] {
  return [...new Set(parties)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Seed of a node (32 bytes), as the participant derives it; the sandbox supplies its own. */
export type SeedSource = (nodeId: number) => Uint8Array;

/**
 * Contract id of a contract created in this transaction: `00` + a 32-byte
 * discriminator (here derived from the node seed), without the suffix the
 * participant adds only after submission, as in the real vectors' created ids.
 */
export function mintContractId(seed: Uint8Array): string {
  if (seed.length !== 32) throw new Error('node seeds are 32 bytes');
  return `00${createHash('sha256').update('canton-signer/sandbox/cid').update(seed).digest('hex')}`;
}

// ---- nodes -----------------------------------------------------------------------------

export interface ContractRef {
  contractId: string;
  packageName: string;
  templateId: Identifier;
  signatories: string[];
  stakeholders: string[];
}

export function createNode(ref: ContractRef, argument: Value): CreateNode {
  return {
    type: 'create',
    lfVersion: LF,
    contractId: ref.contractId,
    packageName: ref.packageName,
    templateId: ref.templateId,
    argument,
    signatories: partySet(...ref.signatories),
    stakeholders: partySet(...ref.stakeholders),
    key: undefined,
  };
}

export function fetchNode(ref: ContractRef, actingParties: string[], interfaceId?: Identifier): FetchNode {
  return {
    type: 'fetch',
    lfVersion: LF,
    contractId: ref.contractId,
    packageName: ref.packageName,
    templateId: ref.templateId,
    signatories: partySet(...ref.signatories),
    stakeholders: partySet(...ref.stakeholders),
    actingParties: partySet(...actingParties),
    interfaceId,
    key: undefined,
    byKey: false,
  };
}

export interface ExerciseSpec {
  actingParties: string[];
  choiceId: string;
  chosenValue: Value;
  consuming: boolean;
  children: number[];
  exerciseResult?: Value;
  interfaceId?: Identifier;
}

export function exerciseNode(ref: ContractRef, e: ExerciseSpec): ExerciseNode {
  return {
    type: 'exercise',
    lfVersion: LF,
    contractId: ref.contractId,
    packageName: ref.packageName,
    templateId: ref.templateId,
    signatories: partySet(...ref.signatories),
    stakeholders: partySet(...ref.stakeholders),
    actingParties: partySet(...e.actingParties),
    interfaceId: e.interfaceId,
    choiceId: e.choiceId,
    chosenValue: e.chosenValue,
    consuming: e.consuming,
    children: e.children.map(String),
    exerciseResult: e.exerciseResult,
    choiceObservers: [],
    key: undefined,
    byKey: false,
  };
}

/** The consuming `Archive` a template choice runs on an input holding. */
export function archiveNode(ref: ContractRef, actingParties: string[]): ExerciseNode {
  return exerciseNode(ref, {
    actingParties,
    choiceId: 'Archive',
    chosenValue: record(ident(PKG.damlPrim, 'DA.Internal.Template', 'Archive'), []),
    consuming: true,
    children: [],
    exerciseResult: unit,
  });
}

// ---- envelope --------------------------------------------------------------------------

/** An input contract the transaction uses, with the argument it was created with. */
export interface InputSpec {
  ref: ContractRef;
  argument: Value;
  createdAt: bigint; // µs
}

/** Hashing-relevant submission data common to every builder. */
export interface Envelope {
  actAs: string[];
  commandId: string;
  synchronizerId: string;
  mediatorGroup?: number;
  transactionUuid: string; // lowercase UUID
  preparationTime: bigint; // µs
  minLedgerEffectiveTime?: bigint;
  maxLedgerEffectiveTime?: bigint;
  maxRecordTime?: bigint;
  seeds: SeedSource;
}

/** Ledger-time bounds a transaction that reads mining rounds carries (µs). */
export interface LedgerTimeBounds {
  minLedgerEffectiveTime: bigint;
  maxLedgerEffectiveTime: bigint;
}

/**
 * Assembles the transaction: `bodies[i]` gets node id `i` (the builders number
 * nodes in pre-order, as the participant does), node 0 is the single root, and
 * every create and exercise gets its seed.
 */
export function assemble(env: Envelope, bodies: NodeBody[], inputs: InputSpec[]): PreparedTransaction {
  const nodes: Node[] = bodies.map((node, i) => ({ nodeId: String(i), node }));
  const nodeSeeds = bodies.flatMap((n, i) =>
    n.type === 'create' || n.type === 'exercise' ? [{ nodeId: i, seed: env.seeds(i) }] : [],
  );
  const inputContracts: InputContract[] = inputs
    .map((i) => ({
      contract: createNode(i.ref, i.argument),
      createdAt: i.createdAt,
      eventBlob: new Uint8Array(0),
    }))
    .sort((a, b) => (a.contract.contractId < b.contract.contractId ? -1 : 1));
  return {
    transaction: { version: LF, roots: ['0'], nodes, nodeSeeds },
    metadata: {
      submitterInfo: { actAs: partySet(...env.actAs), commandId: env.commandId },
      synchronizerId: env.synchronizerId,
      mediatorGroup: env.mediatorGroup ?? 0,
      transactionUuid: env.transactionUuid,
      preparationTime: env.preparationTime,
      inputContracts,
      minLedgerEffectiveTime: env.minLedgerEffectiveTime,
      maxLedgerEffectiveTime: env.maxLedgerEffectiveTime,
      maxRecordTime: env.maxRecordTime,
    },
  };
}

/**
 * TransferFactory_Transfer on ExternalPartyAmuletRules (token standard, Amulet):
 * - `direct`: the receiver has a TransferPreapproval; the factory runs
 *   TransferPreapproval_Send → AmuletRules_Transfer and the receiver gets the
 *   amulet at once (shape of v2_bitgo_transferrawtxnwithmemo_preparecommandresponse_base64_json);
 * - `twoStep`: no preapproval; fees are computed, the amount is locked to the
 *   DSO and an AmuletTransferInstruction (the offer) is created for the receiver
 *   to accept (shape of v2_bitgo_trasferprepareresponse).
 */
import type { NodeBody, PreparedTransaction, Value } from '../../hashing/model.js';
import {
  type AmuletDso,
  amuletRulesInput,
  dsoRef,
  type Existing,
  externalRulesInput,
  holdingRef,
  openRoundInput,
} from './amulet-inputs.js';
import {
  type AmuletHolding,
  type AmuletTransferSpec,
  addAmounts,
  amuletRulesTransferNodes,
  inputValue,
  subAmounts,
  transferOutput,
  transferResult,
} from './amulet-transfer.js';
import {
  amuletRecord,
  amuletType,
  anyCid,
  assemble,
  cid,
  createNode,
  type Envelope,
  exerciseNode,
  extraArgs,
  fetchNode,
  ID,
  type InputSpec,
  instructionOutput,
  type LedgerTimeBounds,
  list,
  lockedAmuletRecord,
  metadata,
  mintContractId,
  num,
  PACKAGE_NAME,
  PKG,
  party,
  record,
  some,
  text,
  tiType,
  tokenTransferRecord,
  transferContext,
  variant,
} from './common.js';

const HOLDING_IFACE = {
  packageId: PKG.tokenHolding,
  moduleName: 'Splice.Api.Token.HoldingV1',
  entityName: 'Holding',
};
const REASON = 'splice.lfdecentralizedtrust.org/reason';
const SENDER = 'splice.lfdecentralizedtrust.org/sender';
const TX_KIND = 'splice.lfdecentralizedtrust.org/tx-kind';

export type TokenTransferInput = Envelope & LedgerTimeBounds & TokenTransferFields;

export interface TokenTransferFields {
  mode: 'direct' | 'twoStep' | 'self';
  dso: AmuletDso;
  externalPartyAmuletRules: Existing;
  sender: string;
  receiver: string;
  amount: string;
  inputs: AmuletHolding[];
  requestedAt: bigint;
  executeBefore: bigint;
  /** Free-text reason (`splice.lfdecentralizedtrust.org/reason`); the vectors always carry it. */
  reason: string;
  /** `direct` only: the receiver's preapproval. */
  preapproval?: Existing & { provider: string; validFrom: bigint; lastRenewedAt: bigint; expiresAt: bigint };
}

export function tokenStandardTransfer(i: TokenTransferInput): PreparedTransaction {
  return i.mode === 'direct' ? direct(i) : i.mode === 'self' ? selfTransfer(i) : twoStep(i);
}

function holdingInputs(i: TokenTransferInput): InputSpec[] {
  return i.inputs.map((h) => ({
    ref: holdingRef(i.dso.dso, i.sender, h.contractId),
    argument: amuletRecord(i.dso.dso, i.sender, h.amount, h.createdRound, h.rate),
    createdAt: h.createdAt,
  }));
}

function factoryArg(i: TokenTransferInput, context: Record<string, Value>): Value {
  return record(tiType('TransferFactory_Transfer'), [
    ['expectedAdmin', party(i.dso.dso)],
    [
      'transfer',
      tokenTransferRecord({
        sender: i.sender,
        receiver: i.receiver,
        amount: i.amount,
        admin: i.dso.dso,
        instrument: 'Amulet',
        requestedAt: i.requestedAt,
        executeBefore: i.executeBefore,
        inputHoldingCids: i.inputs.map((h) => h.contractId),
        meta: { [REASON]: i.reason },
      }),
    ],
    ['extraArgs', extraArgs(context)],
  ]);
}

function factoryResult(output: Value, changeCid: string | undefined): Value {
  return record(tiType('TransferInstructionResult'), [
    ['output', output],
    ['senderChangeCids', list(changeCid === undefined ? [] : [cid(changeCid)])],
    ['meta', metadata()],
  ]);
}

/**
 * The root: TransferFactory_Transfer on ExternalPartyAmuletRules with the
 * rules and round (and `context`) as choice context, `children` and the result.
 */
function factoryRoot(
  i: TokenTransferInput,
  o: { context?: Record<string, Value>; children: number[]; output: Value; changeCid: string | undefined },
): NodeBody {
  const d = i.dso;
  return exerciseNode(dsoRef(d.dso, i.externalPartyAmuletRules, ID.externalRules), {
    actingParties: [i.sender],
    interfaceId: ID.transferFactory,
    choiceId: 'TransferFactory_Transfer',
    chosenValue: factoryArg(i, {
      'amulet-rules': anyCid(d.amuletRules.contractId),
      'open-round': anyCid(d.openRound.contractId),
      ...o.context,
    }),
    consuming: false,
    children: o.children,
    exerciseResult: factoryResult(o.output, o.changeCid),
  });
}

/** `…_Completed`: the output is the receiver's holding. */
const completed = (outputCid: string): Value =>
  instructionOutput('TransferInstructionResult_Completed', [['receiverHoldingCids', list([cid(outputCid)])]]);

/** Node ids `from`, `from + 1`, … of the input holdings' fetches. */
const inputIds = (i: TokenTransferInput, from: number): number[] => i.inputs.map((_, k) => from + k);

/** Each input holding fetched through the Holding interface. */
const inputFetches = (i: TokenTransferInput): NodeBody[] =>
  i.inputs.map((h) =>
    fetchNode(holdingRef(i.dso.dso, i.sender, h.contractId), [i.dso.dso, i.sender], HOLDING_IFACE),
  );

/**
 * The inputs' value as of the open round (holding fees deducted) minus the
 * amount (no transfer fees in the sandbox). Refuses (throws) a negative change:
 * the interpreter checks the funds first and answers with the ledger's error.
 */
const changeOf = (i: TokenTransferInput): string => {
  const change = subAmounts(addAmounts(...i.inputs.map(inputValue)), i.amount);
  if (change.startsWith('-'))
    throw new Error(`insufficient funds: the inputs are worth less than ${i.amount} after holding fees`);
  return change;
};

/** Inputs spent exactly: AmuletRules_Transfer creates no change amulet. */
const noChange = (change: string): boolean => /^0(\.0+)?$/.test(change);

/** The sender's change amulet `contractId` holding `change`. */
function senderChange(
  i: TokenTransferInput,
  contractId: string,
  change: string,
): AmuletTransferSpec['change'] {
  const d = i.dso;
  return {
    contractId,
    argument: amuletRecord(d.dso, i.sender, change, d.openRound.number, d.holdingFeeRate),
  };
}

function direct(i: TokenTransferInput): PreparedTransaction {
  const p = i.preapproval;
  if (!p) throw new Error('a direct transfer needs the receiver’s TransferPreapproval');
  const d = i.dso;
  const dso = d.dso;
  // 0 factory; 1 fetch preapproval; 2 fetch rules; 3.. fetch inputs (Holding); then Send → Transfer.
  const sendAt = 3 + i.inputs.length;
  const transferAt = sendAt + 1;
  const outAt = transferAt + 2 + 2 * i.inputs.length;
  const outputCid = mintContractId(i.seeds(outAt));
  const change = changeOf(i);
  const changeCid = noChange(change) ? undefined : mintContractId(i.seeds(outAt + 1));
  const spec: AmuletTransferSpec = {
    dso: d,
    sender: i.sender,
    provider: p.provider,
    receiver: i.receiver,
    amount: i.amount,
    inputs: i.inputs,
    actingParties: [i.sender, i.receiver, p.provider],
    at: transferAt,
    outputCid,
    change: changeCid === undefined ? undefined : senderChange(i, changeCid, change),
    outputArgument: amuletRecord(dso, i.receiver, i.amount, d.openRound.number, d.holdingFeeRate),
    extraMeta: { [SENDER]: i.sender, [TX_KIND]: 'transfer' },
  };
  const preRef = {
    contractId: p.contractId,
    packageName: PACKAGE_NAME.amulet,
    templateId: ID.transferPreapproval,
    signatories: [dso, i.receiver, p.provider],
    stakeholders: [dso, i.receiver, p.provider],
  };
  const sendMeta = { [REASON]: text(i.reason), [SENDER]: text(i.sender), [TX_KIND]: text('transfer') };
  const send = exerciseNode(preRef, {
    actingParties: [i.sender],
    choiceId: 'TransferPreapproval_Send',
    chosenValue: record(amuletType('Splice.AmuletRules', 'TransferPreapproval_Send'), [
      [
        'context',
        record(amuletType('Splice.AmuletRules', 'PaymentTransferContext'), [
          ['amuletRules', cid(d.amuletRules.contractId)],
          ['context', transferContext(d.openRound.contractId)],
        ]),
      ],
      [
        'inputs',
        list(
          i.inputs.map((h) =>
            variant(amuletType('Splice.AmuletRules', 'TransferInput'), 'InputAmulet', cid(h.contractId)),
          ),
        ),
      ],
      ['amount', num(i.amount)],
      ['sender', party(i.sender)],
      ['description', some(text(i.reason))],
    ]),
    consuming: false,
    children: [transferAt],
    exerciseResult: record(amuletType('Splice.AmuletRules', 'TransferPreapproval_SendResult'), [
      ['result', stripMeta(transferResult(spec, false))],
      ['meta', some(metadata(sendMeta))],
    ]),
  });
  const root = factoryRoot(i, {
    context: { 'transfer-preapproval': anyCid(p.contractId) },
    children: [1, 2, ...inputIds(i, 3), sendAt],
    output: completed(outputCid),
    changeCid,
  });
  const bodies: NodeBody[] = [
    root,
    fetchNode(preRef, [dso]),
    fetchNode(dsoRef(dso, d.amuletRules), [dso]),
    ...inputFetches(i),
    send,
    ...amuletRulesTransferNodes(spec),
  ];
  const preArg = record(ID.transferPreapproval, [
    ['dso', party(dso)],
    ['receiver', party(i.receiver)],
    ['provider', party(p.provider)],
    ['validFrom', { kind: 'timestamp', value: p.validFrom }],
    ['lastRenewedAt', { kind: 'timestamp', value: p.lastRenewedAt }],
    ['expiresAt', { kind: 'timestamp', value: p.expiresAt }],
  ]);
  return assemble(i, bodies, [
    amuletRulesInput(d),
    openRoundInput(d),
    externalRulesInput(dso, i.externalPartyAmuletRules),
    { ref: preRef, argument: preArg, createdAt: p.createdAt },
    ...holdingInputs(i),
  ]);
}

/** TransferPreapproval_SendResult.result is a TransferResult without its `meta` field. */
function stripMeta(v: Value): Value {
  return v.kind === 'record' ? { ...v, fields: v.fields.filter((f) => f.label !== 'meta') } : v;
}

function twoStep(i: TokenTransferInput): PreparedTransaction {
  const d = i.dso;
  const dso = d.dso;
  // 0 factory; 1 fetch rules; 2 ComputeFees; 3 fetch round; 4.. fetch inputs (Holding); Transfer; instruction.
  const transferAt = 4 + i.inputs.length;
  const outAt = transferAt + 2 + 2 * i.inputs.length;
  const lockedCid = mintContractId(i.seeds(outAt));
  const change = changeOf(i);
  const changeCid = noChange(change) ? undefined : mintContractId(i.seeds(outAt + 1));
  // The instruction follows the locked amulet and, when there is one, the change.
  const instructionAt = changeCid === undefined ? outAt + 1 : outAt + 2;
  const instructionCid = mintContractId(i.seeds(instructionAt));
  const lock = { holders: [dso], expiresAt: i.executeBefore, context: `transfer to '${i.receiver}'` };
  const amulet = amuletRecord(dso, i.sender, i.amount, d.openRound.number, d.holdingFeeRate);
  const spec: AmuletTransferSpec = {
    dso: d,
    sender: i.sender,
    provider: i.sender,
    receiver: i.sender,
    amount: i.amount,
    lock,
    inputs: i.inputs,
    actingParties: [dso, i.sender],
    at: transferAt,
    outputCid: lockedCid,
    change: changeCid === undefined ? undefined : senderChange(i, changeCid, change),
    outputArgument: lockedAmuletRecord(amulet, lock.holders, lock.expiresAt, lock.context),
    extraMeta: { [SENDER]: i.sender, [TX_KIND]: 'transfer' },
  };
  const rulesRef = dsoRef(dso, d.amuletRules);
  const computeFees = exerciseNode(rulesRef, {
    actingParties: [i.sender],
    choiceId: 'AmuletRules_ComputeFees',
    chosenValue: record(amuletType('Splice.AmuletRules', 'AmuletRules_ComputeFees'), [
      ['context', transferContext(d.openRound.contractId)],
      ['sender', party(i.sender)],
      ['outputs', list([transferOutput(i.receiver, i.amount)])],
      ['expectedDso', some(party(dso))],
    ]),
    consuming: false,
    children: [3],
    exerciseResult: record(amuletType('Splice.AmuletRules', 'AmuletRules_ComputeFeesResult'), [
      ['fees', list([num('0')])],
    ]),
  });
  const instructionRef = {
    contractId: instructionCid,
    packageName: PACKAGE_NAME.amulet,
    templateId: ID.transferInstruction,
    signatories: [dso, i.sender],
    stakeholders: [dso, i.sender, i.receiver],
  };
  const instruction = createNode(
    instructionRef,
    record(ID.transferInstruction, [
      ['lockedAmulet', cid(lockedCid)],
      [
        'transfer',
        tokenTransferRecord({
          sender: i.sender,
          receiver: i.receiver,
          amount: i.amount,
          admin: dso,
          instrument: 'Amulet',
          requestedAt: i.requestedAt,
          executeBefore: i.executeBefore,
          inputHoldingCids: [lockedCid],
          meta: { [REASON]: i.reason },
        }),
      ],
    ]),
  );
  const root = factoryRoot(i, {
    children: [1, 2, ...inputIds(i, 4), transferAt, instructionAt],
    output: instructionOutput('TransferInstructionResult_Pending', [
      ['transferInstructionCid', cid(instructionCid)],
    ]),
    changeCid,
  });
  const bodies: NodeBody[] = [
    root,
    fetchNode(rulesRef, [dso]),
    computeFees,
    fetchNode(dsoRef(dso, d.openRound, ID.openMiningRound), [dso]),
    ...inputFetches(i),
    ...amuletRulesTransferNodes(spec),
    instruction,
  ];
  return assemble(i, bodies, [
    amuletRulesInput(d),
    openRoundInput(d),
    externalRulesInput(dso, i.externalPartyAmuletRules),
    ...holdingInputs(i),
  ]);
}

/**
 * `self`: sender = receiver (a holdings merge or split). The factory runs
 * AmuletRules_Transfer with one output to the sender; the change (the inputs'
 * value after holding fees minus the amount) is a second holding only when it
 * is not zero.
 * Result `…_Completed` with the output as the receiver's holding.
 */
function selfTransfer(i: TokenTransferInput): PreparedTransaction {
  const d = i.dso;
  const dso = d.dso;
  // 0 factory; 1 fetch rules; 2 fetch round; 3.. fetch inputs (Holding); then Transfer.
  const transferAt = 3 + i.inputs.length;
  const outAt = transferAt + 2 + 2 * i.inputs.length;
  const outputCid = mintContractId(i.seeds(outAt));
  const change = changeOf(i);
  const changeCid = noChange(change) ? undefined : mintContractId(i.seeds(outAt + 1));
  const spec: AmuletTransferSpec = {
    dso: d,
    sender: i.sender,
    provider: i.sender,
    receiver: i.sender,
    amount: i.amount,
    inputs: i.inputs,
    actingParties: [i.sender],
    at: transferAt,
    outputCid,
    change: changeCid === undefined ? undefined : senderChange(i, changeCid, change),
    outputArgument: amuletRecord(dso, i.sender, i.amount, d.openRound.number, d.holdingFeeRate),
    extraMeta: { [SENDER]: i.sender, [TX_KIND]: 'transfer' },
  };
  const rulesRef = dsoRef(dso, d.amuletRules);
  const root = factoryRoot(i, {
    children: [1, 2, ...inputIds(i, 3), transferAt],
    output: completed(outputCid),
    changeCid,
  });
  const bodies: NodeBody[] = [
    root,
    fetchNode(rulesRef, [dso]),
    fetchNode(dsoRef(dso, d.openRound, ID.openMiningRound), [dso]),
    ...inputFetches(i),
    ...amuletRulesTransferNodes(spec),
  ];
  return assemble(i, bodies, [
    amuletRulesInput(d),
    openRoundInput(d),
    externalRulesInput(dso, i.externalPartyAmuletRules),
    ...holdingInputs(i),
  ]);
}

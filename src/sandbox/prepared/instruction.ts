/**
 * TransferInstruction_Accept / _Reject / _Withdraw on an AmuletTransferInstruction
 * (token standard, Amulet two-step transfers). Each unlocks the LockedAmulet;
 * accept then transfers the unlocked amulet to the receiver, reject and
 * withdraw return it to the sender. Shapes of
 * v2_bitgo_transferacceptanceprepareresponse, v2_bitgo_transferrejectionprepareresponse
 * and v2_bitgo_cantontransferofferwithdrawnprepareresponse.
 */
import type { NodeBody, PreparedTransaction, Value } from '../../hashing/model.js';
import { type AmuletDso, amuletRulesInput, dsoRef, holdingRef, openRoundInput } from './amulet-inputs.js';
import { amuletRulesTransferNodes } from './amulet-transfer.js';
import {
  amuletRecord,
  amuletType,
  anyBool,
  anyCid,
  assemble,
  cid,
  createNode,
  type Envelope,
  exerciseNode,
  extraArgs,
  fetchNode,
  ID,
  instructionOutput,
  type LedgerTimeBounds,
  list,
  lockedAmuletRecord,
  metadata,
  mintContractId,
  num,
  PACKAGE_NAME,
  record,
  round,
  some,
  type TokenTransfer,
  text,
  tiType,
  tokenTransferRecord,
  unit,
  variant,
} from './common.js';

export interface InstructionInput extends Envelope {
  dso: AmuletDso;
  /** The pending transfer as the instruction records it. */
  transfer: TokenTransfer;
  instruction: { contractId: string; createdAt: bigint };
  /** The amulet locked by the instruction (its creation round and holding-fee rate). */
  lockedAmulet: { contractId: string; createdAt: bigint; createdRound: bigint; rate: string };
}

export type AcceptInput = InstructionInput & LedgerTimeBounds;

type Kind = 'Accept' | 'Reject' | 'Withdraw' | 'Update';

const REASON = 'splice.lfdecentralizedtrust.org/reason';
const TX_KIND = 'splice.lfdecentralizedtrust.org/tx-kind';

export function transferInstructionAccept(i: AcceptInput): PreparedTransaction {
  return build(i, 'Accept');
}
export function transferInstructionReject(i: InstructionInput): PreparedTransaction {
  return build(i, 'Reject');
}
export function transferInstructionWithdraw(i: InstructionInput): PreparedTransaction {
  return build(i, 'Withdraw');
}
/**
 * The instruction's expiry as Splice's Amulet does it: `TransferInstruction_Update` by the
 * instrument admin (the DSO) once `executeBefore` passed, no extra actors; the lock goes back to
 * the sender and the result is `TransferInstructionResult_Failed`, as for a reject.
 */
export function transferInstructionExpire(i: InstructionInput): PreparedTransaction {
  return build(i, 'Update');
}

function build(i: InstructionInput, kind: Kind): PreparedTransaction {
  const d = i.dso;
  const dso = d.dso;
  const t = i.transfer;
  const accept = kind === 'Accept';
  // Accept: 0 root; 1 fetch rules; 2 unlock (3 fetch round, 4 unlocked amulet); 5 AmuletRules_Transfer …
  // Reject/Withdraw: 0 root; 1 fetch round; 2 unlock (3 fetch round, 4 unlocked amulet).
  const unlockedCid = mintContractId(i.seeds(4));
  const lockedRef = holdingRef(dso, t.sender, i.lockedAmulet.contractId, ID.lockedAmulet);
  const roundRef = dsoRef(dso, d.openRound, ID.openMiningRound);
  const lockedAmulet = amuletRecord(
    dso,
    t.sender,
    t.amount,
    i.lockedAmulet.createdRound,
    i.lockedAmulet.rate,
  );
  const unlock = exerciseNode(lockedRef, {
    actingParties: [dso, t.sender],
    choiceId: 'LockedAmulet_Unlock',
    chosenValue: record(amuletType('Splice.Amulet', 'LockedAmulet_Unlock'), [
      ['openRoundCid', cid(d.openRound.contractId)],
    ]),
    consuming: true,
    children: [3, 4],
    exerciseResult: record(amuletType('Splice.Amulet', 'LockedAmulet_UnlockResult'), [
      [
        'amuletSum',
        record(amuletType('Splice.Amulet', 'AmuletCreateSummary'), [
          ['amulet', cid(unlockedCid)],
          ['amuletPrice', num(d.openRound.amuletPrice)],
          ['round', round(d.openRound.number)],
        ]),
      ],
      ['meta', some(metadata({ [REASON]: text('holders released lock'), [TX_KIND]: text('unlock') }))],
    ]),
  });
  const unlocked = createNode(holdingRef(dso, t.sender, unlockedCid), lockedAmulet);
  const instructionRef = {
    contractId: i.instruction.contractId,
    packageName: PACKAGE_NAME.amulet,
    templateId: ID.transferInstruction,
    signatories: [dso, t.sender],
    stakeholders: [dso, t.sender, t.receiver],
  };
  let subtree: NodeBody[] = [];
  let output: Value;
  let senderChange: string[] = [unlockedCid];
  if (accept) {
    const receivedCid = mintContractId(i.seeds(9));
    subtree = amuletRulesTransferNodes({
      dso: d,
      sender: t.sender,
      provider: t.sender,
      receiver: t.receiver,
      amount: t.amount,
      inputs: [{ contractId: unlockedCid, amount: t.amount }],
      actingParties: [t.sender, t.receiver],
      at: 5,
      outputCid: receivedCid,
      change: undefined,
      outputArgument: amuletRecord(dso, t.receiver, t.amount, d.openRound.number, d.holdingFeeRate),
      extraMeta: { 'splice.lfdecentralizedtrust.org/sender': t.sender, [TX_KIND]: 'transfer' },
    });
    output = instructionOutput('TransferInstructionResult_Completed', [
      ['receiverHoldingCids', list([cid(receivedCid)])],
    ]);
    senderChange = [];
  } else {
    output = variant(tiType('TransferInstructionResult_Output'), 'TransferInstructionResult_Failed', unit);
  }
  const root = exerciseNode(instructionRef, {
    actingParties: [kind === 'Withdraw' ? t.sender : kind === 'Update' ? dso : t.receiver],
    interfaceId: ID.transferInstructionIface,
    choiceId: `TransferInstruction_${kind}`,
    chosenValue: record(tiType(`TransferInstruction_${kind}`), [
      ...(kind === 'Update' ? [['extraActors', list([])] as [string, Value]] : []),
      [
        'extraArgs',
        extraArgs({
          'amulet-rules': anyCid(d.amuletRules.contractId),
          'expire-lock': anyBool(true),
          'open-round': anyCid(d.openRound.contractId),
        }),
      ],
    ]),
    consuming: true,
    children: accept ? [1, 2, 5] : [1, 2],
    exerciseResult: record(tiType('TransferInstructionResult'), [
      ['output', output],
      ['senderChangeCids', list(senderChange.map(cid))],
      ['meta', metadata()],
    ]),
  });
  const first = accept ? fetchNode(dsoRef(dso, d.amuletRules), [dso]) : fetchNode(roundRef, [dso]);
  const bodies: NodeBody[] = [root, first, unlock, fetchNode(roundRef, [dso]), unlocked, ...subtree];
  const lock = {
    holders: [dso],
    expiresAt: t.executeBefore,
    context: `transfer to '${t.receiver}'`,
  };
  const inputs = [
    openRoundInput(d),
    {
      ref: instructionRef,
      argument: record(ID.transferInstruction, [
        ['lockedAmulet', cid(i.lockedAmulet.contractId)],
        ['transfer', tokenTransferRecord(t)],
      ]),
      createdAt: i.instruction.createdAt,
    },
    {
      ref: lockedRef,
      argument: lockedAmuletRecord(lockedAmulet, lock.holders, lock.expiresAt, lock.context),
      createdAt: i.lockedAmulet.createdAt,
    },
  ];
  if (accept) inputs.push(amuletRulesInput(d));
  return assemble(i, bodies, inputs);
}

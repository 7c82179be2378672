/**
 * The AmuletRules_Transfer sub-tree the Amulet token-standard choices run
 * (fetch open round; per input: fetch + Archive; then the created amulets),
 * its argument and TransferResult. Shapes of the AmuletRules_Transfer nodes in
 * v2_bitgo_transferrawtxnwithmemo…, v2_bitgo_trasferprepareresponse and
 * v2_bitgo_transferacceptanceprepareresponse.
 */
import type { NodeBody, Value } from '../../hashing/model.js';
import { fromUnits } from '../../intent/decimal.js';
import { type AmuletDso, dsoRef, holdingRef } from './amulet-inputs.js';
import {
  amuletType,
  archiveNode,
  createNode,
  emptyGenMap,
  exerciseNode,
  fetchNode,
  ID,
  inputAmulet,
  list,
  metadata,
  none,
  num,
  numericUnits,
  party,
  record,
  round,
  some,
  text,
  transferContext,
  variant,
} from './common.js';

/** An amulet the sender spends. */
export interface AmuletHolding {
  contractId: string;
  createdAt: bigint; // µs
  /** The amulet's initial amount (its contract argument). */
  amount: string;
  createdRound: bigint;
  rate: string;
  /** Its value as of the transfer's open round, after holding fees (default: `amount`). */
  value?: string;
}

/** What an input is worth in the transfer: its value after holding fees, else its amount. */
export const inputValue = (h: { amount: string; value?: string | undefined }): string => h.value ?? h.amount;

export interface AmuletTransferSpec {
  dso: AmuletDso;
  sender: string;
  provider: string;
  receiver: string;
  amount: string;
  /** TimeLock of a two-step transfer's output (locked to the DSO until expiry). */
  lock?: { holders: string[]; expiresAt: bigint; context: string };
  inputs: { contractId: string; amount: string; value?: string | undefined }[];
  actingParties: string[];
  /** Node id of the AmuletRules_Transfer exercise; children follow in pre-order. */
  at: number;
  /** Contract ids of the output amulet (or locked amulet) and of the sender's change. */
  outputCid: string;
  /** No change amulet when the inputs are spent exactly (TransferInstruction_Accept). */
  change: { contractId: string; argument: Value } | undefined;
  outputArgument: Value;
  extraMeta: Record<string, string>;
  /**
   * Callers that pass no `expectedDso` (the wallet-payments helpers): the
   * field is None, which the participant drops as a trailing None.
   */
  omitExpectedDso?: boolean;
}

/** Sum of decimal amounts with 10 decimals, exactly. */
export function addAmounts(...xs: string[]): string {
  return fromUnits(xs.reduce((a, x) => a + numericUnits(x), 0n));
}
export function subAmounts(a: string, b: string): string {
  return fromUnits(numericUnits(a) - numericUnits(b));
}

export function transferOutput(receiver: string, amount: string, lock?: AmuletTransferSpec['lock']): Value {
  const fields: [string, Value][] = [
    ['receiver', party(receiver)],
    ['receiverFeeRatio', num('0')],
    ['amount', num(amount)],
  ];
  if (lock)
    fields.push([
      'lock',
      some(
        record(amuletType('Splice.Expiry', 'TimeLock'), [
          ['holders', list(lock.holders.map(party))],
          ['expiresAt', { kind: 'timestamp', value: lock.expiresAt }],
          ['optContext', some(text(lock.context))],
        ]),
      ),
    ]);
  return record(amuletType('Splice.AmuletRules', 'TransferOutput'), fields);
}

/**
 * `TransferResult`: the inputs valued as of the open round (holding fees
 * deducted and summed in `holdingFees`); no transfer, output or change fees
 * (the sandbox's fee schedule is zero).
 */
export function transferResult(s: AmuletTransferSpec, withMeta: boolean): Value {
  const inputTotal = addAmounts(...s.inputs.map(inputValue));
  const holdingFees = subAmounts(addAmounts(...s.inputs.map((i) => i.amount)), inputTotal);
  const created = s.lock ? 'TransferResultLockedAmulet' : 'TransferResultAmulet';
  const fields: [string, Value][] = [
    ['round', round(s.dso.openRound.number)],
    [
      'summary',
      record(amuletType('Splice.AmuletRules', 'TransferSummary'), [
        ['inputAppRewardAmount', num('0')],
        ['inputValidatorRewardAmount', num('0')],
        ['inputSvRewardAmount', num('0')],
        ['inputAmuletAmount', num(inputTotal)],
        ['balanceChanges', emptyGenMap],
        ['holdingFees', num(holdingFees)],
        ['outputFees', list([num('0')])],
        ['senderChangeFee', num('0')],
        ['senderChangeAmount', num(subAmounts(inputTotal, s.amount))],
        ['amuletPrice', num(s.dso.openRound.amuletPrice)],
        ['inputValidatorFaucetAmount', some(num('0'))],
        ['inputUnclaimedActivityRecordAmount', some(num('0'))],
      ]),
    ],
    [
      'createdAmulets',
      list([
        variant(amuletType('Splice.AmuletRules', 'CreatedAmulet'), created, {
          kind: 'contractId',
          value: s.outputCid,
        }),
      ]),
    ],
    ['senderChangeAmulet', s.change ? some({ kind: 'contractId', value: s.change.contractId }) : none],
  ];
  if (withMeta) {
    const meta: Record<string, Value> = {};
    for (const [k, v] of Object.entries(s.extraMeta)) meta[k] = text(v);
    fields.push(['meta', some(metadata(meta))]);
  }
  return record(amuletType('Splice.AmuletRules', 'TransferResult'), fields);
}

/** The AmuletRules_Transfer argument. */
export function amuletRulesTransferArg(s: AmuletTransferSpec): Value {
  const fields: [string, Value][] = [
    [
      'transfer',
      record(amuletType('Splice.AmuletRules', 'Transfer'), [
        ['sender', party(s.sender)],
        ['provider', party(s.provider)],
        ['inputs', list(s.inputs.map((i) => inputAmulet(i.contractId)))],
        ['outputs', list([transferOutput(s.receiver, s.amount, s.lock)])],
      ]),
    ],
    ['context', transferContext(s.dso.openRound.contractId)],
  ];
  if (!s.omitExpectedDso) fields.push(['expectedDso', some(party(s.dso.dso))]);
  return record(amuletType('Splice.AmuletRules', 'AmuletRules_Transfer'), fields);
}

/**
 * Nodes `at`, `at+1`, … of the AmuletRules_Transfer sub-tree: the exercise,
 * fetch of the open round, fetch + Archive of each input, the output and the change.
 */
export function amuletRulesTransferNodes(s: AmuletTransferSpec): NodeBody[] {
  const dso = s.dso.dso;
  const children: NodeBody[] = [fetchNode(dsoRef(dso, s.dso.openRound, ID.openMiningRound), [dso])];
  for (const i of s.inputs) {
    const ref = holdingRef(dso, s.sender, i.contractId);
    children.push(fetchNode(ref, [dso, s.sender]), archiveNode(ref, [dso, s.sender]));
  }
  const outputOwner = s.lock ? s.sender : s.receiver;
  children.push(
    createNode(
      holdingRef(dso, outputOwner, s.outputCid, s.lock ? ID.lockedAmulet : ID.amulet),
      s.outputArgument,
    ),
  );
  if (s.change) children.push(createNode(holdingRef(dso, s.sender, s.change.contractId), s.change.argument));
  const exercise = exerciseNode(dsoRef(dso, s.dso.amuletRules), {
    actingParties: s.actingParties,
    choiceId: 'AmuletRules_Transfer',
    chosenValue: amuletRulesTransferArg(s),
    consuming: false,
    children: children.map((_, k) => s.at + 1 + k),
    exerciseResult: transferResult(s, true),
  });
  return [exercise, ...children];
}

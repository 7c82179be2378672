/**
 * The provider's and receiver's own choices on a TransferPreapproval
 * (splice-amulet Splice.AmuletRules): `TransferPreapproval_Cancel` (receiver or
 * provider; archives it) and `TransferPreapproval_Renew` (provider; burns the
 * preapproval fee for the extension out of its amulets and recreates the
 * contract with the new expiry). No real vector of either exists in
 * ../shared/vectors/real: the shapes follow the Daml choices. Renew abbreviates
 * the fee burn to its net effect under the root (fetches of the rules and the
 * round, the inputs archived, the change recreated): the fee amulet split off
 * and archived within the transaction, the ValidatorRewardCoupon for the burn
 * and the result's TransferResult are left out.
 */
import type { Identifier, PreparedTransaction, Value } from '../../hashing/model.js';
import {
  amuletRecord,
  amuletType,
  archiveNode,
  assemble,
  type ContractRef,
  cid,
  createNode,
  type Envelope,
  emptyGenMap,
  exerciseNode,
  fetchNode,
  ID,
  type InputSpec,
  list,
  metadata,
  mintContractId,
  none,
  num,
  PACKAGE_NAME,
  party,
  record,
  some,
  ts,
  variant,
} from './common.js';

/** A contract read from the ledger, with everything its input-contract entry needs. */
export interface LedgerContract {
  contractId: string;
  packageName: string;
  templateId: Identifier;
  signatories: string[];
  stakeholders: string[];
  argument: Value;
  createdAt: bigint;
}

/** A ledger contract as the node it is exercised or fetched in refers to it. */
export const refOf = (c: LedgerContract): ContractRef => ({
  contractId: c.contractId,
  packageName: c.packageName,
  templateId: c.templateId,
  signatories: c.signatories,
  stakeholders: c.stakeholders,
});
/** A ledger contract as an input-contract entry of the transaction. */
export const inputOf = (c: LedgerContract): InputSpec => ({
  ref: refOf(c),
  argument: c.argument,
  createdAt: c.createdAt,
});

export interface PreapprovalCancelInput extends Envelope {
  preapproval: LedgerContract;
  /** The controller: the receiver or the provider. */
  actor: string;
}

export function transferPreapprovalCancel(i: PreapprovalCancelInput): PreparedTransaction {
  const root = exerciseNode(refOf(i.preapproval), {
    actingParties: [i.actor],
    choiceId: 'TransferPreapproval_Cancel',
    chosenValue: record(amuletType('Splice.AmuletRules', 'TransferPreapproval_Cancel'), [
      ['p', party(i.actor)],
    ]),
    consuming: true,
    children: [],
    exerciseResult: record(amuletType('Splice.AmuletRules', 'TransferPreapproval_CancelResult'), []),
  });
  return assemble(i, [root], [inputOf(i.preapproval)]);
}

export interface PreapprovalRenewInput extends Envelope {
  dso: string;
  provider: string;
  receiver: string;
  preapproval: LedgerContract & { validFrom: bigint };
  amuletRules: LedgerContract;
  openRound: LedgerContract & { number: bigint };
  /** The provider's Amulet inputs, in the order the command lists them. */
  inputs: LedgerContract[];
  newExpiresAt: bigint;
  /** Ledger time the participant chose: the new lastRenewedAt. */
  ledgerTime: bigint;
  /** The preapproval fee burnt, in Amulet. */
  amuletPaid: string;
  /** What the provider gets back (absent when nothing is left). */
  change: string | undefined;
  holdingFeeRate: string;
}

export function transferPreapprovalRenew(i: PreapprovalRenewInput): PreparedTransaction {
  const { dso, provider } = i;
  const nodes = [];
  const children: number[] = [];
  let next = 1;
  const child = () => {
    children.push(next);
    return next++;
  };
  child();
  nodes.push(fetchNode(refOf(i.amuletRules), [provider]));
  child();
  nodes.push(fetchNode(refOf(i.openRound), [provider]));
  for (const h of i.inputs) {
    child();
    nodes.push(archiveNode(refOf(h), [provider]));
  }
  if (i.change !== undefined) {
    const id = child();
    nodes.push(
      createNode(
        {
          contractId: mintContractId(i.seeds(id)),
          packageName: PACKAGE_NAME.amulet,
          templateId: ID.amulet,
          signatories: [dso, provider],
          stakeholders: [dso, provider],
        },
        amuletRecord(dso, provider, i.change, i.openRound.number, i.holdingFeeRate),
      ),
    );
  }
  const preId = child();
  const preCid = mintContractId(i.seeds(preId));
  nodes.push(
    createNode(
      {
        contractId: preCid,
        packageName: PACKAGE_NAME.amulet,
        templateId: ID.transferPreapproval,
        signatories: [dso, i.receiver, provider],
        stakeholders: [dso, i.receiver, provider],
      },
      record(ID.transferPreapproval, [
        ['dso', party(dso)],
        ['receiver', party(i.receiver)],
        ['provider', party(provider)],
        ['validFrom', ts(i.preapproval.validFrom)],
        ['lastRenewedAt', ts(i.ledgerTime)],
        ['expiresAt', ts(i.newExpiresAt)],
      ]),
    ),
  );
  const t = (e: string) => amuletType('Splice.AmuletRules', e);
  const root = exerciseNode(refOf(i.preapproval), {
    actingParties: [provider],
    choiceId: 'TransferPreapproval_Renew',
    chosenValue: record(t('TransferPreapproval_Renew'), [
      [
        'context',
        record(t('PaymentTransferContext'), [
          ['amuletRules', cid(i.amuletRules.contractId)],
          [
            'context',
            record(t('TransferContext'), [
              ['openMiningRound', cid(i.openRound.contractId)],
              ['issuingMiningRounds', emptyGenMap],
              ['validatorRights', emptyGenMap],
              ['featuredAppRight', none],
            ]),
          ],
        ]),
      ],
      ['inputs', list(i.inputs.map((h) => variant(t('TransferInput'), 'InputAmulet', cid(h.contractId))))],
      ['newExpiresAt', ts(i.newExpiresAt)],
    ]),
    consuming: true,
    children,
    exerciseResult: record(t('TransferPreapproval_RenewResult'), [
      ['transferPreapprovalCid', cid(preCid)],
      ['receiver', party(i.receiver)],
      ['provider', party(provider)],
      ['amuletPaid', num(i.amuletPaid)],
      ['meta', some(metadata())],
    ]),
  });
  return assemble(
    i,
    [root, ...nodes],
    [inputOf(i.preapproval), inputOf(i.amuletRules), inputOf(i.openRound), ...i.inputs.map(inputOf)],
  );
}

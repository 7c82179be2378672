/**
 * ExternalPartySetupProposal_Accept (splice-amulet): the user accepts the
 * validator's setup proposal, creating a ValidatorRight and a
 * TransferPreapproval. Shape of v2_cordialsys_crosschain_live_create_account_accept.
 */
import type { PreparedTransaction } from '../../hashing/model.js';
import {
  amuletType,
  assemble,
  type ContractRef,
  cid,
  createNode,
  type Envelope,
  exerciseNode,
  ID,
  mintContractId,
  PACKAGE_NAME,
  party,
  record,
  ts,
} from './common.js';

export interface SetupProposalAcceptInput extends Envelope {
  dso: string;
  validator: string;
  user: string;
  proposal: { contractId: string; createdAt: bigint; preapprovalExpiresAt: bigint };
  /** Ledger time the participant chose; the preapproval's validFrom and lastRenewedAt. */
  ledgerTime: bigint;
}

export function setupProposalAccept(i: SetupProposalAcceptInput): PreparedTransaction {
  const { dso, validator, user } = i;
  const amulet = PACKAGE_NAME.amulet;
  const proposalRef: ContractRef = {
    contractId: i.proposal.contractId,
    packageName: amulet,
    templateId: ID.setupProposal,
    signatories: [dso, validator],
    stakeholders: [dso, validator, user],
  };
  const rightCid = mintContractId(i.seeds(1));
  const preapprovalCid = mintContractId(i.seeds(2));
  const root = exerciseNode(proposalRef, {
    actingParties: [user],
    choiceId: 'ExternalPartySetupProposal_Accept',
    chosenValue: record(amuletType('Splice.AmuletRules', 'ExternalPartySetupProposal_Accept'), []),
    consuming: true,
    children: [1, 2],
    exerciseResult: record(amuletType('Splice.AmuletRules', 'ExternalPartySetupProposal_AcceptResult'), [
      ['validatorRightCid', cid(rightCid)],
      ['transferPreapprovalCid', cid(preapprovalCid)],
    ]),
  });
  const right = createNode(
    {
      contractId: rightCid,
      packageName: amulet,
      templateId: ID.validatorRight,
      signatories: [user, validator],
      stakeholders: [user, validator],
    },
    record(ID.validatorRight, [
      ['dso', party(dso)],
      ['user', party(user)],
      ['validator', party(validator)],
    ]),
  );
  const preapproval = createNode(
    {
      contractId: preapprovalCid,
      packageName: amulet,
      templateId: ID.transferPreapproval,
      signatories: [dso, user, validator],
      stakeholders: [dso, user, validator],
    },
    record(ID.transferPreapproval, [
      ['dso', party(dso)],
      ['receiver', party(user)],
      ['provider', party(validator)],
      ['validFrom', ts(i.ledgerTime)],
      ['lastRenewedAt', ts(i.ledgerTime)],
      ['expiresAt', ts(i.proposal.preapprovalExpiresAt)],
    ]),
  );
  const proposalArg = record(ID.setupProposal, [
    ['validator', party(validator)],
    ['user', party(user)],
    ['dso', party(dso)],
    ['createdAt', ts(i.proposal.createdAt)],
    ['preapprovalExpiresAt', ts(i.proposal.preapprovalExpiresAt)],
  ]);
  // The participant bounds ledger time by the preapproval's expiry (as in the vector).
  const env = {
    ...i,
    maxLedgerEffectiveTime: i.maxLedgerEffectiveTime ?? i.proposal.preapprovalExpiresAt - 1n,
  };
  return assemble(
    env,
    [root, right, preapproval],
    [{ ref: proposalRef, argument: proposalArg, createdAt: i.proposal.createdAt }],
  );
}

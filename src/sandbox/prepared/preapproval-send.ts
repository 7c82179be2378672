/**
 * Legacy preapproval send (validator `prepare-send`): the sender exercises
 * ExternalPartyAmuletRules_CreateTransferCommand, whose only effect is the
 * creation of a TransferCommand that SV automation later executes through the
 * receiver's TransferPreapproval (canton-apis.md §2.3, §6.4).
 * No real vector of this action exists in ../shared/vectors/real (the file
 * named "…transfer_preapproval_pv35" is a TransferPreapprovalProposal
 * creation), so this shape follows the documented choice and template fields
 * and is NOT checked against a participant's output.
 */
import type { PreparedTransaction } from '../../hashing/model.js';
import { dsoRef, type Existing, externalRulesInput } from './amulet-inputs.js';
import {
  amuletType,
  assemble,
  cid,
  createNode,
  type Envelope,
  exerciseNode,
  ID,
  int,
  mintContractId,
  none,
  num,
  PACKAGE_NAME,
  party,
  record,
  some,
  text,
  ts,
} from './common.js';

export interface PreapprovalSendInput extends Envelope {
  dso: string;
  externalPartyAmuletRules: Existing;
  sender: string;
  receiver: string;
  /** The validator party that submits the TransferCommand (`delegate`). */
  delegate: string;
  amount: string;
  expiresAt: bigint; // µs
  nonce: bigint;
  description: string | undefined;
}

export function preapprovalSend(i: PreapprovalSendInput): PreparedTransaction {
  const commandCid = mintContractId(i.seeds(1));
  const description = i.description === undefined ? none : some(text(i.description));
  const root = exerciseNode(dsoRef(i.dso, i.externalPartyAmuletRules, ID.externalRules), {
    actingParties: [i.sender],
    choiceId: 'ExternalPartyAmuletRules_CreateTransferCommand',
    chosenValue: record(
      amuletType('Splice.ExternalPartyAmuletRules', 'ExternalPartyAmuletRules_CreateTransferCommand'),
      [
        ['sender', party(i.sender)],
        ['receiver', party(i.receiver)],
        ['delegate', party(i.delegate)],
        ['amount', num(i.amount)],
        ['expiresAt', ts(i.expiresAt)],
        ['nonce', int(i.nonce)],
        ['description', description],
        ['expectedDso', some(party(i.dso))],
      ],
    ),
    consuming: false,
    children: [1],
    exerciseResult: record(
      amuletType('Splice.ExternalPartyAmuletRules', 'ExternalPartyAmuletRules_CreateTransferCommandResult'),
      [['transferCommandCid', cid(commandCid)]],
    ),
  });
  const command = createNode(
    {
      contractId: commandCid,
      packageName: PACKAGE_NAME.amulet,
      templateId: ID.transferCommand,
      signatories: [i.sender],
      stakeholders: [i.sender, i.dso, i.delegate],
    },
    record(ID.transferCommand, [
      ['dso', party(i.dso)],
      ['sender', party(i.sender)],
      ['receiver', party(i.receiver)],
      ['delegate', party(i.delegate)],
      ['amount', num(i.amount)],
      ['expiresAt', ts(i.expiresAt)],
      ['nonce', int(i.nonce)],
      ['description', description],
    ]),
  );
  return assemble(i, [root, command], [externalRulesInput(i.dso, i.externalPartyAmuletRules)]);
}

/**
 * TransferPreapprovalProposal creation (splice-wallet): a single root create,
 * signed by the receiver, observed by the provider; no input contracts. Shape
 * of v2_splice_wallet_kernel_tx_visualizer_transfer_preapproval_proposal.
 */
import type { PreparedTransaction } from '../../hashing/model.js';
import {
  assemble,
  createNode,
  type Envelope,
  ID,
  mintContractId,
  none,
  PACKAGE_NAME,
  party,
  record,
  some,
} from './common.js';

export interface PreapprovalProposalInput extends Envelope {
  receiver: string;
  provider: string;
  /** The DSO party; `undefined` leaves `expectedDso` empty. */
  expectedDso: string | undefined;
}

export function transferPreapprovalProposalCreate(i: PreapprovalProposalInput): PreparedTransaction {
  const create = createNode(
    {
      contractId: mintContractId(i.seeds(0)),
      packageName: PACKAGE_NAME.wallet,
      templateId: ID.preapprovalProposal,
      signatories: [i.receiver],
      stakeholders: [i.receiver, i.provider],
    },
    record(ID.preapprovalProposal, [
      ['receiver', party(i.receiver)],
      ['provider', party(i.provider)],
      ['expectedDso', i.expectedDso === undefined ? none : some(party(i.expectedDso))],
    ]),
  );
  return assemble(i, [create], []);
}

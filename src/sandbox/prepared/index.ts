/**
 * Sandbox prepared-transaction builders: pure functions from explicit inputs
 * to `PreparedTransaction` models shaped like the real participants' output.
 */
export {
  transferInstructionAccept,
  transferInstructionReject,
  transferInstructionWithdraw,
} from './instruction.js';
export { pingArchive, pingCreate } from './ping.js';
export { transferPreapprovalCancel, transferPreapprovalRenew } from './preapproval-manage.js';
export { preapprovalSend } from './preapproval-send.js';
export { transferPreapprovalProposalCreate } from './proposal.js';
export { setupProposalAccept } from './setup-accept.js';
export { tokenStandardTransfer } from './token-transfer.js';

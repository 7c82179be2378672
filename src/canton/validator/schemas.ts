/**
 * Wire shapes of the Splice validator app endpoints canton-signer uses
 * (`validator-internal.yaml`, Splice 0.6.1). The scan-proxy endpoints answer with
 * Scan's shapes (see `../scan/schemas.ts`), re-exported here for convenience.
 *
 * Encodings (canton-apis §1): `public_key` = hex of the raw 32-byte Ed25519 key;
 * `topology_tx` / `transaction` = base64; topology `hash` = hex of the 34-byte
 * multihash; `tx_hash` = hex of the raw 32-byte hash; `signed_hash` /
 * `signed_tx_hash` = hex of the 64-byte Ed25519 signature (R‖S).
 */
import { z } from 'zod';
import { ContractWithStateSchema, HoldingsSummarySchema, opt } from '../scan/schemas.js';

export {
  type AnsEntry,
  type ContractWithState,
  ContractWithStateSchema,
  type GetDsoPartyIdResponse,
  GetDsoPartyIdResponseSchema,
  type GetOpenAndIssuingMiningRoundsProxyResponse,
  GetOpenAndIssuingMiningRoundsProxyResponseSchema,
  type HoldingsSummaryRequest,
  type HoldingsSummaryResponse,
  HoldingsSummaryResponseSchema,
  type ListAnsEntriesQuery,
  type ListAnsEntriesResponse,
  ListAnsEntriesResponseSchema,
  type LookupAnsEntryResponse,
  LookupAnsEntryResponseSchema,
  type LookupTransferCommandCounterByPartyResponse,
  LookupTransferCommandCounterByPartyResponseSchema,
  type LookupTransferCommandStatusResponse,
  LookupTransferCommandStatusResponseSchema,
  type LookupTransferPreapprovalByPartyResponse,
  LookupTransferPreapprovalByPartyResponseSchema,
  type SpliceContract,
  SpliceContractSchema,
  type TransferCommandStatus,
} from '../scan/schemas.js';

const int = z.number().int();

// ------------------------------------------------------------------------------------------
// External party: topology

/** `GenerateExternalPartyTopologyRequest`. */
export interface GenerateExternalPartyTopologyRequest {
  /** Left half of the party id; a valid Daml party string without `::`. */
  party_hint: string;
  /** Hex of the raw 32-byte Ed25519 public key. */
  public_key: string;
}

/** `TopologyTx`. */
export const TopologyTxSchema = z.object({
  /** base64 of the versioned serialized topology transaction; echo back unchanged. */
  topology_tx: z.string(),
  /** Hex of the 34-byte multihash (`1220…`) to sign. */
  hash: z.string(),
});
export type TopologyTx = z.output<typeof TopologyTxSchema>;

/** `GenerateExternalPartyTopologyResponse`. Do not assume a count of transactions (canton-apis §0). */
export const GenerateExternalPartyTopologyResponseSchema = z.object({
  party_id: z.string(),
  topology_txs: z.array(TopologyTxSchema),
});
export type GenerateExternalPartyTopologyResponse = z.output<
  typeof GenerateExternalPartyTopologyResponseSchema
>;

/** `SignedTopologyTx`. */
export interface SignedTopologyTx {
  topology_tx: string;
  /** Hex of the Ed25519 signature over the hex-decoded 34-byte `hash`. */
  signed_hash: string;
}

/** `SubmitExternalPartyTopologyRequest`. */
export interface SubmitExternalPartyTopologyRequest {
  public_key: string;
  signed_topology_txs: SignedTopologyTx[];
}

/** `SubmitExternalPartyTopologyResponse`. */
export const SubmitExternalPartyTopologyResponseSchema = z.object({ party_id: z.string() });
export type SubmitExternalPartyTopologyResponse = z.output<typeof SubmitExternalPartyTopologyResponseSchema>;

// ------------------------------------------------------------------------------------------
// External party: setup proposal

/** `CreateExternalPartySetupProposalRequest`. */
export interface CreateExternalPartySetupProposalRequest {
  user_party_id: string;
}

/** `CreateExternalPartySetupProposalResponse`. */
export const CreateExternalPartySetupProposalResponseSchema = z.object({ contract_id: z.string() });
export type CreateExternalPartySetupProposalResponse = z.output<
  typeof CreateExternalPartySetupProposalResponseSchema
>;

/** `ListExternalPartySetupProposalsResponse` / `ListTransferPreapprovalsResponse` (same shape). */
export const ContractsResponseSchema = z.object({ contracts: z.array(ContractWithStateSchema) });
export type ContractsResponse = z.output<typeof ContractsResponseSchema>;

/** `PrepareAcceptExternalPartySetupProposalRequest`. */
export interface PrepareAcceptExternalPartySetupProposalRequest {
  /** The proposal's contract id (must be the one the validator finds for `user_party_id`). */
  contract_id: string;
  user_party_id: string;
  /** Debug only: ask for `hashing_details`. */
  verbose_hashing?: boolean;
}

/** `PrepareAcceptExternalPartySetupProposalResponse`. */
export const PrepareAcceptExternalPartySetupProposalResponseSchema = z.object({
  /** base64 protobuf `PreparedTransaction`. */
  transaction: z.string(),
  /** Hex of the raw 32-byte prepared-transaction hash. */
  tx_hash: z.string(),
  /** Unstable debug text; never parse. */
  hashing_details: opt(z.string()),
});
export type PrepareAcceptExternalPartySetupProposalResponse = z.output<
  typeof PrepareAcceptExternalPartySetupProposalResponseSchema
>;

/** `ExternalPartySubmission`. */
export interface ExternalPartySubmission {
  party_id: string;
  /** The prepared `transaction`, unchanged. */
  transaction: string;
  /** Hex of the 64-byte Ed25519 signature over the hex-decoded 32-byte `tx_hash`. */
  signed_tx_hash: string;
  /** Hex of the raw 32-byte Ed25519 public key. */
  public_key: string;
}

/** `SubmitAcceptExternalPartySetupProposalRequest`. */
export interface SubmitAcceptExternalPartySetupProposalRequest {
  submission: ExternalPartySubmission;
}

/** `SubmitAcceptExternalPartySetupProposalResponse`. */
export const SubmitAcceptExternalPartySetupProposalResponseSchema = z.object({
  transfer_preapproval_contract_id: z.string(),
  update_id: z.string(),
});
export type SubmitAcceptExternalPartySetupProposalResponse = z.output<
  typeof SubmitAcceptExternalPartySetupProposalResponseSchema
>;

// ------------------------------------------------------------------------------------------
// External party: balance, legacy preapproval send

/** `ExternalPartyBalanceResponse`: decimals as strings, round as a JSON integer. */
export const ExternalPartyBalanceResponseSchema = HoldingsSummarySchema.extend({
  computed_as_of_round: int,
});
export type ExternalPartyBalanceResponse = z.output<typeof ExternalPartyBalanceResponseSchema>;

/**
 * Input of {@link ValidatorClient.prepareTransferPreapprovalSend}: the spec's
 * `PrepareTransferPreapprovalSendRequest` except that `amount` is a decimal string here
 * (the wire field is a JSON number; the client sends it as one only if that number
 * prints back as exactly the same decimal) and `expires_at` may be a `Date`.
 */
export interface PrepareTransferPreapprovalSendInput {
  sender_party_id: string;
  receiver_party_id: string;
  /** CC amount, plain decimal, at most 10 fractional digits, e.g. `"12.5"`. */
  amount: string;
  /** Deadline for the SV automation to execute the TransferCommand (must be in the future). */
  expires_at: string | Date;
  /** Expected TransferCommandCounter value (see `scanProxyTransferCommandCounter`; 404 there → 0). */
  nonce: number;
  description?: string;
  verbose_hashing?: boolean;
}

/** `PrepareTransferPreapprovalSendRequest` as sent on the wire. */
export interface PrepareTransferPreapprovalSendRequest {
  sender_party_id: string;
  receiver_party_id: string;
  amount: number;
  expires_at: string;
  nonce: number;
  description?: string;
  verbose_hashing?: boolean;
}

/** `PrepareTransferPreapprovalSendResponse`. */
export const PrepareTransferPreapprovalSendResponseSchema = z.object({
  transaction: z.string(),
  tx_hash: z.string(),
  /** Prefix of the TransferCommand contract id; match Scan's status keys by prefix. */
  transfer_command_contract_id_prefix: z.string(),
  hashing_details: opt(z.string()),
});
export type PrepareTransferPreapprovalSendResponse = z.output<
  typeof PrepareTransferPreapprovalSendResponseSchema
>;

/** `SubmitTransferPreapprovalSendRequest`. */
export interface SubmitTransferPreapprovalSendRequest {
  submission: ExternalPartySubmission;
}

/** `SubmitTransferPreapprovalSendResponse`. */
export const SubmitTransferPreapprovalSendResponseSchema = z.object({ update_id: z.string() });
export type SubmitTransferPreapprovalSendResponse = z.output<
  typeof SubmitTransferPreapprovalSendResponseSchema
>;

// ------------------------------------------------------------------------------------------
// Admin: users

/** `OnboardUserRequest`. */
export interface OnboardUserRequest {
  name: string;
  party_id?: string;
  createPartyIfMissing?: boolean;
}

/** `OnboardUserResponse`. */
export const OnboardUserResponseSchema = z.object({ party_id: z.string() });
export type OnboardUserResponse = z.output<typeof OnboardUserResponseSchema>;

/** `ListUsersResponse`. */
export const ListUsersResponseSchema = z.object({ usernames: z.array(z.string()) });
export type ListUsersResponse = z.output<typeof ListUsersResponseSchema>;

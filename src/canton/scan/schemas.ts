/**
 * Wire shapes of the Splice Scan API (`scan.yaml`, Splice 0.6.1) that canton-signer
 * uses. The validator's BFT scan proxy (`scan-proxy.yaml`) answers with the same
 * shapes, so the validator client reuses them from here.
 *
 * Field names are the spec's (snake_case). Response schemas drop unknown fields
 * instead of refusing them, and accept `null` where the spec says "optional"
 * (normalised to `undefined`): the Scala side may print an absent option as `null`.
 * Request types are plain TypeScript: the clients send exactly the fields given.
 */
import { z } from 'zod';

/** Optional field that may also come back as `null`; normalised to `undefined`. */
export const opt = <T extends z.ZodType>(schema: T) =>
  schema
    .nullish()
    .transform((v): z.output<T> | undefined => v ?? undefined)
    .optional();

/** JSON integer (the Splice specs' `integer` / `int64`, printed as a JSON number). */
const int = z.number().int();

// ------------------------------------------------------------------------------------------
// Contracts

/** `Contract`: a Daml contract as Splice serves it (payload in the JSON API value encoding). */
export const SpliceContractSchema = z.object({
  template_id: z.string(),
  contract_id: z.string(),
  payload: z.record(z.string(), z.unknown()),
  /** base64; usable as a Ledger API disclosed contract. */
  created_event_blob: z.string(),
  created_at: z.string(),
});
export type SpliceContract = z.output<typeof SpliceContractSchema>;

/** `ContractWithState`: a contract and the synchronizer it is assigned to (absent while in flight). */
export const ContractWithStateSchema = z.object({
  contract: SpliceContractSchema,
  domain_id: opt(z.string()),
});
export type ContractWithState = z.output<typeof ContractWithStateSchema>;

/** `MaybeCachedContractWithState`: `contract` absent when the caller's cached copy is current. */
export const MaybeCachedContractWithStateSchema = z.object({
  contract: opt(SpliceContractSchema),
  domain_id: opt(z.string()),
});
export type MaybeCachedContractWithState = z.output<typeof MaybeCachedContractWithStateSchema>;

// ------------------------------------------------------------------------------------------
// DSO, ANS

/** `GetDsoPartyIdResponse`. */
export const GetDsoPartyIdResponseSchema = z.object({ dso_party_id: z.string() });
export type GetDsoPartyIdResponse = z.output<typeof GetDsoPartyIdResponseSchema>;

/** `AnsEntry`. No `contract_id` / `expires_at` for the DSO-provided entries (DSO, SVs). */
export const AnsEntrySchema = z.object({
  contract_id: opt(z.string()),
  user: z.string(),
  name: z.string(),
  url: z.string(),
  description: z.string(),
  expires_at: opt(z.string()),
});
export type AnsEntry = z.output<typeof AnsEntrySchema>;

/** `ListEntriesResponse`. */
export const ListAnsEntriesResponseSchema = z.object({ entries: z.array(AnsEntrySchema) });
export type ListAnsEntriesResponse = z.output<typeof ListAnsEntriesResponseSchema>;

/** `LookupEntryByNameResponse` / `LookupEntryByPartyResponse` (same shape). */
export const LookupAnsEntryResponseSchema = z.object({ entry: AnsEntrySchema });
export type LookupAnsEntryResponse = z.output<typeof LookupAnsEntryResponseSchema>;

/** Query of `GET /v0/ans-entries`. */
export interface ListAnsEntriesQuery {
  /** Any prefix of the name (need not be a whole word); absent or empty lists all. */
  namePrefix?: string;
  /** Maximum number of entries (spec: required, int32). Oldest non-expired entries first. */
  pageSize: number;
}

/** `GetAnsRulesRequest`: both fields optional; pass the cached contract to get `contract` omitted when unchanged. */
export interface GetAnsRulesRequest {
  cached_ans_rules_contract_id?: string;
  cached_ans_rules_domain_id?: string;
}

/** `GetAmuletRulesResponse` (`POST /v0/amulet-rules` with no cached contract). */
export const GetAmuletRulesResponseSchema = z.object({
  amulet_rules_update: MaybeCachedContractWithStateSchema,
});
export type GetAmuletRulesResponse = z.output<typeof GetAmuletRulesResponseSchema>;

/** `GetAnsRulesResponse`. */
export const GetAnsRulesResponseSchema = z.object({ ans_rules_update: MaybeCachedContractWithStateSchema });
export type GetAnsRulesResponse = z.output<typeof GetAnsRulesResponseSchema>;

// ------------------------------------------------------------------------------------------
// Mining rounds

/**
 * `GetOpenAndIssuingMiningRoundsRequest`: the contract ids the caller already holds
 * (their `contract` is then left out of the answer). Empty arrays ask for everything.
 */
export interface GetOpenAndIssuingMiningRoundsRequest {
  cached_open_mining_round_contract_ids: string[];
  cached_issuing_round_contract_ids: string[];
}

/**
 * `GetOpenAndIssuingMiningRoundsResponse` (Scan): `Splice.Round.OpenMiningRound` and
 * `IssuingMiningRound` contracts keyed by contract id (`MaybeCachedContractWithStateMap`),
 * and a suggested cache TTL that expires before any round missing here opens.
 */
export const GetOpenAndIssuingMiningRoundsResponseSchema = z.object({
  time_to_live_in_microseconds: int,
  open_mining_rounds: z.record(z.string(), MaybeCachedContractWithStateSchema),
  issuing_mining_rounds: z.record(z.string(), MaybeCachedContractWithStateSchema),
});
export type GetOpenAndIssuingMiningRoundsResponse = z.output<
  typeof GetOpenAndIssuingMiningRoundsResponseSchema
>;

/** `GetOpenAndIssuingMiningRoundsProxyResponse` (validator scan proxy): plain lists, no TTL. */
export const GetOpenAndIssuingMiningRoundsProxyResponseSchema = z.object({
  open_mining_rounds: z.array(ContractWithStateSchema),
  issuing_mining_rounds: z.array(ContractWithStateSchema),
});
export type GetOpenAndIssuingMiningRoundsProxyResponse = z.output<
  typeof GetOpenAndIssuingMiningRoundsProxyResponseSchema
>;

// ------------------------------------------------------------------------------------------
// Holdings summary

/** `HoldingsSummaryRequest`. */
export interface HoldingsSummaryRequest {
  migration_id: number;
  /** ISO-8601. With `record_time_match: 'exact'` (the default) it must be a snapshot time. */
  record_time: string;
  record_time_match?: 'exact' | 'at_or_before';
  /** At least one. */
  owner_party_ids: string[];
  /** Holding fees as of this round; default the earliest open mining round. */
  as_of_round?: number;
}

/** `HoldingsSummary`: per-owner Amulet totals, decimals as strings. */
export const HoldingsSummarySchema = z.object({
  party_id: z.string(),
  total_unlocked_coin: z.string(),
  total_locked_coin: z.string(),
  total_coin_holdings: z.string(),
  accumulated_holding_fees_unlocked: z.string(),
  accumulated_holding_fees_locked: z.string(),
  accumulated_holding_fees_total: z.string(),
  total_available_coin: z.string(),
});
export type HoldingsSummary = z.output<typeof HoldingsSummarySchema>;

/** `HoldingsSummaryResponse`. */
export const HoldingsSummaryResponseSchema = z.object({
  record_time: z.string(),
  migration_id: int,
  computed_as_of_round: int,
  summaries: z.array(HoldingsSummarySchema),
});
export type HoldingsSummaryResponse = z.output<typeof HoldingsSummaryResponseSchema>;

// ------------------------------------------------------------------------------------------
// Transfer preapprovals and transfer commands (Scan internal; also served by the scan proxy)

/** `LookupTransferPreapprovalByPartyResponse` (`Splice.AmuletRules:TransferPreapproval`). */
export const LookupTransferPreapprovalByPartyResponseSchema = z.object({
  transfer_preapproval: ContractWithStateSchema,
});
export type LookupTransferPreapprovalByPartyResponse = z.output<
  typeof LookupTransferPreapprovalByPartyResponseSchema
>;

/**
 * `LookupTransferCommandCounterByPartyResponse` (`Splice.ExternalPartyAmuletRules:TransferCommandCounter`).
 * The next nonce is `transfer_command_counter.contract.payload.nextNonce`; a 404 means "use 0".
 */
export const LookupTransferCommandCounterByPartyResponseSchema = z.object({
  transfer_command_counter: ContractWithStateSchema,
});
export type LookupTransferCommandCounterByPartyResponse = z.output<
  typeof LookupTransferCommandCounterByPartyResponseSchema
>;

/** `TransferCommandContractStatus` (discriminated by `status`). */
export const TransferCommandStatusSchema = z.discriminatedUnion('status', [
  z.object({ status: z.literal('created') }),
  z.object({ status: z.literal('sent') }),
  z.object({
    status: z.literal('failed'),
    failure_kind: z.enum(['failed', 'expired', 'withdrawn']),
    reason: z.string(),
  }),
]);
export type TransferCommandStatus = z.output<typeof TransferCommandStatusSchema>;

/** `LookupTransferCommandStatusResponse`: keyed by the full TransferCommand contract id. */
export const LookupTransferCommandStatusResponseSchema = z.object({
  transfer_commands_by_contract_id: z.record(
    z.string(),
    z.object({ contract: SpliceContractSchema, status: TransferCommandStatusSchema }),
  ),
});
export type LookupTransferCommandStatusResponse = z.output<typeof LookupTransferCommandStatusResponseSchema>;

// ------------------------------------------------------------------------------------------
// Transaction history (`POST /v0/transactions`, deprecated upstream)

export type SortOrder = 'asc' | 'desc';

/** `TransactionHistoryRequest`. */
export interface TransactionHistoryRequest {
  /** Omit for the first page; then the last `event_id` of the previous page (that event is skipped). */
  page_end_event_id?: string;
  /** Default `asc` on the server. */
  sort_order?: SortOrder;
  /** Maximum number of transactions in the page (spec: required). */
  page_size: number;
}

const AmuletAmountSchema = z.object({ amulet_owner: z.string(), amulet_amount: z.string() });

const TransferSchema = z.object({
  sender: z.object({
    party: z.string(),
    input_amulet_amount: opt(z.string()),
    input_app_reward_amount: opt(z.string()),
    input_validator_reward_amount: opt(z.string()),
    input_sv_reward_amount: opt(z.string()),
    input_validator_faucet_amount: opt(z.string()),
    sender_change_fee: z.string(),
    sender_change_amount: z.string(),
    sender_fee: z.string(),
    holding_fees: z.string(),
  }),
  receivers: z.array(z.object({ party: z.string(), amount: z.string(), receiver_fee: z.string() })),
  balance_changes: z.array(
    z.object({
      party: z.string(),
      change_to_initial_amount_as_of_round_zero: z.string(),
      change_to_holding_fees_rate: z.string(),
    }),
  ),
  description: opt(z.string()),
  transferInstructionReceiver: opt(z.string()),
  transferInstructionAmount: opt(z.string()),
  transferInstructionCid: opt(z.string()),
  /** Spec enum: `create_transfer_instruction`, `transfer_instruction_accept`, `preapproval_send`. */
  transfer_kind: opt(z.string()),
});

/**
 * `TransactionHistoryResponseItem`. `transaction_type` is one of `transfer`, `mint`,
 * `devnet_tap`, `abort_transfer_instruction` in 0.6.1; other values are passed through
 * (this is read-only history: a type added upstream must not stop the iteration).
 */
export const TransactionHistoryItemSchema = z.object({
  transaction_type: z.string(),
  event_id: z.string(),
  offset: opt(z.string()),
  date: z.string(),
  domain_id: z.string(),
  round: opt(int),
  transfer: opt(TransferSchema),
  mint: opt(AmuletAmountSchema),
  tap: opt(AmuletAmountSchema),
  abort_transfer_instruction: opt(z.object({ abort_kind: z.string(), transfer_instruction_cid: z.string() })),
});
export type TransactionHistoryItem = z.output<typeof TransactionHistoryItemSchema>;

/** `TransactionHistoryResponse`. */
export const TransactionHistoryResponseSchema = z.object({
  transactions: z.array(TransactionHistoryItemSchema),
});
export type TransactionHistoryResponse = z.output<typeof TransactionHistoryResponseSchema>;

/**
 * What a caller asks the signer to authorise (an `Intent`) and what a decoded
 * transaction was found to do (a `RecognisedAction`). The intent check compares
 * the two; `inspect --json` lists the recognised actions as `intents`.
 *
 * Amounts are Daml decimal strings exactly as written in the transaction
 * ("12.5000000000"); the check compares them numerically, never as floats.
 * Times are ISO-8601 UTC with microseconds, as `inspect` prints them.
 */
import { z } from 'zod';

/** Kinds of Splice / token-standard action the recogniser knows. */
export const ACTION_KINDS = [
  'transfer', // TransferFactory_Transfer (direct, two-step offer or self-transfer)
  'transfer-instruction-accept', // TransferInstruction_Accept
  'transfer-instruction-reject', // TransferInstruction_Reject
  'transfer-instruction-withdraw', // TransferInstruction_Withdraw
  'preapproval-send', // ExternalPartyAmuletRules_CreateTransferCommand (legacy preapproval send)
  'setup-proposal-accept', // ExternalPartySetupProposal_Accept
  'preapproval-proposal', // create TransferPreapprovalProposal
  'allocation-allocate', // AllocationFactory_Allocate
  'allocation-withdraw', // Allocation_Withdraw
  'allocation-cancel', // Allocation_Cancel
  'allocation-request-reject', // AllocationRequest_Reject
  'allocation-request-withdraw', // AllocationRequest_Withdraw
  'ans-entry-request', // AnsRules_RequestEntry (name service: ask for an entry)
  'ans-entry-pay', // SubscriptionRequest_AcceptAndMakePayment (lock the first payment)
  'ans-renewal-pay', // SubscriptionIdleState_MakePayment (lock a renewal payment)
  'ans-payment-expire', // SubscriptionPayment_Expire / SubscriptionInitialPayment_Expire (take back an uncollected payment)
  'create', // any other create, only under an explicit generic intent
  'exercise', // any other exercise, only under an explicit generic intent
] as const;
export type ActionKind = (typeof ACTION_KINDS)[number];

export interface InstrumentId {
  admin: string;
  id: string;
}

/** One root action of a transaction, as the recogniser understood it. */
export interface RecognisedAction {
  kind: ActionKind;
  /** The root node this action is. */
  nodeId: string;
  /** `package-name:Module:Entity` of the template acted on. */
  template: string;
  /** Interface the choice was exercised through, `package-id:Module:Entity`, when any. */
  interface?: string;
  choice?: string;
  /** The contract exercised, or (for a create) the contract created. */
  contractId?: string;
  /** Exercises: the acting parties. Creates: empty (see `signatories`). */
  actingParties: string[];
  /** Creates: the new contract's signatories. */
  signatories?: string[];
  /** Role → party, e.g. `{sender, receiver}`, `{receiver, provider}`, `{user, validator}`. */
  parties: Record<string, string>;
  /** Role → decimal string, e.g. `{amount: "12.5000000000"}`. */
  amounts: Record<string, string>;
  instrument?: InstrumentId;
  /** Role → ISO time, e.g. `{requestedAt, executeBefore}` or `{expiresAt}`. */
  deadlines: Record<string, string>;
  /** The transfer's reason / description, when the transaction carries one. */
  memo?: string;
  /** Holding contract ids the action consumes (transfer inputs). */
  inputs?: string[];
  /** Transfers: what the transaction does, read from its consequences. */
  transferKind?: 'direct' | 'offer' | 'self';
  /** Preapproval sends: the TransferCommand nonce. */
  nonce?: string;
  /** Name-service actions: the entry's name (`alice.unverified.cns`). */
  name?: string;
}

// ---- intents (what the caller asks for) --------------------------------------------------------

const party = z.string().min(1).max(255);
const decimal = z.string().regex(/^[0-9]+(\.[0-9]{1,10})?$/, 'a positive decimal with at most 10 decimals');
const isoTime = z.iso.datetime({ offset: true });
const instrument = z.strictObject({ admin: party, id: z.string().min(1).max(255) });
const contractId = z.string().regex(/^00[0-9a-f]{64}[0-9a-f]*$/, 'a contract id (hex, 00…)');

export const TransferIntentSchema = z.strictObject({
  kind: z.literal('transfer'),
  sender: party,
  receiver: party,
  amount: decimal,
  instrument,
  memo: z.string().max(4096).optional(),
  /** When given, the transaction's `executeBefore` must equal it. */
  executeBefore: isoTime.optional(),
  /** When given, the transaction must consume exactly these holdings. */
  inputs: z.array(contractId).min(1).max(100).optional(),
  /** When given, the transfer must take this path (`direct` needs the receiver's preapproval). */
  transferKind: z.enum(['direct', 'offer', 'self']).optional(),
});

export const InstructionIntentSchema = z.strictObject({
  kind: z.enum([
    'transfer-instruction-accept',
    'transfer-instruction-reject',
    'transfer-instruction-withdraw',
  ]),
  /** The party acting: the receiver for accept/reject, the sender for withdraw. */
  party,
  instructionCid: contractId,
});

export const PreapprovalSendIntentSchema = z.strictObject({
  kind: z.literal('preapproval-send'),
  sender: party,
  receiver: party,
  amount: decimal,
  nonce: z.number().int().min(0),
  expiresAt: isoTime,
  description: z.string().max(4096).optional(),
  /** When given, the TransferCommand's delegate (the validator that executes it) must be this party. */
  delegate: party.optional(),
  /**
   * When given, the send's `expectedDso`, the DSO of the ExternalPartyAmuletRules it exercises
   * and the TransferCommand's `dso` must all be this party (the flows take it from Scan).
   */
  dso: party.optional(),
});

export const SetupProposalAcceptIntentSchema = z.strictObject({
  kind: z.literal('setup-proposal-accept'),
  party,
  proposalCid: contractId,
  /** The validator party expected to provide the preapproval, when known. */
  validator: party.optional(),
  /**
   * When given, the proposal, the TransferPreapproval and the ValidatorRight must all name this
   * DSO (the flows take it from Scan).
   */
  dso: party.optional(),
  /**
   * When given, the preapproval's `expiresAt` must lie strictly after `after` and no later than
   * `notAfter` (the flow bounds it to the future and at most 366 days ahead).
   */
  expires: z.strictObject({ after: isoTime, notAfter: isoTime }).optional(),
});

export const PreapprovalProposalIntentSchema = z.strictObject({
  kind: z.literal('preapproval-proposal'),
  receiver: party,
  provider: party,
  /** When given, the proposal's `expectedDso` must be this party. */
  expectedDso: party.optional(),
});

/**
 * Allocating locks the party's holdings for a settlement: the intent pins the
 * whole allocation specification that decides where the value can go — the
 * transfer leg (receiver, amount, instrument) and the settlement (executor,
 * settlement reference, and the leg id when given).
 */
export const AllocateIntentSchema = z.strictObject({
  kind: z.literal('allocation-allocate'),
  /** The sender of the transfer leg (the party whose holdings are locked). */
  party,
  receiver: party,
  amount: decimal,
  instrument,
  /** The party that may settle (execute) the allocation. */
  executor: party,
  /** `settlement.settlementRef`; without `cid` the transaction's reference must carry none. */
  settlementRef: z.strictObject({ id: z.string().min(1).max(255), cid: contractId.optional() }),
  /** When given, the allocation's `transferLegId` must equal it. */
  transferLegId: z.string().min(1).max(255).optional(),
  /**
   * Metadata text the transfer leg and the settlement may carry (`meta.values`), key → exact text, as in the
   * allocation request: e.g. the venue's trade reference and the reason
   * (`splice.lfdecentralizedtrust.org/reason`). Any other non-empty entry is refused, and so is any in `extraArgs`.
   */
  meta: z
    .record(z.string().min(1).max(255), z.string().max(4096))
    .refine((m) => Object.keys(m).length <= 32, 'at most 32 entries')
    .optional(),
});

export const AllocationIntentSchema = z.strictObject({
  kind: z.enum([
    'allocation-withdraw',
    'allocation-cancel',
    'allocation-request-reject',
    'allocation-request-withdraw',
  ]),
  party,
  /** The allocation / allocation request acted on. */
  contractId,
  amount: decimal.optional(),
  instrument: instrument.optional(),
  /**
   * Metadata text the choice's `extraArgs.meta` may carry, key → exact text:
   * e.g. why a request is rejected (`splice.reason`). Any other non-empty
   * entry is refused.
   */
  meta: z
    .record(z.string().min(1).max(255), z.string().max(4096))
    .refine((m) => Object.keys(m).length <= 32, 'at most 32 entries')
    .optional(),
});

const ansName = z.string().min(1).max(255);
const micros = z.string().regex(/^[1-9][0-9]{0,18}$/, 'a positive whole number of microseconds');

/**
 * Asking the name service for an entry: the request and the entry context
 * the DSO's AnsRules create must name the party as user and sender, the DSO
 * as receiver and provider, and carry exactly these name, URL, description
 * and the AnsRules terms Scan published (fee in USD, lifetime, renewal
 * window, description prefix).
 */
export const AnsEntryRequestIntentSchema = z.strictObject({
  kind: z.literal('ans-entry-request'),
  party,
  dso: party,
  /** The AnsRules contract exercised (disclosed from Scan). */
  ansRulesCid: contractId,
  name: ansName,
  url: z.string().max(255),
  description: z.string().max(140),
  entryFee: decimal,
  entryLifetimeUs: micros,
  renewalDurationUs: micros,
  descriptionPrefix: z.string().max(255),
});

/**
 * Paying for an entry: the first payment (`ans-entry-pay`, on the
 * SubscriptionRequest) or a renewal (`ans-renewal-pay`, on the
 * SubscriptionIdleState). The party locks Canton Coin for the DSO: exactly
 * `targetAmount` is what the DSO will collect, and at most `maxAmount` may be
 * locked (the collection fee included); the change and nothing else comes
 * back to the party.
 */
export const AnsPaymentIntentSchema = z.strictObject({
  kind: z.enum(['ans-entry-pay', 'ans-renewal-pay']),
  party,
  dso: party,
  /** The SubscriptionRequest (first payment) or SubscriptionIdleState (renewal) exercised. */
  contractId,
  /** The entry paid for: the subscription's description must name it. */
  name: ansName,
  /** CC the DSO collects: the entry fee in USD divided by the round's Amulet price. */
  targetAmount: decimal,
  /** The most CC the lock may hold, fees included. */
  maxAmount: decimal,
  /** When given, the payment must consume exactly these holdings. */
  inputs: z.array(contractId).min(1).max(100).optional(),
  /** Renewals: the due date being paid (the idle state's `nextPaymentDueAt`). */
  dueAt: isoTime.optional(),
});

/**
 * Taking back a payment the DSO did not collect, after its lock expired: the
 * locked Canton Coin returns to the party (and, for a renewal, the idle
 * state comes back).
 */
export const AnsPaymentExpireIntentSchema = z.strictObject({
  kind: z.literal('ans-payment-expire'),
  party,
  dso: party,
  /** The SubscriptionPayment or SubscriptionInitialPayment. */
  contractId,
  name: ansName,
});

/**
 * A generic intent for a prepared transaction an operator supplies: the one
 * root must be exactly this exercise (or create); nothing else may act for the
 * party except that root's own consequences, which are listed in the report.
 */
export const ExerciseIntentSchema = z.strictObject({
  kind: z.literal('exercise'),
  party,
  /** `package-name:Module:Entity` (or `#package-name:Module:Entity`). */
  template: z.string().min(3),
  choice: z.string().min(1),
  contractId,
});

export const CreateIntentSchema = z.strictObject({
  kind: z.literal('create'),
  party,
  template: z.string().min(3),
});

export const IntentSchema = z.discriminatedUnion('kind', [
  TransferIntentSchema,
  InstructionIntentSchema,
  PreapprovalSendIntentSchema,
  SetupProposalAcceptIntentSchema,
  PreapprovalProposalIntentSchema,
  AllocateIntentSchema,
  AllocationIntentSchema,
  AnsEntryRequestIntentSchema,
  AnsPaymentIntentSchema,
  AnsPaymentExpireIntentSchema,
  ExerciseIntentSchema,
  CreateIntentSchema,
]);
export type Intent = z.output<typeof IntentSchema>;
export type TransferIntent = z.output<typeof TransferIntentSchema>;
export type PreapprovalSendIntent = z.output<typeof PreapprovalSendIntentSchema>;
export type AnsEntryRequestIntent = z.output<typeof AnsEntryRequestIntentSchema>;
export type AnsPaymentIntent = z.output<typeof AnsPaymentIntentSchema>;
export type AnsPaymentExpireIntent = z.output<typeof AnsPaymentExpireIntentSchema>;

/** The party an intent acts for (the one whose key signs). */
export function actingParty(intent: Intent): string {
  switch (intent.kind) {
    case 'transfer':
    case 'preapproval-send':
      return intent.sender;
    case 'preapproval-proposal':
      return intent.receiver;
    default:
      return intent.party;
  }
}

/** One reason a transaction does not match an intent. */
export interface IntentProblem {
  /** Stable, machine-readable. */
  reason: IntentProblemReason;
  /** A sentence for a person. */
  message: string;
  /** Node id or field (e.g. `node 0: transfer.amount`), when there is one. */
  where?: string;
}

export type IntentProblemReason =
  | 'act_as_mismatch' // metadata.act_as is not exactly the signing party
  | 'root_count' // not exactly one root action
  | 'unrecognised_action' // a root the recogniser does not know (and no generic intent names it)
  | 'kind_mismatch' // the root is a different kind of action than asked
  | 'party_mismatch' // sender / receiver / provider / … differs
  | 'amount_mismatch'
  | 'instrument_mismatch'
  | 'deadline_mismatch' // executeBefore / expiresAt differs, or is already past
  | 'memo_mismatch'
  | 'inputs_mismatch' // consumed holdings differ from the declared inputs
  | 'contract_mismatch' // exercised on a different contract
  | 'transfer_kind_mismatch'
  | 'nonce_mismatch'
  | 'unexplained_exercise' // an exercise acting for the party that the action does not explain
  | 'unexplained_create' // value created for someone the action does not name
  | 'unexplained_archive' // a contract of the party consumed that the action does not explain
  | 'label_mismatch'; // a record the recogniser reads carries labels other than its Daml type's, in order (./layouts.ts)

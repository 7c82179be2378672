/**
 * Wire shapes of the Canton JSON Ledger API v2 endpoints the custody service calls,
 * written by hand from the component schemas of the published Canton 3.5.1 OpenAPI
 * document (`openapi-3.5.1.yaml`). Names follow the spec components
 * (`JsPrepareSubmissionRequest`, `Signature`, …), with a `Schema` suffix for the zod
 * schema and the bare name for its TypeScript type.
 *
 * Two kinds of schema:
 *
 * - **Request** schemas describe what this service sends. They are strict (an unknown
 *   key is a programming error: the server may reject unknown fields) and a little
 *   narrower than the spec where the spec is looser than the server or than what we
 *   mean to send (`_UNSPECIFIED` enum values, empty `actAs`, non-base64 byte fields).
 *   Everything they accept is valid against the spec.
 * - **Response** schemas accept what a participant sends. Unknown fields are dropped,
 *   not refused (servers add fields). Optional fields may also be `null`: the spec has no
 *   `nullable`, but Canton's circe codecs print an absent `Option` as `null`; both are
 *   normalised to `undefined`. Optional repeated fields default to `[]` (protobuf has no
 *   presence for them). A `oneof` with an unknown branch, an unknown enum value, or a
 *   missing required field is refused.
 *
 * Encoding conventions (see docs/canton-apis.md §1):
 * - bytes are standard base64 with padding (RFC 4648 §4), marked `b64` below;
 * - int64 values are JSON numbers (accepted only within the safe-integer range);
 * - enums are the protobuf enum names (`SIGNATURE_FORMAT_DER`, `HASHING_SCHEME_VERSION_V3`);
 * - timestamps are ISO-8601 instants (`2025-01-01T00:00:00Z`);
 * - a protobuf `oneof` is an object with exactly one key naming the branch
 *   (`{"CreateCommand": {...}}`, `{"Empty": {}}`);
 * - party ids (`hint::1220…`), synchronizer ids, contract ids, template ids and user ids
 *   are plain strings and kept as such.
 *
 * One file on purpose: it is the list of wire schemas, one per spec component
 * and named as the spec names them, and requests and responses share components
 * (Signature, commands, events, offsets); split by endpoint they would be
 * scattered or copied.
 */
import { z } from 'zod';
import { FINGERPRINT_PATTERN } from '../../hashing/canton-hash.js';
import { isPaddedBase64 } from '../../hashing/input.js';

// ---------------------------------------------------------------------------------------------
// Building blocks

type Mode = 'request' | 'response';

/** int64 as the JSON API prints it: a JSON number. Values past 2^53 are refused rather than rounded. */
const Int64 = z.number().int();
const Int32 = z
  .number()
  .int()
  .min(-(2 ** 31))
  .max(2 ** 31 - 1);

/** Request bytes: non-empty standard base64 with padding (what Canton's `Base64` basic decoder accepts). */
const Base64 = z.string().min(1).refine(isPaddedBase64, 'not standard base64 (RFC 4648 §4, padded)');
/** A required non-empty identifier (party id, command id, user id, …) in a request. */
const Id = z.string().min(1);
/** Canton key fingerprint: hex of the 34-byte SHA-256 multihash (68 lowercase hex chars, `1220…`). */
const Fingerprint = z.string().regex(FINGERPRINT_PATTERN, 'not a Canton key fingerprint (1220 + 64 hex)');
/** ISO-8601 instant in UTC, as `java.time.Instant` prints and parses it. */
const Instant = z.iso.datetime();

/**
 * A Daml-LF value in the JSON API value encoding (records as objects, variants as
 * `{tag, value}`, numerics as strings, …). Opaque here; it must be present.
 */
const DamlValue = z.custom<unknown>((v) => v !== undefined, 'required Daml value');

/** Optional response field: absent or `null` (circe's `None`) both become `undefined`. */
function opt<T extends z.ZodType>(schema: T) {
  return schema
    .nullish()
    .transform((v): z.output<T> | undefined => v ?? undefined)
    .optional();
}

/** Optional repeated response field: absent or `null` become `[]`. */
function list<T extends z.ZodType>(item: T) {
  return z
    .array(item)
    .nullish()
    .transform((v): z.output<T>[] => v ?? []);
}

/** Object of the given mode: strict for requests, unknown keys dropped for responses. */
function obj<S extends z.ZodRawShape>(mode: Mode, shape: S) {
  return mode === 'request' ? z.strictObject(shape) : z.object(shape);
}

type Branches = Record<string, z.ZodType>;
type OneOfOutput<B extends Branches> = { [K in keyof B]: { [P in K]: z.output<B[K]> } }[keyof B];
type OneOfInput<B extends Branches> = { [K in keyof B]: { [P in K]: z.input<B[K]> } }[keyof B];

/**
 * A protobuf `oneof` as the JSON API encodes it: an object with exactly one key, the
 * branch name. Errors inside a branch are reported at the branch's path; an object
 * with no known branch (or more than one) is refused.
 */
function oneOf<B extends Branches>(
  name: string,
  mode: Mode,
  branches: B,
): z.ZodType<OneOfOutput<B>, OneOfInput<B>> {
  const keys = Object.keys(branches);
  const shape: Record<string, z.ZodType> = {};
  for (const k of keys) shape[k] = (branches[k] as z.ZodType).optional();
  const schema = obj(mode, shape).superRefine((v, ctx) => {
    const present = keys.filter((k) => (v as Record<string, unknown>)[k] !== undefined);
    if (present.length !== 1) {
      ctx.addIssue({
        code: 'custom',
        message: `${name}: expected exactly one of ${keys.join(', ')}, got ${present.length}`,
      });
    }
  });
  return schema as unknown as z.ZodType<OneOfOutput<B>, OneOfInput<B>>;
}

/** `{"value": <inner>}`: the wrapper the JSON API puts around most `oneof` branch payloads. */
function wrapped<T extends z.ZodType>(mode: Mode, inner: T) {
  return obj(mode, { value: inner });
}

/** Empty message (`{}`), e.g. the `Empty` branch of a `oneof`. */
const emptyRequest = z.strictObject({});
const emptyResponse = z.object({});

// ---------------------------------------------------------------------------------------------
// Enums

/** Response enums include `_UNSPECIFIED` (as in the spec); request enums never send it. */
export const HashingSchemeVersionSchema = z.enum([
  'HASHING_SCHEME_VERSION_UNSPECIFIED',
  'HASHING_SCHEME_VERSION_V2',
  'HASHING_SCHEME_VERSION_V3',
]);
export type HashingSchemeVersion = z.output<typeof HashingSchemeVersionSchema>;
/**
 * Hashing scheme versions we send. V2 is the only one on protocol 34 (Canton 3.4); V3
 * (PV35, Canton 3.5) also covers `maxRecordTime`. The spec has no V4 (dev protocol only).
 */
const RequestHashingSchemeVersion = z.enum(['HASHING_SCHEME_VERSION_V2', 'HASHING_SCHEME_VERSION_V3']);

/**
 * `Signature.format`. The spec types it as a plain string; these are the `SignatureFormat`
 * enum names the Ledger API accepts from external signers: CONCAT (Ed25519 R‖S), DER
 * (ECDSA ASN.1), RAW (legacy, migrated server-side). SYMBOLIC is test-only and never sent.
 */
export const SignatureFormatSchema = z.enum([
  'SIGNATURE_FORMAT_CONCAT',
  'SIGNATURE_FORMAT_DER',
  'SIGNATURE_FORMAT_RAW',
]);
export type SignatureFormat = z.output<typeof SignatureFormatSchema>;

/** `Signature.signingAlgorithmSpec`: the three algorithms the Ledger API verifies for external parties. */
export const SigningAlgorithmSpecSchema = z.enum([
  'SIGNING_ALGORITHM_SPEC_ED25519',
  'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
  'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_384',
]);
export type SigningAlgorithmSpec = z.output<typeof SigningAlgorithmSpecSchema>;

/**
 * `SigningPublicKey.format` (a plain string in the spec). SPKI DER works for every key
 * spec; RAW only for Ed25519. The legacy `CRYPTO_KEY_FORMAT_DER` is not sent.
 */
export const CryptoKeyFormatSchema = z.enum([
  'CRYPTO_KEY_FORMAT_DER_X509_SUBJECT_PUBLIC_KEY_INFO',
  'CRYPTO_KEY_FORMAT_RAW',
]);
export type CryptoKeyFormat = z.output<typeof CryptoKeyFormatSchema>;

/** `SigningPublicKey.keySpec` (a plain string in the spec). */
export const SigningKeySpecSchema = z.enum([
  'SIGNING_KEY_SPEC_EC_CURVE25519',
  'SIGNING_KEY_SPEC_EC_P256',
  'SIGNING_KEY_SPEC_EC_P384',
  'SIGNING_KEY_SPEC_EC_SECP256K1',
]);
export type SigningKeySpec = z.output<typeof SigningKeySpecSchema>;

export const ParticipantPermissionSchema = z.enum([
  'PARTICIPANT_PERMISSION_UNSPECIFIED',
  'PARTICIPANT_PERMISSION_SUBMISSION',
  'PARTICIPANT_PERMISSION_CONFIRMATION',
  'PARTICIPANT_PERMISSION_OBSERVATION',
]);
export type ParticipantPermission = z.output<typeof ParticipantPermissionSchema>;

/** `TransactionFormat.transactionShape` as sent (without `_UNSPECIFIED`). */
export const TransactionShapeSchema = z.enum([
  'TRANSACTION_SHAPE_ACS_DELTA',
  'TRANSACTION_SHAPE_LEDGER_EFFECTS',
]);
export type TransactionShape = z.output<typeof TransactionShapeSchema>;

// ---------------------------------------------------------------------------------------------
// Shapes used by both requests and responses

/** protobuf `Duration` (`Duration`; the spec's `unknownFields` is a codec artefact and is not sent). */
function durationSchema(mode: Mode) {
  return obj(mode, { seconds: Int64, nanos: Int32 });
}
export const DurationSchema = durationSchema('request');
export type Duration = z.input<typeof DurationSchema>;

/**
 * `DeduplicationPeriod` / `DeduplicationPeriod1` / `DeduplicationPeriod2` (one shape, three
 * component names): a duration, an offset, or `Empty` (= the participant's maximum).
 */
function deduplicationPeriodSchema(mode: Mode) {
  return oneOf('DeduplicationPeriod', mode, {
    DeduplicationDuration: wrapped(mode, durationSchema(mode)),
    DeduplicationOffset: wrapped(mode, Int64),
    Empty: mode === 'request' ? emptyRequest : emptyResponse,
  });
}
export const DeduplicationPeriodSchema = deduplicationPeriodSchema('request');
export type DeduplicationPeriod = z.input<typeof DeduplicationPeriodSchema>;

/** `Right` (user right) with its `Kind` oneof. 3.4.12 and 3.5.1 both define CanExecuteAs(AnyParty). */
function rightSchema(mode: Mode) {
  const party = wrapped(mode, obj(mode, { party: mode === 'request' ? Id : z.string() }));
  const none = wrapped(mode, obj(mode, {}));
  const kind = oneOf('Right.kind', mode, {
    CanActAs: party,
    CanReadAs: party,
    CanExecuteAs: party,
    CanReadAsAnyParty: none,
    CanExecuteAsAnyParty: none,
    ParticipantAdmin: none,
    IdentityProviderAdmin: none,
    Empty: mode === 'request' ? emptyRequest : emptyResponse,
  });
  return mode === 'request' ? z.strictObject({ kind }) : z.object({ kind: opt(kind) });
}
export const RightSchema = rightSchema('response');
export type Right = z.output<typeof RightSchema>;
/** A right as sent in grant/revoke requests (`kind` required). */
export const RightRequestSchema = rightSchema('request');
export type RightRequest = z.input<typeof RightRequestSchema>;

// ---------------------------------------------------------------------------------------------
// Requests: commands

export const CreateCommandSchema = z.strictObject({
  /** Preferably package-name form `#pkg-name:Module:Entity`. */
  templateId: Id,
  createArguments: DamlValue,
});
export const ExerciseCommandSchema = z.strictObject({
  templateId: Id,
  contractId: Id,
  choice: Id,
  choiceArgument: DamlValue,
});
export const CreateAndExerciseCommandSchema = z.strictObject({
  templateId: Id,
  createArguments: DamlValue,
  choice: Id,
  choiceArgument: DamlValue,
});
export const ExerciseByKeyCommandSchema = z.strictObject({
  templateId: Id,
  contractKey: DamlValue,
  choice: Id,
  choiceArgument: DamlValue,
});
/** `Command` oneof. */
export const CommandSchema = oneOf('Command', 'request', {
  CreateCommand: CreateCommandSchema,
  ExerciseCommand: ExerciseCommandSchema,
  CreateAndExerciseCommand: CreateAndExerciseCommandSchema,
  ExerciseByKeyCommand: ExerciseByKeyCommandSchema,
});
export type Command = z.input<typeof CommandSchema>;

/** `DisclosedContract`, e.g. from the token-standard registry API. */
export const DisclosedContractSchema = z.strictObject({
  templateId: Id.optional(),
  contractId: Id.optional(),
  /** b64 */
  createdEventBlob: Base64,
  synchronizerId: Id.optional(),
});
export type DisclosedContract = z.input<typeof DisclosedContractSchema>;

export const PrefetchContractKeySchema = z.strictObject({ templateId: Id, contractKey: DamlValue });

/** `MinLedgerTime`: `{time: {MinLedgerTimeAbs: {value: <instant>}}}` or `{time: {MinLedgerTimeRel: {value: <Duration>}}}`. */
export const MinLedgerTimeSchema = z.strictObject({
  time: oneOf('MinLedgerTime.time', 'request', {
    MinLedgerTimeAbs: z.strictObject({ value: Instant }),
    MinLedgerTimeRel: z.strictObject({ value: DurationSchema }),
  }),
});
export type MinLedgerTime = z.input<typeof MinLedgerTimeSchema>;

export const CostEstimationHintsSchema = z.strictObject({
  disabled: z.boolean().optional(),
  expectedSignatures: z.array(SigningAlgorithmSpecSchema).optional(),
});

/**
 * `JsPrepareSubmissionRequest` (POST /v2/interactive-submission/prepare). Exactly one
 * command unless the participant disables `enforce-single-root-node`; single `actAs` party
 * for external signing. `hashingSchemeVersion` exists from Canton 3.5 only: leave it out
 * toward 3.4 participants.
 */
export const JsPrepareSubmissionRequestSchema = z.strictObject({
  /** Required unless the token is a user token. */
  userId: Id.optional(),
  commandId: Id,
  commands: z.array(CommandSchema).min(1),
  minLedgerTime: MinLedgerTimeSchema.optional(),
  actAs: z.array(Id).min(1),
  readAs: z.array(Id).optional(),
  disclosedContracts: z.array(DisclosedContractSchema).optional(),
  synchronizerId: Id.optional(),
  packageIdSelectionPreference: z.array(Id).optional(),
  verboseHashing: z.boolean().optional(),
  prefetchContractKeys: z.array(PrefetchContractKeySchema).optional(),
  /** Covered by the signed hash only from hashing scheme V3. */
  maxRecordTime: Instant.optional(),
  estimateTrafficCost: CostEstimationHintsSchema.optional(),
  tapsMaxPasses: Int32.optional(),
  hashingSchemeVersion: RequestHashingSchemeVersion.optional(),
});
export type JsPrepareSubmissionRequest = z.input<typeof JsPrepareSubmissionRequestSchema>;

/**
 * `JsCommands` (POST /v2/commands/submit-and-wait-for-transaction-tree, and the other
 * classic submission endpoints): a command submitted by a party this participant can act for.
 */
export const JsCommandsSchema = z.strictObject({
  commands: z.array(CommandSchema).min(1),
  commandId: Id,
  actAs: z.array(Id).min(1),
  userId: Id.optional(),
  readAs: z.array(Id).optional(),
  workflowId: Id.optional(),
  deduplicationPeriod: DeduplicationPeriodSchema.optional(),
  minLedgerTimeAbs: Instant.optional(),
  minLedgerTimeRel: DurationSchema.optional(),
  submissionId: Id.optional(),
  disclosedContracts: z.array(DisclosedContractSchema).optional(),
  synchronizerId: Id.optional(),
  packageIdSelectionPreference: z.array(Id).optional(),
  prefetchContractKeys: z.array(PrefetchContractKeySchema).optional(),
  tapsMaxPasses: Int32.optional(),
});
export type JsCommands = z.input<typeof JsCommandsSchema>;

// ---------------------------------------------------------------------------------------------
// Requests: signatures and execution

/** `Signature` (Ledger API `crypto.proto`). */
export const SignatureSchema = z.strictObject({
  format: SignatureFormatSchema,
  /** b64 of the signature bytes in `format`. */
  signature: Base64,
  /** Fingerprint of the signing key (68 hex chars). */
  signedBy: Fingerprint,
  signingAlgorithmSpec: SigningAlgorithmSpecSchema,
});
export type Signature = z.input<typeof SignatureSchema>;

export const SinglePartySignaturesSchema = z.strictObject({
  party: Id,
  signatures: z.array(SignatureSchema).min(1),
});
export type SinglePartySignatures = z.input<typeof SinglePartySignaturesSchema>;

export const PartySignaturesSchema = z.strictObject({
  signatures: z.array(SinglePartySignaturesSchema).min(1),
});
export type PartySignatures = z.input<typeof PartySignaturesSchema>;

const executeFields = {
  /** b64, exactly as returned by prepare. */
  preparedTransaction: Base64,
  partySignatures: PartySignaturesSchema,
  deduplicationPeriod: DeduplicationPeriodSchema.optional(),
  /** New random id per execute attempt. */
  submissionId: Id,
  userId: Id.optional(),
  /** Echo of the prepare response's value. */
  hashingSchemeVersion: RequestHashingSchemeVersion,
  minLedgerTime: MinLedgerTimeSchema.optional(),
};

/** `JsExecuteSubmissionRequest` (POST /v2/interactive-submission/execute). */
export const JsExecuteSubmissionRequestSchema = z.strictObject(executeFields);
export type JsExecuteSubmissionRequest = z.input<typeof JsExecuteSubmissionRequestSchema>;

/** `JsExecuteSubmissionAndWaitRequest` (POST /v2/interactive-submission/executeAndWait). */
export const JsExecuteSubmissionAndWaitRequestSchema = z.strictObject(executeFields);
export type JsExecuteSubmissionAndWaitRequest = z.input<typeof JsExecuteSubmissionAndWaitRequestSchema>;

// ---------------------------------------------------------------------------------------------
// Requests: event / transaction / update formats

const IdentifierFilterSchema = oneOf('IdentifierFilter', 'request', {
  Empty: emptyRequest,
  InterfaceFilter: z.strictObject({
    value: z.strictObject({
      interfaceId: Id,
      includeInterfaceView: z.boolean().optional(),
      includeCreatedEventBlob: z.boolean().optional(),
    }),
  }),
  TemplateFilter: z.strictObject({
    value: z.strictObject({ templateId: Id, includeCreatedEventBlob: z.boolean().optional() }),
  }),
  WildcardFilter: z.strictObject({
    value: z.strictObject({ includeCreatedEventBlob: z.boolean().optional() }),
  }),
});

/** `Filters`: a list of `CumulativeFilter {identifierFilter}`. */
export const FiltersSchema = z.strictObject({
  cumulative: z.array(z.strictObject({ identifierFilter: IdentifierFilterSchema.optional() })).optional(),
});
export type Filters = z.input<typeof FiltersSchema>;

/** `EventFormat`: which events, per party or for any party. */
export const EventFormatSchema = z.strictObject({
  filtersByParty: z.record(Id, FiltersSchema).optional(),
  filtersForAnyParty: FiltersSchema.optional(),
  verbose: z.boolean().optional(),
});
export type EventFormat = z.input<typeof EventFormatSchema>;

/** `TransactionFormat`. */
export const TransactionFormatSchema = z.strictObject({
  eventFormat: EventFormatSchema,
  transactionShape: TransactionShapeSchema,
});
export type TransactionFormat = z.input<typeof TransactionFormatSchema>;

/** `TopologyFormat`. */
export const TopologyFormatSchema = z.strictObject({
  includeParticipantAuthorizationEvents: z.strictObject({ parties: z.array(Id).optional() }).optional(),
});

/** `UpdateFormat`: set at least one of the three. */
export const UpdateFormatSchema = z.strictObject({
  includeTransactions: TransactionFormatSchema.optional(),
  includeReassignments: EventFormatSchema.optional(),
  includeTopologyEvents: TopologyFormatSchema.optional(),
});
export type UpdateFormat = z.input<typeof UpdateFormatSchema>;

/** `JsExecuteSubmissionAndWaitForTransactionRequest` (POST /v2/interactive-submission/executeAndWaitForTransaction). */
export const JsExecuteSubmissionAndWaitForTransactionRequestSchema = z.strictObject({
  ...executeFields,
  transactionFormat: TransactionFormatSchema.optional(),
});
export type JsExecuteSubmissionAndWaitForTransactionRequest = z.input<
  typeof JsExecuteSubmissionAndWaitForTransactionRequestSchema
>;

// ---------------------------------------------------------------------------------------------
// Requests: external parties

/** `SigningPublicKey`. */
export const SigningPublicKeySchema = z.strictObject({
  format: CryptoKeyFormatSchema,
  /** b64 of the key in `format` (raw 32 bytes for Ed25519 RAW, else SPKI DER). */
  keyData: Base64,
  keySpec: SigningKeySpecSchema,
});
export type SigningPublicKey = z.input<typeof SigningPublicKeySchema>;

/** `GenerateExternalPartyTopologyRequest` (POST /v2/parties/external/generate-topology). */
export const GenerateExternalPartyTopologyRequestSchema = z.strictObject({
  /** Synchronizer id (not an alias). */
  synchronizer: Id,
  /** Non-empty, no `::`. */
  partyHint: Id,
  publicKey: SigningPublicKeySchema,
  localParticipantObservationOnly: z.boolean().optional(),
  otherConfirmingParticipantUids: z.array(Id).optional(),
  /** 0 = all confirmers. */
  confirmationThreshold: Int32.optional(),
  observingParticipantUids: z.array(Id).optional(),
});
export type GenerateExternalPartyTopologyRequest = z.input<typeof GenerateExternalPartyTopologyRequestSchema>;

/** `SignedTransaction`: a topology transaction with optional per-transaction signatures. */
export const SignedTransactionSchema = z.strictObject({
  /** b64 of the serialized versioned topology transaction, as returned by generate-topology. */
  transaction: Base64,
  signatures: z.array(SignatureSchema).optional(),
});
export type SignedTransaction = z.input<typeof SignedTransactionSchema>;

/**
 * `AllocateExternalPartyRequest` (POST /v2/parties/external/allocate). Sign either each
 * transaction (`signatures`) or once over the combined multi-hash (`multiHashSignatures`).
 * `waitForAllocation` and `userId` exist from Canton 3.5 only.
 */
export const AllocateExternalPartyRequestSchema = z.strictObject({
  synchronizer: Id,
  onboardingTransactions: z.array(SignedTransactionSchema).min(1),
  /** Signatures over the 34-byte multiHash of all `onboardingTransactions`. */
  multiHashSignatures: z.array(SignatureSchema).optional(),
  identityProviderId: z.string().optional(),
  waitForAllocation: z.boolean().optional(),
  userId: Id.optional(),
});
export type AllocateExternalPartyRequest = z.input<typeof AllocateExternalPartyRequestSchema>;

// ---------------------------------------------------------------------------------------------
// Requests: reassignment, reads, users, completions

const ReassignmentCommandKindSchema = oneOf('ReassignmentCommand.command', 'request', {
  AssignCommand: z.strictObject({
    value: z.strictObject({ reassignmentId: Id, source: Id, target: Id }),
  }),
  UnassignCommand: z.strictObject({
    value: z.strictObject({ contractId: Id, source: Id, target: Id }),
  }),
  Empty: emptyRequest,
});

/** `ReassignmentCommands`. */
export const ReassignmentCommandsSchema = z.strictObject({
  workflowId: Id.optional(),
  userId: Id.optional(),
  commandId: Id,
  submitter: Id,
  submissionId: Id.optional(),
  commands: z.array(z.strictObject({ command: ReassignmentCommandKindSchema })).min(1),
});

/** `SubmitAndWaitForReassignmentRequest` (POST /v2/commands/submit-and-wait-for-reassignment). */
export const SubmitAndWaitForReassignmentRequestSchema = z.strictObject({
  reassignmentCommands: ReassignmentCommandsSchema,
  eventFormat: EventFormatSchema.optional(),
});
export type SubmitAndWaitForReassignmentRequest = z.input<typeof SubmitAndWaitForReassignmentRequestSchema>;

/** `GetUpdateByOffsetRequest` (POST /v2/updates/update-by-offset). */
export const GetUpdateByOffsetRequestSchema = z.strictObject({
  /** Absolute offset (> 0). */
  offset: Int64.min(1),
  updateFormat: UpdateFormatSchema,
});
export type GetUpdateByOffsetRequest = z.input<typeof GetUpdateByOffsetRequestSchema>;

/** `GetUpdatesRequest` (POST /v2/updates), with `updateFormat` (the deprecated `filter` / `verbose` not offered). */
export const GetUpdatesRequestSchema = z.strictObject({
  /** Updates after this offset (0: from the ledger's beginning). */
  beginExclusive: Int64.min(0),
  /** Up to this offset; without it the stream is open-ended (bound the wait with the idle timeout). */
  endInclusive: Int64.min(0).optional(),
  updateFormat: UpdateFormatSchema,
});
export type GetUpdatesRequest = z.input<typeof GetUpdatesRequestSchema>;

/**
 * `GetActiveContractsRequest` (POST /v2/state/active-contracts). The deprecated `filter` /
 * `verbose` fields are not offered; `eventFormat` is required here (3.5.1 makes it optional,
 * 3.4.12 requires it), so the same request works on both.
 */
export const GetActiveContractsRequestSchema = z.strictObject({
  /** 0 = ledger begin (empty result); otherwise an absolute offset ≤ ledger end. */
  activeAtOffset: Int64.min(0),
  eventFormat: EventFormatSchema,
  /** 3.5+: resume token from a previous response item. */
  streamContinuationToken: z.string().optional(),
});
export type GetActiveContractsRequest = z.input<typeof GetActiveContractsRequestSchema>;

/** `GrantUserRightsRequest` (POST /v2/users/{user-id}/rights). */
export const GrantUserRightsRequestSchema = z.strictObject({
  userId: Id,
  rights: z.array(RightRequestSchema).min(1),
  identityProviderId: z.string().optional(),
});
export type GrantUserRightsRequest = z.input<typeof GrantUserRightsRequestSchema>;

/** `RevokeUserRightsRequest` (PATCH /v2/users/{user-id}/rights). */
export const RevokeUserRightsRequestSchema = z.strictObject({
  userId: Id,
  rights: z.array(RightRequestSchema).min(1),
  identityProviderId: z.string().optional(),
});
export type RevokeUserRightsRequest = z.input<typeof RevokeUserRightsRequestSchema>;

/** `CompletionStreamRequest` (POST /v2/commands/completions). */
export const CompletionStreamRequestSchema = z.strictObject({
  /** Required unless the token is a user token. */
  userId: Id.optional(),
  parties: z.array(Id).min(1),
  /** Completions after this offset (e.g. from GET /v2/state/ledger-end before executing). */
  beginExclusive: Int64.min(0).optional(),
});
export type CompletionStreamRequest = z.input<typeof CompletionStreamRequestSchema>;

/** Query of GET /v2/state/connected-synchronizers. */
export const ConnectedSynchronizersParamsSchema = z.strictObject({
  party: Id.optional(),
  participantId: Id.optional(),
  identityProviderId: z.string().optional(),
});
export type ConnectedSynchronizersParams = z.input<typeof ConnectedSynchronizersParamsSchema>;

// ---------------------------------------------------------------------------------------------
// Responses: status, events

/** `TraceContext` (W3C). */
export const TraceContextSchema = z.object({ traceparent: opt(z.string()), tracestate: opt(z.string()) });

/** `ProtoAny`: `value` is b64 of the packed message. The spec's `unknownFields` is ignored. */
export const ProtoAnySchema = z.object({
  typeUrl: z.string(),
  value: z.string(),
  valueDecoded: opt(z.string()),
});

/** `JsStatus` (google.rpc.Status); `code` 0 = OK. */
export const JsStatusSchema = z.object({
  code: Int32,
  message: z.string(),
  details: list(ProtoAnySchema),
});
export type JsStatus = z.output<typeof JsStatusSchema>;

export const JsInterfaceViewSchema = z.object({
  interfaceId: z.string(),
  viewStatus: JsStatusSchema,
  viewValue: z.unknown(),
  implementationPackageId: opt(z.string()),
});

/** `CreatedEvent`. */
export const CreatedEventSchema = z.object({
  offset: Int64,
  nodeId: Int32,
  contractId: z.string(),
  templateId: z.string(),
  contractKey: z.unknown(),
  contractKeyHash: opt(z.string()),
  createArgument: z.unknown(),
  /** b64; only when the filter asked for it. Feed to `DisclosedContract.createdEventBlob`. */
  createdEventBlob: opt(z.string()),
  interfaceViews: list(JsInterfaceViewSchema),
  witnessParties: z.array(z.string()),
  signatories: z.array(z.string()),
  observers: list(z.string()),
  createdAt: z.string(),
  packageName: z.string(),
  representativePackageId: z.string(),
  acsDelta: z.boolean(),
});
export type CreatedEvent = z.output<typeof CreatedEventSchema>;

/** `ArchivedEvent`. */
export const ArchivedEventSchema = z.object({
  offset: Int64,
  nodeId: Int32,
  contractId: z.string(),
  templateId: z.string(),
  witnessParties: z.array(z.string()),
  packageName: z.string(),
  implementedInterfaces: list(z.string()),
});
export type ArchivedEvent = z.output<typeof ArchivedEventSchema>;

/** `ExercisedEvent`. */
export const ExercisedEventSchema = z.object({
  offset: Int64,
  nodeId: Int32,
  contractId: z.string(),
  templateId: z.string(),
  interfaceId: opt(z.string()),
  choice: z.string(),
  choiceArgument: z.unknown(),
  actingParties: z.array(z.string()),
  consuming: z.boolean(),
  witnessParties: z.array(z.string()),
  lastDescendantNodeId: Int32,
  exerciseResult: z.unknown(),
  packageName: z.string(),
  implementedInterfaces: list(z.string()),
  acsDelta: z.boolean(),
});
export type ExercisedEvent = z.output<typeof ExercisedEventSchema>;

/** `Event` oneof (flat transactions): the event object sits directly under the branch key. */
export const EventSchema = oneOf('Event', 'response', {
  ArchivedEvent: ArchivedEventSchema,
  CreatedEvent: CreatedEventSchema,
  ExercisedEvent: ExercisedEventSchema,
});
export type Event = z.output<typeof EventSchema>;

/** `JsTransaction`. */
export const JsTransactionSchema = z.object({
  updateId: z.string(),
  commandId: opt(z.string()),
  workflowId: opt(z.string()),
  effectiveAt: z.string(),
  events: z.array(EventSchema),
  offset: Int64,
  synchronizerId: z.string(),
  traceContext: opt(TraceContextSchema),
  recordTime: z.string(),
  /** b64 of the hash the external party signed; correlates an external submission with its transaction. */
  externalTransactionHash: opt(z.string()),
  paidTrafficCost: opt(Int64),
});
export type JsTransaction = z.output<typeof JsTransactionSchema>;

/** `TreeEvent` oneof: here the event sits under `{value}`. */
export const TreeEventSchema = oneOf('TreeEvent', 'response', {
  CreatedTreeEvent: wrapped('response', CreatedEventSchema),
  ExercisedTreeEvent: wrapped('response', ExercisedEventSchema),
});
export type TreeEvent = z.output<typeof TreeEventSchema>;

/** `JsTransactionTree` (deprecated shape). `eventsById` keys are node ids as decimal strings. */
export const JsTransactionTreeSchema = z.object({
  updateId: z.string(),
  commandId: opt(z.string()),
  workflowId: opt(z.string()),
  effectiveAt: z.string(),
  offset: Int64,
  eventsById: z.record(z.string(), TreeEventSchema),
  synchronizerId: z.string(),
  traceContext: opt(TraceContextSchema),
  recordTime: z.string(),
});
export type JsTransactionTree = z.output<typeof JsTransactionTreeSchema>;

/** `UnassignedEvent`. */
export const UnassignedEventSchema = z.object({
  reassignmentId: z.string(),
  contractId: z.string(),
  templateId: z.string(),
  source: z.string(),
  target: z.string(),
  submitter: opt(z.string()),
  reassignmentCounter: Int64,
  assignmentExclusivity: opt(z.string()),
  witnessParties: z.array(z.string()),
  packageName: z.string(),
  offset: Int64,
  nodeId: Int32,
});

/** `JsAssignmentEvent` (in `JsReassignmentEvent`, not wrapped in `{value}`) and `JsAssignedEvent` (in the ACS). */
const assignedFields = {
  source: z.string(),
  target: z.string(),
  reassignmentId: z.string(),
  reassignmentCounter: Int64,
  createdEvent: CreatedEventSchema,
};
export const JsAssignmentEventSchema = z.object({ ...assignedFields, submitter: z.string() });
export const JsAssignedEventSchema = z.object({ ...assignedFields, submitter: opt(z.string()) });

/** `JsReassignmentEvent` oneof. Note the asymmetry of the spec: assignment unwrapped, unassignment under `{value}`. */
export const JsReassignmentEventSchema = oneOf('JsReassignmentEvent', 'response', {
  JsAssignmentEvent: JsAssignmentEventSchema,
  JsUnassignedEvent: wrapped('response', UnassignedEventSchema),
});

/** `JsReassignment`. */
export const JsReassignmentSchema = z.object({
  updateId: z.string(),
  commandId: opt(z.string()),
  workflowId: opt(z.string()),
  offset: Int64,
  events: z.array(JsReassignmentEventSchema),
  traceContext: opt(TraceContextSchema),
  recordTime: z.string(),
  synchronizerId: z.string(),
  paidTrafficCost: opt(Int64),
});
export type JsReassignment = z.output<typeof JsReassignmentSchema>;

const participantAuthorization = wrapped(
  'response',
  z.object({
    partyId: z.string(),
    participantId: z.string(),
    participantPermission: ParticipantPermissionSchema,
  }),
);

/** `TopologyEvent` with its `event` oneof (`ParticipantAuthorizationOnboarding` is 3.5+). */
export const TopologyEventSchema = z.object({
  event: opt(
    oneOf('TopologyEvent.event', 'response', {
      ParticipantAuthorizationAdded: participantAuthorization,
      ParticipantAuthorizationChanged: participantAuthorization,
      ParticipantAuthorizationOnboarding: participantAuthorization,
      ParticipantAuthorizationRevoked: wrapped(
        'response',
        z.object({ partyId: z.string(), participantId: z.string() }),
      ),
      Empty: emptyResponse,
    }),
  ),
});

/** `JsTopologyTransaction`. */
export const JsTopologyTransactionSchema = z.object({
  updateId: z.string(),
  offset: Int64,
  synchronizerId: z.string(),
  recordTime: z.string(),
  events: z.array(TopologyEventSchema),
  traceContext: opt(TraceContextSchema),
});

/** `SynchronizerTime`. */
export const SynchronizerTimeSchema = z.object({ synchronizerId: z.string(), recordTime: z.string() });

/** `OffsetCheckpoint1`. */
export const OffsetCheckpointSchema = z.object({
  offset: Int64,
  synchronizerTimes: list(SynchronizerTimeSchema),
});

/** `Update` oneof. */
export const UpdateSchema = oneOf('Update', 'response', {
  Transaction: wrapped('response', JsTransactionSchema),
  Reassignment: wrapped('response', JsReassignmentSchema),
  TopologyTransaction: wrapped('response', JsTopologyTransactionSchema),
  OffsetCheckpoint: wrapped('response', OffsetCheckpointSchema),
});
export type Update = z.output<typeof UpdateSchema>;

// ---------------------------------------------------------------------------------------------
// Responses: endpoints

/** `CostEstimation` (traffic cost, int64 bytes). */
export const CostEstimationSchema = z.object({
  estimationTimestamp: z.string(),
  confirmationRequestTrafficCostEstimation: Int64,
  confirmationResponseTrafficCostEstimation: Int64,
  totalTrafficCostEstimation: Int64,
});

/** `JsPrepareSubmissionResponse`. */
export const JsPrepareSubmissionResponseSchema = z.object({
  /** b64 of the protobuf `PreparedTransaction {transaction, metadata}`. */
  preparedTransaction: z.string(),
  /** b64 of the raw 32-byte hash to sign (no multihash prefix). Recompute it; never trust it. */
  preparedTransactionHash: z.string(),
  hashingSchemeVersion: HashingSchemeVersionSchema,
  /** Debug trace, only with `verboseHashing`. */
  hashingDetails: opt(z.string()),
  costEstimation: opt(CostEstimationSchema),
});
export type JsPrepareSubmissionResponse = z.output<typeof JsPrepareSubmissionResponseSchema>;

/** `ExecuteSubmissionResponse`: `{}`. Track the outcome on the completion stream. */
export const ExecuteSubmissionResponseSchema = z.object({});
export type ExecuteSubmissionResponse = z.output<typeof ExecuteSubmissionResponseSchema>;

/** `ExecuteSubmissionAndWaitResponse`. */
export const ExecuteSubmissionAndWaitResponseSchema = z.object({
  updateId: z.string(),
  completionOffset: Int64,
});
export type ExecuteSubmissionAndWaitResponse = z.output<typeof ExecuteSubmissionAndWaitResponseSchema>;

/** `JsExecuteSubmissionAndWaitForTransactionResponse`. */
export const JsExecuteSubmissionAndWaitForTransactionResponseSchema = z.object({
  transaction: JsTransactionSchema,
});
export type JsExecuteSubmissionAndWaitForTransactionResponse = z.output<
  typeof JsExecuteSubmissionAndWaitForTransactionResponseSchema
>;

/** `GenerateExternalPartyTopologyResponse`. */
export const GenerateExternalPartyTopologyResponseSchema = z.object({
  /** `partyHint::fingerprint`. */
  partyId: z.string(),
  /** Use as `Signature.signedBy`. */
  publicKeyFingerprint: z.string(),
  /** b64 each; count and order depend on the Canton version (3, or 1 from 3.4.8): do not assume. */
  topologyTransactions: z.array(z.string()),
  /** b64 of the 34-byte multihash over all the transactions. Recompute it before signing. */
  multiHash: z.string(),
});
export type GenerateExternalPartyTopologyResponse = z.output<
  typeof GenerateExternalPartyTopologyResponseSchema
>;

/** `AllocateExternalPartyResponse`. */
export const AllocateExternalPartyResponseSchema = z.object({ partyId: z.string() });
export type AllocateExternalPartyResponse = z.output<typeof AllocateExternalPartyResponseSchema>;

/** `JsSubmitAndWaitForTransactionTreeResponse`. */
export const JsSubmitAndWaitForTransactionTreeResponseSchema = z.object({
  transactionTree: opt(JsTransactionTreeSchema),
});
export type JsSubmitAndWaitForTransactionTreeResponse = z.output<
  typeof JsSubmitAndWaitForTransactionTreeResponseSchema
>;

/** `JsSubmitAndWaitForReassignmentResponse`. */
export const JsSubmitAndWaitForReassignmentResponseSchema = z.object({ reassignment: JsReassignmentSchema });
export type JsSubmitAndWaitForReassignmentResponse = z.output<
  typeof JsSubmitAndWaitForReassignmentResponseSchema
>;

/** `JsGetUpdateResponse` (update-by-offset). */
export const JsGetUpdateResponseSchema = z.object({ update: opt(UpdateSchema) });
export type JsGetUpdateResponse = z.output<typeof JsGetUpdateResponseSchema>;

/** `JsGetUpdatesResponse` (one item of POST /v2/updates). */
export const JsGetUpdatesResponseSchema = z.object({ update: opt(UpdateSchema) });
export type JsGetUpdatesResponse = z.output<typeof JsGetUpdatesResponseSchema>;

/** `GetLedgerEndResponse`. An absent offset is protobuf's default 0 (empty ledger). */
export const GetLedgerEndResponseSchema = z.object({
  offset: Int64.min(0)
    .nullish()
    .transform((v) => v ?? 0),
});
export type GetLedgerEndResponse = z.output<typeof GetLedgerEndResponseSchema>;

/** `JsActiveContract`. */
export const JsActiveContractSchema = z.object({
  createdEvent: CreatedEventSchema,
  synchronizerId: z.string(),
  reassignmentCounter: Int64,
});

/** `JsContractEntry` oneof. */
export const JsContractEntrySchema = oneOf('JsContractEntry', 'response', {
  JsActiveContract: JsActiveContractSchema,
  JsEmpty: emptyResponse,
  JsIncompleteAssigned: z.object({ assignedEvent: JsAssignedEventSchema }),
  JsIncompleteUnassigned: z.object({
    createdEvent: CreatedEventSchema,
    unassignedEvent: UnassignedEventSchema,
  }),
});
export type JsContractEntry = z.output<typeof JsContractEntrySchema>;

/** `JsGetActiveContractsResponse`: one item of the active-contracts list. */
export const JsGetActiveContractsResponseSchema = z.object({
  workflowId: opt(z.string()),
  contractEntry: opt(JsContractEntrySchema),
  streamContinuationToken: opt(z.string()),
});
export type JsGetActiveContractsResponse = z.output<typeof JsGetActiveContractsResponseSchema>;

/**
 * What an interface-view reader of the active-contracts list uses of a `CreatedEvent`: the
 * contract's id, template and creation time, and of each interface view its id, the status code
 * and the value (what the value holds is the reader's to check). The rest of the event (its create
 * argument, parties, package names) and of each view is neither validated nor copied: the
 * holdings and offers reads, on every withdrawal, get each contract's create argument too and use
 * none of it, and validating (copying) every field cost several times what parsing the JSON did.
 */
export const CreatedEventViewsSchema = z.object({
  contractId: z.string(),
  templateId: z.string(),
  createdAt: z.string(),
  interfaceViews: z
    .array(
      z.object({
        interfaceId: z.string(),
        viewStatus: z.object({ code: z.number().int() }),
        viewValue: z.unknown(),
      }),
    )
    .nullish(),
});
export type CreatedEventViews = z.output<typeof CreatedEventViewsSchema>;

/**
 * One item of the active-contracts list read for interface views: an active contract's created
 * event (see {@link CreatedEventViewsSchema}). Entries of the other kinds (incomplete
 * reassignments, empty ones) carry nothing such a reader uses and are left unread.
 */
export const JsActiveContractViewsResponseSchema = z.object({
  contractEntry: z
    .object({ JsActiveContract: z.object({ createdEvent: CreatedEventViewsSchema }).optional() })
    .nullish(),
});
export type JsActiveContractViewsResponse = z.output<typeof JsActiveContractViewsResponseSchema>;

/** `ConnectedSynchronizer` (`permission` optional from 3.5.1). */
export const ConnectedSynchronizerSchema = z.object({
  synchronizerAlias: z.string(),
  synchronizerId: z.string(),
  permission: opt(ParticipantPermissionSchema),
});

/** `GetConnectedSynchronizersResponse`. */
export const GetConnectedSynchronizersResponseSchema = z.object({
  connectedSynchronizers: list(ConnectedSynchronizerSchema),
});
export type GetConnectedSynchronizersResponse = z.output<typeof GetConnectedSynchronizersResponseSchema>;

/** `GetParticipantIdResponse`. */
export const GetParticipantIdResponseSchema = z.object({ participantId: z.string() });
export type GetParticipantIdResponse = z.output<typeof GetParticipantIdResponseSchema>;

/** `ObjectMeta` of a participant resource. */
export const ObjectMetaSchema = z.object({
  resourceVersion: opt(z.string()),
  annotations: opt(z.record(z.string(), z.string())),
});

/** `User`: a participant user. */
export const UserSchema = z.object({
  id: z.string().min(1),
  primaryParty: opt(z.string()),
  isDeactivated: opt(z.boolean()),
  metadata: opt(ObjectMetaSchema),
  identityProviderId: opt(z.string()),
  primaryPartyAuthentication: opt(z.boolean()),
});

/** `GetUserResponse` (GET /v2/authenticated-user). */
export const GetUserResponseSchema = z.object({ user: UserSchema });
export type GetUserResponse = z.output<typeof GetUserResponseSchema>;

/** `ListUserRightsResponse`. */
export const ListUserRightsResponseSchema = z.object({ rights: list(RightSchema) });
export type ListUserRightsResponse = z.output<typeof ListUserRightsResponseSchema>;

/** `GrantUserRightsResponse`: only the rights this call added. */
export const GrantUserRightsResponseSchema = z.object({ newlyGrantedRights: list(RightSchema) });
export type GrantUserRightsResponse = z.output<typeof GrantUserRightsResponseSchema>;

/** `RevokeUserRightsResponse`: only the rights this call removed. */
export const RevokeUserRightsResponseSchema = z.object({ newlyRevokedRights: list(RightSchema) });
export type RevokeUserRightsResponse = z.output<typeof RevokeUserRightsResponseSchema>;

/** `Completion1`: the outcome of one submission. Match on (userId, commandId, submissionId). */
export const CompletionSchema = z.object({
  commandId: z.string(),
  /** Absent or `code` 0 = success; otherwise the rejection. */
  status: opt(JsStatusSchema),
  updateId: opt(z.string()),
  userId: z.string(),
  actAs: z.array(z.string()),
  submissionId: opt(z.string()),
  deduplicationPeriod: opt(deduplicationPeriodSchema('response')),
  traceContext: opt(TraceContextSchema),
  offset: Int64,
  synchronizerTime: SynchronizerTimeSchema,
  paidTrafficCost: opt(Int64),
});
export type Completion = z.output<typeof CompletionSchema>;

/** `CompletionStreamResponse`: one item of the completions list. */
export const CompletionStreamResponseSchema = z.object({
  completionResponse: opt(
    oneOf('CompletionResponse', 'response', {
      Completion: wrapped('response', CompletionSchema),
      OffsetCheckpoint: wrapped('response', OffsetCheckpointSchema),
      Empty: emptyResponse,
    }),
  ),
});
export type CompletionStreamResponse = z.output<typeof CompletionStreamResponseSchema>;

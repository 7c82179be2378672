/**
 * canton-signer library entry. Names exported here are a stable API: other
 * modules, tests and integrators import them from `canton-signer`.
 */

export { type AuthProvider, oauth2ClientCredentials, staticBearer } from './canton/auth.js';
export { CantonApiError, type CantonService, isCantonApiError, type JsCantonError } from './canton/errors.js';
export { HttpClient } from './canton/http.js';
export { LedgerApiClient } from './canton/ledger-api/client.js';
export { ScanClient } from './canton/scan/client.js';
export { ValidatorClient } from './canton/validator/client.js';
export { RegistryClient } from './canton/validator/registry.js';
export { partyBalance } from './flows/balance.js';
export { type FlowContext, partyOf } from './flows/context.js';
export { listHoldings, selectInputs } from './flows/holdings.js';
export { type LedgerOutcome, ledgerFlow } from './flows/ledger.js';
export { mergeHoldings } from './flows/merge.js';
export { resolveParty } from './flows/names.js';
export { acceptOffer, listOffers, rejectOffer, withdrawOffer } from './flows/offers.js';
export { onboardViaLedgerApi, onboardViaValidator, showParty } from './flows/onboard.js';
export {
  type Flow,
  type FlowResult,
  type PipelineOptions,
  type PreparedInput,
  runFlow,
  type SignedTransaction,
  type SigningParty,
  type Verified,
  verifyPrepared,
} from './flows/pipeline.js';
export { sendViaPreapproval, trackSend } from './flows/preapproval-send.js';
export { watchPreapprovals } from './flows/preapproval-watch.js';
export { isRefusal, Refusal, type RefusalReason } from './flows/refusal.js';
export { acceptSetupProposal } from './flows/setup-accept.js';
export { signAndExecute, verifyOnly } from './flows/sign-execute.js';
export { transfer } from './flows/transfer.js';
export { type ExecutionWindow, executionWindow } from './flows/window.js';
export {
  cantonHash,
  fingerprint,
  HashPurpose,
  type KeyAlgorithm,
  multiHash,
  type ParsedPublicKey,
  parsePartyId,
  parsePublicKey,
  partyHintProblem,
  partyId,
  topologyTransactionHash,
} from './hashing/canton-hash.js';
export {
  type DecodeOptions,
  decodePreparedTransaction,
  KNOWN_LF_VERSIONS,
  MAX_VALUE_DEPTH,
} from './hashing/decode.js';
export { encodePreparedTransaction, encodeValue } from './hashing/encode.js';
export { type RefusalCode, TransactionError } from './hashing/errors.js';
export {
  base64ToBytes,
  bytesToBase64,
  bytesToHex,
  hexToBytes,
  parseHash,
  type TransactionInput,
} from './hashing/input.js';
export type * from './hashing/model.js';
export {
  type HashingScheme,
  type HashOptions,
  type HashParts,
  hashParts,
  hashPreparedTransaction,
  PREPARED_SUBMISSION_PURPOSE,
  SCHEMES,
} from './hashing/transaction-hash.js';
export { checkIntent } from './intent/check.js';
export {
  type ActionKind,
  type Intent,
  type IntentProblem,
  IntentSchema,
  type RecognisedAction,
} from './intent/model.js';
export { recogniseActions } from './intent/recognise.js';
export { checkTopology } from './intent/topology.js';
export { type BackendKind, KeyError, type KeyErrorCode } from './keys/backend.js';
export { openSigner, type SignerConfig } from './keys/config.js';
export { FileBackend } from './keys/file-backend.js';
export { KEY_SCHEMES, type KeyScheme, verifySignature } from './keys/schemes.js';
export { type CantonSignature, type KeyDescription, Signer, type SignOutput } from './keys/signer.js';
export { type LoadedPolicy, PolicyError, parsePolicy, readPolicyFile } from './policy/document.js';
export {
  AwaitingApproval,
  allowAll,
  type PolicyDecision,
  type PolicyGate,
  type PolicyRequest,
} from './policy/hook.js';
export { FileRecorder, type FlowRecorder, type JournalRecord, MemoryRecorder } from './store/journal.js';
export { FilePartyBook, MemoryPartyBook, type PartyBook, type PartyRecord } from './store/parties.js';

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
export { type BackendKind, KeyError, type KeyErrorCode } from './keys/backend.js';
export { openSigner, type SignerConfig } from './keys/config.js';
export { FileBackend } from './keys/file-backend.js';
export { KEY_SCHEMES, type KeyScheme, verifySignature } from './keys/schemes.js';
export { type CantonSignature, type KeyDescription, Signer, type SignOutput } from './keys/signer.js';

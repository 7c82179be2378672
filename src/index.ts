/**
 * canton-signer library entry. Names exported here are a stable API: other
 * modules, tests and integrators import them from `canton-signer`.
 */
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

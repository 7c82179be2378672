/**
 * A transaction's hash parts as text, for tests that compare two hashers:
 * the hash, the transaction and metadata hashes, then each node's hash
 * (`id=hex`) in the order the hasher gives them.
 */
import { bytesToHex } from '../../src/hashing/input.js';
import type { HashParts } from '../../src/hashing/transaction-hash.js';

export function partsHex(p: HashParts): string[] {
  return [
    bytesToHex(p.hash),
    bytesToHex(p.transactionHash),
    bytesToHex(p.metadataHash),
    ...[...p.nodeHashes].map(([id, h]) => `${id}=${bytesToHex(h)}`),
  ];
}

/**
 * The executing participant's signature check for an external submission:
 * every acting party must be an external party known to the topology state;
 * each signature must name one of the party's registered keys in `signedBy`,
 * use the format and algorithm that key's scheme allows, and verify over the
 * locally recomputed 32-byte hash; the distinct valid keys must reach the
 * party's threshold. Invalid extra signatures do not fail a submission that
 * has enough valid ones (as in Canton); too few is FAILED_TO_EXECUTE_TRANSACTION.
 */
import { bytesToHex } from '../../hashing/input.js';
import type { KeyScheme } from '../../keys/schemes.js';
import { aKeyOf, verifySignature } from '../../keys/schemes.js';
import { E } from '../errors.js';
import type { ExternalParty, RegisteredKey } from '../ledger/parties.js';

/** `partySignatures` of an execute request, as decoded by the client's zod schema. */
export interface PartySignaturesJson {
  signatures: {
    party: string;
    signatures: { format: string; signature: string; signedBy: string; signingAlgorithmSpec: string }[];
  }[];
}

/** Formats each key scheme accepts (RAW is the legacy form Canton still migrates). */
const FORMATS: Record<KeyScheme, readonly string[]> = {
  ed25519: ['SIGNATURE_FORMAT_CONCAT', 'SIGNATURE_FORMAT_RAW'],
  'ecdsa-p256': ['SIGNATURE_FORMAT_DER', 'SIGNATURE_FORMAT_RAW'],
  'ecdsa-secp256k1': ['SIGNATURE_FORMAT_DER', 'SIGNATURE_FORMAT_RAW'],
  'ecdsa-p384': ['SIGNATURE_FORMAT_DER', 'SIGNATURE_FORMAT_RAW'],
};
const ALGORITHM: Record<KeyScheme, string> = {
  ed25519: 'SIGNING_ALGORITHM_SPEC_ED25519',
  'ecdsa-p256': 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
  'ecdsa-secp256k1': 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
  'ecdsa-p384': 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_384',
};

/** Why one signature does not count, or undefined when it is valid. */
function problem(
  key: RegisteredKey | undefined,
  sig: PartySignaturesJson['signatures'][number]['signatures'][number],
  hash: Uint8Array,
): string | undefined {
  if (!key) return `signedBy ${sig.signedBy} is not a registered key of the party`;
  if (!FORMATS[key.scheme].includes(sig.format))
    return `UnsupportedSignatureFormat: ${sig.format} for ${aKeyOf(key.scheme)}`;
  if (sig.signingAlgorithmSpec !== ALGORITHM[key.scheme])
    return `KeyAlgoSpecsMismatch: ${sig.signingAlgorithmSpec} for ${aKeyOf(key.scheme)}`;
  const bytes = Buffer.from(sig.signature, 'base64');
  if (!verifySignature(key.scheme, key.spki, hash, bytes))
    return `signature by ${sig.signedBy} does not verify`;
  return undefined;
}

/**
 * Checks the signatures of every party in `actAs`. Throws the Ledger API's
 * FAILED_TO_EXECUTE_TRANSACTION naming the party, the counts and the hash.
 */
export function verifyPartySignatures(x: {
  hash: Uint8Array;
  actAs: readonly string[];
  partySignatures: PartySignaturesJson;
  lookup: (party: string) => ExternalParty | undefined;
}): void {
  const hashHex = `1220${bytesToHex(x.hash)}`;
  for (const entry of x.partySignatures.signatures)
    if (!x.actAs.includes(entry.party))
      throw E.failedToExecute(
        `Signatures were provided for party ${entry.party}, which is not an acting party`,
      );
  for (const party of x.actAs) {
    const p = x.lookup(party);
    if (!p)
      throw E.failedToExecute(
        `Party ${party} is not an external party on this participant; only external parties can submit with external signatures`,
      );
    const given = x.partySignatures.signatures.filter((s) => s.party === party).flatMap((s) => s.signatures);
    const valid = new Set<string>();
    const invalid: string[] = [];
    for (const sig of given) {
      const key = p.keys.find((k) => k.fingerprint === sig.signedBy);
      const why = problem(key, sig, x.hash);
      if (why === undefined) valid.add(key!.fingerprint);
      else invalid.push(why);
    }
    if (valid.size < p.threshold)
      throw E.failedToExecute(
        `Received ${valid.size} valid signatures (${invalid.length} invalid${invalid.length > 0 ? `: ${invalid.join('; ')}` : ''}), but expected at least ${p.threshold} valid signatures from party ${party}. Transaction hash to be signed: ${hashHex}`,
        { party, transactionHash: hashHex },
      );
  }
}

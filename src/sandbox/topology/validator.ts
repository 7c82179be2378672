/**
 * External-party onboarding through the Splice validator
 * (`/v0/admin/external-party/topology/generate|submit`, canton-apis.md §2.3):
 * Ed25519 only, keys and signatures in hex. `generate` returns the pre-3.4.8
 * triple (root NamespaceDelegation, PartyToParticipant on the validator's
 * participant, PartyToKeyMapping) with each transaction's hash; `submit`
 * verifies each signature over its transaction's hash, registers the party and
 * gives the validator operator's user actAs on it. Refusals are Splice
 * `{error}` bodies.
 */
import { decodeTopologyTransaction, encodeTopologyTransaction } from '../../canton/topology/codec.js';
import type { TopologyTransaction } from '../../canton/topology/model.js';
import { fingerprint, partyHintProblem, topologyTransactionHash } from '../../hashing/canton-hash.js';
import { TransactionError } from '../../hashing/errors.js';
import { bytesToBase64, bytesToHex } from '../../hashing/input.js';
import { spliceError } from '../errors.js';
import { type SandboxNetwork, VALIDATOR_USER } from '../network.js';
import { topologyKey, tryParseKey } from './keys.js';
import { OnboardingRefusal, verifyOnboarding } from './onboarding.js';

export interface ValidatorGenerateRequest {
  party_hint: string;
  /** Hex of the raw 32-byte Ed25519 public key. */
  public_key: string;
}

export interface ValidatorGenerateResponse {
  party_id: string;
  topology_txs: { topology_tx: string; hash: string }[];
}

export interface ValidatorSubmitRequest {
  public_key: string;
  signed_topology_txs: { topology_tx: string; signed_hash: string }[];
}

/** The raw Ed25519 key of a validator request, or a 400. */
function ed25519Key(hex: string) {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(hex)) throw spliceError(400, 'public_key is not valid hex');
  const bytes = Buffer.from(hex, 'hex');
  if (bytes.length !== 32)
    throw spliceError(
      400,
      `public_key must be a raw 32-byte Ed25519 key in hex (got ${bytes.length} bytes); the validator supports only Ed25519 external parties`,
    );
  const key = tryParseKey(new Uint8Array(bytes));
  if (typeof key === 'string') throw spliceError(400, `Invalid public_key: ${key}`);
  return key;
}

/** `POST /api/validator/v0/admin/external-party/topology/generate`. */
export function generateValidatorTopology(
  net: SandboxNetwork,
  body: ValidatorGenerateRequest,
): ValidatorGenerateResponse {
  const key = ed25519Key(body.public_key);
  const hintProblem = partyHintProblem(body.party_hint);
  if (hintProblem) throw spliceError(400, `Invalid party_hint: ${hintProblem}`);
  const namespace = fingerprint(key.raw);
  const partyId = `${body.party_hint}::${namespace}`;
  const txs: TopologyTransaction[] = [
    {
      operation: 'add_replace',
      serial: 1,
      mapping: {
        kind: 'namespace_delegation',
        namespace,
        targetKey: topologyKey(key, ['namespace']),
        isRootDelegation: true,
        restriction: { kind: 'can_sign_all_mappings' },
      },
    },
    {
      operation: 'add_replace',
      serial: 1,
      mapping: {
        kind: 'party_to_participant',
        party: partyId,
        threshold: 1,
        participants: [{ participantUid: net.participantId, permission: 'confirmation', onboarding: false }],
        partySigningKeys: undefined,
      },
    },
    {
      operation: 'add_replace',
      serial: 1,
      mapping: {
        kind: 'party_to_key_mapping',
        party: partyId,
        threshold: 1,
        signingKeys: [topologyKey(key, ['protocol'])],
      },
    },
  ];
  return {
    party_id: partyId,
    topology_txs: txs.map((tx) => {
      const bytes = encodeTopologyTransaction(tx);
      return { topology_tx: bytesToBase64(bytes), hash: bytesToHex(topologyTransactionHash(bytes)) };
    }),
  };
}

/** `POST /api/validator/v0/admin/external-party/topology/submit`. */
export function submitValidatorTopology(
  net: SandboxNetwork,
  body: ValidatorSubmitRequest,
): { party_id: string } {
  const key = ed25519Key(body.public_key);
  const signedBy = fingerprint(key.raw);
  if (body.signed_topology_txs.length === 0) throw spliceError(400, 'signed_topology_txs is empty');
  const transactions = body.signed_topology_txs.map((t, i) => {
    let decoded: ReturnType<typeof decodeTopologyTransaction>;
    try {
      decoded = decodeTopologyTransaction(t.topology_tx);
    } catch (e) {
      if (!(e instanceof TransactionError)) throw e;
      throw spliceError(400, `Failed to decode topology transaction ${i}: ${e.message}`);
    }
    if (!/^(?:[0-9a-fA-F]{2})+$/.test(t.signed_hash))
      throw spliceError(400, `signed_hash of topology transaction ${i} is not valid hex`);
    const signature = new Uint8Array(Buffer.from(t.signed_hash, 'hex'));
    // The validator tags every signature RAW, without an algorithm, signed by the given key.
    return {
      decoded,
      signatures: [{ signedBy, format: 'SIGNATURE_FORMAT_RAW', algorithm: undefined, signature }],
    };
  });
  let verified: ReturnType<typeof verifyOnboarding>;
  try {
    verified = verifyOnboarding({ transactions, multiHashSignatures: [], participantUid: net.participantId });
  } catch (e) {
    if (e instanceof OnboardingRefusal)
      throw spliceError(400, `The topology transactions were not accepted by the participant: ${e.message}`);
    throw e;
  }
  const partyId = verified.partyId;
  if (net.parties.has(partyId) || net.localParties.has(partyId))
    throw spliceError(409, `Party ${partyId} already exists on this participant`);
  net.parties.set(partyId, { ...verified, via: 'validator' });
  net.users.get(VALIDATOR_USER)?.actAs.add(partyId);
  return { party_id: partyId };
}

/**
 * External-party onboarding through the JSON Ledger API (canton-apis.md §3.1,
 * §3.2): `generate-topology` builds the Canton ≥ 3.4.8 onboarding transaction
 * (one PartyToParticipant carrying the party's signing key, which is also its
 * namespace key) and `allocate` verifies signed onboarding transactions and
 * returns the party to register. Refusals are Canton errors.
 */
import type { z } from 'zod';
import type {
  AllocateExternalPartyRequestSchema,
  GenerateExternalPartyTopologyRequestSchema,
  GenerateExternalPartyTopologyResponse,
} from '../../canton/ledger-api/schemas.js';
import { decodeTopologyTransaction, encodeTopologyTransaction } from '../../canton/topology/codec.js';
import type { HostingParticipant, TopologyTransaction } from '../../canton/topology/model.js';
import {
  fingerprint,
  multiHash,
  partyHintProblem,
  topologyTransactionHash,
} from '../../hashing/canton-hash.js';
import { TransactionError } from '../../hashing/errors.js';
import { base64ToBytes, bytesToBase64 } from '../../hashing/input.js';
import { cantonError, E, type SandboxError } from '../errors.js';
import type { ExternalParty } from '../ledger/parties.js';
import { SPEC_OF_SCHEME, topologyKey, tryParseKey } from './keys.js';
import { OnboardingRefusal, type OnboardingSignature, verifyOnboarding } from './onboarding.js';

export interface TopologyContext {
  /** This participant's UID (without `PAR::`), as hosting lists name it. */
  participantUid: string;
  synchronizerId: string;
}

type GenerateRequest = z.output<typeof GenerateExternalPartyTopologyRequestSchema>;
type AllocateRequest = z.output<typeof AllocateExternalPartyRequestSchema>;

const KEY_SPEC_NAMES = {
  SIGNING_KEY_SPEC_EC_CURVE25519: 'ec_curve25519',
  SIGNING_KEY_SPEC_EC_P256: 'ec_p256',
  SIGNING_KEY_SPEC_EC_P384: 'ec_p384',
  SIGNING_KEY_SPEC_EC_SECP256K1: 'ec_secp256k1',
} as const;

function checkSynchronizer(synchronizer: string, ctx: TopologyContext): void {
  if (synchronizer !== ctx.synchronizerId)
    throw E.invalidArgument(
      `Unknown synchronizer ${synchronizer}: this participant is connected to ${ctx.synchronizerId} only`,
    );
}

/** `POST /v2/parties/external/generate-topology`. */
export function generateLedgerApiTopology(
  body: GenerateRequest,
  ctx: TopologyContext,
): GenerateExternalPartyTopologyResponse {
  checkSynchronizer(body.synchronizer, ctx);
  const hintProblem = partyHintProblem(body.partyHint);
  if (hintProblem) throw E.invalidField('party_hint', hintProblem);

  const { format, keyData, keySpec } = body.publicKey;
  let bytes: Uint8Array;
  try {
    bytes = base64ToBytes(keyData, 'key_data');
  } catch (e) {
    if (!(e instanceof TransactionError)) throw e;
    throw E.invalidField('public_key', e.detail);
  }
  if (format === 'CRYPTO_KEY_FORMAT_RAW' && keySpec !== 'SIGNING_KEY_SPEC_EC_CURVE25519')
    throw E.invalidField(
      'public_key',
      `format ${format} is only supported for SIGNING_KEY_SPEC_EC_CURVE25519`,
    );
  if ((format === 'CRYPTO_KEY_FORMAT_RAW') !== (bytes.length === 32))
    throw E.invalidField(
      'public_key',
      format === 'CRYPTO_KEY_FORMAT_RAW'
        ? `a RAW Ed25519 key is 32 bytes, got ${bytes.length}`
        : 'key_data is not a SubjectPublicKeyInfo DER key',
    );
  const key = tryParseKey(bytes);
  if (typeof key === 'string') throw E.invalidField('public_key', key);
  if (SPEC_OF_SCHEME[key.algorithm] !== KEY_SPEC_NAMES[keySpec])
    throw E.invalidField(
      'public_key',
      `key spec ${keySpec} does not match the key, which is ${key.algorithm}`,
    );

  const fp = fingerprint(bytes);
  const partyId = `${body.partyHint}::${fp}`;

  const tx: TopologyTransaction = {
    operation: 'add_replace',
    serial: 1,
    mapping: {
      kind: 'party_to_participant',
      party: partyId,
      ...hosting(body, ctx),
      partySigningKeys: {
        keys: [topologyKey(key, ['namespace', 'protocol', 'proof_of_ownership'])],
        threshold: 1,
      },
    },
  };
  const encoded = encodeTopologyTransaction(tx);
  return {
    partyId,
    publicKeyFingerprint: fp,
    topologyTransactions: [bytesToBase64(encoded)],
    multiHash: bytesToBase64(multiHash([topologyTransactionHash(encoded)])),
  };
}

/** Hosting participants and confirmation threshold of a generate request. */
function hosting(
  body: GenerateRequest,
  ctx: TopologyContext,
): { threshold: number; participants: HostingParticipant[] } {
  const others = body.otherConfirmingParticipantUids ?? [];
  const observers = body.observingParticipantUids ?? [];
  const all = [ctx.participantUid, ...others, ...observers];
  if (new Set(all).size !== all.length)
    throw E.invalidArgument(
      'A participant may appear only once among this participant, otherConfirmingParticipantUids and observingParticipantUids',
    );
  const localObserves = body.localParticipantObservationOnly === true;
  const confirmers = others.length + (localObserves ? 0 : 1);
  if (confirmers === 0)
    throw E.invalidArgument('The party needs at least one participant with Confirmation permission');
  const requested = body.confirmationThreshold ?? 0;
  if (requested < 0 || requested > confirmers)
    throw E.invalidField(
      'confirmation_threshold',
      `${requested} is not between 1 and the number of confirming participants (${confirmers}); 0 means all of them`,
    );
  const entry = (participantUid: string, permission: HostingParticipant['permission']) => ({
    participantUid,
    permission,
    onboarding: false,
  });
  return {
    threshold: requested === 0 ? confirmers : requested,
    participants: [
      entry(ctx.participantUid, localObserves ? 'observation' : 'confirmation'),
      ...others.map((p) => entry(p, 'confirmation')),
      ...observers.map((p) => entry(p, 'observation')),
    ],
  };
}

/**
 * `POST /v2/parties/external/allocate`: verifies the signed onboarding
 * transactions and returns the party to register (the route refuses an
 * existing party and stores it).
 */
export function allocateExternalParty(
  body: AllocateRequest,
  ctx: TopologyContext,
): { partyId: string; party: ExternalParty } {
  checkSynchronizer(body.synchronizer, ctx);
  const transactions = body.onboardingTransactions.map((t, i) => {
    let decoded: ReturnType<typeof decodeTopologyTransaction>;
    try {
      decoded = decodeTopologyTransaction(t.transaction);
    } catch (e) {
      if (!(e instanceof TransactionError)) throw e;
      throw E.invalidField(
        'onboarding_transactions',
        `transaction ${i} is not a valid topology transaction: ${e.message}`,
      );
    }
    return { decoded, signatures: (t.signatures ?? []).map(signature) };
  });
  try {
    const verified = verifyOnboarding({
      transactions,
      multiHashSignatures: (body.multiHashSignatures ?? []).map(signature),
      participantUid: ctx.participantUid,
    });
    return { partyId: verified.partyId, party: { ...verified, via: 'ledger-api' } };
  } catch (e) {
    if (e instanceof OnboardingRefusal) throw cantonRefusal(e);
    throw e;
  }
}

function signature(s: NonNullable<AllocateRequest['multiHashSignatures']>[number]): OnboardingSignature {
  return {
    signedBy: s.signedBy,
    format: s.format,
    algorithm: s.signingAlgorithmSpec,
    signature: Buffer.from(s.signature, 'base64'),
  };
}

/** The Canton error a participant answers an onboarding refusal with. */
function cantonRefusal(e: OnboardingRefusal): SandboxError {
  switch (e.kind) {
    case 'invalid':
      return E.invalidArgument(e.message);
    case 'signature':
      return cantonError(
        'TOPOLOGY_INVALID_TOPOLOGY_TX_SIGNATURE',
        5,
        `Transaction signature verification failed: ${e.message}`,
      );
    case 'unauthorized':
      return cantonError(
        'TOPOLOGY_UNAUTHORIZED_TRANSACTION',
        5,
        `Topology transaction is not properly authorized: ${e.message}`,
      );
  }
}

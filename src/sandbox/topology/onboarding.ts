/**
 * The participant's verification of an external party's onboarding
 * transactions, shared by the Ledger API (`allocate`) and the validator
 * (`topology/submit`): structure (one PartyToParticipant, at most one root
 * NamespaceDelegation and one PartyToKeyMapping, all for one namespace, serial
 * 1, hosting rules for external parties), then authorization (every
 * transaction signed by the namespace key and by each signing key it registers,
 * every given signature valid). Refusals are `OnboardingRefusal`s; each API
 * renders them in its own error shape.
 */
import type {
  DecodedTopologyTransaction,
  NamespaceDelegation,
  PartyToKeyMapping,
  PartyToParticipant,
  SigningPublicKey,
  TopologyMappingKind,
} from '../../canton/topology/model.js';
import { multiHash, parsePartyId } from '../../hashing/canton-hash.js';
import { TransactionError } from '../../hashing/errors.js';
import { aKeyOf, SCHEMES, verifySignature } from '../../keys/schemes.js';
import type { ExternalParty, RegisteredKey } from '../ledger/parties.js';
import { registeredKey } from './keys.js';

/**
 * `invalid`: the request breaks the onboarding rules; `signature`: a signature
 * does not verify or names no key of the party; `unauthorized`: a required
 * signature is missing.
 */
export type RefusalKind = 'invalid' | 'signature' | 'unauthorized';

export class OnboardingRefusal extends Error {
  override readonly name = 'OnboardingRefusal';
  constructor(
    readonly kind: RefusalKind,
    message: string,
  ) {
    super(message);
  }
}

export interface OnboardingSignature {
  /** Fingerprint of the key that signed. */
  signedBy: string;
  /** `SignatureFormat` name. */
  format: string;
  /** `SigningAlgorithmSpec` name; undefined where the API does not carry one (validator: RAW Ed25519). */
  algorithm: string | undefined;
  signature: Uint8Array;
}

export interface OnboardingTransaction {
  decoded: DecodedTopologyTransaction;
  /** Signatures over this transaction's hash. */
  signatures: OnboardingSignature[];
}

export interface OnboardingRequest {
  transactions: OnboardingTransaction[];
  /** Signatures over the multi-hash of all the transactions. */
  multiHashSignatures: OnboardingSignature[];
  /** UID of the participant verifying (it must host the party). */
  participantUid: string;
}

export type VerifiedParty = Omit<ExternalParty, 'via'>;

const NAMES: Record<TopologyMappingKind, string> = {
  namespace_delegation: 'NamespaceDelegation',
  party_to_key_mapping: 'PartyToKeyMapping',
  party_to_participant: 'PartyToParticipant',
};

const invalid = (message: string) => new OnboardingRefusal('invalid', message);

/** Verifies the onboarding transactions; returns the party they create. */
export function verifyOnboarding(req: OnboardingRequest): VerifiedParty {
  const txs = req.transactions;
  if (txs.length === 0) throw invalid('No onboarding transactions were provided');
  txs.forEach((t, i) => {
    const tx = t.decoded.transaction;
    if (tx.operation !== 'add_replace')
      throw invalid(`Onboarding transaction ${i} (${NAMES[tx.mapping.kind]}) is a removal, not an addition`);
    if (tx.serial !== 1)
      throw invalid(
        `Onboarding transaction ${i} (${NAMES[tx.mapping.kind]}) has serial ${tx.serial}; a new party's transactions have serial 1`,
      );
  });
  const p2p = atMostOne<PartyToParticipant>(txs, 'party_to_participant');
  const nd = atMostOne<NamespaceDelegation>(txs, 'namespace_delegation');
  const p2k = atMostOne<PartyToKeyMapping>(txs, 'party_to_key_mapping');
  if (p2p === undefined) throw invalid('One transaction of type PartyToParticipant must be provided, got 0');

  const { hint, fingerprint: namespace } = partyOf(p2p.party);
  const hosting = checkHosting(p2p, req.participantUid);
  const delegatedKey = nd ? rootKey(nd, namespace) : undefined;
  if (p2k && p2k.party !== p2p.party)
    throw invalid(
      `The PartyToKeyMapping party (${p2k.party}) does not match the PartyToParticipant party (${p2p.party})`,
    );

  if ((p2p.partySigningKeys === undefined) === (p2k === undefined))
    throw invalid(
      'Party signing keys must be given either in the PartyToParticipant or in a PartyToKeyMapping, exactly one of them',
    );
  const keySet = p2p.partySigningKeys ?? { keys: p2k!.signingKeys, threshold: p2k!.threshold };
  const keys = signingKeys(keySet.keys, keySet.threshold, namespace, p2p.partySigningKeys !== undefined);

  const namespaceKey = delegatedKey ?? keys.find((k) => k.fingerprint === namespace);
  if (namespaceKey === undefined)
    throw new OnboardingRefusal(
      'unauthorized',
      `No key is known for the party namespace ${namespace}: provide a root NamespaceDelegation or a party signing key with that fingerprint`,
    );
  authorize(req, namespaceKey, keys);
  return {
    partyId: `${hint}::${namespace}`,
    namespace,
    keys,
    threshold: keySet.threshold,
    hosting,
  };
}

function ofKind<T>(txs: OnboardingTransaction[], kind: TopologyMappingKind): T[] {
  return txs.map((t) => t.decoded.transaction.mapping).filter((m) => m.kind === kind) as T[];
}

function atMostOne<T>(txs: OnboardingTransaction[], kind: TopologyMappingKind): T | undefined {
  const found = ofKind<T>(txs, kind);
  if (found.length > 1)
    throw invalid(`Only one transaction of type ${NAMES[kind]} can be provided, got ${found.length}`);
  return found[0];
}

function partyOf(party: string): { hint: string; fingerprint: string } {
  try {
    return parsePartyId(party);
  } catch (e) {
    if (e instanceof TransactionError)
      throw invalid(`Invalid party ${party} in PartyToParticipant: ${e.detail}`);
    throw e;
  }
}

/** External parties: no Submission permission, at least one confirmer, hosted here. */
function checkHosting(p2p: PartyToParticipant, here: string): ExternalParty['hosting'] {
  const ps = p2p.participants;
  const uids = new Set(ps.map((p) => p.participantUid));
  if (uids.size !== ps.length) throw invalid('The PartyToParticipant lists a participant more than once');
  const submitters = ps.filter((p) => p.permission === 'submission').map((p) => p.participantUid);
  if (submitters.length > 0)
    throw invalid(
      `The PartyToParticipant transaction must not contain any node with Submission permission. Nodes with submission permission: ${submitters.join(', ')}`,
    );
  const only = ps.length === 1 ? ps[0]! : undefined;
  if (only && !(only.participantUid === here && only.permission === 'confirmation'))
    throw invalid(
      `The party is to be hosted on a single participant (${only.participantUid}) that is not this participant (${here}). Submit the allocation request on ${only.participantUid} instead.`,
    );
  const confirmers = ps.filter((p) => p.permission === 'confirmation');
  if (confirmers.length === 0)
    throw invalid(
      'The PartyToParticipant transaction must contain at least one node with Confirmation permission',
    );
  if (!uids.has(here))
    throw invalid('This node is not hosting the party either with Confirmation or Observation permission.');
  if (p2p.threshold < 1 || p2p.threshold > confirmers.length)
    throw invalid(
      `The PartyToParticipant confirmation threshold ${p2p.threshold} must be between 1 and the number of confirming participants (${confirmers.length})`,
    );
  return ps.map((p) => ({ participantUid: p.participantUid, permission: p.permission }));
}

/** The namespace key a root NamespaceDelegation for the party's namespace introduces. */
function rootKey(nd: NamespaceDelegation, namespace: string): RegisteredKey {
  const target = registeredKey(nd.targetKey);
  if (typeof target === 'string') throw invalid(`Invalid NamespaceDelegation target key: ${target}`);
  if (nd.namespace !== target.fingerprint || nd.restriction?.kind === 'can_sign_specific_mappings')
    throw invalid(
      'NamespaceDelegation is not a root namespace. Ensure the namespace and target key are the same',
    );
  if (!nd.targetKey.usage.includes('namespace'))
    throw invalid('The NamespaceDelegation target key is missing the Namespace usage');
  if (nd.namespace !== namespace)
    throw invalid(
      `The Party namespace (${nd.namespace}) does not match the PartyToParticipant namespace (${namespace})`,
    );
  return target;
}

/** The party's signing keys: valid, distinct, Protocol usage, threshold within 1..n. */
function signingKeys(
  keys: SigningPublicKey[],
  threshold: number,
  namespace: string,
  inPartyToParticipant: boolean,
): RegisteredKey[] {
  if (keys.length === 0) throw invalid('The party must have at least one signing key');
  const out = keys.map((k, i) => {
    const r = registeredKey(k);
    if (typeof r === 'string') throw invalid(`Invalid party signing key ${i}: ${r}`);
    if (!k.usage.includes('protocol')) throw invalid('Missing Protocol usage on signing keys');
    if (inPartyToParticipant && r.fingerprint === namespace && !k.usage.includes('namespace'))
      throw invalid('Missing Namespace and Protocol usage on the party namespace key');
    return r;
  });
  if (new Set(out.map((k) => k.fingerprint)).size !== out.length)
    throw invalid('The party signing keys contain the same key more than once');
  if (threshold < 1 || threshold > out.length)
    throw invalid(
      `The party signing threshold ${threshold} must be between 1 and the number of signing keys (${out.length})`,
    );
  return out;
}

/**
 * Every transaction needs the namespace key's signature and, for the mapping
 * that registers the party's signing keys, a signature of each of them (proof
 * of ownership). Each given signature must verify; per-transaction signatures
 * take precedence over a multi-hash signature by the same key.
 */
function authorize(req: OnboardingRequest, namespaceKey: RegisteredKey, keys: RegisteredKey[]): void {
  const known = new Map<string, RegisteredKey>([[namespaceKey.fingerprint, namespaceKey]]);
  for (const k of keys) known.set(k.fingerprint, k);
  const combined = multiHash(req.transactions.map((t) => t.decoded.hash));
  req.transactions.forEach((t, i) => {
    const mapping = t.decoded.transaction.mapping;
    const what = `Onboarding transaction ${i} (${NAMES[mapping.kind]})`;
    const bySigner = new Map<string, { sig: OnboardingSignature; hash: Uint8Array }>();
    for (const sig of t.signatures)
      if (!bySigner.has(sig.signedBy)) bySigner.set(sig.signedBy, { sig, hash: t.decoded.hash });
    for (const sig of req.multiHashSignatures)
      if (!bySigner.has(sig.signedBy)) bySigner.set(sig.signedBy, { sig, hash: combined });
    // A root delegation is authorized by the namespace key alone; other signatures on it are dropped.
    if (mapping.kind === 'namespace_delegation')
      for (const signer of [...bySigner.keys()])
        if (signer !== namespaceKey.fingerprint) bySigner.delete(signer);
    for (const [signer, { sig, hash }] of bySigner) {
      const key = known.get(signer);
      if (!key)
        throw new OnboardingRefusal(
          'signature',
          `${what} is signed by ${signer}, which is neither the namespace key nor a signing key of the party`,
        );
      const why = signatureProblem(key, sig, hash);
      if (why) throw new OnboardingRefusal('signature', `${what}: signature by ${signer} ${why}`);
    }
    const required = new Set([namespaceKey.fingerprint]);
    if (mapping.kind !== 'namespace_delegation' && registersKeys(mapping))
      for (const k of keys) required.add(k.fingerprint);
    const missing = [...required].filter((f) => !bySigner.has(f));
    if (missing.length > 0)
      throw new OnboardingRefusal('unauthorized', `${what} is missing signatures of ${missing.join(', ')}`);
  });
}

function registersKeys(mapping: PartyToKeyMapping | PartyToParticipant): boolean {
  return mapping.kind === 'party_to_key_mapping' || mapping.partySigningKeys !== undefined;
}

/** Why a signature does not verify with the key (format, algorithm, bytes), or undefined. */
function signatureProblem(
  key: RegisteredKey,
  sig: OnboardingSignature,
  hash: Uint8Array,
): string | undefined {
  const info = SCHEMES[key.scheme];
  if (sig.format !== info.format && sig.format !== 'SIGNATURE_FORMAT_RAW')
    return `has format ${sig.format}, which ${aKeyOf(key.scheme)} does not produce (UnsupportedSignatureFormat)`;
  if (sig.algorithm !== undefined && sig.algorithm !== info.algorithm)
    return `uses ${sig.algorithm} with ${aKeyOf(key.scheme)} (KeyAlgoSpecsMismatch)`;
  if (!verifySignature(key.scheme, key.spki, hash, sig.signature)) return 'does not verify';
  return undefined;
}

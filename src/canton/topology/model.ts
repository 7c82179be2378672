/**
 * Typed model of the Canton topology transactions an external party's
 * onboarding consists of (canton-apis.md §3.1, §4.4): the protobuf messages
 * `com.digitalasset.canton.protocol.v30.TopologyTransaction` and the three
 * mappings the signer understands, with `crypto.v30.SigningPublicKey`.
 *
 * Enum values are named by their proto value names, lower-cased and without
 * the enum prefix (`PARTICIPANT_PERMISSION_CONFIRMATION` → `'confirmation'`).
 * `'unspecified'` (proto value 0, i.e. the field is absent) is kept where the
 * wire allows it, so the model says exactly what the bytes say; whether it is
 * acceptable is the caller's decision, not the codec's.
 */

/** `Enums.TopologyChangeOp` without UNSPECIFIED (a transaction without an operation is refused). */
export type TopologyOperation = 'add_replace' | 'remove';

/** `Enums.ParticipantPermission` without UNSPECIFIED. */
export type ParticipantPermission = 'submission' | 'confirmation' | 'observation';

/** `crypto.v30.CryptoKeyFormat` values a public key can carry. */
export type CryptoKeyFormat = 'unspecified' | 'der' | 'raw' | 'der_x509_subject_public_key_info';

/** `crypto.v30.SigningKeySpec`. */
export type SigningKeySpec = 'unspecified' | 'ec_curve25519' | 'ec_p256' | 'ec_p384' | 'ec_secp256k1';

/** `crypto.v30.SigningKeyScheme` (deprecated in favour of the key spec; still on the wire). */
export type SigningKeyScheme = 'unspecified' | 'ed25519' | 'ec_dsa_p256' | 'ec_dsa_p384';

/** `crypto.v30.SigningKeyUsage` without UNSPECIFIED. */
export type SigningKeyUsage =
  | 'namespace'
  | 'identity_delegation'
  | 'sequencer_authentication'
  | 'protocol'
  | 'proof_of_ownership';

/** `Enums.TopologyMappingCode` without UNSPECIFIED (used by namespace-delegation restrictions). */
export type TopologyMappingCode =
  | 'namespace_delegation'
  | 'decentralized_namespace_definition'
  | 'owner_to_key_mapping'
  | 'synchronizer_trust_certificate'
  | 'participant_permission'
  | 'party_hosting_limits'
  | 'vetted_packages'
  | 'party_to_participant'
  | 'synchronizer_parameters_state'
  | 'mediator_synchronizer_state'
  | 'sequencer_synchronizer_state'
  | 'purge_topology_txs'
  | 'sequencing_dynamic_parameters_state'
  | 'party_to_key_mapping';

/** `crypto.v30.SigningPublicKey`. */
export interface SigningPublicKey {
  format: CryptoKeyFormat;
  /** The key bytes exactly as on the wire (raw 32 bytes or SPKI DER, per `format`). */
  publicKey: Uint8Array;
  /** Deprecated field 4; Canton 3.x writes `'unspecified'` and uses `keySpec`. */
  scheme: SigningKeyScheme;
  usage: SigningKeyUsage[];
  keySpec: SigningKeySpec;
}

/** `crypto.v30.SigningKeysWithThreshold`. */
export interface SigningKeysWithThreshold {
  keys: SigningPublicKey[];
  threshold: number;
}

/** The `restriction` oneof of `NamespaceDelegation`; absent on pre-restriction transactions. */
export type NamespaceDelegationRestriction =
  | { kind: 'can_sign_all_mappings' }
  | { kind: 'can_sign_all_but_namespace_delegations' }
  | { kind: 'can_sign_specific_mappings'; mappings: TopologyMappingCode[] };

export interface NamespaceDelegation {
  kind: 'namespace_delegation';
  /** Fingerprint of the namespace's root key (68 hex characters, `1220…`). */
  namespace: string;
  targetKey: SigningPublicKey;
  /** Deprecated field 3, superseded by `restriction`. */
  isRootDelegation: boolean;
  restriction: NamespaceDelegationRestriction | undefined;
}

/** Deprecated from Canton 3.4.8 (the keys moved into PartyToParticipant). */
export interface PartyToKeyMapping {
  kind: 'party_to_key_mapping';
  party: string;
  threshold: number;
  signingKeys: SigningPublicKey[];
}

export interface HostingParticipant {
  participantUid: string;
  permission: ParticipantPermission;
  /** The `onboarding` marker message is present (the party is being onboarded to this participant). */
  onboarding: boolean;
}

export interface PartyToParticipant {
  kind: 'party_to_participant';
  party: string;
  /** Confirmation threshold across the hosting participants. */
  threshold: number;
  participants: HostingParticipant[];
  /** From Canton 3.4.8: the party's own signing keys and signing threshold (field 6, explicit presence). */
  partySigningKeys: SigningKeysWithThreshold | undefined;
}

export type TopologyMapping = NamespaceDelegation | PartyToKeyMapping | PartyToParticipant;

export type TopologyMappingKind = TopologyMapping['kind'];

export interface TopologyTransaction {
  operation: TopologyOperation;
  serial: number;
  mapping: TopologyMapping;
}

/** A decoded `UntypedVersionedMessage{data = TopologyTransaction, version}` and what signing needs. */
export interface DecodedTopologyTransaction {
  /** Proto version of the envelope (30 for every protocol version Canton 3.x speaks). */
  version: number;
  transaction: TopologyTransaction;
  /** The versioned bytes exactly as received: these, never a re-encoding, are hashed and submitted. */
  bytes: Uint8Array;
  /** CantonHash(11, bytes): the 34-byte multihash a per-transaction signature signs. */
  hash: Uint8Array;
}

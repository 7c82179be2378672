/**
 * Strict codec for Canton topology transactions as they travel between a
 * participant/validator and the signer (canton-apis.md §1, §4.4): the bytes of
 * `version.v1.UntypedVersionedMessage{ data = 1 (oneof wrapper), version = 2 }`
 * whose `data` is a `protocol.v30.TopologyTransaction`.
 *
 * Decoding is built on the project's strict wire reader and refuses, with the
 * field path, anything it does not fully understand: unknown fields, unknown
 * enum values, envelope versions other than the ones listed, and mapping kinds
 * other than NamespaceDelegation, PartyToKeyMapping and PartyToParticipant
 * (`unsupported`, naming the kind): the signer never signs what it cannot show.
 * Singular fields and oneofs set twice, unpacked or empty packed repeated enums
 * are refused too (a Canton node never writes them).
 *
 * Encoding is canonical (field-number order, proto3 defaults omitted, oneof
 * members and presence fields always written), as Canton's Java/Scala runtime
 * writes them; `decode(encode(tx))` gives `tx` back and `encode(decode(b))`
 * gives `b` back for canonical bytes. Signing never re-encodes: it hashes and
 * submits the bytes it was given (`DecodedTopologyTransaction.bytes`).
 *
 * Field numbers: canton/protocol/v30/topology.proto and crypto/v30/crypto.proto
 * (Canton 3.4.x); the PartyToParticipant fields added in 3.4.8
 * (`party_signing_keys = 6`, `HostingParticipant.onboarding = 3`) and
 * `crypto.v30.SigningKeysWithThreshold { keys = 1; threshold = 2 }` included.
 *
 * One file on purpose: each message's decoder and encoder sit side by side with
 * their field numbers, so that the round trip (decode(encode(tx)) = tx,
 * encode(decode(b)) = b) can be checked by reading.
 */
import { topologyTransactionHash } from '../../hashing/canton-hash.js';
import { TransactionError } from '../../hashing/errors.js';
import { base64ToBytes } from '../../hashing/input.js';
import { MessageDecoder } from '../../hashing/message-decoder.js';
import { WT_LEN, WT_VARINT } from '../../hashing/wire.js';
import { Writer } from '../../hashing/wire-writer.js';
import type {
  CryptoKeyFormat,
  DecodedTopologyTransaction,
  HostingParticipant,
  NamespaceDelegation,
  NamespaceDelegationRestriction,
  ParticipantPermission,
  PartyToKeyMapping,
  PartyToParticipant,
  SigningKeyScheme,
  SigningKeySpec,
  SigningKeysWithThreshold,
  SigningKeyUsage,
  SigningPublicKey,
  TopologyMapping,
  TopologyMappingCode,
  TopologyOperation,
  TopologyTransaction,
} from './model.js';

/** `UntypedVersionedMessage.version` values accepted (30: every Canton 3.x protocol version). */
export const KNOWN_TOPOLOGY_VERSIONS: ReadonlySet<number> = new Set([30]);
export const DEFAULT_TOPOLOGY_VERSION = 30;

// ---- enum tables: index = proto number, undefined = not a value the signer accepts ----------------

const OPERATIONS: readonly (TopologyOperation | undefined)[] = [undefined, 'add_replace', 'remove'];
const PERMISSIONS: readonly (ParticipantPermission | undefined)[] = [
  undefined,
  'submission',
  'confirmation',
  'observation',
];
// 5 (DER_PKCS8_PRIVATE_KEY_INFO) is a private-key format and 10000 (SYMBOLIC) a test-only one: refused.
const KEY_FORMATS: readonly (CryptoKeyFormat | undefined)[] = [
  'unspecified',
  undefined,
  'der',
  'raw',
  'der_x509_subject_public_key_info',
];
const KEY_SPECS: readonly (SigningKeySpec | undefined)[] = [
  'unspecified',
  'ec_curve25519',
  'ec_p256',
  'ec_p384',
  'ec_secp256k1',
];
const KEY_SCHEMES: readonly (SigningKeyScheme | undefined)[] = [
  'unspecified',
  'ed25519',
  'ec_dsa_p256',
  'ec_dsa_p384',
];
const KEY_USAGES: readonly (SigningKeyUsage | undefined)[] = [
  undefined,
  'namespace',
  'identity_delegation',
  'sequencer_authentication',
  'protocol',
  'proof_of_ownership',
];
const MAPPING_CODES: readonly (TopologyMappingCode | undefined)[] = [
  undefined,
  'namespace_delegation',
  undefined,
  'decentralized_namespace_definition',
  'owner_to_key_mapping',
  'synchronizer_trust_certificate',
  'participant_permission',
  'party_hosting_limits',
  'vetted_packages',
  'party_to_participant',
  undefined,
  'synchronizer_parameters_state',
  'mediator_synchronizer_state',
  'sequencer_synchronizer_state',
  undefined,
  'purge_topology_txs',
  undefined,
  'sequencing_dynamic_parameters_state',
  'party_to_key_mapping',
];

/** `TopologyMapping.mapping` oneof: field number → kind, for every kind Canton defines. */
const MAPPING_FIELDS: Readonly<Record<number, string>> = {
  1: 'namespace_delegation',
  3: 'decentralized_namespace_definition',
  4: 'owner_to_key_mapping',
  5: 'synchronizer_trust_certificate',
  6: 'participant_permission',
  7: 'party_hosting_limits',
  8: 'vetted_packages',
  9: 'party_to_participant',
  11: 'synchronizer_parameters_state',
  12: 'mediator_synchronizer_state',
  13: 'sequencer_synchronizer_state',
  14: 'purge_topology_txs',
  15: 'sequencing_dynamic_parameters_state',
  16: 'party_to_key_mapping',
  17: 'synchronizer_upgrade_announcement',
  18: 'sequencer_connection_successor',
};
const F_NAMESPACE_DELEGATION = 1;
const F_PARTY_TO_PARTICIPANT = 9;
const F_PARTY_TO_KEY_MAPPING = 16;

// ---- decoding -----------------------------------------------------------------------------------

/**
 * Decodes one serialized versioned topology transaction (bytes, or their
 * standard base64 as the validator and Ledger API carry them).
 */
export function decodeTopologyTransaction(input: Uint8Array | string): DecodedTopologyTransaction {
  const bytes =
    typeof input === 'string' ? base64ToBytes(input, 'topology transaction') : new Uint8Array(input);
  if (bytes.length === 0) throw new TransactionError('missing_field', '', 'topology transaction is empty');
  const { version, transaction } = new TopologyDecoder(bytes).envelope();
  return { version, transaction, bytes, hash: topologyTransactionHash(bytes) };
}

class TopologyDecoder extends MessageDecoder {
  envelope(): { version: number; transaction: TopologyTransaction } {
    const r = this.r;
    const end = r.buf.length;
    let seen = 0;
    let dataStart = -1;
    let dataEnd = -1;
    let version = 0n;
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'data');
        r.expect(tag, WT_LEN, 'data');
        dataEnd = r.len(end, 'data');
        dataStart = r.pos;
        r.pos = dataEnd;
      } else if (f === 2) {
        seen = this.once(seen, f, 'version');
        r.expect(tag, WT_VARINT, 'version');
        version = r.varint64(end, 'version');
      } else this.unknown(tag);
    }
    // The version decides how `data` is read, so it is checked first.
    const v = BigInt.asIntN(64, version);
    if (v > 0x7fffffffn || v < -0x80000000n)
      this.p.fail('malformed', `version ${v} does not fit in an int32`, 'version');
    if (!KNOWN_TOPOLOGY_VERSIONS.has(Number(v)))
      this.p.fail(
        'unsupported_version',
        `topology transaction version ${v} is not one the signer knows (accepted: ${[...KNOWN_TOPOLOGY_VERSIONS].join(', ')})`,
        'version',
      );
    if (dataStart < 0) this.p.fail('missing_field', 'versioned message carries no data', 'data');
    r.pos = dataStart;
    this.p.push('data');
    const transaction = this.transaction(dataEnd);
    this.p.pop();
    return { version: Number(v), transaction };
  }

  private transaction(end: number): TopologyTransaction {
    const r = this.r;
    let seen = 0;
    let operation: TopologyOperation | undefined;
    let serial = 0;
    let mapping: TopologyMapping | undefined;
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'operation');
        operation = this.enumValue(tag, end, 'operation', OPERATIONS, 'TopologyChangeOp');
      } else if (f === 2) {
        seen = this.once(seen, f, 'serial');
        serial = this.uint32(tag, end, 'serial');
      } else if (f === 3) {
        seen = this.once(seen, f, 'mapping');
        mapping = this.nested(tag, end, 'mapping', (stop) => this.mapping(stop));
      } else this.unknown(tag);
    }
    if (operation === undefined) this.p.fail('missing_field', 'operation is not set', 'operation');
    if (mapping === undefined) this.p.fail('missing_field', 'mapping is not set', 'mapping');
    return { operation, serial, mapping };
  }

  private mapping(end: number): TopologyMapping {
    const r = this.r;
    let mapping: TopologyMapping | undefined;
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      const kind = MAPPING_FIELDS[f];
      if (kind === undefined) this.unknown(tag);
      if (mapping !== undefined) this.p.fail('duplicate_field', 'mapping oneof set more than once', kind);
      if (f === F_NAMESPACE_DELEGATION)
        mapping = this.nested(tag, end, kind, (stop) => this.namespaceDelegation(stop));
      else if (f === F_PARTY_TO_PARTICIPANT)
        mapping = this.nested(tag, end, kind, (stop) => this.partyToParticipant(stop));
      else if (f === F_PARTY_TO_KEY_MAPPING)
        mapping = this.nested(tag, end, kind, (stop) => this.partyToKeyMapping(stop));
      else
        this.p.fail(
          'unsupported',
          `topology mapping kind ${kind} (field ${f}) is not supported: the signer only understands namespace_delegation, party_to_key_mapping and party_to_participant`,
          kind,
        );
    }
    if (mapping === undefined) this.p.fail('missing_field', 'mapping oneof is not set');
    return mapping;
  }

  private namespaceDelegation(end: number): NamespaceDelegation {
    const r = this.r;
    let seen = 0;
    let namespace = '';
    let targetKey: SigningPublicKey | undefined;
    let isRootDelegation = false;
    let restriction: NamespaceDelegationRestriction | undefined;
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'namespace');
        namespace = r.string(tag, end, 'namespace');
      } else if (f === 2) {
        seen = this.once(seen, f, 'target_key');
        targetKey = this.nested(tag, end, 'target_key', (stop) => this.signingPublicKey(stop));
      } else if (f === 3) {
        seen = this.once(seen, f, 'is_root_delegation');
        isRootDelegation = this.bool(tag, end, 'is_root_delegation');
      } else if (f === 4 || f === 5 || f === 6) {
        const name =
          f === 4
            ? 'can_sign_all_mappings'
            : f === 5
              ? 'can_sign_all_but_namespace_delegations'
              : 'can_sign_specific_mapings'; // sic: the proto field name
        if (restriction !== undefined)
          this.p.fail('duplicate_field', 'restriction oneof set more than once', name);
        if (f === 6)
          restriction = {
            kind: 'can_sign_specific_mappings',
            mappings: this.nested(tag, end, name, (stop) => this.specificMappings(stop)),
          };
        else {
          this.nested(tag, end, name, (stop) => this.empty(stop));
          restriction = {
            kind: f === 4 ? 'can_sign_all_mappings' : 'can_sign_all_but_namespace_delegations',
          };
        }
      } else this.unknown(tag);
    }
    if (targetKey === undefined) this.p.fail('missing_field', 'target_key is not set', 'target_key');
    return { kind: 'namespace_delegation', namespace, targetKey, isRootDelegation, restriction };
  }

  private specificMappings(end: number): TopologyMappingCode[] {
    const r = this.r;
    let seen = 0;
    let mappings: TopologyMappingCode[] = [];
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'mappings');
        mappings = this.packedEnum(tag, end, 'mappings', MAPPING_CODES, 'TopologyMappingCode');
      } else this.unknown(tag);
    }
    return mappings;
  }

  private partyToKeyMapping(end: number): PartyToKeyMapping {
    const r = this.r;
    let seen = 0;
    let party = '';
    let threshold = 0;
    const signingKeys: SigningPublicKey[] = [];
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'party');
        party = r.string(tag, end, 'party');
      } else if (f === 3) {
        seen = this.once(seen, f, 'threshold');
        threshold = this.uint32(tag, end, 'threshold');
      } else if (f === 4) {
        signingKeys.push(
          this.nested(tag, end, 'signing_keys', (stop) => this.signingPublicKey(stop), signingKeys.length),
        );
      } else this.unknown(tag);
    }
    return { kind: 'party_to_key_mapping', party, threshold, signingKeys };
  }

  private partyToParticipant(end: number): PartyToParticipant {
    const r = this.r;
    let seen = 0;
    let party = '';
    let threshold = 0;
    const participants: HostingParticipant[] = [];
    let partySigningKeys: SigningKeysWithThreshold | undefined;
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'party');
        party = r.string(tag, end, 'party');
      } else if (f === 2) {
        seen = this.once(seen, f, 'threshold');
        threshold = this.uint32(tag, end, 'threshold');
      } else if (f === 3) {
        participants.push(
          this.nested(tag, end, 'participants', (stop) => this.hostingParticipant(stop), participants.length),
        );
      } else if (f === 6) {
        seen = this.once(seen, f, 'party_signing_keys');
        partySigningKeys = this.nested(tag, end, 'party_signing_keys', (stop) =>
          this.keysWithThreshold(stop),
        );
      } else this.unknown(tag);
    }
    return { kind: 'party_to_participant', party, threshold, participants, partySigningKeys };
  }

  private hostingParticipant(end: number): HostingParticipant {
    const r = this.r;
    let seen = 0;
    let participantUid = '';
    let permission: ParticipantPermission | undefined;
    let onboarding = false;
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'participant_uid');
        participantUid = r.string(tag, end, 'participant_uid');
      } else if (f === 2) {
        seen = this.once(seen, f, 'permission');
        permission = this.enumValue(tag, end, 'permission', PERMISSIONS, 'ParticipantPermission');
      } else if (f === 3) {
        seen = this.once(seen, f, 'onboarding');
        this.nested(tag, end, 'onboarding', (stop) => this.empty(stop));
        onboarding = true;
      } else this.unknown(tag);
    }
    if (permission === undefined) this.p.fail('missing_field', 'permission is not set', 'permission');
    return { participantUid, permission, onboarding };
  }

  private keysWithThreshold(end: number): SigningKeysWithThreshold {
    const r = this.r;
    let seen = 0;
    const keys: SigningPublicKey[] = [];
    let threshold = 0;
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        keys.push(this.nested(tag, end, 'keys', (stop) => this.signingPublicKey(stop), keys.length));
      } else if (f === 2) {
        seen = this.once(seen, f, 'threshold');
        threshold = this.uint32(tag, end, 'threshold');
      } else this.unknown(tag);
    }
    return { keys, threshold };
  }

  private signingPublicKey(end: number): SigningPublicKey {
    const r = this.r;
    let seen = 0;
    let format: CryptoKeyFormat = 'unspecified';
    let publicKey: Uint8Array = new Uint8Array(0);
    let scheme: SigningKeyScheme = 'unspecified';
    let usage: SigningKeyUsage[] = [];
    let keySpec: SigningKeySpec = 'unspecified';
    while (r.pos < end) {
      const tag = r.tag(end);
      const f = tag >>> 3;
      // Field 1 (the key id) was removed from the proto: refused as unknown.
      if (f === 2) {
        seen = this.once(seen, f, 'format');
        format = this.enumValue(tag, end, 'format', KEY_FORMATS, 'CryptoKeyFormat');
      } else if (f === 3) {
        seen = this.once(seen, f, 'public_key');
        r.expect(tag, WT_LEN, 'public_key');
        publicKey = r.bytes(end);
      } else if (f === 4) {
        seen = this.once(seen, f, 'scheme');
        scheme = this.enumValue(tag, end, 'scheme', KEY_SCHEMES, 'SigningKeyScheme');
      } else if (f === 5) {
        seen = this.once(seen, f, 'usage');
        usage = this.packedEnum(tag, end, 'usage', KEY_USAGES, 'SigningKeyUsage');
      } else if (f === 6) {
        seen = this.once(seen, f, 'key_spec');
        keySpec = this.enumValue(tag, end, 'key_spec', KEY_SPECS, 'SigningKeySpec');
      } else this.unknown(tag);
    }
    return { format, publicKey, scheme, usage, keySpec };
  }

  // ---- helpers ----------------------------------------------------------------------------------

  /** A length-delimited sub-message, decoded by `body` with the path extended by `name` (and `index`). */
  /** A marker message with no fields. */
  private empty(end: number): void {
    if (this.r.pos < end) this.unknown(this.r.tag(end));
  }

  private uint32(tag: number, end: number, name: string): number {
    this.r.expect(tag, WT_VARINT, name);
    return this.r.varint32(end, name, name);
  }

  private enumValue<T>(
    tag: number,
    end: number,
    name: string,
    table: readonly (T | undefined)[],
    what: string,
    index?: number,
  ): T {
    this.r.expect(tag, WT_VARINT, name, index);
    return this.enumOf(this.r.varint32(end, name, name, index), name, table, what, index);
  }

  private enumOf<T>(
    v: number,
    name: string,
    table: readonly (T | undefined)[],
    what: string,
    index?: number,
  ): T {
    const out = table[v];
    if (out === undefined)
      this.p.fail(
        v === 0 ? 'missing_field' : 'unsupported',
        v === 0 ? `${what} is UNSPECIFIED` : `${what} value ${v} is not one the signer knows`,
        name,
        index,
      );
    return out;
  }

  /** A packed repeated enum (proto3 default; unpacked or empty packed encodings are refused). */
  private packedEnum<T>(
    tag: number,
    end: number,
    name: string,
    table: readonly (T | undefined)[],
    what: string,
  ): T[] {
    const r = this.r;
    if ((tag & 7) === WT_VARINT)
      this.p.fail('non_canonical', 'repeated enum is not packed (Canton writes packed)', name);
    r.expect(tag, WT_LEN, name);
    const stop = r.len(end, name);
    if (stop === r.pos) this.p.fail('non_canonical', 'empty packed field (an empty list is omitted)', name);
    const out: T[] = [];
    while (r.pos < stop) {
      const i = out.length;
      out.push(this.enumOf(r.varint32(stop, name, name, i), name, table, what, i));
    }
    return out;
  }
}

// ---- encoding -----------------------------------------------------------------------------------

/**
 * Canonical bytes of `UntypedVersionedMessage{ data = TopologyTransaction, version }`.
 * Refuses (TransactionError) a model that its own decoder would refuse.
 */
export function encodeTopologyTransaction(
  tx: TopologyTransaction,
  version: number = DEFAULT_TOPOLOGY_VERSION,
): Uint8Array {
  if (!KNOWN_TOPOLOGY_VERSIONS.has(version))
    throw new TransactionError(
      'unsupported_version',
      'version',
      `topology transaction version ${version} is not one the signer knows`,
    );
  const w = new Writer();
  w.message(1, (t) => {
    t.varintField(1, enumNumber(OPERATIONS, tx.operation, 'data.operation'));
    t.varintField(2, uint32(tx.serial, 'data.serial'));
    t.message(3, (m) => mapping(m, tx.mapping));
  });
  w.varintField(2, version);
  return w.finish();
}

function mapping(w: Writer, m: TopologyMapping): void {
  const at = `data.mapping.${m.kind}`;
  switch (m.kind) {
    case 'namespace_delegation':
      w.message(F_NAMESPACE_DELEGATION, (n) => {
        n.stringField(1, m.namespace);
        n.message(2, (k) => signingKey(k, m.targetKey, `${at}.target_key`));
        n.boolField(3, m.isRootDelegation);
        const r = m.restriction;
        if (r?.kind === 'can_sign_all_mappings') n.message(4, () => {});
        else if (r?.kind === 'can_sign_all_but_namespace_delegations') n.message(5, () => {});
        else if (r?.kind === 'can_sign_specific_mappings')
          n.message(6, (s) =>
            packed(
              s,
              1,
              r.mappings.map((c, i) => enumNumber(MAPPING_CODES, c, `${at}.mappings[${i}]`)),
            ),
          );
        else if (r !== undefined) badModel(`${at}.restriction`, 'unknown restriction kind');
      });
      return;
    case 'party_to_key_mapping':
      w.message(F_PARTY_TO_KEY_MAPPING, (n) => {
        n.stringField(1, m.party);
        n.varintField(3, uint32(m.threshold, `${at}.threshold`));
        m.signingKeys.forEach((key, i) => {
          n.message(4, (k) => signingKey(k, key, `${at}.signing_keys[${i}]`));
        });
      });
      return;
    case 'party_to_participant':
      w.message(F_PARTY_TO_PARTICIPANT, (n) => {
        n.stringField(1, m.party);
        n.varintField(2, uint32(m.threshold, `${at}.threshold`));
        m.participants.forEach((p, i) => {
          n.message(3, (h) => {
            h.stringField(1, p.participantUid);
            h.varintField(2, enumNumber(PERMISSIONS, p.permission, `${at}.participants[${i}].permission`));
            if (p.onboarding) h.message(3, () => {});
          });
        });
        const keys = m.partySigningKeys;
        if (keys !== undefined)
          n.message(6, (s) => {
            keys.keys.forEach((key, i) => {
              s.message(1, (k) => signingKey(k, key, `${at}.party_signing_keys.keys[${i}]`));
            });
            s.varintField(2, uint32(keys.threshold, `${at}.party_signing_keys.threshold`));
          });
      });
      return;
    default:
      badModel('data.mapping', `unsupported mapping kind ${(m as { kind: unknown }).kind}`);
  }
}

function signingKey(w: Writer, k: SigningPublicKey, at: string): void {
  w.varintField(2, enumNumber(KEY_FORMATS, k.format, `${at}.format`));
  if (k.publicKey.length > 0) w.bytesField(3, k.publicKey);
  w.varintField(4, enumNumber(KEY_SCHEMES, k.scheme, `${at}.scheme`));
  packed(
    w,
    5,
    k.usage.map((u, i) => enumNumber(KEY_USAGES, u, `${at}.usage[${i}]`)),
  );
  w.varintField(6, enumNumber(KEY_SPECS, k.keySpec, `${at}.key_spec`));
}

function packed(w: Writer, field: number, values: number[]): void {
  if (values.length === 0) return;
  w.message(field, (p) => {
    for (const v of values) p.varint(v);
  });
}

function enumNumber<T>(table: readonly (T | undefined)[], name: T, at: string): number {
  const n = table.indexOf(name);
  if (n < 0) badModel(at, `${String(name)} is not a value the codec accepts`);
  return n;
}

function uint32(v: number, at: string): number {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) badModel(at, `${v} is not a uint32`);
  return v;
}

function badModel(at: string, detail: string): never {
  throw new TransactionError('unsupported', at, detail);
}

/**
 * The onboarding check: are these topology transactions exactly the ones that
 * make our key an external party hosted where we asked, and nothing else?
 * Each transaction is strictly decoded, its hash recomputed and compared with
 * the one the validator or participant claims, and its mapping compared with
 * what the onboarding path must produce (canton-apis.md §2.4, §3.1):
 *
 * - validator: root NamespaceDelegation + PartyToParticipant + PartyToKeyMapping;
 * - Ledger API (Canton ≥ 3.4.8): one PartyToParticipant carrying the party's
 *   signing key; the pre-3.4.8 triple is accepted too (its count and order are
 *   version dependent), each mapping checked as strictly.
 *
 * Every mismatch is a problem sentence naming what was expected and what was
 * found. No key is touched here.
 */
import { decodeTopologyTransaction } from '../canton/topology/codec.js';
import type {
  DecodedTopologyTransaction,
  NamespaceDelegation,
  ParticipantPermission,
  PartyToKeyMapping,
  PartyToParticipant,
  SigningKeyScheme,
  SigningKeySpec,
  SigningKeyUsage,
  SigningPublicKey,
  TopologyMappingKind,
} from '../canton/topology/model.js';
import { fingerprint, parsePartyId, parsePublicKey } from '../hashing/canton-hash.js';
import { TransactionError } from '../hashing/errors.js';
import { base64ToBytes, bytesToHex } from '../hashing/input.js';
import type { KeyScheme } from '../keys/schemes.js';

export type TopologyProblemReason =
  | 'decode_failed' // not a strictly valid versioned topology transaction
  | 'hash_mismatch' // the claimed hash is not the hash of the bytes
  | 'unexpected_mapping' // a mapping kind (or a transaction) the path does not produce
  | 'missing_mapping' // a mapping the path must produce is absent
  | 'operation_mismatch' // not ADD_REPLACE
  | 'serial_mismatch' // not serial 1
  | 'namespace_mismatch' // namespace is not our key's fingerprint
  | 'key_mismatch' // a registered key is not exactly ours (or has the wrong usage)
  | 'threshold_mismatch'
  | 'hosting_mismatch' // hosting participants / permission differ
  | 'party_mismatch'; // the party is not hint::fingerprint(our key)

export interface TopologyProblem {
  reason: TopologyProblemReason;
  message: string;
  /** `transaction 1 (PartyToParticipant)`, when the problem is in one transaction. */
  where?: string;
}

export interface TopologyTxInput {
  /** The serialized versioned transaction: bytes or standard base64. */
  transaction: Uint8Array | string;
  /**
   * The hash the server claims for it: hex (68 chars, `1220…`) on the validator path, standard
   * base64 of the 34 bytes on the Ledger API path (each path's own encoding, canton-apis.md §1).
   */
  claimedHash?: string;
}

export interface TopologyExpectation {
  partyId: string;
  /** SubjectPublicKeyInfo DER of our key. */
  publicKeySpki: Uint8Array;
  scheme: KeyScheme;
  /** The hosting participant's UID (`PAR::` prefix optional). */
  participantUid: string;
  permission: ParticipantPermission;
  /** Confirmation threshold of the PartyToParticipant. */
  threshold: number;
  path: 'validator' | 'ledger-api';
}

export interface TopologyCheck {
  /** The 34-byte topology hashes of the transactions that decoded, in order. */
  hashes: Uint8Array[];
  decoded: DecodedTopologyTransaction[];
  problems: TopologyProblem[];
}

const NAMES: Record<TopologyMappingKind, string> = {
  namespace_delegation: 'NamespaceDelegation',
  party_to_key_mapping: 'PartyToKeyMapping',
  party_to_participant: 'PartyToParticipant',
};

const SPEC: Record<KeyScheme, SigningKeySpec> = {
  ed25519: 'ec_curve25519',
  'ecdsa-p256': 'ec_p256',
  'ecdsa-secp256k1': 'ec_secp256k1',
  'ecdsa-p384': 'ec_p384',
};

/**
 * The deprecated `SigningPublicKey.scheme` each key may carry: unspecified (Canton 3.x writes that),
 * or the key's own scheme (secp256k1 has no value of its own).
 */
const LEGACY_SCHEME: Record<KeyScheme, SigningKeyScheme | undefined> = {
  ed25519: 'ed25519',
  'ecdsa-p256': 'ec_dsa_p256',
  'ecdsa-secp256k1': undefined,
  'ecdsa-p384': 'ec_dsa_p384',
};

/** Usages no external party's key should carry. */
const FOREIGN_USAGES: readonly SigningKeyUsage[] = ['identity_delegation', 'sequencer_authentication'];

/** A participant UID without the `PAR::` member-type prefix. */
export function participantUidOf(id: string): string {
  return id.startsWith('PAR::') ? id.slice(5) : id;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The claimed hash in the path's encoding: hex from the validator, base64 from the Ledger API. */
function claimedBytes(h: string, path: TopologyExpectation['path']): Uint8Array | undefined {
  if (path === 'validator')
    return /^(?:[0-9a-fA-F]{2})+$/.test(h) ? new Uint8Array(Buffer.from(h, 'hex')) : undefined;
  try {
    return base64ToBytes(h, 'claimed hash');
  } catch {
    return undefined;
  }
}

export function checkTopology(txs: readonly TopologyTxInput[], expect: TopologyExpectation): TopologyCheck {
  const problems: TopologyProblem[] = [];
  const hashes: Uint8Array[] = [];
  const decoded: DecodedTopologyTransaction[] = [];
  const add = (reason: TopologyProblemReason, message: string, where?: string) =>
    problems.push({ reason, message, ...(where ? { where } : {}) });

  let ourFp: string;
  try {
    ourFp = fingerprint(expect.publicKeySpki);
  } catch (e) {
    if (!(e instanceof TransactionError)) throw e;
    add('key_mismatch', `our public key is not a valid key: ${e.message}`);
    return { hashes, decoded, problems };
  }
  let partyFp: string | undefined;
  try {
    partyFp = parsePartyId(expect.partyId).fingerprint;
  } catch (e) {
    if (!(e instanceof TransactionError)) throw e;
    add('party_mismatch', `the expected party id ${expect.partyId} is malformed: ${e.message}`);
  }
  if (partyFp !== undefined && partyFp !== ourFp)
    add(
      'party_mismatch',
      `expected party ${expect.partyId} to be in the namespace of our key ${ourFp}, but its namespace is ${partyFp}`,
    );
  if (txs.length === 0) add('missing_mapping', 'expected onboarding transactions but found none');

  const ctx: KeyCtx = { spki: expect.publicKeySpki, scheme: expect.scheme, fp: ourFp };
  const byKind = new Map<TopologyMappingKind, { where: string; tx: DecodedTopologyTransaction }[]>();
  txs.forEach((input, i) => {
    let d: DecodedTopologyTransaction;
    try {
      d = decodeTopologyTransaction(input.transaction);
    } catch (e) {
      if (!(e instanceof TransactionError)) throw e;
      add(
        'decode_failed',
        `transaction ${i} is not a valid topology transaction: ${e.message}`,
        `transaction ${i}`,
      );
      return;
    }
    decoded.push(d);
    hashes.push(d.hash);
    const kind = d.transaction.mapping.kind;
    const where = `transaction ${i} (${NAMES[kind]})`;
    if (input.claimedHash !== undefined) {
      const claimed = claimedBytes(input.claimedHash, expect.path);
      if (!claimed || !sameBytes(claimed, d.hash))
        add(
          'hash_mismatch',
          `${where}: expected the claimed hash to be ${bytesToHex(d.hash)} (recomputed from the bytes), found ${input.claimedHash}`,
          where,
        );
    }
    if (d.transaction.operation !== 'add_replace')
      add(
        'operation_mismatch',
        `${where}: expected operation ADD_REPLACE, found ${d.transaction.operation.toUpperCase()}`,
        where,
      );
    if (d.transaction.serial !== 1)
      add('serial_mismatch', `${where}: expected serial 1, found ${d.transaction.serial}`, where);
    const list = byKind.get(kind) ?? [];
    list.push({ where, tx: d });
    byKind.set(kind, list);
  });

  const one = (kind: TopologyMappingKind, required: boolean) => {
    const found = byKind.get(kind) ?? [];
    if (found.length === 0 && required)
      add('missing_mapping', `expected one ${NAMES[kind]} transaction, found none`);
    if (found.length > 1)
      add(
        'unexpected_mapping',
        `expected one ${NAMES[kind]} transaction, found ${found.length}`,
        found[1]!.where,
      );
    return found[0];
  };
  const p2p = one('party_to_participant', true);
  const p2pMapping = p2p?.tx.transaction.mapping as PartyToParticipant | undefined;
  // Which form: the validator's (and pre-3.4.8 participants') triple, or the single PartyToParticipant.
  const legacy =
    expect.path === 'validator' || (p2pMapping !== undefined && p2pMapping.partySigningKeys === undefined);
  const nd = one('namespace_delegation', legacy);
  const p2k = one('party_to_key_mapping', legacy);
  if (!legacy) {
    for (const extra of [nd, p2k])
      if (extra)
        add(
          'unexpected_mapping',
          `${extra.where}: expected only a PartyToParticipant carrying the party's signing key (Ledger API, Canton ≥ 3.4.8), found an extra ${NAMES[extra.tx.transaction.mapping.kind]}`,
          extra.where,
        );
  }

  if (nd) checkNamespaceDelegation(nd.tx.transaction.mapping as NamespaceDelegation, nd.where, ctx, add);
  if (p2k) checkPartyToKey(p2k.tx.transaction.mapping as PartyToKeyMapping, p2k.where, expect, ctx, add);
  if (p2p && p2pMapping) checkPartyToParticipant(p2pMapping, p2p.where, expect, ctx, legacy, add);
  return { hashes, decoded, problems };
}

type Add = (reason: TopologyProblemReason, message: string, where?: string) => void;
interface KeyCtx {
  spki: Uint8Array;
  scheme: KeyScheme;
  fp: string;
}

/** Whether a topology key is exactly our key (bytes, key spec), with the usages it needs and no foreign ones. */
function checkKey(
  k: SigningPublicKey,
  what: string,
  ctx: KeyCtx,
  needs: readonly SigningKeyUsage[],
  add: Add,
  where: string,
): void {
  let fp: string | undefined;
  let spki: Uint8Array | undefined;
  try {
    fp = fingerprint(k.publicKey);
    spki = parsePublicKey(k.publicKey).spki;
  } catch {
    // reported below as a mismatch
  }
  const rawOk = k.format === 'raw' && k.publicKey.length === 32 && ctx.scheme === 'ed25519';
  const derOk = k.format === 'der_x509_subject_public_key_info' && k.publicKey.length !== 32;
  if (fp !== ctx.fp || !spki || !sameBytes(spki, ctx.spki) || !(rawOk || derOk)) {
    add(
      'key_mismatch',
      `${where}: expected ${what} to be our key ${ctx.fp}, found ${fp ?? 'an invalid key'} (format ${k.format})`,
      where,
    );
    return;
  }
  if (k.keySpec !== SPEC[ctx.scheme])
    add(
      'key_mismatch',
      `${where}: expected ${what} to have key spec ${SPEC[ctx.scheme]}, found ${k.keySpec}`,
      where,
    );
  if (k.scheme !== 'unspecified' && k.scheme !== LEGACY_SCHEME[ctx.scheme])
    add(
      'key_mismatch',
      `${where}: expected ${what} to have no (deprecated) key scheme or ${LEGACY_SCHEME[ctx.scheme] ?? 'none'}, found ${k.scheme}`,
      where,
    );
  const missing = needs.filter((u) => !k.usage.includes(u));
  if (missing.length > 0)
    add(
      'key_mismatch',
      `${where}: expected ${what} to carry usage ${needs.join(' + ')}, found ${k.usage.join(' + ') || 'none'}`,
      where,
    );
  const foreign = k.usage.filter((u) => FOREIGN_USAGES.includes(u));
  if (foreign.length > 0)
    add(
      'key_mismatch',
      `${where}: expected ${what} to carry no node usages, found ${foreign.join(' + ')}`,
      where,
    );
}

function checkNamespaceDelegation(m: NamespaceDelegation, where: string, ctx: KeyCtx, add: Add): void {
  if (m.namespace !== ctx.fp)
    add(
      'namespace_mismatch',
      `${where}: expected namespace ${ctx.fp} (our key), found ${m.namespace}`,
      where,
    );
  checkKey(m.targetKey, 'the delegation target', ctx, ['namespace'], add, where);
  const root =
    m.restriction?.kind === 'can_sign_all_mappings' || (m.restriction === undefined && m.isRootDelegation);
  if (!root)
    add(
      'unexpected_mapping',
      `${where}: expected a root delegation (can sign all mappings), found ${m.restriction?.kind ?? 'a non-root delegation'}`,
      where,
    );
}

function checkPartyToKey(
  m: PartyToKeyMapping,
  where: string,
  expect: TopologyExpectation,
  ctx: KeyCtx,
  add: Add,
): void {
  if (m.party !== expect.partyId)
    add('party_mismatch', `${where}: expected party ${expect.partyId}, found ${m.party}`, where);
  if (m.threshold !== 1)
    add('threshold_mismatch', `${where}: expected signing threshold 1, found ${m.threshold}`, where);
  if (m.signingKeys.length !== 1)
    add(
      'key_mismatch',
      `${where}: expected exactly one signing key (ours), found ${m.signingKeys.length}`,
      where,
    );
  m.signingKeys.forEach((k, i) => {
    checkKey(
      k,
      m.signingKeys.length > 1 ? `signing key ${i}` : 'the signing key',
      ctx,
      ['protocol'],
      add,
      where,
    );
  });
}

function checkPartyToParticipant(
  m: PartyToParticipant,
  where: string,
  expect: TopologyExpectation,
  ctx: KeyCtx,
  legacy: boolean,
  add: Add,
): void {
  if (m.party !== expect.partyId)
    add('party_mismatch', `${where}: expected party ${expect.partyId}, found ${m.party}`, where);
  if (m.threshold !== expect.threshold)
    add(
      'threshold_mismatch',
      `${where}: expected confirmation threshold ${expect.threshold}, found ${m.threshold}`,
      where,
    );
  const want = participantUidOf(expect.participantUid);
  const found = m.participants.map((p) => `${p.participantUid} (${p.permission})`).join(', ') || 'none';
  const only = m.participants.length === 1 ? m.participants[0]! : undefined;
  if (!only || participantUidOf(only.participantUid) !== want || only.permission !== expect.permission)
    add(
      'hosting_mismatch',
      `${where}: expected exactly one hosting participant ${want} (${expect.permission}), found ${found}`,
      where,
    );
  // A new party is hosted outright: the `onboarding` marker is for a party being replicated to a participant.
  const onboarding = m.participants.filter((p) => p.onboarding).map((p) => p.participantUid);
  if (onboarding.length > 0)
    add(
      'hosting_mismatch',
      `${where}: expected a new party's hosting without the onboarding marker, found it on ${onboarding.join(', ')}`,
      where,
    );
  const keys = m.partySigningKeys;
  if (legacy) {
    if (keys !== undefined)
      add(
        'key_mismatch',
        `${where}: expected no party signing keys here (they are in the PartyToKeyMapping), found ${keys.keys.length}`,
        where,
      );
    return;
  }
  if (keys === undefined) return; // cannot happen: this form is chosen by their presence
  if (keys.threshold !== 1)
    add('threshold_mismatch', `${where}: expected signing threshold 1, found ${keys.threshold}`, where);
  if (keys.keys.length !== 1)
    add(
      'key_mismatch',
      `${where}: expected exactly one party signing key (ours), found ${keys.keys.length}`,
      where,
    );
  keys.keys.forEach((k, i) => {
    checkKey(
      k,
      keys.keys.length > 1 ? `party signing key ${i}` : 'the party signing key',
      ctx,
      ['namespace', 'protocol'],
      add,
      where,
    );
  });
}

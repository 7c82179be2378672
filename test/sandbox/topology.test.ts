/**
 * Sandbox external-party topology (src/sandbox/topology.ts): Ledger API
 * generate-topology / allocate and validator topology generate / submit, signed
 * with real Ed25519, ECDSA P-256 and secp256k1 keys; every refusal is checked
 * by its exact Canton error id (or Splice status) and cause.
 */
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AllocateExternalPartyRequestSchema,
  GenerateExternalPartyTopologyRequestSchema,
  GenerateExternalPartyTopologyResponseSchema,
} from '../../src/canton/ledger-api/schemas.js';
import { decodeTopologyTransaction, encodeTopologyTransaction } from '../../src/canton/topology/codec.js';
import type { PartyToParticipant, SigningPublicKey } from '../../src/canton/topology/model.js';
import {
  SubmitExternalPartyTopologyResponseSchema,
  GenerateExternalPartyTopologyResponseSchema as ValidatorGenerateResponseSchema,
} from '../../src/canton/validator/schemas.js';
import { fingerprint, multiHash, topologyTransactionHash } from '../../src/hashing/canton-hash.js';
import { bytesToHex } from '../../src/hashing/input.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import { SandboxError } from '../../src/sandbox/errors.js';
import { SandboxNetwork, VALIDATOR_USER } from '../../src/sandbox/network.js';
import {
  allocateExternalParty,
  generateLedgerApiTopology,
  generateValidatorTopology,
  submitValidatorTopology,
} from '../../src/sandbox/topology.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';

const validatorSpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/validator-internal.yaml'));
const ledgerSpec = loadSpec(join(SPECS_DIR, 'canton-ledger-api/openapi-3.4.12.yaml'));

// ---- keys ----------------------------------------------------------------------------------------

interface TestKey {
  scheme: KeyScheme;
  privateKey: KeyObject;
  spki: Buffer;
  /** Raw 32 bytes (Ed25519) or the SPKI (ECDSA): what the fingerprint covers. */
  fingerprint: string;
  keySpec: 'SIGNING_KEY_SPEC_EC_CURVE25519' | 'SIGNING_KEY_SPEC_EC_P256' | 'SIGNING_KEY_SPEC_EC_SECP256K1';
  algorithm: 'SIGNING_ALGORITHM_SPEC_ED25519' | 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256';
  format: 'SIGNATURE_FORMAT_CONCAT' | 'SIGNATURE_FORMAT_DER';
}

function newKey(scheme: 'ed25519' | 'ecdsa-p256' | 'ecdsa-secp256k1'): TestKey {
  const pair =
    scheme === 'ed25519'
      ? generateKeyPairSync('ed25519')
      : generateKeyPairSync('ec', { namedCurve: scheme === 'ecdsa-p256' ? 'prime256v1' : 'secp256k1' });
  const spki = pair.publicKey.export({ type: 'spki', format: 'der' });
  const ed = scheme === 'ed25519';
  return {
    scheme,
    privateKey: pair.privateKey,
    spki,
    fingerprint: fingerprint(spki),
    keySpec: ed
      ? 'SIGNING_KEY_SPEC_EC_CURVE25519'
      : scheme === 'ecdsa-p256'
        ? 'SIGNING_KEY_SPEC_EC_P256'
        : 'SIGNING_KEY_SPEC_EC_SECP256K1',
    algorithm: ed ? 'SIGNING_ALGORITHM_SPEC_ED25519' : 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
    format: ed ? 'SIGNATURE_FORMAT_CONCAT' : 'SIGNATURE_FORMAT_DER',
  };
}

const raw = (k: TestKey) => k.spki.subarray(k.spki.length - 32);

function signBytes(k: TestKey, message: Uint8Array): Buffer {
  return k.scheme === 'ed25519'
    ? sign(null, message, k.privateKey)
    : sign('sha256', message, { key: k.privateKey, dsaEncoding: 'der' });
}

/** A Ledger API `Signature` by `k` over `message`, naming `signedBy` (default: k's fingerprint). */
function lapiSig(k: TestKey, message: Uint8Array, signedBy = k.fingerprint) {
  return {
    format: k.format,
    signature: signBytes(k, message).toString('base64'),
    signedBy,
    signingAlgorithmSpec: k.algorithm,
  };
}

/** The topology form of a key (SPKI, Canton 3.x). */
function topoKey(k: TestKey, usage: SigningPublicKey['usage']): SigningPublicKey {
  const spec = {
    ed25519: 'ec_curve25519',
    'ecdsa-p256': 'ec_p256',
    'ecdsa-secp256k1': 'ec_secp256k1',
  } as const;
  return {
    format: 'der_x509_subject_public_key_info',
    publicKey: new Uint8Array(k.spki),
    scheme: 'unspecified',
    usage,
    keySpec: spec[k.scheme as keyof typeof spec],
  };
}

// ---- helpers -------------------------------------------------------------------------------------

function setup() {
  const net = new SandboxNetwork({ seed: 'test' });
  return { net, ctx: { participantUid: net.participantId, synchronizerId: net.synchronizerId } };
}

type Ctx = ReturnType<typeof setup>['ctx'];

function generate(ctx: Ctx, k: TestKey, extra: Record<string, unknown> = {}, hint = 'alice') {
  const ed = k.scheme === 'ed25519';
  const body = GenerateExternalPartyTopologyRequestSchema.parse({
    synchronizer: ctx.synchronizerId,
    partyHint: hint,
    publicKey: {
      format: ed ? 'CRYPTO_KEY_FORMAT_RAW' : 'CRYPTO_KEY_FORMAT_DER_X509_SUBJECT_PUBLIC_KEY_INFO',
      keyData: (ed ? raw(k) : k.spki).toString('base64'),
      keySpec: k.keySpec,
    },
    ...extra,
  });
  return generateLedgerApiTopology(body, ctx);
}

function allocate(ctx: Ctx, body: unknown) {
  return allocateExternalParty(AllocateExternalPartyRequestSchema.parse(body), ctx);
}

/** Runs `f` and returns the SandboxError it throws. */
function refusal(f: () => unknown): SandboxError {
  try {
    f();
  } catch (e) {
    if (e instanceof SandboxError) return e;
    throw e;
  }
  throw new Error('expected a refusal, got success');
}

function expectCanton(f: () => unknown, code: string, category: number, cause: string | RegExp) {
  const e = refusal(f);
  expect(e.code).toBe(code);
  expect((e.body as { errorCategory: number }).errorCategory).toBe(category);
  expect((e.body as { cause: string }).cause).toMatch(cause);
  return e;
}

function expectSplice(f: () => unknown, status: number, message: string | RegExp) {
  const e = refusal(f);
  expect(e.status).toBe(status);
  expect(e.body).toEqual({ error: expect.stringMatching(message) });
}

/** Encodes a PartyToParticipant (serial 1) as b64. */
function p2pTx(m: Omit<PartyToParticipant, 'kind'>): string {
  const bytes = encodeTopologyTransaction({
    operation: 'add_replace',
    serial: 1,
    mapping: { kind: 'party_to_participant', ...m },
  });
  return Buffer.from(bytes).toString('base64');
}

const combinedHash = (txs: string[]) => multiHash(txs.map((t) => topologyTransactionHash(t)));

// ---- Ledger API ----------------------------------------------------------------------------------

describe('Ledger API generate-topology', () => {
  it('returns one PartyToParticipant that decodes, with the key, hosting and a matching multiHash', () => {
    const { ctx } = setup();
    const k = newKey('ed25519');
    const res = generate(ctx, k);
    expect(GenerateExternalPartyTopologyResponseSchema.parse(res)).toEqual(res);
    expect(validateAgainst(ledgerSpec, 'GenerateExternalPartyTopologyResponse', res)).toEqual([]);
    expect(res.publicKeyFingerprint).toBe(fingerprint(raw(k)));
    expect(res.partyId).toBe(`alice::${res.publicKeyFingerprint}`);
    expect(res.topologyTransactions).toHaveLength(1);
    const decoded = decodeTopologyTransaction(res.topologyTransactions[0]!);
    expect(decoded.transaction.operation).toBe('add_replace');
    expect(decoded.transaction.serial).toBe(1);
    const m = decoded.transaction.mapping as PartyToParticipant;
    expect(m.kind).toBe('party_to_participant');
    expect(m.party).toBe(res.partyId);
    expect(m.threshold).toBe(1);
    expect(m.participants).toEqual([
      { participantUid: ctx.participantUid, permission: 'confirmation', onboarding: false },
    ]);
    expect(m.partySigningKeys?.threshold).toBe(1);
    expect(m.partySigningKeys?.keys).toHaveLength(1);
    const key = m.partySigningKeys!.keys[0]!;
    expect(Buffer.from(key.publicKey).equals(k.spki)).toBe(true);
    expect(key.keySpec).toBe('ec_curve25519');
    expect(key.usage).toEqual(['namespace', 'protocol', 'proof_of_ownership']);
    const expected = multiHash(res.topologyTransactions.map((t) => topologyTransactionHash(t)));
    expect(Buffer.from(res.multiHash, 'base64').equals(Buffer.from(expected))).toBe(true);
  });

  it('hosts on other confirmers and observers with the requested threshold', () => {
    const { ctx } = setup();
    const res = generate(ctx, newKey('ecdsa-p256'), {
      otherConfirmingParticipantUids: ['p2::1220aa'],
      observingParticipantUids: ['p3::1220bb'],
      confirmationThreshold: 2,
    });
    const m = decodeTopologyTransaction(res.topologyTransactions[0]!).transaction
      .mapping as PartyToParticipant;
    expect(m.threshold).toBe(2);
    expect(m.participants.map((p) => [p.participantUid, p.permission])).toEqual([
      [ctx.participantUid, 'confirmation'],
      ['p2::1220aa', 'confirmation'],
      ['p3::1220bb', 'observation'],
    ]);
    // 0 means all confirmers
    const all = generate(ctx, newKey('ed25519'), { otherConfirmingParticipantUids: ['p2::1220aa'] });
    expect(
      (decodeTopologyTransaction(all.topologyTransactions[0]!).transaction.mapping as PartyToParticipant)
        .threshold,
    ).toBe(2);
  });

  it('refuses a bad party hint, a key that does not match its spec or format, and a bad threshold', () => {
    const { ctx } = setup();
    const ed = newKey('ed25519');
    for (const hint of ['a::b', 'bad!hint', 'ends:', 'x'.repeat(186)])
      expectCanton(() => generate(ctx, ed, {}, hint), 'INVALID_FIELD', 8, /Invalid field party_hint/);
    const p256 = newKey('ecdsa-p256');
    const mismatch = GenerateExternalPartyTopologyRequestSchema.parse({
      synchronizer: ctx.synchronizerId,
      partyHint: 'alice',
      publicKey: {
        format: 'CRYPTO_KEY_FORMAT_DER_X509_SUBJECT_PUBLIC_KEY_INFO',
        keyData: p256.spki.toString('base64'),
        keySpec: 'SIGNING_KEY_SPEC_EC_CURVE25519',
      },
    });
    expectCanton(
      () => generateLedgerApiTopology(mismatch, ctx),
      'INVALID_FIELD',
      8,
      /key spec .* does not match/,
    );
    const rawP256 = {
      ...mismatch,
      publicKey: {
        ...mismatch.publicKey,
        format: 'CRYPTO_KEY_FORMAT_RAW' as const,
        keySpec: 'SIGNING_KEY_SPEC_EC_P256' as const,
      },
    };
    expectCanton(() => generateLedgerApiTopology(rawP256, ctx), 'INVALID_FIELD', 8, /only supported for/);
    const garbage = {
      ...mismatch,
      publicKey: { ...mismatch.publicKey, keyData: Buffer.alloc(40, 7).toString('base64') },
    };
    expectCanton(() => generateLedgerApiTopology(garbage, ctx), 'INVALID_FIELD', 8, /public_key/);
    expectCanton(
      () => generate(ctx, ed, { confirmationThreshold: 2 }),
      'INVALID_FIELD',
      8,
      /confirmation_threshold/,
    );
    expectCanton(
      () => generate(ctx, ed, { localParticipantObservationOnly: true }),
      'INVALID_ARGUMENT',
      8,
      /at least one participant with Confirmation/,
    );
    expectCanton(
      () => generate(ctx, ed, { otherConfirmingParticipantUids: [ctx.participantUid] }),
      'INVALID_ARGUMENT',
      8,
      /only once/,
    );
  });

  it('refuses a synchronizer this participant is not connected to', () => {
    const { ctx } = setup();
    expectCanton(
      () => generate(ctx, newKey('ed25519'), { synchronizer: 'other::1220ab' }),
      'INVALID_ARGUMENT',
      8,
      /Unknown synchronizer other::1220ab/,
    );
  });
});

describe('Ledger API allocate', () => {
  for (const scheme of ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'] as const)
    it(`allocates a ${scheme} party signed over the multiHash`, () => {
      const { ctx } = setup();
      const k = newKey(scheme);
      const gen = generate(ctx, k);
      const { partyId, party } = allocate(ctx, {
        synchronizer: ctx.synchronizerId,
        onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
        multiHashSignatures: [lapiSig(k, Buffer.from(gen.multiHash, 'base64'))],
      });
      expect(partyId).toBe(gen.partyId);
      expect(party).toEqual({
        partyId: gen.partyId,
        namespace: gen.publicKeyFingerprint,
        keys: [{ fingerprint: k.fingerprint, scheme, spki: new Uint8Array(k.spki) }],
        threshold: 1,
        hosting: [{ participantUid: ctx.participantUid, permission: 'confirmation' }],
        via: 'ledger-api',
      });
    });

  it('allocates with per-transaction signatures', () => {
    const { ctx } = setup();
    const k = newKey('ed25519');
    const gen = generate(ctx, k);
    const { party } = allocate(ctx, {
      synchronizer: ctx.synchronizerId,
      onboardingTransactions: gen.topologyTransactions.map((transaction) => ({
        transaction,
        signatures: [lapiSig(k, topologyTransactionHash(transaction))],
      })),
    });
    expect(party.keys.map((x) => x.fingerprint)).toEqual([gen.publicKeyFingerprint]);
  });

  function signedGen(scheme: 'ed25519' | 'ecdsa-p256' = 'ed25519') {
    const { ctx } = setup();
    const k = newKey(scheme);
    const gen = generate(ctx, k);
    const txs = gen.topologyTransactions.map((transaction) => ({ transaction }));
    return { ctx, k, gen, txs, mh: Buffer.from(gen.multiHash, 'base64') };
  }

  it('refuses a signature made with the wrong key', () => {
    const { ctx, gen, txs, mh } = signedGen();
    const other = newKey('ed25519');
    expectCanton(
      () =>
        allocate(ctx, {
          synchronizer: ctx.synchronizerId,
          onboardingTransactions: txs,
          multiHashSignatures: [lapiSig(other, mh, gen.publicKeyFingerprint)],
        }),
      'TOPOLOGY_INVALID_TOPOLOGY_TX_SIGNATURE',
      5,
      /signature by 1220\w+ does not verify/,
    );
  });

  it('refuses a signature by a key that is not registered for the party', () => {
    const { ctx, k, txs, mh } = signedGen();
    const other = newKey('ed25519');
    expectCanton(
      () =>
        allocate(ctx, {
          synchronizer: ctx.synchronizerId,
          onboardingTransactions: txs,
          multiHashSignatures: [lapiSig(k, mh), lapiSig(other, mh)],
        }),
      'TOPOLOGY_INVALID_TOPOLOGY_TX_SIGNATURE',
      5,
      new RegExp(`signed by ${other.fingerprint}, which is neither`),
    );
  });

  it('refuses a signature whose algorithm does not fit the key', () => {
    const { ctx, k, txs, mh } = signedGen('ecdsa-p256');
    expectCanton(
      () =>
        allocate(ctx, {
          synchronizer: ctx.synchronizerId,
          onboardingTransactions: txs,
          multiHashSignatures: [
            { ...lapiSig(k, mh), signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519' },
          ],
        }),
      'TOPOLOGY_INVALID_TOPOLOGY_TX_SIGNATURE',
      5,
      /KeyAlgoSpecsMismatch/,
    );
  });

  it('refuses tampered transaction bytes', () => {
    const { ctx, k, gen, mh } = signedGen();
    // A re-encoded transaction with another hosting threshold: decodes, but the signed multiHash no longer matches.
    const original = decodeTopologyTransaction(gen.topologyTransactions[0]!).transaction
      .mapping as PartyToParticipant;
    const changed = p2pTx({
      ...original,
      participants: [
        ...original.participants,
        { participantUid: 'p2::1220aa', permission: 'observation', onboarding: false },
      ],
    });
    expectCanton(
      () =>
        allocate(ctx, {
          synchronizer: ctx.synchronizerId,
          onboardingTransactions: [{ transaction: changed }],
          multiHashSignatures: [lapiSig(k, mh)],
        }),
      'TOPOLOGY_INVALID_TOPOLOGY_TX_SIGNATURE',
      5,
      /does not verify/,
    );
    // Bytes that do not decode at all.
    const bytes = Buffer.from(gen.topologyTransactions[0]!, 'base64');
    bytes[bytes.length - 1] = 0x63; // version 99
    expectCanton(
      () =>
        allocate(ctx, {
          synchronizer: ctx.synchronizerId,
          onboardingTransactions: [{ transaction: bytes.toString('base64') }],
          multiHashSignatures: [lapiSig(k, mh)],
        }),
      'INVALID_FIELD',
      8,
      /transaction 0 is not a valid topology transaction/,
    );
  });

  it('refuses onboarding transactions without signatures', () => {
    const { ctx, gen, txs } = signedGen();
    expectCanton(
      () => allocate(ctx, { synchronizer: ctx.synchronizerId, onboardingTransactions: txs }),
      'TOPOLOGY_UNAUTHORIZED_TRANSACTION',
      5,
      new RegExp(`missing signatures of ${gen.publicKeyFingerprint}`),
    );
  });

  it('refuses a wrong synchronizer', () => {
    const { ctx, k, txs, mh } = signedGen();
    expectCanton(
      () =>
        allocate(ctx, {
          synchronizer: 'global-domain::1220ffff',
          onboardingTransactions: txs,
          multiHashSignatures: [lapiSig(k, mh)],
        }),
      'INVALID_ARGUMENT',
      8,
      /Unknown synchronizer global-domain::1220ffff/,
    );
  });

  describe('with hand-built transactions', () => {
    const ns = newKey('ed25519');
    const second = newKey('ecdsa-secp256k1');
    const party = `carol::${ns.fingerprint}`;
    const keys2 = [topoKey(ns, ['namespace', 'protocol']), topoKey(second, ['protocol'])];

    function run(tx: string, signers: TestKey[]) {
      const { ctx } = setup();
      const mh = combinedHash([tx]);
      return {
        ctx,
        go: () =>
          allocate(ctx, {
            synchronizer: ctx.synchronizerId,
            onboardingTransactions: [{ transaction: tx }],
            multiHashSignatures: signers.map((s) => lapiSig(s, mh)),
          }),
      };
    }

    const hostedHere = (uid: string) => [
      { participantUid: uid, permission: 'confirmation' as const, onboarding: false },
    ];

    it('registers two keys with threshold 2 when both sign', () => {
      const { ctx } = setup();
      const tx = p2pTx({
        party,
        threshold: 1,
        participants: hostedHere(ctx.participantUid),
        partySigningKeys: { keys: keys2, threshold: 2 },
      });
      const { go } = run(tx, [ns, second]);
      const { party: p } = go();
      expect(p.threshold).toBe(2);
      expect(p.keys.map((x) => [x.fingerprint, x.scheme])).toEqual([
        [ns.fingerprint, 'ed25519'],
        [second.fingerprint, 'ecdsa-secp256k1'],
      ]);
    });

    it('refuses when the signing keys do not reach the threshold (one of two signs)', () => {
      const { ctx } = setup();
      const tx = p2pTx({
        party,
        threshold: 1,
        participants: hostedHere(ctx.participantUid),
        partySigningKeys: { keys: keys2, threshold: 2 },
      });
      expectCanton(
        run(tx, [ns]).go,
        'TOPOLOGY_UNAUTHORIZED_TRANSACTION',
        5,
        new RegExp(`missing signatures of ${second.fingerprint}`),
      );
    });

    it('refuses a threshold above the number of keys', () => {
      const { ctx } = setup();
      const tx = p2pTx({
        party,
        threshold: 1,
        participants: hostedHere(ctx.participantUid),
        partySigningKeys: { keys: keys2, threshold: 3 },
      });
      expectCanton(
        run(tx, [ns, second]).go,
        'INVALID_ARGUMENT',
        8,
        /signing threshold 3 must be between 1 and the number of signing keys \(2\)/,
      );
    });

    it('refuses a party hosted on another participant only', () => {
      const tx = p2pTx({
        party,
        threshold: 1,
        participants: hostedHere('elsewhere::1220cd'),
        partySigningKeys: { keys: keys2.slice(0, 1), threshold: 1 },
      });
      expectCanton(
        run(tx, [ns]).go,
        'INVALID_ARGUMENT',
        8,
        /hosted on a single participant \(elsewhere::1220cd\) that is not this participant/,
      );
      const multi = p2pTx({
        party,
        threshold: 1,
        participants: [
          ...hostedHere('elsewhere::1220cd'),
          { participantUid: 'third::1220ef', permission: 'observation', onboarding: false },
        ],
        partySigningKeys: { keys: keys2.slice(0, 1), threshold: 1 },
      });
      expectCanton(run(multi, [ns]).go, 'INVALID_ARGUMENT', 8, /This node is not hosting the party/);
    });

    it('refuses Submission permission and missing Protocol / Namespace usages', () => {
      const { ctx } = setup();
      const sub = p2pTx({
        party,
        threshold: 1,
        participants: [{ participantUid: ctx.participantUid, permission: 'submission', onboarding: false }],
        partySigningKeys: { keys: keys2.slice(0, 1), threshold: 1 },
      });
      expectCanton(
        run(sub, [ns]).go,
        'INVALID_ARGUMENT',
        8,
        /must not contain any node with Submission permission/,
      );
      const noProtocol = p2pTx({
        party,
        threshold: 1,
        participants: hostedHere(ctx.participantUid),
        partySigningKeys: { keys: [topoKey(ns, ['namespace'])], threshold: 1 },
      });
      expectCanton(run(noProtocol, [ns]).go, 'INVALID_ARGUMENT', 8, /Missing Protocol usage on signing keys/);
      const noNamespace = p2pTx({
        party,
        threshold: 1,
        participants: hostedHere(ctx.participantUid),
        partySigningKeys: { keys: [topoKey(ns, ['protocol'])], threshold: 1 },
      });
      expectCanton(
        run(noNamespace, [ns]).go,
        'INVALID_ARGUMENT',
        8,
        /Missing Namespace and Protocol usage on the party namespace key/,
      );
    });

    it('refuses a party whose namespace no given key controls', () => {
      const { ctx } = setup();
      const tx = p2pTx({
        party,
        threshold: 1,
        participants: hostedHere(ctx.participantUid),
        partySigningKeys: { keys: [topoKey(second, ['protocol'])], threshold: 1 },
      });
      expectCanton(
        run(tx, [second]).go,
        'TOPOLOGY_UNAUTHORIZED_TRANSACTION',
        5,
        /No key is known for the party namespace/,
      );
    });
  });
});

// ---- validator -----------------------------------------------------------------------------------

describe('validator topology generate / submit', () => {
  function gen() {
    const { net } = setup();
    const k = newKey('ed25519');
    const res = generateValidatorTopology(net, { party_hint: 'bob', public_key: raw(k).toString('hex') });
    return { net, k, res };
  }
  const signAll = (k: TestKey, res: ReturnType<typeof gen>['res']) =>
    res.topology_txs.map((t) => ({
      topology_tx: t.topology_tx,
      signed_hash: signBytes(k, Buffer.from(t.hash, 'hex')).toString('hex'),
    }));

  it('generates NamespaceDelegation, PartyToParticipant and PartyToKeyMapping with their hashes', () => {
    const { net, k, res } = gen();
    expect(ValidatorGenerateResponseSchema.parse(res)).toEqual(res);
    expect(validateAgainst(validatorSpec, 'GenerateExternalPartyTopologyResponse', res)).toEqual([]);
    const fp = fingerprint(raw(k));
    expect(res.party_id).toBe(`bob::${fp}`);
    const decoded = res.topology_txs.map((t) => decodeTopologyTransaction(t.topology_tx));
    expect(decoded.map((d) => d.transaction.mapping.kind)).toEqual([
      'namespace_delegation',
      'party_to_participant',
      'party_to_key_mapping',
    ]);
    res.topology_txs.forEach((t, i) => {
      expect(t.hash).toBe(bytesToHex(topologyTransactionHash(t.topology_tx)));
      expect(t.hash).toBe(bytesToHex(decoded[i]!.hash));
      expect(decoded[i]!.transaction.serial).toBe(1);
    });
    const nd = decoded[0]!.transaction.mapping;
    expect(nd.kind === 'namespace_delegation' && nd.namespace).toBe(fp);
    const p2p = decoded[1]!.transaction.mapping as PartyToParticipant;
    expect(p2p.participants).toEqual([
      { participantUid: net.participantId, permission: 'confirmation', onboarding: false },
    ]);
    const p2k = decoded[2]!.transaction.mapping;
    expect(p2k.kind === 'party_to_key_mapping' && [p2k.party, p2k.threshold]).toEqual([res.party_id, 1]);
  });

  it('submits signed transactions, registers the party and gives the operator actAs', () => {
    const { net, k, res } = gen();
    const out = submitValidatorTopology(net, {
      public_key: raw(k).toString('hex'),
      signed_topology_txs: signAll(k, res),
    });
    expect(SubmitExternalPartyTopologyResponseSchema.parse(out)).toEqual({ party_id: res.party_id });
    expect(validateAgainst(validatorSpec, 'SubmitExternalPartyTopologyResponse', out)).toEqual([]);
    expect(net.parties.get(res.party_id)).toEqual({
      partyId: res.party_id,
      namespace: fingerprint(raw(k)),
      keys: [{ fingerprint: fingerprint(raw(k)), scheme: 'ed25519', spki: new Uint8Array(k.spki) }],
      threshold: 1,
      hosting: [{ participantUid: net.participantId, permission: 'confirmation' }],
      via: 'validator',
    });
    expect(net.users.get(VALIDATOR_USER)!.actAs.has(res.party_id)).toBe(true);
    expectSplice(
      () =>
        submitValidatorTopology(net, {
          public_key: raw(k).toString('hex'),
          signed_topology_txs: signAll(k, res),
        }),
      409,
      /already exists/,
    );
  });

  it('refuses a bad signature, naming the transaction', () => {
    const { net, k, res } = gen();
    const signed = signAll(k, res);
    signed[1] = {
      ...signed[1]!,
      signed_hash: signBytes(newKey('ed25519'), Buffer.from(res.topology_txs[1]!.hash, 'hex')).toString(
        'hex',
      ),
    };
    expectSplice(
      () => submitValidatorTopology(net, { public_key: raw(k).toString('hex'), signed_topology_txs: signed }),
      400,
      /Onboarding transaction 1 \(PartyToParticipant\): signature by 1220\w+ does not verify/,
    );
    expect(net.parties.has(res.party_id)).toBe(false);
  });

  it('refuses tampered or missing transactions and a key other than the one that signed', () => {
    const { net, k, res } = gen();
    const signed = signAll(k, res);
    const bytes = Buffer.from(signed[0]!.topology_tx, 'base64');
    bytes[5] = bytes[5]! ^ 1;
    expectSplice(
      () =>
        submitValidatorTopology(net, {
          public_key: raw(k).toString('hex'),
          signed_topology_txs: [{ ...signed[0]!, topology_tx: bytes.toString('base64') }, ...signed.slice(1)],
        }),
      400,
      /transaction 0/,
    );
    expectSplice(
      () =>
        submitValidatorTopology(net, {
          public_key: raw(k).toString('hex'),
          signed_topology_txs: [signed[0]!, signed[2]!],
        }),
      400,
      /One transaction of type PartyToParticipant must be provided/,
    );
    const other = newKey('ed25519');
    expectSplice(
      () =>
        submitValidatorTopology(net, { public_key: raw(other).toString('hex'), signed_topology_txs: signed }),
      400,
      /not accepted by the participant/,
    );
  });

  it('supports only Ed25519 keys and valid hints', () => {
    const { net } = setup();
    const p256 = newKey('ecdsa-p256');
    expectSplice(
      () => generateValidatorTopology(net, { party_hint: 'bob', public_key: p256.spki.toString('hex') }),
      400,
      /only Ed25519/,
    );
    expectSplice(
      () => generateValidatorTopology(net, { party_hint: 'bob', public_key: 'zz' }),
      400,
      /not valid hex/,
    );
    const ed = newKey('ed25519');
    expectSplice(
      () => generateValidatorTopology(net, { party_hint: 'b::ob', public_key: raw(ed).toString('hex') }),
      400,
      /Invalid party_hint/,
    );
  });
});

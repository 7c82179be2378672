/**
 * External-party onboarding with file keys against the sandbox: the validator
 * path (Ed25519) and the Ledger API path (Ed25519, P-256, secp256k1), each
 * ending with a party the participant knows with our key and the user may act
 * for; idempotent re-runs; tampered topology refused before any signature;
 * wrong scheme on the validator path refused.
 */
import { describe, expect, it, vi } from 'vitest';
import { type CantonApiError, isCantonApiError } from '../../src/canton/errors.js';
import type { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import { decodeTopologyTransaction, encodeTopologyTransaction } from '../../src/canton/topology/codec.js';
import type { TopologyTransaction } from '../../src/canton/topology/model.js';
import type { ValidatorClient } from '../../src/canton/validator/client.js';
import type { FlowContext } from '../../src/flows/context.js';
import { onboardViaLedgerApi, onboardViaValidator, showParty } from '../../src/flows/onboard.js';
import { topologyTransactionHash } from '../../src/hashing/canton-hash.js';
import { bytesToBase64, bytesToHex } from '../../src/hashing/input.js';
import { checkTopology } from '../../src/intent/topology.js';
import { ALLOW_ALL_REF } from '../../src/policy/hook.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { type FlowEnv, onboardingSuite, refusal } from '../support/flow-env.js';

let env: FlowEnv;
const { newKey } = onboardingSuite('onboard', (e) => {
  env = e;
});

/** The party is hosted with exactly our key, and the Ledger API user may act and read as it. */
function expectUsable(partyId: string, fingerprint: string, via: 'validator' | 'ledger-api') {
  const p = env.net.parties.get(partyId);
  expect(p, `the sandbox knows ${partyId}`).toBeDefined();
  expect(p!.keys.map((k) => k.fingerprint)).toEqual([fingerprint]);
  expect(p!.namespace).toBe(fingerprint);
  expect(p!.via).toBe(via);
  expect(p!.hosting).toEqual([{ participantUid: env.net.participantId, permission: 'confirmation' }]);
  const user = env.net.users.get(LEDGER_API_USER)!;
  expect(user.actAs.has(partyId)).toBe(true);
  expect(user.readAs.has(partyId)).toBe(true);
}

/** ctx with one client method replaced. */
function withValidator(patch: Partial<ValidatorClient>): FlowContext {
  return { ...env.ctx, validator: Object.assign(Object.create(env.validator), patch) as ValidatorClient };
}
function withLedger(patch: Partial<LedgerApiClient>): FlowContext {
  return { ...env.ctx, ledger: Object.assign(Object.create(env.ledger), patch) as LedgerApiClient };
}

function reencode(b64: string, change: (tx: TopologyTransaction) => void): string {
  const tx = decodeTopologyTransaction(b64).transaction;
  change(tx);
  return bytesToBase64(encodeTopologyTransaction(tx));
}

describe('onboarding through the validator', () => {
  it('onboards an Ed25519 party: three topology hashes signed, submitted, hosted, booked', async () => {
    const key = await newKey();
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await onboardViaValidator(env.ctx, { hint: 'val-alice', keyLabel: key.label });
    expect(r.status).toBe('new');
    expect(r.party.partyId).toBe(`val-alice::${key.fingerprint}`);
    expect(r.party.via).toBe('validator');
    expect(r.party.participantUid).toBe(env.net.participantId);
    expect(r.party.synchronizerId).toBe(env.net.synchronizerId);
    expect(sign).toHaveBeenCalledTimes(3);
    for (const call of sign.mock.calls) expect(call[1].length).toBe(34);
    expect(r.signedHashes).toHaveLength(3);
    expectUsable(r.party.partyId, key.fingerprint, 'validator');
    expect(await env.parties.get(r.party.partyId)).toEqual(r.party);
    expect(env.journal.steps()).toEqual(['signed', 'signed', 'signed', 'submitted', 'committed']);
    expect(env.journal.records.every((x) => x.flow === 'onboard-validator')).toBe(true);

    // Re-run: the booked party, nothing signed.
    sign.mockClear();
    const again = await onboardViaValidator(env.ctx, { hint: 'val-alice', keyLabel: key.label });
    expect(again.status).toBe('existing');
    expect(again.party).toEqual(r.party);
    expect(sign).not.toHaveBeenCalled();
  });

  it('refuses a non-Ed25519 key before asking the validator anything', async () => {
    const key = await newKey('ecdsa-p256');
    const generate = vi.spyOn(env.validator, 'generateTopology');
    const e = await refusal(onboardViaValidator(env.ctx, { hint: 'val-ec', keyLabel: key.label }));
    expect(e.reason).toBe('bad_request');
    expect(e.message).toMatch(/Ed25519 keys only.*ecdsa-p256.*ledger-api/);
    expect(generate).not.toHaveBeenCalled();
  });

  it('a hosting participant swapped in (hashes consistent) → topology_mismatch, nothing signed', async () => {
    const key = await newKey();
    const sign = vi.spyOn(env.signer, 'sign');
    const ctx = withValidator({
      generateTopology: async (req) => {
        const gen = await env.validator.generateTopology(req);
        return {
          ...gen,
          topology_txs: gen.topology_txs.map((t) => {
            const d = decodeTopologyTransaction(t.topology_tx);
            if (d.transaction.mapping.kind !== 'party_to_participant') return t;
            const tx = reencode(t.topology_tx, (x) => {
              if (x.mapping.kind === 'party_to_participant')
                x.mapping.participants = [
                  {
                    participantUid: 'evil-participant::1220ab',
                    permission: 'confirmation',
                    onboarding: false,
                  },
                ];
            });
            return { topology_tx: tx, hash: bytesToHex(topologyTransactionHash(tx)) };
          }),
        };
      },
    });
    const e = await refusal(onboardViaValidator(ctx, { hint: 'val-swap', keyLabel: key.label }));
    expect(e.reason).toBe('topology_mismatch');
    expect(e.problems.map((p) => p.reason)).toEqual(['hosting_mismatch']);
    expect(e.message).toContain(`expected exactly one hosting participant ${env.net.participantId}`);
    expect(e.message).toContain('evil-participant::1220ab');
    expect(sign).not.toHaveBeenCalled();
    expect(env.journal.steps()).toEqual(['refused']);
    expect(env.journal.records[0]!.reason).toBe('topology_mismatch');
    expect(env.net.parties.has(`val-swap::${key.fingerprint}`)).toBe(false);
    expect(await env.parties.list()).not.toContainEqual(expect.objectContaining({ hint: 'val-swap' }));
  });

  it('a claimed hash that is not the hash of the bytes → topology_mismatch, nothing signed', async () => {
    const key = await newKey();
    const sign = vi.spyOn(env.signer, 'sign');
    const ctx = withValidator({
      generateTopology: async (req) => {
        const gen = await env.validator.generateTopology(req);
        const other = gen.topology_txs[1]!.hash;
        return {
          ...gen,
          topology_txs: gen.topology_txs.map((t, i) => (i === 0 ? { ...t, hash: other } : t)),
        };
      },
    });
    const e = await refusal(onboardViaValidator(ctx, { hint: 'val-hash', keyLabel: key.label }));
    expect(e.reason).toBe('topology_mismatch');
    expect(e.problems).toEqual([
      expect.objectContaining({ reason: 'hash_mismatch', where: 'transaction 0 (NamespaceDelegation)' }),
    ]);
    expect(sign).not.toHaveBeenCalled();
  });

  it('an extra transaction → topology_mismatch naming it', async () => {
    const key = await newKey();
    const sign = vi.spyOn(env.signer, 'sign');
    const ctx = withValidator({
      generateTopology: async (req) => {
        const gen = await env.validator.generateTopology(req);
        return { ...gen, topology_txs: [...gen.topology_txs, gen.topology_txs[2]!] };
      },
    });
    const e = await refusal(onboardViaValidator(ctx, { hint: 'val-extra', keyLabel: key.label }));
    expect(e.problems.map((p) => p.reason)).toEqual(['unexpected_mapping']);
    expect(e.message).toMatch(/expected one PartyToKeyMapping transaction, found 2/);
    expect(sign).not.toHaveBeenCalled();
  });

  it('the same hint with another key is refused', async () => {
    const key = await newKey();
    const e = await refusal(onboardViaValidator(env.ctx, { hint: 'val-alice', keyLabel: key.label }));
    expect(e.reason).toBe('bad_request');
    expect(e.message).toMatch(/hint val-alice is already used by party val-alice::1220/);
  });

  it('a refused policy signs nothing and books nothing', async () => {
    const key = await newKey();
    const sign = vi.spyOn(env.signer, 'sign');
    const seen: string[] = [];
    const ctx: FlowContext = {
      ...env.ctx,
      policy: {
        decide: async (req) => {
          seen.push(`${req.flow} ${req.intent.kind} ${req.hash.slice(0, 4)}`);
          return { outcome: 'deny', reason: 'no onboarding today', policy: ALLOW_ALL_REF };
        },
        settle: async () => {},
      },
    };
    const e = await refusal(onboardViaValidator(ctx, { hint: 'val-policy', keyLabel: key.label }));
    expect(e.reason).toBe('policy_denied');
    expect(seen).toEqual(['onboard-validator create 1220']);
    expect(sign).not.toHaveBeenCalled();
    expect(env.net.parties.has(`val-policy::${key.fingerprint}`)).toBe(false);
  });
});

describe('onboarding through the Ledger API', () => {
  for (const scheme of ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'] as const) {
    it(`onboards a ${scheme} party: one multi-hash signed, allocated, rights granted, booked`, async () => {
      const key = await newKey(scheme);
      const sign = vi.spyOn(env.signer, 'sign');
      const hint = `lapi-${scheme}`;
      const r = await onboardViaLedgerApi(env.ctx, { hint, keyLabel: key.label });
      expect(r.status).toBe('new');
      expect(r.party).toMatchObject({
        partyId: `${hint}::${key.fingerprint}`,
        scheme,
        via: 'ledger-api',
        keyLabel: key.label,
        participantUid: env.net.participantId,
        synchronizerId: env.net.synchronizerId,
      });
      expect(sign).toHaveBeenCalledTimes(1);
      expect(sign.mock.calls[0]![1].length).toBe(34);
      expect(r.signedHashes).toEqual([bytesToHex(sign.mock.calls[0]![1])]);
      expectUsable(r.party.partyId, key.fingerprint, 'ledger-api');
      expect(env.journal.steps()).toEqual(['signed', 'submitted', 'committed']);

      const view = await showParty(env.ctx, r.party.partyId);
      expect(view.record).toEqual(r.party);
      expect(view.hosted).toMatchObject({ synchronizerId: env.net.synchronizerId });
      expect(view.ansName).toBeNull();
      expect(view.preapproval).toBeNull();
      expect(view.notes).toEqual([]);

      sign.mockClear();
      const again = await onboardViaLedgerApi(env.ctx, { hint, keyLabel: key.label });
      expect(again.status).toBe('existing');
      expect(sign).not.toHaveBeenCalled();
    });
  }

  it('a hosted party missing from the book (a run that stopped after allocate) is booked without signing', async () => {
    const key = await newKey();
    const first = await onboardViaLedgerApi(env.ctx, { hint: 'lapi-recover', keyLabel: key.label });
    // Forget it in a fresh party book.
    const { MemoryPartyBook } = await import('../../src/store/parties.js');
    const ctx: FlowContext = { ...env.ctx, parties: new MemoryPartyBook() };
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await onboardViaLedgerApi(ctx, { hint: 'lapi-recover', keyLabel: key.label });
    expect(r.status).toBe('recovered');
    expect(r.party.partyId).toBe(first.party.partyId);
    expect(sign).not.toHaveBeenCalled();
    expect(await ctx.parties.get(r.party.partyId)).toEqual(r.party);
  });

  it('another key in the PartyToParticipant → topology_mismatch, nothing signed', async () => {
    const key = await newKey();
    const other = await newKey();
    const sign = vi.spyOn(env.signer, 'sign');
    const ctx = withLedger({
      generateExternalPartyTopology: async (req) => {
        const gen = await env.ledger.generateExternalPartyTopology(req);
        const theirs = await env.ledger.generateExternalPartyTopology({
          ...req,
          publicKey: { ...req.publicKey, keyData: bytesToBase64(other.publicKeySpki) },
        });
        const k = decodeTopologyTransaction(theirs.topologyTransactions[0]!).transaction;
        const tx = reencode(gen.topologyTransactions[0]!, (x) => {
          if (x.mapping.kind === 'party_to_participant' && k.mapping.kind === 'party_to_participant')
            x.mapping.partySigningKeys = k.mapping.partySigningKeys;
        });
        const { multiHash } = await import('../../src/hashing/canton-hash.js');
        return {
          ...gen,
          topologyTransactions: [tx],
          multiHash: bytesToBase64(multiHash([topologyTransactionHash(tx)])),
        };
      },
    });
    const e = await refusal(onboardViaLedgerApi(ctx, { hint: 'lapi-key', keyLabel: key.label }));
    expect(e.reason).toBe('topology_mismatch');
    expect(e.problems.map((p) => p.reason)).toEqual(['key_mismatch']);
    expect(e.message).toContain(`expected the party signing key to be our key ${key.fingerprint}`);
    expect(e.message).toContain(other.fingerprint);
    expect(sign).not.toHaveBeenCalled();
    expect(env.journal.steps()).toEqual(['refused']);
  });

  it("a claimed multi-hash that is not the transactions' → topology_mismatch, nothing signed", async () => {
    const key = await newKey('ecdsa-p256');
    const sign = vi.spyOn(env.signer, 'sign');
    const ctx = withLedger({
      generateExternalPartyTopology: async (req) => {
        const gen = await env.ledger.generateExternalPartyTopology(req);
        const mh = Buffer.from(gen.multiHash, 'base64');
        mh[33] = (mh[33] ?? 0) ^ 1;
        return { ...gen, multiHash: mh.toString('base64') };
      },
    });
    const e = await refusal(onboardViaLedgerApi(ctx, { hint: 'lapi-mh', keyLabel: key.label }));
    expect(e.reason).toBe('topology_mismatch');
    expect(e.problems.map((p) => p.reason)).toEqual(['hash_mismatch']);
    expect(e.message).toMatch(/expected the multi-hash 1220[0-9a-f]{64} \(recomputed/);
    expect(sign).not.toHaveBeenCalled();
  });

  it('a second confirming participant (not what was asked) → topology_mismatch', async () => {
    const key = await newKey();
    const sign = vi.spyOn(env.signer, 'sign');
    const ctx = withLedger({
      generateExternalPartyTopology: (req) =>
        env.ledger.generateExternalPartyTopology({
          ...req,
          localParticipantObservationOnly: false,
          otherConfirmingParticipantUids: ['other::1220aa'],
          confirmationThreshold: 1,
        }),
    });
    const e = await refusal(onboardViaLedgerApi(ctx, { hint: 'lapi-two', keyLabel: key.label }));
    expect(e.problems.map((p) => p.reason)).toEqual(['hosting_mismatch']);
    expect(e.message).toContain('other::1220aa (confirmation)');
    expect(sign).not.toHaveBeenCalled();
  });

  it('a P-384 key is refused on the Ledger API path', async () => {
    const key = await newKey('ecdsa-p384');
    const e = await refusal(onboardViaLedgerApi(env.ctx, { hint: 'lapi-384', keyLabel: key.label }));
    expect(e.reason).toBe('bad_request');
    expect(e.message).toMatch(/ecdsa-p384/);
  });

  it('allocate refused for our credentials (user without admin right) → the upstream error, journalled rejected, nothing booked', async () => {
    const key = await newKey();
    const user = env.net.users.get(LEDGER_API_USER)!;
    user.admin = false;
    try {
      // Not a rejection of the onboarding: the participant refused this signer's token, so the
      // caller gets the upstream error (service, status, code), not `submission_rejected`.
      const e = await onboardViaLedgerApi(env.ctx, { hint: 'lapi-noadmin', keyLabel: key.label }).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(isCantonApiError(e), String(e)).toBe(true);
      expect(e).toMatchObject({ service: 'ledger-api', status: 403, code: 'PERMISSION_DENIED' });
      expect((e as CantonApiError).detail).toMatch(/participant_admin/);
      expect(env.journal.steps()).toEqual(['signed', 'submitted', 'rejected']);
      expect(await env.parties.list()).not.toContainEqual(expect.objectContaining({ hint: 'lapi-noadmin' }));
    } finally {
      user.admin = true;
    }
  });
});

describe('checkTopology', () => {
  async function material() {
    const key = await newKey();
    const partyId = `chk::${key.fingerprint}`;
    const gen = await env.validator.generateTopology({
      party_hint: 'chk',
      public_key: bytesToHex(key.publicKeyRaw),
    });
    const expectation = {
      partyId,
      publicKeySpki: key.publicKeySpki,
      scheme: key.scheme,
      participantUid: `PAR::${env.net.participantId}`,
      permission: 'confirmation' as const,
      threshold: 1,
    };
    return { key, gen, expectation };
  }

  it('accepts the pre-3.4.8 triple on the Ledger API path, and the validator form on the validator path', async () => {
    const { gen, expectation } = await material();
    const txs = gen.topology_txs.map((t) => ({ transaction: t.topology_tx, claimedHash: t.hash }));
    const v = checkTopology(txs, { ...expectation, path: 'validator' });
    expect(v.problems).toEqual([]);
    expect(v.hashes.map(bytesToHex)).toEqual(gen.topology_txs.map((t) => t.hash));
    // The Ledger API hands hashes out in base64 (a claimed hash is parsed in the path's encoding).
    const b64 = txs.map((t) => ({ ...t, claimedHash: Buffer.from(t.claimedHash, 'hex').toString('base64') }));
    expect(checkTopology(b64, { ...expectation, path: 'ledger-api' }).problems).toEqual([]);
  });

  it("parses a claimed hash in its path's encoding: hex from the validator, base64 from the Ledger API", async () => {
    const { gen, expectation } = await material();
    const hex = gen.topology_txs.map((t) => ({ transaction: t.topology_tx, claimedHash: t.hash }));
    const b64 = hex.map((t) => ({ ...t, claimedHash: Buffer.from(t.claimedHash, 'hex').toString('base64') }));
    const reasons = (txs: typeof hex, path: 'validator' | 'ledger-api') =>
      checkTopology(txs, { ...expectation, path }).problems.map((p) => p.reason);
    expect(reasons(hex, 'validator')).toEqual([]);
    expect(reasons(b64, 'ledger-api')).toEqual([]);
    // Each encoding on the other path is not the hash claimed.
    expect(reasons(b64, 'validator')).toEqual(['hash_mismatch', 'hash_mismatch', 'hash_mismatch']);
    expect(reasons(hex, 'ledger-api')).toEqual(['hash_mismatch', 'hash_mismatch', 'hash_mismatch']);
  });

  it("refuses the onboarding marker on the hosting participant and a deprecated key scheme not the key's own", async () => {
    const { gen, expectation } = await material();
    const expectV = { ...expectation, path: 'validator' as const };
    const txs = gen.topology_txs.map((t) => ({ transaction: t.topology_tx }));
    const change = (i: number, f: (tx: TopologyTransaction) => void) =>
      txs.map((t, j) => (j === i ? { transaction: reencode(t.transaction, f) } : t));
    const kinds = gen.topology_txs.map(
      (t) => decodeTopologyTransaction(t.topology_tx).transaction.mapping.kind,
    );
    const p2pAt = kinds.indexOf('party_to_participant');
    const ndAt = kinds.indexOf('namespace_delegation');
    const p2kAt = kinds.indexOf('party_to_key_mapping');

    const onboarding = checkTopology(
      change(p2pAt, (tx) => {
        if (tx.mapping.kind === 'party_to_participant') tx.mapping.participants[0]!.onboarding = true;
      }),
      expectV,
    ).problems;
    expect(onboarding.map((p) => p.reason)).toEqual(['hosting_mismatch']);
    expect(onboarding[0]!.message).toContain('onboarding marker');

    const wrongScheme = checkTopology(
      change(ndAt, (tx) => {
        if (tx.mapping.kind === 'namespace_delegation') tx.mapping.targetKey.scheme = 'ec_dsa_p256';
      }),
      expectV,
    ).problems;
    expect(wrongScheme.map((p) => p.reason)).toEqual(['key_mismatch']);
    expect(wrongScheme[0]!.message).toContain('ec_dsa_p256');

    // The key's own (Ed25519) deprecated scheme is accepted, as is unspecified.
    const ownScheme = checkTopology(
      change(p2kAt, (tx) => {
        if (tx.mapping.kind === 'party_to_key_mapping') tx.mapping.signingKeys[0]!.scheme = 'ed25519';
      }),
      expectV,
    ).problems;
    expect(ownScheme).toEqual([]);
  });

  it('names each problem: operation, serial, restriction, undecodable bytes, missing mapping', async () => {
    const { gen, expectation } = await material();
    const [nd, p2p] = gen.topology_txs;
    const changedNd = reencode(nd!.topology_tx, (x) => {
      x.serial = 2;
      x.operation = 'remove';
      if (x.mapping.kind === 'namespace_delegation')
        x.mapping.restriction = { kind: 'can_sign_specific_mappings', mappings: ['party_to_participant'] };
    });
    const r = checkTopology(
      [{ transaction: changedNd }, { transaction: p2p!.topology_tx }, { transaction: 'AAAA' }],
      { ...expectation, path: 'validator' },
    );
    expect(r.problems.map((p) => p.reason)).toEqual([
      'operation_mismatch',
      'serial_mismatch',
      'decode_failed',
      'missing_mapping',
      'unexpected_mapping',
    ]);
    expect(r.problems[0]!.message).toBe(
      'transaction 0 (NamespaceDelegation): expected operation ADD_REPLACE, found REMOVE',
    );
    expect(r.problems[3]!.message).toBe('expected one PartyToKeyMapping transaction, found none');
  });

  it('refuses an expected party outside our namespace', async () => {
    const { gen, expectation } = await material();
    const other = await newKey();
    const r = checkTopology(
      gen.topology_txs.map((t) => ({ transaction: t.topology_tx })),
      { ...expectation, partyId: `chk::${other.fingerprint}`, path: 'validator' },
    );
    expect(r.problems[0]).toMatchObject({ reason: 'party_mismatch' });
    expect(r.problems[0]!.message).toContain(`its namespace is ${other.fingerprint}`);
  });
});

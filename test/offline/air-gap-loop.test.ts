/**
 * The whole air-gap loop against the sandbox: a withdrawal
 * of a party whose key is held offline parks in `awaiting_signature` with a
 * sealed request; the offline signer (a separate keystore: a file key, and a
 * SoftHSM2 key) reviews and signs it; the import is checked and the
 * withdrawal commits. Also: every field of a response tampered with is
 * refused on import with its reason, a response is accepted once, a request
 * whose window closed goes stale and the withdrawal is prepared and exported
 * anew, and a sign request of a cold party is executed after the import.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { base64ToBytes } from '../../src/hashing/input.js';
import type { KeyBackend } from '../../src/keys/backend.js';
import type { AirGapResponse } from '../../src/offline/format.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type AirGapEnv, airGapEnv } from '../support/air-gap-env.js';
import { preapprovalProposal } from '../support/flow-env.js';
import { createSoftHsmToken, requireSoftHsm, type SoftHsmToken } from '../support/softhsm.js';

let ag: AirGapEnv;
let token: SoftHsmToken;
let hsm: KeyBackend;
let operator: { authorization: string };
let withdrawer: { authorization: string };

const inject: AirGapEnv['inject'] = (...a) => ag.inject(...a);
const coldParty = (
  hint: string,
  label: string,
  scheme: 'ed25519' | 'ecdsa-p256',
  backend: 'file' | 'pkcs11',
) => ag.coldParty(hint, { label, scheme, backend });
const withdrawalIn = (id: string, states: string[]) => ag.withdrawalIn(id, states);
const createWithdrawal = (party: string) => ag.createWithdrawal(party);
const exportOf = (id: string) => ag.exportOf(id);
const signOffline = (envelope: unknown) => ag.signOffline(envelope);

beforeAll(async () => {
  const module = requireSoftHsm();
  if (!module) throw new Error('SoftHSM2 is required for the air-gap loop (apt-get install softhsm2)');
  token = await createSoftHsmToken({ module });
  const { Pkcs11Backend } = await import('../../src/keys/pkcs11-backend.js');
  hsm = await Pkcs11Backend.open({ module, token: token.tokenLabel, pin: token.pin });
  ag = await airGapEnv({ seed: 'air-gap-loop', hsm });
  operator = ag.operator;
  withdrawer = await ag.env.auth(['withdrawer']);
}, 60_000);

afterAll(async () => {
  await ag?.close();
  await token?.cleanup();
});

describe('withdrawal of a cold party, across the air gap', () => {
  it.each([
    ['file', 'ed25519'],
    ['pkcs11', 'ecdsa-p256'],
  ] as const)(
    '%s key (%s): parked with a sealed request, signed offline, imported, committed',
    async (backend, scheme) => {
      const party = await coldParty(`cold-${backend}`, `cold-${backend}`, scheme, backend);
      const id = await createWithdrawal(party.partyId);
      const parked = await withdrawalIn(id, ['awaiting_signature', 'failed', 'rejected']);
      expect(parked.state).toBe('awaiting_signature');
      // nothing was signed or submitted for it
      expect(await ag.env.store.artifacts.submissionsFor(parked.commandId)).toEqual([]);
      const { export: x, envelope } = await exportOf(id);
      expect(x.status).toBe('open');
      const response = await signOffline(envelope);
      expect(response.hashes).toEqual(x.hashes);
      const imp = await inject('POST', '/v1/air-gap/imports', operator, response);
      expect(imp.status, JSON.stringify(imp.body)).toBe(200);
      expect((imp.body.withdrawal as { state: string }).state).toBe('prepared');
      const done = await withdrawalIn(id, ['committed', 'failed', 'rejected']);
      expect(done.state, done.lastError).toBe('committed');
      expect(done.updateId).toBeTruthy();
      const subs = await ag.env.store.artifacts.submissionsFor(done.commandId);
      expect(subs.map((s) => s.outcome)).toEqual(['committed']);
      expect((await ag.env.store.airGap.get(x.id))?.status).toBe('done');
      // the same response again: accepted once
      const again = await inject('POST', '/v1/air-gap/imports', operator, response);
      expect(again.status).toBe(409);
      expect(again.body.code).toBe('nonce_replayed');
    },
  );
});

describe('import refuses a response that is not exactly the answer', () => {
  let id: string;
  let exportId: string;
  let good: AirGapResponse;
  let party: PartyRecord;

  beforeAll(async () => {
    party = await coldParty('cold-tamper', 'cold-tamper', 'ed25519', 'file');
    id = await createWithdrawal(party.partyId);
    await withdrawalIn(id, ['awaiting_signature']);
    const x = await exportOf(id);
    exportId = x.export.id;
    good = await signOffline(x.envelope);
  });

  /** The newest audit row of a refused import. */
  const lastRefusal = async () =>
    (
      await ag.env.store.db.query<{
        actor: string;
        subject: string | null;
        details: Record<string, unknown>;
      }>(
        `SELECT actor, subject, details FROM audit_log WHERE action = 'air-gap.import-refused'
          ORDER BY seq DESC LIMIT 1`,
      )
    ).rows[0];

  const flip = (b64: string) => {
    const b = Buffer.from(b64, 'base64');
    b[5] = b[5]! ^ 1;
    return b.toString('base64');
  };
  const cases: [string, (r: AirGapResponse) => unknown, number, string, string?][] = [
    ['format version', (r) => ({ ...r, format: 'canton-signer/air-gap-response@2' }), 400, 'invalid_request'],
    ['unknown member', (r) => ({ ...r, extra: 1 }), 400, 'invalid_request'],
    ['nonce', (r) => ({ ...r, nonce: 'ab'.repeat(32) }), 404, 'unknown_request', 'response.nonce'],
    ['requestDigest', (r) => ({ ...r, requestDigest: 'cd'.repeat(32) }), 422, 'digest_mismatch'],
    ['partyId', (r) => ({ ...r, partyId: `x${r.partyId}` }), 422, 'party_mismatch'],
    ['hashes', (r) => ({ ...r, hashes: ['ef'.repeat(32)] }), 422, 'hash_mismatch'],
    ['signerFingerprint', (r) => ({ ...r, signerFingerprint: `1220${'0'.repeat(64)}` }), 422, 'key_mismatch'],
    [
      'signatures.0.signedBy',
      (r) => ({ ...r, signatures: [{ ...r.signatures[0]!, signedBy: `1220${'1'.repeat(64)}` }] }),
      422,
      'key_mismatch',
    ],
    [
      'signatures.0.signature',
      (r) => ({ ...r, signatures: [{ ...r.signatures[0]!, signature: flip(r.signatures[0]!.signature) }] }),
      422,
      'signature_invalid',
    ],
    [
      'signatures.0.format',
      (r) => ({ ...r, signatures: [{ ...r.signatures[0]!, format: 'SIGNATURE_FORMAT_DER' }] }),
      422,
      'signature_invalid',
    ],
    [
      'signatures.0.signingAlgorithmSpec',
      (r) => ({
        ...r,
        signatures: [{ ...r.signatures[0]!, signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256' }],
      }),
      422,
      'signature_invalid',
    ],
    ['signedAt (future)', (r) => ({ ...r, signedAt: '2099-01-01T00:00:00.000Z' }), 400, 'malformed'],
    ['signedAt (before export)', (r) => ({ ...r, signedAt: '2001-01-01T00:00:00.000Z' }), 400, 'malformed'],
  ];

  it.each(cases)('tampered %s → %i %s', async (_f, tamper, status, code) => {
    const before = await lastRefusal();
    const r = await inject('POST', '/v1/air-gap/imports', operator, tamper(good));
    expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(r.body.code).toBe(code);
    if (code === 'invalid_request') expect(await lastRefusal()).toEqual(before);
    else {
      // the refusal is in the audit log: who, which export, why
      const row = await lastRefusal();
      expect(row).toMatchObject({ actor: 'test-operator', details: { reason: code } });
      if (code === 'unknown_request') expect(row?.subject).toBeNull();
      else {
        expect(row?.subject).toBe(`withdrawal:${id}`);
        expect(row?.details).toMatchObject({ export: exportId, party: party.partyId, field: r.body.field });
      }
    }
    // still parked; the genuine response is still importable
    expect((await ag.env.store.withdrawals.get(id))?.state).toBe('awaiting_signature');
  });

  it('a signature by another key over the right hash → key_mismatch / signature_invalid', async () => {
    const other = await ag.cold.generate({ label: 'cold-other', scheme: 'ed25519', backend: 'file' });
    const sig = await ag.cold.sign(
      'cold-other',
      base64ToBytes(Buffer.from(good.hashes[0]!, 'hex').toString('base64')),
    );
    const forged = {
      ...good,
      signatures: [{ ...good.signatures[0]!, signature: sig.signature.signature }],
    };
    const r = await inject('POST', '/v1/air-gap/imports', operator, forged);
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('signature_invalid');
    expect(await lastRefusal()).toMatchObject({
      actor: 'test-operator',
      subject: `withdrawal:${id}`,
      details: { export: exportId, reason: 'signature_invalid', field: 'response.signatures.0.signature' },
    });
    const named = { ...forged, signerFingerprint: other.fingerprint, signatures: [sig.signature] };
    const r2 = await inject('POST', '/v1/air-gap/imports', operator, named);
    expect(r2.status).toBe(422);
    expect(r2.body.code).toBe('key_mismatch');
  });

  it('a withdrawer cannot import; the genuine response then goes through', async () => {
    const denied = await inject('POST', '/v1/air-gap/imports', withdrawer, good);
    expect(denied.status).toBe(403);
    const ok = await inject('POST', '/v1/air-gap/imports', operator, good);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await withdrawalIn(id, ['committed', 'failed'])).state).toBe('committed');
  });
});

describe('a window that closes before the import', () => {
  it('the export goes stale, the withdrawal is prepared and exported anew, and the new one commits', async () => {
    const party = await coldParty('cold-stale', 'cold-stale', 'ed25519', 'file');
    const id = await createWithdrawal(party.partyId);
    await withdrawalIn(id, ['awaiting_signature']);
    const first = await exportOf(id);
    const late = await signOffline(first.envelope);
    // the window closes (the request was carried too slowly)
    await ag.env.store.db.query(
      `UPDATE air_gap_exports SET window_latest = now() - interval '1 second' WHERE id = $1`,
      [first.export.id],
    );
    const r = await inject('POST', '/v1/air-gap/imports', operator, late);
    expect(r.status).toBe(409);
    expect(r.body.code).toBe('window_closed');
    expect((await ag.env.store.airGap.get(first.export.id))?.status).toBe('stale');
    // the worker prepares again and exports a new request for a new transaction
    const second = await ag.until(async () => {
      const x = await ag.env.store.airGap.currentFor(id);
      return x && x.id !== first.export.id && x.status === 'open' ? x : undefined;
    }, 'a new export');
    expect(second.hashes).not.toEqual(first.export.hashes);
    await withdrawalIn(id, ['awaiting_signature']);
    const fresh = await signOffline((await exportOf(id)).envelope);
    const ok = await inject('POST', '/v1/air-gap/imports', operator, fresh);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const done = await withdrawalIn(id, ['committed', 'failed', 'rejected']);
    expect(done.state, done.lastError).toBe('committed');
    // the stale transaction was never submitted
    const subs = await ag.env.store.artifacts.submissionsFor(done.commandId);
    expect(subs).toHaveLength(1);
  });
});

describe('onboarding a cold party across the air gap', () => {
  it.each([
    ['validator', 'file', 'ed25519'],
    ['ledger-api', 'pkcs11', 'ecdsa-p256'],
  ] as const)(
    '%s path, %s key: 202 with a topology request, signed offline, imported → onboarded',
    async (path, backend, scheme) => {
      // Allocating external parties and granting rights takes a participant admin user (Canton 3.4).
      ag.env.flow.net.users.get(LEDGER_API_USER)!.admin = true;
      const label = `cold-onboard-${backend}`;
      const key = await ag.cold.generate({ label, scheme, backend });
      await ag.env.flow.signer.importPublicKey(`${label}-pub`, scheme, key.publicKeySpki);
      const admin = await ag.env.auth(['admin']);
      // The ledger-api case declines the rights grant: the run after the import must keep that.
      const body = {
        hint: `onb-${backend}`,
        keyLabel: `${label}-pub`,
        path,
        ...(path === 'ledger-api' ? { grantRights: false } : {}),
      };
      const first = await inject('POST', '/v1/parties', admin, body);
      expect(first.status, JSON.stringify(first.body)).toBe(202);
      expect(first.body.code).toBe('awaiting_offline_signature');
      // asking again while it waits: the same request, not a second one
      const again = await inject('POST', '/v1/parties', admin, body);
      expect(again.body.exportId).toBe(first.body.exportId);
      const got = await inject('GET', `/v1/air-gap/exports/${String(first.body.exportId)}`, operator);
      expect(got.status).toBe(200);
      const x = got.body.export as { kind: string; party: string; hashes: string[] };
      expect(x.kind).toBe('topology-transactions');
      expect(x.hashes).toHaveLength(path === 'validator' ? 3 : 1);
      expect(await ag.env.store.parties.get(x.party)).toBeUndefined();
      const response = await signOffline(got.body.envelope);
      const imp = await inject('POST', '/v1/air-gap/imports', operator, response);
      expect(imp.status, JSON.stringify(imp.body)).toBe(200);
      expect(imp.body.onboarded).toEqual({ partyId: x.party, status: 'new' });
      const booked = await ag.env.store.parties.get(x.party);
      expect(booked?.fingerprint).toBe(key.fingerprint);
      expect(ag.env.flow.net.parties.get(x.party)?.keys[0]?.fingerprint).toBe(key.fingerprint);
      expect(ag.env.flow.net.users.get(LEDGER_API_USER)!.actAs.has(x.party)).toBe(path === 'validator');
    },
  );
});

describe('a sign-and-execute request of a cold party', () => {
  it('answers 202 with a request; the import executes exactly that transaction', async () => {
    const party = await coldParty('cold-sign', 'cold-sign', 'ed25519', 'file');
    const net = ag.env.flow.net;
    const commandId = `air-gap-sign-${Date.now()}`;
    const prep = await ag.env.flow.ledger.prepare({
      synchronizerId: net.synchronizerId,
      commands: [preapprovalProposal(net, party.partyId, net.validatorParty)],
      userId: LEDGER_API_USER,
      commandId,
      actAs: [party.partyId],
    });
    const first = await inject('POST', '/v1/sign/execute', operator, {
      party: party.partyId,
      preparedTransaction: prep.preparedTransaction,
      hash: prep.preparedTransactionHash,
      hashingScheme: 'v2',
      intent: { kind: 'preapproval-proposal', receiver: party.partyId, provider: net.validatorParty },
    });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    const got = await inject('GET', `/v1/air-gap/exports/${String(first.body.exportId)}`, operator);
    const response = await signOffline(got.body.envelope);
    const imp = await inject('POST', '/v1/air-gap/imports', operator, response);
    expect(imp.status, JSON.stringify(imp.body)).toBe(200);
    const executed = imp.body.executed as { commandId: string; updateId: string };
    expect(executed.commandId).toBe(commandId);
    expect(executed.updateId).toBeTruthy();
    expect((imp.body.export as { status: string }).status).toBe('done');
  });
});

describe('cancelling a withdrawal that awaits its offline signature', () => {
  it('voids its request: the response is refused afterwards and nothing is submitted', async () => {
    const party = await coldParty('cold-cancel', 'cold-cancel', 'ed25519', 'file');
    const id = await createWithdrawal(party.partyId);
    await withdrawalIn(id, ['awaiting_signature']);
    const { export: x, envelope } = await exportOf(id);
    const response = await signOffline(envelope);
    const c = await inject('POST', `/v1/withdrawals/${id}/cancel`, operator, {});
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    expect(c.body.state).toBe('cancelled');
    expect((await ag.env.store.airGap.get(x.id))?.status).toBe('cancelled');
    const r = await inject('POST', '/v1/air-gap/imports', operator, response);
    expect(r.status).toBe(404);
    expect(r.body.code).toBe('unknown_request');
    expect(r.body.message).toContain('cancelled');
    const w = await ag.env.store.withdrawals.get(id);
    expect(w?.state).toBe('cancelled');
    expect(await ag.env.store.artifacts.submissionsFor(w!.commandId)).toEqual([]);
    expect(await ag.env.store.airGap.signatureFor(x.keyFingerprint, x.hashes[0]!, x.id)).toBeUndefined();
  });
});

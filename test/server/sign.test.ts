/**
 * /v1/sign against the sandbox: a prepared transaction from the Ledger API
 * (a TransferPreapprovalProposal create) and a real participant vector.
 * verify: the report (hash in hex, scheme, recognised actions, window), no
 * signature, no database write; a refusal (intent mismatch, tampered bytes,
 * tampered hash) is a 200 report with ok:false; malformed requests are 400
 * naming the field, an unknown party 404. sign: the report and a signature
 * that verifies against the registered key, journalled in the audit log; a
 * refusal is 422 with no signature. execute: signed once, committed.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { parsePartyId } from '../../src/hashing/canton-hash.js';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { base64ToBytes, bytesToHex } from '../../src/hashing/input.js';
import { valueToJson } from '../../src/hashing/render.js';
import { verifySignature } from '../../src/keys/schemes.js';
import { str } from '../../src/sandbox/ledger/value-json.js';
import { listAudit } from '../../src/store/audit.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { preapprovalProposal } from '../support/flow-env.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';
import { VECTORS_DIR } from '../support/vectors.js';

let env: ServiceEnv;
let alice: PartyRecord;
let bob: PartyRecord;
let operator: { authorization: string };
let clockUs: bigint | undefined;

beforeAll(async () => {
  env = await serviceEnv({
    seed: 'sign-routes',
    worker: false,
    service: { flowOverrides: { nowUs: () => clockUs ?? BigInt(Date.now()) * 1000n } },
  });
  alice = await env.addParty('alice');
  bob = await env.addParty('bob', { scheme: 'ecdsa-p256' });
  operator = await env.auth(['operator']);
}, 60_000);
afterAll(async () => env?.close());
beforeEach(() => {
  vi.restoreAllMocks();
  clockUs = undefined;
});

/** A proposal create for `p` naming `provider`, prepared by the sandbox participant. */
async function prepared(p: PartyRecord, provider: string) {
  const commandId = randomUUID();
  const res = await env.flow.ledger.prepare({
    userId: env.flow.ctx.userId,
    commandId,
    actAs: [p.partyId],
    synchronizerId: env.flow.net.synchronizerId,
    commands: [preapprovalProposal(env.flow.net, p.partyId, provider)],
  });
  return {
    commandId,
    body: {
      party: p.partyId,
      preparedTransaction: res.preparedTransaction,
      hash: res.preparedTransactionHash,
      hashingScheme: 'v2',
      intent: { kind: 'preapproval-proposal', receiver: p.partyId, provider },
    },
  };
}

const post = (url: string, payload: object, headers = operator) =>
  env.service.app.inject({ method: 'POST', url, headers, payload });

const auditCount = async () => (await listAudit(env.store.db, { limit: 1000 })).length;

/** The base64 with one byte of the decoded bytes changed. */
function flipByte(b64: string, at: number): string {
  const bytes = Buffer.from(b64, 'base64');
  bytes[at] = bytes[at]! ^ 0x01;
  return bytes.toString('base64');
}

describe('POST /v1/sign/verify', () => {
  it('reports what signing would authorise; no signature, no database write', async () => {
    const { body, commandId } = await prepared(alice, bob.partyId);
    const sign = vi.spyOn(env.flow.signer, 'sign');
    const before = await auditCount();
    const r = await post('/v1/sign/verify', body);
    expect(r.statusCode).toBe(200);
    const rep = r.json();
    expect(rep).toMatchObject({ ok: true, partyId: alice.partyId, scheme: 'v2', commandId });
    expect(rep.hash).toBe(bytesToHex(base64ToBytes(body.hash)));
    expect(rep.actions).toHaveLength(1);
    expect(rep.actions[0].template).toContain('TransferPreapprovalProposal');
    expect(Date.parse(rep.window.latest)).toBeGreaterThan(Date.now());
    expect(sign).not.toHaveBeenCalled();
    expect(await auditCount()).toBe(before);
  });

  it('takes the hash as hex too', async () => {
    const { body } = await prepared(alice, bob.partyId);
    const r = await post('/v1/sign/verify', { ...body, hash: bytesToHex(base64ToBytes(body.hash)) });
    expect(r.json().ok).toBe(true);
  });

  it('an intent the transaction does not match: 200, ok:false with the problems', async () => {
    const { body } = await prepared(alice, env.flow.net.validatorParty);
    const r = await post('/v1/sign/verify', {
      ...body,
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
    });
    expect(r.statusCode).toBe(200);
    const rep = r.json();
    expect(rep.ok).toBe(false);
    expect(rep.refusal.reason).toBe('intent_mismatch');
    expect(rep.refusal.problems.map((p: { reason: string }) => p.reason)).toContain('party_mismatch');
    expect(rep.hash).toBe(bytesToHex(base64ToBytes(body.hash)));
  });

  it('a tampered transaction or hash: ok:false (hash_mismatch or decode_failed)', async () => {
    const { body } = await prepared(alice, bob.partyId);
    const bytes = Buffer.from(body.preparedTransaction, 'base64');
    const tampered = await post('/v1/sign/verify', {
      ...body,
      preparedTransaction: flipByte(body.preparedTransaction, Math.floor(bytes.length / 2)),
    });
    expect(tampered.statusCode).toBe(200);
    expect(tampered.json().ok).toBe(false);
    expect(['hash_mismatch', 'decode_failed']).toContain(tampered.json().refusal.reason);
    const wrongHash = await post('/v1/sign/verify', { ...body, hash: flipByte(body.hash, 0) });
    expect(wrongHash.json()).toMatchObject({ ok: false, refusal: { reason: 'hash_mismatch' } });
    const v3 = await post('/v1/sign/verify', { ...body, hashingScheme: 'v3' });
    expect(v3.json()).toMatchObject({ ok: false, scheme: 'v3', refusal: { reason: 'hash_mismatch' } });
  });

  it.each([
    [(b: Record<string, unknown>) => ({ ...b, intent: undefined }), 'body.intent'],
    [(b: Record<string, unknown>) => ({ ...b, intent: { kind: 'transfer' } }), 'body.intent.sender'],
    [(b: Record<string, unknown>) => ({ ...b, hashingScheme: 'v1' }), 'body.hashingScheme'],
    [(b: Record<string, unknown>) => ({ ...b, hash: 'short' }), 'body.hash'],
    [
      (b: Record<string, unknown>) => ({ ...b, preparedTransaction: 'not base64!' }),
      'body.preparedTransaction',
    ],
    [(b: Record<string, unknown>) => ({ ...b, party: 'nobody' }), 'body.party'],
  ])('400 naming the field (%#)', async (edit, field) => {
    const { body } = await prepared(alice, bob.partyId);
    const r = await post('/v1/sign/verify', edit(body));
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({ code: 'invalid_request', field });
  });

  it('an intent acting for another party is a 400; a party not in the book 404', async () => {
    const { body } = await prepared(alice, bob.partyId);
    const other = await post('/v1/sign/verify', { ...body, party: bob.partyId });
    expect(other.statusCode).toBe(400);
    expect(other.json().code).toBe('bad_request');
    const stranger = `stranger::1220${'ef'.repeat(32)}`;
    const unknown = await post('/v1/sign/verify', { ...body, party: stranger });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ code: 'party_not_found', field: 'body.party' });
  });

  it('a real participant vector (TransferPreapprovalProposal): V2 and V3 hashes, hex or base64', async () => {
    const v = JSON.parse(
      readFileSync(
        join(VECTORS_DIR, 'real', 'v2_splice_wallet_kernel_tx_visualizer_transfer_preapproval_proposal.json'),
        'utf8',
      ),
    ) as { prepared_transaction_base64: string; expected_hash_base64: string; reference_v3_hex: string };
    const tx = decodePreparedTransaction(base64ToBytes(v.prepared_transaction_base64));
    const root = tx.nodeById.get(tx.transaction.roots[0]!)!;
    if (root.type !== 'create') throw new Error('expected a create root');
    const arg = valueToJson(root.argument) as { receiver: string; provider: string };
    const partyId = tx.metadata.submitterInfo.actAs[0]!;
    expect(partyId).toBe(arg.receiver);
    await env.store.parties.put({
      partyId,
      hint: partyId.split('::')[0]!,
      keyLabel: 'vector-key',
      scheme: 'ed25519',
      fingerprint: parsePartyId(partyId).fingerprint,
      publicKeySpki: 'AA==',
      via: 'ledger-api',
      createdAt: new Date().toISOString(),
    });
    clockUs = tx.metadata.preparationTime + 1_000_000n;
    const body = {
      party: partyId,
      preparedTransaction: v.prepared_transaction_base64,
      hash: v.expected_hash_base64,
      hashingScheme: 'v2',
      intent: { kind: 'preapproval-proposal', receiver: arg.receiver, provider: arg.provider },
    };
    const r = await post('/v1/sign/verify', body);
    expect(r.json()).toMatchObject({
      ok: true,
      partyId,
      hash: bytesToHex(base64ToBytes(v.expected_hash_base64)),
    });
    const v3 = await post('/v1/sign/verify', { ...body, hash: v.reference_v3_hex, hashingScheme: 'v3' });
    expect(v3.json()).toMatchObject({ ok: true, scheme: 'v3', hash: v.reference_v3_hex });
    const wrong = await post('/v1/sign/verify', {
      ...body,
      intent: { ...body.intent, provider: alice.partyId },
    });
    expect(wrong.json()).toMatchObject({ ok: false, refusal: { reason: 'intent_mismatch' } });
    clockUs = undefined;
    const late = await post('/v1/sign/verify', body);
    expect(late.json()).toMatchObject({ ok: false, refusal: { reason: 'window_closed' } });
  });

  it('is for operators only', async () => {
    const { body } = await prepared(alice, bob.partyId);
    for (const role of ['admin', 'auditor', 'withdrawer'] as const)
      expect((await post('/v1/sign/verify', body, await env.auth([role], [alice.partyId]))).statusCode).toBe(
        403,
      );
  });
});

describe('POST /v1/sign', () => {
  it.each([
    ['ed25519', () => alice, () => bob],
    ['ecdsa-p256', () => bob, () => alice],
  ])(
    '%s: the report and a signature that verifies against the registered key; journalled',
    async (_, p, q) => {
      const { body, commandId } = await prepared(p(), q().partyId);
      const r = await post('/v1/sign', body);
      expect(r.statusCode).toBe(200);
      const out = r.json();
      expect(out).toMatchObject({ ok: true, partyId: p().partyId, commandId });
      expect(out.signature.signedBy).toBe(p().fingerprint);
      const ok = verifySignature(
        p().scheme,
        base64ToBytes(p().publicKeySpki),
        Buffer.from(out.hash, 'hex'),
        base64ToBytes(out.signature.signature),
      );
      expect(ok).toBe(true);
      const rows = await listAudit(env.store.db, { subject: `party:${p().partyId}`, limit: 1000 });
      const signed = rows.filter((x) => x.action === 'flow.signed').at(-1);
      expect(signed).toMatchObject({ actor: 'test-operator', details: { flow: 'sign', hash: out.hash } });
    },
  );

  it('a refusal is 422 with reason and problems, journalled, and nothing is signed', async () => {
    const { body } = await prepared(alice, env.flow.net.validatorParty);
    const sign = vi.spyOn(env.flow.signer, 'sign');
    const r = await post('/v1/sign', {
      ...body,
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
    });
    expect(r.statusCode).toBe(422);
    expect(r.json()).toMatchObject({ code: 'refused', reason: 'intent_mismatch' });
    expect(r.json().problems.length).toBeGreaterThan(0);
    expect(sign).not.toHaveBeenCalled();
    const rows = await listAudit(env.store.db, { subject: `party:${alice.partyId}`, limit: 1000 });
    expect(rows.at(-1)).toMatchObject({ action: 'flow.refused', details: { reason: 'intent_mismatch' } });
    const tampered = await post('/v1/sign', { ...body, hash: flipByte(body.hash, 3) });
    expect(tampered.statusCode).toBe(422);
    expect(tampered.json().reason).toBe('hash_mismatch');
  });

  it('a caller command id other than the transaction one is a 400', async () => {
    const { body } = await prepared(alice, bob.partyId);
    const r = await post('/v1/sign', { ...body, commandId: 'another-command' });
    expect(r.statusCode).toBe(400);
  });
});

describe('POST /v1/sign/execute', () => {
  const proposalsFor = (p: PartyRecord) =>
    env.flow.net.store
      .activeContracts('TransferPreapprovalProposal')
      .filter((c) => str(c.argument, 'receiver') === p.partyId);

  it('signs once and executes: the outcome with the update id', async () => {
    const { body, commandId } = await prepared(alice, bob.partyId);
    const before = proposalsFor(alice).length;
    const sign = vi.spyOn(env.flow.signer, 'sign');
    const r = await post('/v1/sign/execute', { ...body, commandId });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ ok: true, outcome: 'committed', commandId, attempts: 1 });
    expect(r.json().updateId).toMatch(/^1220[0-9a-f]{64}$/);
    expect(sign).toHaveBeenCalledTimes(1);
    expect(proposalsFor(alice)).toHaveLength(before + 1);
    // The same transaction again (a client retrying after a lost answer): the ledger says the
    // command id is taken and the completions show its commit: the same outcome, no second commit.
    const again = await post('/v1/sign/execute', body);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({
      ok: true,
      outcome: 'committed',
      commandId,
      updateId: r.json().updateId,
    });
    expect(proposalsFor(alice)).toHaveLength(before + 1);
  });

  it('a mismatching intent is 422 and nothing is executed', async () => {
    const { body } = await prepared(alice, env.flow.net.validatorParty);
    const before = proposalsFor(alice).length;
    const r = await post('/v1/sign/execute', {
      ...body,
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
    });
    expect(r.statusCode).toBe(422);
    expect(r.json().reason).toBe('intent_mismatch');
    expect(proposalsFor(alice)).toHaveLength(before);
  });
});

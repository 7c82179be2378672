/**
 * /v1/parties against the sandbox: onboarding through the Ledger API and the
 * validator (201 new, 200 when booked already; booked in the store, audited
 * by the caller), its errors (unknown key 404, bad hint 400, wrong scheme for
 * the validator 400), list / show / balance / preapproval status, party ids
 * with `::` as is and URL-encoded, 404 for a party not in the book, 400 for a
 * malformed id, and a withdrawer's scope (only its token's parties).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onboardViaLedgerApi } from '../../src/flows/onboard.js';
import { hostExternalParty } from '../../src/sandbox/host-party.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { listAudit } from '../../src/store/audit.js';
import { MemoryPartyBook, type PartyRecord } from '../../src/store/parties.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
let alice: PartyRecord;
let bob: PartyRecord;
let admin: { authorization: string };

beforeAll(async () => {
  env = await serviceEnv({ seed: 'parties-routes', worker: false });
  alice = await env.addParty('alice', { fund: '250' });
  bob = await env.addParty('bob', { scheme: 'ecdsa-p256' });
  admin = await env.auth(['admin']);
  // Allocating external parties and granting rights takes a participant admin user (Canton 3.4).
  env.flow.net.users.get(LEDGER_API_USER)!.admin = true;
}, 60_000);
afterAll(async () => env?.close());

const get = async (url: string, headers = admin) => env.service.app.inject({ method: 'GET', url, headers });
const post = (url: string, payload: object, headers = admin) =>
  env.service.app.inject({ method: 'POST', url, headers, payload });

describe('POST /v1/parties (onboarding)', () => {
  it.each([
    ['ledger-api', 'ecdsa-secp256k1'],
    ['validator', 'ed25519'],
  ])('via %s with a %s key: 201 new, booked and audited; again 200 existing', async (path, scheme) => {
    const label = `onb-${path}`;
    expect((await post('/v1/keys', { label, scheme })).statusCode).toBe(201);
    const r = await post('/v1/parties', { hint: `carol-${path}`, keyLabel: label, path });
    expect(r.statusCode, r.body).toBe(201);
    const out = r.json();
    expect(out.status).toBe('new');
    expect(out.party).toMatchObject({ keyLabel: label, scheme, via: path });
    expect(out.signedHashes.length).toBeGreaterThan(0);
    expect(await env.store.parties.get(out.party.partyId)).toMatchObject({ keyLabel: label });
    const rows = await listAudit(env.store.db, { subject: `party:${out.party.partyId}`, limit: 1000 });
    expect(rows.find((x) => x.action === 'party.put')?.actor).toBe('test-admin');
    expect(rows.some((x) => x.action === 'flow.signed' && x.actor === 'test-admin')).toBe(true);
    const again = await post('/v1/parties', { hint: `carol-${path}`, keyLabel: label, path });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ status: 'existing', signedHashes: [] });
  });

  it("grantRights: false onboards without granting; participantId not the participant's → 422, nothing signed", async () => {
    expect((await post('/v1/keys', { label: 'onb-nogrant', scheme: 'ed25519' })).statusCode).toBe(201);
    const r = await post('/v1/parties', { hint: 'nogrant', keyLabel: 'onb-nogrant', grantRights: false });
    expect(r.statusCode, r.body).toBe(201);
    const user = env.flow.net.users.get(LEDGER_API_USER)!;
    expect(user.actAs.has(r.json().party.partyId)).toBe(false);

    expect((await post('/v1/keys', { label: 'onb-part', scheme: 'ed25519' })).statusCode).toBe(201);
    const wrong = await post('/v1/parties', {
      hint: 'part',
      keyLabel: 'onb-part',
      participantId: 'PAR::not-ours::1220dd',
    });
    expect(wrong.statusCode).toBe(422);
    expect(wrong.json()).toMatchObject({ code: 'refused', reason: 'topology_mismatch' });
    const right = await post('/v1/parties', {
      hint: 'part',
      keyLabel: 'onb-part',
      participantId: env.flow.net.participantId,
    });
    expect(right.statusCode, right.body).toBe(201);
  });

  it("a hosted party missing from the book: booked only with the service journal's record of onboarding it", async () => {
    expect((await post('/v1/keys', { label: 'onb-recover', scheme: 'ecdsa-p256' })).statusCode).toBe(201);
    const first = await post('/v1/parties', { hint: 'recover', keyLabel: 'onb-recover' });
    expect(first.statusCode, first.body).toBe(201);
    // The same onboarding with a party book that lost it: the audit log (DbRecorder) is the evidence.
    const ctx = { ...env.service.deps.flows, parties: new MemoryPartyBook() };
    const r = await onboardViaLedgerApi(ctx, { hint: 'recover', keyLabel: 'onb-recover' });
    expect(r.status).toBe('recovered');

    // Hosted by someone else's hand with our key: no journal record, refused.
    expect((await post('/v1/keys', { label: 'onb-planted', scheme: 'ed25519' })).statusCode).toBe(201);
    const key = await env.service.deps.flows.signer.describe('onb-planted');
    hostExternalParty(env.flow.net, {
      partyId: `planted::${key.fingerprint}`,
      fingerprint: key.fingerprint,
      scheme: key.scheme,
      publicKeySpki: key.publicKeySpki,
    });
    const planted = await post('/v1/parties', { hint: 'planted', keyLabel: 'onb-planted' });
    expect(planted.statusCode).toBe(422);
    expect(planted.json()).toMatchObject({ reason: 'topology_mismatch' });
    expect(await env.store.parties.get(`planted::${key.fingerprint}`)).toBeUndefined();
  });

  it('errors: unknown key 404, bad hint 400, a P-256 key through the validator 400, missing field 400', async () => {
    const unknown = await post('/v1/parties', { hint: 'dave', keyLabel: 'no-such-key' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('key_not_found');
    await post('/v1/keys', { label: 'onb-p256', scheme: 'ecdsa-p256' });
    const badHint = await post('/v1/parties', { hint: 'bad::hint', keyLabel: 'onb-p256' });
    expect(badHint.statusCode).toBe(400);
    const viaValidator = await post('/v1/parties', { hint: 'erin', keyLabel: 'onb-p256', path: 'validator' });
    expect(viaValidator.statusCode).toBe(400);
    const missing = await post('/v1/parties', { hint: 'erin' });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().field).toBe('body.keyLabel');
    const badPath = await post('/v1/parties', { hint: 'erin', keyLabel: 'onb-p256', path: 'scan' });
    expect(badPath.json().field).toBe('body.path');
  });

  it('is for admins only', async () => {
    for (const role of ['operator', 'auditor', 'withdrawer'] as const) {
      const r = await post('/v1/parties', { hint: 'x', keyLabel: 'onb-p256' }, await env.auth([role], []));
      expect(r.statusCode).toBe(403);
    }
  });
});

describe('reading parties', () => {
  it('lists the booked parties to admin, operator and auditor', async () => {
    for (const role of ['admin', 'operator', 'auditor'] as const) {
      const r = await get('/v1/parties', await env.auth([role]));
      expect(r.statusCode).toBe(200);
      const ids = r.json().parties.map((p: PartyRecord) => p.partyId);
      expect(ids).toEqual(expect.arrayContaining([alice.partyId, bob.partyId]));
    }
  });

  it('shows a party by its id as is and URL-encoded', async () => {
    for (const id of [alice.partyId, encodeURIComponent(alice.partyId)]) {
      const r = await get(`/v1/parties/${id}`);
      expect(r.statusCode).toBe(200);
      expect(r.json()).toMatchObject({
        partyId: alice.partyId,
        record: { keyLabel: alice.keyLabel },
        hosted: { synchronizerId: env.flow.net.synchronizerId },
      });
    }
  });

  it('404 for a party not in the book, 400 for a malformed id', async () => {
    const r = await get(`/v1/parties/${encodeURIComponent(`stranger::1220${'ab'.repeat(32)}`)}`);
    expect(r.statusCode).toBe(404);
    expect(r.json()).toMatchObject({ code: 'party_not_found', field: 'params.id' });
    for (const sub of ['', '/balance', '/preapprovals']) {
      const bad = await get(`/v1/parties/not-a-party${sub}`);
      expect(bad.statusCode).toBe(400);
      expect(bad.json().field).toBe('params.id');
    }
  });

  it('balance: the holdings per instrument', async () => {
    const r = await get(`/v1/parties/${alice.partyId}/balance`);
    expect(r.statusCode).toBe(200);
    const b = r.json();
    expect(b.partyId).toBe(alice.partyId);
    expect(b.holdings).toHaveLength(1);
    expect(Number(b.holdings[0].unlocked)).toBe(250);
  });

  it('preapproval status of one party', async () => {
    const r = await get(`/v1/parties/${bob.partyId}/preapprovals`);
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ partyId: bob.partyId, status: 'missing', willRenew: false });
    expect((await get(`/v1/parties/${bob.partyId}/preapprovals?withinDays=-1`)).json().field).toBe(
      'query.withinDays',
    );
  });
});

describe('a withdrawer', () => {
  it("sees and reaches only its token's parties", async () => {
    const w = await env.auth(['withdrawer'], [alice.partyId]);
    const list = await get('/v1/parties', w);
    expect(list.statusCode).toBe(200);
    expect(list.json().parties.map((p: PartyRecord) => p.partyId)).toEqual([alice.partyId]);
    expect((await get(`/v1/parties/${alice.partyId}`, w)).statusCode).toBe(200);
    expect((await get(`/v1/parties/${alice.partyId}/balance`, w)).statusCode).toBe(200);
    for (const sub of ['', '/balance', '/preapprovals']) {
      const r = await get(`/v1/parties/${bob.partyId}${sub}`, w);
      expect(r.statusCode).toBe(403);
      expect(r.json().code).toBe('forbidden');
    }
    // A party not in the book is also 403 (not 404): the withdrawer learns nothing about it.
    expect((await get(`/v1/parties/stranger::1220${'ab'.repeat(32)}`, w)).statusCode).toBe(403);
    const none = await get('/v1/parties', await env.auth(['withdrawer'], []));
    expect(none.json().parties).toEqual([]);
  });
});

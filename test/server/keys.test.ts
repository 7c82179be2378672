/**
 * /v1/keys: create (201, public description only; audited `key.create` by
 * the caller before the key exists, then its metadata in the store and an
 * audited `key.put`; keys the keystore holds are recorded at start), the request errors naming the field,
 * a taken label (409), list and show (404 key_not_found), disable / enable,
 * and who may do what (admin writes, auditor reads). Cold keys: registered
 * from a public key with backend `offline`, listed like others, signing
 * awaits the air gap.
 */
import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprint } from '../../src/hashing/canton-hash.js';
import { createService } from '../../src/server/service.js';
import { listAudit } from '../../src/store/audit.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

let env: ServiceEnv;
let admin: { authorization: string };

beforeAll(async () => {
  env = await serviceEnv({ seed: 'keys-routes', worker: false });
  admin = await env.auth(['admin']);
}, 60_000);
afterAll(async () => env?.close());

const inject = (method: 'GET' | 'POST', url: string, headers: object, payload?: object) =>
  env.service.app.inject({
    method,
    url,
    headers: headers as Record<string, string>,
    ...(payload ? { payload } : {}),
  });

describe('POST /v1/keys', () => {
  it.each(['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'])(
    'creates a %s key: 201 with the public description, recorded and audited',
    async (scheme) => {
      const label = `k-${scheme}`;
      const r = await inject('POST', '/v1/keys', admin, { label, scheme, backend: 'file' });
      expect(r.statusCode).toBe(201);
      const k = r.json();
      expect(Object.keys(k).sort()).toEqual(
        ['backend', 'createdAt', 'disabled', 'fingerprint', 'label', 'publicKey', 'scheme'].sort(),
      );
      expect(k).toMatchObject({ label, scheme, backend: 'file', disabled: false });
      expect(k.fingerprint).toMatch(/^1220[0-9a-f]{64}$/);
      expect(Buffer.from(k.publicKey, 'base64').length).toBeGreaterThan(40);
      const stored = await env.store.keys.get(label);
      expect(stored).toMatchObject({ label, scheme, fingerprint: k.fingerprint, publicKeySpki: k.publicKey });
      // Audited before the key exists (key.create), then recorded with its fingerprint (key.put).
      const audit = await listAudit(env.store.db, { subject: `key:${label}` });
      expect(audit.map((a) => [a.action, a.actor])).toEqual([
        ['key.create', 'test-admin'],
        ['key.put', 'test-admin'],
      ]);
      expect(audit[0]!.details).toEqual({ backend: 'file', scheme });
      expect(audit[1]!.details).toMatchObject({ fingerprint: k.fingerprint });
    },
  );

  it('backend defaults to file', async () => {
    const r = await inject('POST', '/v1/keys', admin, { label: 'k-default', scheme: 'ed25519' });
    expect(r.statusCode).toBe(201);
    expect(r.json().backend).toBe('file');
  });

  it('a taken label is 409 key_exists, and audits nothing more', async () => {
    await inject('POST', '/v1/keys', admin, { label: 'k-twice', scheme: 'ed25519' });
    const r = await inject('POST', '/v1/keys', admin, { label: 'k-twice', scheme: 'ed25519' });
    expect(r.statusCode).toBe(409);
    expect(r.json().code).toBe('key_exists');
    const audit = await listAudit(env.store.db, { subject: 'key:k-twice' });
    expect(audit.map((a) => a.action)).toEqual(['key.create', 'key.put']);
  });

  it('makes no key when the request cannot be audited first', async () => {
    const keys = env.store.keys;
    const note = keys.noteCreation;
    keys.noteCreation = async () => {
      throw new Error('the database is away');
    };
    try {
      const r = await inject('POST', '/v1/keys', admin, { label: 'k-unaudited', scheme: 'ed25519' });
      expect(r.statusCode).toBe(500);
    } finally {
      keys.noteCreation = note;
    }
    await expect(env.flow.signer.describe('k-unaudited')).rejects.toMatchObject({ code: 'key_not_found' });
    expect(await keys.get('k-unaudited')).toBeUndefined();
  });

  it('at start, records keys the keystore holds that the key table lacks (made with the CLI, or a creation cut short)', async () => {
    // Another service started on the same store and keystore.
    const start = () =>
      createService({
        config: testConfig(),
        store: env.store,
        signer: env.flow.signer,
        clients: { ledger: env.flow.ledger, userId: env.flow.ctx.userId },
        worker: false,
      });
    const made = await env.flow.signer.generate({ label: 'k-cli', scheme: 'ed25519', backend: 'file' });
    expect(await env.store.keys.get('k-cli')).toBeUndefined();
    const again = await start();
    try {
      expect(await env.store.keys.get('k-cli')).toMatchObject({
        fingerprint: made.fingerprint,
        backend: 'file',
      });
      const audit = await listAudit(env.store.db, { subject: 'key:k-cli' });
      expect(audit.map((a) => [a.action, a.actor, (a.details as { reason?: string }).reason])).toEqual([
        ['key.put', 'service', 'found in the keystore at start'],
      ]);
    } finally {
      await again.close();
    }
    // Known and unchanged: a second start records nothing.
    const third = await start();
    await third.close();
    expect(await listAudit(env.store.db, { subject: 'key:k-cli' })).toHaveLength(1);
  });

  it.each([
    [{ scheme: 'ed25519' }, 'body.label'],
    [{ label: 'bad label!', scheme: 'ed25519' }, 'body.label'],
    [{ label: 'k-x', scheme: 'rsa' }, 'body.scheme'],
    [{ label: 'k-x', scheme: 'ed25519', backend: 'cloud' }, 'body.backend'],
    [{ label: 'k-x', scheme: 'ed25519', privateKey: 'x' }, 'body'],
  ])('400 naming the field for %j', async (body, field) => {
    const r = await inject('POST', '/v1/keys', admin, body);
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({ code: 'invalid_request', field });
  });

  it('a PKCS#11 key without a configured HSM is a 503 naming the backend', async () => {
    const r = await inject('POST', '/v1/keys', admin, {
      label: 'k-hsm',
      scheme: 'ed25519',
      backend: 'pkcs11',
    });
    expect(r.statusCode).toBe(503);
    expect(r.json().code).toBe('backend_unavailable');
    // The audited request is closed by its refusal, with the reason.
    const audit = await listAudit(env.store.db, { subject: 'key:k-hsm' });
    expect(audit.map((a) => [a.action, a.actor])).toEqual([
      ['key.create', 'test-admin'],
      ['key.create_refused', 'test-admin'],
    ]);
    expect(audit[1]!.details).toMatchObject({
      backend: 'pkcs11',
      scheme: 'ed25519',
      code: 'backend_unavailable',
      reason: r.json().message,
    });
  });

  it('operator and auditor may not create keys', async () => {
    for (const role of ['operator', 'auditor'] as const) {
      const r = await inject('POST', '/v1/keys', await env.auth([role]), {
        label: 'k-no',
        scheme: 'ed25519',
      });
      expect(r.statusCode).toBe(403);
    }
    expect(await env.store.keys.get('k-no')).toBeUndefined();
  });
});

describe('GET /v1/keys', () => {
  it('lists and shows keys to admin and auditor, 404 for an unknown label', async () => {
    await inject('POST', '/v1/keys', admin, { label: 'k-show', scheme: 'ed25519' });
    for (const h of [admin, await env.auth(['auditor'])]) {
      const list = await inject('GET', '/v1/keys', h);
      expect(list.statusCode).toBe(200);
      expect(list.json().keys.map((k: { label: string }) => k.label)).toContain('k-show');
      const one = await inject('GET', '/v1/keys/k-show', h);
      expect(one.statusCode).toBe(200);
      expect(one.json()).toMatchObject({ label: 'k-show', scheme: 'ed25519', disabled: false });
    }
    const none = await inject('GET', '/v1/keys/nope', admin);
    expect(none.statusCode).toBe(404);
    expect(none.json().code).toBe('key_not_found');
    expect((await inject('GET', '/v1/keys', await env.auth(['operator']))).statusCode).toBe(403);
  });
});

describe('disable / enable', () => {
  it('a disabled key signs nothing; enabled again it signs; both audited', async () => {
    await inject('POST', '/v1/keys', admin, { label: 'k-toggle', scheme: 'ed25519' });
    const d = await inject('POST', '/v1/keys/k-toggle/disable', admin);
    expect(d.statusCode).toBe(200);
    expect(d.json().disabled).toBe(true);
    expect((await env.store.keys.get('k-toggle'))?.disabled).toBe(true);
    await expect(env.flow.signer.sign('k-toggle', new Uint8Array(32))).rejects.toMatchObject({
      code: 'key_disabled',
    });
    const e = await inject('POST', '/v1/keys/k-toggle/enable', admin);
    expect(e.json().disabled).toBe(false);
    await expect(env.flow.signer.sign('k-toggle', new Uint8Array(32))).resolves.toBeDefined();
    const audit = await listAudit(env.store.db, { subject: 'key:k-toggle' });
    expect(audit.map((a) => a.action)).toEqual(['key.create', 'key.put', 'key.disable', 'key.enable']);
    expect((await inject('POST', '/v1/keys/nope/disable', admin)).statusCode).toBe(404);
  });
});

describe('cold keys (backend offline)', () => {
  const coldSpki = (type: 'ed25519' | 'p256') =>
    (type === 'ed25519'
      ? generateKeyPairSync('ed25519')
      : generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
    ).publicKey.export({ type: 'spki', format: 'der' });

  it('registers a public key: 201 backend offline, recorded and audited, listed, signing awaits the air gap', async () => {
    const spki = coldSpki('ed25519');
    const r = await inject('POST', '/v1/keys', admin, {
      label: 'k-cold',
      scheme: 'ed25519',
      backend: 'offline',
      publicKey: spki.toString('base64'),
    });
    expect(r.statusCode, r.body).toBe(201);
    const k = r.json();
    expect(k).toMatchObject({
      label: 'k-cold',
      backend: 'offline',
      scheme: 'ed25519',
      publicKey: spki.toString('base64'),
      fingerprint: fingerprint(spki),
      disabled: false,
    });
    expect(await env.store.keys.get('k-cold')).toMatchObject({
      backend: 'offline',
      fingerprint: k.fingerprint,
      publicKeySpki: k.publicKey,
    });
    const audit = await listAudit(env.store.db, { subject: 'key:k-cold' });
    expect(audit.map((a) => [a.action, a.actor])).toEqual([
      ['key.create', 'test-admin'],
      ['key.put', 'test-admin'],
    ]);
    const list = await inject('GET', '/v1/keys', await env.auth(['auditor']));
    expect(list.json().keys.find((x: { label: string }) => x.label === 'k-cold')).toMatchObject({
      backend: 'offline',
      fingerprint: k.fingerprint,
    });
    await expect(env.flow.signer.sign('k-cold', new Uint8Array(32))).rejects.toMatchObject({
      code: 'awaiting_offline_signature',
    });
  });

  it.each([
    [{ label: 'k-c1', scheme: 'ed25519', backend: 'offline' }, 'body.publicKey'],
    [{ label: 'k-c2', scheme: 'ed25519', backend: 'file', publicKey: 'AAAA' }, 'body.publicKey'],
    [{ label: 'k-c3', scheme: 'ed25519', backend: 'offline', publicKey: 'not base64!' }, 'body.publicKey'],
  ])('400 naming the field for %j', async (body, field) => {
    const r = await inject('POST', '/v1/keys', admin, body);
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({ code: 'invalid_request', field });
    expect(await env.store.keys.get(body.label)).toBeUndefined();
  });

  it('a public key of another scheme is 400 invalid_key_material naming the scheme; a taken label 409', async () => {
    const r = await inject('POST', '/v1/keys', admin, {
      label: 'k-cold-wrong',
      scheme: 'ed25519',
      backend: 'offline',
      publicKey: coldSpki('p256').toString('base64'),
    });
    expect(r.statusCode).toBe(400);
    expect(r.json().code).toBe('invalid_key_material');
    expect(r.json().message).toContain('Ed25519');
    const audit = await listAudit(env.store.db, { subject: 'key:k-cold-wrong' });
    expect(audit.map((a) => a.action)).toEqual(['key.create', 'key.create_refused']);
    expect(audit[1]!.details).toMatchObject({ backend: 'offline', code: 'invalid_key_material' });
    expect(await env.store.keys.get('k-cold-wrong')).toBeUndefined();
    await inject('POST', '/v1/keys', admin, { label: 'k-hot', scheme: 'ed25519' });
    const taken = await inject('POST', '/v1/keys', admin, {
      label: 'k-hot',
      scheme: 'ecdsa-p256',
      backend: 'offline',
      publicKey: coldSpki('p256').toString('base64'),
    });
    expect(taken.statusCode).toBe(409);
    expect(taken.json().code).toBe('key_exists');
  });
});

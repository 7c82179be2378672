/**
 * The air-gap export key over HTTP: reading it never creates it (404
 * export_key_missing, no key made, nothing audited) and exporting without it
 * is refused; only an admin creates it (POST, 201, recorded in the key table
 * and audited as `key.create` then `key.put` under the admin's identity), once: asking again
 * answers the same key (200) and audits nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirGapError } from '../../src/offline/format.js';
import { DEFAULT_EXPORT_KEY } from '../../src/offline/online.js';
import { errorBody } from '../../src/server/errors.js';
import { listAudit } from '../../src/store/audit.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
beforeAll(async () => {
  env = await serviceEnv({ seed: 'air-gap-export-key', worker: false });
}, 60_000);
afterAll(async () => env?.close());

const inject = (method: 'GET' | 'POST', headers: Record<string, string>) =>
  env.service.app.inject({ method, url: '/v1/air-gap/export-key', headers });
const keyAudit = () => listAudit(env.store.db, { subject: `key:${DEFAULT_EXPORT_KEY}` });
const hasKey = async () => (await env.flow.signer.list()).some((k) => k.label === DEFAULT_EXPORT_KEY);

describe('the air-gap export key', () => {
  it('is not created by reading it: 404 export_key_missing for every reader', async () => {
    for (const role of ['auditor', 'operator', 'admin'] as const) {
      const r = await inject('GET', await env.auth([role]));
      expect(r.statusCode, role).toBe(404);
      expect(r.json()).toMatchObject({ code: 'export_key_missing' });
      expect(r.json().message).toMatch(/POST \/v1\/air-gap\/export-key/);
    }
    expect(await hasKey()).toBe(false);
    expect(await env.store.keys.get(DEFAULT_EXPORT_KEY)).toBeUndefined();
    expect(await keyAudit()).toEqual([]);
  });

  it('is not created by an export either: the request is refused with 409 export_key_missing', async () => {
    const e = await env.service.deps.airGap.exportKey().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AirGapError);
    expect((e as AirGapError).code).toBe('export_key_missing');
    expect(errorBody(e).status).toBe(409);
    expect(await hasKey()).toBe(false);
  });

  it('only an admin creates it', async () => {
    for (const role of ['auditor', 'operator', 'withdrawer'] as const)
      expect((await inject('POST', await env.auth([role]))).statusCode, role).toBe(403);
    expect(await hasKey()).toBe(false);
  });

  it('an admin creates it once (201, key table, audited); again: the same key (200), nothing audited', async () => {
    const admin = await env.auth(['admin']);
    const made = await inject('POST', admin);
    expect(made.statusCode, made.body).toBe(201);
    const key = made.json();
    expect(key).toMatchObject({ label: DEFAULT_EXPORT_KEY, scheme: 'ed25519' });
    expect(key.pem).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
    expect(await env.store.keys.get(DEFAULT_EXPORT_KEY)).toMatchObject({
      backend: 'file',
      fingerprint: key.fingerprint,
    });
    const audited = await keyAudit();
    expect(audited.map((a) => [a.action, a.actor])).toEqual([
      ['key.create', 'test-admin'],
      ['key.put', 'test-admin'],
    ]);

    const again = await inject('POST', admin);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(key);
    expect(await keyAudit()).toHaveLength(2);

    const read = await inject('GET', await env.auth(['auditor']));
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual(key);
  });
});

/**
 * Development mode onboards parties on its own sandbox: `POST /v1/parties`
 * on the Ledger API path and on the validator path, and the air-gap
 * onboarding of a cold key (202 with a request, exported, signed on a
 * separate "offline" keystore, imported). The service acts as its own
 * participant-admin user there; the sandbox still refuses participant-admin
 * work to any other user.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { base64ToBytes } from '../../src/hashing/input.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import type { Signer } from '../../src/keys/signer.js';
import { parseRequestEnvelope, trustedExportKey } from '../../src/offline/format.js';
import { reviewRequest, signReview } from '../../src/offline/review.js';
import { seedPgliteDir } from '../support/pg.js';
import { devEnv, type ServeProcess, startServe, stopAll } from '../support/serve-process.js';
import { testSigner } from '../support/test-signer.js';

let cwd: string;
let coldDir: string;
let cold: Signer;
let p: ServeProcess;
let url: string;
let sandbox: string;
let auth: { authorization: string };

async function call(
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> & { code?: string } }> {
  const r = await fetch(`${url}${path}`, {
    method,
    headers: { ...auth, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> & { code?: string } };
}

beforeAll(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'canton-signer-dev-onboard-'));
  coldDir = await mkdtemp(join(tmpdir(), 'canton-signer-dev-cold-'));
  cold = testSigner(coldDir, 'offline machine passphrase');
  // The subject is onboarding: the embedded database starts as an existing one, which spares
  // initdb (test/server/dev.test.ts starts on a fresh folder).
  await seedPgliteDir(join(cwd, 'dev', 'data'));
  p = startServe(['--dev'], {
    cwd,
    env: devEnv({ CANTON_SIGNER_LOG_LEVEL: 'warn' }),
  });
  const token = (await p.waitFor(/export TOKEN=(\S+)/, 90_000))[1]!;
  auth = { authorization: `Bearer ${token}` };
  url = p.stdout().match(/ service +(http:\/\/\S+)/)![1]!;
  sandbox = p.stdout().match(/ sandbox +(http:\/\/\S+)/)![1]!;
}, 120_000);

afterAll(async () => {
  stopAll();
  await cold?.close();
  for (const d of [cwd, coldDir]) if (d) await rm(d, { recursive: true, force: true });
});

describe('serve --dev onboards parties on its sandbox', () => {
  it.each(['ledger-api', 'validator'] as const)(
    'POST /v1/parties, %s path: 201, hosted and booked',
    async (path) => {
      const label = `hot-${path}`;
      const key = await call('POST', '/v1/keys', { label, scheme: 'ed25519' });
      expect(key.status, JSON.stringify(key.body)).toBe(201);
      const r = await call('POST', '/v1/parties', { hint: `hot-${path}`, keyLabel: label, path });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      const party = r.body.party as { partyId: string; via: string };
      expect(party.via).toBe(path);
      expect(r.body.warnings).toBeUndefined();
      // Hosted on the sandbox, and the service may read as it: its balance answers.
      const info = (await (await fetch(`${sandbox}/sandbox/info`)).json()) as { externalParties: string[] };
      expect(info.externalParties).toContain(party.partyId);
      const balance = await call('GET', `/v1/parties/${encodeURIComponent(party.partyId)}/balance`);
      expect(balance.status, JSON.stringify(balance.body)).toBe(200);
    },
  );

  it('the sandbox still refuses participant-admin work to a user without the right', async () => {
    // No token: the sandbox's default Ledger API user, which is no participant admin.
    const r = await fetch(`${sandbox}/v2/users/sandbox-user/rights`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        userId: 'sandbox-user',
        rights: [{ kind: { CanReadAs: { value: { party: 'someone::1220' } } } }],
      }),
    });
    expect(r.status).toBe(403);
    expect(await r.text()).toContain('participant_admin right required');
  });

  it("the service's own user is reached only with the service's token: a request without one naming it is refused", async () => {
    const r = await fetch(`${sandbox}/v2/interactive-submission/prepare`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        userId: 'canton-signer',
        commandId: 'no-token',
        actAs: ['someone::1220'],
        commands: [
          {
            CreateCommand: {
              templateId: '#pkg:Module:Template',
              createArguments: {},
            },
          },
        ],
      }),
    });
    expect(r.status).toBe(403);
    expect(await r.text()).toContain('acts only with its bearer token');
  });

  it('air-gap onboarding of a cold key: 202, export, offline sign, import → onboarded', async () => {
    const made = await call('POST', '/v1/air-gap/export-key');
    expect([200, 201], JSON.stringify(made.body)).toContain(made.status);
    const k = await call('GET', '/v1/air-gap/export-key');
    const trusted = [
      trustedExportKey(k.body.scheme as KeyScheme, base64ToBytes(String(k.body.publicKey), 'export key')),
    ];
    const key = await cold.generate({ label: 'vault', scheme: 'ed25519', backend: 'file' });
    const reg = await call('POST', '/v1/keys', {
      label: 'vault',
      scheme: 'ed25519',
      backend: 'offline',
      publicKey: Buffer.from(key.publicKeySpki).toString('base64'),
    });
    expect(reg.status, JSON.stringify(reg.body)).toBe(201);
    const first = await call('POST', '/v1/parties', { hint: 'vault', keyLabel: 'vault', path: 'ledger-api' });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(first.body.code).toBe('awaiting_offline_signature');
    const got = await call('GET', `/v1/air-gap/exports/${String(first.body.exportId)}`);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    const review = reviewRequest(parseRequestEnvelope(JSON.stringify(got.body.envelope)), {
      trusted,
      minWindowMs: 60_000,
    });
    const response = await signReview(review, cold);
    const imp = await call('POST', '/v1/air-gap/imports', response);
    expect(imp.status, JSON.stringify(imp.body)).toBe(200);
    const partyId = (got.body.export as { party: string }).party;
    expect(imp.body.onboarded).toEqual({ partyId, status: 'new' });
    const booked = await call('GET', `/v1/parties/${encodeURIComponent(partyId)}`);
    expect(booked.status).toBe(200);
    expect((booked.body.record as { fingerprint: string }).fingerprint).toBe(key.fingerprint);
  });
});

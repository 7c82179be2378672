/**
 * The app's common behaviour: health and readiness (failing checks by code
 * only, the detail in the log), request ids and the headers every answer
 * carries (401/403 too), the error shape for an unknown route and a missing
 * token, the OpenAPI document, metrics.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyError, type KeyErrorCode } from '../../src/keys/backend.js';
import { REDACT_PATHS } from '../../src/server/app.js';
import { errorBody } from '../../src/server/errors.js';
import { createService } from '../../src/server/service.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

let env: ServiceEnv;
/** The service's log lines (its logger redacts as the real one does). */
const logged: string[] = [];
beforeAll(async () => {
  const logger = pino(
    { level: 'info', redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
    { write: (line: string) => void logged.push(line) },
  );
  env = await serviceEnv({ seed: 'app', worker: false, service: { logger } });
}, 60_000);
afterAll(async () => env?.close());

describe('service app', () => {
  it('answers /health and /ready without a token', async () => {
    const h = await env.service.app.inject({ method: 'GET', url: '/health' });
    expect(h.statusCode).toBe(200);
    expect(h.json()).toEqual({ ok: true });
    const r = await env.service.app.inject({ method: 'GET', url: '/ready' });
    expect(r.statusCode).toBe(200);
    expect(r.json().checks.database.ok).toBe(true);
    expect(r.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('readiness names the failing check with 503 and a code; the detail only in the log, redacted', async () => {
    const detail =
      'password authentication failed for user "custody" at postgres://custody:hunter2@db.internal:5432/signer';
    const original = env.flow.ledger.ledgerEnd.bind(env.flow.ledger);
    env.flow.ledger.ledgerEnd = async () => {
      throw new Error(detail);
    };
    try {
      const r = await env.service.app.inject({ method: 'GET', url: '/ready' });
      expect(r.statusCode).toBe(503);
      expect(r.json().checks.ledgerApi).toEqual({ ok: false, code: 'ledger_api_unavailable' });
      expect(r.json().checks.database).toEqual({ ok: true });
      expect(r.body).not.toMatch(/custody|hunter2|db\.internal|password/);
      const line = logged.find((l) => l.includes('readiness check failed'));
      expect(line).toBeDefined();
      expect(JSON.parse(line!)).toMatchObject({ check: 'ledgerApi', code: 'ledger_api_unavailable' });
      expect(line).toContain('password authentication failed for user');
      expect(line).toContain('postgres://custody:REDACTED@db.internal:5432/signer');
      expect(line).not.toContain('hunter2');
    } finally {
      env.flow.ledger.ledgerEnd = original;
    }
  });

  it("keeps a caller's X-Request-Id only when it is short and of a safe charset", async () => {
    const idOf = async (given?: string) =>
      (
        await env.service.app.inject({
          method: 'GET',
          url: '/health',
          headers: given === undefined ? {} : { 'x-request-id': given },
        })
      ).headers['x-request-id'];
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    for (const sane of ['abc-123', 'trace:1.2_3', 'x'.repeat(128)]) expect(await idOf(sane)).toBe(sane);
    for (const insane of ['x'.repeat(129), 'a b', '<script>', 'id;drop', 'ünïcode', '{"a":1}'])
      expect(await idOf(insane), insane).toMatch(uuid);
    expect(await idOf()).toMatch(uuid);
  });

  it('401 and 403 answers carry X-Request-Id and Cache-Control: no-store', async () => {
    const auditor = await env.auth(['auditor']);
    for (const [what, headers, status] of [
      ['no token', {}, 401],
      ['a bad token', { authorization: 'Bearer nope' }, 401],
      ['a role the route does not declare', auditor, 403],
    ] as const) {
      const r = await env.service.app.inject({
        method: 'POST',
        url: '/v1/keys',
        headers: { ...headers, 'x-request-id': `req-${status}` },
        payload: { label: 'k', scheme: 'ed25519' },
      });
      expect(r.statusCode, what).toBe(status);
      expect(r.headers['x-request-id'], what).toBe(`req-${status}`);
      expect(r.headers['cache-control'], what).toBe('no-store');
    }
  });

  it('unknown routes answer the JSON error shape', async () => {
    const r = await env.service.app.inject({ method: 'GET', url: '/v1/nothing-here' });
    expect(r.statusCode).toBe(404);
    expect(r.json()).toEqual({ code: 'not_found', message: 'no route GET /v1/nothing-here' });
  });

  it('serves the OpenAPI document at /docs/openapi.json, without a token', async () => {
    const r = await env.service.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    expect(r.statusCode).toBe(200);
    const doc = r.json();
    expect(doc.openapi).toBe('3.0.3');
    expect(doc.paths['/health']).toBeDefined();
    expect(doc.components.securitySchemes.bearer.scheme).toBe('bearer');
  });

  it('serves a readable API reference page at /docs, without a token, every asset from this service', async () => {
    const page = await env.service.app.inject({ method: 'GET', url: '/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['x-request-id']).toBeTruthy();
    expect(page.body).toContain('<div id="swagger-ui">');
    // Every script and stylesheet is a path on this service: nothing from another host.
    const refs = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(3);
    expect(page.body).not.toMatch(/https?:\/\//);
    for (const ref of refs) {
      expect(ref, ref).toMatch(/^\/docs\//);
      const asset = await env.service.app.inject({ method: 'GET', url: ref });
      expect(asset.statusCode, ref).toBe(200);
      expect(asset.rawPayload.length, ref).toBeGreaterThan(100);
    }
    // The page's script loads the document from this service, with no external validator.
    const init = await env.service.app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    expect(init.statusCode).toBe(200);
    expect(init.body).toContain("resolveUrl('./json')");
    expect(init.body).toContain('validatorUrl: null');
    const json = await env.service.app.inject({ method: 'GET', url: '/docs/json' });
    expect(json.json()).toEqual(
      (await env.service.app.inject({ method: 'GET', url: '/docs/openapi.json' })).json(),
    );
  });

  it('exposes Prometheus metrics including request counts', async () => {
    await env.service.app.inject({ method: 'GET', url: '/health' });
    const r = await env.service.app.inject({ method: 'GET', url: '/metrics' });
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toContain('text/plain');
    expect(r.body).toMatch(
      /canton_signer_http_requests_total\{method="GET",route="\/health",status="200"\} \d+/,
    );
    expect(r.body).toContain('canton_signer_withdrawals{state="received"} 0');
  });
});

describe('configuration reaching the flows', () => {
  it('network.validatorParty pins the validator party of every flow the service runs', async () => {
    const party = `validator::1220${'ab'.repeat(32)}`;
    const pinned = await createService({
      config: testConfig({ network: { sandbox: true, validatorParty: party } }),
      store: env.store,
      signer: env.flow.signer,
      clients: { ledger: env.flow.ledger, userId: env.flow.ctx.userId },
      worker: false,
    });
    try {
      expect(pinned.deps.flows.validatorParty).toBe(party);
    } finally {
      await pinned.close();
    }
    expect(env.service.deps.flows.validatorParty).toBeUndefined();
  });
});

describe('log redaction', () => {
  it('no log line carries a field named like a secret, at the top level or one level down', () => {
    const lines: string[] = [];
    const log = pino(
      { redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
      { write: (line: string) => void lines.push(line) },
    );
    const secrets = {
      authorization: 'Bearer s-0',
      passphrase: 's-1',
      pin: 's-2',
      token: 's-3',
      privateKey: 's-4',
      secret: 's-5',
      sharedSecret: 's-6',
      clientSecret: 's-7',
      password: 's-8',
    };
    log.info({ ...secrets, kept: 'visible' }, 'top');
    log.info({ nested: { ...secrets, kept: 'visible' } }, 'nested');
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).toContain('visible');
      for (const v of Object.values(secrets)) expect(line).not.toContain(v);
    }
  });
});

describe('key errors as API answers', () => {
  const status = (code: KeyErrorCode) => errorBody(new KeyError(code, `m-${code}`));

  it('a fault of the request is a 4xx; the key backend failing the service is a 503 with its code', () => {
    expect(status('key_not_found').status).toBe(404);
    expect(status('key_disabled').status).toBe(409);
    expect(status('mechanism_missing').status).toBe(400);
    expect(status('invalid_message').status).toBe(400);
    for (const code of [
      'backend_unavailable',
      'wrong_passphrase',
      'no_passphrase',
      'tampered_key_file',
      'keystore_io',
      'hsm_error',
      'wrong_pin',
      'pin_locked',
      'token_not_found',
      'hsm_module',
    ] as const)
      expect(status(code), code).toEqual({ status: 503, body: { code, message: `m-${code}` } });
  });
});

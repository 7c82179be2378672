/**
 * The app's common behaviour: health and readiness, the error shape for an
 * unknown route and a missing token, the OpenAPI document, metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
beforeAll(async () => {
  env = await serviceEnv({ seed: 'app', worker: false });
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

  it('readiness names the failing check with 503', async () => {
    const original = env.flow.ledger.ledgerEnd.bind(env.flow.ledger);
    env.flow.ledger.ledgerEnd = async () => {
      throw new Error('participant unreachable');
    };
    try {
      const r = await env.service.app.inject({ method: 'GET', url: '/ready' });
      expect(r.statusCode).toBe(503);
      expect(r.json().checks.ledgerApi).toEqual({ ok: false, message: 'participant unreachable' });
    } finally {
      env.flow.ledger.ledgerEnd = original;
    }
  });

  it('unknown routes answer the JSON error shape', async () => {
    const r = await env.service.app.inject({ method: 'GET', url: '/v1/nothing-here' });
    expect(r.statusCode).toBe(404);
    expect(r.json()).toEqual({ code: 'not_found', message: 'no route GET /v1/nothing-here' });
  });

  it('serves the OpenAPI document at /docs', async () => {
    const r = await env.service.app.inject({ method: 'GET', url: '/docs' });
    expect(r.statusCode).toBe(200);
    const doc = r.json();
    expect(doc.openapi).toBe('3.0.3');
    expect(doc.paths['/health']).toBeDefined();
    expect(doc.components.securitySchemes.bearer.scheme).toBe('bearer');
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

/**
 * The role matrix: every route the app declares (whoever added it) × every
 * role, no token and an expired token. No token or an expired one → 401 on
 * every non-public route; a role the route does not declare (the auditor on
 * anything but GET included) → 403; a declared role → neither 401 nor 403
 * (a withdrawer's token names the dummy party the URL uses). No answer of
 * the whole walk carries a bearer token, the token secret or a passphrase.
 */
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLES, type Role } from '../../src/server/roles.js';
import {
  mintToken,
  type ServiceEnv,
  serviceEnv,
  TEST_AUDIENCE,
  TEST_ISSUER,
  TEST_SECRET,
} from '../support/service.js';

const PARTY = `dummy::1220${'ab'.repeat(32)}`;
const DUMMY: Record<string, string> = {
  id: encodeURIComponent(PARTY),
  contractId: `00${'cd'.repeat(33)}`,
  label: 'no-such-key',
};

/** A concrete URL for a route pattern: each `:param` replaced by a dummy value. */
function urlOf(pattern: string): string {
  return pattern.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => DUMMY[name] ?? 'dummy-value');
}

let env: ServiceEnv;
const tokens = new Map<string, string>();
const answers: string[] = [];

/** Routes whose answer does not end by itself (server-sent events): read up to the status, then closed. */
const STREAMS = new Set(['/v1/events/stream']);

async function call(method: string, url: string, token?: string) {
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  if (STREAMS.has(url)) {
    const r = await env.service.app.inject({ method: method as 'GET', url, headers, payloadAsStream: true });
    const stream = r.stream();
    if (r.statusCode !== 200) {
      let body = '';
      for await (const chunk of stream) body += String(chunk);
      answers.push(JSON.stringify(r.headers) + body);
    } else stream.destroy();
    return r.statusCode;
  }
  const r = await env.service.app.inject({ method: method as 'GET', url, headers });
  answers.push(JSON.stringify(r.headers) + r.body);
  return r.statusCode;
}

beforeAll(async () => {
  env = await serviceEnv({ seed: 'roles-matrix', worker: false });
  await env.service.app.ready();
  for (const role of ROLES)
    tokens.set(role, await mintToken([role], role === 'withdrawer' ? { parties: [PARTY] } : {}));
  const past = Math.floor(Date.now() / 1000) - 3600;
  tokens.set(
    'expired',
    await new SignJWT({ canton_signer_roles: [...ROLES], canton_signer_parties: [PARTY] })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('expired')
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setIssuedAt(past - 600)
      .setExpirationTime(past)
      .sign(new TextEncoder().encode(TEST_SECRET)),
  );
}, 60_000);
afterAll(async () => env?.close());

describe('role matrix', () => {
  it('declares every route of the service (the table is complete)', () => {
    const table = env.service.routes.map((r) => `${r.method} ${r.url}`);
    for (const r of [
      'POST /v1/keys',
      'GET /v1/keys/:label',
      'POST /v1/parties',
      'GET /v1/parties/:id/balance',
      'GET /v1/parties/:id/offers',
      'POST /v1/sign/verify',
      'POST /v1/sign',
      'POST /v1/sign/execute',
      'GET /v1/audit',
      'GET /v1/audit/verify',
      'GET /health',
    ])
      expect(table).toContain(r);
  });

  it('every route × no token, an expired token and every role', async () => {
    const failures: string[] = [];
    const expectStatus = (what: string, status: number, ok: (s: number) => boolean, want: string) => {
      if (!ok(status)) failures.push(`${what}: ${status}, expected ${want}`);
    };
    for (const route of env.service.routes) {
      const url = urlOf(route.url);
      const name = `${route.method} ${route.url}`;
      if (route.roles === 'public') {
        const s = await call(route.method, url);
        expectStatus(`${name} (public) without a token`, s, (x) => x !== 401 && x !== 403, 'not 401/403');
        continue;
      }
      expectStatus(`${name} without a token`, await call(route.method, url), (x) => x === 401, '401');
      expectStatus(
        `${name} with an expired token`,
        await call(route.method, url, tokens.get('expired')),
        (x) => x === 401,
        '401',
      );
      for (const role of ROLES) {
        const declared = (route.roles as readonly Role[]).includes(role);
        const readOnlyAuditor = role === 'auditor' && route.method !== 'GET' && route.method !== 'HEAD';
        const s = await call(route.method, url, tokens.get(role));
        if (declared && !readOnlyAuditor)
          expectStatus(`${name} as ${role} (declared)`, s, (x) => x !== 401 && x !== 403, 'not 401/403');
        else expectStatus(`${name} as ${role} (not declared)`, s, (x) => x === 403, '403');
      }
    }
    expect(failures).toEqual([]);
    expect(env.service.routes.length).toBeGreaterThan(15);
  }, 120_000);

  it('the OpenAPI document shows every /v1 route with its tags and summary', async () => {
    const r = await env.service.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    expect(r.statusCode).toBe(200);
    const paths = r.json().paths as Record<string, Record<string, { tags?: string[]; summary?: string }>>;
    const missing: string[] = [];
    for (const route of env.service.routes) {
      if (!route.url.startsWith('/v1') || route.method === 'HEAD') continue;
      const op = paths[route.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')]?.[route.method.toLowerCase()];
      if (!op?.tags?.length || !op.summary) missing.push(`${route.method} ${route.url}`);
    }
    expect(missing).toEqual([]);
  });

  it('no answer carries a bearer token, the token secret or a passphrase', async () => {
    expect(answers.length).toBeGreaterThan(100);
    const secrets = [...tokens.values(), TEST_SECRET, 'flow-test-passphrase'];
    for (const a of answers) for (const secret of secrets) expect(a.includes(secret)).toBe(false);
  });
});

/**
 * The service's HTTP edge: what reaches it before (or beside) the route
 * handlers. Text the database cannot store (U+0000, lone UTF-16 surrogates)
 * in a body, a query, a path or a token's subject is a 400/401 naming the
 * field, and an audit row is written whatever text it carries; fastify's and
 * Node's own refusals (bad URL encoding, an over-long path parameter, headers
 * over the limit, a body that is not JSON) answer in the error format with
 * `X-Request-Id` and `Cache-Control: no-store`, never echoing what was sent;
 * a participant refusing the service's credentials is `502 upstream_error`
 * while a real rejection of the transaction stays `422 submission_rejected`;
 * message wording (one idempotency field name, role lists); `ecdsa-p384`
 * keys; no deprecation warning at start-up.
 */
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import type { InjectOptions } from 'fastify';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { errorFromResponse } from '../../src/canton/errors.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { buildSandboxApp } from '../../src/sandbox/server.js';
import { createService } from '../../src/server/service.js';
import { appendAudit, listAudit, verifyAudit } from '../../src/store/audit.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { preapprovalProposal } from '../support/flow-env.js';
import {
  type ServiceEnv,
  serviceEnv,
  TEST_AUDIENCE,
  TEST_ISSUER,
  TEST_SECRET,
  testConfig,
} from '../support/service.js';

let env: ServiceEnv;
let alice: PartyRecord;
let bob: PartyRecord;
type Auth = { authorization: string };
let operator: Auth;
let admin: Auth;
let auditor: Auth;

beforeAll(async () => {
  env = await serviceEnv({ seed: 'http-edge', worker: false });
  alice = await env.addParty('alice');
  bob = await env.addParty('bob');
  operator = await env.auth(['operator']);
  admin = await env.auth(['admin']);
  auditor = await env.auth(['auditor']);
}, 60_000);
afterAll(async () => env?.close());
beforeEach(() => {
  vi.restoreAllMocks();
});

const inject = (opts: InjectOptions) => env.service.app.inject(opts);

/** The headers and shape every error answer has. */
function expectErrorFormat(r: { headers: Record<string, unknown>; json(): unknown }): void {
  expect(r.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  expect(r.headers['cache-control']).toBe('no-store');
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(r.json()).toMatchObject({ code: 'invalid_request', message: expect.any(String) });
}

async function createWithdrawal(): Promise<string> {
  const r = await inject({
    method: 'POST',
    url: '/v1/withdrawals',
    headers: { ...operator, 'idempotency-key': randomUUID() },
    payload: { party: alice.partyId, receiver: bob.partyId, amount: '1' },
  });
  expect(r.statusCode, r.body).toBe(201);
  return r.json().id as string;
}

/** A proposal create for alice, prepared by the sandbox participant, as a /v1/sign body. */
async function signBody(intent?: Record<string, unknown>) {
  const res = await env.flow.ledger.prepare({
    userId: env.flow.ctx.userId,
    commandId: randomUUID(),
    actAs: [alice.partyId],
    synchronizerId: env.flow.net.synchronizerId,
    commands: [preapprovalProposal(env.flow.net, alice.partyId, bob.partyId)],
  });
  return {
    party: alice.partyId,
    preparedTransaction: res.preparedTransaction,
    hash: res.preparedTransactionHash,
    hashingScheme: 'v2',
    intent: intent ?? { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
  };
}

describe('text the database cannot store', () => {
  it('a lone surrogate in a cancel reason is a 400 naming the field; the cancel is not lost', async () => {
    const id = await createWithdrawal();
    const r = await inject({
      method: 'POST',
      url: `/v1/withdrawals/${id}/cancel`,
      headers: operator,
      payload: { reason: 'customer \ud800 asked' },
    });
    expect(r.statusCode, r.body).toBe(400);
    expectErrorFormat(r);
    expect(r.json().field).toBe('body.reason');
    expect((await env.store.withdrawals.get(id))?.state).toBe('received');
    // The same cancel with valid text goes through.
    const ok = await inject({
      method: 'POST',
      url: `/v1/withdrawals/${id}/cancel`,
      headers: operator,
      payload: { reason: 'customer asked' },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().state).toBe('cancelled');
  });

  it("a lone surrogate in a sign intent's memo is a 400 naming the field, before any refusal", async () => {
    const body = await signBody({
      kind: 'transfer',
      sender: alice.partyId,
      receiver: bob.partyId,
      amount: '1',
      instrument: { admin: env.flow.net.dso, id: 'Amulet' },
      memo: 'invoice \udc00 42',
    });
    const r = await inject({ method: 'POST', url: '/v1/sign', headers: operator, payload: body });
    expect(r.statusCode, r.body).toBe(400);
    expectErrorFormat(r);
    expect(r.json().field).toBe('body.intent.memo');
  });

  it("a lone surrogate or NUL in a token's subject is a 401 malformed; the subject is not echoed", async () => {
    for (const sub of ['bot-\ud800', 'bot-\u0000-1']) {
      const token = await new SignJWT({ canton_signer_roles: ['operator'] })
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject(sub)
        .setIssuer(TEST_ISSUER)
        .setAudience(TEST_AUDIENCE)
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(new TextEncoder().encode(TEST_SECRET));
      const r = await inject({
        method: 'GET',
        url: '/v1/keys',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(r.statusCode, r.body).toBe(401);
      expect(r.json().code).toBe('malformed');
      expect(r.json().message).toContain('subject (sub)');
      expect(r.body).not.toContain('bot-');
    }
  });

  it('a NUL byte in a query parameter is a 400 naming the parameter', async () => {
    const audit = await inject({ method: 'GET', url: '/v1/audit?subject=%00', headers: auditor });
    expect(audit.statusCode, audit.body).toBe(400);
    expectErrorFormat(audit);
    expect(audit.json().field).toBe('query.subject');
    const exports = await inject({ method: 'GET', url: '/v1/air-gap/exports?party=%00', headers: operator });
    expect(exports.statusCode, exports.body).toBe(400);
    expect(exports.json().field).toBe('query.party');
  });

  it('a NUL byte in a path parameter is a 400 naming the parameter', async () => {
    const r = await inject({ method: 'GET', url: '/v1/withdrawals/a%00b', headers: operator });
    expect(r.statusCode, r.body).toBe(400);
    expect(r.json().field).toBe('params.id');
  });

  it('an audit row is written whatever text it carries: U+0000 and lone surrogates become U+FFFD', async () => {
    const row = await appendAudit(env.store.db, {
      actor: 'caller-\ud800',
      action: 'access.refused',
      subject: 'party:\u0000x',
      details: { reason: 'memo \udc00 and \u0000', 'key\ud800': 'a\ud83d\ude00b', literal: '\\ud800' },
    });
    const [stored] = (await listAudit(env.store.db, { limit: 1000 })).filter((r) => r.seq === row.seq);
    expect(stored).toMatchObject({
      actor: 'caller-\ufffd',
      subject: 'party:\ufffdx',
      // a well-formed pair (an emoji) and an escaped backslash are kept as they are
      details: { reason: 'memo \ufffd and \ufffd', 'key\ufffd': 'a\ud83d\ude00b', literal: '\\ud800' },
    });
    expect((await verifyAudit(env.store.db)).ok).toBe(true);
  });
});

describe('HTTP-layer refusals answer in the error format', () => {
  it('a bad URL encoding: 400 invalid_request with the headers, the URL not echoed', async () => {
    const r = await inject({ method: 'GET', url: '/v1/withdrawals/%E0%A4%Azz-secret', headers: operator });
    expect(r.statusCode).toBe(400);
    expectErrorFormat(r);
    expect(r.body).not.toContain('zz-secret');
  });

  it('a 2,000-character path parameter: 414 invalid_request with the headers, the URL not echoed', async () => {
    const r = await inject({ method: 'GET', url: `/v1/withdrawals/${'q'.repeat(2000)}`, headers: operator });
    expect(r.statusCode).toBe(414);
    expectErrorFormat(r);
    expect(r.body).not.toContain('qqqq');
  });

  it('text/plain and form bodies: 415 saying to send application/json', async () => {
    for (const [type, payload] of [
      ['text/plain', '{"label":"x","scheme":"ed25519"}'],
      ['application/x-www-form-urlencoded', 'label=x&scheme=ed25519'],
    ] as const) {
      const r = await inject({
        method: 'POST',
        url: '/v1/keys',
        headers: { ...admin, 'content-type': type },
        payload,
      });
      expect(r.statusCode, type).toBe(415);
      expectErrorFormat(r);
      expect(r.json().message).toContain('send Content-Type: application/json');
    }
  });

  it('over a real connection: a 15 KB token is read (401, not 431); headers over 64 KiB are a well-formed 431', async () => {
    const base = await env.service.listen({ port: 0, host: '127.0.0.1' });
    const bigToken = `eyJ${'A'.repeat(15_000)}.eyJ${'B'.repeat(10)}.sig`;
    const r = await fetch(`${base}/v1/keys`, { headers: { authorization: `Bearer ${bigToken}` } });
    expect(r.status).toBe(401);
    expect(r.headers.get('x-request-id')).toBeTruthy();
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(await r.text()).not.toContain('AAAA');

    const { port } = new URL(base);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1');
      let got = '';
      socket.on('data', (d) => {
        got += d.toString();
      });
      socket.on('close', () => resolve(got));
      socket.on('error', reject);
      socket.write(`GET /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'C'.repeat(70_000)}\r\n\r\n`);
    });
    const [head = '', body = ''] = raw.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 431 /);
    expect(head).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}\r\n/i);
    expect(head).toMatch(/\r\nCache-Control: no-store\r\n/i);
    expect(JSON.parse(body)).toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('64 KiB'),
    });
    expect(raw).not.toContain('CCCC');
  });
});

describe('an upstream service refusing our credentials', () => {
  const denied = () =>
    errorFromResponse({
      service: 'ledger-api',
      method: 'POST',
      path: '/v2/interactive-submission/executeAndWait',
      status: 403,
      body: JSON.stringify({
        code: 'PERMISSION_DENIED',
        cause: 'The provided JWT token is not sufficient: user svc may not act as alice',
        context: {},
        errorCategory: 7,
      }),
      idempotent: false,
    });
  const rejected = () =>
    errorFromResponse({
      service: 'ledger-api',
      method: 'POST',
      path: '/v2/interactive-submission/executeAndWait',
      status: 400,
      body: JSON.stringify({
        code: 'INVALID_ARGUMENT',
        cause: 'the transaction is not valid',
        context: {},
        errorCategory: 8,
        definiteAnswer: true,
      }),
      idempotent: false,
    });

  it('a participant 403 on execute is 502 upstream_error naming the service, status and code', async () => {
    vi.spyOn(env.flow.ledger, 'executeAndWait').mockRejectedValueOnce(denied());
    const r = await inject({
      method: 'POST',
      url: '/v1/sign/execute',
      headers: operator,
      payload: await signBody(),
    });
    expect(r.statusCode, r.body).toBe(502);
    expect(r.json()).toMatchObject({
      code: 'upstream_error',
      upstream: 'ledger-api',
      upstreamStatus: 403,
      upstreamCode: 'PERMISSION_DENIED',
    });
    expect(r.json().message).toMatch(/answered POST \S+ with status 403, code PERMISSION_DENIED/);
    expect(r.json().message).toContain('check that it is valid and that its user has the rights');
  });

  it('onboarding while the participant refuses our token participant_admin: 502 upstream_error, nothing booked', async () => {
    const key = await inject({
      method: 'POST',
      url: '/v1/keys',
      headers: admin,
      payload: { label: 'edge-onboard', scheme: 'ed25519' },
    });
    expect(key.statusCode, key.body).toBe(201);
    const user = env.flow.net.users.get(LEDGER_API_USER)!;
    user.admin = false;
    try {
      const r = await inject({
        method: 'POST',
        url: '/v1/parties',
        headers: admin,
        payload: { hint: 'edge-noadmin', keyLabel: 'edge-onboard', path: 'ledger-api' },
      });
      expect(r.statusCode, r.body).toBe(502);
      expect(r.json()).toMatchObject({
        code: 'upstream_error',
        upstream: 'ledger-api',
        upstreamStatus: 403,
        upstreamCode: 'PERMISSION_DENIED',
      });
      expect(r.json().message).toMatch(/participant_admin right required/);
    } finally {
      user.admin = true;
    }
    expect(await env.store.parties.list()).not.toContainEqual(
      expect.objectContaining({ hint: 'edge-noadmin' }),
    );
  });

  it('a rejection of the transaction itself stays 422 refused / submission_rejected', async () => {
    vi.spyOn(env.flow.ledger, 'executeAndWait').mockRejectedValueOnce(rejected());
    const r = await inject({
      method: 'POST',
      url: '/v1/sign/execute',
      headers: operator,
      payload: await signBody(),
    });
    expect(r.statusCode, r.body).toBe(422);
    expect(r.json()).toMatchObject({ code: 'refused', reason: 'submission_rejected' });
  });
});

describe('messages and schemes', () => {
  it('the Idempotency-Key is named headers.idempotency-key on the 400 and on the 409', async () => {
    const body = { party: alice.partyId, receiver: bob.partyId, amount: '2' };
    const missing = await inject({
      method: 'POST',
      url: '/v1/withdrawals',
      headers: operator,
      payload: body,
    });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().field).toBe('headers.idempotency-key');
    const key = randomUUID();
    const first = await inject({
      method: 'POST',
      url: '/v1/withdrawals',
      headers: { ...operator, 'idempotency-key': key },
      payload: body,
    });
    expect(first.statusCode).toBe(201);
    const conflict = await inject({
      method: 'POST',
      url: '/v1/withdrawals',
      headers: { ...operator, 'idempotency-key': key },
      payload: { ...body, amount: '3' },
    });
    expect(conflict.statusCode).toBe(409);
    expect(conflict.json()).toMatchObject({ code: 'idempotency_conflict', field: 'headers.idempotency-key' });
  });

  it('a role refusal names the role, or lists the roles', async () => {
    const one = await inject({ method: 'POST', url: '/v1/keys/x/disable', headers: operator });
    expect(one.statusCode).toBe(403);
    expect(one.json().message).toBe('this route needs the admin role');
    const several = await inject({ method: 'GET', url: '/v1/audit', headers: operator });
    expect(several.statusCode).toBe(403);
    expect(several.json().message).toBe('this route needs one of these roles: auditor, admin');
  });

  it('POST /v1/keys takes every scheme the CLI does, ecdsa-p384 included', async () => {
    const r = await inject({
      method: 'POST',
      url: '/v1/keys',
      headers: admin,
      payload: { label: 'edge-p384', scheme: 'ecdsa-p384' },
    });
    expect(r.statusCode, r.body).toBe(201);
    expect(r.json()).toMatchObject({ label: 'edge-p384', scheme: 'ecdsa-p384' });
  });

  it('a cold key of another scheme is refused in plain words ("an Ed25519")', async () => {
    const r = await inject({
      method: 'POST',
      url: '/v1/keys',
      headers: admin,
      payload: { label: 'edge-cold', scheme: 'ed25519', backend: 'offline', publicKey: 'AAAA' },
    });
    expect(r.statusCode).toBe(400);
    expect(r.json().message).toMatch(/^not an Ed25519 public key/);
  });
});

describe('start-up', () => {
  it('building the service and the sandbox emits no deprecation warning', async () => {
    const warn = vi.spyOn(process, 'emitWarning');
    const { app } = buildSandboxApp({ seed: 'edge-warnings', timers: false });
    await app.ready();
    await app.close();
    const service = await createService({
      config: testConfig(),
      store: env.store,
      signer: env.flow.signer,
      clients: { ledger: env.flow.ledger, userId: env.flow.ctx.userId },
      worker: false,
    });
    await service.close();
    const fastify = warn.mock.calls.filter(
      (c) => String(c[0]).includes('FST') || String(c[1]).includes('Fastify'),
    );
    expect(fastify).toEqual([]);
  });
});

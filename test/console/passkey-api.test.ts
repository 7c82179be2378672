/**
 * Passkey approvals and console sessions through the service, against the
 * sandbox (no browser: a software passkey answers as an authenticator would).
 * A withdrawal over the threshold waits for a treasury approver's passkey;
 * what must never count, and never get anything signed: an assertion made
 * for another request, the same assertion replayed, an assertion of an
 * unregistered credential, a credential of another approver, an assertion
 * from another origin or without user verification, a registration made for
 * another approver. Then the valid one commits it. Sessions: a change without
 * the CSRF token or from another origin is refused; an idle session, an
 * ended one, and a forged cookie authenticate nobody.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consolePlugin } from '../../src/console/plugin.js';
import { approvalMessage } from '../../src/policy/approval.js';
import { encodeAssertion } from '../../src/policy/webauthn.js';
import type { Role } from '../../src/server/roles.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { mintToken, type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';
import { assertion, registration, type SoftPasskey, softPasskey } from '../support/soft-passkey.js';

let env: ServiceEnv;
let alice: PartyRecord;
let bob: PartyRecord;

const POLICY = `version: 1
approverGroups: { treasury: [tara, tom] }
approvals: { ttl: 1h }
rules:
  - id: large
    when: { amount: { gte: "100" } }
    decision: approve
    approvals: [{ group: treasury, count: 1 }]
  - id: rest
    decision: allow
`;

const as = async (sub: string, roles: Role[]) => ({
  authorization: `Bearer ${await mintToken(roles, { sub })}`,
});
const inject = (o: InjectOptions) => env.service.app.inject(o);

interface Approver {
  sub: string;
  key: SoftPasskey;
  credentialId: string;
}

async function registerPasskey(sub: string, key = softPasskey(rpId(), origin())): Promise<Approver> {
  const opts = await inject({
    method: 'GET',
    url: '/v1/approvers/credentials/passkey-options',
    headers: await as(sub, ['approver']),
  });
  expect(opts.statusCode, opts.body).toBe(200);
  const r = await inject({
    method: 'POST',
    url: '/v1/approvers/credentials',
    headers: await as(sub, ['approver']),
    payload: {
      kind: 'webauthn',
      label: `${sub}'s passkey`,
      registration: registration(key, opts.json().challenge),
    },
  });
  expect(r.statusCode, r.body).toBe(201);
  expect(r.json().passkey).toMatchObject({ rpId: rpId(), origin: origin(), alg: -7 });
  const a = await inject({
    method: 'POST',
    url: `/v1/approvers/credentials/${r.json().id}/activate`,
    headers: await as('ada', ['admin']),
  });
  expect(a.statusCode, a.body).toBe(200);
  return { sub, key, credentialId: r.json().id };
}

const origin = () => env.service.deps.publicOrigin();
const rpId = () => new URL(origin()).hostname;

async function withdraw(amount: string) {
  const r = await inject({
    method: 'POST',
    url: '/v1/withdrawals',
    headers: { ...(await as('desk', ['withdrawer', 'operator'])), 'idempotency-key': randomUUID() },
    payload: { party: alice.partyId, receiver: bob.partyId, amount, memo: '<script>alert(1)</script>' },
  });
  expect(r.statusCode, r.body).toBe(201);
  return r.json() as { id: string; commandId: string };
}

async function until(id: string, states: string[], ms = 20_000) {
  const end = Date.now() + ms;
  for (;;) {
    const w = await env.store.withdrawals.get(id);
    if (w && states.includes(w.state)) return w;
    if (Date.now() > end) throw new Error(`withdrawal ${id} is ${w?.state}, not ${states.join('|')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function pendingRequest(withdrawal: string) {
  await until(withdrawal, ['awaiting_approval']);
  const r = await env.store.approvals.latestFor(`withdrawal:${withdrawal}`);
  if (!r) throw new Error('no approval request');
  return r;
}

const approve = async (who: Approver, request: string, statementHash: string, body: unknown) =>
  inject({
    method: 'POST',
    url: `/v1/approvals/${request}/approve`,
    headers: await as(who.sub, ['approver']),
    payload: { credentialId: who.credentialId, statementHash, assertion: body },
  });

const signedFor = (commandId: string) =>
  env.flow.net.store.updates().filter((u) => u.commandId === commandId);

let tara: Approver;
let tom: Approver;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cs-passkey-'));
  const file = join(dir, 'policy.yaml');
  writeFileSync(file, POLICY);
  env = await serviceEnv({
    seed: 'passkey-api',
    service: {
      config: testConfig({ policy: { file }, console: { devSignIn: true } }),
      plugins: [consolePlugin()],
    },
  });
  alice = await env.addParty('alice', { fund: '100000' });
  bob = await env.addParty('bob');
  tara = await registerPasskey('tara');
  tom = await registerPasskey('tom');
}, 90_000);
afterAll(async () => env?.close());

describe('passkey approvals', () => {
  it('refuses every forged or misplaced assertion, signs nothing, then commits on the valid one', async () => {
    const w1 = await withdraw('150');
    const w2 = await withdraw('160');
    const r1 = await pendingRequest(w1.id);
    const r2 = await pendingRequest(w2.id);
    const challenge1 = approvalMessage(r1.statementHash, 'approve');
    const challenge2 = approvalMessage(r2.statementHash, 'approve');

    // An assertion for another request (r2's challenge) presented for r1.
    let r = await approve(tara, r1.id, r1.statementHash, assertion(tara.key, challenge2));
    expect(r.statusCode, r.body).toBe(400);
    expect(r.json().code).toBe('signature_invalid');
    // An assertion by a passkey that was never registered, under tara's credential.
    const stranger = softPasskey(rpId(), origin());
    stranger.credentialId = tara.key.credentialId;
    r = await approve(tara, r1.id, r1.statementHash, assertion(stranger, challenge1));
    expect(r.json().code).toBe('signature_invalid');
    // Tara's valid assertion presented by tom, under tara's credential: not his.
    r = await approve(
      { ...tom, credentialId: tara.credentialId },
      r1.id,
      r1.statementHash,
      assertion(tara.key, challenge1),
    );
    expect(r.statusCode).toBe(403);
    expect(r.json().code).toBe('credential_not_yours');
    // Made on another site, or without the user verified.
    r = await approve(
      tara,
      r1.id,
      r1.statementHash,
      assertion(tara.key, challenge1, { origin: 'https://evil.example' }),
    );
    expect(r.json().code).toBe('signature_invalid');
    r = await approve(
      tara,
      r1.id,
      r1.statementHash,
      assertion(tara.key, challenge1, { userVerified: false }),
    );
    expect(r.json().code).toBe('signature_invalid');
    // None of it moved anything.
    expect((await env.store.withdrawals.get(w1.id))?.state).toBe('awaiting_approval');
    expect(signedFor(w1.commandId)).toEqual([]);
    expect((await env.store.approvals.approvalsOf(r1.id)).length).toBe(0);

    // The valid one: approved, and the withdrawal commits.
    const valid = assertion(tara.key, challenge1);
    r = await approve(tara, r1.id, r1.statementHash, valid);
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json().status).toBe('approved');
    await until(w1.id, ['committed']);
    expect(signedFor(w1.commandId)).toHaveLength(1);

    // The same assertion replayed: on its own request (closed) and on another one.
    r = await approve(tara, r1.id, r1.statementHash, valid);
    expect(r.statusCode).toBe(409);
    r = await approve(tara, r2.id, r2.statementHash, valid);
    expect(r.json().code).toBe('signature_invalid');
    expect((await env.store.withdrawals.get(w2.id))?.state).toBe('awaiting_approval');
    expect(signedFor(w2.commandId)).toEqual([]);
  }, 60_000);

  it('an approval row written into the database with a passkey assertion of another request does not count', async () => {
    const w = await withdraw('170');
    const req = await pendingRequest(w.id);
    const other = await withdraw('180');
    const otherReq = await pendingRequest(other.id);
    // Mallory copies an assertion tara made for another request into this one's approvals.
    const forOther = assertion(tara.key, approvalMessage(otherReq.statementHash, 'approve'));
    await env.store.approvals.record({
      requestId: req.id,
      approver: 'tara',
      credentialId: tara.credentialId,
      decision: 'approve',
      signature: encodeAssertion(forOther),
    });
    const count = await env.service.deps.policy.count((await env.store.approvals.get(req.id))!);
    expect(count.met).toBe(false);
    expect(signedFor(w.commandId)).toEqual([]);
  });

  it("a registration made for another approver's challenge is refused", async () => {
    const opts = await inject({
      method: 'GET',
      url: '/v1/approvers/credentials/passkey-options',
      headers: await as('tara', ['approver']),
    });
    const key = softPasskey(rpId(), origin());
    const r = await inject({
      method: 'POST',
      url: '/v1/approvers/credentials',
      headers: await as('tom', ['approver']),
      payload: { kind: 'webauthn', registration: registration(key, opts.json().challenge) },
    });
    expect(r.statusCode, r.body).toBe(400);
    expect(r.json()).toMatchObject({ code: 'bad_registration', field: 'body.registration' });
    expect(r.json().message).toContain('wrong_challenge');
    const fromElsewhere = await inject({
      method: 'POST',
      url: '/v1/approvers/credentials',
      headers: await as('tom', ['approver']),
      payload: {
        kind: 'webauthn',
        registration: registration(
          key,
          (
            await inject({
              method: 'GET',
              url: '/v1/approvers/credentials/passkey-options',
              headers: await as('tom', ['approver']),
            })
          ).json().challenge,
          { origin: 'https://evil.example' },
        ),
      },
    });
    expect(fromElsewhere.json().message).toContain('wrong_origin');
  });
});

describe('console sessions', () => {
  async function signIn(name = 'dev-demo') {
    const r = await inject({ method: 'POST', url: '/console/auth/dev', payload: { name } });
    expect(r.statusCode, r.body).toBe(204);
    const cookie = String(r.headers['set-cookie']).split(';')[0]!;
    expect(String(r.headers['set-cookie'])).toMatch(/HttpOnly; SameSite=Strict/);
    const s = await inject({ method: 'GET', url: '/console/session', headers: { cookie } });
    expect(s.statusCode, s.body).toBe(200);
    return { cookie, csrf: s.json().session.csrf as string };
  }

  it('a change authorised by the cookie needs the CSRF token and the console origin', async () => {
    const { cookie, csrf } = await signIn();
    const body = { document: POLICY };
    let r = await inject({ method: 'PUT', url: '/v1/policy', headers: { cookie }, payload: body });
    expect(r.statusCode).toBe(403);
    expect(r.json().code).toBe('csrf');
    r = await inject({
      method: 'PUT',
      url: '/v1/policy',
      headers: { cookie, 'x-csrf-token': csrf, origin: 'https://evil.example' },
      payload: body,
    });
    expect(r.json().code).toBe('csrf');
    r = await inject({
      method: 'PUT',
      url: '/v1/policy',
      headers: { cookie, 'x-csrf-token': `${csrf}x` },
      payload: body,
    });
    expect(r.json().code).toBe('csrf');
    r = await inject({
      method: 'PUT',
      url: '/v1/policy',
      headers: { cookie, 'x-csrf-token': csrf, origin: origin() },
      payload: body,
    });
    expect(r.statusCode, r.body).toBe(200);
    // Reads need no token.
    r = await inject({ method: 'GET', url: '/v1/policy', headers: { cookie } });
    expect(r.statusCode).toBe(200);
  });

  it('every answer under /console forbids inline script and framing', async () => {
    const r = await inject({ method: 'GET', url: '/console/' });
    expect(r.statusCode).toBe(200);
    const csp = String(r.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(r.body).not.toMatch(/<script(?![^>]*\bsrc=)/);
    // Also on what no route of the console answers.
    const missing = await inject({ method: 'GET', url: '/console/nope' });
    expect(missing.statusCode).toBe(404);
    expect(String(missing.headers['content-security-policy'])).toContain("default-src 'none'");
    expect(missing.headers['x-frame-options']).toBe('DENY');
  });

  it('an idle session, a signed-out one and a forged cookie authenticate nobody', async () => {
    const a = await signIn('idle-one');
    await env.store.db.query(`UPDATE console_sessions SET last_seen = now() - interval '1 hour'`);
    expect(
      (await inject({ method: 'GET', url: '/console/session', headers: { cookie: a.cookie } })).statusCode,
    ).toBe(401);
    const b = await signIn('leaves');
    const out = await inject({
      method: 'POST',
      url: '/console/auth/logout',
      headers: { cookie: b.cookie, 'x-csrf-token': b.csrf },
    });
    expect(out.statusCode).toBe(204);
    expect(
      (await inject({ method: 'GET', url: '/console/session', headers: { cookie: b.cookie } })).statusCode,
    ).toBe(401);
    // An admin signs a person out everywhere.
    const c = await signIn('revoked');
    const ended = await inject({
      method: 'POST',
      url: '/console/sessions/end',
      headers: await as('ada', ['admin']),
      payload: { caller: 'revoked' },
    });
    expect(ended.json()).toEqual({ ended: 1 });
    expect(
      (await inject({ method: 'GET', url: '/console/session', headers: { cookie: c.cookie } })).statusCode,
    ).toBe(401);
    const forged = `cs_session=${'A'.repeat(43)}`;
    expect(
      (await inject({ method: 'GET', url: '/console/session', headers: { cookie: forged } })).statusCode,
    ).toBe(401);
    const audit = await env.store.db.query<{ action: string }>(
      `SELECT action FROM audit_log WHERE action LIKE 'console.%' ORDER BY seq`,
    );
    expect(audit.rows.map((x) => x.action)).toEqual(
      expect.arrayContaining(['console.signin', 'console.signout']),
    );
  });

  it('the one-click sign-in exists only in development mode', async () => {
    env.service.deps.config.console.devSignIn = false;
    try {
      const r = await inject({ method: 'POST', url: '/console/auth/dev', payload: {} });
      expect(r.statusCode).toBe(404);
    } finally {
      env.service.deps.config.console.devSignIn = true;
    }
  });
});

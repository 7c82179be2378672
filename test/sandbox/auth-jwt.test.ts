/**
 * The sandbox as a participant with JWT auth on: the token endpoint issues
 * ES256 JWTs that verify with the JWKS its OIDC discovery document names; the
 * Ledger API accepts them (the user is `sub`) and refuses expired, foreign-
 * audience, foreign-key, tampered and unsigned tokens with Canton's 401; a
 * token for a user the participant lacks is 403; HS256 shared-secret tokens
 * pass only with the unsafe HMAC option; static tokens keep working.
 */
import { generateKeyPairSync } from 'node:crypto';
import { join } from 'node:path';
import { createRemoteJWKSet, decodeProtectedHeader, type JWTPayload, jwtVerify, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_AUDIENCE, SandboxAuth, SandboxAuthConfigError } from '../../src/sandbox/auth.js';
import { LEDGER_API_USER, VALIDATOR_USER } from '../../src/sandbox/network.js';
import { buildSandboxApp, type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { sandboxSigningKey } from '../../src/sandbox/signing-key.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';

const SEED = 'auth-jwt-test';
const HMAC_SECRET = 'unsafe';
const spec = loadSpec(join(SPECS_DIR, 'canton-ledger-api/openapi-3.5.1.yaml'));
const key = sandboxSigningKey(SEED);
const now = () => Math.floor(Date.now() / 1000);

/** A JWT signed with the sandbox's own key (same seed, same key), claims as given. */
async function sandboxSigned(claims: JWTPayload, signWith = key.privateKey): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: key.kid }).sign(signWith);
}

/** A token as the Wallet SDK's `self_signed` method makes it (HS256 over a shared secret). */
async function selfSigned(sub: string, secret: string, aud = DEFAULT_AUDIENCE): Promise<string> {
  return new SignJWT({ sub, aud, scope: '', iat: now(), exp: now() + 3600, iss: 'unsafe-auth' })
    .setProtectedHeader({ alg: 'HS256' })
    .sign(new TextEncoder().encode(secret));
}

let sb: RunningSandbox;
let staticJwt: string;

beforeAll(async () => {
  staticJwt = await sandboxSigned({ sub: VALIDATOR_USER, aud: DEFAULT_AUDIENCE, exp: now() + 3600 });
  sb = await startSandbox({
    seed: SEED,
    timers: false,
    auth: {
      required: true,
      clients: {
        wallet: { secret: 'wallet-s3cret', userId: LEDGER_API_USER },
        ghost: { secret: 'ghost-s3cret', userId: 'no-such-user' },
      },
      tokens: { 'opaque-static-7c1d': LEDGER_API_USER, [staticJwt]: VALIDATOR_USER },
      unsafeHmacSecret: HMAC_SECRET,
    },
  });
}, 60_000);
afterAll(async () => sb?.close());

/** Client credentials as the Wallet SDK sends them: Basic auth, empty scope and audience. */
async function tokenFor(clientId: string, secret: string, form: Record<string, string> = {}) {
  const res = await fetch(sb.urls.oauthToken, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${btoa(`${clientId}:${secret}`)}`,
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope: '', audience: '', ...form }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as {
    access_token: string;
    token_type: string;
    expires_in: number;
    scope: string;
  };
}

async function whoAmI(token: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${sb.urls.ledgerApi}/v2/authenticated-user`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A 401 in Canton's shape whose reason matches and never quotes the token. */
async function expectUnauthenticated(token: string, reason: RegExp): Promise<void> {
  const r = await whoAmI(token);
  expect(r.status).toBe(401);
  expect(validateAgainst(spec, 'JsCantonError', r.body)).toEqual([]);
  expect(r.body.code).toBe('UNAUTHENTICATED');
  expect((r.body.context as { reason: string }).reason).toMatch(reason);
  const text = JSON.stringify(r.body);
  for (const part of token.split('.')) if (part.length > 8) expect(text).not.toContain(part);
}

describe('the sandbox as an OIDC token issuer', () => {
  it('publishes a discovery document naming the token endpoint and the JWKS', async () => {
    const res = await fetch(sb.urls.oidcDiscovery);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as Record<string, unknown>;
    expect(doc).toMatchObject({
      issuer: sb.urls.origin,
      token_endpoint: sb.urls.oauthToken,
      jwks_uri: sb.urls.jwks,
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['ES256'],
    });
    expect(doc.response_types_supported).toEqual(['token']);
    const jwks = (await (await fetch(sb.urls.jwks)).json()) as { keys: Record<string, string>[] };
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: key.kid });
    expect(jwks.keys[0]).not.toHaveProperty('d');
  });

  it('issues a JWT that verifies with the JWKS from the discovery document; its sub is the user', async () => {
    const doc = (await (await fetch(sb.urls.oidcDiscovery)).json()) as { jwks_uri: string };
    const t = await tokenFor('wallet', 'wallet-s3cret');
    expect(t.token_type).toBe('Bearer');
    expect(t.expires_in).toBe(300);
    expect(t.scope).toBe('daml_ledger_api');
    const { payload, protectedHeader } = await jwtVerify(
      t.access_token,
      createRemoteJWKSet(new URL(doc.jwks_uri)),
      { issuer: sb.urls.origin, audience: DEFAULT_AUDIENCE },
    );
    expect(protectedHeader).toMatchObject({ alg: 'ES256', kid: key.kid });
    expect(payload.sub).toBe(LEDGER_API_USER);
    expect(payload.scope).toBe('daml_ledger_api');
    expect(payload.exp! - payload.iat!).toBe(300);
    expect(typeof payload.jti).toBe('string');

    const r = await whoAmI(t.access_token);
    expect(r.status).toBe(200);
    expect(validateAgainst(spec, 'GetUserResponse', r.body)).toEqual([]);
    expect((r.body.user as { id: string }).id).toBe(LEDGER_API_USER);
  });

  it('client_secret_post works too; the requested scope is kept and aud is always the sandbox audience', async () => {
    const res = await fetch(sb.urls.oauthToken, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: 'wallet',
        client_secret: 'wallet-s3cret',
        scope: 'openid daml_ledger_api',
        audience: 'https://elsewhere.example',
      }),
    });
    expect(res.status).toBe(200);
    const { access_token } = (await res.json()) as { access_token: string };
    const { payload } = await jwtVerify(access_token, key.publicKey);
    expect(payload.aud).toBe(DEFAULT_AUDIENCE);
    expect(payload.scope).toBe('openid daml_ledger_api');
    expect((await whoAmI(access_token)).status).toBe(200);
  });

  it('a wrong client secret is invalid_client and names no secret', async () => {
    const res = await fetch(sb.urls.oauthToken, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${btoa('wallet:not-the-secret')}`,
      },
      body: 'grant_type=client_credentials',
    });
    expect(res.status).toBe(401);
    const text = await res.text();
    expect(JSON.parse(text).error).toBe('invalid_client');
    expect(text).not.toContain('not-the-secret');
  });

  it('a token request whose parameters are not strings is invalid_request (400), not a server error', async () => {
    for (const body of [
      { grant_type: 'client_credentials', client_id: 'wallet', client_secret: { any: 1 } },
      { grant_type: 'client_credentials', client_id: 'wallet', client_secret: 'wallet-s3cret', scope: 5 },
      ['grant_type', 'client_credentials'],
    ]) {
      const res = await fetch(sb.urls.oauthToken, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(400);
      const answer = (await res.json()) as { error: string; error_description: string };
      expect(answer.error).toBe('invalid_request');
      expect(answer.error_description).toMatch(/form of string parameters/);
    }
  });
});

describe('tokens the participant refuses', () => {
  it('expired: past exp (beyond the clock skew allowance), and every issued token after expireAll', async () => {
    await expectUnauthenticated(
      await sandboxSigned({ sub: LEDGER_API_USER, aud: DEFAULT_AUDIENCE, exp: now() - 60 }),
      /^token expired$/,
    );
    const t = await tokenFor('wallet', 'wallet-s3cret');
    expect((await whoAmI(t.access_token)).status).toBe(200);
    const before = sb.ctx.auth.tokensIssued;
    sb.ctx.auth.expireAll();
    await expectUnauthenticated(t.access_token, /^token expired$/);
    const fresh = await tokenFor('wallet', 'wallet-s3cret');
    expect(sb.ctx.auth.tokensIssued).toBe(before + 1);
    expect((await whoAmI(fresh.access_token)).status).toBe(200);
  });

  it('another audience', async () => {
    await expectUnauthenticated(
      await sandboxSigned({ sub: LEDGER_API_USER, aud: 'https://other.example', exp: now() + 60 }),
      /audience \(aud\) is not https:\/\/canton\.network\.global/,
    );
    await expectUnauthenticated(
      await sandboxSigned({ sub: LEDGER_API_USER, exp: now() + 60 }),
      /audience|aud/,
    );
  });

  it('signed by another key (even under the sandbox key id), or by a key id not in the JWKS', async () => {
    const other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const claims = { sub: LEDGER_API_USER, aud: DEFAULT_AUDIENCE, exp: now() + 60 };
    await expectUnauthenticated(await sandboxSigned(claims, other), /^token signature does not verify$/);
    const foreignKid = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: 'someone-else' })
      .sign(other);
    await expectUnauthenticated(foreignKid, /not in the sandbox's JWKS/);
  });

  it('a tampered payload (sub changed, signature kept)', async () => {
    const { access_token } = await tokenFor('wallet', 'wallet-s3cret');
    const [h, p, s] = access_token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as JWTPayload;
    const forged = Buffer.from(JSON.stringify({ ...claims, sub: VALIDATOR_USER })).toString('base64url');
    await expectUnauthenticated(`${h}.${forged}.${s}`, /^token signature does not verify$/);
  });

  it('unsigned (alg none), or without a subject', async () => {
    const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(
      JSON.stringify({ sub: VALIDATOR_USER, aud: DEFAULT_AUDIENCE }),
    ).toString('base64url')}.`;
    await expectUnauthenticated(none, /algorithm not accepted/);
    await expectUnauthenticated(
      await sandboxSigned({ aud: DEFAULT_AUDIENCE, exp: now() + 60 }),
      /no subject \(sub\)/,
    );
  });

  it('an opaque token or client id that names an Object property (constructor, toString) is unknown', async () => {
    for (const token of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      await expectUnauthenticated(token, /unknown token/);
      // The validator's scan proxy takes any verified caller: the name must not pass as one.
      const proxy = await fetch(`${sb.urls.validator}/v0/scan-proxy/amulet-rules`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(proxy.status, token).toBe(401);
      const res = await fetch(sb.urls.oauthToken, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: token, client_secret: 'x' }),
      });
      expect(res.status, token).toBe(401);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_client');
    }
  });

  it('a valid token for a user the participant does not have: 403 PERMISSION_DENIED, as Canton', async () => {
    const { access_token } = await tokenFor('ghost', 'ghost-s3cret');
    const r = await whoAmI(access_token);
    expect(r.status).toBe(403);
    expect(validateAgainst(spec, 'JsCantonError', r.body)).toEqual([]);
    expect(r.body.code).toBe('PERMISSION_DENIED');
    expect(r.body.cause).toContain('no-such-user');
  });

  it('the validator answers a refused token with its own 401', async () => {
    const expired = await sandboxSigned({ sub: VALIDATOR_USER, aud: DEFAULT_AUDIENCE, exp: now() - 60 });
    const res = await fetch(`${sb.urls.validator}/v0/admin/users`, {
      headers: { authorization: `Bearer ${expired}` },
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: 'Unauthorized: token expired' });
  });
});

describe('HS256 shared-secret tokens (LocalNet unsafe auth) and static tokens', () => {
  it('an HS256 token over the configured secret is accepted; over another secret it is refused', async () => {
    const r = await whoAmI(await selfSigned(VALIDATOR_USER, HMAC_SECRET));
    expect(r.status).toBe(200);
    expect((r.body.user as { id: string }).id).toBe(VALIDATOR_USER);
    await expectUnauthenticated(
      await selfSigned(VALIDATOR_USER, 'not-the-secret'),
      /^token signature does not verify$/,
    );
    await expectUnauthenticated(
      await selfSigned(VALIDATOR_USER, HMAC_SECRET, 'https://other.example'),
      /audience/,
    );
  });

  it('without the unsafe HMAC secret configured, HS256 tokens are refused', async () => {
    const { app } = buildSandboxApp({ seed: SEED, timers: false, auth: { required: true } });
    try {
      const res = await app.inject({
        url: '/v2/authenticated-user',
        headers: { authorization: `Bearer ${await selfSigned(VALIDATOR_USER, HMAC_SECRET)}` },
      });
      expect(res.statusCode).toBe(401);
      expect(res.json().context.reason).toMatch(/--unsafe-hmac-secret/);
      // The same seed signs with the same key: the ES256 token of the first sandbox works here.
      const ok = await app.inject({
        url: '/v2/authenticated-user',
        headers: { authorization: `Bearer ${staticJwt}` },
      });
      expect(ok.statusCode).toBe(200);
      expect(ok.json().user.id).toBe(VALIDATOR_USER);
    } finally {
      await app.close();
    }
  });

  it('a static JWT token and an opaque static token act as their users; an unknown opaque token is 401', async () => {
    const jwt = await whoAmI(staticJwt);
    expect(jwt.status).toBe(200);
    expect((jwt.body.user as { id: string }).id).toBe(VALIDATOR_USER);
    const opaque = await whoAmI('opaque-static-7c1d');
    expect(opaque.status).toBe(200);
    expect((opaque.body.user as { id: string }).id).toBe(LEDGER_API_USER);
    await expectUnauthenticated('opaque-static-0000', /^unknown token$/);
    const none = await fetch(`${sb.urls.ledgerApi}/v2/authenticated-user`);
    expect(none.status).toBe(401);
  });

  it('a static JWT listed for a user other than its sub is a configuration error naming no token', async () => {
    const e = (() => {
      try {
        new SandboxAuth({ tokens: { [staticJwt]: LEDGER_API_USER } }, SEED);
      } catch (err) {
        return err;
      }
      return undefined;
    })();
    expect(e).toBeInstanceOf(SandboxAuthConfigError);
    expect((e as Error).message).toContain(VALIDATOR_USER);
    expect((e as Error).message).not.toContain(staticJwt.split('.')[2]!);
    expect(decodeProtectedHeader(staticJwt).kid).toBe(key.kid);
  });
});

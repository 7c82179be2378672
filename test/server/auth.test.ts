/**
 * Authentication and roles: tokens signed in the test with RS256, ES256 and
 * EdDSA keys, each way a token can be wrong (one error code each), alg none
 * and the HS/RS confusion attack, a JWKS served by a local HTTP server
 * (rotation, unknown kid, unreachable, timeout), the roles and parties claims,
 * the authorize matrix, and the fastify side: the role-declaration guard and
 * the request hook, through `inject`.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import {
  type CryptoKey,
  exportJWK,
  exportSPKI,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
} from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthError,
  type AuthErrorCode,
  createVerifier,
  installAuth,
  type Principal,
  requirePartyAccess,
  type Verifier,
} from '../../src/server/auth.js';
import { type AuthConfig, authSchema } from '../../src/server/config.js';
import {
  authorize,
  enforceRoleDeclarations,
  ROLES,
  type Role,
  type RouteRoles,
} from '../../src/server/roles.js';

const ISSUER = 'https://idp.example.com/';
const AUDIENCE = 'canton-signer';
const ALICE = `alice::1220${'a'.repeat(64)}`;
const BOB = `bob::1220${'b'.repeat(64)}`;
const now = () => Math.floor(Date.now() / 1000);

type Alg = 'RS256' | 'ES256' | 'EdDSA';
interface Pair {
  alg: Alg;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  pem: string;
  jwk: JWK;
}

async function pair(alg: Alg): Promise<Pair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, privateKey, publicKey, pem: await exportSPKI(publicKey), jwk: await exportJWK(publicKey) };
}

function claims(over: JWTPayload = {}): JWTPayload {
  return {
    iss: ISSUER,
    aud: AUDIENCE,
    sub: 'bot-1',
    exp: now() + 300,
    iat: now(),
    jti: 'token-1',
    canton_signer_roles: ['withdrawer'],
    canton_signer_parties: [ALICE],
    ...over,
  };
}

async function sign(
  key: CryptoKey | Uint8Array,
  alg: string,
  payload: JWTPayload = claims(),
  header: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT(payload).setProtectedHeader({ alg, ...header }).sign(key);
}

function authConfig(over: Record<string, unknown>): AuthConfig {
  return authSchema.parse({ issuer: ISSUER, audience: AUDIENCE, ...over });
}

const b64url = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

/** Every error the verifier threw, to check afterwards that none quotes its token. */
const seen: { token: string; error: AuthError }[] = [];

async function refusal(v: Verifier, token: string, header = `Bearer ${token}`): Promise<AuthError> {
  const e = await v.verify(header).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'the token was accepted').toBeInstanceOf(AuthError);
  seen.push({ token, error: e as AuthError });
  return e as AuthError;
}

async function expectCode(v: Verifier, token: string, code: AuthErrorCode): Promise<AuthError> {
  const e = await refusal(v, token);
  expect(e.code, e.message).toBe(code);
  return e;
}

const pairs = {} as Record<Alg, Pair>;
const others = {} as Record<Alg, Pair>;
beforeAll(async () => {
  for (const alg of ['RS256', 'ES256', 'EdDSA'] as const) {
    pairs[alg] = await pair(alg);
    others[alg] = await pair(alg);
  }
});

describe.each(['RS256', 'ES256', 'EdDSA'] as const)('%s tokens against a configured PEM key', (alg) => {
  let v: Verifier;
  beforeAll(() => {
    v = createVerifier(authConfig({ publicKeys: [{ pem: pairs[alg].pem }] }));
  });

  it('accepts a valid token and returns its principal', async () => {
    const p = await v.verify(`Bearer ${await sign(pairs[alg].privateKey, alg)}`);
    expect(p).toEqual<Principal>({
      subject: 'bot-1',
      issuer: ISSUER,
      caller: 'bot-1',
      roles: ['withdrawer'],
      parties: [ALICE],
      tokenId: 'token-1',
      expiresAt: expect.any(Number),
    });
  });

  it('refuses a token signed by another key (bad_signature)', async () => {
    await expectCode(v, await sign(others[alg].privateKey, alg), 'bad_signature');
  });

  it('refuses a token whose payload was changed after signing (bad_signature)', async () => {
    const [h, , s] = (await sign(pairs[alg].privateKey, alg)).split('.');
    const forged = `${h}.${b64url(claims({ canton_signer_roles: ['admin'] }))}.${s}`;
    await expectCode(v, forged, 'bad_signature');
  });

  it('refuses an expired token (expired), within the clock tolerance it passes', async () => {
    await expectCode(v, await sign(pairs[alg].privateKey, alg, claims({ exp: now() - 60 })), 'expired');
    await expect(
      v.verify(`Bearer ${await sign(pairs[alg].privateKey, alg, claims({ exp: now() - 10 }))}`),
    ).resolves.toMatchObject({ subject: 'bot-1' });
  });

  it('refuses a token not valid yet (not_yet_valid)', async () => {
    await expectCode(
      v,
      await sign(pairs[alg].privateKey, alg, claims({ nbf: now() + 120 })),
      'not_yet_valid',
    );
  });

  it('refuses a token from another issuer (wrong_issuer) or for another audience (wrong_audience)', async () => {
    await expectCode(
      v,
      await sign(pairs[alg].privateKey, alg, claims({ iss: 'https://evil/' })),
      'wrong_issuer',
    );
    await expectCode(v, await sign(pairs[alg].privateKey, alg, claims({ aud: 'other' })), 'wrong_audience');
    const { iss: _iss, ...noIss } = claims();
    await expectCode(v, await sign(pairs[alg].privateKey, alg, noIss), 'wrong_issuer');
  });

  it('refuses a token without exp or sub (malformed)', async () => {
    const { exp: _exp, ...noExp } = claims();
    await expectCode(v, await sign(pairs[alg].privateKey, alg, noExp), 'malformed');
    const { sub: _sub, ...noSub } = claims();
    await expectCode(v, await sign(pairs[alg].privateKey, alg, noSub), 'malformed');
  });
});

describe('token and header shape', () => {
  let v: Verifier;
  beforeAll(() => {
    v = createVerifier(authConfig({ publicKeys: [{ pem: pairs.RS256.pem }] }));
  });

  it('needs a token (missing_token)', async () => {
    for (const h of [undefined, '', '   ']) {
      const e = await v.verify(h).catch((err: AuthError) => err);
      expect((e as AuthError).code).toBe('missing_token');
      expect((e as AuthError).statusCode).toBe(401);
    }
  });

  it('refuses other schemes and non-JWTs (malformed)', async () => {
    const t = await sign(pairs.RS256.privateKey, 'RS256');
    expect((await refusal(v, t, `Basic ${t}`)).code).toBe('malformed');
    expect((await refusal(v, t, `Bearer ${t} extra`)).code).toBe('malformed');
    await expectCode(v, 'abc', 'malformed');
    await expectCode(v, 'a.b.c', 'malformed');
    await expectCode(v, `${b64url({ alg: 'RS256' })}.%%%.x`, 'malformed');
  });

  it('refuses alg none, however it is spelled (alg_not_allowed)', async () => {
    for (const alg of ['none', 'None', 'NONE'])
      await expectCode(v, `${b64url({ alg, typ: 'JWT' })}.${b64url(claims())}.`, 'alg_not_allowed');
  });

  it('refuses an algorithm off the allow-list even with a key that fits', async () => {
    const pss = await generateKeyPair('PS256', { extractable: true });
    const pssVerifier = createVerifier(
      authConfig({ publicKeys: [{ pem: await exportSPKI(pss.publicKey) }] }),
    );
    await expectCode(pssVerifier, await sign(pss.privateKey, 'PS256'), 'alg_not_allowed');
    const only = createVerifier(
      authConfig({ algorithms: ['ES256'], publicKeys: [{ pem: pairs.ES256.pem }] }),
    );
    await expectCode(only, await sign(pairs.RS256.privateKey, 'RS256'), 'alg_not_allowed');
    await expectCode(only, await sign(pairs.EdDSA.privateKey, 'EdDSA'), 'alg_not_allowed');
  });

  it('refuses the HS/RS confusion: a token HMAC-signed with the public key PEM', async () => {
    const forged = await sign(
      new TextEncoder().encode(pairs.RS256.pem),
      'HS256',
      claims({ canton_signer_roles: ['admin'] }),
    );
    await expectCode(v, forged, 'alg_not_allowed');
    // Even where HS256 is allowed (with its own secret), the public key is never the HMAC key.
    const secret = 's'.repeat(32);
    const both = createVerifier(
      authConfig({
        algorithms: ['RS256', 'HS256'],
        sharedSecret: secret,
        publicKeys: [{ pem: pairs.RS256.pem }],
      }),
    );
    await expectCode(both, forged, 'bad_signature');
    const jwkForged = await sign(new TextEncoder().encode(JSON.stringify(pairs.RS256.jwk)), 'HS256');
    await expectCode(both, jwkForged, 'bad_signature');
    await expect(
      both.verify(`Bearer ${await sign(new TextEncoder().encode(secret), 'HS256')}`),
    ).resolves.toMatchObject({ roles: ['withdrawer'] });
    // And with only RS keys configured, an HS384 token cannot pass either.
    await expectCode(
      both,
      await sign(new TextEncoder().encode(secret.repeat(2)), 'HS384'),
      'alg_not_allowed',
    );
  });

  it('finds the right key among several without kid, and selects by kid when given', async () => {
    const multi = createVerifier(
      authConfig({
        publicKeys: [
          { pem: others.RS256.pem },
          { pem: pairs.RS256.pem },
          { pem: pairs.ES256.pem, kid: 'ec-1' },
          { jwk: { ...pairs.EdDSA.jwk, kid: 'ed-1' } },
        ],
      }),
    );
    for (const alg of ['RS256', 'ES256', 'EdDSA'] as const)
      await expect(multi.verify(`Bearer ${await sign(pairs[alg].privateKey, alg)}`)).resolves.toMatchObject({
        subject: 'bot-1',
      });
    await expect(
      multi.verify(`Bearer ${await sign(pairs.ES256.privateKey, 'ES256', claims(), { kid: 'ec-1' })}`),
    ).resolves.toMatchObject({ subject: 'bot-1' });
    await expectCode(
      multi,
      await sign(pairs.ES256.privateKey, 'ES256', claims(), { kid: 'ec-2' }),
      'bad_signature',
    );
    await expectCode(multi, await sign(others.EdDSA.privateKey, 'EdDSA'), 'bad_signature');
  });

  it('accepts any of several issuers and audiences, honours a configured clock tolerance', async () => {
    const v2 = createVerifier(
      authConfig({
        issuer: [ISSUER, 'https://idp2/'],
        audience: ['a1', 'a2'],
        clockToleranceSeconds: 0,
        publicKeys: [{ pem: pairs.ES256.pem }],
      }),
    );
    const t = await sign(pairs.ES256.privateKey, 'ES256', claims({ iss: 'https://idp2/', aud: ['x', 'a2'] }));
    await expect(v2.verify(`Bearer ${t}`)).resolves.toMatchObject({ subject: 'bot-1' });
    await expectCode(
      v2,
      await sign(pairs.ES256.privateKey, 'ES256', claims({ aud: 'a1', exp: now() - 2 })),
      'expired',
    );
  });

  it('tells callers of several issuers apart by issuer and subject; with one issuer the subject names them', async () => {
    const two = createVerifier(
      authConfig({ issuer: [ISSUER, 'https://idp2/'], publicKeys: [{ pem: pairs.ES256.pem }] }),
    );
    const a = await two.verify(`Bearer ${await sign(pairs.ES256.privateKey, 'ES256')}`);
    const b = await two.verify(
      `Bearer ${await sign(pairs.ES256.privateKey, 'ES256', claims({ iss: 'https://idp2/' }))}`,
    );
    // The same sub from two identity providers: two callers (idempotency keys and audit rows apart).
    expect(a).toMatchObject({ subject: 'bot-1', issuer: ISSUER, caller: JSON.stringify([ISSUER, 'bot-1']) });
    expect(b).toMatchObject({
      subject: 'bot-1',
      issuer: 'https://idp2/',
      caller: '["https://idp2/","bot-1"]',
    });
    expect(a.caller).not.toBe(b.caller);
    // No pair of (issuer, subject) texts can spell another pair's caller.
    const c = await two.verify(
      `Bearer ${await sign(pairs.ES256.privateKey, 'ES256', claims({ iss: 'https://idp2/', sub: '","bot-1' }))}`,
    );
    expect(c.caller).not.toBe(a.caller);
    // One issuer (also when listed twice): the subject alone, as before.
    const one = createVerifier(
      authConfig({ issuer: [ISSUER, ISSUER], publicKeys: [{ pem: pairs.ES256.pem }] }),
    );
    expect((await one.verify(`Bearer ${await sign(pairs.ES256.privateKey, 'ES256')}`)).caller).toBe('bot-1');
  });

  it('with auth.maxTokenAgeSeconds, needs iat and refuses an older token whatever its exp', async () => {
    const v3 = createVerifier(
      authConfig({
        maxTokenAgeSeconds: 600,
        clockToleranceSeconds: 0,
        publicKeys: [{ pem: pairs.ES256.pem }],
      }),
    );
    const ok = claims({ iat: now() - 590, exp: now() + 86_400 });
    await expect(
      v3.verify(`Bearer ${await sign(pairs.ES256.privateKey, 'ES256', ok)}`),
    ).resolves.toMatchObject({
      subject: 'bot-1',
    });
    const old = await expectCode(
      v3,
      await sign(pairs.ES256.privateKey, 'ES256', claims({ iat: now() - 700, exp: now() + 86_400 })),
      'expired',
    );
    expect(old.message).toMatch(/older than this service accepts/);
    const { iat: _drop, ...noIat } = claims();
    const missing = await expectCode(v3, await sign(pairs.ES256.privateKey, 'ES256', noIat), 'malformed');
    expect(missing.message).toMatch(/iat/);
    await expectCode(
      v3,
      await sign(pairs.ES256.privateKey, 'ES256', claims({ iat: now() + 120 })),
      'not_yet_valid',
    );
    // Without the setting an old iat is fine while exp allows; an iat that is not a time is malformed either way.
    const plain = createVerifier(authConfig({ publicKeys: [{ pem: pairs.ES256.pem }] }));
    for (const v of [v3, plain])
      await expectCode(
        v,
        await sign(pairs.ES256.privateKey, 'ES256', claims({ iat: 'x' as never })),
        'malformed',
      );
    await expect(
      plain.verify(`Bearer ${await sign(pairs.ES256.privateKey, 'ES256', claims({ iat: now() - 700 }))}`),
    ).resolves.toBeDefined();
  });

  it('with auth.tokenType, needs that typ header (application/ prefix and case aside)', async () => {
    const v4 = createVerifier(authConfig({ tokenType: 'at+jwt', publicKeys: [{ pem: pairs.ES256.pem }] }));
    for (const typ of ['at+jwt', 'application/at+jwt', 'AT+JWT'])
      await expect(
        v4.verify(`Bearer ${await sign(pairs.ES256.privateKey, 'ES256', claims(), { typ })}`),
      ).resolves.toMatchObject({ subject: 'bot-1' });
    for (const header of [{ typ: 'JWT' }, {}]) {
      const e = await expectCode(
        v4,
        await sign(pairs.ES256.privateKey, 'ES256', claims(), header),
        'malformed',
      );
      expect(e.message).toMatch(/typ/);
    }
  });

  it('uses the injected clock', async () => {
    const t = await sign(pairs.ES256.privateKey, 'ES256', claims({ exp: 2_000_000_000, nbf: 1_999_999_000 }));
    const cfg = authConfig({ publicKeys: [{ pem: pairs.ES256.pem }] });
    await expect(
      createVerifier(cfg, { now: () => new Date(1_999_999_500_000) }).verify(`Bearer ${t}`),
    ).resolves.toMatchObject({ subject: 'bot-1' });
    await expectCode(createVerifier(cfg, { now: () => new Date(2_000_000_100_000) }), t, 'expired');
    await expectCode(createVerifier(cfg), t, 'not_yet_valid');
  });
});

describe('roles and parties claims', () => {
  const key = () => pairs.EdDSA;
  const verifierWith = (over: Record<string, unknown> = {}) =>
    createVerifier(authConfig({ publicKeys: [{ pem: key().pem }], ...over }));
  const token = (c: JWTPayload) => sign(key().privateKey, 'EdDSA', claims(c));

  it('reads roles from an array or a space-separated string, ignoring unknown roles', async () => {
    const v = verifierWith();
    await expect(
      v.verify(`Bearer ${await token({ canton_signer_roles: 'operator  auditor other' })}`),
    ).resolves.toMatchObject({ roles: ['operator', 'auditor'], parties: [] });
    await expect(
      v.verify(`Bearer ${await token({ canton_signer_roles: ['admin', 'admin', 'x'] })}`),
    ).resolves.toMatchObject({ roles: ['admin'] });
  });

  it('refuses a token without any known role (no_role, 403)', async () => {
    const v = verifierWith();
    for (const roles of [undefined, [], '', 'root superuser', ['Admin']]) {
      const e = await expectCode(v, await token({ canton_signer_roles: roles }), 'no_role');
      expect(e.statusCode).toBe(403);
    }
  });

  it('refuses claims of the wrong shape (malformed)', async () => {
    const v = verifierWith();
    await expectCode(v, await token({ canton_signer_roles: 7 }), 'malformed');
    await expectCode(v, await token({ canton_signer_roles: ['withdrawer', 1] }), 'malformed');
    await expectCode(v, await token({ canton_signer_parties: { a: ALICE } }), 'malformed');
    await expectCode(v, await token({ canton_signer_parties: ['not-a-party'] }), 'malformed');
  });

  it('gives a withdrawer the parties of its token (array or string) and others none', async () => {
    const v = verifierWith();
    await expect(
      v.verify(`Bearer ${await token({ canton_signer_parties: `${ALICE} ${BOB}` })}`),
    ).resolves.toMatchObject({ parties: [ALICE, BOB] });
    await expect(
      v.verify(
        `Bearer ${await token({ canton_signer_roles: ['operator'], canton_signer_parties: [ALICE] })}`,
      ),
    ).resolves.toMatchObject({ roles: ['operator'], parties: [] });
    await expect(
      v.verify(`Bearer ${await token({ canton_signer_parties: undefined })}`),
    ).resolves.toMatchObject({ roles: ['withdrawer'], parties: [] });
  });

  it('reads configured claim names, including namespaced and nested ones', async () => {
    const v = verifierWith({ rolesClaim: 'https://example.com/roles', partiesClaim: 'ext.canton.parties' });
    const p = await v.verify(
      `Bearer ${await token({
        canton_signer_roles: undefined,
        'https://example.com/roles': ['withdrawer'],
        ext: { canton: { parties: [BOB] } },
      })}`,
    );
    expect(p).toMatchObject({ roles: ['withdrawer'], parties: [BOB] });
    await expectCode(v, await token({}), 'no_role');
  });
});

describe('JWKS from a URL', () => {
  let server: Server;
  let base: string;
  let keys: JWK[] = [];
  let mode: 'ok' | 'error' | 'hang' = 'ok';
  let fetches = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      fetches++;
      if (mode === 'hang') return; // never answers
      if (mode === 'error' || req.url !== '/jwks') {
        res.writeHead(500).end('no');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const jwksVerifier = (over: Record<string, unknown> = {}) =>
    createVerifier(authConfig({ jwksUrl: `${base}/jwks`, jwksTimeoutMs: 300, ...over }));

  it('verifies RS256, ES256 and EdDSA tokens against the served keys, and caches them', async () => {
    mode = 'ok';
    keys = (['RS256', 'ES256', 'EdDSA'] as const).map((a) => ({
      ...pairs[a].jwk,
      kid: a,
      alg: a,
      use: 'sig',
    }));
    const v = jwksVerifier();
    const before = fetches;
    for (const alg of ['RS256', 'ES256', 'EdDSA'] as const)
      await expect(
        v.verify(`Bearer ${await sign(pairs[alg].privateKey, alg, claims(), { kid: alg })}`),
      ).resolves.toMatchObject({ subject: 'bot-1' });
    expect(fetches - before).toBe(1);
  });

  it('refuses an unknown kid and a key of the set signing for another kid', async () => {
    mode = 'ok';
    keys = [{ ...pairs.ES256.jwk, kid: 'k1' }];
    const v = jwksVerifier();
    await expectCode(
      v,
      await sign(others.ES256.privateKey, 'ES256', claims(), { kid: 'k2' }),
      'bad_signature',
    );
    await expectCode(
      v,
      await sign(others.ES256.privateKey, 'ES256', claims(), { kid: 'k1' }),
      'bad_signature',
    );
  });

  it('picks up a rotated key', async () => {
    mode = 'ok';
    keys = [{ ...pairs.ES256.jwk, kid: 'old' }];
    const v = jwksVerifier({ jwksCacheSeconds: 0 });
    await expect(
      v.verify(`Bearer ${await sign(pairs.ES256.privateKey, 'ES256', claims(), { kid: 'old' })}`),
    ).resolves.toBeDefined();
    keys = [{ ...others.ES256.jwk, kid: 'new' }];
    await expect(
      v.verify(`Bearer ${await sign(others.ES256.privateKey, 'ES256', claims(), { kid: 'new' })}`),
    ).resolves.toBeDefined();
  });

  it('says clearly when the JWKS cannot be had (keys_unavailable, 503)', async () => {
    mode = 'error';
    const t = await sign(pairs.ES256.privateKey, 'ES256', claims(), { kid: 'k1' });
    let e = await expectCode(jwksVerifier(), t, 'keys_unavailable');
    expect(e.statusCode).toBe(503);
    expect(e.message).toContain(`${base}/jwks`);
    mode = 'hang';
    e = await expectCode(jwksVerifier(), t, 'keys_unavailable');
    expect(e.message).toMatch(/timed out after 300 ms/);
    // A port nobody listens on.
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const down = createVerifier(authConfig({ jwksUrl: `http://127.0.0.1:${port}/jwks` }));
    e = await expectCode(down, t, 'keys_unavailable');
    expect(e.message).toMatch(/unreachable \(ECONNREFUSED\)/);
    mode = 'ok';
  });

  describe('remembered tokens', () => {
    // jwksCacheSeconds 0: jose fetches the set on every verification, so a fetch counts a real verification.
    let clock = 1_900_000_000_000;
    const at = () => new Date(clock);
    const remembering = (opts: { cacheSize?: number; cacheTtlMs?: number } = {}) =>
      createVerifier(
        authConfig({ jwksUrl: `${base}/jwks`, jwksCacheSeconds: 0, clockToleranceSeconds: 30 }),
        {
          now: at,
          cacheTtlMs: 60_000,
          ...opts,
        },
      );
    const secs = () => Math.floor(clock / 1000);
    const es = (over: JWTPayload = {}) =>
      sign(pairs.ES256.privateKey, 'ES256', claims({ exp: secs() + 300, iat: secs(), ...over }), {
        kid: 'k',
      });

    it('verifies a token once and then accepts the same token text without verifying it again', async () => {
      mode = 'ok';
      keys = [{ ...pairs.ES256.jwk, kid: 'k' }];
      clock = 1_900_000_000_000;
      const v = remembering();
      const t = await es();
      const before = fetches;
      const p1 = await v.verify(`Bearer ${t}`);
      expect(fetches - before).toBe(1);
      // A principal changed by its receiver does not change the remembered one.
      p1.roles.push('admin');
      p1.parties.length = 0;
      const p2 = await v.verify(`Bearer ${t}`);
      expect(fetches - before).toBe(1);
      expect(p2).toEqual<Principal>({
        subject: 'bot-1',
        issuer: ISSUER,
        caller: 'bot-1',
        roles: ['withdrawer'],
        parties: [ALICE],
        tokenId: 'token-1',
        expiresAt: expect.any(Number),
      });
      // Another token is verified (and a forged copy of the remembered one's payload is refused).
      const [h, , sig] = t.split('.');
      await expectCode(
        v,
        `${h}.${b64url(claims({ canton_signer_roles: ['admin'] }))}.${sig}`,
        'bad_signature',
      );
    });

    it('still refuses a remembered token once it expired or before its nbf, with the same tolerance', async () => {
      mode = 'ok';
      keys = [{ ...pairs.ES256.jwk, kid: 'k' }];
      clock = 1_900_000_000_000;
      const v = remembering();
      const t = await es({ exp: secs() + 10, nbf: secs() - 5 });
      await expect(v.verify(`Bearer ${t}`)).resolves.toMatchObject({ subject: 'bot-1' });
      const before = fetches;
      clock += 39_000; // exp + 29 s: within the 30 s tolerance
      await expect(v.verify(`Bearer ${t}`)).resolves.toMatchObject({ subject: 'bot-1' });
      expect(fetches).toBe(before);
      clock += 1_000; // exp + 30 s: expired, as jose decides
      await expectCode(v, t, 'expired');
      clock = 1_900_000_000_000 - 36_000; // nbf - 31 s
      await expectCode(v, t, 'not_yet_valid');
    });

    it('refuses a remembered token once it is older than auth.maxTokenAgeSeconds', async () => {
      mode = 'ok';
      keys = [{ ...pairs.ES256.jwk, kid: 'k' }];
      clock = 1_900_000_000_000;
      const v = createVerifier(
        authConfig({
          jwksUrl: `${base}/jwks`,
          jwksCacheSeconds: 0,
          clockToleranceSeconds: 30,
          maxTokenAgeSeconds: 60,
        }),
        { now: at, cacheTtlMs: 600_000 },
      );
      const t = await es({ exp: secs() + 3_600 });
      await expect(v.verify(`Bearer ${t}`)).resolves.toMatchObject({ subject: 'bot-1' });
      const before = fetches;
      clock += 89_000; // iat + 89 s: within max age + tolerance, still remembered
      await expect(v.verify(`Bearer ${t}`)).resolves.toMatchObject({ subject: 'bot-1' });
      expect(fetches).toBe(before);
      clock += 2_000; // iat + 91 s
      const e = await expectCode(v, t, 'expired');
      expect(e.message).toMatch(/older than this service accepts/);
    });

    it('verifies again after the time limit: a key removed from the set stops working', async () => {
      mode = 'ok';
      keys = [{ ...pairs.ES256.jwk, kid: 'k' }];
      clock = 1_900_000_000_000;
      const v = remembering({ cacheTtlMs: 5_000 });
      const t = await es();
      await expect(v.verify(`Bearer ${t}`)).resolves.toBeDefined();
      keys = [{ ...others.ES256.jwk, kid: 'k2' }];
      clock += 4_000;
      await expect(v.verify(`Bearer ${t}`)).resolves.toBeDefined();
      clock += 2_000;
      await expectCode(v, t, 'bad_signature');
      // A refused token is not remembered: it stays refused.
      keys = [{ ...pairs.ES256.jwk, kid: 'k' }];
      const before = fetches;
      await expect(v.verify(`Bearer ${t}`)).resolves.toBeDefined();
      expect(fetches - before).toBe(1);
    });

    it('remembers at most cacheSize tokens, and none by default when the JWKS itself is not cached', async () => {
      mode = 'ok';
      keys = [{ ...pairs.ES256.jwk, kid: 'k' }];
      clock = 1_900_000_000_000;
      const v = remembering({ cacheSize: 1 });
      const a = await es({ jti: 'a' });
      const b = await es({ jti: 'b' });
      let before = fetches;
      await v.verify(`Bearer ${a}`);
      await v.verify(`Bearer ${b}`);
      await v.verify(`Bearer ${a}`); // b pushed a out
      expect(fetches - before).toBe(3);
      await v.verify(`Bearer ${a}`);
      expect(fetches - before).toBe(3);
      const plain = createVerifier(authConfig({ jwksUrl: `${base}/jwks`, jwksCacheSeconds: 0 }), { now: at });
      before = fetches;
      await plain.verify(`Bearer ${a}`);
      await plain.verify(`Bearer ${a}`);
      expect(fetches - before).toBe(2);
    });
  });

  it('refuses alg none and HS256 before asking the JWKS', async () => {
    mode = 'ok';
    keys = [{ ...pairs.RS256.jwk, kid: 'r' }];
    const v = jwksVerifier();
    const before = fetches;
    await expectCode(v, `${b64url({ alg: 'none', kid: 'r' })}.${b64url(claims())}.`, 'alg_not_allowed');
    await expectCode(
      v,
      await sign(new TextEncoder().encode(pairs.RS256.pem), 'HS256', claims(), { kid: 'r' }),
      'alg_not_allowed',
    );
    expect(fetches).toBe(before);
  });
});

describe('error messages', () => {
  it('never contain the token or any part of it', () => {
    expect(seen.length).toBeGreaterThan(30);
    for (const { token, error } of seen) {
      for (const part of token.split('.').filter((p) => p.length >= 8))
        expect(error.message, error.code).not.toContain(part);
      expect(JSON.stringify(error)).not.toContain(token);
    }
  });
});

describe('authorize', () => {
  const principal = (roles: Role[], parties: string[] = []): Principal => ({
    subject: 's',
    issuer: ISSUER,
    caller: 's',
    roles,
    parties,
  });
  const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

  it('grants exactly the declared roles, the auditor only for reads', () => {
    const declarations: RouteRoles[] = [
      ['admin'],
      ['operator'],
      ['withdrawer'],
      ['approver'],
      ['auditor'],
      ['admin', 'auditor'],
      ['operator', 'withdrawer'],
    ];
    for (const declared of declarations)
      for (const role of ROLES)
        for (const method of METHODS) {
          const a = authorize(principal([role], [ALICE]), { method, roles: declared });
          const expected =
            (declared as readonly Role[]).includes(role) &&
            (role !== 'auditor' || method === 'GET' || method === 'HEAD');
          expect(a.allowed, `${role} ${method} ${JSON.stringify(declared)}`).toBe(expected);
        }
  });

  it('lets anyone call a public route, nobody without a token a protected one', () => {
    expect(authorize(null, { method: 'GET', roles: 'public' })).toEqual({ allowed: true, public: true });
    expect(authorize(null, { method: 'GET', roles: ['auditor'] }).allowed).toBe(false);
    expect(authorize(principal(['admin']), { method: 'GET', roles: undefined }).allowed).toBe(false);
    expect(authorize(principal(['admin']), { method: 'GET', roles: [] }).allowed).toBe(false);
  });

  it('limits a withdrawer to the parties of its token; other roles are not limited', () => {
    const w = principal(['withdrawer'], [ALICE]);
    const route = { method: 'POST', roles: ['operator', 'withdrawer'] as const };
    expect(authorize(w, route)).toMatchObject({ allowed: true, parties: [ALICE] });
    expect(authorize(w, route, { party: ALICE }).allowed).toBe(true);
    expect(authorize(w, route, { party: BOB })).toMatchObject({ allowed: false });
    expect(authorize(principal(['withdrawer']), route, { party: ALICE }).allowed).toBe(false);
    expect(authorize(principal(['operator']), route, { party: BOB })).toMatchObject({
      allowed: true,
      parties: 'any',
    });
    // withdrawer + operator: the operator grant is not party-limited
    expect(authorize(principal(['withdrawer', 'operator'], [ALICE]), route, { party: BOB }).allowed).toBe(
      true,
    );
  });

  it('gives an admin no withdrawer rights unless its token also says withdrawer', () => {
    const route = { method: 'POST', roles: ['withdrawer'] as const };
    expect(authorize(principal(['admin']), route).allowed).toBe(false);
    expect(authorize(principal(['admin', 'withdrawer'], [BOB]), route, { party: BOB }).allowed).toBe(true);
    expect(authorize(principal(['admin', 'withdrawer'], [BOB]), route, { party: ALICE }).allowed).toBe(false);
  });
});

describe('every route declares its roles', () => {
  it('refuses to start with a route without a declaration, naming every such route', async () => {
    const app = Fastify();
    enforceRoleDeclarations(app);
    app.get('/v1/ok', { config: { roles: ['admin'] } }, async () => 'ok');
    app.get('/v1/naked', async () => 'oops');
    await app.register(async (child) => {
      child.post('/v1/child', async () => 'oops');
    });
    const e = await app.ready().then(
      () => undefined,
      (err: Error) => err,
    );
    expect(e?.message).toMatch(/GET \/v1\/naked declares no roles/);
    expect(e?.message).toMatch(/POST \/v1\/child declares no roles/);
    expect(e?.message).not.toMatch(/\/v1\/ok/);
  });

  it('refuses invalid declarations: empty, unknown roles, an auditor allowed to write', async () => {
    for (const [route, pattern] of [
      [{ method: 'GET', roles: [] }, /non-empty list/],
      [{ method: 'GET', roles: ['root'] }, /unknown roles: root/],
      [{ method: 'GET', roles: 'everyone' }, /non-empty list/],
      [{ method: 'DELETE', roles: ['auditor', 'admin'] }, /DELETE \/x gives the read-only auditor/],
    ] as const) {
      const app = Fastify();
      enforceRoleDeclarations(app);
      app.route({
        method: route.method,
        url: '/x',
        config: { roles: route.roles as unknown as RouteRoles },
        handler: async () => 'x',
      });
      await expect(app.ready()).rejects.toThrow(pattern);
    }
  });

  it('returns the route table for tests that walk every route', async () => {
    const app = Fastify();
    const table = enforceRoleDeclarations(app);
    app.get('/h', { config: { roles: 'public' } }, async () => 'ok');
    app.route({
      method: ['POST', 'PUT'],
      url: '/w',
      config: { roles: ['operator'] },
      handler: async () => 'ok',
    });
    await app.ready();
    expect(table).toEqual(
      expect.arrayContaining([
        { method: 'GET', url: '/h', roles: 'public' },
        { method: 'POST', url: '/w', roles: ['operator'] },
        { method: 'PUT', url: '/w', roles: ['operator'] },
      ]),
    );
    await app.close();
  });
});

describe('the request hook (fastify inject)', () => {
  let app: FastifyInstance;
  const tok = (c: JWTPayload) => sign(pairs.ES256.privateKey, 'ES256', claims(c));

  beforeAll(async () => {
    app = Fastify();
    enforceRoleDeclarations(app);
    installAuth(app, createVerifier(authConfig({ publicKeys: [{ pem: pairs.ES256.pem }] })));
    app.get('/health', { config: { roles: 'public' } }, async (req) => ({ principal: req.principal }));
    app.get('/v1/audit', { config: { roles: ['auditor', 'admin'] } }, async (req) => ({
      who: req.principal?.subject,
    }));
    app.post('/v1/keys', { config: { roles: ['admin'] } }, async () => ({ ok: true }));
    await app.register(
      async (child) => {
        child.post<{ Params: { party: string } }>(
          '/parties/:party/withdrawals',
          { config: { roles: ['operator', 'withdrawer'] } },
          async (req) => {
            requirePartyAccess(req, req.params.party);
            return { scope: req.access && 'parties' in req.access ? req.access.parties : null };
          },
        );
      },
      { prefix: '/v1' },
    );
    await app.ready();
  });
  afterAll(() => app.close());

  it('serves public routes without a token', async () => {
    const r = await app.inject({ method: 'GET', url: '/health' });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ principal: null });
  });

  it('answers 401 with a challenge without a token or with a bad one', async () => {
    let r = await app.inject({ method: 'GET', url: '/v1/audit' });
    expect(r.statusCode).toBe(401);
    expect(r.json()).toMatchObject({ code: 'missing_token' });
    expect(r.headers['www-authenticate']).toBe('Bearer realm="canton-signer"');
    const expired = await tok({ canton_signer_roles: ['auditor'], exp: now() - 3600 });
    r = await app.inject({
      method: 'GET',
      url: '/v1/audit',
      headers: { authorization: `Bearer ${expired}` },
    });
    expect(r.statusCode).toBe(401);
    expect(r.json()).toMatchObject({ code: 'expired' });
    expect(r.headers['www-authenticate']).toMatch(/error="invalid_token"/);
    expect(r.body).not.toContain(expired.split('.')[1]!);
  });

  it('answers 403 when the roles do not reach the route, and keeps the auditor to reads', async () => {
    const auditor = `Bearer ${await tok({ canton_signer_roles: ['auditor'] })}`;
    let r = await app.inject({ method: 'GET', url: '/v1/audit', headers: { authorization: auditor } });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ who: 'bot-1' });
    r = await app.inject({ method: 'HEAD', url: '/v1/audit', headers: { authorization: auditor } });
    expect(r.statusCode).toBe(200);
    r = await app.inject({ method: 'POST', url: '/v1/keys', headers: { authorization: auditor } });
    expect(r.statusCode).toBe(403);
    expect(r.json()).toMatchObject({ code: 'forbidden' });
    r = await app.inject({
      method: 'GET',
      url: '/v1/audit',
      headers: { authorization: `Bearer ${await tok({ canton_signer_roles: ['withdrawer'] })}` },
    });
    expect(r.statusCode).toBe(403);
  });

  it('limits a withdrawer to its parties inside the handler', async () => {
    const w = `Bearer ${await tok({})}`;
    let r = await app.inject({
      method: 'POST',
      url: `/v1/parties/${ALICE}/withdrawals`,
      headers: { authorization: w },
    });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ scope: [ALICE] });
    r = await app.inject({
      method: 'POST',
      url: `/v1/parties/${BOB}/withdrawals`,
      headers: { authorization: w },
    });
    expect(r.statusCode).toBe(403);
    const op = `Bearer ${await tok({ canton_signer_roles: 'operator' })}`;
    r = await app.inject({
      method: 'POST',
      url: `/v1/parties/${BOB}/withdrawals`,
      headers: { authorization: op },
    });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ scope: 'any' });
  });

  it('lets unknown URLs reach the 404 handler', async () => {
    const r = await app.inject({ method: 'GET', url: '/nope' });
    expect(r.statusCode).toBe(404);
  });
});

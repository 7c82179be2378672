/**
 * Who is calling: verifies the JWT bearer token of a request with jose
 * (configured public keys or a JWKS URL; HS* only with an explicit shared
 * secret, and never verified with a public key), checks issuer, audience,
 * exp/nbf, the optional token age and `typ`, and the algorithm allow-list,
 * and turns the claims into a `Principal` (who the caller is, roles, parties
 * for a withdrawer). `installAuth` hooks
 * this and the route's role declaration (src/server/roles.ts) into fastify.
 * Errors are `AuthError`s with a stable code; no message contains the token.
 * A token that verified is remembered (bounded LRU keyed by the exact token
 * text) until it expires, so a client reusing its token is not verified again
 * on every request; a token that failed is never remembered.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeProtectedHeader,
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
  jwtVerify,
} from 'jose';
import { parsePartyId } from '../hashing/canton-hash.js';
import { unstorableText } from '../store/canonical.js';
import { type AuthConfig, isHmacAlgorithm, publicJwk, redactUrl } from './config.js';
import { type Access, authorize, isRole, type Role } from './roles.js';
import type { ResolvedSession, SessionAuth } from './session.js';

export type AuthErrorCode =
  | 'missing_token' // no Authorization header
  | 'malformed' // not `Bearer <JWT>`, an undecodable token, or claims of the wrong shape
  | 'bad_signature' // the signature does not verify, or no trusted key matches the token
  | 'expired'
  | 'not_yet_valid'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'alg_not_allowed' // the token's algorithm is not on the allow-list (e.g. none, HS* without a secret)
  | 'no_role' // a valid token without any of the service's roles
  | 'forbidden' // a valid token whose roles or parties do not reach this route
  | 'csrf' // a change authorised by a console session cookie without the session's CSRF token
  | 'keys_unavailable'; // the JWKS could not be fetched: the service's problem, not the caller's

const STATUS: Readonly<Record<AuthErrorCode, number>> = {
  missing_token: 401,
  malformed: 401,
  bad_signature: 401,
  expired: 401,
  not_yet_valid: 401,
  wrong_issuer: 401,
  wrong_audience: 401,
  alg_not_allowed: 401,
  no_role: 403,
  forbidden: 403,
  csrf: 403,
  keys_unavailable: 503,
};

export class AuthError extends Error {
  override readonly name = 'AuthError';
  /** The HTTP status fastify answers with. */
  readonly statusCode: number;
  constructor(
    readonly code: AuthErrorCode,
    message: string,
    /** The party the caller was refused (a `forbidden` from `requirePartyAccess`). */
    readonly party?: string,
  ) {
    super(message);
    this.statusCode = STATUS[code];
  }
}

export interface Principal {
  /** The token's `sub`. */
  subject: string;
  /** The token's `iss` (one of `auth.issuer`). */
  issuer: string;
  /**
   * Who the caller is, as the audit log names it and as idempotency keys are
   * scoped: the token's `sub` when one issuer is trusted; with several, the
   * issuer and subject as a JSON pair (`["<iss>","<sub>"]`), because a
   * subject is unique only within its issuer (two identity providers may
   * both issue `sub: "bot-1"`).
   */
  caller: string;
  /** The service's roles found in the roles claim (others are ignored). */
  roles: Role[];
  /** For a withdrawer: the parties its token lists. Empty for every other principal. */
  parties: string[];
  /** The token's `jti`, when it has one. */
  tokenId?: string;
  /**
   * When the credential that authenticated the caller stops being valid (epoch ms): the token's
   * `exp`. A long-lived answer (the event stream) ends then.
   */
  expiresAt?: number;
}

export interface Verifier {
  /** Verifies an `Authorization` header value (`Bearer <JWT>`). Rejects with `AuthError`. */
  verify(authorization: string | undefined): Promise<Principal>;
}

export interface VerifierOptions {
  /** The clock (default: the system's). */
  now?: () => Date;
  /**
   * How many verified tokens to remember (default 1024; 0: verify every time).
   * A remembered token is accepted without verifying its signature again until
   * its `exp` (with the clock tolerance, as at verification) and for at most
   * `cacheTtlMs`; its `nbf` is checked again on every use.
   */
  cacheSize?: number;
  /**
   * Longest time a verified token is remembered (default: the JWKS cache age
   * with a JWKS URL, so that a key removed from the set stops working as soon
   * as it would without this cache; 10 minutes with configured keys or secret).
   */
  cacheTtlMs?: number;
}

/** A verified token: its principal and the times (epoch seconds) that bound its use. */
interface Remembered {
  principal: Principal;
  exp: number;
  nbf: number | undefined;
  /** The token's `iat`, kept when `auth.maxTokenAgeSeconds` bounds its age. */
  iat: number | undefined;
  /** Epoch ms after which the token is verified again. */
  until: number;
}

/** Least-recently-used map of verified tokens (Map keeps insertion order; a hit moves to the end). */
class TokenCache {
  private readonly map = new Map<string, Remembered>();
  constructor(private readonly max: number) {}
  get(token: string): Remembered | undefined {
    const r = this.map.get(token);
    if (r !== undefined) {
      this.map.delete(token);
      this.map.set(token, r);
    }
    return r;
  }
  set(token: string, r: Remembered): void {
    this.map.delete(token);
    this.map.set(token, r);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }
  delete(token: string): void {
    this.map.delete(token);
  }
}

/** A copy, so that nothing a caller does to a principal reaches the one remembered. */
function copyPrincipal(p: Principal): Principal {
  return { ...p, roles: [...p.roles], parties: [...p.parties] };
}

/** A claim by its exact name, else by a dotted path into nested objects (`realm_access.roles`). */
export function claim(payload: JWTPayload, name: string): unknown {
  if (Object.hasOwn(payload, name)) return payload[name];
  let v: unknown = payload;
  for (const part of name.split('.')) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

/** An array of strings or one space-separated string; undefined when absent. */
function stringList(v: unknown, what: string): string[] {
  if (v === undefined) return [];
  if (typeof v === 'string') return v.split(/\s+/).filter((s) => s !== '');
  if (Array.isArray(v) && v.every((s) => typeof s === 'string')) return v.filter((s) => s !== '');
  throw new AuthError('malformed', `the ${what} claim must be a list of strings or a space-separated string`);
}

/** True when `auth.issuer` names more than one issuer: callers are then told apart by issuer too. */
export function severalIssuers(cfg: Pick<AuthConfig, 'issuer'>): boolean {
  return Array.isArray(cfg.issuer) && new Set(cfg.issuer).size > 1;
}

/** The caller identity of a subject issued by `issuer` (see `Principal.caller`). */
export function callerId(cfg: Pick<AuthConfig, 'issuer'>, issuer: string, subject: string): string {
  return severalIssuers(cfg) ? JSON.stringify([issuer, subject]) : subject;
}

/**
 * The principal of verified claims (a token's, or at console sign-in the
 * identity provider's ID token's): the same roles and parties claims.
 */
export function principalOf(payload: JWTPayload, cfg: AuthConfig): Principal {
  if (typeof payload.sub !== 'string' || payload.sub === '')
    throw new AuthError('malformed', 'the token has no subject (sub)');
  // The caller identity is written to the audit log: it must be text the database can store.
  if (unstorableText(payload.sub))
    throw new AuthError(
      'malformed',
      "the token's subject (sub) holds a character this service does not accept (U+0000, or half of a UTF-16 surrogate pair)",
    );
  // jose checked iss against auth.issuer (always set), so it is a string here.
  if (typeof payload.iss !== 'string') throw new AuthError('wrong_issuer', 'the token has no issuer (iss)');
  const roles = [...new Set(stringList(claim(payload, cfg.rolesClaim), 'roles').filter(isRole))];
  if (roles.length === 0)
    throw new AuthError('no_role', `the token carries none of the service's roles (claim ${cfg.rolesClaim})`);
  let parties: string[] = [];
  if (roles.includes('withdrawer')) {
    parties = [...new Set(stringList(claim(payload, cfg.partiesClaim), 'parties'))];
    for (const p of parties) {
      try {
        parsePartyId(p);
      } catch {
        throw new AuthError('malformed', `the ${cfg.partiesClaim} claim holds an invalid party id`);
      }
    }
  }
  return {
    subject: payload.sub,
    issuer: payload.iss,
    caller: callerId(cfg, payload.iss, payload.sub),
    roles,
    parties,
    ...(typeof payload.jti === 'string' ? { tokenId: payload.jti } : {}),
    ...(typeof payload.exp === 'number' ? { expiresAt: payload.exp * 1000 } : {}),
  };
}

/** What went wrong fetching the JWKS, without anything from the token. */
function keySourceProblem(e: unknown, timeoutMs: number): string {
  if (e instanceof errors.JWKSTimeout) return `timed out after ${timeoutMs} ms`;
  if (e instanceof errors.JWKSInvalid) return 'the answer is not a valid JSON Web Key Set';
  if (e instanceof errors.JOSEError) return e.message;
  const code = (e as { cause?: { code?: unknown } }).cause?.code;
  return typeof code === 'string' ? `unreachable (${code})` : 'unreachable';
}

/** A jose error as an AuthError. Never carries the jose error along: it holds the claims. */
function mapJoseError(e: unknown): AuthError {
  if (e instanceof AuthError) return e;
  if (e instanceof errors.JWTExpired)
    return e.claim === 'iat'
      ? new AuthError(
          'expired',
          'the token is older than this service accepts (iat, auth.maxTokenAgeSeconds)',
        )
      : new AuthError('expired', 'the token has expired');
  if (e instanceof errors.JWTClaimValidationFailed) {
    switch (e.claim) {
      case 'nbf':
        return new AuthError('not_yet_valid', 'the token is not valid yet (nbf)');
      case 'iss':
        return new AuthError('wrong_issuer', 'the token was not issued by a trusted issuer');
      case 'aud':
        return new AuthError('wrong_audience', 'the token is not meant for this service (aud)');
      case 'typ':
        return new AuthError('malformed', "the token's typ header is not the one this service requires");
      case 'iat':
        if (e.reason === 'missing')
          return new AuthError(
            'malformed',
            'the token has no issued-at time (iat), which this service requires',
          );
        if (e.reason === 'check_failed')
          return new AuthError('not_yet_valid', 'the token was issued in the future (iat)');
        return new AuthError('malformed', "the token's iat claim is invalid");
      default:
        return new AuthError(
          'malformed',
          `the token's ${e.claim} claim is ${e.reason === 'missing' ? 'missing' : 'invalid'}`,
        );
    }
  }
  if (e instanceof errors.JOSEAlgNotAllowed)
    return new AuthError('alg_not_allowed', "the token's algorithm is not allowed");
  if (e instanceof errors.JWSSignatureVerificationFailed)
    return new AuthError('bad_signature', "the token's signature does not verify");
  if (e instanceof errors.JWKSNoMatchingKey)
    return new AuthError('bad_signature', 'no trusted key matches the token');
  if (e instanceof errors.JOSEError) return new AuthError('malformed', 'the token is not a well-formed JWT');
  return new AuthError('bad_signature', 'the token could not be verified');
}

export function createVerifier(cfg: AuthConfig, opts: VerifierOptions = {}): Verifier {
  const allowed = new Set<string>(cfg.algorithms);
  const hmacAlgs = cfg.algorithms.filter(isHmacAlgorithm);
  const asymmetricAlgs = cfg.algorithms.filter((a) => !isHmacAlgorithm(a));
  const secret = cfg.sharedSecret !== undefined ? new TextEncoder().encode(cfg.sharedSecret) : undefined;

  let keySet: JWTVerifyGetKey | undefined;
  let keySetName = 'the configured public keys';
  if (cfg.jwksUrl !== undefined) {
    keySet = createRemoteJWKSet(new URL(cfg.jwksUrl), {
      timeoutDuration: cfg.jwksTimeoutMs,
      cacheMaxAge: cfg.jwksCacheSeconds * 1000,
      cooldownDuration: Math.min(30_000, cfg.jwksCacheSeconds * 1000),
    });
    keySetName = `the JWKS at ${redactUrl(cfg.jwksUrl)}`;
  } else if (cfg.publicKeys.length > 0) {
    keySet = createLocalJWKSet({ keys: cfg.publicKeys.map((k) => publicJwk(k)) });
  }

  /** The public-key lookup, with lookup failures turned into AuthErrors (the multiple-match case passes). */
  const publicKey: JWTVerifyGetKey = async (header, token) => {
    try {
      return await keySet!(header, token);
    } catch (e) {
      if (e instanceof errors.JWKSMultipleMatchingKeys) throw e;
      if (e instanceof errors.JWKSNoMatchingKey)
        throw new AuthError('bad_signature', `no key of ${keySetName} matches the token`);
      if (e instanceof errors.JOSENotSupported)
        throw new AuthError('alg_not_allowed', "the token's algorithm is not allowed");
      throw new AuthError(
        'keys_unavailable',
        `${keySetName} could not be used: ${keySourceProblem(e, cfg.jwksTimeoutMs)}`,
      );
    }
  };

  const baseOptions = (algorithms: string[]): JWTVerifyOptions => ({
    issuer: cfg.issuer,
    audience: cfg.audience,
    algorithms,
    clockTolerance: cfg.clockToleranceSeconds,
    requiredClaims: ['exp', 'sub', 'iss'],
    ...(cfg.maxTokenAgeSeconds !== undefined ? { maxTokenAge: cfg.maxTokenAgeSeconds } : {}),
    ...(cfg.tokenType !== undefined ? { typ: cfg.tokenType } : {}),
    ...(opts.now ? { currentDate: opts.now() } : {}),
  });

  async function verifyToken(token: string): Promise<JWTPayload> {
    let alg: unknown;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      throw new AuthError('malformed', 'the token is not a well-formed JWT');
    }
    if (typeof alg !== 'string' || !allowed.has(alg))
      throw new AuthError(
        'alg_not_allowed',
        `the token's algorithm is not allowed (allowed: ${cfg.algorithms.join(', ')})`,
      );
    if (isHmacAlgorithm(alg)) {
      // A shared secret, and only for HS*: a public key is never an HMAC key.
      if (!secret) throw new AuthError('alg_not_allowed', "the token's algorithm is not allowed");
      return (await jwtVerify(token, secret, baseOptions(hmacAlgs))).payload;
    }
    if (!keySet) throw new AuthError('alg_not_allowed', "the token's algorithm is not allowed");
    const options = baseOptions(asymmetricAlgs);
    try {
      return (await jwtVerify(token, publicKey, options)).payload;
    } catch (e) {
      if (!(e instanceof errors.JWKSMultipleMatchingKeys)) throw e;
      // Several keys fit (no kid): the first whose signature verifies decides.
      let last: unknown = new AuthError('bad_signature', "the token's signature does not verify");
      for await (const key of e) {
        try {
          return (await jwtVerify(token, key, options)).payload;
        } catch (err) {
          last = err;
          if (!(err instanceof errors.JWSSignatureVerificationFailed)) break;
        }
      }
      throw last;
    }
  }

  const cacheSize = opts.cacheSize ?? 1024;
  const cacheTtlMs = opts.cacheTtlMs ?? (cfg.jwksUrl !== undefined ? cfg.jwksCacheSeconds * 1000 : 600_000);
  const cache = cacheSize > 0 && cacheTtlMs > 0 ? new TokenCache(cacheSize) : undefined;
  const tolerance = cfg.clockToleranceSeconds;
  const maxAge = cfg.maxTokenAgeSeconds;

  /** The remembered principal of `token` if it is still within the bounds it was verified under. */
  function recall(token: string): Principal | undefined {
    const r = cache?.get(token);
    if (r === undefined) return undefined;
    const nowMs = (opts.now ? opts.now() : new Date()).getTime();
    const now = Math.floor(nowMs / 1000);
    // The same comparisons as jose's: expired when exp <= now - tolerance, early when nbf > now + tolerance,
    // too old when now - iat - tolerance > maxTokenAgeSeconds.
    if (
      nowMs > r.until ||
      r.exp <= now - tolerance ||
      (r.nbf !== undefined && r.nbf > now + tolerance) ||
      (maxAge !== undefined && r.iat !== undefined && now - r.iat - tolerance > maxAge)
    ) {
      cache!.delete(token);
      return undefined;
    }
    return copyPrincipal(r.principal);
  }

  return {
    async verify(authorization) {
      if (authorization === undefined || authorization.trim() === '')
        throw new AuthError('missing_token', 'a bearer token is required (Authorization: Bearer <token>)');
      const m = /^Bearer +([A-Za-z0-9_\-.=]+) *$/i.exec(authorization);
      if (!m) throw new AuthError('malformed', "the Authorization header must be 'Bearer <token>'");
      const token = m[1]!;
      const known = recall(token);
      if (known) return known;
      let payload: JWTPayload;
      try {
        payload = await verifyToken(token);
      } catch (e) {
        throw mapJoseError(e);
      }
      const principal = principalOf(payload, cfg);
      // exp is required (requiredClaims) and a number once jose accepted the token.
      if (cache && typeof payload.exp === 'number') {
        const nowMs = (opts.now ? opts.now() : new Date()).getTime();
        cache.set(token, {
          principal: copyPrincipal(principal),
          exp: payload.exp,
          nbf: typeof payload.nbf === 'number' ? payload.nbf : undefined,
          iat: typeof payload.iat === 'number' ? payload.iat : undefined,
          until: nowMs + cacheTtlMs,
        });
      }
      return principal;
    },
  };
}

// ---------------------------------------------------------------- fastify

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller, once authenticated; null on public routes. */
    principal: Principal | null;
    /** The role decision for this request (which roles granted it, the parties it is limited to). */
    access: Access | null;
    /** The console session that authenticated this request (no bearer token), if any. */
    session: ResolvedSession | null;
  }
}

function challenge(reply: FastifyReply, e: AuthError): void {
  if (e.statusCode === 401)
    reply.header(
      'www-authenticate',
      e.code === 'missing_token'
        ? 'Bearer realm="canton-signer"'
        : 'Bearer realm="canton-signer", error="invalid_token"',
    );
  else if (e.statusCode === 403)
    reply.header('www-authenticate', 'Bearer realm="canton-signer", error="insufficient_scope"');
}

/**
 * An `onRequest` hook: public routes pass; every other route needs a valid
 * token — or, without an Authorization header, a live console session (whose
 * changes carry its CSRF token) — whose roles reach it (decided by
 * `authorize`). Runs before the body is read. Unknown URLs pass on to the 404
 * handler.
 */
export function authHook(verifier: Verifier, sessions?: SessionAuth) {
  return async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (request.is404) return;
    const roles = request.routeOptions.config.roles;
    try {
      if (roles === 'public') {
        request.access = { allowed: true, public: true };
        return;
      }
      if (roles === undefined) throw new AuthError('forbidden', 'the route declares no roles');
      let principal: Principal | undefined;
      if (sessions && request.headers.authorization === undefined) {
        const session = await sessions.resolve(request);
        if (session) {
          const problem = sessions.csrfProblem(request, session);
          if (problem !== undefined) throw new AuthError('csrf', problem);
          request.session = session;
          principal = session.principal;
        }
      }
      principal ??= await verifier.verify(request.headers.authorization);
      request.principal = principal;
      const access = authorize(principal, { method: request.method, roles });
      if (!access.allowed) throw new AuthError('forbidden', access.reason);
      request.access = access;
    } catch (e) {
      if (e instanceof AuthError && e.code !== 'csrf') challenge(reply, e);
      throw e;
    }
  };
}

/** Installs authentication on `app` (every route, including those of plugins registered later). */
export function installAuth(app: FastifyInstance, verifier: Verifier, sessions?: SessionAuth): void {
  app.decorateRequest('principal', null);
  app.decorateRequest('access', null);
  app.decorateRequest('session', null);
  app.addHook('onRequest', authHook(verifier, sessions));
}

/** For a handler acting on one party: throws `forbidden` unless the caller's grant reaches it. */
export function requirePartyAccess(request: FastifyRequest, party: string): void {
  const roles = request.routeOptions.config.roles;
  const access = authorize(request.principal, { method: request.method, roles }, { party });
  if (!access.allowed) throw new AuthError('forbidden', access.reason, party);
}

/**
 * Who is calling the sandbox, as a Canton participant with JWT auth on: an
 * OAuth2 client-credentials token endpoint issuing ES256 JWTs signed with the
 * sandbox's key (published as a JWKS with an OIDC discovery document), their
 * verification (signature, expiry, audience; the user is `sub`), optionally
 * LocalNet's unsafe HS256 shared-secret tokens, and static tokens. With
 * `required: false` a request without a token acts as the default user; a token
 * that is present but invalid is always refused.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import {
  decodeJwt,
  decodeProtectedHeader,
  errors,
  type JWK,
  type JWTPayload,
  jwtVerify,
  SignJWT,
} from 'jose';
import { type SigningKey, sandboxSigningKey } from './signing-key.js';

export interface SandboxAuthOptions {
  /**
   * Static tokens: token → participant user id. An opaque token acts as its user (a sandbox
   * convenience: a real participant accepts JWTs only); a JWT is verified like any other and its
   * `sub` must be the user it is listed for.
   */
  tokens?: Record<string, string>;
  /** OAuth2 clients: client id → secret and the user its tokens act as (`sub`). */
  clients?: Record<string, { secret: string; userId: string }>;
  /** Lifetime of issued tokens. Default 300 s. */
  tokenTtlSeconds?: number;
  /** Refuse requests without a token. Default false. */
  required?: boolean;
  /** The audience every token must name (`aud`). Default {@link DEFAULT_AUDIENCE}. */
  audience?: string;
  /**
   * UNSAFE, off by default: also accept HS256 tokens signed with this shared secret, as LocalNet's
   * participants do (`unsafe-jwt-hmac-256`) for the Wallet SDK's `self_signed` tokens. Anyone who
   * knows the secret can act as any user.
   */
  unsafeHmacSecret?: string;
}

/** The audience LocalNet's participants and the Wallet SDK's examples use. */
export const DEFAULT_AUDIENCE = 'https://canton.network.global';
/** The scope issued when the token request names none. */
export const LEDGER_API_SCOPE = 'daml_ledger_api';
/** Clock skew allowed when checking `exp` and `nbf`. */
export const CLOCK_TOLERANCE_SECONDS = 5;
/** Where the JWKS is served (the discovery document names it). */
export const JWKS_PATH = '/.well-known/jwks.json';
export const DISCOVERY_PATH = '/.well-known/openid-configuration';
export const TOKEN_PATH = '/oauth/token';

/** A static token the sandbox cannot accept as configured (the message never quotes the token). */
export class SandboxAuthConfigError extends Error {
  override readonly name = 'SandboxAuthConfigError';
}

export type AuthResult = { ok: true; userId: string | undefined } | { ok: false; reason: string };

type TokenResponse = {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
};
type OAuthError = { error: string; error_description: string };

export class SandboxAuth {
  /** Issued tokens by `jti`: their expiry, and whether {@link expireAll} revoked them. */
  private readonly issued = new Map<string, { expMs: number; revoked: boolean }>();
  private readonly key: SigningKey;
  private readonly hmacKey: Uint8Array | undefined;
  readonly required: boolean;
  readonly audience: string;
  /** Token requests served (tests check refresh behaviour with it). */
  tokensIssued = 0;

  /** `seed` derives the signing key: the same seed, the same key (see signing-key.ts). */
  constructor(
    private readonly opts: SandboxAuthOptions = {},
    seed: string = randomBytes(16).toString('hex'),
  ) {
    this.required = opts.required ?? false;
    this.audience = opts.audience ?? DEFAULT_AUDIENCE;
    this.key = sandboxSigningKey(seed);
    this.hmacKey =
      opts.unsafeHmacSecret !== undefined && opts.unsafeHmacSecret !== ''
        ? new TextEncoder().encode(opts.unsafeHmacSecret)
        : undefined;
    for (const [token, user] of Object.entries(opts.tokens ?? {})) {
      if (!looksLikeJwt(token)) continue;
      const sub = safeSub(token);
      if (sub !== user)
        throw new SandboxAuthConfigError(
          `static token for user ${user}: it is a JWT whose subject (sub) is ${sub === undefined ? 'missing' : sub}; list it for its subject or use an opaque token`,
        );
    }
  }

  /** The public signing key set (`jwks_uri`). */
  jwks(): { keys: JWK[] } {
    return { keys: [this.key.publicJwk] };
  }

  /** The OIDC discovery document of the sandbox reached at `origin`. */
  discovery(origin: string): Record<string, unknown> {
    return {
      issuer: origin,
      token_endpoint: `${origin}${TOKEN_PATH}`,
      jwks_uri: `${origin}${JWKS_PATH}`,
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      response_types_supported: ['token'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: [this.key.alg],
      scopes_supported: [LEDGER_API_SCOPE],
      claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'jti', 'scope'],
    };
  }

  /**
   * Client-credentials grant: a JWT for the client's user, signed with the sandbox's key, or an
   * OAuth error. `aud` is always the sandbox's audience (the only one it accepts), whatever the
   * request's `audience`; `scope` is the requested one, else `daml_ledger_api`.
   */
  async issue(
    form: Record<string, string | undefined>,
    basic: { id: string; secret: string } | undefined,
    issuer: string,
  ): Promise<{ ok: true; body: TokenResponse } | { ok: false; status: number; body: OAuthError }> {
    if (form.grant_type !== 'client_credentials')
      return {
        ok: false,
        status: 400,
        body: { error: 'unsupported_grant_type', error_description: 'only client_credentials is supported' },
      };
    const id = basic?.id ?? form.client_id ?? '';
    const secret = basic?.secret ?? form.client_secret ?? '';
    const client = ownEntry(this.opts.clients, id);
    if (!client || !sameSecret(client.secret, secret))
      return {
        ok: false,
        status: 401,
        body: { error: 'invalid_client', error_description: 'client authentication failed' },
      };
    const ttl = this.opts.tokenTtlSeconds ?? 300;
    const now = Math.floor(Date.now() / 1000);
    const scope = form.scope?.trim() || LEDGER_API_SCOPE;
    const jti = randomBytes(16).toString('base64url');
    const token = await new SignJWT({ scope })
      .setProtectedHeader({ alg: this.key.alg, kid: this.key.kid, typ: 'JWT' })
      .setIssuer(issuer)
      .setSubject(client.userId)
      .setAudience(this.audience)
      .setIssuedAt(now)
      .setExpirationTime(now + ttl)
      .setJti(jti)
      .sign(this.key.privateKey);
    this.prune();
    this.issued.set(jti, { expMs: (now + ttl) * 1000, revoked: false });
    this.tokensIssued++;
    return { ok: true, body: { access_token: token, token_type: 'Bearer', expires_in: ttl, scope } };
  }

  /** Resolves an `Authorization` header to the user it acts as. Reasons never quote the token. */
  async check(header: string | undefined): Promise<AuthResult> {
    if (header === undefined || header === '')
      return this.required ? { ok: false, reason: 'missing token' } : { ok: true, userId: undefined };
    const m = /^Bearer ([A-Za-z0-9._~+/=-]+)$/.exec(header);
    if (!m) return { ok: false, reason: 'malformed Authorization header' };
    const token = m[1]!;
    if (!looksLikeJwt(token)) {
      const fixed = ownEntry(this.opts.tokens, token);
      return fixed !== undefined ? { ok: true, userId: fixed } : { ok: false, reason: 'unknown token' };
    }
    return this.verify(token);
  }

  /** Makes every token issued so far expire now (tests: forces a refresh). */
  expireAll(): void {
    for (const t of this.issued.values()) t.revoked = true;
  }

  private async verify(token: string): Promise<AuthResult> {
    const { alg, kid } = decodeProtectedHeader(token);
    let key: SigningKey['publicKey'] | Uint8Array;
    let algorithm: string;
    if (alg === this.key.alg) {
      if (kid !== undefined && kid !== this.key.kid)
        return { ok: false, reason: `token signed by a key that is not in the sandbox's JWKS` };
      key = this.key.publicKey;
      algorithm = alg;
    } else if (alg === 'HS256') {
      if (!this.hmacKey)
        return {
          ok: false,
          reason:
            'HS256 (shared-secret) tokens are refused: the sandbox accepts them only with --unsafe-hmac-secret',
        };
      key = this.hmacKey;
      algorithm = alg;
    } else {
      return {
        ok: false,
        reason: `token algorithm not accepted: use ${this.key.alg} tokens from the token endpoint${this.hmacKey ? ' or HS256' : ''}`,
      };
    }
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key, {
        algorithms: [algorithm],
        audience: this.audience,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
      }));
    } catch (e) {
      return { ok: false, reason: this.reasonOf(e) };
    }
    if (typeof payload.sub !== 'string' || payload.sub === '')
      return { ok: false, reason: 'token has no subject (sub): the subject is the participant user' };
    const issued = payload.jti === undefined ? undefined : this.issued.get(payload.jti);
    if (issued?.revoked) return { ok: false, reason: 'token expired' };
    return { ok: true, userId: payload.sub };
  }

  private reasonOf(e: unknown): string {
    if (e instanceof errors.JWTExpired) return 'token expired';
    if (e instanceof errors.JWTClaimValidationFailed) {
      if (e.claim === 'aud') return `token audience (aud) is not ${this.audience}`;
      if (e.claim === 'nbf') return 'token not yet valid (nbf)';
      return `token claim ${e.claim} is invalid`;
    }
    if (e instanceof errors.JWSSignatureVerificationFailed) return 'token signature does not verify';
    return 'malformed token';
  }

  /** Forgets tokens past their expiry (they fail the `exp` check anyway). */
  private prune(): void {
    const cutoff = Date.now() - CLOCK_TOLERANCE_SECONDS * 1000;
    for (const [jti, t] of this.issued) if (t.expMs < cutoff) this.issued.delete(jti);
  }
}

/** A compact JWS: three base64url parts whose header names an algorithm. */
function looksLikeJwt(token: string): boolean {
  if (token.split('.').length !== 3) return false;
  try {
    return typeof decodeProtectedHeader(token).alg === 'string';
  } catch {
    return false;
  }
}

function safeSub(token: string): string | undefined {
  try {
    const { sub } = decodeJwt(token);
    return typeof sub === 'string' ? sub : undefined;
  } catch {
    return undefined;
  }
}

/** `record[key]` only when the record itself has it: a token named `constructor` is no entry. */
function ownEntry<T>(record: Record<string, T> | undefined, key: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

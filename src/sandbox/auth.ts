/**
 * Who is calling the sandbox: static bearer tokens and an OAuth2
 * client-credentials token endpoint (`POST /oauth/token`) issuing short-lived
 * opaque tokens, each bound to a participant user. With `required: false`
 * (the demo default) a request without a token acts as the default user; a
 * token that is present but unknown or expired is always refused.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';

export interface SandboxAuthOptions {
  /** Static tokens: token → participant user id. */
  tokens?: Record<string, string>;
  /** OAuth2 clients: client id → secret and the user its tokens act as. */
  clients?: Record<string, { secret: string; userId: string }>;
  /** Lifetime of issued tokens. Default 300 s. */
  tokenTtlSeconds?: number;
  /** Refuse requests without a token. Default false. */
  required?: boolean;
}

export type AuthResult = { ok: true; userId: string | undefined } | { ok: false; reason: string };

export class SandboxAuth {
  private readonly issued = new Map<string, { userId: string; expiresAtMs: number }>();
  readonly required: boolean;
  /** Token requests served (tests check refresh behaviour with it). */
  tokensIssued = 0;

  constructor(private readonly opts: SandboxAuthOptions = {}) {
    this.required = opts.required ?? false;
  }

  /** Client-credentials grant. Returns the RFC 6749 token response or an OAuth error code. */
  issue(
    form: Record<string, string | undefined>,
    basic?: { id: string; secret: string },
  ):
    | { ok: true; body: { access_token: string; token_type: 'Bearer'; expires_in: number } }
    | { ok: false; status: number; body: { error: string; error_description: string } } {
    if (form.grant_type !== 'client_credentials')
      return {
        ok: false,
        status: 400,
        body: { error: 'unsupported_grant_type', error_description: 'only client_credentials is supported' },
      };
    const id = basic?.id ?? form.client_id ?? '';
    const secret = basic?.secret ?? form.client_secret ?? '';
    const client = this.opts.clients?.[id];
    if (!client || !sameSecret(client.secret, secret))
      return {
        ok: false,
        status: 401,
        body: { error: 'invalid_client', error_description: 'client authentication failed' },
      };
    const ttl = this.opts.tokenTtlSeconds ?? 300;
    const token = randomBytes(24).toString('base64url');
    this.issued.set(token, { userId: client.userId, expiresAtMs: Date.now() + ttl * 1000 });
    this.tokensIssued++;
    return { ok: true, body: { access_token: token, token_type: 'Bearer', expires_in: ttl } };
  }

  /** Resolves an `Authorization` header. */
  check(header: string | undefined): AuthResult {
    if (header === undefined || header === '')
      return this.required ? { ok: false, reason: 'missing token' } : { ok: true, userId: undefined };
    const m = /^Bearer ([A-Za-z0-9._~+/=-]+)$/.exec(header);
    if (!m) return { ok: false, reason: 'malformed Authorization header' };
    const token = m[1]!;
    const fixed = this.opts.tokens?.[token];
    if (fixed !== undefined) return { ok: true, userId: fixed };
    const t = this.issued.get(token);
    if (!t) return { ok: false, reason: 'unknown token' };
    if (t.expiresAtMs <= Date.now()) {
      this.issued.delete(token);
      return { ok: false, reason: 'expired token' };
    }
    return { ok: true, userId: t.userId };
  }

  /** Makes every issued token expire now (tests: forces a refresh). */
  expireAll(): void {
    for (const t of this.issued.values()) t.expiresAtMs = 0;
  }
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

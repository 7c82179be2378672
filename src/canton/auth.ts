/**
 * Where the `Authorization` header of Canton calls comes from.
 *
 * Tokens and client secrets live only inside the closures below: they are never
 * put in an error, a log record or a message.
 */
import { z } from 'zod';
import { CantonApiError, errorFromResponse, oneLine } from './errors.js';

export interface AuthProvider {
  /** Full `Authorization` header value (`Bearer …`), or `undefined` for none. */
  authorization(): Promise<string | undefined>;
  /** Forget any cached credential; the next `authorization()` obtains a fresh one. */
  invalidate(): void;
}

/** A fixed bearer token (e.g. a long-lived JWT from configuration). `invalidate()` is a no-op. */
export function staticBearer(token: string): AuthProvider {
  if (token.length === 0 || /[\s]/.test(token))
    throw new TypeError('staticBearer: token must be non-empty, no whitespace');
  const header = `Bearer ${token}`;
  return {
    authorization: () => Promise.resolve(header),
    invalidate: () => {},
  };
}

export interface OAuth2ClientCredentialsOptions {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  audience?: string;
  scope?: string;
  fetch?: typeof fetch;
  /** Refresh this long before `expires_in` runs out. Default 30 s. */
  refreshSkewMs?: number;
  /** Per token request. Default 10 s. */
  timeoutMs?: number;
  /**
   * How the client authenticates to the token endpoint: credentials in the form body
   * (`client_secret_post`, default) or an HTTP Basic header (`client_secret_basic`).
   */
  clientAuth?: 'client_secret_post' | 'client_secret_basic';
}

/** Lifetime assumed when the token response has no `expires_in` and the token is not a JWT with `exp`. */
const DEFAULT_LIFETIME_MS = 300_000;

const TokenResponseSchema = z.object({
  access_token: z.string().min(1),
  token_type: z.string().optional(),
  expires_in: z.union([z.number(), z.string().regex(/^\d+$/).transform(Number)]).optional(),
});

/**
 * OAuth 2.0 client-credentials grant (RFC 6749 §4.4). The token is cached until
 * `expires_in - refreshSkewMs`; concurrent callers share a single token request.
 */
export function oauth2ClientCredentials(opts: OAuth2ClientCredentialsOptions): AuthProvider {
  const doFetch = opts.fetch ?? globalThis.fetch;
  const skew = opts.refreshSkewMs ?? 30_000;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const clientAuth = opts.clientAuth ?? 'client_secret_post';
  let url: URL;
  try {
    url = new URL(opts.tokenUrl);
  } catch {
    // Not the URL itself: it may carry credentials in its query.
    throw new TypeError('oauth2ClientCredentials: tokenUrl is not an absolute URL');
  }
  const path = url.pathname;
  const secret = opts.clientSecret;

  let cached: { header: string; expiresAt: number } | undefined;
  let inflight: Promise<string> | undefined;
  let generation = 0;

  /** Remove the secret from any server-supplied text before it goes into an error. */
  const scrub = (s: string): string => (secret.length > 0 ? s.split(secret).join('***') : s);

  const fail = (init: Omit<ConstructorParameters<typeof CantonApiError>[0], 'service' | 'method' | 'path'>) =>
    new CantonApiError({ service: 'oauth', method: 'POST', path, ...init });

  async function fetchToken(): Promise<{ header: string; expiresAt: number }> {
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    if (clientAuth === 'client_secret_basic') {
      const enc = (s: string) => encodeURIComponent(s);
      headers.authorization = `Basic ${Buffer.from(`${enc(opts.clientId)}:${enc(secret)}`).toString('base64')}`;
    } else {
      form.set('client_id', opts.clientId);
      form.set('client_secret', secret);
    }
    if (opts.audience !== undefined) form.set('audience', opts.audience);
    if (opts.scope !== undefined) form.set('scope', opts.scope);

    let res: Response;
    let text: string;
    try {
      res = await doFetch(url, {
        method: 'POST',
        headers,
        body: form.toString(),
        signal: AbortSignal.timeout(timeoutMs),
        redirect: 'error',
      });
      text = await res.text();
    } catch (e) {
      const timeout = e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError');
      throw fail({
        status: 0,
        code: timeout ? 'TIMEOUT' : 'NETWORK',
        retryable: true,
        ambiguous: false, // fetching a token changes nothing
      });
    }
    if (!res.ok) {
      const err = errorFromResponse({
        service: 'oauth',
        method: 'POST',
        path,
        status: res.status,
        body: '',
        retryAfter: res.headers.get('retry-after'),
        idempotent: true,
      });
      throw fail({
        status: err.status,
        code: err.code,
        retryable: err.retryable,
        retryAfterMs: err.retryAfterMs,
        ambiguous: false,
        detail: oauthErrorDetail(text, scrub),
      });
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    const parsed = TokenResponseSchema.safeParse(json);
    if (!parsed.success) {
      throw fail({
        status: res.status,
        code: 'INVALID_RESPONSE',
        retryable: false,
        ambiguous: false,
        note: 'token response without a usable access_token',
      });
    }
    const { access_token: token, token_type: type, expires_in: expiresIn } = parsed.data;
    if (type !== undefined && type.toLowerCase() !== 'bearer') {
      throw fail({
        status: res.status,
        code: 'INVALID_RESPONSE',
        retryable: false,
        ambiguous: false,
        note: `unsupported token_type ${oneLine(type).slice(0, 40)}`,
      });
    }
    const now = Date.now();
    const lifetimeMs = expiresIn !== undefined ? expiresIn * 1000 : jwtLifetimeMs(token, now);
    return { header: `Bearer ${token}`, expiresAt: now + Math.max(0, lifetimeMs - skew) };
  }

  return {
    authorization(): Promise<string> {
      if (cached && Date.now() < cached.expiresAt) return Promise.resolve(cached.header);
      if (!inflight) {
        const gen = generation;
        const p = fetchToken()
          .then((t) => {
            // A token requested before an invalidate() is handed to the callers waiting
            // for it, but not cached for later ones.
            if (gen === generation) cached = t;
            return t.header;
          })
          .finally(() => {
            if (inflight === p) inflight = undefined;
          });
        inflight = p;
      }
      return inflight;
    },
    invalidate(): void {
      cached = undefined;
      generation++;
      inflight = undefined;
    },
  };
}

/** `error` / `error_description` of an RFC 6749 §5.2 error body, if there is one. */
function oauthErrorDetail(body: string, scrub: (s: string) => string): string | undefined {
  try {
    const j = JSON.parse(body) as unknown;
    if (j && typeof j === 'object' && typeof (j as { error?: unknown }).error === 'string') {
      const { error, error_description: desc } = j as { error: string; error_description?: unknown };
      return scrub(typeof desc === 'string' ? `${error}: ${desc}` : error);
    }
  } catch {
    // not JSON: fall through
  }
  return undefined;
}

/** Remaining lifetime from a JWT `exp` claim; default when the token is opaque. */
function jwtLifetimeMs(token: string, now: number): number {
  const payload = token.split('.')[1];
  if (payload === undefined) return DEFAULT_LIFETIME_MS;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown };
    if (typeof claims.exp === 'number') return claims.exp * 1000 - now;
  } catch {
    // opaque token
  }
  return DEFAULT_LIFETIME_MS;
}

/** Credentials from the environment: `CANTON_SIGNER_<SERVICE>_TOKEN`, else OAuth2 `CANTON_SIGNER_OAUTH_*`. */
export function authFromEnv(
  service: 'LEDGER_API' | 'VALIDATOR' | 'SCAN',
  env: NodeJS.ProcessEnv,
): AuthProvider | undefined {
  const token = env[`CANTON_SIGNER_${service}_TOKEN`];
  if (token) return staticBearer(token);
  const tokenUrl = env.CANTON_SIGNER_OAUTH_TOKEN_URL;
  const clientId = env.CANTON_SIGNER_OAUTH_CLIENT_ID;
  const clientSecret = env.CANTON_SIGNER_OAUTH_CLIENT_SECRET;
  if (tokenUrl && clientId && clientSecret)
    return oauth2ClientCredentials({
      tokenUrl,
      clientId,
      clientSecret,
      ...(env.CANTON_SIGNER_OAUTH_AUDIENCE ? { audience: env.CANTON_SIGNER_OAUTH_AUDIENCE } : {}),
      ...(env.CANTON_SIGNER_OAUTH_SCOPE ? { scope: env.CANTON_SIGNER_OAUTH_SCOPE } : {}),
    });
  return undefined;
}

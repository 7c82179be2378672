/**
 * Signing a person in with the organisation's identity provider: OpenID
 * Connect authorization code flow with PKCE (S256), state and nonce, through
 * openid-client. The provider's metadata is discovered at the first sign-in
 * (and again after a failure). The pending sign-in (state, PKCE verifier,
 * nonce) travels in a short-lived HttpOnly cookie scoped to /console/auth, so
 * any instance sharing the database can finish it. The result is the ID
 * token's claims, completed from the userinfo endpoint when the roles claim
 * is not in the ID token.
 */
import * as client from 'openid-client';
import { claim } from '../server/auth.js';
import { isLoopbackHost } from '../server/config.js';

export interface OidcSettings {
  issuer: string;
  clientId: string;
  /** Absent: a public client (PKCE only). */
  clientSecret?: string;
  scopes: readonly string[];
  /** Claims that must be present, else userinfo is asked (the roles claim). */
  wantClaims: readonly string[];
}

export interface PendingLogin {
  state: string;
  verifier: string;
  nonce: string;
  /** Where to return after signing in (a console path). */
  returnTo: string;
}

export class SignInError extends Error {
  override readonly name = 'SignInError';
  constructor(
    readonly code: 'provider_unavailable' | 'sign_in_failed' | 'no_role' | 'login_expired',
    message: string,
  ) {
    super(message);
  }
}

export class OidcSignIn {
  private config: Promise<client.Configuration> | undefined;
  constructor(private readonly s: OidcSettings) {}

  private configuration(): Promise<client.Configuration> {
    if (!this.config) {
      const issuer = new URL(this.s.issuer);
      // Plain http only for a provider on this machine (the configuration refuses it elsewhere).
      const insecure = issuer.protocol === 'http:' && isLoopbackHost(issuer.hostname);
      this.config = client
        .discovery(
          issuer,
          this.s.clientId,
          this.s.clientSecret,
          this.s.clientSecret === undefined ? client.None() : undefined,
          insecure ? { execute: [client.allowInsecureRequests] } : undefined,
        )
        .catch((e: unknown) => {
          this.config = undefined;
          throw new SignInError(
            'provider_unavailable',
            `the identity provider ${this.s.issuer} could not be reached or described itself wrongly: ${(e as Error).message}`,
          );
        });
    }
    return this.config;
  }

  /** The provider's authorization URL and the pending login to keep in the browser's cookie. */
  async start(redirectUri: string, returnTo: string): Promise<{ url: string; pending: PendingLogin }> {
    const config = await this.configuration();
    const verifier = client.randomPKCECodeVerifier();
    const pending: PendingLogin = {
      state: client.randomState(),
      verifier,
      nonce: client.randomNonce(),
      returnTo,
    };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: this.s.scopes.join(' '),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    return { url: url.href, pending };
  }

  /** The signed-in person's claims from the callback URL (checked: state, PKCE, nonce, ID token). */
  async finish(callbackUrl: URL, pending: PendingLogin): Promise<Record<string, unknown>> {
    const config = await this.configuration();
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(config, callbackUrl, {
        pkceCodeVerifier: pending.verifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
    } catch (e) {
      throw new SignInError('sign_in_failed', `the identity provider's answer was refused: ${describe(e)}`);
    }
    const claims = { ...(tokens.claims() ?? {}) } as Record<string, unknown>;
    const missing = this.s.wantClaims.some((c) => claim(claims, c) === undefined);
    if (missing && typeof claims.sub === 'string') {
      try {
        const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
        for (const [k, v] of Object.entries(info)) if (!(k in claims)) claims[k] = v;
      } catch {
        // no userinfo: the ID token's claims are all there is
      }
    }
    return claims;
  }
}

/** An openid-client error as a sentence, without tokens or codes. */
function describe(e: unknown): string {
  if (e instanceof client.AuthorizationResponseError)
    return `${e.error}${e.error_description ? `: ${e.error_description}` : ''}`;
  if (e instanceof client.ResponseBodyError)
    return `${e.error}${e.error_description ? `: ${e.error_description}` : ''}`;
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' ? code : 'the exchange of the code failed';
}

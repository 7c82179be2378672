/**
 * A real OpenID provider for browser tests: oidc-provider on 127.0.0.1 with a
 * random port and issuer `http://localhost:<port>`, a public client (no
 * secret, PKCE required) and optionally a confidential one, accounts given by
 * the test (subject -> claims, including a roles claim delivered in the ID
 * token through a `roles` scope), consent granted automatically, and
 * oidc-provider's built-in development login page, which `signInAtProvider`
 * fills in the way a person would.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
import Provider, { type KoaContextWithOIDC } from 'oidc-provider';
import type { Page } from 'playwright-core';

export interface OidcProviderOptions {
  /** The public client: no secret, PKCE (S256) required by oidc-provider for it. */
  clientId: string;
  redirectUris: string[];
  postLogoutRedirectUris?: string[];
  /** Subject -> extra claims, e.g. `{ ann: { name: 'Ann', roles: ['approver'] } }`. */
  accounts: Record<string, Record<string, unknown>>;
  /**
   * Name of the claim that carries roles (default `roles`); the `roles` scope asks for it.
   * An account's `roles` entry is released under this name.
   */
  rolesClaim?: string;
  /** Also register a confidential client (client_secret_basic) with the same redirect URIs. */
  confidential?: { clientId: string; clientSecret: string };
}

export interface OidcProvider {
  /** `http://localhost:<port>`: discovery is at `<issuer>/.well-known/openid-configuration`. */
  issuer: string;
  /** Same as `issuer`, as a URL. */
  url: URL;
  close(): Promise<void>;
}

/** Scope whose grant puts the roles claim in the ID token. */
export const ROLES_SCOPE = 'roles';

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export async function startOidcProvider(options: OidcProviderOptions): Promise<OidcProvider> {
  const rolesClaim = options.rolesClaim ?? 'roles';
  // Listen first: the issuer names the port, and the provider is built with its issuer.
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = createServer((req, res) => {
    if (handler) handler(req, res);
    else res.writeHead(503).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const issuer = `http://localhost:${port}`;

  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: 'test-signing', alg: 'RS256', use: 'sig' };

  const common = {
    redirect_uris: options.redirectUris,
    post_logout_redirect_uris: options.postLogoutRedirectUris ?? [],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  };
  const clients: Record<string, unknown>[] = [
    { ...common, client_id: options.clientId, token_endpoint_auth_method: 'none' },
  ];
  if (options.confidential) {
    clients.push({
      ...common,
      client_id: options.confidential.clientId,
      client_secret: options.confidential.clientSecret,
      token_endpoint_auth_method: 'client_secret_basic',
    });
  }

  const provider = new Provider(issuer, {
    clients,
    jwks: { keys: [signingKey] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    // Scope -> claims it releases. `roles` is ours; the rest are the standard ones.
    claims: {
      openid: ['sub'],
      profile: ['name', 'given_name', 'family_name', 'preferred_username'],
      email: ['email', 'email_verified'],
      [ROLES_SCOPE]: [rolesClaim],
    },
    // Release scope-requested claims in the ID token too, not only at userinfo.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    // Explicit lifetimes (seconds), long enough for any test; the defaults print a notice each.
    ttl: {
      AccessToken: 3600,
      AuthorizationCode: 600,
      Grant: 3600,
      IdToken: 3600,
      Interaction: 3600,
      Session: 3600,
    },
    async findAccount(_ctx: unknown, id: string) {
      const extra = Object.hasOwn(options.accounts, id) ? options.accounts[id] : undefined;
      if (!extra) return undefined;
      const claims: Record<string, unknown> = { ...extra, sub: id };
      // An account's `roles` is released under the configured claim name.
      if (rolesClaim !== 'roles' && 'roles' in claims && !(rolesClaim in claims)) {
        claims[rolesClaim] = claims.roles;
        delete claims.roles;
      }
      return { accountId: id, claims: async () => claims };
    },
    // A plain error page (the default @imports a web font) that tests can read: #oidc-error.
    async renderError(ctx: { type: string; body: string }, out: Record<string, unknown>) {
      ctx.type = 'html';
      ctx.body = `<!doctype html><meta charset="utf-8"><title>provider error</title><pre id="oidc-error">${escapeHtml(
        JSON.stringify(out),
      )}</pre>`;
    },
    // No consent screen: the first sign-in grants every scope the client asked for.
    async loadExistingGrant(ctx: KoaContextWithOIDC) {
      const { oidc } = ctx;
      const clientId = oidc.client!.clientId;
      const existing = oidc.result?.consent?.grantId ?? oidc.session?.grantIdFor(clientId);
      if (existing) return oidc.provider.Grant.find(existing);
      const grant = new oidc.provider.Grant({ accountId: oidc.account!.accountId, clientId });
      const scope = typeof oidc.params?.scope === 'string' ? oidc.params.scope : 'openid';
      grant.addOIDCScope(scope);
      await grant.save();
      return grant;
    },
  });
  handler = provider.callback();

  return {
    issuer,
    url: new URL(issuer),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * At the provider's development login page (already loaded in `page`), sign in
 * as `login` and submit; continue through a consent page if one is shown.
 * Resolves once the browser has left the provider (redirected to the client).
 * The dev page takes any password; the login must be a key of `accounts`
 * (any other login ends on the provider's error page, and this throws with
 * its error).
 */
export async function signInAtProvider(page: Page, login: string): Promise<void> {
  await page.locator('input[name="login"]').waitFor();
  const provider = new URL(page.url()).origin;
  await page.fill('input[name="login"]', login);
  await page.fill('input[name="password"]', 'any-password');
  await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  const consent = page.locator('input[name="prompt"][value="consent"]');
  if (new URL(page.url()).origin === provider && (await consent.count()) > 0) {
    await Promise.all([page.waitForNavigation(), page.click('button[type="submit"]')]);
  }
  if (new URL(page.url()).origin === provider) {
    const error = page.locator('#oidc-error');
    const why = (await error.count()) > 0 ? await error.innerText() : page.url();
    throw new Error(`still at the provider after signing in as ${login}: ${why}`);
  }
}

/**
 * The web console, mounted on the service's own port under /console: the
 * page and its assets (built into the package, nothing fetched at run time),
 * signing in (OpenID Connect, or development mode's one-click demo user),
 * signing out, and `GET /console/session` — who is signed in, their roles and
 * the CSRF token the page sends with every change.
 *
 * The page then calls the same /v1 routes as any API client, authenticated
 * by the session cookie (src/server/session.ts): it can do nothing the
 * person's roles could not do through the API. Every answer under /console
 * carries a Content-Security-Policy without inline script or style, and
 * forbids framing.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppExtra, AppPlugin } from '../server/app.js';
import { AuthError, callerId, type Principal, principalOf } from '../server/auth.js';
import { isLoopbackHost } from '../server/config.js';
import type { ServiceDeps } from '../server/deps.js';
import { ApiError } from '../server/errors.js';
import { ROLES } from '../server/roles.js';
import { out, s } from '../server/schema.js';
import type { SessionAuth } from '../server/session.js';
import { cookieValue } from '../server/session.js';
import { type ConsoleAssets, loadAssets } from './assets.js';
import { OidcSignIn, type PendingLogin, SignInError } from './oidc.js';

export const CONSOLE = '/console';
const LOGIN_COOKIE = 'cs_login';
const LOGIN_MS = 10 * 60_000;

/** What every /console answer says to the browser. */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'permissions-policy': 'publickey-credentials-get=(self), publickey-credentials-create=(self)',
};

/** The demo user's roles in development mode: all of them, so every page can be tried. */
const DEV_ROLES = [...ROLES];
const DEV_NAME = /^[a-z][a-z0-9-]{0,39}$/;

export interface ConsoleOptions {
  /** The environment the OIDC client secret is read from (`console.oidc.clientSecretEnv`). */
  env?: NodeJS.ProcessEnv;
  /** Where the built page and assets are (default: found next to this module or in dist/). */
  assetsDir?: string;
}

/** The console as a plugin for the service's app (createService's `plugins`). */
export function consolePlugin(opts: ConsoleOptions = {}): AppPlugin {
  return async (app, deps, extra) => {
    if (!deps.config.console.enabled || !extra.sessions) return;
    await mountConsole(app, deps, extra, extra.sessions, opts);
  };
}

async function mountConsole(
  app: FastifyInstance,
  deps: ServiceDeps,
  extra: AppExtra,
  sessions: SessionAuth,
  opts: ConsoleOptions,
): Promise<void> {
  const cfg = deps.config.console;
  const auth = deps.config.auth;
  const assets: ConsoleAssets = await loadAssets(opts.assetsDir);
  const secretEnv = cfg.oidc?.clientSecretEnv;
  const secret = secretEnv !== undefined ? (opts.env ?? process.env)[secretEnv] : undefined;
  if (secretEnv !== undefined && (secret === undefined || secret === ''))
    throw new Error(
      `console.oidc.clientSecretEnv names ${secretEnv}, which is not set: set it, or remove clientSecretEnv for a public client`,
    );
  const oidc = cfg.oidc
    ? new OidcSignIn({
        issuer: cfg.oidc.issuer,
        clientId: cfg.oidc.clientId,
        ...(secret !== undefined ? { clientSecret: secret } : {}),
        scopes: cfg.oidc.scopes,
        wantClaims: [auth.rolesClaim],
      })
    : undefined;
  // Checked per request too (the configuration object is the live one).
  const devAllowed = devSignInSafe(deps, extra);
  if (cfg.devSignIn && !devAllowed)
    app.log.warn(
      'console.devSignIn is off: the one-click sign-in (every role, no password) needs network.sandbox and a service listening on localhost only',
    );
  const devSignIn = () => cfg.devSignIn && devAllowed;
  const absoluteMs = cfg.session.maxHours * 3_600_000;
  const secure = () => extra.origin().startsWith('https:');
  const redirectUri = () => `${extra.origin()}${CONSOLE}/auth/callback`;
  const rpId = () => cfg.webauthn.rpId ?? new URL(extra.origin()).hostname;

  /**
   * Starts a session for `principal` and sets its cookie. A new sign-in in a browser first ends the
   * session it had: no two live sessions behind one cookie jar.
   */
  const signIn = async (req: FastifyRequest, reply: FastifyReply, principal: Principal, how: string) => {
    const earlier = await sessions.resolve(req);
    if (earlier) await deps.store.sessions.end(earlier.id, earlier.principal.caller);
    const { id } = await deps.store.sessions.start(principal as never, {
      absoluteMs,
      who: principal.caller,
      how,
    });
    sessions.setCookie(reply, id);
  };

  app.addHook('onRequest', async (req, reply) => {
    if (req.url === CONSOLE || req.url.startsWith(`${CONSOLE}/`)) reply.headers(CONSOLE_HEADERS);
  });

  const page = { config: { roles: 'public' as const }, schema: { hide: true } };

  app.get(CONSOLE, page, async (_req, reply) => reply.redirect(`${CONSOLE}/`, 302));
  app.get(`${CONSOLE}/`, page, async (_req, reply) => sendAsset(reply, assets, 'index.html'));
  app.get(`${CONSOLE}/assets/:file`, page, async (req, reply) =>
    sendAsset(reply, assets, (req.params as { file: string }).file),
  );

  app.get(
    `${CONSOLE}/auth/options`,
    {
      config: { roles: 'public' },
      schema: {
        tags: ['console'],
        summary: 'How a person can sign in to the console (no secrets)',
        response: {
          200: out(
            z.object({
              oidc: z.boolean(),
              dev: z.boolean(),
              issuer: z.string().optional(),
              signedIn: z.boolean().describe("whether the request's session cookie names a live session"),
            }),
            'the ways to sign in offered',
          ),
        },
      },
    },
    async (req) => ({
      signedIn: (await sessions.resolve(req)) !== undefined,
      oidc: oidc !== undefined,
      dev: devSignIn(),
      ...(cfg.oidc ? { issuer: new URL(cfg.oidc.issuer).host } : {}),
    }),
  );

  app.get(`${CONSOLE}/session`, {
    config: { roles: [...ROLES] },
    schema: {
      tags: ['console'],
      summary:
        "Who is signed in: the caller's identity, roles and parties, and (for a console session) its CSRF token and expiry",
      response: {
        200: out(
          z.object({
            caller: z.string(),
            subject: z.string(),
            roles: z.array(z.string()),
            parties: z.array(z.string()),
            session: z
              .object({ csrf: z.string(), expiresAt: z.string(), idleSeconds: z.number() })
              .optional(),
            dev: z.boolean(),
            webauthn: z.object({ rpId: z.string(), rpName: z.string() }),
          }),
          'the signed-in caller',
        ),
      },
    },
    handler: async (req) => {
      const p = req.principal as Principal;
      return {
        caller: p.caller,
        subject: p.subject,
        roles: p.roles,
        parties: p.parties,
        ...(req.session
          ? {
              session: {
                csrf: req.session.csrf,
                expiresAt: req.session.expiresAt,
                idleSeconds: Math.round(cfg.session.idleMinutes * 60),
              },
            }
          : {}),
        dev: devSignIn(),
        webauthn: { rpId: rpId(), rpName: cfg.webauthn.rpName },
      };
    },
  });

  app.get(`${CONSOLE}/auth/login`, page, async (req, reply) => {
    if (!oidc) return reply.redirect(`${CONSOLE}/?error=no_provider`, 303);
    const returnTo = safeReturn((req.query as { return?: unknown }).return);
    try {
      const { url, pending } = await oidc.start(redirectUri(), returnTo);
      reply.header('set-cookie', loginCookie(encodePending(pending), secure(), LOGIN_MS / 1000));
      return reply.redirect(url, 303);
    } catch (e) {
      req.log.warn({ err: e }, 'console sign-in could not start');
      return reply.redirect(`${CONSOLE}/?error=${codeOf(e)}`, 303);
    }
  });

  app.get(`${CONSOLE}/auth/callback`, page, async (req, reply) => {
    reply.header('set-cookie', loginCookie('', secure(), 0));
    const pending = decodePending(cookieValue(req.headers.cookie, LOGIN_COOKIE));
    if (!oidc) return reply.redirect(`${CONSOLE}/?error=no_provider`, 303);
    if (!pending) return reply.redirect(`${CONSOLE}/?error=login_expired`, 303);
    try {
      const url = new URL(req.url, extra.origin());
      const claims = await oidc.finish(url, pending);
      let principal: Principal;
      try {
        principal = principalOf(claims, auth);
      } catch (e) {
        if (e instanceof AuthError)
          throw new SignInError(
            e.code === 'no_role' ? 'no_role' : 'sign_in_failed',
            `${e.message}: the identity provider must put the service's roles in the ${auth.rolesClaim} claim`,
          );
        throw e;
      }
      // The session, not the ID token, bounds the sign-in from here on.
      const { expiresAt: _idTokenExpiry, ...stored } = principal;
      await signIn(req, reply, stored as Principal, 'oidc');
      return reply.redirect(`${CONSOLE}/${pending.returnTo}`, 303);
    } catch (e) {
      req.log.warn({ err: e instanceof SignInError ? e.message : e }, 'console sign-in refused');
      return reply.redirect(`${CONSOLE}/?error=${codeOf(e)}`, 303);
    }
  });

  app.post(
    `${CONSOLE}/auth/dev`,
    {
      config: { roles: 'public' },
      schema: {
        tags: ['console'],
        summary: 'Development mode only: sign in as a demo user with every role (404 otherwise)',
        body: s(
          z
            .strictObject({
              name: z
                .string()
                .regex(DEV_NAME, 'a lower-case name: letters, digits and -, up to 40')
                .default('dev-demo'),
            })
            .prefault({}),
        ),
      },
    },
    async (req, reply) => {
      if (!devSignIn())
        throw new ApiError(404, 'not_found', 'the one-click sign-in exists only in development mode');
      refuseForeignOrigin(req, extra.origin());
      const { name } = req.body as { name: string };
      const issuer = Array.isArray(auth.issuer) ? auth.issuer[0]! : auth.issuer;
      const principal: Principal = {
        subject: name,
        issuer,
        caller: callerId(auth, issuer, name),
        roles: [...DEV_ROLES],
        parties: [],
      };
      await signIn(req, reply, principal, 'development');
      return reply.status(204).send();
    },
  );

  app.post(
    `${CONSOLE}/sessions/end`,
    {
      config: { roles: ['admin'] },
      schema: {
        tags: ['console'],
        summary:
          'Sign a person out of the console at once, on every instance (e.g. after their roles were taken away at the identity provider)',
        body: s(
          z.strictObject({ caller: z.string().min(1).max(1000).describe('as the audit log names them') }),
        ),
        response: { 200: out(z.object({ ended: z.number() }), 'how many live sessions ended') },
      },
    },
    async (req) => ({
      ended: await deps.store.sessions.endAllOf(
        (req.body as { caller: string }).caller,
        (req.principal as Principal).caller,
      ),
    }),
  );

  app.post(
    `${CONSOLE}/auth/logout`,
    {
      config: { roles: 'public' },
      schema: { tags: ['console'], summary: 'Sign out: the session ends at once, on every instance' },
    },
    async (req, reply) => {
      const s = await sessions.resolve(req);
      if (s) {
        const problem = sessions.csrfProblem(req, s);
        if (problem !== undefined) throw new AuthError('csrf', problem);
        await deps.store.sessions.end(s.id, s.principal.caller);
      }
      sessions.clearCookie(reply);
      return reply.status(204).send();
    },
  );
}

/** The one-click sign-in only where nothing real is at stake: the sandbox network, on this machine. */
function devSignInSafe(deps: ServiceDeps, extra: AppExtra): boolean {
  return (
    deps.config.network.sandbox &&
    isLoopbackHost(new URL(extra.origin()).hostname) &&
    isLoopbackHost(deps.config.listen.host)
  );
}

function sendAsset(reply: FastifyReply, assets: ConsoleAssets, name: string) {
  const a = assets.get(name);
  if (!a) throw new ApiError(404, 'not_found', `the console has no asset ${name}`);
  return reply.type(a.type).send(a.body);
}

/** A cross-site page cannot post to the sign-in routes on a person's behalf. */
function refuseForeignOrigin(req: FastifyRequest, own: string): void {
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== own)
    throw new AuthError(
      'csrf',
      `a sign-in from ${origin} is refused: open the console at ${own}${CONSOLE}/ (passkeys and the session cookie belong to that address)`,
    );
}

/** The console location to return to after signing in: a hash route only, never another site. */
function safeReturn(v: unknown): string {
  return typeof v === 'string' && /^#\/[a-z-]{1,30}$/.test(v) ? v : '';
}

function codeOf(e: unknown): string {
  return e instanceof SignInError ? e.code : 'sign_in_failed';
}

function loginCookie(value: string, secure: boolean, maxAge: number): string {
  // Lax, not Strict: the provider's redirect back is a cross-site navigation that must carry it.
  return `${LOGIN_COOKIE}=${value}; Path=${CONSOLE}/auth; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}; Max-Age=${Math.round(maxAge)}`;
}

function encodePending(p: PendingLogin): string {
  return Buffer.from(JSON.stringify({ ...p, at: Date.now() }), 'utf8').toString('base64url');
}

function decodePending(v: string | undefined): PendingLogin | undefined {
  if (v === undefined || v === '' || v.length > 2000) return undefined;
  try {
    const o = JSON.parse(Buffer.from(v, 'base64url').toString('utf8')) as Record<string, unknown>;
    const { state, verifier, nonce, returnTo, at } = o;
    if (
      typeof state !== 'string' ||
      typeof verifier !== 'string' ||
      typeof nonce !== 'string' ||
      typeof at !== 'number' ||
      Date.now() - at > LOGIN_MS
    )
      return undefined;
    return { state, verifier, nonce, returnTo: safeReturn(returnTo) };
  } catch {
    return undefined;
  }
}

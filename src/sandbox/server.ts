/**
 * The sandbox network's HTTP face: one fastify app on one port serving the
 * participant's JSON Ledger API (`/v2`), the validator (`/api/validator`,
 * with its scan-proxy and the token-standard registry under
 * `/api/validator/v0/scan-proxy`), Scan (`/api/scan`), an OAuth2/OIDC
 * authorization server (`/oauth/token`, `/.well-known/*`) and the sandbox's
 * own controls (`/sandbox/*`: taps, rounds, clock, fault switches). It owns what is common to all routes:
 * authentication, fault application and rendering errors in the shape of the
 * service that answers.
 */
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { registerSandboxAdminRoutes } from './admin.js';
import { installAnsAutomation } from './ans-automation.js';
import { DISCOVERY_PATH, JWKS_PATH, SandboxAuth, type SandboxAuthOptions, TOKEN_PATH } from './auth.js';
import { installAutomation } from './automation.js';
import type { SandboxContext } from './context.js';
import { cantonError, E, SandboxError, spliceError } from './errors.js';
import { FaultController } from './faults.js';
import { SandboxNetwork, type SandboxNetworkOptions } from './network.js';
import { registerOAuthRoutes } from './oauth.js';
import { registerRecoveryRoutes } from './participant/recovery.js';
import { PlainError, registerParticipantRoutes } from './participant/routes.js';
import { requestAuthorization } from './participant/streams.js';
import { ScanHistory } from './scan/history.js';
import { registerScanProxyRoutes, registerScanRoutes } from './scan/routes.js';
import { registerRegistryRoutes } from './validator/registry.js';
import { registerValidatorRoutes } from './validator/routes.js';

export interface SandboxOptions extends SandboxNetworkOptions {
  /** Port to listen on; 0 (default) picks a free one. */
  port?: number;
  /** Interface to bind. Default 127.0.0.1: the sandbox has no business on a network. */
  host?: string;
  auth?: SandboxAuthOptions;
  /** Seed of the fault switches' random draws. */
  faultSeed?: number;
  /** Run the round and expiry timers (default true). Tests that drive time themselves turn them off. */
  timers?: boolean;
  /** Log requests (pino, to stderr). Default false. Headers (tokens) are never logged. */
  logger?: boolean;
}

export interface SandboxUrls {
  origin: string;
  /** JSON Ledger API base (paths start with `/v2`). */
  ledgerApi: string;
  validator: string;
  /** Registry root as reached through the validator's scan-proxy. */
  registry: string;
  scan: string;
  oauthToken: string;
  /** OIDC discovery document (names the token endpoint and the JWKS). */
  oidcDiscovery: string;
  jwks: string;
}

export interface RunningSandbox {
  urls: SandboxUrls;
  ctx: SandboxContext;
  app: FastifyInstance;
  close(): Promise<void>;
}

const SPLICE = new Set(['validator', 'scan', 'scan-proxy', 'registry']);

/** Builds the app (not listening). */
export function buildSandboxApp(opts: SandboxOptions = {}): { app: FastifyInstance; ctx: SandboxContext } {
  const net = new SandboxNetwork(opts);
  const ctx: SandboxContext = {
    net,
    faults: new FaultController(opts.faultSeed),
    auth: new SandboxAuth(opts.auth, net.seed),
    scan: new ScanHistory(net),
  };
  installAutomation(net);
  installAnsAutomation(net);
  const app = Fastify({
    // Requests are logged as method and url, never headers.
    // Logs go to stderr: stdout is the command's output (`canton-signer sandbox --json`).
    // The URL is logged with every query value blanked: a client may put a token or a secret there.
    logger:
      opts.logger === true
        ? {
            level: 'info',
            stream: process.stderr,
            serializers: {
              req: (req: { method: string; url: string }) => ({
                method: req.method,
                url: blankQuery(req.url),
              }),
            },
          }
        : false,
    bodyLimit: 8 * 1024 * 1024,
    // Contract ids (138+ hex characters) and party ids (up to 255) are path parameters.
    // `ignoreDuplicateSlashes`: the SDK joins its WebSocket base URL (`ws://host:port/`) and `/v2/...`.
    routerOptions: { maxParamLength: 1024, ignoreDuplicateSlashes: true },
    // close() ends every connection, also one whose answer a fault is holding back.
    forceCloseConnections: true,
  });
  app.decorateRequest('sandboxUser', undefined);
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(String(body))));
  });
  // A participant reads every request body as JSON, whatever its Content-Type says or when it has
  // none (the Wallet SDK's ledger client sends only Authorization); form posts keep their parser.
  app.removeContentTypeParser('text/plain');
  // Fastify's own JSON parser, which refuses `__proto__` and `constructor.prototype` keys.
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    json(req, text, (err, parsed) => {
      if (err) done(new PlainError('Invalid value for: body (the request body is not JSON)'), undefined);
      else done(null, parsed);
    });
  });

  app.addHook('onRequest', async (req, reply) => {
    // Cut off: the connection drops before anything is looked at (not even the token).
    const cut = req.routeOptions.config?.operation;
    if (cut !== undefined && ctx.faults.take(cut, 'unreachable')) {
      reply.hijack();
      req.raw.socket?.destroy();
      return reply;
    }
    const service = req.routeOptions.config?.service;
    // Scan is public, as are the endpoints a spec marks public; the sandbox controls and the
    // token endpoint take no bearer token.
    if (req.routeOptions.config?.public === true) return;
    if (service === undefined || service === 'sandbox' || service === 'oauth' || service === 'scan') return;
    const r = await ctx.auth.check(requestAuthorization(req));
    if (!r.ok)
      throw service === 'ledger-api'
        ? E.unauthenticated(r.reason)
        : spliceError(401, `Unauthorized: ${r.reason}`, { 'www-authenticate': 'Bearer' });
    // A token for a user the participant does not have: Canton resolves the user's rights before
    // anything else and refuses with PERMISSION_DENIED. (Splice's apps take any verified subject.)
    if (service === 'ledger-api' && r.userId !== undefined && !net.users.has(r.userId))
      throw E.permissionDenied(
        `could not resolve the rights of user ${r.userId}: no such user (USER_NOT_FOUND)`,
      );
    req.sandboxUser = r.userId;
  });

  app.addHook('preHandler', async (req) => {
    const { service, operation } = req.routeOptions.config ?? {};
    if (operation === undefined) return;
    const latency = ctx.faults.take(operation, 'latency');
    if (latency) await sleep(latency.ms);
    const status = ctx.faults.take(operation, 'status');
    if (status) throw overloaded(service, status.status, status.retryAfterMs ?? 1000);
  });

  app.addHook('onSend', async (req, reply, payload) => {
    const operation = req.routeOptions.config?.operation;
    if (operation === undefined || reply.statusCode >= 400) return payload;
    const held = ctx.faults.take(operation, 'timeoutAfterCommit');
    if (held) {
      await sleep(held.ms ?? 60_000);
      req.raw.socket?.destroy();
      return payload;
    }
    if (ctx.faults.take(operation, 'lostResponse')) req.raw.socket?.destroy();
    return payload;
  });

  app.setErrorHandler((err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply) => {
    const service = req.routeOptions.config?.service;
    if (err instanceof SandboxError) return reply.status(err.status).headers(err.headers).send(err.body);
    if (err instanceof PlainError)
      return reply.status(400).type('text/plain; charset=utf-8').send(err.message);
    const status = (err as FastifyError).statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      // Body that is not JSON, or of the wrong media type.
      if (service === 'ledger-api')
        return reply
          .status(400)
          .type('text/plain; charset=utf-8')
          .send(`Invalid value for: body (${err.message})`);
      return reply.status(status).send({ error: err.message });
    }
    req.log.error({ err }, 'sandbox route failed');
    if (service !== undefined && SPLICE.has(service))
      return reply.status(500).send({ error: `internal error: ${err.message}` });
    const e = cantonError('INTERNAL', 4, `An error occurred. ${err.message}`);
    return reply.status(500).send(e.body);
  });

  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    if (path.startsWith('/api/'))
      return reply.status(404).send({ error: `No route for ${req.method} ${path}` });
    return reply
      .status(404)
      .type('text/plain; charset=utf-8')
      .send('The requested resource could not be found.');
  });

  registerOAuthRoutes(app, ctx);
  registerParticipantRoutes(app, ctx);
  registerValidatorRoutes(app, ctx);
  registerRegistryRoutes(app, ctx);
  registerScanProxyRoutes(app, ctx);
  registerScanRoutes(app, ctx);
  registerSandboxAdminRoutes(app, ctx);
  registerRecoveryRoutes(app, ctx);
  return { app, ctx };
}

/** Builds, listens and starts the network's timers. */
export async function startSandbox(opts: SandboxOptions = {}): Promise<RunningSandbox> {
  const { app, ctx } = buildSandboxApp(opts);
  await app.listen({ port: opts.port ?? 0, host: opts.host ?? '127.0.0.1' });
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') throw new Error('sandbox: no TCP address');
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const origin = `http://${host}:${addr.port}`;
  if (opts.timers !== false) ctx.net.start();
  return {
    urls: {
      origin,
      ledgerApi: origin,
      validator: `${origin}/api/validator`,
      registry: `${origin}/api/validator/v0/scan-proxy`,
      scan: `${origin}/api/scan`,
      oauthToken: `${origin}${TOKEN_PATH}`,
      oidcDiscovery: `${origin}${DISCOVERY_PATH}`,
      jwks: `${origin}${JWKS_PATH}`,
    },
    ctx,
    app,
    async close() {
      ctx.net.stop();
      await app.close();
    },
  };
}

/** The retryable overload answer of the service the route belongs to. */
function overloaded(service: string | undefined, status: 429 | 503, retryAfterMs: number): SandboxError {
  const retryAfter = { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) };
  if (service !== 'ledger-api')
    return spliceError(
      status,
      status === 429
        ? 'Too many requests, retry later'
        : 'The server is taking too long to respond to the request, retry later',
      retryAfter,
    );
  if (status === 503)
    return cantonError('SERVICE_NOT_RUNNING', 1, 'Ledger API server is not running or is shutting down', {
      retryAfterMs,
      definiteAnswer: false,
    });
  // Canton's back-pressure answer: the participant is overloaded; category 2, RESOURCE_EXHAUSTED.
  const e = cantonError(
    'PARTICIPANT_BACKPRESSURE',
    2,
    'The participant is overloaded: too many in-flight requests',
    {
      retryAfterMs,
      definiteAnswer: false,
    },
  );
  const body = { ...(e.body as { grpcCodeValue: number }), grpcCodeValue: 8 };
  return new SandboxError(429, body as SandboxError['body'], e.headers);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** `url` with the value of every query parameter replaced by `***` (names are kept). */
function blankQuery(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const names = url
    .slice(q + 1)
    .split('&')
    .filter((p) => p !== '')
    .map((p) => `${p.split('=')[0]}=***`);
  return `${url.slice(0, q)}?${names.join('&')}`;
}

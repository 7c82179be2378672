/**
 * The service's HTTP application: one fastify instance on which, in this
 * order, every route must declare its roles (roles.ts), request parts are
 * validated by zod (schema.ts), every answer gets `X-Request-Id` and
 * `Cache-Control: no-store` (before authentication, so 401/403 carry them
 * too), callers are authenticated (auth.ts; a 403 is audited), errors
 * take one JSON shape (errors.ts), requests are counted (metrics.ts) and the
 * OpenAPI document is generated from the route schemas (@fastify/swagger,
 * served at `/docs/openapi.json`, and at `/docs` as a page to read and try
 * requests from: @fastify/swagger-ui, its assets served locally). The routes themselves live in routes/, one
 * plugin per resource, all under `/v1` except health, metrics and docs.
 */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type RawRequestDefaultExpression,
} from 'fastify';
import { z } from 'zod';
import { AuthError, installAuth, type Verifier } from './auth.js';
import type { ServiceDeps } from './deps.js';
import { clientErrorHandler, frameworkErrors, installErrorHandling, MAX_HEADER_BYTES } from './errors.js';
import { type DeclaredRoute, enforceRoleDeclarations } from './roles.js';
import { airGapRoutes } from './routes/air-gap.js';
import { auditRoutes } from './routes/audit.js';
import { automationRoutes } from './routes/automation.js';
import { auditAccessRefusal } from './routes/context.js';
import { depositsRoutes } from './routes/deposits.js';
import { eventsRoutes } from './routes/events.js';
import { healthRoutes } from './routes/health.js';
import { keysRoutes } from './routes/keys.js';
import { namesRoutes } from './routes/names.js';
import { offersRoutes } from './routes/offers.js';
import { partiesRoutes } from './routes/parties.js';
import { approvalsRoutes, policyRoutes } from './routes/policy.js';
import { reconciliationRoutes } from './routes/reconciliation.js';
import { signRoutes } from './routes/sign.js';
import { withdrawalsRoutes } from './routes/withdrawals.js';
import { installZod, out } from './schema.js';
import type { SessionAuth } from './session.js';

/**
 * A plugin mounted on the service's app by a layer above the server (the web
 * console): it gets the app at the root, the service's parts, and the
 * console sessions' authentication when sessions are on.
 */
export type AppPlugin = (app: FastifyInstance, deps: ServiceDeps, extra: AppExtra) => Promise<void>;

export interface AppExtra {
  sessions?: SessionAuth;
  /** The origin people reach the service at (the console's `publicUrl`, else http://localhost:<port>). */
  origin(): string;
}

export interface AppOptions {
  verifier: Verifier;
  /** Console sessions as a second way to authenticate (a cookie instead of a bearer token). */
  sessions?: SessionAuth;
  /** Plugins of the layers above, mounted at the root after the API's routes. */
  plugins?: readonly AppPlugin[];
  /** See AppExtra.origin. */
  origin?: () => string;
  /** A pino logger (the service's, redacting); default: no logging. */
  logger?: FastifyBaseLogger;
  /** Largest request body in bytes (default 4 MiB: prepared transactions can be large). */
  bodyLimit?: number;
}

export interface BuiltApp {
  app: FastifyInstance;
  /** Every route with its declared roles, filled as routes register (complete after `ready()`). */
  routes: DeclaredRoute[];
}

/** Headers and fields no log line may carry. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'passphrase',
  'pin',
  'token',
  'privateKey',
  'secret',
  'sharedSecret',
  'clientSecret',
  'password',
  '*.authorization',
  '*.passphrase',
  '*.pin',
  '*.token',
  '*.privateKey',
  '*.secret',
  '*.sharedSecret',
  '*.clientSecret',
  '*.password',
];

export const API_VERSION = '1';

/** Where the API reference lives: the page at /docs, the document at /docs/openapi.json. */
const DOCS = '/docs';

/** A caller's `X-Request-Id` is kept only when it is this: short, and safe in logs and headers. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request id: the caller's `X-Request-Id` when sane, else a new UUID. */
export function requestId(req: RawRequestDefaultExpression): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : crypto.randomUUID();
}

/**
 * Routes that sign for a party, so that they may answer 202: the party's key
 * is held offline, or the policy asks for approvals by people first.
 */
const AWAITS = /^\/v1\/(parties|parties\/:id\/offers\/:contractId\/[a-z]+|sign|sign\/execute)$/;
const AWAITING_RESPONSE = out(
  z.union([
    z.object({
      code: z.literal('awaiting_offline_signature'),
      message: z.string(),
      exportId: z
        .string()
        .describe('the sealed request to carry to the offline signer: GET /v1/air-gap/exports/{id}'),
      hashes: z.array(z.string()).describe('hex of the hashes it asks to be signed'),
      windowLatest: z.string().describe('sign and import before this'),
    }),
    z.object({
      code: z.literal('awaiting_approval'),
      message: z.string(),
      approvalRequest: z
        .string()
        .describe('the approval request collecting the approvals: GET /v1/approvals/{id}'),
      missing: z.array(z.object({ group: z.string(), need: z.number() })),
      expiresAt: z.string(),
      policy: z.object({ version: z.number(), sha256: z.string(), rule: z.string() }),
    }),
  ]),
  "not signed yet: the party's key is held offline and the request is across the air gap " +
    '(awaiting_offline_signature, docs/air-gap.md), or the policy asks for approvals by people first ' +
    '(awaiting_approval: once approved it runs by itself, its outcome on the approval request, or send it again; docs/policy.md)',
);

const ErrorShape = z
  .object({
    code: z
      .string()
      .describe('stable machine-readable code (invalid_request, refused, idempotency_conflict, …)'),
    message: z.string().describe('a sentence for a person'),
    field: z.string().optional().describe('the offending field, e.g. body.amount or headers.idempotency-key'),
  })
  .catchall(z.unknown());

const CLIENT_ERROR = out(
  ErrorShape,
  'the request was refused, nothing was done: 400 a field is missing or malformed (`field` names it) or the ' +
    'request cannot be carried out as asked; 401 no valid bearer token; 403 the token lacks the role or the party; ' +
    '404 no such party, key, withdrawal or export; 409 a conflict with the current state (idempotency key, ' +
    'state, label); 413/414/415/431 the HTTP layer refused it (too large, too long, not JSON); 422 the pipeline ' +
    'refused to sign (reason and problems). Codes: docs/api.md#errors',
);
const SERVER_ERROR = out(
  ErrorShape,
  'the service could not answer: 500 an unexpected error (detail only in the service log); 502 a Canton service ' +
    'answered with an error (upstream_error, its code kept) or a submission outcome is unknown; 503 the keys or ' +
    'the token keys are unavailable. Codes: docs/api.md#errors',
);

export function buildApp(deps: ServiceDeps, opts: AppOptions): BuiltApp {
  const app = Fastify({
    ...(opts.logger ? { loggerInstance: opts.logger } : { logger: false }),
    bodyLimit: opts.bodyLimit ?? 4 * 1024 * 1024,
    // Request ids in logs and in the X-Request-Id answer header; a caller's own id is kept when sane.
    requestIdHeader: false,
    genReqId: requestId,
    ajv: { customOptions: { coerceTypes: false } },
    // Party ids (~140 characters) and contract ids (up to a few hundred) are path parameters.
    routerOptions: { maxParamLength: 1024 },
    // Room for a large JWT (Node's default is 16 KiB); what Node's parser refuses, and what fastify
    // refuses before routing, still answers in the service's error format with its headers.
    http: { maxHeaderSize: MAX_HEADER_BYTES },
    clientErrorHandler,
    frameworkErrors,
  });
  // Bodies are JSON: a text/plain body is a 415 like any other media type, not a string to validate.
  app.removeContentTypeParser('text/plain');
  // The API reference page's own routes (the page and its assets, from @fastify/swagger-ui, which
  // declares no roles) are documentation: public, like the document itself.
  app.addHook('onRoute', (route) => {
    if (route.prefix === DOCS && route.config?.roles === undefined)
      route.config = { ...route.config, roles: 'public' };
  });
  const routes = enforceRoleDeclarations(app);
  // Every documented route answers errors in one shape: say so in the document.
  app.addHook('onRoute', (route) => {
    const schema = route.schema as { hide?: boolean; response?: Record<string, unknown> } | undefined;
    if (!schema || schema.hide) return;
    const signs = route.method === 'POST' && AWAITS.test(route.url);
    schema.response = {
      ...(signs ? { 202: AWAITING_RESPONSE } : {}),
      ...schema.response,
      '4xx': schema.response?.['4xx'] ?? CLIENT_ERROR,
      '5xx': schema.response?.['5xx'] ?? SERVER_ERROR,
    };
  });
  installZod(app);
  // Before authentication: its 401 and 403 answers carry them too.
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    reply.header('cache-control', 'no-store');
  });
  installAuth(app, opts.verifier, opts.sessions);
  installErrorHandling(app);
  app.addHook('onError', async (req, _reply, err) => {
    if (err instanceof AuthError && err.statusCode === 403) await auditAccessRefusal(deps, req, err);
  });
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    deps.metrics.httpRequests.inc({ method: req.method, route, status: String(reply.statusCode) });
    deps.metrics.httpDuration.observe({ method: req.method, route }, reply.elapsedTime / 1000);
  });

  app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'canton-signer',
        version: API_VERSION,
        description:
          'Custody and signing service for Canton Network external parties. Every signature is made after the ' +
          "prepared transaction was decoded, re-hashed and checked against the caller's intent.",
      },
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      },
      security: [{ bearer: [] }],
    },
  });

  // A page a person can read and try requests from; every asset is served from the package
  // (nothing is fetched from the internet). It reads the document at /docs/json.
  app.register(swaggerUi, {
    routePrefix: DOCS,
    uiConfig: { docExpansion: 'list', deepLinking: true },
    theme: { title: 'canton-signer API' },
  });

  app.register(
    async (v1) => {
      await keysRoutes(v1, deps);
      await partiesRoutes(v1, deps);
      await withdrawalsRoutes(v1, deps);
      await offersRoutes(v1, deps);
      await namesRoutes(v1, deps);
      await signRoutes(v1, deps);
      await auditRoutes(v1, deps);
      await airGapRoutes(v1, deps);
      await policyRoutes(v1, deps);
      await approvalsRoutes(v1, deps);
      await eventsRoutes(v1, deps);
      await reconciliationRoutes(v1, deps);
      await depositsRoutes(v1, deps);
      await automationRoutes(v1, deps);
    },
    { prefix: '/v1' },
  );

  app.register(async (root) => {
    await healthRoutes(root, deps);
    root.get('/metrics', { config: { roles: 'public' }, schema: { hide: true } }, async (_req, reply) =>
      reply.type(deps.metrics.contentType).send(await deps.metrics.text()),
    );
    root.get(`${DOCS}/openapi.json`, { config: { roles: 'public' }, schema: { hide: true } }, async () =>
      app.swagger(),
    );
  });

  const extra: AppExtra = {
    ...(opts.sessions ? { sessions: opts.sessions } : {}),
    origin: opts.origin ?? (() => 'http://localhost'),
  };
  for (const plugin of opts.plugins ?? []) {
    // Not encapsulated: a plugin's hooks apply at the root, so they also reach the answers no route
    // of its own gives (a 404 under its prefix).
    const mount = Object.assign(async (root: FastifyInstance) => plugin(root, deps, extra), {
      [Symbol.for('skip-override')]: true,
    });
    app.register(mount);
  }

  return { app, routes };
}

/**
 * The service's configuration: one zod schema, filled from defaults, then a
 * JSON or YAML file, then `CANTON_SIGNER_*` environment variables (which win).
 * A bad configuration is a `ConfigError` that lists every bad setting by its
 * path and the environment variable that sets it, never with a secret value.
 * `redactConfig` is the only form in which a configuration may be printed.
 * Beside it: the JWT verification keys' checks (jwt-keys.ts, shared with
 * src/server/auth.ts), the `exchange` section's schemas (config-exchange.ts)
 * and the environment variables (config-env.ts), re-exported here. The rest
 * stays one schema in one file: the checks between settings (`crossChecks`)
 * read across every section, and the loader fills them all in one pass.
 */

import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, extname, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { EVENT_PATTERN } from '../events/catalogue.js';
import { parseSecret, type WebhookSecret } from '../events/signature.js';
import { redactUrl } from '../store/db.js';
import { DEFAULT_PARTIES_CLAIM, DEFAULT_ROLES_CLAIM } from './claims.js';
import { CONFIG_FILE_ENV, ENV_SETTINGS, type EnvSetting, fromEnv } from './config-env.js';
import { exchangeSchema } from './config-exchange.js';
import {
  ALGORITHMS,
  ASYMMETRIC_ALGORITHMS,
  DEFAULT_ALGORITHMS,
  HMAC_MIN_BYTES,
  isHmacAlgorithm,
  type JwsAlgorithm,
  keyFitsAlgorithm,
  type PublicKeyEntry,
  publicJwk,
} from './jwt-keys.js';

export { CONFIG_FILE_ENV, ENV_SETTINGS, type EnvSetting } from './config-env.js';
export {
  type AutoAcceptRule,
  attributionRuleSchema,
  autoAcceptRuleSchema,
  type ExchangeConfig,
  exchangeSchema,
  type SweepRule,
  sweepRuleSchema,
} from './config-exchange.js';
export {
  ALGORITHMS,
  ASYMMETRIC_ALGORITHMS,
  DEFAULT_ALGORITHMS,
  HMAC_ALGORITHMS,
  HMAC_MIN_BYTES,
  type HmacAlgorithm,
  isHmacAlgorithm,
  type JwsAlgorithm,
  keyFitsAlgorithm,
  type PublicKeyEntry,
  publicJwk,
} from './jwt-keys.js';

// ---------------------------------------------------------------- schema

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Whether `host` (a URL's host name, or a listen address) is this machine only. */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.has(host);
}

function httpUrl(opts: { httpsUnlessLoopback?: boolean } = {}) {
  return z.string().superRefine((s, ctx) => {
    let u: URL;
    try {
      u = new URL(s);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'not a URL' });
      return;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      ctx.addIssue({ code: 'custom', message: 'must be an http(s) URL' });
    else if (opts.httpsUnlessLoopback && u.protocol === 'http:' && !isLoopbackHost(u.hostname))
      ctx.addIssue({ code: 'custom', message: 'must be https (plain http only for localhost)' });
  });
}

const postgresUrl = z.string().superRefine((s, ctx) => {
  let ok = false;
  try {
    const u = new URL(s);
    ok = (u.protocol === 'postgres:' || u.protocol === 'postgresql:') && u.hostname !== '';
  } catch {}
  // Never echo the value: it may hold a password.
  if (!ok)
    ctx.addIssue({ code: 'custom', message: 'must be a postgres:// or postgresql:// URL with a host' });
});

/** What is wrong with a database URL (the value itself never echoed), as the configuration checks it; undefined when it is fine. */
export function databaseUrlProblem(url: string): string | undefined {
  const r = postgresUrl.safeParse(url);
  return r.success ? undefined : r.error.issues[0]?.message;
}

const nonEmpty = z.string().min(1, 'must not be empty');
const oneOrMany = z.union([nonEmpty, z.array(nonEmpty).min(1, 'must not be empty')], {
  error: (iss) => (iss.input === undefined ? 'required' : 'must be a string or a list of strings'),
});

const algorithm = z.enum(ALGORITHMS, {
  error: () => `not an allowed algorithm ('none' never is); one of ${ALGORITHMS.join(', ')}`,
});

const publicKeySchema = z
  .strictObject({
    kid: nonEmpty.optional(),
    alg: z
      .enum(ASYMMETRIC_ALGORITHMS, { error: () => `must be one of ${ASYMMETRIC_ALGORITHMS.join(', ')}` })
      .optional(),
    pem: z.string().optional(),
    pemFile: nonEmpty.optional(),
    jwk: z.record(z.string(), z.unknown()).optional(),
  })
  .transform((e, ctx) => {
    const given = [e.pem, e.pemFile, e.jwk].filter((x) => x !== undefined).length;
    if (given !== 1) {
      ctx.addIssue({ code: 'custom', message: 'give exactly one of pem, pemFile or jwk' });
      return e;
    }
    const out: PublicKeyEntry = { ...e };
    if (e.pemFile !== undefined) {
      try {
        out.pem = readFileSync(e.pemFile, 'utf8');
      } catch {
        ctx.addIssue({ code: 'custom', path: ['pemFile'], message: 'cannot be read' });
        return out;
      }
    }
    try {
      publicJwk(out);
    } catch (err) {
      const field = e.jwk !== undefined ? 'jwk' : e.pemFile !== undefined ? 'pemFile' : 'pem';
      ctx.addIssue({ code: 'custom', path: [field], message: (err as Error).message });
    }
    return out;
  });

export { DEFAULT_PARTIES_CLAIM, DEFAULT_ROLES_CLAIM };

export const authSchema = z
  .strictObject({
    issuer: oneOrMany,
    audience: oneOrMany,
    jwksUrl: httpUrl({ httpsUnlessLoopback: true }).optional(),
    publicKeys: z.array(publicKeySchema).default([]),
    sharedSecret: z.string().optional(),
    algorithms: z
      .array(algorithm)
      .min(1, 'must not be empty')
      .default([...DEFAULT_ALGORITHMS]),
    rolesClaim: nonEmpty.default(DEFAULT_ROLES_CLAIM),
    partiesClaim: nonEmpty.default(DEFAULT_PARTIES_CLAIM),
    clockToleranceSeconds: z.number().min(0).max(300, 'at most 300').default(30),
    /** When set: tokens must carry `iat` and be at most this old (seconds), whatever their `exp`. */
    maxTokenAgeSeconds: z
      .number()
      .min(1)
      .max(31_536_000, 'at most 31536000 (a year)')
      // A refinement, not .int(): zod's int check would stop the cross-checks that list the other problems.
      .refine(Number.isInteger, 'a whole number of seconds')
      .optional(),
    /** When set: the token's `typ` header must be this (e.g. `at+jwt`, RFC 9068; `application/` optional). */
    tokenType: nonEmpty.optional(),
    jwksCacheSeconds: z.number().min(0).default(600),
    jwksTimeoutMs: z.number().int().min(1).max(60_000).default(5000),
  })
  // Missing fields are then reported one by one (auth.issuer, auth.audience), not as "auth: required".
  .prefault({} as { issuer: string; audience: string });

export type AuthConfig = z.output<typeof authSchema>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const databaseSchema = z
  .strictObject({
    url: postgresUrl.optional(),
    dataDir: nonEmpty.default('./data'),
  })
  .prefault({});

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export const webhookReceiverSchema = z.strictObject({
  /** How the receiver is named in the API, metrics and the database (its cursor). */
  name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a name: 1-64 letters, digits, ".", "_" or "-"'),
  url: httpUrl(),
  /** The event types it gets: exact types, families (`deposit.*`) or `*` (default: every event). */
  events: z
    .array(z.string().regex(EVENT_PATTERN, 'an event type (withdrawal.committed), a family (deposit.*) or *'))
    .min(1, 'must not be empty')
    .default(['*']),
  /** Environment variables holding the signing secret(s): the current one, and the next during a rotation. */
  secretEnv: z
    .array(z.string().regex(ENV_NAME, 'an environment variable name'))
    .min(1, 'name the environment variable holding the secret')
    .max(2, 'at most two secrets (the current and the next)'),
  /** How long one attempt may take (ms) before it counts as failed. */
  timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  enabled: z.boolean().default(true),
});

export const webhooksSchema = z
  .strictObject({
    receivers: z.array(webhookReceiverSchema).default([]),
    retry: z
      .strictObject({
        /** How long a failing delivery is retried before it is dead (s; default 3 days). */
        horizonSeconds: z.number().int().min(1).max(31_536_000).default(259_200),
        /** The first retry's delay (s); doubled at each failure, with jitter. */
        initialSeconds: z.number().min(0.01).max(86_400).default(5),
        /** The longest delay between two attempts (s). */
        maxIntervalSeconds: z.number().min(0.01).max(86_400).default(3600),
      })
      .prefault({}),
    /** Requests in flight at once across receivers (each receiver gets one at a time, in order). */
    concurrency: z.number().int().min(1).max(256).default(8),
    /** How often the outbox and due retries are looked at without a kick (ms). */
    pollMs: z.number().int().min(50).max(600_000).default(2000),
  })
  .superRefine((w, ctx) => {
    const seen = new Set<string>();
    w.receivers.forEach((r, i) => {
      if (seen.has(r.name))
        ctx.addIssue({ code: 'custom', path: ['receivers', i, 'name'], message: `${r.name} is named twice` });
      seen.add(r.name);
    });
  })
  .prefault({});

export type WebhooksConfig = z.output<typeof webhooksSchema>;

export type WebhookReceiverConfig = z.output<typeof webhookReceiverSchema>;

/**
 * The signing secrets of each enabled receiver, read from the environment
 * variables its `secretEnv` names. A variable unset, or too short, is a
 * ConfigError naming the variable (never its value).
 */
export function loadWebhookSecrets(
  cfg: WebhooksConfig,
  env: NodeJS.ProcessEnv = process.env,
): Map<string, WebhookSecret[]> {
  const out = new Map<string, WebhookSecret[]>();
  const problems: ConfigProblem[] = [];
  cfg.receivers.forEach((r, i) => {
    if (!r.enabled) return;
    const secrets: WebhookSecret[] = [];
    r.secretEnv.forEach((name, j) => {
      const path = `webhooks.receivers[${i}].secretEnv[${j}]`;
      const v = env[name];
      if (v === undefined || v === '') {
        problems.push({
          path,
          env: name,
          message: `${name} is not set: it must hold receiver ${r.name}'s secret`,
        });
        return;
      }
      try {
        secrets.push(parseSecret(v));
      } catch (e) {
        problems.push({ path, env: name, message: `${name} ${(e as Error).message}` });
      }
    });
    out.set(r.name, secrets);
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return out;
}

export const consoleSchema = z
  .strictObject({
    /** Serve the web console under /console (docs/console.md). */
    enabled: z.boolean().default(true),
    /**
     * The URL people open the console at (scheme, host, port; no path): the passkeys' origin and
     * relying party, and the OpenID Connect redirect URI's base. Default: http://localhost:<listen.port>.
     */
    publicUrl: httpUrl({ httpsUnlessLoopback: true })
      .refine((u) => {
        try {
          const x = new URL(u);
          return (x.pathname === '/' || x.pathname === '') && x.search === '' && x.hash === '';
        } catch {
          return true; // reported as not a URL
        }
      }, 'scheme, host and port only (no path)')
      .optional(),
    /** Sign-in with the organisation's identity provider: authorization code with PKCE. */
    oidc: z
      .strictObject({
        issuer: httpUrl({ httpsUnlessLoopback: true }),
        clientId: nonEmpty,
        /** Environment variable holding the client secret (omit for a public client: PKCE only). */
        clientSecretEnv: z.string().regex(ENV_NAME, 'an environment variable name').optional(),
        scopes: z.array(nonEmpty).default(['openid', 'profile']),
      })
      .optional(),
    session: z
      .strictObject({
        /** Signed out after this long without a request from the page. */
        idleMinutes: z.number().min(1).max(1440).default(15),
        /** Signed out this long after signing in, whatever the activity. */
        maxHours: z.number().min(0.1).max(168).default(8),
      })
      .prefault({}),
    webauthn: z
      .strictObject({
        /** The passkeys' relying party id (default: publicUrl's host name). */
        rpId: nonEmpty.optional(),
        rpName: nonEmpty.default('canton-signer'),
      })
      .prefault({}),
    /**
     * A one-click sign-in as the demo user, with every role. Development only: `npm start` turns it on;
     * never set it on a service that signs for real parties.
     */
    devSignIn: z.boolean().default(false),
  })
  .prefault({});

export type ConsoleConfig = z.output<typeof consoleSchema>;

/** Names of the book's parties: registration and renewal (docs/names.md). */
export const namesSchema = z
  .strictObject({
    /** Run the keeper that follows registrations and pays renewals (default on). */
    enabled: z.boolean().default(true),
    /** The network's name-service acronym: names end in `.unverified.<acronym>` (Scan's `name_service_name_acronym`). */
    acronym: z
      .string()
      .regex(/^[a-z][a-z0-9]{0,9}$/, 'lower-case letters and digits, at most 10')
      .default('cns'),
    /** How much above the fee (in CC) a payment's lock may hold for transfer fees, in percent. */
    feeAllowancePercent: z.number().min(0).max(100).default(10),
    /** A failed step (a payment without funds, a network error) is tried again after this long (s). */
    retrySeconds: z.number().int().min(1).max(86_400).default(300),
    /** `name.expiring` is sent when less than this is left before an entry expires and it is not renewed (h). */
    expiringHours: z
      .number()
      .min(1)
      .max(24 * 365)
      .default(24 * 7),
    /**
     * How long a signature across the air gap takes (h). A cold party's renewal is exported as soon
     * as its window opens; a warning says when the time left is shorter than this.
     */
    airGapTurnaroundHours: z
      .number()
      .min(0)
      .max(24 * 365)
      .default(72),
    /** How often the keeper looks at the registrations (ms; 0: at every automation pass). */
    pollMs: z.number().int().min(0).max(3_600_000).default(5000),
  })
  .prefault({});

export type NamesConfig = z.output<typeof namesSchema>;

export const configSchema = z
  .strictObject({
    listen: z
      .strictObject({
        host: nonEmpty.default('127.0.0.1'),
        port: z.number().int('must be an integer').min(0).max(65535).default(8080),
      })
      .prefault({}),
    database: databaseSchema,
    keystore: z.strictObject({ dir: nonEmpty.default('./keystore') }).prefault({}),
    network: z
      .strictObject({
        sandbox: z.boolean().default(false),
        ledgerApiUrl: httpUrl().optional(),
        validatorUrl: httpUrl().optional(),
        scanUrl: httpUrl().optional(),
        ledgerApiUser: nonEmpty.optional(),
        /** The validator operator's party, pinned: the expected provider of setup acceptances and delegate of sends. */
        validatorParty: z
          .string()
          .regex(/^[^:]+::1220[0-9a-f]{64}$/, 'must be a party id (hint::1220…)')
          .optional(),
      })
      .prefault({}),
    auth: authSchema,
    pipeline: z
      .strictObject({
        requireScheme: z.enum(['v2', 'v3']).optional(),
        minWindowSeconds: z.number().min(0).default(0),
        /** The synchronizer's preparation-time/record-time tolerance (Canton's default: 24 h). */
        preparationTimeToleranceSeconds: z.number().int().min(1).default(86_400),
        /** The synchronizer's ledger-time/record-time tolerance (Canton's default: 60 s). */
        ledgerTimeToleranceSeconds: z.number().int().min(1).default(60),
      })
      .prefault({}),
    worker: z
      .strictObject({
        /** Withdrawals carried at once by this process (one at a time per sending party). */
        concurrency: z.number().int().min(1).max(256).default(8),
        /** How often unfinished withdrawals are looked for without a kick (ms). */
        pollMs: z.number().int().min(50).max(600_000).default(2000),
        /**
         * How long a withdrawal without executeBefore, nothing of it submitted, waits for Canton
         * services that do not answer before it fails (s); one with executeBefore waits until then.
         */
        networkWaitSeconds: z.number().int().min(1).max(2_592_000).default(3600),
        /**
         * A withdrawal's lease (s): renewed every third of it while carried; when its process dies,
         * another instance takes the withdrawal over this long after.
         */
        leaseSeconds: z.number().int().min(2).max(3600).default(30),
      })
      .prefault({}),
    withdrawals: z
      .strictObject({
        /**
         * Deliver in one step or not at all: a withdrawal to a receiver without a valid transfer
         * preapproval (the transfer would only be an offer) is refused before anything is signed.
         */
        requireDelivery: z.boolean().default(false),
        /** How often the transfer offers of committed withdrawals are looked at (ms). */
        offerPollMs: z.number().int().min(100).max(3_600_000).default(5000),
      })
      .prefault({}),
    airGap: z
      .strictObject({
        /** Label of the key that seals exported signing requests (created, Ed25519, by POST /v1/air-gap/export-key). */
        exportKey: z
          .string()
          .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a key label: 1-64 letters, digits, ".", "_" or "-"')
          .default('air-gap-export'),
      })
      .prefault({}),
    policy: z
      .strictObject({
        /**
         * The policy document (YAML or JSON; docs/policy.md). Loaded at start: a malformed one stops
         * the service. Without one, the version in force in the database is used, else the built-in
         * allow-all (everything the pipeline verifies is signed).
         */
        file: z.string().min(1).optional(),
        /** Label of the Ed25519 key that seals policy versions and approver credentials (created when absent). */
        sealKey: z
          .string()
          .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a key label: 1-64 letters, digits, ".", "_" or "-"')
          .default('approvals-seal'),
      })
      .prefault({}),
    /** Webhooks: events POSTed to the exchange's receivers, signed (docs/exchange.md). */
    webhooks: webhooksSchema,
    /** The exchange side: ledger ingestion, deposits (docs/exchange.md). */
    exchange: exchangeSchema,
    /** The web console for approvers and operators (docs/console.md). */
    console: consoleSchema,
    names: namesSchema,
    log: z.strictObject({ level: z.enum(LOG_LEVELS).default('info') }).prefault({}),
  })
  .check(z.superRefine(crossChecks, { when: () => true }));

export type ServiceConfig = z.output<typeof configSchema>;

type Ctx = z.RefinementCtx<unknown>;

function obj(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

/** Rules between settings. Runs even when single settings are bad, so it reads defensively. */
function crossChecks(value: unknown, ctx: Ctx): void {
  const issue = (path: (string | number)[], message: string) =>
    ctx.addIssue({ code: 'custom', path, message });
  const root = obj(value);

  const net = obj(root.network);
  const urls = ['ledgerApiUrl', 'validatorUrl', 'scanUrl'].filter((k) => net[k] !== undefined);
  if (net.sandbox === true) {
    if (urls.length > 0)
      issue(['network', 'sandbox'], `cannot be combined with ${urls.map((u) => `network.${u}`).join(', ')}`);
  } else if (net.sandbox === undefined || net.sandbox === false) {
    for (const k of ['ledgerApiUrl', 'validatorUrl', 'ledgerApiUser'])
      if (net[k] === undefined) issue(['network', k], 'required unless network.sandbox is true');
  }

  const consoleCfg = obj(root.console);
  if (consoleCfg.devSignIn === true) {
    const host = obj(root.listen).host;
    if (net.sandbox !== true)
      issue(
        ['console', 'devSignIn'],
        'the one-click sign-in (every role, no password) exists only for development against network.sandbox (npm start); configure console.oidc',
      );
    else if (host !== undefined && !isLoopbackHost(String(host)))
      issue(
        ['console', 'devSignIn'],
        `the one-click sign-in (every role, no password) is for a service listening on this machine only, not on ${String(host)}`,
      );
  }

  const auth = obj(root.auth);
  const algs = (Array.isArray(auth.algorithms) ? auth.algorithms : DEFAULT_ALGORITHMS).filter(
    (a): a is JwsAlgorithm => typeof a === 'string' && (ALGORITHMS as readonly string[]).includes(a),
  );
  // With no valid algorithm, the checks below would only echo that problem.
  if (algs.length === 0) return;
  const hmac = algs.filter(isHmacAlgorithm);
  const asymmetric = algs.filter((a) => !isHmacAlgorithm(a));
  const secret = auth.sharedSecret;
  if (typeof secret === 'string') {
    if (hmac.length === 0)
      issue(['auth', 'algorithms'], 'auth.sharedSecret is set but no HS256/HS384/HS512 algorithm is allowed');
    const need = Math.max(32, ...hmac.map((a) => HMAC_MIN_BYTES[a]));
    if (Buffer.byteLength(secret, 'utf8') < need)
      issue(['auth', 'sharedSecret'], `must be at least ${need} bytes`);
  } else if (hmac.length > 0) {
    issue(['auth', 'sharedSecret'], `required when auth.algorithms includes ${hmac.join(', ')}`);
  }
  const keys = Array.isArray(auth.publicKeys) ? auth.publicKeys : [];
  if (auth.jwksUrl !== undefined && keys.length > 0)
    issue(['auth', 'publicKeys'], 'set auth.jwksUrl or auth.publicKeys, not both');
  if (asymmetric.length > 0 && auth.jwksUrl === undefined && keys.length === 0)
    issue(
      ['auth', 'jwksUrl'],
      `no key to verify ${asymmetric.join('/')} tokens: set auth.jwksUrl or auth.publicKeys` +
        ' (or allow only HS* algorithms with auth.sharedSecret)',
    );
  keys.forEach((k, i) => {
    let jwk: { kty: string; crv?: string };
    try {
      jwk = publicJwk(obj(k) as PublicKeyEntry);
    } catch {
      return; // reported by the entry itself
    }
    const alg = obj(k).alg;
    if (typeof alg === 'string') {
      if (!algs.includes(alg as JwsAlgorithm))
        issue(['auth', 'publicKeys', i, 'alg'], `${alg} is not in auth.algorithms`);
      else if (!keyFitsAlgorithm(jwk, alg))
        issue(['auth', 'publicKeys', i, 'alg'], `does not fit the key's type`);
    } else if (!asymmetric.some((a) => keyFitsAlgorithm(jwk, a))) {
      issue(
        ['auth', 'publicKeys', i],
        `the key (${jwk.kty}${jwk.crv ? ` ${jwk.crv}` : ''}) fits none of auth.algorithms (${algs.join(', ')})`,
      );
    }
  });
}

// ---------------------------------------------------------------- loading

export interface ConfigProblem {
  /** Dotted path of the setting, e.g. `auth.audience` or `auth.publicKeys[0].pem`. */
  path: string;
  /** The environment variable(s) that set it, e.g. `CANTON_SIGNER_AUTH_AUDIENCE`. */
  env?: string;
  message: string;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly ConfigProblem[]) {
    super(
      `invalid configuration (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n  ${problems
        .map(formatProblem)
        .join('\n  ')}`,
    );
  }
}

export function formatProblem(p: ConfigProblem): string {
  return `${p.path}${p.env ? ` (${p.env})` : ''}: ${p.message}`;
}

export interface LoadConfigOptions {
  /** JSON (`.json`) or YAML (`.yaml`, `.yml`) file; default `$CANTON_SIGNER_CONFIG`, else none. */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** Lowest-precedence values (e.g. what `npm start` sets up for the sandbox). */
  defaults?: Record<string, unknown>;
  /** Base of relative paths from the environment and defaults (default `process.cwd()`). */
  cwd?: string;
}

function pathString(path: readonly PropertyKey[]): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : `${s ? '.' : ''}${String(p)}`;
  return s;
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let o = target;
  for (const p of parts.slice(0, -1)) {
    if (typeof o[p] !== 'object' || o[p] === null || Array.isArray(o[p])) o[p] = {};
    o = o[p] as Record<string, unknown>;
  }
  o[parts.at(-1)!] = value;
}

function merge(base: unknown, over: unknown): unknown {
  if (over === undefined) return base;
  const b = obj(base);
  if (over === null || typeof over !== 'object' || Array.isArray(over) || base !== b) return over;
  const out: Record<string, unknown> = { ...b };
  for (const [k, v] of Object.entries(over)) out[k] = merge(b[k], v);
  return out;
}

/** Relative paths in a file are relative to the file's folder. */
function resolveFilePaths(layer: Record<string, unknown>, dir: string): void {
  const abs = (v: unknown) => (typeof v === 'string' && v !== '' && !isAbsolute(v) ? resolve(dir, v) : v);
  const database = obj(layer.database);
  if ('dataDir' in database) database.dataDir = abs(database.dataDir);
  const keystore = obj(layer.keystore);
  if ('dir' in keystore) keystore.dir = abs(keystore.dir);
  const policy = obj(layer.policy);
  if ('file' in policy) policy.file = abs(policy.file);
  const keys = obj(layer.auth).publicKeys;
  if (Array.isArray(keys))
    for (const k of keys) {
      const e = obj(k);
      if ('pemFile' in e) e.pemFile = abs(e.pemFile);
    }
}

async function readConfigFile(file: string): Promise<Record<string, unknown>> {
  const fail = (message: string) => new ConfigError([{ path: '(file)', env: CONFIG_FILE_ENV, message }]);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw fail(`cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const ext = extname(file).toLowerCase();
  let data: unknown;
  if (ext === '.yaml' || ext === '.yml') {
    let yaml: typeof import('yaml');
    try {
      yaml = await import('yaml');
    } catch {
      throw fail('reading YAML needs the "yaml" package; install it or use a JSON file');
    }
    try {
      data = yaml.parse(text);
    } catch (err) {
      // The parser's message quotes the file; report only where.
      const pos = (err as { linePos?: { line: number; col: number }[] }).linePos?.[0];
      throw fail(`${file} is not valid YAML${pos ? ` (line ${pos.line}, column ${pos.col})` : ''}`);
    }
  } else if (ext === '.json') {
    try {
      data = JSON.parse(text);
    } catch {
      // V8's message quotes the text around the error, which may be a secret.
      throw fail(`${file} is not valid JSON`);
    }
  } else {
    throw fail(`${file}: unknown configuration format (use .json, .yaml or .yml)`);
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data))
    throw fail(`${file} must hold an object of settings`);
  return data as Record<string, unknown>;
}

/** The environment variable named for a problem: the one that supplied the value, else all that could. */
function envFor(path: readonly PropertyKey[], used: Map<string, string>): string | undefined {
  const dotted = path.filter((p) => typeof p === 'string').join('.');
  let best: EnvSetting | undefined;
  for (const s of ENV_SETTINGS)
    if ((dotted === s.path || dotted.startsWith(`${s.path}.`)) && (!best || s.path.length > best.path.length))
      best = s;
  if (!best) return undefined;
  return used.get(best.path) ?? best.env.join(' or ');
}

function problemsOf(error: z.ZodError, used: Map<string, string>): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const iss of error.issues) {
    if (iss.code === 'unrecognized_keys') {
      for (const k of iss.keys) out.push({ path: pathString([...iss.path, k]), message: 'unknown setting' });
      continue;
    }
    const missing = iss.code === 'invalid_type' && iss.input === undefined;
    const env = envFor(iss.path, used);
    out.push({
      path: pathString(iss.path) || '(root)',
      ...(env ? { env } : {}),
      message: missing ? 'required' : iss.message,
    });
  }
  return out;
}

/**
 * The settings before validation: defaults, then the file, then the environment; `section`:
 * only that top-level section of each (and its environment variables). `used`: setting path →
 * the environment variable it came from, for messages.
 */
async function layeredSettings(
  opts: LoadConfigOptions,
  section?: string,
): Promise<{ layered: unknown; used: Map<string, string>; cwd: string }> {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const file = opts.file ?? (env[CONFIG_FILE_ENV] || undefined);
  const only = (o: Record<string, unknown>): Record<string, unknown> =>
    section === undefined ? o : section in o ? { [section]: o[section] } : {};
  let layered: unknown = only(opts.defaults ?? {});
  if (file !== undefined) {
    const path = resolve(cwd, file);
    const data = await readConfigFile(path);
    resolveFilePaths(data, dirname(path));
    layered = merge(layered, only(data));
  }
  const fromEnvironment: Record<string, unknown> = {};
  const used = new Map<string, string>();
  for (const s of ENV_SETTINGS) {
    if (section !== undefined && !s.path.startsWith(`${section}.`)) continue;
    const name = s.env.find((n) => env[n] !== undefined && env[n] !== '');
    if (name === undefined) continue;
    used.set(s.path, name);
    setPath(fromEnvironment, s.path, fromEnv(s.kind, env[name]!, cwd));
  }
  return { layered: merge(layered, fromEnvironment), used, cwd };
}

/**
 * Only the database settings, found and checked as `loadConfig` finds them: for a command that
 * needs the service's database and nothing else (`audit verify`), so that settings it does not
 * use (auth, network) are neither required nor checked.
 */
export async function loadDatabaseConfig(opts: LoadConfigOptions = {}): Promise<ServiceConfig['database']> {
  const { layered, used, cwd } = await layeredSettings(opts, 'database');
  const parsed = z.safeParse(z.object({ database: databaseSchema }), layered, { reportInput: true });
  if (!parsed.success) throw new ConfigError(problemsOf(parsed.error, used));
  return { ...parsed.data.database, dataDir: resolve(cwd, parsed.data.database.dataDir) };
}

/**
 * Defaults, then the file, then the environment; validated as a whole.
 * Throws `ConfigError` listing every bad setting.
 */
export async function loadConfig(opts: LoadConfigOptions = {}): Promise<ServiceConfig> {
  const { layered, used, cwd } = await layeredSettings(opts);
  const parsed = z.safeParse(configSchema, layered, { reportInput: true });
  if (!parsed.success) throw new ConfigError(problemsOf(parsed.error, used));
  const cfg = parsed.data;
  cfg.database.dataDir = resolve(cwd, cfg.database.dataDir);
  cfg.keystore.dir = resolve(cwd, cfg.keystore.dir);
  return cfg;
}

// ---------------------------------------------------------------- redaction

export const REDACTED = '[redacted]';
const SECRET_KEY = /secret|password|passphrase|token|pin$|credential/i;

// A URL with its password and secret-looking query parameters replaced: one implementation, the store's.
export { redactUrl };

function redactValue(key: string, v: unknown): unknown {
  if (typeof v === 'string') return SECRET_KEY.test(key) ? REDACTED : redactUrl(v);
  if (Array.isArray(v)) return v.map((x) => redactValue(key, x));
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactValue(k, x)]));
  return v;
}

/** A copy safe to print or log: secrets (shared secret, passwords in URLs, …) replaced. */
export function redactConfig<T>(cfg: T): T {
  return redactValue('', cfg) as T;
}

/**
 * The service's configuration: one zod schema, filled from defaults, then a
 * JSON or YAML file, then `CANTON_SIGNER_*` environment variables (which win).
 * A bad configuration is a `ConfigError` that lists every bad setting by its
 * path and the environment variable that sets it, never with a secret value.
 * `redactConfig` is the only form in which a configuration may be printed.
 * Also owns the checks on the JWT verification keys (public keys only, types
 * that fit the allowed algorithms), shared with src/server/auth.ts.
 */

import { createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, extname, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { EVENT_PATTERN } from '../events/catalogue.js';
import { parseSecret, type WebhookSecret } from '../events/signature.js';
import { ruleProblem } from '../exchange/deposits.js';
import { redactUrl } from '../store/db.js';
import { DEFAULT_PARTIES_CLAIM, DEFAULT_ROLES_CLAIM } from './claims.js';

// ---------------------------------------------------------------- algorithms

export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;
export const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'] as const;
export const ALGORITHMS = [...ASYMMETRIC_ALGORITHMS, ...HMAC_ALGORITHMS] as const;
export type JwsAlgorithm = (typeof ALGORITHMS)[number];
export type HmacAlgorithm = (typeof HMAC_ALGORITHMS)[number];
export const DEFAULT_ALGORITHMS: readonly JwsAlgorithm[] = ['RS256', 'ES256', 'EdDSA'];

/** RFC 7518 §3.2: an HMAC key at least as long as the hash. */
export const HMAC_MIN_BYTES: Readonly<Record<HmacAlgorithm, number>> = { HS256: 32, HS384: 48, HS512: 64 };

export function isHmacAlgorithm(alg: string): alg is HmacAlgorithm {
  return (HMAC_ALGORITHMS as readonly string[]).includes(alg);
}

/** The key type (and curve) an asymmetric algorithm needs. */
function keyTypeFor(alg: string): { kty: string; crv?: string } | undefined {
  if (/^(RS|PS)\d+$/.test(alg)) return { kty: 'RSA' };
  if (alg === 'ES256') return { kty: 'EC', crv: 'P-256' };
  if (alg === 'ES384') return { kty: 'EC', crv: 'P-384' };
  if (alg === 'ES512') return { kty: 'EC', crv: 'P-521' };
  if (alg === 'EdDSA' || alg === 'Ed25519') return { kty: 'OKP', crv: 'Ed25519' };
  return undefined;
}

export function keyFitsAlgorithm(key: { kty: string; crv?: string }, alg: string): boolean {
  const need = keyTypeFor(alg);
  return need !== undefined && need.kty === key.kty && (need.crv === undefined || need.crv === key.crv);
}

// ---------------------------------------------------------------- public keys

export interface PublicKeyEntry {
  kid?: string;
  alg?: (typeof ASYMMETRIC_ALGORITHMS)[number];
  pem?: string;
  pemFile?: string;
  jwk?: Record<string, unknown>;
}

const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/**
 * The public JWK of a configured key (PEM or JWK), with its kid and alg, or
 * an Error whose message says what is wrong (never quoting the key).
 */
export function publicJwk(entry: PublicKeyEntry): JsonWebKey & { kty: string; crv?: string } {
  let key: KeyObject;
  if (entry.pem !== undefined) {
    if (/PRIVATE KEY/.test(entry.pem)) throw new Error('is a private key; configure only the public key');
    if (!/-----BEGIN (RSA )?PUBLIC KEY-----/.test(entry.pem))
      throw new Error('is not a PEM public key (-----BEGIN PUBLIC KEY-----)');
    try {
      key = createPublicKey(entry.pem);
    } catch {
      throw new Error('is not a readable PEM public key');
    }
  } else if (entry.jwk !== undefined) {
    const jwk = entry.jwk;
    if (jwk.kty === 'oct')
      throw new Error('is a symmetric key; a shared secret belongs in auth.sharedSecret');
    if (PRIVATE_JWK_MEMBERS.some((m) => m in jwk))
      throw new Error('contains private key material; configure only the public key');
    if (jwk.use !== undefined && jwk.use !== 'sig') throw new Error('has "use" other than "sig"');
    try {
      key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
    } catch {
      throw new Error('is not a valid public JWK');
    }
  } else {
    throw new Error('needs pem, pemFile or jwk');
  }
  if (key.type !== 'public') throw new Error('is not a public key');
  const exported = key.export({ format: 'jwk' }) as JsonWebKey & { kty: string; crv?: string };
  if (exported.kty === 'RSA') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < 2048) throw new Error(`is an RSA key of ${bits} bits; at least 2048 are required`);
  } else if (exported.kty === 'EC') {
    if (!['P-256', 'P-384', 'P-521'].includes(exported.crv ?? ''))
      throw new Error(`is on curve ${exported.crv}; JWT verification supports P-256, P-384 and P-521`);
  } else if (!(exported.kty === 'OKP' && exported.crv === 'Ed25519')) {
    throw new Error('is neither RSA, EC nor Ed25519');
  }
  const kid = entry.kid ?? (typeof entry.jwk?.kid === 'string' ? entry.jwk.kid : undefined);
  const alg = entry.alg ?? (typeof entry.jwk?.alg === 'string' ? entry.jwk.alg : undefined);
  return { ...exported, use: 'sig', ...(kid ? { kid } : {}), ...(alg ? { alg } : {}) };
}

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

export const attributionRuleSchema = z
  .strictObject({
    /** Named in each deposit's `attribution` (`rule:<name>`). */
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a name: 1-64 letters, digits, ".", "_" or "-"'),
    /** A party id of the book, or `*` (default): every party. */
    party: z.string().min(1).optional(),
    /** exact: the memo is the account; prefix: the memo after `value`; regex: `account` from the groups. */
    match: z.enum(['exact', 'prefix', 'regex']),
    value: z.string().min(1).max(500).optional(),
    account: z.string().min(1).max(200).optional(),
  })
  .superRefine((r, ctx) => {
    const problem = ruleProblem(r);
    if (problem) ctx.addIssue({ code: 'custom', path: [], message: `rule ${r.name}: ${problem}` });
  });

const RULE_NAME = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a name: 1-64 letters, digits, ".", "_" or "-"');
/** A non-negative decimal with at most 10 decimals (token-standard amounts). */
const DECIMAL = z
  .string()
  .regex(/^[0-9]{1,28}(\.[0-9]{1,10})?$/, 'a decimal string, at most 10 decimals (e.g. "1000.5")');
const instrumentSchema = z.strictObject({ admin: z.string().min(1), id: z.string().min(1) });

/** Scaled to 10 decimals, for comparisons in the schema. */
function units(d: string): bigint {
  const [i = '0', f = ''] = d.split('.');
  return BigInt(i) * 10n ** 10n + BigInt(f.padEnd(10, '0'));
}

export const autoAcceptRuleSchema = z.strictObject({
  /** Named in each decision (`rule`) and its event. */
  name: RULE_NAME,
  /** The receiving party of the book, or `*`: every party. */
  party: z.string().min(1),
  /** Senders the rule covers (party ids or `*`); absent: any sender. */
  senders: z.array(z.string().min(1)).min(1).optional(),
  /** Instruments the rule covers; absent: any. */
  instruments: z.array(instrumentSchema).min(1).optional(),
  /** Only offers whose memo named a customer account (attributed deposits). */
  requireAccount: z.boolean().default(true),
  /** Only offers of at most this amount. */
  maxAmount: DECIMAL.optional(),
  action: z.enum(['accept', 'reject']),
});

export type AutoAcceptRule = z.output<typeof autoAcceptRuleSchema>;

export const sweepRuleSchema = z
  .strictObject({
    name: RULE_NAME,
    /** The party of the book swept from (its key signs the transfer). */
    from: z.string().min(1),
    /** The receiving party: it needs a transfer preapproval (a one-step transfer). */
    to: z.string().min(1),
    /** Default: Canton Coin of the network. */
    instrument: instrumentSchema.optional(),
    /** Above this available balance, a sweep runs … */
    maxBalance: DECIMAL,
    /** … and leaves this much behind. */
    minBalance: DECIMAL,
  })
  .superRefine((r, ctx) => {
    const decimal = /^[0-9]{1,28}(\.[0-9]{1,10})?$/;
    // A malformed amount is reported by its own field's check.
    if (
      decimal.test(r.minBalance) &&
      decimal.test(r.maxBalance) &&
      units(r.minBalance) >= units(r.maxBalance)
    )
      ctx.addIssue({
        code: 'custom',
        path: ['minBalance'],
        message: `sweep ${r.name}: minBalance (${r.minBalance}) must be below maxBalance (${r.maxBalance})`,
      });
    if (r.from === r.to)
      ctx.addIssue({
        code: 'custom',
        path: ['to'],
        message: `sweep ${r.name}: from and to are the same party`,
      });
  });

export type SweepRule = z.output<typeof sweepRuleSchema>;

export const exchangeSchema = z
  .strictObject({
    ingestion: z
      .strictObject({
        /** Follow the book's parties on the Ledger API update stream (deposits, deliveries, alerts). */
        enabled: z.boolean().default(true),
        /** How often the ledger end is looked at when nothing was new (ms). */
        pollMs: z.number().int().min(20).max(600_000).default(500),
        /** Updates read per request, and written per database transaction. */
        pageSize: z.number().int().min(1).max(10_000).default(200),
        /** The ingestion lease (s): another instance takes over this long after the holder died. */
        leaseSeconds: z.number().int().min(2).max(3600).default(15),
      })
      .prefault({}),
    deposits: z
      .strictObject({
        /** Memo → customer account rules, first match wins; none: the deposit is unattributed. */
        attribution: z.array(attributionRuleSchema).default([]),
        /** A longer memo is stored cut and attributes to nothing. */
        maxMemoLength: z.number().int().min(1).max(4096).default(256),
      })
      .prefault({}),
    /** Answers to incoming transfer offers by rule: first matching rule wins, else `otherwise`. */
    autoAccept: z
      .strictObject({
        rules: z.array(autoAcceptRuleSchema).default([]),
        /** No rule matched: leave the offer to an operator (wait) or send it back (reject). */
        otherwise: z.enum(['wait', 'reject']).default('wait'),
      })
      .superRefine((a, ctx) => {
        const seen = new Set<string>();
        for (const r of a.rules) {
          if (seen.has(r.name))
            ctx.addIssue({ code: 'custom', path: ['rules'], message: `rule name ${r.name} is used twice` });
          seen.add(r.name);
        }
      })
      .prefault({}),
    /** Treasury sweeps: a party's surplus above maxBalance moved down to minBalance. */
    sweeps: z
      .array(sweepRuleSchema)
      .default([])
      .superRefine((rs, ctx) => {
        const from = new Set<string>();
        for (const r of rs) {
          if (from.has(r.from))
            ctx.addIssue({ code: 'custom', path: [], message: `two sweeps from ${r.from}: one per party` });
          from.add(r.from);
        }
      }),
    /** How often sweeps and waiting offers are looked at apart from ingestion pages (ms). */
    automationPollMs: z.number().int().min(20).max(3_600_000).default(2000),
  })
  .prefault({});

export type ExchangeConfig = z.output<typeof exchangeSchema>;

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

// ---------------------------------------------------------------- environment

type EnvKind = 'string' | 'path' | 'number' | 'boolean' | 'list' | 'oneOrList' | 'pemFiles';

export interface EnvSetting {
  path: string;
  env: readonly string[];
  kind: EnvKind;
}

/** Every environment variable the configuration reads, in order of precedence within a setting. */
export const ENV_SETTINGS: readonly EnvSetting[] = [
  { path: 'listen.host', env: ['CANTON_SIGNER_HOST'], kind: 'string' },
  { path: 'listen.port', env: ['CANTON_SIGNER_PORT'], kind: 'number' },
  { path: 'database.url', env: ['CANTON_SIGNER_DATABASE_URL', 'DATABASE_URL'], kind: 'string' },
  { path: 'database.dataDir', env: ['CANTON_SIGNER_DATA_DIR'], kind: 'string' },
  { path: 'keystore.dir', env: ['CANTON_SIGNER_KEYSTORE'], kind: 'string' },
  { path: 'network.sandbox', env: ['CANTON_SIGNER_SANDBOX'], kind: 'boolean' },
  { path: 'network.ledgerApiUrl', env: ['CANTON_SIGNER_LEDGER_API_URL'], kind: 'string' },
  { path: 'network.validatorUrl', env: ['CANTON_SIGNER_VALIDATOR_URL'], kind: 'string' },
  { path: 'network.scanUrl', env: ['CANTON_SIGNER_SCAN_URL'], kind: 'string' },
  { path: 'network.ledgerApiUser', env: ['CANTON_SIGNER_LEDGER_API_USER'], kind: 'string' },
  { path: 'network.validatorParty', env: ['CANTON_SIGNER_VALIDATOR_PARTY'], kind: 'string' },
  { path: 'auth.issuer', env: ['CANTON_SIGNER_AUTH_ISSUER'], kind: 'oneOrList' },
  { path: 'auth.audience', env: ['CANTON_SIGNER_AUTH_AUDIENCE'], kind: 'oneOrList' },
  { path: 'auth.jwksUrl', env: ['CANTON_SIGNER_AUTH_JWKS_URL'], kind: 'string' },
  { path: 'auth.publicKeys', env: ['CANTON_SIGNER_AUTH_PUBLIC_KEY_FILES'], kind: 'pemFiles' },
  { path: 'auth.sharedSecret', env: ['CANTON_SIGNER_AUTH_SHARED_SECRET'], kind: 'string' },
  { path: 'auth.algorithms', env: ['CANTON_SIGNER_AUTH_ALGORITHMS'], kind: 'list' },
  { path: 'auth.rolesClaim', env: ['CANTON_SIGNER_AUTH_ROLES_CLAIM'], kind: 'string' },
  { path: 'auth.partiesClaim', env: ['CANTON_SIGNER_AUTH_PARTIES_CLAIM'], kind: 'string' },
  { path: 'auth.clockToleranceSeconds', env: ['CANTON_SIGNER_AUTH_CLOCK_TOLERANCE_SECONDS'], kind: 'number' },
  { path: 'auth.maxTokenAgeSeconds', env: ['CANTON_SIGNER_AUTH_MAX_TOKEN_AGE_SECONDS'], kind: 'number' },
  { path: 'auth.tokenType', env: ['CANTON_SIGNER_AUTH_TOKEN_TYPE'], kind: 'string' },
  { path: 'auth.jwksCacheSeconds', env: ['CANTON_SIGNER_AUTH_JWKS_CACHE_SECONDS'], kind: 'number' },
  { path: 'auth.jwksTimeoutMs', env: ['CANTON_SIGNER_AUTH_JWKS_TIMEOUT_MS'], kind: 'number' },
  { path: 'pipeline.requireScheme', env: ['CANTON_SIGNER_REQUIRE_SCHEME'], kind: 'string' },
  { path: 'pipeline.minWindowSeconds', env: ['CANTON_SIGNER_MIN_WINDOW_SECONDS'], kind: 'number' },
  {
    path: 'pipeline.preparationTimeToleranceSeconds',
    env: ['CANTON_SIGNER_PREPARATION_TIME_TOLERANCE_SECONDS'],
    kind: 'number',
  },
  {
    path: 'pipeline.ledgerTimeToleranceSeconds',
    env: ['CANTON_SIGNER_LEDGER_TIME_TOLERANCE_SECONDS'],
    kind: 'number',
  },
  { path: 'worker.concurrency', env: ['CANTON_SIGNER_WORKER_CONCURRENCY'], kind: 'number' },
  { path: 'worker.pollMs', env: ['CANTON_SIGNER_WORKER_POLL_MS'], kind: 'number' },
  {
    path: 'worker.networkWaitSeconds',
    env: ['CANTON_SIGNER_WORKER_NETWORK_WAIT_SECONDS'],
    kind: 'number',
  },
  {
    path: 'withdrawals.requireDelivery',
    env: ['CANTON_SIGNER_WITHDRAWALS_REQUIRE_DELIVERY'],
    kind: 'boolean',
  },
  { path: 'withdrawals.offerPollMs', env: ['CANTON_SIGNER_WITHDRAWALS_OFFER_POLL_MS'], kind: 'number' },
  { path: 'airGap.exportKey', env: ['CANTON_SIGNER_AIR_GAP_EXPORT_KEY'], kind: 'string' },
  { path: 'policy.file', env: ['CANTON_SIGNER_POLICY_FILE'], kind: 'path' },
  { path: 'policy.sealKey', env: ['CANTON_SIGNER_POLICY_SEAL_KEY'], kind: 'string' },
  { path: 'exchange.ingestion.enabled', env: ['CANTON_SIGNER_INGESTION'], kind: 'boolean' },
  { path: 'webhooks.concurrency', env: ['CANTON_SIGNER_WEBHOOKS_CONCURRENCY'], kind: 'number' },
  { path: 'webhooks.pollMs', env: ['CANTON_SIGNER_WEBHOOKS_POLL_MS'], kind: 'number' },
  { path: 'log.level', env: ['CANTON_SIGNER_LOG_LEVEL'], kind: 'string' },
];

/** The file the configuration is read from when `loadConfig` is given none. */
export const CONFIG_FILE_ENV = 'CANTON_SIGNER_CONFIG';

function list(s: string): string[] {
  return s
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
}

/** An environment string as the setting's type; left as a string when it does not parse (zod reports it). */
function fromEnv(kind: EnvKind, raw: string, cwd: string): unknown {
  switch (kind) {
    case 'string':
      return raw;
    case 'path':
      return raw === '' ? raw : resolve(cwd, raw);
    case 'number':
      return /^\s*-?\d+(\.\d+)?\s*$/.test(raw) ? Number(raw) : raw;
    case 'boolean': {
      const s = raw.trim().toLowerCase();
      if (['true', '1', 'yes'].includes(s)) return true;
      if (['false', '0', 'no'].includes(s)) return false;
      return raw;
    }
    case 'list':
      return list(raw);
    case 'oneOrList': {
      const l = list(raw);
      return l.length === 1 ? l[0] : l;
    }
    case 'pemFiles':
      return list(raw).map((f) => ({ pemFile: resolve(cwd, f) }));
  }
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

/**
 * Development mode (`canton-signer serve --dev`, what `npm start` runs): the
 * built-in sandbox network in-process, the embedded database under
 * ./dev/data, the file keystore under ./dev/keystore (folders of its own, so
 * that the CLI's ./keystore under the user's passphrase and development mode
 * never share a keystore) with a fixed development passphrase (unless
 * CANTON_SIGNER_PASSPHRASE(_FILE) is set), an HS256 JWT secret made
 * once and kept in <data>/dev-auth.json (mode 0600), two demo parties
 * (alice, funded from the sandbox tap at each start, and bob) re-hosted on the
 * fresh in-memory sandbox at each start, and a demo token plus copy-paste
 * `curl` lines printed at start (one sends alice a deposit from a sandbox
 * customer; the sandbox's origin is noted for the CLI: ./dev-sandbox-note.ts). Never for real funds: it says so loudly,
 * and it refuses to run unless the final configuration (file and environment
 * over its defaults) still uses the built-in sandbox network.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { SignJWT } from 'jose';
import { acceptSetupProposal } from '../flows/setup-accept.js';
import { PASSPHRASE } from '../keys/passphrase.js';
import type { Signer } from '../keys/signer.js';
import { hostExternalParty, sandboxPartyRecord } from '../sandbox/host-party.js';
import type { RunningSandbox } from '../sandbox/server.js';
import type { PartyBook, PartyRecord } from '../store/parties.js';
import { isLoopbackHost, type ServiceConfig } from './config.js';
import type { ServiceDeps } from './deps.js';
import type { Role } from './roles.js';

export const DEV_ISSUER = 'canton-signer-dev';
export const DEV_AUDIENCE = 'canton-signer-dev';
/** The keystore passphrase of development mode. Public by design: dev keys guard nothing. */
export const DEV_PASSPHRASE = 'canton-signer-development-passphrase';
/** Seed of the dev sandbox: the same network identities at every start, so party records stay valid. */
export const DEV_SANDBOX_SEED = 'canton-signer-dev';
export const DEV_AUTH_FILE = 'dev-auth.json';
export const DEV_TOKEN_ROLES: readonly Role[] = ['admin', 'operator', 'withdrawer', 'auditor'];
export const DEV_TOKEN_HOURS = 12;
export const DEMO_FUNDS = '1000000';
/** The demo deposit the banner offers: a sandbox customer pays alice (docs/sandbox.md, customers). */
export const DEMO_DEPOSIT = { to: 'alice', amount: '25', memo: 'acct-1001' } as const;
export const DEMO_PARTIES = [
  { hint: 'alice', label: 'dev-alice', fund: true },
  { hint: 'bob', label: 'dev-bob', fund: false },
] as const;

/** Stands in for the dev secret while the configuration is loaded (the real one lives in the data folder). */
const PLACEHOLDER = `dev-placeholder-${randomBytes(24).toString('hex')}`;

/** Development mode's own folders (relative to the working directory): database and keystore. */
export const DEV_DATA_DIR = './dev/data';
export const DEV_KEYSTORE_DIR = './dev/keystore';

/** Development mode logs warnings and errors only, unless log.level / CANTON_SIGNER_LOG_LEVEL says otherwise. */
export const DEV_LOG_LEVEL = 'warn';

/** Lowest-precedence settings of development mode; file and environment still override them. */
export function devDefaults(): Record<string, unknown> {
  return {
    network: { sandbox: true },
    database: { dataDir: DEV_DATA_DIR },
    keystore: { dir: DEV_KEYSTORE_DIR },
    // The start banner is for a person: JSON log lines (every request at info) would bury it.
    log: { level: DEV_LOG_LEVEL },
    // The demo deposit's memo (acct-1001) names customer account 1001.
    exchange: { deposits: { attribution: [{ name: 'demo-accounts', match: 'prefix', value: 'acct-' }] } },
    auth: {
      issuer: DEV_ISSUER,
      audience: DEV_AUDIENCE,
      sharedSecret: PLACEHOLDER,
      algorithms: ['HS256'],
    },
  };
}

/**
 * Why development mode must not run with `config`, if it must not: its
 * public keystore passphrase and demo parties are for the built-in sandbox
 * only, never for a network named by the file or the environment, and its
 * data stays in the embedded database, never a PostgreSQL server that may
 * be a real signer's.
 */
export function devConfigProblem(config: ServiceConfig): string | undefined {
  if (config.database.url !== undefined)
    return (
      `--dev keeps its data in the embedded database (database.dataDir, default ${DEV_DATA_DIR}), but the configuration ` +
      'names a PostgreSQL server (database.url, DATABASE_URL or CANTON_SIGNER_DATABASE_URL): development mode ' +
      "would write its demo parties and keys there and run that database's withdrawals against the sandbox. " +
      'Unset it for --dev, or run without --dev'
    );
  if (config.network.sandbox) return undefined;
  return (
    '--dev runs only on the built-in sandbox network, but the configuration sets network.sandbox ' +
    '(CANTON_SIGNER_SANDBOX) to false and names a real network: development mode would use the public ' +
    'development keystore passphrase there. Remove --dev, or set network.sandbox: true'
  );
}

/**
 * What to do when the keystore development mode opens is protected by
 * another passphrase than the one it uses (a keystore configured with
 * keystore.dir / CANTON_SIGNER_KEYSTORE, e.g. the CLI's ./keystore).
 */
export function devPassphraseMismatch(keystoreDir: string, devPassphrase: boolean): string {
  return devPassphrase
    ? `the keystore ${keystoreDir} is protected by another passphrase than development mode's public one. ` +
        'Either let --dev use its own keystore: unset CANTON_SIGNER_KEYSTORE (and keystore.dir in the ' +
        `configuration file) so that it uses ${DEV_KEYSTORE_DIR}; or give that keystore's passphrase with ` +
        'CANTON_SIGNER_PASSPHRASE_FILE'
    : `the keystore ${keystoreDir} is protected by another passphrase than the one in ` +
        'CANTON_SIGNER_PASSPHRASE(_FILE). Give its passphrase, or unset CANTON_SIGNER_KEYSTORE (and ' +
        `keystore.dir in the configuration file) so that --dev uses its own keystore ${DEV_KEYSTORE_DIR}`;
}

/**
 * The environment of development mode for the keystore `keystoreDir` the
 * configuration names. Development mode's own keystore (DEV_KEYSTORE_DIR)
 * is always under the development passphrase: a passphrase variable left
 * exported for the CLI's ./keystore (as the README's commands do) is not
 * used for it (`ignored` names it). Another keystore, configured, takes the
 * passphrase configured for it, else the development one.
 */
export function devEnv(
  env: NodeJS.ProcessEnv,
  keystoreDir: string,
): { env: NodeJS.ProcessEnv; devPassphrase: boolean; ignored?: string } {
  const given = [PASSPHRASE.env, PASSPHRASE.fileEnv].filter((v) => env[v]);
  if (resolve(keystoreDir) !== resolve(DEV_KEYSTORE_DIR) && given.length > 0)
    return { env, devPassphrase: false };
  const own: NodeJS.ProcessEnv = { ...env, [PASSPHRASE.env]: DEV_PASSPHRASE };
  delete own[PASSPHRASE.fileEnv];
  return {
    env: own,
    devPassphrase: true,
    ...(given.length > 0 ? { ignored: given.join(' and ') } : {}),
  };
}

/** The dev JWT secret in `<dataDir>/dev-auth.json`, created (0600) on first use. */
export async function devSecret(
  dataDir: string,
): Promise<{ secret: string; file: string; created: boolean }> {
  const file = join(resolve(dataDir), DEV_AUTH_FILE);
  await mkdir(resolve(dataDir), { recursive: true, mode: 0o700 });
  let text: string | undefined;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  if (text !== undefined) {
    let secret: unknown;
    try {
      secret = (JSON.parse(text) as { sharedSecret?: unknown }).sharedSecret;
    } catch {}
    if (typeof secret !== 'string' || Buffer.byteLength(secret) < 32)
      throw new Error(`${file} holds no usable sharedSecret; delete it to make a new one`);
    if (((await stat(file)).mode & 0o077) !== 0) await chmod(file, 0o600);
    return { secret, file, created: false };
  }
  const secret = randomBytes(32).toString('base64url');
  const doc = { format: 'canton-signer/dev-auth@1', algorithm: 'HS256', sharedSecret: secret };
  await writeFile(file, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  return { secret, file, created: true };
}

/**
 * Puts the dev secret into a configuration loaded with `devDefaults()`.
 * Returns whether auth is still development auth (false when the file or the
 * environment configured other auth: then no demo token can be minted).
 */
export async function applyDevSecret(config: ServiceConfig): Promise<{ file: string } | undefined> {
  if (config.auth.sharedSecret !== PLACEHOLDER) {
    config.console.devSignIn = false;
    return undefined;
  }
  const { secret, file } = await devSecret(config.database.dataDir);
  config.auth.sharedSecret = secret;
  // The console's one-click sign-in (said loudly on its page): with development auth, on this machine.
  config.console.devSignIn = isLoopbackHost(config.listen.host);
  return { file };
}

/** A demo bearer token for the dev configuration. */
export async function devToken(
  config: ServiceConfig,
  parties: readonly string[],
  opts: { hours?: number; roles?: readonly Role[] } = {},
): Promise<string> {
  const secret = config.auth.sharedSecret;
  if (secret === undefined) throw new Error('development token: auth.sharedSecret is not set');
  const first = (v: string | string[]) => (Array.isArray(v) ? v[0]! : v);
  return new SignJWT({
    [config.auth.rolesClaim]: [...(opts.roles ?? DEV_TOKEN_ROLES)],
    [config.auth.partiesClaim]: [...parties],
  })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject('dev-demo')
    .setIssuer(first(config.auth.issuer))
    .setAudience(first(config.auth.audience))
    .setIssuedAt()
    .setExpirationTime(`${opts.hours ?? DEV_TOKEN_HOURS}h`)
    .sign(new TextEncoder().encode(secret));
}

export interface DemoParties {
  alice: PartyRecord;
  bob: PartyRecord;
  /** Every party of the book now hosted on the sandbox. */
  hosted: string[];
}

async function demoParty(
  signer: Signer,
  book: PartyBook,
  sandbox: RunningSandbox,
  hint: string,
  label: string,
): Promise<PartyRecord> {
  const existing = (await book.list()).find((r) => r.keyLabel === label && r.hint === hint);
  if (existing) return existing;
  const keys = await signer.list();
  const key =
    keys.find((k) => k.label === label) ??
    (await signer.generate({ label, scheme: 'ed25519', backend: 'file' }));
  const rec = sandboxPartyRecord(sandbox.ctx.net, hint, key);
  await book.put(rec);
  return rec;
}

/**
 * Makes sure the demo parties exist (key + party book record) and hosts every
 * party of the party book on the fresh sandbox; funds alice from the tap.
 */
export async function hostDevParties(deps: ServiceDeps, sandbox: RunningSandbox): Promise<DemoParties> {
  const book = deps.store.parties;
  const [alice, bob] = await Promise.all(
    DEMO_PARTIES.map((p) => demoParty(deps.signer, book, sandbox, p.hint, p.label)),
  );
  const net = sandbox.ctx.net;
  const hosted: string[] = [];
  for (const rec of await book.list()) {
    const fund = DEMO_PARTIES.some((p) => p.fund && p.label === rec.keyLabel && p.hint === rec.hint);
    // The rights go to the user the service acts as on its sandbox.
    hostExternalParty(net, rec, { userId: deps.flows.userId, ...(fund ? { fund: DEMO_FUNDS } : {}) });
    hosted.push(rec.partyId);
  }
  // The sandbox ledger is new at each start: what ingestion kept of the last one no longer applies.
  await deps.store.ledger.forgetLedger();
  // alice receives deposits in one step: the validator's transfer preapproval, accepted (signed) by her.
  await deps.flows.validator?.createSetupProposal({ user_party_id: alice!.partyId });
  await acceptSetupProposal(deps.flows, alice!.partyId);
  return { alice: alice!, bob: bob!, hosted };
}

const sh = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The console's address for a service listening at `url`: on localhost, the
 * host name passkeys accept for a service on this machine (an IP address
 * cannot be a passkey's relying party).
 */
export function consoleUrl(url: string): string {
  const u = new URL(url);
  if (isLoopbackHost(u.hostname) || u.hostname === '0.0.0.0') u.hostname = 'localhost';
  return `${u.origin}/console/`;
}

/**
 * The start banner: where everything is, the demo token and the commands
 * (stdout). Every line indented by two spaces that starts with `export`,
 * `curl` or `npx` is a command that runs as printed (a trailing backslash continues
 * it on the next line); test/server/dev-banner.test.ts runs them.
 */
export function devBanner(x: {
  url: string;
  sandbox: RunningSandbox;
  token?: string;
  parties: DemoParties;
  logLevel: string;
  /** The policy in force (version 0: none configured). */
  policy?: { version: number; sha256: string; source: string };
}): string {
  const { url, sandbox, token, parties } = x;
  const body = JSON.stringify({
    party: parties.alice.partyId,
    receiver: parties.bob.partyId,
    amount: '10',
    memo: 'demo',
  });
  const lines = [
    '',
    'canton-signer is running (development mode)',
    `  service    ${url}`,
    `  console    ${consoleUrl(url)}  (approvals, withdrawals, audit; one-click demo sign-in)`,
    `  API docs   ${url}/docs`,
    `  metrics    ${url}/metrics`,
    `  health     ${url}/health   ${url}/ready`,
    `  sandbox    ${sandbox.urls.origin}  (Ledger API; validator ${sandbox.urls.validator}; scan ${sandbox.urls.scan})`,
    `  alice      ${parties.alice.partyId}  (funded ${DEMO_FUNDS} from the sandbox tap)`,
    `  bob        ${parties.bob.partyId}`,
    `  policy     ${!x.policy || x.policy.source === 'builtin' ? 'none: everything the pipeline verifies is signed (docs/policy.md: policy.file)' : `version ${x.policy.version} (sha256 ${x.policy.sha256.slice(0, 16)}…, from ${x.policy.source})`}`,
    `  logs       ${x.logLevel === DEV_LOG_LEVEL ? `warnings and errors only (CANTON_SIGNER_LOG_LEVEL=info npm start: every request)` : `level ${x.logLevel}`}`,
    '',
  ];
  if (token) {
    lines.push(
      `Demo token (roles ${DEV_TOKEN_ROLES.join(', ')}; parties alice and bob; valid ${DEV_TOKEN_HOURS} h):`,
      `  export TOKEN=${token}`,
      '',
      'Create a withdrawal (alice → bob, 10):',
      `  curl -s -X POST ${url}/v1/withdrawals -H "Authorization: Bearer $TOKEN" \\`,
      `    -H 'Content-Type: application/json' -H "Idempotency-Key: demo-$(date +%s)" \\`,
      `    -d ${sh(body)}`,
      '',
      'List it and the others, newest first (one withdrawal alone: /v1/withdrawals/ followed by its "id"):',
      `  curl -s ${url}/v1/withdrawals -H "Authorization: Bearer $TOKEN"`,
      '',
    );
  } else {
    lines.push('No demo token: auth is configured (not development auth).', '');
  }
  const deposit = { to: DEMO_DEPOSIT.to, amount: DEMO_DEPOSIT.amount, memo: DEMO_DEPOSIT.memo };
  lines.push(
    `A deposit to alice from a customer outside the book (${DEMO_DEPOSIT.amount} CC, memo ${DEMO_DEPOSIT.memo}):`,
    `  npx canton-signer sandbox deposit --to ${deposit.to} --amount ${deposit.amount} --memo ${deposit.memo}`,
    `  curl -s -X POST ${sandbox.urls.origin}/sandbox/customer/deposit -H 'Content-Type: application/json' \\`,
    `    -d ${sh(JSON.stringify(deposit))}`,
    ...(token
      ? [
          'See it credited to customer account 1001 (ledger ingestion; docs/exchange.md):',
          `  curl -s ${url}/v1/deposits -H "Authorization: Bearer $TOKEN"`,
        ]
      : []),
    '',
  );
  return lines.join('\n');
}

/** The loud warning of development mode (stderr). */
export function devWarning(x: { devPassphrase: boolean; secretFile?: string; ignored?: string }): string {
  const bar = '!'.repeat(78);
  return [
    bar,
    '!!  DEVELOPMENT MODE: FOR DEVELOPMENT AND DEMOS ONLY. NEVER FOR REAL FUNDS.',
    x.devPassphrase
      ? '!!  The keystore is encrypted with a fixed, PUBLIC development passphrase.'
      : '!!  The keystore passphrase comes from CANTON_SIGNER_PASSPHRASE(_FILE).',
    ...(x.ignored
      ? [
          `!!  ${x.ignored} is not used: ${DEV_KEYSTORE_DIR} has the development passphrase`,
          '!!  (to use your keystore and passphrase here, set CANTON_SIGNER_KEYSTORE).',
        ]
      : []),
    x.secretFile
      ? `!!  JWT secret for demo tokens: ${x.secretFile} (anyone who reads it is admin).`
      : '!!  Auth comes from your configuration.',
    '!!  The network is the built-in in-memory sandbox: its ledger is gone at exit.',
    bar,
    '',
  ].join('\n');
}

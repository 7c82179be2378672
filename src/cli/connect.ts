/**
 * How a flow command reaches the network and its keys: URLs of the Ledger API,
 * the validator and Scan from options or the environment (`--sandbox ORIGIN`
 * fills all three for the built-in sandbox), credentials from the environment
 * only (a static bearer token per service, or OAuth2 client credentials), the
 * Ledger API user (`--user`, else the user the token acts as), the
 * keystore, the party book and the journal beside it, and the pipeline's rules
 * (`--require-v3`, `--min-window`, `--policy`: the rules of a policy file,
 * src/policy/local.ts). Builds one FlowContext; nothing secret is
 * printed or kept beyond the process.
 */
import { join } from 'node:path';
import { type Command, Option } from 'commander';
import { type AuthProvider, authFromEnv } from '../canton/auth.js';
import { type CantonService, isCantonApiError } from '../canton/errors.js';
import { LedgerApiClient } from '../canton/ledger-api/client.js';
import { ScanClient } from '../canton/scan/client.js';
import { ValidatorClient } from '../canton/validator/client.js';
import type { FlowContext } from '../flows/context.js';
import { isPartyId, resolveParty } from '../flows/names.js';
import { openSigner } from '../keys/config.js';
import type { LoadedPolicy } from '../policy/document.js';
import { FileRecorder } from '../store/journal.js';
import { FilePartyBook } from '../store/parties.js';
import { UsageError } from './input.js';
import { CliExit, keystoreFolder } from './options.js';
import { networkErrorText } from './system-errors.js';

export interface ConnectionOptions {
  sandbox?: string;
  ledgerApi?: string;
  validator?: string;
  scan?: string;
  validatorParty?: string;
  user?: string;
  keystore?: string;
  journal?: string;
  requireV3?: boolean;
  minWindow?: string;
  policy?: string;
  timeout?: string;
}

/** Adds the connection options to a command. */
export function connectionOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--sandbox <origin>', 'the built-in sandbox at this origin (sets the three URLs)'))
    .addOption(new Option('--ledger-api <url>', 'JSON Ledger API root').env('CANTON_SIGNER_LEDGER_API_URL'))
    .addOption(
      new Option('--validator <url>', 'validator API root (…/api/validator)').env(
        'CANTON_SIGNER_VALIDATOR_URL',
      ),
    )
    .addOption(new Option('--scan <url>', 'Scan API root (…/api/scan)').env('CANTON_SIGNER_SCAN_URL'))
    .addOption(
      new Option(
        '--validator-party <party>',
        "the validator operator's party: setup-accept must name it as provider, send as delegate",
      ).env('CANTON_SIGNER_VALIDATOR_PARTY'),
    )
    .addOption(
      new Option(
        '--user <id>',
        'Ledger API user that prepares and executes (default: the user the token acts as)',
      ).env('CANTON_SIGNER_LEDGER_API_USER'),
    )
    .addOption(new Option('--keystore <dir>', 'keystore folder (keys, party book, journal)'))
    .addOption(new Option('--journal <file>', 'flow journal (JSON lines; default <keystore>/journal.jsonl)'))
    .addOption(
      new Option('--require-v3', 'refuse transactions not hashed with V3 (so max_record_time is signed)'),
    )
    .addOption(
      new Option('--min-window <seconds>', 'refuse transactions whose execution window closes sooner'),
    )
    .addOption(
      new Option(
        '--policy <file>',
        'policy document (YAML or JSON, docs/policy.md): its rules decide here; what needs limits or approvals is refused (use the service)',
      ).env('CANTON_SIGNER_POLICY_FILE'),
    )
    .addOption(new Option('--timeout <seconds>', 'per-request timeout').default('30'));
}

function url(s: string | undefined, what: string): string | undefined {
  if (s === undefined) return undefined;
  try {
    const u = new URL(s);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    return s.replace(/\/+$/, '');
  } catch {
    throw new UsageError(`${what}: not an http(s) URL: ${s}`);
  }
}

export interface Connected {
  ctx: FlowContext;
  /** Where each service was reached (`sandbox`: the origin given to --sandbox), for error messages. */
  urls: { sandbox?: string; ledger?: string; validator?: string; scan?: string };
  timeoutMs: number;
  close(): Promise<void>;
}

/**
 * `run` with a connection made by `connect(opts, need)`, closed afterwards
 * whatever happens. A request that got no answer (nothing listening, unknown
 * host, timeout) ends the command with one sentence naming the URL and the
 * option to check (src/cli/system-errors.ts), exit 1.
 */
export async function withConnection<T>(
  opts: ConnectionOptions,
  need: Parameters<typeof connect>[1],
  run: (c: Connected) => Promise<T>,
): Promise<T> {
  const c = await connect(opts, need);
  try {
    return await run(c);
  } catch (e) {
    throw asUnreachable(e, c);
  } finally {
    await c.close();
  }
}

/**
 * The Ledger API user a flow acts as, and grants rights to when it onboards: the one asked for,
 * else the one the configured token acts as (`GET /v2/authenticated-user`; the sandbox answers
 * its default user to a request without a token).
 */
async function ledgerUser(
  ledger: LedgerApiClient,
  asked: string | undefined,
  hasAuth: boolean,
  sandbox: boolean,
): Promise<string> {
  if (asked !== undefined) return asked;
  try {
    return (await ledger.authenticatedUser()).user.id;
  } catch (e) {
    // Only a participant that answered (no user for an unauthenticated request) means "say which
    // user"; an unreachable one, or a token it refused, is reported as it is.
    if (hasAuth || sandbox || !isCantonApiError(e) || e.status < 400) throw e;
    throw new UsageError(
      'no Ledger API user: give --user ID (or CANTON_SIGNER_LEDGER_API_USER), or a token whose user it is (CANTON_SIGNER_LEDGER_API_TOKEN)',
    );
  }
}

const SERVICE_OPTION: Record<CantonService, [name: string, option: string]> = {
  'ledger-api': ['the Ledger API', '--ledger-api (CANTON_SIGNER_LEDGER_API_URL)'],
  validator: ['the validator', '--validator (CANTON_SIGNER_VALIDATOR_URL)'],
  registry: ["the validator's token-standard registry", '--validator (CANTON_SIGNER_VALIDATOR_URL)'],
  scan: ['Scan', '--scan (CANTON_SIGNER_SCAN_URL)'],
  oauth: ['the OAuth2 token endpoint', 'the token URL in the environment'],
};

/** A request that got no answer, as the sentence of `unreachable` (exit 1); any other error as it is. */
function asUnreachable(e: unknown, c: Where): unknown {
  if (isCantonApiError(e) && e.status === 0 && (e.code === 'NETWORK' || e.code === 'TIMEOUT'))
    return new CliExit(
      1,
      unreachable(c, e.service, e.code === 'NETWORK' ? e.detail : 'TIMEOUT', e.ambiguous),
    );
  return e;
}

type Where = Pick<Connected, 'urls' | 'timeoutMs'>;

function unreachable(c: Where, service: CantonService, code: string | undefined, ambiguous: boolean): string {
  const base = service === 'ledger-api' ? c.urls.ledger : service === 'scan' ? c.urls.scan : c.urls.validator;
  const failure = { code, timeoutMs: c.timeoutMs, ambiguous };
  const [name, option] = SERVICE_OPTION[service];
  // Every service of the built-in sandbox is on one origin: name the sandbox, not the service.
  if (c.urls.sandbox !== undefined && service !== 'oauth' && base?.startsWith(c.urls.sandbox))
    return networkErrorText(
      'cannot reach the sandbox',
      c.urls.sandbox,
      failure,
      'start it with `npx canton-signer sandbox` (default port 7575), or check --sandbox',
    );
  return networkErrorText(
    `cannot reach ${name}`,
    base ?? 'its URL',
    failure,
    `check that it runs and that ${option} is right`,
  );
}

export async function connect(
  opts: ConnectionOptions,
  need: { ledger?: boolean; validator?: boolean; scan?: boolean } = { ledger: true },
  env: NodeJS.ProcessEnv = process.env,
): Promise<Connected> {
  const sandbox = url(opts.sandbox, '--sandbox');
  const ledgerUrl = url(opts.ledgerApi, '--ledger-api') ?? sandbox;
  const validatorUrl =
    url(opts.validator, '--validator') ?? (sandbox ? `${sandbox}/api/validator` : undefined);
  const scanUrl = url(opts.scan, '--scan') ?? (sandbox ? `${sandbox}/api/scan` : undefined);
  if (need.ledger && !ledgerUrl)
    throw new UsageError(
      'no Ledger API: give --ledger-api URL (or CANTON_SIGNER_LEDGER_API_URL) or --sandbox ORIGIN',
    );
  if (need.validator && !validatorUrl)
    throw new UsageError(
      'no validator: give --validator URL (or CANTON_SIGNER_VALIDATOR_URL) or --sandbox ORIGIN',
    );
  if (need.scan && !scanUrl && !validatorUrl)
    throw new UsageError(
      'no Scan: give --scan URL, --validator URL (its scan proxy; ANS names still need --scan) or --sandbox ORIGIN',
    );
  if (opts.validatorParty !== undefined && !isPartyId(opts.validatorParty))
    throw new UsageError(`--validator-party: not a party id (hint::1220…): ${opts.validatorParty}`);
  const seconds = Number(opts.timeout ?? '30');
  if (!Number.isFinite(seconds) || seconds <= 0)
    throw new UsageError(`--timeout: not a positive number: ${opts.timeout}`);
  const timeoutMs = Math.round(seconds * 1000);
  let minWindowMs: number | undefined;
  if (opts.minWindow !== undefined) {
    const s = Number(opts.minWindow);
    if (!Number.isFinite(s) || s < 0)
      throw new UsageError(`--min-window: not a number of seconds: ${opts.minWindow}`);
    minWindowMs = Math.round(s * 1000);
  }
  const dir = keystoreFolder(opts.keystore, env);
  const ledgerAuth = authFromEnv('LEDGER_API', env);
  const ledger = new LedgerApiClient({
    baseUrl: ledgerUrl ?? 'http://127.0.0.1:1',
    timeoutMs,
    ...optAuth(ledgerAuth),
  });
  const urls: Connected['urls'] = {
    ...(sandbox !== undefined ? { sandbox } : {}),
    ...(ledgerUrl !== undefined ? { ledger: ledgerUrl } : {}),
    ...(validatorUrl !== undefined ? { validator: validatorUrl } : {}),
    ...(scanUrl !== undefined ? { scan: scanUrl } : {}),
  };
  const userId = need.ledger
    ? await ledgerUser(ledger, opts.user, ledgerAuth !== undefined, sandbox !== undefined).catch(
        (e: unknown) => {
          throw asUnreachable(e, { urls, timeoutMs });
        },
      )
    : opts.user;
  const validator = validatorUrl
    ? new ValidatorClient({ baseUrl: validatorUrl, timeoutMs, ...optAuth(authFromEnv('VALIDATOR', env)) })
    : undefined;
  const scan = scanUrl
    ? new ScanClient({ baseUrl: scanUrl, timeoutMs, ...optAuth(authFromEnv('SCAN', env)) })
    : undefined;
  const policy = opts.policy !== undefined ? await policyFile(opts.policy) : undefined;
  const signer = await openSigner({ keystore: dir, interactive: true, env });
  const ctx: FlowContext = {
    signer,
    ledger,
    userId: userId ?? '',
    ...(validator ? { validator } : {}),
    ...(scan ? { scan } : {}),
    ...(opts.validatorParty ? { validatorParty: opts.validatorParty } : {}),
    parties: new FilePartyBook(dir),
    recorder: new FileRecorder(opts.journal ?? join(dir, 'journal.jsonl')),
    ...(opts.requireV3 ? { requireScheme: 'v3' as const } : {}),
    ...(minWindowMs !== undefined ? { minWindowMs } : {}),
  };
  // the policy engine (and its YAML reader) is loaded only for a command given a policy
  if (policy)
    ctx.policy = (await import('../policy/local.js')).localGate(policy, {
      caller: { id: 'command-line', roles: [] },
      resolveName: async (n) => (ctx.scan ? (await resolveParty(ctx, n)).partyId : undefined),
    });
  return {
    ctx,
    urls,
    timeoutMs,
    close: () => signer.close(),
  };
}

/** The policy file of --policy, or a usage error naming each field at fault (exit 2). */
async function policyFile(path: string): Promise<LoadedPolicy> {
  const { PolicyError, readPolicyFile } = await import('../policy/document.js');
  try {
    return await readPolicyFile(path);
  } catch (e) {
    if (e instanceof PolicyError) throw new UsageError(`--policy: ${e.message}`);
    throw e;
  }
}

function optAuth(auth: AuthProvider | undefined): { auth?: AuthProvider } {
  return auth ? { auth } : {};
}

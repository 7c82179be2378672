/**
 * The service assembled: configuration → store (PGlite or PostgreSQL,
 * migrated) → signer (file keystore, PKCS#11 when configured) → Canton
 * clients (the configured URLs, or a built-in sandbox network when
 * `network.sandbox` is true) → flow context whose party book and recorder are
 * the store's → metrics → withdrawal worker → webhook deliverer (when
 * receivers are configured; their secrets are read from the environment
 * first, a missing one stops the start) → HTTP app. `close()` stops in
 * order: no new requests, in-flight requests finished (fastify's close), the
 * worker's steps in progress finished, the deliverer stopped (its claims
 * released), then the clients, keys and database.
 * Tests inject any of the pieces; `beforeStart` runs before the worker starts
 * (dev mode hosts its parties on the fresh sandbox there).
 */
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { authFromEnv, staticBearer } from '../canton/auth.js';
import { LedgerApiClient } from '../canton/ledger-api/client.js';
import { ScanClient } from '../canton/scan/client.js';
import { ValidatorClient } from '../canton/validator/client.js';
import { createWebhookDeliverer, type WebhookDeliverer } from '../events/webhooks.js';
import { createAutoAccept } from '../exchange/auto-accept.js';
import { type Automation, type AutomationOptions, createAutomation } from '../exchange/automation.js';
import { attributionOf } from '../exchange/deposits.js';
import { createIngestion, type Ingestion, type IngestionOptions } from '../exchange/ingest.js';
import { createSweeps } from '../exchange/sweeps.js';
import type { FlowContext } from '../flows/context.js';
import { resolveParty } from '../flows/names.js';
import { createNameKeeper } from '../flows/names-keeper.js';
import { createWithdrawalWorker, type WithdrawalWorker } from '../flows/withdrawal.js';
import { followApproval } from '../flows/withdrawal-approval.js';
import { createDeliveryTracker } from '../flows/withdrawal-delivery.js';
import { KeyError } from '../keys/backend.js';
import { openSigner } from '../keys/config.js';
import type { OfflineBackend } from '../keys/offline-backend.js';
import type { Signer } from '../keys/signer.js';
import { OnlineAirGap } from '../offline/online.js';
import { readPolicyFile } from '../policy/document.js';
import { PolicyEngine } from '../policy/engine.js';
import type { RunningSandbox, SandboxOptions } from '../sandbox/server.js';
import { openStore, type Store } from '../store/index.js';
import type { ApprovalRequest } from '../store/repos/approvals.js';
import { type AppPlugin, type BuiltApp, buildApp, REDACT_PATHS } from './app.js';
import { createVerifier, type Verifier } from './auth.js';
import { loadWebhookSecrets, redactUrl, type ServiceConfig } from './config.js';
import type { ServiceDeps } from './deps.js';
import { ServiceMetrics } from './metrics.js';
import { resumeApproved } from './routes/resume.js';
import { createSessionAuth } from './session.js';

/** `text` with each URL in it as `redactConfig` prints a URL (password and secret query values REDACTED). */
function redactUrls(text: string): string {
  return text.replace(/[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi, (u) => redactUrl(u));
}

function offlineKeys(signer: Signer): OfflineBackend | undefined {
  try {
    return signer.offline();
  } catch {
    return undefined;
  }
}

export interface CantonClients {
  ledger: LedgerApiClient;
  validator?: ValidatorClient;
  scan?: ScanClient;
  /** The Ledger API user that prepares and executes. */
  userId: string;
}

export interface ServiceOptions {
  config: ServiceConfig;
  env?: NodeJS.ProcessEnv;
  store?: Store;
  signer?: Signer;
  clients?: CantonClients;
  verifier?: Verifier;
  /** pino logger for the app and the worker; default: JSON to stdout at config.log.level, redacted. */
  logger?: pino.Logger;
  /** Start the withdrawal worker (default true). */
  worker?: boolean;
  /** Worker tuning (tests make it fast). */
  workerOptions?: { pollMs?: number; concurrency?: number; retryMs?: number; networkWaitMs?: number };
  /** Automation tuning (tests make it fast). */
  automationOptions?: Partial<Pick<AutomationOptions, 'pollMs' | 'leaseMs' | 'owner'>> & {
    backoffMs?: number;
    retryMs?: number;
  };
  /** Ingestion tuning (tests make it fast). */
  ingestionOptions?: Partial<Pick<IngestionOptions, 'pollMs' | 'pageSize' | 'leaseMs' | 'owner'>>;
  /** Extra pipeline rules on top of the configuration's (tests pass a clock). */
  flowOverrides?: Partial<FlowContext>;
  /** Options of the built-in sandbox when `network.sandbox` is true (e.g. a fixed seed). */
  sandbox?: SandboxOptions;
  /**
   * Runs once everything is assembled, before the worker starts and before
   * anything listens (dev mode hosts its parties on the fresh sandbox here).
   */
  beforeStart?: (s: { deps: ServiceDeps; sandbox?: RunningSandbox }) => Promise<void>;
  /** Plugins of the layers above the server mounted on the app (the web console: src/console). */
  plugins?: readonly AppPlugin[];
}

export interface Service extends BuiltApp {
  deps: ServiceDeps;
  /** The built-in sandbox when `network.sandbox` is true. */
  sandbox?: RunningSandbox;
  /** Ledger ingestion, when `exchange.ingestion.enabled`. */
  ingestion?: Ingestion;
  /** Listens on config.listen (or the given port); returns the base URL. */
  listen(opts?: { port?: number; host?: string }): Promise<string>;
  close(): Promise<void>;
}

export function serviceLogger(config: ServiceConfig): pino.Logger {
  return pino({ level: config.log.level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
}

/**
 * The Ledger API user the service acts as on its built-in sandbox (`network.sandbox`): a
 * participant admin of that sandbox only, as a real deployment's user is of its participant.
 */
export const SANDBOX_SERVICE_USER = 'canton-signer';

async function connectClients(
  config: ServiceConfig,
  env: NodeJS.ProcessEnv,
  sandboxOptions: SandboxOptions = {},
): Promise<{
  clients: CantonClients;
  sandbox?: RunningSandbox;
}> {
  if (config.network.sandbox) {
    // The service's own participant-admin user on its own sandbox, reached with a token made for
    // this start only: onboarding allocates parties and grants rights, which needs participant_admin,
    // while the sandbox keeps refusing that to every other user. The validator answers its operator,
    // which a request without a token is on the sandbox.
    const token = randomBytes(24).toString('base64url');
    // Loaded only here: a service on a real network (or an external sandbox) never needs the
    // sandbox's modules, which are a third of what a start would otherwise load.
    const { startSandbox } = await import('../sandbox/server.js');
    const sandbox = await startSandbox({
      ...sandboxOptions,
      auth: {
        ...sandboxOptions.auth,
        tokens: { ...sandboxOptions.auth?.tokens, [token]: SANDBOX_SERVICE_USER },
      },
    });
    sandbox.ctx.net.addUser(SANDBOX_SERVICE_USER, undefined, true).tokenOnly = true;
    return {
      sandbox,
      clients: {
        ledger: new LedgerApiClient({ baseUrl: sandbox.urls.ledgerApi, auth: staticBearer(token) }),
        validator: new ValidatorClient({ baseUrl: sandbox.urls.validator }),
        scan: new ScanClient({ baseUrl: sandbox.urls.scan }),
        userId: SANDBOX_SERVICE_USER,
      },
    };
  }
  const n = config.network;
  const opt = <T>(v: T | undefined) => (v === undefined ? {} : { auth: v });
  return {
    clients: {
      ledger: new LedgerApiClient({ baseUrl: n.ledgerApiUrl!, ...opt(authFromEnv('LEDGER_API', env)) }),
      ...(n.validatorUrl
        ? {
            validator: new ValidatorClient({
              baseUrl: n.validatorUrl,
              ...opt(authFromEnv('VALIDATOR', env)),
            }),
          }
        : {}),
      ...(n.scanUrl
        ? { scan: new ScanClient({ baseUrl: n.scanUrl, ...opt(authFromEnv('SCAN', env)) }) }
        : {}),
      userId: n.ledgerApiUser!,
    },
  };
}

/** How long one readiness check (database, keys, Ledger API) may take before it counts as failed. */
const READY_CHECK_MS = 5_000;

/**
 * At start: keys the signer holds that the key table lacks or describes
 * differently are recorded (audited `key.put` by `service`): keys made with
 * the command line, and a key whose creation request stopped between making
 * the key and recording it (its `key.create` row is in the audit log). A
 * signer that cannot list its keys now (an HSM away) is logged, not fatal:
 * /ready reports it.
 */
async function recordHeldKeys(signer: Signer, store: Store, log: pino.Logger): Promise<void> {
  let held: Awaited<ReturnType<Signer['list']>>;
  try {
    held = await signer.list();
  } catch (e) {
    log.warn({ error: e instanceof KeyError ? e.code : 'unexpected' }, 'could not list the keys at start');
    return;
  }
  const put = await store.keys.recordHeld(held, 'service', 'found in the keystore at start');
  if (put.length > 0) log.info({ keys: put }, 'recorded keys found in the keystore');
}

/** Counts signatures by backend and scheme, and key backend errors by backend and code, around `signer.sign`. */
function instrumentSigner(signer: Signer, metrics: ServiceMetrics): void {
  const sign = signer.sign.bind(signer);
  signer.sign = async (label, message) => {
    try {
      const out = await sign(label, message);
      metrics.signatures.inc({ backend: out.key.backend, scheme: out.key.scheme });
      return out;
    } catch (e) {
      // Waiting for an offline signature is the air gap working, not a backend error.
      if (e instanceof KeyError && e.code !== 'awaiting_offline_signature') {
        const backend = await signer.describe(label).then(
          (d) => d.backend,
          () => 'unknown',
        );
        metrics.keyErrors.inc({ backend, code: e.code });
      }
      throw e;
    }
  };
}

export async function createService(opts: ServiceOptions): Promise<Service> {
  const { config } = opts;
  const env = opts.env ?? process.env;
  const log = opts.logger ?? serviceLogger(config);
  // A receiver's secret missing or too short stops the start, naming the variable.
  const webhookSecrets = loadWebhookSecrets(config.webhooks, env);
  const opened: (() => Promise<void>)[] = [];
  const closeOpened = async () => {
    for (const c of opened.reverse()) await c().catch(() => {});
  };
  try {
    const store =
      opts.store ??
      (await openStore({
        ...(config.database.url ? { url: config.database.url } : { dataDir: config.database.dataDir }),
        actor: 'service',
        maintenance: {
          onRun: (r) =>
            r.ok
              ? log.info(
                  { ms: Math.round(r.ms), vacuumed: r.vacuumed, analyzed: r.analyzed },
                  'embedded database maintained',
                )
              : log.warn({ ms: Math.round(r.ms), error: r.error }, 'embedded database maintenance failed'),
        },
      }));
    if (!opts.store) opened.push(() => store.close());
    const signer =
      opts.signer ?? (await openSigner({ keystore: config.keystore.dir, interactive: false, env }));
    if (!opts.signer) {
      opened.push(() => signer.close());
      // A wrong or missing passphrase stops the start here, not each withdrawal later.
      await signer.checkAccess();
    }
    let sandbox: RunningSandbox | undefined;
    let clients = opts.clients;
    if (!clients) {
      const c = await connectClients(config, env, opts.sandbox);
      clients = c.clients;
      sandbox = c.sandbox;
      if (sandbox) opened.push(() => sandbox!.close());
    }
    const metrics = new ServiceMetrics({
      withdrawalsByState: () => store.withdrawals.countByState(),
      oldestPendingAges: () => store.withdrawals.oldestPendingAges(),
      withdrawalsByDelivery: () => store.withdrawals.countByDelivery(),
      approvalsPending: () => store.approvals.countPending(),
      ...(config.webhooks.receivers.length > 0
        ? {
            webhookStatus: async () =>
              (await store.webhooks.status()).map((r) => ({
                name: r.name,
                dead: r.counts.dead,
                oldestPendingSeconds: r.oldestPendingSeconds,
              })),
          }
        : {}),
    });
    instrumentSigner(signer, metrics);
    await recordHeldKeys(signer, store, log);
    const airGap = new OnlineAirGap(store, signer, { exportKeyLabel: config.airGap.exportKey });
    // Cold keys sign with what came back through the air gap (checked on import, verified again by the pipeline).
    offlineKeys(signer)?.setSignatureSource(airGap);
    // The policy: the configured file, else the version in force in the database, else allow-all.
    let onApproved: (r: ApprovalRequest) => void = () => {};
    let flowsForNames: FlowContext | undefined;
    const policy = new PolicyEngine({
      store,
      signer,
      sealKey: config.policy.sealKey,
      resolveName: async (name) =>
        flowsForNames?.scan ? (await resolveParty(flowsForNames, name)).partyId : undefined,
      logger: log,
      observe: (outcome, rule) => metrics.policyDecisions.inc({ outcome, rule }),
      onApproved: (r) => onApproved(r),
    });
    const active = await policy.start(
      config.policy.file ? await readPolicyFile(config.policy.file) : undefined,
    );
    // Expected on the built-in sandbox (development: the banner says it); a warning anywhere else.
    if (active.source === 'builtin')
      log[config.network.sandbox ? 'info' : 'warn'](
        {},
        'no policy configured (policy.file): everything the pipeline verifies is signed, without limits or approvals',
      );
    else
      log.info({ version: active.version, sha256: active.sha256, source: active.source }, 'policy in force');
    const flows: FlowContext = {
      signer,
      policy,
      ledger: clients.ledger,
      userId: clients.userId,
      ...(clients.validator ? { validator: clients.validator } : {}),
      ...(clients.scan ? { scan: clients.scan } : {}),
      ...(config.network.validatorParty ? { validatorParty: config.network.validatorParty } : {}),
      parties: store.parties,
      recorder: store.recorder.with({
        observe: (r) => {
          if (r.step === 'refused' && r.reason) metrics.refusals.inc({ reason: r.reason });
        },
      }),
      ...(config.pipeline.requireScheme ? { requireScheme: config.pipeline.requireScheme } : {}),
      minWindowMs: config.pipeline.minWindowSeconds * 1000,
      // The synchronizer's tolerances: windows and commit deadlines are computed with them.
      window: {
        preparationTimeToleranceUs: BigInt(config.pipeline.preparationTimeToleranceSeconds) * 1_000_000n,
        ledgerTimeToleranceUs: BigInt(config.pipeline.ledgerTimeToleranceSeconds) * 1_000_000n,
      },
      airGap: airGap.exporter({ subject: 'sign-request' }),
      ...opts.flowOverrides,
    };
    flowsForNames = flows;
    // Where committed withdrawals' funds went: read from each commit, offers followed to their end.
    const delivery = createDeliveryTracker({
      ctx: flows,
      store,
      logger: log,
      pollMs: config.withdrawals.offerPollMs,
    });
    const worker: WithdrawalWorker =
      opts.worker === false
        ? { kick() {}, async start() {}, async stop() {} }
        : createWithdrawalWorker({
            ctx: flows,
            store,
            airGap,
            observe: (flow, outcome, seconds) => metrics.flowDuration.observe({ flow, outcome }, seconds),
            logger: log,
            concurrency: config.worker.concurrency,
            pollMs: config.worker.pollMs,
            networkWaitMs: config.worker.networkWaitSeconds * 1000,
            leaseMs: config.worker.leaseSeconds * 1000,
            requireDelivery: config.withdrawals.requireDelivery,
            delivery,
            approvals: policy,
            ...opts.workerOptions,
          });
    // An approval request approved in full: what waited for it goes on.
    onApproved = (r) => {
      const id = /^withdrawal:(.+)$/.exec(r.subject)?.[1];
      // A synchronous request that answered 202 runs now, as its caller (its outcome on the request).
      if (id === undefined) return void resumeApproved(deps, r);
      followApproval({ store, kick: (w, party) => worker.kick(w, party), actor: 'policy' }, id).catch(
        (e: unknown) =>
          log.warn({ withdrawal: id, err: String(e) }, 'could not resume an approved withdrawal'),
      );
    };
    // Events to the exchange's receivers: apart from withdrawals and ingestion, started with the worker.
    const enabled = config.webhooks.receivers.filter((r) => r.enabled);
    const webhooks: WebhookDeliverer | undefined =
      opts.worker === false || enabled.length === 0
        ? undefined
        : createWebhookDeliverer({
            repo: store.webhooks,
            receivers: enabled.map((r) => ({
              name: r.name,
              url: r.url,
              events: r.events,
              secrets: webhookSecrets.get(r.name) ?? [],
              timeoutMs: r.timeoutMs,
            })),
            retry: {
              horizonMs: config.webhooks.retry.horizonSeconds * 1000,
              initialMs: config.webhooks.retry.initialSeconds * 1000,
              maxIntervalMs: config.webhooks.retry.maxIntervalSeconds * 1000,
            },
            concurrency: config.webhooks.concurrency,
            pollMs: config.webhooks.pollMs,
            logger: log,
            observe: (receiver, outcome) => metrics.webhookAttempts.inc({ receiver, outcome }),
          });
    // The ledger's history of the book's parties: deposits, deliveries, alerts (one instance at a time).
    // Built even when disabled, unstarted: its cursor is what the recovery controls move while it is paused.
    const ingestor: Ingestion = createIngestion({
      store,
      ledger: clients.ledger,
      attribute: attributionOf(config.exchange.deposits.attribution, config.exchange.deposits.maxMemoLength),
      maxMemoLength: config.exchange.deposits.maxMemoLength,
      pollMs: config.exchange.ingestion.pollMs,
      pageSize: config.exchange.ingestion.pageSize,
      leaseMs: config.exchange.ingestion.leaseSeconds * 1000,
      logger: log,
      ...opts.ingestionOptions,
    });
    const ingestion = config.exchange.ingestion.enabled ? ingestor : undefined;
    // Offers answered by rule and treasury sweeps: one instance at a time, after each ingestion page.
    const autoAccept = createAutoAccept({
      store,
      flows,
      rules: config.exchange.autoAccept.rules,
      otherwise: config.exchange.autoAccept.otherwise,
      ...(opts.automationOptions?.backoffMs !== undefined
        ? { backoffMs: opts.automationOptions.backoffMs }
        : {}),
    });
    const sweeps = createSweeps({
      store,
      flows,
      rules: config.exchange.sweeps,
      ...(opts.automationOptions?.retryMs !== undefined ? { retryMs: opts.automationOptions.retryMs } : {}),
    });
    const automated =
      config.exchange.autoAccept.rules.length > 0 ||
      config.exchange.autoAccept.otherwise !== 'wait' ||
      config.exchange.sweeps.length > 0;
    // Names of the book's parties: registrations followed and renewals paid, under the same lease.
    const names = createNameKeeper({
      store,
      flows,
      feeAllowancePercent: config.names.feeAllowancePercent,
      retryMs: config.names.retrySeconds * 1000,
      expiringMs: config.names.expiringHours * 3_600_000,
      airGapTurnaroundMs: config.names.airGapTurnaroundHours * 3_600_000,
      pollMs: config.names.pollMs,
      observe: (what) => metrics.nameEvents.inc({ what }),
    });
    const runner: Automation = createAutomation({
      store,
      // The exchange's tasks only when configured (as before names existed: an idle runner decided nothing).
      tasks: [...(automated ? [autoAccept, sweeps] : []), ...(config.names.enabled ? [names] : [])],
      ...(ingestion ? { subscribe: (fn: () => void) => ingestion.subscribe(() => fn()) } : {}),
      pollMs: config.exchange.automationPollMs,
      logger: log,
      ...(opts.automationOptions?.pollMs !== undefined ? { pollMs: opts.automationOptions.pollMs } : {}),
      ...(opts.automationOptions?.leaseMs !== undefined ? { leaseMs: opts.automationOptions.leaseMs } : {}),
      ...(opts.automationOptions?.owner !== undefined ? { owner: opts.automationOptions.owner } : {}),
    });
    // The console's origin: its configured public URL, else localhost at the port listened on.
    let origin = config.console.publicUrl?.replace(/\/$/, '') ?? `http://localhost:${config.listen.port}`;
    const deps: ServiceDeps = {
      config,
      publicOrigin: () => origin,
      store,
      flows,
      policy,
      signer,
      metrics,
      worker,
      airGap,
      ...(webhooks ? { webhooks } : {}),
      ingestion: ingestor.access,
      automation: { runner, autoAccept, sweeps },
      names,
      async ready() {
        // Anyone may ask: the answer names a failing check by a fixed code; why it failed
        // (a host name, a database user) goes only to the (redacting) log.
        const checks: Record<string, { ok: boolean; code?: string }> = {};
        const probe = async (name: string, code: string, f: () => Promise<unknown>) => {
          let timer: NodeJS.Timeout | undefined;
          try {
            // A check that hangs (a server dropping packets) is a failed check, after 5 s.
            await Promise.race([
              f(),
              new Promise((_, reject) => {
                timer = setTimeout(() => reject(new Error('no answer within 5 s')), READY_CHECK_MS);
              }),
            ]);
            checks[name] = { ok: true };
          } catch (e) {
            checks[name] = { ok: false, code };
            log.warn(
              { check: name, code, error: redactUrls(e instanceof Error ? e.message : String(e)) },
              'readiness check failed',
            );
          } finally {
            clearTimeout(timer);
          }
        };
        await Promise.all([
          probe('database', 'database_unavailable', () => store.db.query('SELECT 1')),
          probe('keys', 'keys_unavailable', () => signer.list()),
          probe('ledgerApi', 'ledger_api_unavailable', () => flows.ledger.ledgerEnd()),
        ]);
        return { ok: Object.values(checks).every((c) => c.ok), checks };
      },
    };
    const verifier = opts.verifier ?? createVerifier(config.auth);
    const sessions = config.console.enabled
      ? createSessionAuth(store.sessions, {
          origin: () => origin,
          idleMs: config.console.session.idleMinutes * 60_000,
          absoluteMs: config.console.session.maxHours * 3_600_000,
        })
      : undefined;
    const built = buildApp(deps, {
      verifier,
      logger: log,
      ...(sessions ? { sessions } : {}),
      ...(opts.plugins ? { plugins: opts.plugins } : {}),
      origin: () => origin,
    });
    await built.app.ready();
    await opts.beforeStart?.({ deps, ...(sandbox ? { sandbox } : {}) });
    if (opts.worker !== false) {
      await worker.start();
      delivery.start();
      await webhooks?.start();
      ingestion?.start();
      if (automated || config.names.enabled) runner.start();
    }
    let closed = false;
    return {
      ...built,
      deps,
      ...(sandbox ? { sandbox } : {}),
      ...(ingestion ? { ingestion } : {}),
      async listen(l = {}) {
        const url = await built.app.listen({
          port: l.port ?? config.listen.port,
          host: l.host ?? config.listen.host,
        });
        if (config.console.publicUrl === undefined) {
          const address = built.app.server.address();
          if (address !== null && typeof address === 'object') origin = `http://localhost:${address.port}`;
        }
        return url;
      },
      async close() {
        if (closed) return;
        closed = true;
        // fastify's close stops accepting and waits for in-flight requests; a keep-alive
        // connection whose request is answered meanwhile turns idle and would hold close()
        // open until its keep-alive timeout (72 s), so idle connections are closed as they appear.
        const reaper = setInterval(() => built.app.server.closeIdleConnections(), 50);
        try {
          await built.app.close();
        } finally {
          clearInterval(reaper);
        }
        await runner.stop();
        await ingestion?.stop();
        await worker.stop();
        await delivery.stop();
        await webhooks?.stop();
        await closeOpened();
      },
    };
  } catch (e) {
    await closeOpened();
    throw e;
  }
}

/**
 * `canton-signer serve [--config FILE] [--dev] [--workers N]`: loads and validates the
 * configuration (file + CANTON_SIGNER_* environment; a bad one exits 2 naming
 * every bad setting, never a secret value), assembles the service, listens
 * and logs JSON lines (pino, secrets redacted; the configuration only in its
 * redacted form). SIGTERM/SIGINT shut it down gracefully: no new connections,
 * in-flight requests finished, the withdrawal worker's steps finished, then
 * the clients, keys and database closed; exit 0. A second signal exits at
 * once (1). `--dev` is development mode (src/server/dev.ts); it exits 2 when
 * the configuration does not use the built-in sandbox network.
 *
 * `--workers N` runs N service processes (node:cluster) sharing the listen
 * port, one per core: each is a whole service (routes, withdrawal worker with
 * its database leases) over one PostgreSQL — the built-in sandbox and the
 * embedded PGlite live in one process, so they are refused. The primary
 * process only supervises: it replaces a worker that dies (giving up after
 * repeated failures) and, on SIGTERM/SIGINT, asks every worker to shut down
 * gracefully and exits once all have.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Command } from 'commander';
import type { Logger } from 'pino';
import { FolderInUseError, noteHolderUrl } from '../store/folder-lock.js';
import { CliExit, EXIT_IN_USE, listenProblem } from './options.js';

interface ServeCliOptions {
  config?: string;
  dev?: boolean;
  workers?: number;
  port?: string;
}

/** The message a cluster primary sends a worker instead of a second signal. */
const SHUTDOWN_MESSAGE = 'canton-signer:shutdown';
/** More worker deaths than this within RESTART_WINDOW_MS and the primary gives up. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

function parseWorkers(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 64)
    throw new CliExit(2, `--workers: a whole number from 1 to 64, not ${JSON.stringify(v)}`);
  return n;
}

/** How long in-flight work may take to finish after a signal before the process gives up on it. */
export const SHUTDOWN_GRACE_MS = 30_000;

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('Run the custody service (REST API, withdrawal worker) until SIGTERM/SIGINT')
    .option('--config <file>', 'JSON or YAML configuration file (default $CANTON_SIGNER_CONFIG)')
    .option(
      '--dev',
      'development mode: built-in sandbox, ./dev/data, ./dev/keystore with a development passphrase, demo token',
    )
    .option('--port <port>', 'the port to listen on (default 8080; CANTON_SIGNER_PORT, listen.port)')
    .option(
      '--workers <n>',
      'service processes sharing the port, e.g. one per core (default 1; more needs PostgreSQL and real network URLs)',
      parseWorkers,
    )
    .action(async (opts: ServeCliOptions) => {
      try {
        if ((opts.workers ?? 1) > 1 && cluster.isPrimary) await supervise(opts);
        else await serve(opts);
      } finally {
        // Whatever still holds the event loop open after an orderly stop must not keep the process alive.
        setTimeout(() => process.exit(), 5000).unref();
      }
    });
}

function onSignals(log: Logger): { first: Promise<NodeJS.Signals>; remove(): void } {
  let seen = false;
  let resolveFirst!: (s: NodeJS.Signals) => void;
  const first = new Promise<NodeJS.Signals>((r) => {
    resolveFirst = r;
  });
  const handler = (signal: NodeJS.Signals) => {
    if (seen) {
      log.warn({ signal }, 'second signal: exiting without finishing in-flight work');
      process.exit(1);
    }
    seen = true;
    resolveFirst(signal);
  };
  // A cluster worker: the primary's request to stop is a first signal, never a second one (Ctrl-C on a
  // terminal reaches the workers and the primary both).
  const fromPrimary = (m: unknown) => {
    if (m === SHUTDOWN_MESSAGE && !seen) handler('SIGTERM');
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  if (cluster.isWorker) process.on('message', fromPrimary);
  return {
    first,
    remove() {
      process.off('SIGTERM', handler);
      process.off('SIGINT', handler);
      process.off('message', fromPrimary);
    },
  };
}

/**
 * Starts the service; in development mode, a keystore under another passphrase
 * is reported with what to do (development mode has its own keystore folder).
 */
async function devStart<T>(
  dev: boolean,
  keystoreDir: string,
  devPassphrase: boolean,
  start: () => Promise<T>,
): Promise<T> {
  try {
    return await start();
  } catch (e) {
    const { KeyError } = await import('../keys/backend.js');
    if (!dev || !(e instanceof KeyError) || e.code !== 'wrong_passphrase') throw e;
    const { devPassphraseMismatch } = await import('../server/dev.js');
    throw new CliExit(1, `wrong_passphrase: ${devPassphraseMismatch(keystoreDir, devPassphrase)}`);
  }
}

async function serve(opts: ServeCliOptions): Promise<void> {
  // Loaded here: the other commands should not pay for fastify, pino and the store.
  const { ConfigError, formatProblem, loadConfig, redactConfig } = await import('../server/config.js');
  const { createService, serviceLogger } = await import('../server/service.js');
  const dev = opts.dev ? await import('../server/dev.js') : undefined;

  // --port is CANTON_SIGNER_PORT given on the command line: checked and applied as that setting.
  const settings = opts.port !== undefined ? { ...process.env, CANTON_SIGNER_PORT: opts.port } : process.env;
  let config: Awaited<ReturnType<typeof loadConfig>>;
  try {
    config = await loadConfig({
      ...(opts.config !== undefined ? { file: opts.config } : {}),
      env: settings,
      ...(dev ? { defaults: dev.devDefaults() } : {}),
    });
  } catch (e) {
    if (e instanceof ConfigError)
      throw new CliExit(2, `invalid configuration: ${e.problems.map(formatProblem).join('; ')}`);
    throw e;
  }
  const { env, devPassphrase, ignored } = dev
    ? dev.devEnv(settings, config.keystore.dir)
    : { env: settings, devPassphrase: false, ignored: undefined };
  const devProblem = dev?.devConfigProblem(config);
  if (devProblem !== undefined) throw new CliExit(2, devProblem);
  if (!dev && config.console.devSignIn)
    throw new CliExit(
      2,
      'console.devSignIn: the one-click sign-in (every role, no password) exists only in development mode (npm start, serve --dev); remove it and configure console.oidc',
    );
  const devAuth = dev ? await dev.applyDevSecret(config) : undefined;
  if (dev)
    process.stderr.write(
      dev.devWarning({
        devPassphrase,
        ...(devAuth ? { secretFile: devAuth.file } : {}),
        ...(ignored ? { ignored } : {}),
      }),
    );

  const log = serviceLogger(config);
  const signals = onSignals(log);
  try {
    log.info({ config: redactConfig(config), dev: dev !== undefined }, 'canton-signer starting');
    let demo: import('../server/dev.js').DemoParties | undefined;
    const { consolePlugin } = await import('../console/plugin.js');
    const service = await devStart(dev !== undefined, config.keystore.dir, devPassphrase, () =>
      createService({
        config,
        env,
        logger: log,
        plugins: [consolePlugin({ env })],
        ...(dev
          ? {
              sandbox: { seed: dev.DEV_SANDBOX_SEED },
              beforeStart: async ({ deps, sandbox }) => {
                if (sandbox) demo = await dev.hostDevParties(deps, sandbox);
              },
            }
          : {}),
      }),
    ).catch(async (e: unknown) => {
      // The policy file is configuration: a bad one is a usage error naming the setting (exit 2).
      const { PolicyError } = await import('../policy/document.js');
      if (e instanceof PolicyError)
        throw new CliExit(2, `policy.file (CANTON_SIGNER_POLICY_FILE): ${e.message}`);
      const { PolicyEngineError } = await import('../policy/engine.js');
      if (e instanceof PolicyEngineError && e.code === 'policy_not_sealed') throw new CliExit(2, e.message);
      if (e instanceof FolderInUseError)
        throw new CliExit(
          EXIT_IN_USE,
          `${e.message} (the data folder is database.dataDir, CANTON_SIGNER_DATA_DIR); to check its audit log meanwhile: canton-signer audit verify --url ${e.holder?.url ?? '<its URL>'}`,
        );
      throw e;
    });
    let url: string;
    try {
      if (service.sandbox) log.info({ sandbox: service.sandbox.urls }, 'sandbox network started');
      url = await service.listen();
    } catch (e) {
      await service.close();
      throw listenProblem(e, config.listen, {
        choosePort: (p) =>
          `choose another port with --port or CANTON_SIGNER_PORT (listen.port in the configuration file), e.g. CANTON_SIGNER_PORT=${p} ${dev ? 'npm start' : 'canton-signer serve …'}`,
        chooseHost: 'listen.host (CANTON_SIGNER_HOST)',
      });
    }
    if (config.database.url === undefined) noteHolderUrl(config.database.dataDir, url);
    log.info({ url }, 'listening');
    if (dev && demo && service.sandbox) {
      // Noted before the banner: its `sandbox deposit` line finds the sandbox through this note.
      const { writeDevSandboxNote } = await import('../server/dev-sandbox-note.js');
      await writeDevSandboxNote(config.database.dataDir, service.sandbox.urls.origin);
      const token = devAuth ? await dev.devToken(config, [demo.alice.partyId, demo.bob.partyId]) : undefined;
      process.stdout.write(
        dev.devBanner({
          url,
          sandbox: service.sandbox,
          parties: demo,
          logLevel: config.log.level,
          policy: await service.deps.policy.current(),
          ...(token ? { token } : {}),
        }),
      );
    }

    const signal = await signals.first;
    log.info({ signal }, 'shutting down: no new requests; finishing in-flight work');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      service.close().then(() => false),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(true), SHUTDOWN_GRACE_MS);
      }),
    ]);
    clearTimeout(timer);
    if (dev && service.sandbox) {
      const { removeDevSandboxNote } = await import('../server/dev-sandbox-note.js');
      await removeDevSandboxNote(config.database.dataDir).catch(() => {});
    }
    if (timedOut) {
      log.error({ graceMs: SHUTDOWN_GRACE_MS }, 'shutdown did not finish in time');
      throw new CliExit(1, `shutdown did not finish within ${SHUTDOWN_GRACE_MS / 1000} s`);
    }
    log.info('stopped');
  } finally {
    signals.remove();
  }
}

/** The cluster primary: checks the configuration allows several processes, starts and supervises them. */
async function supervise(opts: ServeCliOptions & { workers?: number }): Promise<void> {
  const n = opts.workers ?? 1;
  if (opts.dev)
    throw new CliExit(
      2,
      '--workers: development mode runs the sandbox network inside the one service process',
    );
  const { ConfigError, formatProblem, loadConfig } = await import('../server/config.js');
  const { serviceLogger } = await import('../server/service.js');
  // --port is CANTON_SIGNER_PORT given on the command line: checked and applied as that setting.
  const settings = opts.port !== undefined ? { ...process.env, CANTON_SIGNER_PORT: opts.port } : process.env;
  let config: Awaited<ReturnType<typeof loadConfig>>;
  try {
    config = await loadConfig({
      ...(opts.config !== undefined ? { file: opts.config } : {}),
      env: settings,
    });
  } catch (e) {
    if (e instanceof ConfigError)
      throw new CliExit(2, `invalid configuration: ${e.problems.map(formatProblem).join('; ')}`);
    throw e;
  }
  if (!config.database.url)
    throw new CliExit(
      2,
      `--workers ${n}: database.url must name a PostgreSQL server (CANTON_SIGNER_DATABASE_URL): the embedded database belongs to one process`,
    );
  if (config.network.sandbox)
    throw new CliExit(
      2,
      `--workers ${n}: network.sandbox runs a network inside one process; give the validator, participant and scan URLs`,
    );
  const log = serviceLogger(config).child({ role: 'primary' });
  log.info({ workers: n }, 'canton-signer starting worker processes');
  let stopping = false;
  const deaths: number[] = [];
  /** Exit codes of the workers that stopped when asked. */
  const codes: number[] = [];
  let gaveUp = false;
  let allGone!: () => void;
  const gone = new Promise<void>((r) => {
    allGone = r;
  });
  const live = new Set<Worker>();
  const start = () => {
    const w = cluster.fork();
    live.add(w);
    w.on('exit', (code, signal) => {
      live.delete(w);
      if (stopping) {
        codes.push(code ?? 1);
        if (live.size === 0) allGone();
        return;
      }
      const now = Date.now();
      deaths.push(now);
      while (deaths.length > 0 && deaths[0]! < now - RESTART_WINDOW_MS) deaths.shift();
      if (deaths.length > MAX_RESTARTS) {
        log.error({ pid: w.process.pid, code, signal }, 'workers keep dying: stopping the service');
        gaveUp = true;
        stopAll();
        return;
      }
      log.error({ pid: w.process.pid, code, signal }, 'a worker process died: starting another');
      setTimeout(() => {
        if (!stopping) start();
      }, 1000).unref();
    });
  };
  const stopAll = () => {
    if (stopping) return;
    stopping = true;
    if (live.size === 0) allGone();
    for (const w of live) if (w.isConnected()) w.send(SHUTDOWN_MESSAGE);
  };
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal }, 'second signal: stopping the workers without waiting');
      for (const w of live) w.process.kill('SIGKILL');
      process.exit(1);
    }
    log.info({ signal }, 'shutting down: the workers finish their in-flight work');
    stopAll();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  for (let i = 0; i < n; i++) start();
  try {
    await gone;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
  const failed = gaveUp || codes.some((c) => c !== 0);
  log.info({ exitCodes: codes }, 'stopped');
  if (failed) throw new CliExit(1, 'the service stopped after worker processes failed');
}

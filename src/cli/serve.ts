/**
 * `canton-signer serve [--config FILE] [--dev]`: loads and validates the
 * configuration (file + CANTON_SIGNER_* environment; a bad one exits 2 naming
 * every bad setting, never a secret value), assembles the service, listens
 * and logs JSON lines (pino, secrets redacted; the configuration only in its
 * redacted form). SIGTERM/SIGINT shut it down gracefully: no new connections,
 * in-flight requests finished, the withdrawal worker's steps finished, then
 * the clients, keys and database closed; exit 0. A second signal exits at
 * once (1). `--dev` is development mode (src/server/dev.ts).
 */
import type { Command } from 'commander';
import type { Logger } from 'pino';
import { CliExit } from './options.js';

interface ServeCliOptions {
  config?: string;
  dev?: boolean;
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
      'development mode: built-in sandbox, ./data, ./keystore with a development passphrase, demo token',
    )
    .action(async (opts: ServeCliOptions) => {
      try {
        await serve(opts);
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
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  return {
    first,
    remove() {
      process.off('SIGTERM', handler);
      process.off('SIGINT', handler);
    },
  };
}

async function serve(opts: ServeCliOptions): Promise<void> {
  // Loaded here: the other commands should not pay for fastify, pino and the store.
  const { ConfigError, formatProblem, loadConfig, redactConfig } = await import('../server/config.js');
  const { createService, serviceLogger } = await import('../server/service.js');
  const dev = opts.dev ? await import('../server/dev.js') : undefined;

  const { env, devPassphrase } = dev ? dev.devEnv(process.env) : { env: process.env, devPassphrase: false };
  let config: Awaited<ReturnType<typeof loadConfig>>;
  try {
    config = await loadConfig({
      ...(opts.config !== undefined ? { file: opts.config } : {}),
      env,
      ...(dev ? { defaults: dev.devDefaults() } : {}),
    });
  } catch (e) {
    if (e instanceof ConfigError)
      throw new CliExit(2, `invalid configuration: ${e.problems.map(formatProblem).join('; ')}`);
    throw e;
  }
  const devAuth = dev ? await dev.applyDevSecret(config) : undefined;
  if (dev)
    process.stderr.write(dev.devWarning({ devPassphrase, ...(devAuth ? { secretFile: devAuth.file } : {}) }));

  const log = serviceLogger(config);
  const signals = onSignals(log);
  try {
    log.info({ config: redactConfig(config), dev: dev !== undefined }, 'canton-signer starting');
    let demo: import('../server/dev.js').DemoParties | undefined;
    const service = await createService({
      config,
      env,
      logger: log,
      ...(dev
        ? {
            sandbox: { seed: dev.DEV_SANDBOX_SEED },
            beforeStart: async ({ deps, sandbox }) => {
              if (sandbox) demo = await dev.hostDevParties(deps, sandbox);
            },
          }
        : {}),
    });
    let url: string;
    try {
      if (service.sandbox) log.info({ sandbox: service.sandbox.urls }, 'sandbox network started');
      url = await service.listen();
    } catch (e) {
      await service.close();
      throw e;
    }
    log.info({ url }, 'listening');
    if (dev && demo && service.sandbox) {
      const token = devAuth ? await dev.devToken(config, [demo.alice.partyId, demo.bob.partyId]) : undefined;
      process.stdout.write(
        dev.devBanner({ url, sandbox: service.sandbox, parties: demo, ...(token ? { token } : {}) }),
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
    if (timedOut) {
      log.error({ graceMs: SHUTDOWN_GRACE_MS }, 'shutdown did not finish in time');
      throw new CliExit(1, `shutdown did not finish within ${SHUTDOWN_GRACE_MS / 1000} s`);
    }
    log.info('stopped');
  } finally {
    signals.remove();
  }
}

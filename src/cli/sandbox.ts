/**
 * `canton-signer sandbox`: runs the simulated network (participant, validator,
 * Scan) on localhost until SIGINT/SIGTERM. Prints where each service is and
 * the network's identities (one JSON object with --json), nothing secret
 * (never a token, client secret or the unsafe HMAC secret).
 * A port taken by another process exits EXIT_IN_USE naming it and --port.
 * Its subcommands act on a running sandbox (`sandbox deposit`: ./sandbox-customer.ts).
 */
import { type Command, Option } from 'commander';
import { UsageError } from './input.js';
import { listenProblem } from './options.js';
import { registerSandboxCustomer } from './sandbox-customer.js';

interface SandboxCliOptions {
  port: string;
  host: string;
  seed?: string;
  roundInterval: string;
  requireAuth?: boolean;
  token: string[];
  client: string[];
  audience?: string;
  unsafeHmacSecret?: string;
  json?: boolean;
  log?: boolean;
  nameLifetime?: string;
  nameRenewalWindow?: string;
  nameFee?: string;
}

const collect = (v: string, prev: string[]) => [...prev, v];

export function registerSandbox(program: Command): void {
  const sandbox = program
    .command('sandbox')
    .description('Run the sandbox network (Ledger API, validator, Scan) on localhost for tests and demos')
    .addOption(
      new Option('--port <port>', 'port to listen on (0: any free port)')
        .env('CANTON_SIGNER_SANDBOX_PORT')
        .default('7575'),
    )
    .option('--host <host>', 'interface to bind', '127.0.0.1')
    .option('--seed <seed>', 'seed for the built-in identities (same seed, same party ids)')
    .option('--round-interval <seconds>', 'seconds between mining rounds', '600')
    .option('--require-auth', 'refuse requests without a bearer token')
    .option('--token <token=user>', 'accept a static bearer token acting as a user (repeatable)', collect, [])
    .option('--client <id:secret:user>', 'an OAuth2 client-credentials client (repeatable)', collect, [])
    .option('--audience <aud>', 'the audience (aud) tokens must name (default https://canton.network.global)')
    .addOption(
      new Option(
        '--unsafe-hmac-secret <secret>',
        "UNSAFE: also accept HS256 JWTs signed with this shared secret (LocalNet's unsafe auth)",
      ).env('CANTON_SIGNER_SANDBOX_UNSAFE_HMAC_SECRET'),
    )
    .option(
      '--name-lifetime <duration>',
      'how long a name-service entry lives per payment (e.g. 10m; default 90d)',
    )
    .option('--name-renewal-window <duration>', 'how long before expiry a renewal may be paid (default 30d)')
    .option('--name-fee <usd>', 'the name service’s fee per lifetime, in USD (default 1.0)')
    .option('--json', 'print the endpoints as one JSON object')
    .option('--log', 'log every request (method, path, status; never headers)')
    .action(async (opts: SandboxCliOptions) => {
      const port = Number(opts.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new UsageError(`--port: not a port number: ${opts.port}`);
      const interval = Number(opts.roundInterval);
      if (!Number.isFinite(interval) || interval < 1)
        throw new UsageError(`--round-interval: must be at least 1 second, got ${opts.roundInterval}`);
      const tokens: Record<string, string> = {};
      for (const t of opts.token) {
        const i = t.lastIndexOf('=');
        if (i <= 0 || i === t.length - 1) throw new UsageError('--token: expected <token>=<user>');
        tokens[t.slice(0, i)] = t.slice(i + 1);
      }
      const clients: Record<string, { secret: string; userId: string }> = {};
      for (const c of opts.client) {
        const parts = c.split(':');
        if (parts.length !== 3 || parts.some((p) => p === ''))
          throw new UsageError('--client: expected <id>:<secret>:<user>');
        clients[parts[0]!] = { secret: parts[1]!, userId: parts[2]! };
      }
      if (opts.audience === '') throw new UsageError('--audience: must not be empty');
      if (opts.unsafeHmacSecret === '') throw new UsageError('--unsafe-hmac-secret: must not be empty');
      // Loaded here, not at the top: the other commands should not pay for starting fastify.
      const { parseDuration } = await import('./flows.js');
      const ans = {
        ...(opts.nameLifetime !== undefined
          ? { entryLifetimeMs: parseDuration(opts.nameLifetime, '--name-lifetime') }
          : {}),
        ...(opts.nameRenewalWindow !== undefined
          ? { renewalDurationMs: parseDuration(opts.nameRenewalWindow, '--name-renewal-window') }
          : {}),
        ...(opts.nameFee !== undefined ? { entryFee: opts.nameFee } : {}),
      };
      if (
        ans.entryFee !== undefined &&
        (!/^\d{1,28}(\.\d{1,10})?$/.test(ans.entryFee) || /^0+(\.0*)?$/.test(ans.entryFee))
      )
        throw new UsageError(`--name-fee: a positive decimal number of USD such as 1.0, got ${ans.entryFee}`);
      const { startSandbox } = await import('../sandbox/server.js');
      const sandbox = await startSandbox({
        ans,
        port,
        host: opts.host,
        roundIntervalMs: interval * 1000,
        logger: opts.log === true,
        ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
        auth: {
          tokens,
          clients,
          required: opts.requireAuth === true,
          ...(opts.audience !== undefined ? { audience: opts.audience } : {}),
          ...(opts.unsafeHmacSecret !== undefined ? { unsafeHmacSecret: opts.unsafeHmacSecret } : {}),
        },
      }).catch((e: unknown) => {
        if (e instanceof Error && e.name === 'SandboxAuthConfigError')
          throw new UsageError(`--token: ${e.message}`);
        throw listenProblem(
          e,
          { host: opts.host, port },
          {
            choosePort: (p) => `choose another port: --port ${p} (--port 0: any free port)`,
            chooseHost: '--host',
            whoElse: 'another sandbox?',
          },
        );
      });
      const { net } = sandbox.ctx;
      const info = {
        ledgerApi: sandbox.urls.ledgerApi,
        validator: sandbox.urls.validator,
        scan: sandbox.urls.scan,
        registry: sandbox.urls.registry,
        oauthToken: sandbox.urls.oauthToken,
        oidcDiscovery: sandbox.urls.oidcDiscovery,
        audience: sandbox.ctx.auth.audience,
        controls: `${sandbox.urls.origin}/sandbox`,
        dsoParty: net.dso,
        validatorParty: net.validatorParty,
        participantId: net.participantId,
        synchronizerId: net.synchronizerId,
      };
      if (opts.json) process.stdout.write(`${JSON.stringify(info)}\n`);
      else
        process.stdout.write(
          `${Object.entries(info)
            .map(([k, v]) => `${k.padEnd(16)} ${v}`)
            .join('\n')}\nsandbox running; Ctrl-C stops it\n`,
        );
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await sandbox.close();
    });
  registerSandboxCustomer(sandbox);
}

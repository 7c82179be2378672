/**
 * `canton-signer serve` as a real child process for tests: its output as it
 * arrives, waiting for a line that matches, the exit status, and a kill that
 * runs at the end of a test whatever happened (`stopAll`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import type { RunningSandbox } from '../../src/sandbox/server.js';
import { BIN, cliEnv } from './cli.js';
import { TEST_AUDIENCE, TEST_ISSUER, TEST_SECRET } from './tokens.js';

export interface ServeProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** The first match of `re` in stdout (+ stderr with `both`), waiting up to `ms`. */
  waitFor(re: RegExp, ms?: number): Promise<RegExpMatchArray>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcess>();

/**
 * The environment of `serve --dev` as `npm start` on a fresh clone has it: a
 * free port, no passphrase, configuration file, keystore or data folder of the
 * caller's, and `extra` on top (a value `undefined` removes the variable).
 */
export function devEnv(extra: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return {
    CANTON_SIGNER_PORT: '0',
    CANTON_SIGNER_PASSPHRASE: undefined,
    CANTON_SIGNER_PASSPHRASE_FILE: undefined,
    CANTON_SIGNER_CONFIG: undefined,
    CANTON_SIGNER_KEYSTORE: undefined,
    CANTON_SIGNER_DATA_DIR: undefined,
    CANTON_SIGNER_LOG_LEVEL: 'warn',
    ...extra,
  };
}

export function startServe(
  args: string[],
  opts: { cwd: string; env?: Record<string, string | undefined> },
): ServeProcess {
  const env = cliEnv();
  for (const [k, v] of Object.entries(opts.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  const child = spawn(process.execPath, [BIN, 'serve', ...args], {
    cwd: opts.cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  const poke = () => {
    for (const w of waiters) w();
  };
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString('utf8');
    poke();
  });
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString('utf8');
    poke();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => {
      running.delete(child);
      poke();
      resolve({ code, signal });
    }),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor(re, ms = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = out.match(re);
          if (m) {
            done();
            resolve(m);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            done();
            reject(new Error(`serve exited before ${re}:\nstdout: ${out}\nstderr: ${err}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`timed out waiting for ${re}:\nstdout: ${out}\nstderr: ${err}`));
        }, ms);
        const done = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
  };
}

/** Kills every serve process a test left running. */
export function stopAll(): void {
  for (const c of running) c.kill('SIGKILL');
  running.clear();
}

/** The `"url"` of the JSON `listening` log line. */
export const LISTENING = /"url":"(http:\/\/[^"]+)","msg":"listening"/;
/** The sandbox origin of the JSON `sandbox network started` log line. */
export const SANDBOX_ORIGIN = /"sandbox":\{"origin":"(http:\/\/[^"]+)"/;

/** The `network` settings of a service that reaches the sandbox network `sandbox` by its URLs. */
export function sandboxNetwork(sandbox: RunningSandbox): Record<string, unknown> {
  return {
    sandbox: false,
    ledgerApiUrl: sandbox.urls.ledgerApi,
    validatorUrl: sandbox.urls.validator,
    scanUrl: sandbox.urls.scan,
    ledgerApiUser: LEDGER_API_USER,
  };
}

/**
 * The configuration of a `serve` process reaching the sandbox network `sandbox`
 * over PostgreSQL at `databaseUrl`, with the test tokens (test/support/service.ts)
 * and the policy file `policyFile`.
 */
export function policyServeConfig(o: {
  keystore: string;
  databaseUrl: string;
  sandbox: RunningSandbox;
  policyFile: string;
}): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    keystore: { dir: o.keystore },
    database: { url: o.databaseUrl },
    network: sandboxNetwork(o.sandbox),
    auth: { issuer: TEST_ISSUER, audience: TEST_AUDIENCE, sharedSecret: TEST_SECRET, algorithms: ['HS256'] },
    policy: { file: o.policyFile },
    log: { level: 'info' },
  };
}

/**
 * What the official Canton Wallet SDK needs to run unmodified in this test
 * process, and the sandbox it runs against: Node 20 lacks `Object.groupBy` and a
 * global `WebSocket`, which the SDK uses, so both are provided here (the test
 * harness only — nothing between the SDK and the sandbox is changed); the
 * sandbox is `canton-signer sandbox` started as its own process, with auth
 * required and an OAuth client for the SDK.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import WebSocket from 'ws';

/** Installs the two Node 22 globals the SDK uses. Idempotent. */
export function installSdkPolyfills(): void {
  const O = Object as unknown as { groupBy?: unknown };
  if (typeof O.groupBy !== 'function') {
    O.groupBy = <T>(items: Iterable<T>, key: (item: T, index: number) => PropertyKey) => {
      const out: Record<PropertyKey, T[]> = Object.create(null);
      let i = 0;
      for (const item of items) {
        const k = key(item, i++);
        const group = out[k] ?? [];
        group.push(item);
        out[k] = group;
      }
      return out;
    };
  }
  const G = globalThis as unknown as { WebSocket?: unknown };
  if (G.WebSocket === undefined) G.WebSocket = WebSocket;
}

/** The `--json` line of `canton-signer sandbox`. */
export interface SandboxInfo {
  ledgerApi: string;
  validator: string;
  scan: string;
  registry: string;
  oauthToken: string;
  oidcDiscovery?: string;
  controls: string;
  dsoParty: string;
  validatorParty: string;
  participantId: string;
  synchronizerId: string;
}

export interface SandboxProcess {
  info: SandboxInfo;
  /** The OAuth client the sandbox was started with (acts as the validator operator's user). */
  client: { id: string; secret: string; user: string };
  /** Everything the process wrote to stderr (request log lines with --log). */
  stderr(): string;
  stop(): Promise<void>;
}

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'canton-signer.js');

/**
 * Starts `canton-signer sandbox --port 0 --json --require-auth` in its own
 * process with one OAuth client acting as `user`, and resolves with its
 * endpoints once it listens.
 */
export async function startSandboxProcess(
  opts: { seed?: string; user?: string; extraArgs?: string[] } = {},
): Promise<SandboxProcess> {
  const client = {
    id: 'wallet-sdk',
    secret: randomBytes(16).toString('hex'),
    user: opts.user ?? 'validator-operator',
  };
  const args = [
    BIN,
    'sandbox',
    '--port',
    '0',
    '--json',
    '--require-auth',
    '--seed',
    opts.seed ?? 'wallet-sdk-suite',
    '--client',
    `${client.id}:${client.secret}:${client.user}`,
    ...(opts.extraArgs ?? []),
  ];
  const child: ChildProcess = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const info = await new Promise<SandboxInfo>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`sandbox did not start in 20 s: ${err}`)), 20_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      resolve(JSON.parse(out.slice(0, nl)) as SandboxInfo);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sandbox exited with ${code}: ${err}`));
    });
  });
  return {
    info,
    client,
    stderr: () => err,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

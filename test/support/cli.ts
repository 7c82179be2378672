/**
 * Running the compiled `canton-signer` in tests: where it is (`ROOT`, `BIN`),
 * the child's environment (`cliEnv`), one asynchronous run with its exit
 * status and output (`runCli`; the in-process sandbox keeps answering while
 * it runs), and a temp keystore folder whose keys' parties are hosted on an
 * in-process sandbox and written to its party book (`cliKeystore`).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import type { KeyScheme } from '../../src/keys/schemes.js';
import type { RunningSandbox } from '../../src/sandbox/server.js';
import { FilePartyBook, type PartyRecord } from '../../src/store/parties.js';
import { testSigner } from './test-signer.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BIN = join(ROOT, 'bin', 'canton-signer.js');

export interface CliRun {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** This process's environment without NODE_OPTIONS and the PKCS#11 module, plus `extra`. */
export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.NODE_OPTIONS;
  delete env.CANTON_SIGNER_PKCS11_MODULE;
  return env;
}

/** Runs the command with `args` in ROOT; `input` (or nothing) on standard input. */
export function runCli(
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; input?: string | Uint8Array } = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: opts.env ?? cliEnv(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    // the command may exit before it read all of its input
    child.stdin.on('error', () => {});
    child.on('close', (status, signal) =>
      resolve({
        status,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
    child.stdin.end(opts.input ?? '');
  });
}

export interface CliKeystore {
  dir: string;
  /** A new file key labelled `hint`, its party hosted on the sandbox and put in the folder's party book. */
  addParty(hint: string, opts?: { scheme?: KeyScheme; fund?: string }): Promise<PartyRecord>;
  close(): Promise<void>;
}

/** A temp keystore folder (file keys under `passphrase`, cheap scrypt) with its party book. */
export async function cliKeystore(
  sb: RunningSandbox,
  name: string,
  passphrase: string,
): Promise<CliKeystore> {
  // Loaded here: most users of this module only run the CLI and need none of the flow environment.
  const { hostParty } = await import('./flow-env.js');
  const dir = await mkdtemp(join(tmpdir(), `canton-signer-${name}-`));
  const signer = testSigner(dir, passphrase);
  const book = new FilePartyBook(dir);
  return {
    dir,
    addParty: (hint, o = {}) => hostParty(sb.ctx.net, signer, book, hint, { ...o, label: hint }),
    async close() {
      await signer.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Whether every module of src/ has its compiled dist/ file, not older than the source. */
function distIsFresh(): boolean {
  const src = join(ROOT, 'src');
  for (const entry of readdirSync(src, { recursive: true, encoding: 'utf8' })) {
    if (!entry.endsWith('.ts')) continue;
    const out = join(ROOT, 'dist', entry.replace(/\.ts$/, '.js'));
    if (!existsSync(out) || statSync(out).mtimeMs < statSync(join(src, entry)).mtimeMs) return false;
  }
  return true;
}

/**
 * Compiles src/ into dist/ unless dist/ is already up to date (`npm test`
 * builds before the tests run; type errors elsewhere do not stop tsc from
 * emitting), then checks that each of `files` (paths under dist/) is there
 * and not older than its source.
 */
export function buildDist(files: readonly string[]): void {
  if (!distIsFresh())
    spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
      { cwd: ROOT, stdio: 'ignore' },
    );
  for (const f of files) {
    const out = join(ROOT, 'dist', f);
    expect(existsSync(out), `${out} was not built`).toBe(true);
    const src = join(ROOT, 'src', f.replace(/\.js$/, '.ts'));
    expect(statSync(out).mtimeMs, `${out} is older than its source`).toBeGreaterThanOrEqual(
      statSync(src).mtimeMs,
    );
  }
}

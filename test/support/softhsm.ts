/**
 * SoftHSM2 tokens for tests: each gets its own softhsm2.conf and token folder
 * in a temp dir. SoftHSM reads SOFTHSM2_CONF at C_Initialize, and vitest runs
 * each test file in its own process, so a file creates its token before it
 * opens a backend.
 *
 * Policy: in CI (CI set) a missing SoftHSM fails the suite; locally the suite
 * is skipped with a loud warning saying how to install it.
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

const MODULE_PATHS = [
  '/usr/lib/softhsm/libsofthsm2.so',
  '/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so',
  '/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so',
  '/usr/lib64/pkcs11/libsofthsm2.so',
  '/usr/lib/pkcs11/libsofthsm2.so',
  '/usr/local/lib/softhsm/libsofthsm2.so',
  '/opt/homebrew/lib/softhsm/libsofthsm2.so',
];

/** The SoftHSM2 module: SOFTHSM2_MODULE, else the usual install paths. */
export function softHsmModule(): string | undefined {
  const explicit = process.env.SOFTHSM2_MODULE;
  if (explicit) return existsSync(explicit) ? explicit : undefined;
  return MODULE_PATHS.find((p) => existsSync(p));
}

function softHsmUtil(): boolean {
  return spawnSync('softhsm2-util', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * The SoftHSM2 module path when SoftHSM (module and softhsm2-util) is
 * installed. Missing: throws in CI, so the suite fails rather than skips;
 * locally, warns and returns undefined (use with describe.skipIf).
 */
export function requireSoftHsm(): string | undefined {
  const module = softHsmModule();
  const util = softHsmUtil();
  if (module && util) return module;
  const what = !module
    ? 'libsofthsm2.so not found (set SOFTHSM2_MODULE to its path)'
    : 'softhsm2-util not on PATH';
  if (process.env.CI)
    throw new Error(
      `SoftHSM2 is required in CI for the PKCS#11 tests: ${what}; install it: apt-get install softhsm2`,
    );
  console.warn(
    `\n*** PKCS#11 TESTS SKIPPED: ${what}.\n*** Install SoftHSM2 to run them: sudo apt-get install softhsm2\n`,
  );
  return undefined;
}

export interface SoftHsmToken {
  module: string;
  tokenLabel: string;
  pin: string;
  soPin: string;
  /** Temp dir holding softhsm2.conf and the token folder. */
  dir: string;
  /** Re-initialises the token in place (same slot, same label): every object on it is gone. */
  reinit(): Promise<void>;
  /** Deletes the token. */
  deleteToken(): Promise<void>;
  /** Makes the token again in a free slot, same label and PINs (after deleteToken; it gets a new slot id). */
  initToken(): Promise<void>;
  cleanup(): Promise<void>;
}

/**
 * A fresh SoftHSM2 token in a temp dir, with random PINs; sets
 * process.env.SOFTHSM2_CONF to its configuration (restored by cleanup()).
 */
export async function createSoftHsmToken(
  opts: { label?: string; pin?: string; soPin?: string; module?: string } = {},
): Promise<SoftHsmToken> {
  const module = opts.module ?? softHsmModule();
  if (!module) throw new Error('SoftHSM2 is not installed (apt-get install softhsm2)');
  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-softhsm-'));
  const tokens = join(dir, 'tokens');
  await mkdir(tokens, { mode: 0o700 });
  const conf = join(dir, 'softhsm2.conf');
  await writeFile(
    conf,
    `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`,
  );
  const previous = process.env.SOFTHSM2_CONF;
  process.env.SOFTHSM2_CONF = conf;
  const tokenLabel = opts.label ?? `cs-test-${randomBytes(4).toString('hex')}`;
  // Distinctive PINs, so that tests can look for them in error messages.
  const pin = opts.pin ?? `pin-${randomBytes(8).toString('hex')}`;
  const soPin = opts.soPin ?? `so-${randomBytes(8).toString('hex')}`;
  const env = { ...process.env, SOFTHSM2_CONF: conf };
  const util = (...args: string[]) => run('softhsm2-util', args, { env });
  const init = (where: string[]) =>
    util('--init-token', ...where, '--label', tokenLabel, '--pin', pin, '--so-pin', soPin);
  try {
    await init(['--free']);
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    module,
    tokenLabel,
    pin,
    soPin,
    dir,
    reinit: async () => {
      await init(['--token', tokenLabel]);
    },
    deleteToken: async () => {
      await util('--delete-token', '--token', tokenLabel);
    },
    initToken: async () => {
      await init(['--free']);
    },
    cleanup: async () => {
      if (process.env.SOFTHSM2_CONF === conf) {
        if (previous === undefined) delete process.env.SOFTHSM2_CONF;
        else process.env.SOFTHSM2_CONF = previous;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

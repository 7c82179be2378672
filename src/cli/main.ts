/**
 * The `canton-signer` command line. Exit codes: 0 success, 1 a check, a key
 * operation or a flow failed (e.g. `hash --expect` mismatch, wrong passphrase,
 * a pipeline refusal, a network error), 2 refused input or bad usage, 75 a port
 * or the embedded database folder held by another process. Errors are one
 * line on stderr; stdout carries only the command's result. With `--json`, a
 * pipeline refusal is also written to stdout as one JSON object (`reason`,
 * `message`, and `problems` / `details` when it has any), like the JSON other
 * commands print before they exit 1 (`send`, `audit verify`).
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { isCantonApiError, oneLine, upstreamSentence } from '../canton/errors.js';
import { Refusal } from '../flows/refusal.js';
import { TransactionError } from '../hashing/errors.js';
import { KeyError } from '../keys/backend.js';
import { registerAirGap } from './air-gap.js';
import { registerApprovals } from './approvals.js';
import { registerAudit } from './audit.js';
import { registerFlows } from './flows.js';
import { registerHash } from './hash.js';
import { UsageError } from './input.js';
import { registerInspect } from './inspect.js';
import { registerKeys } from './keys.js';
import { registerOffline } from './offline.js';
import { CliExit, finishProgram } from './options.js';
import { printJson } from './output.js';
import { registerParty } from './party.js';
import { registerPolicy } from './policy.js';
import { registerSandbox } from './sandbox.js';
import { registerServe } from './serve.js';
import { keyErrorText } from './system-errors.js';
import { registerToken } from './token.js';
import { registerTransfer } from './transfer.js';

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('canton-signer')
    .description('Custody and signing for Canton Network external parties. Never blind-signs.')
    .version(version())
    .showHelpAfterError(false)
    .exitOverride();
  registerHash(program);
  registerInspect(program);
  registerKeys(program);
  registerParty(program);
  registerSandbox(program);
  registerFlows(program);
  registerTransfer(program);
  registerAudit(program);
  registerServe(program);
  registerToken(program);
  registerOffline(program);
  registerAirGap(program);
  registerPolicy(program);
  registerApprovals(program);
  finishProgram(program);
  return program;
}

/** The JSON form of a refusal printed under `--json`: empty `problems` and `details` are left out. */
export function refusalJson(e: Refusal): Record<string, unknown> {
  return {
    reason: e.reason,
    message: e.message,
    ...(e.problems.length > 0 ? { problems: [...e.problems] } : {}),
    ...(Object.keys(e.details).length > 0 ? { details: { ...e.details } } : {}),
  };
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  // whether the command that runs was given --json (hooks on the root run for every subcommand)
  let json = false;
  program.hook('preAction', (_root, action) => {
    json = action.opts().json === true;
  });
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) {
      // help and version exit 0; usage errors were already printed by commander
      return e.exitCode === 0 ? 0 : 2;
    }
    if (e instanceof CliExit) {
      process.stderr.write(`canton-signer: ${oneLine(e.message)}\n`);
      return e.exitCode;
    }
    if (e instanceof Refusal) {
      if (json) printJson(refusalJson(e));
      process.stderr.write(`canton-signer: refused (${e.reason}): ${oneLine(e.message)}\n`);
      return 1;
    }
    if (isCantonApiError(e)) {
      process.stderr.write(`canton-signer: ${oneLine(upstreamSentence(e))}\n`);
      return 1;
    }
    if (e instanceof TransactionError) {
      process.stderr.write(`canton-signer: refused: ${oneLine(e.message)}\n`);
      return 2;
    }
    if (e instanceof KeyError) {
      process.stderr.write(`canton-signer: ${oneLine(keyErrorText(e))}\n`);
      return 1;
    }
    if (e instanceof UsageError) {
      process.stderr.write(`canton-signer: ${oneLine(e.message)}\n`);
      return 2;
    }
    process.stderr.write(
      `canton-signer: internal error: ${oneLine(e instanceof Error ? e.message : String(e))}\n`,
    );
    return 70;
  }
}

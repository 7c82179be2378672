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
import type { Refusal } from '../flows/refusal.js';
import { oneLine } from '../text/one-line.js';
import { finishProgram } from './options.js';

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

type Register = (program: Command) => void;

/**
 * The module of each top-level command, in the order the help lists them.
 * A command line naming one of these loads only that module (and what it
 * imports); help, version and anything unrecognised load them all, so the
 * help and commander's "did you mean" see every command.
 */
export const COMMAND_MODULES: readonly (readonly [
  names: readonly string[],
  load: () => Promise<Register>,
])[] = [
  [['hash'], async () => (await import('./hash.js')).registerHash],
  [['inspect'], async () => (await import('./inspect.js')).registerInspect],
  [['keys'], async () => (await import('./keys.js')).registerKeys],
  [['party'], async () => (await import('./party.js')).registerParty],
  [['sandbox'], async () => (await import('./sandbox.js')).registerSandbox],
  [
    ['setup-accept', 'send', 'preapprovals', 'sign-and-execute'],
    async () => (await import('./flows.js')).registerFlows,
  ],
  [['transfer', 'offers', 'holdings'], async () => (await import('./transfer.js')).registerTransfer],
  [['audit'], async () => (await import('./audit.js')).registerAudit],
  [['serve'], async () => (await import('./serve.js')).registerServe],
  [['token'], async () => (await import('./token.js')).registerToken],
  [['offline'], async () => (await import('./offline.js')).registerOffline],
  [['export-key', 'exports', 'export', 'import'], async () => (await import('./air-gap.js')).registerAirGap],
  [['policy'], async () => (await import('./policy.js')).registerPolicy],
  [['approvals', 'approvers'], async () => (await import('./approvals.js')).registerApprovals],
  [['ingest'], async () => (await import('./ingest.js')).registerIngest],
  [['names'], async () => (await import('./names.js')).registerNames],
];

/**
 * The program with the commands `argv` can reach: only the module of the
 * command it names (argv[2]), or every command when it names none of them.
 */
export async function buildProgram(argv: readonly string[] = []): Promise<Command> {
  const program = new Command();
  program
    .name('canton-signer')
    .description('Custody and signing for Canton Network external parties. Never blind-signs.')
    .version(version())
    .showHelpAfterError(false)
    .exitOverride();
  const named = argv[2];
  const one = COMMAND_MODULES.find(([names]) => named !== undefined && names.includes(named));
  const registers = await Promise.all((one ? [one] : COMMAND_MODULES).map(([, load]) => load()));
  for (const register of registers) register(program);
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
  const program = await buildProgram(argv);
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
    return await exitFor(e, json);
  }
}

/**
 * Prints an error a command threw and returns the exit code. The error classes
 * are loaded here, once a command has failed: a command that threw one has
 * loaded its module already.
 */
async function exitFor(e: unknown, json: boolean): Promise<number> {
  const [{ Refusal }, { TransactionError }, { KeyError }] = await Promise.all([
    import('../flows/refusal.js'),
    import('../hashing/errors.js'),
    import('../keys/backend.js'),
  ]);
  const [{ UsageError }, { CliExit }, { printJson }, { keyErrorText }] = await Promise.all([
    import('./input.js'),
    import('./options.js'),
    import('./output.js'),
    import('./system-errors.js'),
  ]);
  if (e instanceof CliExit) {
    process.stderr.write(`canton-signer: ${oneLine(e.message)}\n`);
    return e.exitCode;
  }
  if (e instanceof Refusal) {
    if (json) printJson(refusalJson(e));
    process.stderr.write(`canton-signer: refused (${e.reason}): ${oneLine(e.message)}\n`);
    return 1;
  }
  // only a command that talks to Canton can throw its errors (and has loaded their module)
  if (e instanceof Error && e.name === 'CantonApiError') {
    const { isCantonApiError, upstreamSentence } = await import('../canton/errors.js');
    if (isCantonApiError(e)) {
      process.stderr.write(`canton-signer: ${oneLine(upstreamSentence(e))}\n`);
      return 1;
    }
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

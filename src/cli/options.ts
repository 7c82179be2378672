/** Options and exit handling shared by the commands. */
import { statSync } from 'node:fs';
import type { Command } from 'commander';
import { Option } from 'commander';
import { keystoreDir } from '../keys/keystore-dir.js';
import { INPUT_FORMATS, UsageError } from './input.js';

/**
 * The exit code when something this command needs is held by another
 * process: the embedded database folder (a running service), or the port
 * to listen on (sysexits' EX_TEMPFAIL: try again once it is free).
 */
export const EXIT_IN_USE = 75;

/** Ends a command with an exit code and a one-line message on stderr. */
export class CliExit extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

export function schemeOption(): Option {
  return new Option('--scheme <scheme>', 'hashing scheme').choices(['v2', 'v3']).default('v2');
}

export function inputFormatOption(): Option {
  return new Option('--input <format>', 'how to read the input').choices([...INPUT_FORMATS]).default('auto');
}

/**
 * Commander's output (errors as one `canton-signer: …` line on stderr, with
 * a "did you mean" suggestion for a mistyped option or command), its exit
 * handling for `program` and every subcommand, and required
 * options checked after unknown options: commander reports a missing required
 * option first, so `keys create --lable x` would say "required option
 * '--label'" instead of "unknown option '--lable' (Did you mean --label?)".
 * The required options are checked in a preAction hook instead, which runs
 * after commander's unknown-option and argument checks.
 */
export function finishProgram(program: Command): void {
  const output = {
    writeErr: (s: string) => process.stderr.write(s),
    // one line: commander puts its "(Did you mean …?)" on a line of its own
    outputError: (s: string, write: (s: string) => void) =>
      write(
        `canton-signer: ${s
          .replace(/^error: /, '')
          .replace(/\n\(Did you mean (.*)\?\)\n?$/, ' (did you mean $1?)\n')}`,
      ),
  };
  const visit = (c: Command): void => {
    c.exitOverride().showSuggestionAfterError(true).configureOutput(output);
    const required = c.options.filter((o) => o.mandatory);
    for (const o of required) o.makeOptionMandatory(false);
    if (required.length > 0)
      c.hook('preAction', (self) => {
        for (const o of required)
          if (self.getOptionValue(o.attributeName()) === undefined)
            self.error(`required option '${o.flags}' not specified`, {
              code: 'commander.missingMandatoryOptionValue',
              exitCode: 2,
            });
      });
    for (const sub of c.commands) visit(sub);
  };
  visit(program);
}

/**
 * The keystore folder (`--keystore`, else $CANTON_SIGNER_KEYSTORE, else
 * ./keystore); refused (exit 2) when that path is a file, before any key is
 * read or written. A missing folder is fine: it is created when a key is.
 */
export function keystoreFolder(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const dir = keystoreDir(env, explicit);
  let file = false;
  try {
    file = !statSync(dir).isDirectory();
  } catch {
    file = false;
  }
  if (file)
    throw new UsageError(
      `the keystore ${dir} is a file, not a folder: give ${explicit !== undefined ? '--keystore' : env.CANTON_SIGNER_KEYSTORE !== undefined ? 'CANTON_SIGNER_KEYSTORE' : '--keystore'} a folder (it is created when missing)`,
    );
  return dir;
}

/**
 * A listen error as the command's exit: the port taken by another process
 * (EXIT_IN_USE), one this user may not use, or an address this host does not
 * have (2) — each naming the address, and how the command chooses another
 * (`choosePort` with a suggested port, `chooseHost`: the setting or option).
 */
export function listenProblem(
  e: unknown,
  at: { host: string; port: number },
  how: { choosePort: (suggested: number) => string; chooseHost: string; whoElse?: string },
): unknown {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  const where = `${at.host}:${at.port}`;
  const other = at.port === 8080 ? 8081 : at.port === 7575 ? 7576 : at.port < 1024 ? 8080 : at.port + 1;
  if (code === 'EADDRINUSE')
    return new CliExit(
      EXIT_IN_USE,
      `cannot listen on ${where}: the port is in use by another process${how.whoElse ? ` (${how.whoElse})` : ''}. Stop it, or ${how.choosePort(other)}`,
    );
  if (code === 'EACCES')
    return new CliExit(
      2,
      `cannot listen on ${where}: this user may not use port ${at.port} (ports below 1024 need privileges); ${how.choosePort(other)}`,
    );
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND')
    return new CliExit(
      2,
      `cannot listen on ${where}: ${at.host} is not an address of this host; set ${how.chooseHost} to one of its addresses, e.g. 127.0.0.1 or 0.0.0.0`,
    );
  return e;
}

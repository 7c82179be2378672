/** Options and exit handling shared by the commands. */
import { Option } from 'commander';
import { INPUT_FORMATS } from './input.js';

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

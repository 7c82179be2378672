/**
 * How a CLI command prints its result on stdout: a line (`print`, newline
 * added when missing), a value as indented JSON (`printJson`), or either as
 * `--json` asks (`out`: the text as given, or the value as JSON).
 */

export const print = (s: string): void => {
  process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
};

export const printJson = (v: unknown): void => print(JSON.stringify(v, null, 2));

/** `value` as JSON when `json`, else `text` exactly as given. */
export function out(json: boolean | undefined, value: unknown, text: string): void {
  if (json) printJson(value);
  else process.stdout.write(text);
}

/**
 * Text that is safe to show an operator on a terminal before they sign.
 * Anything a request or a transaction carries (a memo, a command id, a text
 * field) may hold control characters — ANSI escape sequences that erase or
 * hide lines, carriage returns that overwrite them, bidirectional overrides
 * that reorder them, zero-width characters — or newlines that forge a line
 * of the summary. Each such character is shown as a visible `\u{…}` escape.
 */

/** C0 and C1 controls, DEL, bidi marks and overrides, zero-width characters, line/paragraph separators, BOM. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
/** The same, except the newline (for whole texts whose lines we built). */
const UNSAFE_KEEP_NEWLINE =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

const visible = (c: string) => `\\u{${c.codePointAt(0)!.toString(16)}}`;

/** One value on one line: every unsafe character, the newline included, escaped. */
export function printable(s: string): string {
  return s.replace(UNSAFE, visible);
}

/** A whole text of lines: unsafe characters escaped, newlines kept. */
export function printableText(s: string): string {
  return s.replace(UNSAFE_KEEP_NEWLINE, visible);
}

/** A copy of a JSON-like value with every string made `printable` (keys too). */
export function printableDeep<T>(v: T): T {
  if (typeof v === 'string') return printable(v) as T;
  if (Array.isArray(v)) return v.map((x) => printableDeep(x)) as T;
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype)
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [printable(k), printableDeep(x)])) as T;
  return v;
}

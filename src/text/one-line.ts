/**
 * A message on one line: control characters (line breaks among them) collapse
 * to a space. Imports nothing, so any layer's messages can use it.
 */

/** Collapse control characters so a message stays on one line. */
export function oneLine(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, ' ').trim();
}

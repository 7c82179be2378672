/**
 * Canonical JSON for the store: what request hashes (idempotency) and audit
 * hashes are computed over. Object keys sorted by UTF-16 code units, no
 * whitespace, primitives as JSON.stringify writes them (for the values the
 * store uses, strings, booleans, null and finite numbers, this is RFC 8785
 * JCS). `undefined` members are dropped; anything JSON cannot represent
 * (bigint, functions, symbols, non-finite numbers) is refused.
 */
import { createHash } from 'node:crypto';
import { withArticle } from '../text/english.js';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function canonicalJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`canonical JSON: ${value} is not a JSON number`);
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value))
        return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
      const obj = value as Record<string, unknown>;
      if (typeof (obj as { toJSON?: unknown }).toJSON === 'function')
        return canonicalJson((obj as { toJSON: () => unknown }).toJSON());
      const keys = Object.keys(obj)
        .filter((k) => obj[k] !== undefined)
        .sort();
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
    }
    default:
      throw new TypeError(`canonical JSON: ${withArticle(typeof value)} is not a JSON value`);
  }
}

/**
 * A U+0000 or a lone UTF-16 surrogate: valid in a JS string and in JSON text,
 * refused by PostgreSQL (text cannot hold U+0000; jsonb refuses both).
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when `s` holds a character the database cannot store (see `storable`). */
export function unstorableText(s: string): boolean {
  return UNSTORABLE.test(s);
}

/**
 * The same escapes in canonical JSON text (preceded by an even number of
 * backslashes): JSON.stringify writes U+0000 and every lone surrogate as a
 * `\uXXXX` escape, and a well-formed surrogate pair as the character itself.
 */
const UNSTORABLE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/g;

/**
 * The value as the store keeps it: canonical, and with every U+0000 and lone
 * surrogate replaced by U+FFFD (what the database cannot store).
 */
export function storable(value: unknown): Json {
  return JSON.parse(canonicalJson(value).replace(UNSTORABLE_ESCAPE, '$1\\ufffd')) as Json;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

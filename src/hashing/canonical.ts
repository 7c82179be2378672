/**
 * Canonical-form rules. The participant re-parses several strings from the
 * prepared transaction and re-renders them before it recomputes the hash; text
 * that does not survive that round trip would give a hash the participant
 * rejects, or hide a difference from the person signing. These predicates say
 * exactly which texts survive. They validate; they never normalise.
 */

/**
 * Daml Numeric as rendered by the participant: mandatory dot, scale ≤ 37, precision ≤ 38, no negative zero.
 * Scanned by hand over the UTF-8 bytes (it runs for every numeric of every transaction, straight on
 * the wire bytes): it accepts exactly `-?(?:[1-9][0-9]*|0)\.[0-9]*`; any byte above 0x7f is refused.
 */
export function numericBytesProblem(b: Uint8Array, start: number, end: number): string | undefined {
  let i = start < end && b[start] === 0x2d ? start + 1 : start;
  const neg = i > start;
  const intStart = i;
  const first = i < end ? b[i]! : -1;
  if (first === 0x30) i++;
  else if (first >= 0x31 && first <= 0x39) {
    i++;
    while (i < end && isDigit(b[i]!)) i++;
  } else return NOT_NUMERIC;
  const intLength = i - intStart;
  if (i >= end || b[i] !== 0x2e) return NOT_NUMERIC;
  i++;
  const scale = end - i;
  let zeroFraction = true;
  for (; i < end; i++) {
    const c = b[i]!;
    if (!isDigit(c)) return NOT_NUMERIC;
    if (c !== 0x30) zeroFraction = false;
  }
  if (scale > 37) return `has scale ${scale}, above the Daml maximum 37`;
  const intDigits = first === 0x30 ? 0 : intLength;
  if (intDigits + scale > 38) return `has ${intDigits + scale} digits, above the Daml precision 38`;
  if (neg && intDigits === 0 && zeroFraction)
    return 'is a negative zero, which the participant renders without the sign';
  return undefined;
}

/** `numericBytesProblem` of a string's UTF-8 bytes. */
export function numericProblem(s: string): string | undefined {
  const b = Buffer.from(s, 'utf8');
  return numericBytesProblem(b, 0, b.length);
}

const NOT_NUMERIC =
  'is not a canonical Daml numeric (expected -?digits.digits, no leading zeros, no exponent)';

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/**
 * Two ASCII bytes `(a << 8) | b` of lowercase hex to the byte they denote, -1
 * for anything else: contract ids are checked and decoded a pair at a time.
 */
export const HEX_PAIRS: Int16Array = (() => {
  const t = new Int16Array(65536).fill(-1);
  const digit = (c: number): number =>
    c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;
  for (let a = 0; a < 256; a++)
    for (let b = 0; b < 256; b++)
      if (digit(a) >= 0 && digit(b) >= 0) t[(a << 8) | b] = (digit(a) << 4) | digit(b);
  return t;
})();

/** Contract ids: lowercase, even-length hex with a known version prefix (checked on their UTF-8 bytes). */
export function contractIdBytesProblem(b: Uint8Array, start: number, end: number): string | undefined {
  const n = end - start;
  if (n === 0 || (n & 1) !== 0) return NOT_HEX;
  const t = HEX_PAIRS;
  let bad = 0;
  for (let i = start; i < end; i += 2) bad |= t[(b[i]! << 8) | b[i + 1]!]!;
  if (bad < 0) return NOT_HEX;
  const bytes = n / 2;
  const v0 = b[start]!;
  const v1 = b[start + 1]!;
  if (v0 === 0x30 && v1 === 0x30) {
    // V1: 0x00 ‖ 32-byte discriminator ‖ suffix of at most 94 bytes
    if (bytes < 33 || bytes > 33 + 94) return `is a V1 contract id of ${bytes} bytes (expected 33 to 127)`;
    return undefined;
  }
  if (v0 === 0x30 && v1 === 0x31) {
    // V2: 0x01 ‖ 12-byte local part (5-byte time prefix, 7-byte discriminator) ‖ suffix of at most 33 bytes
    if (bytes < 13 || bytes > 13 + 33) return `is a V2 contract id of ${bytes} bytes (expected 13 to 46)`;
    return undefined;
  }
  return `has unknown contract-id version prefix 0x${String.fromCharCode(v0, v1)}`;
}

const NOT_HEX = 'is not lowercase even-length hex';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function uuidProblem(s: string): string | undefined {
  return UUID.test(s) ? undefined : 'is not a canonical lowercase UUID (8-4-4-4-12 hex digits)';
}

const PARTY = /^[A-Za-z0-9:\-_ ]{1,255}$/;

/** Daml party ids: 1–255 characters from letters, digits, space, `:`, `-`, `_`. */
export function partyProblem(s: string): string | undefined {
  return PARTY.test(s) ? undefined : 'is not a valid Daml party id (1-255 of A-Z a-z 0-9 space : - _)';
}

/** Node ids are decimal int32 without sign or leading zeros (the participant parses them as Int). */
export function nodeIdProblem(s: string): string | undefined {
  if (!/^(?:0|[1-9][0-9]{0,9})$/.test(s)) return 'is not a canonical non-negative decimal integer';
  if (Number(s) > 0x7fffffff) return 'does not fit in int32';
  return undefined;
}

/** Daml-LF caps a dotted name (segments and dots together) at this many characters. */
export const MAX_DOTTED_NAME_LENGTH = 1000;
/** Daml-LF caps package ids at this many characters. */
export const MAX_PACKAGE_ID_LENGTH = 64;
/** Daml-LF caps package names at this many characters. */
export const MAX_PACKAGE_NAME_LENGTH = 255;

const NAME_SEGMENT = /^[A-Za-z$_][A-Za-z0-9$_]*$/;

/**
 * Dotted Daml-LF names (module and entity names): 1–1000 characters, segments
 * separated by dots, each segment a Daml-LF `Name` (`[A-Za-z$_][A-Za-z0-9$_]*`).
 * The participant parses them so and refuses anything else.
 */
export function dottedNameProblem(s: string): string | undefined {
  if (s.length > MAX_DOTTED_NAME_LENGTH)
    return `has ${s.length} characters, above the Daml-LF limit of ${MAX_DOTTED_NAME_LENGTH}`;
  if (s === '' || s.startsWith('.') || s.endsWith('.') || s.includes('..'))
    return 'has an empty dotted segment';
  for (const seg of s.split('.'))
    if (!NAME_SEGMENT.test(seg))
      return `has a segment that is not a Daml-LF name ([A-Za-z$_] then [A-Za-z0-9$_]): ${JSON.stringify(seg.slice(0, 40))}`;
  return undefined;
}

const PACKAGE_ID = /^[A-Za-z0-9\-_ ]+$/;

/** Daml-LF package ids: 1–64 characters from letters, digits, `-`, `_` and space (in practice 64 lowercase hex). */
export function packageIdProblem(s: string): string | undefined {
  if (s.length > MAX_PACKAGE_ID_LENGTH)
    return `has ${s.length} characters, above the Daml-LF limit of ${MAX_PACKAGE_ID_LENGTH}`;
  if (!PACKAGE_ID.test(s)) return 'is not a Daml-LF package id (1-64 of A-Z a-z 0-9 - _ space)';
  return undefined;
}

const PACKAGE_NAME = /^[A-Za-z0-9\-_]+$/;

/** Daml-LF package names: 1–255 characters from letters, digits, `-` and `_`. */
export function packageNameProblem(s: string): string | undefined {
  if (s.length > MAX_PACKAGE_NAME_LENGTH)
    return `has ${s.length} characters, above the Daml-LF limit of ${MAX_PACKAGE_NAME_LENGTH}`;
  if (!PACKAGE_NAME.test(s)) return 'is not a Daml-LF package name (1-255 of A-Z a-z 0-9 - _)';
  return undefined;
}

/** Bytes of the package-name alphabet: A-Z a-z 0-9 - _ (1 where allowed). */
const PACKAGE_NAME_BYTES: Uint8Array = (() => {
  const t = new Uint8Array(256);
  for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_') t[c.charCodeAt(0)] = 1;
  return t;
})();

/**
 * Whether the bytes [start, end) are a package name `packageNameProblem` accepts, checked on the
 * bytes (the alphabet is ASCII, so characters and bytes are one): 1–255 bytes of that alphabet.
 * False says only that the text must be decoded and checked by `packageNameProblem`.
 */
export function packageNameBytesOk(b: Uint8Array, start: number, end: number): boolean {
  const n = end - start;
  if (n === 0 || n > MAX_PACKAGE_NAME_LENGTH) return false;
  for (let i = start; i < end; i++) if (PACKAGE_NAME_BYTES[b[i]!] === 0) return false;
  return true;
}

/**
 * Compares strings by Unicode code point, which is the order of their UTF-8
 * bytes (the participant's order for text-map keys). JS `<` compares UTF-16
 * code units, which differs for characters above U+FFFF.
 */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (D800–DFFF) encode code points above FFFF: they sort after E000–FFFF.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** Compares two byte ranges lexicographically (for UTF-8, the order of code points). */
export function compareBytes(b: Uint8Array, s1: number, e1: number, s2: number, e2: number): number {
  const n1 = e1 - s1;
  const n2 = e2 - s2;
  const n = n1 < n2 ? n1 : n2;
  for (let i = 0; i < n; i++) {
    const d = b[s1 + i]! - b[s2 + i]!;
    if (d !== 0) return d;
  }
  return n1 - n2;
}

/**
 * Strict protobuf wire reader. Knows nothing about messages: it reads tags,
 * varints, fixed-width numbers and length-delimited slices, and refuses
 * (with the field path) anything a canonical encoder would not produce:
 * truncation, overlong varints, lengths past the end, group wire types,
 * invalid UTF-8. The decoder built on it owns field numbers and meaning.
 */
import { isUtf8 } from 'node:buffer';
import type { FieldPath } from './errors.js';

export const WT_VARINT = 0;
export const WT_I64 = 1;
export const WT_LEN = 2;
export const WT_I32 = 5;

const WT_NAMES = ['varint', 'i64', 'len', 'group-start', 'group-end', 'i32', '6', '7'];

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export class WireReader {
  pos = 0;
  /** Plain Uint8Array view (subarrays of a Buffer are much slower to create). */
  readonly buf: Uint8Array;
  /** The same bytes as a Buffer, for native slicing. */
  readonly nodeBuf: Buffer;
  /** And as a DataView, for word-at-a-time comparisons. */
  readonly view32: DataView;
  constructor(
    bytes: Uint8Array,
    readonly path: FieldPath,
  ) {
    this.buf = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.nodeBuf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.view32 = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Reads the next tag; `end` bounds the enclosing message. */
  tag(end: number): number {
    const start = this.pos;
    const t = this.varint32(end, 'tag');
    const field = t >>> 3;
    const wt = t & 7;
    if (field === 0) this.path.fail('malformed', `field number 0 at byte ${start}`);
    if (wt === 3 || wt === 4 || wt > 5)
      this.path.fail('malformed', `unsupported wire type ${WT_NAMES[wt]} at byte ${start}`);
    return t;
  }

  /** A varint that must fit in 32 unsigned bits (tags, lengths, uint32). */
  varint32(end: number, what: string, field?: string, index?: number): number {
    const b = this.buf;
    const p0 = this.pos;
    if (p0 + 1 < end) {
      // Fast paths: one and two bytes cover almost every tag and length.
      const b0 = b[p0]!;
      if (b0 < 0x80) {
        this.pos = p0 + 1;
        return b0;
      }
      const b1 = b[p0 + 1]!;
      if (b1 < 0x80 && b1 !== 0) {
        this.pos = p0 + 2;
        return (b0 & 0x7f) | (b1 << 7);
      }
    }
    let result = 0;
    let shift = 0;
    const start = this.pos;
    for (;;) {
      if (this.pos >= end)
        this.path.fail('truncated', `input ends inside a varint (${what}) at byte ${start}`, field, index);
      const byte = b[this.pos++]!;
      if (shift === 28) {
        if (byte > 0x0f)
          this.path.fail('malformed', `${what} does not fit in 32 bits at byte ${start}`, field, index);
        result += byte * 0x10000000;
        if (byte === 0 && this.pos - start > 1)
          this.path.fail('malformed', `overlong varint at byte ${start}`, field, index);
        return result;
      }
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) {
        if (byte === 0 && this.pos - start > 1)
          this.path.fail('malformed', `overlong varint at byte ${start}`, field, index);
        return result;
      }
      shift += 7;
    }
  }

  /** A full 64-bit varint as an unsigned bigint. */
  varint64(end: number, what: string): bigint {
    const lo = this.varint64Words(end, what);
    const hi = this.hi;
    return hi === 0 ? BigInt(lo) : (BigInt(hi) << 32n) | BigInt(lo);
  }

  /** The high 32 bits (unsigned) of the last `varint64Words`. */
  hi = 0;

  /** A full 64-bit varint without a bigint: returns its low 32 bits (unsigned), the high ones go to `hi`. */
  varint64Words(end: number, what: string): number {
    const b = this.buf;
    const start = this.pos;
    let lo = 0;
    let hi = 0;
    for (let i = 0; ; i++) {
      if (this.pos >= end)
        this.path.fail('truncated', `input ends inside a varint (${what}) at byte ${start}`);
      const byte = b[this.pos++]!;
      if (i < 4) lo += (byte & 0x7f) * 2 ** (7 * i);
      else if (i === 4) {
        lo += (byte & 0x0f) * 2 ** 28;
        hi += (byte & 0x70) >>> 4;
      } else if (i < 9) hi += (byte & 0x7f) * 2 ** (7 * i - 32);
      else {
        if (byte > 1) this.path.fail('malformed', `${what} does not fit in 64 bits at byte ${start}`);
        hi += byte * 2 ** 31;
      }
      if (byte < 0x80) {
        if (byte === 0 && i > 0) this.path.fail('malformed', `overlong varint at byte ${start}`);
        this.hi = hi;
        return lo;
      }
    }
  }

  /** Checks that 8 bytes follow (a fixed64) and steps over them; returns where they start. */
  fixed64(end: number): number {
    if (this.pos + 8 > end) this.path.fail('truncated', `input ends inside a fixed64 at byte ${this.pos}`);
    const p = this.pos;
    this.pos = p + 8;
    return p;
  }

  /** Little-endian 8 bytes as a signed bigint (sfixed64). */
  sfixed64(end: number): bigint {
    return this.sfixed64At(this.fixed64(end));
  }

  /** The sfixed64 at `p` (already checked to be in bounds). */
  sfixed64At(p: number): bigint {
    const b = this.buf;
    const lo = (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
    const hi = b[p + 4]! | (b[p + 5]! << 8) | (b[p + 6]! << 16) | (b[p + 7]! << 24);
    return (BigInt(hi) << 32n) | BigInt(lo);
  }

  /** Reads a length prefix and returns the end offset of the slice that follows. */
  len(end: number, field?: string, index?: number): number {
    const start = this.pos;
    const n = this.varint32(end, 'length', field, index);
    const stop = this.pos + n;
    if (stop > end)
      this.path.fail(
        'truncated',
        `length ${n} at byte ${start} runs past the end of its message (${end - this.pos} left)`,
        field,
        index,
      );
    return stop;
  }

  /** A length-delimited byte string, copied. */
  bytes(end: number): Uint8Array {
    const stop = this.len(end);
    const out = this.buf.slice(this.pos, stop);
    this.pos = stop;
    return out;
  }

  /** A length-delimited byte string as a view of the input (no copy; for large unhashed payloads). */
  view(end: number): Uint8Array {
    const stop = this.len(end);
    const out = this.buf.subarray(this.pos, stop);
    this.pos = stop;
    return out;
  }

  /** A length-delimited UTF-8 string; `field`/`index` only name it in errors. */
  string(tag: number, end: number, field: string, index?: number): string {
    if ((tag & 7) !== WT_LEN) this.wrongType(tag, WT_LEN, field, index);
    const stop = this.len(end, field, index);
    const s = this.text(this.pos, stop, field, index);
    this.pos = stop;
    return s;
  }

  /**
   * A length-delimited field's bytes, not decoded: returns where they start and
   * leaves `pos` at their end (for checks and hashing straight on the wire bytes).
   */
  span(tag: number, end: number, field: string, index?: number): number {
    if ((tag & 7) !== WT_LEN) this.wrongType(tag, WT_LEN, field, index);
    const stop = this.len(end, field, index);
    const start = this.pos;
    this.pos = stop;
    return start;
  }

  /**
   * Whether the bytes [start, stop) are valid UTF-8 (a leading BOM included):
   * short ASCII runs checked here (cheaper than a native call), the rest natively.
   */
  isUtf8(start: number, stop: number): boolean {
    const b = this.buf;
    if (stop - start > 32) return isUtf8(b.subarray(start, stop));
    for (let i = start; i < stop; i++) if (b[i]! >= 0x80) return isUtf8(b.subarray(i, stop));
    return true;
  }

  /** The bytes [start, stop), already checked to be valid UTF-8, as a string. */
  utf8(start: number, stop: number): string {
    if (stop - start <= 12) {
      const b = this.buf;
      let s = '';
      for (let i = start; i < stop; i++) {
        const c = b[i]!;
        if (c >= 0x80) return this.nodeBuf.toString('utf8', start, stop);
        s += String.fromCharCode(c);
      }
      return s;
    }
    return this.nodeBuf.toString('utf8', start, stop);
  }

  /**
   * How many length-delimited fields numbered `field` the message [start, stop)
   * holds, by their tags and lengths alone (nothing decoded or checked). Exact for
   * a well-formed message; for a malformed one the number is meaningless, and the
   * decoding that follows refuses the message anyway.
   */
  countLen(start: number, stop: number, field: number): number {
    const b = this.buf;
    const want = (field << 3) | WT_LEN;
    let n = 0;
    let p = start;
    while (p < stop) {
      let t = b[p++]!;
      if (t >= 0x80) {
        t = skimVarint(b, p - 1, stop);
        p = skimEnd;
      }
      const wt = t & 7;
      if (wt === WT_LEN) {
        let l = b[p++]!;
        if (l >= 0x80) {
          l = skimVarint(b, p - 1, stop);
          p = skimEnd;
        }
        p += l;
        if (t === want) n++;
      } else if (wt === WT_VARINT) {
        while (p < stop && b[p++]! >= 0x80);
      } else if (wt === WT_I64) p += 8;
      else if (wt === WT_I32) p += 4;
      else return n;
    }
    return n;
  }

  /** The bytes [start, stop) as strictly decoded UTF-8. */
  text(start: number, stop: number, field: string, index?: number): string {
    const s = stop - start <= 12 ? decodeUtf8(this.buf, start, stop) : this.longUtf8(start, stop);
    if (s === null)
      this.path.fail('invalid_utf8', `string at byte ${start} is not valid UTF-8`, field, index);
    return s;
  }

  /**
   * Node's decoder replaces every malformed sequence with U+FFFD (and keeps a
   * leading BOM), so output without U+FFFD proves the bytes were valid. Only
   * output containing U+FFFD goes through the strict decoder, which tells a
   * genuine U+FFFD from a replaced error.
   */
  private longUtf8(start: number, end: number): string | null {
    const s = this.nodeBuf.toString('utf8', start, end);
    return s.includes('\uFFFD') ? slowUtf8(this.buf, start, end) : s;
  }

  /** Refuses the bytes at `start` as invalid UTF-8, in the words `text` uses. */
  failUtf8(start: number, field: string, index?: number): never {
    this.path.fail('invalid_utf8', `string at byte ${start} is not valid UTF-8`, field, index);
  }

  /** Asserts the wire type of a known field. */
  expect(tag: number, wt: number, field: string, index?: number): void {
    if ((tag & 7) !== wt) this.wrongType(tag, wt, field, index);
  }

  private wrongType(tag: number, wt: number, field: string, index?: number): never {
    this.path.fail(
      'malformed',
      `wire type ${WT_NAMES[tag & 7]} where ${WT_NAMES[wt]} was expected`,
      field,
      index,
    );
  }
}

/** Where the last `skimVarint` stopped. */
let skimEnd = 0;

/** A varint at `p` read without checks (at most 5 bytes, not past `stop`); its end goes to `skimEnd`. */
function skimVarint(b: Uint8Array, p: number, stop: number): number {
  let v = 0;
  let mul = 1;
  for (let i = 0; i < 5 && p < stop; i++) {
    const c = b[p++]!;
    v += (c & 0x7f) * mul;
    mul *= 128;
    if (c < 0x80) break;
  }
  skimEnd = p;
  return v;
}

/** Fatal UTF-8 decoding (keeps a leading BOM: it is part of the hashed bytes). */
export function decodeUtf8(buf: Uint8Array, start: number, end: number): string | null {
  if (end - start <= 12) {
    let s = '';
    for (let i = start; i < end; i++) {
      const c = buf[i]!;
      if (c >= 0x80) return slowUtf8(buf, start, end);
      s += String.fromCharCode(c);
    }
    return s;
  }
  return slowUtf8(buf, start, end);
}

function slowUtf8(buf: Uint8Array, start: number, end: number): string | null {
  try {
    return utf8.decode(buf.subarray(start, end));
  } catch {
    return null;
  }
}

/**
 * A bounded cache from exact byte strings to decoded values, looked up without
 * allocating: a numeric hash of a few sampled words picks a pair of slots of a
 * fixed table (two-way set-associative), and a word-by-word compare confirms
 * the bytes. Used for values that repeat across a transaction and across
 * transactions (identifiers, party ids). The table's size bounds the memory; a
 * new entry displaces the older of its pair, so input crafted to collide
 * costs misses (the value is then decoded and checked again), never a scan.
 */
export class ByteCache<T> {
  private readonly slots: (CacheEntry<T> | undefined)[];
  private readonly mask: number;
  /** The entry found last: values repeat in runs (the record ids of a list), so it is tried first. */
  private last: CacheEntry<T> | undefined;

  /** `limit`: at most this many entries are kept (rounded down to a power of two, at least 2). */
  constructor(limit: number) {
    let size = 2;
    while (size * 2 <= limit) size *= 2;
    this.slots = new Array<CacheEntry<T> | undefined>(size).fill(undefined);
    this.mask = (size - 1) & ~1;
  }

  get(r: WireReader, start: number, end: number): T | undefined {
    const n = end - start;
    const last = this.last;
    if (last !== undefined && last.bytes.length === n && sameBytes(last, r, start, end)) return last.value;
    const i = sampleHash(r.view32, start, end) & this.mask;
    const a = this.slots[i];
    if (a !== undefined && a.bytes.length === n && sameBytes(a, r, start, end)) {
      this.last = a;
      return a.value;
    }
    const b = this.slots[i + 1];
    if (b !== undefined && b.bytes.length === n && sameBytes(b, r, start, end)) {
      this.last = b;
      return b.value;
    }
    return undefined;
  }

  set(r: WireReader, start: number, end: number, value: T): void {
    const i = sampleHash(r.view32, start, end) & this.mask;
    const bytes = r.buf.slice(start, end);
    // The newest entry first; the one it displaces takes the second slot (the second is dropped).
    this.slots[i + 1] = this.slots[i];
    this.slots[i] = { bytes, words: new DataView(bytes.buffer), value };
  }
}

interface CacheEntry<T> {
  readonly bytes: Uint8Array;
  readonly words: DataView;
  readonly value: T;
}

/** Whether an entry's bytes are those of [start, end) (same length already checked). */
function sameBytes(
  e: { bytes: Uint8Array; words: DataView },
  r: WireReader,
  start: number,
  end: number,
): boolean {
  // Four bytes at a time through DataViews (little-endian: no byte swaps): faster than
  // Buffer#compare for ~100-byte keys. The last word first: keys that differ often share a long
  // prefix (identifiers of one package).
  const n = end - start;
  const w = e.words;
  const v = r.view32;
  if (n >= 4 && w.getInt32(n - 4, true) !== v.getInt32(end - 4, true)) return false;
  let i = 0;
  for (; i + 4 <= n; i += 4) if (w.getInt32(i, true) !== v.getInt32(start + i, true)) return false;
  const b = r.buf;
  for (; i < n; i++) if (e.bytes[i] !== b[start + i]) return false;
  return true;
}

/** Mixes the length and five sampled words (a slot picker, not a checksum: hits are confirmed byte by byte). */
function sampleHash(v: DataView, start: number, end: number): number {
  const n = end - start;
  let h = Math.imul(n, 0x9e3779b1);
  if (n >= 4) {
    h = Math.imul(h ^ v.getInt32(start, true), 0x85ebca6b);
    h = Math.imul(h ^ v.getInt32(start + (n >> 2), true), 0xc2b2ae35);
    h = Math.imul(h ^ v.getInt32(start + (n >> 1), true), 0x85ebca6b);
    h = Math.imul(h ^ v.getInt32(end - 4 - (n >> 3), true), 0xc2b2ae35);
    h = Math.imul(h ^ v.getInt32(end - 4, true), 0x85ebca6b);
  } else for (let i = start; i < end; i++) h = Math.imul(h ^ v.getUint8(i), 0x85ebca6b);
  return (h ^ (h >>> 15)) | 0;
}

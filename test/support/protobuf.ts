/**
 * A tiny raw protobuf writer and splicer for hand-made (often malformed) test
 * inputs. It knows nothing about PreparedTransaction: callers address nested
 * messages by field number and occurrence, edit the bytes of the innermost
 * message, and the length prefixes of every enclosing message are rewritten.
 * Test-only code; independent of src/hashing/wire.ts and encode.ts.
 */

export const WT_VARINT = 0;
export const WT_I64 = 1;
export const WT_LEN = 2;
export const WT_SGROUP = 3;
export const WT_EGROUP = 4;
export const WT_I32 = 5;

export type Bytes = Uint8Array | readonly number[];

export function concat(...parts: Bytes[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Canonical (shortest) unsigned LEB128 varint; negative numbers as 64-bit two's complement. */
export function varint(v: number | bigint): Uint8Array {
  let x = BigInt.asUintN(64, BigInt(v));
  const out: number[] = [];
  while (x >= 0x80n) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return Uint8Array.from(out);
}

export function tag(field: number, wireType: number): Uint8Array {
  return varint(BigInt(field) * 8n + BigInt(wireType));
}

export function lenField(field: number, payload: Bytes): Uint8Array {
  return concat(tag(field, WT_LEN), varint(payload.length), payload);
}

export function strField(field: number, s: string): Uint8Array {
  return lenField(field, new TextEncoder().encode(s));
}

export function varintField(field: number, v: number | bigint): Uint8Array {
  return concat(tag(field, WT_VARINT), varint(v));
}

/** One field as found in a message: where its tag starts, its payload and its end. */
export interface RawField {
  field: number;
  wireType: number;
  start: number;
  payloadStart: number;
  end: number;
}

function readVarint(buf: Uint8Array, pos: number): [bigint, number] {
  let v = 0n;
  let shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error('test helper: truncated varint');
    const b = buf[pos++]!;
    v |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return [v, pos];
    shift += 7n;
  }
}

/** Splits a well-formed message into its fields (test helper: throws plain Errors). */
export function parseFields(buf: Uint8Array): RawField[] {
  const out: RawField[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const start = pos;
    const [t, p1] = readVarint(buf, pos);
    const field = Number(t >> 3n);
    const wireType = Number(t & 7n);
    let payloadStart = p1;
    let end: number;
    switch (wireType) {
      case WT_VARINT:
        end = readVarint(buf, p1)[1];
        break;
      case WT_I64:
        end = p1 + 8;
        break;
      case WT_I32:
        end = p1 + 4;
        break;
      case WT_LEN: {
        const [n, p2] = readVarint(buf, p1);
        payloadStart = p2;
        end = p2 + Number(n);
        break;
      }
      default:
        throw new Error(`test helper: unsupported wire type ${wireType}`);
    }
    if (end > buf.length) throw new Error('test helper: field runs past the end');
    out.push({ field, wireType, start, payloadStart, end });
    pos = end;
  }
  return out;
}

/** `[field number, occurrence]`: the occurrence-th field with that number (0-based). */
export type Step = readonly [field: number, occurrence: number];

function find(buf: Uint8Array, step: Step): RawField {
  const hits = parseFields(buf).filter((f) => f.field === step[0]);
  const f = hits[step[1]];
  if (!f) throw new Error(`test helper: no occurrence ${step[1]} of field ${step[0]}`);
  return f;
}

/**
 * Applies `edit` to the bytes of the message reached by `path` (each step a
 * length-delimited field) and re-encodes every enclosing length prefix.
 */
export function editMessage(
  buf: Uint8Array,
  path: readonly Step[],
  edit: (inner: Uint8Array) => Uint8Array,
): Uint8Array {
  if (path.length === 0) return edit(buf);
  const f = find(buf, path[0]!);
  if (f.wireType !== WT_LEN) throw new Error(`test helper: field ${f.field} is not length-delimited`);
  const inner = editMessage(buf.subarray(f.payloadStart, f.end), path.slice(1), edit);
  return concat(
    buf.subarray(0, f.start),
    tag(f.field, WT_LEN),
    varint(inner.length),
    inner,
    buf.subarray(f.end),
  );
}

/** Appends raw bytes at the end of the message reached by `path`. */
export function appendTo(buf: Uint8Array, path: readonly Step[], extra: Bytes): Uint8Array {
  return editMessage(buf, path, (inner) => concat(inner, extra));
}

/** Removes one field (tag and payload) from the message reached by `path`. */
export function removeField(buf: Uint8Array, path: readonly Step[], step: Step): Uint8Array {
  return editMessage(buf, path, (inner) => {
    const f = find(inner, step);
    return concat(inner.subarray(0, f.start), inner.subarray(f.end));
  });
}

/** Replaces one field (tag and payload) of the message reached by `path` by raw bytes. */
export function replaceField(buf: Uint8Array, path: readonly Step[], step: Step, bytes: Bytes): Uint8Array {
  return editMessage(buf, path, (inner) => {
    const f = find(inner, step);
    return concat(inner.subarray(0, f.start), bytes, inner.subarray(f.end));
  });
}

/** The payload bytes of the length-delimited field reached by `path`. */
export function payloadAt(buf: Uint8Array, path: readonly Step[]): Uint8Array {
  let cur = buf;
  for (const step of path) {
    const f = find(cur, step);
    cur = cur.subarray(f.payloadStart, f.end);
  }
  return cur;
}

/**
 * Replaces the only occurrence of `from` by `to` (same length, so no length
 * prefix changes). Throws unless `from` occurs exactly once.
 */
export function replaceOnce(buf: Uint8Array, from: Bytes | string, to: Bytes | string): Uint8Array {
  const a = typeof from === 'string' ? new TextEncoder().encode(from) : Uint8Array.from(from);
  const b = typeof to === 'string' ? new TextEncoder().encode(to) : Uint8Array.from(to);
  if (a.length !== b.length) throw new Error('test helper: replacement must keep the length');
  const hits: number[] = [];
  outer: for (let i = 0; i + a.length <= buf.length; i++) {
    for (let j = 0; j < a.length; j++) if (buf[i + j] !== a[j]) continue outer;
    hits.push(i);
  }
  if (hits.length !== 1) throw new Error(`test helper: pattern occurs ${hits.length} times, expected once`);
  const out = Uint8Array.from(buf);
  out.set(b, hits[0]!);
  return out;
}

/**
 * Canonical protobuf wire writer: the counterpart of the strict reader in
 * wire.ts. Callers write fields in field-number order; proto3 defaults are
 * omitted unless `always` is set (presence fields, oneof members). Used by the
 * prepared-transaction encoder and the topology-transaction codec.
 *
 * One growable buffer for a whole message tree: a nested message is written
 * in place after a one-byte length slot, which is widened (the body moved up)
 * only when the body is 128 bytes or longer. Varints of non-negative integers
 * up to 2^53 are written with number arithmetic; BigInt only beyond that and
 * for negative values (ten bytes, two's complement, as protobuf wants).
 */
const enc = new TextEncoder();

/** Bytes of the varint encoding of a non-negative integer below 2^35. */
function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

/** Growable byte writer with nested length-delimited messages. */
export class Writer {
  private buf = new Uint8Array(1024);
  private view = new DataView(this.buf.buffer);
  private len = 0;

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  varint(v: number | bigint): void {
    if (typeof v === 'number' && v >= 0 && v <= Number.MAX_SAFE_INTEGER && Number.isInteger(v)) {
      this.ensure(10);
      const b = this.buf;
      let p = this.len;
      if (v <= 0xffffffff) {
        let x = v >>> 0;
        while (x >= 0x80) {
          b[p++] = (x & 0x7f) | 0x80;
          x >>>= 7;
        }
        b[p++] = x;
      } else {
        let x = v;
        while (x >= 0x80) {
          b[p++] = (x % 0x80) | 0x80;
          x = Math.floor(x / 0x80);
        }
        b[p++] = x;
      }
      this.len = p;
      return;
    }
    let x = BigInt.asUintN(64, BigInt(v));
    this.ensure(10);
    while (x >= 0x80n) {
      this.buf[this.len++] = Number(x & 0x7fn) | 0x80;
      x >>= 7n;
    }
    this.buf[this.len++] = Number(x);
  }

  tag(field: number, wt: number): void {
    this.varint(field * 8 + wt);
  }

  bytesField(field: number, b: Uint8Array): void {
    this.tag(field, 2);
    this.varint(b.length);
    this.ensure(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  stringField(field: number, s: string, always = false): void {
    if (s === '' && !always) return;
    this.tag(field, 2);
    const n = s.length;
    // At most 3 UTF-8 bytes per UTF-16 unit; one byte of length slot, widened by closeLength if needed.
    this.ensure(1 + 3 * n);
    const at = this.len;
    const b = this.buf;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      b[at + 1 + i] = c;
    }
    if (i === n) this.len = at + 1 + n;
    else {
      // Not ASCII: the encoder's own UTF-8 (lone surrogates become U+FFFD, as with encode()).
      const { written } = enc.encodeInto(s, b.subarray(at + 1));
      this.len = at + 1 + written;
    }
    this.closeLength(at);
  }

  varintField(field: number, v: number | bigint, always = false): void {
    if (!always && (v === 0 || v === 0n)) return;
    this.tag(field, 0);
    this.varint(v);
  }

  boolField(field: number, v: boolean, always = false): void {
    if (!v && !always) return;
    this.tag(field, 0);
    this.varint(v ? 1 : 0);
  }

  sfixed64Field(field: number, v: bigint): void {
    this.tag(field, 1);
    this.ensure(8);
    this.view.setBigInt64(this.len, v, true);
    this.len += 8;
  }

  /** A nested message: `body` writes its fields into this same writer, after a length slot. */
  message(field: number, body: (w: Writer) => void): void {
    this.tag(field, 2);
    this.ensure(1);
    const at = this.len++;
    body(this);
    this.closeLength(at);
  }

  /** Writes the length of the bytes after the one-byte slot at `at`, widening the slot if one byte is short. */
  private closeLength(at: number): void {
    const n = this.len - at - 1;
    if (n < 0x80) {
      this.buf[at] = n;
      return;
    }
    const extra = varintSize(n) - 1;
    this.ensure(extra);
    const b = this.buf;
    b.copyWithin(at + 1 + extra, at + 1, this.len);
    this.len += extra;
    let p = at;
    let x = n;
    while (x >= 0x80) {
      b[p++] = (x & 0x7f) | 0x80;
      x >>>= 7;
    }
    b[p] = x;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

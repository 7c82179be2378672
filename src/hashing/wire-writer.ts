/**
 * Canonical protobuf wire writer: the counterpart of the strict reader in
 * wire.ts. Callers write fields in field-number order; proto3 defaults are
 * omitted unless `always` is set (presence fields, oneof members). Used by the
 * prepared-transaction encoder and the topology-transaction codec.
 */
const enc = new TextEncoder();

/** Growable byte writer with nested length-delimited messages. */
export class Writer {
  private buf = new Uint8Array(1024);
  private len = 0;

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  varint(v: number | bigint): void {
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
    this.bytesField(field, enc.encode(s));
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
    new DataView(this.buf.buffer).setBigInt64(this.len, v, true);
    this.len += 8;
  }

  message(field: number, body: (w: Writer) => void): void {
    const inner = new Writer();
    body(inner);
    this.bytesField(field, inner.finish());
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

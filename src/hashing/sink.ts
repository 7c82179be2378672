/**
 * Streaming SHA-256 over Canton's hash encoding primitives (big-endian,
 * 4-byte length prefixes, `00`/`01` optional markers). Bytes are gathered in a
 * reusable 64 KiB buffer and handed to the hash only when it fills, so a 20 MB
 * text costs no extra copy of the whole encoding, and small node encodings are
 * hashed in one call. One sink computes one digest at a time.
 *
 * `capture` records the bytes a piece of encoding produces (for caching it)
 * whatever happens meanwhile: what is handed to the hash while recording
 * (a flush of the buffer, a large `raw` that bypasses it) is recorded too.
 */
import { createHash, type Hash, hash as oneShot } from 'node:crypto';
import { HEX_PAIRS } from './canonical.js';
import { keepAlive } from './keep-alive.js';

const CAP = 64 * 1024;
/** Characters of a long string encoded at a time: at most 3 UTF-8 bytes each, so a piece fits the buffer. */
const STRING_PIECE = CAP / 4;

export class Sha256Sink {
  private readonly nodeBuf = Buffer.allocUnsafe(CAP);
  /** Plain view of `nodeBuf`: its subarrays are cheap to create. */
  private readonly buf = new Uint8Array(this.nodeBuf.buffer, this.nodeBuf.byteOffset, CAP);
  private len = 0;
  private h: Hash | undefined;
  /** While `capture` runs: the recorded bytes already handed to the hash, and where the rest starts in `buf`. */
  private rec: Uint8Array[] | undefined;
  private recFrom = 0;

  begin(): this {
    this.len = 0;
    this.h = undefined;
    this.rec = undefined;
    return this;
  }

  /**
   * Hands over everything written since `begin()`, to be continued later with
   * `resume`, and leaves the sink free for another hash: the bytes themselves
   * while they all fit in the buffer (a copy costs less than a SHA-256 object),
   * else the SHA-256 state.
   */
  detach(): Hash | Uint8Array {
    let out: Hash | Uint8Array;
    if (this.h === undefined) out = this.buf.slice(0, this.len);
    else {
      out = this.h;
      out.update(this.buf.subarray(0, this.len));
    }
    this.h = undefined;
    this.len = 0;
    this.rec = undefined;
    return out;
  }

  /** Like `begin()`, but continuing what `detach` handed over. */
  resume(x: Hash | Uint8Array): this {
    this.rec = undefined;
    if (x instanceof Uint8Array) {
      this.h = undefined;
      this.buf.set(x, 0);
      this.len = x.length;
    } else {
      this.h = x;
      this.len = 0;
    }
    return this;
  }

  /**
   * Finishes the digest and returns its 32 bytes. The digest comes from node:crypto as a 'binary' (latin1)
   * string (one character per byte), copied into a small typed array: a string is made on the JS
   * heap, where a Buffer result costs a native backing store per digest (about 0.5 µs more).
   */
  digest(): Uint8Array {
    let out: string;
    if (this.h === undefined) out = oneShot('sha256', this.buf.subarray(0, this.len), 'binary');
    else {
      this.h.update(this.buf.subarray(0, this.len));
      out = this.h.digest('binary');
      keepAlive('hash', this.h); // finished, it holds no data (keep-alive.ts says why)
      this.h = undefined;
    }
    this.len = 0;
    const d = new Uint8Array(32);
    for (let i = 0; i < 32; i++) d[i] = out.charCodeAt(i);
    return d;
  }

  private flush(): void {
    if (this.rec !== undefined) {
      if (this.len > this.recFrom) this.rec.push(this.buf.slice(this.recFrom, this.len));
      this.recFrom = 0;
    }
    this.h ??= createHash('sha256');
    this.h.update(this.buf.subarray(0, this.len));
    this.len = 0;
  }

  private room(n: number): void {
    if (this.len + n > CAP) this.flush();
  }

  u8(b: number): void {
    if (this.len === CAP) this.flush();
    this.buf[this.len++] = b;
  }

  bool(v: boolean): void {
    this.u8(v ? 1 : 0);
  }

  /** 4-byte big-endian; unsigned values keep their raw 32 bits. */
  i32(n: number): void {
    if (this.len + 4 > CAP) this.flush();
    const b = this.buf;
    const p = this.len;
    b[p] = n >>> 24;
    b[p + 1] = n >>> 16;
    b[p + 2] = n >>> 8;
    b[p + 3] = n;
    this.len = p + 4;
  }

  /** 8-byte big-endian two's complement (unsigned values keep their raw 64 bits). */
  i64(n: bigint): void {
    this.room(8);
    this.nodeBuf.writeBigUInt64BE(BigInt.asUintN(64, n), this.len);
    this.len += 8;
  }

  /** The 8 little-endian bytes at `at` of `src`, written big-endian (a wire sfixed64 as `i64` writes it). */
  fixed64BE(src: Uint8Array, at: number): void {
    if (this.len + 8 > CAP) this.flush();
    const b = this.buf;
    const p = this.len;
    for (let i = 0; i < 8; i++) b[p + i] = src[at + 7 - i]!;
    this.len = p + 8;
  }

  /** Bytes as they are, no length prefix (fixed-size hashes and seeds). */
  raw(b: Uint8Array): void {
    if (b.length > CAP / 2) {
      this.flush();
      this.rec?.push(b.slice());
      this.h!.update(b);
      return;
    }
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  /** 4-byte length ‖ bytes. */
  bytes(b: Uint8Array): void {
    this.i32(b.length);
    this.raw(b);
  }

  /** 4-byte UTF-8 byte length ‖ UTF-8 bytes. */
  string(s: string): void {
    const n = s.length;
    if (n <= 24) {
      // Short strings: copy ASCII by hand (cheaper than a native call); anything else falls through.
      this.room(4 + n * 3);
      const b = this.buf;
      const start = this.len;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[start + 4 + i] = c;
      }
      if (i === n) {
        b[start] = 0;
        b[start + 1] = 0;
        b[start + 2] = 0;
        b[start + 3] = n;
        this.len = start + 4 + n;
        return;
      }
    }
    if (n <= 4096) {
      this.room(4 + n * 3);
      const start = this.len;
      const b = this.buf;
      const w = this.nodeBuf.write(s, start + 4, 'utf8');
      b[start] = w >>> 24;
      b[start + 1] = w >>> 16;
      b[start + 2] = w >>> 8;
      b[start + 3] = w;
      this.len = start + 4 + w;
      return;
    }
    // Longer text is encoded piece by piece into the buffer: no UTF-8 copy of all of it (a 20 MB
    // text would otherwise cost 20 MB more). A piece never ends between the halves of a surrogate pair.
    this.i32(Buffer.byteLength(s, 'utf8'));
    for (let i = 0; i < n; ) {
      let j = Math.min(n, i + STRING_PIECE);
      if (j < n) {
        const c = s.charCodeAt(j - 1);
        if (c >= 0xd800 && c <= 0xdbff) j--;
      }
      this.room(3 * (j - i));
      this.len += this.nodeBuf.write(s.slice(i, j), this.len, 'utf8');
      i = j;
    }
  }

  /** 4-byte length ‖ the bytes [start, stop) of `src` (UTF-8 already checked: text straight from the wire). */
  utf8(src: Uint8Array, start: number, stop: number): void {
    const n = stop - start;
    if (n > CAP / 2) {
      this.i32(n);
      this.raw(src.subarray(start, stop));
      return;
    }
    if (this.len + 4 + n > CAP) this.flush();
    const b = this.buf;
    const p = this.len;
    b[p] = n >>> 24;
    b[p + 1] = n >>> 16;
    b[p + 2] = n >>> 8;
    b[p + 3] = n;
    if (n <= 48) for (let i = 0; i < n; i++) b[p + 4 + i] = src[start + i]!;
    else b.set(src.subarray(start, stop), p + 4);
    this.len = p + 4 + n;
  }

  /** Lowercase hex digits [start, stop) of `src` (checked: even count) hashed as the bytes they denote, length-prefixed. */
  hexBytes(src: Uint8Array, start: number, stop: number): void {
    const n = (stop - start) >>> 1;
    if (4 + n > CAP) {
      this.bytes(Buffer.from(Buffer.from(src.subarray(start, stop)).toString('latin1'), 'hex'));
      return;
    }
    if (this.len + 4 + n > CAP) this.flush();
    const b = this.buf;
    let p = this.len;
    b[p] = n >>> 24;
    b[p + 1] = n >>> 16;
    b[p + 2] = n >>> 8;
    b[p + 3] = n;
    p += 4;
    const t = HEX_PAIRS;
    for (let i = start; i < stop; i += 2) b[p++] = t[(src[i]! << 8) | src[i + 1]!]!;
    this.len = p;
  }

  /**
   * Runs `write` (which hashes as usual) and returns a copy of exactly the
   * bytes it produced, for caching an encoding. `expected` is the size
   * `write` usually stays within: room for it is made first, so that the
   * copy is usually one slice of the buffer; a larger encoding is recorded
   * piecewise across flushes. Captures do not nest.
   */
  capture(expected: number, write: () => void): Uint8Array {
    if (this.rec !== undefined) throw new Error('Sha256Sink.capture does not nest');
    if (expected <= CAP) this.room(expected);
    const rec: Uint8Array[] = [];
    this.rec = rec;
    this.recFrom = this.len;
    try {
      write();
    } finally {
      this.rec = undefined;
    }
    const tail = this.buf.slice(this.recFrom, this.len);
    if (rec.length === 0) return tail;
    rec.push(tail);
    let n = 0;
    for (const r of rec) n += r.length;
    const out = new Uint8Array(n);
    n = 0;
    for (const r of rec) {
      out.set(r, n);
      n += r.length;
    }
    return out;
  }

  /** Hex text hashed as the bytes it denotes (contract ids), length-prefixed. */
  hex(s: string): void {
    const n = s.length >>> 1;
    if (n > 1024) {
      this.bytes(Buffer.from(s, 'hex'));
      return;
    }
    this.room(4 + n);
    this.nodeBuf.writeUInt32BE(n, this.len);
    this.len += 4;
    this.len += this.nodeBuf.write(s, this.len, 'hex');
  }
}

/**
 * The protobuf wire writer (src/hashing/wire-writer.ts) writes exactly the
 * bytes of a plain reference writer (one new buffer per nested message,
 * BigInt varints, TextEncoder for strings) for random trees of fields:
 * varints at every size boundary and beyond 2^53, negative numbers and
 * bigints, non-ASCII and lone-surrogate strings, nested messages whose
 * bodies cross the one-, two- and three-byte length boundaries.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Writer } from '../src/hashing/wire-writer.js';

const enc = new TextEncoder();

/** The straightforward writer the fast one must match byte for byte. */
class ReferenceWriter {
  private out: number[] = [];
  varint(v: number | bigint): void {
    let x = BigInt.asUintN(64, BigInt(v));
    while (x >= 0x80n) {
      this.out.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    this.out.push(Number(x));
  }
  tag(field: number, wt: number): void {
    this.varint(field * 8 + wt);
  }
  bytesField(field: number, b: Uint8Array): void {
    this.tag(field, 2);
    this.varint(b.length);
    for (const x of b) this.out.push(x);
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
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigInt64(0, v, true);
    for (const x of b) this.out.push(x);
  }
  message(field: number, body: (w: ReferenceWriter) => void): void {
    const inner = new ReferenceWriter();
    body(inner);
    this.bytesField(field, inner.finish());
  }
  finish(): Uint8Array {
    return new Uint8Array(this.out);
  }
}

type Op =
  | { k: 'varint'; f: number; v: number | bigint; always: boolean }
  | { k: 'string'; f: number; s: string; always: boolean }
  | { k: 'bytes'; f: number; b: Uint8Array }
  | { k: 'bool'; f: number; v: boolean; always: boolean }
  | { k: 'sfixed64'; f: number; v: bigint }
  | { k: 'message'; f: number; body: Op[] };

interface Target {
  varintField(f: number, v: number | bigint, always?: boolean): void;
  stringField(f: number, s: string, always?: boolean): void;
  bytesField(f: number, b: Uint8Array): void;
  boolField(f: number, v: boolean, always?: boolean): void;
  sfixed64Field(f: number, v: bigint): void;
  message(f: number, body: (w: never) => void): void;
}

function play(w: Target, ops: Op[]): void {
  for (const op of ops) {
    if (op.k === 'varint') w.varintField(op.f, op.v, op.always);
    else if (op.k === 'string') w.stringField(op.f, op.s, op.always);
    else if (op.k === 'bytes') w.bytesField(op.f, op.b);
    else if (op.k === 'bool') w.boolField(op.f, op.v, op.always);
    else if (op.k === 'sfixed64') w.sfixed64Field(op.f, op.v);
    else w.message(op.f, ((inner: Target) => play(inner, op.body)) as (w: never) => void);
  }
}

const boundary = fc.constantFrom(
  0,
  1,
  0x7f,
  0x80,
  0x3fff,
  0x4000,
  0x1fffff,
  0x200000,
  0xfffffff,
  0x10000000,
  0x7fffffff,
  0x80000000,
  0xffffffff,
  0x100000000,
  2 ** 35,
  2 ** 49 - 1,
  Number.MAX_SAFE_INTEGER,
  2 ** 53,
  2 ** 60,
  2 ** 64,
  -1,
  -0x80000000,
  -(2 ** 40),
);
const varintValue = fc.oneof(
  boundary,
  fc.nat(),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 }),
  fc.maxSafeNat(),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
);
const field = fc.integer({ min: 1, max: 5000 });
/** Strings at the length-slot boundaries (127/128 bytes, 16383/16384) and with non-ASCII or lone surrogates. */
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.constantFrom('é', '\ud800', 'a\udc00b', '😀', '\uFEFFbom'),
  fc.integer({ min: 120, max: 136 }).map((n) => 'x'.repeat(n)),
  fc.integer({ min: 40, max: 46 }).map((n) => 'é€'.repeat(n)),
  fc.integer({ min: 16_370, max: 16_390 }).map((n) => 'y'.repeat(n)),
);
const op: fc.Memo<Op> = fc.memo((depth) =>
  fc.oneof(
    { depthSize: 'small' },
    fc.record({ k: fc.constant('varint' as const), f: field, v: varintValue, always: fc.boolean() }),
    fc.record({ k: fc.constant('string' as const), f: field, s: text, always: fc.boolean() }),
    fc.record({
      k: fc.constant('bytes' as const),
      f: field,
      b: fc.oneof(
        fc.uint8Array({ maxLength: 40 }),
        fc.integer({ min: 100, max: 300 }).map((n) => new Uint8Array(n).fill(n & 0xff)),
      ),
    }),
    fc.record({ k: fc.constant('bool' as const), f: field, v: fc.boolean(), always: fc.boolean() }),
    fc.record({
      k: fc.constant('sfixed64' as const),
      f: field,
      v: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    }),
    depth > 4
      ? fc.record({ k: fc.constant('bool' as const), f: field, v: fc.boolean(), always: fc.boolean() })
      : fc.record({
          k: fc.constant('message' as const),
          f: field,
          body: fc.array(op(depth + 1), { maxLength: 6 }),
        }),
  ),
);

function bytesOf(ops: Op[]): { fast: Uint8Array; reference: Uint8Array } {
  const fast = new Writer();
  const reference = new ReferenceWriter();
  play(fast as unknown as Target, ops);
  play(reference as unknown as Target, ops);
  return { fast: fast.finish(), reference: reference.finish() };
}

describe('wire writer', () => {
  it('writes exactly the reference bytes for random field trees (fixed seed)', () => {
    fc.assert(
      fc.property(fc.array(op(0), { maxLength: 8 }), (ops) => {
        const { fast, reference } = bytesOf(ops);
        expect(Buffer.from(fast).equals(Buffer.from(reference))).toBe(true);
      }),
      { seed: 20261123, numRuns: 1500 },
    );
  });

  it('widens a nested length slot for bodies of 128 bytes, 16 KiB and 2 MiB, moving the body intact', () => {
    for (const n of [127, 128, 16_383, 16_384, 2_097_151, 2_097_152]) {
      const payload = new Uint8Array(n).map((_, i) => i * 7);
      const ops: Op[] = [
        { k: 'varint', f: 1, v: 300, always: false },
        {
          k: 'message',
          f: 2,
          body: [{ k: 'message', f: 3, body: [{ k: 'bytes', f: 4, b: payload }] }],
        },
        { k: 'string', f: 5, s: 'after', always: false },
      ];
      const { fast, reference } = bytesOf(ops);
      expect(fast.length).toBe(reference.length);
      expect(Buffer.from(fast).equals(Buffer.from(reference)), `body of ${n} bytes`).toBe(true);
    }
  });

  it('refuses a fractional varint as the reference does', () => {
    expect(() => new Writer().varint(1.5)).toThrow(RangeError);
    expect(() => new ReferenceWriter().varint(1.5)).toThrow(RangeError);
  });
});

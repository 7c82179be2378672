/**
 * The streaming SHA-256 sink (src/hashing/sink.ts): what `capture` returns is
 * exactly the encoding its writes produced, wherever the 64 KiB buffer is
 * flushed meanwhile (a long string hashed past the buffer, a prefix that
 * leaves little room), and hashing goes on unchanged around a capture.
 * Checked against a plain encoder and `node:crypto` over the whole stream.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Sha256Sink } from '../src/hashing/sink.js';

const CAP = 64 * 1024;

/** Canton's `string` encoding written plainly: 4-byte big-endian UTF-8 length ‖ UTF-8. */
function plainString(s: string): Buffer {
  const body = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  return Buffer.concat([len, body]);
}

function sha256(...parts: Uint8Array[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex');
}

/** Writes `b` in small pieces, so that it fills the sink's buffer (a large `raw` bypasses it). */
function writeSmall(s: Sha256Sink, b: Uint8Array): void {
  for (let i = 0; i < b.length; i += 1000) s.raw(b.subarray(i, i + 1000));
}

/** Hashes `prefix`, captures `strings` written with `string`, then hashes `suffix`. */
function run(prefix: Uint8Array, strings: string[], suffix: Uint8Array) {
  const s = new Sha256Sink().begin();
  writeSmall(s, prefix);
  const captured = s.capture(16, () => {
    for (const x of strings) s.string(x);
  });
  s.raw(suffix);
  return { captured, digest: Buffer.from(s.digest()).toString('hex') };
}

describe('Sha256Sink.string', () => {
  it('long text is hashed as its UTF-8 encoding, also with a surrogate pair across a piece boundary', () => {
    for (const at of [CAP / 4 - 2, CAP / 4 - 1, CAP / 4, CAP / 2 - 1]) {
      const text = `${'a'.repeat(at)}\u{1F600}é${'ü'.repeat(CAP)}\u{1F600}`;
      const s = new Sha256Sink().begin();
      s.string(text);
      expect(Buffer.from(s.digest()).toString('hex')).toBe(sha256(plainString(text)));
    }
  });
});

describe('Sha256Sink.capture', () => {
  it('a string larger than half the buffer, captured after a prefix: the copy is the whole encoding', () => {
    const name = 'A'.repeat(40 * 1024);
    const prefix = new Uint8Array(100).fill(7);
    const suffix = new Uint8Array([1, 2, 3]);
    const { captured, digest } = run(prefix, [name], suffix);
    const expected = plainString(name);
    expect(Buffer.from(captured).equals(expected)).toBe(true);
    expect(digest).toBe(sha256(prefix, expected, suffix));
  });

  it('a capture across a flush boundary equals the uncached encoding, and replaying it hashes the same', () => {
    // Short strings go through the buffer; after the prefix they fill it, and it is flushed mid-capture.
    const prefix = new Uint8Array(CAP / 2 + 100).fill(1);
    const strings = ['abc', ...Array.from({ length: 12 }, (_, i) => `${i}`.repeat(3000)), 'é'.repeat(1000)];
    const { captured, digest } = run(prefix, strings, new Uint8Array(0));
    const expected = Buffer.concat(strings.map(plainString));
    expect(Buffer.from(captured).equals(expected)).toBe(true);
    expect(digest).toBe(sha256(prefix, expected));
    const replay = new Sha256Sink().begin();
    writeSmall(replay, prefix);
    replay.raw(captured);
    expect(Buffer.from(replay.digest()).toString('hex')).toBe(digest);
  });

  it('captures do not nest', () => {
    const s = new Sha256Sink().begin();
    expect(() => s.capture(4, () => s.capture(4, () => s.u8(1)))).toThrow(/nest/);
  });

  it('property: any prefix and strings around the buffer size, ASCII or not, capture exactly their encoding', () => {
    const around = (c: number) => fc.integer({ min: Math.max(0, c - 40), max: c + 40 });
    const size = fc.oneof(
      fc.integer({ min: 0, max: 64 }),
      around(CAP / 2),
      around(CAP),
      around(4096),
      fc.integer({ min: 0, max: CAP + 5000 }),
    );
    const text = fc.tuple(size, fc.constantFrom('a', 'é', '€', '😀')).map(([n, c]) => c.repeat(n));
    fc.assert(
      fc.property(
        fc.oneof(around(0), around(CAP / 2), around(CAP), fc.integer({ min: 0, max: 2 * CAP })),
        fc.array(text, { minLength: 1, maxLength: 3 }),
        (prefixLength, strings) => {
          const prefix = new Uint8Array(prefixLength).fill(0x5a);
          const suffix = new Uint8Array([9, 9]);
          const { captured, digest } = run(prefix, strings, suffix);
          const expected = Buffer.concat(strings.map(plainString));
          expect(Buffer.from(captured).equals(expected)).toBe(true);
          expect(digest).toBe(sha256(prefix, expected, suffix));
        },
      ),
      { numRuns: 150 },
    );
  });
});

/**
 * The hand-written checks on the verification hot path agree with their
 * pattern definitions: `numericProblem` with the Daml numeric pattern and
 * limits, `isCanonicalBase64` with strict standard base64 (pattern + canonical
 * padding bits).
 */
import { describe, expect, it } from 'vitest';
import { numericProblem } from '../src/hashing/canonical.js';
import { base64ToBytes, isCanonicalBase64, isPaddedBase64, STANDARD_BASE64 } from '../src/hashing/input.js';

function referenceNumeric(s: string): string | undefined {
  const m = /^-?(?:[1-9][0-9]*|0)\.([0-9]*)$/.exec(s);
  if (!m) return 'not';
  const scale = m[1]!.length;
  if (scale > 37) return 'scale';
  const intPart = s.slice(s.startsWith('-') ? 1 : 0, s.indexOf('.'));
  if ((intPart === '0' ? 0 : intPart.length) + scale > 38) return 'precision';
  if (/^-0\.0*$/.test(s)) return 'negzero';
  return undefined;
}

const kind = (p: string | undefined) =>
  p === undefined
    ? undefined
    : p.includes('scale')
      ? 'scale'
      : p.includes('precision')
        ? 'precision'
        : p.includes('negative zero')
          ? 'negzero'
          : 'not';

function rng(seed: number) {
  let x = seed;
  return (n: number) => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x % n;
  };
}

describe('hot-path checks', () => {
  it('numericProblem agrees with the numeric pattern and limits (50,000 strings)', () => {
    const r = rng(7);
    const alpha = ['0', '1', '9', '.', '-', 'e', ' ', '+', '\n', '٣'];
    const fixed = ['', '-', '.', '0.', '-0.', '-0.000', '-0.01', '01.0', '1.', '-10.0000000000', '1.0\n'];
    fixed.push(`0.${'0'.repeat(37)}`, `0.${'0'.repeat(38)}`, `${'1'.repeat(38)}.`, `${'1'.repeat(39)}.`);
    for (let i = 0; i < 50_000; i++) {
      let s = '';
      const n = r(45);
      for (let j = 0; j < n; j++) s += alpha[r(10) < 7 ? r(3) : r(alpha.length)];
      fixed.push(r(2) ? `${r(2) ? '-' : ''}${s.slice(0, n >> 1)}.${s.slice(n >> 1)}` : s);
    }
    for (const s of fixed) expect([s, kind(numericProblem(s))]).toEqual([s, referenceNumeric(s)]);
  });

  it('isCanonicalBase64 is exactly strict standard base64 (20,000 strings)', () => {
    const r = rng(11);
    const chars = 'AQgw+/=-_ \n!';
    for (let i = 0; i < 20_000; i++) {
      let s = Buffer.from(Array.from({ length: r(12) }, () => r(256))).toString('base64');
      if (r(2)) {
        const k = r(s.length + 1);
        s = s.slice(0, k) + chars[r(chars.length)] + s.slice(k + r(2));
      }
      let strict = STANDARD_BASE64.test(s) && s.length > 0;
      if (strict)
        try {
          base64ToBytes(s);
        } catch {
          strict = false;
        }
      expect([s, isCanonicalBase64(s)]).toEqual([s, strict]);
    }
  });

  it('isPaddedBase64 is exactly the STANDARD_BASE64 pattern (20,000 strings)', () => {
    const r = rng(12);
    // `Ł` and `ī` are read by Node's decoder as `A` and `+` (their low bytes)
    const chars = 'AQgw+/=-_ \n!é\u0000Łī😀';
    for (let i = 0; i < 20_000; i++) {
      let s = Buffer.from(Array.from({ length: r(12) }, () => r(256))).toString('base64');
      // non-zero padding bits are allowed by the pattern: flip the last data character sometimes
      if (r(4) === 0 && s.endsWith('=')) {
        const k = s.indexOf('=') - 1;
        s = s.slice(0, k) + chars[r(4)] + s.slice(k + 1);
      }
      for (let edits = r(3); edits > 0; edits--) {
        const k = r(s.length + 1);
        s = s.slice(0, k) + chars[r(chars.length)] + s.slice(k + r(2));
      }
      expect([s, isPaddedBase64(s)]).toEqual([s, STANDARD_BASE64.test(s)]);
    }
  });
});

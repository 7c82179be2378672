/**
 * Exact decimal arithmetic on Daml `Numeric` strings for the intent check:
 * normalising, comparing and adding amounts as scaled bigints, never floats.
 */

const DECIMAL = /^(-?)([0-9]+)(?:\.([0-9]+))?$/;

interface Scaled {
  units: bigint;
  scale: number;
}

function parse(s: string): Scaled | undefined {
  const m = DECIMAL.exec(s);
  if (!m) return undefined;
  const frac = m[3] ?? '';
  const units = BigInt(`${m[2]}${frac}`);
  return { units: m[1] === '-' ? -units : units, scale: frac.length };
}

function rescale(x: Scaled, scale: number): bigint {
  return x.units * 10n ** BigInt(scale - x.scale);
}

/** Whether `s` is a decimal this module understands (optional minus, digits, optional fraction). */
export function isDecimal(s: string): boolean {
  return DECIMAL.test(s);
}

/** `-1`, `0` or `1`; `undefined` when either side is not a decimal. */
export function compareDecimals(a: string, b: string): -1 | 0 | 1 | undefined {
  const x = parse(a);
  const y = parse(b);
  if (!x || !y) return undefined;
  const scale = Math.max(x.scale, y.scale);
  const d = rescale(x, scale) - rescale(y, scale);
  return d < 0n ? -1 : d > 0n ? 1 : 0;
}

/** Numeric equality: "12.5" equals "12.5000000000"; a non-decimal equals nothing. */
export function decimalEquals(a: string, b: string): boolean {
  return compareDecimals(a, b) === 0;
}

/** The exact sum, written with the largest scale of the terms; `undefined` if a term is not a decimal. */
export function addDecimals(terms: readonly string[]): string | undefined {
  const xs = terms.map(parse);
  if (xs.some((x) => x === undefined)) return undefined;
  const scale = Math.max(0, ...xs.map((x) => x!.scale));
  const total = xs.reduce((acc, x) => acc + rescale(x!, scale), 0n);
  const neg = total < 0n;
  const digits = (neg ? -total : total).toString().padStart(scale + 1, '0');
  const whole = digits.slice(0, digits.length - scale);
  const frac = digits.slice(digits.length - scale);
  return `${neg ? '-' : ''}${whole}${scale > 0 ? `.${frac}` : ''}`;
}

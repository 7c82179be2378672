/**
 * Owns exact decimal arithmetic on Daml `Numeric` strings, for the whole
 * project (intent check, flows, sandbox): parsing, comparing, adding and
 * converting amounts to and from scaled bigint units (Numeric 10 by default),
 * never floats. Callers that refuse or throw on bad input wrap these.
 */

const DECIMAL = /^(-?)([0-9]+)(?:\.([0-9]+))?$/;

/** Daml's `Numeric 10`: amounts carry ten decimals. */
export const NUMERIC_SCALE = 10;

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

/**
 * `s` as whole units of 10^-scale (`"12.5"` → 125000000000n at scale 10);
 * `undefined` when `s` is not a decimal or has non-zero digits beyond `scale`.
 */
export function decimalUnits(s: string, scale = NUMERIC_SCALE): bigint | undefined {
  const x = parse(s);
  if (!x) return undefined;
  if (x.scale <= scale) return rescale(x, scale);
  const cut = 10n ** BigInt(x.scale - scale);
  return x.units % cut === 0n ? x.units / cut : undefined;
}

/** Units of 10^-scale written with exactly `scale` decimals (`12.5000000000`; no point at scale 0). */
export function fromUnits(units: bigint, scale = NUMERIC_SCALE): string {
  const neg = units < 0n;
  const digits = (neg ? -units : units).toString().padStart(scale + 1, '0');
  const whole = digits.slice(0, digits.length - scale);
  const frac = digits.slice(digits.length - scale);
  return `${neg ? '-' : ''}${whole}${scale > 0 ? `.${frac}` : ''}`;
}

/** The same amount without trailing zeros (`12.5`), for people. */
export function shortAmount(s: string): string {
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
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
  return fromUnits(
    xs.reduce((acc, x) => acc + rescale(x!, scale), 0n),
    scale,
  );
}

/**
 * `a / b` in Numeric 10, rounded half to even (Daml's rounding of decimal
 * division); undefined when either is not a decimal or `b` is zero.
 */
export function divideDecimals(a: string, b: string): string | undefined {
  const x = decimalUnits(a);
  const y = decimalUnits(b);
  if (x === undefined || y === undefined || y === 0n) return undefined;
  const neg = x < 0n !== y < 0n;
  const n = (x < 0n ? -x : x) * 10n ** BigInt(NUMERIC_SCALE);
  const d = y < 0n ? -y : y;
  let q = n / d;
  const r2 = (n % d) * 2n;
  if (r2 > d || (r2 === d && q % 2n === 1n)) q += 1n;
  return fromUnits(neg ? -q : q);
}

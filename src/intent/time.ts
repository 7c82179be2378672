/**
 * Instants for the intent check: ISO-8601 strings (as intents give them and
 * as `inspect` prints them) to exact microseconds since the epoch.
 */

const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/i;
const RAW = /^(-?\d+)µs$/;

/**
 * Microseconds since the epoch, or `undefined` when the string is not an
 * ISO-8601 instant with an offset (or `inspect`'s `<n>µs` form for instants
 * outside the date range). Digits below the microsecond must be zero, or the
 * instant has no exact microsecond value and `undefined` is returned.
 */
export function parseInstantMicros(s: string): bigint | undefined {
  const raw = RAW.exec(s);
  if (raw) return BigInt(raw[1]!);
  const m = ISO.exec(s);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, sec, frac = '', off] = m;
  // setUTCFullYear, not Date.UTC: the latter maps years 0–99 to 1900–1999.
  const date = new Date(0);
  date.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  date.setUTCHours(Number(h), Number(mi), Number(sec), 0);
  const ms = date.getTime();
  if (!Number.isFinite(ms)) return undefined;
  if (date.getUTCDate() !== Number(d) || date.getUTCMonth() !== Number(mo) - 1) return undefined;
  if (Number(h) > 23 || Number(mi) > 59 || Number(sec) > 59) return undefined;
  const padded = frac.padEnd(9, '0');
  if (!/^0{3}$/.test(padded.slice(6))) return undefined;
  let us = BigInt(ms) * 1000n + BigInt(padded.slice(0, 6));
  if (off && off.toUpperCase() !== 'Z') {
    const sign = off[0] === '-' ? -1n : 1n;
    const minutes = BigInt(Number(off.slice(1, 3)) * 60 + Number(off.slice(4, 6)));
    us -= sign * minutes * 60_000_000n;
  }
  return us;
}

/** Whether two instant strings denote the same microsecond (false if either does not parse). */
export function sameInstant(a: string, b: string): boolean {
  const x = parseInstantMicros(a);
  const y = parseInstantMicros(b);
  return x !== undefined && y !== undefined && x === y;
}

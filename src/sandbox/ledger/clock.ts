/**
 * The sandbox's notion of now, in microseconds since the epoch (the unit of
 * Daml timestamps and of the hashed metadata). Wall-clock time plus an offset
 * that tests and the `advance` admin call move forward; it never goes back.
 */
export class SandboxClock {
  private offsetUs = 0n;

  /** Current time, µs since the epoch. */
  now(): bigint {
    return BigInt(Date.now()) * 1000n + this.offsetUs;
  }

  /** Moves the clock forward (ms). */
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError('the sandbox clock only moves forward');
    this.offsetUs += BigInt(Math.round(ms * 1000));
  }
}

/** µs since the epoch → ISO-8601 with microseconds: the formatter `inspect` uses. */
export { isoMicros } from '../../hashing/render.js';

/** Parses an ISO-8601 instant (up to µs precision) into µs since the epoch, or undefined. */
export function parseIsoMicros(text: string): bigint | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(text);
  if (!m) return undefined;
  const ms = Date.parse(`${m[1]}${m[3]}`);
  if (Number.isNaN(ms)) return undefined;
  const frac = (m[2] ?? '').padEnd(9, '0');
  if (frac.slice(6) !== '000') return undefined; // below µs: not representable in Daml
  return BigInt(ms) * 1000n + BigInt(frac.slice(0, 6));
}

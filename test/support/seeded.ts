/**
 * What the crash tests share: a small seeded random generator (a failing run
 * is replayed with its seed) and a wait for a value that tolerates errors
 * while a killed service restarts (the last one is named on timeout).
 */

/** A small seeded generator of numbers in [0, 1). */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Thrown by a waited-for function to stop waiting at once (other errors count as no answer yet). */
export class GiveUp extends Error {}

/**
 * `f`'s first defined answer, asking every `everyMs` until `ms` have passed;
 * errors count as no answer, except a `GiveUp`, which ends the wait.
 */
export async function eventually<T>(
  f: () => Promise<T | undefined>,
  what: string,
  ms: number,
  everyMs: number,
): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (e) {
      if (e instanceof GiveUp) throw e;
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Fault switches for tests and demos. A rule names a fault, the operations it
 * applies to (`ledger-api.prepare`, a service prefix such as `validator.*`, or
 * every operation), how many times it may fire and with what probability
 * (drawn from a seeded generator, so a run can be replayed). The server
 * applies the transport faults to every route that declares an operation;
 * prepare handlers take the transaction faults themselves.
 *
 * - unreachable: the connection is dropped as the request arrives, before
 *   anything is looked at or processed: the caller sees a network error, as
 *   when the node is down or cut off (until the rule is removed).
 * - latency: the answer is delayed by `ms`.
 * - status: 429 or 503 with Canton's retryable body (`retryInfo`, category 2
 *   or 1) or Splice's `{error}`, plus `Retry-After`; nothing is processed.
 * - timeoutAfterCommit: the request is processed (a submission commits), then
 *   the answer is held for `ms` and the connection dropped: the caller sees a
 *   timeout with an outcome it does not know.
 * - lostResponse: processed, then the connection is closed without an answer.
 * - tamper: the prepared transaction handed out pays someone else, pays more,
 *   or carries an extra root node; the claimed hash is the tampered
 *   transaction's own or the original's. A name-service payment tampered
 *   with `receiver` locks its CC for the thief party (lock holder and
 *   subscription receiver), with `amount` locks more than the entry's fee.
 * - expiredRound: the mining rounds advance twice after prepare, so the
 *   transaction's round has closed by execute.
 */
import { z } from 'zod';

export const FaultSpecSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('unreachable') }),
  z.strictObject({ kind: z.literal('latency'), ms: z.number().int().min(0).max(120_000) }),
  z.strictObject({
    kind: z.literal('status'),
    status: z.union([z.literal(429), z.literal(503)]),
    retryAfterMs: z.number().int().min(1).max(600_000).optional(),
  }),
  z.strictObject({
    kind: z.literal('timeoutAfterCommit'),
    ms: z.number().int().min(0).max(600_000).optional(),
  }),
  z.strictObject({ kind: z.literal('lostResponse') }),
  z.strictObject({
    kind: z.literal('tamper'),
    change: z.enum(['receiver', 'amount', 'instrument', 'extraRoot']),
    hash: z.enum(['tampered', 'original']).optional(),
  }),
  z.strictObject({ kind: z.literal('expiredRound') }),
  z.strictObject({ kind: z.literal('downgradeScheme') }),
]);
export type FaultSpec = z.output<typeof FaultSpecSchema>;
export type FaultKind = FaultSpec['kind'];

export const FaultRuleSchema = z.strictObject({
  fault: FaultSpecSchema,
  /** `service.operation`, `service.*`, or absent for every operation. */
  operation: z
    .string()
    .regex(/^[a-z-]+\.(\*|[A-Za-z0-9-]+)$/, 'operation must be "service.name" or "service.*"')
    .optional(),
  /** How many times it fires; absent = until removed. */
  times: z.number().int().min(1).optional(),
  /** Chance it fires on a matching request (default 1). */
  probability: z.number().min(0).max(1).optional(),
});
export type FaultRule = z.input<typeof FaultRuleSchema>;

export interface ActiveFault {
  id: string;
  fault: FaultSpec;
  operation: string | undefined;
  remaining: number | undefined;
  probability: number;
  fired: number;
}

/** A fault that fired, for the log of what was applied. */
export interface AppliedFault {
  id: string;
  operation: string;
  kind: FaultKind;
}

export class FaultController {
  private readonly rules: ActiveFault[] = [];
  private readonly log: AppliedFault[] = [];
  private next = 1;
  private state: number;

  constructor(seed = 1) {
    this.state = seed >>> 0 || 1;
  }

  /** Adds a rule (validated); returns its id. */
  inject(rule: FaultRule): string {
    const r = FaultRuleSchema.parse(rule);
    const id = `fault-${this.next++}`;
    this.rules.push({
      id,
      fault: r.fault,
      operation: r.operation,
      remaining: r.times,
      probability: r.probability ?? 1,
      fired: 0,
    });
    return id;
  }

  remove(id: string): boolean {
    const i = this.rules.findIndex((r) => r.id === id);
    if (i < 0) return false;
    this.rules.splice(i, 1);
    return true;
  }

  clear(): void {
    this.rules.length = 0;
  }

  list(): readonly ActiveFault[] {
    return this.rules.map((r) => ({ ...r }));
  }

  /** Faults that fired so far, oldest first. */
  applied(): readonly AppliedFault[] {
    return [...this.log];
  }

  /**
   * The first rule of `kind` that matches `operation` and fires (its count is
   * used up, the draw is made), or undefined.
   */
  take<K extends FaultKind>(operation: string, kind: K): Extract<FaultSpec, { kind: K }> | undefined {
    for (const r of this.rules) {
      if (r.fault.kind !== kind || !matches(r.operation, operation)) continue;
      if (r.probability < 1 && this.random() >= r.probability) continue;
      r.fired++;
      if (r.remaining !== undefined && --r.remaining === 0) this.remove(r.id);
      this.log.push({ id: r.id, operation, kind });
      return r.fault as Extract<FaultSpec, { kind: K }>;
    }
    return undefined;
  }

  /** xorshift32: deterministic for a seed, good enough for fault draws. */
  private random(): number {
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x >>> 0;
    return this.state / 2 ** 32;
  }
}

function matches(pattern: string | undefined, operation: string): boolean {
  if (pattern === undefined) return true;
  if (pattern.endsWith('.*')) return operation.startsWith(pattern.slice(0, -1));
  return pattern === operation;
}

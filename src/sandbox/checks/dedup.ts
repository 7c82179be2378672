/**
 * Command deduplication by change id `(userId, set(actAs), commandId)`: an
 * accepted change id is remembered for the deduplication period (the
 * request's duration, or since an offset, or the participant's maximum of
 * 7 days when `Empty`/absent); a second submission of it within that period
 * is DUPLICATE_COMMAND (ALREADY_EXISTS) naming the earlier submission and its
 * completion offset. Rejected submissions are not remembered: they may be
 * retried under the same change id.
 */
import { cantonError } from '../errors.js';

export const MAX_DEDUPLICATION_US = 7n * 86_400_000_000n;

/** `deduplicationPeriod` of a request, as decoded by the client's zod schema. */
export type DeduplicationPeriodJson =
  | { DeduplicationDuration: { value: { seconds: number | bigint | string; nanos?: number | undefined } } }
  | { DeduplicationOffset: { value: number | bigint | string } }
  | { Empty: Record<string, never> };

/** The change id as one string key; the actAs set is order-free. */
export function changeIdOf(userId: string, actAs: readonly string[], commandId: string): string {
  return JSON.stringify([userId, [...new Set(actAs)].sort(), commandId]);
}

interface Accepted {
  submissionId: string;
  offset: number;
  at: bigint;
}

export class DeduplicationTable {
  private readonly accepted = new Map<string, Accepted>();

  /** Throws DUPLICATE_COMMAND if `changeId` was accepted within the period. */
  check(x: {
    changeId: string;
    submissionId: string;
    now: bigint;
    period?: DeduplicationPeriodJson | undefined;
  }): void {
    const prior = this.accepted.get(x.changeId);
    if (!prior) return;
    if (!this.within(prior, x.now, x.period)) return;
    throw cantonError(
      'DUPLICATE_COMMAND',
      10,
      'A command with the given command id has already been successfully processed',
      {
        context: {
          existing_submission_id: prior.submissionId,
          completion_offset: String(prior.offset),
        },
        definiteAnswer: false,
      },
    );
  }

  recordAccepted(x: { changeId: string; submissionId: string; offset: number; at: bigint }): void {
    this.accepted.set(x.changeId, { submissionId: x.submissionId, offset: x.offset, at: x.at });
  }

  /** Forgets every accepted change (a new participant after a major upgrade has none). */
  clear(): void {
    this.accepted.clear();
  }

  private within(prior: Accepted, now: bigint, period: DeduplicationPeriodJson | undefined): boolean {
    if (period === undefined || 'Empty' in period) return now - prior.at < MAX_DEDUPLICATION_US;
    if ('DeduplicationOffset' in period) return prior.offset > Number(period.DeduplicationOffset.value);
    const d = period.DeduplicationDuration.value;
    const us = BigInt(d.seconds) * 1_000_000n + BigInt(Math.floor((d.nanos ?? 0) / 1000));
    return now - prior.at < (us > MAX_DEDUPLICATION_US ? MAX_DEDUPLICATION_US : us);
  }
}

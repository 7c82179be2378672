/**
 * The synchronizer's time checks for an externally signed transaction, at the
 * record time it is sequenced:
 * - `maxRecordTime` (when set): later → NOT_SEQUENCED_TIMEOUT, never committed;
 * - the preparation time must be within `preparationTimeRecordTimeTolerance`
 *   (24 h, Canton's default) of the record time;
 * - a transaction that reads ledger time carries min/max ledger-effective-time
 *   bounds; the record time must then lie within them, widened by
 *   `ledgerTimeRecordTimeTolerance` (60 s).
 * Mining-round validity is not a time check here: an expired round is an
 * archived input contract, refused by the activeness check.
 */
import { cantonError, type SandboxError } from '../errors.js';
import { isoMicros } from '../ledger/clock.js';

export const PREPARATION_TIME_TOLERANCE_US = 24n * 3_600_000_000n;
export const LEDGER_TIME_TOLERANCE_US = 60_000_000n;

export interface TimeWindow {
  recordTime: bigint;
  preparationTime: bigint;
  minLedgerEffectiveTime?: bigint | undefined;
  maxLedgerEffectiveTime?: bigint | undefined;
  maxRecordTime?: bigint | undefined;
}

/** Throws the Canton rejection for the first violated window. */
export function checkTimeWindows(w: TimeWindow): void {
  const at = isoMicros(w.recordTime);
  if (w.maxRecordTime !== undefined && w.recordTime > w.maxRecordTime)
    throw timeout(
      `Transaction was not sequenced within the pre-defined max sequencing time ${isoMicros(w.maxRecordTime)} and has therefore timed out (record time ${at})`,
    );
  const prepDelta = w.recordTime - w.preparationTime;
  if (prepDelta > PREPARATION_TIME_TOLERANCE_US || -prepDelta > PREPARATION_TIME_TOLERANCE_US)
    throw outOfBound(
      'LOCAL_VERDICT_PREPARATION_TIME_OUT_OF_BOUND',
      `The delta between the record time ${at} and the preparation time ${isoMicros(w.preparationTime)} exceeds the preparation time record time tolerance of 24 hours`,
    );
  const lo = w.minLedgerEffectiveTime;
  const hi = w.maxLedgerEffectiveTime;
  if (lo !== undefined && w.recordTime + LEDGER_TIME_TOLERANCE_US < lo)
    throw outOfBound(
      'LOCAL_VERDICT_LEDGER_TIME_OUT_OF_BOUND',
      `The record time ${at} is before the transaction's minimum ledger time ${isoMicros(lo)} minus the ledger time record time tolerance of 60 seconds`,
    );
  if (hi !== undefined && w.recordTime - LEDGER_TIME_TOLERANCE_US >= hi)
    throw outOfBound(
      'LOCAL_VERDICT_LEDGER_TIME_OUT_OF_BOUND',
      `The record time ${at} is past the transaction's maximum ledger time ${isoMicros(hi)} plus the ledger time record time tolerance of 60 seconds`,
    );
}

function timeout(cause: string): SandboxError {
  return cantonError('NOT_SEQUENCED_TIMEOUT', 2, cause, { definiteAnswer: true });
}

function outOfBound(code: string, cause: string): SandboxError {
  return cantonError(code, 9, `Rejected transaction: ${cause}`, { definiteAnswer: true });
}

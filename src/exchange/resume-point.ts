/**
 * Where to re-read a participant's history from after it was restored from a
 * backup: offsets are local to a participant and change in a restore, record
 * times do not. The JSON Ledger API (3.4, 3.5) has no endpoint that maps a
 * record time to an offset (the console's `find_highest_offset_by_timestamp`
 * is the gRPC admin API's `GetHighestOffsetByTimestamp`), so this walks the
 * participant's updates for the book's parties and keeps the largest offset
 * whose update (or offset checkpoint) has a record time before `T − 1 µs`.
 * Reading from there (exclusive) re-reads everything at or after `T − 1 µs`;
 * what ingestion already has is recognised by its update id and skipped.
 * Also: what a major upgrade's import transactions look like.
 */
import type { LedgerApiClient } from '../canton/ledger-api/client.js';
import type { JsTransaction, Update } from '../canton/ledger-api/schemas.js';
import { parseInstantMicros } from '../intent/time.js';

/** The record time of the transactions that import the active contracts after a major upgrade. */
export const IMPORT_RECORD_TIME = '0001-01-01T00:00:00Z';
const IMPORT_MICROS = parseInstantMicros(IMPORT_RECORD_TIME)!;

/** A transaction of a major upgrade's contract import (record time 0001-01-01T00:00:00Z). */
export function isImportTransaction(tx: Pick<JsTransaction, 'recordTime'>): boolean {
  return parseInstantMicros(tx.recordTime) === IMPORT_MICROS;
}

export interface ResumePoint {
  /** Re-read from here (`beginExclusive`); 0 = the start of the participant's ledger. */
  offset: number;
  /** The record time at `offset` (absent for 0). */
  recordTime?: string;
  /** The first record time at or after the bound that was seen, and its offset: where the re-read starts to matter. */
  firstAtOrAfter?: { offset: number; recordTime: string };
  /** Updates and checkpoints read to find it. */
  scanned: number;
}

export interface ResumePointQuery {
  /** The book's parties: the updates ingestion reads. */
  parties: readonly string[];
  /** `tRecovery`: the record time of the last transaction ingested before the restore. */
  recordTime: string;
  /** Only this synchronizer's record times count (the one `tRecovery` was noted on). */
  synchronizerId?: string;
  /** Updates per HTTP call. */
  pageSize?: number;
  signal?: AbortSignal;
}

/** Record times an update carries: one for a transaction or reassignment, one per synchronizer for a checkpoint. */
function timesOf(u: Update): { offset: number; times: { synchronizerId: string; recordTime: string }[] } {
  if ('Transaction' in u && u.Transaction)
    return { offset: u.Transaction.value.offset, times: [u.Transaction.value] };
  if ('Reassignment' in u && u.Reassignment)
    return { offset: u.Reassignment.value.offset, times: [u.Reassignment.value] };
  if ('TopologyTransaction' in u && u.TopologyTransaction)
    return { offset: u.TopologyTransaction.value.offset, times: [u.TopologyTransaction.value] };
  const cp = (u as { OffsetCheckpoint: { value: { offset: number; synchronizerTimes?: unknown } } })
    .OffsetCheckpoint.value;
  return {
    offset: cp.offset,
    times: (cp.synchronizerTimes ?? []) as { synchronizerId: string; recordTime: string }[],
  };
}

/**
 * The largest offset whose update has a record time before `recordTime − 1 µs`
 * (0 when there is none), reading the participant's updates for `parties` from
 * its start. Record times grow with offsets on one synchronizer: once one at
 * or after the bound is seen on the synchronizer asked for (or, when none is
 * named, on the only one seen so far), nothing later can be earlier and the
 * walk stops. Throws on a record time that does not parse.
 */
export async function resumePointBefore(ledger: LedgerApiClient, q: ResumePointQuery): Promise<ResumePoint> {
  const t = parseInstantMicros(q.recordTime);
  if (t === undefined)
    throw new RangeError(
      `record time ${q.recordTime} is not an ISO-8601 instant (e.g. 2026-11-26T10:00:00Z)`,
    );
  if (q.parties.length === 0) throw new RangeError('no parties to read the history of: the book is empty');
  const bound = t - 1n;
  const filtersByParty = Object.fromEntries(q.parties.map((p) => [p, {}]));
  const synchronizers = new Set<string>();
  const found: ResumePoint = { offset: 0, scanned: 0 };
  const updates = ledger.updatesPaged(
    {
      beginExclusive: 0,
      updateFormat: {
        includeTransactions: {
          eventFormat: { filtersByParty, verbose: false },
          transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
        },
      },
    },
    { limit: q.pageSize ?? 200, ...(q.signal ? { signal: q.signal } : {}) },
  );
  for await (const u of updates) {
    found.scanned++;
    const { offset, times } = timesOf(u);
    let before = false;
    let past = false;
    for (const s of times) {
      if (q.synchronizerId !== undefined && s.synchronizerId !== q.synchronizerId) continue;
      synchronizers.add(s.synchronizerId);
      const at = parseInstantMicros(s.recordTime);
      if (at === undefined)
        throw new RangeError(`the participant gave offset ${offset} the record time ${s.recordTime}`);
      if (at < bound) before = true;
      else {
        past = true;
        found.firstAtOrAfter ??= { offset, recordTime: s.recordTime };
      }
    }
    // A checkpoint counts when every synchronizer it names is before the bound.
    if (before && !past && offset > found.offset) {
      found.offset = offset;
      found.recordTime = times.map((s) => s.recordTime).sort()[times.length - 1];
    }
    if (past && (q.synchronizerId !== undefined || synchronizers.size === 1)) break;
  }
  return found;
}

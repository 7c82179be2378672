/**
 * An operator's controls over ledger ingestion, for recovery: its status, a
 * rewind (to an offset, or to a record time after a participant restore) and
 * the move to the start of a new ledger after a major upgrade. None of them
 * stops ingestion: the operator stops the service or pauses ingestion first.
 * A control refuses while another instance holds the ingestion lease unless
 * forced; forced, it fences that holder out (its next write fails and it
 * stops, having written nothing) in the same transaction that moves the
 * cursor. Every move is audited (`ingest.rewind`, `ingest.resume_after_upgrade`).
 *
 * Where the cursor lives is the ingestion's business: it comes in as an
 * {@link IngestCursorAccess}.
 */
import type { LedgerApiClient } from '../canton/ledger-api/client.js';
import { appendAudit } from '../store/audit.js';
import type { Db, Queryable } from '../store/db.js';
import type { Lease, LeaseRepo } from '../store/repos/leases.js';
import type { IngestedSide } from './reconcile.js';
import { isImportTransaction, type ResumePoint, resumePointBefore } from './resume-point.js';

/** The name of the lease the ingesting instance holds. */
export const INGEST_LEASE = 'ingest';

export interface IngestCursor {
  offset: number;
  /** The latest record time ingested, per synchronizer. */
  recordTimes: Record<string, string>;
}

export interface IngestedUpdate {
  updateId: string;
  offset: number;
  recordTime: string;
  synchronizerId?: string;
}

/** How the controls read and move the ingestion's cursor (inside the caller's transaction). */
export interface IngestCursorAccess {
  read(q: Queryable): Promise<IngestCursor | undefined>;
  /** Sets the offset ingestion reads after; the record times stay (they are facts of what was ingested). */
  moveTo(q: Queryable, offset: number): Promise<void>;
  /** The update ingested last (highest offset), if any. */
  lastUpdate(q: Queryable): Promise<IngestedUpdate | undefined>;
}

/** What the ingestion hands the service's routes and the CLI: its cursor and what it stored. */
export interface IngestionAccess {
  cursor: IngestCursorAccess;
  ingested: IngestedSide;
}

export interface IngestControlDeps {
  db: Db;
  leases: LeaseRepo;
  cursor: IngestCursorAccess;
  ledger?: LedgerApiClient | undefined;
  /** The book's parties (what ingestion reads). */
  parties: () => Promise<string[]>;
}

/** Another instance holds the ingestion lease: stop it (or pause ingestion) first, or force. */
export class IngestLeaseHeldError extends Error {
  override readonly name = 'IngestLeaseHeldError';
  constructor(readonly holder: Lease) {
    super(
      `another instance (${holder.owner}) holds the ingestion lease until ${holder.expiresAt}: stop that service or pause its ingestion first, or force (which fences it out)`,
    );
  }
}

/** The request cannot be carried out as asked (no ledger, not after an upgrade, …). */
export class IngestControlError extends Error {
  override readonly name = 'IngestControlError';
}

export interface IngestStatus {
  cursor?: IngestCursor;
  lastUpdate?: IngestedUpdate;
  lease?: { owner: string; fence: number; expiresAt: string };
  /** The participant's ledger end and how far ingestion is behind it (when the ledger was asked). */
  ledgerEnd?: number;
  lag?: number;
  ledgerError?: string;
}

export async function ingestStatus(deps: IngestControlDeps): Promise<IngestStatus> {
  const [cursor, lastUpdate, lease] = await Promise.all([
    deps.cursor.read(deps.db),
    deps.cursor.lastUpdate(deps.db),
    deps.leases.holder(INGEST_LEASE),
  ]);
  const out: IngestStatus = {
    ...(cursor ? { cursor } : {}),
    ...(lastUpdate ? { lastUpdate } : {}),
    ...(lease ? { lease: { owner: lease.owner, fence: lease.fence, expiresAt: lease.expiresAt } } : {}),
  };
  if (deps.ledger) {
    try {
      out.ledgerEnd = (await deps.ledger.ledgerEnd()).offset;
      out.lag = Math.max(0, out.ledgerEnd - (cursor?.offset ?? 0));
    } catch (e) {
      out.ledgerError = e instanceof Error ? e.message : String(e);
    }
  }
  return out;
}

export interface ControlOptions {
  actor: string;
  /** Go ahead although another instance holds the lease: fence it out. */
  force?: boolean;
}

export interface MoveResult {
  from?: number;
  to: number;
  /** Set when a held lease was fenced out. */
  fencedOut?: string;
  /** For a rewind to a record time: what the walk found. */
  resume?: ResumePoint;
}

/** Moves the cursor under the lease rule, audited, in one transaction. */
async function move(
  deps: IngestControlDeps,
  to: number,
  opts: ControlOptions,
  audit: { action: string; details: Record<string, unknown> },
): Promise<MoveResult> {
  return deps.db.transaction(async (tx) => {
    // The lease row stays locked to the end: an instance taking the lease meanwhile waits for this
    // move, and its holder's write in progress finishes before it.
    const r = await tx.query<{ owner: string; fence: number; expires_at: string }>(
      `SELECT owner, fence, expires_at FROM leases WHERE name = $1 AND expires_at > now() FOR UPDATE`,
      [INGEST_LEASE],
    );
    const held = r.rows[0];
    if (held && !opts.force)
      throw new IngestLeaseHeldError({
        name: INGEST_LEASE,
        owner: held.owner,
        fence: held.fence,
        expiresAt: held.expires_at,
      });
    let fencedOut: string | undefined;
    if (held) {
      // Raising the fence ends the holder's lease: its next write finds it lost and stops.
      await tx.query(`UPDATE leases SET fence = fence + 1, expires_at = now() WHERE name = $1`, [
        INGEST_LEASE,
      ]);
      fencedOut = held.owner;
    }
    const before = await deps.cursor.read(tx);
    await deps.cursor.moveTo(tx, to);
    await appendAudit(tx, {
      actor: opts.actor,
      action: audit.action,
      subject: 'ingest',
      details: {
        ...audit.details,
        fromOffset: before?.offset ?? null,
        toOffset: to,
        ...(fencedOut ? { fencedOut } : {}),
      },
    });
    return { ...(before ? { from: before.offset } : {}), to, ...(fencedOut ? { fencedOut } : {}) };
  });
}

export type RewindTarget = { offset: number } | { recordTime: string; synchronizerId?: string };

/**
 * Rewinds ingestion: to an offset as given, or to the largest offset whose
 * update has a record time before `recordTime − 1 µs` (read from the
 * participant). What is read again and already ingested is skipped by update id.
 */
export async function rewindIngestion(
  deps: IngestControlDeps,
  target: RewindTarget,
  opts: ControlOptions,
): Promise<MoveResult> {
  if ('offset' in target) {
    if (!Number.isSafeInteger(target.offset) || target.offset < 0)
      throw new IngestControlError(`offset ${target.offset}: give a non-negative whole offset`);
    return move(deps, target.offset, opts, { action: 'ingest.rewind', details: { offset: target.offset } });
  }
  if (!deps.ledger)
    throw new IngestControlError(
      'a rewind to a record time reads the participant, and no Ledger API is configured',
    );
  // Checked before the walk: the walk can take a while and finds nothing to do if refused.
  const held = await deps.leases.holder(INGEST_LEASE);
  if (held && !opts.force) throw new IngestLeaseHeldError(held);
  let resume: ResumePoint;
  try {
    resume = await resumePointBefore(deps.ledger, {
      parties: await deps.parties(),
      recordTime: target.recordTime,
      ...(target.synchronizerId ? { synchronizerId: target.synchronizerId } : {}),
    });
  } catch (e) {
    if (e instanceof RangeError) throw new IngestControlError(e.message);
    throw e;
  }
  const r = await move(deps, resume.offset, opts, {
    action: 'ingest.rewind',
    details: {
      recordTime: target.recordTime,
      ...(target.synchronizerId ? { synchronizerId: target.synchronizerId } : {}),
      foundRecordTime: resume.recordTime ?? null,
      scanned: resume.scanned,
    },
  });
  return { ...r, resume };
}

/**
 * After a major upgrade: ingestion starts again at the new ledger's start.
 * Its first transactions import the active contracts at record time
 * 0001-01-01T00:00:00Z; ingestion recognises them as imports (holdings it
 * knows are kept, nothing is credited or moved). Refuses when the
 * participant's first update is not such an import (not after an upgrade),
 * unless forced.
 */
export async function resumeAfterUpgrade(deps: IngestControlDeps, opts: ControlOptions): Promise<MoveResult> {
  if (deps.ledger) {
    const parties = await deps.parties();
    if (parties.length > 0) {
      const first = await deps.ledger.updates(
        {
          beginExclusive: 0,
          updateFormat: {
            includeTransactions: {
              eventFormat: {
                filtersByParty: Object.fromEntries(parties.map((p) => [p, {}])),
                verbose: false,
              },
              transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
            },
          },
        },
        { limit: 1, streamIdleTimeoutMs: 1_000 },
      );
      const tx = first.flatMap((x) =>
        x.update && 'Transaction' in x.update && x.update.Transaction ? [x.update.Transaction.value] : [],
      )[0];
      if (tx && !isImportTransaction(tx) && !opts.force)
        throw new IngestControlError(
          `the participant's first transaction (offset ${tx.offset}, record time ${tx.recordTime}) is no import of a major upgrade (record time 0001-01-01T00:00:00Z): for a restore use a rewind to a record time; force to go on anyway`,
        );
    }
  }
  return move(deps, 0, opts, { action: 'ingest.resume_after_upgrade', details: {} });
}

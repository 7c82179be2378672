/**
 * DbRecorder: the FlowRecorder interface (src/store/journal.ts) on the
 * database. Journal records are not kept in a table of their own: each one
 * is an audit log entry (action `flow.<step>`, e.g. `flow.signed`,
 * `flow.refused`), so every signature and every refusal the pipeline makes
 * is in the hash chain, with the hash signed, the key fingerprint, the
 * intent and the reason. Subject: the one given to the recorder (a worker
 * passes `withdrawal:<id>`), else `command:<commandId>`, else `party:<id>`.
 */
import { type AuditEntry, appendAudit, listAudit } from '../audit.js';
import type { Db } from '../db.js';
import type { FlowRecorder, JournalRecord } from '../journal.js';

export interface DbRecorderOptions {
  actor?: string;
  subject?: string;
  /** Sees every record before it is written (metrics count refusals with it). Must not throw. */
  observe?: (r: Omit<JournalRecord, 'at'>) => void;
}

export class DbRecorder implements FlowRecorder {
  constructor(
    private readonly db: Db,
    private readonly opts: DbRecorderOptions = {},
  ) {}

  /** The same recorder for another actor / subject (e.g. one per request); the observer is kept. */
  with(opts: DbRecorderOptions): DbRecorder {
    return new DbRecorder(this.db, { ...this.opts, ...opts });
  }

  subjectOf(r: Omit<JournalRecord, 'at'>): string {
    return this.opts.subject ?? (r.commandId ? `command:${r.commandId}` : `party:${r.partyId}`);
  }

  async record(r: Omit<JournalRecord, 'at'>): Promise<void> {
    await appendAudit(this.db, this.entry(r));
  }

  /** Appends an entry made by `entry` on its own (the move it was meant for did not happen). */
  async append(e: AuditEntry): Promise<void> {
    await appendAudit(this.db, e);
  }

  /**
   * The audit entry of a record, for a caller that writes it inside a
   * transaction of its own (a withdrawal's move: the record and the move it
   * causes are committed together). The observer sees the record here.
   */
  entry(r: Omit<JournalRecord, 'at'>): AuditEntry {
    this.opts.observe?.(r);
    return {
      actor: this.opts.actor ?? 'system',
      action: `flow.${r.step}`,
      subject: this.subjectOf(r),
      details: { ...r },
    };
  }

  /** The records about a party without a command id (where `record` put them), in order. */
  async partyRecords(partyId: string): Promise<JournalRecord[]> {
    const subject = this.subjectOf({ flow: '', step: 'signed', partyId });
    return (await this.records(subject)).filter((r) => r.partyId === partyId && r.commandId === undefined);
  }

  /** The journal records of one subject, in order (from the audit log). */
  async records(subject: string): Promise<JournalRecord[]> {
    const out: JournalRecord[] = [];
    let after = 0;
    for (;;) {
      const rows = await listAudit(this.db, { subject, afterSeq: after, limit: 1000 });
      for (const row of rows)
        if (row.action.startsWith('flow.'))
          out.push({ at: row.at, ...(row.details as object) } as JournalRecord);
      const last = rows.at(-1);
      if (!last || rows.length < 1000) return out;
      after = last.seq;
    }
  }
}

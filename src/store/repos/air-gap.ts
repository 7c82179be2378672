/**
 * Air-gap exports: each signing request the service sealed for an
 * offline key, what it asks to be signed, and what came back. A row moves
 * open → imported (the response checked and kept; once, by nonce) → done (the
 * signed transaction went on), or open/imported → stale (its window closed
 * first: a new preparation and a new export follow) or → cancelled. Every
 * change is audited in the same transaction, and so is every refused import
 * (`importRefused`). The imported signatures are what an offline key "signs"
 * with (`signatureFor`).
 */
import { randomUUID } from 'node:crypto';
import { appendAudit } from '../audit.js';
import type { Json } from '../canonical.js';
import type { Db, Queryable } from '../db.js';
import { NotFoundError } from '../errors.js';
import { insertLeased } from './leased.js';

export type ExportKind = 'prepared-transaction' | 'topology-transactions';
export type ExportStatus = 'open' | 'imported' | 'stale' | 'cancelled' | 'done';

export interface ExportRecord {
  id: string;
  nonce: string;
  digest: string;
  kind: ExportKind;
  party: string;
  keyFingerprint: string;
  /** Hex of each hash the request asks to be signed, in order. */
  hashes: string[];
  withdrawalId?: string;
  /** `withdrawal:<id>`, `onboarding:<party>`, `sign-request`. */
  subject: string;
  /** What the flow needs to go on after the import (e.g. onboarding options). */
  context: Record<string, Json>;
  /** The sealed request exactly as exported. */
  envelope: Json;
  windowLatest: string;
  status: ExportStatus;
  response?: Json;
  importedAt?: string;
  createdAt: string;
  updatedAt: string;
}

const COLUMNS = `id, nonce, digest, kind, party, key_fingerprint AS "keyFingerprint", hashes,
  withdrawal_id AS "withdrawalId", subject, context, envelope, window_latest AS "windowLatest", status,
  response, imported_at AS "importedAt", created_at AS "createdAt", updated_at AS "updatedAt"`;

type Row = Omit<ExportRecord, 'withdrawalId' | 'response' | 'importedAt'> & {
  withdrawalId: string | null;
  response: Json | null;
  importedAt: string | null;
};

function fromRow(r: Row): ExportRecord {
  const { withdrawalId, response, importedAt, ...rest } = r;
  return {
    ...rest,
    ...(withdrawalId !== null ? { withdrawalId } : {}),
    ...(response !== null ? { response } : {}),
    ...(importedAt !== null ? { importedAt } : {}),
  };
}

const INSERT_EXPORT = `INSERT INTO air_gap_exports (id, nonce, digest, kind, party, key_fingerprint, hashes,
  withdrawal_id, subject, context, envelope, window_latest)`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export type NewExport = Omit<
  ExportRecord,
  'id' | 'status' | 'createdAt' | 'updatedAt' | 'response' | 'importedAt'
>;

export class AirGapRepo {
  constructor(
    private readonly db: Db,
    private readonly opts: { actor?: string } = {},
  ) {}

  /**
   * Records a sealed request (status open), audited as `air-gap.export`. A
   * withdrawal's request may replace the one before it (`supersedes`: made
   * stale in the same transaction), and a worker's is written only while the
   * withdrawal is leased to it (`lease`: LeaseLostError otherwise, nothing
   * written), so a worker that lost the withdrawal cannot replace the new
   * holder's request with its own.
   */
  async create(
    e: NewExport,
    actor?: string,
    opts: { lease?: string; supersedes?: { id: string; details: Record<string, Json> } } = {},
  ): Promise<ExportRecord> {
    const who = actor ?? this.opts.actor ?? 'system';
    return this.db.transaction(async (tx) => {
      const values = [
        randomUUID(),
        e.nonce,
        e.digest,
        e.kind,
        e.party,
        e.keyFingerprint,
        JSON.stringify(e.hashes),
        e.withdrawalId ?? null,
        e.subject,
        JSON.stringify(e.context),
        JSON.stringify(e.envelope),
        e.windowLatest,
      ];
      // First (one request in play per withdrawal); undone with the rest if the insert is refused.
      if (opts.supersedes) await this.settle(opts.supersedes.id, 'stale', who, opts.supersedes.details, tx);
      const row =
        opts.lease === undefined
          ? (
              await tx.query<Row>(
                `${INSERT_EXPORT} VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING ${COLUMNS}`,
                values,
              )
            ).rows[0]!
          : await insertLeased<Row>(tx, INSERT_EXPORT, values, 8, opts.lease, `RETURNING ${COLUMNS}`);
      const x = fromRow(row);
      await appendAudit(tx, {
        actor: who,
        action: 'air-gap.export',
        subject: e.subject,
        details: {
          export: x.id,
          kind: x.kind,
          party: x.party,
          digest: x.digest,
          hashes: x.hashes,
          windowLatest: x.windowLatest,
        },
      });
      return x;
    });
  }

  async get(id: string, q: Queryable = this.db): Promise<ExportRecord | undefined> {
    if (!UUID.test(id)) return undefined;
    const r = await q.query<Row>(`SELECT ${COLUMNS} FROM air_gap_exports WHERE id = $1`, [id]);
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  async require(id: string): Promise<ExportRecord> {
    const x = await this.get(id);
    if (!x) throw new NotFoundError(`air-gap export ${id}`);
    return x;
  }

  async byNonce(nonce: string): Promise<ExportRecord | undefined> {
    const r = await this.db.query<Row>(`SELECT ${COLUMNS} FROM air_gap_exports WHERE nonce = $1`, [nonce]);
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  /** The withdrawal's export still in play (open or imported), if any. */
  async currentFor(withdrawalId: string): Promise<ExportRecord | undefined> {
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM air_gap_exports WHERE withdrawal_id = $1 AND status IN ('open', 'imported')`,
      [withdrawalId],
    );
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  /** An export in play for exactly these hashes by this key (the same preparation exported twice is one export). */
  async currentForHashes(
    keyFingerprint: string,
    hashes: readonly string[],
  ): Promise<ExportRecord | undefined> {
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM air_gap_exports
        WHERE key_fingerprint = $1 AND hashes = $2::jsonb AND status IN ('open', 'imported')
        ORDER BY created_at DESC LIMIT 1`,
      [keyFingerprint, JSON.stringify(hashes)],
    );
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  async list(
    opts: { status?: ExportStatus; party?: string; withdrawalId?: string; limit?: number } = {},
  ): Promise<ExportRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (opts.status) where.push(`status = $${params.push(opts.status)}`);
    if (opts.party) where.push(`party = $${params.push(opts.party)}`);
    if (opts.withdrawalId) where.push(`withdrawal_id = $${params.push(opts.withdrawalId)}`);
    const limit = Math.min(Math.max(opts.limit ?? 100, 1), 500);
    // The limit as a parameter: the statement text stays one of a few (each is prepared once).
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM air_gap_exports ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY created_at DESC, id DESC LIMIT $${params.push(limit)}`,
      params,
    );
    return r.rows.map(fromRow);
  }

  /**
   * open → imported with the response, once: false when the row was not
   * open any more (a replayed nonce, or a concurrent import won).
   */
  async markImported(
    id: string,
    response: Json,
    actor: string,
    also?: (tx: Queryable, x: ExportRecord) => Promise<void>,
  ): Promise<ExportRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query<Row>(
        `UPDATE air_gap_exports SET status = 'imported', response = $2, imported_at = now(), updated_at = now()
          WHERE id = $1 AND status = 'open' RETURNING ${COLUMNS}`,
        [id, JSON.stringify(response)],
      );
      const row = r.rows[0];
      if (!row) return undefined;
      const x = fromRow(row);
      if (also) await also(tx, x);
      await appendAudit(tx, {
        actor,
        action: 'air-gap.import',
        subject: x.subject,
        details: { export: x.id, party: x.party, digest: x.digest, hashes: x.hashes },
      });
      return x;
    });
  }

  /**
   * Gives an imported response back (imported → open, the response dropped),
   * audited as `air-gap.import-released` with why: what the import was to
   * carry on failed for a reason that is not the response's (the network,
   * the participant, missing rights), so the same response may be imported
   * again. False when the export was not `imported`.
   */
  async releaseImport(id: string, actor: string, details: Record<string, Json>): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query<{ subject: string }>(
        `UPDATE air_gap_exports SET status = 'open', response = NULL, imported_at = NULL, updated_at = now()
          WHERE id = $1 AND status = 'imported' RETURNING subject`,
        [id],
      );
      const row = r.rows[0];
      if (!row) return false;
      await appendAudit(tx, {
        actor,
        action: 'air-gap.import-released',
        subject: row.subject,
        details: { export: id, ...details },
      });
      return true;
    });
  }

  /**
   * Audits a refused import (`air-gap.import-refused`) under the subject of
   * the export it names, if any: the reason, the field, the nonce as sent.
   */
  async importRefused(
    r: { export?: ExportRecord; nonce?: string; code: string; message: string; field?: string },
    actor: string,
  ): Promise<void> {
    await appendAudit(this.db, {
      actor,
      action: 'air-gap.import-refused',
      subject: r.export?.subject ?? null,
      details: {
        ...(r.export ? { export: r.export.id, party: r.export.party } : {}),
        ...(r.nonce !== undefined ? { nonce: r.nonce } : {}),
        reason: r.code,
        ...(r.field !== undefined ? { field: r.field } : {}),
        message: r.message.slice(0, 1000),
      },
    });
  }

  /** Moves an export in play to `to` (stale, cancelled, done), audited; false when it was not in play. */
  async settle(
    id: string,
    to: 'stale' | 'cancelled' | 'done',
    actor: string,
    details: Record<string, Json> = {},
    q?: Queryable,
  ): Promise<boolean> {
    const run = async (tx: Queryable) => {
      const r = await tx.query<{ subject: string }>(
        `UPDATE air_gap_exports SET status = $2, updated_at = now()
          WHERE id = $1 AND status IN ('open', 'imported') RETURNING subject`,
        [id, to],
      );
      const row = r.rows[0];
      if (!row) return false;
      await appendAudit(tx, {
        actor,
        action: `air-gap.${to}`,
        subject: row.subject,
        details: { export: id, ...details },
      });
      return true;
    };
    return q ? run(q) : this.db.transaction(run);
  }

  /** Exports still open whose window has closed (`now` ISO). */
  async expiredOpen(now: string, limit = 100): Promise<ExportRecord[]> {
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM air_gap_exports WHERE status IN ('open', 'imported') AND window_latest <= $1
        ORDER BY window_latest LIMIT $2`,
      [now, Math.max(1, Math.min(limit, 500))],
    );
    return r.rows.map(fromRow);
  }

  /**
   * The imported signature of `hash` by key `keyFingerprint` (base64) in
   * export `exportId`, if its response was accepted and it was not yet used,
   * cancelled or gone stale: what an offline key signs with.
   */
  async signatureFor(keyFingerprint: string, hash: string, exportId: string): Promise<string | undefined> {
    if (!UUID.test(exportId)) return undefined;
    const r = await this.db.query<{ hashes: string[]; response: { signatures: { signature: string }[] } }>(
      `SELECT hashes, response FROM air_gap_exports
        WHERE id = $3 AND key_fingerprint = $1 AND status = 'imported' AND hashes @> $2::jsonb`,
      [keyFingerprint, JSON.stringify([hash]), exportId],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    const i = row.hashes.indexOf(hash);
    return i >= 0 ? row.response.signatures[i]?.signature : undefined;
  }
}

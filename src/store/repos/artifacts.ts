/**
 * The evidence of each withdrawal / sign-request attempt: the prepared
 * transaction (hash and bytes), the signature made over it, and each
 * submission with its outcome and ledger offsets. Inserts only (a
 * submission's outcome is the one thing updated). Not audited here: the
 * pipeline's recorder (DbRecorder) audits every signature and refusal, and
 * withdrawal transitions audit themselves. Every method takes an optional
 * transaction handle, to be written together with a withdrawal transition
 * (`WithdrawalRepo.transition(…, { also })`).
 */
import { randomUUID } from 'node:crypto';
import { base64ToBytes } from '../../hashing/input.js';
import type { KeyScheme } from '../../keys/schemes.js';
import type { Db, Queryable } from '../db.js';
import { later } from '../deferred.js';
import { NotFoundError } from '../errors.js';
import { insertLeased } from './leased.js';

export interface PreparedRecord {
  id: string;
  withdrawalId?: string;
  requestId?: string;
  attempt: number;
  /** Hex of the transaction hash. */
  hash: string;
  hashingScheme: string;
  /** The PreparedTransaction protobuf, base64 (stored as bytes; see migration 4). */
  bytes: string;
  createdAt: string;
}

export interface SignatureRecord {
  id: string;
  preparedId?: string;
  withdrawalId?: string;
  /** Hex of what was signed. */
  hash: string;
  signedBy: string;
  keyLabel: string;
  scheme: KeyScheme;
  signatureFormat: string;
  /** base64 */
  signature: string;
  createdAt: string;
}

export type SubmissionOutcome = 'pending' | 'committed' | 'rejected' | 'ambiguous' | 'expired';

export interface SubmissionRecord {
  submissionId: string;
  commandId: string;
  withdrawalId?: string;
  preparedId?: string;
  outcome: SubmissionOutcome;
  /** Ledger end read before submitting: where to start looking for the completion. */
  ledgerEndBefore?: number;
  /**
   * The latest record time (ISO) at which the submitted transaction could
   * still commit, from the bounds its signature covers; absent on rows of
   * older builds.
   */
  commitDeadline?: string;
  completionOffset?: number;
  updateId?: string;
  reason?: string;
  createdAt: string;
  updatedAt: string;
}

type Nullable<T> = { [K in keyof T]: T[K] | null };

function defined<T extends object>(o: Nullable<T>): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null)) as T;
}

const PREPARED = `id, withdrawal_id AS "withdrawalId", request_id AS "requestId", attempt, hash,
  hashing_scheme AS "hashingScheme", COALESCE(bytes_raw, decode(bytes, 'base64')) AS bytes,
  created_at AS "createdAt"`;
const SIGNATURE = `id, prepared_id AS "preparedId", withdrawal_id AS "withdrawalId", hash, signed_by AS "signedBy",
  key_label AS "keyLabel", scheme, signature_format AS "signatureFormat", signature, created_at AS "createdAt"`;
const SUBMISSION = `submission_id AS "submissionId", command_id AS "commandId", withdrawal_id AS "withdrawalId",
  prepared_id AS "preparedId", outcome, ledger_end_before AS "ledgerEndBefore",
  completion_offset AS "completionOffset", update_id AS "updateId", reason,
  commit_deadline AS "commitDeadline", created_at AS "createdAt", updated_at AS "updatedAt"`;

const INSERT_PREPARED_INTO = `INSERT INTO prepared_transactions (id, withdrawal_id, request_id, attempt, hash,
    hashing_scheme, bytes_raw)`;
const INSERT_PREPARED = `${INSERT_PREPARED_INTO} VALUES ($1, $2, $3, $4, $5, $6, $7)`;
const INSERT_SUBMISSION = `INSERT INTO submissions (submission_id, command_id, withdrawal_id, prepared_id, outcome,
  ledger_end_before, completion_offset, update_id, reason, commit_deadline)`;
const INSERT_SIGNATURE = `INSERT INTO signatures (id, prepared_id, withdrawal_id, hash, signed_by, key_label, scheme,
    signature_format, signature) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`;
const UPDATE_OUTCOME = `UPDATE submissions SET outcome = $2, completion_offset = COALESCE($3, completion_offset),
    update_id = COALESCE($4, update_id), reason = COALESCE($5, reason), updated_at = now()
  WHERE submission_id = $1`;

function signatureValues(s: Omit<SignatureRecord, 'id' | 'createdAt'>): unknown[] {
  return [
    randomUUID(),
    s.preparedId ?? null,
    s.withdrawalId ?? null,
    s.hash,
    s.signedBy,
    s.keyLabel,
    s.scheme,
    s.signatureFormat,
    s.signature,
  ];
}

function outcomeValues(
  submissionId: string,
  o: { outcome: SubmissionOutcome; completionOffset?: number; updateId?: string; reason?: string },
): unknown[] {
  return [submissionId, o.outcome, o.completionOffset ?? null, o.updateId ?? null, o.reason ?? null];
}

export class ArtifactRepo {
  constructor(private readonly db: Db) {}

  async recordPrepared(
    p: Omit<PreparedRecord, 'id' | 'createdAt' | 'attempt'> & { attempt?: number },
    q: Queryable = this.db,
  ): Promise<PreparedRecord> {
    const row = {
      id: randomUUID(),
      withdrawalId: p.withdrawalId ?? null,
      requestId: p.requestId ?? null,
      attempt: p.attempt ?? 0,
      hash: p.hash,
      hashingScheme: p.hashingScheme,
      bytes: p.bytes,
    };
    // Only the default is read back: the bytes (tens of KB) are what was sent.
    const r = await q.query<{ createdAt: string }>(`${INSERT_PREPARED} RETURNING created_at AS "createdAt"`, [
      row.id,
      row.withdrawalId,
      row.requestId,
      row.attempt,
      row.hash,
      row.hashingScheme,
      base64ToBytes(row.bytes, 'the prepared transaction'),
    ]);
    return defined({ ...row, createdAt: r.rows[0]!.createdAt });
  }

  /**
   * `recordPrepared` inside a withdrawal transition (its `also`), nothing read
   * back: on the transition's handle the insert travels with its next
   * statement (deferred.ts). Outside one, with `lease`: only while the
   * withdrawal is leased to that worker (`insertLeased`), so that a worker
   * that lost its lease leaves no preparation behind for the next holder's
   * resubmission to spend the holdings of.
   */
  async writePrepared(
    p: Pick<PreparedRecord, 'withdrawalId' | 'hash' | 'hashingScheme' | 'bytes'> & {
      attempt: number;
      id?: string;
      lease?: string;
    },
    q: Queryable = this.db,
  ): Promise<void> {
    const values = [
      p.id ?? randomUUID(),
      p.withdrawalId ?? null,
      null,
      p.attempt,
      p.hash,
      p.hashingScheme,
      base64ToBytes(p.bytes, 'the prepared transaction'),
    ];
    if (p.lease === undefined) await later(q, INSERT_PREPARED, values);
    else await insertLeased(q, INSERT_PREPARED_INTO, values, 2, p.lease, 'RETURNING id');
  }

  /** The prepared transactions of a withdrawal, oldest first. */
  async preparedFor(withdrawalId: string, q: Queryable = this.db): Promise<PreparedRecord[]> {
    const r = await q.query<Nullable<PreparedRecord>>(
      `SELECT ${PREPARED} FROM prepared_transactions WHERE withdrawal_id = $1 ORDER BY created_at, attempt, id`,
      [withdrawalId],
    );
    return r.rows.map((row) =>
      defined({ ...row, bytes: (row.bytes as unknown as Buffer).toString('base64') }),
    );
  }

  async recordSignature(
    s: Omit<SignatureRecord, 'id' | 'createdAt'>,
    q: Queryable = this.db,
  ): Promise<SignatureRecord> {
    const r = await q.query<Nullable<SignatureRecord>>(
      `${INSERT_SIGNATURE} RETURNING ${SIGNATURE}`,
      signatureValues(s),
    );
    return defined(r.rows[0]!);
  }

  /** `recordSignature` inside a withdrawal transition (its `also`), nothing read back (see `writePrepared`). */
  async writeSignature(s: Omit<SignatureRecord, 'id' | 'createdAt'>, tx: Queryable): Promise<void> {
    await later(tx, INSERT_SIGNATURE, signatureValues(s));
  }

  async signaturesFor(withdrawalId: string, q: Queryable = this.db): Promise<SignatureRecord[]> {
    const r = await q.query<Nullable<SignatureRecord>>(
      `SELECT ${SIGNATURE} FROM signatures WHERE withdrawal_id = $1 ORDER BY created_at, id`,
      [withdrawalId],
    );
    return r.rows.map(defined);
  }

  /**
   * Puts a submission on record. With `lease`, only while the withdrawal is
   * leased to that worker (`insertLeased`): what a worker sends is always on
   * record before another can decide that nothing was sent.
   */
  async recordSubmission(
    s: Omit<SubmissionRecord, 'createdAt' | 'updatedAt' | 'outcome'> & {
      outcome?: SubmissionOutcome;
      lease?: string;
    },
    q: Queryable = this.db,
  ): Promise<SubmissionRecord> {
    const values = [
      s.submissionId,
      s.commandId,
      s.withdrawalId ?? null,
      s.preparedId ?? null,
      s.outcome ?? 'pending',
      s.ledgerEndBefore ?? null,
      s.completionOffset ?? null,
      s.updateId ?? null,
      s.reason ?? null,
      s.commitDeadline ?? null,
    ];
    if (s.lease === undefined) {
      const r = await q.query<Nullable<SubmissionRecord>>(
        `${INSERT_SUBMISSION} VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${SUBMISSION}`,
        values,
      );
      return defined(r.rows[0]!);
    }
    return defined(
      await insertLeased<Nullable<SubmissionRecord>>(
        q,
        INSERT_SUBMISSION,
        values,
        3,
        s.lease,
        `RETURNING ${SUBMISSION}`,
      ),
    );
  }

  async setSubmissionOutcome(
    submissionId: string,
    o: { outcome: SubmissionOutcome; completionOffset?: number; updateId?: string; reason?: string },
    q: Queryable = this.db,
  ): Promise<SubmissionRecord> {
    const r = await q.query<Nullable<SubmissionRecord>>(
      `${UPDATE_OUTCOME} RETURNING ${SUBMISSION}`,
      outcomeValues(submissionId, o),
    );
    if (!r.rows[0]) throw new NotFoundError(`submission ${submissionId}`);
    return defined(r.rows[0]);
  }

  /**
   * `setSubmissionOutcome` inside a withdrawal transition (its `also`),
   * nothing read back (see `writePrepared`): a submission no longer on
   * record is not an error here, the transition goes on.
   */
  async writeSubmissionOutcome(
    submissionId: string,
    o: { outcome: SubmissionOutcome; completionOffset?: number; updateId?: string; reason?: string },
    tx: Queryable,
  ): Promise<void> {
    await later(tx, UPDATE_OUTCOME, outcomeValues(submissionId, o));
  }

  /** Submissions under one command id, oldest first. */
  async submissionsFor(commandId: string, q: Queryable = this.db): Promise<SubmissionRecord[]> {
    const r = await q.query<Nullable<SubmissionRecord>>(
      `SELECT ${SUBMISSION} FROM submissions WHERE command_id = $1 ORDER BY created_at, submission_id`,
      [commandId],
    );
    return r.rows.map(defined);
  }
}

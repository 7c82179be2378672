/**
 * Approval requests, the approvals given, and the approvers' credentials
 * (migration 7).
 *
 * A request asks for approvals of one statement (what will happen, under
 * which policy version and rule, until when) about one subject
 * (`withdrawal:<id>`, …). At most one request per subject is pending: opening
 * one for a changed statement supersedes the pending one, in the same
 * transaction; the same statement again returns the pending request as is.
 * A request moves pending → approved | rejected | expired | cancelled (by
 * `close`) or → superseded (by `open`), never back.
 *
 * An approval (or rejection) is recorded once per approver and request
 * (UNIQUE (request_id, approver): one approver counts once), only while the
 * request is pending and not past its expiry, and with an approve only
 * through an active credential of that approver. Approvals are append-only
 * (a trigger refuses UPDATE and DELETE).
 *
 * A credential (an approver's public key) is registered `pending`, becomes
 * `active` when an admin activates it (the service's seal is recorded then),
 * and may be `revoked`; a public key is registered once, ever.
 *
 * Verifying signatures and seals is the policy layer's (src/policy): this
 * keeps what it needs. Every change is audited in the same transaction:
 * `approval.requested`, `approval.superseded`, `approval.approve`,
 * `approval.reject`, `approval.closed`, `approval.result`,
 * `approver.registered`, `approver.activated`, `approver.revoked`.
 *
 * Events (the outbox, events.ts), appended last in the same transaction,
 * `data` the request as `GET /v1/approvals/{id}` shows it minus what the
 * policy layer computes (`missing`, `summary`, `transaction`):
 * `approval.required` when a request is opened, and when it ends
 * `approval.approved`, `approval.rejected`, `approval.expired`,
 * `approval.cancelled` or `approval.superseded`.
 *
 * One file on purpose: requests, approvals and credentials are three tables
 * whose writes check each other in one transaction (an approval needs its
 * request pending and its approver's credential active), so one repository owns
 * the three.
 */
import { randomUUID } from 'node:crypto';
import { type AuditEntry, appendAuditBatch } from '../audit.js';
import type { Json } from '../canonical.js';
import type { Db, Queryable } from '../db.js';
import {
  ApprovalStateError,
  BadRequestError,
  CredentialStateError,
  DuplicateApprovalError,
  DuplicateCredentialError,
  NotFoundError,
} from '../errors.js';
import { appendEvents, type EventInput } from './events.js';

export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'expired' | 'superseded' | 'cancelled';
/** Per approver group, how many distinct approvers (src/policy/evaluate.ts `Requirement`). */
export type ApprovalRequirement = { group: string; count: number }[];

export interface ApprovalRequest {
  id: string;
  subject: string;
  /** The statement the approvers sign (src/policy/approval.ts ApprovalStatement). */
  statement: Json;
  statementHash: string;
  party: string;
  requester: string;
  entryPoint: string;
  policyVersion: number;
  rule: string;
  requirement: ApprovalRequirement;
  status: ApprovalStatus;
  expiresAt: string;
  createdAt: string;
  decidedAt?: string;
  decidedBy?: string;
  reason?: string;
  /** What the flow needs to go on once approved. */
  resume?: Json;
  /** What going on produced. */
  result?: Json;
}

export interface NewApprovalRequest {
  /**
   * The request's id. Default: the statement's `request` when it names one
   * (the statement carries its request's id), else a new one.
   */
  id?: string;
  subject: string;
  statement: Json;
  statementHash: string;
  party: string;
  requester: string;
  entryPoint: string;
  policyVersion: number;
  rule: string;
  requirement: ApprovalRequirement;
  /** ISO time (or a Date). */
  expiresAt: string | Date;
  resume?: Json;
}

export type ApprovalDecision = 'approve' | 'reject';

export interface Approval {
  id: string;
  requestId: string;
  approver: string;
  credentialId?: string;
  decision: ApprovalDecision;
  reason?: string;
  /** base64 signature of the approval message by the credential's key. */
  signature?: string;
  createdAt: string;
}

export type CredentialKind = 'ed25519' | 'webauthn';
export type CredentialStatus = 'pending' | 'active' | 'revoked';

export interface Credential {
  id: string;
  approver: string;
  kind: CredentialKind;
  /** ed25519: 32 bytes raw, lowercase hex. */
  publicKey: string;
  label?: string;
  status: CredentialStatus;
  createdAt: string;
  activatedBy?: string;
  activatedAt?: string;
  /** The service's seal over the activated credential. */
  seal?: string;
}

/** Whether `text` reads as a stored passkey: a JSON object with a hex publicKey and a credentialId. */
function passkeyText(text: string): boolean {
  if (text.length === 0 || text.length > 10_000) return false;
  try {
    const o = JSON.parse(text) as Record<string, unknown>;
    return (
      o !== null &&
      typeof o === 'object' &&
      typeof o.publicKey === 'string' &&
      /^[0-9a-f]{64,1024}$/.test(o.publicKey) &&
      typeof o.credentialId === 'string'
    );
  } catch {
    return false;
  }
}

/** A credential's raw public key (hex) and, for a passkey, its credential id. */
function rawKeyOf(kind: CredentialKind, publicKey: string): { key: string; credentialId?: string } {
  if (kind !== 'webauthn') return { key: publicKey };
  try {
    const o = JSON.parse(publicKey) as { publicKey?: unknown; credentialId?: unknown };
    return {
      key: typeof o.publicKey === 'string' ? o.publicKey : publicKey,
      ...(typeof o.credentialId === 'string' ? { credentialId: o.credentialId } : {}),
    };
  } catch {
    return { key: publicKey };
  }
}

const REQUEST_COLUMNS = `id, subject, statement, statement_hash AS "statementHash", party, requester,
  entry_point AS "entryPoint", policy_version AS "policyVersion", rule, requirement, status,
  expires_at AS "expiresAt", created_at AS "createdAt", decided_at AS "decidedAt", decided_by AS "decidedBy",
  reason, resume, result`;

type RequestRow = Omit<ApprovalRequest, 'decidedAt' | 'decidedBy' | 'reason' | 'resume' | 'result'> & {
  decidedAt: string | null;
  decidedBy: string | null;
  reason: string | null;
  resume: Json | null;
  result: Json | null;
};

/** Drops the columns that are NULL (absent optional fields). */
function compact<T extends object>(row: Record<string, unknown>): T {
  return Object.fromEntries(Object.entries(row).filter(([, v]) => v !== null)) as T;
}

const requestFromRow = (r: RequestRow): ApprovalRequest => compact<ApprovalRequest>(r);

/**
 * An approval request as the REST API shows it (the fields of the server's
 * approval view that the store holds, same names): the `data` of its events.
 */
async function approvalEvent(tx: Queryable, type: string, r: ApprovalRequest): Promise<EventInput> {
  const answers = (
    await tx.query<{
      approver: string;
      decision: ApprovalDecision;
      credentialId: string | null;
      reason: string | null;
      at: string;
    }>(
      `SELECT approver, decision, credential_id AS "credentialId", reason, created_at AS at
         FROM approvals WHERE request_id = $1 ORDER BY created_at, id`,
      [r.id],
    )
  ).rows;
  return {
    type,
    subject: `approval:${r.id}`,
    data: {
      id: r.id,
      subject: r.subject,
      status: r.status,
      statement: r.statement,
      statementHash: r.statementHash,
      requirement: r.requirement,
      approvals: answers.map((a) => ({
        approver: a.approver,
        decision: a.decision,
        ...(a.credentialId ? { credentialId: a.credentialId } : {}),
        ...(a.reason ? { reason: a.reason } : {}),
        at: a.at,
      })),
      expiresAt: r.expiresAt,
      createdAt: r.createdAt,
      ...(r.decidedAt ? { decidedAt: r.decidedAt } : {}),
      ...(r.decidedBy ? { decidedBy: r.decidedBy } : {}),
      ...(r.reason ? { reason: r.reason } : {}),
      ...(r.result !== undefined && r.result !== null ? { result: r.result } : {}),
    },
  };
}

const APPROVAL_COLUMNS = `id, request_id AS "requestId", approver, credential_id AS "credentialId", decision,
  reason, signature, created_at AS "createdAt"`;

const CREDENTIAL_COLUMNS = `id, approver, kind, public_key AS "publicKey", label, status, created_at AS "createdAt",
  activated_by AS "activatedBy", activated_at AS "activatedAt", seal`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HEX64 = /^[0-9a-f]{64}$/;
const STATUSES: readonly ApprovalStatus[] = [
  'pending',
  'approved',
  'rejected',
  'expired',
  'superseded',
  'cancelled',
];

function text(v: unknown, field: string, max = 1000): string {
  if (typeof v !== 'string' || v.length < 1 || v.length > max || v.includes('\u0000'))
    throw new BadRequestError(field, `must be a string of 1..${max} characters without NUL`);
  return v;
}

function isoTime(v: unknown, field: string): string {
  const ms = v instanceof Date ? v.getTime() : typeof v === 'string' ? Date.parse(v) : Number.NaN;
  if (!Number.isFinite(ms)) throw new BadRequestError(field, 'must be an ISO-8601 time');
  return new Date(ms).toISOString();
}

function requirement(v: unknown): ApprovalRequirement {
  if (!Array.isArray(v) || v.length === 0)
    throw new BadRequestError('requirement', 'must list at least one {group, count}');
  return v.map((x: unknown, i) => {
    const g = x as { group?: unknown; count?: unknown };
    if (typeof g?.count !== 'number' || !Number.isSafeInteger(g.count) || g.count < 1)
      throw new BadRequestError(`requirement[${i}].count`, 'must be a whole number of at least 1');
    return { group: text(g.group, `requirement[${i}].group`, 200), count: g.count };
  });
}

export class ApprovalRepo {
  constructor(
    private readonly db: Db,
    private readonly opts: { actor?: string } = {},
  ) {}

  private actor(a?: string): string {
    return a ?? this.opts.actor ?? 'system';
  }

  // ---- requests -----------------------------------------------------------------------------

  /**
   * Opens the approval request of `subject` for this statement: the pending
   * one when its statement hash is the same (returned as is), else a new one
   * (`approval.requested`), the pending one with another hash superseded
   * first (`approval.superseded`), in one transaction. Concurrent opens for
   * one subject take turns (an advisory lock on the subject).
   */
  async open(req: NewApprovalRequest): Promise<ApprovalRequest> {
    const subject = text(req.subject, 'subject');
    if (typeof req.statementHash !== 'string' || !HEX64.test(req.statementHash))
      throw new BadRequestError('statementHash', 'must be 64 lowercase hex digits');
    if (req.statement === null || typeof req.statement !== 'object' || Array.isArray(req.statement))
      throw new BadRequestError('statement', 'must be an object');
    const named = (req.statement as { request?: unknown }).request;
    const id = req.id ?? (typeof named === 'string' && UUID.test(named) ? named : randomUUID());
    if (!UUID.test(id)) throw new BadRequestError('id', 'must be a lowercase uuid');
    if (typeof named === 'string' && named !== id)
      throw new BadRequestError('id', `the statement names request ${named}, not ${id}`);
    const policyVersion = req.policyVersion;
    if (!Number.isSafeInteger(policyVersion) || policyVersion < 0)
      throw new BadRequestError('policyVersion', 'must be a whole number of at least 0');
    const row = [
      id,
      subject,
      JSON.stringify(req.statement),
      req.statementHash,
      text(req.party, 'party'),
      text(req.requester, 'requester'),
      text(req.entryPoint, 'entryPoint', 200),
      policyVersion,
      text(req.rule, 'rule', 200),
      JSON.stringify(requirement(req.requirement)),
      isoTime(req.expiresAt, 'expiresAt'),
      req.resume === undefined ? null : JSON.stringify(req.resume),
    ];
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('cs-approval:' || $1::text, 0))`, [
        subject,
      ]);
      const cur = (
        await tx.query<RequestRow>(
          `SELECT ${REQUEST_COLUMNS} FROM approval_requests WHERE subject = $1 AND status = 'pending' FOR UPDATE`,
          [subject],
        )
      ).rows[0];
      if (cur && cur.statementHash === req.statementHash) return requestFromRow(cur);
      const audit: AuditEntry[] = [];
      const events: EventInput[] = [];
      if (cur) {
        if (cur.id === id)
          throw new BadRequestError(
            'id',
            `request ${id} is the pending request of ${subject} with another statement: a changed statement needs a new request id`,
          );
        const gone = await tx.query<RequestRow>(
          `UPDATE approval_requests SET status = 'superseded', decided_at = now(), decided_by = $2, reason = $3
            WHERE id = $1 RETURNING ${REQUEST_COLUMNS}`,
          [cur.id, req.requester, `superseded by request ${id}`],
        );
        if (gone.rows[0])
          events.push(await approvalEvent(tx, 'approval.superseded', requestFromRow(gone.rows[0])));
        audit.push({
          actor: req.requester,
          action: 'approval.superseded',
          subject,
          details: { request: cur.id, statementHash: cur.statementHash, supersededBy: id },
        });
      }
      const ins = await tx.query<RequestRow>(
        `INSERT INTO approval_requests (id, subject, statement, statement_hash, party, requester, entry_point,
           policy_version, rule, requirement, expires_at, resume)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (id) DO NOTHING
         RETURNING ${REQUEST_COLUMNS}`,
        row,
      );
      const created = ins.rows[0];
      if (!created)
        throw new BadRequestError('id', `approval request ${id} already exists: use a new request id`);
      const r = requestFromRow(created);
      audit.push({
        actor: req.requester,
        action: 'approval.requested',
        subject,
        details: {
          request: r.id,
          statementHash: r.statementHash,
          party: r.party,
          entryPoint: r.entryPoint,
          policyVersion: r.policyVersion,
          rule: r.rule,
          requirement: r.requirement,
          expiresAt: r.expiresAt,
        },
      });
      await appendAuditBatch(tx, audit);
      events.push(await approvalEvent(tx, 'approval.required', r));
      await appendEvents(tx, events);
      return r;
    });
  }

  async get(id: string, q: Queryable = this.db): Promise<ApprovalRequest | undefined> {
    if (!UUID.test(id)) return undefined;
    const r = await q.query<RequestRow>(`SELECT ${REQUEST_COLUMNS} FROM approval_requests WHERE id = $1`, [
      id,
    ]);
    return r.rows[0] ? requestFromRow(r.rows[0]) : undefined;
  }

  /** The subject's pending request, if any. */
  async pendingFor(subject: string): Promise<ApprovalRequest | undefined> {
    const r = await this.db.query<RequestRow>(
      `SELECT ${REQUEST_COLUMNS} FROM approval_requests WHERE subject = $1 AND status = 'pending'`,
      [subject],
    );
    return r.rows[0] ? requestFromRow(r.rows[0]) : undefined;
  }

  /** The subject's most recent request, whatever its status. */
  async latestFor(subject: string): Promise<ApprovalRequest | undefined> {
    const r = await this.db.query<RequestRow>(
      `SELECT ${REQUEST_COLUMNS} FROM approval_requests WHERE subject = $1
        ORDER BY created_at DESC, (status = 'pending') DESC, id DESC LIMIT 1`,
      [subject],
    );
    return r.rows[0] ? requestFromRow(r.rows[0]) : undefined;
  }

  /** Requests newest first, optionally of one status, created before `before` (ISO time). */
  async list(
    opts: { status?: ApprovalStatus; limit?: number; before?: string } = {},
  ): Promise<ApprovalRequest[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (opts.status !== undefined) {
      if (!STATUSES.includes(opts.status))
        throw new BadRequestError('status', `must be one of ${STATUSES.join(', ')}`);
      where.push(`status = $${params.push(opts.status)}`);
    }
    if (opts.before !== undefined) where.push(`created_at < $${params.push(isoTime(opts.before, 'before'))}`);
    const limit = Math.min(Math.max(Math.trunc(opts.limit ?? 100), 1), 500);
    const r = await this.db.query<RequestRow>(
      `SELECT ${REQUEST_COLUMNS} FROM approval_requests ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY created_at DESC, id DESC LIMIT $${params.push(limit)}`,
      params,
    );
    return r.rows.map(requestFromRow);
  }

  /** How many requests are pending (the metrics' gauge). */
  async countPending(): Promise<number> {
    const r = await this.db.query<{ n: string | number }>(
      `SELECT count(*) AS n FROM approval_requests WHERE status = 'pending'`,
    );
    return Number(r.rows[0]?.n ?? 0);
  }

  /**
   * Records an approver's approval or rejection of a pending, unexpired
   * request (`approval.approve` / `approval.reject`). An approve needs an
   * active credential of this approver and a signature. A second decision
   * by the same approver: DuplicateApprovalError (one approver counts once).
   */
  async record(a: {
    requestId: string;
    approver: string;
    credentialId?: string;
    decision: ApprovalDecision;
    reason?: string;
    signature?: string;
  }): Promise<Approval> {
    if (a.decision !== 'approve' && a.decision !== 'reject')
      throw new BadRequestError('decision', 'must be approve or reject');
    const approver = text(a.approver, 'approver');
    if (a.credentialId !== undefined && !UUID.test(a.credentialId))
      throw new BadRequestError('credentialId', 'must be a credential id (a lowercase uuid)');
    if (a.decision === 'approve' && (a.credentialId === undefined || a.signature === undefined))
      throw new BadRequestError(
        a.credentialId === undefined ? 'credentialId' : 'signature',
        'an approval is made with a credential and its signature',
      );
    const signature = a.signature === undefined ? null : text(a.signature, 'signature', 10_000);
    const reason = a.reason === undefined ? null : text(a.reason, 'reason', 4096);
    if (!UUID.test(a.requestId)) throw new NotFoundError(`approval request ${a.requestId}`);
    return this.db.transaction(async (tx) => {
      const req = (
        await tx.query<{
          status: ApprovalStatus;
          subject: string;
          statementHash: string;
          lapsed: boolean;
          expiresAt: string;
        }>(
          `SELECT status, subject, statement_hash AS "statementHash", expires_at <= now() AS lapsed,
                  expires_at AS "expiresAt"
             FROM approval_requests WHERE id = $1 FOR UPDATE`,
          [a.requestId],
        )
      ).rows[0];
      if (!req) throw new NotFoundError(`approval request ${a.requestId}`);
      if (req.status !== 'pending') throw new ApprovalStateError(a.requestId, req.status, a.decision);
      if (req.lapsed)
        throw new ApprovalStateError(
          a.requestId,
          'expired',
          a.decision,
          `approval request ${a.requestId} expired at ${req.expiresAt}: it can no longer be approved or rejected; the requester must ask again`,
        );
      if (a.credentialId !== undefined) {
        const c = (
          await tx.query<{ approver: string; status: CredentialStatus }>(
            'SELECT approver, status FROM approver_credentials WHERE id = $1',
            [a.credentialId],
          )
        ).rows[0];
        if (!c || c.approver !== approver || c.status !== 'active')
          throw new BadRequestError(
            'credentialId',
            `credential ${a.credentialId} is not an active credential of approver ${approver}${c && c.approver === approver ? ` (it is ${c.status})` : ''}: register a key and have an admin activate it`,
          );
      }
      const ins = await tx.query<Approval>(
        `INSERT INTO approvals (id, request_id, approver, credential_id, decision, reason, signature)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (request_id, approver) DO NOTHING
         RETURNING ${APPROVAL_COLUMNS}`,
        [randomUUID(), a.requestId, approver, a.credentialId ?? null, a.decision, reason, signature],
      );
      const row = ins.rows[0];
      if (!row) {
        const earlier = (
          await tx.query<{ decision: ApprovalDecision }>(
            'SELECT decision FROM approvals WHERE request_id = $1 AND approver = $2',
            [a.requestId, approver],
          )
        ).rows[0];
        throw new DuplicateApprovalError(a.requestId, approver, earlier?.decision ?? a.decision);
      }
      const approval = compact<Approval>(row as unknown as Record<string, unknown>);
      await appendAuditBatch(tx, [
        {
          actor: approver,
          action: `approval.${a.decision}`,
          subject: req.subject,
          details: {
            request: a.requestId,
            statementHash: req.statementHash,
            approval: approval.id,
            ...(approval.credentialId !== undefined ? { credential: approval.credentialId } : {}),
            ...(approval.signature !== undefined ? { signature: approval.signature } : {}),
            ...(approval.reason !== undefined ? { reason: approval.reason } : {}),
          },
        },
      ]);
      return approval;
    });
  }

  /** The approvals and rejections recorded for a request, in the order given. */
  async approvalsOf(requestId: string): Promise<Approval[]> {
    if (!UUID.test(requestId)) return [];
    const r = await this.db.query<Record<string, unknown>>(
      `SELECT ${APPROVAL_COLUMNS} FROM approvals WHERE request_id = $1 ORDER BY created_at, id`,
      [requestId],
    );
    return r.rows.map((x) => compact<Approval>(x));
  }

  /**
   * Closes a pending request (`approval.closed`): approved, rejected, expired
   * or cancelled. ApprovalStateError when it is not pending any more.
   */
  async close(
    id: string,
    to: 'approved' | 'rejected' | 'expired' | 'cancelled',
    opts: { actor?: string; reason?: string } = {},
  ): Promise<ApprovalRequest> {
    if (!['approved', 'rejected', 'expired', 'cancelled'].includes(to))
      throw new BadRequestError('to', 'must be approved, rejected, expired or cancelled');
    const reason = opts.reason === undefined ? null : text(opts.reason, 'reason', 4096);
    const actor = this.actor(opts.actor);
    if (!UUID.test(id)) throw new NotFoundError(`approval request ${id}`);
    return this.db.transaction(async (tx) => {
      const r = await tx.query<RequestRow>(
        `UPDATE approval_requests SET status = $2, decided_at = now(), decided_by = $3, reason = $4
          WHERE id = $1 AND status = 'pending' RETURNING ${REQUEST_COLUMNS}`,
        [id, to, actor, reason],
      );
      const row = r.rows[0];
      if (!row) {
        const cur = await this.get(id, tx);
        if (!cur) throw new NotFoundError(`approval request ${id}`);
        throw new ApprovalStateError(id, cur.status, `close (${to})`);
      }
      const closed = requestFromRow(row);
      await appendAuditBatch(tx, [
        {
          actor,
          action: 'approval.closed',
          subject: closed.subject,
          details: {
            request: id,
            to,
            statementHash: closed.statementHash,
            ...(reason !== null ? { reason } : {}),
          },
        },
      ]);
      await appendEvents(tx, [await approvalEvent(tx, `approval.${to}`, closed)]);
      return closed;
    });
  }

  /**
   * A new policy version came into force: the pending requests opened under
   * an older one end `superseded` (audited `approval.superseded`), so that
   * nobody approves what the policy in force no longer asks; each is asked
   * again under the new version when its flow decides again. Requests for
   * policy changes are left as they are.
   */
  async supersedeBefore(version: number, opts: { actor?: string } = {}): Promise<ApprovalRequest[]> {
    const actor = this.actor(opts.actor);
    return this.db.transaction(async (tx) => {
      const r = await tx.query<RequestRow>(
        `UPDATE approval_requests SET status = 'superseded', decided_at = now(), decided_by = $2, reason = $3
          WHERE status = 'pending' AND policy_version < $1 AND entry_point <> 'policy-change'
          RETURNING ${REQUEST_COLUMNS}`,
        [version, actor, `policy version ${version} came into force`],
      );
      const rows = r.rows.map(requestFromRow);
      if (rows.length > 0)
        await appendAuditBatch(
          tx,
          rows.map((x) => ({
            actor,
            action: 'approval.superseded',
            subject: x.subject,
            details: { request: x.id, statementHash: x.statementHash, policyVersion: version },
          })),
        );
      const events: EventInput[] = [];
      for (const x of rows) events.push(await approvalEvent(tx, 'approval.superseded', x));
      await appendEvents(tx, events);
      return rows;
    });
  }

  /**
   * Records what the service runs once the pending request is approved (a
   * synchronous request that answered 202): kept until then, never audited
   * (it is the caller's request, journalled by its flow when it runs).
   */
  async setResume(id: string, resume: Json): Promise<void> {
    if (!UUID.test(id)) throw new NotFoundError(`approval request ${id}`);
    await this.db.query(
      `UPDATE approval_requests SET resume = $2 WHERE id = $1 AND status = 'pending' AND resume IS NULL`,
      [id, JSON.stringify(resume)],
    );
  }

  /** Records what going on after the request produced (`approval.result`). */
  async setResult(id: string, result: Json, opts: { actor?: string } = {}): Promise<ApprovalRequest> {
    if (!UUID.test(id)) throw new NotFoundError(`approval request ${id}`);
    return this.db.transaction(async (tx) => {
      const r = await tx.query<RequestRow>(
        `UPDATE approval_requests SET result = $2 WHERE id = $1 RETURNING ${REQUEST_COLUMNS}`,
        [id, JSON.stringify(result)],
      );
      const row = r.rows[0];
      if (!row) throw new NotFoundError(`approval request ${id}`);
      await appendAuditBatch(tx, [
        {
          actor: this.actor(opts.actor),
          action: 'approval.result',
          subject: row.subject,
          details: { request: id, result },
        },
      ]);
      return requestFromRow(row);
    });
  }

  /** Pending requests whose expiry is at or before `now`, soonest first (at most `limit`). */
  async due(now: Date | string, limit = 500): Promise<ApprovalRequest[]> {
    const r = await this.db.query<RequestRow>(
      `SELECT ${REQUEST_COLUMNS} FROM approval_requests WHERE status = 'pending' AND expires_at <= $1
        ORDER BY expires_at, id LIMIT $2`,
      [isoTime(now, 'now'), Math.min(Math.max(Math.trunc(limit), 1), 1000)],
    );
    return r.rows.map(requestFromRow);
  }

  // ---- credentials --------------------------------------------------------------------------

  /** Registers an approver's public key, pending until activated (`approver.registered`). */
  async registerCredential(c: {
    approver: string;
    kind: CredentialKind;
    publicKey: string;
    label?: string;
  }): Promise<Credential> {
    const approver = text(c.approver, 'approver');
    if (c.kind !== 'ed25519' && c.kind !== 'webauthn')
      throw new BadRequestError('kind', 'must be ed25519 or webauthn');
    // An Ed25519 key's hex is kept lower-case; a passkey's text (base64url inside) exactly as given.
    const publicKey =
      typeof c.publicKey !== 'string' ? '' : c.kind === 'ed25519' ? c.publicKey.toLowerCase() : c.publicKey;
    if (c.kind === 'ed25519' && !HEX64.test(publicKey))
      throw new BadRequestError('publicKey', 'must be the 32-byte Ed25519 public key in hex (64 digits)');
    if (c.kind === 'webauthn' && !passkeyText(publicKey))
      throw new BadRequestError(
        'publicKey',
        "must be the passkey's JSON (credentialId, alg, publicKey, rpId, origin)",
      );
    const label = c.label === undefined ? null : text(c.label, 'label', 200);
    return this.db.transaction(async (tx) => {
      const r = await tx.query<Record<string, unknown>>(
        `INSERT INTO approver_credentials (id, approver, kind, public_key, label) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING RETURNING ${CREDENTIAL_COLUMNS}`,
        [randomUUID(), approver, c.kind, publicKey, label],
      );
      const row = r.rows[0];
      if (!row) {
        // The same key (of either kind) or the same passkey credential id is registered already.
        const raw = rawKeyOf(c.kind, publicKey);
        const existing = await tx.query<{ id: string }>(
          `SELECT id FROM approver_credentials
            WHERE (CASE WHEN kind = 'webauthn' THEN public_key::jsonb ->> 'publicKey' ELSE public_key END) = $1
               OR (kind = 'webauthn' AND public_key::jsonb ->> 'credentialId' = $2)
            LIMIT 1`,
          [raw.key, raw.credentialId ?? ''],
        );
        throw new DuplicateCredentialError(existing.rows[0]?.id ?? 'unknown');
      }
      const cred = compact<Credential>(row);
      await appendAuditBatch(tx, [
        {
          actor: approver,
          action: 'approver.registered',
          subject: `approver:${approver}`,
          details: {
            credential: cred.id,
            kind: cred.kind,
            publicKey: cred.publicKey,
            ...(cred.label !== undefined ? { label: cred.label } : {}),
          },
        },
      ]);
      return cred;
    });
  }

  /** A pending credential made active with the service's seal (`approver.activated`). */
  async activateCredential(id: string, opts: { actor?: string; seal: string }): Promise<Credential> {
    const seal = text(opts.seal, 'seal', 10_000);
    return this.moveCredential(id, ['pending'], 'active', this.actor(opts.actor), seal);
  }

  /** A pending or active credential revoked: it never counts again (`approver.revoked`). */
  async revokeCredential(id: string, opts: { actor?: string } = {}): Promise<Credential> {
    return this.moveCredential(id, ['pending', 'active'], 'revoked', this.actor(opts.actor));
  }

  private async moveCredential(
    id: string,
    from: CredentialStatus[],
    to: 'active' | 'revoked',
    actor: string,
    seal?: string,
  ): Promise<Credential> {
    if (!UUID.test(id)) throw new NotFoundError(`approver credential ${id}`);
    return this.db.transaction(async (tx) => {
      const r = await tx.query<Record<string, unknown> & { from: CredentialStatus }>(
        `WITH cur AS (SELECT id, status FROM approver_credentials WHERE id = $1 FOR UPDATE)
         UPDATE approver_credentials c SET status = $3,
             activated_by = CASE WHEN $3 = 'active' THEN $4 ELSE c.activated_by END,
             activated_at = CASE WHEN $3 = 'active' THEN now() ELSE c.activated_at END,
             seal = CASE WHEN $3 = 'active' THEN $5 ELSE NULL END
           FROM cur
          WHERE c.id = cur.id AND cur.status = ANY($2::text[])
         RETURNING c.id, c.approver, c.kind, c.public_key AS "publicKey", c.label, c.status,
             c.created_at AS "createdAt", c.activated_by AS "activatedBy", c.activated_at AS "activatedAt", c.seal,
             cur.status AS "from"`,
        [id, from, to, actor, seal ?? null],
      );
      const row = r.rows[0];
      if (!row) {
        const cur = await this.credential(id, tx);
        if (!cur) throw new NotFoundError(`approver credential ${id}`);
        throw new CredentialStateError(id, cur.status, to);
      }
      const { from: was, ...rest } = row;
      const cred = compact<Credential>(rest);
      await appendAuditBatch(tx, [
        {
          actor,
          action: to === 'active' ? 'approver.activated' : 'approver.revoked',
          subject: `approver:${cred.approver}`,
          details: { credential: id, from: was, to, kind: cred.kind, publicKey: cred.publicKey },
        },
      ]);
      return cred;
    });
  }

  async credential(id: string, q: Queryable = this.db): Promise<Credential | undefined> {
    if (!UUID.test(id)) return undefined;
    const r = await q.query<Record<string, unknown>>(
      `SELECT ${CREDENTIAL_COLUMNS} FROM approver_credentials WHERE id = $1`,
      [id],
    );
    return r.rows[0] ? compact<Credential>(r.rows[0]) : undefined;
  }

  /** Credentials, oldest first, optionally of one approver and/or one status. */
  async credentials(opts: { approver?: string; status?: CredentialStatus } = {}): Promise<Credential[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (opts.approver !== undefined) where.push(`approver = $${params.push(opts.approver)}`);
    if (opts.status !== undefined) where.push(`status = $${params.push(opts.status)}`);
    const r = await this.db.query<Record<string, unknown>>(
      `SELECT ${CREDENTIAL_COLUMNS} FROM approver_credentials ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY created_at, id`,
      params,
    );
    return r.rows.map((x) => compact<Credential>(x));
  }
}

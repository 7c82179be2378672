/**
 * Policy versions and limit usage (migration 7).
 *
 * Versions: each policy document as loaded, numbered from 1, with the
 * SHA-256 of its exact text. A version is added `in_force` (the one before
 * becomes `superseded` in the same transaction) or `pending` (waiting for
 * the approvals a policy change needs; then `decide` puts it in force or
 * rejects it). At most one version is in force (a partial unique index).
 * Every change is audited in the same transaction (`policy.version`,
 * `policy.decided`, `policy.sealed`).
 *
 * Usage: what each limit's window holds, one row per (subject, limit key).
 * `reserve` is one round trip, `SELECT policy_reserve($1)`: the function
 * locks every limit key (transaction-scoped advisory locks, in sorted order)
 * and only then sums the rows of each key that are not released and fall in
 * the window, leaving out the subject's own; when every check fits (or the
 * mode is `always`) it writes the subject's rows as `reserved`. Two
 * instances reserving against one limit are serialised on its key, and each
 * sums what the ones before it committed (see the migration). `settle` moves
 * a subject's reserved rows to `committed` (it happened: it counts for the
 * rest of the window, and `paidBefore` knows the receiver) or `released` (it
 * did not: it no longer counts). Reservations and settlements are not
 * audited here: the decision that carries the usage figures is.
 *
 * Amounts are decimal strings (numeric(38, 10) in SQL), never JS numbers;
 * sums come back canonical ("12.5", "0").
 */
import { appendAuditBatch } from '../audit.js';
import type { Db, Queryable } from '../db.js';
import { BadRequestError, NotFoundError, PolicyVersionStateError } from '../errors.js';

export type PolicyFormat = 'yaml' | 'json';
export type PolicySource = 'file' | 'api' | 'builtin';
export type PolicyStatus = 'in_force' | 'pending' | 'superseded' | 'rejected';

export interface PolicyVersion {
  version: number;
  sha256: string;
  /** The document exactly as loaded. */
  text: string;
  format: PolicyFormat;
  source: PolicySource;
  status: PolicyStatus;
  createdBy: string;
  createdAt: string;
  /** When it went in force, or was rejected; absent while pending. */
  decidedAt?: string;
  /** The service's seal over (version, sha256), once sealed. */
  seal?: string;
}

export interface NewPolicyVersion {
  text: string;
  format: PolicyFormat;
  sha256: string;
  source: PolicySource;
  status: 'in_force' | 'pending';
  createdBy: string;
  seal?: string;
}

/** What a limit's window holds (or what a subject adds to it). */
export interface Usage {
  /** Canonical decimal string. */
  amount: string;
  count: number;
}

/** One limit key a subject counts towards (src/policy/evaluate.ts LimitCheck has these fields). */
export interface ReserveCheck {
  key: string;
  limit: string;
  windowMs: number;
  maxAmount?: string;
  maxCount?: number;
  adding: Usage;
}

export interface Reservation {
  /** What is reserved for: `withdrawal:<id>`, `command:<id>`, … */
  subject: string;
  policyVersion: number;
  party: string;
  caller?: string;
  receiver?: string;
  checks: readonly ReserveCheck[];
  /** `if-fits`: written only when every check fits; `always`: written anyway (e.g. after an approval). */
  mode: 'if-fits' | 'always';
}

export interface ReserveResult {
  /** Whether every check fits (used + adding within its maxima). */
  fits: boolean;
  /** Per key: what the window held before adding, the subject's own rows left out. */
  usage: Map<string, Usage>;
  /** The policy version in force when it ran (null: none stored). */
  inForce: number | null;
  /** Its place in the order of the writes to usage (drawn under the keys' locks). */
  serial: number;
}

interface VersionRow {
  version: number;
  sha256: string;
  text: string;
  format: PolicyFormat;
  source: PolicySource;
  status: PolicyStatus;
  created_by: string;
  created_at: string;
  decided_at: string | null;
  seal: string | null;
}

function fromRow(r: VersionRow): PolicyVersion {
  return {
    version: r.version,
    sha256: r.sha256,
    text: r.text,
    format: r.format,
    source: r.source,
    status: r.status,
    createdBy: r.created_by,
    createdAt: r.created_at,
    ...(r.decided_at !== null ? { decidedAt: r.decided_at } : {}),
    ...(r.seal !== null ? { seal: r.seal } : {}),
  };
}

const HEX64 = /^[0-9a-f]{64}$/;
/** A non-negative amount numeric(38, 10) holds exactly. */
const AMOUNT = /^[0-9]{1,28}(?:\.[0-9]{1,10})?$/;

/** A decimal string as the database returns it ("12.5000000000") → canonical ("12.5", "0"). */
export function canonicalAmount(text: string): string {
  const [int = '0', frac = ''] = text.split('.');
  const i = int.replace(/^0+(?=\d)/, '');
  const f = frac.replace(/0+$/, '');
  return f ? `${i}.${f}` : i;
}

function amount(v: unknown, field: string): string {
  if (typeof v !== 'string' || !AMOUNT.test(v))
    throw new BadRequestError(
      field,
      'must be a non-negative decimal string with at most 28 digits and 10 decimals (never a number)',
    );
  return v;
}

function whole(v: unknown, field: string, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    throw new BadRequestError(field, `must be a whole number of at least ${min}`);
  return v;
}

function text(v: unknown, field: string, max = 1000): string {
  if (typeof v !== 'string' || v.length < 1 || v.length > max || v.includes('\u0000'))
    throw new BadRequestError(field, `must be a string of 1..${max} characters without NUL`);
  return v;
}

/** The checks as sent to SQL: only the fields it reads, validated; keys distinct. */
function cleanChecks(checks: readonly Pick<ReserveCheck, 'key' | 'windowMs'>[], full: boolean) {
  if (!Array.isArray(checks)) throw new BadRequestError('checks', 'must be a list');
  const seen = new Set<string>();
  return checks.map((c, i) => {
    const key = text(c.key, `checks[${i}].key`);
    if (seen.has(key))
      throw new BadRequestError(`checks[${i}].key`, `${key} is listed twice: one check per limit key`);
    seen.add(key);
    const windowMs = whole(c.windowMs, `checks[${i}].windowMs`, 1);
    if (!full) return { key, windowMs };
    const f = c as ReserveCheck;
    return {
      key,
      windowMs,
      limit: text(f.limit, `checks[${i}].limit`),
      maxAmount: f.maxAmount === undefined ? null : amount(f.maxAmount, `checks[${i}].maxAmount`),
      maxCount: f.maxCount === undefined ? null : whole(f.maxCount, `checks[${i}].maxCount`, 0),
      adding: {
        amount: amount(f.adding?.amount, `checks[${i}].adding.amount`),
        count: whole(f.adding?.count, `checks[${i}].adding.count`, 0),
      },
    };
  });
}

function usageMap(raw: Record<string, { amount: string; count: number | string }>): Map<string, Usage> {
  const out = new Map<string, Usage>();
  for (const [key, u] of Object.entries(raw))
    out.set(key, { amount: canonicalAmount(String(u.amount)), count: Number(u.count) });
  return out;
}

const VERSION_LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('cs-policy-versions', 0))`;

export class PolicyRepo {
  constructor(
    private readonly db: Db,
    private readonly opts: { actor?: string } = {},
  ) {}

  private actor(a?: string): string {
    return a ?? this.opts.actor ?? 'system';
  }

  /**
   * Adds the next version (number: the highest so far + 1). `in_force`: the
   * version in force until now becomes `superseded` in the same transaction.
   * Audited `policy.version`.
   */
  async addVersion(v: NewPolicyVersion): Promise<PolicyVersion> {
    if (typeof v.text !== 'string' || v.text.length === 0 || v.text.includes('\u0000'))
      throw new BadRequestError('text', 'must be the non-empty document text, without NUL');
    if (v.format !== 'yaml' && v.format !== 'json')
      throw new BadRequestError('format', 'must be yaml or json');
    if (typeof v.sha256 !== 'string' || !HEX64.test(v.sha256))
      throw new BadRequestError('sha256', 'must be 64 lowercase hex digits');
    if (!['file', 'api', 'builtin'].includes(v.source))
      throw new BadRequestError('source', 'must be file, api or builtin');
    if (v.status !== 'in_force' && v.status !== 'pending')
      throw new BadRequestError('status', 'a new version is in_force or pending');
    const createdBy = text(v.createdBy, 'createdBy');
    return this.db.transaction(async (tx) => {
      // Versions are numbered one after the other: concurrent adds take turns.
      await tx.query(VERSION_LOCK);
      const superseded =
        v.status === 'in_force'
          ? (
              await tx.query<{ version: number }>(
                `UPDATE policy_versions SET status = 'superseded' WHERE status = 'in_force' RETURNING version`,
              )
            ).rows[0]?.version
          : undefined;
      const r = await tx.query<VersionRow>(
        `INSERT INTO policy_versions (version, sha256, text, format, source, status, created_by, decided_at, seal)
         SELECT coalesce(max(version), 0) + 1, $1, $2, $3, $4, $5, $6,
                CASE WHEN $5 = 'in_force' THEN now() END, $7
           FROM policy_versions
         RETURNING *`,
        [v.sha256, v.text, v.format, v.source, v.status, createdBy, v.seal ?? null],
      );
      const p = fromRow(r.rows[0]!);
      await appendAuditBatch(tx, [
        {
          actor: createdBy,
          action: 'policy.version',
          subject: `policy:${p.version}`,
          details: {
            version: p.version,
            sha256: p.sha256,
            format: p.format,
            source: p.source,
            status: p.status,
            sealed: p.seal !== undefined,
            ...(superseded !== undefined ? { superseded } : {}),
          },
        },
      ]);
      return p;
    });
  }

  async inForce(q: Queryable = this.db): Promise<PolicyVersion | undefined> {
    const r = await q.query<VersionRow>(`SELECT * FROM policy_versions WHERE status = 'in_force'`);
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  async get(version: number, q: Queryable = this.db): Promise<PolicyVersion | undefined> {
    if (!Number.isSafeInteger(version) || version < 1 || version > 2 ** 31 - 1) return undefined;
    const r = await q.query<VersionRow>('SELECT * FROM policy_versions WHERE version = $1', [version]);
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  /** Every version, newest first. */
  async list(): Promise<PolicyVersion[]> {
    const r = await this.db.query<VersionRow>('SELECT * FROM policy_versions ORDER BY version DESC');
    return r.rows.map(fromRow);
  }

  /**
   * A pending version put in force (the one in force becomes superseded) or
   * rejected; PolicyVersionStateError when it is not pending. Audited
   * `policy.decided`.
   */
  async decide(
    version: number,
    to: 'in_force' | 'rejected',
    opts: { actor?: string; seal?: string } = {},
  ): Promise<PolicyVersion> {
    if (to !== 'in_force' && to !== 'rejected')
      throw new BadRequestError('to', 'must be in_force or rejected');
    return this.db.transaction(async (tx) => {
      await tx.query(VERSION_LOCK);
      const cur = await this.get(version, tx);
      if (!cur) throw new NotFoundError(`policy version ${version}`);
      if (cur.status !== 'pending') throw new PolicyVersionStateError(version, cur.status, to);
      const superseded =
        to === 'in_force'
          ? (
              await tx.query<{ version: number }>(
                `UPDATE policy_versions SET status = 'superseded' WHERE status = 'in_force' RETURNING version`,
              )
            ).rows[0]?.version
          : undefined;
      const r = await tx.query<VersionRow>(
        `UPDATE policy_versions SET status = $2, decided_at = now(), seal = coalesce($3, seal)
          WHERE version = $1 AND status = 'pending' RETURNING *`,
        [version, to, opts.seal ?? null],
      );
      const p = fromRow(r.rows[0]!);
      await appendAuditBatch(tx, [
        {
          actor: this.actor(opts.actor),
          action: 'policy.decided',
          subject: `policy:${version}`,
          details: {
            version,
            sha256: p.sha256,
            from: 'pending',
            to,
            sealed: p.seal !== undefined,
            ...(superseded !== undefined ? { superseded } : {}),
          },
        },
      ]);
      return p;
    });
  }

  /** Records the service's seal of a version (audited `policy.sealed`). */
  async setSeal(version: number, seal: string, opts: { actor?: string } = {}): Promise<PolicyVersion> {
    const s = text(seal, 'seal', 10_000);
    if (!Number.isSafeInteger(version) || version < 1 || version > 2 ** 31 - 1)
      throw new NotFoundError(`policy version ${version}`);
    return this.db.transaction(async (tx) => {
      const r = await tx.query<VersionRow>(
        'UPDATE policy_versions SET seal = $2 WHERE version = $1 RETURNING *',
        [version, s],
      );
      const row = r.rows[0];
      if (!row) throw new NotFoundError(`policy version ${version}`);
      await appendAuditBatch(tx, [
        {
          actor: this.actor(opts.actor),
          action: 'policy.sealed',
          subject: `policy:${version}`,
          details: { version, sha256: row.sha256 },
        },
      ]);
      return fromRow(row);
    });
  }

  /**
   * Reserves the subject's usage against its limits, in one round trip (see
   * the header): the usage each key held before (the subject's own rows left
   * out), whether all fit, and the version in force then. Written when all
   * fit, or always with mode `always`; a written reservation replaces the
   * subject's earlier one (keys it no longer counts towards are released; a
   * committed row stays as it is).
   */
  async reserve(r: Reservation): Promise<ReserveResult> {
    if (r.mode !== 'if-fits' && r.mode !== 'always')
      throw new BadRequestError('mode', 'must be if-fits or always');
    const arg = {
      subject: text(r.subject, 'subject'),
      policyVersion: whole(r.policyVersion, 'policyVersion', 0),
      party: text(r.party, 'party'),
      caller: r.caller === undefined ? null : text(r.caller, 'caller'),
      receiver: r.receiver === undefined ? null : text(r.receiver, 'receiver'),
      mode: r.mode,
      checks: cleanChecks(r.checks, true),
    };
    const out = await this.db.query<{
      r: {
        fits: boolean;
        usage: Record<string, { amount: string; count: number }>;
        inForce: number | null;
        serial: number;
      };
    }>('SELECT policy_reserve($1::jsonb) AS r', [JSON.stringify(arg)]);
    const res = out.rows[0]!.r;
    return { fits: res.fits, usage: usageMap(res.usage), inForce: res.inForce, serial: Number(res.serial) };
  }

  /** What each key's window holds now (read only: a dry run), optionally leaving one subject out. */
  async usage(
    checks: readonly Pick<ReserveCheck, 'key' | 'windowMs'>[],
    excludeSubject?: string,
  ): Promise<Map<string, Usage>> {
    const clean = cleanChecks(checks, false);
    if (clean.length === 0) return new Map();
    const r = await this.db.query<{ key: string; amount: string; count: number }>(
      `SELECT c.key, coalesce(sum(u.amount), 0)::text AS amount, coalesce(sum(u.count), 0)::int8 AS count
         FROM jsonb_to_recordset($1::jsonb) AS c(key text, "windowMs" bigint)
         LEFT JOIN policy_usage u ON u.limit_key = c.key AND u.state <> 'released'
              AND u.at > now() - c."windowMs" * interval '1 millisecond'
              AND ($2::text IS NULL OR u.subject <> $2::text)
        GROUP BY c.key`,
      [JSON.stringify(clean), excludeSubject ?? null],
    );
    return usageMap(Object.fromEntries(r.rows.map((x) => [x.key, x])));
  }

  /** The subject's reserved rows → committed or released (rows in another state are left as they are). */
  async settle(subject: string, to: 'committed' | 'released'): Promise<void> {
    if (to !== 'committed' && to !== 'released')
      throw new BadRequestError('to', 'must be committed or released');
    await this.db.query('SELECT policy_settle($1, $2) AS n', [text(subject, 'subject'), to]);
  }

  /**
   * Those of `receivers` this party has paid before: a committed usage row
   * names them, or a committed withdrawal of the party went to them (its
   * offer not returned) — so that a policy without limits (no usage rows),
   * and the withdrawals made before policies existed, know them too.
   */
  async paidBefore(party: string, receivers: readonly string[]): Promise<Set<string>> {
    if (receivers.length === 0) return new Set();
    const r = await this.db.query<{ receiver: string }>(
      `SELECT receiver FROM policy_usage
        WHERE party = $1 AND state = 'committed' AND receiver = ANY($2::text[])
       UNION
       SELECT receiver FROM withdrawals
        WHERE party = $1 AND state = 'committed' AND receiver = ANY($2::text[])
          AND delivery IS DISTINCT FROM 'returned'`,
      [party, [...receivers]],
    );
    return new Set(r.rows.map((x) => x.receiver));
  }
}

/**
 * The tamper-evident audit log: an append-only hash chain of every request
 * that changes state, every refusal and every signature (the repositories
 * and DbRecorder append to it in the same transaction as the change).
 *
 * Row: (seq, at, actor, action, subject, details, prev_hash, hash) with
 *   hash = SHA-256( "canton-signer/audit@1\n" ‖ canonicalJson({seq, at,
 *          actor, action, subject, details, prev_hash}) )
 * (canonical.ts; `at` is the ISO-8601 UTC string with milliseconds,
 * `subject` null when absent, `prev_hash` of the first row 64 zeros).
 * `seq` is contiguous from 1 (assigned from the head, not a sequence: a
 * rolled-back append leaves no gap, so a missing seq means a removed row).
 *
 * Appends are serialised across every process sharing the database by
 * `SELECT … FOR UPDATE` on the single `audit_head` row, which also records
 * the last (seq, hash), so that removing rows at the end is detected too.
 * Append last in a transaction: the head lock is then held only until commit.
 *
 * What the chain proves: rows edited, removed, inserted or reordered in the
 * database by someone who does not recompute every later hash and the head.
 * An attacker with write access can rewrite the whole chain; anchoring the
 * head (`audit verify --json` prints it) outside the database closes that.
 */
import { canonicalJson, type Json, sha256Hex, storable, unstorableText } from './canonical.js';
import type { Db, Queryable } from './db.js';
import { later } from './deferred.js';

export const AUDIT_GENESIS = '0'.repeat(64);
const DOMAIN = 'canton-signer/audit@1\n';

export interface AuditEntry {
  /** Who: the authenticated subject, or `system` / a service name. */
  actor: string;
  /** What, dotted: `withdrawal.create`, `withdrawal.signed`, `flow.refused`, `key.put`, … */
  action: string;
  /** What it is about: `withdrawal:<id>`, `party:<id>`, `key:<label>`, `command:<id>`. */
  subject?: string | null;
  /** Facts of the decision (hash signed, reason, …); never secrets. */
  details?: Record<string, unknown>;
}

export interface AuditRow {
  seq: number;
  at: string;
  actor: string;
  action: string;
  subject: string | null;
  details: Json;
  prevHash: string;
  hash: string;
}

interface AuditDbRow {
  seq: number;
  at: string;
  actor: string;
  action: string;
  subject: string | null;
  details: Json;
  prev_hash: string;
  hash: string;
}

const COLUMNS = 'seq, at, actor, action, subject, details, prev_hash, hash';

function fromDb(r: AuditDbRow): AuditRow {
  return {
    seq: r.seq,
    at: r.at,
    actor: r.actor,
    action: r.action,
    subject: r.subject,
    details: r.details,
    prevHash: r.prev_hash,
    hash: r.hash,
  };
}

/** The hash of a row given its details as canonical JSON text (no re-canonicalisation). */
function hashWithDetails(r: Omit<AuditRow, 'hash' | 'details'>, detailsCanonical: string): string {
  // canonicalJson({seq, at, actor, action, subject, details, prev_hash}), keys in sorted order
  return sha256Hex(
    `${DOMAIN}{"action":${JSON.stringify(r.action)},"actor":${JSON.stringify(r.actor)},"at":${JSON.stringify(
      r.at,
    )},"details":${detailsCanonical},"prev_hash":${JSON.stringify(r.prevHash)},"seq":${canonicalJson(
      r.seq,
    )},"subject":${r.subject === null ? 'null' : JSON.stringify(r.subject)}}`,
  );
}

/** The hash of one row's contents (everything but the hash itself). */
export function auditHash(r: Omit<AuditRow, 'hash'>): string {
  return hashWithDetails(r, canonicalJson(r.details));
}

function isDb(q: Queryable | Db): q is Db {
  return typeof (q as Db).transaction === 'function';
}

/** An entry as stored: strings the database can hold, details as canonical JSON text. */
interface CleanEntry {
  actor: string;
  action: string;
  subject: string | null;
  details: string;
}

function storableText(s: string): string {
  return unstorableText(s) ? (storable(s) as string) : s;
}

/**
 * The entry with every U+0000 and lone surrogate replaced by U+FFFD: an
 * entry is written whatever text a caller managed to bring (a refusal of
 * that very text is recorded, not lost to a database error).
 */
function cleanEntry(entry: AuditEntry): CleanEntry {
  let details = canonicalJson(entry.details ?? {});
  // canonical text writes these as \u escapes: only then is the (slower) storable rewrite needed
  if (/\\u(?:0000|d[89a-f])/.test(details)) details = canonicalJson(storable(entry.details ?? {}));
  return {
    actor: storableText(entry.actor),
    action: storableText(entry.action),
    subject: entry.subject == null ? null : storableText(entry.subject),
    details,
  };
}

/** Locks the head, then (one statement) inserts the rows and moves the head. */
const APPEND_SQL = `WITH x AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(seq bigint, at timestamptz, actor text, action text,
      subject text, details jsonb, prev_hash text, hash text)
  ), ins AS (
    INSERT INTO audit_log (${COLUMNS}) SELECT ${COLUMNS} FROM x
  )
  UPDATE audit_head SET seq = $2, hash = $3 WHERE id`;

/** One row written: everything but the details, which are the canonical text stored. */
interface Written {
  row: Omit<AuditRow, 'details'>;
  details: string;
}

async function writeChained(q: Queryable, entries: readonly AuditEntry[]): Promise<Written[]> {
  if (entries.length === 0) return [];
  const clean = entries.map(cleanEntry);
  const head = await q.query<{ seq: number; hash: string; now: string }>(
    `SELECT seq, hash, date_trunc('milliseconds', clock_timestamp()) AS now
       FROM audit_head WHERE id FOR UPDATE`,
  );
  const h = head.rows[0];
  if (!h) throw new Error('audit_head row is missing: the database was not migrated, or was tampered with');
  let prevHash = h.hash;
  const out: Written[] = [];
  const json: string[] = [];
  for (const [i, c] of clean.entries()) {
    const base = {
      seq: h.seq + i + 1,
      at: h.now,
      actor: c.actor,
      action: c.action,
      subject: c.subject,
      prevHash,
    };
    const row = { ...base, hash: hashWithDetails(base, c.details) };
    json.push(
      `{"seq":${row.seq},"at":${JSON.stringify(row.at)},"actor":${JSON.stringify(row.actor)},"action":${JSON.stringify(
        row.action,
      )},"subject":${JSON.stringify(row.subject)},"details":${c.details},"prev_hash":"${row.prevHash}","hash":"${row.hash}"}`,
    );
    out.push({ row, details: c.details });
    prevHash = row.hash;
  }
  // Held until the transaction's next statement when `q` holds them (nothing here reads its result).
  await later(q, APPEND_SQL, [`[${json.join(',')}]`, h.seq + clean.length, prevHash]);
  return out;
}

/**
 * Appends entries in order, as part of the transaction `q` (call it last: it
 * locks the head until commit): one head lock, one statement inserting every
 * row and moving the head, whatever the number of entries.
 */
export async function appendAuditBatch(q: Queryable, entries: readonly AuditEntry[]): Promise<void> {
  await writeChained(q, entries);
}

/**
 * Appends one entry. Given a Db, in its own transaction; given a transaction
 * handle, as part of it (call it last: it locks the head until commit).
 */
export async function appendAudit(q: Queryable | Db, entry: AuditEntry): Promise<AuditRow> {
  if (isDb(q)) return q.transaction((tx) => appendAudit(tx, entry));
  const [w] = await writeChained(q, [entry]);
  if (!w) throw new Error('audit append wrote no row');
  return { ...w.row, details: JSON.parse(w.details) as Json };
}

/** Entries in seq order, optionally for one subject, after a seq (for paging). */
export async function listAudit(
  db: Queryable,
  opts: { subject?: string; afterSeq?: number; limit?: number } = {},
): Promise<AuditRow[]> {
  const limit = Math.min(Math.max(opts.limit ?? 100, 1), 1000);
  const params: unknown[] = [opts.afterSeq ?? 0, limit];
  let where = 'seq > $1';
  if (opts.subject !== undefined) {
    params.push(opts.subject);
    where += ` AND subject = $${params.length}`;
  }
  const r = await db.query<AuditDbRow>(
    `SELECT ${COLUMNS} FROM audit_log WHERE ${where} ORDER BY seq LIMIT $2`,
    params,
  );
  return r.rows.map(fromDb);
}

/** `missing`: the audit table or its head is gone altogether (dropped: the whole log deleted). */
export type AuditProblem = 'removed' | 'edited' | 'hash' | 'reordered' | 'link' | 'head' | 'missing';

export type AuditVerification =
  | { ok: true; rows: number; head: { seq: number; hash: string } }
  | {
      ok: false;
      /** The first row found wrong (for `removed`, the first missing seq). */
      seq: number;
      problem: AuditProblem;
      message: string;
      /** Rows checked good before it. */
      rows: number;
    };

async function* inOrder(db: Queryable, batch: number): AsyncGenerator<AuditRow> {
  let after = 0;
  for (;;) {
    const r = await db.query<AuditDbRow>(
      `SELECT ${COLUMNS} FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2`,
      [after, batch],
    );
    for (const row of r.rows) yield fromDb(row);
    const last = r.rows.at(-1);
    if (!last || r.rows.length < batch) return;
    after = last.seq;
  }
}

/** How far around a row's seq to look for the seq its hash was written with (reordering). */
const REORDER_WINDOW = 64;

/**
 * Walks the chain from seq 1 and reports the first row that was edited,
 * removed, inserted or moved, or an end that does not match the head.
 */
export async function verifyAudit(db: Queryable, opts: { batch?: number } = {}): Promise<AuditVerification> {
  const batch = opts.batch ?? 1000;
  let expected = 1;
  let prevHash = AUDIT_GENESIS;
  const broken = (seq: number, problem: AuditProblem, message: string): AuditVerification => ({
    ok: false,
    seq,
    problem,
    message,
    rows: expected - 1,
  });

  const tables = await db.query<{ log: string | null; head: string | null }>(
    `SELECT to_regclass('audit_log')::text AS log, to_regclass('audit_head')::text AS head`,
  );
  const t = tables.rows[0];
  const gone = [...(t?.log ? [] : ['audit_log']), ...(t?.head ? [] : ['audit_head'])];
  if (gone.length > 0)
    return broken(
      1,
      'missing',
      `the audit log's table${gone.length > 1 ? 's' : ''} ${gone.join(' and ')} ${gone.length > 1 ? 'are' : 'is'} missing: the log was deleted (dropped)`,
    );

  const check = (cur: AuditRow, next: AuditRow | undefined): AuditVerification | undefined => {
    if (cur.seq !== expected) {
      return broken(
        expected,
        'removed',
        cur.seq === expected + 1
          ? `audit row seq ${expected} is missing (removed); the chain continues at seq ${cur.seq}`
          : `audit rows seq ${expected}..${cur.seq - 1} are missing (removed); the chain continues at seq ${cur.seq}`,
      );
    }
    const computed = auditHash(cur);
    if (computed !== cur.hash) {
      for (let d = 1; d <= REORDER_WINDOW; d++) {
        for (const s of [cur.seq - d, cur.seq + d]) {
          if (s > 0 && auditHash({ ...cur, seq: s }) === cur.hash)
            return broken(
              cur.seq,
              'reordered',
              `audit row seq ${cur.seq} holds the entry written as seq ${s} (rows reordered)`,
            );
        }
      }
      if (next && next.seq === cur.seq + 1 && next.prevHash === computed)
        return broken(
          cur.seq,
          'hash',
          `audit row seq ${cur.seq}: its stored hash was changed (its contents still match the hash seq ${next.seq} links to)`,
        );
      return broken(
        cur.seq,
        'edited',
        `audit row seq ${cur.seq} (${cur.action}) was edited: its contents no longer match its hash`,
      );
    }
    if (cur.prevHash !== prevHash)
      return broken(
        cur.seq,
        'link',
        cur.seq === 1
          ? 'audit row seq 1 does not start the chain (prev_hash is not the genesis value)'
          : `audit row seq ${cur.seq} does not link to seq ${cur.seq - 1}: prev_hash differs from seq ${cur.seq - 1}'s hash (seq ${cur.seq - 1} rewritten, or a row inserted)`,
      );
    return undefined;
  };

  let pending: AuditRow | undefined;
  for await (const row of inOrder(db, batch)) {
    if (pending) {
      const bad = check(pending, row);
      if (bad) return bad;
      prevHash = pending.hash;
      expected++;
    }
    pending = row;
  }
  if (pending) {
    const bad = check(pending, undefined);
    if (bad) return bad;
    prevHash = pending.hash;
    expected++;
  }
  const last = expected - 1;
  const head = (await db.query<{ seq: number; hash: string }>('SELECT seq, hash FROM audit_head WHERE id'))
    .rows[0];
  if (!head) return broken(last + 1, 'head', 'the audit head row is missing');
  if (head.seq > last)
    return broken(
      last + 1,
      'removed',
      head.seq === last + 1
        ? `audit row seq ${last + 1} is missing (removed): the head records seq ${head.seq}`
        : `audit rows seq ${last + 1}..${head.seq} are missing (removed): the head records seq ${head.seq}`,
    );
  if (head.seq < last)
    return broken(
      head.seq + 1,
      'head',
      `audit rows after seq ${head.seq} are not recorded in the head (inserted, or the head was rewound)`,
    );
  if (head.hash !== prevHash)
    return broken(
      last,
      'head',
      `audit head hash does not match the hash of seq ${last} (head or last row rewritten)`,
    );
  return { ok: true, rows: last, head: { seq: head.seq, hash: head.hash } };
}

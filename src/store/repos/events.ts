/**
 * The event outbox: what happened, for the exchange's backend (webhooks and
 * `GET /v1/events`). An event is written by `appendEvents` inside the very
 * transaction that makes the change it reports, so it exists exactly when
 * the change does: no event for a rolled-back change, none lost for a
 * committed one.
 *
 * Numbering: `seq` is gapless and follows commit order. Appends take one
 * transaction-scoped advisory lock and number from the current maximum, so
 * two transactions never interleave their events and a reader that has seen
 * `seq = n` has seen every event below it: `after=n` is a complete cursor.
 * The lock is held until commit: append as the last statement(s) of a
 * transaction. Events are never changed nor removed (a trigger refuses it).
 */
import { randomUUID } from 'node:crypto';
import type { Db, Queryable } from '../db.js';
import { eventsAppended } from '../event-hook.js';

export interface EventInput {
  /** Dotted, lower case: `deposit.credited`, `withdrawal.committed`, … */
  type: string;
  /** What it is about: `deposit:<id>`, `withdrawal:<id>`, `party:<id>`, … */
  subject: string;
  /** The resource as the REST API shows it (amounts as decimal strings). */
  data: Record<string, unknown>;
}

export interface StoredEvent {
  seq: number;
  /** Stable across every delivery of the event (receivers deduplicate on it). */
  id: string;
  type: string;
  subject: string;
  data: Record<string, unknown>;
  createdAt: string;
}

interface Row {
  seq: number;
  id: string;
  type: string;
  subject: string;
  data: Record<string, unknown>;
  created_at: string;
}

const fromRow = (r: Row): StoredEvent => ({
  seq: r.seq,
  id: r.id,
  type: r.type,
  subject: r.subject,
  data: r.data,
  createdAt: r.created_at,
});

/** Key of the advisory lock that orders appends ("cs-event" in ASCII). */
const LOCK_KEY = '7166055598302490228';
const TYPE = /^[a-z][a-z_]*(\.[a-z][a-z_]*)+$/;
const COLUMNS = 'seq, id, type, subject, data, created_at';

/**
 * Appends `events` in the caller's transaction `tx` (numbered in order,
 * after every event committed before). Call it last in the transaction.
 */
export async function appendEvents(tx: Queryable, events: readonly EventInput[]): Promise<StoredEvent[]> {
  if (events.length === 0) return [];
  for (const e of events)
    if (!TYPE.test(e.type))
      throw new TypeError(`event type ${JSON.stringify(e.type)} is not dotted lower case`);
  const rows = events.map((e, i) => ({
    n: i + 1,
    id: randomUUID(),
    type: e.type,
    subject: e.subject,
    data: e.data,
  }));
  const r = await tx.query<Row>(
    `WITH head AS (SELECT coalesce(max(seq), 0) AS seq FROM events),
       x AS (SELECT * FROM jsonb_to_recordset($1::jsonb)
               AS r(n bigint, id uuid, type text, subject text, data jsonb))
     INSERT INTO events (seq, id, type, subject, data)
       SELECT head.seq + x.n, x.id, x.type, x.subject, x.data FROM head, x
     RETURNING ${COLUMNS}`,
    [JSON.stringify(rows)],
    // The lock first, in its own statement (the insert's snapshot must come after it), in the same
    // round trip.
    { first: `SELECT pg_advisory_xact_lock(${LOCK_KEY})` },
  );
  const out = r.rows.map(fromRow).sort((a, b) => a.seq - b.seq);
  const last = out.at(-1);
  if (last) eventsAppended(last.seq);
  return out;
}

export interface EventQuery {
  /** Only events with a larger `seq` (default 0: from the first). */
  after?: number;
  /** At most this many (default 100, at most 1,000). */
  limit?: number;
  /** Only these types (a type ending in `.*` matches a family, e.g. `deposit.*`). */
  types?: readonly string[];
  subject?: string;
}

export class EventRepo {
  constructor(private readonly db: Db) {}

  /** Events after a cursor, in `seq` order. */
  async list(q: EventQuery = {}): Promise<StoredEvent[]> {
    const limit = Math.min(Math.max(1, Math.trunc(q.limit ?? 100)), 1000);
    const params: unknown[] = [Math.max(0, Math.trunc(q.after ?? 0)), limit];
    let where = 'seq > $1';
    if (q.types && q.types.length > 0) {
      const exact = q.types.filter((t) => !t.endsWith('.*'));
      const families = q.types.filter((t) => t.endsWith('.*')).map((t) => `${t.slice(0, -1)}%`);
      params.push(exact, families);
      where += ` AND (type = ANY($3::text[]) OR type LIKE ANY($4::text[]))`;
    }
    if (q.subject !== undefined) {
      params.push(q.subject);
      where += ` AND subject = $${params.length}`;
    }
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM events WHERE ${where} ORDER BY seq LIMIT $2`,
      params,
    );
    return r.rows.map(fromRow);
  }

  /** One event by its id (uuid) or its sequence number. */
  async get(idOrSeq: string | number): Promise<StoredEvent | undefined> {
    const bySeq = typeof idOrSeq === 'number' || /^[0-9]{1,15}$/.test(idOrSeq);
    if (!bySeq && !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(idOrSeq))
      return undefined;
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM events WHERE ${bySeq ? 'seq = $1::bigint' : 'id = $1::uuid'}`,
      [String(idOrSeq)],
    );
    return r.rows[0] && fromRow(r.rows[0]);
  }

  /** The last `seq` written (0 when there is none). */
  async head(): Promise<number> {
    const r = await this.db.query<{ seq: number | null }>('SELECT max(seq) AS seq FROM events');
    return r.rows[0]?.seq ?? 0;
  }

  /** Appends outside any other change (a fact of its own, e.g. an operator's action already committed). */
  async append(events: readonly EventInput[]): Promise<StoredEvent[]> {
    return this.db.transaction((tx) => appendEvents(tx, events));
  }
}

/**
 * What the webhook deliverer (src/events/webhooks.ts) keeps (migration 10):
 * per receiver a cursor over the outbox (`webhook_receivers.after_seq`), and
 * per (receiver, event it subscribes to) a delivery: `pending` until the
 * receiver answered 2xx (`delivered`) or it was given up (`dead`: past the
 * retry horizon, or the receiver answered 410 Gone).
 *
 * - `materialise` reads the outbox after the cursor and records a delivery
 *   for each event whose type the receiver subscribes to, and moves the
 *   cursor, in one transaction (the receiver's row locked: instances take
 *   turns). Events are gapless in commit order, so nothing is skipped.
 * - `claim` takes a receiver's due deliveries in `seq` order for one
 *   deliverer (`claimed_by` until `claimed_until`), with FOR UPDATE SKIP
 *   LOCKED, and only while no other deliverer holds claims on that receiver:
 *   several instances never send one delivery at once (at-least-once: one
 *   whose deliverer died is claimed again once its claim lapses) and one
 *   receiver is served by one instance at a time (its order kept).
 * - `finish` records an attempt's outcome (only by the claim's holder).
 * - `redeliver` / `redeliverFrom` make deliveries pending again (audited).
 *
 * `last_error` is a short description (at most 500 characters) of why an
 * attempt failed; it never holds a secret (the deliverer writes only a
 * status, an error code or a bounded, redacted message).
 */
import { appendAuditBatch } from '../audit.js';
import type { Db, Queryable } from '../db.js';
import { BadRequestError, NotFoundError } from '../errors.js';

export const WEBHOOK_DELIVERY_STATES = ['pending', 'delivered', 'dead'] as const;
export type WebhookDeliveryState = (typeof WEBHOOK_DELIVERY_STATES)[number];

export interface WebhookDelivery {
  receiver: string;
  eventSeq: number;
  eventId: string;
  eventType: string;
  state: WebhookDeliveryState;
  attempts: number;
  /** When it became pending (recorded, or redelivered): the retry horizon counts from it. */
  since: string;
  nextAttemptAt?: string;
  lastAttemptAt?: string;
  lastStatus?: number;
  lastError?: string;
  deliveredAt?: string;
  createdAt: string;
  updatedAt: string;
}

/** A claimed delivery with the event to send. */
export interface ClaimedDelivery {
  receiver: string;
  attempts: number;
  since: string;
  event: { seq: number; id: string; type: string; subject: string; data: unknown; createdAt: string };
}

export interface ReceiverStatus {
  name: string;
  /** The outbox has been read up to this seq for the receiver. */
  afterSeq: number;
  counts: Record<WebhookDeliveryState, number>;
  /** Seconds since the oldest pending delivery became pending (0: none). */
  oldestPendingSeconds: number;
}

/** An attempt's outcome. `dead`: give up now (410). Otherwise retried after `retryMs`, within `horizonMs` of `since`. */
export type AttemptOutcome =
  | { ok: true; status: number }
  | { ok: false; status?: number; error: string; dead?: boolean; retryMs: number; horizonMs: number };

/**
 * Does `type` match one of `patterns`: `*` (every type), `family.*` (every
 * type starting with `family.`) or an exact type.
 */
export function typeMatches(patterns: readonly string[], type: string): boolean {
  return patterns.some((p) =>
    p === '*' ? true : p.endsWith('.*') ? type.startsWith(p.slice(0, -1)) : p === type,
  );
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_ERROR = 500;

interface Row {
  receiver: string;
  event_seq: number;
  event_id: string;
  event_type: string;
  state: WebhookDeliveryState;
  attempts: number;
  since: string;
  next_attempt_at: string;
  last_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  delivered_at: string | null;
  created_at: string;
  updated_at: string;
}

function fromRow(r: Row): WebhookDelivery {
  return {
    receiver: r.receiver,
    eventSeq: r.event_seq,
    eventId: r.event_id,
    eventType: r.event_type,
    state: r.state,
    attempts: r.attempts,
    since: r.since,
    ...(r.state === 'pending' ? { nextAttemptAt: r.next_attempt_at } : {}),
    ...(r.last_attempt_at !== null ? { lastAttemptAt: r.last_attempt_at } : {}),
    ...(r.last_status !== null ? { lastStatus: r.last_status } : {}),
    ...(r.last_error !== null ? { lastError: r.last_error } : {}),
    ...(r.delivered_at !== null ? { deliveredAt: r.delivered_at } : {}),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

const LIST_COLUMNS = `d.receiver, d.event_seq, e.id AS event_id, e.type AS event_type, d.state, d.attempts,
  d.since, d.next_attempt_at, d.last_attempt_at, d.last_status, d.last_error, d.delivered_at, d.created_at,
  d.updated_at`;

function encodeCursor(d: WebhookDelivery): string {
  return Buffer.from(JSON.stringify([d.eventSeq, d.receiver]), 'utf8').toString('base64url');
}

function decodeCursor(c: string): [number, string] {
  try {
    const v = JSON.parse(Buffer.from(c, 'base64url').toString('utf8')) as unknown;
    if (
      Array.isArray(v) &&
      v.length === 2 &&
      Number.isSafeInteger(v[0]) &&
      (v[0] as number) >= 0 &&
      typeof v[1] === 'string' &&
      NAME.test(v[1])
    )
      return [v[0] as number, v[1]];
  } catch {
    // fall through
  }
  throw new BadRequestError('cursor', 'is not a cursor this service issued');
}

function receiverName(name: string): string {
  if (typeof name !== 'string' || !NAME.test(name))
    throw new BadRequestError('receiver', 'must be a receiver name (1-64 letters, digits, ".", "_" or "-")');
  return name;
}

export class WebhookRepo {
  constructor(
    private readonly db: Db,
    private readonly opts: { actor?: string } = {},
  ) {}

  /**
   * Records the configured receivers not seen before, their cursor at the
   * outbox's head: a new receiver gets the events from now on (older ones
   * with `redeliverFrom`). Known receivers keep their cursor.
   */
  async register(names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    await this.db.query(
      `INSERT INTO webhook_receivers (name, after_seq)
       SELECT n, (SELECT coalesce(max(seq), 0) FROM events) FROM unnest($1::text[]) AS n
       ON CONFLICT (name) DO NOTHING`,
      [names.map(receiverName)],
    );
  }

  /**
   * Reads up to `limit` events after the receiver's cursor, records a
   * pending delivery for each whose type matches `patterns`, moves the
   * cursor past all of them, in one transaction. `more`: the limit was
   * reached (call again).
   */
  async materialise(
    receiver: string,
    patterns: readonly string[],
    limit = 500,
  ): Promise<{ added: number; afterSeq: number; more: boolean }> {
    return this.db.transaction(async (tx) => {
      const cur = (
        await tx.query<{ after_seq: number }>(
          'SELECT after_seq FROM webhook_receivers WHERE name = $1 FOR UPDATE',
          [receiver],
        )
      ).rows[0];
      if (!cur) throw new NotFoundError(`webhook receiver ${receiver}`);
      const events = (
        await tx.query<{ seq: number; type: string }>(
          'SELECT seq, type FROM events WHERE seq > $1 ORDER BY seq LIMIT $2',
          [cur.after_seq, limit],
        )
      ).rows;
      const last = events.at(-1);
      if (!last) return { added: 0, afterSeq: cur.after_seq, more: false };
      const matched = events.filter((e) => typeMatches(patterns, e.type)).map((e) => e.seq);
      let added = 0;
      if (matched.length > 0)
        added = (
          await tx.query(
            `INSERT INTO webhook_deliveries (receiver, event_seq)
             SELECT $1, s FROM unnest($2::bigint[]) AS s ON CONFLICT DO NOTHING RETURNING event_seq`,
            [receiver, matched],
          )
        ).rows.length;
      await tx.query('UPDATE webhook_receivers SET after_seq = $2, updated_at = now() WHERE name = $1', [
        receiver,
        last.seq,
      ]);
      return { added, afterSeq: last.seq, more: events.length === limit };
    });
  }

  /**
   * Claims up to `limit` due pending deliveries of `receiver` for `owner`
   * for `leaseMs`, lowest seq first, with their events; none while another
   * owner holds unexpired claims on the receiver.
   */
  async claim(receiver: string, owner: string, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    const r = await this.db.query<{
      receiver: string;
      attempts: number;
      since: string;
      seq: number;
      id: string;
      type: string;
      subject: string;
      data: unknown;
      created_at: string;
    }>(
      `WITH c AS (
         SELECT receiver, event_seq FROM webhook_deliveries
          WHERE receiver = $1 AND state = 'pending' AND next_attempt_at <= now()
            AND (claimed_until IS NULL OR claimed_until < now())
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries o
                             WHERE o.receiver = $1 AND o.state = 'pending'
                               AND o.claimed_by <> $2 AND o.claimed_until >= now())
          ORDER BY event_seq LIMIT $3
          FOR UPDATE SKIP LOCKED)
       UPDATE webhook_deliveries d
          SET claimed_by = $2, claimed_until = now() + $4::int * interval '1 millisecond'
         FROM c, events e
        WHERE d.receiver = c.receiver AND d.event_seq = c.event_seq AND e.seq = c.event_seq
       RETURNING d.receiver, d.attempts, d.since, e.seq, e.id, e.type, e.subject, e.data, e.created_at`,
      [receiver, owner, Math.max(1, Math.trunc(limit)), Math.max(1, Math.round(leaseMs))],
    );
    return r.rows
      .map((x) => ({
        receiver: x.receiver,
        attempts: x.attempts,
        since: x.since,
        event: {
          seq: x.seq,
          id: x.id,
          type: x.type,
          subject: x.subject,
          data: x.data,
          createdAt: x.created_at,
        },
      }))
      .sort((a, b) => a.event.seq - b.event.seq);
  }

  /** Lets go of `owner`'s claims (a stopping deliverer): another instance may send them at once. */
  async release(owner: string): Promise<void> {
    await this.db.query(
      `UPDATE webhook_deliveries SET claimed_by = NULL, claimed_until = NULL
        WHERE claimed_by = $1 AND state = 'pending'`,
      [owner],
    );
  }

  /**
   * Records the outcome of an attempt by the claim's holder: delivered; or
   * dead (410, or the horizon passed); or pending again at
   * `now + retryMs` (never later than the horizon: a last attempt there).
   * Undefined when `owner` no longer holds the claim (nothing recorded).
   */
  async finish(
    receiver: string,
    seq: number,
    owner: string,
    outcome: AttemptOutcome,
  ): Promise<WebhookDeliveryState | undefined> {
    if (outcome.ok) {
      const r = await this.db.query<{ state: WebhookDeliveryState }>(
        `UPDATE webhook_deliveries SET state = 'delivered', attempts = attempts + 1, last_attempt_at = now(),
            last_status = $4, delivered_at = now(), claimed_by = NULL, claimed_until = NULL, updated_at = now()
          WHERE receiver = $1 AND event_seq = $2 AND claimed_by = $3 AND state = 'pending' RETURNING state`,
        [receiver, seq, owner, outcome.status],
      );
      return r.rows[0]?.state;
    }
    const r = await this.db.query<{ state: WebhookDeliveryState }>(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = now(),
          last_status = $4, last_error = $5,
          state = CASE WHEN $6 OR now() >= since + $7::bigint * interval '1 millisecond'
                       THEN 'dead' ELSE 'pending' END,
          next_attempt_at = LEAST(now() + $8::bigint * interval '1 millisecond',
                                  since + $7::bigint * interval '1 millisecond'),
          claimed_by = NULL, claimed_until = NULL, updated_at = now()
        WHERE receiver = $1 AND event_seq = $2 AND claimed_by = $3 AND state = 'pending' RETURNING state`,
      [
        receiver,
        seq,
        owner,
        outcome.status ?? null,
        outcome.error.slice(0, MAX_ERROR),
        outcome.dead === true,
        Math.max(0, Math.round(outcome.horizonMs)),
        Math.max(0, Math.round(outcome.retryMs)),
      ],
    );
    return r.rows[0]?.state;
  }

  /** When the receiver's next pending delivery is due (ISO time), if any. */
  async nextDue(receiver: string): Promise<string | undefined> {
    const r = await this.db.query<{ at: string | null }>(
      `SELECT min(greatest(next_attempt_at, coalesce(claimed_until, next_attempt_at))) AS at
         FROM webhook_deliveries WHERE receiver = $1 AND state = 'pending'`,
      [receiver],
    );
    return r.rows[0]?.at ?? undefined;
  }

  /** Deliveries by seq (then receiver), optionally of one receiver and/or state, a page at a time. */
  async list(
    q: { receiver?: string; state?: WebhookDeliveryState; cursor?: string; limit?: number } = {},
  ): Promise<{ items: WebhookDelivery[]; nextCursor?: string }> {
    const limit = Math.min(Math.max(1, Math.trunc(q.limit ?? 100)), 1000);
    const params: unknown[] = [];
    const where: string[] = [];
    if (q.receiver !== undefined) where.push(`d.receiver = $${params.push(receiverName(q.receiver))}`);
    if (q.state !== undefined) {
      if (!WEBHOOK_DELIVERY_STATES.includes(q.state))
        throw new BadRequestError('state', `must be one of ${WEBHOOK_DELIVERY_STATES.join(', ')}`);
      where.push(`d.state = $${params.push(q.state)}`);
    }
    if (q.cursor !== undefined) {
      const [seq, receiver] = decodeCursor(q.cursor);
      where.push(
        `(d.event_seq, d.receiver) > ($${params.push(seq)}::bigint, $${params.push(receiver)}::text)`,
      );
    }
    const r = await this.db.query<Row>(
      `SELECT ${LIST_COLUMNS} FROM webhook_deliveries d JOIN events e ON e.seq = d.event_seq
        ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY d.event_seq, d.receiver LIMIT $${params.push(limit + 1)}`,
      params,
    );
    const items = r.rows.slice(0, limit).map(fromRow);
    const last = items.at(-1);
    return r.rows.length > limit && last ? { items, nextCursor: encodeCursor(last) } : { items };
  }

  async get(receiver: string, seq: number, q: Queryable = this.db): Promise<WebhookDelivery | undefined> {
    const r = await q.query<Row>(
      `SELECT ${LIST_COLUMNS} FROM webhook_deliveries d JOIN events e ON e.seq = d.event_seq
        WHERE d.receiver = $1 AND d.event_seq = $2`,
      [receiver, seq],
    );
    return r.rows[0] && fromRow(r.rows[0]);
  }

  /**
   * Makes the delivery of event `seq` to `receiver` pending again, due now,
   * its horizon counted from now (audited `webhook.redeliver`); recorded
   * first when the receiver never had one for it (the event exists and its
   * cursor is past it). NotFoundError when the receiver or event is unknown.
   */
  async redeliver(receiver: string, seq: number, actor?: string): Promise<WebhookDelivery> {
    receiverName(receiver);
    return this.db.transaction(async (tx) => {
      const known = (
        await tx.query<{ r: boolean; e: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM webhook_receivers WHERE name = $1) AS r,
                  EXISTS (SELECT 1 FROM events WHERE seq = $2) AS e`,
          [receiver, seq],
        )
      ).rows[0];
      if (!known?.r) throw new NotFoundError(`webhook receiver ${receiver}`);
      if (!known.e) throw new NotFoundError(`event ${seq}`);
      const r = await tx.query<{ from: string | null }>(
        `WITH cur AS (SELECT state FROM webhook_deliveries WHERE receiver = $1 AND event_seq = $2 FOR UPDATE)
         INSERT INTO webhook_deliveries (receiver, event_seq) VALUES ($1, $2)
         ON CONFLICT (receiver, event_seq) DO UPDATE SET state = 'pending', attempts = 0, since = now(),
             next_attempt_at = now(), claimed_by = NULL, claimed_until = NULL, updated_at = now()
         RETURNING (SELECT state FROM cur) AS from`,
        [receiver, seq],
      );
      await appendAuditBatch(tx, [
        {
          actor: actor ?? this.opts.actor ?? 'system',
          action: 'webhook.redeliver',
          subject: `webhook:${receiver}`,
          details: { seq, from: r.rows[0]?.from ?? 'none' },
        },
      ]);
      const d = await this.get(receiver, seq, tx);
      if (!d) throw new NotFoundError(`delivery of event ${seq} to ${receiver}`);
      return d;
    });
  }

  /**
   * Makes every dead delivery of `receiver` from event `fromSeq` on pending
   * again (and the delivered ones too with `includeDelivered`), and moves the
   * cursor back to `fromSeq` when it is past it, so that matching events the
   * receiver has no delivery for are recorded again (audited
   * `webhook.redeliver`). The number of deliveries made pending.
   */
  async redeliverFrom(
    receiver: string,
    fromSeq: number,
    opts: { actor?: string; includeDelivered?: boolean } = {},
  ): Promise<{ redelivered: number; afterSeq: number }> {
    receiverName(receiver);
    if (!Number.isSafeInteger(fromSeq) || fromSeq < 1)
      throw new BadRequestError('fromSeq', 'must be a whole number of at least 1');
    return this.db.transaction(async (tx) => {
      const cur = (
        await tx.query<{ after_seq: number }>(
          'SELECT after_seq FROM webhook_receivers WHERE name = $1 FOR UPDATE',
          [receiver],
        )
      ).rows[0];
      if (!cur) throw new NotFoundError(`webhook receiver ${receiver}`);
      const states = opts.includeDelivered ? ['dead', 'delivered'] : ['dead'];
      const r = await tx.query(
        `UPDATE webhook_deliveries SET state = 'pending', attempts = 0, since = now(), next_attempt_at = now(),
            claimed_by = NULL, claimed_until = NULL, updated_at = now()
          WHERE receiver = $1 AND event_seq >= $2 AND state = ANY($3::text[]) RETURNING event_seq`,
        [receiver, fromSeq, states],
      );
      const afterSeq = Math.min(cur.after_seq, fromSeq - 1);
      if (afterSeq !== cur.after_seq)
        await tx.query('UPDATE webhook_receivers SET after_seq = $2, updated_at = now() WHERE name = $1', [
          receiver,
          afterSeq,
        ]);
      await appendAuditBatch(tx, [
        {
          actor: opts.actor ?? this.opts.actor ?? 'system',
          action: 'webhook.redeliver',
          subject: `webhook:${receiver}`,
          details: {
            fromSeq,
            states,
            redelivered: r.rows.length,
            cursor: { from: cur.after_seq, to: afterSeq },
          },
        },
      ]);
      return { redelivered: r.rows.length, afterSeq };
    });
  }

  /** Each known receiver's cursor, deliveries per state and oldest pending age. */
  async status(): Promise<ReceiverStatus[]> {
    const r = await this.db.query<{
      name: string;
      after_seq: number;
      pending: number;
      delivered: number;
      dead: number;
      oldest: number | null;
    }>(
      `SELECT r.name, r.after_seq,
              count(d.event_seq) FILTER (WHERE d.state = 'pending')::int8 AS pending,
              count(d.event_seq) FILTER (WHERE d.state = 'delivered')::int8 AS delivered,
              count(d.event_seq) FILTER (WHERE d.state = 'dead')::int8 AS dead,
              extract(epoch FROM now() - min(d.since) FILTER (WHERE d.state = 'pending'))::float8 AS oldest
         FROM webhook_receivers r LEFT JOIN webhook_deliveries d ON d.receiver = r.name
        GROUP BY r.name, r.after_seq ORDER BY r.name`,
    );
    return r.rows.map((x) => ({
      name: x.name,
      afterSeq: x.after_seq,
      counts: { pending: Number(x.pending), delivered: Number(x.delivered), dead: Number(x.dead) },
      oldestPendingSeconds: Math.max(0, Number(x.oldest ?? 0)),
    }));
  }
}

/**
 * Withdrawals: recorded before any side effect, idempotent per (caller,
 * Idempotency-Key), moved through a state machine with atomic guarded
 * updates, each change audited in the same transaction. This is the
 * repository; it is split along its seams:
 *
 * - withdrawal-states.ts — the states, the allowed moves (also enforced by
 *   the `withdrawals_guard` trigger), delivery, what each state means, and
 *   the events each change emits;
 * - withdrawal-rows.ts — the row as stored, validated and returned, event
 *   data, move options, the list cursor;
 * - withdrawal-batches.ts — the group-committed creates and moves;
 * - here — the repository: reads, moves, cancel, the worker's lease, the
 *   lookup offset, delivery, and the counts for metrics.
 *
 * Everything importers used is exported from here, as before.
 */
import { appendAuditBatch } from '../audit.js';
import type { Json } from '../canonical.js';
import type { Db, Queryable } from '../db.js';
import { deferring, later } from '../deferred.js';
import { BadRequestError, NotFoundError, WithdrawalStateError } from '../errors.js';
import { GroupCommit } from '../group-commit.js';
import { appendEvents } from './events.js';
import {
  type CreateResult,
  insertBatch,
  moveBatch,
  type PendingCreate,
  type PendingMove,
} from './withdrawal-batches.js';
import {
  type DeliveryPatch,
  decodeCursor,
  encodeCursor,
  fromRow,
  type ListOptions,
  normaliseWithdrawalBody,
  type Page,
  type Row,
  type TransitionOptions,
  type TransitionPatch,
  text,
  UUID,
  type Withdrawal,
  type WithdrawalBody,
  withdrawalEvent,
  withdrawalRequestHash,
} from './withdrawal-rows.js';
import {
  CANCELLABLE_STATES,
  canDeliver,
  canTransition,
  DELIVERY_STATES,
  type DeliveryState,
  PENDING_STATES,
  type PendingState,
  tooLate,
  WITHDRAWAL_STATES,
  type WithdrawalState,
} from './withdrawal-states.js';

export {
  canonicalDecimal,
  type DeliveryPatch,
  type ListOptions,
  normaliseWithdrawalBody,
  type Page,
  type TransitionOptions,
  type TransitionPatch,
  type Withdrawal,
  type WithdrawalBody,
  type WithdrawalOffer,
  withdrawalEventData,
  withdrawalRequestHash,
} from './withdrawal-rows.js';
export {
  CANCELLABLE_STATES,
  canDeliver,
  canTransition,
  DELIVERY_EDGES,
  DELIVERY_STATES,
  type DeliveryState,
  OFFER_OUTCOMES,
  type OfferOutcome,
  PENDING_STATES,
  type PendingState,
  UNFINISHED_STATES,
  WITHDRAWAL_COMMAND_PREFIX,
  WITHDRAWAL_EDGES,
  WITHDRAWAL_STATES,
  type WithdrawalState,
  withdrawalCommandId,
} from './withdrawal-states.js';

/** Leases an unfinished withdrawal to `$2` for `$3` ms unless another owner holds one of the same party. */
const CLAIM_SQL = `UPDATE withdrawals w SET lease_owner = $2, lease_until = now() + $3::int * interval '1 millisecond'
   WHERE w.id = $1 AND w.state IN ('received', 'prepared', 'signed', 'submitted')
     AND (w.lease_until IS NULL OR w.lease_until < now() OR w.lease_owner = $2)
     AND NOT EXISTS (
       SELECT 1 FROM withdrawals o
        WHERE o.party = w.party AND o.id <> w.id
          AND o.state IN ('received', 'prepared', 'signed', 'submitted')
          AND o.lease_owner <> $2 AND o.lease_until >= now())
  RETURNING *`;

export class WithdrawalRepo {
  /** Creates, and moves between states, each written in group-committed batches (group-commit.ts). */
  private readonly creates: GroupCommit<PendingCreate, CreateResult>;
  private readonly moves: GroupCommit<PendingMove, Withdrawal>;

  constructor(
    private readonly db: Db,
    private readonly opts: { actor?: string } = {},
  ) {
    this.creates = new GroupCommit(db, insertBatch);
    this.moves = new GroupCommit(db, moveBatch);
  }

  private actor(a?: string): string {
    return a ?? this.opts.actor ?? 'system';
  }

  /**
   * Records a withdrawal request. Same caller + key + normalised body again:
   * the existing row, `created: false`. Same caller + key, other body:
   * IdempotencyConflictError. Safe under concurrent calls (unique constraint),
   * also from other instances sharing the database.
   *
   * Group commit: creates that arrive in the same event-loop turn, or while a
   * batch is being written, share one transaction (see `insertBatch`). A
   * create resolves only after its row and audit row are committed.
   */
  create(req: {
    idempotencyKey: string;
    caller: string;
    body: WithdrawalBody;
    actor?: string;
  }): Promise<CreateResult> {
    let p: PendingCreate;
    try {
      const key = text(req.idempotencyKey, 'Idempotency-Key', 255);
      const caller = text(req.caller, 'caller', 255);
      const body = normaliseWithdrawalBody(req.body);
      p = {
        key,
        caller,
        body,
        requestHash: withdrawalRequestHash(body),
        actor: this.actor(req.actor ?? caller),
      };
    } catch (e) {
      return Promise.reject(e);
    }
    return this.creates.submit(p);
  }

  async get(id: string, q: Queryable = this.db): Promise<Withdrawal | undefined> {
    if (!UUID.test(id)) return undefined;
    const r = await q.query<Row>('SELECT * FROM withdrawals WHERE id = $1', [id]);
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  async getByKey(caller: string, idempotencyKey: string): Promise<Withdrawal | undefined> {
    const r = await this.db.query<Row>(
      'SELECT * FROM withdrawals WHERE caller = $1 AND idempotency_key = $2',
      [caller, idempotencyKey],
    );
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  /**
   * Moves the withdrawal from one of `from` to `to`, atomically (one
   * statement locks the row and updates it only if its state is one of
   * `from`), and audits it. Throws WithdrawalStateError when the current
   * state is not in `from`, and refuses (before touching the database) an
   * edge the state machine lacks. Moves of concurrent withdrawals are group
   * committed (see `moveBatch`); a move resolves once it is committed.
   */
  async transition(
    id: string,
    from: readonly WithdrawalState[],
    to: WithdrawalState,
    patch: TransitionPatch = {},
    opts: TransitionOptions = {},
  ): Promise<Withdrawal> {
    if (!WITHDRAWAL_STATES.includes(to)) throw new BadRequestError('state', `unknown state ${String(to)}`);
    if (from.length === 0) throw new BadRequestError('from', 'needs at least one state');
    for (const f of from)
      if (!WITHDRAWAL_STATES.includes(f) || !canTransition(f, to)) throw new WithdrawalStateError(id, f, to);
    if (!UUID.test(id)) throw new NotFoundError(`withdrawal ${id}`);
    return this.moves.submit({ id, from, to, patch, opts, actor: this.actor(opts.actor) });
  }

  /**
   * Records why the withdrawal's latest attempt failed (`lastError`) while it
   * waits in `state` for the next one: the state stays, the row must still be
   * in it (and leased to `opts.owner` when given: WithdrawalStateError or
   * LeaseLostError otherwise), audited as `withdrawal.error`.
   */
  async noteError(
    id: string,
    state: WithdrawalState,
    lastError: string,
    opts: Pick<TransitionOptions, 'actor' | 'owner'> = {},
  ): Promise<Withdrawal> {
    if (!UUID.test(id)) throw new NotFoundError(`withdrawal ${id}`);
    return this.moves.submit({
      id,
      from: [state],
      to: state,
      patch: { lastError },
      opts,
      actor: this.actor(opts.actor),
      action: 'withdrawal.error',
    });
  }

  /**
   * Cancels a withdrawal whose signing has not started (`received`,
   * `awaiting_signature` or `awaiting_approval`). Already cancelled: returns
   * it unchanged (`changed: false`). Signing started (`prepared`) or later:
   * WithdrawalStateError saying so. The guarded move is atomic with the
   * worker's move to `prepared`: whichever comes second is refused.
   */
  async cancel(
    id: string,
    opts: { actor?: string; reason?: string } = {},
  ): Promise<{ withdrawal: Withdrawal; changed: boolean }> {
    const w = await this.get(id);
    if (!w) throw new NotFoundError(`withdrawal ${id}`);
    if (w.state === 'cancelled') return { withdrawal: w, changed: false };
    try {
      const done = await this.transition(
        id,
        CANCELLABLE_STATES,
        'cancelled',
        {},
        {
          actor: opts.actor,
          details: opts.reason !== undefined ? { reason: opts.reason } : {},
          // A request across the air gap for it is void: a response to it is refused, its signature never used.
          also: (tx) =>
            later(
              tx,
              `UPDATE air_gap_exports SET status = 'cancelled', updated_at = now()
                WHERE withdrawal_id = $1 AND status IN ('open', 'imported')`,
              [id],
            ),
        },
      );
      return { withdrawal: done, changed: true };
    } catch (e) {
      if (e instanceof WithdrawalStateError && e.current === 'cancelled') {
        const again = await this.get(id);
        if (again) return { withdrawal: again, changed: false };
      }
      if (e instanceof WithdrawalStateError && !CANCELLABLE_STATES.includes(e.current as WithdrawalState))
        throw new WithdrawalStateError(id, e.current, 'cancelled', tooLate(id, e.current as WithdrawalState));
      throw e;
    }
  }

  /** A page of withdrawals, newest first by default; pass `nextCursor` back for the next page. */
  async list(opts: ListOptions = {}): Promise<Page<Withdrawal>> {
    const limit = opts.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 500)
      throw new BadRequestError('limit', 'must be an integer from 1 to 500');
    const desc = (opts.order ?? 'desc') === 'desc';
    const where: string[] = [];
    const params: unknown[] = [];
    const add = (sql: (p: string) => string, v: unknown) => {
      params.push(v);
      where.push(sql(`$${params.length}`));
    };
    if (opts.party !== undefined)
      add((p) => `party = ANY(${p}::text[])`, Array.isArray(opts.party) ? opts.party : [opts.party]);
    if (opts.state !== undefined) {
      const states = Array.isArray(opts.state) ? opts.state : [opts.state];
      for (const s of states)
        if (!WITHDRAWAL_STATES.includes(s)) throw new BadRequestError('state', `unknown state ${String(s)}`);
      add((p) => `state = ANY(${p}::text[])`, states);
    }
    if (opts.delivery !== undefined) {
      if (!DELIVERY_STATES.includes(opts.delivery))
        throw new BadRequestError('delivery', `unknown delivery ${String(opts.delivery)}`);
      add((p) => `delivery = ${p}`, opts.delivery);
    }
    if (opts.caller !== undefined) add((p) => `caller = ${p}`, opts.caller);
    if (opts.cursor !== undefined) {
      const [at, id] = decodeCursor(opts.cursor);
      params.push(at, id);
      const a = `$${params.length - 1}`;
      const b = `$${params.length}`;
      where.push(`(created_at, id) ${desc ? '<' : '>'} (${a}::timestamptz, ${b}::uuid)`);
    }
    params.push(limit + 1);
    const dir = desc ? 'DESC' : 'ASC';
    const r = await this.db.query<Row>(
      `SELECT * FROM withdrawals ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY created_at ${dir}, id ${dir} LIMIT $${params.length}`,
      params,
    );
    const items = r.rows.slice(0, limit).map(fromRow);
    const last = items.at(-1);
    return r.rows.length > limit && last ? { items, nextCursor: encodeCursor(last) } : { items };
  }

  /** Withdrawals not in a terminal state, oldest first: what a restarted worker resumes. */
  async unfinished(limit = 1000): Promise<Withdrawal[]> {
    const r = await this.db.query<Row>(
      `SELECT * FROM withdrawals WHERE state IN ('received', 'prepared', 'signed', 'submitted')
        ORDER BY created_at, id LIMIT $1`,
      [limit],
    );
    return r.rows.map(fromRow);
  }

  // ---- the worker's lease (migration 2): one instance carries a withdrawal at a time ----------

  /**
   * Takes the lease on an unfinished withdrawal for `owner` for `ms`, if no
   * other owner holds an unexpired one on it or on another unfinished
   * withdrawal of the same sending party. The withdrawal, or undefined when it
   * is finished, unknown, or leased (itself or its party) by another owner.
   */
  async claim(id: string, owner: string, ms: number): Promise<Withdrawal | undefined> {
    if (!UUID.test(id)) return undefined;
    const lease = (q: Queryable) =>
      q
        .query<Row>(CLAIM_SQL, [id, owner, Math.max(1, Math.round(ms))])
        .then((r) => r.rows[0] && fromRow(r.rows[0]));
    // PGlite has one session and runs one statement at a time: the statement alone is atomic.
    if (this.db.kind === 'pglite') return lease(this.db);
    // One sending party's withdrawals are carried by one owner at a time, across processes and
    // instances: they spend the same holdings. Claims for one party are serialised by this lock,
    // taken before the statement that checks the others (whose snapshot then sees their leases).
    // One transaction, in one round trip with its BEGIN and COMMIT, each its own statement.
    const [, leased] = await this.db.atomically([
      {
        sql: `SELECT pg_advisory_xact_lock(hashtextextended('cs-party:' || party, 7011)) FROM withdrawals WHERE id = $1`,
        params: [id],
      },
      { sql: CLAIM_SQL, params: [id, owner, Math.max(1, Math.round(ms))] },
    ]);
    const row = leased?.rows[0] as Row | undefined;
    return row && fromRow(row);
  }

  /** Extends `owner`'s lease; false when it no longer holds it. */
  async renewLease(id: string, owner: string, ms: number): Promise<boolean> {
    const r = await this.db.query(
      `UPDATE withdrawals SET lease_until = now() + $3::int * interval '1 millisecond'
        WHERE id = $1 AND lease_owner = $2 RETURNING id`,
      [id, owner, Math.max(1, Math.round(ms))],
    );
    return r.rows.length > 0;
  }

  async releaseLease(id: string, owner: string): Promise<void> {
    await this.db.query(
      'UPDATE withdrawals SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2',
      [id, owner],
    );
  }

  /**
   * Unfinished withdrawals `owner` could claim now (id and sending party), oldest first: no other
   * owner holds a lease on them or on another unfinished withdrawal of their party (`claim`'s rule;
   * with several instances, trying those would only fail).
   */
  async claimable(owner: string, limit = 100): Promise<{ id: string; party: string }[]> {
    const r = await this.db.query<{ id: string; party: string }>(
      `SELECT id, party FROM withdrawals w WHERE state IN ('received', 'prepared', 'signed', 'submitted')
          AND (lease_until IS NULL OR lease_until < now() OR lease_owner = $1)
          AND NOT EXISTS (
            SELECT 1 FROM withdrawals o
             WHERE o.party = w.party AND o.id <> w.id
               AND o.state IN ('received', 'prepared', 'signed', 'submitted')
               AND o.lease_owner <> $1 AND o.lease_until >= now())
        ORDER BY created_at, id LIMIT $2`,
      [owner, limit],
    );
    return r.rows;
  }

  /** Remembers (the first) ledger end read before submitting; `q` is the transition's transaction. */
  async setLookupFrom(id: string, offset: number, q: Queryable = this.db): Promise<void> {
    await q.query('UPDATE withdrawals SET lookup_from = COALESCE(lookup_from, $2) WHERE id = $1', [
      id,
      offset,
    ]);
  }

  /** Where to start reading completions for the withdrawal's command id (undefined: never submitted). */
  async lookupFrom(id: string): Promise<number | undefined> {
    const r = await this.db.query<{ lookup_from: string | number | null }>(
      'SELECT lookup_from FROM withdrawals WHERE id = $1',
      [id],
    );
    const v = r.rows[0]?.lookup_from;
    return v === null || v === undefined ? undefined : Number(v);
  }

  /**
   * Seconds since the oldest withdrawal still waiting in each pending state
   * (`received`, `prepared`, `signed`, `submitted`, `awaiting_signature`,
   * `awaiting_approval`) was created; 0 for a state none waits in
   * (metrics: one stuck withdrawal shows, however many others flow).
   */
  async oldestPendingAges(): Promise<Record<PendingState, number>> {
    const r = await this.db.query<{ state: PendingState; age: number | string }>(
      `SELECT state, extract(epoch FROM now() - min(created_at))::float8 AS age FROM withdrawals
        WHERE state IN ('received', 'prepared', 'signed', 'submitted', 'awaiting_signature', 'awaiting_approval')
        GROUP BY state`,
    );
    const out = Object.fromEntries(PENDING_STATES.map((s) => [s, 0])) as Record<PendingState, number>;
    for (const row of r.rows) out[row.state] = Math.max(0, Number(row.age));
    return out;
  }

  // ---- delivery (migration 6): where a committed withdrawal's funds are -----------------------

  /**
   * Moves the delivery of committed withdrawal `id` from one of `from` to
   * `to` (an edge of `DELIVERY_EDGES`), atomically, with the offer's facts,
   * and audits it (`withdrawal.delivery.<to>`). WithdrawalStateError, naming
   * the current delivery, when it is not in `from`.
   */
  async deliver(
    id: string,
    from: readonly DeliveryState[],
    to: DeliveryState,
    patch: DeliveryPatch = {},
    opts: { actor?: string; details?: Record<string, unknown>; tx?: Queryable } = {},
  ): Promise<Withdrawal> {
    for (const f of from)
      if (!DELIVERY_STATES.includes(f) || !canDeliver(f, to))
        throw new WithdrawalStateError(id, `delivery ${f}`, `delivery ${to}`);
    if (!UUID.test(id)) throw new NotFoundError(`withdrawal ${id}`);
    // In the caller's transaction when given (ledger ingestion settles deliveries with the update).
    const inTx = <T>(fn: (tx: Queryable) => Promise<T>) => (opts.tx ? fn(opts.tx) : this.db.transaction(fn));
    // The audit row's statement travels with the event's (deferred.ts).
    return inTx((on) =>
      deferring(on, async (tx) => {
        const r = await tx.query<Row & { from_delivery: DeliveryState }>(
          `WITH cur AS (SELECT id, delivery FROM withdrawals WHERE id = $1 FOR UPDATE)
         UPDATE withdrawals w SET delivery = $3, updated_at = now(),
             offer_cid = COALESCE($4, w.offer_cid),
             offer_expires_at = COALESCE($5::timestamptz, w.offer_expires_at),
             offer_outcome = COALESCE($6, w.offer_outcome),
             delivery_update_id = COALESCE($7, w.delivery_update_id),
             delivery_from = COALESCE($8, w.delivery_from)
           FROM cur
          WHERE w.id = cur.id AND cur.delivery = ANY($2::text[])
         RETURNING w.*, cur.delivery AS from_delivery`,
          [
            id,
            [...from],
            to,
            patch.offerCid ?? null,
            patch.offerExpiresAt ?? null,
            patch.outcome ?? null,
            patch.updateId ?? null,
            patch.scannedTo ?? null,
          ],
        );
        const row = r.rows[0];
        if (!row) {
          const cur = await this.get(id, tx);
          if (!cur) throw new NotFoundError(`withdrawal ${id}`);
          throw new WithdrawalStateError(id, `delivery ${cur.delivery ?? 'none'}`, `delivery ${to}`);
        }
        const w = fromRow(row);
        await appendAuditBatch(tx, [
          {
            actor: this.actor(opts.actor),
            action: `withdrawal.delivery.${to}`,
            subject: `withdrawal:${id}`,
            details: {
              from: row.from_delivery,
              to,
              ...(w.offer ? { offer: { ...w.offer } } : {}),
              ...((opts.details ?? {}) as Record<string, Json>),
            },
          },
        ]);
        await appendEvents(tx, [withdrawalEvent(`withdrawal.${to}`, w)]);
        return w;
      }),
    );
  }

  /** Where reading the ledger for the end of the withdrawal's offer starts (after this offset). */
  async deliveryFrom(id: string): Promise<number | undefined> {
    const r = await this.db.query<{ delivery_from: string | number | null }>(
      'SELECT delivery_from FROM withdrawals WHERE id = $1',
      [id],
    );
    const v = r.rows[0]?.delivery_from;
    return v === null || v === undefined ? undefined : Number(v);
  }

  /** Remembers that the ledger was read up to `offset` for the offer's end (never moves back). */
  async setDeliveryFrom(id: string, offset: number): Promise<void> {
    await this.db.query(
      'UPDATE withdrawals SET delivery_from = GREATEST(COALESCE(delivery_from, 0), $2) WHERE id = $1',
      [id, offset],
    );
  }

  /** Committed withdrawals whose delivery is not final (`pending`, `offered`), oldest first. */
  async openDeliveries(limit = 500): Promise<Withdrawal[]> {
    const r = await this.db.query<Row>(
      `SELECT * FROM withdrawals WHERE delivery IN ('pending', 'offered') ORDER BY created_at, id LIMIT $1`,
      [limit],
    );
    return r.rows.map(fromRow);
  }

  /** Count of committed withdrawals per delivery (metrics); `untracked` for rows committed before. */
  async countByDelivery(): Promise<Record<DeliveryState | 'untracked', number>> {
    const r = await this.db.query<{ delivery: DeliveryState | null; n: number }>(
      `SELECT delivery, count(*)::int8 AS n FROM withdrawals WHERE state = 'committed' GROUP BY delivery`,
    );
    const out = Object.fromEntries([...DELIVERY_STATES, 'untracked'].map((s) => [s, 0])) as Record<
      DeliveryState | 'untracked',
      number
    >;
    for (const row of r.rows) out[row.delivery ?? 'untracked'] = Number(row.n);
    return out;
  }

  /** Count per state (metrics: pending withdrawals). */
  async countByState(): Promise<Record<WithdrawalState, number>> {
    const r = await this.db.query<{ state: WithdrawalState; n: number }>(
      'SELECT state, count(*)::int8 AS n FROM withdrawals GROUP BY state',
    );
    const out = Object.fromEntries(WITHDRAWAL_STATES.map((s) => [s, 0])) as Record<WithdrawalState, number>;
    for (const row of r.rows) out[row.state] = row.n;
    return out;
  }
}

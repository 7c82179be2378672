/**
 * The repository's writes, in group-committed batches (group-commit.ts):
 * creates (one multi-row insert, idempotent per caller and key) and moves of
 * the state machine (one guarded statement each, fenced by the worker's
 * lease), each batch's audit entries chained in one append and its events
 * appended last, all in the batch's transaction. Statements whose results
 * are not read travel with the next one (deferred.ts): a batch of moves costs
 * four round trips with its COMMIT, however many moves and `also` writes.
 */
import { randomUUID } from 'node:crypto';
import { type AuditEntry, appendAuditBatch } from '../audit.js';
import type { Json } from '../canonical.js';
import type { Queryable } from '../db.js';
import { type Deferring, deferring } from '../deferred.js';
import { IdempotencyConflictError, LeaseLostError, NotFoundError, WithdrawalStateError } from '../errors.js';
import { Failed } from '../group-commit.js';
import { appendEvents, type EventInput } from './events.js';
import {
  fromRow,
  type Row,
  type TransitionOptions,
  type TransitionPatch,
  type Withdrawal,
  type WithdrawalBody,
  withdrawalEvent,
} from './withdrawal-rows.js';
import { type WithdrawalState, withdrawalCommandId } from './withdrawal-states.js';

export type CreateResult = { withdrawal: Withdrawal; created: boolean };

/** A validated create waiting for its batch. */
export interface PendingCreate {
  key: string;
  caller: string;
  body: WithdrawalBody;
  requestHash: string;
  actor: string;
}

const INSERT_SQL = `INSERT INTO withdrawals (id, caller, idempotency_key, request_hash, party, receiver, amount,
    instrument_admin, instrument_id, memo, options, command_id)
  SELECT id, caller, idempotency_key, request_hash, party, receiver, amount,
    instrument_admin, instrument_id, memo, options, command_id
    FROM jsonb_to_recordset($1::jsonb) AS r(id uuid, caller text, idempotency_key text, request_hash text,
      party text, receiver text, amount numeric, instrument_admin text, instrument_id text, memo text,
      options jsonb, command_id text)
  ON CONFLICT (caller, idempotency_key) DO NOTHING
  RETURNING id, created_at, updated_at`;

const EXISTING_SQL = `SELECT * FROM withdrawals WHERE (caller, idempotency_key) IN
  (SELECT caller, idempotency_key FROM jsonb_to_recordset($1::jsonb) AS k(caller text, idempotency_key text))`;

const slot = (caller: string, key: string) => `${caller}\u0000${key}`;

/**
 * One batch of creates in the transaction `tx`, one outcome per create in
 * order: one multi-row insert (the first create of each caller + key, in
 * (caller, key) order so that concurrent batches lock keys in the same
 * order), one read of the keys that already existed (committed by an earlier
 * batch or another instance), then the audit rows of the created ones chained
 * in one append (one head lock). Later creates with a key already in the
 * batch are answered like a repeat: same request → that withdrawal
 * (created:false), another request → IdempotencyConflictError.
 */
export function insertBatch(
  on: Queryable,
  batch: readonly PendingCreate[],
): Promise<(CreateResult | Failed)[]> {
  // The audit rows' statement travels with the events' (deferred.ts).
  return deferring(on, (tx) => insertBatchOn(tx, batch));
}

async function insertBatchOn(
  tx: Deferring,
  batch: readonly PendingCreate[],
): Promise<(CreateResult | Failed)[]> {
  const first = new Map<string, PendingCreate>();
  for (const p of batch) if (!first.has(slot(p.caller, p.key))) first.set(slot(p.caller, p.key), p);
  const order = [...first.values()].sort((a, b) =>
    a.caller !== b.caller ? (a.caller < b.caller ? -1 : 1) : a.key < b.key ? -1 : a.key > b.key ? 1 : 0,
  );
  const rows = order.map((p) => {
    const id = randomUUID();
    return {
      id,
      caller: p.caller,
      idempotency_key: p.key,
      request_hash: p.requestHash,
      party: p.body.party,
      receiver: p.body.receiver,
      amount: p.body.amount,
      instrument_admin: p.body.instrument?.admin ?? null,
      instrument_id: p.body.instrument?.id ?? null,
      memo: p.body.memo ?? null,
      options: p.body.options ?? {},
      command_id: withdrawalCommandId(id),
    };
  });
  const ins = await tx.query<Pick<Row, 'id' | 'created_at' | 'updated_at'>>(INSERT_SQL, [
    JSON.stringify(rows),
  ]);
  // The inserted rows are what was sent plus the column defaults: only those are read back.
  const byId = new Map<string, (typeof rows)[number]>(rows.map((r) => [r.id, r]));
  const created = new Map<string, Row>();
  for (const r of ins.rows) {
    const sent = byId.get(r.id);
    if (!sent) throw new Error(`withdrawal insert returned an id it was not given: ${r.id}`);
    created.set(slot(sent.caller, sent.idempotency_key), {
      ...sent,
      state: 'received',
      attempts: 0,
      last_error: null,
      update_id: null,
      created_at: r.created_at,
      updated_at: r.updated_at,
    });
  }
  const existing = new Map<string, Row>();
  if (created.size < order.length) {
    const missing = order
      .filter((p) => !created.has(slot(p.caller, p.key)))
      .map((p) => ({ caller: p.caller, idempotency_key: p.key }));
    for (const r of (await tx.query<Row>(EXISTING_SQL, [JSON.stringify(missing)])).rows)
      existing.set(slot(r.caller, r.idempotency_key), r);
  }
  const outcomes: (CreateResult | Failed)[] = [];
  const audit: AuditEntry[] = [];
  const events: EventInput[] = [];
  for (const p of batch) {
    const s = slot(p.caller, p.key);
    const mine = created.get(s);
    const row = mine ?? existing.get(s);
    if (!row) throw new Error('withdrawal insert conflicted but no row holds the key');
    if (row.request_hash !== p.requestHash) {
      outcomes.push(new Failed(new IdempotencyConflictError(p.key, row.id)));
      continue;
    }
    const w = fromRow(row);
    const isNew = mine !== undefined && first.get(s) === p;
    outcomes.push({ withdrawal: w, created: isNew });
    if (isNew) events.push(withdrawalEvent('withdrawal.received', w));
    if (isNew)
      audit.push({
        actor: p.actor,
        action: 'withdrawal.create',
        subject: `withdrawal:${w.id}`,
        details: {
          caller: p.caller,
          idempotencyKey: p.key,
          requestHash: p.requestHash,
          commandId: w.commandId,
          ...p.body,
        },
      });
  }
  await appendAuditBatch(tx, audit);
  // Last: the outbox's lock is held until the commit.
  await appendEvents(tx, events);
  return outcomes;
}

/** A validated move waiting for its batch. */
export interface PendingMove {
  id: string;
  from: readonly WithdrawalState[];
  to: WithdrawalState;
  patch: TransitionPatch;
  opts: TransitionOptions;
  actor: string;
  /** The audit action, when not `withdrawal.<to>`. */
  action?: string;
}

/**
 * Locks the row (the CTE waits for a concurrent writer and then reads the
 * latest state) and moves it only from an allowed state, returning the new
 * row and the state it left.
 */
const MOVE_SQL = `WITH cur AS (SELECT id, state FROM withdrawals WHERE id = $1 FOR UPDATE)
  UPDATE withdrawals w SET state = $3, updated_at = now(),
      attempts = w.attempts + $4,
      last_error = CASE WHEN $5 THEN $6 ELSE w.last_error END,
      update_id = COALESCE($7, w.update_id),
      lookup_from = COALESCE(w.lookup_from, $8),
      delivery = CASE WHEN $3 = 'committed' THEN COALESCE(w.delivery, 'pending') ELSE w.delivery END
    FROM cur
   WHERE w.id = cur.id AND cur.state = ANY($2::text[])
     AND ($9::text IS NULL OR w.lease_owner = $9)
  RETURNING w.*, cur.state AS from_state`;

/**
 * One batch of moves in the transaction `tx`, one outcome per move in order:
 * one statement per move, all sent in one round trip (rows locked in id
 * order, so that concurrent batches of several processes lock in the same
 * order), then each move's `also`, then the audit entries of every move
 * chained in one append (one head lock). A move
 * whose withdrawal is missing or in another state is answered with its error
 * and leaves the others (and the transaction) untouched.
 */
export function moveBatch(on: Queryable, batch: readonly PendingMove[]): Promise<(Withdrawal | Failed)[]> {
  // Statements whose results are not read (the moves' `also` writes, the audit rows) travel with
  // the next statement (deferred.ts): the same statements in the same transaction, fewer round trips.
  return deferring(on, (tx) => moveBatchOn(tx, batch));
}

async function moveBatchOn(tx: Deferring, batch: readonly PendingMove[]): Promise<(Withdrawal | Failed)[]> {
  const out: (Withdrawal | Failed)[] = new Array(batch.length);
  const order = batch.map((_, i) => i).sort((a, b) => compareIds(batch[a]?.id ?? '', batch[b]?.id ?? ''));
  const audit: AuditEntry[] = [];
  // In the order the rows were moved (a withdrawal moved twice in one batch: in submission order).
  const events: EventInput[] = [];
  // Every move's guarded statement in one round trip, in id order; each still its own statement.
  const moved = await tx.batch(
    order.map((i) => {
      const m = batch[i] as PendingMove;
      const { patch } = m;
      return {
        sql: MOVE_SQL,
        params: [
          m.id,
          [...m.from],
          m.to,
          patch.incrementAttempts ? 1 : 0,
          patch.lastError !== undefined,
          patch.lastError ?? null,
          patch.updateId ?? null,
          patch.lookupFrom ?? null,
          m.opts.owner ?? null,
        ],
      };
    }),
  );
  for (const [k, i] of order.entries()) {
    const m = batch[i] as PendingMove;
    const { patch } = m;
    const row = moved[k]?.rows[0] as (Row & { from_state: WithdrawalState }) | undefined;
    if (!row) {
      const cur = (
        await tx.query<{ state: WithdrawalState; lease_owner: string | null }>(
          'SELECT state, lease_owner FROM withdrawals WHERE id = $1',
          [m.id],
        )
      ).rows[0];
      const owner = m.opts.owner;
      out[i] = new Failed(
        !cur
          ? new NotFoundError(`withdrawal ${m.id}`)
          : owner !== undefined && m.from.includes(cur.state) && cur.lease_owner !== owner
            ? new LeaseLostError(m.id, owner)
            : new WithdrawalStateError(m.id, cur.state, m.to),
      );
      continue;
    }
    const w = fromRow(row);
    if (m.opts.also) await m.opts.also(tx, w);
    audit.push(...(m.opts.audit ?? []), {
      actor: m.actor,
      action: m.action ?? `withdrawal.${m.to}`,
      subject: `withdrawal:${m.id}`,
      details: {
        from: row.from_state,
        to: m.to,
        attempts: w.attempts,
        ...(patch.lastError !== undefined ? { lastError: patch.lastError } : {}),
        ...(patch.updateId !== undefined ? { updateId: patch.updateId } : {}),
        ...((m.opts.details ?? {}) as Record<string, Json>),
      },
    });
    // A move of the state machine is an event; a note of the latest error (`action`) is not.
    if (m.action === undefined) events.push(withdrawalEvent(`withdrawal.${m.to}`, w));
    out[i] = w;
  }
  await appendAuditBatch(tx, audit);
  // Last: one statement for the batch; the outbox's lock is held until the commit.
  await appendEvents(tx, events);
  return out;
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

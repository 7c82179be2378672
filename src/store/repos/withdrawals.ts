/**
 * Withdrawals: recorded before any side effect, idempotent per (caller,
 * Idempotency-Key), moved through a state machine with atomic guarded
 * updates, each change audited in the same transaction.
 *
 * States and allowed transitions (also enforced by the `withdrawals_guard`
 * trigger, so a bug elsewhere cannot skip a step):
 *
 *   received  → prepared | awaiting_approval | rejected | failed | cancelled | expired
 *   prepared  → prepared (re-prepared, e.g. after the window passed)
 *             | signed | awaiting_signature | awaiting_approval
 *             | rejected | failed | cancelled | expired
 *   awaiting_signature → prepared | rejected | failed | cancelled | expired
 *   awaiting_approval  → prepared | rejected | failed | cancelled | expired
 *   signed    → submitted | prepared (re-prepare: nothing was submitted)
 *             | failed | expired
 *   submitted → submitted (resubmitted after an ambiguous outcome)
 *             | committed | rejected | expired
 *             | prepared (the earlier submission definitely did not commit)
 *   committed, rejected, failed, cancelled, expired: terminal.
 *
 * Meaning: `received` nothing done yet; `prepared` a prepared transaction is
 * recorded; `signed` a signature is recorded and NOTHING was sent (a worker
 * moves to `submitted` BEFORE it calls execute, write-ahead); `submitted` it
 * may be on the ledger: resume looks the command id up on the ledger before
 * acting again. `rejected` = refused by the pipeline or rejected by the
 * ledger; `failed` = gave up (no commit possible); `expired` = its deadline
 * passed uncommitted; `cancelled` = by the caller, only before signing
 * starts: while `received`, `awaiting_signature` (the request across the
 * air gap is then void) or `awaiting_approval`. `awaiting_approval`: the
 * policy asks for approvals before it goes on (the approval request is in
 * approvals.ts); the worker does not poll it (not in UNFINISHED_STATES): an
 * approval, rejection or expiry moves it on. The move to `prepared` is what
 * authorises signing (the worker makes it right before it signs), so a
 * cancel and that move
 * exclude each other on the row: a cancel that answered `cancelled` was
 * never followed by a signature, on any instance, and one that comes after
 * the move is refused ("signing has started"). The `prepared → cancelled`
 * edge stays in the table and the trigger for schema compatibility; cancel
 * does not take it.
 *
 * `lastError` is why the latest attempt did not finish: set by the move that
 * ends it, or by `noteError` while it waits (audited as `withdrawal.error`).
 *
 * The command id is derived from the withdrawal id (`cs-wd-<uuid>`), so a
 * resumed withdrawal submits under the same id and the ledger deduplicates.
 *
 * Delivery: where the funds of a `committed` withdrawal are. A second table
 * (`DELIVERY_EDGES`, also enforced by the `withdrawals_delivery_guard`
 * trigger), entered when the row becomes `committed`:
 *
 *   pending   → delivered | offered | returned
 *   offered   → delivered | returned   (and offered again: a new instruction)
 *   delivered, returned: terminal.
 *
 * `pending` the committed transaction's result is not read yet; `delivered`
 * the receiver holds the amount (the transfer completed in one step, or the
 * offer was accepted: `offer.outcome`); `offered` a transfer instruction
 * waits for the receiver, the amount locked in the sender's holdings;
 * `returned` the offer ended without delivery (rejected, expired, withdrawn
 * or failed: `offer.outcome`) and the amount is back with the sender.
 * Rows committed before delivery was tracked have none.
 *
 * Events (the outbox, events.ts), appended last in the transaction of the
 * change, `data` the withdrawal as `GET /v1/withdrawals/{id}` shows it
 * (`withdrawalEventData`): `withdrawal.received` when one is created,
 * `withdrawal.<state>` at every move of the state machine (a move to the
 * same state, e.g. re-prepared, again), and for delivery
 * `withdrawal.offered`, `withdrawal.delivered`, `withdrawal.returned` (the
 * delivery state it moved to; `pending` is entered with `committed`, whose
 * event shows it). `noteError` changes no state and emits nothing.
 */
import { randomUUID } from 'node:crypto';
import { type AuditEntry, appendAuditBatch } from '../audit.js';
import { canonicalJson, type Json, sha256Hex, storable } from '../canonical.js';
import type { Db, Queryable } from '../db.js';
import {
  BadRequestError,
  IdempotencyConflictError,
  LeaseLostError,
  NotFoundError,
  WithdrawalStateError,
} from '../errors.js';
import { Failed, GroupCommit } from '../group-commit.js';
import { appendEvents, type EventInput } from './events.js';

export const WITHDRAWAL_STATES = [
  'received',
  'prepared',
  'signed',
  'submitted',
  'awaiting_signature',
  'awaiting_approval',
  'committed',
  'rejected',
  'failed',
  'cancelled',
  'expired',
] as const;
export type WithdrawalState = (typeof WITHDRAWAL_STATES)[number];

export const WITHDRAWAL_EDGES: Readonly<Record<WithdrawalState, readonly WithdrawalState[]>> = {
  received: ['prepared', 'awaiting_approval', 'rejected', 'failed', 'cancelled', 'expired'],
  prepared: [
    'prepared',
    'signed',
    'awaiting_signature',
    'awaiting_approval',
    'rejected',
    'failed',
    'cancelled',
    'expired',
  ],
  /** The party's key is held offline: its signing request is across the air gap. */
  awaiting_signature: ['prepared', 'rejected', 'failed', 'cancelled', 'expired'],
  /** The policy asks for approvals: it waits for them (or a rejection, or their expiry). */
  awaiting_approval: ['prepared', 'rejected', 'failed', 'cancelled', 'expired'],
  signed: ['submitted', 'prepared', 'failed', 'expired'],
  submitted: ['submitted', 'committed', 'rejected', 'expired', 'prepared'],
  committed: [],
  rejected: [],
  failed: [],
  cancelled: [],
  expired: [],
};

export const DELIVERY_STATES = ['pending', 'delivered', 'offered', 'returned'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

export const DELIVERY_EDGES: Readonly<Record<DeliveryState, readonly DeliveryState[]>> = {
  pending: ['delivered', 'offered', 'returned'],
  offered: ['offered', 'delivered', 'returned'],
  delivered: [],
  returned: [],
};

/** How an offer ended: `accepted` delivered it; the others returned the amount to the sender. */
export const OFFER_OUTCOMES = ['accepted', 'rejected', 'expired', 'withdrawn', 'failed'] as const;
export type OfferOutcome = (typeof OFFER_OUTCOMES)[number];

export function canDeliver(from: DeliveryState, to: DeliveryState): boolean {
  return DELIVERY_EDGES[from].includes(to);
}

export const UNFINISHED_STATES: readonly WithdrawalState[] = ['received', 'prepared', 'signed', 'submitted'];

/** States a withdrawal waits in before its outcome: the worker's, the air gap's and the approvers'. */
export const PENDING_STATES = [
  'received',
  'prepared',
  'signed',
  'submitted',
  'awaiting_signature',
  'awaiting_approval',
] as const;
export type PendingState = (typeof PENDING_STATES)[number];
/** Where a caller's cancel is accepted: before signing is authorised (see the header). */
const CANCELLABLE: WithdrawalState[] = ['received', 'awaiting_signature', 'awaiting_approval'];

/** Why a cancel of a withdrawal in `state` comes too late, and what follows. */
function tooLate(id: string, state: WithdrawalState): string {
  if (['prepared', 'signed', 'submitted'].includes(state))
    return `too late to cancel withdrawal ${id}: signing has started (it is ${state}); it goes on to its outcome, which GET /v1/withdrawals/${id} shows`;
  return `withdrawal ${id} is ${state}: it is finished and cannot be cancelled`;
}

export function canTransition(from: WithdrawalState, to: WithdrawalState): boolean {
  return WITHDRAWAL_EDGES[from].includes(to);
}

/**
 * The prefix of withdrawals' command ids. Reserved: no other flow may submit
 * under such an id (transfer.ts `checkCallerCommandId`), or the withdrawal
 * would find that transaction's commit under its command id and take it for
 * its own.
 */
export const WITHDRAWAL_COMMAND_PREFIX = 'cs-wd-';

/** The ledger command id of a withdrawal. */
export function withdrawalCommandId(id: string): string {
  return `${WITHDRAWAL_COMMAND_PREFIX}${id}`;
}

export interface WithdrawalBody {
  /** The sending party (one of ours). */
  party: string;
  /** Receiving party id (or ANS name, as the caller wrote it). */
  receiver: string;
  /** Positive decimal, at most 10 decimals. */
  amount: string;
  instrument?: { admin: string; id: string };
  memo?: string;
  /** Further request fields that are part of the request (and of the idempotency comparison). */
  options?: Record<string, string | number | boolean>;
}

export interface Withdrawal extends WithdrawalBody {
  id: string;
  caller: string;
  idempotencyKey: string;
  /** SHA-256 hex of the canonical normalised body. */
  requestHash: string;
  options: Record<string, string | number | boolean>;
  state: WithdrawalState;
  commandId: string;
  attempts: number;
  lastError?: string;
  updateId?: string;
  /** Where the funds are, once committed (see `DELIVERY_EDGES`); absent before, and on rows committed before it was tracked. */
  delivery?: DeliveryState;
  /** The transfer offer the withdrawal made, when it made one. */
  offer?: WithdrawalOffer;
  createdAt: string;
  updatedAt: string;
}

export interface WithdrawalOffer {
  /** The transfer instruction waiting for the receiver (the latest one, when an answer made a new one). */
  instructionCid: string;
  /** Until when the receiver may accept (the instruction's executeBefore). */
  expiresAt?: string;
  outcome?: OfferOutcome;
  /** The ledger update that ended the offer. */
  updateId?: string;
}

interface Row {
  id: string;
  caller: string;
  idempotency_key: string;
  request_hash: string;
  party: string;
  receiver: string;
  amount: string;
  instrument_admin: string | null;
  instrument_id: string | null;
  memo: string | null;
  options: Record<string, string | number | boolean>;
  state: WithdrawalState;
  command_id: string;
  attempts: number;
  last_error: string | null;
  update_id: string | null;
  delivery?: DeliveryState | null;
  offer_cid?: string | null;
  offer_expires_at?: string | null;
  offer_outcome?: OfferOutcome | null;
  delivery_update_id?: string | null;
  created_at: string;
  updated_at: string;
}

/** Canonical decimal: no leading zeros, no trailing fractional zeros ("010.50" → "10.5"). */
export function canonicalDecimal(text: string, field = 'amount'): string {
  const m = /^([0-9]{1,28})(?:\.([0-9]{1,10}))?$/.exec(text);
  if (!m)
    throw new BadRequestError(field, `must be a positive decimal with at most 28 digits and 10 decimals`);
  const int = m[1]!.replace(/^0+(?=\d)/, '');
  const frac = (m[2] ?? '').replace(/0+$/, '');
  const out = frac ? `${int}.${frac}` : int;
  if (/^0(\.0*)?$/.test(out)) throw new BadRequestError(field, 'must be positive');
  return out;
}

const LONE_SURROGATE = /\p{Cs}/u;

function text(v: unknown, field: string, max: number, min = 1): string {
  if (typeof v !== 'string' || v.length < min || v.length > max)
    throw new BadRequestError(field, `must be a string of ${min}..${max} characters`);
  if (v.includes('\u0000')) throw new BadRequestError(field, 'must not contain NUL');
  // a lone UTF-16 surrogate cannot be stored (text is UTF-8, jsonb refuses the escape)
  if (LONE_SURROGATE.test(v))
    throw new BadRequestError(field, 'must be well-formed Unicode (a lone surrogate)');
  return v;
}

/** The body as it is stored and compared: validated, amount canonical, absent fields dropped. */
export function normaliseWithdrawalBody(body: WithdrawalBody): WithdrawalBody {
  const out: WithdrawalBody = {
    party: text(body.party, 'party', 255),
    receiver: text(body.receiver, 'receiver', 255),
    amount: canonicalDecimal(typeof body.amount === 'string' ? body.amount : String(body.amount)),
  };
  if (body.instrument !== undefined)
    out.instrument = {
      admin: text(body.instrument?.admin, 'instrument.admin', 255),
      id: text(body.instrument?.id, 'instrument.id', 255),
    };
  if (body.memo !== undefined) out.memo = text(body.memo, 'memo', 4096, 0);
  if (body.options !== undefined && Object.keys(body.options).length > 0) {
    for (const [k, v] of Object.entries(body.options))
      if (!['string', 'number', 'boolean'].includes(typeof v))
        throw new BadRequestError(`options.${k}`, 'must be a string, number or boolean');
    out.options = storable(body.options) as Record<string, string | number | boolean>;
  }
  return out;
}

export function withdrawalRequestHash(normalised: WithdrawalBody): string {
  return sha256Hex(`canton-signer/withdrawal@1\n${canonicalJson(normalised)}`);
}

function fromRow(r: Row): Withdrawal {
  const w: Withdrawal = {
    id: r.id,
    caller: r.caller,
    idempotencyKey: r.idempotency_key,
    requestHash: r.request_hash,
    party: r.party,
    receiver: r.receiver,
    amount: canonicalDecimal(r.amount),
    options: { ...r.options },
    state: r.state,
    commandId: r.command_id,
    attempts: r.attempts,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
  if (r.instrument_admin !== null && r.instrument_id !== null)
    w.instrument = { admin: r.instrument_admin, id: r.instrument_id };
  if (r.memo !== null) w.memo = r.memo;
  if (r.last_error !== null) w.lastError = r.last_error;
  if (r.update_id !== null) w.updateId = r.update_id;
  if (r.delivery) w.delivery = r.delivery;
  if (r.offer_cid) {
    w.offer = { instructionCid: r.offer_cid };
    if (r.offer_expires_at) w.offer.expiresAt = r.offer_expires_at;
    if (r.offer_outcome) w.offer.outcome = r.offer_outcome;
    if (r.delivery_update_id) w.offer.updateId = r.delivery_update_id;
  }
  return w;
}

/**
 * The withdrawal as the REST API shows it (the server's `withdrawalView` is
 * this): the `data` of its events.
 */
export function withdrawalEventData(w: Withdrawal): Record<string, unknown> {
  const executeBefore = w.options.executeBefore;
  return {
    id: w.id,
    state: w.state,
    party: w.party,
    receiver: w.receiver,
    amount: w.amount,
    ...(w.instrument ? { instrument: { ...w.instrument } } : {}),
    ...(w.memo !== undefined ? { memo: w.memo } : {}),
    ...(typeof executeBefore === 'string' ? { executeBefore } : {}),
    commandId: w.commandId,
    attempts: w.attempts,
    ...(w.lastError !== undefined ? { lastError: w.lastError } : {}),
    ...(w.updateId !== undefined ? { updateId: w.updateId } : {}),
    ...(w.delivery !== undefined ? { delivery: w.delivery } : {}),
    ...(w.offer !== undefined ? { offer: { ...w.offer } } : {}),
    createdAt: w.createdAt,
    updatedAt: w.updatedAt,
  };
}

/** The event of withdrawal `w` under `type` (`withdrawal.<state>`, `withdrawal.delivered`, …). */
function withdrawalEvent(type: string, w: Withdrawal): EventInput {
  return { type, subject: `withdrawal:${w.id}`, data: withdrawalEventData(w) };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface TransitionPatch {
  /** Set (string) or clear (null) the last error. */
  lastError?: string | null;
  updateId?: string;
  /** attempts + 1 (a new prepare or submission attempt). */
  incrementAttempts?: boolean;
  /** The ledger end read before submitting: kept if one is already recorded (see `setLookupFrom`). */
  lookupFrom?: number;
}

/** The facts a delivery move records (absent: kept as they are). */
export interface DeliveryPatch {
  offerCid?: string;
  /** ISO time. */
  offerExpiresAt?: string;
  outcome?: OfferOutcome;
  /** The update that ended the offer. */
  updateId?: string;
  /** The ledger was read up to this offset for the offer's end. */
  scannedTo?: number;
}

export interface TransitionOptions {
  actor?: string;
  /** Extra facts for the audit entry (hash, reason, …). */
  details?: Record<string, unknown>;
  /** Runs in the same transaction after the update (e.g. record the prepared transaction). */
  also?: (tx: Queryable, w: Withdrawal) => Promise<void>;
  /**
   * Audit entries that belong with this move (a flow's journal record of the
   * step that causes it), appended just before the move's own entry, in the
   * same transaction: both are committed, or neither.
   */
  audit?: readonly AuditEntry[];
  /**
   * The worker that moves the row, when a worker does: the move happens only
   * while the row is leased to it (a worker whose lease lapsed and was taken
   * by another gets LeaseLostError, so two workers never both submit).
   */
  owner?: string;
}

export interface ListOptions {
  party?: string | string[];
  state?: WithdrawalState | WithdrawalState[];
  delivery?: DeliveryState;
  caller?: string;
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor?: string;
  limit?: number;
  /** Newest first (default) or oldest first. */
  order?: 'desc' | 'asc';
}

export interface Page<T> {
  items: T[];
  /** Absent on the last page. */
  nextCursor?: string;
}

function encodeCursor(r: Withdrawal): string {
  return Buffer.from(JSON.stringify([r.createdAt, r.id]), 'utf8').toString('base64url');
}

/** `created_at` as the database gives it (db.ts): ISO-8601 UTC with milliseconds, a four-digit year. */
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * The (created_at, id) of a cursor `encodeCursor` made, or 400 naming
 * `cursor`: only that exact form, so that nothing the database might refuse
 * to cast (a bare "1", an expanded year) reaches the query.
 */
function decodeCursor(cursor: string): [string, string] {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (
      Array.isArray(v) &&
      v.length === 2 &&
      typeof v[0] === 'string' &&
      CURSOR_TIME.test(v[0]) &&
      Date.parse(v[0]) >= 0 &&
      new Date(v[0]).toISOString() === v[0] &&
      typeof v[1] === 'string' &&
      UUID.test(v[1])
    )
      return [v[0], v[1]];
  } catch {
    // fall through
  }
  throw new BadRequestError('cursor', 'is not a cursor this service issued');
}

type CreateResult = { withdrawal: Withdrawal; created: boolean };

/** A validated create waiting for its batch. */
interface PendingCreate {
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
async function insertBatch(
  tx: Queryable,
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
interface PendingMove {
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

/**
 * One batch of moves in the transaction `tx`, one outcome per move in order:
 * one statement per move (rows locked in id order, so that concurrent batches
 * of several processes lock in the same order), each move's `also`, then the
 * audit entries of every move chained in one append (one head lock). A move
 * whose withdrawal is missing or in another state is answered with its error
 * and leaves the others (and the transaction) untouched.
 */
async function moveBatch(tx: Queryable, batch: readonly PendingMove[]): Promise<(Withdrawal | Failed)[]> {
  const out: (Withdrawal | Failed)[] = new Array(batch.length);
  const order = batch.map((_, i) => i).sort((a, b) => compareIds(batch[a]?.id ?? '', batch[b]?.id ?? ''));
  const audit: AuditEntry[] = [];
  // In the order the rows were moved (a withdrawal moved twice in one batch: in submission order).
  const events: EventInput[] = [];
  for (const i of order) {
    const m = batch[i] as PendingMove;
    const { patch } = m;
    const r = await tx.query<Row & { from_state: WithdrawalState }>(MOVE_SQL, [
      m.id,
      [...m.from],
      m.to,
      patch.incrementAttempts ? 1 : 0,
      patch.lastError !== undefined,
      patch.lastError ?? null,
      patch.updateId ?? null,
      patch.lookupFrom ?? null,
      m.opts.owner ?? null,
    ]);
    const row = r.rows[0];
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
        CANCELLABLE,
        'cancelled',
        {},
        {
          actor: opts.actor,
          details: opts.reason !== undefined ? { reason: opts.reason } : {},
          // A request across the air gap for it is void: a response to it is refused, its signature never used.
          also: async (tx) =>
            void (await tx.query(
              `UPDATE air_gap_exports SET status = 'cancelled', updated_at = now()
                WHERE withdrawal_id = $1 AND status IN ('open', 'imported')`,
              [id],
            )),
        },
      );
      return { withdrawal: done, changed: true };
    } catch (e) {
      if (e instanceof WithdrawalStateError && e.current === 'cancelled') {
        const again = await this.get(id);
        if (again) return { withdrawal: again, changed: false };
      }
      if (e instanceof WithdrawalStateError && !CANCELLABLE.includes(e.current as WithdrawalState))
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
    return this.db.transaction(async (tx) => {
      // One sending party's withdrawals are carried by one owner at a time, across processes and
      // instances: they spend the same holdings. Claims for one party are serialised by this lock,
      // taken before the statement that checks the others (whose snapshot then sees their leases).
      await tx.query(
        `SELECT pg_advisory_xact_lock(hashtextextended('cs-party:' || party, 7011)) FROM withdrawals WHERE id = $1`,
        [id],
      );
      return lease(tx);
    });
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
    return inTx(async (tx) => {
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
    });
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

/**
 * What a withdrawal row is, read and written: the request as stored and
 * compared (validated, amount canonical), the row as the repository returns
 * it (`fromRow`), the event data every withdrawal event carries, the
 * options of moves and pages, and the list cursor.
 */
import type { AuditEntry } from '../audit.js';
import { canonicalJson, sha256Hex, storable } from '../canonical.js';
import type { Queryable } from '../db.js';
import { BadRequestError } from '../errors.js';
import type { EventInput } from './events.js';
import type { DeliveryState, OfferOutcome, WithdrawalState } from './withdrawal-states.js';

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

export interface Row {
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

export function text(v: unknown, field: string, max: number, min = 1): string {
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

export function fromRow(r: Row): Withdrawal {
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
export function withdrawalEvent(type: string, w: Withdrawal): EventInput {
  return { type, subject: `withdrawal:${w.id}`, data: withdrawalEventData(w) };
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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

export function encodeCursor(r: Withdrawal): string {
  return Buffer.from(JSON.stringify([r.createdAt, r.id]), 'utf8').toString('base64url');
}

/** `created_at` as the database gives it (db.ts): ISO-8601 UTC with milliseconds, a four-digit year. */
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * The (created_at, id) of a cursor `encodeCursor` made, or 400 naming
 * `cursor`: only that exact form, so that nothing the database might refuse
 * to cast (a bare "1", an expanded year) reaches the query.
 */
export function decodeCursor(cursor: string): [string, string] {
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

/**
 * Deposits: one row per transfer into a party of the book from a party
 * outside it, as ledger ingestion found it (exchange/ingest.ts writes them,
 * in the transaction of the update). A one-step transfer is `credited` at
 * once; a two-step one (a transfer offer) is `pending` until the offer ends.
 *
 * The lifecycle is `DEPOSIT_LIFECYCLE`: for a state, what each end of an
 * offer moves it to. Nothing else moves a deposit (the `deposits_guard`
 * trigger refuses any other change of state, and any change of a deposit's
 * facts). The account a deposit is credited to comes from its memo through
 * the attribution rules; a deposit without one is `unattributed` (account
 * null) until an operator assigns it (`assign`, audited, once).
 */
import { appendAudit } from '../audit.js';
import type { Db, Queryable } from '../db.js';
import { BadRequestError, NotFoundError, StoreError } from '../errors.js';
import { appendEvents, type EventInput } from './events.js';

export type DepositState = 'pending' | 'credited' | 'returned';
export type DepositKind = 'one_step' | 'two_step';
/** How an offer ended (the token standard's outcome of the instruction). */
export type OfferEnd = 'completed' | 'failed' | 'pending' | 'rejected' | 'withdrawn' | 'expired' | 'unknown';

/**
 * The deposit lifecycle: state × how its offer ended → next state. A
 * `pending` outcome is a multi-step registry's next instruction: the deposit
 * stays pending, following the new instruction. Final states have no exits.
 */
export const DEPOSIT_LIFECYCLE: Readonly<
  Record<DepositState, Readonly<Partial<Record<OfferEnd, DepositState>>>>
> = {
  pending: {
    completed: 'credited',
    pending: 'pending',
    rejected: 'returned',
    withdrawn: 'returned',
    expired: 'returned',
    failed: 'returned',
    unknown: 'returned',
  },
  credited: {},
  returned: {},
};

/** The next state of a deposit in `state` whose offer ended with `end`; undefined: not a move the lifecycle has. */
export function nextDepositState(state: DepositState, end: OfferEnd): DepositState | undefined {
  return DEPOSIT_LIFECYCLE[state][end];
}

export interface Deposit {
  id: string;
  party: string;
  sender: string;
  instrument: { admin: string; id: string };
  /** Decimal string, 10 decimals. */
  amount: string;
  memo?: string;
  /** The memo was longer than allowed: stored cut, not used for attribution. */
  memoTruncated?: boolean;
  /** The customer account it is credited to; absent: unattributed. */
  account?: string;
  /** `rule:<name>` or `operator`. */
  attribution?: string;
  kind: DepositKind;
  state: DepositState;
  /** How the offer ended (two-step deposits). */
  outcome?: OfferEnd;
  instructionCid?: string;
  executeBefore?: string;
  updateId: string;
  offset: number;
  recordTime: string;
  settledUpdateId?: string;
  settledOffset?: number;
  createdAt: string;
  updatedAt: string;
}

export interface DepositRow {
  id: string;
  party: string;
  sender: string;
  instrument_admin: string;
  instrument_id: string;
  amount: string;
  memo: string | null;
  memo_truncated: boolean;
  account: string | null;
  attribution: string | null;
  kind: DepositKind;
  state: DepositState;
  outcome: OfferEnd | null;
  instruction_cid: string | null;
  execute_before: string | null;
  update_id: string;
  node_id: number;
  offset: number;
  record_time: string;
  settled_update_id: string | null;
  settled_offset: number | null;
  created_at: string;
  updated_at: string;
}

export function depositFromRow(r: DepositRow): Deposit {
  const d: Deposit = {
    id: r.id,
    party: r.party,
    sender: r.sender,
    instrument: { admin: r.instrument_admin, id: r.instrument_id },
    amount: r.amount,
    kind: r.kind,
    state: r.state,
    updateId: r.update_id,
    offset: r.offset,
    recordTime: r.record_time,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
  if (r.memo !== null) d.memo = r.memo;
  if (r.memo_truncated) d.memoTruncated = true;
  if (r.account !== null) d.account = r.account;
  if (r.attribution !== null) d.attribution = r.attribution;
  if (r.outcome !== null) d.outcome = r.outcome;
  if (r.instruction_cid !== null) d.instructionCid = r.instruction_cid;
  if (r.execute_before !== null) d.executeBefore = r.execute_before;
  if (r.settled_update_id !== null) d.settledUpdateId = r.settled_update_id;
  if (r.settled_offset !== null) d.settledOffset = r.settled_offset;
  return d;
}

/** The outbox event of a deposit (the deposit as the REST API shows it). */
export function depositEvent(type: string, d: Deposit): EventInput {
  return { type, subject: `deposit:${d.id}`, data: { ...d } };
}

export const DEPOSIT_COLUMNS = `id, party, sender, instrument_admin, instrument_id, amount::text AS amount, memo,
  memo_truncated, account, attribution, kind, state, outcome, instruction_cid, execute_before, update_id, node_id,
  "offset", record_time, settled_update_id, settled_offset, created_at, updated_at`;

export interface DepositQuery {
  party?: string;
  state?: DepositState;
  account?: string;
  /** Only deposits without an account. */
  unattributed?: boolean;
  /** From `nextCursor` of the previous page. */
  cursor?: string;
  limit?: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function decodeCursor(c: string): { at: string; id: string } {
  try {
    const [at, id] = JSON.parse(Buffer.from(c, 'base64url').toString('utf8')) as [string, string];
    if (typeof at === 'string' && typeof id === 'string' && UUID.test(id) && !Number.isNaN(Date.parse(at)))
      return { at, id };
  } catch {
    // fall through
  }
  throw new BadRequestError(
    'cursor',
    'not a cursor this service gave: pass nextCursor from the previous page',
  );
}

export class DepositRepo {
  constructor(
    private readonly db: Db,
    private readonly opts: { actor?: string } = {},
  ) {}

  async get(id: string, q: Queryable = this.db): Promise<Deposit | undefined> {
    if (!UUID.test(id)) return undefined;
    const r = await q.query<DepositRow>(`SELECT ${DEPOSIT_COLUMNS} FROM deposits WHERE id = $1`, [id]);
    return r.rows[0] && depositFromRow(r.rows[0]);
  }

  /** A page of deposits, oldest first, and the cursor of the next page (absent on the last). */
  async list(q: DepositQuery = {}): Promise<{ items: Deposit[]; nextCursor?: string }> {
    const limit = Math.min(Math.max(1, Math.trunc(q.limit ?? 100)), 500);
    const where: string[] = [];
    const params: unknown[] = [];
    const add = (sql: (p: string) => string, v: unknown) => {
      params.push(v);
      where.push(sql(`$${params.length}`));
    };
    if (q.party !== undefined) add((p) => `party = ${p}`, q.party);
    if (q.state !== undefined) add((p) => `state = ${p}`, q.state);
    if (q.account !== undefined) add((p) => `account = ${p}`, q.account);
    if (q.unattributed) where.push('account IS NULL');
    if (q.cursor !== undefined) {
      const c = decodeCursor(q.cursor);
      params.push(c.at, c.id);
      where.push(`(created_at, id) > ($${params.length - 1}::timestamptz, $${params.length}::uuid)`);
    }
    params.push(limit + 1);
    const r = await this.db.query<DepositRow>(
      `SELECT ${DEPOSIT_COLUMNS} FROM deposits ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
        ORDER BY created_at, id LIMIT $${params.length}`,
      params,
    );
    const items = r.rows.slice(0, limit).map(depositFromRow);
    const last = items.at(-1);
    return r.rows.length > limit && last
      ? { items, nextCursor: Buffer.from(JSON.stringify([last.createdAt, last.id])).toString('base64url') }
      : { items };
  }

  /** Pending two-step deposits (offers waiting for the party's answer), oldest first. */
  async pending(party?: string, limit = 500): Promise<Deposit[]> {
    const r = await this.db.query<DepositRow>(
      `SELECT ${DEPOSIT_COLUMNS} FROM deposits WHERE state = 'pending' ${party ? 'AND party = $2' : ''}
        ORDER BY created_at, id LIMIT $1`,
      party ? [limit, party] : [limit],
    );
    return r.rows.map(depositFromRow);
  }

  /**
   * Credits an unattributed deposit to `account` (an operator's decision,
   * audited, with an event). Refused when the deposit already has an account.
   */
  async assign(id: string, account: string, o: { actor?: string; reason?: string } = {}): Promise<Deposit> {
    if (!/^\S(.{0,198}\S)?$/.test(account))
      throw new BadRequestError(
        'account',
        'an account is 1-200 characters, not starting or ending with a space',
      );
    const d = await this.db.transaction(async (tx) => {
      const r = await tx.query<DepositRow>(
        `UPDATE deposits SET account = $2, attribution = 'operator', updated_at = now()
          WHERE id = $1 AND account IS NULL RETURNING ${DEPOSIT_COLUMNS}`,
        [id, account],
      );
      const row = r.rows[0];
      if (!row) {
        const cur = await this.get(id, tx);
        if (!cur) throw new NotFoundError(`deposit ${id}`);
        throw new StoreError(
          'invalid_state',
          `deposit ${id} is already credited to account ${cur.account}: an attribution is not changed`,
        );
      }
      const dep = depositFromRow(row);
      await appendAudit(tx, {
        actor: o.actor ?? this.opts.actor ?? 'system',
        action: 'deposit.assign',
        subject: `deposit:${id}`,
        details: { account, ...(o.reason ? { reason: o.reason } : {}) },
      });
      await appendEvents(tx, [depositEvent('deposit.assigned', dep)]);
      return dep;
    });
    return d;
  }

  /** Counts by state (and unattributed), for metrics. */
  async counts(): Promise<{ state: DepositState; unattributed: boolean; n: number }[]> {
    const r = await this.db.query<{ state: DepositState; unattributed: boolean; n: number }>(
      `SELECT state, account IS NULL AS unattributed, count(*)::int AS n FROM deposits GROUP BY 1, 2`,
    );
    return r.rows;
  }
}

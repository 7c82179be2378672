/**
 * Names of the signer's parties (table `ans_names`): one row per
 * registration of a name-service entry, from the request to the entry, its
 * renewals and its end. The row keeps what the lifecycle needs to act without
 * asking again (the DSO and the terms the entry was registered under, the
 * subscription's reference, the due date and expiry in µs) and what a person
 * asks (state, what was paid, the last error). Every change goes through
 * `move`: a compare-and-set on the state, with its events (the one outbox)
 * and its audit entry written in the same transaction.
 */
import { randomUUID } from 'node:crypto';
import { appendAuditBatch } from '../audit.js';
import type { Db, Queryable } from '../db.js';
import { appendEvents } from './events.js';

export const NAME_STATES = [
  'requesting', // the entry is being requested
  'requested', // the request exists; the first payment is due
  'paid', // the first payment is locked; the DSO collects it (or rejects the name)
  'active', // the entry exists; renewals are paid when their window opens
  'renewing', // a renewal payment is locked; the DSO collects it before the entry expires
  'lapsed', // the entry expired with a renewal payment still locked: it is taken back
  'expired', // the entry is gone
  'rejected', // the DSO refused the name and returned the payment (minus the fees of locking it)
  'failed', // nothing was paid: the request could not be made
] as const;
export type NameState = (typeof NAME_STATES)[number];
export const TERMINAL_NAME_STATES: ReadonlySet<NameState> = new Set(['expired', 'rejected', 'failed']);

export interface NameRecord {
  id: string;
  party: string;
  name: string;
  url: string;
  description: string;
  state: NameState;
  autoRenew: boolean;
  dso: string;
  entryFeeUsd: string;
  lifetimeUs: bigint;
  renewalUs: bigint;
  descriptionPrefix: string;
  requestCid?: string;
  entryCid?: string;
  paymentCid?: string;
  expiresUs?: bigint;
  nextDueUs?: bigint;
  renewals: number;
  paidCc: string;
  /** The CC of the payment now locked for the DSO, counted in `paidCc`: taken off again if it comes back. */
  outstandingCc?: string;
  /** Payments taken back uncollected and made again for the current due date. */
  repaid: number;
  lastPaymentCc?: string;
  lastPrice?: string;
  exportId?: string;
  approvalId?: string;
  /**
   * The command id of a payment about to be submitted (or exported for an
   * offline signature), written before it is: whoever finds it committed
   * counts what it paid, once.
   */
  pendingCommand?: string;
  /** Warnings already sent for the current due date (`renewal_due`, `expiring`, …), comma-separated. */
  notified: string;
  error?: string;
  retryAtUs?: bigint;
  createdAt: string;
  updatedAt: string;
}

interface Row {
  id: string;
  party: string;
  name: string;
  url: string;
  description: string;
  state: NameState;
  auto_renew: boolean;
  dso: string;
  entry_fee_usd: string;
  lifetime_us: string;
  renewal_us: string;
  description_prefix: string;
  request_cid: string | null;
  entry_cid: string | null;
  payment_cid: string | null;
  expires_us: string | null;
  next_due_us: string | null;
  renewals: number;
  paid_cc: string;
  outstanding_cc: string | null;
  repaid: number;
  last_payment_cc: string | null;
  last_price: string | null;
  export_id: string | null;
  approval_id: string | null;
  pending_command: string | null;
  notified: string;
  error: string | null;
  retry_at_us: string | null;
  created_at: string | Date;
  updated_at: string | Date;
}

const COLUMNS = `id, party, name, url, description, state, auto_renew, dso, entry_fee_usd::text AS entry_fee_usd,
  lifetime_us::text AS lifetime_us, renewal_us::text AS renewal_us, description_prefix, request_cid, entry_cid,
  payment_cid, expires_us::text AS expires_us, next_due_us::text AS next_due_us, renewals, paid_cc::text AS paid_cc,
  outstanding_cc::text AS outstanding_cc, repaid,
  last_payment_cc::text AS last_payment_cc, last_price::text AS last_price, export_id, approval_id, pending_command,
  notified, error,
  retry_at_us::text AS retry_at_us, created_at, updated_at`;

const iso = (t: string | Date) => (t instanceof Date ? t.toISOString() : new Date(t).toISOString());
const big = (s: string | null) => (s === null ? undefined : BigInt(s));

function fromRow(r: Row): NameRecord {
  const opt = <K extends string, V>(k: K, v: V | null | undefined) =>
    (v === null || v === undefined ? {} : { [k]: v }) as Partial<Record<K, V>>;
  return {
    id: r.id,
    party: r.party,
    name: r.name,
    url: r.url,
    description: r.description,
    state: r.state,
    autoRenew: r.auto_renew,
    dso: r.dso,
    entryFeeUsd: r.entry_fee_usd,
    lifetimeUs: BigInt(r.lifetime_us),
    renewalUs: BigInt(r.renewal_us),
    descriptionPrefix: r.description_prefix,
    ...opt('requestCid', r.request_cid),
    ...opt('entryCid', r.entry_cid),
    ...opt('paymentCid', r.payment_cid),
    ...opt('expiresUs', big(r.expires_us)),
    ...opt('nextDueUs', big(r.next_due_us)),
    renewals: r.renewals,
    paidCc: r.paid_cc,
    ...opt('outstandingCc', r.outstanding_cc),
    repaid: r.repaid,
    ...opt('lastPaymentCc', r.last_payment_cc),
    ...opt('lastPrice', r.last_price),
    ...opt('exportId', r.export_id),
    ...opt('approvalId', r.approval_id),
    ...opt('pendingCommand', r.pending_command),
    notified: r.notified,
    ...opt('error', r.error),
    ...opt('retryAtUs', big(r.retry_at_us)),
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
  };
}

export interface NewName {
  party: string;
  name: string;
  url: string;
  description: string;
  dso: string;
  entryFeeUsd: string;
  lifetimeUs: bigint;
  renewalUs: bigint;
  descriptionPrefix: string;
  autoRenew?: boolean;
}

/** The columns `move` may set (undefined: unchanged; null: cleared). */
export interface NamePatch {
  requestCid?: string | null;
  entryCid?: string | null;
  paymentCid?: string | null;
  expiresUs?: bigint | null;
  nextDueUs?: bigint | null;
  renewals?: number;
  /** Added to `paid_cc`, and kept as `last_payment_cc` and `outstanding_cc` (locked until collected). */
  paid?: string;
  /** The outstanding payment was collected (or counted back): `outstanding_cc` cleared. */
  settled?: true;
  repaid?: number;
  /** Taken off `paid_cc`: a payment that came back. */
  refunded?: string;
  lastPrice?: string | null;
  exportId?: string | null;
  approvalId?: string | null;
  pendingCommand?: string | null;
  notified?: string;
  error?: string | null;
  retryAtUs?: bigint | null;
  autoRenew?: boolean;
}

type Special = 'paid' | 'refunded' | 'settled';
const COLUMN_OF: Record<Exclude<keyof NamePatch, Special>, string> = {
  requestCid: 'request_cid',
  entryCid: 'entry_cid',
  paymentCid: 'payment_cid',
  expiresUs: 'expires_us',
  nextDueUs: 'next_due_us',
  renewals: 'renewals',
  repaid: 'repaid',
  lastPrice: 'last_price',
  exportId: 'export_id',
  approvalId: 'approval_id',
  pendingCommand: 'pending_command',
  notified: 'notified',
  error: 'error',
  retryAtUs: 'retry_at_us',
  autoRenew: 'auto_renew',
};

/** An event the move announces; its data is the row as the REST API shows it (the caller renders it). */
export interface NameEvent {
  type: string;
  data: Record<string, unknown>;
}

export class NameConflictError extends Error {
  override readonly name = 'NameConflictError';
}

export class NameRepo {
  constructor(
    private readonly db: Db,
    private readonly opts: { actor: string },
  ) {}

  /** A new registration in `requesting`; refused (NameConflictError) while the name has a live row. */
  async create(n: NewName, actor = this.opts.actor): Promise<NameRecord> {
    try {
      return await this.insert(n, actor);
    } catch (e) {
      // Two registrations of one name at once: the second meets the first's row at the unique index.
      if ((e as { code?: unknown }).code === '23505')
        throw new NameConflictError(`${n.name} is being registered by another request right now`);
      throw e;
    }
  }

  private async insert(n: NewName, actor: string): Promise<NameRecord> {
    return this.db.transaction(async (tx) => {
      const live = await tx.query<{ id: string; party: string }>(
        `SELECT id, party FROM ans_names WHERE name = $1 AND state NOT IN ('expired', 'rejected', 'failed')`,
        [n.name],
      );
      if (live.rows[0])
        throw new NameConflictError(
          `${n.name} is already being registered or held by ${live.rows[0].party} (name ${live.rows[0].id})`,
        );
      const id = randomUUID();
      const r = await tx.query<Row>(
        `INSERT INTO ans_names (id, party, name, url, description, state, auto_renew, dso, entry_fee_usd,
            lifetime_us, renewal_us, description_prefix)
          VALUES ($1, $2, $3, $4, $5, 'requesting', $6, $7, $8, $9, $10, $11) RETURNING ${COLUMNS}`,
        [
          id,
          n.party,
          n.name,
          n.url,
          n.description,
          n.autoRenew ?? true,
          n.dso,
          n.entryFeeUsd,
          n.lifetimeUs.toString(),
          n.renewalUs.toString(),
          n.descriptionPrefix,
        ],
      );
      await appendAuditBatch(tx, [
        { actor, action: 'name.register', subject: `name:${id}`, details: { party: n.party, name: n.name } },
      ]);
      return fromRow(r.rows[0] as Row);
    });
  }

  async get(id: string, q: Queryable = this.db): Promise<NameRecord | undefined> {
    const r = await q.query<Row>(`SELECT ${COLUMNS} FROM ans_names WHERE id = $1`, [id]);
    return r.rows[0] && fromRow(r.rows[0]);
  }

  /** The live row holding `name`, else its latest one. */
  async byName(name: string): Promise<NameRecord | undefined> {
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM ans_names WHERE name = $1
        ORDER BY (state IN ('expired', 'rejected', 'failed')), created_at DESC LIMIT 1`,
      [name],
    );
    return r.rows[0] && fromRow(r.rows[0]);
  }

  /** A party's registrations, newest first (`live`: only those not ended). */
  async ofParty(party: string, opts: { live?: boolean } = {}): Promise<NameRecord[]> {
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM ans_names WHERE party = $1
        ${opts.live ? `AND state NOT IN ('expired', 'rejected', 'failed')` : ''}
        ORDER BY created_at DESC, id DESC LIMIT 500`,
      [party],
    );
    return r.rows.map(fromRow);
  }

  /** Active names by party (for showing a party's name next to its id). */
  async activeNames(parties: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (parties.length === 0) return out;
    const r = await this.db.query<{ party: string; name: string }>(
      `SELECT party, name FROM ans_names WHERE party = ANY($1::text[]) AND state IN ('active', 'renewing')
        ORDER BY party, name`,
      [[...parties]],
    );
    for (const x of r.rows) if (!out.has(x.party)) out.set(x.party, x.name);
    return out;
  }

  /** Registrations not ended, oldest first, a page at a time (`after`: the last of the previous page). */
  async open(opts: { limit?: number; after?: NameRecord } = {}): Promise<NameRecord[]> {
    const params: unknown[] = [opts.limit ?? 500];
    let after = '';
    if (opts.after) {
      params.push(opts.after.createdAt, opts.after.id);
      after = `AND (created_at, id) > ($2::timestamptz, $3::uuid)`;
    }
    const r = await this.db.query<Row>(
      `SELECT ${COLUMNS} FROM ans_names WHERE state NOT IN ('expired', 'rejected', 'failed') ${after}
        ORDER BY created_at, id LIMIT $1`,
      params,
    );
    return r.rows.map(fromRow);
  }

  /**
   * Moves row `id` from one of `from` to `to` with `patch`, its events and an
   * audit entry, in one transaction (`guard` runs first inside it: the
   * automation lease). Undefined when the row was no longer in `from`.
   */
  async move(
    id: string,
    from: readonly NameState[],
    to: NameState,
    patch: NamePatch,
    opts: {
      actor?: string;
      events?: (n: NameRecord) => NameEvent[];
      details?: Record<string, unknown>;
      guard?: (tx: Queryable) => Promise<void>;
      /**
       * Move only if these columns still hold these values (an announcement made once), or
       * (`quiet`) nothing is in flight: no payment marked, no export, no approval request.
       */
      match?: { notified?: string; renewals?: number; quiet?: true };
    } = {},
  ): Promise<NameRecord | undefined> {
    return this.db.transaction(async (tx) => {
      await opts.guard?.(tx);
      const sets = ['state = $3', 'updated_at = now()'];
      const params: unknown[] = [id, [...from], to];
      for (const [k, col] of Object.entries(COLUMN_OF) as [
        Exclude<keyof NamePatch, 'paid' | 'refunded'>,
        string,
      ][]) {
        const v = patch[k];
        if (v === undefined) continue;
        params.push(typeof v === 'bigint' ? v.toString() : v);
        sets.push(`${col} = $${params.length}`);
      }
      // One assignment of paid_cc: a payment counted and another counted back may meet in one write.
      if (patch.paid !== undefined || patch.refunded !== undefined) {
        params.push(patch.paid ?? '0', patch.refunded ?? '0');
        const [plus, minus] = [params.length - 1, params.length];
        sets.push(`paid_cc = paid_cc + $${plus}::numeric - $${minus}::numeric`);
      }
      const cleared = patch.settled === true || patch.refunded !== undefined;
      if (patch.paid !== undefined) {
        params.push(patch.paid);
        sets.push(`last_payment_cc = $${params.length}::numeric`);
        sets.push(cleared ? 'outstanding_cc = NULL' : `outstanding_cc = $${params.length}::numeric`);
      } else if (cleared) sets.push('outstanding_cc = NULL');
      const where = ['id = $1', 'state = ANY($2::text[])'];
      if (opts.match?.notified !== undefined) {
        params.push(opts.match.notified);
        where.push(`notified = $${params.length}`);
      }
      if (opts.match?.quiet)
        where.push('pending_command IS NULL', 'export_id IS NULL', 'approval_id IS NULL');
      if (opts.match?.renewals !== undefined) {
        params.push(opts.match.renewals);
        where.push(`renewals = $${params.length}`);
      }
      const r = await tx.query<Row>(
        `UPDATE ans_names SET ${sets.join(', ')} WHERE ${where.join(' AND ')} RETURNING ${COLUMNS}`,
        params,
      );
      const row = r.rows[0];
      if (!row) return undefined;
      const n = fromRow(row);
      const events = opts.events?.(n) ?? [];
      if (events.length > 0)
        await appendEvents(
          tx,
          events.map((e) => ({ type: e.type, subject: `name:${n.id}`, data: e.data })),
        );
      const changed = !from.includes(to) || from.length > 1 || events.length > 0;
      if (changed || opts.details)
        await appendAuditBatch(tx, [
          {
            actor: opts.actor ?? this.opts.actor,
            action: `name.${to}`,
            subject: `name:${n.id}`,
            details: { party: n.party, name: n.name, ...(opts.details ?? {}) },
          },
        ]);
      return n;
    });
  }
}

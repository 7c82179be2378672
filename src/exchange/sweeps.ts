/**
 * Treasury sweeps: when a party's available balance (as ingestion keeps it)
 * is above a rule's `maxBalance`, the surplus down to `minBalance` goes to
 * the rule's target in one step, through the target's transfer preapproval:
 * the withdrawal path (flows/transfer.ts `transfer` with `requireDelivery`),
 * so the pipeline and its policy step apply. A target without a preapproval
 * blocks the sweep before anything is signed (recorded once, retried later).
 *
 * Each sweep is a row of `sweeps` (planned → submitted → completed | failed,
 * or blocked), at most one unfinished per party (a partial unique index);
 * each change and its event are written in one transaction under the
 * automation lease. A sweep left unfinished by a crash is run again with its
 * command id: the ledger deduplicates it.
 */
import { randomUUID } from 'node:crypto';
import type { FlowContext } from '../flows/context.js';
import { toUnits } from '../flows/holdings.js';
import { Refusal } from '../flows/refusal.js';
import { amuletInstrument, transfer } from '../flows/transfer.js';
import { fromUnits } from '../intent/decimal.js';
import type { InstrumentId } from '../intent/model.js';
import type { Queryable } from '../store/db.js';
import type { Store } from '../store/index.js';
import { appendEvents } from '../store/repos/events.js';
import { holdLease, type Lease } from '../store/repos/leases.js';
import type { AutomationTask } from './automation.js';

export interface SweepRule {
  name: string;
  from: string;
  to: string;
  instrument?: InstrumentId;
  maxBalance: string;
  minBalance: string;
}

export type SweepState = 'planned' | 'submitted' | 'completed' | 'failed' | 'blocked';

export interface Sweep {
  id: string;
  rule: string;
  from: string;
  to: string;
  amount: string;
  instrument: InstrumentId;
  state: SweepState;
  commandId: string;
  updateId?: string;
  error?: string;
  createdAt: string;
  updatedAt: string;
}

interface Row {
  id: string;
  rule: string;
  from_party: string;
  to_party: string;
  amount: string;
  instrument_admin: string;
  instrument_id: string;
  state: SweepState;
  command_id: string;
  update_id: string | null;
  error: string | null;
  created_at: string;
  updated_at: string;
}

const COLUMNS = `id, rule, from_party, to_party, amount::text AS amount, instrument_admin, instrument_id, state,
  command_id, update_id, error, created_at, updated_at`;

const fromRow = (r: Row): Sweep => ({
  id: r.id,
  rule: r.rule,
  from: r.from_party,
  to: r.to_party,
  amount: r.amount,
  instrument: { admin: r.instrument_admin, id: r.instrument_id },
  state: r.state,
  commandId: r.command_id,
  ...(r.update_id !== null ? { updateId: r.update_id } : {}),
  ...(r.error !== null ? { error: r.error } : {}),
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** Sweeps, newest first (optionally of one rule or state). */
export async function listSweeps(
  q: Queryable,
  f: { rule?: string; state?: SweepState; limit?: number } = {},
): Promise<Sweep[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.rule !== undefined) {
    params.push(f.rule);
    where.push(`rule = $${params.length}`);
  }
  if (f.state !== undefined) {
    params.push(f.state);
    where.push(`state = $${params.length}`);
  }
  params.push(Math.min(Math.max(1, Math.trunc(f.limit ?? 100)), 500));
  const r = await q.query<Row>(
    `SELECT ${COLUMNS} FROM sweeps ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
    params,
  );
  return r.rows.map(fromRow);
}

async function latestOf(q: Queryable, from: string): Promise<Sweep | undefined> {
  const r = await q.query<Row>(
    `SELECT ${COLUMNS} FROM sweeps WHERE from_party = $1 ORDER BY created_at DESC, id DESC LIMIT 1`,
    [from],
  );
  return r.rows[0] && fromRow(r.rows[0]);
}

/** What a balance calls for: the amount to sweep, or undefined (at or below the ceiling). */
export function sweepAmount(
  available: string,
  rule: Pick<SweepRule, 'maxBalance' | 'minBalance'>,
): string | undefined {
  const a = toUnits(available);
  if (a <= toUnits(rule.maxBalance)) return undefined;
  return fromUnits(a - toUnits(rule.minBalance));
}

export interface SweepsOptions {
  store: Store;
  flows: FlowContext;
  rules: readonly SweepRule[];
  /** A blocked or failed sweep's rule is tried again after this long (ms, default 60 000). */
  retryMs?: number;
}

export interface Sweeps extends AutomationTask {
  rules: readonly SweepRule[];
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e)).slice(0, 2000);

export function createSweeps(opts: SweepsOptions): Sweeps {
  const { store, flows, rules } = opts;
  const retryMs = opts.retryMs ?? 60_000;

  const event = (type: string, s: Sweep) => ({ type, subject: `sweep:${s.id}`, data: { ...s } });

  /** Moves sweep `id` (as the lease holder), with the event of the new state if `type` is given. */
  async function move(
    lease: Lease,
    id: string,
    set: { state: SweepState; updateId?: string; error?: string | null; commandId?: string },
    type?: string,
  ): Promise<Sweep> {
    return store.db.transaction(async (tx) => {
      await holdLease(tx, lease);
      const r = await tx.query<Row>(
        `UPDATE sweeps SET state = $2, update_id = coalesce($3, update_id), error = $4,
            command_id = coalesce($5, command_id), updated_at = now()
          WHERE id = $1 RETURNING ${COLUMNS}`,
        [id, set.state, set.updateId ?? null, set.error ?? null, set.commandId ?? null],
      );
      const s = fromRow(r.rows[0] as Row);
      if (type) await appendEvents(tx, [event(type, s)]);
      return s;
    });
  }

  async function plan(
    lease: Lease,
    rule: SweepRule,
    amount: string,
    instrument: InstrumentId,
  ): Promise<Sweep> {
    return store.db.transaction(async (tx) => {
      await holdLease(tx, lease);
      const r = await tx.query<Row>(
        `INSERT INTO sweeps (id, rule, from_party, to_party, amount, instrument_admin, instrument_id, state, command_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, 'planned', $8) RETURNING ${COLUMNS}`,
        [
          randomUUID(),
          rule.name,
          rule.from,
          rule.to,
          amount,
          instrument.admin,
          instrument.id,
          `cs-sweep-${randomUUID()}`,
        ],
      );
      return fromRow(r.rows[0] as Row);
    });
  }

  /** Sends a planned or submitted sweep (again, with its command id) and records how it ended. */
  async function execute(lease: Lease, s0: Sweep): Promise<Sweep> {
    let s = s0;
    let marked = s.state === 'submitted';
    const inner = flows.recorder;
    const ctx: FlowContext = {
      ...flows,
      recorder: {
        async record(r) {
          await inner?.record(r);
          // The first submission: the sweep may commit from now on.
          if (r.step === 'submitted' && !marked) {
            marked = true;
            s = await move(lease, s.id, { state: 'submitted' }, 'sweep.submitted');
          }
        },
        ...(inner?.partyRecords ? { partyRecords: inner.partyRecords.bind(inner) } : {}),
      },
    };
    try {
      const r = await transfer(ctx, {
        from: s.from,
        to: s.to,
        amount: s.amount,
        instrument: s.instrument,
        commandId: s.commandId,
        flowName: 'sweep',
        requireDelivery: true,
        memo: `sweep ${s.rule}`,
      });
      return await move(lease, s.id, { state: 'completed', updateId: r.updateId }, 'sweep.completed');
    } catch (e) {
      if (e instanceof Refusal && e.reason === 'delivery_required') {
        const error = `${s.to} has no valid transfer preapproval: a sweep goes in one step only, so nothing was signed; set up a transfer preapproval for ${s.to} (sweeps are tried again every ${Math.round(retryMs / 1000)} s)`;
        // Announced once: a retry still blocked keeps the same row without a new event.
        return move(
          lease,
          s.id,
          { state: 'blocked', error },
          s0.error === undefined ? 'sweep.blocked' : undefined,
        );
      }
      return move(lease, s.id, { state: 'failed', error: errorText(e) }, 'sweep.failed');
    }
  }

  async function evaluate(lease: Lease, rule: SweepRule): Promise<void> {
    const last = await latestOf(store.db, rule.from);
    if (last && (last.state === 'planned' || last.state === 'submitted')) {
      await execute(lease, last);
      return;
    }
    // The last sweep's transfer not yet ingested: the balance does not show it yet.
    if (last?.state === 'completed' && last.updateId) {
      const seen = await store.db.query('SELECT 1 FROM ingested_updates WHERE update_id = $1', [
        last.updateId,
      ]);
      if (seen.rows.length === 0) return;
    }
    const recentlyStuck =
      last &&
      (last.state === 'blocked' || last.state === 'failed') &&
      Date.parse(last.updatedAt) + retryMs > Date.now();
    if (recentlyStuck) return;
    const instrument = rule.instrument ?? (await amuletInstrument(flows));
    const bal = (await store.ledger.balances(rule.from)).find(
      (b) => b.instrument.admin === instrument.admin && b.instrument.id === instrument.id,
    );
    const amount = bal && sweepAmount(bal.available, rule);
    if (!amount) return;
    if (last?.state === 'blocked') {
      // Tried again on the blocked row (its event was sent once), with the amount of now.
      await store.db.transaction(async (tx) => {
        await holdLease(tx, lease);
        await tx.query(
          `UPDATE sweeps SET state = 'planned', amount = $2, command_id = $3, updated_at = now() WHERE id = $1`,
          [last.id, amount, `cs-sweep-${randomUUID()}`],
        );
      });
      const again = await latestOf(store.db, rule.from);
      if (again) await execute(lease, again);
      return;
    }
    await execute(lease, await plan(lease, rule, amount, instrument));
  }

  return {
    name: 'sweeps',
    rules,
    async run(lease) {
      const problems: string[] = [];
      for (const rule of rules)
        await evaluate(lease, rule).catch((e: unknown) =>
          problems.push(`sweep ${rule.name}: ${errorText(e)}`),
        );
      if (problems.length > 0) throw new Error(problems.join('; '));
    },
  };
}

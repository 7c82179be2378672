/**
 * What ledger ingestion keeps (exchange/ingest.ts): its cursor (the offset
 * it has read up to, and each synchronizer's latest record time), the update
 * ids it took in, the book's holdings as ingested, each party's movements
 * per instrument, and, through `writePage`, the deposits.
 *
 * `writePage` is the one write of ingestion: everything derived from a page
 * of updates — holdings, movements, deposits and their moves, the cursor
 * and the events — in ONE transaction that first checks the ingestion lease
 * (`holdLease`). A crash leaves either all of a page or none of it, so the
 * cursor never passes an update whose effects are not stored, and an update
 * is never applied twice (its id is kept; a page never holds one already
 * ingested). Reads here also serve reconciliation and the recovery controls
 * (the `IngestedSide` / `IngestCursorAccess` shapes of exchange/).
 */
import type { Db, Queryable } from '../db.js';
import {
  DEPOSIT_COLUMNS,
  type DepositKind,
  type DepositRow,
  depositEvent,
  depositFromRow,
  nextDepositState,
  type OfferEnd,
} from './deposits.js';
import { appendEvents, type EventInput } from './events.js';
import { holdLease, type Lease } from './leases.js';

export interface Cursor {
  offset: number;
  /** The latest record time ingested, per synchronizer. */
  recordTimes: Record<string, string>;
}

export interface IngestedUpdateRow {
  updateId: string;
  offset: number;
  recordTime: string;
  synchronizerId?: string;
}

export interface HoldingRecord {
  contractId: string;
  party: string;
  instrument: { admin: string; id: string };
  amount: string;
  locked: boolean;
}

export interface MovementRecord {
  updateId: string;
  offset: number;
  recordTime: string;
  nodeId: number;
  party: string;
  kind: string;
  instrument: { admin: string; id: string };
  amount: string;
  locked: string;
  counterparty?: string;
  memo?: string;
  ours: boolean;
  withdrawalId?: string;
}

export interface NewDeposit {
  id: string;
  party: string;
  sender: string;
  instrument: { admin: string; id: string };
  amount: string;
  memo?: string;
  memoTruncated: boolean;
  account?: string;
  attribution?: string;
  kind: DepositKind;
  /** `credited` (one step) or `pending` (an offer). */
  state: 'credited' | 'pending';
  instructionCid?: string;
  executeBefore?: string;
  updateId: string;
  nodeId: number;
  offset: number;
  recordTime: string;
}

/** An offer of the book ended (or moved on to a next instruction). */
export interface OfferSettlement {
  instructionCid: string;
  end: OfferEnd;
  nextInstructionCid?: string;
  updateId: string;
  offset: number;
}

/** Everything one page of updates adds, computed before the transaction. */
export interface IngestPage {
  updates: IngestedUpdateRow[];
  created: (HoldingRecord & { offset: number; updateId: string })[];
  archived: { contractId: string; offset: number; updateId: string }[];
  movements: MovementRecord[];
  deposits: NewDeposit[];
  settlements: OfferSettlement[];
  /** Events known before the transaction (e.g. `transfer.unexpected`), appended after the deposits'. */
  events: EventInput[];
  cursor: Cursor;
  /** Further writes of the same transaction (withdrawal deliveries), run before the events. */
  also?: (tx: Queryable) => Promise<void>;
}

export interface PageResult {
  /** Deposits recorded or moved by the page, in the state the page left them. */
  deposits: ReturnType<typeof depositFromRow>[];
  events: number;
}

const json = (v: unknown) => JSON.stringify(v);

export class LedgerRepo {
  constructor(private readonly db: Db) {}

  // ---- the cursor ---------------------------------------------------------------------------

  async cursor(q: Queryable = this.db): Promise<Cursor | undefined> {
    const r = await q.query<{ offset: number; record_times: Record<string, string> }>(
      'SELECT "offset", record_times FROM ingest_cursor',
    );
    const row = r.rows[0];
    return row && { offset: row.offset, recordTimes: row.record_times };
  }

  /** Sets the offset ingestion reads after (record times are kept: they are facts of what was ingested). */
  async moveCursor(q: Queryable, offset: number): Promise<void> {
    await q.query(
      `INSERT INTO ingest_cursor (id, "offset") VALUES (true, $1)
       ON CONFLICT (id) DO UPDATE SET "offset" = EXCLUDED."offset", updated_at = now()`,
      [offset],
    );
  }

  /** The update ingested last (highest offset). */
  async lastUpdate(q: Queryable = this.db): Promise<IngestedUpdateRow | undefined> {
    const r = await q.query<{
      update_id: string;
      offset: number;
      record_time: string;
      synchronizer_id: string | null;
    }>(
      `SELECT update_id, "offset", record_time, synchronizer_id FROM ingested_updates ORDER BY "offset" DESC LIMIT 1`,
    );
    const row = r.rows[0];
    return (
      row && {
        updateId: row.update_id,
        offset: row.offset,
        recordTime: row.record_time,
        ...(row.synchronizer_id ? { synchronizerId: row.synchronizer_id } : {}),
      }
    );
  }

  /** Which of `updateIds` were ingested already. */
  async ingested(updateIds: readonly string[]): Promise<Set<string>> {
    if (updateIds.length === 0) return new Set();
    const r = await this.db.query<{ update_id: string }>(
      'SELECT update_id FROM ingested_updates WHERE update_id = ANY($1::text[])',
      [updateIds],
    );
    return new Set(r.rows.map((x) => x.update_id));
  }

  // ---- lookups before a page is written ------------------------------------------------------

  /** Holdings ingestion knows among `contractIds` (archived or not). */
  async holdingsById(contractIds: readonly string[]): Promise<Map<string, HoldingRecord>> {
    const out = new Map<string, HoldingRecord>();
    if (contractIds.length === 0) return out;
    const r = await this.db.query<HoldingDbRow>(
      `SELECT contract_id, party, instrument_admin, instrument_id, amount::text AS amount, locked
         FROM ledger_holdings WHERE contract_id = ANY($1::text[])`,
      [contractIds],
    );
    for (const row of r.rows) out.set(row.contract_id, holdingFromRow(row));
    return out;
  }

  /** Among `commandIds`, those this service submitted (a withdrawal's, or any the pipeline signed). */
  async ownCommands(commandIds: readonly string[]): Promise<Map<string, string | undefined>> {
    const out = new Map<string, string | undefined>();
    if (commandIds.length === 0) return out;
    const w = await this.db.query<{ command_id: string; id: string }>(
      'SELECT command_id, id FROM withdrawals WHERE command_id = ANY($1::text[])',
      [commandIds],
    );
    for (const row of w.rows) out.set(row.command_id, row.id);
    const rest = commandIds.filter((c) => !out.has(c));
    if (rest.length > 0) {
      const a = await this.db.query<{ c: string }>(
        `SELECT DISTINCT details->>'commandId' AS c FROM audit_log
          WHERE action IN ('flow.signed', 'flow.submitted') AND details->>'commandId' = ANY($1::text[])`,
        [rest],
      );
      for (const row of a.rows) out.set(row.c, undefined);
    }
    return out;
  }

  /** Withdrawals waiting on the transfer instructions `cids` (their delivery is `offered`). */
  async withdrawalsByOffer(cids: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (cids.length === 0) return out;
    const r = await this.db.query<{ offer_cid: string; id: string }>(
      `SELECT offer_cid, id FROM withdrawals WHERE offer_cid = ANY($1::text[])`,
      [cids],
    );
    for (const row of r.rows) out.set(row.offer_cid, row.id);
    return out;
  }

  /**
   * Forgets what was ingested of a ledger that no longer exists (development mode's sandbox
   * starts a new ledger at each start): cursor, followed parties, update ids, holdings and
   * movements. Deposits and events stay: they are the history the exchange was told about.
   */
  async forgetLedger(): Promise<void> {
    await this.db.transaction(async (tx) => {
      for (const t of [
        'ingest_cursor',
        'ingest_parties',
        'ingested_updates',
        'ledger_holdings',
        'ledger_movements',
      ])
        await tx.query(`DELETE FROM ${t}`);
    });
  }

  // ---- the parties ingestion follows ---------------------------------------------------------

  /** The parties ingestion follows, with the offset each was first followed from. */
  async parties(): Promise<Map<string, number>> {
    const r = await this.db.query<{ party: string; from_offset: number }>(
      'SELECT party, from_offset FROM ingest_parties',
    );
    return new Map(r.rows.map((x) => [x.party, x.from_offset]));
  }

  /**
   * Starts following `party` at the cursor `offset`: its holdings active
   * there become ingested holdings (an `opening` movement per instrument, so
   * that its movements add up to its holdings), in one transaction under the
   * lease.
   */
  async follow(
    lease: Lease,
    party: string,
    offset: number,
    recordTime: string,
    holdings: readonly HoldingRecord[],
  ): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await holdLease(tx, lease);
      const r = await tx.query(
        'INSERT INTO ingest_parties (party, from_offset) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING party',
        [party, offset],
      );
      if (r.rows.length === 0) return false;
      const own = holdings.filter((h) => h.party === party);
      if (own.length === 0) return true;
      await tx.query(
        `INSERT INTO ledger_holdings (contract_id, party, instrument_admin, instrument_id, amount, locked,
           created_offset, created_update_id)
         SELECT x.c, $2, x.a, x.i, x.amount, x.locked, $3, 'opening'
           FROM jsonb_to_recordset($1::jsonb) AS x(c text, a text, i text, amount numeric, locked boolean)
         ON CONFLICT (contract_id) DO NOTHING`,
        [
          json(
            own.map((h) => ({
              c: h.contractId,
              a: h.instrument.admin,
              i: h.instrument.id,
              amount: h.amount,
              locked: h.locked,
            })),
          ),
          party,
          offset,
        ],
      );
      await tx.query(
        `INSERT INTO ledger_movements (update_id, "offset", record_time, node_id, party, kind, instrument_admin,
           instrument_id, amount, locked, ours)
         SELECT 'opening', $2, $3, 0, $1, 'opening', instrument_admin, instrument_id, sum(amount),
                COALESCE(sum(amount) FILTER (WHERE locked), 0), false
           FROM ledger_holdings WHERE party = $1 AND created_update_id = 'opening' AND created_offset = $2
          GROUP BY instrument_admin, instrument_id`,
        [party, offset, recordTime],
      );
      return true;
    });
  }

  // ---- the page write ------------------------------------------------------------------------

  /** Writes one page (see the header): all of it or, on any error, nothing. */
  async writePage(lease: Lease, page: IngestPage): Promise<PageResult> {
    return this.db.transaction(async (tx) => {
      await holdLease(tx, lease);
      if (page.updates.length > 0)
        await tx.query(
          `INSERT INTO ingested_updates (update_id, "offset", record_time, synchronizer_id)
           SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(update_id text, "offset" bigint, record_time text,
             synchronizer_id text)`,
          [
            json(
              page.updates.map((u) => ({
                update_id: u.updateId,
                offset: u.offset,
                record_time: u.recordTime,
                synchronizer_id: u.synchronizerId ?? null,
              })),
            ),
          ],
        );
      if (page.created.length > 0)
        await tx.query(
          `INSERT INTO ledger_holdings (contract_id, party, instrument_admin, instrument_id, amount, locked,
             created_offset, created_update_id)
           SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(contract_id text, party text, instrument_admin text,
             instrument_id text, amount numeric, locked boolean, created_offset bigint, created_update_id text)
           ON CONFLICT (contract_id) DO NOTHING`,
          [
            json(
              page.created.map((h) => ({
                contract_id: h.contractId,
                party: h.party,
                instrument_admin: h.instrument.admin,
                instrument_id: h.instrument.id,
                amount: h.amount,
                locked: h.locked,
                created_offset: h.offset,
                created_update_id: h.updateId,
              })),
            ),
          ],
        );
      if (page.archived.length > 0)
        await tx.query(
          `UPDATE ledger_holdings h SET archived_offset = x.o, archived_update_id = x.u
             FROM jsonb_to_recordset($1::jsonb) AS x(c text, o bigint, u text)
            WHERE h.contract_id = x.c AND h.archived_offset IS NULL`,
          [json(page.archived.map((a) => ({ c: a.contractId, o: a.offset, u: a.updateId })))],
        );
      if (page.movements.length > 0)
        await tx.query(
          `INSERT INTO ledger_movements (update_id, "offset", record_time, node_id, party, kind, instrument_admin,
             instrument_id, amount, locked, counterparty, memo, ours, withdrawal_id)
           SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(update_id text, "offset" bigint, record_time text,
             node_id integer, party text, kind text, instrument_admin text, instrument_id text, amount numeric,
             locked numeric, counterparty text, memo text, ours boolean, withdrawal_id uuid)`,
          [
            json(
              page.movements.map((m) => ({
                update_id: m.updateId,
                offset: m.offset,
                record_time: m.recordTime,
                node_id: m.nodeId,
                party: m.party,
                kind: m.kind,
                instrument_admin: m.instrument.admin,
                instrument_id: m.instrument.id,
                amount: m.amount,
                locked: m.locked,
                counterparty: m.counterparty ?? null,
                memo: m.memo ?? null,
                ours: m.ours,
                withdrawal_id: m.withdrawalId ?? null,
              })),
            ),
          ],
        );
      const touched = new Map<string, ReturnType<typeof depositFromRow>>();
      const events: EventInput[] = [];
      if (page.deposits.length > 0) {
        const r = await tx.query<DepositRow>(
          `INSERT INTO deposits (id, party, sender, instrument_admin, instrument_id, amount, memo, memo_truncated,
             account, attribution, kind, state, instruction_cid, execute_before, update_id, node_id, "offset",
             record_time, settled_update_id, settled_offset)
           SELECT x.*, CASE WHEN x.state = 'credited' THEN x.update_id END,
                  CASE WHEN x.state = 'credited' THEN x."offset" END
             FROM jsonb_to_recordset($1::jsonb) AS x(id uuid, party text, sender text, instrument_admin text,
               instrument_id text, amount numeric, memo text, memo_truncated boolean, account text,
               attribution text, kind text, state text, instruction_cid text, execute_before text,
               update_id text, node_id integer, "offset" bigint, record_time text)
           ON CONFLICT DO NOTHING
           RETURNING ${DEPOSIT_COLUMNS}`,
          [
            json(
              page.deposits.map((d) => ({
                id: d.id,
                party: d.party,
                sender: d.sender,
                instrument_admin: d.instrument.admin,
                instrument_id: d.instrument.id,
                amount: d.amount,
                memo: d.memo ?? null,
                memo_truncated: d.memoTruncated,
                account: d.account ?? null,
                attribution: d.attribution ?? null,
                kind: d.kind,
                state: d.state,
                instruction_cid: d.instructionCid ?? null,
                execute_before: d.executeBefore ?? null,
                update_id: d.updateId,
                node_id: d.nodeId,
                offset: d.offset,
                record_time: d.recordTime,
              })),
            ),
          ],
        );
        // In the page's order (RETURNING does not promise one).
        const byId = new Map(r.rows.map((row) => [row.id, depositFromRow(row)]));
        for (const n of page.deposits) {
          const d = byId.get(n.id);
          if (!d) continue;
          touched.set(d.id, d);
          if (d.kind === 'two_step')
            events.push({ type: 'offer.received', subject: `deposit:${d.id}`, data: { ...d } });
          events.push(depositEvent(`deposit.${d.state}`, d));
          if (d.account === undefined) events.push(depositEvent('deposit.unattributed', d));
        }
      }
      for (const s of page.settlements) {
        const r = await tx.query<DepositRow>(
          `SELECT ${DEPOSIT_COLUMNS} FROM deposits WHERE instruction_cid = $1 FOR UPDATE`,
          [s.instructionCid],
        );
        const row = r.rows[0];
        if (!row) continue;
        const next = nextDepositState(row.state, s.end);
        if (next === undefined) continue; // already final: an end seen twice changes nothing
        const u = await tx.query<DepositRow>(
          `UPDATE deposits SET state = $2, outcome = $3, updated_at = now(),
               instruction_cid = COALESCE($4, instruction_cid),
               settled_update_id = CASE WHEN $2 = 'pending' THEN settled_update_id ELSE $5 END,
               settled_offset = CASE WHEN $2 = 'pending' THEN settled_offset ELSE $6::bigint END
             WHERE id = $1 RETURNING ${DEPOSIT_COLUMNS}`,
          [
            row.id,
            next,
            s.end,
            next === 'pending' ? (s.nextInstructionCid ?? null) : null,
            s.updateId,
            s.offset,
          ],
        );
        const d = depositFromRow(u.rows[0]!);
        touched.set(d.id, d);
        if (next !== 'pending') events.push(depositEvent(`deposit.${next}`, d));
      }
      await page.also?.(tx);
      await tx.query(
        `INSERT INTO ingest_cursor (id, "offset", record_times) VALUES (true, $1, $2::jsonb)
         ON CONFLICT (id) DO UPDATE SET "offset" = GREATEST(ingest_cursor."offset", EXCLUDED."offset"),
           record_times = ingest_cursor.record_times || EXCLUDED.record_times, updated_at = now()`,
        [page.cursor.offset, json(page.cursor.recordTimes)],
      );
      const all = [...events, ...page.events];
      await appendEvents(tx, all);
      return { deposits: [...touched.values()], events: all.length };
    });
  }

  // ---- reads for balances, reconciliation and recovery ----------------------------------------

  /** A party's ingested holdings not archived, per instrument: available (unlocked) and locked. */
  async balances(
    party: string,
  ): Promise<
    { instrument: { admin: string; id: string }; available: string; locked: string; holdings: number }[]
  > {
    const r = await this.db.query<{ a: string; i: string; available: string; locked: string; n: number }>(
      `SELECT instrument_admin AS a, instrument_id AS i,
              COALESCE(sum(amount) FILTER (WHERE NOT locked), 0)::text AS available,
              COALESCE(sum(amount) FILTER (WHERE locked), 0)::text AS locked, count(*)::int AS n
         FROM ledger_holdings WHERE party = $1 AND archived_offset IS NULL GROUP BY 1, 2 ORDER BY 1, 2`,
      [party],
    );
    return r.rows.map((x) => ({
      instrument: { admin: x.a, id: x.i },
      available: x.available,
      locked: x.locked,
      holdings: x.n,
    }));
  }

  async holdings(party: string): Promise<HoldingRecord[]> {
    const r = await this.db.query<HoldingDbRow>(
      `SELECT contract_id, party, instrument_admin, instrument_id, amount::text AS amount, locked
         FROM ledger_holdings WHERE party = $1 AND archived_offset IS NULL ORDER BY contract_id`,
      [party],
    );
    return r.rows.map(holdingFromRow);
  }

  /** A party's holdings as of `offset`: created at or before it, not archived by then. */
  async holdingsAt(party: string, offset: number): Promise<HoldingRecord[]> {
    const r = await this.db.query<HoldingDbRow>(
      `SELECT contract_id, party, instrument_admin, instrument_id, amount::text AS amount, locked
         FROM ledger_holdings WHERE party = $1 AND created_offset <= $2
          AND (archived_offset IS NULL OR archived_offset > $2) ORDER BY contract_id`,
      [party, offset],
    );
    return r.rows.map(holdingFromRow);
  }

  async firstRecordTimeAfter(offset: number): Promise<string | undefined> {
    const r = await this.db.query<{ record_time: string }>(
      `SELECT record_time FROM ingested_updates WHERE "offset" > $1 ORDER BY "offset" LIMIT 1`,
      [offset],
    );
    return r.rows[0]?.record_time;
  }

  /** A party's net change per update and instrument after `afterOffset`, in offset order. */
  async movements(
    party: string,
    afterOffset: number,
  ): Promise<
    {
      updateId: string;
      offset: number;
      recordTime: string;
      instrument: { admin: string; id: string };
      amount: string;
    }[]
  > {
    const r = await this.db.query<{ u: string; o: number; t: string; a: string; i: string; amount: string }>(
      `SELECT update_id AS u, "offset" AS o, min(record_time) AS t, instrument_admin AS a, instrument_id AS i,
              sum(amount)::text AS amount
         FROM ledger_movements WHERE party = $1 AND "offset" > $2
        GROUP BY 1, 2, 4, 5 ORDER BY 2, 4, 5`,
      [party, afterOffset],
    );
    return r.rows.map((x) => ({
      updateId: x.u,
      offset: x.o,
      recordTime: x.t,
      instrument: { admin: x.a, id: x.i },
      amount: x.amount,
    }));
  }
}

interface HoldingDbRow {
  contract_id: string;
  party: string;
  instrument_admin: string;
  instrument_id: string;
  amount: string;
  locked: boolean;
}

function holdingFromRow(r: HoldingDbRow): HoldingRecord {
  return {
    contractId: r.contract_id,
    party: r.party,
    instrument: { admin: r.instrument_admin, id: r.instrument_id },
    amount: r.amount,
    locked: r.locked,
  };
}

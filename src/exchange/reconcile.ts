/**
 * Reconciliation of one party, per instrument: (1) its holdings on the ledger
 * now (active contracts through the Holding interface view), (2) the holdings
 * ingestion knows (not archived), (3) the opening balance at `fromOffset`
 * plus the movements ingested after it. Each difference is named: holdings on
 * the ledger ingestion does not know, ingested holdings no longer on the
 * ledger, a holding whose amount or lock differs, movements that do not add
 * up. When ingestion is behind the ledger end the ledger is read again at the
 * ingestion cursor, to say whether the differences are only lag. Canton Coin
 * is also checked against Scan's transaction history over the same record
 * times: matched, differences, or unavailable without Scan.
 */
import type { LedgerApiClient } from '../canton/ledger-api/client.js';
import type { ScanClient } from '../canton/scan/client.js';
import type { TransactionHistoryItem } from '../canton/scan/schemas.js';
import { HOLDING_INTERFACE, instrumentOf } from '../flows/holdings.js';
import { decimalUnits, fromUnits } from '../intent/decimal.js';
import { parseInstantMicros } from '../intent/time.js';
import type { Instrument } from './parse.js';

/** One holding, as the ledger or ingestion has it. */
export interface HoldingRow {
  contractId: string;
  instrument: Instrument;
  amount: string;
  locked: boolean;
}

/** One ingested movement of the party (a net change of one instrument in one update). */
export interface MovementRow {
  updateId: string;
  offset: number;
  recordTime: string;
  instrument: Instrument;
  /** Signed decimal: the party's net holding change. */
  amount: string;
}

/** What ingestion has stored, as reconciliation reads it. */
export interface IngestedSide {
  /** The ingestion cursor (undefined: ingestion never ran). */
  cursor(): Promise<{ offset: number; recordTimes: Record<string, string> } | undefined>;
  /** The party's holdings not archived. */
  holdings(party: string): Promise<HoldingRow[]>;
  /** The party's holdings as of `offset`: created at or before it, not archived by then. */
  holdingsAt(party: string, offset: number): Promise<HoldingRow[]>;
  /** The record time of the first update ingested after `offset` (undefined: none). */
  firstRecordTimeAfter(offset: number): Promise<string | undefined>;
  /** The party's movements after `offset`, in offset order. */
  movements(party: string, afterOffset: number): Promise<MovementRow[]>;
}

export type Difference =
  | { kind: 'ledger_holding_not_ingested'; contractIds: string[]; amount: string }
  | { kind: 'ingested_holding_not_on_ledger'; contractIds: string[]; amount: string }
  | {
      kind: 'holding_differs';
      contractId: string;
      ledger: { amount: string; locked: boolean };
      ingested: { amount: string; locked: boolean };
    }
  | {
      kind: 'movements_do_not_add_up';
      /** Opening balance at `fromOffset` plus the movements after it. */
      expected: string;
      /** The ingested holdings now. */
      ingested: string;
    };

export interface InstrumentReconciliation {
  instrument: Instrument;
  ledger: { amount: string; locked: string; holdings: number };
  ingested: { amount: string; locked: string; holdings: number };
  movements: { opening: string; sum: string; count: number; expected: string };
  differences: Difference[];
}

export type ScanCheck =
  | { status: 'unavailable'; reason: string }
  | {
      status: 'matched' | 'differences';
      instrument: Instrument;
      window: { from: string; to: string };
      matched: number;
      /** In Scan's history, not among the ingested movements. */
      onlyInScan: { updateId: string; date: string; amount: string }[];
      /** Ingested, not in Scan's history over the window. */
      onlyIngested: { updateId: string; recordTime: string; amount: string }[];
      amountDiffers: { updateId: string; scan: string; ingested: string }[];
    };

export interface Reconciliation {
  party: string;
  fromOffset: number;
  ledgerEnd: number;
  cursor?: { offset: number; recordTimes: Record<string, string> };
  /** Offsets between the ingestion cursor and the ledger end (0: caught up). */
  lag: number;
  instruments: InstrumentReconciliation[];
  /** No difference in any instrument (and Scan matched or unavailable). */
  clean: boolean;
  /**
   * With lag and differences: whether the ledger as of the cursor agrees with
   * ingestion (`true`: the differences are only lag).
   */
  onlyLag?: boolean;
  note?: string;
  scan: ScanCheck;
}

export interface ReconcileDeps {
  ledger: LedgerApiClient;
  ingested: IngestedSide;
  scan?: ScanClient | undefined;
  /** Canton Coin's instrument (admin = the DSO party), for the Scan check. */
  cantonCoin?: Instrument | undefined;
}

const key = (i: Instrument) => `${i.admin}\u0000${i.id}`;
const units = (s: string): bigint => {
  const u = decimalUnits(s.trim());
  if (u === undefined) throw new RangeError(`not a decimal amount: ${s}`);
  return u;
};
const sum = (xs: readonly { amount: string }[]) => xs.reduce((a, h) => a + units(h.amount), 0n);

/** The party's Holding views on the ledger as of `offset`. */
export async function ledgerHoldings(
  ledger: LedgerApiClient,
  party: string,
  offset: number,
): Promise<HoldingRow[]> {
  if (offset === 0) return [];
  const acs = await ledger.activeContracts(
    {
      activeAtOffset: offset,
      eventFormat: {
        filtersByParty: {
          [party]: {
            cumulative: [
              {
                identifierFilter: {
                  InterfaceFilter: {
                    value: {
                      interfaceId: HOLDING_INTERFACE,
                      includeInterfaceView: true,
                      includeCreatedEventBlob: false,
                    },
                  },
                },
              },
            ],
          },
        },
        verbose: false,
      },
    },
    { limit: 10_000 },
  );
  const out: HoldingRow[] = [];
  for (const item of acs) {
    const entry = item.contractEntry;
    if (!entry || !('JsActiveContract' in entry)) continue;
    const event = entry.JsActiveContract.createdEvent;
    const view = (event.interfaceViews ?? []).find((v) => v.viewStatus.code === 0)?.viewValue as
      | Record<string, unknown>
      | undefined;
    if (!view || view.owner !== party || typeof view.amount !== 'string') continue;
    const instrument = instrumentOf(view.instrumentId);
    if (!instrument) continue;
    out.push({
      contractId: event.contractId,
      instrument,
      amount: view.amount,
      locked: view.lock !== null && view.lock !== undefined,
    });
  }
  return out;
}

/** The differences between the ledger's and ingestion's holdings, per instrument key. */
function holdingDifferences(ledger: HoldingRow[], ingested: HoldingRow[]): Map<string, Difference[]> {
  const out = new Map<string, Difference[]>();
  const add = (i: Instrument, d: Difference) => {
    const k = key(i);
    out.set(k, [...(out.get(k) ?? []), d]);
  };
  const ing = new Map(ingested.map((h) => [h.contractId, h]));
  const led = new Map(ledger.map((h) => [h.contractId, h]));
  const group = (rows: HoldingRow[]) => {
    const m = new Map<string, HoldingRow[]>();
    for (const h of rows) m.set(key(h.instrument), [...(m.get(key(h.instrument)) ?? []), h]);
    return m;
  };
  for (const rows of group(ledger.filter((h) => !ing.has(h.contractId))).values())
    add(rows[0]!.instrument, {
      kind: 'ledger_holding_not_ingested',
      contractIds: rows.map((h) => h.contractId),
      amount: fromUnits(sum(rows)),
    });
  for (const rows of group(ingested.filter((h) => !led.has(h.contractId))).values())
    add(rows[0]!.instrument, {
      kind: 'ingested_holding_not_on_ledger',
      contractIds: rows.map((h) => h.contractId),
      amount: fromUnits(sum(rows)),
    });
  for (const h of ledger) {
    const i = ing.get(h.contractId);
    if (i && (units(i.amount) !== units(h.amount) || i.locked !== h.locked))
      add(h.instrument, {
        kind: 'holding_differs',
        contractId: h.contractId,
        ledger: { amount: h.amount, locked: h.locked },
        ingested: { amount: i.amount, locked: i.locked },
      });
  }
  return out;
}

const totals = (rows: HoldingRow[]) => ({
  amount: fromUnits(sum(rows)),
  locked: fromUnits(sum(rows.filter((h) => h.locked))),
  holdings: rows.length,
});

/** Reconciles `party` from `fromOffset` (0: from the start of ingestion). */
export async function reconcile(deps: ReconcileDeps, party: string, fromOffset = 0): Promise<Reconciliation> {
  const [end, cursor] = await Promise.all([deps.ledger.ledgerEnd(), deps.ingested.cursor()]);
  const ledgerEnd = end.offset;
  const [onLedger, ingested, opening, movements] = await Promise.all([
    ledgerHoldings(deps.ledger, party, ledgerEnd),
    deps.ingested.holdings(party),
    deps.ingested.holdingsAt(party, fromOffset),
    deps.ingested.movements(party, fromOffset),
  ]);
  const diffs = holdingDifferences(onLedger, ingested);
  const instruments = new Map<string, Instrument>();
  for (const r of [...onLedger, ...ingested, ...opening, ...movements])
    instruments.set(key(r.instrument), r.instrument);
  const out: InstrumentReconciliation[] = [];
  for (const [k, instrument] of [...instruments].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const of = <T extends { instrument: Instrument }>(xs: T[]) => xs.filter((x) => key(x.instrument) === k);
    const ing = totals(of(ingested));
    const open = sum(of(opening));
    const moved = sum(of(movements));
    const expected = fromUnits(open + moved);
    const differences = [...(diffs.get(k) ?? [])];
    if (open + moved !== units(ing.amount))
      differences.push({ kind: 'movements_do_not_add_up', expected, ingested: ing.amount });
    out.push({
      instrument,
      ledger: totals(of(onLedger)),
      ingested: ing,
      movements: { opening: fromUnits(open), sum: fromUnits(moved), count: of(movements).length, expected },
      differences,
    });
  }
  const lag = Math.max(0, ledgerEnd - (cursor?.offset ?? 0));
  const scan = await scanCheck(
    deps,
    party,
    movements,
    cursor,
    await deps.ingested.firstRecordTimeAfter(fromOffset),
  );
  const differing = out.some((i) => i.differences.length > 0);
  const result: Reconciliation = {
    party,
    fromOffset,
    ledgerEnd,
    ...(cursor ? { cursor } : {}),
    lag,
    instruments: out,
    clean: !differing && scan.status !== 'differences',
    scan,
  };
  if (lag > 0 && differing) {
    // Compare ingestion with the ledger as of the cursor: what remains is not lag.
    try {
      const atCursor = await ledgerHoldings(deps.ledger, party, cursor?.offset ?? 0);
      result.onlyLag =
        holdingDifferences(atCursor, ingested).size === 0 &&
        !out.some((i) => i.differences.some((d) => d.kind === 'movements_do_not_add_up'));
    } catch {
      // The participant may have pruned past the cursor: then lag cannot be told apart.
    }
    result.note =
      result.onlyLag === true
        ? `ingestion is ${lag} offsets behind the ledger end; as of its cursor the ledger agrees with it: the differences are only lag`
        : result.onlyLag === false
          ? `ingestion is ${lag} offsets behind the ledger end, and differs from the ledger as of its cursor too: not only lag`
          : `ingestion is ${lag} offsets behind the ledger end: the differences may be only lag (the ledger as of the cursor could not be read)`;
  } else if (lag > 0) result.note = `ingestion is ${lag} offsets behind the ledger end`;
  return result;
}

// ---- Scan ------------------------------------------------------------------------------------

/** The update id in a Scan event id `#<update id>:<node id>`. */
export function updateIdOfEvent(eventId: string): string {
  const s = eventId.startsWith('#') ? eventId.slice(1) : eventId;
  const at = s.lastIndexOf(':');
  return at < 0 ? s : s.slice(0, at);
}

/**
 * The party's net Canton Coin change in one Scan history item: what a tap or
 * mint gives it; as a receiver, the amount less its receiver fee; as the
 * sender, minus what the other receivers got and the fees it paid (its
 * change and a lock stay its own). Zero when it is not involved.
 */
export function scanNetChange(item: TransactionHistoryItem, party: string): bigint {
  const u = (s: string | null | undefined) => (s ? units(s) : 0n);
  if (item.tap && item.tap.amulet_owner === party) return u(item.tap.amulet_amount);
  if (item.mint && item.mint.amulet_owner === party) return u(item.mint.amulet_amount);
  const t = item.transfer;
  if (!t) return 0n;
  if (t.sender.party === party) {
    let out = 0n;
    for (const r of t.receivers) if (r.party !== party) out += u(r.amount);
    return -(out + u(t.sender.holding_fees) + u(t.sender.sender_fee) + u(t.sender.sender_change_fee));
  }
  let net = 0n;
  for (const r of t.receivers) if (r.party === party) net += u(r.amount) - u(r.receiver_fee);
  return net;
}

/** A minute either side of the window: Scan dates items by effective time, ingestion by record time. */
const MARGIN_US = 60_000_000n;

async function scanCheck(
  deps: ReconcileDeps,
  party: string,
  movements: MovementRow[],
  cursor: { offset: number; recordTimes: Record<string, string> } | undefined,
  firstRecordTime: string | undefined,
): Promise<ScanCheck> {
  if (!deps.scan) return { status: 'unavailable', reason: 'no Scan is configured' };
  if (!deps.cantonCoin)
    return { status: 'unavailable', reason: "Canton Coin's instrument (the DSO party) is not known" };
  const cc = deps.cantonCoin;
  const mine = movements.filter((m) => key(m.instrument) === key(cc));
  const times = Object.values(cursor?.recordTimes ?? {}).flatMap((t) => {
    const us = parseInstantMicros(t);
    return us === undefined ? [] : [us];
  });
  const starts = [firstRecordTime, ...mine.map((m) => m.recordTime)]
    .map((t) => (t === undefined ? undefined : parseInstantMicros(t)))
    .filter((x) => x !== undefined);
  if (times.length === 0) return { status: 'unavailable', reason: 'ingestion has no record time yet' };
  const to = times.reduce((a, b) => (a > b ? a : b));
  const from = starts.length > 0 ? starts.reduce((a, b) => (a < b ? a : b)) : to;
  const ingested = new Map<string, { recordTime: string; amount: bigint }>();
  for (const m of mine) {
    const prior = ingested.get(m.updateId);
    ingested.set(m.updateId, { recordTime: m.recordTime, amount: (prior?.amount ?? 0n) + units(m.amount) });
  }
  const inScan = new Map<string, { date: string; amount: bigint; inside: boolean }>();
  try {
    for await (const item of deps.scan.transactions({ pageSize: 200, sortOrder: 'desc' })) {
      const date = parseInstantMicros(item.date);
      if (date === undefined) continue;
      if (date > to + MARGIN_US) continue;
      if (date < from - MARGIN_US) break;
      const net = scanNetChange(item, party);
      if (net === 0n) continue;
      const id = updateIdOfEvent(item.event_id);
      const prior = inScan.get(id);
      inScan.set(id, {
        date: item.date,
        amount: (prior?.amount ?? 0n) + net,
        inside: date >= from && date <= to,
      });
    }
  } catch (e) {
    return {
      status: 'unavailable',
      reason: `Scan's history could not be read: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
  let matched = 0;
  const onlyInScan: { updateId: string; date: string; amount: string }[] = [];
  const onlyIngested: { updateId: string; recordTime: string; amount: string }[] = [];
  const amountDiffers: { updateId: string; scan: string; ingested: string }[] = [];
  for (const [id, m] of ingested) {
    if (m.amount === 0n) continue;
    const s = inScan.get(id);
    if (!s) onlyIngested.push({ updateId: id, recordTime: m.recordTime, amount: fromUnits(m.amount) });
    else if (s.amount !== m.amount)
      amountDiffers.push({ updateId: id, scan: fromUnits(s.amount), ingested: fromUnits(m.amount) });
    else matched++;
  }
  for (const [id, s] of inScan)
    if (s.inside && !ingested.has(id))
      onlyInScan.push({ updateId: id, date: s.date, amount: fromUnits(s.amount) });
  const iso = (us: bigint) => new Date(Number(us / 1000n)).toISOString();
  return {
    status: onlyInScan.length + onlyIngested.length + amountDiffers.length === 0 ? 'matched' : 'differences',
    instrument: cc,
    window: { from: iso(from), to: iso(to) },
    matched,
    onlyInScan,
    onlyIngested,
    amountDiffers,
  };
}

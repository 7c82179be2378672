/**
 * Scan's `POST /v0/holdings/summary` (`getHoldingsSummaryAt`) over the sandbox
 * ledger: per owner, the Amulet and LockedAmulet contracts active at an ACS
 * snapshot, their amounts as created and the holding fees accrued by a round.
 * Every committed update's record time is a snapshot time of the sandbox's Scan.
 */
import { addAmounts, type HoldingView, holdingView, subAmounts } from '../amulet.js';
import { spliceError } from '../errors.js';
import { parseIsoMicros } from '../ledger/clock.js';
import type { Contract } from '../ledger/store.js';
import { big } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';

const ZERO = '0.0000000000';

export interface HoldingsSummary {
  party_id: string;
  total_unlocked_coin: string;
  total_locked_coin: string;
  total_coin_holdings: string;
  accumulated_holding_fees_unlocked: string;
  accumulated_holding_fees_locked: string;
  accumulated_holding_fees_total: string;
  total_available_coin: string;
}

export interface HoldingsSummaryAnswer {
  record_time: string;
  migration_id: number;
  computed_as_of_round: number;
  summaries: HoldingsSummary[];
}

/** Validates a `HoldingsSummaryRequest` body and computes the answer (400/404 as `{error}`). */
export function holdingsSummary(net: SandboxNetwork, b: Record<string, unknown>): HoldingsSummaryAnswer {
  const migrationId = b.migration_id;
  if (typeof migrationId !== 'number' || !Number.isSafeInteger(migrationId))
    throw spliceError(400, 'Invalid migration_id: expected an integer');
  if (typeof b.record_time !== 'string')
    throw spliceError(400, 'Invalid record_time: expected an ISO-8601 timestamp');
  const recordTime = parseIsoMicros(b.record_time);
  if (recordTime === undefined)
    throw spliceError(400, `Invalid record_time: ${b.record_time} is not an ISO-8601 timestamp`);
  const match = b.record_time_match ?? 'exact';
  if (match !== 'exact' && match !== 'at_or_before')
    throw spliceError(
      400,
      `Invalid record_time_match ${JSON.stringify(match)}: expected "exact" or "at_or_before"`,
    );
  const owners = b.owner_party_ids;
  if (!Array.isArray(owners) || owners.length === 0 || owners.some((o) => typeof o !== 'string' || o === ''))
    throw spliceError(400, 'Invalid owner_party_ids: expected a non-empty array of party ids');
  const asOf = b.as_of_round;
  if (
    asOf !== undefined &&
    asOf !== null &&
    (typeof asOf !== 'number' || !Number.isSafeInteger(asOf) || asOf < 0)
  )
    throw spliceError(400, 'Invalid as_of_round: expected a non-negative integer');

  if (migrationId !== net.migrationId)
    throw spliceError(404, `No ACS snapshot found for migration_id ${migrationId}`);
  const snapshot = snapshotAt(net, recordTime, match);
  if (snapshot === undefined)
    throw spliceError(
      404,
      `No ACS snapshot found for migration_id ${migrationId} ${match === 'exact' ? 'at' : 'at or before'} record_time ${b.record_time}`,
    );
  const contracts = net.store.activeAt(snapshot);
  const round =
    typeof asOf === 'number' ? BigInt(asOf) : (earliestOpenRound(contracts) ?? net.latestRound().number);

  const byOwner = new Map<string, HoldingView[]>();
  const wanted = new Set(owners as string[]);
  for (const c of contracts) {
    if (c.templateId.moduleName !== 'Splice.Amulet') continue;
    const v = holdingView(c, round);
    if (!v || !wanted.has(v.owner)) continue;
    byOwner.set(v.owner, [...(byOwner.get(v.owner) ?? []), v]);
  }
  // Scan aggregates the snapshot by owner: owners without holdings have no summary.
  const summaries = [...wanted].flatMap((party) => {
    const hs = byOwner.get(party);
    return hs ? [summarise(party, hs)] : [];
  });
  return {
    record_time: b.record_time,
    migration_id: migrationId,
    computed_as_of_round: Number(round),
    summaries,
  };
}

function summarise(party: string, hs: HoldingView[]): HoldingsSummary {
  const sum = (xs: string[]) => addAmounts(ZERO, ...xs);
  const unlocked = hs.filter((h) => !h.locked);
  const locked = hs.filter((h) => h.locked);
  const totalUnlocked = sum(unlocked.map((h) => h.initialAmount));
  const totalLocked = sum(locked.map((h) => h.initialAmount));
  const feesUnlocked = sum(unlocked.map((h) => h.fees));
  const feesLocked = sum(locked.map((h) => h.fees));
  return {
    party_id: party,
    total_unlocked_coin: totalUnlocked,
    total_locked_coin: totalLocked,
    total_coin_holdings: addAmounts(totalUnlocked, totalLocked),
    accumulated_holding_fees_unlocked: feesUnlocked,
    accumulated_holding_fees_locked: feesLocked,
    accumulated_holding_fees_total: addAmounts(feesUnlocked, feesLocked),
    total_available_coin: subAmounts(totalUnlocked, feesUnlocked),
  };
}

/** Offset of the snapshot: the last update at `t` (exact) or at or before `t`. */
function snapshotAt(net: SandboxNetwork, t: bigint, match: 'exact' | 'at_or_before'): number | undefined {
  let found: number | undefined;
  for (const u of net.store.updates()) {
    if (u.recordTime > t) break;
    if (match === 'at_or_before' || u.recordTime === t) found = u.offset;
  }
  return found;
}

function earliestOpenRound(contracts: Contract[]): bigint | undefined {
  let min: bigint | undefined;
  for (const c of contracts) {
    if (c.templateId.moduleName !== 'Splice.Round' || c.templateId.entityName !== 'OpenMiningRound') continue;
    const n = big(c.argument, 'round', 'number');
    if (n !== undefined && (min === undefined || n < min)) min = n;
  }
  return min;
}

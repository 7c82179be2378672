/**
 * Holdings hygiene: when a party holds more than `threshold` unlocked
 * holdings of an instrument, merge them by token-standard self-transfers
 * (sender = receiver, intent `transferKind: 'self'`) of at most `batch` (≤ 100)
 * inputs each, smallest holdings first (dust is folded in first), until at
 * most `threshold` remain.
 *
 * The amount of each self-transfer is the value of the batch's inputs minus
 * `feeReserve` (default 0). An Amulet holding's value is its initial amount
 * minus the holding fees accrued up to the round it is spent in
 * (holdings.ts `valueUnits`, `feeRoundOf`): the Holding view states the
 * initial amount, and Amulet deducts those fees when the holding is spent.
 * The self-transfer creates the amount for the party plus, when the inputs
 * are worth more than amount + fees, one change holding: with no reserve on
 * a network without transfer fees each batch becomes ONE holding. The round
 * is the one the transfer runs in, from Scan's (or the scan proxy's) open
 * rounds, for every party (holdings.ts `currentRound`). The reserve is for
 * what the value does not foresee (transfer fees, a round the rounds source
 * did not list turning over before the transfer runs); when it falls short,
 * the participant refuses to prepare the transfer and nothing is signed.
 */

import { fromUnits } from '../intent/decimal.js';
import type { InstrumentId } from '../intent/model.js';
import { DUST_THRESHOLD } from './balance.js';
import { type FlowContext, partyOf } from './context.js';
import {
  feeRoundOf,
  type Holding,
  listHoldings,
  MAX_INPUTS,
  sumUnits,
  toUnits,
  valueUnits,
} from './holdings.js';
import { Refusal } from './refusal.js';
import { amuletInstrument, type TransferResult, transfer } from './transfer.js';

export interface MergeOptions {
  /** Inputs per self-transfer (2 to 100, default 100). */
  batch?: number;
  /** Merge until at most this many unlocked holdings remain (default 10). */
  threshold?: number;
  /** Default Canton Coin. */
  instrument?: InstrumentId;
  /** Left out of each batch's amount for fees (decimal, default 0). */
  feeReserve?: string;
}

export interface MergeResult {
  partyId: string;
  instrument: InstrumentId;
  before: { count: number; total: string };
  after: { count: number; total: string };
  /** Unlocked holdings below the dust threshold (1.0) before and after. */
  dustBefore: number;
  dustAfter: number;
  transactions: TransferResult[];
}

/**
 * Valued as of the round in force now (no lookahead): a batch's amount valued
 * a round ahead would leave a change holding, and a merge of two holdings
 * would then not reduce the count. If a round opens between the valuation
 * and the prepare, the participant refuses the transfer (nothing is signed)
 * and running the merge again values it anew.
 */
const unlockedOf = async (ctx: FlowContext, partyId: string, instrument: InstrumentId) =>
  (await listHoldings(ctx, partyId, { instrument, lookaheadMs: 0 })).filter((h) => !h.locked);

const smallestFirst = (a: Holding, b: Holding): number => {
  const d = toUnits(a.amount) - toUnits(b.amount);
  return d < 0n ? -1 : d > 0n ? 1 : a.cid < b.cid ? -1 : 1;
};

const dustIn = (hs: readonly Holding[]): number => {
  const t = toUnits(DUST_THRESHOLD);
  return hs.filter((h) => toUnits(h.amount) < t).length;
};

export async function mergeHoldings(
  ctx: FlowContext,
  partyId: string,
  opts: MergeOptions = {},
): Promise<MergeResult> {
  const batch = opts.batch ?? MAX_INPUTS;
  const threshold = opts.threshold ?? 10;
  if (!Number.isInteger(batch) || batch < 2 || batch > MAX_INPUTS)
    throw new Refusal('bad_request', `batch: 2 to ${MAX_INPUTS} inputs per merge transfer, got ${batch}`);
  if (!Number.isInteger(threshold) || threshold < 1)
    throw new Refusal('bad_request', `threshold: a positive whole number, got ${threshold}`);
  const reserve = toUnits(opts.feeReserve ?? '0', 'feeReserve');
  await partyOf(ctx, partyId);
  const instrument = opts.instrument ?? (await amuletInstrument(ctx));

  const first = await unlockedOf(ctx, partyId, instrument);
  let current = first;
  const transactions: TransferResult[] = [];
  while (current.length > threshold) {
    // Enough inputs to get to the threshold (one output per batch), never more than `batch`.
    const take = Math.min(batch, current.length, Math.max(2, current.length - threshold + 1));
    const inputs = [...current].sort(smallestFirst).slice(0, take);
    // What the inputs are worth when spent: amounts minus the holding fees accrued by then.
    const round = feeRoundOf(inputs);
    const total = inputs.reduce((a, h) => a + valueUnits(h, round), 0n);
    if (total <= reserve)
      throw new Refusal(
        'bad_request',
        `the ${take} smallest holdings are worth ${fromUnits(total)} after holding fees, not more than the fee reserve ${fromUnits(reserve)}: nothing to merge them into`,
      );
    transactions.push(
      await transfer(ctx, {
        from: partyId,
        to: partyId,
        amount: fromUnits(total - reserve),
        instrument,
        inputs,
        flowName: 'holdings-merge',
      }),
    );
    const next = await unlockedOf(ctx, partyId, instrument);
    if (next.length >= current.length)
      throw new Refusal(
        'bad_request',
        `merging ${take} holdings left ${next.length} (from ${current.length}): the self-transfer does not reduce the count; stopped after ${transactions.length} transaction(s)`,
      );
    current = next;
  }
  return {
    partyId,
    instrument,
    before: { count: first.length, total: fromUnits(sumUnits(first)) },
    after: { count: current.length, total: fromUnits(sumUnits(current)) },
    dustBefore: dustIn(first),
    dustAfter: dustIn(current),
    transactions,
  };
}

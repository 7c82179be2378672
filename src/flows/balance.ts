/**
 * A party's balance (canton-apis §6.3): per instrument, the unlocked and
 * locked totals and the count of its holdings from the Ledger API ACS (the
 * Holding views: for Amulet, amounts before holding fees); and, when a
 * validator is configured, the validator's external-party balance (after
 * holding fees, as of a round; 404 when the validator keeps no wallet for the
 * party → omitted, with a warning unless the party book says the party was
 * onboarded through the Ledger API, which never makes such a wallet). Warns when the party holds more than
 * `HOLDINGS_WARN` holdings of an instrument (transfers take at most 100
 * inputs; merge them) and counts dust: unlocked holdings below
 * `DUST_THRESHOLD` (1.0 of the instrument), which cost holding fees and input
 * slots worth more than they hold.
 */
import { isCantonApiError } from '../canton/errors.js';
import { fromUnits } from '../intent/decimal.js';
import type { FlowContext } from './context.js';
import { instrumentText, listHoldings, sameInstrument, toUnits } from './holdings.js';

/** More unlocked holdings of one instrument than this: suggest a merge (Splice recommends ~10). */
export const HOLDINGS_WARN = 10;
/** Unlocked holdings below this amount are dust. */
export const DUST_THRESHOLD = '1.0';

export type BalanceReport = {
  partyId: string;
  validator?: { totalUnlocked: string; totalLocked: string; holdingFees: string; computedAsOfRound: number };
  holdings: { instrument: { admin: string; id: string }; unlocked: string; locked: string; count: number }[];
  dustCount: number;
  warnings: string[];
};

export async function partyBalance(ctx: FlowContext, partyId: string): Promise<BalanceReport> {
  const warnings: string[] = [];
  let validator: BalanceReport['validator'];
  if (ctx.validator) {
    try {
      const b = await ctx.validator.externalPartyBalance(partyId);
      validator = {
        totalUnlocked: b.total_unlocked_coin,
        totalLocked: b.total_locked_coin,
        holdingFees: b.accumulated_holding_fees_total,
        computedAsOfRound: b.computed_as_of_round,
      };
    } catch (e) {
      if (!isCantonApiError(e) || e.status !== 404) throw e;
      // A party onboarded through the Ledger API has no validator wallet by design (the
      // `validator` section is simply absent); saying so in every balance would be noise.
      if ((await ctx.parties.get(partyId))?.via !== 'ledger-api')
        warnings.push(
          `the validator keeps no external-party wallet for ${partyId} (it was not onboarded through the validator's setup proposal): its balance after holding fees is not shown`,
        );
    }
  }
  const all = await listHoldings(ctx, partyId);
  const dust = toUnits(DUST_THRESHOLD);
  const groups: (BalanceReport['holdings'][number] & { unlockedCount: number })[] = [];
  let dustCount = 0;
  for (const h of all) {
    let g = groups.find((x) => sameInstrument(x.instrument, h.instrument));
    if (!g) {
      g = { instrument: h.instrument, unlocked: '0', locked: '0', count: 0, unlockedCount: 0 };
      groups.push(g);
    }
    const units = toUnits(h.amount, `holding ${h.cid} amount`);
    g.count++;
    if (h.locked) g.locked = fromUnits(toUnits(g.locked) + units);
    else {
      g.unlocked = fromUnits(toUnits(g.unlocked) + units);
      g.unlockedCount++;
      if (units < dust) dustCount++;
    }
  }
  for (const g of groups)
    if (g.unlockedCount > HOLDINGS_WARN)
      warnings.push(
        `${g.unlockedCount} unlocked ${instrumentText(g.instrument)} holdings (more than ${HOLDINGS_WARN}): merge them (canton-signer holdings merge ${partyId}); a transfer takes at most 100 inputs`,
      );
  if (dustCount > 0)
    warnings.push(`${dustCount} unlocked holding(s) below ${DUST_THRESHOLD} (dust): a merge folds them in`);
  return {
    partyId,
    ...(validator ? { validator } : {}),
    holdings: groups.map(({ unlockedCount: _, ...g }) => ({
      ...g,
      unlocked: fromUnits(toUnits(g.unlocked)),
      locked: fromUnits(toUnits(g.locked)),
    })),
    dustCount,
    warnings,
  };
}

/**
 * A party's token-standard holdings and the choice of transfer inputs.
 * `listHoldings` reads the Holding interface views of the party's active
 * contracts from the Ledger API (canton-apis §6.1 step 1, §3.8);
 * `selectInputs` picks the fewest unlocked holdings of one instrument whose
 * value covers an amount plus a fee reserve (at most 100, Amulet's limit), or
 * refuses with the numbers. Amounts are Daml `Numeric 10` handled as scaled
 * bigints (`toUnits`; the arithmetic is intent/decimal.ts's), never as floats. Also owns the
 * token-standard interface ids and the ACS reader the offers flow shares.
 *
 * Holding fees: an Amulet's Holding view states its initial amount, and its
 * `meta` the round it was created in and its fee per round
 * (`amulet.splice.lfdecentralizedtrust.org/created-in-round`, `…/rate-per-round`).
 * Amulet values every input as of the open round the transfer runs in, fees
 * deducted, and refuses the transfer when the inputs fall short. So an
 * Amulet holding is worth `amount − min(amount, rate × (round − created-in-round))`
 * here, as of a current round: the validator's balance round for the party
 * (its earliest open round; `listHoldings` with an instrument asks for it,
 * at most every `ROUND_TTL_MS`) plus `ROUND_MARGIN`, since the registry's choice context uses the newest open
 * round. A party the validator keeps no wallet for falls back to the newest
 * created-in round among its holdings, a lower bound: the participant's
 * prepare then has the last word. Holdings without that meta (other
 * instruments) carry no fee.
 */

import { isCantonApiError } from '../canton/errors.js';
import type { CreatedEvent, JsGetActiveContractsResponse } from '../canton/ledger-api/schemas.js';
import { decimalUnits, fromUnits, isDecimal, NUMERIC_SCALE, shortAmount } from '../intent/decimal.js';
import type { InstrumentId } from '../intent/model.js';
import type { FlowContext } from './context.js';
import { Refusal } from './refusal.js';

export const HOLDING_INTERFACE = '#splice-api-token-holding-v1:Splice.Api.Token.HoldingV1:Holding';
export const TRANSFER_INSTRUCTION_INTERFACE =
  '#splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferInstruction';
export const TRANSFER_FACTORY_INTERFACE =
  '#splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferFactory';

/** Amulet accepts at most this many inputs per transfer (canton-apis §6.1). */
export const MAX_INPUTS = 100;

// ---- decimals (Daml Numeric 10, arithmetic in intent/decimal.ts) -----------------------------

/** A non-negative decimal string as units of 10⁻¹⁰; throws a `bad_request` refusal naming `what`. */
export function toUnits(s: string, what = 'amount'): bigint {
  const t = s.trim();
  if (!isDecimal(t) || t.startsWith('-'))
    throw new Refusal('bad_request', `${what}: not a non-negative decimal: ${s}`);
  const units = decimalUnits(t);
  if (units === undefined)
    throw new Refusal('bad_request', `${what}: more than ${NUMERIC_SCALE} decimals: ${s}`);
  return units;
}

export const sumUnits = (xs: readonly { amount: string }[]): bigint =>
  xs.reduce((acc, h) => acc + toUnits(h.amount), 0n);

// ---- holdings -----------------------------------------------------------------------------------

export interface Holding {
  cid: string;
  /** Decimal string as the view states it (Amulet: the initial amount, before holding fees). */
  amount: string;
  instrument: InstrumentId;
  locked: boolean;
  createdAt?: string;
  /**
   * Amulet: what the view's meta says about holding fees, and the current
   * round `listHoldings` learned (if it did). Absent: the holding accrues no fee.
   */
  holdingFee?: HoldingFee;
}

export interface HoldingFee {
  /** The mining round the amulet was created in. */
  createdInRound: number;
  /** Fee per round (decimal string, absolute: CC per round). */
  ratePerRound: string;
  /** The current round as `listHoldings` learned it (the fees' "as of"), if it did. */
  currentRound?: number;
}

/** Amulet's Holding-view metadata keys (Splice `amuletMetadata`). */
export const CREATED_IN_ROUND_KEY = 'amulet.splice.lfdecentralizedtrust.org/created-in-round';
export const RATE_PER_ROUND_KEY = 'amulet.splice.lfdecentralizedtrust.org/rate-per-round';

/**
 * Rounds counted past the validator's balance round (its earliest open round)
 * when valuing holdings: the registry's choice context uses the newest open round.
 */
export const ROUND_MARGIN = 1;

/** The holding fee accrued as of `round` in units (capped at the amount; 0 without fee info). */
export function holdingFeeUnits(h: Holding, round: number | undefined): bigint {
  const f = h.holdingFee;
  if (!f || round === undefined || round <= f.createdInRound) return 0n;
  const fee = toUnits(f.ratePerRound, `holding ${h.cid} rate-per-round`) * BigInt(round - f.createdInRound);
  const amount = toUnits(h.amount);
  return fee > amount ? amount : fee;
}

/** What a holding is worth as of `round` in units: its amount minus accrued holding fees. */
export const valueUnits = (h: Holding, round: number | undefined): bigint =>
  toUnits(h.amount) - holdingFeeUnits(h, round);

/**
 * The round to value `holdings` as of: the current round one of them carries
 * (from `listHoldings`) plus `ROUND_MARGIN`, else the newest created-in round
 * among them (a lower bound); undefined when none carries fee info.
 */
export function feeRoundOf(holdings: readonly Holding[]): number | undefined {
  let current: number | undefined;
  let newest: number | undefined;
  for (const h of holdings) {
    const f = h.holdingFee;
    if (!f) continue;
    if (f.currentRound !== undefined) current = Math.max(current ?? 0, f.currentRound);
    newest = Math.max(newest ?? 0, f.createdInRound);
  }
  return current !== undefined ? current + ROUND_MARGIN : newest;
}

/** `created-in-round` and `rate-per-round` from a Holding view's meta, when both are well-formed. */
function holdingFeeOf(meta: unknown): HoldingFee | undefined {
  if (typeof meta !== 'object' || meta === null) return undefined;
  const values = (meta as Record<string, unknown>).values;
  if (typeof values !== 'object' || values === null) return undefined;
  const v = values as Record<string, unknown>;
  const round = text(v[CREATED_IN_ROUND_KEY]);
  const rate = text(v[RATE_PER_ROUND_KEY]);
  if (round === undefined || rate === undefined || !/^\d{1,15}$/.test(round)) return undefined;
  if (!isDecimal(rate) || rate.startsWith('-') || decimalUnits(rate) === undefined) return undefined;
  return { createdInRound: Number(round), ratePerRound: rate };
}

export const sameInstrument = (a: InstrumentId, b: InstrumentId): boolean =>
  a.admin === b.admin && a.id === b.id;

export const instrumentText = (i: InstrumentId): string => `${i.admin}:${i.id}`;

/**
 * Created events of `partyId`'s active contracts implementing `interfaceId`,
 * with the view (no created-event blobs: nothing here discloses these
 * contracts, and a blob is kilobytes per contract).
 */
export async function activeInterfaceViews(
  ctx: FlowContext,
  partyId: string,
  interfaceId: string,
): Promise<{ event: CreatedEvent; view: Record<string, unknown> }[]> {
  const offset = (await ctx.ledger.ledgerEnd()).offset;
  const acs = await ctx.ledger.activeContracts(
    {
      activeAtOffset: offset,
      eventFormat: {
        filtersByParty: {
          [partyId]: {
            cumulative: [
              {
                identifierFilter: {
                  InterfaceFilter: {
                    value: { interfaceId, includeInterfaceView: true, includeCreatedEventBlob: false },
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
  const out: { event: CreatedEvent; view: Record<string, unknown> }[] = [];
  for (const item of acs) out.push(...viewsOf(item));
  return out;
}

function viewsOf(
  item: JsGetActiveContractsResponse,
): { event: CreatedEvent; view: Record<string, unknown> }[] {
  const entry = item.contractEntry;
  if (!entry || !('JsActiveContract' in entry)) return [];
  const event = entry.JsActiveContract.createdEvent;
  const v = (event.interfaceViews ?? []).find((x) => x.viewStatus.code === 0);
  const view = v?.viewValue;
  if (typeof view !== 'object' || view === null) return [];
  return [{ event, view: view as Record<string, unknown> }];
}

const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export function instrumentOf(v: unknown): InstrumentId | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  const admin = text(o.admin);
  const id = text(o.id);
  return admin && id ? { admin, id } : undefined;
}

/**
 * The party's holdings (owner = the party), optionally of one instrument.
 * With an instrument (what a transfer spends) and holdings that accrue fees,
 * the current round is looked up too (the validator's balance round for the
 * party, when it keeps a wallet for it) and put in their `holdingFee`.
 */
export async function listHoldings(
  ctx: FlowContext,
  partyId: string,
  opts: { instrument?: InstrumentId } = {},
): Promise<Holding[]> {
  const out: Holding[] = [];
  for (const { event, view } of await activeInterfaceViews(ctx, partyId, HOLDING_INTERFACE)) {
    const instrument = instrumentOf(view.instrumentId);
    const amount = text(view.amount);
    if (view.owner !== partyId || !instrument || amount === undefined) continue;
    if (opts.instrument && !sameInstrument(instrument, opts.instrument)) continue;
    const holdingFee = holdingFeeOf(view.meta);
    out.push({
      cid: event.contractId,
      amount,
      instrument,
      locked: view.lock !== null && view.lock !== undefined,
      ...(event.createdAt ? { createdAt: event.createdAt } : {}),
      ...(holdingFee ? { holdingFee } : {}),
    });
  }
  if (opts.instrument && out.some((h) => h.holdingFee)) {
    const round = await currentRound(ctx, partyId);
    if (round !== undefined) for (const h of out) if (h.holdingFee) h.holdingFee.currentRound = round;
  }
  return out;
}

/**
 * How long a learned round is used before the validator is asked again.
 * Rounds last minutes and `ROUND_MARGIN` covers one turning over meanwhile;
 * without this, every transfer would cost one more call to the validator.
 */
export const ROUND_TTL_MS = 30_000;

/** Per validator client: the round last learned (any party's: rounds are global) and parties without a wallet. */
const learned = new WeakMap<object, { round?: number; until: number; noWallet: Map<string, number> }>();

/**
 * The validator's balance round (its earliest open round), learned through
 * the party's external-party balance and remembered for `ROUND_TTL_MS`;
 * undefined when the validator keeps no wallet for the party (remembered as
 * long) and nothing fresh was learned through another party.
 */
async function currentRound(ctx: FlowContext, partyId: string): Promise<number | undefined> {
  const validator = ctx.validator;
  if (!validator) return undefined;
  const now = Date.now();
  let memo = learned.get(validator);
  if (!memo) {
    memo = { until: 0, noWallet: new Map() };
    learned.set(validator, memo);
  }
  if (memo.round !== undefined && now < memo.until) return memo.round;
  if ((memo.noWallet.get(partyId) ?? 0) > now) return undefined;
  try {
    const round = (await validator.externalPartyBalance(partyId)).computed_as_of_round;
    memo.round = round;
    memo.until = now + ROUND_TTL_MS;
    return round;
  } catch (e) {
    if (isCantonApiError(e) && e.status === 404) {
      // No external-party wallet for this party.
      if (memo.noWallet.size >= 10_000) memo.noWallet.clear();
      memo.noWallet.set(partyId, now + ROUND_TTL_MS);
      return undefined;
    }
    throw e;
  }
}

// ---- input selection ----------------------------------------------------------------------------

export interface SelectOptions {
  /** At most this many inputs (default and ceiling 100). */
  maxInputs?: number;
  /** Kept on top of the amount for fees (decimal string, default 0). */
  feeReserve?: string;
  /** Only holdings of this instrument (default: the instrument of the largest unlocked holding). */
  instrument?: InstrumentId;
  /** Value holdings as of this round (default `feeRoundOf` the pool). Ignored for holdings without fee info. */
  asOfRound?: number;
}

export interface Selection {
  inputs: Holding[];
  /** Sum of the inputs' values (amounts minus holding fees as of `asOfRound`). */
  total: string;
  /** amount + fee reserve. */
  target: string;
  /** Holding fees accrued on the inputs as of `asOfRound` (0 when none accrue). */
  holdingFees: string;
  /** The round the inputs were valued as of (absent when no input accrues fees). */
  asOfRound?: number;
}

/**
 * The fewest unlocked holdings of one instrument whose value (amount minus
 * holding fees as of the round) covers `amount` + the fee reserve: the k most
 * valuable, k minimal (no k−1 holdings can cover it); then, keeping k, each
 * chosen holding is swapped for the least valuable unchosen one that still
 * covers the target, so small holdings are used up first.
 */
export function selectInputs(
  holdings: readonly Holding[],
  amount: string,
  opts: SelectOptions = {},
): Selection {
  const max = Math.min(opts.maxInputs ?? MAX_INPUTS, MAX_INPUTS);
  if (!Number.isInteger(max) || max < 1)
    throw new Refusal('bad_request', `maxInputs: must be 1 to ${MAX_INPUTS}`);
  if (opts.asOfRound !== undefined && (!Number.isSafeInteger(opts.asOfRound) || opts.asOfRound < 0))
    throw new Refusal('bad_request', `asOfRound: a round number, got ${opts.asOfRound}`);
  const want = toUnits(amount, 'amount');
  if (want <= 0n) throw new Refusal('bad_request', `amount: must be positive, got ${amount}`);
  const target = want + toUnits(opts.feeReserve ?? '0', 'feeReserve');
  const unlocked = holdings.filter((h) => !h.locked);
  const round = opts.asOfRound ?? feeRoundOf(unlocked);
  const values = new Map(unlocked.map((h) => [h, valueUnits(h, round)]));
  const val = (h: Holding): bigint => values.get(h)!;
  const byValueDesc = (a: Holding, b: Holding): number => {
    const d = val(b) - val(a);
    return d > 0n ? 1 : d < 0n ? -1 : a.cid < b.cid ? -1 : a.cid > b.cid ? 1 : 0;
  };
  const instrument = opts.instrument ?? [...unlocked].sort(byValueDesc)[0]?.instrument;
  const pool = instrument
    ? unlocked.filter((h) => sameInstrument(h.instrument, instrument)).sort(byValueDesc)
    : [];
  const sumVal = (xs: readonly Holding[]) => xs.reduce((a, h) => a + val(h), 0n);
  const feesOf = (xs: readonly Holding[]) => sumUnits(xs) - sumVal(xs);
  const feeNote = (xs: readonly Holding[]): string => {
    const f = feesOf(xs);
    return f > 0n
      ? ` after ${shortAmount(fromUnits(f))} of holding fees as of round ${round} (${shortAmount(fromUnits(sumUnits(xs)))} before fees)`
      : '';
  };
  const available = sumVal(pool);
  const what = instrument ? instrument.id : 'the instrument';
  if (available < target)
    throw new Refusal(
      'bad_request',
      `insufficient funds: ${pool.length} unlocked ${what} holding(s) hold ${shortAmount(fromUnits(available))}${feeNote(pool)}, the transfer needs ${shortAmount(fromUnits(target))}` +
        (target !== want
          ? ` (${shortAmount(amount)} plus a fee reserve of ${shortAmount(fromUnits(target - want))})`
          : ''),
      [],
      {
        available: fromUnits(available),
        needed: fromUnits(target),
        ...(feesOf(pool) > 0n ? { holdingFees: fromUnits(feesOf(pool)), asOfRound: String(round) } : {}),
      },
    );
  let k = 0;
  let sum = 0n;
  while (sum < target) sum += val(pool[k++]!);
  if (k > max) {
    const best = sumVal(pool.slice(0, max));
    throw new Refusal(
      'bad_request',
      `the transfer needs ${k} holdings but at most ${max} can be inputs (the ${max} largest hold ${shortAmount(fromUnits(best))}${feeNote(pool.slice(0, max))} of the ${shortAmount(fromUnits(target))} needed): merge holdings first (canton-signer holdings merge)`,
      [],
      { needed: fromUnits(target), inputsNeeded: String(k), maxInputs: String(max) },
    );
  }
  const chosen = pool.slice(0, k);
  const rest = pool.slice(k).reverse(); // least valuable first
  for (let i = chosen.length - 1; i >= 0; i--) {
    const cur = val(chosen[i]!);
    const j = rest.findIndex((h) => {
      const u = val(h);
      return u < cur && sum - cur + u >= target;
    });
    if (j < 0) continue;
    const [swap] = rest.splice(j, 1, chosen[i]!);
    sum = sum - cur + val(swap!);
    chosen[i] = swap!;
    rest.sort((a, b) => -byValueDesc(a, b));
  }
  const fees = feesOf(chosen);
  return {
    inputs: chosen,
    total: fromUnits(sum),
    target: fromUnits(target),
    holdingFees: fromUnits(fees),
    ...(fees > 0n && round !== undefined ? { asOfRound: round } : {}),
  };
}

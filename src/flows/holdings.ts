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
 * here, as of the round a transfer would run in. That round is the one the
 * registry puts in the transfer factory's choice context: the open round with
 * the highest number whose `opensAt` has passed (Scan's token-standard handler,
 * `lookupLatestUsableOpenMiningRound(now)`; ../canton/scan/rounds.ts). The open
 * rounds come from Scan (`POST /v0/open-and-issuing-mining-rounds`) when the
 * context has Scan, else from the validator's scan proxy (`GET
 * /v0/scan-proxy/open-and-issuing-mining-rounds`); rounds are global, so this
 * works for every party, with or without a validator wallet. They are
 * remembered per client for `ROUND_TTL_MS` (less when Scan suggests a shorter
 * TTL), and the round is picked as of `ROUND_LOOKAHEAD_MS` from now: Splice
 * creates each round a tick before it opens, so a round opening between the
 * valuation and the prepare is already listed and is the one used (the margin
 * covers exactly one round turning over, and only when one is due). Without
 * Scan or a validator, the round is the newest created-in round among the
 * holdings, a lower bound. Holdings without the fee meta (other instruments)
 * carry no fee.
 *
 * Trust: the rounds source is trusted for availability only. A source that
 * lies (or is stale) about the round makes holdings look worth more or less
 * than they are: the signer then either refuses a transfer itself, sends a
 * smaller merge amount (the rest comes back as change), or asks for one the
 * participant refuses to prepare. The prepared transaction is still checked
 * against the intent (amount, receiver, inputs) before anything is signed, so
 * a wrong round can never get something signed that the intent check refuses.
 */

import type { CreatedEventViews, JsActiveContractViewsResponse } from '../canton/ledger-api/schemas.js';
import { type OpenRound, openRoundsOf, usableRound } from '../canton/scan/rounds.js';
import { decimalUnits, fromUnits, isDecimal, NUMERIC_SCALE, shortAmount } from '../intent/decimal.js';
import type { InstrumentId } from '../intent/model.js';
import type { FlowContext } from './context.js';
import { FROM_BUILDER, interfaceViewsRequest } from './ledger-requests.js';
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
  /** The round a transfer would run in, as `listHoldings` learned it (the fees' "as of"), if it did. */
  currentRound?: number;
}

/** Amulet's Holding-view metadata keys (Splice `amuletMetadata`). */
export const CREATED_IN_ROUND_KEY = 'amulet.splice.lfdecentralizedtrust.org/created-in-round';
export const RATE_PER_ROUND_KEY = 'amulet.splice.lfdecentralizedtrust.org/rate-per-round';

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
 * The round to value `holdings` as of: the round a transfer would run in, as
 * one of them carries it (from `listHoldings`), else the newest created-in
 * round among them (a lower bound); undefined when none carries fee info.
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
  return current ?? newest;
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
 * contracts, and a blob is kilobytes per contract). Each event is validated
 * and kept for its id, template, creation time and views only
 * (`activeContractViews`).
 */
export async function activeInterfaceViews(
  ctx: Pick<FlowContext, 'ledger'>,
  partyId: string,
  interfaceId: string,
  atOffset?: number,
): Promise<{ event: CreatedEventViews; view: Record<string, unknown> }[]> {
  const offset = atOffset ?? (await ctx.ledger.ledgerEnd()).offset;
  const acs = await ctx.ledger.activeContractViews(interfaceViewsRequest(partyId, interfaceId, offset), {
    limit: 10_000,
    ...FROM_BUILDER,
  });
  const out: { event: CreatedEventViews; view: Record<string, unknown> }[] = [];
  for (const item of acs) out.push(...viewsOf(item));
  return out;
}

function viewsOf(
  item: JsActiveContractViewsResponse,
): { event: CreatedEventViews; view: Record<string, unknown> }[] {
  const event = item.contractEntry?.JsActiveContract?.createdEvent;
  if (!event) return [];
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
 * the round a transfer would run in is looked up too (`currentRound`) and put
 * in their `holdingFee`.
 */
export async function listHoldings(
  ctx: FlowContext,
  partyId: string,
  opts: {
    instrument?: InstrumentId;
    /**
     * A round opening within this long counts as the one the transfer runs in
     * (default `ROUND_LOOKAHEAD_MS`; a merge passes 0: see merge.ts).
     */
    lookaheadMs?: number;
  } = {},
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
    const newestCreated = out.reduce((m, h) => Math.max(m, h.holdingFee?.createdInRound ?? 0), 0);
    const round = await currentRound(
      ctx,
      opts.instrument.admin,
      newestCreated,
      opts.lookaheadMs ?? ROUND_LOOKAHEAD_MS,
    );
    if (round !== undefined) for (const h of out) if (h.holdingFee) h.holdingFee.currentRound = round;
  }
  return out;
}

/**
 * How long the open rounds learned from a client are used before it is asked
 * again (at most; Scan's suggested TTL may be shorter). The round in force is
 * still picked from them against the clock at each use, so a round that opens
 * meanwhile is taken up: Splice lists each round a tick before it opens.
 * Without this, every transfer would cost one more call.
 */
export const ROUND_TTL_MS = 30_000;

/**
 * The round is picked as in force this long from now: a transfer's choice
 * context is fetched moments after the inputs are valued, and a round that
 * opens in between is the one it runs in. Larger values only value holdings
 * a round lower than needed in the last moments before a round turns over.
 */
export const ROUND_LOOKAHEAD_MS = 60_000;

/**
 * Per rounds client (Scan or validator): the open rounds last learned, or
 * that asking failed, until when; and the request under way, shared.
 */
const learned = new WeakMap<
  object,
  { rounds?: OpenRound[]; failed?: boolean; until: number; asking?: Promise<OpenRound[]> }
>();

/** Per attempt, for this optional call: a slow source must not hold a transfer up for long. */
export const ROUNDS_TIMEOUT_MS = 5_000;

const nowUsOf = (ctx: FlowContext): bigint => (ctx.nowUs ? ctx.nowUs() : BigInt(Date.now()) * 1000n);

/**
 * The open rounds of `dso` from `client`, remembered for `ROUND_TTL_MS` (or
 * Scan's shorter TTL); a failure is remembered as long, so a source that is
 * down costs one wait per TTL, and callers at the same moment share one
 * request. `fresh` asks again regardless. An answer without a round of `dso`
 * (another network's Scan, an empty list) is a failure.
 */
async function roundsFrom(
  client: object,
  dso: string,
  fetch: () => Promise<{ rounds: OpenRound[]; ttlMs?: number }>,
  fresh: boolean,
): Promise<OpenRound[]> {
  const memo = learned.get(client);
  if (memo?.asking) return memo.asking;
  if (memo && !fresh && Date.now() < memo.until) {
    if (memo.rounds) return memo.rounds;
    throw new Error('the open rounds could not be had a moment ago');
  }
  const asking = (async () => {
    const { rounds, ttlMs } = await fetch();
    const ours = rounds.filter((r) => r.dso === dso);
    if (ours.length === 0) throw new Error(`no open round of ${dso} in the answer`);
    return { rounds: ours, ttlMs };
  })().then(
    ({ rounds, ttlMs }) => {
      learned.set(client, { rounds, until: Date.now() + Math.min(ROUND_TTL_MS, ttlMs ?? ROUND_TTL_MS) });
      return rounds;
    },
    (e: unknown) => {
      learned.set(client, { failed: true, until: Date.now() + ROUND_TTL_MS });
      throw e;
    },
  );
  learned.set(client, { ...(memo ?? { until: 0 }), asking });
  return asking;
}

/**
 * The open rounds of `dso` from Scan, else the validator's scan proxy (also
 * when Scan fails). Undefined when neither is configured or neither answers:
 * holdings are then valued as of the newest round they were created in (fees
 * up to then) and the participant's prepare has the last word. A transfer
 * never fails here.
 */
async function openRoundsFor(
  ctx: FlowContext,
  dso: string,
  fresh: boolean,
): Promise<OpenRound[] | undefined> {
  const { scan, validator } = ctx;
  const sources: (() => Promise<OpenRound[]>)[] = [];
  if (scan)
    sources.push(() =>
      roundsFrom(
        scan,
        dso,
        async () => {
          const r = await scan.getOpenAndIssuingMiningRounds(undefined, { timeoutMs: ROUNDS_TIMEOUT_MS });
          return { rounds: openRoundsOf(r), ttlMs: Math.floor(r.time_to_live_in_microseconds / 1000) };
        },
        fresh,
      ),
    );
  if (validator)
    sources.push(() =>
      roundsFrom(
        validator,
        dso,
        async () => ({
          rounds: openRoundsOf(
            await validator.scanProxyOpenAndIssuingMiningRounds({ timeoutMs: ROUNDS_TIMEOUT_MS }),
          ),
        }),
        fresh,
      ),
    );
  for (const source of sources) {
    try {
      return await source();
    } catch {
      // Scan or the proxy down, refusing us, or answering off-spec: try the next, then do without.
    }
  }
  return undefined;
}

/**
 * The round a transfer would run in: the open round of `dso` with the highest
 * number whose `opensAt` is before `lookaheadMs` from now (the registry's
 * choice-context round; see the header). When the remembered rounds are
 * behind what the ledger shows (a holding created in a newer round), they are
 * fetched again, and if they still are, they are not used. When no round has
 * opened by the (possibly skewed) clock, the lowest open round; undefined
 * without Scan or validator, or without open rounds.
 */
async function currentRound(
  ctx: FlowContext,
  dso: string,
  newestCreated: number,
  lookaheadMs: number,
): Promise<number | undefined> {
  const at = nowUsOf(ctx) + BigInt(lookaheadMs) * 1000n;
  const pick = (rounds: readonly OpenRound[]) => (usableRound(rounds, at) ?? rounds[0])?.number;
  let round = pick((await openRoundsFor(ctx, dso, false)) ?? []);
  if (round !== undefined && round < newestCreated) round = pick((await openRoundsFor(ctx, dso, true)) ?? []);
  return round !== undefined && round < newestCreated ? undefined : round;
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

/**
 * A party's token-standard holdings and the choice of transfer inputs.
 * `listHoldings` reads the Holding interface views of the party's active
 * contracts from the Ledger API (canton-apis §6.1 step 1, §3.8);
 * `selectInputs` picks the fewest unlocked holdings of one instrument that
 * cover an amount plus a fee reserve (at most 100, Amulet's limit), or
 * refuses with the numbers. Amounts are Daml `Numeric 10` handled as scaled
 * bigints (`toUnits`; the arithmetic is intent/decimal.ts's), never as floats. Also owns the
 * token-standard interface ids and the ACS reader the offers flow shares.
 */
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

/** The party's holdings (owner = the party), optionally of one instrument. */
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
    out.push({
      cid: event.contractId,
      amount,
      instrument,
      locked: view.lock !== null && view.lock !== undefined,
      ...(event.createdAt ? { createdAt: event.createdAt } : {}),
    });
  }
  return out;
}

// ---- input selection ----------------------------------------------------------------------------

export interface SelectOptions {
  /** At most this many inputs (default and ceiling 100). */
  maxInputs?: number;
  /** Kept on top of the amount for fees (decimal string, default 0). */
  feeReserve?: string;
  /** Only holdings of this instrument (default: the instrument of the largest unlocked holding). */
  instrument?: InstrumentId;
}

export interface Selection {
  inputs: Holding[];
  /** Sum of the inputs' amounts. */
  total: string;
  /** amount + fee reserve. */
  target: string;
}

const byAmountDesc = (a: Holding, b: Holding): number => {
  const d = toUnits(b.amount) - toUnits(a.amount);
  return d > 0n ? 1 : d < 0n ? -1 : a.cid < b.cid ? -1 : a.cid > b.cid ? 1 : 0;
};

/**
 * The fewest unlocked holdings of one instrument whose sum covers `amount` +
 * the fee reserve: the k largest, k minimal (no k−1 holdings can cover it);
 * then, keeping k, each chosen holding is swapped for the smallest unchosen
 * one that still covers the target, so small holdings are used up first.
 */
export function selectInputs(
  holdings: readonly Holding[],
  amount: string,
  opts: SelectOptions = {},
): Selection {
  const max = Math.min(opts.maxInputs ?? MAX_INPUTS, MAX_INPUTS);
  if (!Number.isInteger(max) || max < 1)
    throw new Refusal('bad_request', `maxInputs: must be 1 to ${MAX_INPUTS}`);
  const want = toUnits(amount, 'amount');
  if (want <= 0n) throw new Refusal('bad_request', `amount: must be positive, got ${amount}`);
  const target = want + toUnits(opts.feeReserve ?? '0', 'feeReserve');
  const unlocked = holdings.filter((h) => !h.locked);
  const instrument = opts.instrument ?? [...unlocked].sort(byAmountDesc)[0]?.instrument;
  const pool = instrument
    ? unlocked.filter((h) => sameInstrument(h.instrument, instrument)).sort(byAmountDesc)
    : [];
  const available = sumUnits(pool);
  const what = instrument ? instrument.id : 'the instrument';
  if (available < target)
    throw new Refusal(
      'bad_request',
      `insufficient funds: ${pool.length} unlocked ${what} holding(s) hold ${shortAmount(fromUnits(available))}, the transfer needs ${shortAmount(fromUnits(target))}` +
        (target !== want
          ? ` (${shortAmount(amount)} plus a fee reserve of ${shortAmount(fromUnits(target - want))})`
          : ''),
      [],
      { available: fromUnits(available), needed: fromUnits(target) },
    );
  let k = 0;
  let sum = 0n;
  while (sum < target) sum += toUnits(pool[k++]!.amount);
  if (k > max) {
    const best = sumUnits(pool.slice(0, max));
    throw new Refusal(
      'bad_request',
      `the transfer needs ${k} holdings but at most ${max} can be inputs (the ${max} largest hold ${shortAmount(fromUnits(best))} of the ${shortAmount(fromUnits(target))} needed): merge holdings first (canton-signer holdings merge)`,
      [],
      { needed: fromUnits(target), inputsNeeded: String(k), maxInputs: String(max) },
    );
  }
  const chosen = pool.slice(0, k);
  const rest = pool.slice(k).reverse(); // smallest first
  for (let i = chosen.length - 1; i >= 0; i--) {
    const cur = toUnits(chosen[i]!.amount);
    const j = rest.findIndex((h) => {
      const u = toUnits(h.amount);
      return u < cur && sum - cur + u >= target;
    });
    if (j < 0) continue;
    const [swap] = rest.splice(j, 1, chosen[i]!);
    sum = sum - cur + toUnits(swap!.amount);
    chosen[i] = swap!;
    rest.sort((a, b) => -byAmountDesc(a, b));
  }
  return { inputs: chosen, total: fromUnits(sum), target: fromUnits(target) };
}

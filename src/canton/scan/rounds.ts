/**
 * Open mining rounds as Scan (`POST /v0/open-and-issuing-mining-rounds`) and the
 * validator's scan proxy (`GET /v0/scan-proxy/open-and-issuing-mining-rounds`) serve
 * them, reduced to what valuing Amulet holdings needs: each round's number and the
 * time it opens (`Splice.Round:OpenMiningRound` payload `round.number`, `opensAt`).
 *
 * Which round a transfer runs in: Splice's token-standard registry builds the
 * transfer factory's choice context (and so the round the inputs are valued at)
 * from the open round with the highest number whose `opensAt` has passed (Scan's
 * `lookupLatestUsableOpenMiningRound(now)`: newest, middle, oldest, the first with
 * `opensAt < now`). The newest listed round may not be open yet: Splice creates
 * each round a tick before it opens.
 */
import { z } from 'zod';
import { parseInstantMicros } from '../../intent/time.js';
import { withArticle } from '../../text/english.js';
import type {
  GetOpenAndIssuingMiningRoundsProxyResponse,
  GetOpenAndIssuingMiningRoundsResponse,
  SpliceContract,
} from './schemas.js';

export interface OpenRound {
  contractId: string;
  /** The DSO party whose round it is (`dso`). */
  dso: string;
  /** `round.number`. */
  number: number;
  /** `opensAt`, µs since the epoch. */
  opensAtUs: bigint;
}

const OPEN_MINING_ROUND = ':Splice.Round:OpenMiningRound';

/** The part of an `OpenMiningRound` payload (Daml JSON: Int64 as a string) read here. */
const OpenMiningRoundPayloadSchema = z.object({
  dso: z.string().min(1),
  round: z.object({
    number: z.union([
      z.string().regex(/^\d{1,15}$/),
      z.number().int().nonnegative().max(999_999_999_999_999),
    ]),
  }),
  opensAt: z.string(),
});

/** One `OpenMiningRound` contract; throws on another template or a payload off the Daml shape. */
export function openRoundOf(c: SpliceContract): OpenRound {
  if (!c.template_id.endsWith(OPEN_MINING_ROUND))
    throw new Error(
      `open mining rounds: contract ${c.contract_id} is ${withArticle(c.template_id)}, not an OpenMiningRound`,
    );
  const p = OpenMiningRoundPayloadSchema.safeParse(c.payload);
  const opensAtUs = p.success ? parseInstantMicros(p.data.opensAt) : undefined;
  if (!p.success || opensAtUs === undefined)
    throw new Error(`open mining rounds: contract ${c.contract_id} has no round number or opensAt`);
  return { contractId: c.contract_id, dso: p.data.dso, number: Number(p.data.round.number), opensAtUs };
}

/**
 * The open rounds of either answer, lowest number first. Scan's map must carry every
 * contract (the caller passed no cached ids: an entry without one is off-spec here).
 */
export function openRoundsOf(
  r: GetOpenAndIssuingMiningRoundsResponse | GetOpenAndIssuingMiningRoundsProxyResponse,
): OpenRound[] {
  const entries = Array.isArray(r.open_mining_rounds)
    ? r.open_mining_rounds
    : Object.values(r.open_mining_rounds);
  return entries
    .map((e) => {
      if (!e.contract) throw new Error('open mining rounds: an entry without its contract (none was cached)');
      return openRoundOf(e.contract);
    })
    .sort((a, b) => a.number - b.number);
}

/**
 * The round a transfer whose choice context is fetched at `atUs` runs in: the open
 * round with the highest number whose `opensAt` is before `atUs` (Splice's
 * `lookupLatestUsableOpenMiningRound`); undefined when none has opened.
 */
export function usableRound(rounds: readonly OpenRound[], atUs: bigint): OpenRound | undefined {
  let best: OpenRound | undefined;
  for (const r of rounds) if (r.opensAtUs < atUs && (!best || r.number > best.number)) best = r;
  return best;
}

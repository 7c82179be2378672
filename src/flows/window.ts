/**
 * A prepared transaction's execution window: the latest time at which it can
 * still be executed, and why. Bounds come from the metadata (preparation time
 * plus the synchronizer's preparation-time tolerance, the ledger-time bounds
 * plus the ledger-time tolerance, `max_record_time`), from the recognised
 * action (`executeBefore`, `expiresAt`) and from the mining round a token
 * transfer pins (its `targetClosesAt`). The earliest of them wins.
 * `max_record_time` counts only under hashing scheme V3: V2 does not sign it,
 * so the executing participant may change or drop it.
 *
 * `commitDeadlineUs` is a different question: until when could the signed
 * transaction still commit, whatever the participant does? Only bounds the
 * signature covers and the synchronizer enforces answer it — the preparation
 * time and the ledger-time bounds with their tolerances, `max_record_time`
 * under V3 — never contents of input contracts (a mining round's closing
 * time), which the signature does not tie to the contracts that execute.
 */

import type { DecodedTransaction, Value } from '../hashing/model.js';
import { isoMicros } from '../hashing/render.js';
import type { HashingScheme } from '../hashing/transaction-hash.js';
import type { RecognisedAction } from '../intent/model.js';

/** Canton's defaults (synchronizer parameters; owners can change them). */
export const PREPARATION_TIME_TOLERANCE_US = 24n * 3600n * 1_000_000n;
export const LEDGER_TIME_TOLERANCE_US = 60n * 1_000_000n;

export interface WindowBound {
  /** e.g. `preparation-time tolerance`, `max_record_time`, `executeBefore`, `mining round 12`. */
  source: string;
  /** µs since the epoch */
  atUs: bigint;
}

export interface ExecutionWindow {
  /** Not before (µs), when a bound says so (ledger time, a round not yet open). */
  earliestUs?: bigint;
  latestUs: bigint;
  /** The bound that sets `latestUs`. */
  latestSource: string;
  bounds: WindowBound[];
}

export interface WindowOptions {
  preparationTimeToleranceUs?: bigint;
  ledgerTimeToleranceUs?: bigint;
}

function isoToUs(iso: string): bigint | undefined {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return undefined;
  const frac = /\.(\d{1,6})/.exec(iso)?.[1] ?? '';
  const micros = BigInt(frac.padEnd(6, '0').slice(3) || '0');
  return BigInt(ms) * 1000n + micros;
}

function field(v: Value, label: string): Value | undefined {
  return v.kind === 'record' ? v.fields.find((f) => f.label === label)?.value : undefined;
}

/** The bounds of the metadata that the signature covers under `scheme` (see the header). */
function signedBounds(tx: DecodedTransaction, scheme: HashingScheme, opts: WindowOptions): WindowBound[] {
  const m = tx.metadata;
  const bounds: WindowBound[] = [
    {
      source: 'preparation-time tolerance',
      atUs: m.preparationTime + (opts.preparationTimeToleranceUs ?? PREPARATION_TIME_TOLERANCE_US),
    },
  ];
  const ledgerTol = opts.ledgerTimeToleranceUs ?? LEDGER_TIME_TOLERANCE_US;
  if (m.maxLedgerEffectiveTime !== undefined)
    bounds.push({ source: 'max ledger effective time', atUs: m.maxLedgerEffectiveTime + ledgerTol });
  if (m.maxRecordTime !== undefined && scheme === 'v3')
    bounds.push({ source: 'max_record_time', atUs: m.maxRecordTime });
  return bounds;
}

/**
 * The latest record time (µs) at which the signed transaction could still
 * commit, from the bounds its signature covers (see the header): after it,
 * nothing the participant does can commit it.
 */
export function commitDeadlineUs(
  tx: DecodedTransaction,
  scheme: HashingScheme,
  opts: WindowOptions = {},
): bigint {
  let latest: bigint | undefined;
  for (const b of signedBounds(tx, scheme, opts))
    if (latest === undefined || b.atUs < latest) latest = b.atUs;
  return latest as bigint; // the preparation-time bound is always there
}

export function executionWindow(
  tx: DecodedTransaction,
  actions: readonly RecognisedAction[],
  opts: WindowOptions = {},
  scheme: HashingScheme = 'v2',
): ExecutionWindow {
  const m = tx.metadata;
  const bounds = signedBounds(tx, scheme, opts);
  const ledgerTol = opts.ledgerTimeToleranceUs ?? LEDGER_TIME_TOLERANCE_US;
  for (const a of actions)
    for (const [name, iso] of Object.entries(a.deadlines)) {
      if (name === 'requestedAt') continue;
      const at = isoToUs(iso);
      if (at !== undefined) bounds.push({ source: name, atUs: at });
    }
  let earliestUs: bigint | undefined =
    m.minLedgerEffectiveTime !== undefined ? m.minLedgerEffectiveTime - ledgerTol : undefined;
  for (const ic of tx.metadata.inputContracts) {
    const c = ic.contract;
    if (c.templateId.moduleName !== 'Splice.Round' || c.templateId.entityName !== 'OpenMiningRound') continue;
    const closes = field(c.argument, 'targetClosesAt');
    const opens = field(c.argument, 'opensAt');
    const round = field(field(c.argument, 'round') ?? c.argument, 'number');
    const name = `mining round ${round?.kind === 'int64' ? round.value : '?'}`;
    if (closes?.kind === 'timestamp') bounds.push({ source: `${name} closes`, atUs: closes.value });
    if (opens?.kind === 'timestamp' && (earliestUs === undefined || opens.value > earliestUs))
      earliestUs = opens.value;
  }
  let latest = bounds[0]!;
  for (const b of bounds) if (b.atUs < latest.atUs) latest = b;
  return {
    ...(earliestUs !== undefined ? { earliestUs } : {}),
    latestUs: latest.atUs,
    latestSource: latest.source,
    bounds,
  };
}

export function describeWindow(w: ExecutionWindow): {
  earliest?: string;
  latest: string;
  latestSource: string;
} {
  return {
    ...(w.earliestUs !== undefined ? { earliest: isoMicros(w.earliestUs) } : {}),
    latest: isoMicros(w.latestUs),
    latestSource: w.latestSource,
  };
}

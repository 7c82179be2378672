/**
 * Withdrawals of parties whose key is held offline. A run that
 * reaches the signature exports a sealed request and parks the withdrawal in
 * `awaiting_signature` (withdrawal-run.ts). After the response is imported
 * the withdrawal goes back to `prepared` and the next run submits exactly the
 * exported transaction (`exportedTransfer`): the one pipeline checks it again
 * (hash, intent, command id, window) and the offline key's signature is
 * verified against the registered key before execute. An export whose
 * window closes first goes stale and the withdrawal is prepared afresh,
 * which exports a new request (`sweepAirGap`).
 */
import type { OnlineAirGap } from '../offline/online.js';
import type { Store } from '../store/index.js';
import type { ExportRecord } from '../store/repos/air-gap.js';
import type { Withdrawal } from '../store/repos/withdrawals.js';
import type { FlowContext } from './context.js';
import type { LedgerOutcome } from './ledger.js';
import type { FlowResult } from './pipeline.js';
import { signAndExecute } from './sign-execute.js';
import { type ActionOf, lineFor, type WithdrawalEvent } from './withdrawal-lifecycle.js';

/** The parts of an exported request a withdrawal run resubmits. */
interface ExportedPrepared {
  preparedTransaction: string;
  claimedHash: string;
  hashingScheme: 'v2' | 'v3';
  intent: unknown;
}

function exported(x: ExportRecord): ExportedPrepared {
  const req = (x.envelope as unknown as { request: ExportedPrepared }).request;
  return req;
}

/** Whether the export's window leaves at least `marginMs` to submit. */
export function stillOpen(x: ExportRecord, marginMs: number, now = Date.now()): boolean {
  return Date.parse(x.windowLatest) > now + marginMs;
}

/** Submits the exported (and now signed offline) transaction of withdrawal `w` through the pipeline. */
export async function exportedTransfer(
  ctx: FlowContext,
  w: Withdrawal,
  x: ExportRecord,
): Promise<FlowResult<LedgerOutcome>> {
  const req = exported(x);
  return signAndExecute(ctx, {
    partyId: w.party,
    preparedTransaction: req.preparedTransaction,
    claimedHash: req.claimedHash,
    scheme: req.hashingScheme,
    intent: req.intent,
    commandId: w.commandId,
    withdrawalId: w.id,
  });
}

/** What the `imported`, `stale` and `unexported` lines' actions record with the move. */
type ParkedEvent = Extract<WithdrawalEvent, 'imported' | 'stale' | 'unexported'>;
const PARKED: { [A in ActionOf<ParkedEvent>]: (x: ExportRecord | undefined) => Record<string, unknown> } = {
  'resume-imported': (x) => ({ export: x?.id, imported: true }),
  reexport: (x) => (x ? { export: x.id, stale: true } : { reexport: true }),
};

/**
 * Takes the lifecycle's line for parked withdrawal `w` meeting `event`
 * (about export `x`): the move it names, then the worker is told. The moved
 * row, or undefined when the table has no line (the row is not parked).
 */
async function unpark(
  store: Store,
  w: Withdrawal,
  event: ParkedEvent,
  x: ExportRecord | undefined,
  actor: string,
  kick: (id: string) => void,
): Promise<Withdrawal | undefined> {
  const line = lineFor(w.state, event);
  if (!line || line.next === 'same') return undefined;
  const moved = await store.withdrawals.transition(
    w.id,
    [w.state],
    line.next,
    {},
    {
      actor,
      details: PARKED[line.action as ActionOf<ParkedEvent>](x),
    },
  );
  kick(w.id);
  return moved;
}

/** After an import: the withdrawal goes on (`awaiting_signature` → `prepared`) and the worker is told. */
export async function resumeAfterImport(
  store: Store,
  x: ExportRecord,
  actor: string,
  kick: (id: string) => void,
): Promise<Withdrawal | undefined> {
  if (!x.withdrawalId) return undefined;
  const w = await store.withdrawals.get(x.withdrawalId);
  if (!w) return undefined;
  return (await unpark(store, w, 'imported', x, actor, kick)) ?? w;
}

/**
 * The worker's periodic look at parked withdrawals: an export whose window
 * closed goes stale and its withdrawal is prepared again (a new export
 * follows); a withdrawal still parked although its response was imported
 * (the process stopped in between) goes on.
 */
export async function sweepAirGap(
  store: Store,
  airGap: OnlineAirGap | undefined,
  kick: (id: string) => void,
  marginMs: number,
): Promise<void> {
  if (!airGap) return;
  const now = new Date(Date.now() + marginMs).toISOString();
  for (const x of await store.airGap.expiredOpen(now)) {
    await store.airGap.settle(x.id, 'stale', 'worker', {
      reason: 'window closed before the signature came back',
    });
    if (!x.withdrawalId) continue;
    const w = await store.withdrawals.get(x.withdrawalId);
    if (w) await unpark(store, w, 'stale', x, 'worker', kick);
  }
  for (const w of await store.withdrawals
    .list({ state: 'awaiting_signature', limit: 100 })
    .then((p) => p.items)) {
    const x = await store.airGap.currentFor(w.id);
    if (x?.status === 'imported') await resumeAfterImport(store, x, 'worker', kick);
    // Parked without a request in play (its export went stale meanwhile): prepare again.
    else if (!x) await unpark(store, w, 'unexported', undefined, 'worker', kick);
  }
}

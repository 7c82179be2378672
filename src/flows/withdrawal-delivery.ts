/**
 * Where a committed withdrawal's funds are: the delivery table of
 * store/repos/withdrawal-states.ts, driven from the ledger. A commit is read from
 * the committed transaction itself (the update at its completion offset: the
 * `TransferFactory_Transfer` exercise's result — completed: delivered;
 * pending: an offer, with the transfer instruction it created; failed:
 * returned). An offer is followed to its end: while its instruction is in
 * the sender's active contracts it stays `offered`; once it is gone, the
 * sender's updates after the commit are read for the exercise that consumed
 * it (its result and choice say accepted, rejected, withdrawn or expired;
 * a pending result is a new instruction, followed in turn). Also the
 * operator's withdrawal of a pending offer (the sender's choice, signed
 * through the one pipeline by offers.ts), and the tracker that looks at
 * open deliveries after each commit and on a timer.
 */
import type { JsTransaction } from '../canton/ledger-api/schemas.js';
import { NotFoundError, StoreError, WithdrawalStateError } from '../store/errors.js';
import type { Store } from '../store/index.js';
import { DbRecorder } from '../store/repos/recorder.js';
import type { DeliveryPatch, OfferOutcome, Withdrawal } from '../store/repos/withdrawals.js';
import type { FlowContext } from './context.js';
import { findConsumer, scanCompletions } from './ledger.js';
import { FROM_BUILDER, partyUpdateAtRequest } from './ledger-requests.js';
import { listOffers, withdrawOffer } from './offers.js';

export interface DeliveryEnv {
  ctx: FlowContext;
  store: Store;
  logger?: { warn(obj: object, msg: string): void };
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null ? (v as Obj) : {});
const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** The transfer instruction result's output (`TransferInstructionResult_<tag>`), as the JSON API prints it. */
function outputOf(exerciseResult: unknown): { tag?: string; value: Obj } {
  const out = obj(obj(exerciseResult).output);
  const tag = text(out.tag);
  return { ...(tag ? { tag } : {}), value: obj(out.value) };
}

/** What the transaction that committed a withdrawal did with the funds. */
export type CommitResult =
  | { delivery: 'delivered' }
  | { delivery: 'offered'; instructionCid: string; expiresAt?: string }
  | { delivery: 'returned'; outcome: 'failed' };

/** The offset of the withdrawal's commit: its submission record, else the completion stream. */
async function commitOffset(env: DeliveryEnv, w: Withdrawal): Promise<number | undefined> {
  const subs = await env.store.artifacts.submissionsFor(w.commandId);
  const done = subs.find((s) => s.outcome === 'committed' && s.completionOffset !== undefined);
  if (done?.completionOffset !== undefined) return done.completionOffset;
  const from = await env.store.withdrawals.lookupFrom(w.id);
  if (from === undefined) return undefined;
  const scan = await scanCompletions(env.ctx, {
    party: w.party,
    commandId: w.commandId,
    beginExclusive: from,
  });
  return scan.committed?.completionOffset;
}

/**
 * Reads the committed transaction of `w` at `offset` and what its transfer
 * did: the result of its `TransferFactory_Transfer` exercise (a created
 * transfer instruction counts as an offer when the result says nothing).
 * Throws when the update there is not this withdrawal's.
 */
export async function readCommit(ctx: FlowContext, w: Withdrawal, offset: number): Promise<CommitResult> {
  const res = await ctx.ledger.updateByOffset(partyUpdateAtRequest(w.party, offset), FROM_BUILDER);
  const u = res.update;
  const tx = u && 'Transaction' in u ? u.Transaction.value : undefined;
  if (!tx) throw new Error(`the update at offset ${offset} is not a transaction`);
  if ((w.updateId !== undefined && tx.updateId !== w.updateId) || tx.commandId !== w.commandId)
    throw new Error(
      `the transaction at offset ${offset} (update ${tx.updateId}) is not withdrawal ${w.id}'s commit`,
    );
  let created: string | undefined;
  for (const ev of tx.events) {
    if ('ExercisedEvent' in ev && ev.ExercisedEvent.choice === 'TransferFactory_Transfer') {
      const e = ev.ExercisedEvent;
      const { tag, value } = outputOf(e.exerciseResult);
      const expiresAt = text(obj(obj(e.choiceArgument).transfer).executeBefore);
      if (tag === 'TransferInstructionResult_Completed') return { delivery: 'delivered' };
      if (tag === 'TransferInstructionResult_Failed') return { delivery: 'returned', outcome: 'failed' };
      const cid = text(value.transferInstructionCid);
      if (tag === 'TransferInstructionResult_Pending' && cid)
        return { delivery: 'offered', instructionCid: cid, ...(expiresAt ? { expiresAt } : {}) };
    }
    if ('CreatedEvent' in ev && /TransferInstruction$/.test(ev.CreatedEvent.templateId))
      created ??= ev.CreatedEvent.contractId;
  }
  if (created) return { delivery: 'offered', instructionCid: created };
  throw new Error(`the transaction at offset ${offset} has no token-standard transfer result`);
}

/** How the exercise that consumed an offer's instruction ended it. */
type OfferEnd =
  | { outcome: OfferOutcome; updateId: string; offset: number }
  | { next: string; offset: number }
  | { unclear: string; offset: number };

function endOf(tx: JsTransaction, choice: string, exerciseResult: unknown, expiresAt?: string): OfferEnd {
  const { tag, value } = outputOf(exerciseResult);
  const at = { updateId: tx.updateId, offset: tx.offset };
  if (tag === 'TransferInstructionResult_Completed') return { outcome: 'accepted', ...at };
  const next = text(value.transferInstructionCid);
  if (tag === 'TransferInstructionResult_Pending' && next) return { next, offset: tx.offset };
  const pastDeadline = expiresAt !== undefined && Date.parse(tx.recordTime) >= Date.parse(expiresAt);
  if (tag === 'TransferInstructionResult_Failed') {
    if (/_Reject$/.test(choice)) return { outcome: 'rejected', ...at };
    if (/_Withdraw$/.test(choice)) return { outcome: 'withdrawn', ...at };
    return { outcome: pastDeadline ? 'expired' : 'failed', ...at };
  }
  // Archived without a token-standard result (the registry's expiry automation): past its deadline only.
  if (pastDeadline) return { outcome: 'expired', ...at };
  return { unclear: `consumed by ${choice} in update ${tx.updateId} before its deadline`, offset: tx.offset };
}

/** The exercise that consumed instruction `cid`, read from the sender's updates after `from` (ledger.ts `findConsumer`). */
async function findEnd(
  ctx: FlowContext,
  party: string,
  cid: string,
  expiresAt: string | undefined,
  from: number,
  end: number,
): Promise<OfferEnd | { readTo: number }> {
  const found = await findConsumer(ctx, { party, from, end, wanted: (c) => c === cid });
  if ('readTo' in found) return found;
  return endOf(found.tx, found.exercise.choice, found.exercise.exerciseResult, expiresAt);
}

/**
 * One look at the delivery of committed withdrawal `w`: `pending` is read
 * from its commit; `offered` is followed (`activeCids`: the sender's active
 * transfer instructions, when the caller already read them). Returns the
 * withdrawal as it is afterwards; throws when the ledger could not be read
 * (the next look tries again).
 */
export async function checkDelivery(
  env: DeliveryEnv,
  w0: Withdrawal,
  activeCids?: ReadonlySet<string>,
): Promise<Withdrawal> {
  const store = env.store.withdrawals;
  // Another instance (or the operator) moved it first: what it is now.
  const repo = {
    deliver: (...a: Parameters<typeof store.deliver>) =>
      store.deliver(...a).catch(async (e: unknown) => {
        const now = e instanceof WithdrawalStateError ? await store.get(a[0]) : undefined;
        if (!now) throw e;
        return now;
      }),
    deliveryFrom: (id: string) => store.deliveryFrom(id),
    setDeliveryFrom: (id: string, offset: number) => store.setDeliveryFrom(id, offset),
  };
  let w = w0;
  if (w.delivery === 'pending') {
    const offset = await commitOffset(env, w);
    if (offset === undefined) throw new Error(`the commit of withdrawal ${w.id} was not found on the ledger`);
    const r = await readCommit(env.ctx, w, offset);
    const patch: DeliveryPatch =
      r.delivery === 'offered'
        ? {
            offerCid: r.instructionCid,
            ...(r.expiresAt ? { offerExpiresAt: r.expiresAt } : {}),
            scannedTo: offset,
          }
        : r.delivery === 'returned'
          ? { outcome: r.outcome }
          : {};
    w = await repo.deliver(w.id, ['pending'], r.delivery, patch, {
      actor: 'worker',
      details: { commitOffset: offset },
    });
  }
  if (w.delivery !== 'offered' || !w.offer) return w;
  const active = activeCids ?? new Set((await listOffers(env.ctx, w.party)).map((o) => o.instructionCid));
  if (active.has(w.offer.instructionCid)) return w;
  // The instruction is gone: find what ended it, following any instruction an answer created.
  const end = (await env.ctx.ledger.ledgerEnd()).offset;
  let from = (await repo.deliveryFrom(w.id)) ?? 0;
  let cid = w.offer.instructionCid;
  const expiresAt = w.offer.expiresAt;
  for (;;) {
    const found = await findEnd(env.ctx, w.party, cid, expiresAt, from, end);
    if ('readTo' in found) {
      if (found.readTo >= end)
        env.logger?.warn(
          { withdrawal: w.id, instruction: cid },
          'the transfer offer is no longer active but nothing that ended it was found among the sender’s updates',
        );
      await repo.setDeliveryFrom(w.id, found.readTo);
      return w;
    }
    if ('unclear' in found) {
      env.logger?.warn(
        { withdrawal: w.id, instruction: cid, why: found.unclear },
        'transfer offer end unclear',
      );
      await repo.setDeliveryFrom(w.id, found.offset - 1);
      return w;
    }
    if ('next' in found) {
      cid = found.next;
      from = found.offset;
      w = await repo.deliver(
        w.id,
        ['offered'],
        'offered',
        { offerCid: cid, scannedTo: from },
        { actor: 'worker' },
      );
      if (w.delivery !== 'offered' || w.offer?.instructionCid !== cid || active.has(cid)) return w;
      continue;
    }
    return repo.deliver(
      w.id,
      ['offered'],
      found.outcome === 'accepted' ? 'delivered' : 'returned',
      { outcome: found.outcome, updateId: found.updateId, scannedTo: found.offset },
      { actor: 'worker' },
    );
  }
}

/** The command id of the operator's withdrawal of a withdrawal's offer (one per instruction: the ledger deduplicates). */
export function offerWithdrawCommandId(w: Withdrawal, cid: string): string {
  return `cs-offer-withdraw-${w.id}-${cid.slice(2, 18)}`;
}

/**
 * The operator takes back the pending offer of withdrawal `id`: the sender
 * exercises TransferInstruction_Withdraw, signed through the pipeline. The
 * offer is looked at first (it may have been answered meanwhile: then
 * WithdrawalStateError naming the delivery it reached). Returns the
 * withdrawal, `returned` with outcome `withdrawn`.
 */
export async function withdrawPendingOffer(
  env: DeliveryEnv,
  id: string,
  actor: string,
): Promise<{ withdrawal: Withdrawal; commandId: string; hash: string }> {
  const repo = env.store.withdrawals;
  const w0 = await repo.get(id);
  if (!w0) throw new NotFoundError(`withdrawal ${id}`);
  const notOffered = (w: Withdrawal) =>
    new StoreError(
      'invalid_state',
      `withdrawal ${id} has no pending offer to withdraw: it is ${w.state}${w.delivery ? `, delivery ${w.delivery}` : ''}${w.offer?.outcome ? ` (offer ${w.offer.outcome})` : ''}`,
    );
  if (w0.delivery !== 'offered' && w0.delivery !== 'pending') throw notOffered(w0);
  const w = await checkDelivery(env, w0);
  if (w.delivery !== 'offered' || !w.offer) throw notOffered(w);
  const cid = w.offer.instructionCid;
  const commandId = offerWithdrawCommandId(w, cid);
  const recorder = env.ctx.recorder;
  const ctx: FlowContext = {
    ...env.ctx,
    ...(recorder instanceof DbRecorder
      ? { recorder: recorder.with({ actor, subject: `withdrawal:${id}` }) }
      : {}),
  };
  let done: Awaited<ReturnType<typeof withdrawOffer>>;
  try {
    done = await withdrawOffer(ctx, w.party, cid, { commandId });
  } catch (e) {
    // Answered or expired meanwhile: say what it became.
    const now = await repo.get(id);
    const after = now ? await checkDelivery(env, now).catch(() => now) : undefined;
    if (after && after.delivery !== 'offered') throw notOffered(after);
    throw e;
  }
  const withdrawal = await repo
    .deliver(
      id,
      ['offered'],
      'returned',
      { outcome: 'withdrawn', updateId: done.updateId },
      { actor, details: { commandId, hash: done.hash } },
    )
    .catch(async (e: unknown) => {
      // The tracker saw the withdrawal on the ledger first: it says the same.
      const now = e instanceof WithdrawalStateError ? await repo.get(id) : undefined;
      if (now?.delivery === 'returned') return now;
      throw e;
    });
  return { withdrawal, commandId, hash: done.hash };
}

export interface DeliveryTracker {
  /** Look at this withdrawal's delivery soon (it just committed). Never throws. */
  kick(id: string): void;
  start(): void;
  /** Stops the timer and waits for the look in progress. */
  stop(): Promise<void>;
  /** One pass over every open delivery (tests, and the timer). */
  sweep(): Promise<void>;
}

/**
 * Looks at open deliveries: a kicked withdrawal at once, all of them every
 * `pollMs` (one read of active instructions per sending party per pass).
 */
export function createDeliveryTracker(env: DeliveryEnv & { pollMs?: number }): DeliveryTracker {
  const pollMs = env.pollMs ?? 5000;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const warn = (obj: object, msg: string) => env.logger?.warn(obj, msg);

  const one = async (id: string) => {
    const w = await env.store.withdrawals.get(id);
    if (w && (w.delivery === 'pending' || w.delivery === 'offered')) await checkDelivery(env, w);
  };
  async function sweep(): Promise<void> {
    const open = await env.store.withdrawals.openDeliveries();
    const byParty = new Map<string, Withdrawal[]>();
    for (const w of open) byParty.set(w.party, [...(byParty.get(w.party) ?? []), w]);
    for (const [party, ws] of byParty) {
      try {
        const active = new Set((await listOffers(env.ctx, party)).map((o) => o.instructionCid));
        for (const w of ws)
          await checkDelivery(env, w, active).catch((e: unknown) =>
            warn({ withdrawal: w.id, err: String(e) }, 'looking at a withdrawal’s delivery failed'),
          );
      } catch (e) {
        warn({ party, err: String(e) }, 'reading a party’s transfer offers failed');
      }
    }
  }
  // One look at a time: kicks and sweeps queue behind each other.
  const queued = (f: () => Promise<void>) => {
    running = running.then(f, f).catch((e: unknown) => warn({ err: String(e) }, 'delivery tracking failed'));
    return running;
  };
  return {
    kick(id) {
      if (stopped) return;
      void queued(() => one(id));
    },
    start() {
      stopped = false;
      if (timer) return;
      void queued(sweep);
      timer = setInterval(() => void queued(sweep), pollMs);
      timer.unref();
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      timer = undefined;
      await running;
    },
    sweep: () => queued(sweep),
  };
}

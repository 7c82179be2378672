/**
 * The withdrawal worker: carries accepted withdrawals to a definite outcome
 * (one run of one withdrawal is withdrawal-run.ts). It takes work from kicks
 * and from polling the store for unfinished withdrawals, claims each one with
 * a lease in the database before touching it (several service instances may
 * share one PostgreSQL: two never carry one withdrawal at once; a lease held
 * by a crashed instance expires), renews the lease while working and
 * releases it after (a final withdrawal's lease is left to lapse), runs at
 * most `concurrency` withdrawals at once and one at a time per sending party
 * (they would spend the same holdings), and retries errors before submission
 * with backoff (jittered, capped) up to a limit, then `failed`. A Canton
 * service that does not answer (connection refused or reset, timeout, 429,
 * 502, 503, 504) is not the withdrawal's error: one not yet submitted waits for
 * it, without counting it, until its own `executeBefore` (then `expired`)
 * or, without one, until the network has been away `networkWaitMs` (then
 * `failed`, saying so). On start it resumes every
 * unfinished withdrawal from its recorded state. `stop()` takes no new work
 * and waits for the runs in progress. A committed withdrawal is handed to the
 * delivery tracker (withdrawal-delivery.ts), which reads where the funds went.
 * Withdrawals awaiting approval are not run: each poll follows their approval
 * requests (withdrawal-approval.ts), and one that ends uncommitted gives back
 * what it reserved against the policy's limits.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { isUnavailable } from '../canton/errors.js';
import type { OnlineAirGap } from '../offline/online.js';
import type { Store } from '../store/index.js';
import type { Withdrawal } from '../store/repos/withdrawals.js';
import type { FlowContext } from './context.js';
import { settlePolicy } from './pipeline.js';
import { sweepAirGap } from './withdrawal-air-gap.js';
import { sweepApprovals } from './withdrawal-approval.js';
import { lineFor } from './withdrawal-lifecycle.js';
import {
  deadlineOf,
  errorText,
  isTerminal,
  type RunOutcome,
  runWithdrawal,
  type WithdrawalPoint,
  withdrawalSubject,
} from './withdrawal-run.js';

export type { WithdrawalPoint } from './withdrawal-run.js';

/** The background worker that carries accepted withdrawals to a definite outcome. */
export interface WithdrawalWorker {
  /**
   * A withdrawal was recorded (or changed): look at it soon. `party`, its
   * sending party, when known: lets the worker start another party's
   * withdrawal first while one of this party is running. Never throws.
   */
  kick(id: string, party?: string): void;
  /** Resumes every unfinished withdrawal and starts polling. */
  start(): Promise<void>;
  /** Stops taking work and waits for the withdrawal steps in progress to finish. */
  stop(): Promise<void>;
}

export interface WithdrawalWorkerOptions {
  ctx: FlowContext;
  store: Store;
  /** The online side of the air gap: withdrawals of parties whose key is held offline. */
  airGap?: OnlineAirGap;
  /** Called with each flow's latency and outcome (metrics). */
  observe?: (flow: string, outcome: string, seconds: number) => void;
  /** How often unfinished withdrawals are looked at without a kick (default 2 s). */
  pollMs?: number;
  /** Withdrawals carried at once (default 8). */
  concurrency?: number;
  /** Lease length; renewed every third of it while a withdrawal is carried (default 30 s). */
  leaseMs?: number;
  /** This worker's name in the lease column (default host:pid:random). */
  owner?: string;
  /** Errors before submission tolerated before a withdrawal is `failed` (default 5). */
  maxErrors?: number;
  /** First retry delay after an error; doubled each time up to 30 s, jittered (default 500 ms). */
  retryMs?: number;
  /**
   * How long a withdrawal without `executeBefore`, nothing of it submitted,
   * waits for Canton services that do not answer before it is `failed`
   * (default 1 h); one with `executeBefore` waits until then.
   */
  networkWaitMs?: number;
  /** Where problems are reported (a pino logger fits). */
  logger?: { warn(obj: object, msg: string): void };
  /** Test-only: called after each durable step (crash tests kill the process there). */
  at?: (point: WithdrawalPoint, w: Withdrawal) => void | Promise<void>;
  /** Refuse, before signing, a withdrawal that would only be an offer (config withdrawals.requireDelivery). */
  requireDelivery?: boolean;
  /** Told of each withdrawal that committed: it reads where the funds went (withdrawal-delivery.ts). */
  delivery?: { kick(id: string): void };
  /** Expires approval requests past their expiry (the policy engine), before each look at those waiting. */
  approvals?: { sweep(): Promise<unknown> };
}

export function createWithdrawalWorker(opts: WithdrawalWorkerOptions): WithdrawalWorker {
  const { store } = opts;
  const repo = store.withdrawals;
  const pollMs = opts.pollMs ?? 2000;
  const concurrency = Math.max(1, opts.concurrency ?? 8);
  const leaseMs = opts.leaseMs ?? 30_000;
  const owner = opts.owner ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const maxErrors = opts.maxErrors ?? 5;
  const retryMs = opts.retryMs ?? 500;
  const networkWaitMs = opts.networkWaitMs ?? 3_600_000;
  const env = {
    ctx: opts.ctx,
    store,
    ...(opts.airGap ? { airGap: opts.airGap } : {}),
    ...(opts.at ? { at: opts.at } : {}),
    ...(opts.requireDelivery ? { requireDelivery: true } : {}),
    owner,
  };

  /** Withdrawals to look at, with their sending party where known. */
  const queue = new Map<string, string | undefined>();
  const active = new Map<string, Promise<void>>();
  /** Sending parties with a withdrawal being carried, and how many. */
  const busy = new Map<string, number>();
  const notBefore = new Map<string, number>();
  /** Errors that count towards `maxErrors` (those before submission, the network's excepted). */
  const errors = new Map<string, number>();
  /** Runs that ended "again later", in a row: the backoff. */
  const tries = new Map<string, number>();
  /** When each withdrawal waiting for the network first found it away (this run of the worker). */
  const downSince = new Map<string, number>();
  const partyTails = new Map<string, Promise<void>>();
  /** Withdrawals that became final since the poll in progress started (its answer may predate that). */
  const finishedDuringPoll = new Set<string>();
  let running = false;
  let timer: NodeJS.Timeout | undefined;
  let polling: Promise<void> | undefined;

  const warn = (obj: object, msg: string) => opts.logger?.warn(obj, msg);

  /** Runs `f` after every earlier run for the same party finished (`f` learns whether it waited). */
  async function serialised<T>(party: string, f: (waited: boolean) => Promise<T>): Promise<T> {
    const earlier = partyTails.get(party);
    const prev = earlier ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const tail = prev.then(() => mine);
    partyTails.set(party, tail);
    await prev;
    try {
      return await f(earlier !== undefined);
    } finally {
      release();
      if (partyTails.get(party) === tail) partyTails.delete(party);
    }
  }

  /** Forgets a withdrawal's retry bookkeeping (it finished, or gave up). */
  function forget(id: string): void {
    errors.delete(id);
    tries.delete(id);
    downSince.delete(id);
    notBefore.delete(id);
  }

  /**
   * Looks at the withdrawal again after a backoff: doubled per try up to
   * 30 s, half of it jittered (many withdrawals waiting for one network do
   * not all come back at once), and no later than a `deadline` still ahead
   * (its own executeBefore: the run then ends it).
   */
  function later(
    id: string,
    party: string,
    outcome: Extract<RunOutcome, { done: false }>,
    o: { counted: boolean; deadline?: number | undefined },
  ): void {
    const n = (tries.get(id) ?? 0) + 1;
    tries.set(id, n);
    if (o.counted) errors.set(id, (errors.get(id) ?? 0) + 1);
    const backoff = Math.min(30_000, retryMs * 2 ** (n - 1));
    let at = Date.now() + backoff / 2 + Math.random() * (backoff / 2);
    if (o.deadline !== undefined && o.deadline >= Date.now()) at = Math.min(at, o.deadline + 1);
    notBefore.set(id, at);
    queue.set(id, party);
    // The reason as the withdrawal shows it; the log also gets the error's own text.
    const err = outcome.error instanceof Error ? outcome.error.message : undefined;
    warn(
      { withdrawal: id, attempt: n, reason: outcome.reason, ...(err ? { err } : {}) },
      'withdrawal will be retried',
    );
  }

  /** Gives back what withdrawal `id` reserved against the policy's limits (it ended uncommitted). */
  async function release(id: string): Promise<void> {
    await settlePolicy(opts.ctx, withdrawalSubject(id), 'released');
  }

  function mark(party: string, by: 1 | -1): void {
    const n = (busy.get(party) ?? 0) + by;
    if (n > 0) busy.set(party, n);
    else busy.delete(party);
  }

  /** Carries one withdrawal; `party`, its sending party when known, counts as busy from the start. */
  async function carry(id: string, party: string | undefined): Promise<void> {
    const marked: string[] = [];
    const busyWith = (p: string) => {
      mark(p, 1);
      marked.push(p);
    };
    // Before the first await: the rest of the pump that started it already sees the party busy.
    if (party !== undefined) busyWith(party);
    try {
      await carryClaimed(id, (p) => {
        if (!marked.includes(p)) busyWith(p);
      });
    } finally {
      for (const p of marked) mark(p, -1);
    }
  }

  async function carryClaimed(id: string, claimedFor: (party: string) => void): Promise<void> {
    const claimed = await repo.claim(id, owner, leaseMs);
    if (!claimed) return;
    claimedFor(claimed.party);
    const heartbeat = setInterval(() => {
      repo.renewLease(id, owner, leaseMs).then(
        (ok) => ok || warn({ withdrawal: id }, 'withdrawal lease lost'),
        (e) => warn({ withdrawal: id, err: String(e) }, 'withdrawal lease renewal failed'),
      );
    }, leaseMs / 3);
    heartbeat.unref();
    // Set once the withdrawal is final: its lease is then left to lapse (nothing claims a final row).
    let final = false;
    try {
      await serialised(claimed.party, async (waited) => {
        if (!running) return;
        // The row as claimed, unless an earlier run for the party went first (then read it again).
        const w = waited ? await repo.get(id) : claimed;
        if (!w || isTerminal(w.state)) {
          final = true;
          return;
        }
        const t0 = performance.now();
        let outcome: RunOutcome;
        try {
          outcome = await runWithdrawal(env, w);
        } catch (e) {
          outcome = { done: false, reason: errorText(e), error: e, transient: true };
        }
        const seconds = (performance.now() - t0) / 1000;
        if (outcome.done) {
          // Parked for an offline signature: not final; the lease is released for whoever resumes it.
          final = isTerminal(outcome.state);
          forget(id);
          // Ended without committing: what it reserved against the limits is given back.
          if (final && outcome.state !== 'committed') await release(id);
          opts.observe?.('withdrawal', outcome.state, seconds);
          if (outcome.state === 'committed') opts.delivery?.kick(id);
          return;
        }
        opts.observe?.('withdrawal', 'retry', seconds);
        const now = await repo.get(id);
        // Nothing of it was sent: the states the lifecycle lets the worker give up in.
        const quit = now !== undefined ? lineFor(now.state, 'give-up') : undefined;
        const unsent = quit !== undefined;
        const deadline = now && deadlineOf(now);
        let giveUp: string | undefined;
        if (unsent && isUnavailable(outcome.error)) {
          // The network is away, not the withdrawal's fault: it waits until its deadline (the run
          // then expires it) or, without one, until the network has been away too long.
          const since = downSince.get(id) ?? Date.now();
          downSince.set(id, since);
          const away = Date.now() - since;
          if (deadline === undefined && away >= networkWaitMs)
            giveUp = `the Canton network did not answer for ${Math.round(away / 1000)} s (the limit: ${Math.round(networkWaitMs / 1000)} s) before anything was submitted; nothing was sent. Last error: ${outcome.reason}`;
        } else {
          downSince.delete(id);
          // Too many errors before anything was submitted: give up (after submission, never: look again).
          if (unsent && (errors.get(id) ?? 0) + 1 >= maxErrors) giveUp = outcome.reason;
        }
        if (now && quit && quit.next !== 'same' && giveUp !== undefined) {
          const from = now.state;
          await repo
            .transition(
              id,
              [from],
              quit.next,
              { lastError: giveUp.slice(0, 2000) },
              { actor: 'worker', owner },
            )
            .then(
              async () => {
                final = true;
                await release(id);
                opts.observe?.('withdrawal', 'failed', 0);
              },
              (e) => warn({ withdrawal: id, err: String(e) }, 'could not mark the withdrawal failed'),
            );
          forget(id);
          return;
        }
        later(id, claimed.party, outcome, { counted: !downSince.has(id), deadline });
      });
    } finally {
      clearInterval(heartbeat);
      if (final) finishedDuringPoll.add(id);
      else await repo.releaseLease(id, owner).catch(() => {});
    }
  }

  /**
   * Starts queued withdrawals up to `concurrency`, those of a sending party
   * with none running first: one of a busy party would only wait for it
   * (one at a time per party) and hold a slot meanwhile.
   */
  function pump(): void {
    if (!running) return;
    const now = Date.now();
    for (const pass of ['idle parties', 'any'] as const)
      for (const [id, party] of queue) {
        if (active.size >= concurrency) return;
        if (active.has(id) || (notBefore.get(id) ?? 0) > now) continue;
        if (pass === 'idle parties' && party !== undefined && busy.has(party)) continue;
        queue.delete(id);
        const p = carry(id, party)
          .catch((e) => warn({ withdrawal: id, err: String(e) }, 'withdrawal run failed'))
          .finally(() => {
            active.delete(id);
            pump();
          });
        active.set(id, p);
      }
  }

  async function poll(): Promise<void> {
    if (!running || polling) return polling;
    polling = (async () => {
      finishedDuringPoll.clear();
      try {
        // Not the ones in hand (our own leases are claimable) nor those finished meanwhile: the
        // next claim of either would only fail.
        for (const { id, party } of await repo.claimable(owner, Math.max(100, concurrency * 4)))
          if (!active.has(id) && !finishedDuringPoll.has(id)) queue.set(id, party);
      } catch (e) {
        warn({ err: String(e) }, 'polling unfinished withdrawals failed');
      }
      try {
        await sweepAirGap(store, opts.airGap, (id) => queue.set(id, queue.get(id)), 0);
      } catch (e) {
        warn({ err: String(e) }, 'looking at withdrawals awaiting an offline signature failed');
      }
      try {
        await opts.approvals?.sweep();
        await sweepApprovals({
          store,
          kick: (id, party) => queue.set(id, party),
          release: (subject) => settlePolicy(opts.ctx, subject, 'released'),
          actor: 'worker',
        });
      } catch (e) {
        warn({ err: String(e) }, 'looking at withdrawals awaiting approval failed');
      }
      pump();
    })().finally(() => {
      polling = undefined;
    });
    return polling;
  }

  return {
    kick(id, party) {
      if (!running) return;
      queue.set(id, party ?? queue.get(id));
      pump();
    },
    async start() {
      if (running) return;
      running = true;
      await poll();
      timer = setInterval(() => void poll(), pollMs);
      timer.unref();
    },
    async stop() {
      running = false;
      if (timer) clearInterval(timer);
      timer = undefined;
      await polling;
      while (active.size > 0) await Promise.allSettled([...active.values()]);
    },
  };
}

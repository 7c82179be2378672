/**
 * The automation runner: one instance at a time (the `automation` lease)
 * runs the exchange's automatic tasks (auto-accept of offers, sweeps) after
 * each ingestion page and every `pollMs`. Passes never overlap; a trigger
 * during a pass runs one more pass after it. A task writes only inside
 * transactions that first call `holdLease(tx, lease)`.
 */

import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Store } from '../store/index.js';
import type { Lease } from '../store/repos/leases.js';

export const AUTOMATION_LEASE = 'automation';

export interface AutomationTask {
  name: string;
  run(lease: Lease): Promise<void>;
}

export interface AutomationLogger {
  info(o: object, msg: string): void;
  warn(o: object, msg: string): void;
}

export interface AutomationOptions {
  store: Store;
  tasks: readonly AutomationTask[];
  /** Ingestion's page notifications (`Ingestion.subscribe`); absent: the poll alone. */
  subscribe?: (fn: () => void) => () => void;
  pollMs?: number;
  leaseMs?: number;
  owner?: string;
  logger?: AutomationLogger;
}

export interface Automation {
  start(): void;
  stop(): Promise<void>;
  /** Runs one pass now (after the one in progress); false when another instance holds the lease. */
  runNow(): Promise<boolean>;
  kick(): void;
}

export function createAutomation(opts: AutomationOptions): Automation {
  const pollMs = opts.pollMs ?? 2000;
  const leaseMs = opts.leaseMs ?? 30_000;
  const owner = opts.owner ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = opts.logger;
  let timer: NodeJS.Timeout | undefined;
  let unsubscribe: (() => void) | undefined;
  let chain: Promise<boolean> = Promise.resolve(true);
  let queued: Promise<boolean> | undefined;
  let stopped = true;
  let held = false;
  let stopping = false;

  async function pass(): Promise<boolean> {
    const lease = await opts.store.leases.acquire(AUTOMATION_LEASE, owner, leaseMs);
    if (!lease) {
      if (held) log?.warn({ owner }, 'automation lease lost: another instance runs the automation');
      held = false;
      return false;
    }
    if (!held) log?.info({ owner, fence: lease.fence }, 'automation lease taken: this instance runs it');
    held = true;
    for (const t of opts.tasks) {
      if (stopping) break;
      try {
        await t.run(lease);
      } catch (e) {
        log?.warn(
          { task: t.name, err: e instanceof Error ? e.message : String(e) },
          'automation task failed',
        );
      }
    }
    return true;
  }

  function schedule(): Promise<boolean> {
    // One pass queued behind the running one is enough: later triggers join it.
    if (queued) return queued;
    const next = chain.then(() => {
      queued = undefined;
      return pass();
    });
    queued = next;
    chain = next.catch((e: unknown) => {
      log?.warn({ err: e instanceof Error ? e.message : String(e) }, 'automation pass failed');
      return false;
    });
    return chain;
  }

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      stopping = false;
      unsubscribe = opts.subscribe?.(() => void schedule());
      const tick = () => {
        timer = setTimeout(() => {
          void schedule().finally(() => {
            if (!stopped) tick();
          });
        }, pollMs);
      };
      tick();
      void schedule();
    },
    async stop() {
      stopped = true;
      stopping = true;
      clearTimeout(timer);
      timer = undefined;
      unsubscribe?.();
      unsubscribe = undefined;
      await chain;
      if (held) {
        const lease = await opts.store.leases.holder(AUTOMATION_LEASE);
        if (lease?.owner === owner) await opts.store.leases.release(lease);
        held = false;
      }
    },
    async runNow() {
      return schedule();
    },
    kick() {
      if (!stopped) void schedule();
    },
  };
}

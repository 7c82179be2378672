/**
 * Withdrawals carried to a definite outcome. (Being written: see issue 6 §5.)
 */

import type { Store } from '../store/index.js';
import type { FlowContext } from './context.js';

/** The background worker that carries accepted withdrawals to a definite outcome. */
export interface WithdrawalWorker {
  /** A withdrawal was recorded (or changed): look at it soon. Never throws. */
  kick(id: string): void;
  /** Resumes every unfinished withdrawal and starts polling. */
  start(): Promise<void>;
  /** Stops taking work and waits for the withdrawal steps in progress to finish. */
  stop(): Promise<void>;
}

export interface WithdrawalWorkerOptions {
  ctx: FlowContext;
  store: Store;
  /** Called with each flow's latency and outcome (metrics). */
  observe?: (flow: string, outcome: string, seconds: number) => void;
  /** How often unfinished withdrawals are looked at without a kick (default 2 s). */
  pollMs?: number;
  /** Withdrawals carried at once (default 8). */
  concurrency?: number;
}

export function createWithdrawalWorker(_opts: WithdrawalWorkerOptions): WithdrawalWorker {
  return { kick() {}, async start() {}, async stop() {} };
}

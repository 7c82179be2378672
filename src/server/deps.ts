/**
 * What the service's routes and its withdrawal worker are given: the
 * configuration, the store, the flow context (clients, signer, policy,
 * recorder and party book on the store), the metrics and the worker. One
 * object, built once by service.ts; routes never open anything themselves.
 */
import type { WebhookDeliverer } from '../events/webhooks.js';
import type { AutoAccept } from '../exchange/auto-accept.js';
import type { Automation } from '../exchange/automation.js';
import type { IngestionAccess } from '../exchange/ingest-control.js';
import type { Sweeps } from '../exchange/sweeps.js';
import type { FlowContext } from '../flows/context.js';
import type { NameKeeper } from '../flows/names-keeper.js';
import type { WithdrawalWorker } from '../flows/withdrawal.js';
import type { Signer } from '../keys/signer.js';
import type { OnlineAirGap } from '../offline/online.js';
import type { PolicyEngine } from '../policy/engine.js';
import type { Store } from '../store/index.js';
import type { ServiceConfig } from './config.js';
import type { ServiceMetrics } from './metrics.js';

export interface ServiceDeps {
  config: ServiceConfig;
  /**
   * The origin people reach the service at: `console.publicUrl`, else http://localhost:<port
   * listened on>. Passkeys are bound to it.
   */
  publicOrigin(): string;
  store: Store;
  /** Parties and recorder are the store's (DbPartyBook, DbRecorder). */
  flows: FlowContext;
  /** The policy in force, its decisions, approvals and versions (flows.policy is this). */
  policy: PolicyEngine;
  signer: Signer;
  metrics: ServiceMetrics;
  worker: WithdrawalWorker;
  /** The ledger ingestion's cursor and stored history (absent: ingestion is not set up). */
  ingestion?: IngestionAccess;
  /** Auto-accept of offers and sweeps, run by one instance under the `automation` lease. */
  automation: { runner: Automation; autoAccept: AutoAccept; sweeps: Sweeps };
  /** Names of the book's parties: registration and the keeper that renews them. */
  names: NameKeeper;
  /** Exports for and imports from offline keys. */
  airGap: OnlineAirGap;
  /** The webhook deliverer (kicked after a redeliver), when receivers are configured and workers run. */
  webhooks?: WebhookDeliverer;
  /**
   * True once the store, the keys and the network answered; readiness reports it. A failing
   * check has a fixed `code` only: its detail is logged, never answered.
   */
  ready(): Promise<{ ok: boolean; checks: Record<string, { ok: boolean; code?: string }> }>;
}

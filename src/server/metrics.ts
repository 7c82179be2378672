/**
 * The service's Prometheus metrics (prom-client), in one registry per
 * service instance so that tests and several apps in one process do not
 * share counters. Names are prefixed `canton_signer_`. What is counted:
 * HTTP requests by method, route pattern and status, with their latency;
 * signatures by backend and scheme; refusals by reason; flow latencies by
 * flow and outcome; key backend (HSM) errors by code; withdrawals by state,
 * the age of the oldest pending withdrawal per state and committed
 * withdrawals by delivery and approval requests pending (all read from the
 * store when scraped); policy decisions by outcome and rule; webhook
 * delivery attempts by receiver and outcome, dead deliveries and the age of
 * the oldest pending delivery per receiver (read from the store). Labels
 * never carry ids, parties or anything unbounded (receiver names come from
 * the configuration).
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'canton_signer_http_requests_total',
    help: 'HTTP requests by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'canton_signer_http_request_duration_seconds',
    help: 'HTTP request latency by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly signatures = new Counter({
    name: 'canton_signer_signatures_total',
    help: 'Signatures produced, by key backend and scheme',
    labelNames: ['backend', 'scheme'] as const,
    registers: [this.registry],
  });
  readonly refusals = new Counter({
    name: 'canton_signer_refusals_total',
    help: 'Refusals of the signing pipeline, by reason',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly flowDuration = new Histogram({
    name: 'canton_signer_flow_duration_seconds',
    help: 'Latency of flows (prepare to definite outcome), by flow and outcome',
    labelNames: ['flow', 'outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly nameEvents = new Counter({
    name: 'canton_signer_name_events_total',
    help: 'Name-service registrations: payments made, renewals that failed and warnings sent',
    labelNames: ['what'] as const,
    registers: [this.registry],
  });
  readonly keyErrors = new Counter({
    name: 'canton_signer_key_backend_errors_total',
    help: 'Errors of the key backends (HSM and file keystore), by backend and error code',
    labelNames: ['backend', 'code'] as const,
    registers: [this.registry],
  });
  readonly policyDecisions = new Counter({
    name: 'canton_signer_policy_decisions_total',
    help: 'Decisions of the policy, by outcome (allow, deny, approve) and rule id',
    labelNames: ['outcome', 'rule'] as const,
    registers: [this.registry],
  });
  readonly webhookAttempts = new Counter({
    name: 'canton_signer_webhook_deliveries_total',
    help: 'Webhook delivery attempts by receiver and outcome (delivered, failed: retried later, dead: given up)',
    labelNames: ['receiver', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly webhookDead: Gauge<'receiver'>;
  readonly webhookOldestPending: Gauge<'receiver'>;
  readonly approvalsPending: Gauge;
  readonly withdrawals: Gauge<'state'>;
  readonly oldestPending: Gauge<'state'>;
  readonly deliveries: Gauge<'delivery'>;

  constructor(
    opts: {
      withdrawalsByState?: () => Promise<Record<string, number>>;
      oldestPendingAges?: () => Promise<Record<string, number>>;
      withdrawalsByDelivery?: () => Promise<Record<string, number>>;
      approvalsPending?: () => Promise<number>;
      /** Per webhook receiver: dead deliveries and seconds since the oldest pending one became pending. */
      webhookStatus?: () => Promise<{ name: string; dead: number; oldestPendingSeconds: number }[]>;
      defaults?: boolean;
    } = {},
  ) {
    const pending = opts.approvalsPending;
    this.approvalsPending = new Gauge({
      name: 'canton_signer_approvals_pending',
      help: 'Approval requests waiting for approvers',
      registers: [this.registry],
      async collect() {
        if (pending) this.set(await pending());
      },
    });
    this.withdrawals = byStateGauge(
      this.registry,
      'canton_signer_withdrawals',
      'Withdrawals by state (received, prepared, signed and submitted are pending)',
      opts.withdrawalsByState,
    );
    this.oldestPending = byStateGauge(
      this.registry,
      'canton_signer_withdrawal_oldest_pending_seconds',
      'Seconds since the oldest withdrawal still pending in each state was created (0: none)',
      opts.oldestPendingAges,
    );
    const byDelivery = opts.withdrawalsByDelivery;
    this.deliveries = new Gauge({
      name: 'canton_signer_withdrawal_deliveries',
      help: 'Committed withdrawals by delivery (pending, delivered, offered, returned; untracked: committed before delivery was tracked)',
      labelNames: ['delivery'] as const,
      registers: [this.registry],
      async collect() {
        if (!byDelivery) return;
        for (const [delivery, v] of Object.entries(await byDelivery())) this.set({ delivery }, v);
      },
    });
    const webhooks = opts.webhookStatus;
    this.webhookDead = new Gauge({
      name: 'canton_signer_webhook_dead_deliveries',
      help: 'Webhook deliveries given up (dead letters), per receiver: redeliver them with the API',
      labelNames: ['receiver'] as const,
      registers: [this.registry],
      async collect() {
        if (!webhooks) return;
        for (const r of await webhooks()) this.set({ receiver: r.name }, r.dead);
      },
    });
    this.webhookOldestPending = new Gauge({
      name: 'canton_signer_webhook_oldest_pending_seconds',
      help: 'Seconds since the oldest pending webhook delivery of each receiver became pending (0: none)',
      labelNames: ['receiver'] as const,
      registers: [this.registry],
      async collect() {
        if (!webhooks) return;
        for (const r of await webhooks()) this.set({ receiver: r.name }, r.oldestPendingSeconds);
      },
    });
    if (opts.defaults !== false) collectDefaultMetrics({ register: this.registry, prefix: 'canton_signer_' });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/** A gauge by withdrawal state whose values are read from `source` (the store) at each scrape. */
function byStateGauge(
  registry: Registry,
  name: string,
  help: string,
  source: (() => Promise<Record<string, number>>) | undefined,
): Gauge<'state'> {
  return new Gauge({
    name,
    help,
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      if (!source) return;
      for (const [state, v] of Object.entries(await source())) this.set({ state }, v);
    },
  });
}

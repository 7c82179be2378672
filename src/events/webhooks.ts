/**
 * The webhook deliverer: POSTs the outbox's events to each configured
 * receiver, signed (signature.ts), at least once.
 *
 * Per receiver, one loop: read the outbox after the receiver's cursor and
 * record a delivery for each event it subscribes to (one transaction per
 * batch, store/repos/webhooks.ts), claim its due deliveries lowest seq first
 * (FOR UPDATE SKIP LOCKED: several instances may run deliverers; a receiver
 * is served by one at a time), send them one after another, record each
 * outcome. Ordering: by `seq` when everything goes well; a failing event is
 * retried in the background while later ones go on, so receivers order by
 * the `seq` in the body and deduplicate by `id` (the `webhook-id` header).
 *
 * Outcomes: 2xx delivered; 410 Gone dead at once (the receiver says the
 * endpoint is gone); anything else (3xx, other 4xx, 5xx, a timeout, a
 * refused connection) failed: retried after an exponential delay with
 * jitter (`initial · 2^(attempt-1)`, at most `maxInterval`, each delay drawn
 * from its upper half), the last attempt at the horizon, then dead. Other
 * 4xx are retried too: a receiver that answers 401 or 404 is usually being
 * (re)configured, and a dead letter is redelivered by hand anyway.
 *
 * A user name and password in a receiver's URL are sent as HTTP Basic
 * authorization (and never shown: the API shows the URL without them).
 *
 * Nothing here is on the path of a withdrawal or of ingestion: the loops run
 * apart, each attempt has a timeout, and at most `concurrency` requests are
 * in flight. `appendEvents` kicks the loops (store/event-hook.ts) before its
 * transaction commits, so a kicked loop waits briefly for the event to
 * become visible; the poll interval covers everything else.
 */
import { randomUUID } from 'node:crypto';
import { onEventsAppended } from '../store/event-hook.js';
import type { ClaimedDelivery, WebhookRepo } from '../store/repos/webhooks.js';
import { type WebhookSecret, webhookHeaders } from './signature.js';

export interface ReceiverSettings {
  name: string;
  url: string;
  events: readonly string[];
  secrets: readonly WebhookSecret[];
  timeoutMs: number;
}

export interface DelivererLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export type DeliveryOutcome = 'delivered' | 'failed' | 'dead';

export interface WebhookDelivererOptions {
  repo: WebhookRepo;
  receivers: readonly ReceiverSettings[];
  retry: { horizonMs: number; initialMs: number; maxIntervalMs: number };
  /** Requests in flight at once, across receivers. */
  concurrency: number;
  pollMs: number;
  /** This deliverer's name in claims (default: a new uuid). */
  owner?: string;
  logger?: DelivererLogger;
  /** Called after each attempt (metrics). */
  observe?: (receiver: string, outcome: DeliveryOutcome) => void;
  /** Deliveries claimed at once per receiver (default 5: a claim lasts as long as sending them all may, so a crashed instance's claims lapse within 5 × (timeoutMs + 1 s) + 5 s). */
  batch?: number;
  random?: () => number;
}

export interface WebhookDeliverer {
  readonly owner: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Look at the outbox now (`seq`: an event known to be appended, perhaps not yet committed). */
  kick(seq?: number): void;
}

/** How long a kicked loop waits for the kicking event's transaction to commit. */
const KICK_WAIT_MS = 2000;
const KICK_STEP_MS = 15;
/** The shortest wait between two passes that found nothing to send. */
const MIN_IDLE_MS = 100;
const USER_AGENT = 'canton-signer-webhooks/1';

/** The request body: the event as `GET /v1/events/{id}` shows it. */
export function webhookBody(e: ClaimedDelivery['event']): string {
  return JSON.stringify({
    id: e.id,
    seq: e.seq,
    type: e.type,
    subject: e.subject,
    createdAt: e.createdAt,
    data: e.data,
  });
}

/** The delay before attempt `n + 1` after `n` failed ones: exponential, capped, from the upper half. */
export function retryDelayMs(
  failed: number,
  retry: { initialMs: number; maxIntervalMs: number },
  random: () => number = Math.random,
): number {
  const base = Math.min(retry.maxIntervalMs, retry.initialMs * 2 ** Math.min(Math.max(failed - 1, 0), 40));
  return base / 2 + (random() * base) / 2;
}

/** Why an attempt failed, short and without the URL (it may carry credentials) or any header. */
function describeFailure(e: unknown, timeoutMs: number): string {
  if (e instanceof Error) {
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return `no answer within ${timeoutMs} ms`;
    const code = (e.cause as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code)) return `connection failed (${code})`;
    return `request failed (${e.name})`;
  }
  return 'request failed';
}

/**
 * The receiver with a user name and password in its URL moved to a Basic
 * `authorization` header (fetch refuses a URL with credentials).
 */
function withoutCredentials(r: ReceiverSettings): ReceiverSettings & { authorization?: string } {
  const u = new URL(r.url);
  if (u.username === '' && u.password === '') return r;
  const user = decodeURIComponent(u.username);
  const pass = decodeURIComponent(u.password);
  u.username = '';
  u.password = '';
  return {
    ...r,
    url: u.toString(),
    authorization: `Basic ${Buffer.from(`${user}:${pass}`, 'utf8').toString('base64')}`,
  };
}

class Semaphore {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  constructor(n: number) {
    this.free = n;
  }
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

export function createWebhookDeliverer(opts: WebhookDelivererOptions): WebhookDeliverer {
  const owner = opts.owner ?? `deliverer-${randomUUID()}`;
  const repo = opts.repo;
  const batch = opts.batch ?? 5;
  const random = opts.random ?? Math.random;
  const sem = new Semaphore(opts.concurrency);
  const stopping = new AbortController();
  let unsubscribe: (() => void) | undefined;
  let running: Promise<void>[] = [];

  /** One receiver's loop and its wake-up. */
  class Loop {
    private wake: (() => void) | undefined;
    private kicked = false;
    /** An appended event this loop should see (0: none). */
    wanted = 0;
    private wantedSince = 0;

    constructor(readonly r: ReceiverSettings & { authorization?: string }) {}

    kick(seq?: number): void {
      if (seq !== undefined && seq > this.wanted) {
        this.wanted = seq;
        this.wantedSince = Date.now();
      }
      this.kicked = true;
      this.wake?.();
    }

    private async sleep(ms: number): Promise<void> {
      if (this.kicked || stopping.signal.aborted) return;
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, Math.max(0, ms));
        function done() {
          clearTimeout(t);
          resolve();
        }
        this.wake = done;
      });
      this.wake = undefined;
    }

    /** Records deliveries for the outbox after the cursor; waits briefly for a kicking event to commit. */
    private async materialise(): Promise<void> {
      for (;;) {
        const m = await repo.materialise(this.r.name, this.r.events);
        if (m.more) continue;
        if (m.afterSeq >= this.wanted || stopping.signal.aborted) return;
        if (Date.now() - this.wantedSince > KICK_WAIT_MS) {
          this.wanted = 0; // rolled back, or numbered again by a later commit: the poll covers it
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, KICK_STEP_MS));
      }
    }

    async run(): Promise<void> {
      while (!stopping.signal.aborted) {
        this.kicked = false;
        try {
          await this.materialise();
          const claimed = await repo.claim(
            this.r.name,
            owner,
            batch,
            batch * (this.r.timeoutMs + 1000) + 5000,
          );
          for (const d of claimed) {
            if (stopping.signal.aborted) break;
            await sem.acquire();
            try {
              await this.send(d);
            } finally {
              sem.release();
            }
          }
          if (claimed.length > 0) continue;
          const due = await repo.nextDue(this.r.name);
          const until = due === undefined ? opts.pollMs : Date.parse(due) - Date.now() + 5;
          // Not sooner than MIN_IDLE_MS: a due delivery another instance's claims hold back is not busy-polled.
          await this.sleep(Math.min(opts.pollMs, Math.max(until, MIN_IDLE_MS)));
        } catch (e) {
          if (stopping.signal.aborted) break;
          opts.logger?.warn(
            { receiver: this.r.name, error: e instanceof Error ? e.message : String(e) },
            'webhook deliverer: a pass failed; trying again at the next poll',
          );
          await this.sleep(opts.pollMs);
        }
      }
    }

    private async send(d: ClaimedDelivery): Promise<void> {
      const { r } = this;
      const body = webhookBody(d.event);
      const headers: Record<string, string> = {
        ...webhookHeaders(r.secrets, d.event, body),
        'user-agent': USER_AGENT,
        ...(r.authorization ? { authorization: r.authorization } : {}),
      };
      let status: number | undefined;
      let error: string | undefined;
      // One controller with its own timer, cleared when the request ends: a signal combined with
      // AbortSignal.any() holds its sources weakly, and a collected timeout signal never fires (a
      // receiver that never answers would then hold this lane until the claim lapses).
      const abort = new AbortController();
      const timer = setTimeout(
        () => abort.abort(new DOMException(`no answer within ${r.timeoutMs} ms`, 'TimeoutError')),
        r.timeoutMs,
      );
      const onStop = () => abort.abort(stopping.signal.reason);
      stopping.signal.addEventListener('abort', onStop, { once: true });
      try {
        const res = await fetch(r.url, {
          method: 'POST',
          headers,
          body,
          redirect: 'manual',
          signal: abort.signal,
        });
        status = res.status;
        await res.body?.cancel().catch(() => {});
      } catch (e) {
        if (stopping.signal.aborted) return; // the claim is released at stop: sent again later
        error = describeFailure(e, r.timeoutMs);
      } finally {
        clearTimeout(timer);
        stopping.signal.removeEventListener('abort', onStop);
      }
      const seq = d.event.seq;
      let state: string | undefined;
      let outcome: DeliveryOutcome;
      if (status !== undefined && status >= 200 && status < 300) {
        state = await repo.finish(r.name, seq, owner, { ok: true, status });
        outcome = 'delivered';
      } else {
        const gone = status === 410;
        state = await repo.finish(r.name, seq, owner, {
          ok: false,
          ...(status !== undefined ? { status } : {}),
          error:
            error ??
            (gone ? 'HTTP 410 Gone: the receiver asked not to be sent this again' : `HTTP ${status}`),
          dead: gone,
          retryMs: retryDelayMs(d.attempts + 1, opts.retry, random),
          horizonMs: opts.retry.horizonMs,
        });
        outcome = state === 'dead' ? 'dead' : 'failed';
        const log = {
          receiver: r.name,
          seq,
          attempt: d.attempts + 1,
          ...(status !== undefined ? { status } : { error }),
        };
        if (outcome === 'dead')
          opts.logger?.warn(
            log,
            'webhook delivery is dead: see GET /v1/webhooks/deliveries?state=dead, redeliver there',
          );
        else opts.logger?.info(log, 'webhook delivery failed; it is retried');
      }
      if (state !== undefined) opts.observe?.(r.name, outcome);
    }
  }

  const loops = opts.receivers.map((r) => new Loop(withoutCredentials(r)));

  return {
    owner,
    async start() {
      if (loops.length === 0) return;
      await repo.register(loops.map((l) => l.r.name));
      unsubscribe = onEventsAppended((seq) => {
        for (const l of loops) l.kick(seq);
      });
      running = loops.map((l) => l.run());
    },
    async stop() {
      unsubscribe?.();
      stopping.abort();
      for (const l of loops) l.kick();
      await Promise.all(running);
      await repo.release(owner).catch(() => {});
    },
    kick(seq) {
      for (const l of loops) l.kick(seq);
    },
  };
}

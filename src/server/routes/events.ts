/**
 * /v1/events and /v1/webhooks: the event outbox read by cursor (the polling
 * alternative to webhooks: `after` the last `seq` seen, in `seq` order, no
 * gap), one event by id or seq, and the webhook deliveries: each
 * receiver's cursor and counts (never its secrets, its URL without
 * credentials), the deliveries by receiver and state (dead letters:
 * `state=dead`), and redelivering one delivery or every dead one of a
 * receiver from a seq on (operator or admin; audited `webhook.redeliver`).
 * `GET /v1/events/stream` is the same outbox pushed as server-sent events
 * (the console's live updates): woken by the in-process append signal, a
 * poll as the safety net, a keepalive comment so proxies keep it open.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { onEventsAppended } from '../../store/event-hook.js';
import type { StoredEvent } from '../../store/repos/events.js';
import { WEBHOOK_DELIVERY_STATES, type WebhookDelivery } from '../../store/repos/webhooks.js';
import { redactUrl } from '../config.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import type { Role } from '../roles.js';
import { out, s } from '../schema.js';
import { actorOf } from './context.js';

const READERS: Role[] = ['auditor', 'operator', 'admin'];
const WRITERS: Role[] = ['operator', 'admin'];

const TYPE_PATTERN = /^(\*|[a-z][a-z_]*(\.[a-z][a-z_]*)*\.\*|[a-z][a-z_]*(\.[a-z][a-z_]*)+)$/;

const EventsQuery = z.object({
  after: z.coerce.number().int().min(0).default(0).describe('the last seq already read (0: from the first)'),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  type: z
    .string()
    .max(1000)
    .optional()
    .describe('comma-separated types or families: withdrawal.committed,deposit.*')
    .refine(
      (t) => t === undefined || t.split(',').every((x) => TYPE_PATTERN.test(x.trim())),
      'a comma-separated list of types (withdrawal.committed) or families (deposit.*)',
    ),
});

const StreamQuery = z.object({
  after: z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .describe('the last seq already read (default: the current last seq, i.e. only new events)'),
  type: EventsQuery.shape.type,
});

/** How often the stream looks at the outbox when nothing woke it (events become visible after commit). */
const STREAM_POLL_MS = 2000;
/** How often a comment line keeps an idle stream open through proxies. */
const STREAM_KEEPALIVE_MS = 15_000;
/** After an append signal, how long (and how often) the stream waits for that transaction to commit. */
const STREAM_WAKE_WAIT_MS = 2000;
const STREAM_WAKE_STEP_MS = 15;
const STREAM_PAGE = 500;

/** The `type` query as the store's filter: nothing (or `*`) is every type. */
function typeFilter(type: string | undefined): { types?: string[] } {
  const types = (type ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  return types.length > 0 && !types.includes('*') ? { types } : {};
}

export const EventView = z.object({
  id: z.string().describe('stable across redeliveries: deduplicate on it'),
  seq: z.number().describe('gapless, in commit order'),
  type: z.string(),
  subject: z.string().describe('deposit:<id>, withdrawal:<id>, party:<id>, approval:<id>, sweep:<id>'),
  createdAt: z.string(),
  data: z.record(z.string(), z.unknown()).describe('the resource as the REST API shows it'),
});

const EventPage = z.object({
  items: z.array(EventView),
  nextAfter: z
    .number()
    .describe('pass as `after` next time: the seq of the last item (the given `after` when none)'),
});

const DeliveryView = z.object({
  receiver: z.string(),
  seq: z.number(),
  eventId: z.string(),
  type: z.string(),
  state: z.enum(WEBHOOK_DELIVERY_STATES),
  attempts: z.number(),
  since: z.string().describe('when it became pending (the retry horizon counts from it)'),
  nextAttemptAt: z.string().optional(),
  lastAttemptAt: z.string().optional(),
  lastStatus: z.number().optional().describe('the HTTP status of the last attempt'),
  lastError: z.string().optional().describe('why the last attempt failed'),
  deliveredAt: z.string().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const DeliveriesQuery = z.object({
  receiver: z.string().min(1).max(64).optional(),
  state: z.enum(WEBHOOK_DELIVERY_STATES).optional().describe('dead: the dead letters'),
  cursor: z.string().min(1).max(1000).optional().describe('nextCursor of the previous page'),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

const ReceiverView = z.object({
  name: z.string(),
  url: z.string().describe('without credentials'),
  events: z.array(z.string()),
  enabled: z.boolean(),
  timeoutMs: z.number(),
  secrets: z.number().describe('how many secrets sign (2 during a rotation); the secrets are never shown'),
  cursor: z.number().describe('the outbox is read up to this seq for it'),
  counts: z.object({ pending: z.number(), delivered: z.number(), dead: z.number() }),
  oldestPendingSeconds: z.number(),
});

const eventView = (e: StoredEvent) => ({
  id: e.id,
  seq: e.seq,
  type: e.type,
  subject: e.subject,
  createdAt: e.createdAt,
  data: e.data,
});

const deliveryView = (d: WebhookDelivery) => {
  const { eventSeq, eventType, ...rest } = d;
  return { ...rest, seq: eventSeq, type: eventType };
};

/** A receiver's URL as shown: no user name or password, secret-looking query values redacted. */
export function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return redactUrl(u.toString());
  } catch {
    return '[unreadable url]';
  }
}

export async function eventsRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  const configured = (name: string) => {
    const r = deps.config.webhooks.receivers.find((x) => x.name === name);
    if (!r)
      throw new ApiError(
        404,
        'not_found',
        `${name} is not a configured webhook receiver (webhooks.receivers)`,
        'params.receiver',
      );
    return r;
  };

  app.get(
    '/events',
    {
      config: { roles: READERS },
      schema: {
        tags: ['events'],
        summary: 'Events after a cursor, in seq order (poll with after = the last seq seen)',
        description:
          'The outbox the webhooks are sent from. `seq` is gapless and in commit order: a reader that saw seq n ' +
          'saw every event before it, so `after` is a complete cursor. Filter with `type` (types or families).',
        querystring: s(EventsQuery),
        response: { 200: out(EventPage, 'events after the cursor, oldest first') },
      },
    },
    async (request) => {
      const q = request.query as z.output<typeof EventsQuery>;
      const items = await deps.store.events.list({ after: q.after, limit: q.limit, ...typeFilter(q.type) });
      return { items: items.map(eventView), nextAfter: items.at(-1)?.seq ?? q.after };
    },
  );

  // Open streams end when the service closes (a server does not close while a response is open).
  const streams = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of [...streams]) end();
  });

  app.get(
    '/events/stream',
    {
      config: { roles: READERS },
      schema: {
        tags: ['events'],
        summary: 'Events as they are committed, pushed as server-sent events (text/event-stream)',
        description:
          'The outbox of GET /v1/events, pushed: each event is sent as `event: event`, `id: <seq>`, ' +
          '`data: <the event as GET /v1/events/{id} shows it>`. Starts after `after` (default: the current last ' +
          'seq, so only new events), or after the `Last-Event-ID` header a reconnecting client sends. `type` ' +
          'filters as in GET /v1/events. A `: keepalive` comment line comes every 15 s.',
        querystring: s(StreamQuery),
        response: {
          200: {
            description: 'text/event-stream: one message per event, in seq order, until the client closes',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
        },
      },
    },
    async (request, reply) => {
      const q = request.query as z.output<typeof StreamQuery>;
      const header = request.headers['last-event-id'];
      let resumeAt: number | undefined;
      if (header !== undefined) {
        const text = Array.isArray(header) ? header[0] : header;
        if (text === undefined || !/^[0-9]{1,15}$/.test(text.trim()))
          throw new ApiError(
            400,
            'invalid_request',
            'headers.last-event-id: the seq of the last event received (a whole number)',
            'headers.last-event-id',
          );
        resumeAt = Number(text.trim());
      }
      const filter = typeFilter(q.type);
      let cursor = resumeAt ?? q.after ?? (await deps.store.events.head());

      reply.hijack();
      const raw = reply.raw;
      // The headers the hooks set (request id, security headers) go out with the stream's own.
      const set: Record<string, string | number | string[]> = {};
      for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) set[k] = v;
      raw.writeHead(200, {
        ...set,
        'x-request-id': request.id,
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
        connection: 'keep-alive',
      });
      raw.write('retry: 3000\n\n');

      let closed = false;
      let busy = false;
      let again = false;
      // The highest seq an append signal named, and when: waited for until it is visible (committed).
      let wanted = 0;
      let wantedSince = 0;
      let wakeTimer: NodeJS.Timeout | undefined;

      const pump = async (): Promise<void> => {
        if (closed) return;
        if (busy) {
          again = true;
          return;
        }
        busy = true;
        try {
          do {
            again = false;
            for (;;) {
              const items = await deps.store.events.list({ after: cursor, limit: STREAM_PAGE, ...filter });
              if (closed) return;
              for (const e of items) {
                raw.write(`event: event\nid: ${e.seq}\ndata: ${JSON.stringify(eventView(e))}\n\n`);
                cursor = e.seq;
              }
              if (items.length < STREAM_PAGE) break;
            }
          } while (again && !closed);
          // A signalled append not visible yet: its transaction has not committed; look again shortly.
          if (!closed && wanted > 0) {
            const head = await deps.store.events.head();
            if (head >= wanted || Date.now() - wantedSince > STREAM_WAKE_WAIT_MS) wanted = 0;
            else if (!wakeTimer)
              wakeTimer = setTimeout(() => {
                wakeTimer = undefined;
                void pump();
              }, STREAM_WAKE_STEP_MS);
          }
        } catch (err) {
          request.log.warn({ err }, 'event stream: reading the outbox failed; retried at the next poll');
        } finally {
          busy = false;
        }
      };

      const unsubscribe = onEventsAppended((seq) => {
        if (seq > wanted) {
          wanted = seq;
          wantedSince = Date.now();
        }
        void pump();
      });
      // The stream lasts only as long as what authenticated it: the token until its expiry, the
      // console session until it ends (signed out, idle, expired, or ended by an admin).
      const session = request.session;
      const expiresAt = request.principal?.expiresAt;
      const idleMs = deps.config.console.session.idleMinutes * 60_000;
      const stillAuthorised = async (): Promise<boolean> => {
        if (expiresAt !== undefined && Date.now() >= expiresAt) return false;
        if (session) return deps.store.sessions.alive(session.id, idleMs);
        return true;
      };
      const poll = setInterval(() => {
        void stillAuthorised()
          .then((ok) => (ok ? pump() : end()))
          .catch(() => end());
      }, STREAM_POLL_MS);
      const keepalive = setInterval(() => {
        if (!closed) raw.write(': keepalive\n\n');
      }, STREAM_KEEPALIVE_MS);
      const end = () => {
        if (closed) return;
        closed = true;
        unsubscribe();
        clearInterval(poll);
        clearInterval(keepalive);
        if (wakeTimer) clearTimeout(wakeTimer);
        streams.delete(end);
        raw.end();
      };
      streams.add(end);
      request.raw.on('close', end);
      raw.on('close', end);
      raw.on('error', end);
      void pump();
    },
  );

  app.get(
    '/events/:id',
    {
      config: { roles: READERS },
      schema: {
        tags: ['events'],
        summary: 'One event, by its id or its seq',
        params: s(z.object({ id: z.string().min(1).max(64) })),
        response: { 200: out(EventView, 'the event (found by its id or its seq)') },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const e = await deps.store.events.get(id);
      if (!e) throw new ApiError(404, 'not_found', `event ${id} not found`, 'params.id');
      return eventView(e);
    },
  );

  app.get(
    '/webhooks/receivers',
    {
      config: { roles: READERS },
      schema: {
        tags: ['events'],
        summary:
          'The configured webhook receivers: cursor, deliveries per state, oldest pending (no secrets)',
        response: { 200: out(z.object({ items: z.array(ReceiverView) }), 'the receivers, as configured') },
      },
    },
    async () => {
      const status = new Map((await deps.store.webhooks.status()).map((r) => [r.name, r]));
      return {
        items: deps.config.webhooks.receivers.map((r) => {
          const st = status.get(r.name);
          return {
            name: r.name,
            url: displayUrl(r.url),
            events: [...r.events],
            enabled: r.enabled,
            timeoutMs: r.timeoutMs,
            secrets: r.secretEnv.length,
            cursor: st?.afterSeq ?? 0,
            counts: st?.counts ?? { pending: 0, delivered: 0, dead: 0 },
            oldestPendingSeconds: st?.oldestPendingSeconds ?? 0,
          };
        }),
      };
    },
  );

  app.get(
    '/webhooks/deliveries',
    {
      config: { roles: READERS },
      schema: {
        tags: ['events'],
        summary: 'Webhook deliveries by seq, filtered by receiver and state (state=dead: the dead letters)',
        querystring: s(DeliveriesQuery),
        response: {
          200: out(
            z.object({ items: z.array(DeliveryView), nextCursor: z.string().optional() }),
            'a page of deliveries; nextCursor is set while more may follow',
          ),
        },
      },
    },
    async (request) => {
      const q = request.query as z.output<typeof DeliveriesQuery>;
      const page = await deps.store.webhooks.list({
        limit: q.limit,
        ...(q.receiver !== undefined ? { receiver: q.receiver } : {}),
        ...(q.state !== undefined ? { state: q.state } : {}),
        ...(q.cursor !== undefined ? { cursor: q.cursor } : {}),
      });
      return {
        items: page.items.map(deliveryView),
        ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
      };
    },
  );

  app.post(
    '/webhooks/deliveries/:receiver/:seq/redeliver',
    {
      config: { roles: WRITERS },
      schema: {
        tags: ['events'],
        summary: 'Send one event to one receiver again (dead, delivered or pending: due now, retried anew)',
        params: s(z.object({ receiver: z.string().min(1).max(64), seq: z.coerce.number().int().min(1) })),
        response: { 200: out(DeliveryView, 'the delivery, pending and due now') },
      },
    },
    async (request) => {
      const { receiver, seq } = request.params as { receiver: string; seq: number };
      configured(receiver);
      const d = await deps.store.webhooks.redeliver(receiver, seq, actorOf(request));
      deps.webhooks?.kick();
      return deliveryView(d);
    },
  );

  app.post(
    '/webhooks/receivers/:receiver/redeliver',
    {
      config: { roles: WRITERS },
      schema: {
        tags: ['events'],
        summary: 'Send a receiver its dead deliveries again from a seq on (and the delivered ones if asked)',
        description:
          'Makes pending again every dead delivery of the receiver with seq ≥ fromSeq (also the delivered ones with ' +
          'includeDelivered), and moves its cursor back to fromSeq when it is past it, so that events it subscribes ' +
          'to but has no delivery for (e.g. from before it was configured) are sent too.',
        params: s(z.object({ receiver: z.string().min(1).max(64) })),
        body: s(
          z.strictObject({
            fromSeq: z.number().int().min(1),
            includeDelivered: z.boolean().default(false),
          }),
        ),
        response: {
          200: out(
            z.object({ redelivered: z.number(), cursor: z.number() }),
            'how many deliveries were made pending, and the receiver’s cursor',
          ),
        },
      },
    },
    async (request) => {
      const { receiver } = request.params as { receiver: string };
      const body = request.body as { fromSeq: number; includeDelivered: boolean };
      configured(receiver);
      const r = await deps.store.webhooks.redeliverFrom(receiver, body.fromSeq, {
        actor: actorOf(request),
        includeDelivered: body.includeDelivered,
      });
      deps.webhooks?.kick();
      return { redelivered: r.redelivered, cursor: r.afterSeq };
    },
  );
}

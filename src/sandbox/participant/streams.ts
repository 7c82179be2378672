/**
 * The participant's WebSocket streams (the JSON API's AsyncAPI side) on the
 * HTTP port: updates (3.5 and the legacy flat and tree forms) and command
 * completions. The token comes as the `jwt.token.<token>` subprotocol (the
 * server's auth hook reads it); the first client message is the request; the
 * server streams what the ledger holds from `beginExclusive`, then follows it
 * live until `endInclusive` or the client leaves. One message in flight per
 * socket; errors are a JsCantonError message and a close.
 */
import type { Duplex } from 'node:stream';
import websocket, { type WebSocket } from '@fastify/websocket';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CompletionStreamRequestSchema } from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E, SandboxError } from '../errors.js';
import { config, decode, PlainError, participantAccess } from './access.js';
import { completionJson } from './render.js';
import {
  offsetAfterLedgerEnd,
  offsetCheckpoint,
  readsOf,
  type UpdatesKind,
  UpdatesRequestSchema,
  updateElement,
  updateView,
} from './update-feed.js';

/** The subprotocol a JSON API server selects; the client offers it beside `jwt.token.<token>`. */
export const WS_AUTH_PROTOCOL = 'daml.ws.auth';
export const WS_TOKEN_PREFIX = 'jwt.token.';

/** How long a following stream sleeps between looks when the ledger stays still. */
const RECHECK_MS = 1_000;
/** How long a closing handshake may take on shutdown before the socket is cut. */
const CLOSE_GRACE_MS = 200;

/**
 * The `Authorization` a request authenticates with: its header, or for a WebSocket upgrade
 * without one, the token of its `jwt.token.<token>` subprotocol as a bearer token.
 */
export function requestAuthorization(req: FastifyRequest): string | undefined {
  if (req.headers.authorization !== undefined) return req.headers.authorization;
  const token = subprotocolToken(req);
  return token === undefined ? undefined : `Bearer ${token}`;
}

/** The bearer token a WebSocket upgrade carries in its subprotocols, if any. */
function subprotocolToken(req: FastifyRequest): string | undefined {
  const offered = req.headers['sec-websocket-protocol'];
  if (typeof offered !== 'string') return undefined;
  for (const p of offered.split(',')) {
    const t = p.trim();
    if (t.startsWith(WS_TOKEN_PREFIX)) return t.slice(WS_TOKEN_PREFIX.length);
  }
  return undefined;
}

/** A stream's source of messages, given the request and the stream's lifetime. */
export type Producer = (req: FastifyRequest, request: unknown, signal: AbortSignal) => AsyncIterable<unknown>;

export function registerStreamRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireRead } = participantAccess(ctx);
  /** Aborted when the app closes: every stream stops following the ledger. */
  const shutdown = new AbortController();

  /**
   * A following stream is re-authorized as it goes, as Canton does: an expired token ends it
   * (ACCESS_TOKEN_EXPIRED), and so do read rights the user no longer has (STALE_STREAM_AUTHORIZATION).
   */
  const stillAuthorized = async (req: FastifyRequest, authorize: () => void) => {
    const header = requestAuthorization(req);
    if (header !== undefined && !(await ctx.auth.check(header)).ok)
      throw cantonError(
        'ACCESS_TOKEN_EXPIRED',
        6,
        'The access token expired while the stream was open: open the stream again with a fresh token',
      );
    try {
      authorize();
    } catch (err) {
      if (!(err instanceof SandboxError)) throw err;
      throw cantonError(
        'STALE_STREAM_AUTHORIZATION',
        2,
        "Stale stream authorization: the user's rights changed while the stream was open. Open it again to continue with the current rights",
      );
    }
  };

  const updates = (kind: UpdatesKind): Producer =>
    async function* (req, request, signal) {
      const body = decode(UpdatesRequestSchema, request);
      const view = updateView(body, kind);
      const reads = readsOf(view);
      const authorize = () => requireRead(userOf(req), reads.parties, reads.anyParty);
      authorize();
      if (body.descendingOrder === true)
        throw E.invalidArgument(
          'descendingOrder: streams run forward; use POST /v2/updates for newest first',
        );
      const end = body.endInclusive;
      let after = body.beginExclusive ?? 0;
      if (after > net.store.ledgerEnd()) throw offsetAfterLedgerEnd(after, net.store.ledgerEnd());
      if (end !== undefined && end < after)
        throw E.invalidArgument(`endInclusive (${end}) is before beginExclusive (${after})`);
      while (!signal.aborted) {
        const upTo = Math.min(end ?? Number.POSITIVE_INFINITY, net.store.ledgerEnd());
        let last = after;
        for (const u of net.store.updates(after, upTo)) {
          const el = updateElement(u, view, net.dso);
          if (!el) continue;
          yield el;
          if (signal.aborted) return;
          last = u.offset;
        }
        // Caught up past anything visible: say how far, so the reader can move on.
        if (upTo > last) yield { update: { OffsetCheckpoint: offsetCheckpoint(net, upTo) } };
        after = upTo;
        if (end !== undefined && after >= end) return;
        await net.store.waitForChange(RECHECK_MS, signal);
        await stillAuthorized(req, authorize);
      }
    };

  const completions: Producer = async function* (req, request, signal) {
    const body = decode(CompletionStreamRequestSchema, request);
    const user = userOf(req, body.userId);
    const authorize = () => requireRead(userOf(req, body.userId), body.parties);
    authorize();
    let after = body.beginExclusive ?? 0;
    if (after > net.store.ledgerEnd()) throw offsetAfterLedgerEnd(after, net.store.ledgerEnd());
    while (!signal.aborted) {
      const upTo = net.store.ledgerEnd();
      let last = after;
      for (const c of net.store.completions(after)) {
        if (c.offset > upTo) break;
        if (c.userId !== user.id || !c.actAs.some((p) => body.parties.includes(p))) continue;
        yield { completionResponse: { Completion: { value: completionJson(c) } } };
        if (signal.aborted) return;
        last = c.offset;
      }
      if (upTo > last) yield { completionResponse: { OffsetCheckpoint: offsetCheckpoint(net, upTo) } };
      after = upTo;
      await net.store.waitForChange(RECHECK_MS, signal);
      await stillAuthorized(req, authorize);
    }
  };

  // Every upgrading connection, also one refused before the upgrade (bad token, no such stream):
  // node no longer counts them as the HTTP server's connections, so closing the app cuts them here.
  const upgrading = new Set<Duplex>();
  app.server.on('upgrade', (_req, socket: Duplex) => {
    upgrading.add(socket);
    socket.once('close', () => upgrading.delete(socket));
  });

  app.register(async (scope) => {
    await scope.register(websocket, {
      options: {
        // The JSON API answers with its auth subprotocol; the token one is never echoed.
        handleProtocols: (offered) => (offered.has(WS_AUTH_PROTOCOL) ? WS_AUTH_PROTOCOL : false),
        maxPayload: 1024 * 1024,
      },
      preClose: async function closeStreams(this: FastifyInstance) {
        shutdown.abort();
        const clients = [...this.websocketServer.clients];
        await Promise.all(clients.map(closePromptly));
        for (const socket of upgrading) socket.destroy();
      },
    });
    // A refused upgrade (its answer an HTTP error) leaves nothing to keep the connection for.
    scope.addHook('onResponse', async (req) => {
      if (req.headers.upgrade?.toLowerCase() === 'websocket') req.raw.socket?.destroy();
    });
    const serve = (produce: Producer) => (socket: WebSocket, req: FastifyRequest) =>
      serveStream(socket, req, produce, shutdown.signal);
    scope.get('/v2/updates', { websocket: true, ...config('updatesStream') }, serve(updates('updates')));
    scope.get(
      '/v2/updates/flats',
      { websocket: true, ...config('updatesFlatsStream') },
      serve(updates('flats')),
    );
    scope.get(
      '/v2/updates/trees',
      { websocket: true, ...config('updatesTreesStream') },
      serve(updates('trees')),
    );
    scope.get(
      '/v2/commands/completions',
      { websocket: true, ...config('completionsStream') },
      serve(completions),
    );
  });
}

/** Runs one stream: waits for the request message, then sends what the producer yields, one at a time. */
export function serveStream(
  socket: WebSocket,
  req: FastifyRequest,
  produce: Producer,
  shutdown: AbortSignal,
): void {
  const life = new AbortController();
  const stop = () => life.abort();
  shutdown.addEventListener('abort', stop, { once: true });
  socket.once('close', () => {
    life.abort();
    shutdown.removeEventListener('abort', stop);
  });
  const gone = () => life.signal.aborted || socket.readyState !== socket.OPEN;
  socket.once('message', (data) => {
    void (async () => {
      try {
        let request: unknown;
        try {
          request = JSON.parse(String(data));
        } catch {
          throw E.invalidArgument('the first message must be the request, as JSON');
        }
        for await (const message of produce(req, request, life.signal)) {
          if (gone()) return;
          await send(socket, message);
          // Asked for the next message only while someone reads.
          if (gone()) return;
        }
        if (!gone()) socket.close(1000);
      } catch (err) {
        // The client left (or the sandbox is stopping): nobody to tell.
        if (gone()) return;
        const e = asCantonError(err);
        if (e.status >= 500) req.log.error({ err }, 'sandbox stream failed');
        await send(socket, e.body).catch(() => undefined);
        socket.close(1011, String((e.body as { code?: string }).code ?? 'INTERNAL').slice(0, 100));
      }
    })();
  });
}

/** Sends one message and resolves once it left the process (the socket's buffer stays bounded). */
function send(socket: WebSocket, message: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    if (socket.readyState !== socket.OPEN) {
      reject(new Error('the stream socket is closed'));
      return;
    }
    socket.send(JSON.stringify(message), (err) => (err ? reject(err) : resolve()));
  });
}

/** A stream's failure as the JsCantonError the client gets. */
function asCantonError(err: unknown): SandboxError {
  if (err instanceof SandboxError && 'code' in err.body) return err;
  if (err instanceof PlainError) return cantonError('INVALID_ARGUMENT', 8, err.message);
  const why = err instanceof Error ? err.message : String(err);
  return cantonError('INTERNAL', 4, `An error occurred. ${why}`);
}

/** Shutdown: a going-away close, and the socket cut if the client does not answer at once. */
function closePromptly(socket: WebSocket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.readyState === socket.CLOSED) {
      resolve();
      return;
    }
    const timer = setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.close(1001, 'sandbox shutting down');
  });
}

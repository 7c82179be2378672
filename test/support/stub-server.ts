/**
 * A real local HTTP server on 127.0.0.1:0 that tests program route by route ("route stub").
 *
 * Each route is `METHOD path` (`*` matches any method; the path is the raw pathname, so
 * percent-encoding is kept) and replies either with a handler, which gets the raw response and
 * request so it can stream, delay or drop the socket, or with declarative replies used in order
 * (the last one repeats). Every request is recorded as a {@link Hit}: on its route's list and on
 * `allHits`, which spans the whole server lifetime (`reset()` clears the routes only). Unknown
 * routes answer 404 with a JSON body naming the route.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Hit {
  method: string;
  /** The request target as sent (path and query). */
  url: string;
  /** Raw pathname as received (percent-encoding kept), including any prefix. */
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  authorization: string | undefined;
  contentType: string | undefined;
  /** Raw body text ('' when none). */
  body: string;
  /** The body parsed as JSON, when it is non-empty valid JSON; otherwise undefined. */
  json: unknown;
}

/** `n` is the 1-based number of this hit on its route. */
export type Handler = (
  res: ServerResponse,
  hit: Hit,
  n: number,
  req: IncomingMessage,
) => void | Promise<void>;

export interface Reply {
  status: number;
  /** JSON-encoded unless a string. */
  body?: unknown;
  /** Always sent; defaults to application/json. */
  contentType?: string;
  headers?: Record<string, string>;
}

export interface StubServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** `origin` + `prefix` */
  baseUrl: string;
  prefix: string;
  /** Registers (or replaces) `METHOD prefix+path`; returns the list its hits are recorded on. */
  route(method: string, path: string, handler: Handler): Hit[];
  route(method: string, path: string, ...replies: Reply[]): Hit[];
  /** Replaces the handler of a registered route, keeping its hits (e.g. to inject a failure). */
  wrap(method: string, path: string, wrapper: (inner: Handler) => Handler): void;
  /** Every request that reached the server, routed or not. */
  allHits: Hit[];
  send: typeof send;
  /** Forgets all routes (not `allHits`). */
  reset(): void;
  close(): Promise<void>;
}

/** Writes a reply: a string body is sent as is, anything else JSON-encoded; JSON content-type when there is a body. */
export function send(
  res: ServerResponse,
  status: number,
  body?: unknown,
  headers: Record<string, string> = {},
): void {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...headers,
  });
  res.end(text);
}

function fromReplies(replies: Reply[]): Handler {
  return (res, _hit, n) => {
    const reply = replies[Math.min(n, replies.length) - 1] ?? { status: 500 };
    send(res, reply.status, reply.body, {
      'content-type': reply.contentType ?? 'application/json',
      ...reply.headers,
    });
  };
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export async function startStubServer(opts: { prefix?: string } = {}): Promise<StubServer> {
  const prefix = opts.prefix ?? '';
  const routes = new Map<string, { handler: Handler; hits: Hit[] }>();
  const allHits: Hit[] = [];

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://stub');
      const body = Buffer.concat(chunks).toString('utf8');
      const hit: Hit = {
        method: req.method ?? '',
        url: req.url ?? '',
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        authorization: req.headers.authorization,
        contentType: req.headers['content-type'],
        body,
        json: parseJson(body),
      };
      allHits.push(hit);
      const r = routes.get(`${hit.method} ${hit.path}`) ?? routes.get(`* ${hit.path}`);
      if (!r) return send(res, 404, { error: `stub: no route ${hit.method} ${hit.path}` });
      r.hits.push(hit);
      Promise.resolve()
        .then(() => r.handler(res, hit, r.hits.length, req))
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function route(method: string, path: string, ...replies: [Handler] | Reply[]): Hit[] {
    const hits: Hit[] = [];
    const [first] = replies;
    const handler = typeof first === 'function' ? first : fromReplies(replies as Reply[]);
    routes.set(`${method} ${prefix}${path}`, { handler, hits });
    return hits;
  }

  return {
    origin,
    baseUrl: `${origin}${prefix}`,
    prefix,
    route: route as StubServer['route'],
    wrap(method, path, wrapper) {
      const r = routes.get(`${method} ${prefix}${path}`);
      if (!r) throw new Error(`stub: no route ${method} ${prefix}${path} to wrap`);
      r.handler = wrapper(r.handler);
    },
    allHits,
    send,
    reset: () => routes.clear(),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

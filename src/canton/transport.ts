/**
 * The request function the Canton clients send through by default: the
 * subset of `fetch` that http.ts uses (method, headers, a text body, a time
 * limit; status, a header, the body as text), over node:http / node:https
 * with keep-alive connections. For the service's small JSON calls it costs
 * about a quarter of the CPU of the global fetch (undici and web streams),
 * which was a tenth of the service's CPU per withdrawal
 * (docs/performance.md). The time limit is one timer per request, covering
 * the headers and the body, rather than an AbortSignal (whose creation and
 * listeners cost more than the timer). Redirects are not followed (a 3xx is
 * an answer like any other: http.ts reports it as an error). Errors are
 * node's own (`code` ECONNREFUSED, ECONNRESET, …; `AbortError` when the
 * time limit passes, also while the body is read), which http.ts maps as it
 * maps fetch's. `overFetch` sends through a `fetch` instead (tests inject
 * one), with an AbortSignal for the limit.
 */
import * as http from 'node:http';
import * as https from 'node:https';

export interface TransportRequest {
  method: string;
  headers: Record<string, string>;
  body?: string | undefined;
  /** Limit of the whole exchange, headers and body (ms). */
  timeoutMs: number;
}

export interface TransportResponse {
  status: number;
  headers: { get(name: string): string | null };
  /** The whole body, UTF-8; rejects when reading it fails (a dropped connection, the time limit). */
  text(): Promise<string>;
}

/** What http.ts sends through: this module's `request`, or a `fetch` behind {@link overFetch}. */
export type Transport = (url: string, init: TransportRequest) => Promise<TransportResponse>;

/** The part of `fetch` that {@link overFetch} calls. */
export type FetchLike = (
  url: string,
  init: {
    method: string;
    headers: Record<string, string>;
    body?: string | undefined;
    signal: AbortSignal;
    redirect: 'error';
  },
) => Promise<TransportResponse>;

/** A transport over `fetch`: the time limit becomes an AbortSignal, redirects are errors. */
export const overFetch =
  (f: FetchLike): Transport =>
  (url, init) =>
    f(url, {
      method: init.method,
      headers: init.headers,
      body: init.body,
      signal: AbortSignal.timeout(init.timeoutMs),
      redirect: 'error',
    });

const AGENTS = {
  'http:': new http.Agent({ keepAlive: true }),
  'https:': new https.Agent({ keepAlive: true }),
} as const;

/** The error a request that ran out of time fails with, as fetch names it. */
const timedOut = (): Error =>
  Object.assign(new Error('the request was aborted: its time limit passed'), { name: 'AbortError' });

/** One request; resolves with the status and headers as soon as they arrive. */
export const request: Transport = (url, init) =>
  new Promise((resolve, reject) => {
    const u = new URL(url);
    const protocol = u.protocol === 'https:' ? 'https:' : 'http:';
    const headers: Record<string, string> = { ...init.headers };
    if (init.body !== undefined) headers['content-length'] = String(Buffer.byteLength(init.body));
    const send = protocol === 'https:' ? https.request : http.request;
    const options = { method: init.method, headers, agent: AGENTS[protocol] };
    let expired = false;
    const req = send(u, options, (res: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      const body = new Promise<string>((done, fail) => {
        const cut = (e?: unknown) => {
          clearTimeout(timer);
          fail(
            expired
              ? timedOut()
              : (e ?? Object.assign(new Error('the response was cut off'), { code: 'ECONNRESET' })),
          );
        };
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          clearTimeout(timer);
          done(
            chunks.length === 1
              ? (chunks[0] as Buffer).toString('utf8')
              : Buffer.concat(chunks).toString('utf8'),
          );
        });
        res.on('error', cut);
        res.on('close', () => {
          if (!res.complete) cut();
        });
      });
      // Read or not, a failing body must not become an unhandled rejection.
      body.catch(() => {});
      resolve({
        status: res.statusCode ?? 0,
        headers: {
          get(name) {
            const v = res.headers[name.toLowerCase()];
            return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
          },
        },
        text: () => body,
      });
    });
    // The time limit (set once the request exists: a request node refuses at once leaves no
    // timer): whatever the request is doing when it passes (connecting, waiting for the headers,
    // reading the body), it is destroyed and fails as an AbortError.
    const timer = setTimeout(() => {
      expired = true;
      req.destroy(timedOut());
    }, init.timeoutMs);
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(expired ? timedOut() : e);
    });
    req.end(init.body);
  });

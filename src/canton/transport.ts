/**
 * The request function the Canton clients send through by default: the
 * subset of `fetch` that http.ts uses (method, headers, a text body, an abort
 * signal; status, a header, the body as text), over node:http / node:https
 * with keep-alive connections. For the service's small JSON calls it costs
 * about a quarter of the CPU of the global fetch (undici and web streams),
 * which was a tenth of the service's CPU per withdrawal
 * (docs/performance.md). Redirects are not followed (a 3xx is an answer like
 * any other: http.ts reports it as an error). Errors are node's own (`code`
 * ECONNREFUSED, ECONNRESET, …; `AbortError` when the signal fires, also
 * while the body is read), which http.ts maps as it maps fetch's.
 */
import * as http from 'node:http';
import * as https from 'node:https';

export interface TransportRequest {
  method: string;
  headers: Record<string, string>;
  body?: string | undefined;
  signal: AbortSignal;
  redirect?: 'error';
}

export interface TransportResponse {
  status: number;
  headers: { get(name: string): string | null };
  /** The whole body, UTF-8; rejects when reading it fails (a dropped connection, the signal). */
  text(): Promise<string>;
}

/** What http.ts sends through: this module's `request`, or a `fetch` (tests inject one). */
export type Transport = (url: string, init: TransportRequest) => Promise<TransportResponse>;

const AGENTS = {
  'http:': new http.Agent({ keepAlive: true }),
  'https:': new https.Agent({ keepAlive: true }),
} as const;

/** One request; resolves with the status and headers as soon as they arrive. */
export const request: Transport = (url, init) =>
  new Promise((resolve, reject) => {
    const u = new URL(url);
    const protocol = u.protocol === 'https:' ? 'https:' : 'http:';
    const headers: Record<string, string> = { ...init.headers };
    if (init.body !== undefined) headers['content-length'] = String(Buffer.byteLength(init.body));
    const send = protocol === 'https:' ? https.request : http.request;
    const options = { method: init.method, headers, agent: AGENTS[protocol], signal: init.signal };
    const req = send(u, options, (res: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      const body = new Promise<string>((done, fail) => {
        // The signal firing while the body streams is a time-out, whatever the socket reports.
        const cut = (e?: unknown) =>
          fail(
            init.signal.aborted
              ? Object.assign(new Error('the request was aborted: its time limit passed'), {
                  name: 'AbortError',
                })
              : (e ?? Object.assign(new Error('the response was cut off'), { code: 'ECONNRESET' })),
          );
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
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
    req.on('error', reject);
    req.end(init.body);
  });

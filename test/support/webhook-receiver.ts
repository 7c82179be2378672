/**
 * A webhook receiver for the tests: a real node:http server on 127.0.0.1
 * that records every request (headers, raw body) and answers what the test
 * says (a status, or `hang`: never answer). It can be closed (connections
 * refused) and listen again on the same port. `until` polls a condition
 * with a deadline.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export type Answer = number | 'hang';

export interface TestReceiver {
  readonly url: string;
  readonly port: number;
  readonly got: Received[];
  /** What to answer to the n-th request (1-based). */
  respond: (r: Received, n: number) => Answer;
  /** Stops listening and drops every connection (further requests: connection refused). */
  close(): Promise<void>;
  /** Listens again on the same port. */
  reopen(): Promise<void>;
}

export async function testReceiver(
  opts: { port?: number; respond?: (r: Received, n: number) => Answer } = {},
): Promise<TestReceiver> {
  const hanging: ServerResponse[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = {
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      rx.got.push(r);
      const answer = rx.respond(r, rx.got.length);
      if (answer === 'hang') hanging.push(res);
      else res.writeHead(answer).end();
    });
  });
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const port = await listen(opts.port ?? 0);
  const rx: TestReceiver = {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    got: [],
    respond: opts.respond ?? (() => 200),
    async close() {
      for (const h of hanging.splice(0)) h.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    async reopen() {
      await listen(port);
    },
  };
  return rx;
}

/** A free port on 127.0.0.1 (nothing listens on it when this returns). */
export { freePort } from './ports.js';

/** Polls `f` until it returns a truthy value (returned), or throws after `ms` naming `what`. */
export async function until<T>(f: () => T | Promise<T>, what: string, ms = 10_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

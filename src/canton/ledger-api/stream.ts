/**
 * Owns the WebSocket side of the JSON Ledger API for the update stream (`GET /v2/updates`
 * upgraded, the AsyncAPI half of the API): connect with the bearer token as the
 * `jwt.token.<token>` subprotocol beside `daml.ws.auth` (what the API documents, since browsers
 * cannot set headers), send the GetUpdatesRequest as the first message, and hand each
 * `JsGetUpdatesResponse.update` to the reader as an async iterable, one at a time: the socket is
 * paused while the reader lags. A JsCantonError message (the server's way of failing a stream),
 * a refused upgrade, an abnormal close or an unreadable message end the iteration with a
 * CantonApiError; a normal close (a bounded request reached its end) or the caller's abort
 * ends it quietly.
 */
import WebSocket from 'ws';
import type { AuthProvider } from '../auth.js';
import { CantonApiError, ERROR_CATEGORIES, errorFromResponse, JsCantonErrorSchema } from '../errors.js';
import { type GetUpdatesRequest, JsGetUpdatesResponseSchema, type Update } from './schemas.js';

export const WS_AUTH_SUBPROTOCOL = 'daml.ws.auth';
export const WS_TOKEN_SUBPROTOCOL_PREFIX = 'jwt.token.';
const PATH = '/v2/updates';

export interface UpdatesStreamOptions {
  /** Aborting closes the socket; the iteration then ends without an error. */
  signal?: AbortSignal;
  /** Time allowed to open the socket (TCP, TLS, upgrade). Default: the client's timeout. */
  connectTimeoutMs?: number;
  /** Messages held for a slow reader before the socket is paused. Default 64. */
  highWaterMark?: number;
}

interface StreamTarget {
  baseUrl: string;
  auth: AuthProvider | undefined;
  timeoutMs: number;
}

const base = { service: 'ledger-api' as const, method: 'GET', path: PATH };

function wsUrl(baseUrl: string): string {
  const u = new URL(baseUrl);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  u.pathname = `${u.pathname.replace(/\/+$/, '')}${PATH}`;
  return u.toString();
}

/** Subprotocols carrying the token: `jwt.token.<token>` and `daml.ws.auth`; none without auth. */
async function subprotocols(auth: AuthProvider | undefined): Promise<string[]> {
  const header = auth ? await auth.authorization() : undefined;
  if (header === undefined) return [];
  const m = /^Bearer\s+(\S+)$/i.exec(header);
  if (!m) throw new TypeError('ledger-api updatesStream: the WebSocket stream needs a bearer token');
  return [`${WS_TOKEN_SUBPROTOCOL_PREFIX}${m[1]}`, WS_AUTH_SUBPROTOCOL];
}

function streamError(code: string, retryable: boolean, note: string, detail?: string): CantonApiError {
  return new CantonApiError({ ...base, status: 0, code, retryable, ambiguous: false, note, detail });
}

/** A JsCantonError the server sent on the stream, as the client's error (status 0: no HTTP answer). */
function cantonStreamError(json: unknown): CantonApiError | undefined {
  const parsed = JsCantonErrorSchema.safeParse(json);
  if (!parsed.success) return undefined;
  const e = parsed.data;
  const category = ERROR_CATEGORIES[e.errorCategory];
  return new CantonApiError({
    ...base,
    status: 0,
    code: e.code,
    category: category?.name ?? `category ${e.errorCategory}`,
    cantonError: e,
    retryable: category?.retryable === true,
    ambiguous: false,
    note: 'the server failed the update stream',
    detail: e.cause,
  });
}

type Event = { kind: 'update'; update: Update } | { kind: 'error'; error: unknown } | { kind: 'end' };

/**
 * Opens one socket: resolves once it is open (or rejects with the refused upgrade's error; a
 * 401 is marked so the caller can re-authenticate once).
 */
function connect(url: string, protocols: string[], timeoutMs: number): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { handshakeTimeout: timeoutMs, perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        reject(
          errorFromResponse({
            ...base,
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            retryAfter: res.headers['retry-after'] as string | undefined,
            idempotent: true,
          }),
        );
      });
      res.on('error', (err) =>
        reject(streamError('NETWORK', true, 'the upgrade answer broke off', err.message)),
      );
    });
    ws.once('error', (err: Error & { code?: string }) => {
      const timeout = /timed out|timeout/i.test(err.message);
      reject(
        streamError(
          timeout ? 'TIMEOUT' : 'NETWORK',
          !/CERT|TLS|SSL/.test(err.code ?? ''),
          timeout ? `no WebSocket upgrade within ${timeoutMs} ms` : 'could not open the WebSocket',
          err.code ?? err.message,
        ),
      );
    });
  });
}

/** The update stream of `body` (already validated) as an async iterable of `Update` items. */
export async function* updatesStream(
  target: StreamTarget,
  body: GetUpdatesRequest,
  opts: UpdatesStreamOptions = {},
): AsyncGenerator<Update, void, undefined> {
  const { signal } = opts;
  if (signal?.aborted) return;
  const url = wsUrl(target.baseUrl);
  const timeoutMs = opts.connectTimeoutMs ?? target.timeoutMs;
  let ws: WebSocket;
  try {
    ws = await connect(url, await subprotocols(target.auth), timeoutMs);
  } catch (e) {
    if (!(e instanceof CantonApiError && e.status === 401 && target.auth)) throw e;
    target.auth.invalidate(); // once, as the HTTP client does
    ws = await connect(url, await subprotocols(target.auth), timeoutMs);
  }

  const high = Math.max(1, opts.highWaterMark ?? 64);
  const queue: Event[] = [];
  let wake: (() => void) | undefined;
  let finished = false;
  const push = (e: Event) => {
    if (finished) return;
    if (e.kind !== 'update') finished = true;
    queue.push(e);
    if (queue.length >= high) ws.pause();
    wake?.();
  };
  ws.on('message', (data) => {
    let json: unknown;
    try {
      json = JSON.parse(String(data));
    } catch {
      push({ kind: 'error', error: streamError('INVALID_RESPONSE', false, 'a stream message is not JSON') });
      return;
    }
    const failed = cantonStreamError(json);
    if (failed) {
      push({ kind: 'error', error: failed });
      return;
    }
    const parsed = JsGetUpdatesResponseSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
      push({
        kind: 'error',
        error: streamError(
          'INVALID_RESPONSE',
          false,
          `stream message at ${where}: ${issue?.message ?? 'invalid'}`,
        ),
      });
      return;
    }
    if (parsed.data.update) push({ kind: 'update', update: parsed.data.update });
  });
  ws.on('close', (code, reason) => {
    if (code === 1000 || signal?.aborted) push({ kind: 'end' });
    else
      push({
        kind: 'error',
        error: streamError(
          'STREAM_CLOSED',
          true,
          `the server closed the update stream (WebSocket close ${code}); reopen it from the last offset read`,
          String(reason) || undefined,
        ),
      });
  });
  ws.on('error', (err) =>
    push({ kind: 'error', error: streamError('NETWORK', true, 'the update stream broke', err.message) }),
  );
  const onAbort = () => {
    push({ kind: 'end' });
    ws.close(1000);
  };
  signal?.addEventListener('abort', onAbort, { once: true });

  try {
    ws.send(JSON.stringify(body));
    for (;;) {
      const next = queue.shift();
      if (!next) {
        await new Promise<void>((r) => {
          wake = r;
        });
        wake = undefined;
        continue;
      }
      if (queue.length < high / 2 && ws.isPaused) ws.resume();
      if (next.kind === 'end') return;
      if (next.kind === 'error') throw next.error;
      yield next.update;
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    finished = true;
    if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000);
  }
}

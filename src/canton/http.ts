/**
 * JSON-over-HTTP transport shared by the Ledger API, validator, Scan and registry
 * clients: timeouts, bounded retries of idempotent calls, one re-authentication
 * on 401, zod validation of every response, and errors that never carry a token.
 */
import type { z } from 'zod';
import type { AuthProvider } from './auth.js';
import { CantonApiError, type CantonService, errorFromResponse, type HttpMethod } from './errors.js';
import {
  type FetchLike,
  request as nodeRequest,
  overFetch,
  type Transport,
  type TransportResponse,
} from './transport.js';

export interface HttpLogger {
  debug(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface RetryOptions {
  /** Total attempts including the first one (1 = never retry). Default 3. */
  attempts: number;
  /** First backoff ceiling; doubles per retry. Default 200 ms. */
  baseDelayMs: number;
  /** Upper bound of any single wait, including server-requested ones. Default 5000 ms. */
  maxDelayMs: number;
}

export interface HttpClientOptions {
  /** Service root, e.g. `https://validator.example.com/api/validator` or `http://participant:7575`. */
  baseUrl: string;
  service: CantonService;
  auth?: AuthProvider;
  /** Per attempt, covering connection, headers and body. Default 30 s. */
  timeoutMs?: number;
  retry?: Partial<RetryOptions>;
  /** How requests are sent: default node:http(s) with keep-alive (transport.ts); a `fetch` fits. */
  fetch?: FetchLike;
  logger?: HttpLogger;
}

export type QueryParams = Record<string, string | number | boolean | undefined>;

export interface HttpRequest<T> {
  method: HttpMethod;
  /** Relative to `baseUrl`; encode dynamic segments (see {@link encodePath}). */
  path: string;
  query?: QueryParams;
  /** Sent as JSON; omitted when `undefined`. */
  body?: unknown;
  /** Schema of the success body; an empty body is parsed as `undefined`. */
  response: z.ZodType<T>;
  /** Safe to repeat. Default: GET and DELETE true, POST and PATCH false. Only idempotent calls are retried. */
  idempotent?: boolean;
  timeoutMs?: number;
  /** Statuses that count as success. Default 200..299. */
  okStatus?: number[];
}

export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_RETRY: Readonly<RetryOptions> = { attempts: 3, baseDelayMs: 200, maxDelayMs: 5000 };

/**
 * Socket error codes meaning the request never left this process (nothing can
 * have happened on the server), so even a POST is not ambiguous.
 */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_INVALID_ARG',
]);

export class HttpClient {
  readonly service: CantonService;
  readonly baseUrl: string;
  private readonly auth: AuthProvider | undefined;
  private readonly timeoutMs: number;
  private readonly retry: RetryOptions;
  private readonly fetchFn: Transport;
  private readonly logger: HttpLogger | undefined;

  constructor(opts: HttpClientOptions) {
    let base: URL;
    try {
      base = new URL(opts.baseUrl);
    } catch {
      throw new TypeError(`HttpClient(${opts.service}): baseUrl is not an absolute URL`);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw new TypeError(`HttpClient(${opts.service}): baseUrl must be http(s)`);
    }
    if (base.search || base.hash) {
      throw new TypeError(`HttpClient(${opts.service}): baseUrl must not have a query or fragment`);
    }
    this.service = opts.service;
    this.baseUrl = opts.baseUrl;
    this.auth = opts.auth;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.retry = { ...DEFAULT_RETRY, ...opts.retry };
    if (!Number.isInteger(this.retry.attempts) || this.retry.attempts < 1) {
      throw new TypeError('HttpClient: retry.attempts must be an integer >= 1');
    }
    this.fetchFn = opts.fetch ? overFetch(opts.fetch) : nodeRequest;
    this.logger = opts.logger;
  }

  async request<T>(r: HttpRequest<T>): Promise<T> {
    const idempotent = r.idempotent ?? (r.method === 'GET' || r.method === 'DELETE');
    const path = `/${(r.path.split('?')[0] ?? '').replace(/^\/+/, '')}`;
    const url = joinUrl(this.baseUrl, r.path, r.query);
    const body = r.body === undefined ? undefined : JSON.stringify(r.body);
    const timeoutMs = r.timeoutMs ?? this.timeoutMs;
    const ctx = { service: this.service, method: r.method, path };

    let reauthenticated = false;
    for (let attempt = 1; ; attempt++) {
      const started = performance.now();
      try {
        const value = await this.attempt(r, url, body, idempotent, timeoutMs, path);
        this.logger?.debug(
          { ...ctx, status: value.status, durationMs: ms(started), attempt },
          'canton request ok',
        );
        return value.value;
      } catch (e) {
        if (!(e instanceof CantonApiError)) throw e;
        const durationMs = ms(started);
        if (e.status === 401 && this.auth && !reauthenticated && e.service !== 'oauth') {
          reauthenticated = true;
          this.auth.invalidate();
          this.logger?.warn(
            { ...ctx, status: e.status, code: e.code, durationMs, attempt },
            'canton request unauthenticated; refreshing credentials and retrying once',
          );
          attempt--; // the re-authentication retry does not use up a retry attempt
          continue;
        }
        const willRetry = idempotent && e.retryable && attempt < this.retry.attempts;
        const fields = { ...ctx, status: e.status, code: e.code, durationMs, attempt };
        if (!willRetry) {
          this.logger?.warn(fields, 'canton request failed');
          throw e;
        }
        const delayMs = this.backoff(attempt, e.retryAfterMs);
        this.logger?.warn({ ...fields, delayMs }, 'canton request failed; retrying');
        await sleep(delayMs);
      }
    }
  }

  /** Full-jitter exponential backoff; a server-requested delay wins, both capped by maxDelayMs. */
  private backoff(attempt: number, retryAfterMs: number | undefined): number {
    const { baseDelayMs, maxDelayMs } = this.retry;
    if (retryAfterMs !== undefined) return Math.min(retryAfterMs, maxDelayMs);
    const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
    return Math.floor(Math.random() * ceiling);
  }

  private async attempt<T>(
    r: HttpRequest<T>,
    url: string,
    body: string | undefined,
    idempotent: boolean,
    timeoutMs: number,
    path: string,
  ): Promise<{ status: number; value: T }> {
    const base = { service: this.service, method: r.method, path };
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const authorization = this.auth ? await this.auth.authorization() : undefined;
    if (authorization !== undefined) headers.authorization = authorization;

    let res: TransportResponse;
    try {
      res = await this.fetchFn(url, { method: r.method, headers, body, timeoutMs });
    } catch (e) {
      throw transportError(base, e, idempotent, timeoutMs, false);
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      // The server answered: for a non-idempotent call the request was processed.
      throw transportError(base, e, idempotent, timeoutMs, true);
    }

    const ok = r.okStatus ? r.okStatus.includes(res.status) : res.status >= 200 && res.status < 300;
    if (!ok) {
      throw errorFromResponse({
        ...base,
        status: res.status,
        body: text,
        retryAfter: res.headers.get('retry-after'),
        idempotent,
      });
    }

    let json: unknown;
    if (text.trim().length > 0) {
      try {
        json = JSON.parse(text);
      } catch {
        throw invalidResponse(base, res.status, 'response body is not JSON', idempotent);
      }
    }
    const parsed = r.response.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
      const what = json === undefined ? 'empty response body' : (issue?.message ?? 'invalid');
      throw invalidResponse(base, res.status, `response at ${where}: ${what}`, idempotent);
    }
    return { status: res.status, value: parsed.data };
  }
}

/**
 * A success status whose body cannot be read. For a call that is not
 * idempotent the server has acted but its answer is unknown: ambiguous.
 */
function invalidResponse(
  base: { service: CantonService; method: string; path: string },
  status: number,
  note: string,
  idempotent: boolean,
): CantonApiError {
  return new CantonApiError({
    ...base,
    status,
    code: 'INVALID_RESPONSE',
    retryable: false,
    ambiguous: !idempotent && status >= 200 && status < 300,
    note,
  });
}

function transportError(
  base: { service: CantonService; method: string; path: string },
  e: unknown,
  idempotent: boolean,
  timeoutMs: number,
  responded: boolean,
): CantonApiError {
  if (e instanceof CantonApiError) return e;
  const name = e instanceof Error ? e.name : '';
  if (name === 'TimeoutError' || name === 'AbortError') {
    return new CantonApiError({
      ...base,
      status: 0,
      code: 'TIMEOUT',
      retryable: true,
      ambiguous: !idempotent,
      note: `no complete response within ${timeoutMs} ms`,
    });
  }
  const sysCode = socketErrorCode(e);
  const notSent = !responded && sysCode !== undefined && NOT_SENT_CODES.has(sysCode);
  const tls = sysCode !== undefined && /CERT|TLS|SSL/.test(sysCode);
  return new CantonApiError({
    ...base,
    status: 0,
    code: 'NETWORK',
    retryable: !tls,
    ambiguous: !idempotent && !notSent && !tls,
    detail: sysCode,
  });
}

/** The system/undici error code under a `fetch failed` TypeError, if any. */
function socketErrorCode(e: unknown): string | undefined {
  const seen = new Set<unknown>();
  let cur: unknown = e;
  while (cur && typeof cur === 'object' && !seen.has(cur)) {
    seen.add(cur);
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const errors = (cur as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0) {
      cur = errors[0];
      continue;
    }
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

function ms(started: number): number {
  return Math.round(performance.now() - started);
}

function sleep(delayMs: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, delayMs));
}

/**
 * `base` + `path` + `?query`. Exactly one slash between base and path whatever
 * either side carries; query keys and values percent-encoded (RFC 3986), `undefined`
 * values left out. `path` is used as given: encode dynamic segments with
 * {@link encodePath} or `encodeURIComponent`.
 */
export function joinUrl(base: string, path: string, query?: QueryParams): string {
  const b = base.replace(/\/+$/, '');
  const p = path.replace(/^\/+/, '');
  let url = p.length > 0 ? `${b}/${p}` : b;
  if (query) {
    const parts: string[] = [];
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined) continue;
      parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
    }
    if (parts.length > 0) url += `${url.includes('?') ? '&' : '?'}${parts.join('&')}`;
  }
  return url;
}

/**
 * Tagged template that percent-encodes every interpolated value as one path segment:
 * encodePath`/v2/users/${userId}/rights` → `/v2/users/alice%3A%3A1220…/rights`.
 */
export function encodePath(strings: TemplateStringsArray, ...values: (string | number)[]): string {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) {
    out += encodeURIComponent(String(values[i])) + (strings[i + 1] ?? '');
  }
  return out;
}

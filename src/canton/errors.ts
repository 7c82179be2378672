/**
 * The one error type of every Canton client (Ledger API, validator, Scan,
 * token-standard registry, OAuth token endpoint).
 *
 * Messages name only the service, the method, the path (never a query string),
 * the HTTP status and a code: no header, no token, no body. The server's own
 * explanation is kept apart in `detail` / `cantonError` / `spliceError`.
 */
import { z } from 'zod';
import { oneLine } from '../text/one-line.js';

export type CantonService = 'ledger-api' | 'validator' | 'scan' | 'registry' | 'oauth';
export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/**
 * Optional JsCantonError field. The published spec marks these as plain optional
 * strings/ints/booleans, but Canton derives the JSON codec with circe, which
 * prints `None` as `null`: accept both and normalise to `undefined`.
 */
const opt = <T extends z.ZodType>(schema: T) =>
  schema
    .nullish()
    .transform((v): z.output<T> | undefined => v ?? undefined)
    .optional();

/**
 * `JsCantonError` of the JSON Ledger API v2 (component `JsCantonError` of the
 * Canton 3.5.1 OpenAPI document). Unknown fields are dropped, not refused.
 */
export const JsCantonErrorSchema = z.object({
  /** Canton error id, e.g. `INVALID_ARGUMENT`, `FAILED_TO_EXECUTE_TRANSACTION`. */
  code: z.string(),
  cause: z.string(),
  correlationId: opt(z.string()),
  traceId: opt(z.string()),
  context: z.record(z.string(), z.string()),
  resources: opt(z.array(z.tuple([z.string(), z.string()]))),
  /** Numeric Daml error category, see {@link ERROR_CATEGORIES}. */
  errorCategory: z.number().int(),
  grpcCodeValue: opt(z.number().int()),
  /** Scala `Duration.toString` of the suggested retry delay, e.g. `"1 second"`. */
  retryInfo: opt(z.string()),
  definiteAnswer: opt(z.boolean()),
});
export type JsCantonError = z.output<typeof JsCantonErrorSchema>;

/** Splice (validator, Scan, registry) `ErrorResponse`. */
export const SpliceErrorSchema = z.object({ error: z.string() });

interface CategoryInfo {
  readonly name: string;
  /** The category's default retry policy says "retry". */
  readonly retryable: boolean;
  /** The request may have been processed even though an error came back. */
  readonly stateUnknown: boolean;
}

/** Daml error categories by their `errorCategory` number (com.daml.error.ErrorCategory). */
export const ERROR_CATEGORIES: Readonly<Record<number, CategoryInfo>> = {
  1: { name: 'TransientServerFailure', retryable: true, stateUnknown: false },
  2: { name: 'ContentionOnSharedResources', retryable: true, stateUnknown: false },
  3: { name: 'DeadlineExceededRequestStateUnknown', retryable: true, stateUnknown: true },
  4: { name: 'SystemInternalAssumptionViolated', retryable: false, stateUnknown: false },
  5: { name: 'SecurityAlert', retryable: false, stateUnknown: false },
  6: { name: 'AuthInterceptorInvalidAuthenticationCredentials', retryable: false, stateUnknown: false },
  7: { name: 'InsufficientPermission', retryable: false, stateUnknown: false },
  8: { name: 'InvalidIndependentOfSystemState', retryable: false, stateUnknown: false },
  9: { name: 'InvalidGivenCurrentSystemStateOther', retryable: false, stateUnknown: false },
  10: { name: 'InvalidGivenCurrentSystemStateResourceExists', retryable: false, stateUnknown: false },
  11: { name: 'InvalidGivenCurrentSystemStateResourceMissing', retryable: false, stateUnknown: false },
  12: { name: 'InvalidGivenCurrentSystemStateSeekAfterEnd', retryable: false, stateUnknown: false },
  13: { name: 'BackgroundProcessDegradationWarning', retryable: false, stateUnknown: false },
  14: { name: 'InternalUnsupportedOperation', retryable: false, stateUnknown: false },
};

/** HTTP statuses worth retrying whatever the body says. */
const RETRYABLE_STATUS = new Set([408, 429, 502, 503, 504]);
/**
 * HTTP statuses after which a non-idempotent request may still have been
 * carried out: a gateway or deadline failure, a server error or an
 * unavailable server (the request may have reached the node before it failed
 * or stopped), a cancelled call. Treating one as a definite "no" could make a
 * caller submit again what is already on its way to the ledger.
 */
const STATE_UNKNOWN_STATUS = new Set([499, 500, 502, 503, 504]);

export interface CantonApiErrorInit {
  status: number;
  service: CantonService;
  method: string;
  path: string;
  code: string;
  category?: string | undefined;
  cantonError?: JsCantonError | undefined;
  spliceError?: string | undefined;
  retryable: boolean;
  retryAfterMs?: number | undefined;
  ambiguous: boolean;
  detail?: string | undefined;
  /** Extra words for the message (e.g. the failing field of an invalid response); no secrets. */
  note?: string | undefined;
}

export class CantonApiError extends Error {
  override readonly name = 'CantonApiError';
  /** HTTP status; 0 when no response came back (network error, timeout). */
  readonly status: number;
  readonly service: CantonService;
  readonly method: string;
  /** Request path relative to the service base, without query string. */
  readonly path: string;
  /**
   * JsCantonError `code`, else a derived one: `HTTP_<status>`, `UNAUTHENTICATED`,
   * `TIMEOUT`, `NETWORK`, `INVALID_RESPONSE`.
   */
  readonly code: string;
  /** Daml error category name (from JsCantonError `errorCategory`), e.g. `InvalidIndependentOfSystemState`. */
  readonly category?: string;
  readonly cantonError?: JsCantonError;
  /** Splice `{error}` text. */
  readonly spliceError?: string;
  /** Retrying the same request is safe *for the server state* and may succeed. */
  readonly retryable: boolean;
  /** Server-suggested wait before retrying (Retry-After header or JsCantonError `retryInfo`). */
  readonly retryAfterMs?: number;
  /** The request may have taken effect although it failed (non-idempotent call, outcome unknown). */
  readonly ambiguous: boolean;
  /** Server explanation (JsCantonError cause, Splice error, plain-text body, socket error code), one line, truncated. */
  readonly detail?: string;

  constructor(init: CantonApiErrorInit) {
    const path = oneLine(init.path.split('?')[0] ?? '');
    const note = init.note ? ` (${oneLine(init.note)})` : '';
    super(
      `${init.service} ${init.method} ${path} failed: status ${init.status}, code ${oneLine(init.code)}${note}`,
    );
    this.status = init.status;
    this.service = init.service;
    this.method = init.method;
    this.path = path;
    this.code = init.code;
    if (init.category !== undefined) this.category = init.category;
    if (init.cantonError !== undefined) this.cantonError = init.cantonError;
    if (init.spliceError !== undefined) this.spliceError = init.spliceError;
    this.retryable = init.retryable;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
    this.ambiguous = init.ambiguous;
    if (init.detail !== undefined) this.detail = truncate(oneLine(init.detail), 1000);
  }
}

export function isCantonApiError(e: unknown): e is CantonApiError {
  return e instanceof CantonApiError;
}

/**
 * The service did not answer, or said it is unavailable for now: a connection
 * error or timeout (not a TLS failure), a gateway's 502/503/504, 429 (too
 * busy), or Canton's TransientServerFailure. Nothing is wrong with the
 * request itself: waiting for the service and asking again is the answer.
 */
export function isUnavailable(e: unknown): boolean {
  if (!(e instanceof CantonApiError)) return false;
  if (e.status === 0) return e.retryable;
  return [429, 502, 503, 504].includes(e.status) || e.category === 'TransientServerFailure';
}

/**
 * The Canton service refused the credentials this signer presented, or their
 * rights (401, 403, or a JsCantonError of the authentication or permission
 * category): the request was not processed, and the answer says nothing about
 * what was asked — the token this signer uses for that service must change.
 */
export function isAccessDenied(e: unknown): boolean {
  return (
    isCantonApiError(e) &&
    (e.status === 401 ||
      e.status === 403 ||
      e.category === 'AuthInterceptorInvalidAuthenticationCredentials' ||
      e.category === 'InsufficientPermission')
  );
}

const SERVICE_NAMES: Record<CantonService, string> = {
  'ledger-api': "the participant's Ledger API",
  validator: 'the validator API',
  scan: 'Scan',
  registry: 'the token registry',
  oauth: 'the OAuth token endpoint',
};

/**
 * One sentence for a person: which Canton service answered what (status and
 * code, its own explanation when it gave one), and what to do next.
 */
export function upstreamSentence(e: CantonApiError): string {
  const name = `${SERVICE_NAMES[e.service]} (${e.service})`;
  const said = e.detail ? `: ${e.detail}` : '';
  if (e.status === 0)
    return `${name} gave no answer to ${e.method} ${e.path} (code ${e.code}${said}) — check that it is running and reachable at the configured URL, then retry`;
  const head = `${name} answered ${e.method} ${e.path} with status ${e.status}, code ${e.code}${said}`;
  if (isAccessDenied(e))
    return `${head} — the token this signer uses for ${e.service} is refused: check that it is valid and that its user has the rights this needs (act and read as the party; participant_admin to onboard a party)`;
  return `${head} — check ${e.service}'s state and logs, then retry`;
}

export { oneLine };

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

const UNIT_MS = new Map<string, number>(
  Object.entries({
    ns: 1e-6,
    nanosecond: 1e-6,
    us: 1e-3,
    µs: 1e-3,
    microsecond: 1e-3,
    ms: 1,
    milli: 1,
    millisecond: 1,
    s: 1000,
    sec: 1000,
    second: 1000,
    m: 60_000,
    min: 60_000,
    minute: 60_000,
    h: 3_600_000,
    hour: 3_600_000,
    d: 86_400_000,
    day: 86_400_000,
  }),
);

/**
 * Parse a JsCantonError `retryInfo` (a Scala `Duration.toString`: `"1 second"`,
 * `"500 milliseconds"`, `"2 minutes"`) into milliseconds; `undefined` if not understood.
 */
export function parseRetryInfo(s: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zµ]+)\s*$/i.exec(s);
  if (!m) return undefined;
  const word = m[2]!.toLowerCase();
  const unit = UNIT_MS.get(word) ?? (word.endsWith('s') ? UNIT_MS.get(word.slice(0, -1)) : undefined);
  if (unit === undefined) return undefined;
  const ms = Number(m[1]) * unit;
  return Number.isFinite(ms) ? Math.ceil(ms) : undefined;
}

/** Parse an HTTP `Retry-After` header (delta-seconds or HTTP-date) into milliseconds from `now`. */
export function parseRetryAfter(header: string | null | undefined, now = Date.now()): number | undefined {
  if (header == null) return undefined;
  const v = header.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

export interface HttpErrorInput {
  service: CantonService;
  method: string;
  path: string;
  status: number;
  /** Raw response body text (possibly empty). */
  body: string;
  /** `Retry-After` header value, if any. */
  retryAfter?: string | null | undefined;
  idempotent: boolean;
}

/**
 * Classify a non-success HTTP response: JsCantonError body (Ledger API), Splice
 * `{error}` body, or anything else (plain text, HTML from a proxy, empty).
 */
export function errorFromResponse(input: HttpErrorInput): CantonApiError {
  const { status } = input;
  let json: unknown;
  try {
    json = input.body.length > 0 ? JSON.parse(input.body) : undefined;
  } catch {
    json = undefined;
  }
  const canton = JsCantonErrorSchema.safeParse(json);
  const cantonError = canton.success ? canton.data : undefined;
  const splice = cantonError ? undefined : SpliceErrorSchema.safeParse(json);
  const spliceError = splice?.success ? splice.data.error : undefined;

  const category = cantonError ? ERROR_CATEGORIES[cantonError.errorCategory] : undefined;
  const headerDelay = parseRetryAfter(input.retryAfter);
  const infoDelay = cantonError?.retryInfo !== undefined ? parseRetryInfo(cantonError.retryInfo) : undefined;
  const retryAfterMs = headerDelay ?? infoDelay;

  const retryable =
    status !== 401 &&
    status !== 403 &&
    (RETRYABLE_STATUS.has(status) || category?.retryable === true || cantonError?.retryInfo !== undefined);

  // A Splice/Pekko request timeout answers 503 while the handler may still run.
  const serverTimeout = status === 503 && /taking too long to respond/i.test(spliceError ?? input.body);
  // `definiteAnswer: true` is the node saying the request was definitely not carried out; `false`
  // is Canton's default on most errors and says nothing, so the status and category decide.
  const stateUnknown =
    cantonError?.definiteAnswer !== true &&
    (STATE_UNKNOWN_STATUS.has(status) || category?.stateUnknown === true || serverTimeout);

  let code: string;
  if (cantonError) code = cantonError.code;
  else if (status === 401) code = 'UNAUTHENTICATED';
  else code = `HTTP_${status}`;

  const plain = !cantonError && spliceError === undefined && json === undefined ? input.body : undefined;
  return new CantonApiError({
    status,
    service: input.service,
    method: input.method,
    path: input.path,
    code,
    category: category?.name ?? (cantonError ? `category ${cantonError.errorCategory}` : undefined),
    cantonError,
    spliceError,
    retryable,
    retryAfterMs,
    ambiguous: stateUnknown && !input.idempotent,
    detail: cantonError?.cause ?? spliceError ?? (plain ? plain : undefined),
  });
}

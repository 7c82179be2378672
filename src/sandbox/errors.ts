/**
 * Error responses of the sandbox network, shaped like the real services':
 * Canton's `JsCantonError` (Ledger API; HTTP status from the error category's
 * gRPC code) and Splice's `{error}` (validator, Scan, registry).
 */
import { randomUUID } from 'node:crypto';

/** gRPC status codes by name. */
export const GRPC = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

/** Daml error category number → the gRPC code Canton reports for it (com.daml.error.ErrorCategory). */
const CATEGORY_GRPC: Readonly<Record<number, number>> = {
  1: GRPC.UNAVAILABLE,
  2: GRPC.ABORTED,
  3: GRPC.DEADLINE_EXCEEDED,
  4: GRPC.INTERNAL,
  5: GRPC.INVALID_ARGUMENT, // SecurityAlert: details are redacted for clients, the status is a 400
  6: GRPC.UNAUTHENTICATED,
  7: GRPC.PERMISSION_DENIED,
  8: GRPC.INVALID_ARGUMENT,
  9: GRPC.FAILED_PRECONDITION,
  10: GRPC.ALREADY_EXISTS,
  11: GRPC.NOT_FOUND,
  12: GRPC.OUT_OF_RANGE,
  13: GRPC.INTERNAL,
  14: GRPC.UNIMPLEMENTED,
};

/** The JSON Ledger API's gRPC → HTTP status mapping. */
export function httpStatusOfGrpc(code: number): number {
  switch (code) {
    case GRPC.INVALID_ARGUMENT:
    case GRPC.FAILED_PRECONDITION:
    case GRPC.OUT_OF_RANGE:
      return 400;
    case GRPC.UNAUTHENTICATED:
      return 401;
    case GRPC.PERMISSION_DENIED:
      return 403;
    case GRPC.NOT_FOUND:
      return 404;
    case GRPC.ABORTED:
    case GRPC.ALREADY_EXISTS:
      return 409;
    case GRPC.RESOURCE_EXHAUSTED:
      return 429;
    case GRPC.CANCELLED:
      return 499;
    case GRPC.UNIMPLEMENTED:
      return 501;
    case GRPC.UNAVAILABLE:
      return 503;
    case GRPC.DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

/** Body of a Ledger API error (component `JsCantonError`). */
export interface JsCantonErrorBody {
  code: string;
  cause: string;
  correlationId: string;
  traceId: string;
  context: Record<string, string>;
  resources: [string, string][];
  errorCategory: number;
  grpcCodeValue: number;
  retryInfo?: string;
  definiteAnswer?: boolean;
}

export interface CantonErrorOptions {
  context?: Record<string, string>;
  resources?: [string, string][];
  /** Suggested retry delay in ms (categories 1, 2, 3, 12), rendered like Scala's Duration. */
  retryAfterMs?: number;
  definiteAnswer?: boolean;
}

/** An error the sandbox answers with; routes throw it, the server renders it. */
export class SandboxError extends Error {
  override readonly name = 'SandboxError';
  readonly status: number;
  readonly body: JsCantonErrorBody | { error: string };
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    body: JsCantonErrorBody | { error: string },
    headers: Record<string, string> = {},
  ) {
    super('code' in body ? `${body.code}: ${body.cause}` : body.error);
    this.status = status;
    this.body = body;
    this.headers = headers;
  }

  /** Canton error id (`code`) or, for Splice errors, `undefined`. */
  get code(): string | undefined {
    return 'code' in this.body ? this.body.code : undefined;
  }

  /** gRPC status code (for completions); Splice errors map back from their HTTP status. */
  get grpcCode(): number {
    if ('code' in this.body) return this.body.grpcCodeValue;
    const byStatus: Record<number, number> = { 400: 3, 404: 5, 409: 6, 429: 10, 501: 12, 503: 14 };
    return byStatus[this.status] ?? GRPC.INTERNAL;
  }
}

/** A Ledger API error with Canton's code, category and cause. */
export function cantonError(
  code: string,
  category: number,
  cause: string,
  opts: CantonErrorOptions = {},
): SandboxError {
  const grpc = CATEGORY_GRPC[category] ?? GRPC.INTERNAL;
  const correlationId = randomUUID();
  const body: JsCantonErrorBody = {
    code,
    cause,
    correlationId,
    traceId: correlationId.replaceAll('-', ''),
    context: { ...(opts.context ?? {}) },
    resources: opts.resources ?? [],
    errorCategory: category,
    grpcCodeValue: grpc,
  };
  const headers: Record<string, string> = {};
  if (opts.retryAfterMs !== undefined) {
    body.retryInfo = scalaDuration(opts.retryAfterMs);
    headers['retry-after'] = String(Math.max(1, Math.ceil(opts.retryAfterMs / 1000)));
  }
  if (opts.definiteAnswer !== undefined) body.definiteAnswer = opts.definiteAnswer;
  return new SandboxError(httpStatusOfGrpc(grpc), body, headers);
}

/** Scala `FiniteDuration.toString` as Canton puts it in `retryInfo`, e.g. `1 second`, `500 milliseconds`. */
export function scalaDuration(ms: number): string {
  if (ms % 1000 === 0) {
    const s = ms / 1000;
    return `${s} ${s === 1 ? 'second' : 'seconds'}`;
  }
  return `${ms} ${ms === 1 ? 'millisecond' : 'milliseconds'}`;
}

/** A Splice (validator, Scan, registry) error: `{"error": message}`. */
export function spliceError(
  status: number,
  message: string,
  headers: Record<string, string> = {},
): SandboxError {
  return new SandboxError(status, { error: message }, headers);
}

/** Canton error ids and categories the sandbox uses (ids as in Canton's error groups). */
export const E = {
  invalidArgument: (cause: string) =>
    cantonError('INVALID_ARGUMENT', 8, `The submitted request has invalid arguments: ${cause}`),
  invalidField: (field: string, why: string) =>
    cantonError(
      'INVALID_FIELD',
      8,
      `The submitted command has a field with invalid value: Invalid field ${field}: ${why}`,
    ),
  missingField: (field: string) =>
    cantonError('MISSING_FIELD', 8, `The submitted command is missing a mandatory field: ${field}`),
  /** `reason` (never the token) goes to the body's context: the cause is Canton's fixed text. */
  unauthenticated: (reason?: string) =>
    cantonError('UNAUTHENTICATED', 6, 'The command is missing a (valid) JWT token', {
      definiteAnswer: false,
      ...(reason !== undefined ? { context: { reason } } : {}),
    }),
  permissionDenied: (why: string) =>
    cantonError(
      'PERMISSION_DENIED',
      7,
      `The provided JWT token is not sufficient to authorize the intended command: ${why}`,
    ),
  failedToPrepare: (cause: string) => cantonError('FAILED_TO_PREPARE_TRANSACTION', 8, cause),
  failedToExecute: (cause: string, context: Record<string, string> = {}) =>
    cantonError('FAILED_TO_EXECUTE_TRANSACTION', 8, cause, { context, definiteAnswer: false }),
} as const;

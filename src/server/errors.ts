/**
 * The service's error body, `{ code, message, field?, ... }`, and the one
 * error handler that maps every error the service can meet to it: request
 * validation (400 with the offending field), authentication (401/403, from
 * auth.ts), the store (404/409/400), the pipeline's refusals (422, or 400 for
 * a bad request; `reason` and each problem kept), the key backends, the
 * Canton services behind us (502, their code kept), fastify's own (body too
 * large, wrong media type) and anything else (500 with no detail: a message
 * from an unexpected error could carry what must not leave the process).
 * Codes are stable; messages are for people.
 */
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isCantonApiError, upstreamSentence } from '../canton/errors.js';
import { AwaitingSignature } from '../flows/air-gap.js';
import { Refusal } from '../flows/refusal.js';
import { KeyError } from '../keys/backend.js';
import { AirGapError } from '../offline/format.js';
import { PolicyError } from '../policy/document.js';
import { PolicyEngineError } from '../policy/engine.js';
import { AwaitingApproval } from '../policy/hook.js';
import { StoreError } from '../store/errors.js';
import { AuthError } from './auth.js';
import { RequestValidationError } from './schema.js';

/** The largest request head (request line and headers) the HTTP server reads: room for a large JWT. */
export const MAX_HEADER_BYTES = 64 * 1024;

export interface ErrorBody {
  code: string;
  message: string;
  field?: string;
  [extra: string]: unknown;
}

/** An error a handler throws on purpose: status, stable code, message, offending field. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const STORE_STATUS: Record<StoreError['code'], number> = {
  idempotency_conflict: 409,
  invalid_state: 409,
  not_found: 404,
  bad_request: 400,
  schema: 500,
};

const REFUSAL_STATUS: Partial<Record<Refusal['reason'], number>> = {
  bad_request: 400,
  outcome_unknown: 502,
};

const KEY_STATUS: Partial<Record<KeyError['code'], number>> = {
  key_not_found: 404,
  key_exists: 409,
  invalid_label: 400,
  unsupported_scheme: 400,
  invalid_key_material: 400,
  key_disabled: 409,
  mechanism_missing: 400,
  invalid_message: 400,
  offline_key: 400,
  awaiting_offline_signature: 409,
};
/**
 * Every other key error (backend_unavailable, wrong_passphrase, keystore_io, tampered_key_file,
 * hsm_error, pin_locked, token_not_found, …) is the key backend failing the service — or missing
 * from its configuration — not the request: 503 with the
 * backend's code, so that a client can tell "the keys are unavailable" from a bug. Key errors
 * never carry secrets (the backends word them so).
 */
const KEY_BACKEND_FAILED = 503;

const AIR_GAP_STATUS: Partial<Record<AirGapError['code'], number>> = {
  malformed: 400,
  unknown_request: 404,
  nonce_replayed: 409,
  window_closed: 409,
  // A cold party's request cannot be exported before an admin created the export key.
  export_key_missing: 409,
};

/**
 * fastify's own refusals whose message would echo the URL (which may be long,
 * or carry what a caller did not mean to have logged) or says too little: a
 * sentence of ours instead, with the status fastify chose.
 */
const FRAMEWORK_MESSAGES: Record<string, { status: number; message: string }> = {
  FST_ERR_BAD_URL: {
    status: 400,
    message:
      'the URL path is not valid percent-encoding (a "%" must be followed by two hex digits of UTF-8): encode each path segment, e.g. with encodeURIComponent',
  },
  FST_ERR_MAX_PARAM_LENGTH: {
    status: 414,
    message:
      'a path segment is longer than 1024 characters: no party id, contract id, label or other id of this API is that long',
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    message: 'the body is of a media type this service does not read: send Content-Type: application/json',
  },
};

/** Maps an error to its status and body. Exposed for tests and for the engine's stored errors. */
export function errorBody(err: unknown): { status: number; body: ErrorBody } {
  if (err instanceof ApiError)
    return {
      status: err.statusCode,
      body: {
        code: err.code,
        message: err.message,
        ...(err.field ? { field: err.field } : {}),
        ...err.extra,
      },
    };
  if (err instanceof RequestValidationError)
    return { status: 400, body: { code: 'invalid_request', message: err.message, field: err.field } };
  if (err instanceof AuthError)
    return { status: err.statusCode, body: { code: err.code, message: err.message } };
  if (err instanceof StoreError)
    return {
      status: STORE_STATUS[err.code],
      body: { code: err.code, message: err.message, ...(err.field ? { field: err.field } : {}) },
    };
  if (err instanceof Refusal) {
    const r = err.toJSON();
    return {
      status: REFUSAL_STATUS[err.reason] ?? 422,
      body: {
        code: err.reason === 'bad_request' ? 'bad_request' : 'refused',
        reason: r.reason,
        message: r.message,
        problems: r.problems,
        details: r.details,
      },
    };
  }
  if (err instanceof AwaitingSignature)
    // Not an error for the caller: the request is across the air gap (202 Accepted, with the export to carry).
    return {
      status: 202,
      body: {
        code: 'awaiting_offline_signature',
        message: err.message,
        exportId: err.exportId,
        hashes: [...err.hashes],
        windowLatest: err.windowLatest,
      },
    };
  if (err instanceof AwaitingApproval)
    // Not an error either: people must approve it first (202 Accepted, with the request to follow).
    return {
      status: 202,
      body: {
        code: 'awaiting_approval',
        message: err.message,
        approvalRequest: err.requestId,
        missing: err.missing.map((m) => ({ ...m })),
        expiresAt: err.expiresAt,
        policy: { ...err.policy },
      },
    };
  if (err instanceof PolicyEngineError)
    return { status: err.status, body: { code: err.code, message: err.message } };
  if (err instanceof PolicyError)
    return {
      status: 422,
      body: { code: 'invalid_policy', message: err.message, problems: err.problems.map((p) => ({ ...p })) },
    };
  if (err instanceof AirGapError)
    return {
      status: AIR_GAP_STATUS[err.code] ?? 422,
      body: { code: err.code, message: err.message, ...(err.field ? { field: err.field } : {}) },
    };
  if (err instanceof KeyError)
    return {
      status: KEY_STATUS[err.code] ?? KEY_BACKEND_FAILED,
      body: { code: err.code, message: err.message },
    };
  if (isCantonApiError(err))
    // Also our own credentials refused (401/403 from the participant): the service failed us, not the request.
    return {
      status: 502,
      body: {
        code: 'upstream_error',
        message: upstreamSentence(err),
        upstream: err.service,
        upstreamStatus: err.status,
        upstreamCode: err.code,
      },
    };
  const fe = err as Partial<FastifyError>;
  const framework = typeof fe.code === 'string' ? FRAMEWORK_MESSAGES[fe.code] : undefined;
  if (framework)
    return { status: framework.status, body: { code: 'invalid_request', message: framework.message } };
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500)
    return {
      status: fe.statusCode,
      body: { code: 'invalid_request', message: fe.message ?? 'invalid request' },
    };
  return { status: 500, body: { code: 'internal', message: 'internal error (see the service log)' } };
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const { status, body } = errorBody(err);
    if (status >= 500) req.log.error({ err }, 'request failed');
    else req.log.info({ code: body.code, field: body.field }, 'request refused');
    return reply.status(status).send(body);
  });
  app.setNotFoundHandler((req, reply) =>
    reply
      .status(404)
      .send({ code: 'not_found', message: `no route ${req.method} ${req.url.split('?')[0] ?? ''}` }),
  );
}

/**
 * fastify's `frameworkErrors`: a bad URL encoding or an over-long path
 * parameter is found before routing, so before the hooks that set the
 * headers every answer carries: set them here, then answer as the error
 * handler would.
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const { status, body } = errorBody(err);
  req.log.info({ code: body.code, fastifyCode: err.code }, 'request refused');
  void reply.header('x-request-id', req.id).header('cache-control', 'no-store').status(status).send(body);
}

/**
 * The HTTP server's `clientError`: a request Node's parser refused before
 * fastify saw it (headers over `maxHeaderSize`, malformed HTTP, a timeout).
 * Answered in the service's error format with its headers, naming none of
 * what was sent, and the connection closed.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // An answer already under way on this connection cannot be followed by another.
  const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (answering?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, text, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [
          431,
          'Request Header Fields Too Large',
          `the request's headers are larger than ${MAX_HEADER_BYTES / 1024} KiB: send a shorter token or fewer headers`,
        ]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'the request was not received in time: send it again']
        : [400, 'Bad Request', 'the request is not well-formed HTTP/1.1'];
  const body = JSON.stringify({ code: 'invalid_request', message });
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${randomUUID()}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
    );
  socket.destroy();
}

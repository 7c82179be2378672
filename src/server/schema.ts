/**
 * Route schemas written once, in zod: `s(zodSchema)` gives the JSON Schema
 * (OpenAPI 3.0 dialect) fastify puts in the route table and @fastify/swagger
 * publishes, and remembers the zod schema behind it; `installZod` makes
 * fastify validate each request part with that zod schema (so a request is
 * checked by exactly the rules the OpenAPI document shows, and handlers get
 * zod's output: defaults filled, strings trimmed where the schema says so).
 * A failed validation is a `RequestValidationError` naming the first bad
 * field (`body.amount`, `query.limit`, `params.id`, `headers.idempotency-key`).
 * Responses are serialised with JSON.stringify: response schemas document,
 * they do not filter. Before any of that, every text of the query, the path
 * and the body (names too) is checked once for what the database cannot
 * store — U+0000 and lone UTF-16 surrogates, both valid in JSON and in a
 * URL — and refused the same way, naming the field.
 */
import type { FastifyInstance } from 'fastify';
import { type ZodType, z } from 'zod';
import { unstorableText } from '../store/canonical.js';

const ZOD = new WeakMap<object, ZodType>();

/** JSON Schema of `schema` for a route's `schema.{body,querystring,params,headers,response}`. */
export function s(schema: ZodType): Record<string, unknown> {
  const json = z.toJSONSchema(schema, {
    target: 'openapi-3.0',
    io: 'input',
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  delete json.$schema;
  ZOD.set(json, schema);
  return json;
}

/** JSON Schema of a response body (the output side of the zod schema). */
export function out(schema: ZodType, description?: string): Record<string, unknown> {
  const json = z.toJSONSchema(schema, {
    target: 'openapi-3.0',
    io: 'output',
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  delete json.$schema;
  return description ? { description, ...json } : json;
}

const PART: Record<string, string> = {
  body: 'body',
  querystring: 'query',
  params: 'params',
  headers: 'headers',
};

export class RequestValidationError extends Error {
  override readonly name = 'RequestValidationError';
  readonly statusCode = 400;
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

function fieldOf(part: string, path: readonly PropertyKey[]): string {
  return [part, ...path.map((p) => String(p))].join('.');
}

/** The field of the first text in `value` (a parsed request part) the database could not store. */
export function unstorableField(part: string, value: unknown, path: string[] = []): string | undefined {
  if (typeof value === 'string') return unstorableText(value) ? fieldOf(part, path) : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const f = unstorableField(part, v, [...path, String(i)]);
      if (f) return f;
    }
    return undefined;
  }
  for (const [k, v] of Object.entries(value)) {
    // A bad name is reported as the field it would have been.
    if (unstorableText(k)) return fieldOf(part, [...path, JSON.stringify(k).slice(1, -1)]);
    const f = unstorableField(part, v, [...path, k]);
    if (f) return f;
  }
  return undefined;
}

/** Installs zod validation for every schema made with `s()`; other schemas are refused at startup. */
export function installZod(app: FastifyInstance): void {
  // For every route, schema or not: a handler may read a part its schema does not declare.
  app.addHook('preValidation', async (request) => {
    for (const [part, value] of [
      ['params', request.params],
      ['query', request.query],
      ['body', request.body],
    ] as const) {
      const field = unstorableField(part, value);
      if (field)
        throw new RequestValidationError(
          field,
          `${field}: holds a character this service does not accept (U+0000, or half of a UTF-16 surrogate pair); send valid Unicode text`,
        );
    }
  });
  app.setValidatorCompiler(({ schema, httpPart, url, method }) => {
    const zs = ZOD.get(schema as object);
    if (!zs)
      throw new Error(
        `${method} ${url}: the ${httpPart} schema was not made with s() (src/server/schema.ts)`,
      );
    const part = PART[httpPart ?? 'body'] ?? httpPart ?? 'body';
    return (data: unknown) => {
      const r = zs.safeParse(data ?? (part === 'body' ? undefined : {}));
      if (r.success) return { value: r.data };
      const issue = r.error.issues[0];
      const field = fieldOf(part, issue?.path ?? []);
      return { error: new RequestValidationError(field, `${field}: ${issue?.message ?? 'invalid'}`) };
    };
  });
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
}

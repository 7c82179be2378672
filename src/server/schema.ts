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
 * they do not filter.
 */
import type { FastifyInstance } from 'fastify';
import { type ZodType, z } from 'zod';

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

/** Installs zod validation for every schema made with `s()`; other schemas are refused at startup. */
export function installZod(app: FastifyInstance): void {
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

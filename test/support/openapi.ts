/**
 * TESTS ONLY: check values against the component schemas of the published
 * OpenAPI 3.0 documents in shared/specs (Canton JSON Ledger API, Splice).
 *
 * Supports the JSON-schema subset those documents use: type (+ OpenAPI 3.0
 * `nullable`, also next to a `$ref`), properties, required, additionalProperties,
 * items, minItems/maxItems, enum, oneOf (+ discriminator), anyOf, allOf, not,
 * minimum/maximum, minLength/maxLength/pattern, local `$ref`s. `format` is an
 * annotation except `int32` (range) and `int64` on strings (decimal digits).
 * Any other validation keyword makes the validator throw instead of passing silently.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/** The published specs (`../shared/specs` beside the repository, or `$CANTON_SPECS_DIR`). */
export const SPECS_DIR =
  process.env.CANTON_SPECS_DIR ?? fileURLToPath(new URL('../../../shared/specs/', import.meta.url));

export type Schema = { [keyword: string]: unknown };

export interface OpenApiSpec {
  openapi: string;
  components: { schemas: Record<string, Schema> };
  [key: string]: unknown;
}

/** Keywords that only annotate. */
const ANNOTATIONS = new Set([
  'title',
  'description',
  'example',
  'examples',
  'default',
  'deprecated',
  'readOnly',
  'writeOnly',
  'externalDocs',
  'xml',
  'format',
]);
/** Keywords this validator enforces. */
const ENFORCED = new Set([
  '$ref',
  'type',
  'nullable',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'minItems',
  'maxItems',
  'enum',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'discriminator',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'pattern',
]);

const cache = new Map<string, OpenApiSpec>();

/** Parse an OpenAPI 3.0 YAML document (cached by path; treat the result as read-only). */
export function loadSpec(path: string): OpenApiSpec {
  const hit = cache.get(path);
  if (hit) return hit;
  const doc = parse(readFileSync(path, 'utf8'), { maxAliasCount: -1 }) as unknown;
  if (!isObject(doc) || typeof doc.openapi !== 'string' || !/^3\.0\./.test(doc.openapi)) {
    throw new Error(`${path}: not an OpenAPI 3.0 document`);
  }
  const components = doc.components;
  if (!isObject(components) || !isObject(components.schemas)) {
    throw new Error(`${path}: no components.schemas`);
  }
  cache.set(path, doc as OpenApiSpec);
  return doc as OpenApiSpec;
}

/**
 * What would stop this validator from checking the spec's component schemas
 * faithfully: keywords it does not know, `$ref`s that do not resolve.
 */
export function specProblems(spec: OpenApiSpec): string[] {
  const found = new Set<string>();
  const walk = (s: unknown, where: string): void => {
    if (!isObject(s)) return;
    for (const [k, v] of Object.entries(s)) {
      if (k.startsWith('x-')) continue;
      if (!ENFORCED.has(k) && !ANNOTATIONS.has(k)) found.add(`${where}: unsupported keyword ${k}`);
      if (k === '$ref') {
        try {
          resolveRef(spec, String(v));
        } catch {
          found.add(`${where}: unresolved $ref ${String(v)}`);
        }
      }
      if (k === 'discriminator' && isObject(v) && isObject(v.mapping)) {
        for (const target of Object.values(v.mapping)) {
          try {
            resolveRef(spec, String(target));
          } catch {
            found.add(`${where}: unresolved discriminator mapping ${String(target)}`);
          }
        }
      }
      if (k === 'properties' && isObject(v)) {
        for (const [p, ps] of Object.entries(v)) walk(ps, `${where}.${p}`);
      } else if ((k === 'items' || k === 'additionalProperties' || k === 'not') && isObject(v)) {
        walk(v, `${where}/${k}`);
      } else if ((k === 'oneOf' || k === 'anyOf' || k === 'allOf') && Array.isArray(v)) {
        v.forEach((b, i) => {
          walk(b, `${where}/${k}[${i}]`);
        });
      }
    }
  };
  for (const [name, s] of Object.entries(spec.components.schemas)) walk(s, name);
  return [...found].sort();
}

/** Problems of `value` against `#/components/schemas/<componentName>`; empty when valid. */
export function validateAgainst(spec: OpenApiSpec, componentName: string, value: unknown): string[] {
  const schema = spec.components.schemas[componentName];
  if (!schema) throw new Error(`no component schema ${componentName}`);
  const problems: string[] = [];
  check(spec, schema, value, '$', problems);
  return problems;
}

function resolveRef(spec: OpenApiSpec, ref: string): Schema {
  if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported: ${ref}`);
  let cur: unknown = spec;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    cur = isObject(cur) ? cur[key] : undefined;
  }
  if (!isObject(cur)) throw new Error(`unresolved $ref ${ref}`);
  return cur;
}

function check(spec: OpenApiSpec, schema: Schema, value: unknown, at: string, problems: string[]): void {
  for (const k of Object.keys(schema)) {
    if (!ENFORCED.has(k) && !ANNOTATIONS.has(k) && !k.startsWith('x-')) {
      throw new Error(`openapi validator: unsupported keyword "${k}" at ${at}`);
    }
  }

  if (value === null && schema.nullable === true) return;

  if (typeof schema.$ref === 'string') {
    // OpenAPI 3.0 ignores siblings of $ref; the Splice specs still put `nullable` there
    // and mean it, which is honoured above. Other siblings are annotations.
    check(spec, resolveRef(spec, schema.$ref), value, at, problems);
    return;
  }

  const type = schema.type;
  if (value === null) {
    if (type !== undefined || schema.enum !== undefined) problems.push(`${at}: null is not allowed`);
    else checkCombinators(spec, schema, value, at, problems);
    return;
  }
  if (type !== undefined) {
    if (typeof type !== 'string') throw new Error(`openapi validator: type must be a string at ${at}`);
    const actual = typeOf(value);
    const matches = actual === type || (type === 'number' && actual === 'integer');
    if (!matches) {
      problems.push(`${at}: expected ${type}, got ${actual}`);
      return;
    }
  }

  if (Array.isArray(schema.enum) && !schema.enum.some((e) => e === value)) {
    problems.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  }

  if (typeof value === 'number') {
    if (schema.format === 'int32' && (value < -(2 ** 31) || value > 2 ** 31 - 1)) {
      problems.push(`${at}: ${value} is out of int32 range`);
    }
    if (typeof schema.minimum === 'number' && value < schema.minimum) {
      problems.push(`${at}: ${value} < minimum ${schema.minimum}`);
    }
    if (typeof schema.maximum === 'number' && value > schema.maximum) {
      problems.push(`${at}: ${value} > maximum ${schema.maximum}`);
    }
  }

  if (typeof value === 'string') {
    if (schema.format === 'int64' && !/^-?\d+$/.test(value)) problems.push(`${at}: not an int64 string`);
    if (typeof schema.minLength === 'number' && value.length < schema.minLength) {
      problems.push(`${at}: shorter than ${schema.minLength}`);
    }
    if (typeof schema.maxLength === 'number' && value.length > schema.maxLength) {
      problems.push(`${at}: longer than ${schema.maxLength}`);
    }
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) {
      problems.push(`${at}: does not match ${schema.pattern}`);
    }
  }

  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) {
      problems.push(`${at}: fewer than ${schema.minItems} items`);
    }
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) {
      problems.push(`${at}: more than ${schema.maxItems} items`);
    }
    if (isObject(schema.items)) {
      const items = schema.items;
      value.forEach((v, i) => {
        check(spec, items, v, `${at}[${i}]`, problems);
      });
    }
  }

  if (isObject(value) && !Array.isArray(value)) {
    const props = isObject(schema.properties) ? schema.properties : {};
    if (Array.isArray(schema.required)) {
      for (const r of schema.required) {
        if (typeof r === 'string' && !Object.hasOwn(value, r))
          problems.push(`${at}: missing required "${r}"`);
      }
    }
    for (const [k, v] of Object.entries(value)) {
      const p = props[k];
      if (isObject(p)) check(spec, p, v, `${at}.${k}`, problems);
      else if (schema.additionalProperties === false) problems.push(`${at}: unexpected property "${k}"`);
      else if (isObject(schema.additionalProperties)) {
        check(spec, schema.additionalProperties, v, `${at}.${k}`, problems);
      }
    }
  }

  checkCombinators(spec, schema, value, at, problems);
}

function checkCombinators(
  spec: OpenApiSpec,
  schema: Schema,
  value: unknown,
  at: string,
  problems: string[],
): void {
  if (Array.isArray(schema.allOf)) {
    for (const s of schema.allOf) check(spec, asSchema(s, at), value, at, problems);
  }
  if (Array.isArray(schema.anyOf)) {
    const results = schema.anyOf.map((s) => sub(spec, asSchema(s, at), value, at));
    if (!results.some((r) => r.length === 0)) {
      problems.push(`${at}: matches none of anyOf (${summarise(results)})`);
    }
  }
  if (Array.isArray(schema.oneOf)) {
    const disc = schema.discriminator;
    if (isObject(disc)) {
      checkDiscriminated(spec, disc, value, at, problems);
    } else {
      const results = schema.oneOf.map((s) => sub(spec, asSchema(s, at), value, at));
      const ok = results.filter((r) => r.length === 0).length;
      if (ok === 0) problems.push(`${at}: matches none of oneOf (${summarise(results)})`);
      else if (ok > 1) problems.push(`${at}: matches ${ok} branches of oneOf, exactly one expected`);
    }
  }
  if (isObject(schema.not) && sub(spec, schema.not, value, at).length === 0) {
    problems.push(`${at}: must not match the "not" schema`);
  }
}

/** oneOf + discriminator: the discriminator property picks the one branch to check. */
function checkDiscriminated(
  spec: OpenApiSpec,
  disc: Schema,
  value: unknown,
  at: string,
  problems: string[],
): void {
  const prop = disc.propertyName;
  if (typeof prop !== 'string')
    throw new Error(`openapi validator: discriminator without propertyName at ${at}`);
  if (!isObject(value) || Array.isArray(value)) {
    problems.push(`${at}: expected object with discriminator "${prop}"`);
    return;
  }
  const tag = value[prop];
  if (typeof tag !== 'string') {
    problems.push(`${at}: discriminator "${prop}" missing or not a string`);
    return;
  }
  const mapping = isObject(disc.mapping) ? disc.mapping : {};
  const target = Object.hasOwn(mapping, tag) ? mapping[tag] : `#/components/schemas/${tag}`;
  if (typeof target !== 'string' || !isObject(spec.components.schemas[target.split('/').pop() ?? ''])) {
    problems.push(`${at}: unknown discriminator value ${JSON.stringify(tag)} for "${prop}"`);
    return;
  }
  check(spec, resolveRef(spec, target), value, at, problems);
}

function sub(spec: OpenApiSpec, schema: Schema, value: unknown, at: string): string[] {
  const out: string[] = [];
  check(spec, schema, value, at, out);
  return out;
}

function summarise(results: string[][]): string {
  return results.map((r, i) => `#${i}: ${r[0] ?? 'ok'}`).join('; ');
}

function asSchema(s: unknown, at: string): Schema {
  if (!isObject(s)) throw new Error(`openapi validator: non-object subschema at ${at}`);
  return s;
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  if (typeof v === 'bigint') return 'integer';
  return typeof v;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

/**
 * Renderings of decoded values shared by everything that shows a transaction
 * (the inspect report, the intent checks, the sandbox): template names,
 * timestamps and dates as ISO-8601, and values as Daml-style JSON.
 */
import type { Identifier, Value } from './model.js';

export type JsonValue = null | boolean | string | JsonValue[] | { [k: string]: JsonValue };

export function templateName(packageName: string, id: Identifier): string {
  return `${packageName || id.packageId}:${id.moduleName}:${id.entityName}`;
}

// ---- times ---------------------------------------------------------------------

const MAX_DATE_MS = 8.64e15;

/** Microseconds since the epoch as ISO-8601 with 6 fraction digits (raw number if out of range). */
export function isoMicros(us: bigint): string {
  let sec = us / 1_000_000n;
  let micro = us % 1_000_000n;
  if (micro < 0n) {
    micro += 1_000_000n;
    sec -= 1n;
  }
  const ms = Number(sec) * 1000;
  if (!Number.isFinite(ms) || Math.abs(ms) > MAX_DATE_MS) return `${us}µs`;
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, -5)}.${micro.toString().padStart(6, '0')}Z`;
}

function isoDate(days: number): string {
  const ms = days * 86_400_000;
  if (Math.abs(ms) > MAX_DATE_MS) return `${days}d`;
  return new Date(ms).toISOString().slice(0, 10);
}

// ---- values --------------------------------------------------------------------

/**
 * JSON rendering close to Daml's JSON encoding: records as objects by label,
 * numerics and int64 as strings, None as null and Some(x) as x (nested
 * optionals as arrays, as Daml does: Some(None) is [], Some(Some(x)) is [x]), variants as `{tag, value}`, enums as their constructor,
 * gen maps as `[key, value]` pairs, timestamps as ISO strings.
 */
export function valueToJson(v: Value): JsonValue {
  switch (v.kind) {
    case 'unit':
      return {};
    case 'bool':
      return v.value;
    case 'int64':
    case 'numeric':
      return String(v.value);
    case 'timestamp':
      return isoMicros(v.value);
    case 'date':
      return isoDate(v.value);
    case 'party':
    case 'text':
    case 'contractId':
      return v.value;
    case 'optional':
      // Daml JSON: None → null; Some(x) → x; but Some(None) → [] and Some(Some(x)) → [encode(Some(x))].
      if (v.value === undefined) return null;
      if (v.value.kind !== 'optional') return valueToJson(v.value);
      return v.value.value === undefined ? [] : [valueToJson(v.value)];
    case 'list':
      return v.elements.map(valueToJson);
    case 'textMap': {
      // Null prototype: a key such as "__proto__" stays data.
      const o: { [k: string]: JsonValue } = Object.create(null);
      for (const e of v.entries) o[e.key] = valueToJson(e.value);
      return o;
    }
    case 'genMap':
      return v.entries.map((e) => [valueToJson(e.key), valueToJson(e.value)]);
    case 'record': {
      const o: { [k: string]: JsonValue } = Object.create(null);
      for (const f of v.fields) o[f.label] = valueToJson(f.value);
      return o;
    }
    case 'variant':
      return { tag: v.constructor, value: valueToJson(v.value) };
    case 'enum':
      return v.constructor;
  }
}

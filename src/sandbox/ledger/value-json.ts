/**
 * Daml values as the JSON Ledger API v2 prints them (createArgument,
 * choiceArgument, exerciseResult) and as Splice prints contract payloads:
 * records as objects, Int64 and Numeric as strings, timestamps ISO, variants
 * `{tag, value}`, enums as strings, optionals `null`/value (nested optionals
 * as `[]`/`[x]`), text maps as objects, generic maps as `[key, value]` pairs.
 */
import type { Identifier, Value } from '../../hashing/model.js';
import { isoMicros } from './clock.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export function valueToJson(v: Value): Json {
  switch (v.kind) {
    case 'unit':
      return {};
    case 'bool':
      return v.value;
    case 'int64':
      return v.value.toString();
    case 'numeric':
      return v.value;
    case 'timestamp':
      return isoMicros(v.value);
    case 'date':
      return new Date(v.value * 86_400_000).toISOString().slice(0, 10);
    case 'party':
    case 'text':
    case 'contractId':
      return v.value;
    case 'optional':
      if (v.value === undefined) return null;
      // Optional (Optional a) needs the list form to tell None from Some None.
      if (v.value.kind === 'optional') return v.value.value === undefined ? [] : [valueToJson(v.value)];
      return valueToJson(v.value);
    case 'list':
      return v.elements.map(valueToJson);
    case 'textMap': {
      const out: { [key: string]: Json } = {};
      for (const e of v.entries) out[e.key] = valueToJson(e.value);
      return out;
    }
    case 'genMap':
      return v.entries.map((e) => [valueToJson(e.key), valueToJson(e.value)]);
    case 'record': {
      const out: { [key: string]: Json } = {};
      for (const f of v.fields) out[f.label] = valueToJson(f.value);
      return out;
    }
    case 'variant':
      return { tag: v.constructor, value: valueToJson(v.value) };
    case 'enum':
      return v.constructor;
  }
}

/** `packageId:Module.Name:Entity`, the JSON API's identifier string. */
export function identifierString(id: Identifier): string {
  return `${id.packageId}:${id.moduleName}:${id.entityName}`;
}

/** Field `label` of a record value, or undefined. */
export function field(v: Value, label: string): Value | undefined {
  return v.kind === 'record' ? v.fields.find((f) => f.label === label)?.value : undefined;
}

/** Follows a path of record labels. */
export function path(v: Value, ...labels: string[]): Value | undefined {
  let cur: Value | undefined = v;
  for (const l of labels) cur = cur && field(cur, l);
  return cur;
}

/** The string payload of a party/text/numeric/contractId value at `labels`. */
export function str(v: Value, ...labels: string[]): string | undefined {
  const x = path(v, ...labels);
  if (!x) return undefined;
  return x.kind === 'party' || x.kind === 'text' || x.kind === 'numeric' || x.kind === 'contractId'
    ? x.value
    : undefined;
}

/** The bigint payload of an int64/timestamp value at `labels`. */
export function big(v: Value, ...labels: string[]): bigint | undefined {
  const x = path(v, ...labels);
  return x && (x.kind === 'int64' || x.kind === 'timestamp') ? x.value : undefined;
}

/** Replaces contract ids throughout a value (unsuffixed → suffixed after commit). */
export function mapContractIds(v: Value, f: (cid: string) => string): Value {
  switch (v.kind) {
    case 'contractId':
      return { kind: 'contractId', value: f(v.value) };
    case 'optional':
      return v.value === undefined ? v : { kind: 'optional', value: mapContractIds(v.value, f) };
    case 'list':
      return { kind: 'list', elements: v.elements.map((e) => mapContractIds(e, f)) };
    case 'textMap':
      return {
        kind: 'textMap',
        entries: v.entries.map((e) => ({ key: e.key, value: mapContractIds(e.value, f) })),
      };
    case 'genMap':
      return {
        kind: 'genMap',
        entries: v.entries.map((e) => ({ key: mapContractIds(e.key, f), value: mapContractIds(e.value, f) })),
      };
    case 'record':
      return {
        kind: 'record',
        recordId: v.recordId,
        fields: v.fields.map((x) => ({ label: x.label, value: mapContractIds(x.value, f) })),
      };
    case 'variant':
      return { ...v, value: mapContractIds(v.value, f) };
    default:
      return v;
  }
}

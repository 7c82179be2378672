/**
 * Daml values as the JSON Ledger API v2 prints them (createArgument,
 * choiceArgument, exerciseResult) and as Splice prints contract payloads:
 * records as objects, Int64 and Numeric as strings, timestamps ISO, variants
 * `{tag, value}`, enums as strings, optionals `null`/value (nested optionals
 * as `[]`/`[x]`), text maps as objects, generic maps as `[key, value]` pairs.
 */
import type { Identifier, Value } from '../../hashing/model.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Daml-LF values in the JSON API's encoding: the one renderer `inspect` uses. */
export { valueToJson } from '../../hashing/render.js';

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

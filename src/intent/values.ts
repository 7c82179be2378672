/**
 * Reading Daml values by record labels for the recogniser: `at(v, 'transfer.amount')`
 * walks record fields (looking through `Some`), and the typed readers return
 * the leaf only when it has the expected kind. Nothing here throws.
 */

import type { Value } from '../hashing/model.js';
import { isoMicros } from '../hashing/render.js';
import type { InstrumentId } from './model.js';

function unwrap(v: Value | undefined): Value | undefined {
  while (v?.kind === 'optional') v = v.value;
  return v;
}

/** The value at a dotted label path (records only, optionals looked through); `undefined` if absent. */
export function at(v: Value | undefined, path: string): Value | undefined {
  let cur = unwrap(v);
  if (path === '') return cur;
  // Label by label without splitting the path (this runs for every field the recogniser reads).
  let start = 0;
  for (;;) {
    const dot = path.indexOf('.', start);
    const stop = dot < 0 ? path.length : dot;
    if (cur?.kind !== 'record') return undefined;
    cur = unwrap(fieldAt(cur.fields, path, start, stop));
    if (dot < 0) return cur;
    start = dot + 1;
  }
}

/** The value of the first field labelled `path[start, stop)`. */
function fieldAt(
  fields: readonly { label: string; value: Value }[],
  path: string,
  start: number,
  stop: number,
): Value | undefined {
  const n = stop - start;
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    if (f.label.length === n && path.startsWith(f.label, start)) return f.value;
  }
  return undefined;
}

export function partyAt(v: Value | undefined, path: string): string | undefined {
  const x = at(v, path);
  return x?.kind === 'party' ? x.value : undefined;
}

export function textAt(v: Value | undefined, path: string): string | undefined {
  const x = at(v, path);
  return x?.kind === 'text' ? x.value : undefined;
}

export function numericAt(v: Value | undefined, path: string): string | undefined {
  const x = at(v, path);
  return x?.kind === 'numeric' ? x.value : undefined;
}

export function int64At(v: Value | undefined, path: string): bigint | undefined {
  const x = at(v, path);
  return x?.kind === 'int64' ? x.value : undefined;
}

/** A timestamp as `inspect` prints it (ISO-8601 UTC with microseconds). */
export function timeAt(v: Value | undefined, path: string): string | undefined {
  const x = at(v, path);
  return x?.kind === 'timestamp' ? isoMicros(x.value) : undefined;
}

export function contractIdAt(v: Value | undefined, path: string): string | undefined {
  const x = at(v, path);
  return x?.kind === 'contractId' ? x.value : undefined;
}

/** A list of contract ids; `undefined` unless every element is a contract id. */
export function contractIdsAt(v: Value | undefined, path: string): string[] | undefined {
  const x = at(v, path);
  if (x?.kind !== 'list') return undefined;
  const out: string[] = [];
  for (const e of x.elements) {
    if (e.kind !== 'contractId') return undefined;
    out.push(e.value);
  }
  return out;
}

/** A token-standard instrument id `{admin: Party, id: Text}`. */
export function instrumentAt(v: Value | undefined, path: string): InstrumentId | undefined {
  const admin = partyAt(v, `${path}.admin`);
  const id = textAt(v, `${path}.id`);
  return admin !== undefined && id !== undefined ? { admin, id } : undefined;
}

/** A text entry of a text map (`Metadata.values` style), e.g. `textEntry(v, 'transfer.meta.values', key)`. */
export function textEntry(v: Value | undefined, path: string, key: string): string | undefined {
  const m = at(v, path);
  if (m?.kind !== 'textMap') return undefined;
  const e = unwrap(m.entries.find((x) => x.key === key)?.value);
  return e?.kind === 'text' ? e.value : undefined;
}

/** The constructor of a variant at a path (e.g. a result's `output` tag). */
export function variantTag(v: Value | undefined, path: string): string | undefined {
  const x = at(v, path);
  return x?.kind === 'variant' ? x.constructor : undefined;
}

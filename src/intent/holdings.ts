/**
 * Holdings, read by template entity and field labels: Splice `Amulet`
 * (owner, amount.initialAmount, instrument Amulet of `dso`), `LockedAmulet`
 * (the same under `amulet`) and the registry `Holding` (owner, amount,
 * instrument `{source, id}` whose `source` is the instrument admin). Other
 * templates are not holdings. Entity names alone decide what is a holding
 * (stricter: a look-alike from another package is still checked as one); the
 * allow-lists in ./allow.ts decide which packages may create them.
 */
import type { CreateNode } from '../hashing/model.js';
import type { InstrumentId } from './model.js';
import { numericAt, partyAt, textAt } from './values.js';

export const HOLDING_ENTITIES: ReadonlySet<string> = new Set(['Amulet', 'LockedAmulet', 'Holding']);

export interface CreatedHolding {
  entity: string;
  /** `undefined` when the template names no owner the reader understands. */
  owner: string | undefined;
  /** `undefined` when the amount cannot be read as a plain decimal. */
  amount: string | undefined;
  /** `undefined` when the holding names no instrument the reader understands. */
  instrument: InstrumentId | undefined;
  locked: boolean;
}

export function holdingOf(c: CreateNode): CreatedHolding | undefined {
  const entity = c.templateId.entityName;
  if (!HOLDING_ENTITIES.has(entity)) return undefined;
  const a = c.argument;
  if (entity === 'LockedAmulet')
    return {
      entity,
      owner: partyAt(a, 'amulet.owner'),
      amount: numericAt(a, 'amulet.amount.initialAmount'),
      instrument: amuletOf(partyAt(a, 'amulet.dso')),
      locked: true,
    };
  if (entity === 'Amulet')
    return {
      entity,
      owner: partyAt(a, 'owner'),
      amount: numericAt(a, 'amount.initialAmount'),
      instrument: amuletOf(partyAt(a, 'dso')),
      locked: false,
    };
  const admin = partyAt(a, 'instrument.source');
  const id = textAt(a, 'instrument.id');
  return {
    entity,
    owner: partyAt(a, 'owner'),
    amount: numericAt(a, 'amount'),
    instrument: admin !== undefined && id !== undefined ? { admin, id } : undefined,
    // A registry Holding carries its lock as an optional `lock` field.
    locked: hasSome(a, 'lock'),
  };
}

function amuletOf(dso: string | undefined): InstrumentId | undefined {
  return dso === undefined ? undefined : { admin: dso, id: 'Amulet' };
}

export function sameInstrument(a: InstrumentId | undefined, b: InstrumentId | undefined): boolean {
  return a !== undefined && b !== undefined && a.admin === b.admin && a.id === b.id;
}

export function instrumentText(i: InstrumentId | undefined): string {
  return i === undefined ? 'an unreadable instrument' : `${i.id} (admin ${i.admin})`;
}

function hasSome(v: CreateNode['argument'], label: string): boolean {
  if (v.kind !== 'record') return false;
  const f = v.fields.find((x) => x.label === label)?.value;
  return f !== undefined && !(f.kind === 'optional' && f.value === undefined);
}

/**
 * Holdings a transaction creates, read by template entity and field labels:
 * Splice `Amulet` (owner, amount.initialAmount), `LockedAmulet` (amulet.owner,
 * amulet.amount.initialAmount) and token-standard / registry `Holding`
 * (owner, amount). Other templates are not holdings.
 */
import type { CreateNode } from '../hashing/model.js';
import { numericAt, partyAt } from './values.js';

export const HOLDING_ENTITIES: ReadonlySet<string> = new Set(['Amulet', 'LockedAmulet', 'Holding']);

export interface CreatedHolding {
  entity: string;
  /** `undefined` when the template names no owner the reader understands. */
  owner: string | undefined;
  /** `undefined` when the amount cannot be read as a plain decimal. */
  amount: string | undefined;
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
      locked: true,
    };
  return {
    entity,
    owner: partyAt(a, 'owner'),
    amount: numericAt(a, 'amount') ?? numericAt(a, 'amount.initialAmount'),
    // A registry Holding carries its lock as an optional `lock` field.
    locked: hasSome(a, 'lock'),
  };
}

function hasSome(v: CreateNode['argument'], label: string): boolean {
  if (v.kind !== 'record') return false;
  const f = v.fields.find((x) => x.label === label)?.value;
  return f !== undefined && !(f.kind === 'optional' && f.value === undefined);
}

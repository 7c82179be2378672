/**
 * The registry's transfer factory and choice context, remembered between
 * transfers: for Canton Coin the answer (the factory, the transfer kind, the
 * AmuletRules, the open round, the receiver's preapproval and their disclosed
 * contracts) is the same for every transfer of one sender to one receiver
 * while the round lasts, so asking the registry for each withdrawal only
 * costs an HTTP exchange on both ends. A remembered `offer` (the receiver had
 * no preapproval) may make a transfer two-step for up to the TTL after the
 * receiver set one up; a transfer that must be delivered in one step asks
 * the registry again rather than be refused on a remembered offer.
 *
 * An entry is kept per validator client and key (the caller's: instrument,
 * sender, receiver and the round the inputs are valued in) for `FACTORY_TTL_MS`
 * at most. It is a hint, never trusted: whatever is prepared with it is
 * decoded, hashed and checked against the intent like any other preparation,
 * and the caller forgets an entry (`forgetFactory`) whenever a preparation made
 * with it fails, preparing again with a fresh answer (transfer.ts).
 */
import type { TransferFactoryWithChoiceContext } from '../canton/validator/registry.js';

/** How long an answer is reused at most (the round in the key ends it sooner). */
export const FACTORY_TTL_MS = 30_000;
/** Entries per validator client at most (the oldest goes first). */
const MAX_ENTRIES = 1_000;

interface Entry {
  value: TransferFactoryWithChoiceContext;
  until: number;
}

const cache = new WeakMap<object, Map<string, Entry>>();

/** The remembered answer for `key`, if still fresh. */
export function cachedFactory(owner: object, key: string): TransferFactoryWithChoiceContext | undefined {
  const entries = cache.get(owner);
  const hit = entries?.get(key);
  if (!hit) return undefined;
  if (hit.until > Date.now()) return hit.value;
  entries?.delete(key);
  return undefined;
}

/** Remembers `value` for `key` (a fresh answer of the registry). */
export function rememberFactory(owner: object, key: string, value: TransferFactoryWithChoiceContext): void {
  let entries = cache.get(owner);
  if (!entries) {
    entries = new Map();
    cache.set(owner, entries);
  }
  entries.delete(key);
  entries.set(key, { value, until: Date.now() + FACTORY_TTL_MS });
  if (entries.size > MAX_ENTRIES) {
    const oldest = entries.keys().next().value;
    if (oldest !== undefined) entries.delete(oldest);
  }
}

/** Forgets the answer for `key` (a preparation made with it failed). */
export function forgetFactory(owner: object, key: string): void {
  cache.get(owner)?.delete(key);
}

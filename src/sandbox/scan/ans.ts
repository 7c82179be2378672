/**
 * Scan's view of the name service: live `Splice.Ans:AnsEntry` contracts
 * (`expiresAt >= now`) looked up by name, by party (its first entry by name)
 * and listed by name prefix, ordered by name, rendered as `AnsEntry`. The
 * DSO's reserved name `dso.<acronym>` is no AnsEntry on a real network: Scan
 * answers it from the DSO's rules, without contract id and expiry, before
 * looking at entries (by name, by party) or after them when a page is short
 * (listing). The DSO's own AnsEntry contracts, if any, are left to it.
 */
import { isoMicros } from '../ledger/clock.js';
import type { Contract } from '../ledger/store.js';
import { big, str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';

export interface AnsEntryView {
  contract_id?: string;
  user: string;
  name: string;
  url: string;
  description: string;
  expires_at?: string;
}

const nameOf = (c: Contract) => str(c.argument, 'name') ?? '';
const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Entries whose expiry has not passed, the DSO's reserved ones aside, ordered by name. */
function liveEntries(net: SandboxNetwork): Contract[] {
  const now = net.clock.now();
  return net.store
    .activeContracts('Splice.Ans:AnsEntry')
    .filter((c) => str(c.argument, 'user') !== net.dso && (big(c.argument, 'expiresAt') ?? 0n) >= now)
    .sort((a, b) => byName(nameOf(a), nameOf(b)));
}

/** The reserved entries (the DSO's own name), as Scan serves them. */
function reserved(net: SandboxNetwork): AnsEntryView[] {
  return [{ user: net.dso, name: `dso.${net.ansLabel}`, url: '', description: '' }];
}

function render(c: Contract): AnsEntryView {
  const expiresAt = big(c.argument, 'expiresAt');
  return {
    contract_id: c.contractId,
    user: str(c.argument, 'user') ?? '',
    name: nameOf(c),
    url: str(c.argument, 'url') ?? '',
    description: str(c.argument, 'description') ?? '',
    ...(expiresAt === undefined ? {} : { expires_at: isoMicros(expiresAt) }),
  };
}

/** `GET /v0/ans-entries`: entries whose name starts with `prefix` (case-sensitive), by name, at most `limit`. */
export function ansEntriesWithPrefix(net: SandboxNetwork, prefix: string, limit: number): AnsEntryView[] {
  const out = liveEntries(net)
    .filter((c) => nameOf(c).startsWith(prefix))
    .slice(0, limit)
    .map(render);
  for (const r of reserved(net)) if (out.length < limit && r.name.startsWith(prefix)) out.push(r);
  return out;
}

export function ansEntryByName(net: SandboxNetwork, name: string): AnsEntryView | undefined {
  const r = reserved(net).find((e) => e.name === name);
  if (r) return r;
  const c = liveEntries(net).find((e) => nameOf(e) === name);
  return c && render(c);
}

export function ansEntryByParty(net: SandboxNetwork, party: string): AnsEntryView | undefined {
  const r = reserved(net).find((e) => e.user === party);
  if (r) return r;
  const c = liveEntries(net).find((e) => str(e.argument, 'user') === party);
  return c && render(c);
}

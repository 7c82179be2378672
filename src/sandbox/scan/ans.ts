/**
 * Scan's view of the Amulet Name Service: non-expired `Splice.Ans:AnsEntry`
 * contracts looked up by name, by party (first by name) and by name prefix
 * (oldest first), rendered as `AnsEntry`. The DSO's own entry is a DSO-provided
 * entry, served without contract id and expiry as Scan does.
 */
import { isoMicros } from '../ledger/clock.js';
import type { Contract } from '../ledger/store.js';
import { big, str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';

function liveEntries(net: SandboxNetwork): Contract[] {
  const now = net.clock.now();
  return net.store
    .activeContracts('Splice.Ans:AnsEntry')
    .filter((c) => (big(c.argument, 'expiresAt') ?? 0n) > now)
    .sort((a, b) => a.createdOffset - b.createdOffset);
}

const nameOf = (c: Contract) => str(c.argument, 'name') ?? '';

export function ansEntriesWithPrefix(net: SandboxNetwork, prefix: string, limit: number): Contract[] {
  return liveEntries(net)
    .filter((c) => nameOf(c).startsWith(prefix))
    .slice(0, limit);
}

export function ansEntryByName(net: SandboxNetwork, name: string): Contract | undefined {
  return liveEntries(net).find((c) => nameOf(c) === name);
}

export function ansEntryByParty(net: SandboxNetwork, party: string): Contract | undefined {
  return liveEntries(net)
    .filter((c) => str(c.argument, 'user') === party)
    .sort((a, b) => (nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0))[0];
}

export function renderAnsEntry(net: SandboxNetwork, c: Contract) {
  const user = str(c.argument, 'user') ?? '';
  const entry = {
    user,
    name: nameOf(c),
    url: str(c.argument, 'url') ?? '',
    description: str(c.argument, 'description') ?? '',
  };
  if (user === net.dso) return entry;
  const expiresAt = big(c.argument, 'expiresAt');
  return {
    contract_id: c.contractId,
    ...entry,
    ...(expiresAt === undefined ? {} : { expires_at: isoMicros(expiresAt) }),
  };
}

/**
 * Featured app rights: the `Splice.Amulet:FeaturedAppRight` the DSO granted a provider,
 * as Scan, the scan proxy, the validator and the registry's choice contexts look it up,
 * and the contract a grant creates (signed by the DSO, observed by the provider).
 */
import { EXTRA_ID, sortedSet } from '../amulet.js';
import { freshContractId } from '../ledger/ids.js';
import type { Contract, NewContract } from '../ledger/store.js';
import { str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import { PACKAGE_NAME, party, record } from '../prepared/common.js';

/** The provider's FeaturedAppRight, if the DSO granted one (the oldest, should there be several). */
export function featuredAppRightOf(net: SandboxNetwork, provider: string): Contract | undefined {
  return net.store
    .activeContracts('Splice.Amulet:FeaturedAppRight')
    .filter((c) => str(c.argument, 'provider') === provider)
    .sort((a, b) => a.createdOffset - b.createdOffset)[0];
}

/** A FeaturedAppRight of `provider`, granted by the DSO. */
export function featuredAppRightContract(dso: string, provider: string): NewContract {
  return {
    contractId: freshContractId(),
    templateId: EXTRA_ID.featuredAppRight,
    packageName: PACKAGE_NAME.amulet,
    argument: record(EXTRA_ID.featuredAppRight, [
      ['dso', party(dso)],
      ['provider', party(provider)],
    ]),
    signatories: [dso],
    stakeholders: sortedSet(dso, provider),
    nodeId: 0,
  };
}

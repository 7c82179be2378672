/**
 * The token-standard metadata API of the Canton Coin registry (`token-metadata-v1.yaml`):
 * registry info (the DSO as admin), the instrument list with its paging, and the Amulet
 * instrument, whose total supply is read off the ledger — the amounts of every active
 * Amulet and LockedAmulet, as of the latest committed update.
 */
import { addAmounts, holdingView } from '../amulet.js';
import { spliceError } from '../errors.js';
import { isoMicros } from '../ledger/clock.js';
import type { SandboxNetwork } from '../network.js';

export const AMULET_INSTRUMENT_ID = 'Amulet';
/** The Canton Network's names for Amulet (Splice's `spliceInstanceNames` there). */
const AMULET_NAME = 'Canton Coin';
const AMULET_SYMBOL = 'CC';
/** Instruments per page when the caller names no `pageSize` (the spec's default). */
const DEFAULT_PAGE_SIZE = 25;

/** The token-standard APIs the registry serves for Amulet, with their minor versions. */
const INSTRUMENT_APIS = {
  'splice-api-token-metadata-v1': 1,
  'splice-api-token-holding-v1': 1,
  'splice-api-token-transfer-instruction-v1': 1,
  'splice-api-token-allocation-v1': 1,
  'splice-api-token-allocation-instruction-v1': 1,
};

export interface Instrument {
  id: string;
  name: string;
  symbol: string;
  totalSupply: string;
  totalSupplyAsOf: string;
  decimals: number;
  supportedApis: Record<string, number>;
}

/** `GetRegistryInfoResponse`: the registry-wide APIs (only metadata), the DSO as admin. */
export function registryInfo(net: SandboxNetwork) {
  return { adminId: net.dso, supportedApis: { 'splice-api-token-metadata-v1': 1 } };
}

/** Amulet as an `Instrument`: its total supply summed over the active holdings. */
export function amuletInstrument(net: SandboxNetwork): Instrument {
  let supply = '0';
  for (const c of net.store.activeContracts()) {
    if (c.templateId.moduleName !== 'Splice.Amulet') continue;
    const h = holdingView(c, 0n);
    if (h) supply = addAmounts(supply, h.initialAmount);
  }
  const latest = net.store.updates().at(-1);
  return {
    id: AMULET_INSTRUMENT_ID,
    name: AMULET_NAME,
    symbol: AMULET_SYMBOL,
    totalSupply: supply,
    totalSupplyAsOf: isoMicros(latest?.recordTime ?? net.clock.now()),
    decimals: 10,
    supportedApis: { ...INSTRUMENT_APIS },
  };
}

/** The instrument `id`, or the registry's 404. */
export function instrumentById(net: SandboxNetwork, id: string): Instrument {
  if (id !== AMULET_INSTRUMENT_ID) throw spliceError(404, `No instrument with id ${id} found`);
  return amuletInstrument(net);
}

/**
 * `ListInstrumentsResponse`: instruments ordered by id, `pageSize` of them after the
 * `pageToken` (the last id of the previous page); `nextPageToken` while more remain.
 */
export function listInstruments(
  net: SandboxNetwork,
  query: { pageSize?: string | undefined; pageToken?: string | undefined },
): { instruments: Instrument[]; nextPageToken?: string } {
  let size = DEFAULT_PAGE_SIZE;
  if (query.pageSize !== undefined) {
    if (!/^\d+$/.test(query.pageSize) || Number(query.pageSize) < 1 || Number(query.pageSize) > 2 ** 31 - 1)
      throw spliceError(
        400,
        `Invalid value for query parameter pageSize: ${query.pageSize} is not a positive 32-bit integer`,
      );
    size = Number(query.pageSize);
  }
  const all = [amuletInstrument(net)];
  const after = query.pageToken;
  const rest = after === undefined ? all : all.filter((i) => i.id > after);
  const page = rest.slice(0, size);
  const last = page[page.length - 1];
  return rest.length > size && last ? { instruments: page, nextPageToken: last.id } : { instruments: page };
}

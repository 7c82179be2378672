/**
 * The sandbox's Scan (`/api/scan/v0/...`) and the validator's BFT scan proxy
 * (`/api/validator/v0/scan-proxy/...`): transaction history, ANS entries and
 * rules, holdings summaries, the DSO party, AmuletRules (and Scan's
 * ExternalPartyAmuletRules), open (and issuing) mining rounds, featured app rights,
 * transfer preapprovals, transfer command counters and statuses, and Scan's member
 * traffic status — the paths, bodies, statuses and `{error}` bodies of Splice's
 * `scan.yaml` / `scan-proxy.yaml`, read off the sandbox ledger.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { openRounds } from '../amulet.js';
import { transferCommandStatus } from '../automation.js';
import type { SandboxContext } from '../context.js';
import { spliceError } from '../errors.js';
import type { Contract } from '../ledger/store.js';
import { str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import { contractWithState, preapprovalOf, spliceContract } from '../validator/routes.js';
import { ansEntriesWithPrefix, ansEntryByName, ansEntryByParty } from './ans.js';
import { featuredAppRightOf } from './featured.js';
import { MAX_PAGE_SIZE } from './history.js';
import { holdingsSummary } from './holdings.js';
import { memberTrafficStatus } from './traffic.js';

type Service = 'scan' | 'scan-proxy';

const config = (service: Service, operation: string) => ({
  config: { service, operation: `${service}.${operation}` },
});

function body(req: FastifyRequest): Record<string, unknown> {
  const b = req.body;
  if (typeof b !== 'object' || b === null || Array.isArray(b))
    throw spliceError(400, 'Invalid request body: expected a JSON object');
  return b as Record<string, unknown>;
}

function query(req: FastifyRequest): Record<string, string | undefined> {
  return req.query as Record<string, string | undefined>;
}

/** A required integer query parameter (`page_size`, `nonce`). */
function intParam(
  value: string | undefined,
  name: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (value === undefined) throw spliceError(400, `Missing required query parameter ${name}`);
  if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(Number(value)))
    throw spliceError(400, `Invalid value for query parameter ${name}: ${value} is not an integer`);
  const n = Number(value);
  if (n < min || n > max)
    throw spliceError(400, `Invalid value for query parameter ${name}: ${n} is outside ${min}..${max}`);
  return n;
}

function optionalString(b: Record<string, unknown>, name: string): string | undefined {
  const v = b[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw spliceError(400, `Invalid ${name}: expected a string`);
  return v;
}

/**
 * `MaybeCachedContractWithState`: the contract, or only its synchronizer when the caller
 * already holds it (same contract id and synchronizer).
 */
function maybeCached(
  net: SandboxNetwork,
  c: Contract,
  cachedId: string | undefined,
  cachedDomain: string | undefined,
) {
  const current = contractWithState(net, c);
  return cachedId === c.contractId && cachedDomain === net.synchronizerId
    ? { domain_id: current.domain_id }
    : current;
}

/** The routes Scan and the scan proxy share, under `prefix`. */
function registerShared(app: FastifyInstance, ctx: SandboxContext, prefix: string, service: Service): void {
  const { net } = ctx;
  const cfg = (operation: string) => config(service, operation);

  app.get(`${prefix}/dso-party-id`, cfg('getDsoPartyId'), async () => ({ dso_party_id: net.dso }));

  app.get(`${prefix}/ans-entries`, cfg('listAnsEntries'), async (req) => {
    const q = query(req);
    const pageSize = intParam(q.page_size, 'page_size', 1, MAX_PAGE_SIZE);
    return { entries: ansEntriesWithPrefix(net, q.name_prefix ?? '', pageSize) };
  });

  app.get(`${prefix}/ans-entries/by-name/:name`, cfg('lookupAnsEntryByName'), async (req) => {
    const { name } = req.params as { name: string };
    const entry = ansEntryByName(net, name);
    if (!entry) throw spliceError(404, `No ans entry found for name: ${name}`);
    return { entry };
  });

  app.get(`${prefix}/ans-entries/by-party/:party`, cfg('lookupAnsEntryByParty'), async (req) => {
    const { party } = req.params as { party: string };
    const entry = ansEntryByParty(net, party);
    if (!entry) throw spliceError(404, `No ans entry found for party: ${party}`);
    return { entry };
  });

  app.post(`${prefix}/ans-rules`, cfg('getAnsRules'), async (req) => {
    const b = body(req);
    const cachedId = optionalString(b, 'cached_ans_rules_contract_id');
    const cachedDomain = optionalString(b, 'cached_ans_rules_domain_id');
    // The live AnsRules: whatever the DSO's current contract is.
    const rules = net.store.activeContracts('Splice.Ans:AnsRules')[0];
    if (!rules) throw spliceError(404, 'No AnsRules contract found');
    return { ans_rules_update: maybeCached(net, rules, cachedId, cachedDomain) };
  });

  // Without a right, `featured_app_right` is absent: a 200 either way.
  app.get(`${prefix}/featured-apps/:provider`, cfg('lookupFeaturedAppRight'), async (req) => {
    const { provider } = req.params as { provider: string };
    const right = featuredAppRightOf(net, provider);
    return right ? { featured_app_right: spliceContract(right) } : {};
  });

  app.post(`${prefix}/holdings/summary`, cfg('getHoldingsSummaryAt'), async (req) =>
    holdingsSummary(net, body(req)),
  );

  app.get(
    `${prefix}/transfer-preapprovals/by-party/:party`,
    cfg('lookupTransferPreapprovalByParty'),
    async (req) => {
      const { party } = req.params as { party: string };
      const c = preapprovalOf(net, party);
      if (!c) throw spliceError(404, `No TransferPreapproval found for party: ${party}`);
      return { transfer_preapproval: contractWithState(net, c) };
    },
  );

  app.get(
    `${prefix}/transfer-command-counter/:party`,
    cfg('lookupTransferCommandCounterByParty'),
    async (req) => {
      const { party } = req.params as { party: string };
      const c = counterOf(ctx, party);
      if (!c) throw spliceError(404, `No TransferCommandCounter found for party: ${party}`);
      return { transfer_command_counter: contractWithState(net, c) };
    },
  );

  app.get(`${prefix}/transfer-command/status`, cfg('lookupTransferCommandStatus'), async (req) => {
    const q = query(req);
    if (q.sender === undefined || q.sender === '')
      throw spliceError(400, 'Missing required query parameter sender');
    const nonce = intParam(q.nonce, 'nonce', 0);
    const status = transferCommandStatus(net, q.sender, BigInt(nonce));
    if (!status)
      throw spliceError(
        404,
        `No TransferCommand found for sender ${q.sender} and nonce ${nonce} in the last 24h`,
      );
    return status;
  });
}

/** A required array of contract ids in a request body. */
function idList(b: Record<string, unknown>, name: string): string[] {
  const v = b[name];
  if (v === undefined || v === null) throw spliceError(400, `Missing required field ${name}`);
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
    throw spliceError(400, `Invalid ${name}: expected an array of contract ids`);
  return v as string[];
}

/**
 * Suggested cache TTL of Scan's rounds answer (µs): until the round timer opens the
 * next round, which opens as it is created (0 once that is due). Rounds advanced by
 * hand (`advance`, tests) are not foreseen.
 */
function roundsTtlUs(ctx: SandboxContext): number {
  const rs = openRounds(ctx.net.store);
  const newest = rs[rs.length - 1];
  if (!newest) return 0;
  const due = newest.createdAt + BigInt(ctx.net.roundIntervalMs) * 1000n - ctx.net.clock.now();
  return due > 0n ? Number(due) : 0;
}

function counterOf(ctx: SandboxContext, sender: string): Contract | undefined {
  return ctx.net.store
    .activeContracts('Splice.ExternalPartyAmuletRules:TransferCommandCounter')
    .find((c) => str(c.argument, 'sender') === sender);
}

/** Scan: `/api/scan/v0/...`. */
export function registerScanRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const prefix = '/api/scan/v0';
  registerShared(app, ctx, prefix, 'scan');

  app.post(`${prefix}/transactions`, config('scan', 'listTransactionHistory'), async (req) => {
    const b = body(req);
    const size = b.page_size;
    if (size === undefined || size === null) throw spliceError(400, 'Missing required field page_size');
    if (typeof size !== 'number' || !Number.isInteger(size))
      throw spliceError(400, `Invalid page_size: expected an integer, got ${JSON.stringify(size)}`);
    const order = b.sort_order ?? 'asc';
    if (order !== 'asc' && order !== 'desc')
      throw spliceError(400, `Invalid sort_order ${JSON.stringify(order)}: expected "asc" or "desc"`);
    const pageEndEventId = optionalString(b, 'page_end_event_id');
    return {
      transactions: ctx.scan.page({
        sortOrder: order,
        pageSize: size,
        ...(pageEndEventId === undefined ? {} : { pageEndEventId }),
      }),
    };
  });

  app.post(`${prefix}/amulet-rules`, config('scan', 'getAmuletRules'), async (req) => {
    const b = body(req);
    const cachedId = optionalString(b, 'cached_amulet_rules_contract_id');
    const cachedDomain = optionalString(b, 'cached_amulet_rules_domain_id');
    return { amulet_rules_update: maybeCached(ctx.net, ctx.net.amuletRules(), cachedId, cachedDomain) };
  });

  app.post(
    `${prefix}/external-party-amulet-rules`,
    config('scan', 'getExternalPartyAmuletRules'),
    async (req) => {
      const b = body(req);
      const cachedId = optionalString(b, 'cached_external_party_amulet_rules_contract_id');
      const cachedDomain = optionalString(b, 'cached_external_party_amulet_rules_domain_id');
      const rules = ctx.net.externalPartyAmuletRules();
      return { external_party_amulet_rules_update: maybeCached(ctx.net, rules, cachedId, cachedDomain) };
    },
  );

  app.get(
    `${prefix}/domains/:domain/members/:member/traffic-status`,
    config('scan', 'getMemberTrafficStatus'),
    async (req) => {
      const { domain, member } = req.params as { domain: string; member: string };
      return memberTrafficStatus(ctx.net, domain, member);
    },
  );

  // The sandbox keeps no IssuingMiningRound contracts (no rewards are minted): always empty.
  app.post(
    `${prefix}/open-and-issuing-mining-rounds`,
    config('scan', 'getOpenAndIssuingMiningRounds'),
    async (req) => {
      const b = body(req);
      const cachedOpen = new Set(idList(b, 'cached_open_mining_round_contract_ids'));
      idList(b, 'cached_issuing_round_contract_ids');
      const open: Record<string, unknown> = {};
      for (const r of openRounds(ctx.net.store)) {
        const current = contractWithState(ctx.net, r.contract);
        open[r.contractId] = cachedOpen.has(r.contractId) ? { domain_id: current.domain_id } : current;
      }
      return {
        time_to_live_in_microseconds: roundsTtlUs(ctx),
        open_mining_rounds: open,
        issuing_mining_rounds: {},
      };
    },
  );
}

/** The validator's BFT scan proxy: `/api/validator/v0/scan-proxy/...`. */
export function registerScanProxyRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const prefix = '/api/validator/v0/scan-proxy';
  registerShared(app, ctx, prefix, 'scan-proxy');

  app.get(`${prefix}/amulet-rules`, config('scan-proxy', 'getAmuletRules'), async () => ({
    amulet_rules: contractWithState(ctx.net, ctx.net.amuletRules()),
  }));

  app.get(
    `${prefix}/open-and-issuing-mining-rounds`,
    config('scan-proxy', 'getOpenAndIssuingMiningRounds'),
    async () => ({
      open_mining_rounds: openRounds(ctx.net.store).map((r) => contractWithState(ctx.net, r.contract)),
      issuing_mining_rounds: [],
    }),
  );
}

/**
 * What the name service looks like from the signer's side of the ledger: the
 * AnsRules terms and the payment context, both from Scan (never from the
 * validator: the fee and the DSO decide what a party pays and to whom), and
 * a party's own name-service contracts read from its participant's active
 * contract set — the entries, the subscription requests, idle states and
 * payments, and the locks those payments hold. The subscription contracts of
 * one entry share a `reference` (the SubscriptionRequest's contract id), which
 * is how a registration is followed from request to entry and renewal.
 */
import type { DisclosedContract } from '../canton/ledger-api/schemas.js';
import type { ContractWithState } from '../canton/scan/schemas.js';
import { decimalUnits, divideDecimals, fromUnits } from '../intent/decimal.js';
import { parseInstantMicros } from '../intent/time.js';
import type { FlowContext } from './context.js';
import { isPartyId } from './names.js';
import { Refusal } from './refusal.js';

/** Template ids by package name (the package ids differ between networks). */
export const ANS_TEMPLATE = {
  ansRules: '#splice-amulet-name-service:Splice.Ans:AnsRules',
  entry: '#splice-amulet-name-service:Splice.Ans:AnsEntry',
  context: '#splice-amulet-name-service:Splice.Ans:AnsEntryContext',
  request: '#splice-wallet-payments:Splice.Wallet.Subscriptions:SubscriptionRequest',
  initialPayment: '#splice-wallet-payments:Splice.Wallet.Subscriptions:SubscriptionInitialPayment',
  idleState: '#splice-wallet-payments:Splice.Wallet.Subscriptions:SubscriptionIdleState',
  payment: '#splice-wallet-payments:Splice.Wallet.Subscriptions:SubscriptionPayment',
  lockedAmulet: '#splice-amulet:Splice.Amulet:LockedAmulet',
} as const;

/** The AnsRules terms as Scan serves them, with the contract to disclose. */
export interface AnsTerms {
  dso: string;
  rulesCid: string;
  disclosed: Pinned;
  synchronizerId: string;
  /** USD per entry lifetime, decimal. */
  entryFee: string;
  lifetimeUs: bigint;
  renewalUs: bigint;
  descriptionPrefix: string;
}

/** What a payment needs disclosed and how much it costs in CC at the round it runs in. */
export interface PaymentContext {
  amuletRules: Pinned;
  round: { contractId: string; number: number; amuletPrice: string; disclosed: Pinned };
  synchronizerId: string;
}

/** No mining round is open yet: nothing can be paid now, but shortly (rounds open every few minutes). */
export class NoOpenRoundError extends Error {
  override readonly name = 'NoOpenRoundError';
  constructor() {
    super(
      'Scan lists no open mining round that has opened yet: nothing can be priced or paid now; try again in a minute',
    );
  }
}

const requireScan = (ctx: FlowContext, what: string) => {
  if (!ctx.scan)
    throw new Refusal(
      'bad_request',
      `${what} needs Scan (network.scanUrl): the name service's terms and the DSO are taken from Scan only`,
    );
  return ctx.scan;
};

type Pinned = DisclosedContract & { synchronizerId: string };

function disclosedOf(c: ContractWithState, fallbackSync: string | undefined, what: string): Pinned {
  const synchronizerId = c.domain_id ?? fallbackSync;
  if (!synchronizerId)
    throw new Refusal('bad_request', `Scan's ${what} has no synchronizer (domain_id) and none is configured`);
  return {
    templateId: c.contract.template_id,
    contractId: c.contract.contract_id,
    createdEventBlob: c.contract.created_event_blob,
    synchronizerId,
  };
}

const obj = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** A Daml `RelTime` in JSON (`{"microseconds": "…"}`) as µs; undefined when off-shape or not positive. */
export function relTimeUs(v: unknown): bigint | undefined {
  const m = obj(v).microseconds;
  const s = typeof m === 'number' ? String(m) : text(m);
  if (s === undefined || !/^[0-9]{1,19}$/.test(s)) return undefined;
  const n = BigInt(s);
  return n > 0n ? n : undefined;
}

/** The AnsRules contract of the network, its DSO and terms, from Scan. */
export async function loadAnsTerms(ctx: FlowContext): Promise<AnsTerms> {
  const scan = requireScan(ctx, 'a name');
  const r = (await scan.getAnsRules({})).ans_rules_update;
  if (!r.contract) throw new Refusal('bad_request', 'Scan answered no AnsRules contract');
  const c: ContractWithState = { contract: r.contract, ...(r.domain_id ? { domain_id: r.domain_id } : {}) };
  const p = c.contract.payload;
  const cfg = obj(p.config);
  const dso = text(p.dso);
  const entryFee = text(cfg.entryFee);
  const lifetimeUs = relTimeUs(cfg.entryLifetime);
  const renewalUs = relTimeUs(cfg.renewalDuration);
  const prefix = text(cfg.descriptionPrefix);
  if (
    !dso ||
    !isPartyId(dso) ||
    entryFee === undefined ||
    !(decimalUnits(entryFee) ?? 0n) ||
    !lifetimeUs ||
    !renewalUs ||
    prefix === undefined
  )
    throw new Refusal(
      'bad_request',
      `Scan's AnsRules ${c.contract.contract_id} is not the shape the name service defines (dso, config.entryFee, entryLifetime, renewalDuration, descriptionPrefix)`,
    );
  const scanDso = (await scan.getDsoPartyId()).dso_party_id;
  if (scanDso !== dso)
    throw new Refusal('bad_request', `Scan's AnsRules names DSO ${dso} but Scan's DSO is ${scanDso}`);
  const disclosed = disclosedOf(c, ctx.synchronizerId, 'AnsRules');
  return {
    dso,
    rulesCid: c.contract.contract_id,
    disclosed,
    synchronizerId: disclosed.synchronizerId,
    entryFee,
    lifetimeUs,
    renewalUs,
    descriptionPrefix: prefix,
  };
}

/**
 * AmuletRules and the round a payment runs in (as the wallet picks it: the
 * highest-numbered open round that has opened), from Scan.
 */
export async function loadPaymentContext(
  ctx: FlowContext,
  dso: string,
  nowUs: bigint,
): Promise<PaymentContext> {
  const scan = requireScan(ctx, 'paying for a name');
  const rules = (await scan.getAmuletRules()).amulet_rules_update;
  if (!rules.contract) throw new Refusal('bad_request', 'Scan answered no AmuletRules contract');
  if (text(rules.contract.payload.dso) !== dso)
    throw new Refusal('bad_request', `Scan's AmuletRules is not the DSO's (${dso})`);
  const amuletRules = disclosedOf(
    { contract: rules.contract, ...(rules.domain_id ? { domain_id: rules.domain_id } : {}) },
    ctx.synchronizerId,
    'AmuletRules',
  );
  const rounds = await scan.getOpenAndIssuingMiningRounds();
  let best: { c: ContractWithState; number: number; price: string } | undefined;
  for (const e of Object.values(rounds.open_mining_rounds)) {
    if (!e.contract) continue;
    const p = e.contract.payload;
    const opensAt = text(p.opensAt);
    const number = Number(text(obj(p.round).number) ?? obj(p.round).number);
    const price = text(p.amuletPrice);
    const opens = opensAt === undefined ? undefined : parseInstantMicros(opensAt);
    if (text(p.dso) !== dso || opens === undefined || opens >= nowUs || !Number.isSafeInteger(number))
      continue;
    if (price === undefined || !(decimalUnits(price) ?? 0n)) continue;
    if (!best || number > best.number)
      best = {
        c: { contract: e.contract, ...(e.domain_id ? { domain_id: e.domain_id } : {}) },
        number,
        price,
      };
  }
  // Not a refusal: rounds open every few minutes, the next try finds one.
  if (!best) throw new NoOpenRoundError();
  const disclosed = disclosedOf(best.c, amuletRules.synchronizerId, 'OpenMiningRound');
  return {
    amuletRules,
    round: {
      contractId: best.c.contract.contract_id,
      number: best.number,
      amuletPrice: best.price,
      disclosed,
    },
    synchronizerId: amuletRules.synchronizerId,
  };
}

/**
 * `entryFee / amuletPrice` in Numeric 10, as the subscription's payment
 * computes the amount of Canton Coin the DSO collects (rounded half to even,
 * Daml's rounding of decimal division).
 */
export function targetAmount(entryFeeUsd: string, amuletPrice: string): string {
  const q = (decimalUnits(amuletPrice) ?? 0n) > 0n ? divideDecimals(entryFeeUsd, amuletPrice) : undefined;
  if (q === undefined)
    throw new Refusal('bad_request', `cannot price ${entryFeeUsd} USD at ${amuletPrice} USD/CC`);
  return q;
}

/** `amount × (1 + percent/100)`, rounded up to Numeric 10: the most a lock may hold, fees included. */
export function withAllowance(amount: string, percent: number): string {
  const u = decimalUnits(amount) ?? 0n;
  const bp = BigInt(Math.round(percent * 100));
  return fromUnits((u * (10_000n + bp) + 9_999n) / 10_000n);
}

// ---- the party's own contracts --------------------------------------------------------------------

export interface AnsContract {
  contractId: string;
  arg: Record<string, unknown>;
  createdAt?: string;
}

/** A party's name-service contracts on its participant, grouped by template. */
export interface AnsSnapshot {
  entries: AnsContract[];
  contexts: AnsContract[];
  requests: AnsContract[];
  initialPayments: AnsContract[];
  idleStates: AnsContract[];
  payments: AnsContract[];
  locks: AnsContract[];
}

const KEYS: Record<keyof AnsSnapshot, string> = {
  entries: ANS_TEMPLATE.entry,
  contexts: ANS_TEMPLATE.context,
  requests: ANS_TEMPLATE.request,
  initialPayments: ANS_TEMPLATE.initialPayment,
  idleStates: ANS_TEMPLATE.idleState,
  payments: ANS_TEMPLATE.payment,
  locks: ANS_TEMPLATE.lockedAmulet,
};

/** Contracts read at most per party and pass. */
const ACS_LIMIT = 10_000;

const entityOf = (templateId: string) => templateId.split(':').slice(-2).join(':');

/** The party's name-service contracts (one active-contracts query). */
export async function ansSnapshot(ctx: Pick<FlowContext, 'ledger'>, partyId: string): Promise<AnsSnapshot> {
  const offset = (await ctx.ledger.ledgerEnd()).offset;
  const acs = await ctx.ledger.activeContracts(
    {
      activeAtOffset: offset,
      eventFormat: {
        filtersByParty: {
          [partyId]: {
            cumulative: Object.values(KEYS).map((templateId) => ({
              identifierFilter: { TemplateFilter: { value: { templateId, includeCreatedEventBlob: false } } },
            })),
          },
        },
        verbose: false,
      },
    },
    { limit: ACS_LIMIT },
  );
  // A cut-off list would read as contracts gone (a payment as refused, an entry as expired).
  if (acs.length >= ACS_LIMIT)
    throw new Error(
      `${partyId} has ${ACS_LIMIT} or more name-service contracts and locked holdings: too many to read at once; nothing is decided on a partial list`,
    );
  const out: AnsSnapshot = {
    entries: [],
    contexts: [],
    requests: [],
    initialPayments: [],
    idleStates: [],
    payments: [],
    locks: [],
  };
  const byEntity = new Map(Object.entries(KEYS).map(([k, t]) => [entityOf(t), k as keyof AnsSnapshot]));
  for (const item of acs) {
    const entry = item.contractEntry;
    if (!entry || !('JsActiveContract' in entry)) continue;
    const ev = entry.JsActiveContract.createdEvent;
    const key = byEntity.get(entityOf(ev.templateId));
    if (!key) continue;
    out[key].push({
      contractId: ev.contractId,
      arg: obj(ev.createArgument),
      ...(ev.createdAt ? { createdAt: ev.createdAt } : {}),
    });
  }
  return out;
}

/** `subscriptionData` of a subscription contract. */
export function subscriptionDataOf(c: AnsContract): {
  sender?: string;
  receiver?: string;
  dso?: string;
  description?: string;
} {
  const d = obj(c.arg.subscriptionData);
  const out: { sender?: string; receiver?: string; dso?: string; description?: string } = {};
  for (const k of ['sender', 'receiver', 'dso', 'description'] as const) {
    const v = text(d[k]);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

export const referenceOf = (c: AnsContract): string | undefined => text(c.arg.reference);
export const fieldText = (c: AnsContract, k: string): string | undefined => text(c.arg[k]);
export const fieldTime = (c: AnsContract, k: string): bigint | undefined => {
  const s = text(c.arg[k]);
  return s === undefined ? undefined : parseInstantMicros(s);
};

/** The lock's expiry and amount of a LockedAmulet. */
export function lockOf(c: AnsContract): { expiresAt?: bigint; amount?: string } {
  const lock = obj(c.arg.lock);
  const amulet = obj(c.arg.amulet);
  const exp = text(lock.expiresAt);
  const amount = text(obj(amulet.amount).initialAmount);
  return {
    ...(exp !== undefined && parseInstantMicros(exp) !== undefined
      ? { expiresAt: parseInstantMicros(exp)! }
      : {}),
    ...(amount !== undefined ? { amount } : {}),
  };
}

/** The description a subscription for `name` carries: the prefix, then the name as Daml's `show` quotes it. */
export function subscriptionDescription(prefix: string, name: string): string {
  return `${prefix}"${name.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/**
 * The Amulet (Canton Coin) side of the sandbox ledger: reading holdings,
 * rounds, preapprovals, transfer commands and instructions out of the active
 * contract set, and the contracts the DSO and validator automation create
 * (rounds, taps, preapprovals, counters, ANS entries). Amounts are Daml
 * Numeric 10 decimal strings, computed exactly.
 */
import type { Identifier, Value } from '../hashing/model.js';
import { fromUnits } from '../intent/decimal.js';
import { freshContractId } from './ledger/ids.js';
import type { Contract, LedgerStore, NewContract } from './ledger/store.js';
import { big, str } from './ledger/value-json.js';
import type { AmuletDso, OpenRound } from './prepared/amulet-inputs.js';
import { openRoundRecord } from './prepared/amulet-inputs.js';
import { addAmounts, subAmounts } from './prepared/amulet-transfer.js';
import {
  ANS_ID,
  ANS_PACKAGE_NAME,
  type AnsConfig,
  ansEntryRecord,
  ansRulesRecord,
  DEFAULT_ANS_CONFIG,
} from './prepared/ans.js';
import {
  amuletRecord,
  ID,
  ident,
  int,
  none,
  numericUnits,
  PACKAGE_NAME,
  PKG,
  party,
  record,
  some,
  text,
  ts,
} from './prepared/common.js';

/** Holding-fee rate per round the sandbox's rounds charge (the DevNet value of the vectors). */
export const HOLDING_FEE_RATE = '0.0000190259';
export const AMULET_PRICE = '0.005';
/** Transfer preapprovals live 90 days. */
export const PREAPPROVAL_LIFETIME_US = 90n * 86_400_000_000n;

export const HOLDING_INTERFACE: Identifier = ident(PKG.tokenHolding, 'Splice.Api.Token.HoldingV1', 'Holding');

export const EXTRA_ID = {
  transferCommandCounter: ident(
    PKG.spliceAmulet,
    'Splice.ExternalPartyAmuletRules',
    'TransferCommandCounter',
  ),
  /** The name service's templates live in splice-amulet-name-service (./prepared/ans.ts). */
  ansEntry: ANS_ID.ansEntry,
  ansRules: ANS_ID.ansRules,
  featuredAppRight: ident(PKG.spliceAmulet, 'Splice.Amulet', 'FeaturedAppRight'),
} as const;

/** a ≥ b for decimal strings. */
export const gte = (a: string, b: string) => numericUnits(a) >= numericUnits(b);
export const isPositive = (a: string) => numericUnits(a) > 0n;
export { addAmounts, subAmounts };

/** `amount * rate * rounds`, rounded down to 10 decimals. */
function holdingFee(initial: string, rate: string, rounds: bigint): string {
  if (rounds <= 0n) return '0.0000000000';
  const fee = (numericUnits(rate) * rounds) / 1n; // rate is per round and absolute (CC per round)
  const cap = numericUnits(initial);
  return fromUnits(fee > cap ? cap : fee);
}

export interface HoldingView {
  contractId: string;
  owner: string;
  /** Initial amount minus holding fees accrued up to `asOfRound`. */
  amount: string;
  initialAmount: string;
  createdRound: bigint;
  rate: string;
  fees: string;
  locked: boolean;
  lockHolders: string[];
  lockExpiresAt: bigint | undefined;
  contract: Contract;
}

/** The amulet record inside an Amulet or LockedAmulet contract. */
function amuletOf(c: Contract): Value | undefined {
  if (c.templateId.entityName === 'Amulet') return c.argument;
  if (c.templateId.entityName === 'LockedAmulet') {
    const a =
      c.argument.kind === 'record' ? c.argument.fields.find((f) => f.label === 'amulet')?.value : undefined;
    return a;
  }
  return undefined;
}

export function holdingView(c: Contract, asOfRound: bigint): HoldingView | undefined {
  const a = amuletOf(c);
  if (!a) return undefined;
  const owner = str(a, 'owner');
  const initialAmount = str(a, 'amount', 'initialAmount');
  const createdRound = big(a, 'amount', 'createdAt', 'number');
  const rate = str(a, 'amount', 'ratePerRound', 'rate');
  if (!owner || !initialAmount || createdRound === undefined || !rate) return undefined;
  const fees = holdingFee(initialAmount, rate, asOfRound - createdRound);
  const locked = c.templateId.entityName === 'LockedAmulet';
  const holders: string[] = [];
  let expiresAt: bigint | undefined;
  if (locked) {
    const lock =
      c.argument.kind === 'record' ? c.argument.fields.find((f) => f.label === 'lock')?.value : undefined;
    const hs = lock?.kind === 'record' ? lock.fields.find((f) => f.label === 'holders')?.value : undefined;
    if (hs?.kind === 'list') for (const h of hs.elements) if (h.kind === 'party') holders.push(h.value);
    expiresAt = lock ? big(lock, 'expiresAt') : undefined;
  }
  return {
    contractId: c.contractId,
    owner,
    amount: subAmounts(initialAmount, fees),
    initialAmount,
    createdRound,
    rate,
    fees,
    locked,
    lockHolders: holders,
    lockExpiresAt: expiresAt,
    contract: c,
  };
}

export function holdingsOf(store: LedgerStore, owner: string, asOfRound: bigint): HoldingView[] {
  const out: HoldingView[] = [];
  for (const c of store.activeContracts()) {
    const name = c.templateId.entityName;
    if (c.templateId.moduleName !== 'Splice.Amulet' || (name !== 'Amulet' && name !== 'LockedAmulet'))
      continue;
    const v = holdingView(c, asOfRound);
    if (v && v.owner === owner) out.push(v);
  }
  return out;
}

export interface BalanceTotals {
  totalUnlocked: string;
  totalLocked: string;
  totalHoldings: string;
  feesUnlocked: string;
  feesLocked: string;
  feesTotal: string;
}

export function balanceOf(store: LedgerStore, owner: string, asOfRound: bigint): BalanceTotals {
  const hs = holdingsOf(store, owner, asOfRound);
  const sum = (xs: string[]) => addAmounts('0', ...xs);
  const unlocked = hs.filter((h) => !h.locked);
  const locked = hs.filter((h) => h.locked);
  const totalUnlocked = sum(unlocked.map((h) => h.amount));
  const totalLocked = sum(locked.map((h) => h.amount));
  const feesUnlocked = sum(unlocked.map((h) => h.fees));
  const feesLocked = sum(locked.map((h) => h.fees));
  return {
    totalUnlocked,
    totalLocked,
    totalHoldings: addAmounts(totalUnlocked, totalLocked),
    feesUnlocked,
    feesLocked,
    feesTotal: addAmounts(feesUnlocked, feesLocked),
  };
}

// ---- rounds -----------------------------------------------------------------------

/** An OpenMiningRound contract as the transaction builders take it. */
export function openRoundOf(c: Contract): OpenRound {
  return {
    contractId: c.contractId,
    createdAt: c.createdAt,
    number: big(c.argument, 'round', 'number') ?? 0n,
    amuletPrice: str(c.argument, 'amuletPrice') ?? AMULET_PRICE,
    opensAt: big(c.argument, 'opensAt') ?? 0n,
    targetClosesAt: big(c.argument, 'targetClosesAt') ?? 0n,
  };
}

export function openRounds(store: LedgerStore): (OpenRound & { contract: Contract })[] {
  return store
    .activeContracts('Splice.Round:OpenMiningRound')
    .map((c) => ({ contract: c, ...openRoundOf(c) }))
    .sort((a, b) => (a.number < b.number ? -1 : a.number > b.number ? 1 : 0));
}

export function newRoundContract(dso: string, number: bigint, now: bigint, tickUs: bigint): NewContract {
  const r: OpenRound = {
    contractId: freshContractId(),
    createdAt: now,
    number,
    amuletPrice: AMULET_PRICE,
    opensAt: now,
    targetClosesAt: now + 2n * tickUs,
  };
  return dsoContract(dso, ID.openMiningRound, openRoundRecord(dso, r), r.contractId);
}

// ---- contract constructors for automation ------------------------------------------------

function dsoContract(
  dso: string,
  templateId: Identifier,
  argument: Value,
  contractId = freshContractId(),
): NewContract {
  return {
    contractId,
    templateId,
    packageName: PACKAGE_NAME.amulet,
    argument,
    signatories: [dso],
    stakeholders: [dso],
    nodeId: 0,
  };
}

export function amuletRulesContract(dso: string): NewContract {
  return dsoContract(
    dso,
    ID.amuletRules,
    record(ID.amuletRules, [
      ['dso', party(dso)],
      ['isDevNet', { kind: 'bool', value: true }],
    ]),
  );
}

export function externalRulesContract(dso: string): NewContract {
  return {
    ...dsoContract(dso, ID.externalRulesInput, record(ID.externalRules, [['dso', party(dso)]])),
    interfaces: [ID.transferFactory],
  };
}

export function amuletContract(
  dso: string,
  owner: string,
  amount: string,
  round: bigint,
  nodeId = 0,
): NewContract {
  return {
    contractId: freshContractId(),
    templateId: ID.amulet,
    packageName: PACKAGE_NAME.amulet,
    argument: amuletRecord(dso, owner, amount, round, HOLDING_FEE_RATE),
    signatories: sortedSet(dso, owner),
    stakeholders: sortedSet(dso, owner),
    interfaces: [HOLDING_INTERFACE],
    nodeId,
  };
}

export function transferPreapprovalContract(
  dso: string,
  receiver: string,
  provider: string,
  now: bigint,
  expiresAt = now + PREAPPROVAL_LIFETIME_US,
): NewContract {
  return {
    contractId: freshContractId(),
    templateId: ID.transferPreapproval,
    packageName: PACKAGE_NAME.amulet,
    argument: record(ID.transferPreapproval, [
      ['dso', party(dso)],
      ['receiver', party(receiver)],
      ['provider', party(provider)],
      ['validFrom', ts(now)],
      ['lastRenewedAt', ts(now)],
      ['expiresAt', ts(expiresAt)],
    ]),
    signatories: sortedSet(dso, receiver, provider),
    stakeholders: sortedSet(dso, receiver, provider),
    nodeId: 0,
  };
}

export function setupProposalContract(
  dso: string,
  validator: string,
  user: string,
  now: bigint,
): NewContract {
  return {
    contractId: freshContractId(),
    templateId: ID.setupProposal,
    packageName: PACKAGE_NAME.amulet,
    argument: record(ID.setupProposal, [
      ['validator', party(validator)],
      ['user', party(user)],
      ['dso', party(dso)],
      ['createdAt', ts(now)],
      ['preapprovalExpiresAt', ts(now + PREAPPROVAL_LIFETIME_US)],
    ]),
    signatories: sortedSet(dso, validator),
    stakeholders: sortedSet(dso, validator, user),
    nodeId: 0,
  };
}

export function transferCommandCounterContract(dso: string, sender: string, nextNonce: bigint): NewContract {
  return {
    ...dsoContract(
      dso,
      EXTRA_ID.transferCommandCounter,
      record(EXTRA_ID.transferCommandCounter, [
        ['dso', party(dso)],
        ['sender', party(sender)],
        ['nextNonce', int(nextNonce)],
      ]),
    ),
    stakeholders: sortedSet(dso, sender),
  };
}

/** An AnsEntry (splice-amulet-name-service), url and description empty, signed by the user and the DSO. */
export function ansEntryContract(dso: string, user: string, name: string, expiresAt: bigint): NewContract {
  return {
    contractId: freshContractId(),
    templateId: ANS_ID.ansEntry,
    packageName: ANS_PACKAGE_NAME.nameService,
    argument: ansEntryRecord({ dso, user, name, url: '', description: '' }, expiresAt),
    signatories: sortedSet(dso, user),
    stakeholders: sortedSet(dso, user),
    nodeId: 0,
  };
}

/** The DSO's AnsRules (splice-amulet-name-service) with configuration `config`. */
export function ansRulesContract(dso: string, config: AnsConfig = DEFAULT_ANS_CONFIG): NewContract {
  return {
    ...dsoContract(dso, ANS_ID.ansRules, ansRulesRecord(dso, config)),
    packageName: ANS_PACKAGE_NAME.nameService,
  };
}

export function sortedSet(...xs: string[]): string[] {
  return [...new Set(xs)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The DSO contracts a transfer reads, in the builders' form. */
export function amuletDso(dso: string, rules: Contract, round: OpenRound): AmuletDso {
  return {
    dso,
    amuletRules: { contractId: rules.contractId, createdAt: rules.createdAt, argument: rules.argument },
    openRound: round,
    holdingFeeRate: HOLDING_FEE_RATE,
  };
}

export const optionalText = (s: string | undefined): Value => (s === undefined ? none : some(text(s)));

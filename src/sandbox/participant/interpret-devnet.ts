/**
 * The interpreter's AmuletRules choices for DevNet faucets and synchronizer
 * traffic: AmuletRules_DevNet_Tap, AmuletRules_DevNet_FeatureApp and
 * AmuletRules_BuyMemberTraffic, checked as the Daml choices check them
 * (controller, isDevNet, the open round and the AmuletRules disclosed to a
 * non-stakeholder, positive amounts, the synchronizer and minimum top-up, the
 * buyer's own amulets worth the price) and built with ../prepared/devnet.ts.
 */
import type { PreparedTransaction } from '../../hashing/model.js';
import { fromUnits } from '../../intent/decimal.js';
import { addAmounts, amuletDso, gte, holdingView, isPositive, openRoundOf } from '../amulet.js';
import { E } from '../errors.js';
import type { Contract } from '../ledger/store.js';
import { path, str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import type { OpenRound } from '../prepared/amulet-inputs.js';
import { numericUnits } from '../prepared/common.js';
import { buyMemberTraffic, devNetFeatureApp, devNetTap } from '../prepared/devnet.js';
import {
  contractNotFound,
  decimalArg,
  envelope,
  interpretationError,
  invalidTransfer,
  isObj,
  type Json,
  missingAuthorization,
  type PrepareCommand,
  parseTemplateId,
  partyArg,
  requireVisible,
  textArg,
} from './interpret.js';

/** Splice's default synchronizer fees: extra traffic costs this many USD per MB … */
export const EXTRA_TRAFFIC_PRICE_USD_PER_MB = '16.67';
/** … and one purchase buys at least this many bytes. */
export const MIN_TOPUP_BYTES = 200_000n;
/** AmuletConfig's maxNumInputs of the sandbox's transfer configuration. */
const MAX_NUM_INPUTS = 100;

/** The choices this module interprets (all on AmuletRules). */
export const DEVNET_CHOICES = [
  'AmuletRules_DevNet_Tap',
  'AmuletRules_DevNet_FeatureApp',
  'AmuletRules_BuyMemberTraffic',
] as const;

export function interpretDevNetChoice(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  cmd: Json,
  choice: (typeof DEVNET_CHOICES)[number],
  arg: Json,
): PreparedTransaction {
  const rules = amuletRulesTarget(net, req, actor, cmd);
  if (choice === 'AmuletRules_DevNet_Tap') {
    const receiver = partyArg(arg, 'receiver');
    const amount = decimalArg(arg, 'amount');
    controllerIs(actor, receiver, 'receiver');
    requireDevNet(rules);
    const round = openRoundArg(net, req, actor, arg.openRound, 'openRound');
    // Amulet's ensure clause: a holding is never empty or negative.
    if (!isPositive(amount))
      throw interpretationError(`Template precondition violated: amount must be positive, got ${amount}`);
    return devNetTap({
      ...envelope(net, req, actor),
      dso: amuletDso(net.dso, rules, round),
      receiver,
      amount,
    });
  }
  if (choice === 'AmuletRules_DevNet_FeatureApp') {
    const provider = partyArg(arg, 'provider');
    controllerIs(actor, provider, 'provider');
    requireDevNet(rules);
    return devNetFeatureApp({
      ...envelope(net, req, actor),
      dso: amuletDso(net.dso, rules, net.latestRound()),
      provider,
    });
  }
  return buyTraffic(net, req, actor, rules, arg);
}

function buyTraffic(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  rules: Contract,
  arg: Json,
): PreparedTransaction {
  const provider = partyArg(arg, 'provider');
  controllerIs(actor, provider, 'provider');
  const memberId = textArg(arg, 'memberId');
  const synchronizerId = textArg(arg, 'synchronizerId');
  const migrationId = intArg(arg, 'migrationId');
  const trafficAmount = intArg(arg, 'trafficAmount');
  const expectedDso =
    arg.expectedDso === null || arg.expectedDso === undefined ? undefined : partyArg(arg, 'expectedDso');
  if (expectedDso !== undefined && expectedDso !== net.dso)
    throw interpretationError(
      `expectedDso ${expectedDso} is not the DSO party ${net.dso} of the AmuletRules`,
    );
  const ctx = arg.context;
  if (!isObj(ctx)) throw E.failedToPrepare('Missing non-optional field context (TransferContext)');
  for (const k of ['issuingMiningRounds', 'validatorRights'] as const)
    if (Array.isArray(ctx[k]) ? ctx[k].length > 0 : ctx[k] !== undefined && ctx[k] !== null)
      throw E.failedToPrepare(
        `The sandbox participant interprets AmuletRules_BuyMemberTraffic with amulet inputs only: context.${k} must be empty`,
      );
  if (ctx.featuredAppRight !== null && ctx.featuredAppRight !== undefined)
    throw E.failedToPrepare(
      'The sandbox participant interprets AmuletRules_BuyMemberTraffic without a featured app right: context.featuredAppRight must be null',
    );
  // The choice validates its parameters against the configuration before touching any contract.
  if (synchronizerId !== net.synchronizerId)
    throw invalidTransfer(`ITR_UnknownSynchronizer {synchronizerId = "${synchronizerId}"}`);
  if (trafficAmount < MIN_TOPUP_BYTES)
    throw invalidTransfer(
      `ITR_InsufficientTopupAmount {requestedTopupAmount = ${trafficAmount}, minTopupAmount = ${MIN_TOPUP_BYTES}}`,
    );
  if (migrationId < 0n) throw interpretationError('Template precondition violated: migrationId must be >= 0');
  if (memberId === '')
    throw interpretationError('Template precondition violated: memberId must not be empty');
  const round = openRoundArg(net, req, actor, ctx.openMiningRound, 'context.openMiningRound');
  const inputsJson = arg.inputs;
  if (!Array.isArray(inputsJson))
    throw E.failedToPrepare('Missing non-optional field inputs (a list of TransferInput)');
  if (inputsJson.length > MAX_NUM_INPUTS)
    throw invalidTransfer('ITR_Other {description = "More than the maximum number of inputs"}');
  const inputs = inputsJson.map((x, k) => {
    if (!isObj(x) || x.tag !== 'InputAmulet' || typeof x.value !== 'string')
      throw E.failedToPrepare(
        `inputs[${k}]: the sandbox participant interprets InputAmulet inputs only, got ${JSON.stringify(x)}`,
      );
    const c = net.store.get(x.value);
    const v = c?.templateId.entityName === 'Amulet' ? holdingView(c, round.number) : undefined;
    if (!c || !v) throw contractNotFound(x.value);
    requireVisible(req, actor, c);
    if (v.owner !== provider)
      throw interpretationError(`amulet ${x.value} is owned by ${v.owner}, not by the buyer ${provider}`);
    return {
      contractId: c.contractId,
      createdAt: c.createdAt,
      amount: v.initialAmount,
      createdRound: v.createdRound,
      rate: v.rate,
      value: v.amount,
    };
  });
  const { usd, amulet } = trafficCost(trafficAmount, round.amuletPrice);
  const total = addAmounts('0', ...inputs.map((h) => h.value));
  if (!gte(total, amulet))
    throw invalidTransfer(
      `ITR_InsufficientFunds {missingAmount = ${fromUnits(numericUnits(amulet) - numericUnits(total))}} (the inputs hold ${total} CC as of round ${round.number}; ${trafficAmount} bytes cost ${amulet} CC)`,
    );
  return buyMemberTraffic({
    ...envelope(net, req, actor),
    minLedgerEffectiveTime: round.opensAt,
    dso: amuletDso(net.dso, rules, round),
    provider,
    memberId,
    synchronizerId,
    migrationId,
    trafficAmount,
    expectedDso,
    amuletPaid: amulet,
    usdPaid: usd,
    inputs,
  });
}

/** `bytes` of extra traffic at the configured $/MB, in USD and in CC at `amuletPrice` (Numeric 10, half-even). */
export function trafficCost(bytes: bigint, amuletPrice: string): { usd: string; amulet: string } {
  const usdUnits = (bytes * numericUnits(EXTRA_TRAFFIC_PRICE_USD_PER_MB)) / 1_000_000n; // exact: price has 2 decimals
  const amuletUnits = divHalfEven(usdUnits * 10_000_000_000n, numericUnits(amuletPrice));
  return { usd: fromUnits(usdUnits), amulet: fromUnits(amuletUnits) };
}

function divHalfEven(a: bigint, b: bigint): bigint {
  const q = a / b;
  const r2 = (a % b) * 2n;
  if (r2 > b || (r2 === b && q % 2n !== 0n)) return q + 1n;
  return q;
}

// ---- checks shared by the three choices ----------------------------------------------------

/** The exercised contract: the DSO's AmuletRules, visible to the submitter (disclosed if it is no stakeholder). */
function amuletRulesTarget(net: SandboxNetwork, req: PrepareCommand, actor: string, cmd: Json): Contract {
  const t = parseTemplateId(cmd.templateId);
  if (t?.module !== 'Splice.AmuletRules' || t.entity !== 'AmuletRules')
    throw E.failedToPrepare(
      `The sandbox participant interprets ${String(cmd.choice)} on Splice.AmuletRules:AmuletRules only, not on ${String(cmd.templateId)}`,
    );
  const rules = net.amuletRules();
  if (cmd.contractId !== rules.contractId) throw contractNotFound(String(cmd.contractId));
  requireVisible(req, actor, rules);
  return rules;
}

function controllerIs(actor: string, controller: string, role: string): void {
  if (actor !== controller) throw missingAuthorization(controller, `${role}, the choice's controller`);
}

function requireDevNet(rules: Contract): void {
  const flag = path(rules.argument, 'isDevNet');
  if (flag?.kind !== 'bool' || !flag.value) throw interpretationError('isDevNet flag is true');
}

/** An active OpenMiningRound of the DSO (an archived one is a closed round: not found), visible to the submitter. */
function openRoundArg(
  net: SandboxNetwork,
  req: PrepareCommand,
  actor: string,
  id: unknown,
  field: string,
): OpenRound {
  if (typeof id !== 'string' || id === '')
    throw E.failedToPrepare(`Missing non-optional field ${field} (ContractId OpenMiningRound)`);
  const c = net.store.get(id);
  if (c?.templateId.entityName !== 'OpenMiningRound' || str(c.argument, 'dso') !== net.dso)
    throw contractNotFound(id);
  requireVisible(req, actor, c);
  return openRoundOf(c);
}

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/** A Daml Int64 in JSON: a decimal string (or a safe integer number). */
function intArg(o: Json, name: string): bigint {
  const v = o[name];
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^-?(0|[1-9]\d{0,18})$/.test(v)) {
    const n = BigInt(v);
    if (n >= INT64_MIN && n <= INT64_MAX) return n;
  }
  throw E.failedToPrepare(
    `field ${name} must be an Int64 (a decimal integer string from -2^63 to 2^63 - 1), got ${JSON.stringify(v)}`,
  );
}

/**
 * The AmuletRules choices of DevNet faucets and synchronizer traffic, as the
 * Wallet SDK's `amulet.tap`, `amulet.featuredApp.grant` and `amulet.traffic.buy`
 * build them: AmuletRules_DevNet_Tap (→ AmuletRules_Mint), AmuletRules_DevNet_FeatureApp
 * and AmuletRules_BuyMemberTraffic (a self-transfer that splits off the cost,
 * burns it and creates a MemberTraffic). No real vector of these actions exists
 * in ../shared/vectors/real: the node structure follows the Daml choices and is
 * NOT checked against a participant's output.
 */
import type { NodeBody, PreparedTransaction, Value } from '../../hashing/model.js';
import { fromUnits } from '../../intent/decimal.js';
import {
  type AmuletDso,
  amuletRulesInput,
  dsoRef,
  holdingRef,
  openRoundInput,
  openRoundRecord,
} from './amulet-inputs.js';
import { type AmuletHolding, addAmounts, inputValue, subAmounts, transferResult } from './amulet-transfer.js';
import {
  amuletRecord,
  amuletType,
  archiveNode,
  assemble,
  cid,
  createNode,
  type Envelope,
  exerciseNode,
  fetchNode,
  ID,
  ident,
  inputAmulet,
  int,
  list,
  metadata,
  mintContractId,
  none,
  num,
  numericUnits,
  PACKAGE_NAME,
  PKG,
  party,
  record,
  round,
  some,
  text,
  transferContext,
} from './common.js';

const TX_KIND = 'splice.lfdecentralizedtrust.org/tx-kind';
const REASON = 'splice.lfdecentralizedtrust.org/reason';
const BURNED = 'splice.lfdecentralizedtrust.org/burned';

export const FEATURED_APP_RIGHT = ident(PKG.spliceAmulet, 'Splice.Amulet', 'FeaturedAppRight');
export const MEMBER_TRAFFIC_ID = ident(PKG.spliceAmulet, 'Splice.DecentralizedSynchronizer', 'MemberTraffic');
const VALIDATOR_REWARD_COUPON = ident(PKG.spliceAmulet, 'Splice.Amulet', 'ValidatorRewardCoupon');
const rules = (name: string) => amuletType('Splice.AmuletRules', name);

/** Daml's `show` of a Decimal: no trailing zeros beyond the first decimal (`666.8`, `5.0`). */
export function showDecimal(amount: string): string {
  const [whole, frac = ''] = fromUnits(numericUnits(amount)).split('.');
  const trimmed = frac.replace(/0+$/, '');
  return `${whole}.${trimmed === '' ? '0' : trimmed}`;
}

/** `AmuletCreateSummary { amulet, amuletPrice, round }`. */
const createSummary = (amuletCid: string, d: AmuletDso): Value =>
  record(amuletType('Splice.Amulet', 'AmuletCreateSummary'), [
    ['amulet', cid(amuletCid)],
    ['amuletPrice', num(d.openRound.amuletPrice)],
    ['round', round(d.openRound.number)],
  ]);

// ---- AmuletRules_DevNet_Tap ---------------------------------------------------------------

export interface DevNetTapInput extends Envelope {
  dso: AmuletDso;
  receiver: string;
  amount: string;
}

/**
 * 0 AmuletRules_DevNet_Tap (receiver) → 1 AmuletRules_Mint (DSO and receiver)
 * → 2 fetch of the open round, 3 the new Amulet (created in the open round,
 * holding fee of the round's configuration).
 */
export function devNetTap(i: DevNetTapInput): PreparedTransaction {
  const d = i.dso;
  const amuletCid = mintContractId(i.seeds(3));
  const mintArg = (choice: string) =>
    record(rules(choice), [
      ['receiver', party(i.receiver)],
      ['amount', num(i.amount)],
      ['openRound', cid(d.openRound.contractId)],
    ]);
  const rulesRef = dsoRef(d.dso, d.amuletRules);
  const tap = exerciseNode(rulesRef, {
    actingParties: [i.receiver],
    choiceId: 'AmuletRules_DevNet_Tap',
    chosenValue: mintArg('AmuletRules_DevNet_Tap'),
    consuming: false,
    children: [1],
    exerciseResult: record(rules('AmuletRules_DevNet_TapResult'), [
      ['amuletSum', createSummary(amuletCid, d)],
      ['meta', some(metadata({ [REASON]: text('tapped faucet'), [TX_KIND]: text('mint') }))],
    ]),
  });
  const mint = exerciseNode(rulesRef, {
    actingParties: [d.dso, i.receiver],
    choiceId: 'AmuletRules_Mint',
    chosenValue: mintArg('AmuletRules_Mint'),
    consuming: false,
    children: [2, 3],
    exerciseResult: record(rules('AmuletRules_MintResult'), [['amuletSum', createSummary(amuletCid, d)]]),
  });
  const fetchRound = fetchNode(dsoRef(d.dso, d.openRound, ID.openMiningRound), [d.dso]);
  const amulet = createNode(
    holdingRef(d.dso, i.receiver, amuletCid),
    amuletRecord(d.dso, i.receiver, i.amount, d.openRound.number, d.holdingFeeRate),
  );
  return assemble(i, [tap, mint, fetchRound, amulet], [amuletRulesInput(d), openRoundInput(d)]);
}

// ---- AmuletRules_DevNet_FeatureApp ----------------------------------------------------------

export interface DevNetFeatureAppInput extends Envelope {
  dso: AmuletDso;
  provider: string;
}

/** 0 AmuletRules_DevNet_FeatureApp (provider) → 1 FeaturedAppRight (signed by the DSO, seen by the provider). */
export function devNetFeatureApp(i: DevNetFeatureAppInput): PreparedTransaction {
  const d = i.dso;
  const rightCid = mintContractId(i.seeds(1));
  const root = exerciseNode(dsoRef(d.dso, d.amuletRules), {
    actingParties: [i.provider],
    choiceId: 'AmuletRules_DevNet_FeatureApp',
    chosenValue: record(rules('AmuletRules_DevNet_FeatureApp'), [['provider', party(i.provider)]]),
    consuming: false,
    children: [1],
    exerciseResult: record(rules('AmuletRules_DevNet_FeatureAppResult'), [
      ['featuredAppRightCid', cid(rightCid)],
    ]),
  });
  const right = createNode(
    {
      contractId: rightCid,
      packageName: PACKAGE_NAME.amulet,
      templateId: FEATURED_APP_RIGHT,
      signatories: [d.dso],
      stakeholders: [d.dso, i.provider],
    },
    record(FEATURED_APP_RIGHT, [
      ['dso', party(d.dso)],
      ['provider', party(i.provider)],
    ]),
  );
  return assemble(i, [root, right], [amuletRulesInput(d)]);
}

// ---- AmuletRules_BuyMemberTraffic ------------------------------------------------------------

export interface BuyMemberTrafficInput extends Envelope {
  dso: AmuletDso;
  provider: string;
  memberId: string;
  synchronizerId: string;
  migrationId: bigint;
  trafficAmount: bigint;
  /** `expectedDso` as the command gave it (absent: left out of the argument). */
  expectedDso: string | undefined;
  /** The traffic's price: CC burnt and its USD value. */
  amuletPaid: string;
  usdPaid: string;
  /** The provider's amulets, with their value as of the open round (holding fees deducted). */
  inputs: AmuletHolding[];
}

/**
 * 0 AmuletRules_BuyMemberTraffic (provider): 1 fetch of the open round, 2
 * OpenMiningRound_Fetch (the price), then the self-transfer that splits off the
 * cost (3 fetch of the round; per input a fetch and an Archive; the split
 * amulet; the change), the burn of the split amulet (fetch, Archive), the
 * ValidatorRewardCoupon over the burn and the MemberTraffic.
 */
export function buyMemberTraffic(i: BuyMemberTrafficInput): PreparedTransaction {
  const d = i.dso;
  const roundRef = dsoRef(d.dso, d.openRound, ID.openMiningRound);
  const total = addAmounts(...i.inputs.map(inputValue));
  const changeAmount = subAmounts(total, i.amuletPaid);
  const hasChange = numericUnits(changeAmount) > 0n;

  // The root's children, node ids 1, 2, … in pre-order (the root is node 0).
  const kids: NodeBody[] = [];
  const nextId = () => kids.length + 1;
  const at = (n: NodeBody) => kids.push(n);
  at(fetchNode(roundRef, [d.dso]));
  at(
    exerciseNode(roundRef, {
      actingParties: [i.provider],
      choiceId: 'OpenMiningRound_Fetch',
      chosenValue: record(amuletType('Splice.Round', 'OpenMiningRound_Fetch'), [['p', party(i.provider)]]),
      consuming: false,
      children: [],
      exerciseResult: openRoundRecord(d.dso, d.openRound),
    }),
  );
  at(fetchNode(roundRef, [d.dso]));
  for (const h of i.inputs) {
    const ref = holdingRef(d.dso, i.provider, h.contractId);
    at(fetchNode(ref, [d.dso, i.provider]));
    at(archiveNode(ref, [d.dso, i.provider]));
  }
  const splitCid = mintContractId(i.seeds(nextId()));
  const splitRef = holdingRef(d.dso, i.provider, splitCid);
  at(
    createNode(splitRef, amuletRecord(d.dso, i.provider, i.amuletPaid, d.openRound.number, d.holdingFeeRate)),
  );
  let changeCid: string | undefined;
  if (hasChange) {
    changeCid = mintContractId(i.seeds(nextId()));
    at(
      createNode(
        holdingRef(d.dso, i.provider, changeCid),
        amuletRecord(d.dso, i.provider, changeAmount, d.openRound.number, d.holdingFeeRate),
      ),
    );
  }
  at(fetchNode(splitRef, [d.dso, i.provider]));
  at(archiveNode(splitRef, [d.dso, i.provider]));
  const couponCid = mintContractId(i.seeds(nextId()));
  at(
    createNode(
      {
        contractId: couponCid,
        packageName: PACKAGE_NAME.amulet,
        templateId: VALIDATOR_REWARD_COUPON,
        signatories: [d.dso],
        stakeholders: [d.dso, i.provider],
      },
      record(VALIDATOR_REWARD_COUPON, [
        ['dso', party(d.dso)],
        ['user', party(i.provider)],
        ['amount', num(i.amuletPaid)],
        ['round', round(d.openRound.number)],
      ]),
    ),
  );
  const trafficCid = mintContractId(i.seeds(nextId()));
  at(
    createNode(
      {
        contractId: trafficCid,
        packageName: PACKAGE_NAME.amulet,
        templateId: MEMBER_TRAFFIC_ID,
        signatories: [d.dso],
        stakeholders: [d.dso],
      },
      record(MEMBER_TRAFFIC_ID, [
        ['dso', party(d.dso)],
        ['memberId', text(i.memberId)],
        ['synchronizerId', text(i.synchronizerId)],
        ['migrationId', int(i.migrationId)],
        ['totalPurchased', int(i.trafficAmount)],
        ['numPurchases', int(1)],
        ['amuletSpent', num(i.amuletPaid)],
        ['usdSpent', num(i.usdPaid)],
      ]),
    ),
  );

  // The split-off transfer's round and summary, as AmuletRules_Transfer would report them.
  const split = transferResult(
    {
      dso: d,
      sender: i.provider,
      provider: i.provider,
      receiver: i.provider,
      amount: i.amuletPaid,
      inputs: i.inputs,
      actingParties: [i.provider],
      at: 0,
      outputCid: splitCid,
      change: changeCid ? { contractId: changeCid, argument: { kind: 'unit' } } : undefined,
      outputArgument: { kind: 'unit' },
      extraMeta: {},
    },
    false,
  );
  const field = (v: Value, label: string) =>
    v.kind === 'record' ? v.fields.find((f) => f.label === label)!.value : v;
  const argFields: [string, Value][] = [
    ['inputs', list(i.inputs.map((h) => inputAmulet(h.contractId)))],
    ['context', transferContext(d.openRound.contractId)],
    ['provider', party(i.provider)],
    ['memberId', text(i.memberId)],
    ['synchronizerId', text(i.synchronizerId)],
    ['migrationId', int(i.migrationId)],
    ['trafficAmount', int(i.trafficAmount)],
  ];
  if (i.expectedDso !== undefined) argFields.push(['expectedDso', some(party(i.expectedDso))]);
  const root = exerciseNode(dsoRef(d.dso, d.amuletRules), {
    actingParties: [i.provider],
    choiceId: 'AmuletRules_BuyMemberTraffic',
    chosenValue: record(rules('AmuletRules_BuyMemberTraffic'), argFields),
    consuming: false,
    children: kids.map((_, k) => k + 1),
    exerciseResult: record(rules('AmuletRules_BuyMemberTrafficResult'), [
      ['round', field(split, 'round')],
      ['summary', field(split, 'summary')],
      ['amuletPaid', num(i.amuletPaid)],
      ['purchasedTraffic', cid(trafficCid)],
      ['senderChangeAmulet', changeCid ? some(cid(changeCid)) : none],
      [
        'meta',
        some(
          metadata({
            [BURNED]: text(showDecimal(i.amuletPaid)),
            [REASON]: text('traffic purchase'),
            [TX_KIND]: text('burn'),
          }),
        ),
      ],
    ]),
  });
  const inputs = [
    amuletRulesInput(d),
    openRoundInput(d),
    ...i.inputs.map((h) => ({
      ref: holdingRef(d.dso, i.provider, h.contractId),
      argument: amuletRecord(d.dso, i.provider, h.amount, h.createdRound, h.rate),
      createdAt: h.createdAt,
    })),
  ];
  return assemble(i, [root, ...kids], inputs);
}

/**
 * Splice-amulet contracts the Amulet builders read (AmuletRules, the open
 * mining round, ExternalPartyAmuletRules, holdings), as references plus the
 * input-contract entries the metadata carries for them. Record shapes follow
 * the input contracts of the real vectors (v2_bitgo_transferrawtxnwithmemo…,
 * v2_bitgo_transferrejectionprepareresponse).
 */

import type { Value } from '../../hashing/model.js';
import {
  type ContractRef,
  ID,
  type InputSpec,
  ident,
  int,
  list,
  num,
  PACKAGE_NAME,
  party,
  record,
  round,
  some,
  amuletType as t,
  ts,
} from './common.js';

/** A contract that exists on the ledger before the transaction (ids are suffixed, 138 hex digits). */
export interface Existing {
  contractId: string;
  createdAt: bigint; // µs
}

export interface OpenRound extends Existing {
  number: bigint;
  amuletPrice: string;
  opensAt: bigint;
  targetClosesAt: bigint;
}

/** The DSO-owned contracts every Amulet transfer reads. */
export interface AmuletDso {
  dso: string;
  amuletRules: Existing & { argument?: Value };
  openRound: OpenRound;
  /** Holding fee rate per round of newly created amulets. */
  holdingFeeRate: string;
}

export const dsoRef = (dso: string, c: Existing, templateId = ID.amuletRules): ContractRef => ({
  contractId: c.contractId,
  packageName: PACKAGE_NAME.amulet,
  templateId,
  signatories: [dso],
  stakeholders: [dso],
});

export const holdingRef = (
  dso: string,
  owner: string,
  contractId: string,
  templateId = ID.amulet,
): ContractRef => ({
  contractId,
  packageName: PACKAGE_NAME.amulet,
  templateId,
  signatories: [dso, owner],
  stakeholders: [dso, owner],
});

/** `DA.Time.Types:RelTime { microseconds }` (daml-stdlib). */
export const relTime = (us: bigint): Value =>
  record(
    ident('b70db8369e1c461d5c70f1c86f526a29e9776c655e6ffc2560f95b05ccb8b946', 'DA.Time.Types', 'RelTime'),
    [['microseconds', int(us)]],
  );
const tuple2 = (a: string, b: string): Value =>
  record(ident('5aee9b21b8e9a4c4975b5f4c4198e6e6e8469df49e2010820e792f393db870f4', 'DA.Types', 'Tuple2'), [
    ['_1', num(a)],
    ['_2', num(b)],
  ]);
const fixedFee = (fee: string): Value => record(t('Splice.Fees', 'FixedFee'), [['fee', num(fee)]]);

/** `OpenMiningRound` argument with the DevNet transfer and issuance configuration of the vectors. */
export function openRoundRecord(dso: string, r: OpenRound): Value {
  return record(ID.openMiningRound, [
    ['dso', party(dso)],
    ['round', round(r.number)],
    ['amuletPrice', num(r.amuletPrice)],
    ['opensAt', ts(r.opensAt)],
    ['targetClosesAt', ts(r.targetClosesAt)],
    ['issuingFor', relTime(r.number * 600_000_000n)],
    [
      'transferConfigUsd',
      record(t('Splice.AmuletConfig', 'TransferConfig'), [
        ['createFee', fixedFee('0')],
        ['holdingFee', record(t('Splice.Fees', 'RatePerRound'), [['rate', num('0.0000190259')]])],
        [
          'transferFee',
          record(t('Splice.Fees', 'SteppedRate'), [
            ['initialRate', num('0')],
            ['steps', list([tuple2('100', '0'), tuple2('1000', '0'), tuple2('1000000', '0')])],
          ]),
        ],
        ['lockHolderFee', fixedFee('0')],
        ['extraFeaturedAppRewardAmount', num('1')],
        ['maxNumInputs', int(100)],
        ['maxNumOutputs', int(100)],
        ['maxNumLockHolders', int(50)],
      ]),
    ],
    [
      'issuanceConfig',
      record(t('Splice.Issuance', 'IssuanceConfig'), [
        ['amuletToIssuePerYear', num('40000000000')],
        ['validatorRewardPercentage', num('0.05')],
        ['appRewardPercentage', num('0.15')],
        ['validatorRewardCap', num('0.2')],
        ['featuredAppRewardCap', num('20000')],
        ['unfeaturedAppRewardCap', num('0.6')],
        ['optValidatorFaucetCap', some(num('570'))],
      ]),
    ],
    ['tickDuration', relTime(600_000_000n)],
  ]);
}

/**
 * `AmuletRules` argument. The real one carries the whole AmuletConfig schedule
 * (about 2 kB); the sandbox passes its own in `amuletRules.argument`, else this
 * reduced record (dso and isDevNet only) stands in.
 */
export function amuletRulesRecord(d: AmuletDso): Value {
  return (
    d.amuletRules.argument ??
    record(ID.amuletRules, [
      ['dso', party(d.dso)],
      ['isDevNet', { kind: 'bool', value: true }],
    ])
  );
}

export const amuletRulesInput = (d: AmuletDso): InputSpec => ({
  ref: dsoRef(d.dso, d.amuletRules),
  argument: amuletRulesRecord(d),
  createdAt: d.amuletRules.createdAt,
});

export const openRoundInput = (d: AmuletDso): InputSpec => ({
  ref: dsoRef(d.dso, d.openRound, ID.openMiningRound),
  argument: openRoundRecord(d.dso, d.openRound),
  createdAt: d.openRound.createdAt,
});

/** ExternalPartyAmuletRules input contract (created by the older package, as in the vectors). */
export const externalRulesInput = (dso: string, c: Existing): InputSpec => ({
  ref: dsoRef(dso, c, ID.externalRulesInput),
  argument: record(ID.externalRules, [['dso', party(dso)]]),
  createdAt: c.createdAt,
});

/**
 * Synchronizer traffic as Scan reports it (`getMemberTrafficStatus`), in a simple model
 * read off the ledger. Purchased: the `totalPurchased` of the member's
 * `Splice.DecentralizedSynchronizer:MemberTraffic` contracts (what a traffic purchase
 * creates). Limit: the same, as the sandbox's sequencer applies a top-up at once.
 * Consumed: a fixed cost per transaction submitted through the participant's Ledger API
 * since the member's first purchase, never beyond the limit (before any purchase the
 * participant runs on the free base rate, which is not extra traffic).
 */
import { fromUnits } from '../../intent/decimal.js';
import { AMULET_PRICE, sortedSet } from '../amulet.js';
import { spliceError } from '../errors.js';
import { freshContractId } from '../ledger/ids.js';
import type { Contract, NewContract } from '../ledger/store.js';
import { big, str } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import { ident, int, num, numericUnits, PACKAGE_NAME, PKG, party, record, text } from '../prepared/common.js';

/** Extra traffic (bytes) the sandbox's sequencer charges for one submitted transaction. */
export const TRAFFIC_PER_TRANSACTION = 20_000;

export const MEMBER_TRAFFIC = ident(PKG.spliceAmulet, 'Splice.DecentralizedSynchronizer', 'MemberTraffic');

export interface MemberTrafficStatus {
  traffic_status: {
    actual: { total_consumed: number; total_limit: number };
    target: { total_purchased: number };
  };
}

/** `code::identifier::namespace`: a sequencer member (`PAR` participant, `MED` mediator, `SEQ` sequencer). */
const MEMBER = /^(PAR|MED|SEQ)::[^:]+::[0-9a-f]+$/;
/** `identifier::namespace`: a synchronizer id. */
const UID = /^[^:]+::[0-9a-f]+$/;

/**
 * The traffic status of `member` on `synchronizerId`: 400 for ids that do not decode,
 * 404 for another synchronizer or a member this synchronizer does not know.
 */
export function memberTrafficStatus(
  net: SandboxNetwork,
  synchronizerId: string,
  member: string,
): MemberTrafficStatus {
  if (!MEMBER.test(member))
    throw spliceError(
      400,
      `Could not decode member ID: ${member} is not of the form PAR::<identifier>::<namespace> (or MED::, SEQ::)`,
    );
  if (!UID.test(synchronizerId))
    throw spliceError(
      400,
      `Could not decode domain ID: ${synchronizerId} is not of the form <identifier>::<namespace>`,
    );
  if (synchronizerId !== net.synchronizerId)
    throw spliceError(
      404,
      `Synchronizer ${synchronizerId} is not known; this Scan serves ${net.synchronizerId}`,
    );
  if (member !== net.participantUid)
    throw spliceError(404, `No traffic state found for member ${member} on synchronizer ${synchronizerId}`);

  const mine = (c: Contract) =>
    str(c.argument, 'memberId') === member && str(c.argument, 'synchronizerId') === synchronizerId;
  const purchased = net.store
    .activeContracts('Splice.DecentralizedSynchronizer:MemberTraffic')
    .filter(mine)
    .reduce((sum, c) => sum + Number(big(c.argument, 'totalPurchased') ?? 0n), 0);

  let firstPurchase: number | undefined;
  let submitted = 0;
  for (const u of net.store.updates()) {
    if (
      firstPurchase === undefined &&
      u.events.some(
        (e) =>
          e.kind === 'created' && e.contract.templateId.entityName === 'MemberTraffic' && mine(e.contract),
      )
    )
      firstPurchase = u.offset;
    if (firstPurchase !== undefined && u.userId !== undefined) submitted += 1;
  }
  const consumed = Math.min(purchased, submitted * TRAFFIC_PER_TRANSACTION);
  return {
    traffic_status: {
      actual: { total_consumed: consumed, total_limit: purchased },
      target: { total_purchased: purchased },
    },
  };
}

/** A MemberTraffic contract: `bytes` of extra traffic bought for `member` for `amuletSpent` CC (at the rounds' price). */
export function memberTrafficContract(
  net: SandboxNetwork,
  member: string,
  bytes: number,
  amuletSpent: string,
): NewContract {
  return {
    contractId: freshContractId(),
    templateId: MEMBER_TRAFFIC,
    packageName: PACKAGE_NAME.amulet,
    argument: record(MEMBER_TRAFFIC, [
      ['dso', party(net.dso)],
      ['memberId', text(member)],
      ['synchronizerId', text(net.synchronizerId)],
      ['migrationId', int(net.migrationId)],
      ['totalPurchased', int(bytes)],
      ['numPurchases', int(1)],
      ['amuletSpent', num(amuletSpent)],
      [
        'usdSpent',
        num(fromUnits((numericUnits(amuletSpent) * numericUnits(AMULET_PRICE)) / 10_000_000_000n)),
      ],
    ]),
    signatories: sortedSet(net.dso),
    stakeholders: sortedSet(net.dso),
    nodeId: 0,
  };
}

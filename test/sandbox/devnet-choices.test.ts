/**
 * The AmuletRules choices of the Wallet SDK's DevNet and traffic flows, built by
 * the SDK's own AmuletService (core-amulet-service, over the sandbox's Scan and
 * registry): AmuletRules_DevNet_Tap, AmuletRules_DevNet_FeatureApp and
 * AmuletRules_BuyMemberTraffic are prepared for an external party, their hash
 * agrees three ways (the sandbox's claim, src/hashing, core-tx-visualizer),
 * they execute, and their effects show (the holding, Scan's tap history, the
 * featured-app lookup, traffic-status purchases). Refusals match Daml's.
 */
import { randomUUID, sign } from 'node:crypto';
import { join } from 'node:path';
import { AmuletService } from '@canton-network/core-amulet-service';
import { ScanClient as SdkScanClient } from '@canton-network/core-splice-client';
import { hashPreparedTransaction as visualizerHash } from '@canton-network/core-tx-visualizer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CantonApiError } from '../../src/canton/errors.js';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import type { Command } from '../../src/canton/ledger-api/schemas.js';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { bytesToBase64, bytesToHex } from '../../src/hashing/input.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { balanceOf, holdingsOf } from '../../src/sandbox/amulet.js';
import { LEDGER_API_USER, type SandboxNetwork } from '../../src/sandbox/network.js';
import { trafficCost } from '../../src/sandbox/participant/interpret-devnet.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';

const scanSpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/scan.yaml'));
const ledgerSpec = loadSpec(join(SPECS_DIR, 'canton-ledger-api/openapi-3.5.1.yaml'));

let sb: RunningSandbox;
let net: SandboxNetwork;
let ledger: LedgerApiClient;
let amulet: AmuletService;
let alice: TestParty;
let bob: TestParty;

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

function addParty(hint: string): TestParty {
  return addExternalParty(net, hint);
}

/**
 * The token-standard side AmuletService calls: the registry's transfer factory
 * (over HTTP, as the SDK's TokenStandardService posts it), the buyer's holdings
 * and the member-id qualification of the SDK's CoreService.
 */
function tokenStandardFor(registryUrl: string) {
  return {
    transfer: {
      async fetchTransferFactoryChoiceContext(url: string, choiceArguments: unknown) {
        expect(url).toBe(registryUrl);
        const res = await fetch(`${url}/registry/transfer-instruction/v1/transfer-factory`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ choiceArguments, excludeDebugFields: true }),
        });
        expect(res.status).toBe(200);
        return res.json();
      },
    },
    async getInputHoldingsCids(sender: string, inputUtxos: string[] | undefined) {
      if (inputUtxos && inputUtxos.length > 0) return inputUtxos;
      return holdingsOf(net.store, sender, net.latestRound().number)
        .filter((h) => !h.locked)
        .map((h) => h.contractId);
    },
    core: {
      toQualifiedMemberId: (m: string) => (/^(PAR|MED)::/.test(m) ? m : `PAR::${m}`),
    },
  };
}

type Disclosed = {
  templateId?: string;
  contractId: string;
  createdEventBlob: string;
  synchronizerId?: string;
}[];

/** Prepare as `p`; the hash checked three ways. */
async function prepare(p: TestParty, command: Command, disclosedContracts: Disclosed) {
  const prep = await ledger.prepare({
    userId: LEDGER_API_USER,
    commandId: randomUUID(),
    actAs: [p.id],
    synchronizerId: net.synchronizerId,
    commands: [command],
    disclosedContracts: disclosedContracts.map(({ templateId, contractId, createdEventBlob }) => ({
      ...(templateId ? { templateId } : {}),
      contractId,
      createdEventBlob,
      synchronizerId: net.synchronizerId,
    })),
  });
  const ours = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
  expect(bytesToBase64(ours), 'src/hashing agrees with the sandbox').toBe(prep.preparedTransactionHash);
  expect(await visualizerHash(prep.preparedTransaction, 'hex'), 'core-tx-visualizer agrees').toBe(
    bytesToHex(ours),
  );
  return { prep, hash: ours, tx: decodePreparedTransaction(prep.preparedTransaction) };
}

async function execute(p: TestParty, prepared: { prep: { preparedTransaction: string }; hash: Uint8Array }) {
  const body = {
    preparedTransaction: prepared.prep.preparedTransaction,
    partySignatures: {
      signatures: [
        {
          party: p.id,
          signatures: [
            {
              format: 'SIGNATURE_FORMAT_CONCAT' as const,
              signature: bytesToBase64(sign(null, prepared.hash, p.key)),
              signedBy: p.fp,
              signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519' as const,
            },
          ],
        },
      ],
    },
    hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2' as const,
    submissionId: randomUUID(),
    userId: LEDGER_API_USER,
    deduplicationPeriod: { Empty: {} },
  };
  return ledger.executeAndWait(body);
}

async function rejection(p: Promise<unknown>): Promise<CantonApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'expected the call to fail').toBeInstanceOf(CantonApiError);
  return e as CantonApiError;
}

/** `CODE: cause` of a refused call. */
async function refusal(p: Promise<unknown>): Promise<string> {
  const e = await rejection(p);
  expect(validateAgainst(ledgerSpec, 'JsCantonError', e.cantonError)).toEqual([]);
  return `${e.code}: ${e.cantonError?.cause}`;
}

/** Choices, templates and kinds of the nodes, in node order. */
const shape = (tx: ReturnType<typeof decodePreparedTransaction>) =>
  tx.transaction.nodes.map(({ node: n }) =>
    n.type === 'exercise'
      ? `exercise ${n.templateId.entityName}.${n.choiceId}`
      : `${n.type} ${'templateId' in n ? n.templateId.entityName : ''}`,
  );

async function getJson(path: string) {
  const res = await fetch(`${sb.urls.scan}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  sb = await startSandbox({ seed: 'devnet-choices-test', timers: false });
  net = sb.ctx.net;
  ledger = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { attempts: 1 } });
  const scan = new SdkScanClient(
    new URL(sb.urls.scan),
    quiet as never,
    {
      getAccessToken: async () => undefined,
    } as never,
  );
  amulet = new AmuletService(tokenStandardFor(sb.urls.registry) as never, scan);
  alice = addParty('alice');
  bob = addParty('bob');
});
afterAll(async () => sb?.close());

describe('AmuletRules_DevNet_Tap', () => {
  it('mints an amulet for the receiver in the open round and Scan records the tap', async () => {
    const [cmd, disclosed] = await amulet.createTap(
      alice.id,
      '250000.0000000000',
      net.dso,
      'Amulet',
      sb.urls.registry,
    );
    expect(cmd.choice).toBe('AmuletRules_DevNet_Tap');
    const p = await prepare(alice, { ExerciseCommand: cmd } as Command, disclosed as Disclosed);
    expect(shape(p.tx)).toEqual([
      'exercise AmuletRules.AmuletRules_DevNet_Tap',
      'exercise AmuletRules.AmuletRules_Mint',
      'fetch OpenMiningRound',
      'create Amulet',
    ]);
    expect(p.tx.transaction.nodeSeeds.map((s) => s.nodeId)).toEqual([0, 1, 3]);
    const inputs = p.tx.metadata.inputContracts.map((c) => c.contract.templateId.entityName).sort();
    expect(inputs).toEqual(['AmuletRules', 'OpenMiningRound']);
    const root = p.tx.transaction.nodes[0]!.node;
    expect(root.type === 'exercise' && root.actingParties).toEqual([alice.id]);

    const before = holdingsOf(net.store, alice.id, 0n).length;
    const done = await execute(alice, p);
    expect(done.updateId).toMatch(/.+/);
    const mine = holdingsOf(net.store, alice.id, net.latestRound().number);
    expect(mine.length).toBe(before + 1);
    expect(balanceOf(net.store, alice.id, net.latestRound().number).totalUnlocked).toBe('250000.0000000000');

    const history = await fetch(`${sb.urls.scan}/v0/transactions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ page_size: 100, sort_order: 'desc' }),
    }).then((r) => r.json() as Promise<{ transactions: Record<string, unknown>[] }>);
    const tap = history.transactions.find((t) => t.transaction_type === 'devnet_tap');
    expect(tap?.tap).toEqual({ amulet_owner: alice.id, amulet_amount: '250000.0000000000' });
  });

  it('refuses a non-positive amount, the wrong controller, an undisclosed AmuletRules and a closed round', async () => {
    const [cmd, disclosed] = await amulet.createTap(
      alice.id,
      '1.0000000000',
      net.dso,
      'Amulet',
      sb.urls.registry,
    );
    const ex = (choiceArgument: Record<string, unknown>) =>
      ({
        ExerciseCommand: { ...cmd, choiceArgument: { ...(cmd.choiceArgument as object), ...choiceArgument } },
      }) as Command;
    const zero = await refusal(prepare(alice, ex({ amount: '0.0000000000' }), disclosed as Disclosed));
    expect(zero).toMatch(/DAML_INTERPRETATION_ERROR.*amount must be positive/);
    // Numeric 10 holds 28 integer digits: a larger amount is no Daml value at all.
    const huge = `1${'0'.repeat(28)}.0000000000`;
    expect(await refusal(prepare(alice, ex({ amount: huge }), disclosed as Disclosed))).toMatch(
      /FAILED_TO_PREPARE_TRANSACTION.*amount must be a Numeric 10/,
    );
    const largest = `${'9'.repeat(28)}.0000000000`;
    expect(await refusal(prepare(alice, ex({ amount: `-${largest}` }), disclosed as Disclosed))).toMatch(
      /amount must be positive/,
    );
    const wrong = await refusal(prepare(bob, ex({}), disclosed as Disclosed));
    expect(wrong).toMatch(/missing authorization from alice::/);
    const undisclosed = (disclosed as Disclosed).filter((d) => d.contractId !== cmd.contractId);
    const hidden = await refusal(prepare(alice, ex({}), undisclosed));
    expect(hidden).toMatch(/CONTRACT_NOT_FOUND/);
    const old = (cmd.choiceArgument as { openRound: string }).openRound;
    net.advanceRound();
    net.advanceRound(); // the round the SDK picked is archived now
    SdkScanClient.invalidateOpenMiningRoundsCache(new URL(sb.urls.scan));
    expect(net.store.get(old)).toBeUndefined();
    const closed = await refusal(prepare(alice, ex({}), disclosed as Disclosed));
    expect(closed).toMatch(/CONTRACT_NOT_FOUND/);
  });
});

describe('AmuletRules_DevNet_FeatureApp', () => {
  it('creates the provider’s FeaturedAppRight, which Scan then finds', async () => {
    const none = await getJson(`/v0/featured-apps/${encodeURIComponent(bob.id)}`);
    expect(none.body.featured_app_right ?? null).toBeNull();
    const [cmd, disclosed] = await amulet.selfGrantFeatureAppRight(bob.id, net.synchronizerId);
    const p = await prepare(bob, { ExerciseCommand: cmd } as Command, disclosed as Disclosed);
    expect(shape(p.tx)).toEqual([
      'exercise AmuletRules.AmuletRules_DevNet_FeatureApp',
      'create FeaturedAppRight',
    ]);
    const created = p.tx.transaction.nodes[1]!.node;
    expect(created.type === 'create' && [created.signatories, created.stakeholders]).toEqual([
      [net.dso],
      [net.dso, bob.id].sort(),
    ]);
    const wrong = await refusal(prepare(alice, { ExerciseCommand: cmd } as Command, disclosed as Disclosed));
    expect(wrong).toMatch(/missing authorization from bob::/);
    await execute(bob, p);
    const found = await getJson(`/v0/featured-apps/${encodeURIComponent(bob.id)}`);
    expect(found.status).toBe(200);
    expect(validateAgainst(scanSpec, 'LookupFeaturedAppRightResponse', found.body)).toEqual([]);
    const right = found.body.featured_app_right as { payload: { provider: string; dso: string } };
    expect(right.payload).toEqual({ dso: net.dso, provider: bob.id });
    expect(await amulet.getFeaturedAppsByParty(bob.id)).toMatchObject({ payload: { provider: bob.id } });
  });
});

describe('AmuletRules_BuyMemberTraffic', () => {
  const status = async () => {
    const r = await getJson(
      `/v0/domains/${encodeURIComponent(net.synchronizerId)}/members/${encodeURIComponent(net.participantUid)}/traffic-status`,
    );
    expect(r.status).toBe(200);
    expect(validateAgainst(scanSpec, 'GetMemberTrafficStatusResponse', r.body)).toEqual([]);
    return (r.body as { traffic_status: { target: { total_purchased: number } } }).traffic_status.target
      .total_purchased;
  };

  it('burns the price out of the buyer’s amulets and adds to the member’s purchased traffic', async () => {
    const purchased = await status();
    const round = net.latestRound();
    const balance = balanceOf(net.store, alice.id, round.number).totalUnlocked;
    const [cmd, disclosed] = await amulet.buyMemberTraffic(
      net.dso,
      alice.id,
      200000,
      net.synchronizerId,
      net.participantId,
      0,
      [],
    );
    expect((cmd.choiceArgument as { memberId: string }).memberId).toBe(net.participantUid);
    const p = await prepare(alice, { ExerciseCommand: cmd } as Command, disclosed as Disclosed);
    expect(shape(p.tx)).toEqual([
      'exercise AmuletRules.AmuletRules_BuyMemberTraffic',
      'fetch OpenMiningRound',
      'exercise OpenMiningRound.OpenMiningRound_Fetch',
      'fetch OpenMiningRound',
      'fetch Amulet',
      'exercise Amulet.Archive',
      'create Amulet',
      'create Amulet',
      'fetch Amulet',
      'exercise Amulet.Archive',
      'create ValidatorRewardCoupon',
      'create MemberTraffic',
    ]);
    expect(p.tx.metadata.minLedgerEffectiveTime).toBe(round.opensAt);
    const { amulet: price } = trafficCost(200000n, round.amuletPrice);
    expect(price).toBe('666.8000000000'); // 0.2 MB × 16.67 $/MB at 0.005 $/CC

    await execute(alice, p);
    expect(await status()).toBe(purchased + 200000);
    const after = balanceOf(net.store, alice.id, round.number).totalUnlocked;
    expect(after).toBe(
      (BigInt(balance.replace('.', '')) - BigInt(price.replace('.', '')))
        .toString()
        .replace(/(\d{10})$/, '.$1'),
    );
    const traffic = net.store.activeContracts('Splice.DecentralizedSynchronizer:MemberTraffic');
    expect(traffic.length).toBe(1);
    const sdkStatus = await amulet.getMemberTrafficStatus(net.synchronizerId, net.participantId);
    expect(sdkStatus.traffic_status.target.total_purchased).toBe(purchased + 200000);
  });

  it('refuses a top-up below the minimum, another synchronizer and more than the inputs hold', async () => {
    const [cmd, disclosed] = await amulet.buyMemberTraffic(
      net.dso,
      alice.id,
      200000,
      net.synchronizerId,
      net.participantId,
      0,
      [],
    );
    const ex = (choiceArgument: Record<string, unknown>) =>
      ({
        ExerciseCommand: { ...cmd, choiceArgument: { ...(cmd.choiceArgument as object), ...choiceArgument } },
      }) as Command;
    const small = await refusal(prepare(alice, ex({ trafficAmount: '1000' }), disclosed as Disclosed));
    expect(small).toMatch(/ITR_InsufficientTopupAmount/);
    const elsewhere = await refusal(
      prepare(alice, ex({ synchronizerId: 'other::1220ab' }), disclosed as Disclosed),
    );
    expect(elsewhere).toMatch(/ITR_UnknownSynchronizer/);
    const tooMuch = await refusal(
      prepare(alice, ex({ trafficAmount: '1000000000' }), disclosed as Disclosed),
    );
    expect(tooMuch).toMatch(/ITR_InsufficientFunds/);
    // Past Int64 (2^63 - 1) the amount is no Daml value; at Int64's largest it is simply unaffordable.
    const overflow = await refusal(
      prepare(alice, ex({ trafficAmount: '9999999999999999999' }), disclosed as Disclosed),
    );
    expect(overflow).toMatch(/FAILED_TO_PREPARE_TRANSACTION.*trafficAmount must be an Int64/);
    const largest = await refusal(
      prepare(alice, ex({ trafficAmount: '9223372036854775807' }), disclosed as Disclosed),
    );
    expect(largest).toMatch(/ITR_InsufficientFunds/);
    const notMine = net.tap(bob.id, '5000').contractId;
    const foreign = await refusal(
      prepare(alice, ex({ inputs: [{ tag: 'InputAmulet', value: notMine }] }), disclosed as Disclosed),
    );
    expect(foreign).toMatch(/CONTRACT_NOT_FOUND/);
  });
});

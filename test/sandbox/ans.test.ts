/**
 * The sandbox's Canton Name Service for external parties, driven over HTTP
 * with prepare → sign → execute: requesting an entry, paying it, the DSO
 * collecting (or rejecting and refunding) it, Scan serving the entry, the
 * renewal window, a renewal extending the entry by one lifetime, a missed
 * renewal expiring the entry and the subscription, a late payment left
 * locked and taken back after the lock expired, refusals as Daml gives them,
 * and the tamper faults on a payment. Every prepared transaction decodes and
 * its hash (src/hashing, core-tx-visualizer) matches the sandbox's claim.
 */
import { randomUUID, sign } from 'node:crypto';
import { hashPreparedTransaction as visualizerHash } from '@canton-network/core-tx-visualizer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CantonApiError } from '../../src/canton/errors.js';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import type { Command } from '../../src/canton/ledger-api/schemas.js';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { bytesToBase64, bytesToHex } from '../../src/hashing/input.js';
import type { Value } from '../../src/hashing/model.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { balanceOf, holdingsOf, subAmounts } from '../../src/sandbox/amulet.js';
import { ansAutomationLog, decideInitialPayment, decideRenewal } from '../../src/sandbox/ans-automation.js';
import type { Contract } from '../../src/sandbox/ledger/store.js';
import { big, path, str } from '../../src/sandbox/ledger/value-json.js';
import { LEDGER_API_USER, type SandboxNetwork, VALIDATOR_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';

const DAY_MS = 86_400_000;
const DAY_US = 86_400_000_000n;
const L = 90n * DAY_US;
const ANS = '#splice-amulet-name-service:Splice.Ans';
const SUBS = '#splice-wallet-payments:Splice.Wallet.Subscriptions';
/** entryFee 1.0 USD at the sandbox's price 0.005 USD/CC, fees zero. */
const FEE_CC = '200.0000000000';

let sb: RunningSandbox;
let net: SandboxNetwork;
let ledger: LedgerApiClient;
let alice: TestParty;
let bob: TestParty;
let carol: TestParty;
let dave: TestParty;
let erin: TestParty;

beforeAll(async () => {
  sb = await startSandbox({ seed: 'ans-test', timers: false });
  net = sb.ctx.net;
  ledger = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { attempts: 1 } });
  alice = addExternalParty(net, 'alice');
  bob = addExternalParty(net, 'bob');
  carol = addExternalParty(net, 'carol');
  dave = addExternalParty(net, 'dave');
  erin = addExternalParty(net, 'erin');
  for (const p of [alice, bob, carol, erin]) net.tap(p.id, '1000');
  net.tap(dave.id, '10');
});
afterAll(async () => sb?.close());

// ---- helpers ----------------------------------------------------------------------------------

const disclose = (c: Contract) => ({
  contractId: c.contractId,
  createdEventBlob: c.createdEventBlob,
  synchronizerId: net.synchronizerId,
});

const exercise = (templateId: string, contractId: string, choice: string, choiceArgument: unknown) =>
  ({ ExerciseCommand: { templateId, contractId, choice, choiceArgument } }) as Command;

type Prepared = Awaited<ReturnType<typeof prepare>>;

/** Prepare as `p`; the transaction decodes, re-encodes identically and its hash agrees three ways. */
async function prepare(p: TestParty, command: Command, disclosed: Contract[] = []) {
  const prep = await ledger.prepare({
    userId: LEDGER_API_USER,
    commandId: randomUUID(),
    actAs: [p.id],
    synchronizerId: net.synchronizerId,
    commands: [command],
    disclosedContracts: disclosed.map(disclose),
  });
  const tx = decodePreparedTransaction(prep.preparedTransaction);
  expect(bytesToBase64(encodePreparedTransaction(tx)), 'decodes and re-encodes').toBe(
    prep.preparedTransaction,
  );
  const ours = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
  expect(bytesToBase64(ours), 'src/hashing agrees with the sandbox').toBe(prep.preparedTransactionHash);
  expect(await visualizerHash(prep.preparedTransaction, 'hex'), 'core-tx-visualizer agrees').toBe(
    bytesToHex(ours),
  );
  return { prep, hash: ours, tx };
}

async function execute(p: TestParty, prepared: Prepared) {
  const done = await ledger.executeAndWait({
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
  });
  // The DSO's automation runs right after the commit (a microtask): let it.
  await new Promise((r) => setImmediate(r));
  return done;
}

/** `CODE: cause` of a refused prepare. */
async function refusal(p: Promise<unknown>): Promise<string> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'expected the call to fail').toBeInstanceOf(CantonApiError);
  const c = e as CantonApiError;
  return `${c.code}: ${c.cantonError?.cause}`;
}

/** Choices, templates and kinds of the nodes, in node order. */
const shape = (tx: Prepared['tx']) =>
  tx.transaction.nodes.map(({ node: n }) =>
    n.type === 'exercise'
      ? `exercise ${n.templateId.entityName}.${n.choiceId}`
      : `${n.type} ${'templateId' in n ? n.templateId.entityName : ''}`,
  );

const mine = (entity: string, party: string) =>
  net.store
    .activeContracts(entity)
    .filter(
      (c) => str(c.argument, 'subscriptionData', 'sender') === party || str(c.argument, 'user') === party,
    );

const unlocked = (p: TestParty) => balanceOf(net.store, p.id, net.latestRound().number).totalUnlocked;

const paymentContext = (round = net.latestRound().contractId) => ({
  amuletRules: net.amuletRules().contractId,
  context: { openMiningRound: round, issuingMiningRounds: [], validatorRights: [], featuredAppRight: null },
});

const amuletInputs = (p: TestParty) =>
  holdingsOf(net.store, p.id, net.latestRound().number)
    .filter((h) => !h.locked)
    .map((h) => ({ tag: 'InputAmulet', value: h.contractId }));

const dsoContracts = () => [net.amuletRules(), net.latestRound().contract];

async function requestEntry(p: TestParty, name: string, url = '', description = '') {
  const rules = net.ansRules();
  const prepared = await prepare(
    p,
    exercise(`${ANS}:AnsRules`, rules.contractId, 'AnsRules_RequestEntry', {
      name,
      url,
      description,
      user: p.id,
    }),
    [rules],
  );
  await execute(p, prepared);
  const request = mine('SubscriptionRequest', p.id).find(
    (c) => str(c.argument, 'subscriptionData', 'description') === `CNS entry: "${name}"`,
  );
  expect(request, `the request for ${name}`).toBeDefined();
  return { prepared, request: request! };
}

async function payRequest(p: TestParty, request: Contract) {
  const prepared = await prepare(
    p,
    exercise(`${SUBS}:SubscriptionRequest`, request.contractId, 'SubscriptionRequest_AcceptAndMakePayment', {
      inputs: amuletInputs(p),
      context: paymentContext(),
      walletProvider: p.id,
    }),
    dsoContracts(),
  );
  await execute(p, prepared);
  return prepared;
}

async function register(p: TestParty, name: string) {
  const { request } = await requestEntry(p, name);
  return payRequest(p, request);
}

const idleStateOf = (p: TestParty) => mine('SubscriptionIdleState', p.id)[0];

function renewalCommand(p: TestParty, idle: Contract) {
  return exercise(`${SUBS}:SubscriptionIdleState`, idle.contractId, 'SubscriptionIdleState_MakePayment', {
    inputs: amuletInputs(p),
    context: paymentContext(),
    walletProvider: p.id,
  });
}

async function scanGet(path: string) {
  const res = await fetch(`${sb.urls.origin}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function advanceTime(ms: number) {
  const res = await fetch(`${sb.urls.origin}/sandbox/advance-time`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ms }),
  });
  expect(res.status).toBe(200);
}

function lastEvent(kind: string, user: string) {
  return ansAutomationLog(net)
    .filter((e) => e.kind === kind && e.user === user)
    .at(-1);
}

// ---- the tests -----------------------------------------------------------------------------------

let t0: bigint;

describe('requesting and paying an entry', () => {
  it('builds the request from AnsRules (nonconsuming) and the payment as lockAndMakeChange does', async () => {
    const before = unlocked(alice);
    const { prepared: req, request } = await requestEntry(
      alice,
      'alice.unverified.cns',
      'https://alice.example',
      'Alice',
    );
    expect(shape(req.tx)).toEqual([
      'exercise AnsRules.AnsRules_RequestEntry',
      'create SubscriptionRequest',
      'create AnsEntryContext',
    ]);
    const root = req.tx.transaction.nodes[0]!.node;
    expect(root.type === 'exercise' && [root.consuming, root.actingParties, root.packageName]).toEqual([
      false,
      [alice.id],
      'splice-amulet-name-service',
    ]);
    expect(req.tx.metadata.inputContracts.map((c) => c.contract.templateId.entityName)).toEqual(['AnsRules']);
    expect(str(request.argument, 'subscriptionData', 'receiver')).toBe(net.dso);
    expect(str(request.argument, 'payData', 'paymentAmount', 'amount')).toBe('1.0000000000');
    expect(big(request.argument, 'payData', 'paymentInterval', 'microseconds')).toBe(L);
    expect(request.packageName).toBe('splice-wallet-payments');
    const context = mine('AnsEntryContext', alice.id)[0]!;
    expect(str(context.argument, 'reference')).toBe(request.contractId);

    const pay = await payRequest(alice, request);
    expect(shape(pay.tx)).toEqual([
      'exercise SubscriptionRequest.SubscriptionRequest_AcceptAndMakePayment',
      'exercise OpenMiningRound.OpenMiningRound_Fetch',
      'exercise AmuletRules.AmuletRules_ComputeFees',
      'fetch OpenMiningRound',
      'exercise AmuletRules.AmuletRules_Transfer',
      'fetch OpenMiningRound',
      'fetch Amulet',
      'exercise Amulet.Archive',
      'create LockedAmulet',
      'create Amulet',
      'create SubscriptionInitialPayment',
    ]);
    const nodes = pay.tx.transaction.nodes.map((n) => n.node);
    const payRoot = nodes[0]!;
    expect(payRoot.type === 'exercise' && payRoot.children).toEqual(['1', '2', '4', '10']);
    const lock = nodes[8]!;
    expect(lock.type === 'create' && lock.signatories).toEqual([alice.id, net.dso].sort());
    const lockArg = lock.type === 'create' ? lock.argument : ({ kind: 'unit' } as Value);
    expect(str(lockArg, 'amulet', 'amount', 'initialAmount')).toBe(FEE_CC);
    expect(path(lockArg, 'lock', 'optContext')).toEqual({
      kind: 'optional',
      value: { kind: 'text', value: 'amulet-subscription: CNS entry: "alice.unverified.cns"' },
    });
    expect(path(lockArg, 'lock', 'holders')).toEqual({
      kind: 'list',
      elements: [{ kind: 'party', value: net.dso }],
    });
    const payment = nodes[10]!;
    expect(payment.type === 'create' && str(payment.argument, 'targetAmount')).toBe(FEE_CC);
    expect(payment.type === 'create' && str(payment.argument, 'reference')).toBe(request.contractId);

    // The DSO collected at once: the CC is gone, the subscription runs, the entry exists.
    t0 = net.clock.now();
    expect(unlocked(alice)).toBe(subAmounts(before, FEE_CC));
    const collected = lastEvent('collected', alice.id);
    expect(collected).toMatchObject({ name: 'alice.unverified.cns' });
    expect(mine('SubscriptionInitialPayment', alice.id)).toEqual([]);
    expect(
      mine('Subscription', alice.id).filter((c) => c.templateId.entityName === 'Subscription'),
    ).toHaveLength(1);
    const idle = idleStateOf(alice)!;
    const entry = mine('AnsEntry', alice.id)[0]!;
    expect(big(idle.argument, 'nextPaymentDueAt')).toBe(big(entry.argument, 'expiresAt'));
    expect(holdingsOf(net.store, alice.id, 0n).filter((h) => h.locked)).toEqual([]);
  });

  it('shows the entry in Scan by name, by party and in the list, ordered by name', async () => {
    await register(bob, 'bob.unverified.cns');
    await register(alice, 'aardvark.unverified.cns');
    const byName = await scanGet('/api/scan/v0/ans-entries/by-name/alice.unverified.cns');
    expect(byName.status).toBe(200);
    expect(byName.body.entry).toMatchObject({
      user: alice.id,
      name: 'alice.unverified.cns',
      url: 'https://alice.example',
      description: 'Alice',
    });
    const byParty = await scanGet(`/api/scan/v0/ans-entries/by-party/${encodeURIComponent(alice.id)}`);
    expect((byParty.body.entry as { name: string }).name).toBe('aardvark.unverified.cns');
    const viaProxy = await fetch(
      `${sb.urls.validator}/v0/scan-proxy/ans-entries/by-name/bob.unverified.cns`,
    ).then((r) => r.json() as Promise<{ entry: { user: string } }>);
    expect(viaProxy.entry.user).toBe(bob.id);
    const list = await scanGet('/api/scan/v0/ans-entries?page_size=10');
    expect((list.body.entries as { name: string }[]).map((e) => e.name)).toEqual([
      'aardvark.unverified.cns',
      'alice.unverified.cns',
      'bob.unverified.cns',
      'sandbox-validator-1.unverified.cns',
      'dso.cns',
    ]);
    const prefixed = await scanGet('/api/scan/v0/ans-entries?name_prefix=a&page_size=1');
    expect((prefixed.body.entries as { name: string }[]).map((e) => e.name)).toEqual([
      'aardvark.unverified.cns',
    ]);
    expect((await scanGet('/api/scan/v0/ans-entries?name_prefix=a')).status).toBe(400);
  });

  it('serves the live AnsRules, configured by the network, on Scan and the proxy', async () => {
    const rules = await fetch(`${sb.urls.scan}/v0/ans-rules`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    }).then(
      (r) =>
        r.json() as Promise<{ ans_rules_update: { contract: { contract_id: string; payload: unknown } } }>,
    );
    expect(rules.ans_rules_update.contract.payload).toEqual({
      dso: net.dso,
      config: {
        renewalDuration: { microseconds: '2592000000000' },
        entryLifetime: { microseconds: '7776000000000' },
        entryFee: '1.0000000000',
        descriptionPrefix: 'CNS entry: ',
      },
    });
    const cached = await fetch(`${sb.urls.validator}/v0/scan-proxy/ans-rules`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        cached_ans_rules_contract_id: rules.ans_rules_update.contract.contract_id,
        cached_ans_rules_domain_id: net.synchronizerId,
      }),
    }).then((r) => r.json());
    expect(cached).toEqual({ ans_rules_update: { domain_id: net.synchronizerId } });
  });

  it('rejects and refunds a payment for an invalid name or a name already taken', async () => {
    const before = unlocked(carol);
    await register(carol, 'Carol.unverified.cns');
    expect(lastEvent('rejected', carol.id)).toMatchObject({ name: 'Carol.unverified.cns' });
    expect((lastEvent('rejected', carol.id) as { reason: string }).reason).toMatch(/upper-case/);
    await register(carol, 'alice.unverified.cns');
    expect((lastEvent('rejected', carol.id) as { reason: string }).reason).toMatch(/already taken/);
    // Refunded in full (the sandbox charges no lock fees), no subscription left, the contexts archived.
    expect(unlocked(carol)).toBe(before);
    expect(holdingsOf(net.store, carol.id, 0n).filter((h) => h.locked)).toEqual([]);
    for (const t of ['SubscriptionInitialPayment', 'TerminatedSubscription', 'AnsEntryContext', 'AnsEntry'])
      expect(mine(t, carol.id), t).toEqual([]);
    expect(ansAutomationLog(net).filter((e) => e.kind === 'terminated' && e.user === carol.id)).toHaveLength(
      2,
    );
  });

  it('refuses insufficient funds with the missing amount, as AmuletRules_Transfer does', async () => {
    const { request } = await requestEntry(dave, 'dave.unverified.cns');
    const r = await refusal(
      prepare(
        dave,
        exercise(
          `${SUBS}:SubscriptionRequest`,
          request.contractId,
          'SubscriptionRequest_AcceptAndMakePayment',
          {
            inputs: amuletInputs(dave),
            context: paymentContext(),
            walletProvider: dave.id,
          },
        ),
        dsoContracts(),
      ),
    );
    expect(r).toMatch(
      /DAML_INTERPRETATION_ERROR.*InvalidTransfer.*ITR_InsufficientFunds \{missingAmount = 190\.0000000000\}/,
    );
  });

  it('refuses an undisclosed AnsRules or round, another controller and another wallet provider', async () => {
    const rules = net.ansRules();
    const cmd = (user: string) =>
      exercise(`${ANS}:AnsRules`, rules.contractId, 'AnsRules_RequestEntry', {
        name: 'x.unverified.cns',
        url: '',
        description: '',
        user,
      });
    expect(await refusal(prepare(erin, cmd(erin.id)))).toMatch(/CONTRACT_NOT_FOUND/);
    expect(await refusal(prepare(erin, cmd(bob.id), [rules]))).toMatch(/DAML_AUTHORIZATION_ERROR.*bob::/);
    const { request } = await requestEntry(erin, 'erin.unverified.cns');
    const pay = (walletProvider: string, disclosed: Contract[]) =>
      prepare(
        erin,
        exercise(
          `${SUBS}:SubscriptionRequest`,
          request.contractId,
          'SubscriptionRequest_AcceptAndMakePayment',
          {
            inputs: amuletInputs(erin),
            context: paymentContext(),
            walletProvider,
          },
        ),
        disclosed,
      );
    expect(await refusal(pay(net.validatorParty, dsoContracts()))).toMatch(
      /DAML_AUTHORIZATION_ERROR.*walletProvider/,
    );
    expect(await refusal(pay(erin.id, [net.amuletRules()]))).toMatch(/CONTRACT_NOT_FOUND/);
  });

  it('lets a local party register through submit-and-wait', async () => {
    const rules = net.ansRules();
    const res = await fetch(`${sb.urls.ledgerApi}/v2/commands/submit-and-wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        commands: [
          exercise(`${ANS}:AnsRules`, rules.contractId, 'AnsRules_RequestEntry', {
            name: 'operator.unverified.cns',
            url: '',
            description: '',
            user: net.validatorParty,
          }),
        ],
        commandId: randomUUID(),
        userId: VALIDATOR_USER,
        actAs: [net.validatorParty],
        disclosedContracts: [disclose(rules)],
      }),
    });
    expect(res.status).toBe(200);
    expect(mine('SubscriptionRequest', net.validatorParty)).toHaveLength(1);
  });
});

describe('renewal', () => {
  it('refuses a payment before the renewal window opens (due − renewalDuration)', async () => {
    const r = await refusal(prepare(alice, renewalCommand(alice, idleStateOf(alice)!), dsoContracts()));
    expect(r).toMatch(/DAML_INTERPRETATION_ERROR.*next due date is close enough/);
  });

  it('collects a renewal inside the window: the entry lives one lifetime longer', async () => {
    await advanceTime(61 * DAY_MS);
    const aliceEntry = () =>
      mine('AnsEntry', alice.id).find((c) => str(c.argument, 'name') === 'alice.unverified.cns')!;
    const oldExpiry = big(aliceEntry().argument, 'expiresAt')!;
    const idle = mine('SubscriptionIdleState', alice.id).find(
      (c) => big(c.argument, 'nextPaymentDueAt') === oldExpiry,
    )!;
    const before = unlocked(alice);
    const p = await prepare(alice, renewalCommand(alice, idle), dsoContracts());
    expect(shape(p.tx).slice(0, 3)).toEqual([
      'exercise SubscriptionIdleState.SubscriptionIdleState_MakePayment',
      'fetch Subscription',
      'exercise OpenMiningRound.OpenMiningRound_Fetch',
    ]);
    expect(shape(p.tx).at(-1)).toBe('create SubscriptionPayment');
    await execute(alice, p);
    expect(lastEvent('renewed', alice.id)).toMatchObject({
      name: 'alice.unverified.cns',
      expiresAt: oldExpiry + L,
    });
    expect(big(aliceEntry().argument, 'expiresAt')).toBe(oldExpiry + L);
    expect(unlocked(alice)).toBe(subAmounts(before, FEE_CC));
    const scan = await scanGet('/api/scan/v0/ans-entries/by-name/alice.unverified.cns');
    expect((scan.body.entry as { contract_id: string }).contract_id).toBe(aliceEntry().contractId);
    expect(mine('SubscriptionIdleState', alice.id).map((c) => big(c.argument, 'nextPaymentDueAt'))).toContain(
      oldExpiry + L,
    );
  });

  it('expires a missed renewal: the entry leaves Scan, the subscription ends, the context goes', async () => {
    // bob never renewed: 91 days after his payment the entry and the idle state are past due.
    expect((await scanGet('/api/scan/v0/ans-entries/by-name/bob.unverified.cns')).status).toBe(200);
    await advanceTime(30 * DAY_MS);
    const gone = await scanGet('/api/scan/v0/ans-entries/by-name/bob.unverified.cns');
    expect(gone.status).toBe(404);
    expect(gone.body.error).toBe('No ans entry found for name: bob.unverified.cns');
    for (const t of [
      'AnsEntry',
      'SubscriptionIdleState',
      'Subscription',
      'TerminatedSubscription',
      'AnsEntryContext',
    ])
      expect(mine(t, bob.id), t).toEqual([]);
    expect(lastEvent('subscription-expired', bob.id)).toMatchObject({ name: 'bob.unverified.cns' });
    expect(lastEvent('entry-expired', bob.id)).toMatchObject({ name: 'bob.unverified.cns' });
    // alice renewed: still there.
    expect((await scanGet('/api/scan/v0/ans-entries/by-name/alice.unverified.cns')).status).toBe(200);
    expect(net.clock.now() - t0 > L).toBe(true);
  });

  it('leaves a late renewal locked; the payer takes it back with SubscriptionPayment_Expire after the lock expires', async () => {
    const entry = mine('AnsEntry', alice.id).find((c) => str(c.argument, 'name') === 'alice.unverified.cns')!;
    const expiresAt = big(entry.argument, 'expiresAt')!;
    const idle = mine('SubscriptionIdleState', alice.id).find(
      (c) => big(c.argument, 'nextPaymentDueAt') === expiresAt,
    )!;
    // Past the expiry, before the DSO's next sweep: MakePayment has no "too late" check.
    net.clock.advance(Number((expiresAt - net.clock.now()) / 1000n) + DAY_MS);
    const before = unlocked(alice);
    await execute(alice, await prepare(alice, renewalCommand(alice, idle), dsoContracts()));
    const payment = mine('SubscriptionPayment', alice.id)[0]!;
    expect(payment).toBeDefined();
    expect(lastEvent('renewal-not-collected', alice.id)).toMatchObject({ reason: 'the entry has expired' });
    expect((await scanGet('/api/scan/v0/ans-entries/by-name/alice.unverified.cns')).status).toBe(404);
    expect(unlocked(alice)).toBe(subAmounts(before, FEE_CC));

    const expire = () =>
      prepare(
        alice,
        exercise(`${SUBS}:SubscriptionPayment`, payment.contractId, 'SubscriptionPayment_Expire', {
          actor: alice.id,
          transferContext: {
            amuletRules: net.amuletRules().contractId,
            openMiningRound: net.latestRound().contractId,
            featuredAppRight: null,
          },
        }),
        dsoContracts(),
      );
    expect(await refusal(expire())).toMatch(/DAML_INTERPRETATION_ERROR.*Lock.expiresAt/);
    net.clock.advance(11 * 60_000);
    const p = await expire();
    expect(shape(p.tx)).toEqual([
      'exercise SubscriptionPayment.SubscriptionPayment_Expire',
      'fetch Subscription',
      'create SubscriptionIdleState',
      'exercise LockedAmulet.LockedAmulet_OwnerExpireLock',
      'fetch OpenMiningRound',
      'create Amulet',
    ]);
    expect(p.tx.metadata.minLedgerEffectiveTime).toBeDefined();
    await execute(alice, p);
    expect(unlocked(alice)).toBe(before);
    // The past-due idle state the expiry re-created is expired by the DSO; the context goes with it.
    expect(
      mine('SubscriptionIdleState', alice.id).filter(
        (c) => big(c.argument, 'nextPaymentDueAt') === expiresAt,
      ),
    ).toEqual([]);
    expect(
      mine('AnsEntryContext', alice.id).filter((c) => str(c.argument, 'name') === 'alice.unverified.cns'),
    ).toEqual([]);
  });

  it('takes back an initial payment the DSO left alone with SubscriptionInitialPayment_Expire', async () => {
    const { request } = await requestEntry(erin, 'erin-two.unverified.cns');
    // Without its AnsEntryContext the payment is not the name service's to decide: it stays.
    const context = mine('AnsEntryContext', erin.id).find(
      (c) => str(c.argument, 'reference') === request.contractId,
    )!;
    net.commitInternal({ archives: [context.contractId], creates: [], commandId: 'test-drop-context' });
    const before = unlocked(erin);
    await payRequest(erin, request);
    const payment = mine('SubscriptionInitialPayment', erin.id)[0]!;
    expect(payment).toBeDefined();
    net.clock.advance(11 * 60_000);
    const p = await prepare(
      erin,
      exercise(
        `${SUBS}:SubscriptionInitialPayment`,
        payment.contractId,
        'SubscriptionInitialPayment_Expire',
        {
          actor: erin.id,
          transferContext: {
            amuletRules: net.amuletRules().contractId,
            openMiningRound: net.latestRound().contractId,
          },
        },
      ),
      dsoContracts(),
    );
    expect(shape(p.tx)).toEqual([
      'exercise SubscriptionInitialPayment.SubscriptionInitialPayment_Expire',
      'create TerminatedSubscription',
      'exercise LockedAmulet.LockedAmulet_OwnerExpireLock',
      'fetch OpenMiningRound',
      'create Amulet',
    ]);
    await execute(erin, p);
    expect(unlocked(erin)).toBe(before);
    expect(mine('TerminatedSubscription', erin.id)).toHaveLength(1);
  });
});

describe('tampered payments', () => {
  it("'receiver' makes the thief the lock holder and receiver; 'amount' locks more; both hash", async () => {
    const { request } = await requestEntry(carol, 'carol.unverified.cns');
    const cmd = exercise(
      `${SUBS}:SubscriptionRequest`,
      request.contractId,
      'SubscriptionRequest_AcceptAndMakePayment',
      { inputs: amuletInputs(carol), context: paymentContext(), walletProvider: carol.id },
    );
    const honest = await prepare(carol, cmd, dsoContracts());
    for (const change of ['receiver', 'amount'] as const) {
      sb.ctx.faults.inject({ fault: { kind: 'tamper', change }, operation: 'ledger-api.prepare', times: 1 });
      const t = await prepare(carol, cmd, dsoContracts());
      const nodes = t.tx.transaction.nodes.map((n) => n.node);
      const lock = nodes.find((n) => n.type === 'create' && n.templateId.entityName === 'LockedAmulet');
      const payment = nodes.find(
        (n) => n.type === 'create' && n.templateId.entityName === 'SubscriptionInitialPayment',
      );
      if (lock?.type !== 'create' || payment?.type !== 'create') throw new Error('no lock or payment');
      if (change === 'receiver') {
        expect(path(lock.argument, 'lock', 'holders')).toEqual({
          kind: 'list',
          elements: [{ kind: 'party', value: net.mallory }],
        });
        expect(str(payment.argument, 'subscriptionData', 'receiver')).toBe(net.mallory);
        expect(payment.signatories).toContain(net.mallory);
      } else {
        expect(str(payment.argument, 'targetAmount')).toBe('2000.0000000000');
        expect(str(lock.argument, 'amulet', 'amount', 'initialAmount')).toBe('2000.0000000000');
      }
      expect(t.prep.preparedTransactionHash).not.toBe(honest.prep.preparedTransactionHash);
    }
  });
});

describe('the DSO automation’s decisions', () => {
  const base = {
    hasContext: true,
    roundOpen: true,
    round: 3n,
    name: 'ok.unverified.cns',
    url: '',
    description: '',
    acronym: 'cns',
    nameTaken: false,
  };
  it('collects a valid free name in an open round, else rejects with a reason', () => {
    expect(decideInitialPayment(base)).toEqual({ kind: 'collect' });
    expect(decideInitialPayment({ ...base, hasContext: false })).toEqual({ kind: 'wait' });
    expect(decideInitialPayment({ ...base, roundOpen: false })).toMatchObject({ kind: 'reject' });
    expect(decideInitialPayment({ ...base, url: 'ftp://x' })).toMatchObject({ kind: 'reject' });
    expect(decideInitialPayment({ ...base, description: 'x'.repeat(141) })).toMatchObject({ kind: 'reject' });
    expect(decideInitialPayment({ ...base, name: 'ok.unverified.ans' })).toMatchObject({ kind: 'reject' });
    expect(decideInitialPayment({ ...base, nameTaken: true })).toMatchObject({ kind: 'reject' });
  });
  it('collects a renewal only for the live entry’s current expiry in an open round', () => {
    const r = { now: 10n, roundOpen: true, round: 1n, entryExpiresAt: 20n, thisPaymentDueAt: 20n };
    expect(decideRenewal(r)).toEqual({ kind: 'collect' });
    expect(decideRenewal({ ...r, now: 20n })).toMatchObject({ kind: 'leave' });
    expect(decideRenewal({ ...r, thisPaymentDueAt: 19n })).toMatchObject({ kind: 'leave' });
    expect(decideRenewal({ ...r, roundOpen: false })).toMatchObject({ kind: 'leave' });
    expect(decideRenewal({ ...r, entryExpiresAt: undefined })).toMatchObject({ kind: 'leave' });
  });
});

/**
 * The real ScanClient and the ValidatorClient's scan-proxy methods against the
 * sandbox's Scan: transaction history derived from taps, the genesis mint and
 * transfers, paged in both orders with several page sizes (no gap, no overlap),
 * Scan's 400/404 answers, holdings summaries with holding fees, ANS lookups,
 * the DSO party, open mining rounds, preapprovals, transfer command counters and statuses; responses
 * are checked against the published OpenAPI documents.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CantonApiError } from '../../src/canton/errors.js';
import { ScanClient } from '../../src/canton/scan/client.js';
import { openRoundsOf, usableRound } from '../../src/canton/scan/rounds.js';
import type { TransactionHistoryItem } from '../../src/canton/scan/schemas.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import {
  amuletContract,
  ansEntryContract,
  HOLDING_FEE_RATE,
  holdingsOf,
  openRounds,
  subAmounts,
  transferCommandCounterContract,
  transferPreapprovalContract,
} from '../../src/sandbox/amulet.js';
import { isoMicros } from '../../src/sandbox/ledger/clock.js';
import type { SandboxNetwork } from '../../src/sandbox/network.js';
import { amuletRecord, ID, lockedAmuletRecord } from '../../src/sandbox/prepared/common.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';

const scanProxySpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/scan-proxy.yaml'));

const scanSpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/scan.yaml'));

let sb: RunningSandbox;
let net: SandboxNetwork;
let scan: ScanClient;
let validator: ValidatorClient;
const alice = 'alice::1220aa';
const bob = 'bob::1220bb';
const carol = 'carol::1220cc';

/** Sends `amount` from one of `sender`'s amulets to `receiver` (change back), as AmuletRules_Transfer would commit. */
function transfer(sender: string, receiver: string, amount: string): void {
  const round = net.latestRound().number;
  const input = holdingsOf(net.store, sender, round).find((h) => !h.locked);
  if (!input) throw new Error(`no amulet of ${sender}`);
  net.commitInternal({
    archives: [input.contractId],
    creates: [
      amuletContract(net.dso, receiver, amount, round, 1),
      amuletContract(net.dso, sender, subAmounts(input.initialAmount, amount), round, 2),
    ],
    commandId: `test-transfer-${randomUUID()}`,
  });
}

async function allPages(order: 'asc' | 'desc', pageSize: number): Promise<TransactionHistoryItem[]> {
  const out: TransactionHistoryItem[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await scan.transactionsPage({ sortOrder: order, pageSize, pageEndEventId: cursor });
    expect(page.transactions.length).toBeLessThanOrEqual(pageSize);
    out.push(...page.transactions);
    if (page.transactions.length < pageSize) return out;
    cursor = page.transactions[page.transactions.length - 1]!.event_id;
  }
}

async function rejection(p: Promise<unknown>): Promise<CantonApiError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(CantonApiError);
  return e as CantonApiError;
}

beforeAll(async () => {
  sb = await startSandbox({ timers: false, seed: 'scan-test' });
  net = sb.ctx.net;
  scan = new ScanClient({ baseUrl: sb.urls.scan, retry: { attempts: 1 } });
  validator = new ValidatorClient({ baseUrl: sb.urls.validator, retry: { attempts: 1 } });
  for (let i = 0; i < 6; i++) net.tap(alice, `${100 + i}`);
  net.tap(bob, '50');
  for (let i = 0; i < 5; i++) transfer(alice, i % 2 === 0 ? bob : carol, `${i + 1}.5`);
  net.advanceRound();
  for (let i = 0; i < 4; i++) net.tap(carol, `${10 + i}`);
  transfer(bob, carol, '7');
});

afterAll(async () => {
  await sb?.close();
});

describe('transaction history', () => {
  it('derives the mint, taps and transfers from the ledger, in commit order', async () => {
    const all = await allPages('asc', 100);
    expect(all.map((t) => t.transaction_type)).toEqual([
      'mint',
      ...Array(7).fill('devnet_tap'),
      ...Array(5).fill('transfer'),
      ...Array(4).fill('devnet_tap'),
      'transfer',
    ]);
    expect(all[0]!.mint).toEqual({ amulet_owner: net.validatorParty, amulet_amount: '1000000.0000000000' });
    expect(all[1]!.tap).toEqual({ amulet_owner: alice, amulet_amount: '100.0000000000' });
    expect(all[1]!.round).toBe(1);
    expect(all[13]!.round).toBe(2);
    const t = all[8]!.transfer!;
    expect(t.sender.party).toBe(alice);
    expect(t.receivers).toEqual([{ party: bob, amount: '1.5000000000', receiver_fee: '0.0000000000' }]);
    expect(t.sender.input_amulet_amount).toBe('100.0000000000');
    expect(t.sender.sender_change_amount).toBe('98.5000000000');
    expect(t.sender.holding_fees).toBe('0.0000000000');
    expect(t.balance_changes).toEqual([
      {
        party: alice,
        change_to_initial_amount_as_of_round_zero: '-1.5000000000',
        change_to_holding_fees_rate: '0.0000000000',
      },
      {
        party: bob,
        change_to_initial_amount_as_of_round_zero: '1.5000190259',
        change_to_holding_fees_rate: HOLDING_FEE_RATE,
      },
    ]);
    expect(t.transfer_kind).toBeUndefined();
    for (const item of all) expect(item.event_id).toMatch(/^#[0-9a-f]+:\d+$/);
    expect(new Set(all.map((t) => t.event_id)).size).toBe(all.length);
    expect(all.map((t) => t.domain_id)).toEqual(all.map(() => net.synchronizerId));
    for (const item of all.slice(0, 3))
      expect(validateAgainst(scanSpec, 'TransactionHistoryResponseItem', item)).toEqual([]);
    const raw = await fetch(`${sb.urls.scan}/v0/transactions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ page_size: 20 }),
    });
    expect(validateAgainst(scanSpec, 'TransactionHistoryResponse', await raw.json())).toEqual([]);
  });

  it.each([1, 3, 7])('pages of %i cover the history without gap or overlap, in both orders', async (n) => {
    const full = (await allPages('asc', 1000)).map((t) => t.event_id);
    const asc = (await allPages('asc', n)).map((t) => t.event_id);
    const desc = (await allPages('desc', n)).map((t) => t.event_id);
    expect(asc).toEqual(full);
    expect(desc).toEqual([...full].reverse());
    const viaIterator: string[] = [];
    for await (const t of scan.transactions({ pageSize: n, sortOrder: 'desc' })) viaIterator.push(t.event_id);
    expect(viaIterator).toEqual(desc);
  });

  it('resumes strictly after the given event in either order', async () => {
    const full = (await allPages('asc', 1000)).map((t) => t.event_id);
    const mid = full[5]!;
    const after = await scan.transactionsPage({ sortOrder: 'asc', pageSize: 2, pageEndEventId: mid });
    expect(after.transactions.map((t) => t.event_id)).toEqual(full.slice(6, 8));
    const before = await scan.transactionsPage({ sortOrder: 'desc', pageSize: 2, pageEndEventId: mid });
    expect(before.transactions.map((t) => t.event_id)).toEqual([full[4], full[3]]);
    const last = await scan.transactionsPage({ sortOrder: 'asc', pageSize: 5, pageEndEventId: full.at(-1)! });
    expect(last.transactions).toEqual([]);
    const first = await scan.transactionsPage({ sortOrder: 'desc', pageSize: 5, pageEndEventId: full[0]! });
    expect(first.transactions).toEqual([]);
  });

  it('sees commits made after the first page', async () => {
    const before = await scan.transactionsPage({ sortOrder: 'desc', pageSize: 1 });
    net.tap(bob, '1');
    const after = await scan.transactionsPage({ sortOrder: 'desc', pageSize: 2 });
    expect(after.transactions[1]!.event_id).toBe(before.transactions[0]!.event_id);
    expect(after.transactions[0]!.tap).toEqual({ amulet_owner: bob, amulet_amount: '1.0000000000' });
  });

  it('answers 404 for an unknown page_end_event_id and 400 for bad page sizes or orders', async () => {
    const e = await rejection(
      scan.transactionsPage({ sortOrder: 'asc', pageSize: 3, pageEndEventId: '#nope:0' }),
    );
    expect(e.status).toBe(404);
    const post = (body: unknown) =>
      fetch(`${sb.urls.scan}/v0/transactions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const notFound = await post({ page_size: 3, page_end_event_id: '#nope:0' });
    expect(notFound.status).toBe(404);
    expect(((await notFound.json()) as { error: string }).error).toContain('page_end_event_id');
    for (const body of [
      { page_size: 0 },
      { page_size: 1001 },
      {},
      { page_size: 'x' },
      { page_size: 2, sort_order: 'up' },
    ]) {
      const r = await post(body);
      expect(r.status).toBe(400);
      const j = (await r.json()) as { error: string };
      expect(validateAgainst(scanSpec, 'ErrorResponse', j)).toEqual([]);
      expect(j.error).toMatch('sort_order' in body ? /sort_order/ : /page_size/);
    }
  });
});

describe('holdings summary', () => {
  it('sums unlocked and locked amulet as created and the holding fees by round', async () => {
    const dave = 'dave::1220dd';
    const created = net.latestRound().number; // 2
    net.tap(dave, '10');
    const lockedAmulet = amuletRecord(net.dso, dave, '4', created, HOLDING_FEE_RATE);
    net.commitInternal({
      archives: [],
      creates: [
        {
          ...amuletContract(net.dso, dave, '0', 0n),
          templateId: ID.lockedAmulet,
          argument: lockedAmuletRecord(
            lockedAmulet,
            [net.dso],
            net.clock.now() + 3_600_000_000n,
            'test lock',
          ),
        },
      ],
      commandId: 'test-lock',
    });
    net.advanceRound(); // open rounds 2, 3
    net.advanceRound(); // open rounds 3, 4: default as_of_round 3
    const now = isoMicros(net.clock.now());
    const r = await scan.getHoldingsSummary({
      migration_id: 0,
      record_time: now,
      record_time_match: 'at_or_before',
      owner_party_ids: [dave, 'nobody::1220'],
    });
    expect(validateAgainst(scanSpec, 'HoldingsSummaryResponse', r)).toEqual([]);
    expect(r.computed_as_of_round).toBe(3);
    expect(r.record_time).toBe(now);
    expect(r.summaries).toEqual([
      {
        party_id: dave,
        total_unlocked_coin: '10.0000000000',
        total_locked_coin: '4.0000000000',
        total_coin_holdings: '14.0000000000',
        accumulated_holding_fees_unlocked: '0.0000190259',
        accumulated_holding_fees_locked: '0.0000190259',
        accumulated_holding_fees_total: '0.0000380518',
        total_available_coin: '9.9999809741',
      },
    ]);
    const later = await validator.scanProxyHoldingsSummary({
      migration_id: 0,
      record_time: now,
      record_time_match: 'at_or_before',
      owner_party_ids: [dave],
      as_of_round: 12,
    });
    expect(later.computed_as_of_round).toBe(12);
    expect(later.summaries[0]!.accumulated_holding_fees_unlocked).toBe('0.0001902590');
    expect(later.summaries[0]!.total_available_coin).toBe('9.9998097410');
  });

  it('reads the snapshot at the record time, exact or at-or-before', async () => {
    const erin = 'erin::1220ee';
    net.clock.advance(5);
    const tapped = net.tap(erin, '5');
    const exactTime = isoMicros(tapped.createdAt);
    net.clock.advance(5); // the clock ticks in ms: keep the next commit off this record time
    net.tap(erin, '6');
    const exact = await scan.getHoldingsSummary({
      migration_id: 0,
      record_time: exactTime,
      owner_party_ids: [erin],
    });
    expect(exact.summaries[0]!.total_unlocked_coin).toBe('5.0000000000');
    const before = isoMicros(tapped.createdAt - 1n);
    const none = await scan.getHoldingsSummary({
      migration_id: 0,
      record_time: before,
      record_time_match: 'at_or_before',
      owner_party_ids: [erin],
    });
    expect(none.summaries).toEqual([]);
    const genesis = net.store.updates()[0]!.recordTime;
    expect(
      (
        await rejection(
          scan.getHoldingsSummary({
            migration_id: 0,
            record_time: isoMicros(genesis - 1n),
            owner_party_ids: [erin],
          }),
        )
      ).status,
    ).toBe(404);
    expect(
      (
        await rejection(
          scan.getHoldingsSummary({ migration_id: 7, record_time: exactTime, owner_party_ids: [erin] }),
        )
      ).status,
    ).toBe(404);
    const bad = await fetch(`${sb.urls.scan}/v0/holdings/summary`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ migration_id: 0, record_time: 'yesterday', owner_party_ids: [erin] }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/record_time/);
  });
});

describe('ANS, DSO party, preapprovals, counters', () => {
  beforeAll(() => {
    const far = net.clock.now() + 86_400_000_000n;
    net.commitInternal({
      archives: [],
      creates: [
        ansEntryContract(net.dso, alice, 'alice.unverified.cns', far),
        ansEntryContract(net.dso, alice, 'aaa.unverified.cns', far),
        ansEntryContract(net.dso, bob, 'bob.unverified.cns', net.clock.now() - 1n),
        transferPreapprovalContract(net.dso, alice, net.validatorParty, net.clock.now()),
        transferCommandCounterContract(net.dso, alice, 4n),
      ],
      commandId: 'test-ans',
    });
  });

  it('looks ANS entries up by name, by party and by prefix', async () => {
    const byName = await scan.lookupAnsEntryByName('alice.unverified.cns');
    expect(byName.entry).toMatchObject({
      user: alice,
      name: 'alice.unverified.cns',
      url: '',
      description: '',
    });
    expect(byName.entry.contract_id).toBeDefined();
    expect(byName.entry.expires_at).toMatch(/Z$/);
    expect(validateAgainst(scanSpec, 'LookupEntryByNameResponse', byName)).toEqual([]);
    expect((await scan.lookupAnsEntryByParty(alice)).entry.name).toBe('aaa.unverified.cns');
    expect((await validator.scanProxyAnsEntryByParty(alice)).entry.name).toBe('aaa.unverified.cns');
    const dso = await validator.scanProxyAnsEntryByName('dso.cns');
    expect(dso.entry).toEqual({ user: net.dso, name: 'dso.cns', url: '', description: '' });
    for (const p of [
      scan.lookupAnsEntryByName('nobody.unverified.cns'),
      scan.lookupAnsEntryByName('bob.unverified.cns'), // expired
      validator.scanProxyAnsEntryByParty(carol),
    ])
      expect((await rejection(p)).status).toBe(404);
    const listed = await scan.listAnsEntries({ namePrefix: 'a', pageSize: 10 });
    // Ordered by name, as Scan's query orders them.
    expect(listed.entries.map((e) => e.name)).toEqual(['aaa.unverified.cns', 'alice.unverified.cns']);
    expect(validateAgainst(scanSpec, 'ListEntriesResponse', listed)).toEqual([]);
    const one = await validator.scanProxyListAnsEntries({ pageSize: 1 });
    expect(one.entries.map((e) => e.name)).toEqual(['aaa.unverified.cns']);
    // The DSO's reserved name follows the entries when the page has room.
    const dsoListed = await scan.listAnsEntries({ namePrefix: 'd', pageSize: 10 });
    expect(dsoListed.entries).toEqual([{ user: net.dso, name: 'dso.cns', url: '', description: '' }]);
    const all = await scan.listAnsEntries({ pageSize: 100 });
    expect(all.entries.map((e) => e.name)).not.toContain('bob.unverified.cns');
    const missing = await fetch(`${sb.urls.scan}/v0/ans-entries`);
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: string }).error).toMatch(/page_size/);
  });

  it('serves the ANS rules, omitting the contract when the cached copy is current', async () => {
    const r = await scan.getAnsRules();
    expect(r.ans_rules_update.contract?.template_id).toMatch(/:Splice\.Ans:AnsRules$/);
    expect(validateAgainst(scanSpec, 'GetAnsRulesResponse', r)).toEqual([]);
    const cached = await scan.getAnsRules({
      cached_ans_rules_contract_id: r.ans_rules_update.contract!.contract_id,
      cached_ans_rules_domain_id: r.ans_rules_update.domain_id!,
    });
    expect(cached.ans_rules_update).toEqual({ domain_id: net.synchronizerId });
  });

  it('serves the open mining rounds on Scan (POST, cached contracts left out) and the proxy (GET)', async () => {
    const rounds = openRounds(net.store);
    const r = await scan.getOpenAndIssuingMiningRounds();
    expect(validateAgainst(scanSpec, 'GetOpenAndIssuingMiningRoundsResponse', r)).toEqual([]);
    expect(Object.keys(r.open_mining_rounds).sort()).toEqual(rounds.map((x) => x.contractId).sort());
    expect(r.issuing_mining_rounds).toEqual({});
    expect(r.time_to_live_in_microseconds).toBeGreaterThanOrEqual(0);
    expect(r.time_to_live_in_microseconds).toBeLessThanOrEqual(net.roundIntervalMs * 1000);
    const parsed = openRoundsOf(r);
    expect(parsed.map((x) => BigInt(x.number))).toEqual(rounds.map((x) => x.number));
    expect(parsed.map((x) => x.opensAtUs)).toEqual(rounds.map((x) => x.opensAt));
    // The round a transfer runs in is the sandbox's choice-context round.
    expect(usableRound(parsed, net.clock.now() + 1n)?.number).toBe(Number(net.latestRound().number));

    const first = rounds[0]!.contractId;
    const cached = await scan.getOpenAndIssuingMiningRounds({
      cached_open_mining_round_contract_ids: [first, '00gone'],
      cached_issuing_round_contract_ids: [],
    });
    expect(cached.open_mining_rounds[first]).toEqual({ domain_id: net.synchronizerId });
    expect(cached.open_mining_rounds['00gone']).toBeUndefined();
    expect(cached.open_mining_rounds[rounds[1]!.contractId]?.contract).toBeDefined();
    const bad = await fetch(`${sb.urls.scan}/v0/open-and-issuing-mining-rounds`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ cached_open_mining_round_contract_ids: [] }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/cached_issuing_round_contract_ids/);

    const proxied = await validator.scanProxyOpenAndIssuingMiningRounds();
    expect(validateAgainst(scanProxySpec, 'GetOpenAndIssuingMiningRoundsProxyResponse', proxied)).toEqual([]);
    expect(proxied.open_mining_rounds).toEqual(rounds.map((x) => r.open_mining_rounds[x.contractId]));
    expect(proxied.issuing_mining_rounds).toEqual([]);
  });

  it('answers the DSO party on Scan and the proxy', async () => {
    expect(await scan.getDsoPartyId()).toEqual({ dso_party_id: net.dso });
    expect(await validator.scanProxyDsoPartyId()).toEqual({ dso_party_id: net.dso });
  });

  it('finds preapprovals and counters by party, 404 when none', async () => {
    const p = await validator.scanProxyTransferPreapproval(alice);
    expect(p.transfer_preapproval.contract.payload).toMatchObject({
      receiver: alice,
      provider: net.validatorParty,
    });
    expect(p.transfer_preapproval.domain_id).toBe(net.synchronizerId);
    expect(validateAgainst(scanSpec, 'LookupTransferPreapprovalByPartyResponse', p)).toEqual([]);
    expect((await rejection(validator.scanProxyTransferPreapproval(bob))).status).toBe(404);
    const c = await validator.scanProxyTransferCommandCounter(alice);
    expect(c.transfer_command_counter.contract.payload).toMatchObject({ sender: alice, nextNonce: '4' });
    expect((await rejection(validator.scanProxyTransferCommandCounter(bob))).status).toBe(404);
    const status = await rejection(validator.scanProxyTransferCommandStatus({ sender: alice, nonce: 4 }));
    expect(status.status).toBe(404);
    const badNonce = await fetch(
      `${sb.urls.validator}/v0/scan-proxy/transfer-command/status?sender=x&nonce=-1`,
    );
    expect(badNonce.status).toBe(400);
    expect(((await badNonce.json()) as { error: string }).error).toMatch(/nonce/);
  });
});

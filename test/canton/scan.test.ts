import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { staticBearer } from '../../src/canton/auth.js';
import { CantonApiError } from '../../src/canton/errors.js';
import { ScanClient } from '../../src/canton/scan/client.js';
import { openRoundsOf, usableRound } from '../../src/canton/scan/rounds.js';
import type { SortOrder, TransactionHistoryItem } from '../../src/canton/scan/schemas.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';
import { type StubServer, send, startStubServer } from '../support/stub-server.js';

const scanSpec = loadSpec(join(SPECS_DIR, 'splice-0.6.1/scan.yaml'));

// ---------------------------------------------------------------------------------------------
// Local Scan stub

const PREFIX = '/api/scan';
let server: StubServer;

beforeAll(async () => {
  server = await startStubServer({ prefix: PREFIX });
});

afterAll(() => server.close());

beforeEach(() => {
  server.reset();
});

function client(opts: Partial<ConstructorParameters<typeof ScanClient>[0]> = {}): ScanClient {
  return new ScanClient({
    baseUrl: server.baseUrl,
    retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 5 },
    timeoutMs: 5000,
    ...opts,
  });
}

async function failure(p: Promise<unknown>): Promise<CantonApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(CantonApiError);
    return e as CantonApiError;
  }
  throw new Error('expected the call to fail');
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

const schemaProblems = (component: string, value: unknown) => validateAgainst(scanSpec, component, value);

// ---------------------------------------------------------------------------------------------
// Fixtures

const FP = `1220${'ab'.repeat(32)}`;
const ALICE = `alice::${FP}`;
const BOB = `bob::1220${'cd'.repeat(32)}`;
const DSO = `DSO::1220${'ee'.repeat(32)}`;
const DOMAIN = `global-domain::${FP}`;

/** A varied ledger of `n` transaction items in ascending event order. */
function ledger(n: number): TransactionHistoryItem[] {
  return Array.from({ length: n }, (_, i) => {
    const base = {
      event_id: `#1220${i.toString(16).padStart(8, '0')}:${i % 3}`,
      offset: String(1000 + i),
      date: new Date(Date.UTC(2026, 2, 1, 0, 0, i)).toISOString(),
      domain_id: DOMAIN,
      round: 100 + Math.floor(i / 5),
    };
    switch (i % 4) {
      case 0:
        return {
          ...base,
          transaction_type: 'transfer',
          transfer: {
            sender: {
              party: ALICE,
              input_amulet_amount: '50.0000000000',
              sender_change_fee: '0.0000000000',
              sender_change_amount: '39.0000000000',
              sender_fee: '0.0000000000',
              holding_fees: '0.0010000000',
            },
            receivers: [{ party: BOB, amount: '10.0000000000', receiver_fee: '0.0000000000' }],
            balance_changes: [
              {
                party: BOB,
                change_to_initial_amount_as_of_round_zero: '10.0100000000',
                change_to_holding_fees_rate: '0.0000190259',
              },
            ],
            description: `payment ${i}`,
            transfer_kind: 'preapproval_send',
          },
        };
      case 1:
        return {
          ...base,
          transaction_type: 'mint',
          mint: { amulet_owner: ALICE, amulet_amount: '5.0000000000' },
        };
      case 2:
        return {
          ...base,
          transaction_type: 'devnet_tap',
          tap: { amulet_owner: BOB, amulet_amount: '1.0000000000' },
        };
      default:
        return {
          ...base,
          transaction_type: 'abort_transfer_instruction',
          abort_transfer_instruction: { abort_kind: 'withdraw', transfer_instruction_cid: `00ti${i}` },
        };
    }
  });
}

/**
 * `/v0/transactions` as the spec describes it: without `page_end_event_id` start at the
 * beginning (asc) or end (desc); with it, continue after that event in the same order.
 * Records every request body and checks it against the spec's request component.
 */
function transactionsStub(items: TransactionHistoryItem[]) {
  const requests: { page_end_event_id?: string; sort_order?: SortOrder; page_size: number }[] = [];
  const problems: string[] = [];
  const hits = server.route('POST', '/v0/transactions', (res, hit) => {
    const req = JSON.parse(hit.body) as (typeof requests)[number];
    requests.push(req);
    problems.push(...schemaProblems('TransactionHistoryRequest', req));
    const ordered = req.sort_order === 'desc' ? [...items].reverse() : items;
    let start = 0;
    if (req.page_end_event_id !== undefined) {
      const at = ordered.findIndex((t) => t.event_id === req.page_end_event_id);
      if (at < 0) return send(res, 400, { error: `unknown page_end_event_id ${req.page_end_event_id}` });
      start = at + 1;
    }
    const body = { transactions: ordered.slice(start, start + req.page_size) };
    problems.push(...schemaProblems('TransactionHistoryResponse', body));
    send(res, 200, body);
  });
  return { requests, problems, hits };
}

const ANS_ENTRY = {
  contract_id: '00dd04',
  user: ALICE,
  name: 'alice.unverified.cns',
  url: 'https://alice.example.com',
  description: 'Alice',
  expires_at: '2027-01-01T00:00:00Z',
};
const DSO_ENTRY = { user: DSO, name: 'dso.cns', url: '', description: 'DSO' };
const ANS_RULES = {
  template_id: '3ca1343ab26b453d38c8adb70dca5f1ead8440c42b59b68f070786955cbf9ec1:Splice.Ans:AnsRules',
  contract_id: '00a115',
  payload: { dso: DSO, config: { renewalDuration: { microseconds: '2592000000000' } } },
  created_event_blob: Buffer.from('ans rules').toString('base64'),
  created_at: '2026-03-01T12:00:00Z',
};
const SUMMARY = {
  party_id: ALICE,
  total_unlocked_coin: '100.0000000000',
  total_locked_coin: '5.0000000000',
  total_coin_holdings: '105.0000000000',
  accumulated_holding_fees_unlocked: '0.0100000000',
  accumulated_holding_fees_locked: '0.0010000000',
  accumulated_holding_fees_total: '0.0110000000',
  total_available_coin: '99.9900000000',
};

// ---------------------------------------------------------------------------------------------

describe('ScanClient.transactions: paging', () => {
  it('the fixture ledger is valid against the spec', () => {
    expect(schemaProblems('TransactionHistoryResponse', { transactions: ledger(8) })).toEqual([]);
  });

  it.each<SortOrder>(['asc', 'desc'])(
    '%s: 25 items, page size 10 → all exactly once, in order, no gap, no overlap',
    async (sortOrder) => {
      const items = ledger(25);
      const stub = transactionsStub(items);
      const got = await collect(client().transactions({ pageSize: 10, sortOrder }));

      const expected = sortOrder === 'asc' ? items : [...items].reverse();
      expect(got.map((t) => t.event_id)).toEqual(expected.map((t) => t.event_id));
      expect(new Set(got.map((t) => t.event_id)).size).toBe(25);
      expect(got).toEqual(expected);

      // 10 + 10 + 5: the short page ends the iteration.
      expect(stub.requests).toHaveLength(3);
      expect(stub.problems).toEqual([]);
      expect(stub.requests[0]).not.toHaveProperty('page_end_event_id');
      expect(stub.requests[1]!.page_end_event_id).toBe(expected[9]!.event_id);
      expect(stub.requests[2]!.page_end_event_id).toBe(expected[19]!.event_id);
      for (const r of stub.requests) {
        expect(r.sort_order).toBe(sortOrder);
        expect(r.page_size).toBe(10);
      }
      expect(stub.hits.every((h) => h.method === 'POST' && h.path === `${PREFIX}/v0/transactions`)).toBe(
        true,
      );
    },
  );

  it.each<SortOrder>(['asc', 'desc'])(
    '%s: an exact multiple of the page size ends on the empty page',
    async (sortOrder) => {
      const items = ledger(20);
      const stub = transactionsStub(items);
      const got = await collect(client().transactions({ pageSize: 10, sortOrder }));
      const expected = sortOrder === 'asc' ? items : [...items].reverse();
      expect(got.map((t) => t.event_id)).toEqual(expected.map((t) => t.event_id));
      expect(stub.requests.map((r) => r.page_end_event_id)).toEqual([
        undefined,
        expected[9]!.event_id,
        expected[19]!.event_id,
      ]);
    },
  );

  it('an empty ledger is one request and no items', async () => {
    const stub = transactionsStub([]);
    expect(await collect(client().transactions({ pageSize: 10, sortOrder: 'desc' }))).toEqual([]);
    expect(stub.requests).toEqual([{ sort_order: 'desc', page_size: 10 }]);
  });

  it('page size 1 walks item by item', async () => {
    const items = ledger(4);
    const stub = transactionsStub(items);
    const got = await collect(client().transactions({ pageSize: 1, sortOrder: 'asc' }));
    expect(got.map((t) => t.event_id)).toEqual(items.map((t) => t.event_id));
    expect(stub.requests).toHaveLength(5);
  });

  it('resumes after a given event id', async () => {
    const items = ledger(25);
    const stub = transactionsStub(items);
    const got = await collect(
      client().transactions({ pageSize: 10, sortOrder: 'asc', after: items[4]!.event_id }),
    );
    expect(got.map((t) => t.event_id)).toEqual(items.slice(5).map((t) => t.event_id));
    expect(stub.requests[0]!.page_end_event_id).toBe(items[4]!.event_id);
  });

  it('is lazy: stopping after the first item costs one request', async () => {
    const stub = transactionsStub(ledger(25));
    for await (const t of client().transactions({ pageSize: 10, sortOrder: 'asc' })) {
      expect(t.event_id).toBeTruthy();
      break;
    }
    expect(stub.requests).toHaveLength(1);
  });

  it('refuses to loop when a full page ends on the cursor it was given', async () => {
    const items = ledger(3);
    server.route('POST', '/v0/transactions', (res) => send(res, 200, { transactions: items }));
    await expect(
      collect(client().transactions({ pageSize: 3, sortOrder: 'asc', after: items[2]!.event_id })),
    ).rejects.toThrow(/not advancing/);
  });

  it('validates the query before any request', async () => {
    const before = server.allHits.length;
    expect(() => client().transactions({ pageSize: 0, sortOrder: 'asc' })).toThrow(TypeError);
    expect(() => client().transactions({ pageSize: 1.5, sortOrder: 'asc' })).toThrow(TypeError);
    expect(() => client().transactions({ pageSize: 5, sortOrder: 'up' as SortOrder })).toThrow(TypeError);
    await expect(client().transactionsPage({ pageSize: -1, sortOrder: 'asc' })).rejects.toThrow(TypeError);
    expect(server.allHits.length).toBe(before);
  });

  it('a transient failure mid-way is retried (read-only POST) without losing or repeating items', async () => {
    const items = ledger(25);
    const stub = transactionsStub(items);
    let n = 0;
    server.wrap('POST', '/v0/transactions', (real) => (res, hit, k, req) => {
      n++;
      if (n === 2) return send(res, 503, { error: 'The server is temporarily unavailable' });
      return real(res, hit, k, req);
    });
    const got = await collect(client().transactions({ pageSize: 10, sortOrder: 'asc' }));
    expect(got.map((t) => t.event_id)).toEqual(items.map((t) => t.event_id));
    expect(stub.hits).toHaveLength(4);
    expect(stub.requests[1]!.page_end_event_id).toBe(items[9]!.event_id);
  });
});

describe('ScanClient: single calls round-trip', () => {
  it('transactionsPage sends exactly the spec body and parses the page', async () => {
    const items = ledger(7);
    const stub = transactionsStub(items);
    const page = await client().transactionsPage({
      pageSize: 3,
      sortOrder: 'desc',
      pageEndEventId: items[6]!.event_id,
    });
    expect(page.transactions.map((t) => t.event_id)).toEqual(
      [items[5], items[4], items[3]].map((t) => t!.event_id),
    );
    expect(JSON.parse(stub.hits[0]!.body)).toEqual({
      sort_order: 'desc',
      page_size: 3,
      page_end_event_id: items[6]!.event_id,
    });
    expect(stub.problems).toEqual([]);
  });

  it('listAnsEntries: GET with name_prefix and page_size', async () => {
    const body = { entries: [ANS_ENTRY, DSO_ENTRY] };
    expect(schemaProblems('ListEntriesResponse', body)).toEqual([]);
    const hits = server.route('GET', '/v0/ans-entries', (res) => send(res, 200, body));
    expect(await client().listAnsEntries({ namePrefix: 'al ice&', pageSize: 25 })).toEqual(body);
    expect(hits[0]!.body).toBe('');
    expect(Object.fromEntries(hits[0]!.query)).toEqual({ name_prefix: 'al ice&', page_size: '25' });
    await client().listAnsEntries({ pageSize: 5 });
    expect(Object.fromEntries(hits[1]!.query)).toEqual({ page_size: '5' });
  });

  it('lookupAnsEntryByName / ByParty: one encoded path segment each', async () => {
    const body = { entry: ANS_ENTRY };
    expect(schemaProblems('LookupEntryByNameResponse', body)).toEqual([]);
    expect(schemaProblems('LookupEntryByPartyResponse', body)).toEqual([]);
    const byName = server.route(
      'GET',
      `/v0/ans-entries/by-name/${encodeURIComponent(ANS_ENTRY.name)}`,
      (res) => send(res, 200, body),
    );
    const byParty = server.route('GET', `/v0/ans-entries/by-party/${encodeURIComponent(ALICE)}`, (res) =>
      send(res, 200, body),
    );
    expect(await client().lookupAnsEntryByName(ANS_ENTRY.name)).toEqual(body);
    expect(await client().lookupAnsEntryByParty(ALICE)).toEqual(body);
    expect(byName).toHaveLength(1);
    expect(byParty[0]!.path).toBe(`${PREFIX}/v0/ans-entries/by-party/alice%3A%3A${FP}`);
  });

  it('getAnsRules: POST with the (all-optional) GetAnsRulesRequest body', async () => {
    const fresh = { ans_rules_update: { contract: ANS_RULES, domain_id: DOMAIN } };
    const cached = { ans_rules_update: { domain_id: DOMAIN } };
    expect(schemaProblems('GetAnsRulesResponse', fresh)).toEqual([]);
    expect(schemaProblems('GetAnsRulesResponse', cached)).toEqual([]);
    const hits = server.route('POST', '/v0/ans-rules', (res, _h, n) =>
      send(res, 200, n === 1 ? fresh : cached),
    );
    expect(await client().getAnsRules()).toEqual(fresh);
    const req = { cached_ans_rules_contract_id: '00a115', cached_ans_rules_domain_id: DOMAIN };
    expect(await client().getAnsRules(req)).toEqual(cached);
    expect(JSON.parse(hits[0]!.body)).toEqual({});
    expect(JSON.parse(hits[1]!.body)).toEqual(req);
    for (const h of hits) expect(schemaProblems('GetAnsRulesRequest', JSON.parse(h.body))).toEqual([]);
  });

  it('getHoldingsSummary: POST /v0/holdings/summary', async () => {
    const req = {
      migration_id: 4,
      record_time: '2026-03-01T12:00:00Z',
      owner_party_ids: [ALICE, BOB],
      as_of_round: 120,
    };
    const body = {
      record_time: '2026-03-01T12:00:00Z',
      migration_id: 4,
      computed_as_of_round: 120,
      summaries: [SUMMARY, { ...SUMMARY, party_id: BOB }],
    };
    expect(schemaProblems('HoldingsSummaryRequest', req)).toEqual([]);
    expect(schemaProblems('HoldingsSummaryResponse', body)).toEqual([]);
    const hits = server.route('POST', '/v0/holdings/summary', (res) => send(res, 200, body));
    expect(await client().getHoldingsSummary(req)).toEqual(body);
    expect(JSON.parse(hits[0]!.body)).toEqual(req);
    await expect(client().getHoldingsSummary({ ...req, owner_party_ids: [] })).rejects.toThrow(TypeError);
    expect(hits).toHaveLength(1);
  });

  it('getOpenAndIssuingMiningRounds: POST with empty cache lists; the rounds and the one a transfer runs in', async () => {
    const round = (id: string, n: number, opensAt: string) => ({
      contract: {
        template_id: `3ca1343ab26b453d38c8adb70dca5f1ead8440c42b59b68f070786955cbf9ec1:Splice.Round:OpenMiningRound`,
        contract_id: id,
        payload: { dso: DSO, round: { number: String(n) }, opensAt, targetClosesAt: '2026-03-01T13:00:00Z' },
        created_event_blob: Buffer.from(`blob of ${id}`).toString('base64'),
        created_at: '2026-03-01T11:40:00.000000Z',
      },
      domain_id: DOMAIN,
    });
    const body = {
      time_to_live_in_microseconds: 120_000_000,
      open_mining_rounds: {
        '00r41': round('00r41', 41, '2026-03-01T11:40:00Z'),
        '00r43': round('00r43', 43, '2026-03-01T12:00:00.000001Z'),
        '00r42': round('00r42', 42, '2026-03-01T11:50:00Z'),
      },
      issuing_mining_rounds: {},
    };
    expect(schemaProblems('GetOpenAndIssuingMiningRoundsResponse', body)).toEqual([]);
    const hits = server.route('POST', '/v0/open-and-issuing-mining-rounds', (res) => send(res, 200, body));
    const r = await client().getOpenAndIssuingMiningRounds();
    expect(r).toEqual(body);
    const sent = JSON.parse(hits[0]!.body) as unknown;
    expect(sent).toEqual({
      cached_open_mining_round_contract_ids: [],
      cached_issuing_round_contract_ids: [],
    });
    expect(schemaProblems('GetOpenAndIssuingMiningRoundsRequest', sent)).toEqual([]);
    const rounds = openRoundsOf(r);
    expect(rounds.map((x) => x.number)).toEqual([41, 42, 43]);
    // Splice's latest usable round: the newest whose opensAt has passed, not the newest listed.
    const at = (iso: string) => BigInt(Date.parse(iso)) * 1000n;
    expect(usableRound(rounds, at('2026-03-01T12:00:00Z'))?.number).toBe(42);
    expect(usableRound(rounds, at('2026-03-01T12:00:00Z') + 2n)?.number).toBe(43);
    expect(usableRound(rounds, at('2026-03-01T11:40:00Z'))).toBeUndefined();
    // Off-spec answers are refused: a missing TTL, a round without its number.
    server.route('POST', '/v0/open-and-issuing-mining-rounds', (res) =>
      send(res, 200, { open_mining_rounds: {}, issuing_mining_rounds: {} }),
    );
    expect((await failure(client().getOpenAndIssuingMiningRounds())).code).toBe('INVALID_RESPONSE');
    const noNumber = round('00r44', 44, '2026-03-01T12:10:00Z');
    noNumber.contract.payload.round = {} as { number: string };
    expect(() => openRoundsOf({ ...body, open_mining_rounds: { '00r44': noNumber } })).toThrow(
      /round number/,
    );
  });

  it('getDsoPartyId', async () => {
    const body = { dso_party_id: DSO };
    expect(schemaProblems('GetDsoPartyIdResponse', body)).toEqual([]);
    server.route('GET', '/v0/dso-party-id', (res) => send(res, 200, body));
    expect(await client().getDsoPartyId()).toEqual(body);
  });

  it('sends the configured bearer token when Scan sits behind auth', async () => {
    const hits = server.route('GET', '/v0/dso-party-id', (res) => send(res, 200, { dso_party_id: DSO }));
    await client({ auth: staticBearer('scan-token') }).getDsoPartyId();
    await client().getDsoPartyId();
    expect(hits.map((h) => h.authorization)).toEqual(['Bearer scan-token', undefined]);
  });
});

describe('ScanClient: errors and retries', () => {
  it('404 {error} on a lookup surfaces as CantonApiError (service scan)', async () => {
    const body = { error: 'No ans entry found for name nobody.unverified.cns' };
    expect(schemaProblems('ErrorResponse', body)).toEqual([]);
    const hits = server.route('GET', '/v0/ans-entries/by-name/nobody.unverified.cns', (res) =>
      send(res, 404, body),
    );
    const e = await failure(client().lookupAnsEntryByName('nobody.unverified.cns'));
    expect(e.service).toBe('scan');
    expect(e.status).toBe(404);
    expect(e.spliceError).toBe(body.error);
    expect(hits).toHaveLength(1);
  });

  it('400 {error} on /v0/transactions is not retried', async () => {
    const hits = server.route('POST', '/v0/transactions', (res) =>
      send(res, 400, { error: 'page_size too large' }),
    );
    const e = await failure(client().transactionsPage({ pageSize: 100_000, sortOrder: 'asc' }));
    expect(e.status).toBe(400);
    expect(e.spliceError).toBe('page_size too large');
    expect(hits).toHaveLength(1);
  });

  it.each([
    ['GET /v0/dso-party-id', (c: ScanClient) => c.getDsoPartyId(), { dso_party_id: DSO }],
    ['POST /v0/ans-rules', (c: ScanClient) => c.getAnsRules(), { ans_rules_update: { domain_id: DOMAIN } }],
    [
      'POST /v0/holdings/summary',
      (c: ScanClient) =>
        c.getHoldingsSummary({
          migration_id: 1,
          record_time: '2026-03-01T12:00:00Z',
          owner_party_ids: [ALICE],
        }),
      { record_time: '2026-03-01T12:00:00Z', migration_id: 1, computed_as_of_round: 1, summaries: [] },
    ],
  ] as const)('%s is retried on 503 (read-only)', async (what, call, body) => {
    const [method, path] = what.split(' ') as [string, string];
    const hits = server.route(method, path, (res, _h, n) =>
      n === 1 ? send(res, 503, { error: 'unavailable' }) : send(res, 200, body),
    );
    expect(await call(client())).toEqual(body);
    expect(hits).toHaveLength(2);
  });

  it('an off-spec page is refused as INVALID_RESPONSE', async () => {
    server.route('POST', '/v0/transactions', (res) =>
      send(res, 200, { transactions: [{ transaction_type: 'mint', date: '2026-03-01T00:00:00Z' }] }),
    );
    const e = await failure(client().transactionsPage({ pageSize: 10, sortOrder: 'asc' }));
    expect(e.code).toBe('INVALID_RESPONSE');
  });
});

describe('ScanClient: every path and verb it uses exists in scan.yaml', () => {
  const USED: [string, string, string | undefined, string | undefined][] = [
    ['POST', '/v0/transactions', 'TransactionHistoryRequest', 'TransactionHistoryResponse'],
    ['GET', '/v0/ans-entries', undefined, 'ListEntriesResponse'],
    ['GET', '/v0/ans-entries/by-name/{name}', undefined, 'LookupEntryByNameResponse'],
    ['GET', '/v0/ans-entries/by-party/{party}', undefined, 'LookupEntryByPartyResponse'],
    ['POST', '/v0/ans-rules', 'GetAnsRulesRequest', 'GetAnsRulesResponse'],
    ['POST', '/v0/holdings/summary', 'HoldingsSummaryRequest', 'HoldingsSummaryResponse'],
    ['GET', '/v0/dso-party-id', undefined, 'GetDsoPartyIdResponse'],
    [
      'POST',
      '/v0/open-and-issuing-mining-rounds',
      'GetOpenAndIssuingMiningRoundsRequest',
      'GetOpenAndIssuingMiningRoundsResponse',
    ],
  ];
  const templateRegex = (t: string) =>
    new RegExp(`^${t.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^/}]+\}/g, '[^/]+')}$`);

  it.each(USED)('%s %s', (method, template, reqComponent, resComponent) => {
    const op = (scanSpec.paths as Record<string, Record<string, unknown>>)[template]?.[
      method.toLowerCase()
    ] as
      | {
          requestBody?: { content: Record<string, { schema: { $ref: string } }> };
          responses: Record<string, { content?: Record<string, { schema: { $ref: string } }> }>;
        }
      | undefined;
    expect(op).toBeDefined();
    expect(op!.requestBody?.content['application/json']?.schema.$ref).toBe(
      reqComponent ? `#/components/schemas/${reqComponent}` : undefined,
    );
    expect(op!.responses['200']?.content?.['application/json']?.schema.$ref).toBe(
      `#/components/schemas/${resComponent}`,
    );
  });

  it('the paging request shape is the one the client sends', () => {
    const req = scanSpec.components.schemas.TransactionHistoryRequest as {
      required: string[];
      properties: Record<string, { type: string; enum?: string[] }>;
    };
    expect(req.required).toEqual(['page_size']);
    expect(Object.keys(req.properties).sort()).toEqual(['page_end_event_id', 'page_size', 'sort_order']);
    expect(req.properties.sort_order!.enum).toEqual(['asc', 'desc']);
  });

  it('every request the client sent in this file matches one of those operations', () => {
    const sent = server.allHits.filter((h) => h.path.startsWith(PREFIX));
    expect(sent.length).toBeGreaterThan(USED.length);
    for (const h of sent) {
      const path = h.path.slice(PREFIX.length);
      const match = USED.find(([m, t]) => m === h.method && templateRegex(t).test(path));
      expect(match, `${h.method} ${path}`).toBeDefined();
    }
    for (const [m, t] of USED) {
      expect(
        sent.some((h) => h.method === m && templateRegex(t).test(h.path.slice(PREFIX.length))),
        `${m} ${t} exercised`,
      ).toBe(true);
    }
  });
});

/**
 * Client of a Splice Scan app (`/api/scan`, `scan.yaml` of Splice 0.6.1): transaction
 * history paging, ANS lookups, ANS rules, holdings summary, DSO party id, open and
 * issuing mining rounds.
 *
 * Every call here only reads. The POST endpoints (`/v0/transactions`, `/v0/ans-rules`,
 * `/v0/holdings/summary`, `/v0/open-and-issuing-mining-rounds`) take their query in a body but change nothing on the server,
 * so they are sent as idempotent and retried like GETs.
 */
import { encodePath, HttpClient, type HttpClientOptions } from '../http.js';
import {
  type GetAmuletRulesResponse,
  GetAmuletRulesResponseSchema,
  type GetAnsRulesRequest,
  type GetAnsRulesResponse,
  GetAnsRulesResponseSchema,
  type GetDsoPartyIdResponse,
  GetDsoPartyIdResponseSchema,
  type GetOpenAndIssuingMiningRoundsRequest,
  type GetOpenAndIssuingMiningRoundsResponse,
  GetOpenAndIssuingMiningRoundsResponseSchema,
  type HoldingsSummaryRequest,
  type HoldingsSummaryResponse,
  HoldingsSummaryResponseSchema,
  type ListAnsEntriesQuery,
  type ListAnsEntriesResponse,
  ListAnsEntriesResponseSchema,
  type LookupAnsEntryResponse,
  LookupAnsEntryResponseSchema,
  type SortOrder,
  type TransactionHistoryItem,
  type TransactionHistoryRequest,
  type TransactionHistoryResponse,
  TransactionHistoryResponseSchema,
} from './schemas.js';

/** Per-call overrides. */
export interface CallOptions {
  /** Per attempt; defaults to the client's `timeoutMs`. */
  timeoutMs?: number;
}

export interface ScanClientOptions extends Omit<HttpClientOptions, 'service'> {
  /** Scan root, e.g. `https://scan.sv-1.example.com/api/scan`. */
  baseUrl: string;
}

export interface TransactionsQuery {
  /** Transactions per request (positive integer). */
  pageSize: number;
  sortOrder: SortOrder;
  /**
   * Resume after this event id (exclusive), in `sortOrder`. Absent: start at the
   * beginning (`asc`) or the end (`desc`) of the ledger.
   */
  after?: string;
}

export interface TransactionsPageQuery {
  pageSize: number;
  sortOrder: SortOrder;
  /** `page_end_event_id`: the last `event_id` of the previous page; absent for the first page. */
  pageEndEventId?: string;
}

export class ScanClient {
  readonly http: HttpClient;

  constructor(opts: ScanClientOptions) {
    this.http = new HttpClient({ ...opts, service: 'scan' });
  }

  /**
   * One page of `POST /v0/transactions` (`listTransactionHistory`). Read-only → idempotent.
   * Deprecated upstream in favour of `/v2/updates` ("known bugs that will not be fixed").
   */
  async transactionsPage(q: TransactionsPageQuery, opts?: CallOptions): Promise<TransactionHistoryResponse> {
    checkPageSize(q.pageSize);
    checkSortOrder(q.sortOrder);
    const body: TransactionHistoryRequest = { sort_order: q.sortOrder, page_size: q.pageSize };
    if (q.pageEndEventId !== undefined) body.page_end_event_id = q.pageEndEventId;
    return this.http.request({
      method: 'POST',
      path: '/v0/transactions',
      body,
      response: TransactionHistoryResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * Every transaction, in `sortOrder`, fetched lazily page by page: the first request has
   * no `page_end_event_id` (unless `after` is given), each next one carries the last
   * `event_id` of the previous page (the server skips that event). Stops after an empty
   * page or one shorter than `pageSize`. Throws if the server hands back a full page that
   * ends on the cursor it was given (it would loop forever).
   */
  transactions(q: TransactionsQuery, opts?: CallOptions): AsyncIterable<TransactionHistoryItem> {
    checkPageSize(q.pageSize);
    checkSortOrder(q.sortOrder);
    return this.iterate(q.pageSize, q.sortOrder, q.after, opts);
  }

  private async *iterate(
    pageSize: number,
    sortOrder: SortOrder,
    after: string | undefined,
    opts: CallOptions | undefined,
  ): AsyncGenerator<TransactionHistoryItem, void, undefined> {
    let cursor = after;
    for (;;) {
      const page = await this.transactionsPage({ pageSize, sortOrder, pageEndEventId: cursor }, opts);
      const items = page.transactions;
      yield* items;
      if (items.length < pageSize) return;
      const last = items[items.length - 1]!.event_id;
      if (last === cursor) {
        throw new Error(`scan /v0/transactions: a full page ended on its own cursor ${last}; not advancing`);
      }
      cursor = last;
    }
  }

  /** `GET /v0/ans-entries?name_prefix=&page_size=`: non-expired entries, oldest first. */
  async listAnsEntries(q: ListAnsEntriesQuery, opts?: CallOptions): Promise<ListAnsEntriesResponse> {
    checkPageSize(q.pageSize);
    return this.http.request({
      method: 'GET',
      path: '/v0/ans-entries',
      query: { name_prefix: q.namePrefix, page_size: q.pageSize },
      response: ListAnsEntriesResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/ans-entries/by-name/{name}`; 404 (`CantonApiError`) when there is none. */
  async lookupAnsEntryByName(name: string, opts?: CallOptions): Promise<LookupAnsEntryResponse> {
    return this.http.request({
      method: 'GET',
      path: encodePath`/v0/ans-entries/by-name/${nonEmpty(name, 'name')}`,
      response: LookupAnsEntryResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/ans-entries/by-party/{party}`: the party's first entry by name; 404 when none. */
  async lookupAnsEntryByParty(party: string, opts?: CallOptions): Promise<LookupAnsEntryResponse> {
    return this.http.request({
      method: 'GET',
      path: encodePath`/v0/ans-entries/by-party/${nonEmpty(party, 'party')}`,
      response: LookupAnsEntryResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `POST /v0/ans-rules` (the spec requires a body; `{}` asks for the current contract). Read-only → idempotent. */
  async getAnsRules(req: GetAnsRulesRequest = {}, opts?: CallOptions): Promise<GetAnsRulesResponse> {
    return this.http.request({
      method: 'POST',
      path: '/v0/ans-rules',
      body: req,
      response: GetAnsRulesResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `POST /v0/amulet-rules` with no cached contract: the current AmuletRules. Read-only → idempotent. */
  async getAmuletRules(opts?: CallOptions): Promise<GetAmuletRulesResponse> {
    return this.http.request({
      method: 'POST',
      path: '/v0/amulet-rules',
      body: {},
      response: GetAmuletRulesResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `POST /v0/holdings/summary` (`getHoldingsSummaryAt`). Read-only → idempotent. */
  async getHoldingsSummary(
    req: HoldingsSummaryRequest,
    opts?: CallOptions,
  ): Promise<HoldingsSummaryResponse> {
    if (req.owner_party_ids.length === 0) {
      throw new TypeError('getHoldingsSummary: owner_party_ids must not be empty');
    }
    return this.http.request({
      method: 'POST',
      path: '/v0/holdings/summary',
      body: req,
      response: HoldingsSummaryResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `POST /v0/open-and-issuing-mining-rounds` (`getOpenAndIssuingMiningRounds`). With no
   * cached ids (the default) every round comes with its contract. Read-only → idempotent.
   */
  async getOpenAndIssuingMiningRounds(
    req: GetOpenAndIssuingMiningRoundsRequest = {
      cached_open_mining_round_contract_ids: [],
      cached_issuing_round_contract_ids: [],
    },
    opts?: CallOptions,
  ): Promise<GetOpenAndIssuingMiningRoundsResponse> {
    const body: GetOpenAndIssuingMiningRoundsRequest = {
      cached_open_mining_round_contract_ids: [...req.cached_open_mining_round_contract_ids],
      cached_issuing_round_contract_ids: [...req.cached_issuing_round_contract_ids],
    };
    return this.http.request({
      method: 'POST',
      path: '/v0/open-and-issuing-mining-rounds',
      body,
      response: GetOpenAndIssuingMiningRoundsResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/dso-party-id`: the DSO party (admin of the Amulet instrument). */
  async getDsoPartyId(opts?: CallOptions): Promise<GetDsoPartyIdResponse> {
    return this.http.request({
      method: 'GET',
      path: '/v0/dso-party-id',
      response: GetDsoPartyIdResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }
}

export function checkPageSize(n: number): void {
  if (!Number.isSafeInteger(n) || n < 1) throw new TypeError('pageSize must be a positive integer');
}

function checkSortOrder(s: string): void {
  if (s !== 'asc' && s !== 'desc') throw new TypeError("sortOrder must be 'asc' or 'desc'");
}

export function nonEmpty(s: string, what: string): string {
  if (typeof s !== 'string' || s.length === 0) throw new TypeError(`${what} must be a non-empty string`);
  return s;
}

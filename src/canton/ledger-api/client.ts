/**
 * Client of a participant's JSON Ledger API v2: external-party onboarding, interactive
 * submission (prepare / execute), and the reads a custody service needs around them.
 *
 * Transport, retries, re-authentication and error classification are those of
 * {@link HttpClient}; this module adds the endpoint table, request validation (not for a body from one of the
 * project's tested request builders, `fromBuilder`) and the per-endpoint retry decision.
 *
 * Retry (idempotency) decisions, see {@link LEDGER_API_ENDPOINTS}:
 * - Reads (GET, and the POST queries active-contracts, update-by-offset, updates, completions) are
 *   retried on transient failures.
 * - `prepare` and `generate-topology` are retried: they compute something (a prepared
 *   transaction, topology transactions) without changing ledger or topology state. A
 *   repeated prepare yields a different prepared transaction; only the one returned is used.
 * - Granting and revoking user rights are retried: both are set operations, a repeat is a
 *   no-op (its response then lists fewer "newly" granted/revoked rights).
 * - `execute*`, `allocate` and the `submit-and-wait-*` commands are never retried here: a
 *   lost response leaves the outcome unknown (`CantonApiError.ambiguous`); the caller
 *   decides after checking completions / the party, keeping the same commandId so the
 *   ledger's deduplication protects a resubmission.
 *
 * One file on purpose: it is the endpoint table (with each endpoint's retry
 * decision) and one method per endpoint.
 */
import type { z } from 'zod';
import type { AuthProvider } from '../auth.js';
import { CantonApiError } from '../errors.js';
import { DEFAULT_TIMEOUT_MS, encodePath, HttpClient, type HttpLogger, type RetryOptions } from '../http.js';
import {
  type AllocateExternalPartyRequest,
  AllocateExternalPartyRequestSchema,
  type AllocateExternalPartyResponse,
  AllocateExternalPartyResponseSchema,
  type CompletionStreamRequest,
  CompletionStreamRequestSchema,
  type CompletionStreamResponse,
  CompletionStreamResponseSchema,
  type ConnectedSynchronizersParams,
  ConnectedSynchronizersParamsSchema,
  type ExecuteSubmissionAndWaitResponse,
  ExecuteSubmissionAndWaitResponseSchema,
  type ExecuteSubmissionResponse,
  ExecuteSubmissionResponseSchema,
  type GenerateExternalPartyTopologyRequest,
  GenerateExternalPartyTopologyRequestSchema,
  type GenerateExternalPartyTopologyResponse,
  GenerateExternalPartyTopologyResponseSchema,
  type GetActiveContractsRequest,
  GetActiveContractsRequestSchema,
  type GetConnectedSynchronizersResponse,
  GetConnectedSynchronizersResponseSchema,
  type GetLedgerEndResponse,
  GetLedgerEndResponseSchema,
  type GetParticipantIdResponse,
  GetParticipantIdResponseSchema,
  type GetUpdateByOffsetRequest,
  GetUpdateByOffsetRequestSchema,
  type GetUpdatesRequest,
  GetUpdatesRequestSchema,
  type GetUserResponse,
  GetUserResponseSchema,
  GrantUserRightsRequestSchema,
  type GrantUserRightsResponse,
  GrantUserRightsResponseSchema,
  type JsActiveContractViewsResponse,
  JsActiveContractViewsResponseSchema,
  type JsCommands,
  JsCommandsSchema,
  type JsExecuteSubmissionAndWaitForTransactionRequest,
  JsExecuteSubmissionAndWaitForTransactionRequestSchema,
  type JsExecuteSubmissionAndWaitForTransactionResponse,
  JsExecuteSubmissionAndWaitForTransactionResponseSchema,
  type JsExecuteSubmissionAndWaitRequest,
  JsExecuteSubmissionAndWaitRequestSchema,
  type JsExecuteSubmissionRequest,
  JsExecuteSubmissionRequestSchema,
  type JsGetActiveContractsResponse,
  JsGetActiveContractsResponseSchema,
  type JsGetUpdateResponse,
  JsGetUpdateResponseSchema,
  type JsGetUpdatesResponse,
  JsGetUpdatesResponseSchema,
  type JsPrepareSubmissionRequest,
  JsPrepareSubmissionRequestSchema,
  type JsPrepareSubmissionResponse,
  JsPrepareSubmissionResponseSchema,
  type JsSubmitAndWaitForReassignmentResponse,
  JsSubmitAndWaitForReassignmentResponseSchema,
  type JsSubmitAndWaitForTransactionTreeResponse,
  JsSubmitAndWaitForTransactionTreeResponseSchema,
  type ListUserRightsResponse,
  ListUserRightsResponseSchema,
  RevokeUserRightsRequestSchema,
  type RevokeUserRightsResponse,
  RevokeUserRightsResponseSchema,
  type RightRequest,
  type SubmitAndWaitForReassignmentRequest,
  SubmitAndWaitForReassignmentRequestSchema,
  type Update,
} from './schemas.js';
import { type UpdatesStreamOptions, updatesStream } from './stream.js';

/** Verb as in the spec. `PATCH` is used by RevokeUserRights only. */
export type LedgerApiMethod = 'GET' | 'POST' | 'PATCH';

export interface LedgerApiEndpoint {
  readonly method: LedgerApiMethod;
  /** Path template exactly as in the OpenAPI document (`{user-id}` placeholders). */
  readonly path: string;
  /** Safe to repeat: only these are retried. */
  readonly idempotent: boolean;
}

/** Every endpoint this client calls, keyed by client method name. */
export const LEDGER_API_ENDPOINTS = {
  prepare: { method: 'POST', path: '/v2/interactive-submission/prepare', idempotent: true },
  execute: { method: 'POST', path: '/v2/interactive-submission/execute', idempotent: false },
  executeAndWait: { method: 'POST', path: '/v2/interactive-submission/executeAndWait', idempotent: false },
  executeAndWaitForTransaction: {
    method: 'POST',
    path: '/v2/interactive-submission/executeAndWaitForTransaction',
    idempotent: false,
  },
  generateExternalPartyTopology: {
    method: 'POST',
    path: '/v2/parties/external/generate-topology',
    idempotent: true,
  },
  allocateExternalParty: { method: 'POST', path: '/v2/parties/external/allocate', idempotent: false },
  submitAndWaitForTransactionTree: {
    method: 'POST',
    path: '/v2/commands/submit-and-wait-for-transaction-tree',
    idempotent: false,
  },
  submitAndWaitForReassignment: {
    method: 'POST',
    path: '/v2/commands/submit-and-wait-for-reassignment',
    idempotent: false,
  },
  updateByOffset: { method: 'POST', path: '/v2/updates/update-by-offset', idempotent: true },
  updates: { method: 'POST', path: '/v2/updates', idempotent: true },
  ledgerEnd: { method: 'GET', path: '/v2/state/ledger-end', idempotent: true },
  activeContracts: { method: 'POST', path: '/v2/state/active-contracts', idempotent: true },
  connectedSynchronizers: { method: 'GET', path: '/v2/state/connected-synchronizers', idempotent: true },
  participantId: { method: 'GET', path: '/v2/parties/participant-id', idempotent: true },
  authenticatedUser: { method: 'GET', path: '/v2/authenticated-user', idempotent: true },
  listUserRights: { method: 'GET', path: '/v2/users/{user-id}/rights', idempotent: true },
  grantUserRights: { method: 'POST', path: '/v2/users/{user-id}/rights', idempotent: true },
  revokeUserRights: { method: 'PATCH', path: '/v2/users/{user-id}/rights', idempotent: true },
  completions: { method: 'POST', path: '/v2/commands/completions', idempotent: true },
} as const satisfies Record<string, LedgerApiEndpoint>;

export type LedgerApiOperation = keyof typeof LEDGER_API_ENDPOINTS;

/**
 * Client methods that are readers built on an endpoint above rather than one call each:
 * `updatesPaged` pages the HTTP `updates` list, `updatesStream` is the WebSocket form of
 * `/v2/updates`, `activeContractViews` is the active-contracts list validated for what an
 * interface-view reader uses.
 */
export const LEDGER_API_READERS = {
  updatesPaged: { over: 'updates' },
  updatesStream: { over: 'updates', websocket: true },
  activeContractViews: { over: 'activeContracts' },
} as const;

// The list responses' schemas, made once: a schema built per call costs its construction and
// its first-parse set-up every time.
const UPDATES_LIST = JsGetUpdatesResponseSchema.array();
const ACTIVE_CONTRACTS_LIST = JsGetActiveContractsResponseSchema.array();
const ACTIVE_CONTRACT_VIEWS_LIST = JsActiveContractViewsResponseSchema.array();
const COMPLETIONS_LIST = CompletionStreamResponseSchema.array();

/** Options of {@link LedgerApiClient.updatesPaged}. */
export interface UpdatesPagedOptions extends CallOptions {
  /** Items per HTTP call (the server caps it at its `http-list-max-elements-limit`). Default 200. */
  limit?: number;
  signal?: AbortSignal;
}

export interface LedgerApiClientOptions {
  /** Root of the participant's JSON API, e.g. `http://participant:7575` (paths start at `/v2`). */
  baseUrl: string;
  auth?: AuthProvider;
  /** Per attempt. Default 30 s. */
  timeoutMs?: number;
  retry?: Partial<RetryOptions>;
  fetch?: typeof fetch;
  logger?: HttpLogger;
}

export interface CallOptions {
  /** Per-attempt timeout of this call, overriding the client's. */
  timeoutMs?: number;
  /**
   * The body comes from one of the project's typed request builders, whose output the tests run
   * through this endpoint's schema: it is sent as built, not validated again here (validation is
   * for bodies from elsewhere). The response is validated either way.
   */
  fromBuilder?: boolean;
}

/** Query parameters of the list endpoints (active-contracts, completions). */
export interface StreamListOptions extends CallOptions {
  /** At most this many items (the server caps it at its `http-list-max-elements-limit`). */
  limit?: number;
  /**
   * Return once no new item arrived for this long (open-ended streams such as completions).
   * Unless `timeoutMs` is given, the call's timeout is raised to this plus 5 s.
   */
  streamIdleTimeoutMs?: number;
}

/** Thrown before anything is sent when a request does not match its schema. */
export class LedgerApiRequestError extends TypeError {
  override readonly name = 'LedgerApiRequestError';
  /** Dotted path of the first offending field (`(root)` for the whole request). */
  readonly field: string;
  constructor(operation: LedgerApiOperation, field: string, message: string) {
    super(`ledger-api ${operation}: invalid request at ${field}: ${message}`);
    this.field = field;
  }
}

export class LedgerApiClient {
  private readonly http: HttpClient;
  private readonly timeoutMs: number;
  private readonly baseUrl: string;
  private readonly auth: AuthProvider | undefined;

  constructor(opts: LedgerApiClientOptions) {
    this.http = new HttpClient({
      baseUrl: opts.baseUrl,
      service: 'ledger-api',
      ...(opts.auth !== undefined ? { auth: opts.auth } : {}),
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(opts.retry !== undefined ? { retry: opts.retry } : {}),
      ...(opts.fetch !== undefined ? { fetch: opts.fetch } : {}),
      ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
    });
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.baseUrl = opts.baseUrl;
    this.auth = opts.auth;
  }

  // -- interactive submission -----------------------------------------------------------------

  /** Prepare a transaction for external signing. No ledger effect; retried on transient failures. */
  async prepare(req: JsPrepareSubmissionRequest, opts?: CallOptions): Promise<JsPrepareSubmissionResponse> {
    return this.call('prepare', {
      body: check('prepare', JsPrepareSubmissionRequestSchema, req, opts),
      response: JsPrepareSubmissionResponseSchema,
      opts,
    });
  }

  /** Submit a signed prepared transaction; returns at once (`{}`). Track it with {@link completions}. */
  async execute(req: JsExecuteSubmissionRequest, opts?: CallOptions): Promise<ExecuteSubmissionResponse> {
    return this.call('execute', {
      body: check('execute', JsExecuteSubmissionRequestSchema, req, opts),
      response: ExecuteSubmissionResponseSchema,
      opts,
    });
  }

  /** Submit a signed prepared transaction and wait until it is committed or rejected. */
  async executeAndWait(
    req: JsExecuteSubmissionAndWaitRequest,
    opts?: CallOptions,
  ): Promise<ExecuteSubmissionAndWaitResponse> {
    return this.call('executeAndWait', {
      body: check('executeAndWait', JsExecuteSubmissionAndWaitRequestSchema, req, opts),
      response: ExecuteSubmissionAndWaitResponseSchema,
      opts,
    });
  }

  /** As {@link executeAndWait}, returning the committed transaction. */
  async executeAndWaitForTransaction(
    req: JsExecuteSubmissionAndWaitForTransactionRequest,
    opts?: CallOptions,
  ): Promise<JsExecuteSubmissionAndWaitForTransactionResponse> {
    return this.call('executeAndWaitForTransaction', {
      body: check(
        'executeAndWaitForTransaction',
        JsExecuteSubmissionAndWaitForTransactionRequestSchema,
        req,
        opts,
      ),
      response: JsExecuteSubmissionAndWaitForTransactionResponseSchema,
      opts,
    });
  }

  // -- external parties -----------------------------------------------------------------------

  /** Have the participant build the onboarding topology transactions for a public key. */
  async generateExternalPartyTopology(
    req: GenerateExternalPartyTopologyRequest,
    opts?: CallOptions,
  ): Promise<GenerateExternalPartyTopologyResponse> {
    return this.call('generateExternalPartyTopology', {
      body: check('generateExternalPartyTopology', GenerateExternalPartyTopologyRequestSchema, req, opts),
      response: GenerateExternalPartyTopologyResponseSchema,
      opts,
    });
  }

  /** Allocate an external party from signed onboarding transactions. Not retried. */
  async allocateExternalParty(
    req: AllocateExternalPartyRequest,
    opts?: CallOptions,
  ): Promise<AllocateExternalPartyResponse> {
    return this.call('allocateExternalParty', {
      body: check('allocateExternalParty', AllocateExternalPartyRequestSchema, req, opts),
      response: AllocateExternalPartyResponseSchema,
      opts,
    });
  }

  // -- classic command submission -------------------------------------------------------------

  /**
   * Submit commands for a party this participant acts for and wait for the transaction tree.
   * Deprecated upstream (to be replaced by submit-and-wait-for-transaction), still in 3.5.1.
   */
  async submitAndWaitForTransactionTree(
    req: JsCommands,
    opts?: CallOptions,
  ): Promise<JsSubmitAndWaitForTransactionTreeResponse> {
    return this.call('submitAndWaitForTransactionTree', {
      body: check('submitAndWaitForTransactionTree', JsCommandsSchema, req, opts),
      response: JsSubmitAndWaitForTransactionTreeResponseSchema,
      opts,
    });
  }

  /** Submit an assign/unassign command and wait for the reassignment. */
  async submitAndWaitForReassignment(
    req: SubmitAndWaitForReassignmentRequest,
    opts?: CallOptions,
  ): Promise<JsSubmitAndWaitForReassignmentResponse> {
    return this.call('submitAndWaitForReassignment', {
      body: check('submitAndWaitForReassignment', SubmitAndWaitForReassignmentRequestSchema, req, opts),
      response: JsSubmitAndWaitForReassignmentResponseSchema,
      opts,
    });
  }

  // -- reads ----------------------------------------------------------------------------------

  /** The update (transaction, reassignment, topology transaction) at an offset. */
  async updateByOffset(req: GetUpdateByOffsetRequest, opts?: CallOptions): Promise<JsGetUpdateResponse> {
    return this.call('updateByOffset', {
      body: check('updateByOffset', GetUpdateByOffsetRequestSchema, req, opts),
      response: JsGetUpdateResponseSchema,
      opts,
    });
  }

  /**
   * Updates after `beginExclusive` (up to `endInclusive`), as a list. Without an end the stream
   * is open-ended: set `streamIdleTimeoutMs` (and/or `limit`) to bound the wait.
   */
  async updates(req: GetUpdatesRequest, opts?: StreamListOptions): Promise<JsGetUpdatesResponse[]> {
    return this.call('updates', {
      body: check('updates', GetUpdatesRequestSchema, req, opts),
      query: streamListQuery(opts),
      response: UPDATES_LIST,
      opts: streamListCall(opts, this.timeoutMs),
    });
  }

  /**
   * Updates after `beginExclusive` up to `endInclusive` — or, without one, up to the ledger end as
   * of the call — read page by page over the HTTP list (`limit` items a call, each call starting
   * after the last offset seen), as an async iterable. Ends once the end offset is reached; a
   * reader that wants to follow the ledger calls it again from its last offset, or uses
   * {@link updatesStream}.
   */
  async *updatesPaged(
    req: GetUpdatesRequest,
    opts: UpdatesPagedOptions = {},
  ): AsyncGenerator<Update, void, undefined> {
    const body = check('updates', GetUpdatesRequestSchema, req, opts);
    const limit = nonNegativeInteger('limit', opts.limit) ?? 200;
    if (limit === 0) throw new TypeError('ledger-api updatesPaged: limit must be at least 1');
    const call = opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {};
    const ledgerEnd = (await this.ledgerEnd(call)).offset;
    const end = body.endInclusive === undefined ? ledgerEnd : Math.min(body.endInclusive, ledgerEnd);
    let after = body.beginExclusive;
    while (after < end && !opts.signal?.aborted) {
      const page = await this.updates(
        { ...body, beginExclusive: after, endInclusive: end },
        { ...call, limit },
      );
      let last = after;
      for (const item of page) {
        if (!item.update) continue;
        const at = updateOffset(item.update);
        if (at <= after) continue; // never hand out an offset twice
        last = Math.max(last, at);
        yield item.update;
        if (opts.signal?.aborted) return;
      }
      // An empty page before the end: the server has nothing more in range (and no checkpoint).
      if (last === after) return;
      after = last;
    }
  }

  /**
   * The update stream over WebSocket (`/v2/updates`): everything after `beginExclusive`, then
   * live, until `endInclusive` (a normal close) or `opts.signal` aborts. Items are
   * Transaction | Reassignment | TopologyTransaction | OffsetCheckpoint. The token goes as the
   * `jwt.token.<token>` subprotocol; a 401 on the upgrade re-authenticates once. Failures are
   * CantonApiError (a JsCantonError the server sends keeps its code); an invalid request is
   * refused before connecting (LedgerApiRequestError).
   */
  updatesStream(
    req: GetUpdatesRequest,
    opts: UpdatesStreamOptions = {},
  ): AsyncGenerator<Update, void, undefined> {
    const body = check('updates', GetUpdatesRequestSchema, req);
    return updatesStream({ baseUrl: this.baseUrl, auth: this.auth, timeoutMs: this.timeoutMs }, body, opts);
  }

  /** Current ledger end (`offset` 0 = empty ledger). */
  async ledgerEnd(opts?: CallOptions): Promise<GetLedgerEndResponse> {
    return this.call('ledgerEnd', { response: GetLedgerEndResponseSchema, opts });
  }

  /** Active contracts at an offset, as a list (for small result sets; the server caps the count). */
  async activeContracts(
    req: GetActiveContractsRequest,
    opts?: StreamListOptions,
  ): Promise<JsGetActiveContractsResponse[]> {
    return this.call('activeContracts', {
      body: check('activeContracts', GetActiveContractsRequestSchema, req, opts),
      query: streamListQuery(opts),
      response: ACTIVE_CONTRACTS_LIST,
      opts: streamListCall(opts, this.timeoutMs),
    });
  }

  /**
   * As {@link activeContracts}, each created event validated and kept only for what an
   * interface-view reader uses (id, template, creation time, interface views:
   * `CreatedEventViewsSchema`): the holdings and offers reads.
   */
  async activeContractViews(
    req: GetActiveContractsRequest,
    opts?: StreamListOptions,
  ): Promise<JsActiveContractViewsResponse[]> {
    return this.call('activeContracts', {
      body: check('activeContracts', GetActiveContractsRequestSchema, req, opts),
      query: streamListQuery(opts),
      response: ACTIVE_CONTRACT_VIEWS_LIST,
      opts: streamListCall(opts, this.timeoutMs),
    });
  }

  /** Synchronizers this participant is connected to (optionally: those hosting `party`). */
  async connectedSynchronizers(
    params: ConnectedSynchronizersParams = {},
    opts?: CallOptions,
  ): Promise<GetConnectedSynchronizersResponse> {
    const q = check('connectedSynchronizers', ConnectedSynchronizersParamsSchema, params);
    return this.call('connectedSynchronizers', {
      query: { party: q.party, participantId: q.participantId, identityProviderId: q.identityProviderId },
      response: GetConnectedSynchronizersResponseSchema,
      opts,
    });
  }

  /** This participant's id (for `otherConfirmingParticipantUids` of other nodes). */
  async participantId(opts?: CallOptions): Promise<GetParticipantIdResponse> {
    return this.call('participantId', { response: GetParticipantIdResponseSchema, opts });
  }

  /**
   * Completions of the given parties' submissions after `beginExclusive`, as a list. The
   * stream is open-ended: set `streamIdleTimeoutMs` (and/or `limit`) to bound the wait.
   */
  async completions(
    req: CompletionStreamRequest,
    opts?: StreamListOptions,
  ): Promise<CompletionStreamResponse[]> {
    return this.call('completions', {
      body: check('completions', CompletionStreamRequestSchema, req, opts),
      query: streamListQuery(opts),
      response: COMPLETIONS_LIST,
      opts: streamListCall(opts, this.timeoutMs),
    });
  }

  // -- user rights ----------------------------------------------------------------------------

  /** The user the configured token acts as (its id is the `userId` to use and to grant rights to). */
  async authenticatedUser(opts?: CallOptions): Promise<GetUserResponse> {
    return this.call('authenticatedUser', { response: GetUserResponseSchema, opts });
  }

  async listUserRights(userId: string, opts?: CallOptions): Promise<ListUserRightsResponse> {
    return this.call('listUserRights', {
      path: userRightsPath('listUserRights', userId),
      response: ListUserRightsResponseSchema,
      opts,
    });
  }

  /** Grant rights (e.g. CanActAs / CanExecuteAs the new party). Idempotent: retried. */
  async grantUserRights(
    userId: string,
    rights: RightRequest[],
    opts?: CallOptions & { identityProviderId?: string },
  ): Promise<GrantUserRightsResponse> {
    const body = check('grantUserRights', GrantUserRightsRequestSchema, {
      userId,
      rights,
      ...(opts?.identityProviderId !== undefined ? { identityProviderId: opts.identityProviderId } : {}),
    });
    return this.call('grantUserRights', {
      path: userRightsPath('grantUserRights', userId),
      body,
      response: GrantUserRightsResponseSchema,
      opts,
    });
  }

  /** Revoke rights. Idempotent: retried. */
  async revokeUserRights(
    userId: string,
    rights: RightRequest[],
    opts?: CallOptions & { identityProviderId?: string },
  ): Promise<RevokeUserRightsResponse> {
    const body = check('revokeUserRights', RevokeUserRightsRequestSchema, {
      userId,
      rights,
      ...(opts?.identityProviderId !== undefined ? { identityProviderId: opts.identityProviderId } : {}),
    });
    return this.call('revokeUserRights', {
      path: userRightsPath('revokeUserRights', userId),
      body,
      response: RevokeUserRightsResponseSchema,
      opts,
    });
  }

  // -- plumbing -------------------------------------------------------------------------------

  private async call<T>(
    operation: LedgerApiOperation,
    r: {
      path?: string;
      body?: unknown;
      query?: Record<string, string | number | undefined>;
      response: z.ZodType<T>;
      opts: CallOptions | undefined;
    },
  ): Promise<T> {
    const ep: LedgerApiEndpoint = LEDGER_API_ENDPOINTS[operation];
    try {
      return await this.http.request({
        method: ep.method,
        path: r.path ?? ep.path,
        ...(r.query !== undefined ? { query: r.query } : {}),
        ...(r.body !== undefined ? { body: r.body } : {}),
        response: r.response,
        idempotent: ep.idempotent,
        ...(r.opts?.timeoutMs !== undefined ? { timeoutMs: r.opts.timeoutMs } : {}),
      });
    } catch (e) {
      throw ep.idempotent ? e : acceptedButUnreadable(e);
    }
  }
}

/**
 * A 2xx answer to a non-idempotent call whose body does not parse: the server did act on
 * the request, so the failure must not read as "nothing happened". Marked ambiguous.
 */
function acceptedButUnreadable(e: unknown): unknown {
  if (!(e instanceof CantonApiError) || e.code !== 'INVALID_RESPONSE' || e.status < 200 || e.status > 299) {
    return e;
  }
  const err = new CantonApiError({
    status: e.status,
    service: e.service,
    method: e.method,
    path: e.path,
    code: e.code,
    retryable: false,
    ambiguous: true,
    note: 'the server accepted the request but its response could not be read; check the outcome before resubmitting',
  });
  err.cause = e;
  return err;
}

/**
 * Validate a request before sending it; nothing is sent when it fails. A body from a request
 * builder (`fromBuilder`) is sent as built: request schemas transform nothing, so what they would
 * return is the body itself.
 */
function check<S extends z.ZodType>(
  operation: LedgerApiOperation,
  schema: S,
  value: z.input<S>,
  opts?: CallOptions,
): z.output<S> {
  if (opts?.fromBuilder === true) return value as z.output<S>;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
  throw new LedgerApiRequestError(operation, field, issue?.message ?? 'invalid');
}

/** The offset of an update item, whatever its kind. */
export function updateOffset(u: Update): number {
  if ('Transaction' in u && u.Transaction) return u.Transaction.value.offset;
  if ('Reassignment' in u && u.Reassignment) return u.Reassignment.value.offset;
  if ('TopologyTransaction' in u && u.TopologyTransaction) return u.TopologyTransaction.value.offset;
  return (u as { OffsetCheckpoint: { value: { offset: number } } }).OffsetCheckpoint.value.offset;
}

function userRightsPath(operation: LedgerApiOperation, userId: string): string {
  if (typeof userId !== 'string' || userId.length === 0) {
    throw new LedgerApiRequestError(operation, 'userId', 'must be a non-empty string');
  }
  return encodePath`/v2/users/${userId}/rights`;
}

function nonNegativeInteger(name: string, v: number | undefined): number | undefined {
  if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) {
    throw new TypeError(`ledger-api: ${name} must be a non-negative integer`);
  }
  return v;
}

function streamListQuery(opts: StreamListOptions | undefined): Record<string, number | undefined> {
  return {
    limit: nonNegativeInteger('limit', opts?.limit),
    stream_idle_timeout_ms: nonNegativeInteger('streamIdleTimeoutMs', opts?.streamIdleTimeoutMs),
  };
}

/** The server may hold a list call open for the idle timeout: the HTTP timeout must outlast it. */
function streamListCall(opts: StreamListOptions | undefined, clientTimeoutMs: number): CallOptions {
  if (opts?.timeoutMs !== undefined) return { timeoutMs: opts.timeoutMs };
  if (opts?.streamIdleTimeoutMs !== undefined) {
    return { timeoutMs: Math.max(clientTimeoutMs, opts.streamIdleTimeoutMs + 5000) };
  }
  return {};
}

/**
 * Client of a Splice validator app (`/api/validator`): the external-party endpoints
 * (`/v0/admin/external-party/*`), transfer-preapproval and user administration
 * (`/v0/admin/*`), and the BFT scan proxy (`/v0/scan-proxy/*`), per
 * `validator-internal.yaml` and `scan-proxy.yaml` of Splice 0.6.1 (canton-apis §2, §6).
 *
 * Bodies and results are the spec's wire shapes (snake_case), except the legacy
 * `prepare-send` amount (see {@link ValidatorClient.prepareTransferPreapprovalSend}).
 *
 * Idempotency (only idempotent calls are retried, on 408/429/502/503/504, timeouts and
 * network errors; see `../http.ts`):
 * - GETs: yes.
 * - `topology/generate`, `setup-proposal/prepare-accept`, `transfer-preapproval/prepare-send`:
 *   yes. They only compute transactions (nothing is written to the ledger or topology
 *   state), so repeating one is harmless; a retry may return a different transaction,
 *   which is fine because only the answer actually used is signed.
 * - `topology/submit`, `setup-proposal` (create), `setup-proposal/submit-accept`,
 *   `transfer-preapproval/submit-send`, `POST /v0/admin/users`: no. They write; after an
 *   ambiguous failure (`CantonApiError.ambiguous`) check the ledger before trying again.
 * - `DELETE /v0/admin/transfer-preapprovals/by-party/{party}`: yes (removing twice leaves
 *   the same state); a retry after a lost success answers 404.
 */

import { z } from 'zod';
import { isPaddedBase64 } from '../../hashing/input.js';
import type { AuthProvider } from '../auth.js';
import { encodePath, HttpClient, type HttpClientOptions, joinUrl } from '../http.js';
import { type CallOptions, checkPageSize, nonEmpty } from '../scan/client.js';
import { RegistryClient } from './registry.js';
import {
  type ContractsResponse,
  ContractsResponseSchema,
  type CreateExternalPartySetupProposalRequest,
  type CreateExternalPartySetupProposalResponse,
  CreateExternalPartySetupProposalResponseSchema,
  type ExternalPartyBalanceResponse,
  ExternalPartyBalanceResponseSchema,
  type ExternalPartySubmission,
  type GenerateExternalPartyTopologyRequest,
  type GenerateExternalPartyTopologyResponse,
  GenerateExternalPartyTopologyResponseSchema,
  type GetDsoPartyIdResponse,
  GetDsoPartyIdResponseSchema,
  type GetOpenAndIssuingMiningRoundsProxyResponse,
  GetOpenAndIssuingMiningRoundsProxyResponseSchema,
  type HoldingsSummaryRequest,
  type HoldingsSummaryResponse,
  HoldingsSummaryResponseSchema,
  type ListAnsEntriesQuery,
  type ListAnsEntriesResponse,
  ListAnsEntriesResponseSchema,
  type ListUsersResponse,
  ListUsersResponseSchema,
  type LookupAnsEntryResponse,
  LookupAnsEntryResponseSchema,
  type LookupTransferCommandCounterByPartyResponse,
  LookupTransferCommandCounterByPartyResponseSchema,
  type LookupTransferCommandStatusResponse,
  LookupTransferCommandStatusResponseSchema,
  type LookupTransferPreapprovalByPartyResponse,
  LookupTransferPreapprovalByPartyResponseSchema,
  type OnboardUserRequest,
  type OnboardUserResponse,
  OnboardUserResponseSchema,
  type PrepareAcceptExternalPartySetupProposalRequest,
  type PrepareAcceptExternalPartySetupProposalResponse,
  PrepareAcceptExternalPartySetupProposalResponseSchema,
  type PrepareTransferPreapprovalSendInput,
  type PrepareTransferPreapprovalSendRequest,
  type PrepareTransferPreapprovalSendResponse,
  PrepareTransferPreapprovalSendResponseSchema,
  type SubmitAcceptExternalPartySetupProposalRequest,
  type SubmitAcceptExternalPartySetupProposalResponse,
  SubmitAcceptExternalPartySetupProposalResponseSchema,
  type SubmitExternalPartyTopologyRequest,
  type SubmitExternalPartyTopologyResponse,
  SubmitExternalPartyTopologyResponseSchema,
  type SubmitTransferPreapprovalSendRequest,
  type SubmitTransferPreapprovalSendResponse,
  SubmitTransferPreapprovalSendResponseSchema,
} from './schemas.js';

export interface ValidatorClientOptions extends Omit<HttpClientOptions, 'service'> {
  /** Validator API root, e.g. `https://validator.example.com/api/validator`. */
  baseUrl: string;
  /**
   * For `/v0/admin/*` (spec security `adminAuth`): a JWT whose subject is the validator
   * operator's ledger-API user.
   */
  auth?: AuthProvider;
  /**
   * For `/v0/scan-proxy/*` and the registry reached through it (the spec declares no
   * security scheme there). Default: `auth`.
   */
  scanProxyAuth?: AuthProvider;
}

const SCAN_PROXY = '/v0/scan-proxy';

export class ValidatorClient {
  private readonly admin: HttpClient;
  private readonly proxy: HttpClient;
  private readonly opts: ValidatorClientOptions;

  constructor(opts: ValidatorClientOptions) {
    this.opts = opts;
    const { scanProxyAuth, ...common } = opts;
    this.admin = new HttpClient({ ...common, service: 'validator' });
    this.proxy = new HttpClient({ ...common, auth: scanProxyAuth ?? opts.auth, service: 'validator' });
  }

  /**
   * The token-standard registry as the validator proxies it for Canton Coin
   * (`<baseUrl>/v0/scan-proxy/registry/...`), with the scan-proxy credentials and the
   * same timeout/retry/fetch/logger. Its errors carry service `registry`.
   */
  registry(): RegistryClient {
    const { scanProxyAuth, auth, ...common } = this.opts;
    return new RegistryClient({
      ...common,
      baseUrl: joinUrl(this.opts.baseUrl, SCAN_PROXY),
      auth: scanProxyAuth ?? auth,
    });
  }

  // ----------------------------------------------------------------------------------------
  // External party (`/v0/admin/external-party/*`)

  /** `POST /v0/admin/external-party/topology/generate`. No side effect → idempotent. */
  async generateTopology(
    req: GenerateExternalPartyTopologyRequest,
    opts?: CallOptions,
  ): Promise<GenerateExternalPartyTopologyResponse> {
    nonEmpty(req.party_hint, 'party_hint');
    if (req.party_hint.includes('::')) throw new TypeError('party_hint must not contain "::"');
    checkPublicKey(req.public_key);
    return this.admin.request({
      method: 'POST',
      path: '/v0/admin/external-party/topology/generate',
      body: { party_hint: req.party_hint, public_key: req.public_key },
      response: GenerateExternalPartyTopologyResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `POST /v0/admin/external-party/topology/submit`. Writes topology and grants the
   * validator's user actAs; blocks until the party is visible. Not idempotent.
   */
  async submitTopology(
    req: SubmitExternalPartyTopologyRequest,
    opts?: CallOptions,
  ): Promise<SubmitExternalPartyTopologyResponse> {
    checkPublicKey(req.public_key);
    if (req.signed_topology_txs.length === 0) throw new TypeError('signed_topology_txs must not be empty');
    for (const t of req.signed_topology_txs) {
      checkBase64(t.topology_tx, 'topology_tx');
      checkSignature(t.signed_hash, 'signed_hash');
    }
    return this.admin.request({
      method: 'POST',
      path: '/v0/admin/external-party/topology/submit',
      body: {
        public_key: req.public_key,
        signed_topology_txs: req.signed_topology_txs.map((t) => ({
          topology_tx: t.topology_tx,
          signed_hash: t.signed_hash,
        })),
      },
      response: SubmitExternalPartyTopologyResponseSchema,
      idempotent: false,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `POST /v0/admin/external-party/setup-proposal`: the operator creates an
   * `ExternalPartySetupProposal` (paying the preapproval fee). Not idempotent; 409 when a
   * proposal or a TransferPreapproval already exists for the party.
   */
  async createSetupProposal(
    req: CreateExternalPartySetupProposalRequest,
    opts?: CallOptions,
  ): Promise<CreateExternalPartySetupProposalResponse> {
    nonEmpty(req.user_party_id, 'user_party_id');
    return this.admin.request({
      method: 'POST',
      path: '/v0/admin/external-party/setup-proposal',
      body: { user_party_id: req.user_party_id },
      response: CreateExternalPartySetupProposalResponseSchema,
      idempotent: false,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/admin/external-party/setup-proposal`. */
  async listSetupProposals(opts?: CallOptions): Promise<ContractsResponse> {
    return this.admin.request({
      method: 'GET',
      path: '/v0/admin/external-party/setup-proposal',
      response: ContractsResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `POST /v0/admin/external-party/setup-proposal/prepare-accept`. No side effect → idempotent. */
  async prepareAcceptSetupProposal(
    req: PrepareAcceptExternalPartySetupProposalRequest,
    opts?: CallOptions,
  ): Promise<PrepareAcceptExternalPartySetupProposalResponse> {
    nonEmpty(req.contract_id, 'contract_id');
    nonEmpty(req.user_party_id, 'user_party_id');
    const body: PrepareAcceptExternalPartySetupProposalRequest = {
      contract_id: req.contract_id,
      user_party_id: req.user_party_id,
    };
    if (req.verbose_hashing !== undefined) body.verbose_hashing = req.verbose_hashing;
    return this.admin.request({
      method: 'POST',
      path: '/v0/admin/external-party/setup-proposal/prepare-accept',
      body,
      response: PrepareAcceptExternalPartySetupProposalResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `POST /v0/admin/external-party/setup-proposal/submit-accept`: executes the signed
   * acceptance (creates the TransferPreapproval). Not idempotent.
   */
  async submitAcceptSetupProposal(
    req: SubmitAcceptExternalPartySetupProposalRequest,
    opts?: CallOptions,
  ): Promise<SubmitAcceptExternalPartySetupProposalResponse> {
    return this.admin.request({
      method: 'POST',
      path: '/v0/admin/external-party/setup-proposal/submit-accept',
      body: { submission: submission(req.submission) },
      response: SubmitAcceptExternalPartySetupProposalResponseSchema,
      idempotent: false,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `POST /v0/admin/external-party/transfer-preapproval/prepare-send` (deprecated upstream
   * in Splice 0.6.1; the token standard is preferred). No side effect → idempotent.
   *
   * `amount` is taken as a decimal string and sent as the JSON number the spec asks for,
   * but only if that number prints back as exactly the same decimal (so the server, which
   * reads the number text as a BigDecimal, gets exactly this amount); otherwise TypeError.
   */
  async prepareTransferPreapprovalSend(
    req: PrepareTransferPreapprovalSendInput,
    opts?: CallOptions,
  ): Promise<PrepareTransferPreapprovalSendResponse> {
    nonEmpty(req.sender_party_id, 'sender_party_id');
    nonEmpty(req.receiver_party_id, 'receiver_party_id');
    if (!Number.isSafeInteger(req.nonce) || req.nonce < 0) {
      throw new TypeError('nonce must be a non-negative safe integer');
    }
    const body: PrepareTransferPreapprovalSendRequest = {
      sender_party_id: req.sender_party_id,
      receiver_party_id: req.receiver_party_id,
      amount: decimalToJsonNumber(req.amount),
      expires_at: isoInstant(req.expires_at),
      nonce: req.nonce,
    };
    if (req.description !== undefined) body.description = req.description;
    if (req.verbose_hashing !== undefined) body.verbose_hashing = req.verbose_hashing;
    return this.admin.request({
      method: 'POST',
      path: '/v0/admin/external-party/transfer-preapproval/prepare-send',
      body,
      response: PrepareTransferPreapprovalSendResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `POST /v0/admin/external-party/transfer-preapproval/submit-send` (deprecated upstream).
   * Creates the TransferCommand; the transfer itself is done later by SV automation.
   * Not idempotent.
   */
  async submitTransferPreapprovalSend(
    req: SubmitTransferPreapprovalSendRequest,
    opts?: CallOptions,
  ): Promise<SubmitTransferPreapprovalSendResponse> {
    return this.admin.request({
      method: 'POST',
      path: '/v0/admin/external-party/transfer-preapproval/submit-send',
      body: { submission: submission(req.submission) },
      response: SubmitTransferPreapprovalSendResponseSchema,
      idempotent: false,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `GET /v0/admin/external-party/balance?party_id=`. 404 when the validator has no
   * external-party wallet for the party (not onboarded through the setup proposal).
   */
  async externalPartyBalance(partyId: string, opts?: CallOptions): Promise<ExternalPartyBalanceResponse> {
    return this.admin.request({
      method: 'GET',
      path: '/v0/admin/external-party/balance',
      query: { party_id: nonEmpty(partyId, 'partyId') },
      response: ExternalPartyBalanceResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  // ----------------------------------------------------------------------------------------
  // Admin: transfer preapprovals provided by the operator, users

  /** `GET /v0/admin/transfer-preapprovals`: preapprovals whose provider is the operator. */
  async listTransferPreapprovals(opts?: CallOptions): Promise<ContractsResponse> {
    return this.admin.request({
      method: 'GET',
      path: '/v0/admin/transfer-preapprovals',
      response: ContractsResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/admin/transfer-preapprovals/by-party/{receiver-party}`; 404 when none. */
  async lookupTransferPreapproval(
    receiverParty: string,
    opts?: CallOptions,
  ): Promise<LookupTransferPreapprovalByPartyResponse> {
    return this.admin.request({
      method: 'GET',
      path: encodePath`/v0/admin/transfer-preapprovals/by-party/${nonEmpty(receiverParty, 'receiverParty')}`,
      response: LookupTransferPreapprovalByPartyResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `DELETE /v0/admin/transfer-preapprovals/by-party/{receiver-party}`. Idempotent (retried);
   * 404 when there is none, including after a retry of a call that did succeed.
   */
  async cancelTransferPreapproval(receiverParty: string, opts?: CallOptions): Promise<void> {
    await this.admin.request({
      method: 'DELETE',
      path: encodePath`/v0/admin/transfer-preapprovals/by-party/${nonEmpty(receiverParty, 'receiverParty')}`,
      response: z.unknown(),
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/admin/users`: user names onboarded onto this validator. */
  async listUsers(opts?: CallOptions): Promise<ListUsersResponse> {
    return this.admin.request({
      method: 'GET',
      path: '/v0/admin/users',
      response: ListUsersResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `POST /v0/admin/users` (`onboardUser`): allocates user (+ party) and wallet contracts. Not idempotent. */
  async onboardUser(req: OnboardUserRequest, opts?: CallOptions): Promise<OnboardUserResponse> {
    nonEmpty(req.name, 'name');
    const body: OnboardUserRequest = { name: req.name };
    if (req.party_id !== undefined) body.party_id = req.party_id;
    if (req.createPartyIfMissing !== undefined) body.createPartyIfMissing = req.createPartyIfMissing;
    return this.admin.request({
      method: 'POST',
      path: '/v0/admin/users',
      body,
      response: OnboardUserResponseSchema,
      idempotent: false,
      timeoutMs: opts?.timeoutMs,
    });
  }

  // ----------------------------------------------------------------------------------------
  // BFT scan proxy (`/v0/scan-proxy/*`): read-only, all idempotent

  /** `GET /v0/scan-proxy/dso-party-id`: the DSO party (admin of the Amulet instrument). */
  async scanProxyDsoPartyId(opts?: CallOptions): Promise<GetDsoPartyIdResponse> {
    return this.proxy.request({
      method: 'GET',
      path: `${SCAN_PROXY}/dso-party-id`,
      response: GetDsoPartyIdResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `GET /v0/scan-proxy/open-and-issuing-mining-rounds` (`getOpenAndIssuingMiningRounds`):
   * the open and issuing rounds as lists (no cache ids, no TTL, unlike Scan's POST).
   */
  async scanProxyOpenAndIssuingMiningRounds(
    opts?: CallOptions,
  ): Promise<GetOpenAndIssuingMiningRoundsProxyResponse> {
    return this.proxy.request({
      method: 'GET',
      path: `${SCAN_PROXY}/open-and-issuing-mining-rounds`,
      response: GetOpenAndIssuingMiningRoundsProxyResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/scan-proxy/transfer-preapprovals/by-party/{party}`; 404 when none. */
  async scanProxyTransferPreapproval(
    party: string,
    opts?: CallOptions,
  ): Promise<LookupTransferPreapprovalByPartyResponse> {
    return this.proxy.request({
      method: 'GET',
      path: encodePath`/v0/scan-proxy/transfer-preapprovals/by-party/${nonEmpty(party, 'party')}`,
      response: LookupTransferPreapprovalByPartyResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `GET /v0/scan-proxy/transfer-command-counter/{party}`. The spec documents 404 as "no
   * counter: the nonce to use is 0"; it is still raised as a `CantonApiError` here so that
   * the caller decides (a misrouted 404 must not become nonce 0 silently).
   */
  async scanProxyTransferCommandCounter(
    party: string,
    opts?: CallOptions,
  ): Promise<LookupTransferCommandCounterByPartyResponse> {
    return this.proxy.request({
      method: 'GET',
      path: encodePath`/v0/scan-proxy/transfer-command-counter/${nonEmpty(party, 'party')}`,
      response: LookupTransferCommandCounterByPartyResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /**
   * `GET /v0/scan-proxy/transfer-command/status?sender=&nonce=`: keyed by full contract id
   * (match `transfer_command_contract_id_prefix` by prefix); 404 when none in the last 24 h.
   */
  async scanProxyTransferCommandStatus(
    q: { sender: string; nonce: number },
    opts?: CallOptions,
  ): Promise<LookupTransferCommandStatusResponse> {
    nonEmpty(q.sender, 'sender');
    if (!Number.isSafeInteger(q.nonce) || q.nonce < 0) {
      throw new TypeError('nonce must be a non-negative safe integer');
    }
    return this.proxy.request({
      method: 'GET',
      path: `${SCAN_PROXY}/transfer-command/status`,
      query: { sender: q.sender, nonce: q.nonce },
      response: LookupTransferCommandStatusResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/scan-proxy/ans-entries/by-name/{name}`; 404 when none. */
  async scanProxyAnsEntryByName(name: string, opts?: CallOptions): Promise<LookupAnsEntryResponse> {
    return this.proxy.request({
      method: 'GET',
      path: encodePath`/v0/scan-proxy/ans-entries/by-name/${nonEmpty(name, 'name')}`,
      response: LookupAnsEntryResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/scan-proxy/ans-entries/by-party/{party}`; 404 when none. */
  async scanProxyAnsEntryByParty(party: string, opts?: CallOptions): Promise<LookupAnsEntryResponse> {
    return this.proxy.request({
      method: 'GET',
      path: encodePath`/v0/scan-proxy/ans-entries/by-party/${nonEmpty(party, 'party')}`,
      response: LookupAnsEntryResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `GET /v0/scan-proxy/ans-entries?name_prefix=&page_size=`. */
  async scanProxyListAnsEntries(q: ListAnsEntriesQuery, opts?: CallOptions): Promise<ListAnsEntriesResponse> {
    checkPageSize(q.pageSize);
    return this.proxy.request({
      method: 'GET',
      path: `${SCAN_PROXY}/ans-entries`,
      query: { name_prefix: q.namePrefix, page_size: q.pageSize },
      response: ListAnsEntriesResponseSchema,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `POST /v0/scan-proxy/holdings/summary`. Read-only → idempotent. */
  async scanProxyHoldingsSummary(
    req: HoldingsSummaryRequest,
    opts?: CallOptions,
  ): Promise<HoldingsSummaryResponse> {
    if (req.owner_party_ids.length === 0) throw new TypeError('owner_party_ids must not be empty');
    return this.proxy.request({
      method: 'POST',
      path: `${SCAN_PROXY}/holdings/summary`,
      body: req,
      response: HoldingsSummaryResponseSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }
}

// ------------------------------------------------------------------------------------------
// Input checks (fail before anything is sent)

const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const HEX_SIG = /^[0-9a-fA-F]{128}$/;

function checkPublicKey(k: string): void {
  if (typeof k !== 'string' || !HEX_KEY.test(k)) {
    throw new TypeError('public_key must be the hex of a raw 32-byte Ed25519 key');
  }
}

function checkSignature(s: string, what: string): void {
  if (typeof s !== 'string' || !HEX_SIG.test(s)) {
    throw new TypeError(`${what} must be the hex of a 64-byte Ed25519 signature`);
  }
}

function checkBase64(s: string, what: string): void {
  if (typeof s !== 'string' || s.length === 0 || !isPaddedBase64(s)) {
    throw new TypeError(`${what} must be non-empty standard base64`);
  }
}

function submission(s: ExternalPartySubmission): ExternalPartySubmission {
  nonEmpty(s.party_id, 'party_id');
  checkBase64(s.transaction, 'transaction');
  checkSignature(s.signed_tx_hash, 'signed_tx_hash');
  checkPublicKey(s.public_key);
  return {
    party_id: s.party_id,
    transaction: s.transaction,
    signed_tx_hash: s.signed_tx_hash,
    public_key: s.public_key,
  };
}

const DECIMAL = /^(?:0|[1-9]\d*)(?:\.\d{1,10})?$/;

/** Canonical `<digits>e<exp>` form of a decimal or JS number text (`"12.50"` → `"125e-1"`). */
function canonicalDecimal(s: string): string | undefined {
  const m = /^(\d+)(?:\.(\d*))?(?:e([+-]?\d+))?$/i.exec(s);
  if (!m) return undefined;
  const frac = m[2] ?? '';
  let digits = (m[1]! + frac).replace(/^0+/, '');
  let exp = Number(m[3] ?? '0') - frac.length;
  if (digits.length === 0) return '0';
  while (digits.endsWith('0')) {
    digits = digits.slice(0, -1);
    exp++;
  }
  return `${digits}e${exp}`;
}

/**
 * A positive decimal string (≤ 10 fractional digits, Daml `Decimal`) as a JS number whose
 * JSON text denotes exactly the same decimal; TypeError if there is no such number.
 */
export function decimalToJsonNumber(amount: string): number {
  if (typeof amount !== 'string' || !DECIMAL.test(amount)) {
    throw new TypeError('amount must be a plain decimal string with at most 10 fractional digits');
  }
  const n = Number(amount);
  if (!(n > 0) || !Number.isFinite(n)) throw new TypeError('amount must be positive');
  if (canonicalDecimal(JSON.stringify(n)) !== canonicalDecimal(amount)) {
    throw new TypeError('amount has more significant digits than a JSON number can carry exactly');
  }
  return n;
}

function isoInstant(t: string | Date): string {
  if (t instanceof Date) {
    if (Number.isNaN(t.getTime())) throw new TypeError('expires_at is an invalid Date');
    return t.toISOString();
  }
  if (typeof t !== 'string' || Number.isNaN(Date.parse(t))) {
    throw new TypeError('expires_at must be an ISO-8601 date-time');
  }
  return t;
}

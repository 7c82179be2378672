/**
 * Token-standard registry, transfer-instruction API v1 (`transfer-instruction-v1.yaml`,
 * paths `/registry/transfer-instruction/v1/...`; the document declares no server).
 *
 * For Canton Coin the registry is served by the SVs' Scan apps and proxied BFT by the
 * validator under `/api/validator/v0/scan-proxy/registry/...` (canton-apis §6.1), so the
 * registry base URL is `<validator base>/v0/scan-proxy` (see {@link ValidatorClient.registry}).
 * Another token's registry has its own base URL; pass it as `baseUrl`.
 *
 * All four calls only compute a factory / choice context: nothing changes on the
 * ledger, so they are sent as idempotent (retried like GETs) although they are POSTs.
 * The answer feeds a transaction that is prepared, verified and signed afterwards;
 * `debug*` fields are the provider's unverified claims: never show them as facts.
 */
import { z } from 'zod';
import { encodePath, HttpClient, type HttpClientOptions } from '../http.js';
import type { CallOptions } from '../scan/client.js';
import { opt } from '../scan/schemas.js';

/** `GetFactoryRequest`. */
export interface GetFactoryRequest {
  /** `TransferFactory_Transfer` arguments in the Ledger API JSON encoding, `extraArgs.context`/`meta` empty. */
  choiceArguments: Record<string, unknown>;
  /** Leave out the `debug*` fields of disclosed contracts. */
  excludeDebugFields?: boolean;
}

/** `GetChoiceContextRequest`. */
export interface GetChoiceContextRequest {
  meta?: Record<string, string>;
  excludeDebugFields?: boolean;
}

/** `DisclosedContract` (registry flavour, camelCase). */
export const RegistryDisclosedContractSchema = z.object({
  templateId: z.string(),
  contractId: z.string(),
  createdEventBlob: z.string(),
  synchronizerId: z.string(),
  debugPackageName: opt(z.string()),
  debugPayload: opt(z.record(z.string(), z.unknown())),
  debugCreatedAt: opt(z.string()),
});
export type RegistryDisclosedContract = z.output<typeof RegistryDisclosedContractSchema>;

/** `ChoiceContext`. */
export const ChoiceContextSchema = z.object({
  /** Goes verbatim into `extraArgs.context` of the choice. */
  choiceContextData: z.record(z.string(), z.unknown()),
  disclosedContracts: z.array(RegistryDisclosedContractSchema),
});
export type ChoiceContext = z.output<typeof ChoiceContextSchema>;

/**
 * `TransferFactoryWithChoiceContext`. An unknown `transferKind` is refused (the caller
 * decides how to proceed from it).
 */
export const TransferFactoryWithChoiceContextSchema = z.object({
  factoryId: z.string(),
  transferKind: z.enum(['self', 'direct', 'offer']),
  choiceContext: ChoiceContextSchema,
});
export type TransferFactoryWithChoiceContext = z.output<typeof TransferFactoryWithChoiceContextSchema>;

export interface RegistryClientOptions extends Omit<HttpClientOptions, 'service'> {
  /** Registry root (the part before `/registry/...`), e.g. `https://validator.example.com/api/validator/v0/scan-proxy`. */
  baseUrl: string;
}

export type TransferInstructionChoice = 'accept' | 'reject' | 'withdraw';

export class RegistryClient {
  readonly http: HttpClient;

  constructor(opts: RegistryClientOptions) {
    this.http = new HttpClient({ ...opts, service: 'registry' });
  }

  /**
   * `POST /registry/transfer-instruction/v1/transfer-factory` (`getTransferFactory`).
   * 400/404 `{error}`; 409 while a disclosed contract is being reassigned.
   */
  async getTransferFactory(
    req: GetFactoryRequest,
    opts?: CallOptions,
  ): Promise<TransferFactoryWithChoiceContext> {
    return this.http.request({
      method: 'POST',
      path: '/registry/transfer-instruction/v1/transfer-factory',
      body: req,
      response: TransferFactoryWithChoiceContextSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }

  /** `POST /registry/transfer-instruction/v1/{transferInstructionId}/choice-contexts/accept`. */
  getTransferInstructionAcceptContext(
    transferInstructionId: string,
    req: GetChoiceContextRequest = {},
    opts?: CallOptions,
  ): Promise<ChoiceContext> {
    return this.choiceContext('accept', transferInstructionId, req, opts);
  }

  /** `POST /registry/transfer-instruction/v1/{transferInstructionId}/choice-contexts/reject`. */
  getTransferInstructionRejectContext(
    transferInstructionId: string,
    req: GetChoiceContextRequest = {},
    opts?: CallOptions,
  ): Promise<ChoiceContext> {
    return this.choiceContext('reject', transferInstructionId, req, opts);
  }

  /** `POST /registry/transfer-instruction/v1/{transferInstructionId}/choice-contexts/withdraw`. */
  getTransferInstructionWithdrawContext(
    transferInstructionId: string,
    req: GetChoiceContextRequest = {},
    opts?: CallOptions,
  ): Promise<ChoiceContext> {
    return this.choiceContext('withdraw', transferInstructionId, req, opts);
  }

  private async choiceContext(
    choice: TransferInstructionChoice,
    transferInstructionId: string,
    req: GetChoiceContextRequest,
    opts: CallOptions | undefined,
  ): Promise<ChoiceContext> {
    if (typeof transferInstructionId !== 'string' || transferInstructionId.length === 0) {
      throw new TypeError('transferInstructionId must be a non-empty string');
    }
    return this.http.request({
      method: 'POST',
      path: encodePath`/registry/transfer-instruction/v1/${transferInstructionId}/choice-contexts/${choice}`,
      body: req,
      response: ChoiceContextSchema,
      idempotent: true,
      timeoutMs: opts?.timeoutMs,
    });
  }
}

/**
 * The Ledger API request bodies the signing and withdrawal paths build on every withdrawal
 * (execute, completions, the holdings' active contracts, the delivery tracker's update reads).
 *
 * Their types are the request schemas' input types, and test/flows/ledger-requests.test.ts runs
 * each builder's output through its endpoint's schema: the client sends them with
 * `{ fromBuilder: true }`, without validating them again at run time. What the participant
 * answers is still validated on every call, and so is the prepare request (it carries the
 * registry's disclosed contracts and choice context, which no type guarantees).
 */
import type {
  CompletionStreamRequest,
  GetActiveContractsRequest,
  GetUpdateByOffsetRequest,
  GetUpdatesRequest,
  JsExecuteSubmissionAndWaitRequest,
  UpdateFormat,
} from '../canton/ledger-api/schemas.js';
import type { HashingScheme } from '../hashing/transaction-hash.js';
import type { SignedTransaction } from './pipeline.js';

/** The Ledger API's name of each hashing scheme. */
export const SCHEME_NAMES: Record<HashingScheme, 'HASHING_SCHEME_VERSION_V2' | 'HASHING_SCHEME_VERSION_V3'> =
  {
    v2: 'HASHING_SCHEME_VERSION_V2',
    v3: 'HASHING_SCHEME_VERSION_V3',
  };

/** Per-call option for a body built here (see the module's header). */
export const FROM_BUILDER = { fromBuilder: true } as const;

/** `executeAndWait` of a signed transaction for its one acting party, under `submissionId`. */
export function executeRequest(
  userId: string,
  signed: Pick<SignedTransaction, 'preparedTransactionBase64' | 'party' | 'signature' | 'scheme'>,
  submissionId: string,
): JsExecuteSubmissionAndWaitRequest {
  return {
    preparedTransaction: signed.preparedTransactionBase64,
    partySignatures: {
      signatures: [{ party: signed.party.partyId, signatures: [signed.signature] }],
    },
    submissionId,
    userId,
    hashingSchemeVersion: SCHEME_NAMES[signed.scheme],
  };
}

/** Completions of `party`'s submissions after `beginExclusive`. */
export function completionsRequest(
  userId: string,
  party: string,
  beginExclusive: number,
): CompletionStreamRequest {
  return { userId, parties: [party], beginExclusive };
}

/** `partyId`'s active contracts implementing `interfaceId` at `offset`, with the view and no blobs. */
export function interfaceViewsRequest(
  partyId: string,
  interfaceId: string,
  offset: number,
): GetActiveContractsRequest {
  return {
    activeAtOffset: offset,
    eventFormat: {
      filtersByParty: {
        [partyId]: {
          cumulative: [
            {
              identifierFilter: {
                InterfaceFilter: {
                  value: { interfaceId, includeInterfaceView: true, includeCreatedEventBlob: false },
                },
              },
            },
          ],
        },
      },
      verbose: false,
    },
  };
}

/** `party`'s transactions with their ledger effects. */
function partyUpdateFormat(party: string): UpdateFormat {
  return {
    includeTransactions: {
      eventFormat: { filtersByParty: { [party]: { cumulative: [] } }, verbose: false },
      transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
    },
  };
}

/** The update at `offset`, as `party` sees it. */
export function partyUpdateAtRequest(party: string, offset: number): GetUpdateByOffsetRequest {
  return { offset, updateFormat: partyUpdateFormat(party) };
}

/** `party`'s updates after `beginExclusive` up to `endInclusive`. */
export function partyUpdatesRequest(
  party: string,
  beginExclusive: number,
  endInclusive: number,
): GetUpdatesRequest {
  return { beginExclusive, endInclusive, updateFormat: partyUpdateFormat(party) };
}

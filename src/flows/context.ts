/**
 * What a flow needs to run: the pipeline options (signer, policy, journal,
 * scheme and window rules), the clients for the participant, the validator
 * and Scan, the Ledger API user that submits, and the party book.
 */
import type { LedgerApiClient } from '../canton/ledger-api/client.js';
import type { ScanClient } from '../canton/scan/client.js';
import type { ValidatorClient } from '../canton/validator/client.js';
import type { PartyBook, PartyRecord } from '../store/parties.js';
import type { PipelineOptions } from './pipeline.js';
import { Refusal } from './refusal.js';

export interface FlowContext extends PipelineOptions {
  ledger: LedgerApiClient;
  /** The Ledger API user that prepares and executes (needs CanActAs / CanExecuteAs on the parties). */
  userId: string;
  validator?: ValidatorClient;
  scan?: ScanClient;
  parties: PartyBook;
  /** Synchronizer to prepare on when no disclosed contract pins one. */
  synchronizerId?: string;
  /**
   * The validator operator's party, pinned by configuration: the provider a
   * setup acceptance must name, the delegate of a send. Without it, the
   * validator's own proposal names the provider.
   */
  validatorParty?: string;
  /**
   * How long a read of the completion stream waits with nothing new before it
   * takes the stream as read to its end (ms; default 1,500). A participant
   * sends what it has at once, so this is the cost of every lookup of an
   * unknown outcome; a network slow to stream needs more.
   */
  completionIdleMs?: number;
}

/** The party's record, or a refusal naming it: the signer only signs for parties it onboarded or imported. */
export async function partyOf(ctx: FlowContext, partyId: string): Promise<PartyRecord> {
  const p = await ctx.parties.get(partyId);
  if (!p) throw new Refusal('bad_request', `party ${partyId} is not in this signer's party book`);
  return p;
}

export function requireValidator(ctx: FlowContext, what: string): ValidatorClient {
  if (!ctx.validator)
    throw new Refusal('bad_request', `${what} needs the validator API: no validator URL is configured`);
  return ctx.validator;
}

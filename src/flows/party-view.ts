/**
 * `showParty`: a party as this signer and the network see it (the party
 * book's record, its hosting, ANS name and transfer preapproval).
 */
import { isCantonApiError } from '../canton/errors.js';
import type { PartyRecord } from '../store/parties.js';
import type { FlowContext } from './context.js';
import { nameOfParty } from './names.js';
import { hostedOn } from './onboard-hosting.js';

export interface PartyView {
  partyId: string;
  /** The party book's record; absent for a party this signer does not hold. */
  record?: PartyRecord;
  /** Whether the participant reports the party hosted (and where). */
  hosted?: { synchronizerId: string; permission?: string } | null;
  ansName?: string | null;
  preapproval?: { contractId: string; provider?: string; expiresAt?: string } | null;
  /** What could not be looked up, one sentence each. */
  notes: string[];
}

const reason = (e: unknown) =>
  isCantonApiError(e)
    ? `${e.message}${e.detail ? `: ${e.detail}` : ''}`
    : e instanceof Error
      ? e.message
      : String(e);

/**
 * The party as this signer and the network see it: the book record, whether it
 * is hosted, its ANS name and its transfer preapproval. `null` means "looked
 * up: none"; an absent field means it could not be looked up (see `notes`).
 */
export async function showParty(ctx: FlowContext, partyId: string): Promise<PartyView> {
  const notes: string[] = [];
  const view: PartyView = { partyId, notes };
  const record = await ctx.parties.get(partyId);
  if (record) view.record = record;
  else notes.push(`${partyId} is not in this signer's party book`);
  try {
    view.hosted = (await hostedOn(ctx, partyId)) ?? null;
  } catch (e) {
    notes.push(`hosting could not be checked: ${reason(e)}`);
  }
  if (ctx.validator || ctx.scan) {
    try {
      view.ansName = (await nameOfParty(ctx, partyId)) ?? null;
    } catch (e) {
      notes.push(`the ANS name could not be looked up: ${reason(e)}`);
    }
  }
  if (ctx.validator) {
    try {
      const c = (await ctx.validator.scanProxyTransferPreapproval(partyId)).transfer_preapproval.contract;
      const p = c.payload as Record<string, unknown>;
      view.preapproval = {
        contractId: c.contract_id,
        ...(typeof p.provider === 'string' ? { provider: p.provider } : {}),
        ...(typeof p.expiresAt === 'string' ? { expiresAt: p.expiresAt } : {}),
      };
    } catch (e) {
      if (isCantonApiError(e) && e.status === 404) view.preapproval = null;
      else notes.push(`the transfer preapproval could not be looked up: ${reason(e)}`);
    }
  }
  return view;
}

/**
 * Watching the TransferPreapprovals of the parties this signer holds
 * (canton-apis §6.2): each party's preapproval through the validator's scan
 * proxy, its provider and expiry, how many days are left, and whether the
 * validator will renew it (it renews the preapprovals it provides when fewer
 * than 30 days remain). Reads only; signs nothing. What the proxy answers is
 * the validator's claim: a preapproval naming another receiver, another DSO
 * than Scan's, or (with `network.validatorParty` pinned) another provider is
 * not reported as the party's (`missing`, resp. not renewed, with a `problem`).
 */
import { type FlowContext, requireValidator } from './context.js';
import {
  isNotFound,
  payloadText,
  pinnedValidatorParty,
  preapprovalProblems,
  scanDso,
} from './setup-accept.js';

export interface PreapprovalStatus {
  partyId: string;
  status: 'ok' | 'expiring' | 'missing';
  contractId?: string;
  provider?: string;
  expiresAt?: string;
  /** Days until `expiresAt` (one decimal); negative once past. */
  daysLeft?: number;
  /** The provider is this validator, which renews what it provides before it expires. */
  willRenew: boolean;
  /** Why the preapproval the validator reported is not taken as the party's, or not as renewed by it. */
  problem?: string;
}

const DAY_MS = 86_400_000;

export async function watchPreapprovals(
  ctx: FlowContext,
  opts: { withinDays?: number } = {},
): Promise<PreapprovalStatus[]> {
  const validator = requireValidator(ctx, 'preapprovals');
  const withinDays = opts.withinDays ?? 30;
  const now = ctx.nowUs ? Number(ctx.nowUs() / 1000n) : Date.now();
  const pinned = pinnedValidatorParty(ctx);
  const dso = await scanDso(ctx);
  const out: PreapprovalStatus[] = [];
  for (const p of await ctx.parties.list()) {
    let pre: Awaited<ReturnType<typeof validator.scanProxyTransferPreapproval>>['transfer_preapproval'];
    try {
      pre = (await validator.scanProxyTransferPreapproval(p.partyId)).transfer_preapproval;
    } catch (e) {
      if (!isNotFound(e)) throw e;
      out.push({ partyId: p.partyId, status: 'missing', willRenew: false });
      continue;
    }
    const provider = payloadText(pre, 'provider');
    // Receiver and DSO decide whether it is the party's at all; the provider whether it is renewed.
    const foreign = preapprovalProblems(pre, p.partyId, dso ? { dso } : {});
    if (foreign.length > 0) {
      out.push({
        partyId: p.partyId,
        status: 'missing',
        contractId: pre.contract.contract_id,
        willRenew: false,
        problem: foreign.map((x) => x.message).join(' '),
      });
      continue;
    }
    const otherProvider = pinned ? preapprovalProblems(pre, p.partyId, { validator: pinned }) : [];
    const expiresAt = payloadText(pre, 'expiresAt');
    const expiresMs = expiresAt === undefined ? Number.NaN : Date.parse(expiresAt);
    const daysLeft = Number.isNaN(expiresMs) ? undefined : Math.floor(((expiresMs - now) / DAY_MS) * 10) / 10;
    out.push({
      partyId: p.partyId,
      status: daysLeft !== undefined && daysLeft >= withinDays ? 'ok' : 'expiring',
      contractId: pre.contract.contract_id,
      ...(provider ? { provider } : {}),
      ...(expiresAt ? { expiresAt } : {}),
      ...(daysLeft !== undefined ? { daysLeft } : {}),
      willRenew:
        otherProvider.length === 0 && (await providedByValidator(ctx, p.partyId, pre.contract.contract_id)),
      ...(otherProvider.length > 0 ? { problem: otherProvider.map((x) => x.message).join(' ') } : {}),
    });
  }
  return out;
}

/** Whether the validator's own store lists this preapproval as one it provides. */
async function providedByValidator(ctx: FlowContext, partyId: string, cid: string): Promise<boolean> {
  try {
    const own = await requireValidator(ctx, 'preapprovals').lookupTransferPreapproval(partyId);
    return own.transfer_preapproval.contract.contract_id === cid;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}

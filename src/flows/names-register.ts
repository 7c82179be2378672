/**
 * Registering a name for a party of the book: every rule the DSO applies
 * off the ledger (the name's form and suffix, the URL, the description) and
 * whether the name is free (Scan, and this signer's own registrations) are
 * checked before anything is signed — a name the DSO refuses costs the fees
 * of locking the payment. Then the fee is priced at the round's Amulet price,
 * the registration is recorded and the keeper runs its first steps at once
 * (request the entry, lock the first payment); the DSO's collection that
 * makes the entry follows on the ledger, and the keeper records it.
 */
import {
  ansDescriptionProblem,
  ansUrlProblem,
  checkAnsName,
  DEFAULT_ANS_ACRONYM,
} from '../canton/ans-rules.js';
import { isCantonApiError } from '../canton/errors.js';
import type { Store } from '../store/index.js';
import { NameConflictError, type NameRecord } from '../store/repos/names.js';
import { loadAnsTerms, loadPaymentContext, targetAmount, withAllowance } from './ans-ledger.js';
import { type FlowContext, partyOf } from './context.js';
import { type NameKeeper, type NameView, nameView } from './names-keeper.js';
import { Refusal } from './refusal.js';

export interface NameQuote {
  name: string;
  available: boolean;
  /** Why the name cannot be registered, one sentence each (empty when it can). */
  problems: string[];
  feeUsd: string;
  /** The fee in CC at the current round's price (fees of the transfer itself not included). */
  feeCc: string;
  /** The most CC a payment may lock, transfer fees included (names.feeAllowancePercent above the fee): the party's free CC must cover it. */
  maxCc: string;
  amuletPrice: string;
  round: number;
  lifetimeDays: number;
  renewalWindowDays: number;
}

const DAY_US = 86_400_000_000;

/** The name's problems by the DSO's off-ledger rules and by who holds it; the fee now. */
export async function quoteName(
  ctx: FlowContext,
  store: Store,
  req: {
    name: string;
    url?: string;
    description?: string;
    acronym?: string;
    feeAllowancePercent?: number;
    /** The party it would be for, when known (a name it already holds is said so). */
    partyId?: string;
  },
): Promise<NameQuote> {
  const problems: string[] = [];
  const check = checkAnsName(req.name, req.acronym ?? DEFAULT_ANS_ACRONYM);
  if (!check.ok) problems.push(`name: ${check.reason}`);
  const urlProblem = ansUrlProblem(req.url ?? '');
  if (urlProblem) problems.push(`url: ${urlProblem}`);
  const descProblem = ansDescriptionProblem(req.description ?? '');
  if (descProblem) problems.push(`description: ${descProblem}`);
  const terms = await loadAnsTerms(ctx);
  if (check.ok) {
    const holder = await scanHolder(ctx, req.name);
    if (holder !== undefined && holder === req.partyId)
      problems.push(`name: ${req.partyId} already holds ${req.name}`);
    else if (holder) problems.push(`name: ${req.name} is taken: Scan shows it registered to ${holder}`);
    const own = await store.names.byName(req.name);
    if (own && !['expired', 'rejected', 'failed'].includes(own.state) && holder === undefined)
      problems.push(`name: ${req.name} is being registered for ${own.party} by this signer (${own.state})`);
  }
  const nowUs = (ctx.nowUs ?? (() => BigInt(Date.now()) * 1000n))();
  const pc = await loadPaymentContext(ctx, terms.dso, nowUs);
  return {
    name: req.name,
    available: problems.length === 0,
    problems,
    feeUsd: terms.entryFee,
    feeCc: targetAmount(terms.entryFee, pc.round.amuletPrice),
    maxCc: withAllowance(targetAmount(terms.entryFee, pc.round.amuletPrice), req.feeAllowancePercent ?? 0),
    amuletPrice: pc.round.amuletPrice,
    round: pc.round.number,
    lifetimeDays: Number(terms.lifetimeUs) / DAY_US,
    renewalWindowDays: Number(terms.renewalUs) / DAY_US,
  };
}

/** The party Scan says holds `name`, or undefined when no unexpired entry has it. */
async function scanHolder(ctx: FlowContext, name: string): Promise<string | undefined> {
  try {
    return (await ctx.scan!.lookupAnsEntryByName(name)).entry.user;
  } catch (e) {
    if (isCantonApiError(e) && e.status === 404) return undefined;
    throw e;
  }
}

export interface RegisterNameRequest {
  partyId: string;
  name: string;
  url?: string;
  description?: string;
  autoRenew?: boolean;
  acronym?: string;
  feeAllowancePercent?: number;
  actor: string;
  /**
   * Skip this signer's own checks of the name (form, availability) and let
   * the DSO judge it. Not offered by the API or the CLI: it exists to show
   * what the DSO does with a name these checks would have refused.
   */
  skipLocalChecks?: boolean;
  /** How long a signature across the air gap takes (ms): a cold party is warned when the renewal window is shorter. */
  airGapTurnaroundMs?: number;
}

export interface RegisterNameResult {
  name: NameView;
  quote: NameQuote;
  /** What the caller should know (a cold party whose renewal window is shorter than the air-gap turnaround). */
  warnings: string[];
}

export async function registerName(
  ctx: FlowContext,
  store: Store,
  keeper: NameKeeper,
  req: RegisterNameRequest,
): Promise<RegisterNameResult> {
  const party = await partyOf(ctx, req.partyId);
  const quote = await quoteName(ctx, store, req);
  if (!quote.available && !req.skipLocalChecks)
    throw new Refusal(
      'bad_request',
      `${req.name} cannot be registered; nothing was signed: ${quote.problems.join('; ')}`,
    );
  const terms = await loadAnsTerms(ctx);
  let row: NameRecord;
  try {
    row = await store.names.create(
      {
        party: req.partyId,
        name: req.name,
        url: req.url ?? '',
        description: req.description ?? '',
        dso: terms.dso,
        entryFeeUsd: terms.entryFee,
        lifetimeUs: terms.lifetimeUs,
        renewalUs: terms.renewalUs,
        descriptionPrefix: terms.descriptionPrefix,
        ...(req.autoRenew !== undefined ? { autoRenew: req.autoRenew } : {}),
      },
      req.actor,
    );
  } catch (e) {
    if (e instanceof NameConflictError) throw new Refusal('bad_request', `${e.message}; nothing was signed`);
    throw e;
  }
  const advanced = (await keeper.advance(row.id, { actor: req.actor, flows: ctx })) ?? row;
  if (advanced.state === 'failed')
    throw new Refusal('bad_request', `${req.name} was not requested: ${advanced.error ?? 'refused'}`);
  const warnings: string[] = [];
  const turnaround = req.airGapTurnaroundMs;
  if (turnaround !== undefined && terms.renewalUs < BigInt(turnaround) * 1000n) {
    const cold = await ctx.signer
      .describe(party.keyLabel)
      .then((k) => k.backend === 'offline')
      .catch(() => false);
    if (cold)
      warnings.push(
        `the party's key is across the air gap: each renewal can be paid only in the ${Number(terms.renewalUs) / 86_400_000_000} days before its due date, less than the configured turnaround of ${turnaround / 86_400_000} days (names.airGapTurnaroundHours); sign each exported renewal as soon as it appears`,
      );
  }
  return { name: nameView(advanced), quote, warnings };
}

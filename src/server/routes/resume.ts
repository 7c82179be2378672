/**
 * Requests that wait for approvals and go on by themselves once approved.
 * A synchronous request (sign, sign and execute, an answer to an offer) that
 * the policy sends for approval answers 202; its approval request keeps what
 * to run (`resume`: the request's input and its caller). When the request is
 * approved in full, the service runs it as that caller — through the same
 * runner the route uses, so the same flow and the same pipeline, which counts
 * the approvals again on the transaction it verifies — and records the
 * outcome on the approval request (`result`, audited as `approval.result`;
 * GET /v1/approvals/{id} shows it). Sending the same request again after
 * approval works too: it meets the approved request and is signed.
 */
import { acceptOffer, rejectOffer, withdrawOffer } from '../../flows/offers.js';
import { type SignExecuteRequest, signAndExecute, signOnly } from '../../flows/sign-execute.js';
import { AwaitingApproval, type PolicyCaller } from '../../policy/hook.js';
import type { Json } from '../../store/canonical.js';
import type { ApprovalRequest } from '../../store/repos/approvals.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError, errorBody } from '../errors.js';
import { flowsAs, withKnownParty } from './context.js';

/** What a resumable request stores with its approval request. */
export interface Resume {
  /** Which runner (RUNNERS) runs it. */
  kind: keyof typeof RUNNERS;
  caller: PolicyCaller;
  /** The request's input, as its route validated it. */
  input: Json;
}

/** How a kind of request runs as `caller`: the outcome as its route's 200 body. */
type Runner = (deps: ServiceDeps, caller: PolicyCaller, input: Json) => Promise<unknown>;

/** The stored input of a sign route. */
export type SignInput = { party: string; body: SignExecuteRequest };
/** The stored input of an answer to an offer. */
export type OfferInput = { party: string; contractId: string; commandId?: string };

type OfferAction = 'accept' | 'reject' | 'withdraw';
const OFFER_ACTIONS = { accept: acceptOffer, reject: rejectOffer, withdraw: withdrawOffer } as const;

async function booked(deps: ServiceDeps, id: string) {
  const p = await deps.store.parties.get(id);
  if (!p) throw new ApiError(404, 'party_not_found', `party ${id} is not in this signer's party book`);
  return p;
}

const offer =
  (action: OfferAction): Runner =>
  async (deps, caller, input) => {
    const { party, contractId, commandId } = input as unknown as OfferInput;
    const base = withKnownParty(flowsAs(deps, caller), await booked(deps, party));
    // One decision (and approval request) per answer to one offer, whatever command id a retry uses.
    const ctx = {
      ...base,
      policyContext: { ...base.policyContext, subject: `offer-${action}:${party}:${contractId}` },
    };
    return OFFER_ACTIONS[action](ctx, party, contractId, commandId ? { commandId } : {});
  };

/**
 * What each resumable request runs: its route runs exactly this (after its
 * access checks), and so does the service when the request is approved.
 */
export const RUNNERS = {
  sign: (async (deps, caller, input) => {
    const { party, body } = input as unknown as SignInput;
    const r = await signOnly(withKnownParty(flowsAs(deps, caller), await booked(deps, party)), body);
    return { ok: true, ...r };
  }) as Runner,
  'sign-execute': (async (deps, caller, input) => {
    const { party, body } = input as unknown as SignInput;
    const r = await signAndExecute(withKnownParty(flowsAs(deps, caller), await booked(deps, party)), body);
    return {
      ok: true,
      partyId: party,
      hash: r.hash,
      signature: r.signature,
      actions: r.actions,
      window: r.window,
      attempts: r.attempts,
      outcome: r.outcome,
      updateId: r.result.updateId,
      commandId: r.result.commandId,
      completionOffset: r.result.completionOffset,
    };
  }) as Runner,
  'offer-accept': offer('accept'),
  'offer-reject': offer('reject'),
  'offer-withdraw': offer('withdraw'),
} as const;

/**
 * Runs request `r` (its route, after the access checks); when it stops for
 * approvals, the approval request keeps `r` to run it again once approved.
 */
export async function runResumable(deps: ServiceDeps, r: Resume): Promise<unknown> {
  try {
    return await RUNNERS[r.kind](deps, r.caller, r.input);
  } catch (e) {
    if (e instanceof AwaitingApproval)
      await deps.store.approvals.setResume(e.requestId, r as unknown as Json).catch(() => undefined);
    throw e;
  }
}

/** Runs an approved request's stored request as its caller and records the outcome. Never throws. */
export async function resumeApproved(deps: ServiceDeps, request: ApprovalRequest): Promise<void> {
  const r = request.resume as unknown as Resume | undefined;
  const run = r ? RUNNERS[r.kind] : undefined;
  if (!r || !run) return;
  // Only as the person who asked (the statement the approvers signed names them). A stored request
  // edited to another input meets no approval: its transaction is another subject.
  const requester = (request.statement as { requester?: unknown } | null)?.requester;
  if (r.caller?.id !== requester) return;
  let result: Json;
  try {
    result = { ok: true, status: 200, body: JSON.parse(JSON.stringify(await run(deps, r.caller, r.input))) };
  } catch (e) {
    const { status, body } = errorBody(e);
    result = { ok: false, status, body: JSON.parse(JSON.stringify(body)) };
  }
  await deps.store.approvals.setResult(request.id, result, { actor: r.caller.id }).catch(() => undefined);
}

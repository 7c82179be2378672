/**
 * The policy gate: the one place the pipeline asks "may this be signed?"
 * after the transaction was verified against the caller's intent and before
 * a key is used, and tells, when a flow ends, whether what it was allowed
 * moved money (its reservations against the limits count) or not (they are
 * released). `allowAll` is the gate without a policy; the policy engine
 * (engine.ts) is the real one.
 *
 * A decision is one of: allow; deny, with a reason; or approve: approvals
 * by people are missing, the request that collects them is named, and the
 * flow stops with `AwaitingApproval` (nothing signed, nothing reserved
 * beyond what the decision holds for it).
 */
import type { Intent, RecognisedAction } from '../intent/model.js';
import type { PolicyCaller } from './evaluate.js';

export type { PolicyCaller };

export interface PolicyRequest {
  /** The entry point: the pipeline's flow name (withdrawal, sign, offer-accept, onboard, …). */
  flow: string;
  partyId: string;
  keyLabel: string;
  intent: Intent;
  actions: readonly RecognisedAction[];
  /** Hex of the hash about to be signed. */
  hash: string;
  /** The caller, when the flow runs for one (a request to the service). */
  caller?: PolicyCaller;
  /**
   * What the decision is about: its limit reservations and its approval
   * request are keyed by it, so that a transaction prepared again for the
   * same purpose finds them (`withdrawal:<id>`, `sign:<party>:<command id>`).
   */
  subject: string;
  /** Who asked for it first (cannot approve it); default the caller. */
  requester?: string;
}

/** The policy version and rule a decision was made under. */
export interface PolicyRef {
  version: number;
  sha256: string;
  rule: string;
}

export type PolicyDecision =
  | { outcome: 'allow'; policy: PolicyRef; approvedBy?: readonly string[]; limits?: readonly object[] }
  | { outcome: 'deny'; reason: string; policy: PolicyRef; limits?: readonly object[] }
  | {
      outcome: 'approve';
      request: string;
      missing: readonly { group: string; need: number }[];
      expiresAt: string;
      policy: PolicyRef;
    };

export interface PolicyGate {
  decide(req: PolicyRequest): Promise<PolicyDecision>;
  /** The flow for `subject` ended: what it reserved counts (`committed`) or is given back (`released`). */
  settle(subject: string, outcome: 'committed' | 'released'): Promise<void>;
}

/** The decision of the gate without a policy. */
export const ALLOW_ALL_REF: PolicyRef = Object.freeze({ version: 0, sha256: '', rule: 'allow-all' });

export const allowAll: PolicyGate = {
  decide: async () => ({ outcome: 'allow', policy: ALLOW_ALL_REF }),
  settle: async () => {},
};

/** The flow stopped: people must approve it first. Not a refusal: it continues once approved. */
export class AwaitingApproval extends Error {
  override readonly name = 'AwaitingApproval';
  constructor(
    readonly requestId: string,
    readonly subject: string,
    readonly missing: readonly { group: string; need: number }[],
    readonly expiresAt: string,
    readonly policy: PolicyRef,
  ) {
    super(
      `approvals are required (policy version ${policy.version}, rule ${policy.rule}): approval request ${requestId} waits for ${missing.map((m) => `${m.need} of ${m.group}`).join(' and ')} until ${expiresAt}`,
    );
  }
}

export function isAwaitingApproval(e: unknown): e is AwaitingApproval {
  return e instanceof AwaitingApproval;
}

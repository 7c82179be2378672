/**
 * The policy hook: the one place the pipeline asks "may this be signed?"
 * after the transaction was verified against the caller's intent and before
 * a key is used. Allow-all for now; the approvals/limits issue fills it.
 */
import type { Intent, RecognisedAction } from '../intent/model.js';

export interface PolicyRequest {
  flow: string;
  partyId: string;
  keyLabel: string;
  intent: Intent;
  actions: readonly RecognisedAction[];
  /** Hex of the hash about to be signed. */
  hash: string;
}

export type PolicyDecision = { allow: true } | { allow: false; reason: string };

export type PolicyHook = (req: PolicyRequest) => Promise<PolicyDecision>;

export const allowAll: PolicyHook = async () => ({ allow: true });

/**
 * Why the pipeline would not sign (or would not submit). Every refusal has a
 * stable machine-readable `reason`, a sentence for a person, and, when the
 * intent check found them, each mismatch. A refusal is thrown before any
 * signature exists, except `signature_invalid` (the backend produced a
 * signature that does not verify; it is discarded, never submitted).
 */
import type { IntentProblem } from '../intent/model.js';
import type { TopologyProblem } from '../intent/topology.js';

/** One mismatch: of a transaction against the intent, or of onboarding topology against the request. */
export type Problem = IntentProblem | TopologyProblem;

export type RefusalReason =
  | 'decode_failed' // the prepared transaction is not a strictly valid PreparedTransaction
  | 'hash_mismatch' // the participant's claimed hash is not the one recomputed here
  | 'scheme_not_allowed' // the hashing scheme is not the one the caller requires (e.g. V3 for a signed max_record_time)
  | 'intent_mismatch' // the transaction does not do exactly what the caller asked
  | 'topology_mismatch' // a topology transaction is not the one the onboarding asked for
  | 'window_closed' // the execution window has passed (or is shorter than the configured minimum)
  | 'policy_denied' // the policy hook said no
  | 'key_mismatch' // the signing key is not the party's registered key
  | 'signature_invalid' // the produced signature does not verify against the registered key
  | 'submission_rejected' // the ledger rejected the signed transaction (definite: nothing committed)
  | 'outcome_unknown' // an ambiguous submission whose outcome could not be established; not retried
  | 'delivery_required' // the transfer would be an offer (no valid preapproval) and one-step delivery is required
  | 'bad_request'; // the caller's input is invalid (names the field)

export class Refusal extends Error {
  override readonly name = 'Refusal';
  constructor(
    readonly reason: RefusalReason,
    message: string,
    readonly problems: readonly Problem[] = [],
    /** Extra machine-readable facts (e.g. the claimed and the computed hash). */
    readonly details: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }

  toJSON(): {
    reason: RefusalReason;
    message: string;
    problems: Problem[];
    details: Record<string, string>;
  } {
    return {
      reason: this.reason,
      message: this.message,
      problems: [...this.problems],
      details: { ...this.details },
    };
  }
}

export function isRefusal(e: unknown): e is Refusal {
  return e instanceof Refusal;
}

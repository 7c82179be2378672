/**
 * The two policy types the approval module needs, declared minimally here
 * while the evaluator (evaluate.ts) is written alongside: what an action of
 * an approval statement says, and which approver groups must approve (and
 * how many of each). The evaluator's own declarations take their place.
 */
export interface PolicyAction {
  kind?: string;
  sender?: string;
  receiver?: string;
  amount?: string;
  instrument?: { admin: string; id: string };
  memo?: string;
}

/** Per approver group, how many distinct approvers of it must approve. */
export type Requirement = { group: string; count: number }[];

/**
 * The lifecycle of a withdrawal, as one table the code executes: for the
 * row's state and what just happened (the event), the first line whose
 * condition holds over what is known (`WithdrawalFacts`) names the action to
 * take and the state it leads to. Conditions are pure; actions are small
 * named functions of the modules that meet the events:
 *
 * - withdrawal-run.ts — a worker's run: `run` (it starts), `carry` (it
 *   sends), `needs-approval`, `needs-offline-signature` and `failed` (how
 *   a send ended);
 * - withdrawal-context.ts — the pipeline's steps within a send: `sign`,
 *   `signed`, `submitted`, `committed`, `rejected`, `resolved`;
 * - withdrawal-approval.ts — `answered` (the approval request);
 * - withdrawal-air-gap.ts — `imported`, `stale`, `unexported`;
 * - withdrawal.ts — `give-up` (the worker); the store — `cancel`.
 *
 * A line may go on (`onward`): the row, in the state the action left it in, is
 * looked up again under that event — with the same facts when it is the same
 * event, with facts gathered afresh otherwise. `same` as the next state: the
 * action does not move the row.
 *
 * The store enforces the same moves twice (store/repos/withdrawal-states.ts
 * `WITHDRAWAL_EDGES` and the `withdrawals_guard` trigger); a test keeps the
 * table within those edges, and the table is printed in docs/api.md ("The
 * withdrawal lifecycle"), kept equal by a test.
 */
import { PENDING_STATES, type WithdrawalState } from '../store/repos/withdrawals.js';

/** What the ledger says about what was sent for a `submitted` withdrawal (withdrawal-truth.ts). */
export type Truth =
  | {
      status: 'committed';
      updateId: string;
      outcome?: { submissionId: string; completionOffset: number; updateId: string };
    }
  | { status: 'not-committed' }
  /** `until`: when the last submission that may still commit is past its deadline (ms), if known. */
  | { status: 'unknown'; until?: number };

/** What is known when a line is chosen; each event's facts are gathered by the module that meets it. */
export interface WithdrawalFacts {
  /** `submitted` only: the ledger's truth (completions after the recorded ledger end, submissions' deadlines). */
  truth?: Truth;
  /** The withdrawal's own `executeBefore` has passed. */
  deadlinePassed?: boolean;
  /** An offline signature was imported for it: whether its window still leaves time to submit. */
  offline?: 'open' | 'closed';
  /** What this run sent definitely did not commit, and nothing sent earlier can still commit. */
  definitelyNot?: boolean;
  /** A write of ours failed, or an execute of this run succeeded: what follows is not the ledger's answer. */
  ours?: boolean;
  /** The reason of the refusal a run failed with. */
  refusal?: string;
  /** What the lookup after an ambiguous execute found (`resolved`). */
  resolution?: string;
  /** The status of the withdrawal's approval request (`none`: there is none). */
  request?: string;
}

const PENDING: readonly WithdrawalState[] = PENDING_STATES;
const pendingBut = (...not: WithdrawalState[]) => PENDING.filter((s) => !not.includes(s));
/** Refusals that are not the request's fault: the run is tried again. */
const FOR_NOW = ['outcome_unknown', 'window_closed'];
const refusedForGood = (f: WithdrawalFacts) => f.refusal !== undefined && !FOR_NOW.includes(f.refusal);
const ledgerSays = (f: WithdrawalFacts, s: Truth['status']) => f.truth?.status === s;
const always = () => true;

/**
 * The table, as data. Lines of a state and event are tried in order; the
 * first that holds is taken.
 */
export const WITHDRAWAL_LIFECYCLE = [
  // A worker's run starts: the row as it finds it (a `submitted` one after asking the ledger).
  {
    states: ['submitted'],
    event: 'run',
    when: 'the ledger shows it committed',
    test: (f: WithdrawalFacts) => ledgerSays(f, 'committed'),
    action: 'commit-found',
    next: 'committed',
  },
  {
    states: ['submitted'],
    event: 'run',
    when: 'executeBefore passed; what was sent may still commit',
    test: (f: WithdrawalFacts) => f.deadlinePassed === true && !ledgerSays(f, 'not-committed'),
    action: 'wait-past-deadline',
    next: 'same',
  },
  {
    states: ['received', 'prepared', 'signed', 'submitted'],
    event: 'run',
    when: 'executeBefore passed',
    test: (f: WithdrawalFacts) => f.deadlinePassed === true,
    action: 'expire',
    next: 'expired',
  },
  {
    states: ['signed'],
    event: 'run',
    when: 'nothing was sent (the move to submitted comes before execute)',
    test: always,
    action: 'resume',
    next: 'prepared',
    onward: 'carry',
  },
  {
    states: ['submitted'],
    event: 'run',
    when: 'the ledger shows it definitely not committed',
    test: (f: WithdrawalFacts) => ledgerSays(f, 'not-committed'),
    action: 'resume',
    next: 'prepared',
    onward: 'carry',
  },
  {
    states: ['received', 'prepared', 'submitted'],
    event: 'run',
    when: 'otherwise',
    test: always,
    action: 'go-on',
    next: 'same',
    onward: 'carry',
  },
  // The run sends: the transfer through the one pipeline, or what an offline key signed. A send
  // does not move the row itself: the pipeline's steps (the lines below) do.
  {
    states: ['prepared', 'submitted'],
    event: 'carry',
    when: 'an offline signature was imported and its window is open',
    test: (f: WithdrawalFacts) => f.offline === 'open',
    action: 'submit-offline',
    next: 'same',
  },
  {
    states: ['prepared', 'submitted'],
    event: 'carry',
    when: 'an offline signature was imported but its window closed',
    test: (f: WithdrawalFacts) => f.offline === 'closed',
    action: 'drop-stale-export',
    next: 'same',
    onward: 'carry',
  },
  {
    states: ['received', 'prepared'],
    event: 'carry',
    when: 'otherwise',
    test: always,
    action: 'transfer',
    next: 'same',
  },
  {
    states: ['submitted'],
    event: 'carry',
    when: 'otherwise: the outcome is unknown (same command id, same input holdings)',
    test: always,
    action: 'resubmit',
    next: 'same',
  },
  // Within a send, the pipeline's steps (each written before the pipeline goes on).
  {
    states: ['received', 'prepared'],
    event: 'sign',
    when: 'about to sign',
    test: always,
    action: 'authorise-signing',
    next: 'prepared',
  },
  {
    states: ['submitted'],
    event: 'sign',
    when: 'what this run sent definitely did not commit, nor can anything earlier',
    test: (f: WithdrawalFacts) => f.definitelyNot === true,
    action: 'authorise-signing',
    next: 'prepared',
  },
  {
    states: ['submitted'],
    event: 'sign',
    when: 'otherwise: a resubmission under the same command id',
    test: always,
    action: 'keep-submitted',
    next: 'same',
  },
  {
    states: ['prepared'],
    event: 'signed',
    when: 'the signature was made',
    test: always,
    action: 'record-signature',
    next: 'signed',
  },
  {
    states: ['submitted'],
    event: 'signed',
    when: 'the signature of a resubmission was made',
    test: always,
    action: 'record-resubmission',
    next: 'submitted',
  },
  {
    states: ['signed'],
    event: 'submitted',
    when: 'about to execute (write-ahead)',
    test: always,
    action: 'write-ahead',
    next: 'submitted',
  },
  {
    states: ['submitted'],
    event: 'submitted',
    when: 'about to execute a resubmission',
    test: always,
    action: 'note-ledger-end',
    next: 'same',
  },
  {
    states: ['submitted'],
    event: 'committed',
    when: 'the execute succeeded',
    test: always,
    action: 'record-commit',
    next: 'committed',
  },
  {
    states: ['signed', 'submitted'],
    event: 'rejected',
    when: 'a write of ours failed, or the execute had succeeded: not the ledger’s answer',
    test: (f: WithdrawalFacts) => f.ours === true,
    action: 'none',
    next: 'same',
  },
  {
    states: ['signed', 'submitted'],
    event: 'rejected',
    when: 'otherwise: the ledger refused what this run sent',
    test: always,
    action: 'note-rejection',
    next: 'same',
  },
  {
    states: ['submitted'],
    event: 'resolved',
    when: 'after an ambiguous execute, a rejection completion was found',
    test: (f: WithdrawalFacts) => f.resolution === 'not-committed',
    action: 'note-not-committed',
    next: 'same',
  },
  { states: ['submitted'], event: 'resolved', when: 'otherwise', test: always, action: 'none', next: 'same' },
  // A send that stopped before signing: people must approve it, or its key is across the air gap.
  {
    states: ['received', 'prepared'],
    event: 'needs-approval',
    when: 'the policy asks for approvals',
    test: always,
    action: 'await-approval',
    next: 'awaiting_approval',
  },
  {
    states: ['signed', 'submitted'],
    event: 'needs-approval',
    when: 'what was sent earlier may still commit: it waits as after a failure',
    test: always,
    action: 'none',
    next: 'same',
    onward: 'failed',
  },
  {
    states: ['prepared'],
    event: 'needs-offline-signature',
    when: 'the signing request went across the air gap',
    test: always,
    action: 'await-signature',
    next: 'awaiting_signature',
  },
  {
    states: ['received', 'signed', 'submitted'],
    event: 'needs-offline-signature',
    when: 'otherwise: as after a failure',
    test: always,
    action: 'none',
    next: 'same',
    onward: 'failed',
  },
  // A run that failed: end it only when nothing sent can still commit.
  {
    states: PENDING,
    event: 'failed',
    when: 'a write of ours failed, or the execute succeeded and its commit is not recorded',
    test: (f: WithdrawalFacts) => f.ours === true,
    action: 'retry',
    next: 'same',
  },
  {
    states: ['submitted'],
    event: 'failed',
    when: 'the ledger shows it committed',
    test: (f: WithdrawalFacts) => ledgerSays(f, 'committed'),
    action: 'commit-found',
    next: 'committed',
  },
  {
    states: ['submitted'],
    event: 'failed',
    when: 'what was sent may still commit',
    test: (f: WithdrawalFacts) => ledgerSays(f, 'unknown'),
    action: 'wait-for-outcome',
    next: 'same',
  },
  {
    states: ['signed'],
    event: 'failed',
    when: 'executeBefore passed, or refused for good (nothing was sent)',
    test: (f: WithdrawalFacts) => f.deadlinePassed === true || refusedForGood(f),
    action: 'unsign',
    next: 'prepared',
    onward: 'failed',
  },
  {
    states: pendingBut('signed'),
    event: 'failed',
    when: 'executeBefore passed',
    test: (f: WithdrawalFacts) => f.deadlinePassed === true,
    action: 'expire',
    next: 'expired',
  },
  {
    states: PENDING,
    event: 'failed',
    when: 'refused: outcome_unknown',
    test: (f: WithdrawalFacts) => f.refusal === 'outcome_unknown',
    action: 'wait-for-outcome',
    next: 'same',
  },
  {
    states: PENDING,
    event: 'failed',
    when: 'refused: window_closed (every preparation went stale: the network, not the request)',
    test: (f: WithdrawalFacts) => f.refusal === 'window_closed',
    action: 'retry-stale',
    next: 'same',
  },
  {
    states: pendingBut('signed'),
    event: 'failed',
    when: 'refused',
    test: (f: WithdrawalFacts) => f.refusal !== undefined,
    action: 'reject',
    next: 'rejected',
  },
  { states: PENDING, event: 'failed', when: 'otherwise', test: always, action: 'retry', next: 'same' },
  // Approvals by people (withdrawal-approval.ts).
  {
    states: ['awaiting_approval'],
    event: 'answered',
    when: 'executeBefore passed before the request was approved',
    test: (f: WithdrawalFacts) => f.deadlinePassed === true && f.request !== 'approved',
    action: 'close-expired',
    next: 'expired',
  },
  {
    states: ['awaiting_approval'],
    event: 'answered',
    when: 'no request (never opened, or removed), or superseded: decide again',
    test: (f: WithdrawalFacts) => f.request === 'none' || f.request === 'superseded',
    action: 'approve',
    next: 'prepared',
  },
  {
    states: ['awaiting_approval'],
    event: 'answered',
    when: 'approved',
    test: (f: WithdrawalFacts) => f.request === 'approved',
    action: 'approve',
    next: 'prepared',
  },
  {
    states: ['awaiting_approval'],
    event: 'answered',
    when: 'rejected',
    test: (f: WithdrawalFacts) => f.request === 'rejected',
    action: 'end-rejected',
    next: 'rejected',
  },
  {
    states: ['awaiting_approval'],
    event: 'answered',
    when: 'the request expired',
    test: (f: WithdrawalFacts) => f.request === 'expired',
    action: 'end-expired',
    next: 'expired',
  },
  {
    states: ['awaiting_approval'],
    event: 'answered',
    when: 'the request was cancelled',
    test: (f: WithdrawalFacts) => f.request === 'cancelled',
    action: 'end-cancelled',
    next: 'cancelled',
  },
  {
    states: ['awaiting_approval'],
    event: 'answered',
    when: 'otherwise',
    test: always,
    action: 'none',
    next: 'same',
  },
  // A key held offline (withdrawal-air-gap.ts).
  {
    states: ['awaiting_signature'],
    event: 'imported',
    when: 'the offline signature came back',
    test: always,
    action: 'resume-imported',
    next: 'prepared',
  },
  {
    states: ['awaiting_signature'],
    event: 'stale',
    when: 'the export’s window closed before the signature came back',
    test: always,
    action: 'reexport',
    next: 'prepared',
  },
  {
    states: ['awaiting_signature'],
    event: 'unexported',
    when: 'no export is in play (it went stale meanwhile)',
    test: always,
    action: 'reexport',
    next: 'prepared',
  },
  // The worker gives up (withdrawal.ts), the caller cancels (store/repos/withdrawals.ts `cancel`).
  {
    states: ['received', 'prepared', 'signed'],
    event: 'give-up',
    when: 'errors before anything was submitted, or the network away too long',
    test: always,
    action: 'give-up',
    next: 'failed',
  },
  {
    states: ['received', 'awaiting_signature', 'awaiting_approval'],
    event: 'cancel',
    when: 'signing has not started',
    test: always,
    action: 'cancel',
    next: 'cancelled',
  },
  {
    states: ['cancelled'],
    event: 'cancel',
    when: 'already cancelled',
    test: always,
    action: 'none',
    next: 'same',
  },
] as const satisfies readonly LifecycleLine[];

export interface LifecycleLine {
  states: readonly WithdrawalState[];
  event: string;
  when: string;
  test: (f: WithdrawalFacts) => boolean;
  action: string;
  next: WithdrawalState | 'same';
  /** The row goes on under this event after the action (see the header). */
  onward?: string;
}

type Line = (typeof WITHDRAWAL_LIFECYCLE)[number];
export type WithdrawalEvent = Line['event'];
/** The actions of the lines of `E`: what a module meeting `E` must implement. */
export type ActionOf<E extends WithdrawalEvent> = Extract<Line, { event: E }>['action'];
export type WithdrawalLine = LifecycleLine & { event: WithdrawalEvent; onward?: WithdrawalEvent };

/** The line the table takes for a row in `state` meeting `event`; undefined when it has none. */
export function lineFor(
  state: WithdrawalState,
  event: WithdrawalEvent,
  facts: WithdrawalFacts = {},
): WithdrawalLine | undefined {
  for (const line of WITHDRAWAL_LIFECYCLE as readonly WithdrawalLine[])
    if (line.event === event && line.states.includes(state) && line.test(facts)) return line;
  return undefined;
}

/** The states that have a line for `event` (whatever the facts). */
export function statesOf(event: WithdrawalEvent): WithdrawalState[] {
  const out = new Set<WithdrawalState>();
  for (const line of WITHDRAWAL_LIFECYCLE as readonly WithdrawalLine[])
    if (line.event === event) for (const s of line.states) out.add(s);
  return [...out];
}

/**
 * How a module runs its events: what it knows for an event (the row's state
 * and the facts, or an outcome when there is nothing to look up), and its
 * actions by name (an action's result ends the drive; `undefined` goes on
 * with the line's `onward`).
 */
export interface Machine<E extends WithdrawalEvent, R> {
  look(event: E): Promise<{ state: WithdrawalState; facts: WithdrawalFacts } | { outcome: R }>;
  /** The row's state after an action (it may have moved it). */
  state(): WithdrawalState;
  actions: { [A in ActionOf<E>]: (line: WithdrawalLine, facts: WithdrawalFacts) => Promise<R | undefined> };
}

/** Runs the table from `event`: line, action, and on along `onward` until an action gives a result. */
export async function drive<E extends WithdrawalEvent, R>(event: E, m: Machine<E, R>): Promise<R> {
  const seen = await m.look(event);
  if ('outcome' in seen) return seen.outcome;
  let { state, facts } = seen;
  for (let e: E = event; ; ) {
    const line = lineFor(state, e, facts);
    if (!line) throw new Error(`the withdrawal lifecycle has no line for ${state} on ${e}`);
    const out = await m.actions[line.action as ActionOf<E>](line, facts);
    if (out !== undefined || line.onward === undefined) return out as R;
    if (line.onward === e) state = m.state();
    else {
      e = line.onward as E;
      const again = await m.look(e);
      if ('outcome' in again) return again.outcome;
      ({ state, facts } = again);
    }
  }
}

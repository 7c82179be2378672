import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  drive,
  lineFor,
  type Machine,
  WITHDRAWAL_LIFECYCLE,
  type WithdrawalEvent,
  type WithdrawalLine,
} from '../../src/flows/withdrawal-lifecycle.js';
import { isTerminal } from '../../src/flows/withdrawal-run.js';
import {
  CANCELLABLE_STATES,
  canTransition,
  WITHDRAWAL_EDGES,
  WITHDRAWAL_STATES,
  type WithdrawalState,
} from '../../src/store/repos/withdrawals.js';

const LINES = WITHDRAWAL_LIFECYCLE as readonly WithdrawalLine[];

/** The table as docs/api.md prints it: the rows under "## The withdrawal lifecycle". */
function printed(): string[][] {
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const from = doc.indexOf('\n## The withdrawal lifecycle\n');
  expect(from).toBeGreaterThan(0);
  const section = doc.slice(from + 1).split(/\n## /)[0] as string;
  return section
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| states |'))
    .map((l) =>
      l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
}

/**
 * Edges of the store's state machine no line takes. Kept in the store (and its trigger) for
 * schema compatibility; a new line or a new edge must decide here.
 */
const UNTAKEN = ['prepared → cancelled', 'awaiting_signature → failed', 'awaiting_approval → failed'];

describe('the withdrawal lifecycle table', () => {
  it('is printed in docs/api.md line for line', () => {
    expect(printed()).toEqual(
      LINES.map((l) => [l.states.join(', '), l.event, l.when, l.action, l.next, l.onward ?? '']),
    );
  });

  it('moves only along the edges the store and its trigger allow, and takes every edge but the documented ones', () => {
    const taken = new Set<string>();
    for (const l of LINES)
      for (const s of l.states) {
        expect(WITHDRAWAL_STATES).toContain(s);
        if (l.next === 'same') continue;
        expect(canTransition(s, l.next), `${s} → ${l.next} (${l.event}: ${l.when})`).toBe(true);
        taken.add(`${s} → ${l.next}`);
      }
    const edges = Object.entries(WITHDRAWAL_EDGES).flatMap(([from, tos]) =>
      tos.map((to) => `${from} → ${to}`),
    );
    expect(edges.filter((e) => !taken.has(e))).toEqual(UNTAKEN);
  });

  it('cancels from exactly the states the store cancels from', () => {
    const cancel = LINES.find((l) => l.event === 'cancel' && l.next === 'cancelled');
    expect([...(cancel?.states ?? [])].sort()).toEqual([...CANCELLABLE_STATES].sort());
  });

  it('has nothing for a finished withdrawal to do, and finished means no way out in the store', () => {
    for (const s of WITHDRAWAL_STATES) expect(isTerminal(s), s).toBe(WITHDRAWAL_EDGES[s].length === 0);
    for (const l of LINES)
      if (l.event !== 'cancel')
        for (const s of l.states) expect(isTerminal(s), `${l.event}: ${s}`).toBe(false);
  });

  it('has a line for every state of an event whatever is known (an "otherwise" closes each)', () => {
    const events = [...new Set(LINES.map((l) => l.event))];
    for (const e of events)
      for (const s of new Set(LINES.filter((l) => l.event === e).flatMap((l) => l.states)))
        expect(lineFor(s, e, {}), `${s} on ${e}`).toBeDefined();
  });

  it('never ends a submitted withdrawal while what was sent may still commit', () => {
    const unknown = { truth: { status: 'unknown' as const } };
    expect(lineFor('submitted', 'run', { ...unknown, deadlinePassed: true })?.action).toBe(
      'wait-past-deadline',
    );
    expect(lineFor('submitted', 'failed', { ...unknown, refusal: 'policy_denied' })?.action).toBe(
      'wait-for-outcome',
    );
    // definitely not committed: the deadline ends it, a refusal rejects it
    const not = { truth: { status: 'not-committed' as const } };
    expect(lineFor('submitted', 'run', { ...not, deadlinePassed: true })?.next).toBe('expired');
    expect(lineFor('submitted', 'failed', { ...not, refusal: 'policy_denied' })?.next).toBe('rejected');
    // a resubmission stays submitted unless the ledger said this run's submission failed and nothing is open
    expect(lineFor('submitted', 'sign', {})?.next).toBe('same');
    expect(lineFor('submitted', 'sign', { definitelyNot: true })?.next).toBe('prepared');
    // our own failure, or an execute that succeeded, is never taken for the ledger's answer
    expect(lineFor('submitted', 'failed', { ours: true, refusal: 'policy_denied' })?.action).toBe('retry');
    expect(lineFor('submitted', 'rejected', { ours: true })?.action).toBe('none');
  });

  it('parks for approvals and the air gap only before anything was signed', () => {
    expect(lineFor('prepared', 'needs-approval')?.next).toBe('awaiting_approval');
    expect(lineFor('submitted', 'needs-approval')?.onward).toBe('failed');
    expect(lineFor('prepared', 'needs-offline-signature')?.next).toBe('awaiting_signature');
    expect(lineFor('submitted', 'needs-offline-signature')?.onward).toBe('failed');
    expect(lineFor('submitted', 'carry', { offline: 'open' })?.action).toBe('submit-offline');
    expect(lineFor('received', 'carry', { offline: 'open' })?.action).toBe('transfer');
  });
});

describe('the interpreter', () => {
  /** A machine that records the actions it is asked for, moving its state as the lines say. */
  function recording(start: WithdrawalState, facts: Parameters<typeof lineFor>[2]) {
    let state = start;
    const taken: string[] = [];
    const act = async (line: WithdrawalLine) => {
      taken.push(line.action);
      if (line.next !== 'same') state = line.next;
      return line.onward !== undefined ? undefined : `${line.action} → ${state}`;
    };
    const actions = new Proxy({}, { get: () => act }) as Machine<WithdrawalEvent, string>['actions'];
    const m: Machine<WithdrawalEvent, string> = {
      look: async () => ({ state, facts: { ...facts } }),
      state: () => state,
      actions,
    };
    return { m, taken };
  }

  it('follows a line on to its next event: a signed withdrawal refused for good goes back to prepared, then is rejected', async () => {
    const { m, taken } = recording('signed', { refusal: 'policy_denied' });
    expect(await drive('failed', m)).toBe('reject → rejected');
    expect(taken).toEqual(['unsign', 'reject']);
  });

  it('looks again under another event: a resumed withdrawal is carried', async () => {
    const { m, taken } = recording('signed', {});
    expect(await drive('run', m)).toBe('transfer → prepared');
    expect(taken).toEqual(['resume', 'transfer']);
  });

  it('stops at a state the table has no line for', async () => {
    const { m } = recording('committed', {});
    await expect(drive('failed', m)).rejects.toThrow(/no line for committed on failed/);
  });
});

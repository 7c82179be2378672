/**
 * Reading the completion stream to its end (src/flows/ledger.ts
 * `scanCompletions`): a commit found on a later page, a stream read to its end
 * without one (complete: a definite "not there"), and a stream that cannot be
 * read to its end (incomplete: unknown, never "not there").
 */
import { describe, expect, it } from 'vitest';
import type { CompletionStreamResponse } from '../../src/canton/ledger-api/schemas.js';
import type { FlowContext } from '../../src/flows/context.js';
import { lookupCompletion, scanCompletions } from '../../src/flows/ledger.js';

const PARTY = 'alice::1220aa';
const completion = (offset: number, commandId: string, code = 0, submissionId = `s-${offset}`) =>
  ({
    completionResponse: {
      Completion: {
        value: {
          commandId,
          submissionId,
          offset,
          userId: 'u',
          actAs: [PARTY],
          updateId: `upd-${offset}`,
          ...(code === 0 ? {} : { status: { code, message: 'rejected', details: [] } }),
        },
      },
    },
  }) as unknown as CompletionStreamResponse;

/** A participant whose stream holds `all` and answers pages of `limit` after `beginExclusive`. */
function participant(all: CompletionStreamResponse[], opts: { stuck?: boolean; idleMs?: number } = {}) {
  const calls: number[] = [];
  const idle: (number | undefined)[] = [];
  const ctx = {
    userId: 'u',
    ...(opts.idleMs !== undefined ? { completionIdleMs: opts.idleMs } : {}),
    ledger: {
      async completions(req: { beginExclusive: number }, o: { limit: number; streamIdleTimeoutMs?: number }) {
        calls.push(req.beginExclusive);
        idle.push(o.streamIdleTimeoutMs);
        if (opts.stuck) return all.slice(0, o.limit); // ignores the offset: never moves on
        return all
          .filter((c) => {
            const r = c.completionResponse as { Completion: { value: { offset: number } } };
            return r.Completion.value.offset > req.beginExclusive;
          })
          .slice(0, o.limit);
      },
    },
  } as unknown as FlowContext;
  return { ctx, calls, idle };
}

const others = (from: number, n: number) =>
  Array.from({ length: n }, (_, i) => completion(from + i, `other-${i}`));

describe('scanCompletions', () => {
  it('finds a commit beyond the first page', async () => {
    const p = participant([...others(1, 1000), ...others(1001, 499), completion(1500, 'mine')]);
    const scan = await scanCompletions(p.ctx, { party: PARTY, commandId: 'mine', beginExclusive: 0 });
    expect(scan.committed).toMatchObject({
      updateId: 'upd-1500',
      completionOffset: 1500,
      submissionId: 's-1500',
    });
    expect(p.calls).toEqual([0, 1000]);
  });

  it('a stream read to its end without the command: complete, with the rejections it saw', async () => {
    const p = participant([...others(1, 1000), completion(1001, 'mine', 9, 'first'), ...others(1002, 10)]);
    const scan = await scanCompletions(p.ctx, { party: PARTY, commandId: 'mine', beginExclusive: 0 });
    expect(scan.committed).toBeUndefined();
    expect(scan.complete).toBe(true);
    expect([...scan.rejected]).toEqual(['first']);
    const of = (submissionId: string) =>
      lookupCompletion(p.ctx, { party: PARTY, commandId: 'mine', beginExclusive: 0, submissionId });
    expect(await of('first')).toEqual({ status: 'not-committed' });
    expect(await of('later')).toEqual({ status: 'unknown' });
  });

  it('a stream that does not move past a full page is incomplete: unknown, not "not there"', async () => {
    const p = participant(others(1, 1000), { stuck: true });
    const scan = await scanCompletions(p.ctx, { party: PARTY, commandId: 'mine', beginExclusive: 0 });
    expect(scan.complete).toBe(false);
    expect(scan.committed).toBeUndefined();
  });

  it('waits 1.5 s for more by default on each page, or what the context says', async () => {
    const stream = [...others(1, 1000), completion(1001, 'mine')];
    const byDefault = participant(stream);
    await scanCompletions(byDefault.ctx, { party: PARTY, commandId: 'mine', beginExclusive: 0 });
    expect(byDefault.idle).toEqual([1500, 1500]);
    const set = participant(stream, { idleMs: 250 });
    await scanCompletions(set.ctx, { party: PARTY, commandId: 'mine', beginExclusive: 0 });
    expect(set.idle).toEqual([250, 250]);
  });
});

/**
 * The withdrawal engine (src/flows/withdrawal.ts, withdrawal-run.ts) against
 * the sandbox with a PGlite store: withdrawals reach committed with exactly
 * one ledger transaction and the evidence recorded; several from one party;
 * a tampered preparation rejected, never signed; an ambiguous execute
 * committed once; a run interrupted after each durable step resumed by the
 * next run to exactly one transaction; cancellation; two workers sharing the
 * store never carry one withdrawal twice; expiry; giving up after errors; a
 * submission whose outcome is unknown keeps its withdrawal `submitted` through
 * later refusals, a rejection the participant reports and its deadline until
 * its commit deadline has passed, and its next try spends the same holdings;
 * unless a holding it spends was consumed: by another command (prepared
 * again at once) or by its own (committed);
 * a worker whose lease was taken moves nothing, sends nothing and records no
 * preparation.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { FlowContext } from '../../src/flows/context.js';
import { listHoldings, toUnits } from '../../src/flows/holdings.js';
import { transfer } from '../../src/flows/transfer.js';
import { createWithdrawalWorker, type WithdrawalWorkerOptions } from '../../src/flows/withdrawal.js';
import { type RunOutcome, runWithdrawal, type WithdrawalPoint } from '../../src/flows/withdrawal-run.js';
import { ledgerTruth, pinnedInputs } from '../../src/flows/withdrawal-truth.js';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { encodePreparedTransaction } from '../../src/hashing/encode.js';
import { base64ToBytes } from '../../src/hashing/input.js';
import { fromUnits } from '../../src/intent/decimal.js';
import { recogniseActions } from '../../src/intent/recognise.js';
import { listAudit } from '../../src/store/audit.js';
import { LeaseLostError, WithdrawalStateError } from '../../src/store/errors.js';
import { type Store, storeOn } from '../../src/store/index.js';
import type { PartyRecord } from '../../src/store/parties.js';
import type { Withdrawal, WithdrawalState } from '../../src/store/repos/withdrawals.js';
import { ambiguousExecute, type FlowEnv, flowEnv, hostParty } from '../support/flow-env.js';
import { createPostgresDatabase, pgliteDriver, requirePostgres } from '../support/pg.js';

let env: FlowEnv;
let store: Store;
let ctx: FlowContext;
let alice: PartyRecord;
let bob: PartyRecord;
const driver = pgliteDriver();

beforeAll(async () => {
  env = await flowEnv({ seed: 'withdrawal-engine' });
  store = storeOn(await driver.fresh(), 'test');
  ctx = { ...env.ctx, parties: store.parties, recorder: store.recorder };
  alice = await hostParty(env.net, env.signer, store.parties, 'alice', { label: 'wd-alice', fund: '10000' });
  bob = await hostParty(env.net, env.signer, store.parties, 'bob', { label: 'wd-bob' });
}, 60_000);
afterAll(async () => {
  await env?.close();
  await driver.cleanup();
});
beforeEach(() => env.reset());

const updatesOf = (commandId: string) => env.net.store.updates().filter((u) => u.commandId === commandId);
const TERMINAL: WithdrawalState[] = ['committed', 'rejected', 'failed', 'cancelled', 'expired'];

async function create(amount: string, extra: Withdrawal['options'] = {}): Promise<Withdrawal> {
  const { withdrawal } = await store.withdrawals.create({
    idempotencyKey: randomUUID(),
    caller: 'bot',
    body: {
      party: alice.partyId,
      receiver: bob.partyId,
      amount,
      ...(Object.keys(extra).length ? { options: extra } : {}),
    },
  });
  return withdrawal;
}

function worker(o: Partial<WithdrawalWorkerOptions> = {}) {
  return createWithdrawalWorker({ ctx, store, pollMs: 50, retryMs: 20, leaseMs: 5000, ...o });
}

async function settled(id: string, timeoutMs = 20_000): Promise<Withdrawal> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const w = await store.withdrawals.get(id);
    if (w && TERMINAL.includes(w.state)) return w;
    if (Date.now() > end) throw new Error(`withdrawal ${id} still ${w?.state} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function locked(p: PartyRecord): Promise<bigint> {
  const hs = await listHoldings(env.ctx, p.partyId);
  return hs.filter((h) => h.locked).reduce((a, h) => a + toUnits(h.amount), 0n);
}

describe('withdrawal worker', () => {
  it('carries a withdrawal to committed: one transaction, evidence and audit recorded', async () => {
    const l0 = await locked(alice);
    const w = await create('12.5');
    const wk = worker();
    await wk.start();
    const done = await settled(w.id);
    await wk.stop();
    expect(done.state).toBe('committed');
    const ups = updatesOf(w.commandId);
    expect(ups).toHaveLength(1);
    expect(done.updateId).toBe(ups[0]!.updateId);
    expect(done.attempts).toBe(1);
    // bob has no preapproval: the amount is locked in an offer
    expect(fromUnits((await locked(alice)) - l0)).toBe(fromUnits(toUnits('12.5')));
    const prepared = await store.artifacts.preparedFor(w.id);
    const sigs = await store.artifacts.signaturesFor(w.id);
    const subs = await store.artifacts.submissionsFor(w.commandId);
    expect(prepared).toHaveLength(1);
    expect(sigs.map((s) => s.hash)).toEqual([prepared[0]!.hash]);
    expect(subs.map((s) => [s.outcome, s.updateId])).toEqual([['committed', done.updateId]]);
    // the ledger end recorded as read before the submission does precede its completion
    expect(subs[0]!.ledgerEndBefore).toBeTypeOf('number');
    expect(subs[0]!.ledgerEndBefore!).toBeLessThan(subs[0]!.completionOffset!);
    expect(await store.withdrawals.lookupFrom(w.id)).toBe(subs[0]!.ledgerEndBefore);
    const actions = (await listAudit(store.db, { subject: `withdrawal:${w.id}` })).map((a) => a.action);
    expect(actions).toEqual([
      'withdrawal.create',
      'withdrawal.prepared',
      'flow.signed',
      'withdrawal.signed',
      'flow.submitted',
      'withdrawal.submitted',
      'flow.committed',
      'withdrawal.committed',
    ]);
  });

  it('several withdrawals of one party at once: each committed exactly once', async () => {
    const ws = await Promise.all(['1', '2', '3', '4'].map((a) => create(a)));
    const wk = worker({ concurrency: 4 });
    await wk.start();
    for (const w of ws) wk.kick(w.id);
    const done = await Promise.all(ws.map((w) => settled(w.id, 30_000)));
    await wk.stop();
    expect(done.map((d) => d.state)).toEqual(['committed', 'committed', 'committed', 'committed']);
    for (const w of ws) expect(updatesOf(w.commandId)).toHaveLength(1);
  });

  it('a tampered preparation: rejected with the refusal reason, never signed, nothing on the ledger', async () => {
    env.sb.ctx.faults.inject({
      fault: { kind: 'tamper', change: 'receiver', hash: 'tampered' },
      operation: 'ledger-api.prepare',
      times: 1,
    });
    const sign = vi.spyOn(env.signer, 'sign');
    const w = await create('3');
    const wk = worker();
    await wk.start();
    const done = await settled(w.id);
    await wk.stop();
    expect(done.state).toBe('rejected');
    expect(done.lastError).toMatch(/^intent_mismatch: /);
    expect(sign).not.toHaveBeenCalled();
    expect(await store.artifacts.signaturesFor(w.id)).toEqual([]);
    expect(updatesOf(w.commandId)).toEqual([]);
  });

  it('an ambiguous execute (timeout after commit): committed once', async () => {
    const amb = ambiguousExecute(env);
    const sign = vi.spyOn(env.signer, 'sign');
    const w = await create('4');
    const wk = createWithdrawalWorker({
      ctx: { ...ctx, ledger: amb.ledger },
      store,
      pollMs: 50,
      retryMs: 20,
    });
    await wk.start();
    const done = await settled(w.id);
    await wk.stop();
    expect(done.state).toBe('committed');
    expect(sign).toHaveBeenCalledTimes(1);
    expect(updatesOf(w.commandId)).toHaveLength(1);
    expect(done.updateId).toBe(updatesOf(w.commandId)[0]!.updateId);
  });

  const points: WithdrawalPoint[] = ['received', 'prepared', 'signed', 'submitted', 'executed'];
  for (const point of points)
    it(`interrupted after "${point}": the next run resumes it to exactly one transaction`, async () => {
      const w = await create('2');
      let fired = 0;
      const wk = worker({
        at: (p) => {
          if (p === point && fired++ === 0) throw new Error(`interrupted at ${p}`);
        },
      });
      await wk.start();
      const done = await settled(w.id, 30_000);
      await wk.stop();
      expect(fired).toBeGreaterThanOrEqual(1);
      expect(done.state).toBe('committed');
      expect(updatesOf(w.commandId)).toHaveLength(1);
      expect(done.updateId).toBe(updatesOf(w.commandId)[0]!.updateId);
      // the execute that succeeded has its outcome on its submission record, also when the run
      // stopped before the move to committed
      const subs = await store.artifacts.submissionsFor(w.commandId);
      expect(subs.filter((s) => s.outcome === 'committed').map((s) => s.updateId)).toEqual([done.updateId]);
    });

  it('cancelled before signing: never signed, nothing submitted', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const w = await create('5');
    const wk = worker({
      at: async (p, x) => {
        if (p === 'received' && x.id === w.id) await store.withdrawals.cancel(w.id, { actor: 'test' });
      },
    });
    await wk.start();
    const done = await settled(w.id);
    await wk.stop();
    expect(done.state).toBe('cancelled');
    expect(sign).not.toHaveBeenCalled();
    expect(await store.artifacts.submissionsFor(w.commandId)).toEqual([]);
    expect(updatesOf(w.commandId)).toEqual([]);
  });

  it('a cancel after the move that authorises signing (prepared) is refused: signing goes on', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const w = await create('5');
    let answer: unknown;
    const wk = worker({
      at: async (p, x) => {
        if (p === 'prepared' && x.id === w.id)
          answer = await store.withdrawals.cancel(w.id, { actor: 'test' }).catch((e: unknown) => e);
      },
    });
    await wk.start();
    const done = await settled(w.id);
    await wk.stop();
    expect(answer).toBeInstanceOf(WithdrawalStateError);
    expect((answer as WithdrawalStateError).code).toBe('invalid_state');
    expect((answer as WithdrawalStateError).message).toMatch(/too late to cancel .*signing has started/);
    expect(done.state).toBe('committed');
    expect(sign).toHaveBeenCalledTimes(1);
    expect(updatesOf(w.commandId)).toHaveLength(1);
    const trail = (await listAudit(store.db, { subject: `withdrawal:${w.id}` })).map((a) => a.action);
    expect(trail).not.toContain('withdrawal.cancelled');
  });

  it("a party's queued withdrawals do not hold every slot: another party's starts meanwhile", async () => {
    const carol = await hostParty(env.net, env.signer, store.parties, 'carol', {
      label: 'wd-carol',
      fund: '1000',
    });
    const a = await Promise.all(['2.1', '2.2', '2.3'].map((x) => create(x)));
    const { withdrawal: c } = await store.withdrawals.create({
      idempotencyKey: randomUUID(),
      caller: 'bot',
      body: { party: carol.partyId, receiver: bob.partyId, amount: '2.4' },
    });
    const events: string[] = [];
    const name = (id: string) => (id === c.id ? 'c' : `a${a.findIndex((x) => x.id === id) + 1}`);
    const wk = worker({
      concurrency: 2,
      pollMs: 60_000,
      at: async (p, x) => {
        events.push(`${name(x.id)}:${p}`);
        // The first of alice's holds its slot a while: carol's must not wait for it.
        if (p === 'received' && x.id === a[0]!.id) await new Promise((r) => setTimeout(r, 300));
      },
    });
    await wk.start();
    for (const w of a) wk.kick(w.id, alice.partyId);
    wk.kick(c.id, carol.partyId);
    const done = await Promise.all([...a, c].map((w) => settled(w.id, 30_000)));
    await wk.stop();
    expect(done.every((d) => d.state === 'committed')).toBe(true);
    expect(events.indexOf('c:received')).toBeGreaterThan(-1);
    expect(events.indexOf('c:received')).toBeLessThan(events.indexOf('a1:prepared'));
  });

  it('two workers on one store: every withdrawal carried once', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const ws = await Promise.all(['1.1', '1.2', '1.3', '1.4'].map((a) => create(a)));
    const a = worker({ owner: 'worker-a' });
    const b = worker({ owner: 'worker-b' });
    await Promise.all([a.start(), b.start()]);
    for (const w of ws) {
      a.kick(w.id);
      b.kick(w.id);
    }
    const done = await Promise.all(ws.map((w) => settled(w.id, 30_000)));
    await Promise.all([a.stop(), b.stop()]);
    expect(done.every((d) => d.state === 'committed')).toBe(true);
    for (const w of ws) expect(updatesOf(w.commandId)).toHaveLength(1);
    expect(sign).toHaveBeenCalledTimes(ws.length);
  });

  it('a lease held by another instance is respected until it expires', async () => {
    const w = await create('1');
    expect(await store.withdrawals.claim(w.id, 'other', 60_000)).toBeDefined();
    expect(await store.withdrawals.claim(w.id, 'mine', 60_000)).toBeUndefined();
    await store.withdrawals.releaseLease(w.id, 'other');
    expect(await store.withdrawals.claim(w.id, 'mine', 60_000)).toBeDefined();
    await store.withdrawals.releaseLease(w.id, 'mine');
    await store.withdrawals.cancel(w.id);
  });

  it('expires a withdrawal whose executeBefore passed', async () => {
    const w = await create('1', { executeBefore: new Date(Date.now() - 1000).toISOString() });
    const wk = worker();
    await wk.start();
    const done = await settled(w.id);
    await wk.stop();
    expect(done.state).toBe('expired');
    expect(updatesOf(w.commandId)).toEqual([]);
  });

  it('gives up (failed) after repeated errors before submission', async () => {
    vi.spyOn(env.ledger, 'prepare').mockRejectedValue(new Error('participant down'));
    const w = await create('1');
    const wk = worker({ maxErrors: 3 });
    await wk.start();
    const done = await settled(w.id);
    await wk.stop();
    expect(done.state).toBe('failed');
    // An unexpected error's own text stays in the service log: callers see its kind only.
    expect(done.lastError).toContain('internal error (Error)');
    expect(done.lastError).not.toContain('participant down');
    expect(updatesOf(w.commandId)).toEqual([]);
  });
});

describe('a submission whose outcome is unknown', () => {
  /** The execute request is lost (503 before the node acted): the outcome is unknown to the service. */
  const loseExecute = () =>
    env.sb.ctx.faults.inject({
      fault: { kind: 'status', status: 503 },
      operation: 'ledger-api.executeAndWait',
      times: 1,
    });
  const tamperPrepare = () =>
    env.sb.ctx.faults.inject({
      fault: { kind: 'tamper', change: 'receiver', hash: 'tampered' },
      operation: 'ledger-api.prepare',
      times: 1,
    });
  /** As if the submitted transactions' windows (and the tolerances after them) had passed. */
  const windowsClosed = (commandId: string) =>
    store.db.query(
      `UPDATE submissions SET commit_deadline = now() - interval '1 hour' WHERE command_id = $1`,
      [commandId],
    );
  const run = (w: Withdrawal) => runWithdrawal({ ctx, store }, w);
  const now = async (id: string) => (await store.withdrawals.get(id))!;

  it('is recorded with its window, and the withdrawal stays submitted', async () => {
    loseExecute();
    const w = await create('1');
    const r = await run(w);
    expect(r.done).toBe(false);
    expect((await now(w.id)).state).toBe('submitted');
    const [sub, ...more] = await store.artifacts.submissionsFor(w.commandId);
    expect(more).toEqual([]);
    expect(sub?.outcome).toBe('ambiguous');
    // the transfer's own executeBefore (or an earlier bound) closes it, in the future
    expect(Date.parse(sub?.commitDeadline ?? '')).toBeGreaterThan(Date.now());
    await windowsClosed(w.commandId);
    expect((await run(await now(w.id))).done).toBe(true);
    expect((await now(w.id)).state).toBe('committed');
    expect(updatesOf(w.commandId)).toHaveLength(1);
  });

  it('a later run that is refused does not reject it while the submission may still commit; once its window closed, it does', async () => {
    loseExecute();
    const w = await create('1');
    await run(w);
    tamperPrepare();
    const second = await run(await now(w.id));
    expect(second.done).toBe(false);
    const kept = await now(w.id);
    expect(kept.state).toBe('submitted');
    expect(kept.lastError).toMatch(/^intent_mismatch: /);
    // the window of what was sent has closed and the completions show no commit: now it can end
    await windowsClosed(w.commandId);
    tamperPrepare();
    const third = await run(kept);
    expect(third).toEqual({ done: true, state: 'rejected' });
    expect(updatesOf(w.commandId)).toEqual([]);
  });

  it('its deadline passing does not expire it while the submission may still commit', async () => {
    loseExecute();
    const w = await create('1', { executeBefore: new Date(Date.now() + 1500).toISOString() });
    await run(w);
    expect((await now(w.id)).state).toBe('submitted');
    await new Promise((r) => setTimeout(r, 1600));
    const waiting = await run(await now(w.id));
    expect(waiting.done).toBe(false);
    expect(waiting.done === false && waiting.reason).toMatch(
      /executeBefore passed; a submission may still commit until/,
    );
    expect((await now(w.id)).state).toBe('submitted');
    // What it shows is why it still waits now, not the error of the earlier run.
    expect((await now(w.id)).lastError).toBe(waiting.done === false && waiting.reason);
    await windowsClosed(w.commandId);
    expect(await run(await now(w.id))).toEqual({ done: true, state: 'expired' });
    expect(updatesOf(w.commandId)).toEqual([]);
  });

  it('a rejection the participant reports does not end it before its commit deadline; the next try spends the same holdings', async () => {
    // A definite "no" (back-pressure, 429) from the participant: its word, not the synchronizer's.
    env.sb.ctx.faults.inject({
      fault: { kind: 'status', status: 429 },
      operation: 'ledger-api.executeAndWait',
      times: 1,
    });
    const w = await create('1');
    expect((await run(w)).done).toBe(false);
    expect((await now(w.id)).state).toBe('submitted');
    expect((await store.artifacts.submissionsFor(w.commandId)).map((x) => x.outcome)).toEqual(['rejected']);
    // A new small holding that covers the amount: a fresh selection (smallest that covers) would
    // take it instead.
    env.net.tap(alice.partyId, '5');
    expect(await run(await now(w.id))).toEqual({ done: true, state: 'committed' });
    const inputsOf = (b64: string) =>
      recogniseActions(decodePreparedTransaction(base64ToBytes(b64, 'prepared')))[0]?.inputs;
    const [first, second, ...more] = await store.artifacts.preparedFor(w.id);
    expect(more).toEqual([]);
    expect(inputsOf(first!.bytes)?.length).toBeGreaterThan(0);
    expect(inputsOf(second!.bytes)).toEqual(inputsOf(first!.bytes));
    expect(updatesOf(w.commandId)).toHaveLength(1);
  });

  it('the holdings its submission spends spent by another transaction of the party: not committed, prepared again at once', async () => {
    loseExecute();
    const w = await create('1');
    expect((await run(w)).done).toBe(false);
    const sent = await now(w.id);
    expect(sent.state).toBe('submitted');
    // Another flow of the same party (another withdrawal, a sweep, a merge) spends those holdings:
    // what was sent for the withdrawal can no longer commit.
    const pinned = (await pinnedInputs({ ctx, store }, sent)) ?? [];
    expect(pinned.length).toBeGreaterThan(0);
    const inputs = (await listHoldings(ctx, alice.partyId)).filter((h) => pinned.includes(h.cid));
    await transfer(ctx, { from: alice.partyId, to: bob.partyId, amount: '0.5', inputs });
    // Its commit deadline is an hour away, yet it does not wait for it: it is prepared anew.
    expect(
      Date.parse((await store.artifacts.submissionsFor(w.commandId))[0]!.commitDeadline!),
    ).toBeGreaterThan(Date.now() + 600_000);
    expect(await run(await now(w.id))).toEqual({ done: true, state: 'committed' });
    expect(updatesOf(w.commandId)).toHaveLength(1);
    const trail = await listAudit(store.db, { subject: `withdrawal:${w.id}` });
    expect(
      trail.some(
        (a) =>
          a.action === 'withdrawal.prepared' &&
          (a.details as { ledger?: string })?.ledger === 'not committed',
      ),
    ).toBe(true);
  });

  it('two withdrawals of one party prepared at once spend the same holding: the one that lost is prepared again at once', async () => {
    // Two instances (or one after a crash) carry two withdrawals of one party: both select the same
    // holding (the smallest that covers the amount) and both are signed before either executes.
    let arrived = 0;
    let release!: () => void;
    const both = new Promise<void>((r) => {
      release = r;
    });
    const ledger = Object.create(ctx.ledger) as FlowContext['ledger'];
    ledger.executeAndWait = async (req, o) => {
      if (++arrived === 2) release();
      await Promise.race([both, new Promise((r) => setTimeout(r, 5000))]);
      return ctx.ledger.executeAndWait(req, o);
    };
    const racing = { ctx: { ...ctx, ledger }, store };
    const [a, b] = await Promise.all([create('1'), create('1')]);
    const first = await Promise.all([runWithdrawal(racing, a!), runWithdrawal(racing, b!)]);
    expect(arrived).toBeGreaterThanOrEqual(2);
    const lost = first[0]!.done ? b! : a!;
    expect(first.filter((r) => r.done)).toEqual([{ done: true, state: 'committed' }]);
    expect((await now(lost.id)).state).toBe('submitted');
    // Its transaction's holding is gone (the other one's command consumed it): not committed, and
    // it does not wait an hour for its commit deadline.
    expect(await run(await now(lost.id))).toEqual({ done: true, state: 'committed' });
    for (const w of [a!, b!]) expect(updatesOf(w.commandId)).toHaveLength(1);
  });

  it('its holdings spent by its own command, the completions not showing it: committed, never prepared again', async () => {
    loseExecute();
    const w = await create('1');
    expect((await run(w)).done).toBe(false);
    const sent = await now(w.id);
    // What was sent reaches the ledger after all (the same command, the same holdings) …
    const pinned = (await pinnedInputs({ ctx, store }, sent)) ?? [];
    const inputs = (await listHoldings(ctx, alice.partyId)).filter((h) => pinned.includes(h.cid));
    const late = await transfer(ctx, {
      from: alice.partyId,
      to: bob.partyId,
      amount: '1',
      inputs,
      commandId: w.commandId,
    });
    // … before the ledger end the withdrawal looks for its completions from (as if that end had been
    // read after the commit): the completions do not show it, the transaction that spent its holdings does.
    await store.db.query('UPDATE withdrawals SET lookup_from = $2 WHERE id = $1', [
      w.id,
      (await ctx.ledger.ledgerEnd()).offset,
    ]);
    expect(await run(await now(w.id))).toEqual({ done: true, state: 'committed' });
    expect((await now(w.id)).updateId).toBe(late.updateId);
    expect(updatesOf(w.commandId)).toHaveLength(1);
  });

  /** A withdrawal sent (outcome unknown) whose pinned holdings another command of the party then spends. */
  async function spentByAnother(): Promise<{ w: Withdrawal; pinned: string[] }> {
    loseExecute();
    const w = await create('1');
    expect((await run(w)).done).toBe(false);
    const sent = await now(w.id);
    const pinned = (await pinnedInputs({ ctx, store }, sent)) ?? [];
    expect(pinned.length).toBeGreaterThan(0);
    // Transactions of the party between the submission and the one that spends the holdings.
    for (let i = 0; i < 3; i++) env.net.tap(alice.partyId, '2');
    const inputs = (await listHoldings(ctx, alice.partyId)).filter((h) => pinned.includes(h.cid));
    await transfer(ctx, { from: alice.partyId, to: bob.partyId, amount: '0.5', inputs });
    return { w, pinned };
  }
  /** `ctx` whose updates reads go through `f`. */
  const withUpdates = (
    f: (read: FlowContext['ledger']['updates']) => FlowContext['ledger']['updates'],
  ): FlowContext => {
    const ledger = Object.create(ctx.ledger) as FlowContext['ledger'];
    ledger.updates = f((req, o) => ctx.ledger.updates(req, o));
    return { ...ctx, ledger };
  };
  /**
   * A run with `c` does not finish: the row stays `submitted`, and every preparation on record
   * spends `pinned` (nothing was prepared with other holdings).
   */
  const waitsOnPinned = async (c: FlowContext, w: Withdrawal, pinned: string[]) => {
    const r = await runWithdrawal({ ctx: c, store }, await now(w.id));
    expect(r.done).toBe(false);
    expect((await now(w.id)).state).toBe('submitted');
    for (const p of await store.artifacts.preparedFor(w.id)) {
      const tx = decodePreparedTransaction(base64ToBytes(p.bytes, 'prepared'));
      expect(recogniseActions(tx)[0]?.inputs).toEqual(pinned);
    }
  };

  for (const hide of ['empty', 'absent'] as const)
    it(`the transaction that spent its holdings shows no command id (${hide}: another user's, another participant's): it waits, nothing prepared with other holdings`, async () => {
      const { w, pinned } = await spentByAnother();
      const hidden = withUpdates(
        (read) => async (req, o) =>
          (await read(req, o)).map((item) => {
            const u = item.update;
            if (!u || !('Transaction' in u)) return item;
            const { commandId: _, ...rest } = u.Transaction.value;
            const value = hide === 'empty' ? { ...rest, commandId: '' } : rest;
            return { ...item, update: { Transaction: { value } } } as typeof item;
          }),
      );
      await waitsOnPinned(hidden, w, pinned);
      expect(updatesOf(w.commandId)).toEqual([]);
    });

  it('the updates read one at a time (pages cut short): the transaction that spent its holdings is still found', async () => {
    const { w } = await spentByAnother();
    let calls = 0;
    const paged = withUpdates((read) => async (req, o) => {
      calls++;
      return read(req, { ...o, limit: 1 });
    });
    expect(await runWithdrawal({ ctx: paged, store }, await now(w.id))).toEqual({
      done: true,
      state: 'committed',
    });
    expect(calls).toBeGreaterThan(3);
    expect(updatesOf(w.commandId)).toHaveLength(1);
  });

  it('an updates read that ends before the ledger end (an empty page): it waits, nothing prepared with other holdings', async () => {
    const { w, pinned } = await spentByAnother();
    const short = withUpdates(() => async () => []);
    await waitsOnPinned(short, w, pinned);
    expect(updatesOf(w.commandId)).toEqual([]);
  });

  it('the updates read failing: it waits, nothing prepared with other holdings', async () => {
    const { w, pinned } = await spentByAnother();
    const failing = withUpdates(() => async () => {
      throw new Error('stream reset');
    });
    await waitsOnPinned(failing, w, pinned);
  });

  it('a holding its recorded preparation names as an input but its transaction never uses, spent by another command: it waits (that transaction may still commit)', async () => {
    loseExecute();
    const w = await create('1');
    expect((await run(w)).done).toBe(false);
    const sent = await now(w.id);
    const pinned = (await pinnedInputs({ ctx, store }, sent)) ?? [];
    expect(pinned.length).toBeGreaterThan(0);
    // Another active holding of the party, which the prepared transaction does not touch.
    env.net.tap(alice.partyId, '2');
    const other = (await listHoldings(ctx, alice.partyId)).find((h) => !pinned.includes(h.cid) && !h.locked);
    expect(other).toBeDefined();
    // A registry whose transfer ignores one of its `inputHoldingCids`: the preparation names the
    // holding, its transaction (nodes, input contracts) never reads it.
    const [prep] = await store.artifacts.preparedFor(w.id);
    const tx = decodePreparedTransaction(base64ToBytes(prep!.bytes, 'prepared'));
    const named = (v: unknown): void => {
      if (!v || typeof v !== 'object') return;
      const o = v as { kind?: string; elements?: { kind: string; value: unknown }[] };
      if (o.kind === 'list' && o.elements?.some((e) => e.kind === 'contractId' && e.value === pinned[0]))
        o.elements.push({ kind: 'contractId', value: other!.cid });
      for (const x of Object.values(v)) named(x);
    };
    named(tx.transaction);
    await store.db.query('UPDATE prepared_transactions SET bytes_raw = $2 WHERE id = $1', [
      prep!.id,
      Buffer.from(encodePreparedTransaction(tx)),
    ]);
    expect(await pinnedInputs({ ctx, store }, sent)).toEqual([...pinned, other!.cid]);
    // Another command spends that holding only: what was sent (the pinned holdings) may still commit.
    await transfer(ctx, { from: alice.partyId, to: bob.partyId, amount: '0.5', inputs: [other!] });
    const truth = await ledgerTruth({ ctx, store }, await now(w.id));
    expect(truth.status).toBe('unknown');
  });

  it('a run stalled between the write-ahead move and recording its submission while another worker carries the withdrawal (prepared again with other holdings): the stalled run sends nothing', async () => {
    // Worker X moves the row to `submitted` (write-ahead), then stalls (its lease lapses: a DB
    // failover holds its insert and its heartbeat alike) before its submission is on record.
    // Worker Y takes the lease over meanwhile: `submitted`, no submission on record.
    // A party of its own, with one holding (10), so that what X selects does not depend on what
    // earlier tests left with alice.
    const erin = await hostParty(env.net, env.signer, store.parties, 'erin', {
      label: 'wd-erin',
      fund: '10',
    });
    const { withdrawal: w } = await store.withdrawals.create({
      idempotencyKey: randomUUID(),
      caller: 'bot',
      body: { party: erin.partyId, receiver: bob.partyId, amount: '1' },
    });
    const executes = vi.spyOn(ctx.ledger, 'executeAndWait');
    let y: RunOutcome | undefined;
    expect(await store.withdrawals.claim(w.id, 'x', 60_000)).toBeDefined();
    const x = await runWithdrawal(
      {
        ctx,
        store,
        owner: 'x',
        at: async (p) => {
          if (p !== 'submitted' || y) return;
          await store.db.query(
            `UPDATE withdrawals SET lease_until = now() - interval '1 second' WHERE id = $1`,
            [w.id],
          );
          expect(await store.withdrawals.claim(w.id, 'y', 60_000)).toBeDefined();
          // A smaller holding that covers the amount appears: Y selects it, not X's.
          env.net.tap(erin.partyId, '1.5');
          y = await runWithdrawal({ ctx, store, owner: 'y' }, await now(w.id));
        },
      },
      w,
    );
    const sent = executes.mock.calls;
    executes.mockRestore();
    expect(y).toEqual({ done: true, state: 'committed' });
    // Y found no submission on record: not committed, prepared again with other holdings.
    const spends = (await store.artifacts.preparedFor(w.id)).map(
      (p) => recogniseActions(decodePreparedTransaction(base64ToBytes(p.bytes, 'prepared')))[0]?.inputs,
    );
    expect(spends).toHaveLength(2);
    expect(spends[0]).not.toEqual(spends[1]);
    // X could not put its submission on record: it ended untouched and sent nothing. One execute
    // reached the participant (not two kept apart by its command deduplication).
    expect(x.done === false && x.error).toBeInstanceOf(LeaseLostError);
    expect(sent).toHaveLength(1);
    expect(updatesOf(w.commandId)).toHaveLength(1);
    const subs = await store.artifacts.submissionsFor(w.commandId);
    expect(subs).toHaveLength(1);
    // The submission names the preparation it sent: Y's, the second.
    const prepared = await store.artifacts.preparedFor(w.id);
    expect(subs[0]!.preparedId).toBe(prepared[1]!.id);
    expect(await now(w.id)).toMatchObject({ state: 'committed' });
    expect((await now(w.id)).lastError).toBeUndefined();
    const trail = await listAudit(store.db, { subject: `withdrawal:${w.id}` });
    // X's journal says what happened to it (not a rejection by the ledger: nothing was sent).
    expect(trail.map((a) => a.action)).not.toContain('flow.rejected');
    expect(trail.at(-1)).toMatchObject({
      action: 'flow.failed',
      details: { message: expect.stringContaining('no longer leased to x') },
    });
    await store.withdrawals.releaseLease(w.id, 'y');
  });

  it('a resubmitting run stalled after preparing while another worker carries the withdrawal (prepared again with other holdings): the stalled run records nothing, so the next resubmission spends what the open submission spends', async () => {
    // Worker X sent a transaction (outcome unknown) and, in a later run, prepares its resubmission
    // (the same holdings), then stalls before recording that preparation. Meanwhile its lease lapses
    // and worker Y takes over: the first submission's window has closed, so Y prepares again with a
    // fresh selection (another holding) and sends it, its outcome unknown too. A preparation X
    // recorded now would be the latest on record, and the next resubmission would spend its holding:
    // not the one Y's open submission spends, so both could commit.
    const fay = await hostParty(env.net, env.signer, store.parties, 'fay', { label: 'wd-fay', fund: '10' });
    const { withdrawal: w } = await store.withdrawals.create({
      idempotencyKey: randomUUID(),
      caller: 'bot',
      body: { party: fay.partyId, receiver: bob.partyId, amount: '1' },
    });
    expect(await store.withdrawals.claim(w.id, 'x', 60_000)).toBeDefined();
    loseExecute();
    expect((await runWithdrawal({ ctx, store, owner: 'x' }, w)).done).toBe(false);
    expect((await now(w.id)).state).toBe('submitted');
    let y: RunOutcome | undefined;
    const stalled = Object.create(ctx.ledger) as FlowContext['ledger'];
    stalled.prepare = async (req, o) => {
      const res = await ctx.ledger.prepare(req, o);
      if (y) return res;
      await store.db.query(`UPDATE withdrawals SET lease_until = now() - interval '1 second' WHERE id = $1`, [
        w.id,
      ]);
      expect(await store.withdrawals.claim(w.id, 'y', 60_000)).toBeDefined();
      await windowsClosed(w.commandId);
      // A smaller holding that covers the amount appears: Y's fresh selection takes it.
      env.net.tap(fay.partyId, '1.5');
      loseExecute();
      y = await runWithdrawal({ ctx, store, owner: 'y' }, await now(w.id));
      return res;
    };
    const x = await runWithdrawal({ ctx: { ...ctx, ledger: stalled }, store, owner: 'x' }, await now(w.id));
    expect(y?.done).toBe(false);
    expect(x.done === false && x.error).toBeInstanceOf(LeaseLostError);
    const inputsOf = (b64: string) =>
      recogniseActions(decodePreparedTransaction(base64ToBytes(b64, 'prepared')))[0]?.inputs;
    const subs = await store.artifacts.submissionsFor(w.commandId);
    expect(subs).toHaveLength(2);
    const prepared = await store.artifacts.preparedFor(w.id);
    const ys = prepared.find((p) => p.id === subs[1]!.preparedId);
    expect(ys).toBeDefined();
    expect(inputsOf(ys!.bytes)).not.toEqual(inputsOf(prepared[0]!.bytes));
    // Nothing of X's is on record after Y took over: what a resubmission pins is what Y sent.
    expect(prepared.map((p) => p.id)).toEqual([subs[0]!.preparedId, subs[1]!.preparedId]);
    expect(await pinnedInputs({ ctx, store }, await now(w.id))).toEqual(inputsOf(ys!.bytes));
    await store.withdrawals.releaseLease(w.id, 'y');
  });

  it('lastError is the latest error: a later look that fails shows its own error, not the first one', async () => {
    loseExecute();
    const w = await create('1');
    await run(w);
    const first = await now(w.id);
    expect(first.state).toBe('submitted');
    expect(first.lastError).toMatch(/^outcome_unknown: /);
    // The participant now drops every connection: looking for the outcome fails with a network error.
    const cut = env.sb.ctx.faults.inject({ fault: { kind: 'unreachable' }, operation: 'ledger-api.*' });
    const second = await run(first);
    env.sb.ctx.faults.remove(cut);
    expect(second.done).toBe(false);
    const shown = await now(w.id);
    expect(shown.state).toBe('submitted');
    expect(shown.lastError).toMatch(/^NETWORK: ledger-api /);
    expect(second.done === false && second.reason).toContain(shown.lastError);
    const trail = await listAudit(store.db, { subject: `withdrawal:${w.id}` });
    expect(trail.at(-1)).toMatchObject({
      action: 'withdrawal.error',
      details: { from: 'submitted', to: 'submitted', lastError: shown.lastError },
    });
    await windowsClosed(w.commandId);
    expect(await run(shown)).toEqual({ done: true, state: 'committed' });
    expect((await now(w.id)).lastError).toBeUndefined();
  });

  it('lastError is cleared when the withdrawal moves on', async () => {
    const w = await create('1');
    const cut = env.sb.ctx.faults.inject({ fault: { kind: 'unreachable' }, operation: 'ledger-api.*' });
    expect((await run(w)).done).toBe(false);
    env.sb.ctx.faults.remove(cut);
    const waiting = await now(w.id);
    expect(waiting.state).toBe('received');
    expect(waiting.lastError).toMatch(/^NETWORK: /);
    const shown: Record<string, string | undefined> = {};
    const r = await runWithdrawal(
      {
        ctx,
        store,
        at: async (p, x) => {
          shown[p] = (await store.withdrawals.get(x.id))?.lastError;
        },
      },
      waiting,
    );
    expect(r).toEqual({ done: true, state: 'committed' });
    expect(shown.received).toBe(waiting.lastError);
    expect(shown.prepared).toBeUndefined();
    expect(Object.keys(shown)).toEqual(['received', 'prepared', 'signed', 'submitted', 'executed']);
  });

  it('a worker whose lease another worker took moves nothing and sends nothing', async () => {
    const w = await create('1');
    expect(await store.withdrawals.claim(w.id, 'other-worker', 60_000)).toBeDefined();
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await runWithdrawal({ ctx, store, owner: 'this-worker' }, w);
    expect(r.done).toBe(false);
    expect(r.done === false && r.error).toBeInstanceOf(LeaseLostError);
    expect((await now(w.id)).state).toBe('received');
    expect(sign).not.toHaveBeenCalled();
    expect(updatesOf(w.commandId)).toEqual([]);
    await expect(
      store.withdrawals.transition(w.id, ['received'], 'prepared', {}, { owner: 'this-worker' }),
    ).rejects.toBeInstanceOf(LeaseLostError);
    await store.withdrawals.releaseLease(w.id, 'other-worker');
    await store.withdrawals.cancel(w.id);
  });
});

describe('a cancel and the start of signing exclude each other', () => {
  /** Where the cancel is sent during a run: a step of the run, or right after the prepare call returned. */
  const POINTS = ['received', 'after prepare', 'prepared', 'signed', 'submitted'] as const;

  /**
   * Runs a withdrawal of `party` through `runner` (one instance) while another
   * instance (`canceller`) cancels it at `point`. Whatever the cancel answered:
   * `cancelled` ⇒ nothing was signed for it (no call to the key, no signature
   * recorded, no `flow.signed` in the audit log, nothing on the ledger);
   * refused ⇒ it said signing had started and the withdrawal committed.
   */
  async function race(runner: Store, canceller: Store, party: PartyRecord, point: (typeof POINTS)[number]) {
    const { withdrawal: w } = await runner.withdrawals.create({
      idempotencyKey: randomUUID(),
      caller: 'bot',
      body: { party: party.partyId, receiver: bob.partyId, amount: '1' },
    });
    let answer: unknown;
    const cancel = async () => {
      answer = await canceller.withdrawals.cancel(w.id, { actor: 'test' }).catch((e: unknown) => e);
    };
    const prepare = env.ledger.prepare.bind(env.ledger);
    vi.spyOn(env.ledger, 'prepare').mockImplementation(async (req, o) => {
      const res = await prepare(req, o);
      if (point === 'after prepare') await cancel();
      return res;
    });
    const sign = vi.spyOn(env.signer, 'sign');
    const runCtx = { ...env.ctx, parties: runner.parties, recorder: runner.recorder };
    const at = async (p: WithdrawalPoint) => {
      if (p === point) await cancel();
    };
    const claimed = await runner.withdrawals.claim(w.id, 'runner', 60_000);
    expect(claimed).toBeDefined();
    const outcome = await runWithdrawal({ ctx: runCtx, store: runner, owner: 'runner', at }, claimed!);
    vi.restoreAllMocks();
    const trail = (await listAudit(runner.db, { subject: `withdrawal:${w.id}` })).map((a) => a.action);
    const sigs = await runner.artifacts.signaturesFor(w.id);
    if (answer instanceof WithdrawalStateError) {
      expect(answer.message, point).toMatch(/too late to cancel .*signing has started/);
      expect(outcome, point).toEqual({ done: true, state: 'committed' });
      expect(sign, point).toHaveBeenCalledTimes(1);
      expect(trail, point).not.toContain('withdrawal.cancelled');
    } else {
      expect(answer, point).toMatchObject({ changed: true, withdrawal: { state: 'cancelled' } });
      expect(outcome, point).toEqual({ done: true, state: 'cancelled' });
      expect(sign, point).not.toHaveBeenCalled();
      expect(sigs, point).toEqual([]);
      expect(trail, point).not.toContain('flow.signed');
      expect(updatesOf(w.commandId), point).toEqual([]);
    }
    return answer instanceof WithdrawalStateError ? 'refused' : 'cancelled';
  }

  it('one instance: a cancel before the move to prepared wins (nothing signed); after it, it is refused', async () => {
    const answers: string[] = [];
    for (const p of POINTS) answers.push(await race(store, store, alice, p));
    expect(answers).toEqual(['cancelled', 'cancelled', 'refused', 'refused', 'refused']);
  });

  it('two instances on one PostgreSQL: the same, the cancel sent through the other instance', async () => {
    if (!(await requirePostgres())) return;
    const pg = await createPostgresDatabase();
    try {
      const a = storeOn(await pg.open(), 'instance-a');
      const b = storeOn(await pg.open({ migrate: false }), 'instance-b');
      const dave = await hostParty(env.net, env.signer, a.parties, 'dave', { label: 'wd-dave', fund: '100' });
      const answers: string[] = [];
      for (const p of POINTS) answers.push(await race(a, b, dave, p));
      expect(answers).toEqual(['cancelled', 'cancelled', 'refused', 'refused', 'refused']);
    } finally {
      await pg.drop();
    }
  });
});

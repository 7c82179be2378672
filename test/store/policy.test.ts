/**
 * Migration 7 and PolicyRepo on both drivers: the migration applies on a
 * database at version 6 with data; the withdrawal guard knows
 * `awaiting_approval` (and refuses the edges it lacks); policy versions (one
 * in force, decided only from pending, audited); limit usage: reserve (the
 * subject's own rows left out, its reservation replaced, released rows and
 * rows older than the window not counted, mode `always`), settle, usage,
 * paidBefore. And, on PostgreSQL, a property: two service instances (two
 * pools) reserving and settling at once against one limit never exceed it,
 * and each reserve reports exactly what the reservations before it (in the
 * order the key's lock gave them) held.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decimalUnits, fromUnits } from '../../src/intent/decimal.js';
import { listAudit, verifyAudit } from '../../src/store/audit.js';
import type { Db } from '../../src/store/db.js';
import { BadRequestError, PolicyVersionStateError, WithdrawalStateError } from '../../src/store/errors.js';
import { MIGRATIONS, migrate } from '../../src/store/migrations.js';
import { canonicalAmount, PolicyRepo, type ReserveCheck } from '../../src/store/repos/policy.js';
import { WithdrawalRepo } from '../../src/store/repos/withdrawals.js';
import { postgresDriver, storeDrivers } from '../support/pg.js';

const drivers = await storeDrivers();
const LATEST = Math.max(...MIGRATIONS.map((m) => m.version));
const HOUR = 3_600_000;
const sha = (c: string) => c.repeat(64);

let n = 0;
const unique = (p: string) => `${p}-${Date.now()}-${n++}`;

const check = (key: string, amount: string, over: Partial<ReserveCheck> = {}): ReserveCheck => ({
  key,
  limit: 'hot-24h',
  windowMs: HOUR,
  maxAmount: '100',
  maxCount: 3,
  adding: { amount, count: 1 },
  ...over,
});

describe.each(drivers)('policy store on $name', (driver) => {
  let db: Db;
  let policy: PolicyRepo;

  beforeAll(async () => {
    db = await driver.fresh();
    policy = new PolicyRepo(db, { actor: 'test' });
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  describe('migration 7', () => {
    it('applies on a database at version 6 with withdrawals in flight; they go on, and can await approval', async () => {
      const old = await driver.fresh({ migrate: false });
      await migrate(
        old,
        MIGRATIONS.filter((m) => m.version <= 6),
      );
      // Rows as a version-6 build wrote them (today's repository also writes the outbox, which v6 lacks).
      const row = async (key: string, state: string) => {
        const id = randomUUID();
        await old.query(
          `INSERT INTO withdrawals (id, caller, idempotency_key, request_hash, party, receiver, amount, command_id, state)
           VALUES ($1, 'bot', $2, $3, 'alice::1220aa', 'bob::1220bb', 5, $4, $5)`,
          [id, key, 'ab'.repeat(32), `cs-wd-${id}`, state],
        );
        return { id };
      };
      const a = await row('m7-a', 'received');
      const b = await row('m7-b', 'prepared');
      // the old schema knows no such state
      await expect(
        old.query(`UPDATE withdrawals SET state = 'awaiting_approval' WHERE id = $1`, [a.id]),
      ).rejects.toMatchObject({ code: '23514' });
      expect(await migrate(old)).toEqual({
        applied: MIGRATIONS.filter((m) => m.version > 6).map((m) => m.version),
        version: LATEST,
      });
      const after = new WithdrawalRepo(old);
      expect((await after.get(a.id))?.state).toBe('received');
      await after.transition(a.id, ['received'], 'awaiting_approval');
      await after.transition(b.id, ['prepared'], 'awaiting_approval');
      await after.transition(a.id, ['awaiting_approval'], 'prepared');
      expect((await after.cancel(b.id)).withdrawal.state).toBe('cancelled');
      expect((await after.countByState()).awaiting_approval).toBe(0);
      expect(Object.keys(await after.oldestPendingAges())).toContain('awaiting_approval');
      expect((await verifyAudit(old)).ok).toBe(true);
    });

    it('the guard refuses an edge that skips a step into or out of awaiting_approval', async () => {
      const repo = new WithdrawalRepo(db);
      const body = { party: 'alice::1220aa', receiver: 'bob::1220bb', amount: '5' };
      const { withdrawal: w } = await repo.create({ idempotencyKey: unique('g'), caller: 'bot', body });
      await repo.transition(w.id, ['received'], 'awaiting_approval');
      for (const to of ['signed', 'submitted', 'committed', 'awaiting_signature', 'received']) {
        await expect(
          db.query('UPDATE withdrawals SET state = $2 WHERE id = $1', [w.id, to]),
          to,
        ).rejects.toThrow(/awaiting_approval -> .* is not an allowed transition/);
        await expect(repo.transition(w.id, ['awaiting_approval'], to as 'signed')).rejects.toBeInstanceOf(
          WithdrawalStateError,
        );
      }
      // signed → awaiting_approval skips back past the approval: refused too
      const { withdrawal: s } = await repo.create({ idempotencyKey: unique('g'), caller: 'bot', body });
      await repo.transition(s.id, ['received'], 'prepared');
      await repo.transition(s.id, ['prepared'], 'signed');
      await expect(
        db.query(`UPDATE withdrawals SET state = 'awaiting_approval' WHERE id = $1`, [s.id]),
      ).rejects.toThrow(/signed -> awaiting_approval is not an allowed transition/);
      expect((await repo.get(w.id))?.state).toBe('awaiting_approval');
    });
  });

  describe('versions', () => {
    it('one in force; a pending one decided once; audited; a second in_force refused by the database', async () => {
      const fresh = await driver.fresh();
      const p = new PolicyRepo(fresh, { actor: 'ops' });
      expect(await p.inForce()).toBeUndefined();
      const v1 = await p.addVersion({
        text: 'version: 1\n',
        format: 'yaml',
        sha256: sha('a'),
        source: 'file',
        status: 'in_force',
        createdBy: 'ops',
        seal: 'seal-1',
      });
      expect(v1).toMatchObject({ version: 1, status: 'in_force', seal: 'seal-1', text: 'version: 1\n' });
      expect(v1.decidedAt).toBeDefined();
      const v2 = await p.addVersion({
        text: '{"version":1}',
        format: 'json',
        sha256: sha('b'),
        source: 'api',
        status: 'pending',
        createdBy: 'alice',
      });
      expect(v2).toMatchObject({ version: 2, status: 'pending' });
      expect(v2.decidedAt).toBeUndefined();
      expect(v2.seal).toBeUndefined();
      expect((await p.inForce())?.version).toBe(1);
      const decided = await p.decide(2, 'in_force', { actor: 'bob', seal: 'seal-2' });
      expect(decided).toMatchObject({ version: 2, status: 'in_force', seal: 'seal-2' });
      expect((await p.get(1))?.status).toBe('superseded');
      const again = await p.decide(2, 'rejected', { actor: 'bob' }).catch((e) => e);
      expect(again).toBeInstanceOf(PolicyVersionStateError);
      expect((again as Error).message).toMatch(/policy version 2 is in_force: only a pending version/);
      await p.addVersion({ ...v2, sha256: sha('c'), status: 'pending', createdBy: 'carol' });
      expect(await p.decide(3, 'rejected', { actor: 'dave' })).toMatchObject({ status: 'rejected' });
      expect((await p.inForce())?.version).toBe(2);
      const v4 = await p.addVersion({ ...v2, sha256: sha('d'), status: 'in_force', createdBy: 'ops' });
      expect((await p.get(2))?.status).toBe('superseded');
      expect((await p.list()).map((v) => [v.version, v.status])).toEqual([
        [4, 'in_force'],
        [3, 'rejected'],
        [2, 'superseded'],
        [1, 'superseded'],
      ]);
      expect((await p.setSeal(4, 'seal-4')).seal).toBe('seal-4');
      expect(v4.version).toBe(4);
      await expect(p.decide(99, 'in_force')).rejects.toThrow(/policy version 99 not found/);
      await expect(p.addVersion({ ...v2, sha256: 'nothex', status: 'pending' })).rejects.toBeInstanceOf(
        BadRequestError,
      );
      // the database itself keeps one in force
      await expect(
        fresh.query(`UPDATE policy_versions SET status = 'in_force', decided_at = now() WHERE version = 3`),
      ).rejects.toMatchObject({ code: '23505' });
      const trail = await listAudit(fresh);
      expect(trail.map((a) => [a.action, a.subject, a.actor])).toEqual([
        ['policy.version', 'policy:1', 'ops'],
        ['policy.version', 'policy:2', 'alice'],
        ['policy.decided', 'policy:2', 'bob'],
        ['policy.version', 'policy:3', 'carol'],
        ['policy.decided', 'policy:3', 'dave'],
        ['policy.version', 'policy:4', 'ops'],
        ['policy.sealed', 'policy:4', 'ops'],
      ]);
      expect(trail[2]?.details).toMatchObject({ version: 2, to: 'in_force', superseded: 1 });
      expect((await verifyAudit(fresh)).ok).toBe(true);
    });

    it('concurrent adds get consecutive numbers and leave exactly one in force', async () => {
      const fresh = await driver.fresh();
      const handles = driver.another ? [fresh, await driver.another()] : [fresh];
      const added = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          new PolicyRepo(handles[i % handles.length]!).addVersion({
            text: `name: v${i}\n`,
            format: 'yaml',
            sha256: sha(String(i)),
            source: 'api',
            status: i % 2 ? 'in_force' : 'pending',
            createdBy: 'ops',
          }),
        ),
      );
      expect(added.map((v) => v.version).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      const list = await new PolicyRepo(fresh).list();
      expect(list.filter((v) => v.status === 'in_force')).toHaveLength(1);
      const lastInForce = Math.max(...added.filter((v) => v.status === 'in_force').map((v) => v.version));
      expect((await new PolicyRepo(fresh).inForce())?.version).toBe(lastInForce);
    });
  });

  describe('usage', () => {
    it('reserve: fits against what others hold; refused leaves nothing; the same subject replaces its own', async () => {
      const key = unique('k');
      const r1 = await policy.reserve({
        subject: 's1',
        policyVersion: 1,
        party: 'p::1',
        receiver: 'r::1',
        checks: [check(key, '60')],
        mode: 'if-fits',
      });
      expect(r1.fits).toBe(true);
      expect(r1.usage).toEqual(new Map([[key, { amount: '0', count: 0 }]]));
      const r2 = await policy.reserve({
        subject: 's2',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(key, '40.0000000001')],
        mode: 'if-fits',
      });
      expect(r2.fits).toBe(false);
      expect(r2.usage.get(key)).toEqual({ amount: '60', count: 1 });
      expect(await policy.usage([{ key, windowMs: HOUR }])).toEqual(
        new Map([[key, { amount: '60', count: 1 }]]),
      );
      // exactly to the limit fits
      const r3 = await policy.reserve({
        subject: 's3',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(key, '40')],
        mode: 'if-fits',
      });
      expect(r3).toMatchObject({ fits: true });
      // s1 again, larger: its own 60 left out, but s3's 40 counted
      const again = await policy.reserve({
        subject: 's1',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(key, '60.5')],
        mode: 'if-fits',
      });
      expect(again.fits).toBe(false);
      expect(again.usage.get(key)).toEqual({ amount: '40', count: 1 });
      const smaller = await policy.reserve({
        subject: 's1',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(key, '55.25')],
        mode: 'if-fits',
      });
      expect(smaller.fits).toBe(true);
      expect(await policy.usage([{ key, windowMs: HOUR }])).toEqual(
        new Map([[key, { amount: '95.25', count: 2 }]]),
      );
      expect(await policy.usage([{ key, windowMs: HOUR }], 's1')).toEqual(
        new Map([[key, { amount: '40', count: 1 }]]),
      );
      expect(r3.serial).toBeGreaterThan(r1.serial);
    });

    it('counts: maxCount alone bounds the number of reservations', async () => {
      const key = unique('k');
      const c = (s: string) =>
        policy.reserve({
          subject: s,
          policyVersion: 1,
          party: 'p::1',
          checks: [check(key, '0', { maxAmount: undefined, maxCount: 2 })],
          mode: 'if-fits',
        });
      expect((await c('a')).fits).toBe(true);
      expect((await c('b')).fits).toBe(true);
      const third = await c('c');
      expect(third.fits).toBe(false);
      expect(third.usage.get(key)).toEqual({ amount: '0', count: 2 });
    });

    it('released rows and rows older than the window do not count; committed rows do', async () => {
      const key = unique('k');
      const at = (s: string, amount: string) =>
        policy.reserve({
          subject: s,
          policyVersion: 1,
          party: 'p::2',
          receiver: `r::${s}`,
          checks: [check(key, amount)],
          mode: 'if-fits',
        });
      expect((await at('x1', '70')).fits).toBe(true);
      expect((await at('x2', '70')).fits).toBe(false);
      await policy.settle('x1', 'released');
      expect((await at('x2', '70')).fits).toBe(true);
      await policy.settle('x2', 'committed');
      // settling again (nothing reserved) changes nothing
      await policy.settle('x2', 'released');
      expect(await policy.usage([{ key, windowMs: HOUR }])).toEqual(
        new Map([[key, { amount: '70', count: 1 }]]),
      );
      // a committed row from three hours ago: outside a one-hour window, inside a four-hour one
      await db.query(
        `INSERT INTO policy_usage (subject, limit_key, limit_id, party, amount, count, state, at, policy_version, seq)
         VALUES ('old', $1, 'hot-24h', 'p::2', 99, 1, 'committed', now() - interval '3 hours', 1, 0)`,
        [key],
      );
      const inHour = await at('x3', '30');
      expect(inHour).toMatchObject({ fits: true });
      expect(inHour.usage.get(key)).toEqual({ amount: '70', count: 1 });
      const wide = await policy.reserve({
        subject: 'x4',
        policyVersion: 1,
        party: 'p::2',
        checks: [check(key, '1', { windowMs: 4 * HOUR, maxAmount: '1000', maxCount: 10 })],
        mode: 'if-fits',
      });
      expect(wide.usage.get(key)).toEqual({ amount: '199', count: 3 });
      expect(await policy.paidBefore('p::2', ['r::x1', 'r::x2', 'r::x3', 'r::nobody'])).toEqual(
        new Set(['r::x2']),
      );
      expect(await policy.paidBefore('p::other', ['r::x2'])).toEqual(new Set());
      expect(await policy.paidBefore('p::2', [])).toEqual(new Set());
    });

    it('paidBefore knows the receivers of committed withdrawals too (not those whose offer came back)', async () => {
      const fresh = await driver.fresh();
      const w = new WithdrawalRepo(fresh);
      const p = new PolicyRepo(fresh);
      const party = 'payer::1220aa';
      const pay = async (receiver: string, to: 'committed' | 'failed', returned = false) => {
        const { withdrawal } = await w.create({
          idempotencyKey: unique('pb'),
          caller: 'bot',
          body: { party, receiver, amount: '1' },
        });
        await w.transition(withdrawal.id, ['received'], 'prepared');
        if (to === 'failed') return void (await w.transition(withdrawal.id, ['prepared'], 'failed'));
        await w.transition(withdrawal.id, ['prepared'], 'signed');
        await w.transition(withdrawal.id, ['signed'], 'submitted');
        await w.transition(withdrawal.id, ['submitted'], 'committed');
        if (returned) {
          await w.deliver(withdrawal.id, ['pending'], 'offered', { offerCid: '00c' });
          await w.deliver(withdrawal.id, ['offered'], 'returned', { outcome: 'rejected' });
        }
      };
      await pay('paid::1', 'committed');
      await pay('failed::1', 'failed');
      await pay('returned::1', 'committed', true);
      expect(await p.paidBefore(party, ['paid::1', 'failed::1', 'returned::1', 'never::1'])).toEqual(
        new Set(['paid::1']),
      );
      expect(await p.paidBefore('someone::else', ['paid::1'])).toEqual(new Set());
    });

    it("mode 'always' writes over the limit and says it does not fit", async () => {
      const key = unique('k');
      await policy.reserve({
        subject: 'a1',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(key, '90')],
        mode: 'if-fits',
      });
      const over = await policy.reserve({
        subject: 'a2',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(key, '20')],
        mode: 'always',
      });
      expect(over.fits).toBe(false);
      expect(over.usage.get(key)).toEqual({ amount: '90', count: 1 });
      expect(await policy.usage([{ key, windowMs: HOUR }])).toEqual(
        new Map([[key, { amount: '110', count: 2 }]]),
      );
    });

    it('several keys: all fit or nothing is written; a new reservation releases the keys it no longer counts towards', async () => {
      const k1 = unique('k1');
      const k2 = unique('k2');
      await policy.reserve({
        subject: 'full',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(k2, '100')],
        mode: 'if-fits',
      });
      const both = await policy.reserve({
        subject: 'm',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(k1, '10'), check(k2, '10')],
        mode: 'if-fits',
      });
      expect(both.fits).toBe(false);
      expect(await policy.usage([{ key: k1, windowMs: HOUR }])).toEqual(
        new Map([[k1, { amount: '0', count: 0 }]]),
      );
      await policy.settle('full', 'released');
      expect(
        (
          await policy.reserve({
            subject: 'm',
            policyVersion: 1,
            party: 'p::1',
            checks: [check(k1, '10'), check(k2, '10')],
            mode: 'if-fits',
          })
        ).fits,
      ).toBe(true);
      // re-evaluated under a policy without k2
      await policy.reserve({
        subject: 'm',
        policyVersion: 2,
        party: 'p::1',
        checks: [check(k1, '10')],
        mode: 'if-fits',
      });
      const rows = await db.query<{ limit_key: string; state: string; policy_version: number }>(
        `SELECT limit_key, state, policy_version FROM policy_usage WHERE subject = 'm' ORDER BY limit_key`,
      );
      expect(rows.rows).toEqual([
        { limit_key: k1, state: 'reserved', policy_version: 2 },
        { limit_key: k2, state: 'released', policy_version: 1 },
      ]);
      await policy.settle('m', 'committed');
      // a committed row is final: reserving the subject again does not turn it back
      await policy.reserve({
        subject: 'm',
        policyVersion: 3,
        party: 'p::1',
        checks: [check(k1, '1')],
        mode: 'always',
      });
      expect(
        (
          await db.query(
            `SELECT state, amount::text AS amount FROM policy_usage WHERE subject = 'm' AND limit_key = $1`,
            [k1],
          )
        ).rows,
      ).toEqual([{ state: 'committed', amount: '10.0000000000' }]);
    });

    it('sums are exact canonical decimals, and the version in force comes back', async () => {
      const fresh = await driver.fresh();
      const p = new PolicyRepo(fresh);
      const key = 'exact';
      const big = '1234567890123456789012345678.123456789';
      const r0 = await p.reserve({
        subject: 'e0',
        policyVersion: 0,
        party: 'p::1',
        checks: [check(key, '0.1', { maxAmount: undefined, maxCount: undefined })],
        mode: 'if-fits',
      });
      expect(r0.inForce).toBeNull();
      await p.addVersion({
        text: 'x',
        format: 'yaml',
        sha256: sha('e'),
        source: 'file',
        status: 'in_force',
        createdBy: 'ops',
      });
      await p.reserve({
        subject: 'e1',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(key, '0.2', { maxAmount: undefined, maxCount: undefined })],
        mode: 'if-fits',
      });
      const r2 = await p.reserve({
        subject: 'e2',
        policyVersion: 1,
        party: 'p::1',
        checks: [check(key, big, { maxAmount: undefined, maxCount: undefined })],
        mode: 'if-fits',
      });
      expect(r2).toMatchObject({ fits: true, inForce: 1 });
      expect(r2.usage.get(key)).toEqual({ amount: '0.3', count: 2 });
      expect((await p.usage([{ key, windowMs: HOUR }])).get(key)?.amount).toBe(
        '1234567890123456789012345678.423456789',
      );
      expect(canonicalAmount('0010.5000000000')).toBe('10.5');
      expect(canonicalAmount('0.0000000000')).toBe('0');
    });

    it('refuses amounts that are numbers or not exact, a key listed twice, a bad mode', async () => {
      const base = { subject: 'v', policyVersion: 1, party: 'p::1', mode: 'if-fits' as const };
      const bad: [unknown, string][] = [
        [[check('k', 5 as unknown as string)], 'checks[0].adding.amount'],
        [[check('k', '1.12345678901')], 'checks[0].adding.amount'],
        [[check('k', '-1')], 'checks[0].adding.amount'],
        [[check('k', '1', { maxAmount: 10 as unknown as string })], 'checks[0].maxAmount'],
        [[check('k', '1'), check('k', '2')], 'checks[1].key'],
        [[check('k', '1', { windowMs: 0 })], 'checks[0].windowMs'],
      ];
      for (const [checks, field] of bad) {
        const e = await policy.reserve({ ...base, checks: checks as ReserveCheck[] }).catch((x) => x);
        expect(e, field).toBeInstanceOf(BadRequestError);
        expect((e as BadRequestError).field).toBe(field);
      }
      await expect(
        policy.reserve({ ...base, mode: 'sometimes' as 'always', checks: [check('k', '1')] }),
      ).rejects.toBeInstanceOf(BadRequestError);
      await expect(policy.settle('v', 'reserved' as 'committed')).rejects.toBeInstanceOf(BadRequestError);
    });
  });
});

// ---- the property: two instances, one limit ------------------------------------------------------

/** Its own databases (the suite above drops its own when it ends). */
const pgDriver = drivers.some((d) => d.name === 'postgres') ? postgresDriver() : undefined;

/** cents → decimal string ("12.34"). */
const cents = (c: number) => `${Math.floor(c / 100)}.${String(c % 100).padStart(2, '0')}`;
const units = (s: string) => decimalUnits(s) as bigint;
const text = (u: bigint) => canonicalAmount(fromUnits(u));

describe.runIf(pgDriver)('reservations from two instances at once (PostgreSQL)', () => {
  const driver = pgDriver!;
  let handles: Db[];
  afterAll(async () => {
    await driver.cleanup();
  });
  beforeAll(async () => {
    handles = [await driver.fresh(), await driver.another!()];
  });

  it('never exceed the limit, and each reserve saw exactly the reservations serialised before it', async () => {
    const repos = handles.map((h) => new PolicyRepo(h));
    const subjectPlan = fc.record({
      reserves: fc.array(fc.record({ cents: fc.integer({ min: 0, max: 1500 }), delay: fc.nat(3) }), {
        minLength: 1,
        maxLength: 2,
      }),
      settle: fc.option(fc.constantFrom('committed' as const, 'released' as const), { nil: undefined }),
      handle: fc.nat(1),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(subjectPlan, { minLength: 2, maxLength: 8 }),
        fc.integer({ min: 500, max: 3000 }),
        fc.integer({ min: 1, max: 5 }),
        async (plans, maxCents, maxCount) => {
          const key = `prop-${run++}-${Date.now()}`;
          const maxAmount = cents(maxCents);
          type Seen = {
            subject: string;
            serial: number;
            fits: boolean;
            used: { amount: string; count: number };
            adding: string;
          };
          const seen: Seen[] = [];
          const settled = new Map<string, 'committed' | 'released'>();
          // each subject's own steps in order (a flow settles after its reservation answered);
          // the subjects all at once, over two pools
          await Promise.all(
            plans.map(async (plan, i) => {
              const subject = `${key}/s${i}`;
              const repo = repos[plan.handle]!;
              for (const r of plan.reserves) {
                await new Promise((res) => setTimeout(res, r.delay));
                const adding = cents(r.cents);
                const out = await repo.reserve({
                  subject,
                  policyVersion: 1,
                  party: 'p::prop',
                  checks: [
                    {
                      key,
                      limit: 'prop',
                      windowMs: 24 * HOUR,
                      maxAmount,
                      maxCount,
                      adding: { amount: adding, count: 1 },
                    },
                  ],
                  mode: 'if-fits',
                });
                seen.push({ subject, serial: out.serial, fits: out.fits, used: out.usage.get(key)!, adding });
              }
              if (plan.settle) {
                await repo.settle(subject, plan.settle);
                settled.set(subject, plan.settle);
              }
            }),
          );
          const rows = (
            await handles[0]!.query<{
              subject: string;
              state: string;
              amount: string;
              count: number;
              seq: number;
            }>(
              `SELECT subject, state, amount::text AS amount, count, seq FROM policy_usage WHERE limit_key = $1`,
              [key],
            )
          ).rows;
          // the serial order: every reserve, and each settle that moved a row (the last write to it)
          type Event = { serial: number } & (
            | { kind: 'reserve'; r: Seen }
            | { kind: 'settle'; subject: string; to: string }
          );
          const events: Event[] = seen.map((r) => ({ kind: 'reserve', serial: r.serial, r }));
          for (const row of rows) {
            const to = settled.get(row.subject);
            if (to) {
              expect(row.state, `${row.subject} settled`).toBe(to);
              events.push({ kind: 'settle', serial: row.seq, subject: row.subject, to });
            }
          }
          events.sort((a, b) => a.serial - b.serial);
          expect(new Set(events.map((e) => e.serial)).size).toBe(events.length);
          // replay
          const model = new Map<string, { amount: bigint; state: string }>();
          const held = (except?: string) => {
            let amount = 0n;
            let count = 0;
            for (const [s, m] of model)
              if (s !== except && m.state !== 'released') {
                amount += m.amount;
                count++;
              }
            return { amount, count };
          };
          for (const e of events) {
            if (e.kind === 'settle') {
              const m = model.get(e.subject);
              if (m?.state === 'reserved') m.state = e.to;
              continue;
            }
            const { r } = e;
            const used = held(r.subject);
            // (b) it reported exactly what the reservations before it held
            expect(r.used, `usage seen by ${r.subject} at ${r.serial}`).toEqual({
              amount: text(used.amount),
              count: used.count,
            });
            // …and it was refused only when that plus its own would pass the limit
            const fits = used.amount + units(r.adding) <= units(maxAmount) && used.count + 1 <= maxCount;
            expect(r.fits, `fits of ${r.subject} at ${r.serial}`).toBe(fits);
            if (fits) {
              const m = model.get(r.subject);
              if (m?.state !== 'committed')
                model.set(r.subject, { amount: units(r.adding), state: 'reserved' });
            }
            // (a) never over the limit
            const total = held();
            expect(total.amount <= units(maxAmount) && total.count <= maxCount).toBe(true);
          }
          // the database holds what the replay holds
          const db = new Map(rows.map((r) => [r.subject, { amount: units(r.amount), state: r.state }]));
          expect(db).toEqual(model);
          const live = rows.filter((r) => r.state !== 'released');
          expect(live.reduce((a, r) => a + units(r.amount), 0n) <= units(maxAmount)).toBe(true);
          expect(live.length <= maxCount).toBe(true);
        },
      ),
      { numRuns: 15 },
    );
  }, 120_000);
});

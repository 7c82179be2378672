/**
 * WithdrawalRepo on both drivers: idempotency (same key + body → same row,
 * other body → conflict, 20 concurrent creates → one row), the state
 * machine (only allowed edges, atomic guarded updates, the database trigger
 * agrees), cancel rules, resume list, and cursor pagination without gaps or
 * overlaps; group commit (creates issued together share one transaction:
 * duplicates, conflicts and mixed requests inside a batch, other instances,
 * a failing batch retried one by one, the audit chain after 500 creates).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAudit, verifyAudit } from '../../src/store/audit.js';
import type { Db } from '../../src/store/db.js';
import {
  BadRequestError,
  IdempotencyConflictError,
  LeaseLostError,
  NotFoundError,
  type StoreError,
  WithdrawalStateError,
} from '../../src/store/errors.js';
import { AirGapRepo, type NewExport } from '../../src/store/repos/air-gap.js';
import { ArtifactRepo } from '../../src/store/repos/artifacts.js';
import {
  canTransition,
  WITHDRAWAL_STATES,
  type WithdrawalBody,
  WithdrawalRepo,
  type WithdrawalState,
  withdrawalCommandId,
} from '../../src/store/repos/withdrawals.js';
import { postgresDriver, storeDrivers } from '../support/pg.js';

const drivers = await storeDrivers();

const body = (over: Partial<WithdrawalBody> = {}): WithdrawalBody => ({
  party: 'alice::1220aa',
  receiver: 'bob::1220bb',
  amount: '10.5',
  instrument: { admin: 'dso::1220cc', id: 'Amulet' },
  memo: 'payout 42',
  ...over,
});

let n = 0;
const key = () => `key-${Date.now()}-${n++}`;

describe.each(drivers)('withdrawals on $name', (driver) => {
  let db: Db;
  let repo: WithdrawalRepo;

  beforeAll(async () => {
    db = await driver.fresh();
    repo = new WithdrawalRepo(db, { actor: 'test' });
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  /** A withdrawal moved along `path` from received. */
  async function at(state: WithdrawalState, caller = 'bot-1') {
    const { withdrawal } = await repo.create({ idempotencyKey: key(), caller, body: body() });
    const path: Record<WithdrawalState, WithdrawalState[]> = {
      received: [],
      prepared: ['prepared'],
      signed: ['prepared', 'signed'],
      submitted: ['prepared', 'signed', 'submitted'],
      awaiting_signature: ['prepared', 'awaiting_signature'],
      awaiting_approval: ['awaiting_approval'],
      committed: ['prepared', 'signed', 'submitted', 'committed'],
      rejected: ['rejected'],
      failed: ['failed'],
      cancelled: ['cancelled'],
      expired: ['expired'],
    };
    let cur: WithdrawalState = 'received';
    for (const s of path[state]) {
      await repo.transition(withdrawal.id, [cur], s);
      cur = s;
    }
    return withdrawal.id;
  }

  describe('idempotent create', () => {
    it('records a new withdrawal in state received, with a derived command id', async () => {
      const k = key();
      const r = await repo.create({ idempotencyKey: k, caller: 'bot-1', body: body() });
      expect(r.created).toBe(true);
      const w = r.withdrawal;
      expect(w.state).toBe('received');
      expect(w.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(w.commandId).toBe(withdrawalCommandId(w.id));
      expect(w.commandId).toContain(w.id);
      expect(w).toMatchObject({ ...body(), caller: 'bot-1', idempotencyKey: k, attempts: 0 });
      expect(w.requestHash).toMatch(/^[0-9a-f]{64}$/);
      expect(Date.parse(w.createdAt)).toBeGreaterThan(Date.now() - 600_000);
      expect(await repo.get(w.id)).toEqual(w);
      expect(await repo.getByKey('bot-1', k)).toEqual(w);
    });

    it('same key and same (normalised) body returns the existing row, created:false', async () => {
      const k = key();
      const first = await repo.create({
        idempotencyKey: k,
        caller: 'bot-1',
        body: body({ amount: '10.50' }),
      });
      const again = await repo.create({
        idempotencyKey: k,
        caller: 'bot-1',
        // same request written differently: leading / trailing zeros, key order
        body: {
          memo: 'payout 42',
          instrument: { id: 'Amulet', admin: 'dso::1220cc' },
          amount: '010.5000',
          party: 'alice::1220aa',
          receiver: 'bob::1220bb',
        },
      });
      expect(again.created).toBe(false);
      expect(again.withdrawal).toEqual(first.withdrawal);
      expect(first.withdrawal.amount).toBe('10.5');
    });

    it('same key with a different body is a typed conflict naming the existing withdrawal', async () => {
      const k = key();
      const first = await repo.create({ idempotencyKey: k, caller: 'bot-1', body: body() });
      for (const other of [
        body({ amount: '10.6' }),
        body({ receiver: 'carol::1220dd' }),
        body({ memo: 'payout 43' }),
        body({ memo: undefined }),
        body({ instrument: undefined }),
        body({ options: { executeBefore: '2030-01-01T00:00:00Z' } }),
      ]) {
        const e = await repo.create({ idempotencyKey: k, caller: 'bot-1', body: other }).catch((x) => x);
        expect(e).toBeInstanceOf(IdempotencyConflictError);
        expect((e as IdempotencyConflictError).code).toBe('idempotency_conflict');
        expect((e as IdempotencyConflictError).existingId).toBe(first.withdrawal.id);
      }
      const rows = await db.query('SELECT id FROM withdrawals WHERE idempotency_key = $1', [k]);
      expect(rows.rows).toHaveLength(1);
    });

    it('keys are per caller: another caller with the same key gets its own withdrawal', async () => {
      const k = key();
      const a = await repo.create({ idempotencyKey: k, caller: 'bot-1', body: body() });
      const b = await repo.create({ idempotencyKey: k, caller: 'bot-2', body: body({ amount: '99' }) });
      expect(b.created).toBe(true);
      expect(b.withdrawal.id).not.toBe(a.withdrawal.id);
      expect(b.withdrawal.commandId).not.toBe(a.withdrawal.commandId);
    });

    it('20 concurrent creates with one key make exactly one row; all see the same withdrawal', async () => {
      const k = key();
      const handles = driver.another ? [db, await driver.another()] : [db];
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          new WithdrawalRepo(handles[i % handles.length]!).create({
            idempotencyKey: k,
            caller: 'bot-c',
            body: body(),
          }),
        ),
      );
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(new Set(results.map((r) => r.withdrawal.id)).size).toBe(1);
      const rows = await db.query('SELECT id FROM withdrawals WHERE caller = $1 AND idempotency_key = $2', [
        'bot-c',
        k,
      ]);
      expect(rows.rows).toHaveLength(1);
      const audited = await listAudit(db, { subject: `withdrawal:${results[0]!.withdrawal.id}` });
      expect(audited.map((a) => a.action)).toEqual(['withdrawal.create']);
    });

    it('20 concurrent creates with one key and different bodies: one row, 19 conflicts', async () => {
      const k = key();
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          repo.create({ idempotencyKey: k, caller: 'bot-d', body: body({ amount: String(i + 1) }) }),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(rejected).toHaveLength(19);
      for (const r of rejected) expect(r.reason).toBeInstanceOf(IdempotencyConflictError);
    });

    it('refuses malformed requests with the offending field', async () => {
      const cases: [Partial<WithdrawalBody>, string][] = [
        [{ amount: '0' }, 'amount'],
        [{ amount: '0.0000' }, 'amount'],
        [{ amount: '-1' }, 'amount'],
        [{ amount: '1.12345678901' }, 'amount'],
        [{ amount: '1e3' }, 'amount'],
        [{ amount: '12345678901234567890123456789' }, 'amount'],
        [{ party: '' }, 'party'],
        [{ receiver: 'x'.repeat(256) }, 'receiver'],
        [{ memo: 'a\u0000b' }, 'memo'],
        [{ instrument: { admin: '', id: 'Amulet' } }, 'instrument.admin'],
      ];
      for (const [over, field] of cases) {
        const e = await repo
          .create({ idempotencyKey: key(), caller: 'bot-1', body: body(over) })
          .catch((x) => x);
        expect(e, JSON.stringify(over)).toBeInstanceOf(BadRequestError);
        expect((e as BadRequestError).field).toBe(field);
      }
      const e = await repo.create({ idempotencyKey: '', caller: 'bot-1', body: body() }).catch((x) => x);
      expect((e as StoreError).field).toBe('Idempotency-Key');
    });
  });

  describe('state machine', () => {
    it('moves along allowed edges, with patch and audit', async () => {
      const id = await at('received');
      let w = await repo.transition(id, ['received'], 'prepared', { incrementAttempts: true });
      expect(w).toMatchObject({ state: 'prepared', attempts: 1 });
      w = await repo.transition(id, ['prepared'], 'prepared', {
        incrementAttempts: true,
        lastError: 'window passed',
      });
      expect(w).toMatchObject({ state: 'prepared', attempts: 2, lastError: 'window passed' });
      w = await repo.transition(
        id,
        ['prepared'],
        'signed',
        { lastError: null },
        { details: { hash: 'ab'.repeat(32) } },
      );
      expect(w.state).toBe('signed');
      expect(w.lastError).toBeUndefined();
      expect(await repo.lookupFrom(id)).toBeUndefined();
      w = await repo.transition(id, ['signed'], 'submitted', { lookupFrom: 41 });
      expect(await repo.lookupFrom(id)).toBe(41);
      // a resubmission keeps the first ledger end: completions are looked for from there
      w = await repo.transition(id, ['submitted'], 'submitted', { lookupFrom: 57 });
      expect(await repo.lookupFrom(id)).toBe(41);
      w = await repo.transition(id, ['submitted'], 'committed', { updateId: 'upd-1' });
      expect(w).toMatchObject({ state: 'committed', updateId: 'upd-1', attempts: 2 });
      expect(Date.parse(w.updatedAt)).toBeGreaterThanOrEqual(Date.parse(w.createdAt));
      const trail = await listAudit(db, { subject: `withdrawal:${id}` });
      expect(trail.map((a) => a.action)).toEqual([
        'withdrawal.create',
        'withdrawal.prepared',
        'withdrawal.prepared',
        'withdrawal.signed',
        'withdrawal.submitted',
        'withdrawal.submitted',
        'withdrawal.committed',
      ]);
      expect(trail[3]!.details).toMatchObject({ from: 'prepared', to: 'signed', hash: 'ab'.repeat(32) });
      expect(trail[6]!.details).toMatchObject({ from: 'submitted', to: 'committed', updateId: 'upd-1' });
    });

    it('refuses edges the state machine lacks, before touching the database', async () => {
      const id = await at('received');
      for (const [from, to] of [
        ['received', 'signed'],
        ['received', 'submitted'],
        ['received', 'committed'],
        ['signed', 'cancelled'],
        ['submitted', 'cancelled'],
        ['committed', 'prepared'],
        ['cancelled', 'prepared'],
        ['received', 'received'],
      ] as [WithdrawalState, WithdrawalState][]) {
        const e = await repo.transition(id, [from], to).catch((x) => x);
        expect(e, `${from} -> ${to}`).toBeInstanceOf(WithdrawalStateError);
      }
      expect((await repo.get(id))!.state).toBe('received');
    });

    it('refuses a move whose `from` does not hold (current state named), and leaves the row alone', async () => {
      const id = await at('signed');
      const e = await repo.transition(id, ['received', 'prepared'], 'cancelled').catch((x) => x);
      expect(e).toBeInstanceOf(WithdrawalStateError);
      expect((e as WithdrawalStateError).current).toBe('signed');
      expect((e as WithdrawalStateError).code).toBe('invalid_state');
      const w = (await repo.get(id))!;
      expect(w.state).toBe('signed');
      const trail = await listAudit(db, { subject: `withdrawal:${id}` });
      expect(trail.map((a) => a.action)).not.toContain('withdrawal.cancelled');
    });

    it('unknown ids are not found', async () => {
      await expect(
        repo.transition('00000000-0000-4000-8000-000000000000', ['received'], 'prepared'),
      ).rejects.toBeInstanceOf(NotFoundError);
      await expect(repo.transition('nope', ['received'], 'prepared')).rejects.toBeInstanceOf(NotFoundError);
      expect(await repo.get('nope')).toBeUndefined();
    });

    it('concurrent transitions from the same state: exactly one wins', async () => {
      const id = await at('prepared');
      const handles = driver.another ? [db, await driver.another()] : [db];
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          new WithdrawalRepo(handles[i % handles.length]!).transition(
            id,
            ['prepared'],
            i % 2 ? 'signed' : 'cancelled',
          ),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results)
        if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(WithdrawalStateError);
    });

    it('a callback in the same transaction rolls the move back when it fails', async () => {
      const id = await at('received');
      await expect(
        repo.transition(
          id,
          ['received'],
          'prepared',
          {},
          {
            also: async () => {
              throw new Error('boom');
            },
          },
        ),
      ).rejects.toThrow('boom');
      expect((await repo.get(id))!.state).toBe('received');
    });

    it('the database trigger enforces the same edges and keeps the request immutable', async () => {
      const id = await at('received');
      for (const from of WITHDRAWAL_STATES) {
        for (const to of WITHDRAWAL_STATES) {
          if (from === to) continue;
          // put the row in `from` behind the trigger's back, then try the edge directly in SQL
          await db.transaction(async (tx) => {
            await tx.query(`SET LOCAL session_replication_role = replica`);
            await tx.query('UPDATE withdrawals SET state = $2 WHERE id = $1', [id, from]);
          });
          const ok = await db
            .query('UPDATE withdrawals SET state = $2 WHERE id = $1', [id, to])
            .then(() => true)
            .catch(() => false);
          expect(ok, `${from} -> ${to}`).toBe(canTransition(from, to));
        }
      }
      for (const [col, v] of [
        ['amount', '11'],
        ['receiver', 'mallory::1220ee'],
        ['request_hash', 'f'.repeat(64)],
        ['command_id', 'other'],
        ['idempotency_key', 'other'],
      ]) {
        await expect(
          db.query(`UPDATE withdrawals SET ${col} = $2 WHERE id = $1`, [id, v]),
          col,
        ).rejects.toThrow(/immutable/);
      }
    });
  });

  describe('delivery', () => {
    it('starts pending with the move to committed and moves only along its table, audited', async () => {
      const id = await at('submitted');
      expect((await repo.get(id))?.delivery).toBeUndefined();
      await repo.transition(id, ['submitted'], 'committed', { updateId: 'u-1' });
      expect((await repo.get(id))?.delivery).toBe('pending');
      await expect(repo.deliver(id, ['offered'], 'delivered')).rejects.toThrow(/delivery pending/);
      await expect(repo.deliver(id, ['delivered'], 'offered')).rejects.toBeInstanceOf(WithdrawalStateError);
      const offered = await repo.deliver(id, ['pending'], 'offered', {
        offerCid: '00abc',
        offerExpiresAt: '2030-01-01T00:00:00.000Z',
        scannedTo: 7,
      });
      expect(offered.offer).toEqual({ instructionCid: '00abc', expiresAt: '2030-01-01T00:00:00.000Z' });
      expect(await repo.deliveryFrom(id)).toBe(7);
      expect((await repo.openDeliveries()).map((w) => w.id)).toContain(id);
      const back = await repo.deliver(id, ['offered'], 'returned', { outcome: 'rejected', updateId: 'u-2' });
      expect(back).toMatchObject({ delivery: 'returned', offer: { outcome: 'rejected', updateId: 'u-2' } });
      await expect(repo.deliver(id, ['returned'], 'delivered')).rejects.toBeInstanceOf(WithdrawalStateError);
      expect((await repo.openDeliveries()).map((w) => w.id)).not.toContain(id);
      const trail = (await listAudit(db, { subject: `withdrawal:${id}` })).map((a) => a.action);
      expect(trail.slice(-2)).toEqual(['withdrawal.delivery.offered', 'withdrawal.delivery.returned']);
      expect((await repo.list({ delivery: 'returned', limit: 500 })).items.map((w) => w.id)).toContain(id);
      expect((await repo.countByDelivery()).returned).toBeGreaterThanOrEqual(1);
    });

    it('the database refuses a delivery edge the table lacks, and a delivery before the commit', async () => {
      const committed = await at('committed');
      await expect(
        db.query(`UPDATE withdrawals SET delivery = 'returned' WHERE id = $1`, [committed]),
      ).resolves.toBeDefined();
      await expect(
        db.query(`UPDATE withdrawals SET delivery = 'delivered' WHERE id = $1`, [committed]),
      ).rejects.toThrow(/not an allowed transition/);
      const open = await at('prepared');
      await expect(
        db.query(`UPDATE withdrawals SET delivery = 'pending' WHERE id = $1`, [open]),
      ).rejects.toThrow(/withdrawals_delivery_committed/);
    });
  });

  describe('cancel', () => {
    it('cancels while received or awaiting_signature; cancelling again is a no-op', async () => {
      for (const s of ['received', 'awaiting_signature', 'awaiting_approval'] as const) {
        const id = await at(s);
        const r = await repo.cancel(id, { actor: 'bot-1', reason: 'user asked' });
        expect(r).toMatchObject({ changed: true, withdrawal: { state: 'cancelled' } });
        const again = await repo.cancel(id);
        expect(again).toMatchObject({ changed: false, withdrawal: { state: 'cancelled' } });
        const trail = await listAudit(db, { subject: `withdrawal:${id}` });
        const c = trail.filter((a) => a.action === 'withdrawal.cancelled');
        expect(c).toHaveLength(1);
        expect(c[0]).toMatchObject({ actor: 'bot-1', details: { from: s, reason: 'user asked' } });
      }
    });

    it('refuses once signing started (prepared) or later, or finished otherwise, saying why', async () => {
      for (const s of [
        'prepared',
        'signed',
        'submitted',
        'committed',
        'rejected',
        'failed',
        'expired',
      ] as const) {
        const id = await at(s);
        const e = await repo.cancel(id).catch((x) => x);
        expect(e, s).toBeInstanceOf(WithdrawalStateError);
        expect((e as WithdrawalStateError).current).toBe(s);
        expect((e as WithdrawalStateError).message, s).toMatch(
          ['prepared', 'signed', 'submitted'].includes(s)
            ? /^too late to cancel withdrawal .*: signing has started/
            : /is finished and cannot be cancelled/,
        );
        expect((await repo.get(id))!.state).toBe(s);
      }
      await expect(repo.cancel('00000000-0000-4000-8000-000000000001')).rejects.toBeInstanceOf(NotFoundError);
    });
  });

  describe('leases across owners', () => {
    it("one sending party's withdrawals are carried by one owner at a time", async () => {
      const party = `lease-${Date.now()}::1220aa`;
      const other = `lease-other-${Date.now()}::1220bb`;
      const make = async (p: string) =>
        (await repo.create({ idempotencyKey: key(), caller: 'bot', body: body({ party: p }) })).withdrawal.id;
      const [a, b, c] = [await make(party), await make(party), await make(other)];
      expect(await repo.claim(a, 'one', 60_000)).toBeDefined();
      // another owner cannot take the same party's other withdrawal while that lease runs,
      // and is not offered it
      expect(await repo.claim(b, 'two', 60_000)).toBeUndefined();
      const offered = async (owner: string) => (await repo.claimable(owner, 10_000)).map((x) => x.id);
      expect(await offered('two')).not.toContain(b);
      expect(await offered('two')).toContain(c);
      expect(await offered('one')).toEqual(expect.arrayContaining([a, b, c]));
      // the same owner can (it serialises its own runs per party), and another party is free
      expect(await repo.claim(b, 'one', 60_000)).toBeDefined();
      expect(await repo.claim(c, 'two', 60_000)).toBeDefined();
      await repo.releaseLease(b, 'one');
      expect(await repo.claim(b, 'two', 60_000)).toBeUndefined(); // a is still held by 'one'
      // once a is final, its lease no longer blocks the party
      await repo.transition(a, ['received'], 'failed', { lastError: 'test' });
      expect(await repo.claim(b, 'two', 60_000)).toBeDefined();
      // an expired lease blocks nothing
      const d = await make(other);
      await db.query(`UPDATE withdrawals SET lease_until = now() - interval '1 second' WHERE id = $1`, [c]);
      expect(await repo.claim(d, 'one', 60_000)).toBeDefined();
    });

    it('concurrent claims of one party by two owners: exactly one wins', async () => {
      const party = `race-${Date.now()}::1220cc`;
      const ids: string[] = [];
      for (let i = 0; i < 6; i++)
        ids.push(
          (await repo.create({ idempotencyKey: key(), caller: 'bot', body: body({ party }) })).withdrawal.id,
        );
      const results = await Promise.all(ids.map((id, i) => repo.claim(id, i % 2 === 0 ? 'x' : 'y', 60_000)));
      expect(results.some((w) => w !== undefined)).toBe(true);
      const owners = await db.query<{ o: string }>(
        'SELECT DISTINCT lease_owner AS o FROM withdrawals WHERE party = $1 AND lease_owner IS NOT NULL',
        [party],
      );
      expect(owners.rows).toHaveLength(1);
    });
  });

  describe('a submission recorded under a lease', () => {
    it('is written only while the withdrawal is leased to the recorder; otherwise LeaseLostError and nothing written', async () => {
      const { withdrawal: w } = await repo.create({ idempotencyKey: key(), caller: 'bot', body: body() });
      const artifacts = new ArtifactRepo(db);
      const sub = (sid: string, lease: string) =>
        artifacts.recordSubmission({ submissionId: sid, commandId: w.commandId, withdrawalId: w.id, lease });
      expect(await repo.claim(w.id, 'x', 60_000)).toBeDefined();
      expect(await sub('leased-1', 'x')).toMatchObject({ submissionId: 'leased-1', withdrawalId: w.id });
      // x's lease lapses and y takes the row over: x's next submission is refused.
      await db.query(`UPDATE withdrawals SET lease_until = now() - interval '1 second' WHERE id = $1`, [
        w.id,
      ]);
      expect(await repo.claim(w.id, 'y', 60_000)).toBeDefined();
      const lost = await sub('leased-2', 'x').catch((e: unknown) => e);
      expect(lost).toBeInstanceOf(LeaseLostError);
      expect(lost).toMatchObject({ withdrawalId: w.id, owner: 'x' });
      expect((await artifacts.submissionsFor(w.commandId)).map((s) => s.submissionId)).toEqual(['leased-1']);
      // A lapsed lease nobody took over is still its holder's: nobody else can decide meanwhile.
      await db.query(`UPDATE withdrawals SET lease_until = now() - interval '1 second' WHERE id = $1`, [
        w.id,
      ]);
      expect(await sub('leased-3', 'y')).toMatchObject({ submissionId: 'leased-3' });
      await repo.releaseLease(w.id, 'y');
      await expect(sub('leased-4', 'y')).rejects.toBeInstanceOf(LeaseLostError);
      expect(await artifacts.submissionsFor(w.commandId)).toHaveLength(2);
    });

    it('a preparation written under a lease likewise: only while the withdrawal is leased to the writer', async () => {
      const { withdrawal: w } = await repo.create({ idempotencyKey: key(), caller: 'bot', body: body() });
      const artifacts = new ArtifactRepo(db);
      const bytes = Buffer.from([1, 2, 3]).toString('base64');
      const prep = (id: string, lease: string) =>
        artifacts.writePrepared({
          id,
          withdrawalId: w.id,
          attempt: 2,
          hash: 'ab'.repeat(32),
          hashingScheme: 'v2',
          bytes,
          lease,
        });
      const [a, b] = [randomUUID(), randomUUID()];
      expect(await repo.claim(w.id, 'x', 60_000)).toBeDefined();
      await prep(a, 'x');
      await db.query(`UPDATE withdrawals SET lease_until = now() - interval '1 second' WHERE id = $1`, [
        w.id,
      ]);
      expect(await repo.claim(w.id, 'y', 60_000)).toBeDefined();
      const lost = await prep(b, 'x').catch((e: unknown) => e);
      expect(lost).toBeInstanceOf(LeaseLostError);
      expect(lost).toMatchObject({ withdrawalId: w.id, owner: 'x' });
      expect((await artifacts.preparedFor(w.id)).map((p) => [p.id, p.bytes, p.attempt])).toEqual([
        [a, bytes, 2],
      ]);
      await repo.releaseLease(w.id, 'y');
    });
    it('a request sent across the air gap for a withdrawal is recorded, and replaces the one before it, only under the lease', async () => {
      const { withdrawal: w } = await repo.create({ idempotencyKey: key(), caller: 'bot', body: body() });
      const gap = new AirGapRepo(db, { actor: 'test' });
      const request = (): NewExport => ({
        nonce: randomBytes(32).toString('hex'),
        digest: randomBytes(32).toString('hex'),
        kind: 'prepared-transaction',
        party: w.party,
        keyFingerprint: `1220${'cd'.repeat(32)}`,
        hashes: [randomBytes(32).toString('hex')],
        withdrawalId: w.id,
        subject: `withdrawal:${w.id}`,
        context: {},
        envelope: { sealed: true },
        windowLatest: new Date(Date.now() + 3600_000).toISOString(),
      });
      expect(await repo.claim(w.id, 'x', 60_000)).toBeDefined();
      const first = await gap.create(request(), 'worker', { lease: 'x' });
      // y takes the withdrawal over; x's late request changes nothing, not even the one in play.
      await db.query(`UPDATE withdrawals SET lease_until = now() - interval '1 second' WHERE id = $1`, [
        w.id,
      ]);
      expect(await repo.claim(w.id, 'y', 60_000)).toBeDefined();
      const supersedes = { id: first.id, details: { reason: 'prepared again' } };
      await expect(gap.create(request(), 'worker', { lease: 'x', supersedes })).rejects.toBeInstanceOf(
        LeaseLostError,
      );
      expect((await gap.list({ withdrawalId: w.id })).map((x) => [x.id, x.status])).toEqual([
        [first.id, 'open'],
      ]);
      // y's replaces it.
      const second = await gap.create(request(), 'worker', { lease: 'y', supersedes });
      expect(await gap.currentFor(w.id)).toMatchObject({ id: second.id, status: 'open' });
      expect((await gap.get(first.id))?.status).toBe('stale');
      const trail = await listAudit(db, { subject: `withdrawal:${w.id}` });
      expect(trail.filter((a) => a.action.startsWith('air-gap.')).map((a) => a.action)).toEqual([
        'air-gap.export',
        'air-gap.stale',
        'air-gap.export',
      ]);
    });
  });

  describe('resume and listing', () => {
    it('unfinished() lists exactly the non-terminal withdrawals, oldest first', async () => {
      const fresh = await driver.fresh();
      const r = new WithdrawalRepo(fresh);
      const ids: Record<string, string> = {};
      for (const s of WITHDRAWAL_STATES) {
        const { withdrawal } = await r.create({ idempotencyKey: `k-${s}`, caller: 'bot', body: body() });
        ids[s] = withdrawal.id;
        const path: Partial<Record<WithdrawalState, WithdrawalState[]>> = {
          prepared: ['prepared'],
          signed: ['prepared', 'signed'],
          submitted: ['prepared', 'signed', 'submitted'],
          awaiting_signature: ['prepared', 'awaiting_signature'],
          awaiting_approval: ['awaiting_approval'],
          committed: ['prepared', 'signed', 'submitted', 'committed'],
          rejected: ['rejected'],
          failed: ['failed'],
          cancelled: ['cancelled'],
          expired: ['expired'],
        };
        let cur: WithdrawalState = 'received';
        for (const next of path[s] ?? []) {
          await r.transition(withdrawal.id, [cur], next);
          cur = next;
        }
      }
      const un = await r.unfinished();
      expect(un.map((w) => w.state)).toEqual(['received', 'prepared', 'signed', 'submitted']);
      expect(un.map((w) => w.id)).toEqual([ids.received, ids.prepared, ids.signed, ids.submitted]);
      const counts = await r.countByState();
      for (const s of WITHDRAWAL_STATES) expect(counts[s]).toBe(1);
      // The oldest pending withdrawal of each pending state, by its age; final states are not listed.
      await new Promise((res) => setTimeout(res, 1100));
      await r.create({ idempotencyKey: 'k-newer', caller: 'bot', body: body() }); // a newer one: not the oldest
      const ages = await r.oldestPendingAges();
      expect(Object.keys(ages).sort()).toEqual(
        ['awaiting_approval', 'awaiting_signature', 'prepared', 'received', 'signed', 'submitted'].sort(),
      );
      for (const age of Object.values(ages)) {
        expect(age).toBeGreaterThanOrEqual(1);
        expect(age).toBeLessThan(60);
      }
      expect((await verifyAudit(fresh)).ok).toBe(true);
    });

    it('cursor pagination visits every row exactly once, in order, both directions, with filters', async () => {
      const party = `pager-${Date.now()}::1220ff`;
      const created: string[] = [];
      // some rows share a created_at (same millisecond): the id breaks the tie
      for (let i = 0; i < 57; i++) {
        const { withdrawal } = await repo.create({
          idempotencyKey: key(),
          caller: 'pager',
          body: body({ party }),
        });
        created.push(withdrawal.id);
      }
      // force ties: 20 rows with one created_at (behind the immutability trigger's back)
      await db.transaction(async (tx) => {
        await tx.query(`SET LOCAL session_replication_role = replica`);
        await tx.query(
          `UPDATE withdrawals SET created_at = '2030-01-01T00:00:00.000Z' WHERE id = ANY($1::uuid[])`,
          [created.slice(10, 30)],
        );
      });
      const all = (await repo.list({ party, limit: 500, order: 'asc' })).items;
      expect(all).toHaveLength(57);
      expect(new Set(all.map((w) => w.id))).toEqual(new Set(created));
      for (let i = 1; i < all.length; i++) {
        const a = all[i - 1]!;
        const b = all[i]!;
        expect(a.createdAt < b.createdAt || (a.createdAt === b.createdAt && a.id < b.id)).toBe(true);
      }
      for (const order of ['asc', 'desc'] as const) {
        for (const limit of [1, 7, 10, 56, 57, 58]) {
          const seen: string[] = [];
          let cursor: string | undefined;
          let pages = 0;
          do {
            const page = await repo.list({ party, limit, order, ...(cursor ? { cursor } : {}) });
            expect(page.items.length).toBeLessThanOrEqual(limit);
            seen.push(...page.items.map((w) => w.id));
            cursor = page.nextCursor;
            pages++;
          } while (cursor);
          const expected = all.map((w) => w.id);
          expect(seen, `${order} ${limit}`).toEqual(order === 'asc' ? expected : [...expected].reverse());
          expect(pages).toBe(Math.max(1, Math.ceil(57 / limit)));
        }
      }
      // filters
      await repo.transition(created[3]!, ['received'], 'prepared');
      await repo.transition(created[9]!, ['received'], 'cancelled');
      const prepared = await repo.list({ party, state: 'prepared' });
      expect(prepared.items.map((w) => w.id)).toEqual([created[3]]);
      const some = await repo.list({ party, state: ['prepared', 'cancelled'], order: 'asc' });
      expect(some.items.map((w) => w.id).sort()).toEqual([created[3], created[9]].sort());
      expect((await repo.list({ party: [party, 'nobody'], limit: 500 })).items).toHaveLength(57);
      expect((await repo.list({ party, caller: 'someone-else' })).items).toHaveLength(0);
    });

    it('refuses a forged cursor and a bad limit', async () => {
      await expect(repo.list({ cursor: 'garbage' })).rejects.toBeInstanceOf(BadRequestError);
      const forged = Buffer.from(JSON.stringify(['x', 'y'])).toString('base64url');
      await expect(repo.list({ cursor: forged })).rejects.toMatchObject({ field: 'cursor' });
      await expect(repo.list({ limit: 0 })).rejects.toMatchObject({ field: 'limit' });
      await expect(repo.list({ limit: 501 })).rejects.toMatchObject({ field: 'limit' });
      await expect(repo.list({ state: 'bogus' as WithdrawalState })).rejects.toMatchObject({
        field: 'state',
      });
    });
  });

  describe('group commit (concurrent creates share one transaction)', () => {
    // A database of its own, and (PostgreSQL) a second handle on it: another instance.
    let gdb: Db;
    let other: Db | undefined;
    let grepo: WithdrawalRepo;
    beforeAll(async () => {
      gdb = await driver.fresh();
      other = driver.another ? await driver.another() : undefined;
      grepo = new WithdrawalRepo(gdb, { actor: 'test' });
    });
    const settled = <T>(ps: Promise<T>[]) => Promise.allSettled(ps);

    it('creates issued together are committed in one transaction, each with its own row and audit row', async () => {
      const keys = Array.from({ length: 32 }, () => key());
      const results = await Promise.all(
        keys.map((k, i) =>
          grepo.create({ idempotencyKey: k, caller: 'bot-g', body: body({ amount: `${i + 1}` }) }),
        ),
      );
      expect(results.every((r) => r.created)).toBe(true);
      expect(new Set(results.map((r) => r.withdrawal.id)).size).toBe(32);
      // one transaction: one now()
      expect(new Set(results.map((r) => r.withdrawal.createdAt)).size).toBe(1);
      for (const [i, r] of results.entries()) {
        expect(r.withdrawal).toMatchObject({
          idempotencyKey: keys[i],
          amount: `${i + 1}`,
          state: 'received',
        });
        expect(await grepo.get(r.withdrawal.id)).toEqual(r.withdrawal);
        const trail = await listAudit(gdb, { subject: `withdrawal:${r.withdrawal.id}` });
        expect(trail.map((a) => a.action)).toEqual(['withdrawal.create']);
        expect(trail[0]!.details).toMatchObject({ idempotencyKey: keys[i], amount: `${i + 1}` });
      }
      expect((await verifyAudit(gdb)).ok).toBe(true);
    });

    it('the same key and body twice in one batch: one row, one audit row, the second is a replay', async () => {
      const k = key();
      const results = await Promise.all(
        Array.from({ length: 10 }, () => grepo.create({ idempotencyKey: k, caller: 'bot-g', body: body() })),
      );
      expect(results.map((r) => r.created)).toEqual([true, ...Array(9).fill(false)]);
      expect(new Set(results.map((r) => r.withdrawal.id)).size).toBe(1);
      for (const r of results.slice(1)) expect(r.withdrawal).toEqual(results[0]!.withdrawal);
      // separate objects: a caller changing its copy does not change another's
      expect(results[1]!.withdrawal).not.toBe(results[0]!.withdrawal);
      const audited = await listAudit(gdb, { subject: `withdrawal:${results[0]!.withdrawal.id}` });
      expect(audited).toHaveLength(1);
    });

    it('the same key with other bodies in one batch: the first wins, the others conflict, repeats replay', async () => {
      const k = key();
      const bodies = [
        body(),
        body({ amount: '2' }),
        body(),
        body({ memo: 'other' }),
        body({ amount: '10.50' }),
      ];
      const results = await settled(
        bodies.map((b) => grepo.create({ idempotencyKey: k, caller: 'bot-g', body: b })),
      );
      const first = results[0];
      expect(first?.status).toBe('fulfilled');
      const w = (first as PromiseFulfilledResult<{ withdrawal: { id: string }; created: boolean }>).value;
      expect(w.created).toBe(true);
      for (const i of [1, 3]) {
        const r = results[i]!;
        expect(r.status).toBe('rejected');
        expect((r as PromiseRejectedResult).reason).toBeInstanceOf(IdempotencyConflictError);
        expect((r as PromiseRejectedResult).reason.existingId).toBe(w.withdrawal.id);
      }
      for (const i of [2, 4])
        expect(results[i]).toMatchObject({ status: 'fulfilled', value: { created: false } });
      const rows = await gdb.query('SELECT id FROM withdrawals WHERE caller = $1 AND idempotency_key = $2', [
        'bot-g',
        k,
      ]);
      expect(rows.rows).toEqual([{ id: w.withdrawal.id }]);
    });

    it('a mixed batch: new keys, replays and conflicts of committed keys, invalid requests, other callers', async () => {
      const old = key();
      const before = await grepo.create({ idempotencyKey: old, caller: 'bot-m', body: body() });
      const fresh = [key(), key(), key()];
      const calls = [
        grepo.create({ idempotencyKey: fresh[0]!, caller: 'bot-m', body: body() }),
        grepo.create({ idempotencyKey: old, caller: 'bot-m', body: body() }), // replay
        grepo.create({ idempotencyKey: old, caller: 'bot-m', body: body({ amount: '7' }) }), // conflict
        grepo.create({ idempotencyKey: fresh[1]!, caller: 'bot-m', body: body({ amount: '0' }) }), // invalid
        grepo.create({ idempotencyKey: old, caller: 'bot-other', body: body({ amount: '7' }) }), // other caller
        grepo.create({ idempotencyKey: fresh[2]!, caller: 'bot-m', body: body({ memo: 'x\ud800y' }) }), // invalid
        grepo.create({ idempotencyKey: fresh[1]!, caller: 'bot-m', body: body() }),
      ];
      const r = await settled(calls);
      expect(r.map((x) => x.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'rejected',
        'rejected',
        'fulfilled',
        'rejected',
        'fulfilled',
      ]);
      const value = (i: number) => (r[i] as PromiseFulfilledResult<Awaited<(typeof calls)[number]>>).value;
      const reason = (i: number) => (r[i] as PromiseRejectedResult).reason;
      expect(value(0).created).toBe(true);
      expect(value(1)).toEqual({ withdrawal: before.withdrawal, created: false });
      expect(reason(2)).toBeInstanceOf(IdempotencyConflictError);
      expect(reason(2).existingId).toBe(before.withdrawal.id);
      expect(reason(3)).toBeInstanceOf(BadRequestError);
      expect(reason(3).field).toBe('amount');
      expect(value(4)).toMatchObject({ created: true, withdrawal: { caller: 'bot-other', amount: '7' } });
      expect(reason(5)).toBeInstanceOf(BadRequestError);
      expect(reason(5).field).toBe('memo');
      expect(value(6).created).toBe(true);
      expect(await grepo.getByKey('bot-m', fresh[2]!)).toBeUndefined();
      // committed when resolved: visible through another handle
      for (const i of [0, 4, 6])
        expect(await new WithdrawalRepo(other ?? gdb).get(value(i).withdrawal.id)).toBeDefined();
      expect((await verifyAudit(gdb)).ok).toBe(true);
    });

    it('a key created by another instance meanwhile is answered as a replay or a conflict', async () => {
      const handles = [gdb, other ?? gdb];
      const [a, b] = handles.map((h) => new WithdrawalRepo(h!));
      const keys = Array.from({ length: 40 }, () => key());
      // both instances create every key, in opposite orders, with the same body for even keys
      const ra = settled(keys.map((k) => a!.create({ idempotencyKey: k, caller: 'bot-x', body: body() })));
      const rb = settled(
        [...keys].reverse().map((k, j) =>
          b!.create({
            idempotencyKey: k,
            caller: 'bot-x',
            body: body({ amount: (39 - j) % 2 ? '3' : '10.5' }),
          }),
        ),
      );
      const [xa, xb] = await Promise.all([ra, rb]);
      const fromB = [...xb].reverse();
      for (const [i, k] of keys.entries()) {
        const row = (
          await gdb.query<{ id: string; amount: string }>(
            'SELECT id, amount::text FROM withdrawals WHERE caller = $1 AND idempotency_key = $2',
            ['bot-x', k],
          )
        ).rows;
        expect(row).toHaveLength(1);
        const pa = xa[i]!;
        const pb = fromB[i]!;
        const created = [pa, pb].filter((x) => x.status === 'fulfilled' && x.value.created);
        expect(created, k).toHaveLength(1);
        if (i % 2 === 0) {
          // same body: the other one is a replay of the same withdrawal
          expect(pa.status === 'fulfilled' && pb.status === 'fulfilled').toBe(true);
          if (pa.status === 'fulfilled' && pb.status === 'fulfilled')
            expect(pa.value.withdrawal.id).toBe(pb.value.withdrawal.id);
        } else {
          const lost = [pa, pb].find((x) => !(x.status === 'fulfilled' && x.value.created))!;
          expect(lost.status).toBe('rejected');
          expect((lost as PromiseRejectedResult).reason).toBeInstanceOf(IdempotencyConflictError);
          expect((lost as PromiseRejectedResult).reason.existingId).toBe(row[0]!.id);
        }
      }
      expect((await verifyAudit(gdb)).ok).toBe(true);
    });

    it('a batch that fails in the database is retried one by one: only the bad request fails', async () => {
      const fdb = await driver.fresh();
      const r = new WithdrawalRepo(fdb);
      await fdb.query(`CREATE FUNCTION test_boom() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.memo = 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF; RETURN NEW; END $$`);
      await fdb.query(
        'CREATE TRIGGER test_boom BEFORE INSERT ON withdrawals FOR EACH ROW EXECUTE FUNCTION test_boom()',
      );
      const done = await r.create({ idempotencyKey: 'k-done', caller: 'bot', body: body() });
      const results = await settled([
        r.create({ idempotencyKey: 'k-1', caller: 'bot', body: body() }),
        r.create({ idempotencyKey: 'k-boom', caller: 'bot', body: body({ memo: 'boom' }) }),
        r.create({ idempotencyKey: 'k-2', caller: 'bot', body: body() }),
        r.create({ idempotencyKey: 'k-done', caller: 'bot', body: body() }),
        r.create({ idempotencyKey: 'k-done', caller: 'bot', body: body({ amount: '1' }) }),
        r.create({ idempotencyKey: 'k-1', caller: 'bot', body: body() }),
      ]);
      expect(results.map((x) => x.status)).toEqual([
        'fulfilled',
        'rejected',
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
      ]);
      expect((results[1] as PromiseRejectedResult).reason.message).toMatch(/boom refused/);
      expect((results[4] as PromiseRejectedResult).reason).toBeInstanceOf(IdempotencyConflictError);
      const v = (i: number) =>
        (results[i] as PromiseFulfilledResult<{ created: boolean; withdrawal: { id: string } }>).value;
      expect(v(0).created).toBe(true);
      expect(v(2).created).toBe(true);
      expect(v(3)).toMatchObject({ created: false, withdrawal: { id: done.withdrawal.id } });
      expect(v(5)).toMatchObject({ created: false, withdrawal: { id: v(0).withdrawal.id } });
      const keys = (await fdb.query<{ k: string }>('SELECT idempotency_key AS k FROM withdrawals ORDER BY 1'))
        .rows;
      expect(keys.map((x) => x.k)).toEqual(['k-1', 'k-2', 'k-done']);
      const audit = await verifyAudit(fdb);
      expect(audit).toMatchObject({ ok: true, rows: 3 });
    });

    it('500 concurrent creates (two instances on PostgreSQL): 500 rows, a contiguous chain that verifies', async () => {
      const fdb = await driver.fresh();
      const handles = driver.another ? [fdb, await driver.another()] : [fdb];
      const repos = handles.map((h) => new WithdrawalRepo(h));
      const results = await Promise.all(
        Array.from({ length: 500 }, (_, i) =>
          repos[i % repos.length]!.create({
            idempotencyKey: `k-${i}`,
            caller: 'bot',
            body: body({ amount: `${i + 1}` }),
          }),
        ),
      );
      expect(results.every((r) => r.created)).toBe(true);
      expect(new Set(results.map((r) => r.withdrawal.id)).size).toBe(500);
      const v = await verifyAudit(fdb, { batch: 97 });
      expect(v).toMatchObject({ ok: true, rows: 500 });
      const rows = await listAudit(fdb, { limit: 1000 });
      expect(rows.map((a) => a.seq)).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
      expect(new Set(rows.map((a) => a.subject))).toEqual(
        new Set(results.map((r) => `withdrawal:${r.withdrawal.id}`)),
      );
      const n = await fdb.query<{ n: number }>('SELECT count(*)::int8 AS n FROM withdrawals');
      expect(n.rows[0]!.n).toBe(500);
    });
  });
  describe('group commit (concurrent moves share one transaction)', () => {
    let gdb: Db;
    let grepo: WithdrawalRepo;
    beforeAll(async () => {
      gdb = await driver.fresh();
      grepo = new WithdrawalRepo(gdb, { actor: 'test' });
    });
    const created = async (count: number, r = grepo) =>
      (
        await Promise.all(
          Array.from({ length: count }, () =>
            r.create({ idempotencyKey: key(), caller: 'bot-m', body: body() }),
          ),
        )
      ).map((x) => x.withdrawal.id);

    it('moves issued together commit in one transaction; a refused or unknown move fails alone', async () => {
      const ids = await created(24);
      const moved = await Promise.allSettled([
        ...ids.map((id, i) =>
          i === 5
            ? grepo.transition(id, ['prepared'], 'signed') // it is received: refused
            : grepo.transition(id, ['received'], 'prepared', { incrementAttempts: true }, { details: { i } }),
        ),
        grepo.transition('00000000-0000-4000-8000-000000000000', ['received'], 'prepared'),
      ]);
      expect(moved.map((m) => m.status)).toEqual([
        ...ids.map((_, i) => (i === 5 ? 'rejected' : 'fulfilled')),
        'rejected',
      ]);
      expect((moved[5] as PromiseRejectedResult).reason).toBeInstanceOf(WithdrawalStateError);
      expect((moved[5] as PromiseRejectedResult).reason.current).toBe('received');
      expect((moved[24] as PromiseRejectedResult).reason).toBeInstanceOf(NotFoundError);
      const done = moved
        .slice(0, 24)
        .flatMap((m) =>
          m.status === 'fulfilled' ? [(m as PromiseFulfilledResult<{ updatedAt: string }>).value] : [],
        );
      // one transaction: one now()
      expect(new Set(done.map((w) => w.updatedAt)).size).toBe(1);
      for (const [i, id] of ids.entries()) {
        const w = await grepo.get(id);
        const trail = await listAudit(gdb, { subject: `withdrawal:${id}` });
        if (i === 5) {
          expect(w).toMatchObject({ state: 'received', attempts: 0 });
          expect(trail.map((a) => a.action)).toEqual(['withdrawal.create']);
        } else {
          expect(w).toMatchObject({ state: 'prepared', attempts: 1 });
          expect(trail.map((a) => a.action)).toEqual(['withdrawal.create', 'withdrawal.prepared']);
          expect(trail[1]!.details).toMatchObject({ from: 'received', to: 'prepared', attempts: 1, i });
        }
      }
      expect((await verifyAudit(gdb)).ok).toBe(true);
    });

    it("a move's own audit entries are written just before its entry, and not at all when it is refused", async () => {
      const [a, b] = await created(2);
      const journal = (id: string) => [
        { actor: 'worker', action: 'flow.signed', subject: `withdrawal:${id}`, details: { hash: 'ab' } },
      ];
      const [ok, refused] = await Promise.allSettled([
        grepo.transition(a!, ['received'], 'prepared', {}, { audit: journal(a!) }),
        grepo.transition(b!, ['signed'], 'submitted', {}, { audit: journal(b!) }),
      ]);
      expect(ok.status).toBe('fulfilled');
      expect(refused.status).toBe('rejected');
      expect((await listAudit(gdb, { subject: `withdrawal:${a}` })).map((x) => x.action)).toEqual([
        'withdrawal.create',
        'flow.signed',
        'withdrawal.prepared',
      ]);
      expect((await listAudit(gdb, { subject: `withdrawal:${b}` })).map((x) => x.action)).toEqual([
        'withdrawal.create',
      ]);
      expect((await verifyAudit(gdb)).ok).toBe(true);
    });

    it('a batch that fails in the database is retried one by one: only the bad move fails', async () => {
      const ids = await created(6);
      const bad = ids[2]!;
      const results = await Promise.allSettled(
        ids.map((id) =>
          grepo.transition(
            id,
            ['received'],
            'prepared',
            {},
            {
              also: async (tx) => {
                // a statement the database refuses, inside the shared transaction
                if (id === bad) await tx.query('SELECT 1 / 0');
              },
            },
          ),
        ),
      );
      expect(results.map((r) => r.status)).toEqual(ids.map((id) => (id === bad ? 'rejected' : 'fulfilled')));
      expect((results[2] as PromiseRejectedResult).reason.message).toMatch(/division by zero/);
      for (const id of ids) {
        expect((await grepo.get(id))?.state).toBe(id === bad ? 'received' : 'prepared');
        const trail = await listAudit(gdb, { subject: `withdrawal:${id}` });
        expect(trail.length).toBe(id === bad ? 1 : 2);
      }
      expect((await verifyAudit(gdb)).ok).toBe(true);
    });

    it('a batch whose COMMIT fails: every move gets the error and none is written again', async () => {
      const fdb = await driver.fresh();
      const r = new WithdrawalRepo(fdb);
      // Checked only at COMMIT: the statements all succeed, the commit is refused.
      await fdb.query(`CREATE FUNCTION test_commit_boom() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.last_error = 'boom' THEN RAISE EXCEPTION 'refused at commit'; END IF; RETURN NEW; END $$`);
      await fdb.query(`CREATE CONSTRAINT TRIGGER test_commit_boom AFTER UPDATE ON withdrawals
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_commit_boom()`);
      const ids = await created(3, r);
      const results = await Promise.allSettled(
        ids.map((id, i) =>
          r.transition(id, ['received', 'prepared'], 'prepared', {
            incrementAttempts: true,
            ...(i === 1 ? { lastError: 'boom' } : {}),
          }),
        ),
      );
      expect(results.map((x) => x.status)).toEqual(['rejected', 'rejected', 'rejected']);
      for (const x of results)
        expect((x as PromiseRejectedResult).reason.message).toMatch(/refused at commit/);
      // Whether a failed COMMIT committed is unknown to the writer, so nothing was tried again:
      // a move that may be applied twice (attempts + 1 again) never is.
      for (const id of ids) expect(await r.get(id)).toMatchObject({ state: 'received', attempts: 0 });
      expect((await verifyAudit(fdb)).ok).toBe(true);
    });

    it('200 withdrawals moved to committed by two instances at once, in opposite orders: all moved once, the chain verifies', async () => {
      const fdb = await driver.fresh();
      const handles = driver.another ? [fdb, await driver.another()] : [fdb];
      const repos = handles.map((h) => new WithdrawalRepo(h));
      const ids = await created(200, repos[0]);
      const path: WithdrawalState[] = ['received', 'prepared', 'signed', 'submitted', 'committed'];
      // Each instance carries every other withdrawal; the two walk the ids in opposite orders.
      const carry = async (r: WithdrawalRepo, mine: string[]) => {
        for (let s = 1; s < path.length; s++)
          await Promise.all(mine.map((id) => r.transition(id, [path[s - 1]!], path[s]!)));
      };
      const first = ids.filter((_, i) => i % 2 === 0);
      const second = ids.filter((_, i) => i % 2 === 1).reverse();
      await Promise.all([carry(repos[0]!, first), carry(repos[repos.length - 1]!, second)]);
      const states = await fdb.query<{ state: string; n: number }>(
        'SELECT state, count(*)::int8 AS n FROM withdrawals GROUP BY state',
      );
      expect(states.rows).toEqual([{ state: 'committed', n: 200 }]);
      const v = await verifyAudit(fdb, { batch: 113 });
      expect(v).toMatchObject({ ok: true, rows: 200 * 5 });
    });
  });
});

// PostgreSQL only: a PGlite database has one connection, so no second transaction can wait for the
// first. Its own describe, so that no test is reported skipped where PostgreSQL runs.
describe.runIf(drivers.some((d) => d.name === 'postgres'))('a submission being recorded on postgres', () => {
  const driver = postgresDriver();
  let db: Db;
  let repo: WithdrawalRepo;
  beforeAll(async () => {
    db = await driver.fresh();
    repo = new WithdrawalRepo(db, { actor: 'test' });
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('holds off a takeover of the lease until it is committed, so the new holder finds it on record', async () => {
    const { withdrawal: w } = await repo.create({ idempotencyKey: key(), caller: 'bot', body: body() });
    expect(await repo.claim(w.id, 'x', 200)).toBeDefined();
    const order: string[] = [];
    let inside!: () => void;
    const entered = new Promise<void>((r) => {
      inside = r;
    });
    // x's insert in a transaction left open for a while (as a stalled round trip would).
    const recording = db.transaction(async (tx) => {
      await new ArtifactRepo(db).recordSubmission(
        { submissionId: 'held', commandId: w.commandId, withdrawalId: w.id, lease: 'x' },
        tx,
      );
      inside();
      await new Promise((r) => setTimeout(r, 500)); // x's lease lapses meanwhile
      order.push('recorded');
    });
    await entered;
    await new Promise((r) => setTimeout(r, 300));
    const claim = repo.claim(w.id, 'y', 60_000).then((got) => {
      order.push('taken over');
      return got;
    });
    await recording;
    expect(await claim).toBeDefined();
    expect(order).toEqual(['recorded', 'taken over']);
    expect((await new ArtifactRepo(db).submissionsFor(w.commandId)).map((s) => s.submissionId)).toEqual([
      'held',
    ]);
  });
});

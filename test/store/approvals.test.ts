/**
 * ApprovalRepo on both drivers: opening a request (the same statement again
 * → the same request; a changed one supersedes the pending one; at most one
 * pending per subject, also under concurrent opens), recording approvals
 * (once per approver, only while pending and unexpired, an approve only
 * through an active credential of that approver), closing, results, due
 * requests, listing; approver credentials (register once per key, activate
 * with a seal, revoke); approvals are append-only; everything audited.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAudit, verifyAudit } from '../../src/store/audit.js';
import type { Db } from '../../src/store/db.js';
import {
  ApprovalStateError,
  BadRequestError,
  CredentialStateError,
  DuplicateApprovalError,
  DuplicateCredentialError,
  NotFoundError,
} from '../../src/store/errors.js';
import { storeOn } from '../../src/store/index.js';
import { ApprovalRepo, type NewApprovalRequest } from '../../src/store/repos/approvals.js';
import { storeDrivers } from '../support/pg.js';

const drivers = await storeDrivers();

let n = 0;
const hex = (i: number) => i.toString(16).padStart(64, '0');
const pubKey = () => hex(1_000_000 + n++);

function request(subject: string, over: Partial<NewApprovalRequest> = {}): NewApprovalRequest {
  const id = over.id ?? randomUUID();
  return {
    subject,
    statement: { v: 1, request: id, subject, party: 'alice::1220aa', amount: '10' },
    statementHash: hex(n++),
    party: 'alice::1220aa',
    requester: 'bot-1',
    entryPoint: 'withdrawal',
    policyVersion: 3,
    rule: 'big-needs-two',
    requirement: [{ group: 'treasury', count: 2 }],
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    resume: { withdrawal: subject },
    ...over,
  };
}

describe.each(drivers)('approvals on $name', (driver) => {
  let db: Db;
  let repo: ApprovalRepo;

  beforeAll(async () => {
    db = await driver.fresh();
    repo = new ApprovalRepo(db, { actor: 'test' });
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  /** An active credential of `approver`. */
  async function activeKey(approver: string): Promise<string> {
    const c = await repo.registerCredential({ approver, kind: 'ed25519', publicKey: pubKey() });
    return (await repo.activateCredential(c.id, { actor: 'admin', seal: `seal-${c.id}` })).id;
  }

  describe('requests', () => {
    it('open: pending, round-trips; the same statement again is the same request; a changed one supersedes it', async () => {
      const subject = `withdrawal:${randomUUID()}`;
      const first = request(subject);
      const r1 = await repo.open(first);
      expect(r1).toMatchObject({
        id: (first.statement as { request: string }).request,
        subject,
        status: 'pending',
        statement: first.statement,
        statementHash: first.statementHash,
        party: 'alice::1220aa',
        requester: 'bot-1',
        entryPoint: 'withdrawal',
        policyVersion: 3,
        rule: 'big-needs-two',
        requirement: [{ group: 'treasury', count: 2 }],
        expiresAt: first.expiresAt,
        resume: { withdrawal: subject },
      });
      expect(r1.decidedAt).toBeUndefined();
      expect(r1.result).toBeUndefined();
      expect(await repo.get(r1.id)).toEqual(r1);
      // the same statement (the same hash) again: the pending request as is, nothing audited
      expect(await repo.open(first)).toEqual(r1);
      expect(await repo.open({ ...first, requester: 'bot-2', resume: { other: 1 } })).toEqual(r1);
      const changed = request(subject);
      const r2 = await repo.open(changed);
      expect(r2.id).not.toBe(r1.id);
      expect(r2.status).toBe('pending');
      expect(await repo.get(r1.id)).toMatchObject({
        status: 'superseded',
        decidedBy: 'bot-1',
        reason: `superseded by request ${r2.id}`,
      });
      expect(await repo.pendingFor(subject)).toEqual(r2);
      expect(await repo.latestFor(subject)).toEqual(r2);
      const trail = await listAudit(db, { subject });
      expect(trail.map((a) => [a.action, a.actor])).toEqual([
        ['approval.requested', 'bot-1'],
        ['approval.superseded', 'bot-1'],
        ['approval.requested', 'bot-1'],
      ]);
      expect(trail[1]?.details).toMatchObject({ request: r1.id, supersededBy: r2.id });
      // a changed statement under the pending request's own id: refused, says why
      const same = await repo
        .open(request(subject, { id: r2.id, statement: { request: r2.id, other: true } }))
        .catch((e) => e);
      expect(same).toBeInstanceOf(BadRequestError);
      expect((same as Error).message).toMatch(/a changed statement needs a new request id/);
      // an id the statement contradicts
      await expect(
        repo.open(request(subject, { id: randomUUID(), statement: { request: randomUUID() } })),
      ).rejects.toThrow(/the statement names request/);
    });

    it('concurrent opens of one subject leave exactly one pending request', async () => {
      const subject = `withdrawal:${randomUUID()}`;
      const handles = driver.another ? [db, await driver.another()] : [db];
      const opened = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          new ApprovalRepo(handles[i % handles.length]!).open(request(subject)),
        ),
      );
      expect(opened.every((r) => r.status === 'pending')).toBe(true);
      const rows = await db.query<{ status: string; n: number }>(
        'SELECT status, count(*)::int AS n FROM approval_requests WHERE subject = $1 GROUP BY status ORDER BY status',
        [subject],
      );
      expect(rows.rows).toEqual([
        { status: 'pending', n: 1 },
        { status: 'superseded', n: 9 },
      ]);
      // the database itself refuses a second pending one
      const pending = await repo.pendingFor(subject);
      const other = (
        await db.query<{ id: string }>(
          `SELECT id FROM approval_requests WHERE subject = $1 AND status = 'superseded' LIMIT 1`,
          [subject],
        )
      ).rows[0]!.id;
      await expect(
        db.query(`UPDATE approval_requests SET status = 'pending', decided_at = NULL WHERE id = $1`, [other]),
      ).rejects.toMatchObject({ code: '23505' });
      expect(pending).toBeDefined();
    });

    it('record: once per approver; only pending, unexpired requests; an approve through an active credential of its own', async () => {
      const subject = `withdrawal:${randomUUID()}`;
      const r = await repo.open(request(subject));
      const alice = await activeKey('alice');
      const bob = await activeKey('bob');
      const a1 = await repo.record({
        requestId: r.id,
        approver: 'alice',
        credentialId: alice,
        decision: 'approve',
        signature: 'c2lnLWFsaWNl',
      });
      expect(a1).toMatchObject({
        requestId: r.id,
        approver: 'alice',
        credentialId: alice,
        decision: 'approve',
        signature: 'c2lnLWFsaWNl',
      });
      expect(a1.reason).toBeUndefined();
      // the same approver again, approving or rejecting: refused, one approver counts once
      for (const decision of ['approve', 'reject'] as const) {
        const e = await repo
          .record({ requestId: r.id, approver: 'alice', credentialId: alice, decision, signature: 'eA==' })
          .catch((x) => x);
        expect(e).toBeInstanceOf(DuplicateApprovalError);
        expect((e as Error).message).toBe(
          `approver alice has already approved request ${r.id}; one approver counts once`,
        );
        expect((e as DuplicateApprovalError).code).toBe('invalid_state');
      }
      // another approver's credential, a pending one, a missing signature: refused
      await expect(
        repo.record({
          requestId: r.id,
          approver: 'carol',
          credentialId: bob,
          decision: 'approve',
          signature: 'eA==',
        }),
      ).rejects.toThrow(/credential .* is not an active credential of approver carol/);
      const pendingKey = await repo.registerCredential({
        approver: 'carol',
        kind: 'ed25519',
        publicKey: pubKey(),
      });
      await expect(
        repo.record({
          requestId: r.id,
          approver: 'carol',
          credentialId: pendingKey.id,
          decision: 'approve',
          signature: 'eA==',
        }),
      ).rejects.toThrow(/not an active credential of approver carol \(it is pending\)/);
      await expect(
        repo.record({ requestId: r.id, approver: 'bob', credentialId: bob, decision: 'approve' }),
      ).rejects.toMatchObject({
        field: 'signature',
      });
      // a rejection needs no credential
      const rej = await repo.record({
        requestId: r.id,
        approver: 'dave',
        decision: 'reject',
        reason: 'not today',
      });
      expect(rej).toMatchObject({ decision: 'reject', reason: 'not today' });
      expect(rej.credentialId).toBeUndefined();
      const b1 = await repo.record({
        requestId: r.id,
        approver: 'bob',
        credentialId: bob,
        decision: 'approve',
        signature: 'c2lnLWJvYg==',
      });
      // In the order recorded, except that two recorded within the same clock tick (the embedded
      // engine's clock can give both one timestamp) come in id order: compared as a set.
      expect(
        (await repo.approvalsOf(r.id))
          .map((a) => [a.approver, a.decision])
          .sort((x, y) => (x[0]! < y[0]! ? -1 : 1)),
      ).toEqual([
        ['alice', 'approve'],
        ['bob', 'approve'],
        ['dave', 'reject'],
      ]);
      // approvals are evidence: never changed nor removed
      await expect(
        db.query(`UPDATE approvals SET decision = 'reject' WHERE id = $1`, [b1.id]),
      ).rejects.toThrow(/append-only/);
      await expect(db.query('DELETE FROM approvals WHERE id = $1', [b1.id])).rejects.toThrow(/append-only/);
      // closed: no more approvals
      const closed = await repo.close(r.id, 'approved', { actor: 'system', reason: 'two of treasury' });
      expect(closed).toMatchObject({ status: 'approved', decidedBy: 'system', reason: 'two of treasury' });
      expect(closed.decidedAt).toBeDefined();
      const late = await repo
        .record({ requestId: r.id, approver: 'erin', decision: 'reject', reason: 'late' })
        .catch((e) => e);
      expect(late).toBeInstanceOf(ApprovalStateError);
      expect((late as Error).message).toMatch(/is approved, no longer pending/);
      await expect(repo.close(r.id, 'rejected', { actor: 'x' })).rejects.toBeInstanceOf(ApprovalStateError);
      const trail = await listAudit(db, { subject });
      expect(trail.map((a) => [a.action, a.actor])).toEqual([
        ['approval.requested', 'bot-1'],
        ['approval.approve', 'alice'],
        ['approval.reject', 'dave'],
        ['approval.approve', 'bob'],
        ['approval.closed', 'system'],
      ]);
      expect(trail[1]?.details).toMatchObject({
        request: r.id,
        statementHash: r.statementHash,
        credential: alice,
        signature: 'c2lnLWFsaWNl',
      });
      await expect(
        repo.record({ requestId: randomUUID(), approver: 'x', decision: 'reject' }),
      ).rejects.toBeInstanceOf(NotFoundError);
    });

    it('an expired request takes no approval; due() lists the pending ones past their expiry', async () => {
      const subject = `withdrawal:${randomUUID()}`;
      const past = new Date(Date.now() - 1000).toISOString();
      const r = await repo.open(request(subject, { expiresAt: past }));
      const e = await repo.record({ requestId: r.id, approver: 'dave', decision: 'reject' }).catch((x) => x);
      expect(e).toBeInstanceOf(ApprovalStateError);
      expect((e as Error).message).toMatch(/expired at .*: it can no longer be approved or rejected/);
      const due = await repo.due(new Date());
      expect(due.map((d) => d.id)).toContain(r.id);
      expect((await repo.due(new Date(Date.now() - 60_000))).map((d) => d.id)).not.toContain(r.id);
      await repo.close(r.id, 'expired', { actor: 'system' });
      expect((await repo.due(new Date())).map((d) => d.id)).not.toContain(r.id);
    });

    it('setResult, list by status and page, latestFor after close', async () => {
      const fresh = await driver.fresh();
      const s = storeOn(fresh, 'svc');
      const made = [];
      for (let i = 0; i < 4; i++) {
        made.push(await s.approvals.open(request(`command:${i}`)));
        await new Promise((r) => setTimeout(r, 5));
      }
      await s.approvals.close(made[1]!.id, 'cancelled', { reason: 'caller cancelled' });
      expect((await s.approvals.close(made[2]!.id, 'rejected')).decidedBy).toBe('svc');
      const withResult = await s.approvals.setResult(made[2]!.id, { outcome: 'refused', at: 1 });
      expect(withResult.result).toEqual({ outcome: 'refused', at: 1 });
      expect((await s.approvals.list()).map((r) => r.id)).toEqual(made.map((r) => r.id).reverse());
      expect((await s.approvals.list({ status: 'pending' })).map((r) => r.id)).toEqual([
        made[3]!.id,
        made[0]!.id,
      ]);
      expect((await s.approvals.list({ limit: 2 })).map((r) => r.id)).toEqual([made[3]!.id, made[2]!.id]);
      expect((await s.approvals.list({ before: made[2]!.createdAt })).map((r) => r.id)).toEqual([
        made[1]!.id,
        made[0]!.id,
      ]);
      await expect(s.approvals.list({ status: 'nope' as 'pending' })).rejects.toBeInstanceOf(BadRequestError);
      expect((await s.approvals.latestFor('command:1'))?.status).toBe('cancelled');
      expect(await s.approvals.pendingFor('command:1')).toBeUndefined();
      expect(await s.approvals.get('not-a-uuid')).toBeUndefined();
      expect((await listAudit(fresh)).map((a) => a.action)).toEqual([
        'approval.requested',
        'approval.requested',
        'approval.requested',
        'approval.requested',
        'approval.closed',
        'approval.closed',
        'approval.result',
      ]);
      expect((await verifyAudit(fresh)).ok).toBe(true);
    });
  });

  describe('credentials', () => {
    it('register (pending) → activate (sealed) → revoke; a key registered once; audited', async () => {
      const key = pubKey();
      const c = await repo.registerCredential({
        approver: 'frank',
        kind: 'ed25519',
        publicKey: key.toUpperCase(),
        label: 'yubikey',
      });
      expect(c).toMatchObject({
        approver: 'frank',
        kind: 'ed25519',
        publicKey: key,
        label: 'yubikey',
        status: 'pending',
      });
      expect(c.seal).toBeUndefined();
      expect(c.activatedBy).toBeUndefined();
      const dup = await repo
        .registerCredential({ approver: 'mallory', kind: 'ed25519', publicKey: key })
        .catch((e) => e);
      expect(dup).toBeInstanceOf(DuplicateCredentialError);
      expect((dup as Error).message).toMatch(new RegExp(`already registered \\(credential ${c.id}\\)`));
      await expect(
        repo.registerCredential({ approver: 'frank', kind: 'ed25519', publicKey: 'abcd' }),
      ).rejects.toMatchObject({ field: 'publicKey' });
      const active = await repo.activateCredential(c.id, { actor: 'admin', seal: 'c2VhbA==' });
      expect(active).toMatchObject({ status: 'active', activatedBy: 'admin', seal: 'c2VhbA==' });
      expect(active.activatedAt).toBeDefined();
      await expect(repo.activateCredential(c.id, { actor: 'admin', seal: 'x' })).rejects.toBeInstanceOf(
        CredentialStateError,
      );
      expect(await repo.credential(c.id)).toEqual(active);
      const other = await repo.registerCredential({
        approver: 'frank',
        kind: 'ed25519',
        publicKey: pubKey(),
      });
      expect((await repo.credentials({ approver: 'frank' })).map((x) => x.id)).toEqual([c.id, other.id]);
      expect((await repo.credentials({ approver: 'frank', status: 'active' })).map((x) => x.id)).toEqual([
        c.id,
      ]);
      const revoked = await repo.revokeCredential(c.id, { actor: 'admin' });
      expect(revoked).toMatchObject({ status: 'revoked', activatedBy: 'admin' });
      const again = await repo.revokeCredential(c.id, { actor: 'admin' }).catch((e) => e);
      expect(again).toBeInstanceOf(CredentialStateError);
      expect((again as Error).message).toMatch(/is revoked: it cannot be used again/);
      await expect(repo.revokeCredential(randomUUID())).rejects.toBeInstanceOf(NotFoundError);
      expect(
        (await listAudit(db, { subject: 'approver:frank' })).map((a) => [a.action, a.actor, a.details]),
      ).toEqual([
        [
          'approver.registered',
          'frank',
          { credential: c.id, kind: 'ed25519', publicKey: key, label: 'yubikey' },
        ],
        [
          'approver.activated',
          'admin',
          { credential: c.id, from: 'pending', to: 'active', kind: 'ed25519', publicKey: key },
        ],
        [
          'approver.registered',
          'frank',
          { credential: other.id, kind: 'ed25519', publicKey: other.publicKey },
        ],
        [
          'approver.revoked',
          'admin',
          { credential: c.id, from: 'active', to: 'revoked', kind: 'ed25519', publicKey: key },
        ],
      ]);
      // an active row without a seal cannot exist
      await expect(
        db.query(
          `UPDATE approver_credentials SET status = 'active', activated_by = 'x', activated_at = now() WHERE id = $1`,
          [other.id],
        ),
      ).rejects.toMatchObject({ code: '23514' });
      expect((await verifyAudit(db)).ok).toBe(true);
    });
  });
});

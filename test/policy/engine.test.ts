/**
 * The policy engine on its own (PGlite store, a file keystore for the seal
 * key, a clock the test moves): approvals past the request's expiry do not
 * count, through the engine or written into the database; a policy version
 * written into the database without the service's seal is never used, and a
 * start without a file refuses it; a policy change that needs approvals stays
 * pending, the old version in force, until two admins approve it.
 */
import { randomUUID } from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Signer } from '../../src/keys/signer.js';
import { statementHash } from '../../src/policy/approval.js';
import { parsePolicy } from '../../src/policy/document.js';
import { PolicyEngine, PolicyEngineError } from '../../src/policy/engine.js';
import type { Store } from '../../src/store/index.js';
import {
  approvalSignature,
  approverKey,
  engineStore,
  transferAction,
  transferRequest,
  treasuryPolicy,
} from '../support/policy-env.js';

let store: Store;
let signer: Signer;
let now: Date;
let engine: PolicyEngine;

const doc = treasuryPolicy;
const request = (amount: string, subject?: string) =>
  transferRequest(amount, subject !== undefined ? { subject } : {});
const transfer = transferAction;
const credential = (approver: string) => approverKey(store, engine, approver);
const sign = approvalSignature;

beforeEach(async () => {
  ({ store, signer } = await engineStore());
  now = new Date();
  engine = new PolicyEngine({ store, signer, now: () => now, refreshMs: 0 });
  await engine.start(parsePolicy(doc()));
});
afterEach(async () => {
  await store?.close();
  await signer?.close();
});

describe('expiry', () => {
  it('an approval after the request expired is refused, and one written into the database does not count', async () => {
    const tara = await credential('tara');
    const tom = await credential('tom');
    const req = request('150');
    const d = await engine.decide(req);
    expect(d.outcome).toBe('approve');
    const id = d.outcome === 'approve' ? d.request : '';
    const r = (await store.approvals.get(id))!;
    await engine.answer({
      requestId: id,
      approver: 'tara',
      decision: 'approve',
      credentialId: tara.id,
      statementHash: r.statementHash,
      signature: sign(tara.sk, r.statementHash),
    });
    now = new Date(now.getTime() + 2 * 3_600_000);
    const late = engine.answer({
      requestId: id,
      approver: 'tom',
      decision: 'approve',
      credentialId: tom.id,
      statementHash: r.statementHash,
      signature: sign(tom.sk, r.statementHash),
    });
    await expect(late).rejects.toMatchObject({ code: 'approval_expired' });
    // Written straight into the table: valid signature, but the request expired before it was complete.
    await store.db.query(
      `INSERT INTO approvals (id, request_id, approver, credential_id, decision, signature, created_at)
       VALUES ($1, $2, 'tom', $3, 'approve', $4, now())`,
      [randomUUID(), id, tom.id, sign(tom.sk, r.statementHash)],
    );
    const count = await engine.count((await store.approvals.get(id))!);
    expect(count.met).toBe(false);
    // The expired request ends, and a decision on the same subject asks afresh.
    expect((await engine.sweep()).map((x) => x.id)).toEqual([id]);
    const again = await engine.decide(req);
    expect(again.outcome).toBe('approve');
    expect(again.outcome === 'approve' && again.request).not.toBe(id);
  });

  it('two valid approvals make the same decision an allow, naming the approvers', async () => {
    const tara = await credential('tara');
    const tom = await credential('tom');
    const req = request('150');
    const d = await engine.decide(req);
    const id = d.outcome === 'approve' ? d.request : '';
    const r = (await store.approvals.get(id))!;
    expect(statementHash(r.statement as never)).toBe(r.statementHash);
    for (const a of [tara, tom])
      await engine.answer({
        requestId: id,
        approver: a.approver,
        decision: 'approve',
        credentialId: a.id,
        statementHash: r.statementHash,
        signature: sign(a.sk, r.statementHash),
      });
    const allowed = await engine.decide(req);
    expect(allowed).toMatchObject({ outcome: 'allow', approvedBy: ['tara', 'tom'], policy: { rule: 'big' } });
    // Another amount under the same subject is another statement: new approvals.
    expect((await engine.decide({ ...req, actions: [transfer('151')] })).outcome).toBe('approve');
  });
});

describe('the seal', () => {
  it('a version written into the database without the seal is not used; a start without a file refuses it', async () => {
    const before = await engine.current(null);
    const evil = parsePolicy('version: 1\ndefault: allow\nrules:\n  - id: all\n    decision: allow\n');
    await store.db.query(`UPDATE policy_versions SET status = 'superseded' WHERE status = 'in_force'`);
    await store.db.query(
      `INSERT INTO policy_versions (version, sha256, text, format, source, status, created_by, created_at, decided_at)
       VALUES (99, $1, $2, 'yaml', 'api', 'in_force', 'mallory', now(), now())`,
      [evil.sha256, evil.text],
    );
    const after = await engine.current(null);
    expect(after.version).toBe(before.version);
    expect((await engine.decide(request('150'))).outcome).toBe('approve');
    const fresh = new PolicyEngine({ store, signer, now: () => now });
    await expect(fresh.start()).rejects.toBeInstanceOf(PolicyEngineError);
  });

  it('a credential whose public key was changed in the database no longer verifies', async () => {
    const tara = await credential('tara');
    const other = Buffer.from(ed25519.getPublicKey(ed25519.utils.randomSecretKey())).toString('hex');
    await store.db.query(`UPDATE approver_credentials SET public_key = $1 WHERE id = $2`, [other, tara.id]);
    expect(await engine.credentialValid((await store.approvals.credential(tara.id))!)).toBe(false);
  });
});

describe('policy changes', () => {
  it('a change that needs two admins stays pending, the old version in force, until both approve', async () => {
    await engine.replace(doc('policyChanges: { approvals: [{ group: admins, count: 2 }] }'), 'yaml', 'ada');
    const v2 = await engine.current(null);
    const ada = await credential('ada');
    const abe = await credential('abe');
    const r = await engine.replace(
      doc('policyChanges: { approvals: [{ group: admins, count: 2 }] }\nname: v3'),
      'yaml',
      'carl',
    );
    expect(r.version.status).toBe('pending');
    expect((await engine.current(null)).version).toBe(v2.version);
    const ar = r.approvalRequest!;
    await engine.answer({
      requestId: ar.id,
      approver: 'ada',
      decision: 'approve',
      credentialId: ada.id,
      statementHash: ar.statementHash,
      signature: sign(ada.sk, ar.statementHash),
    });
    expect((await engine.current(null)).version).toBe(v2.version);
    await engine.answer({
      requestId: ar.id,
      approver: 'abe',
      decision: 'approve',
      credentialId: abe.id,
      statementHash: ar.statementHash,
      signature: sign(abe.sk, ar.statementHash),
    });
    expect((await engine.current(null)).version).toBe(r.version.version);
  });
});

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Signer } from '../../src/keys/signer.js';
import { parsePolicy } from '../../src/policy/document.js';
import { PolicyEngine } from '../../src/policy/engine.js';
import type { Store } from '../../src/store/index.js';
import {
  ALICE,
  type ApproverKey,
  approveAll as approveAllWith,
  approverKey,
  engineStore,
  transferRequest,
  treasuryPolicy,
} from '../support/policy-env.js';

const doc = treasuryPolicy;

const LIMITED = doc(`limits:
  - id: daily
    per: [party]
    window: 24h
    maxAmount: "100"
`);

const ALLOW_ALL_DOC = 'version: 1\ndefault: allow\nrules:\n  - id: all\n    decision: allow\n';

let store: Store;
let signer: Signer;
let now: Date;
let engine: PolicyEngine;

const request = (amount: string, subject?: string, flow?: string) =>
  transferRequest(amount, {
    ...(subject !== undefined ? { subject } : {}),
    ...(flow !== undefined ? { flow } : {}),
    roles: ['operator'],
  });
const credential = (approver: string) => approverKey(store, engine, approver);
const approveAll = (id: string, who: ApproverKey[]) => approveAllWith(store, engine, id, who);

async function startWith(text: string) {
  engine = new PolicyEngine({ store, signer, now: () => now, refreshMs: 0 });
  await engine.start(parsePolicy(text));
}

beforeEach(async () => {
  ({ store, signer } = await engineStore());
  now = new Date();
});
afterEach(async () => {
  await store?.close();
  await signer?.close();
});

describe('database edits of policy_versions', () => {
  it('no version in force after a database edit must not mean allow-all', async () => {
    await startWith(doc());
    expect((await engine.decide(request('150'))).outcome).toBe('approve');
    // One UPDATE, no key needed: the engine must not fall back to the built-in allow-all. It fails
    // closed (nothing is signed), and a start without a file refuses the database.
    await store.db.query(`UPDATE policy_versions SET status = 'superseded' WHERE status = 'in_force'`);
    expect((await engine.decide(request('5'))).outcome).toBe('deny');
    expect((await engine.decide(request('150'))).outcome).toBe('deny');
    const fresh = new PolicyEngine({ store, signer, now: () => now });
    await expect(fresh.start()).rejects.toMatchObject({ code: 'policy_not_sealed' });
  });

  it('an older sealed version put back in force by a database edit must not be used', async () => {
    await startWith(ALLOW_ALL_DOC);
    const v1 = (await engine.current(null)).version;
    await engine.replace(doc(), 'yaml', 'ada');
    expect((await engine.decide(request('150'))).outcome).toBe('approve');
    // The seal covers (version, sha256), not "this is the version in force": swap the statuses.
    await store.db.query(`UPDATE policy_versions SET status = 'superseded' WHERE status = 'in_force'`);
    await store.db.query(`UPDATE policy_versions SET status = 'in_force' WHERE version = $1`, [v1]);
    expect((await engine.decide(request('150'))).outcome).toBe('approve');
  });
});

describe('restarts with a policy file', () => {
  it('an unchanged file must not undo a version brought in through the API since (after the file changed once)', async () => {
    const fileA = parsePolicy(ALLOW_ALL_DOC);
    const fileB = parsePolicy(`${ALLOW_ALL_DOC}# edited once\n`);
    await startWith(fileA.text);
    // The operator edits the file once: it comes into force at the next start, as documented.
    engine = new PolicyEngine({ store, signer, now: () => now, refreshMs: 0 });
    await engine.start(fileB);
    // Then a stricter version comes in through PUT /v1/policy.
    await engine.replace(doc(), 'yaml', 'ada');
    const api = (await engine.current(null)).version;
    expect((await engine.decide(request('150'))).outcome).toBe('approve');
    // A plain restart with the same file B: `list()` is newest first, so `.at(-1)` is file A,
    // "the file changed", and B replaces the API version.
    engine = new PolicyEngine({ store, signer, now: () => now, refreshMs: 0 });
    await engine.start(fileB);
    expect((await engine.current(null)).version).toBe(api);
    expect((await engine.decide(request('150'))).outcome).toBe('approve');
  });
});

describe('database edits of approval requests', () => {
  it("approvals of a withdrawal must not bring a policy version into force when the request's subject is edited", async () => {
    await startWith(doc('policyChanges: { approvals: [{ group: admins, count: 2 }] }'));
    const tara = await credential('tara');
    const tom = await credential('tom');
    const inForce = (await engine.current(null)).version;
    // Mallory writes an allow-all version as pending (no seal needed for a pending row) …
    const evil = parsePolicy(ALLOW_ALL_DOC);
    const pending = await store.policy.addVersion({
      text: evil.text,
      format: evil.format,
      sha256: evil.sha256,
      source: 'api',
      status: 'pending',
      createdBy: 'mallory',
    });
    // … and points a withdrawal's approval request at it. The statement (and its hash) is untouched:
    // the approvers see and sign the withdrawal they expect.
    const d = await engine.decide(request('150'));
    const id = d.outcome === 'approve' ? d.request : '';
    await store.db.query(`UPDATE approval_requests SET subject = $1 WHERE id = $2`, [
      `policy:${pending.version}`,
      id,
    ]);
    await approveAll(id, [tara, tom]);
    expect((await engine.current(null)).version).toBe(inForce);
    expect((await engine.decide(request('150'))).outcome).toBe('approve');
  });

  it('a pending version whose text and sha256 are edited while it awaits approvals must not be sealed', async () => {
    await startWith(doc('policyChanges: { approvals: [{ group: admins, count: 2 }] }'));
    const ada = await credential('ada');
    const abe = await credential('abe');
    const before = (await engine.current(null)).version;
    // A legitimate, stricter change: the admins are asked to approve its sha256.
    const stricter = doc('policyChanges: { approvals: [{ group: admins, count: 2 }] }\nname: stricter');
    const r = await engine.replace(stricter, 'yaml', 'carl');
    const statement = r.approvalRequest!.statement as { policy: { sha256: string } };
    // Mallory swaps the pending row's document (pending rows carry no seal) for an allow-all one.
    const evil = parsePolicy(ALLOW_ALL_DOC);
    await store.db.query(`UPDATE policy_versions SET text = $1, sha256 = $2 WHERE version = $3`, [
      evil.text,
      evil.sha256,
      r.version.version,
    ]);
    await approveAll(r.approvalRequest!.id, [ada, abe]);
    const now = await engine.current(null);
    // What comes into force must be what the admins approved (or nothing), never the swapped text.
    expect(now.version === before || now.sha256 === statement.policy.sha256).toBe(true);
    expect((await engine.decide(request('150'))).outcome).toBe('approve');
  });

  it('a revoked credential must not count again after its status is edited back to active', async () => {
    await startWith(doc());
    const tara = await credential('tara');
    const tom = await credential('tom');
    await store.approvals.revokeCredential(tom.id, { actor: 'root' });
    // Revoking clears the seal: the status edited back needs a seal, and one made up does not verify.
    await expect(
      store.db.query(`UPDATE approver_credentials SET status = 'active' WHERE id = $1`, [tom.id]),
    ).rejects.toThrow();
    await store.db.query(`UPDATE approver_credentials SET status = 'active', seal = $2 WHERE id = $1`, [
      tom.id,
      Buffer.alloc(64, 1).toString('base64'),
    ]);
    expect(await engine.credentialValid((await store.approvals.credential(tom.id))!)).toBe(false);
    void tara;
  });
});

describe('one subject, several transactions', () => {
  it('a second transaction under a committed subject must count against the limit', async () => {
    await startWith(LIMITED);
    // /v1/sign keys its decision by `sign:<party>:<command id>:<hash>` (pipeline.ts policySubject):
    // the caller picks the command id, not the hash.
    const subject = `sign:${ALICE}:cmd-1:${'1'.repeat(64)}`;
    expect((await engine.decide(request('90', subject, 'sign'))).outcome).toBe('allow');
    await engine.settle(subject, 'committed');
    // Another transaction (other inputs, same command id, so another hash): 90 + 90 > 100.
    const second = await engine.decide(request('90', `sign:${ALICE}:cmd-1:${'2'.repeat(64)}`, 'sign'));
    expect(second.outcome).toBe('deny');
    const used = await store.policy.usage([{ key: `daily|party=${ALICE}`, windowMs: 86_400_000 }]);
    expect(used.get(`daily|party=${ALICE}`)?.amount).toBe('90'); // the denied one reserved nothing
  });

  it('one approval must not authorise a second transaction under the same subject after the first was signed, nor after expiry', async () => {
    await startWith(doc());
    const tara = await credential('tara');
    const tom = await credential('tom');
    const subject = `sign:${ALICE}:cmd-2:${'3'.repeat(64)}`;
    const d = await engine.decide(request('150', subject, 'sign'));
    const id = d.outcome === 'approve' ? d.request : '';
    await approveAll(id, [tara, tom]);
    const first = await engine.decide(request('150', subject, 'sign'));
    expect(first.outcome).toBe('allow');
    await engine.settle(subject, 'committed');
    // Two hours later (the request's ttl is 1 h), another prepared transaction with the same
    // command id and the same actions: a second payment of 150.
    now = new Date(now.getTime() + 2 * 3_600_000);
    const second = await engine.decide(request('150', `sign:${ALICE}:cmd-2:${'4'.repeat(64)}`, 'sign'));
    expect(second.outcome).not.toBe('allow');
  });
});

describe('policy document', () => {
  it('a memo pattern with nested quantifiers must not let a caller-chosen memo stall the event loop', () => {
    // A plausible pattern ("reference codes joined by dashes") backtracks exponentially on a memo
    // like 'AAAA…A!' (24 characters: hundreds of ms; 40: hours). It must not load.
    expect(() =>
      parsePolicy(`version: 1
default: deny
rules:
  - id: ref
    when: { memo: { pattern: "([A-Z0-9]+-?)+" } }
    decision: allow
`),
    ).toThrow(/exponential time/);
  });
});

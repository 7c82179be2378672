/**
 * Attacks on the policy engine by someone who can write the database or
 * choose a request's command id (PGlite store, a file keystore for the seal
 * key, a clock the test moves). Each was a working attack once; each test
 * states what must hold:
 *
 * - a database edit that leaves no version in force (the engine then signs
 *   nothing) or brings back an older sealed one must not relax the policy;
 * - an unchanged policy file must not undo a version brought in since;
 * - a pending version edited while admins approve it must not be sealed;
 * - a database edit of an approval request's subject must not turn approvals
 *   of a withdrawal into the approval of a policy change;
 * - a revoked credential must not count again after its status is edited;
 * - a second transaction under the same command id is another subject: it
 *   counts against the limit and needs its own approvals;
 * - a memo pattern that backtracks exponentially does not load.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ed25519 } from '@noble/curves/ed25519.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RecognisedAction } from '../../src/intent/model.js';
import { FileBackend } from '../../src/keys/file-backend.js';
import { Signer } from '../../src/keys/signer.js';
import { approvalMessage } from '../../src/policy/approval.js';
import { parsePolicy } from '../../src/policy/document.js';
import { PolicyEngine } from '../../src/policy/engine.js';
import type { PolicyRequest } from '../../src/policy/hook.js';
import { openPglite } from '../../src/store/db.js';
import { type Store, storeOn } from '../../src/store/index.js';
import { migrate } from '../../src/store/migrations.js';
import { pgliteTemplateBlob } from '../support/pg.js';

const ALICE = `alice::1220${'a'.repeat(64)}`;
const BOB = `bob::1220${'b'.repeat(64)}`;

const doc = (extra = '') => `version: 1
approverGroups: { treasury: [tara, tom], admins: [ada, abe] }
approvals: { ttl: 1h }
${extra}
rules:
  - id: big
    when: { amount: { gte: "100" } }
    decision: approve
    approvals: [{ group: treasury, count: 2 }]
  - id: rest
    decision: allow
`;

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

function transfer(amount: string): RecognisedAction {
  return {
    kind: 'transfer',
    nodeId: '0',
    template:
      'splice-api-token-transfer-instruction-v1:Splice.Api.Token.TransferInstructionV1:TransferFactory',
    actingParties: [ALICE],
    parties: { sender: ALICE, receiver: BOB },
    amounts: { amount },
    instrument: { admin: 'dso::1220', id: 'Amulet' },
    deadlines: {},
  };
}

function request(amount: string, subject = `withdrawal:${randomUUID()}`, flow = 'withdrawal'): PolicyRequest {
  return {
    flow,
    partyId: ALICE,
    keyLabel: 'alice',
    intent: {
      kind: 'transfer',
      sender: ALICE,
      receiver: BOB,
      amount,
      instrument: { admin: 'dso::1220', id: 'Amulet' },
    },
    actions: [transfer(amount)],
    hash: randomUUID().replaceAll('-', '').padEnd(64, '0'),
    subject,
    caller: { id: 'desk', roles: ['operator'] },
  };
}

async function credential(approver: string) {
  const sk = ed25519.utils.randomSecretKey();
  const publicKey = Buffer.from(ed25519.getPublicKey(sk)).toString('hex');
  const c = await store.approvals.registerCredential({ approver, kind: 'ed25519', publicKey });
  await engine.activateCredential(c.id, 'root');
  return { approver, sk, id: c.id };
}

const sign = (sk: Uint8Array, hash: string) =>
  Buffer.from(ed25519.sign(approvalMessage(hash, 'approve'), sk)).toString('base64');

async function approveAll(id: string, who: { approver: string; sk: Uint8Array; id: string }[]) {
  const r = (await store.approvals.get(id))!;
  for (const a of who)
    await engine.answer({
      requestId: id,
      approver: a.approver,
      decision: 'approve',
      credentialId: a.id,
      statementHash: r.statementHash,
      signature: sign(a.sk, r.statementHash),
    });
}

async function startWith(text: string) {
  engine = new PolicyEngine({ store, signer, now: () => now, refreshMs: 0 });
  await engine.start(parsePolicy(text));
}

beforeEach(async () => {
  const db = await openPglite('memory', { loadDataDir: await pgliteTemplateBlob() });
  await migrate(db);
  store = storeOn(db, 'test');
  signer = new Signer({
    file: new FileBackend({
      dir: mkdtempSync(join(tmpdir(), 'cs-redteam-')),
      passphrase: () => 'redteam test passphrase',
      scrypt: { N: 2 ** 14, r: 8, p: 1 },
    }),
  });
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

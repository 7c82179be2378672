/**
 * The policy and approvals through the service, against the sandbox: a
 * withdrawal below the threshold commits under the policy's rule (named in
 * the audit log); one above waits in `awaiting_approval` until two treasury
 * approvers sign the request's statement with their own registered keys,
 * then commits. What must never count: an approval row written into the
 * database without the approver's key, a credential row without the
 * service's seal, an approval of another withdrawal with the same amount,
 * the requester's own approval, an expired one. A rejection ends the
 * withdrawal; a deny rule and a limit refuse before signing; a preparation
 * that changes the receiver after approval gets nothing signed. Policy
 * versions: a malformed one names its field and changes nothing; a change
 * that needs approvals stays pending and the old version stays in force.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ed25519 } from '@noble/curves/ed25519.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalMessage, registrationMessage } from '../../src/policy/approval.js';
import type { Role } from '../../src/server/roles.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { preapprovalProposal } from '../support/flow-env.js';
import { mintToken, type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

let env: ServiceEnv;
let alice: PartyRecord;
let bob: PartyRecord;
let cold: PartyRecord;
let blocked: PartyRecord;
let dir: string;

const policyYaml = (extra = '') => `version: 1
name: test hot wallet
timezone: UTC
default: deny
approverGroups:
  treasury: [tara, tom, tina, wendy]
  admins: [ada, abe]
approvals: { ttl: 1h }
limits:
  - id: daily
    per: [party]
    window: 24h
    maxAmount: "250"
    when: { entryPoints: [withdrawal], partyGroups: [limited] }
partyGroups:
  limited: [PARTY_LIMITED]
rules:
  - id: proposals
    when: { actions: [preapproval-proposal], entryPoints: [sign] }
    decision: approve
    approvals: [{ group: treasury, count: 1 }]
  - id: blocked
    when: { receivers: [PARTY_BLOCKED] }
    decision: deny
    reason: this receiver is blocked
  - id: small
    when: { amount: { lt: "100" } }
    decision: allow
  - id: large
    when: { amount: { gte: "100" } }
    decision: approve
    approvals: [{ group: treasury, count: 2 }]
  - id: rest
    decision: allow
${extra}`;

type Auth = { authorization: string };
const as = async (sub: string, roles: Role[]): Promise<Auth> => ({
  authorization: `Bearer ${await mintToken(roles, { sub })}`,
});

interface ApproverKey {
  sub: string;
  sk: Uint8Array;
  pk: string;
  credentialId: string;
}

async function approver(sub: string): Promise<ApproverKey> {
  const sk = ed25519.utils.randomSecretKey();
  const pk = Buffer.from(ed25519.getPublicKey(sk)).toString('hex');
  const key = { kind: 'ed25519' as const, publicKey: pk };
  const proof = Buffer.from(ed25519.sign(registrationMessage(key), sk)).toString('base64');
  const r = await env.service.app.inject({
    method: 'POST',
    url: '/v1/approvers/credentials',
    headers: await as(sub, ['approver']),
    payload: { ...key, proof, label: `${sub}'s key` },
  });
  expect(r.statusCode, r.body).toBe(201);
  const id = r.json().id as string;
  const a = await env.service.app.inject({
    method: 'POST',
    url: `/v1/approvers/credentials/${id}/activate`,
    headers: await as('ada', ['admin']),
  });
  expect(a.statusCode, a.body).toBe(200);
  return { sub, sk, pk, credentialId: id };
}

async function view(id: string) {
  const r = await env.service.app.inject({
    method: 'GET',
    url: `/v1/approvals/${id}`,
    headers: await as('auditor', ['auditor']),
  });
  expect(r.statusCode, r.body).toBe(200);
  return r.json();
}

async function approve(a: ApproverKey, requestId: string, hash?: string) {
  const v = await view(requestId);
  const statementHash = hash ?? v.statementHash;
  const signature = Buffer.from(ed25519.sign(approvalMessage(statementHash, 'approve'), a.sk)).toString(
    'base64',
  );
  return env.service.app.inject({
    method: 'POST',
    url: `/v1/approvals/${requestId}/approve`,
    headers: await as(a.sub, ['approver']),
    payload: { credentialId: a.credentialId, statementHash, signature },
  });
}

async function withdraw(amount: string, opts: { party?: string; receiver?: string; sub?: string } = {}) {
  const r = await env.service.app.inject({
    method: 'POST',
    url: '/v1/withdrawals',
    headers: {
      ...(await as(opts.sub ?? 'desk', ['withdrawer', 'operator'])),
      'idempotency-key': randomUUID(),
    },
    payload: { party: opts.party ?? alice.partyId, receiver: opts.receiver ?? bob.partyId, amount },
  });
  expect(r.statusCode, r.body).toBe(201);
  return r.json() as { id: string; commandId: string };
}

async function until(id: string, states: string[], ms = 20_000): Promise<Record<string, unknown>> {
  const end = Date.now() + ms;
  for (;;) {
    const w = await env.store.withdrawals.get(id);
    if (w && states.includes(w.state)) return w as unknown as Record<string, unknown>;
    if (Date.now() > end) throw new Error(`withdrawal ${id} is ${w?.state}, not ${states.join('|')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function requestOf(id: string): Promise<string> {
  const r = await env.store.approvals.latestFor(`withdrawal:${id}`);
  if (!r) throw new Error(`no approval request for ${id}`);
  return r.id;
}

const updatesOf = (commandId: string) =>
  env.flow.net.store.updates().filter((u) => u.commandId === commandId);

let tara: ApproverKey;
let tom: ApproverKey;
let tina: ApproverKey;

const NOBODY = `nobody::1220${'0'.repeat(64)}`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cs-policy-'));
  // Started with a file naming no real party; the parties' own policy comes through the API.
  const file = join(dir, 'policy.yaml');
  writeFileSync(file, policyYaml().replace('PARTY_LIMITED', NOBODY).replace('PARTY_BLOCKED', NOBODY));
  env = await serviceEnv({ seed: 'policy-approvals', service: { config: testConfig({ policy: { file } }) } });
  alice = await env.addParty('alice', { fund: '100000' });
  bob = await env.addParty('bob');
  cold = await env.addParty('limited', { fund: '100000' });
  blocked = await env.addParty('blocked');
  const r = await env.service.app.inject({
    method: 'PUT',
    url: '/v1/policy',
    headers: await as('ada', ['admin']),
    payload: {
      document: policyYaml().replace('PARTY_LIMITED', cold.partyId).replace('PARTY_BLOCKED', blocked.partyId),
    },
  });
  expect(r.statusCode, r.body).toBe(200);
  tara = await approver('tara');
  tom = await approver('tom');
  tina = await approver('tina');
}, 90_000);
afterAll(async () => env?.close());

describe('decisions', () => {
  it('a withdrawal under the threshold commits; the audit log names the version and rule', async () => {
    const w = await withdraw('10');
    await until(w.id, ['committed']);
    const { rows } = await env.store.db.query<{ details: Record<string, unknown> }>(
      `SELECT details FROM audit_log WHERE subject = $1 AND action = 'flow.signed'`,
      [`withdrawal:${w.id}`],
    );
    expect(JSON.stringify(rows)).toContain('"rule":"small"');
    expect(JSON.stringify(rows)).toMatch(/"policyVersion":"[1-9]/);
  });

  it('above the threshold: awaiting_approval until two treasury approvers sign, then committed', async () => {
    const w = await withdraw('250');
    await until(w.id, ['awaiting_approval']);
    expect(updatesOf(w.commandId)).toEqual([]);
    const id = await requestOf(w.id);
    const v = await view(id);
    expect(v.status).toBe('pending');
    expect(v.missing).toEqual([{ group: 'treasury', need: 2 }]);
    expect(v.statement.actions[0]).toMatchObject({ receiver: bob.partyId });
    const first = await approve(tara, id);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json().missing).toEqual([{ group: 'treasury', need: 1 }]);
    // One approver counts once.
    expect((await approve(tara, id)).statusCode).toBe(409);
    expect((await env.store.withdrawals.get(w.id))?.state).toBe('awaiting_approval');
    const second = await approve(tom, id);
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json().status).toBe('approved');
    await until(w.id, ['committed']);
    expect(updatesOf(w.commandId)).toHaveLength(1);
  });

  it('the requester cannot approve their own withdrawal', async () => {
    const w = await withdraw('300', { sub: 'tina' });
    await until(w.id, ['awaiting_approval']);
    const r = await approve(tina, await requestOf(w.id));
    expect(r.statusCode).toBe(403);
    expect(r.json().code).toBe('separation_of_duties');
  });

  it('an approval of withdrawal A presented for B (same amount) does not count, through the API or the database', async () => {
    const a = await withdraw('400');
    const b = await withdraw('400');
    await until(a.id, ['awaiting_approval']);
    await until(b.id, ['awaiting_approval']);
    const ra = await requestOf(a.id);
    const rb = await requestOf(b.id);
    const va = await view(ra);
    // Signed for A's statement, posted for B.
    const r = await approve(tara, rb, va.statementHash);
    expect(r.statusCode).toBe(409);
    // The same signature written straight into B's approvals.
    const sig = Buffer.from(ed25519.sign(approvalMessage(va.statementHash, 'approve'), tara.sk)).toString(
      'base64',
    );
    const sig2 = Buffer.from(ed25519.sign(approvalMessage(va.statementHash, 'approve'), tom.sk)).toString(
      'base64',
    );
    for (const [who, s] of [
      [tara, sig],
      [tom, sig2],
    ] as const)
      await env.store.db.query(
        `INSERT INTO approvals (id, request_id, approver, credential_id, decision, signature, created_at)
         VALUES ($1, $2, $3, $4, 'approve', $5, now())`,
        [randomUUID(), rb, who.sub, who.credentialId, s],
      );
    const vb = await view(rb);
    expect(vb.missing).toEqual([{ group: 'treasury', need: 2 }]);
    await new Promise((res) => setTimeout(res, 400));
    expect((await env.store.withdrawals.get(b.id))?.state).toBe('awaiting_approval');
  });

  it('a credential written into the database without the seal verifies nothing', async () => {
    const w = await withdraw('500');
    await until(w.id, ['awaiting_approval']);
    const id = await requestOf(w.id);
    const v = await view(id);
    const forged: string[] = [];
    for (const sub of ['tara', 'tom']) {
      const sk = ed25519.utils.randomSecretKey();
      const pk = Buffer.from(ed25519.getPublicKey(sk)).toString('hex');
      const cid = randomUUID();
      await env.store.db.query(
        `INSERT INTO approver_credentials (id, approver, kind, public_key, label, status, created_at, activated_by, activated_at, seal)
         VALUES ($1, $2, 'ed25519', $3, 'forged', 'active', now(), 'ada', now(), $4)`,
        [cid, sub, pk, Buffer.alloc(64, 7).toString('base64')],
      );
      const sig = Buffer.from(ed25519.sign(approvalMessage(v.statementHash, 'approve'), sk)).toString(
        'base64',
      );
      await env.store.db.query(
        `INSERT INTO approvals (id, request_id, approver, credential_id, decision, signature, created_at)
         VALUES ($1, $2, $3, $4, 'approve', $5, now())`,
        [randomUUID(), id, sub, cid, sig],
      );
      forged.push(cid);
    }
    expect((await view(id)).missing).toEqual([{ group: 'treasury', need: 2 }]);
    // And through the API the forged credential is refused outright.
    const r = await env.service.app.inject({
      method: 'POST',
      url: `/v1/approvals/${id}/approve`,
      headers: await as('wendy', ['approver']),
      payload: {
        credentialId: forged[0],
        statementHash: v.statementHash,
        signature: Buffer.alloc(64).toString('base64'),
      },
    });
    expect(r.statusCode).toBe(403);
    expect((await env.store.withdrawals.get(w.id))?.state).toBe('awaiting_approval');
  });

  it('a rejection ends the withdrawal, saying who and why; nothing is signed', async () => {
    const w = await withdraw('600');
    await until(w.id, ['awaiting_approval']);
    const id = await requestOf(w.id);
    const r = await env.service.app.inject({
      method: 'POST',
      url: `/v1/approvals/${id}/reject`,
      headers: await as('tom', ['approver']),
      payload: { reason: 'unknown beneficiary' },
    });
    expect(r.statusCode, r.body).toBe(200);
    const done = await until(w.id, ['rejected']);
    expect(done.lastError).toMatch(/rejected by tom: unknown beneficiary/);
    expect(updatesOf(w.commandId)).toEqual([]);
  });

  it('a deny rule refuses before signing, naming the rule', async () => {
    const w = await withdraw('5', { receiver: blocked.partyId });
    const done = await until(w.id, ['rejected']);
    expect(done.lastError).toMatch(/^policy_denied: .*this receiver is blocked/);
  });

  it('approvals carry over to a new preparation with the same intent; a changed receiver gets nothing signed', async () => {
    const w = await withdraw('700');
    await until(w.id, ['awaiting_approval']);
    const id = await requestOf(w.id);
    expect((await approve(tara, id)).statusCode).toBe(200);
    const sign = env.flow.signer.sign.bind(env.flow.signer);
    let signed = 0;
    env.flow.signer.sign = async (l, m) => {
      signed++;
      return sign(l, m);
    };
    try {
      env.flow.sb.ctx.faults.inject({
        fault: { kind: 'tamper', change: 'receiver', hash: 'tampered' },
        operation: 'ledger-api.prepare',
        times: 1,
      });
      expect((await approve(tom, id)).statusCode).toBe(200);
      const done = await until(w.id, ['rejected', 'committed']);
      expect(done.state).toBe('rejected');
      expect(done.lastError).toMatch(/^intent_mismatch/);
      expect(signed).toBe(0);
    } finally {
      env.flow.signer.sign = sign;
    }
  });
});

describe('limits', () => {
  it('withdrawals beyond the 24 h limit are refused naming the limit; one refused frees room it never held', async () => {
    const a = await withdraw('90', { party: cold.partyId });
    const b = await withdraw('90', { party: cold.partyId });
    await until(a.id, ['committed']);
    await until(b.id, ['committed']);
    // 180 of 250 used: 99 does not fit, 70 fits exactly.
    const c = await withdraw('99', { party: cold.partyId });
    const refused = await until(c.id, ['rejected', 'committed']);
    expect(refused.state).toBe('rejected');
    expect(refused.lastError).toMatch(/^policy_denied: .*limit daily/);
    const evaluate = await env.service.app.inject({
      method: 'POST',
      url: '/v1/policy/evaluate',
      headers: await as('desk', ['operator']),
      payload: {
        party: cold.partyId,
        intent: {
          kind: 'transfer',
          sender: cold.partyId,
          receiver: bob.partyId,
          amount: '70',
          instrument: { admin: env.flow.net.dso, id: 'Amulet' },
        },
      },
    });
    expect(evaluate.statusCode, evaluate.body).toBe(200);
    expect(evaluate.json()).toMatchObject({ decision: 'allow', rule: 'small' });
    expect(evaluate.json().limits[0]).toMatchObject({
      limit: 'daily',
      used: { amount: '180', count: 2 },
      left: { amount: '70' },
      exceeded: false,
    });
    // The dry run reserved nothing: the 70 still fits.
    const d = await withdraw('70', { party: cold.partyId });
    await until(d.id, ['committed']);
    const e = await withdraw('0.0000000001', { party: cold.partyId });
    expect((await until(e.id, ['rejected', 'committed'])).state).toBe('rejected');
  });
});

describe('sign requests', () => {
  it('answer 202 with the approval request; once approved, the same request is signed', async () => {
    const res = await env.flow.ledger.prepare({
      userId: env.flow.ctx.userId,
      commandId: randomUUID(),
      actAs: [alice.partyId],
      synchronizerId: env.flow.net.synchronizerId,
      commands: [preapprovalProposal(env.flow.net, alice.partyId, bob.partyId)],
    });
    const body = {
      party: alice.partyId,
      preparedTransaction: res.preparedTransaction,
      hash: res.preparedTransactionHash,
      hashingScheme: 'v2',
      intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
    };
    const headers = await as('desk', ['operator']);
    const first = await env.service.app.inject({ method: 'POST', url: '/v1/sign', headers, payload: body });
    expect(first.statusCode, first.body).toBe(202);
    expect(first.json()).toMatchObject({
      code: 'awaiting_approval',
      missing: [{ group: 'treasury', need: 1 }],
      policy: { rule: 'proposals' },
    });
    const id = first.json().approvalRequest as string;
    // Asked again before approval: the same request, still waiting.
    const again = await env.service.app.inject({ method: 'POST', url: '/v1/sign', headers, payload: body });
    expect(again.statusCode).toBe(202);
    expect(again.json().approvalRequest).toBe(id);
    expect((await view(id)).statement).toMatchObject({ entryPoint: 'sign', requester: 'desk' });
    const a = await approve(tina, id);
    expect(a.statusCode, a.body).toBe(200);
    expect(a.json().status).toBe('approved');
    // It went on by itself, as its caller: the outcome is on the approval request.
    const end = Date.now() + 10_000;
    let result: { ok: boolean; status: number; body: { signature?: { signedBy: string } } } | undefined;
    while (!result && Date.now() < end) {
      result = (await view(id)).result;
      if (!result) await new Promise((r) => setTimeout(r, 25));
    }
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(result?.body.signature?.signedBy).toBe(alice.fingerprint);
    const signed = await env.service.app.inject({ method: 'POST', url: '/v1/sign', headers, payload: body });
    expect(signed.statusCode, signed.body).toBe(200);
    expect(signed.json().signature.signedBy).toBe(alice.fingerprint);
    const { rows } = await env.store.db.query<{ details: Record<string, unknown> }>(
      `SELECT details FROM audit_log WHERE action = 'flow.signed' ORDER BY seq DESC LIMIT 1`,
    );
    expect(rows[0]?.details).toMatchObject({ facts: { rule: 'proposals', approvedBy: 'tina' } });
  });
});

describe('policy versions', () => {
  it('a new version supersedes the requests opened under the old one; the withdrawal is asked again under the new', async () => {
    const w = await withdraw('800');
    await until(w.id, ['awaiting_approval']);
    const before = await requestOf(w.id);
    const put = await env.service.app.inject({
      method: 'PUT',
      url: '/v1/policy',
      headers: await as('ada', ['admin']),
      payload: {
        document: `${policyYaml().replace('PARTY_LIMITED', cold.partyId).replace('PARTY_BLOCKED', blocked.partyId)}# v-next\n`,
      },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect((await view(before)).status).toBe('superseded');
    const end = Date.now() + 10_000;
    let after = before;
    while (after === before && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 50));
      after = await requestOf(w.id);
    }
    expect(after).not.toBe(before);
    expect((await view(after)).statement.policy.version).toBe(put.json().version);
    expect((await env.store.withdrawals.get(w.id))?.state).toBe('awaiting_approval');
    // The pending version can be read by whoever approves changes.
    const read = await env.service.app.inject({
      method: 'GET',
      url: `/v1/policy/versions/${put.json().version}`,
      headers: await as('tara', ['approver']),
    });
    expect(read.json().document).toContain('# v-next');
  });

  it('a malformed document names the field and line; the version in force stays', async () => {
    const before = (
      await env.service.app.inject({ method: 'GET', url: '/v1/policy', headers: await as('ada', ['admin']) })
    ).json();
    const r = await env.service.app.inject({
      method: 'PUT',
      url: '/v1/policy',
      headers: await as('ada', ['admin']),
      payload: { document: 'version: 1\nrules:\n  - id: x\n    decision: approve\n' },
    });
    expect(r.statusCode).toBe(422);
    expect(r.json().code).toBe('invalid_policy');
    expect(r.json().problems[0]).toMatchObject({
      path: expect.stringContaining('rules[0]'),
      line: expect.any(Number),
    });
    const after = (
      await env.service.app.inject({ method: 'GET', url: '/v1/policy', headers: await as('ada', ['admin']) })
    ).json();
    expect(after.version).toBe(before.version);
  });
});

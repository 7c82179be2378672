/**
 * One approval covers one transaction: a `POST /v1/sign` request that needed
 * one approval is approved and signed; then the same caller prepares ANOTHER
 * transaction under the same command id (which the caller chooses) with the
 * same actions. It must need approvals of its own: the decision's subject
 * names the transaction's hash, not only the command id.
 */
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

const POLICY = `version: 1
default: deny
approverGroups:
  treasury: [tina]
approvals: { ttl: 1h }
rules:
  - id: proposals
    when: { actions: [preapproval-proposal], entryPoints: [sign] }
    decision: approve
    approvals: [{ group: treasury, count: 1 }]
  - id: rest
    decision: allow
`;

const as = async (sub: string, roles: Role[]) => ({
  authorization: `Bearer ${await mintToken(roles, { sub })}`,
});

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cs-redteam-sign-'));
  const file = join(dir, 'policy.yaml');
  writeFileSync(file, POLICY);
  env = await serviceEnv({ seed: 'redteam-sign', service: { config: testConfig({ policy: { file } }) } });
  alice = await env.addParty('alice', { fund: '1000' });
  bob = await env.addParty('bob');
}, 90_000);
afterAll(async () => env?.close());

async function prepared(commandId: string) {
  const res = await env.flow.ledger.prepare({
    userId: env.flow.ctx.userId,
    commandId,
    actAs: [alice.partyId],
    synchronizerId: env.flow.net.synchronizerId,
    commands: [preapprovalProposal(env.flow.net, alice.partyId, bob.partyId)],
  });
  return {
    party: alice.partyId,
    preparedTransaction: res.preparedTransaction,
    hash: res.preparedTransactionHash,
    hashingScheme: 'v2',
    intent: { kind: 'preapproval-proposal', receiver: alice.partyId, provider: bob.partyId },
  };
}

describe('one approval, many signatures', () => {
  it('another transaction under an approved command id must need approvals again', async () => {
    const sk = ed25519.utils.randomSecretKey();
    const key = {
      kind: 'ed25519' as const,
      publicKey: Buffer.from(ed25519.getPublicKey(sk)).toString('hex'),
    };
    const proof = Buffer.from(ed25519.sign(registrationMessage(key), sk)).toString('base64');
    const reg = await env.service.app.inject({
      method: 'POST',
      url: '/v1/approvers/credentials',
      headers: await as('tina', ['approver']),
      payload: { ...key, proof },
    });
    expect(reg.statusCode, reg.body).toBe(201);
    const credentialId = reg.json().id as string;
    const act = await env.service.app.inject({
      method: 'POST',
      url: `/v1/approvers/credentials/${credentialId}/activate`,
      headers: await as('ada', ['admin']),
    });
    expect(act.statusCode, act.body).toBe(200);

    const headers = await as('desk', ['operator']);
    const commandId = 'reused-command-id';
    const first = await prepared(commandId);
    const r1 = await env.service.app.inject({ method: 'POST', url: '/v1/sign', headers, payload: first });
    expect(r1.statusCode, r1.body).toBe(202);
    const id = r1.json().approvalRequest as string;
    const view = await env.service.app.inject({
      method: 'GET',
      url: `/v1/approvals/${id}`,
      headers: await as('tina', ['approver']),
    });
    const statementHash = view.json().statementHash as string;
    const signature = Buffer.from(ed25519.sign(approvalMessage(statementHash, 'approve'), sk)).toString(
      'base64',
    );
    const ok = await env.service.app.inject({
      method: 'POST',
      url: `/v1/approvals/${id}/approve`,
      headers: await as('tina', ['approver']),
      payload: { credentialId, statementHash, signature },
    });
    expect(ok.statusCode, ok.body).toBe(200);
    const s1 = await env.service.app.inject({ method: 'POST', url: '/v1/sign', headers, payload: first });
    expect(s1.statusCode, s1.body).toBe(200);

    // A second, different transaction (prepared later: another preparation time, another hash).
    await new Promise((r) => setTimeout(r, 20));
    const second = await prepared(commandId);
    expect(second.hash).not.toBe(first.hash);
    const s2 = await env.service.app.inject({ method: 'POST', url: '/v1/sign', headers, payload: second });
    // Holds only when the approval is bound to the transaction approved: a new one needs new approvals.
    expect(s2.statusCode, `signed ${second.hash} with the approval given for ${first.hash}`).toBe(202);
  });
});

/**
 * What the policy engine tests share: two parties, a policy where 100 or
 * more needs two treasury approvers, a recognised transfer and the policy
 * request for it, a fresh store (PGlite from the template cluster) with a
 * file keystore for the seal key, approver credentials registered and
 * activated (sealed) by an admin, and their approval signatures.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ed25519 } from '@noble/curves/ed25519.js';
import type { RecognisedAction } from '../../src/intent/model.js';
import { FileBackend } from '../../src/keys/file-backend.js';
import { Signer } from '../../src/keys/signer.js';
import { approvalMessage } from '../../src/policy/approval.js';
import type { PolicyEngine } from '../../src/policy/engine.js';
import type { PolicyRequest } from '../../src/policy/hook.js';
import { openPglite } from '../../src/store/db.js';
import { type Store, storeOn } from '../../src/store/index.js';
import { migrate } from '../../src/store/migrations.js';
import { pgliteMigratedBlob } from './pg.js';

export const ALICE = `alice::1220${'a'.repeat(64)}`;
export const BOB = `bob::1220${'b'.repeat(64)}`;

/** 100 or more: 2 of treasury; anything else allowed. `extra` goes before the rules. */
export const treasuryPolicy = (extra = '') => `version: 1
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

/** A transfer ALICE → BOB of `amount` Amulet, as the recogniser reports it. */
export function transferAction(amount: string): RecognisedAction {
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

/** The policy request for that transfer (a new withdrawal subject unless given). */
export function transferRequest(
  amount: string,
  opts: { subject?: string; flow?: string; roles?: string[] } = {},
): PolicyRequest {
  return {
    flow: opts.flow ?? 'withdrawal',
    partyId: ALICE,
    keyLabel: 'alice',
    intent: {
      kind: 'transfer',
      sender: ALICE,
      receiver: BOB,
      amount,
      instrument: { admin: 'dso::1220', id: 'Amulet' },
    },
    actions: [transferAction(amount)],
    hash: randomUUID().replaceAll('-', '').padEnd(64, '0'),
    subject: opts.subject ?? `withdrawal:${randomUUID()}`,
    caller: { id: 'desk', roles: opts.roles ?? ['withdrawer'] },
  };
}

/** A migrated store and a signer over a new keystore (the seal key is made there on first use). */
export async function engineStore(): Promise<{ store: Store; signer: Signer }> {
  const db = await openPglite('memory', { loadDataDir: await pgliteMigratedBlob() });
  await migrate(db);
  const signer = new Signer({
    file: new FileBackend({
      dir: mkdtempSync(join(tmpdir(), 'cs-policy-engine-')),
      passphrase: () => 'policy engine test passphrase',
      scrypt: { N: 2 ** 14, r: 8, p: 1 },
    }),
  });
  return { store: storeOn(db, 'test'), signer };
}

export interface ApproverKey {
  approver: string;
  sk: Uint8Array;
  id: string;
}

/** An approver's Ed25519 credential, registered and activated (sealed) by the admin `root`. */
export async function approverKey(
  store: Store,
  engine: PolicyEngine,
  approver: string,
): Promise<ApproverKey> {
  const sk = ed25519.utils.randomSecretKey();
  const publicKey = Buffer.from(ed25519.getPublicKey(sk)).toString('hex');
  const c = await store.approvals.registerCredential({ approver, kind: 'ed25519', publicKey });
  await engine.activateCredential(c.id, 'root');
  return { approver, sk, id: c.id };
}

/** The base64 signature of an approval of the statement `hash` by `sk`. */
export const approvalSignature = (sk: Uint8Array, hash: string) =>
  Buffer.from(ed25519.sign(approvalMessage(hash, 'approve'), sk)).toString('base64');

/** Every key in `who` approves request `id` through the engine. */
export async function approveAll(store: Store, engine: PolicyEngine, id: string, who: ApproverKey[]) {
  const r = (await store.approvals.get(id))!;
  for (const a of who)
    await engine.answer({
      requestId: id,
      approver: a.approver,
      decision: 'approve',
      credentialId: a.id,
      statementHash: r.statementHash,
      signature: approvalSignature(a.sk, r.statementHash),
    });
}

/**
 * /v1/approvals: the approval requests with what exactly they approve, the
 * approvers' answers (each approval signed by the approver's own registered
 * key, checked here and again at every decision), and the approvers'
 * credentials (registered by the approver, activated — sealed — by another
 * admin).
 */

import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { nameOfParty } from '../../flows/names.js';
import { followApproval } from '../../flows/withdrawal-approval.js';
import { decodePreparedTransaction } from '../../hashing/decode.js';
import { base64ToBytes } from '../../hashing/input.js';
import { type InspectReport, inspectTransaction } from '../../intent/inspect.js';
import type { ApprovalStatement } from '../../policy/approval.js';
import {
  passkeyOf,
  passkeyRegistrationChallenge,
  registrationMessage,
  verifyApproval,
} from '../../policy/approval.js';
import {
  encodeAssertion,
  encodePasskeyKey,
  parseRegistration,
  WebAuthnError,
} from '../../policy/webauthn.js';
import type { ApprovalRequest, Credential } from '../../store/repos/approvals.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import { out, s } from '../schema.js';
import { actorOf } from './context.js';

/** The approvals a rule or a policy change asks for: so many of each group. */
export const Requirement = z.array(z.object({ group: z.string(), count: z.number() }));

const ApprovalView = z.object({
  id: z.string(),
  subject: z
    .string()
    .describe('what it approves: withdrawal:<id>, sign:<party>:<command id>, policy:<version>, …'),
  status: z.enum(['pending', 'approved', 'rejected', 'expired', 'superseded', 'cancelled']),
  statement: z
    .record(z.string(), z.unknown())
    .describe('exactly what an approver signs (its SHA-256 is statementHash)'),
  statementHash: z.string(),
  requirement: Requirement,
  approvals: z.array(
    z.object({
      approver: z.string(),
      decision: z.enum(['approve', 'reject']),
      credentialId: z.string().optional(),
      reason: z.string().optional(),
      at: z.string(),
    }),
  ),
  missing: z.array(z.object({ group: z.string(), need: z.number() })),
  expiresAt: z.string(),
  createdAt: z.string(),
  decidedAt: z.string().optional(),
  decidedBy: z.string().optional(),
  reason: z.string().optional(),
  summary: z.array(z.string()).describe('what it does, in sentences'),
  result: z
    .object({ ok: z.boolean(), status: z.number(), body: z.record(z.string(), z.unknown()) })
    .optional()
    .describe(
      'a request that answered 202: its outcome once approved (status and body as its route would have answered)',
    ),
  transaction: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('the decoded transaction (as `inspect --json` shows it), for a withdrawal'),
  names: z
    .record(z.string(), z.string())
    .optional()
    .describe('the ANS names of the parties it names (party id → name), where Scan knows one; display only'),
});

/** How long a view waits for Scan to name the parties it shows. */
const NAME_WAIT_MS = 1500;

/** The ANS names of these parties that Scan answers in time; none when it does not. */
async function partyNames(deps: ServiceDeps, parties: Iterable<string>): Promise<Record<string, string>> {
  const names: Record<string, string> = {};
  const wanted = [...new Set(parties)].filter((p) => p !== '').slice(0, 20);
  if (wanted.length === 0 || (!deps.flows.scan && !deps.flows.validator)) return names;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(
      wanted.map(async (p) => {
        const n = await nameOfParty(deps.flows, p).catch(() => undefined);
        if (n !== undefined) names[p] = n;
      }),
    ),
    new Promise((r) => {
      timer = setTimeout(r, NAME_WAIT_MS);
    }),
  ]);
  clearTimeout(timer);
  return { ...names };
}

function summaryOf(st: ApprovalStatement): string[] {
  const lines = [`party ${st.party || '(none)'}; entry point ${st.entryPoint}; requested by ${st.requester}`];
  for (const a of st.actions) {
    const inst = a.instrument ? ` ${a.instrument.id}` : '';
    const amount = a.amount !== undefined ? ` ${a.amount}${inst}` : '';
    const route =
      a.sender !== undefined || a.receiver !== undefined
        ? ` from ${a.sender ?? '?'} to ${a.receiver ?? '?'}`
        : '';
    const memo = a.memo !== undefined ? ` (memo ${JSON.stringify(a.memo)})` : '';
    lines.push(`${a.kind ?? 'action'}${amount}${route}${memo}`);
  }
  if (st.entryPoint === 'policy-change')
    lines.push(
      `bring policy version ${st.policy.version} (sha256 ${st.policy.sha256}) into force; read it first: GET /v1/policy/versions/${st.policy.version}`,
    );
  else lines.push(`policy version ${st.policy.version} (sha256 ${st.policy.sha256}), rule ${st.policy.rule}`);
  lines.push(
    `needs ${st.requirement.map((r) => `${r.count} of ${r.group}`).join(' and ')}; expires ${st.expiresAt}`,
  );
  return lines;
}

async function approvalView(deps: ServiceDeps, r: ApprovalRequest, withTx = false) {
  const answers = await deps.store.approvals.approvalsOf(r.id);
  const count = await deps.policy.count(r);
  const st = r.statement as unknown as ApprovalStatement;
  const names = await partyNames(deps, [
    st.party,
    ...st.actions.flatMap((a) => [a.sender, a.receiver].filter((p): p is string => typeof p === 'string')),
  ]);
  let transaction: InspectReport | undefined;
  const wd = /^withdrawal:(.+)$/.exec(r.subject)?.[1];
  if (withTx && wd !== undefined) {
    const last = (await deps.store.artifacts.preparedFor(wd)).at(-1);
    if (last)
      transaction = inspectTransaction(
        decodePreparedTransaction(base64ToBytes(last.bytes, 'prepared transaction')),
        last.hashingScheme === 'v3' ? 'v3' : 'v2',
      );
  }
  return {
    id: r.id,
    subject: r.subject,
    status: r.status,
    statement: r.statement as Record<string, unknown>,
    statementHash: r.statementHash,
    requirement: r.requirement,
    approvals: answers.map((a) => ({
      approver: a.approver,
      decision: a.decision,
      ...(a.credentialId ? { credentialId: a.credentialId } : {}),
      ...(a.reason ? { reason: a.reason } : {}),
      at: a.createdAt,
    })),
    missing: r.status === 'pending' ? count.missing : [],
    expiresAt: r.expiresAt,
    createdAt: r.createdAt,
    ...(r.decidedAt ? { decidedAt: r.decidedAt } : {}),
    ...(r.decidedBy ? { decidedBy: r.decidedBy } : {}),
    ...(r.reason ? { reason: r.reason } : {}),
    summary: summaryOf(st),
    ...(r.result !== undefined && r.result !== null ? { result: r.result as Record<string, unknown> } : {}),
    ...(transaction ? { transaction: transaction as unknown as Record<string, unknown> } : {}),
    ...(Object.keys(names).length > 0 ? { names } : {}),
  };
}

const CredentialView = z.object({
  id: z.string(),
  approver: z.string(),
  kind: z.enum(['ed25519', 'webauthn']).describe('ed25519: a key the approver holds; webauthn: a passkey'),
  publicKey: z
    .string()
    .describe("ed25519: hex, 32 bytes; webauthn: the passkey's canonical JSON (see passkey)"),
  passkey: z
    .object({
      credentialId: z.string().describe('base64url'),
      alg: z.number().describe('COSE: -7 ES256, -8 EdDSA'),
      rpId: z.string(),
      origin: z.string(),
    })
    .optional()
    .describe('a passkey: the authenticator credential, bound to this relying party and origin'),
  label: z.string().optional(),
  status: z.enum(['pending', 'active', 'revoked']),
  createdAt: z.string(),
  activatedBy: z.string().optional(),
  activatedAt: z.string().optional(),
});

function credentialView(c: Credential) {
  const passkey = passkeyOf(c);
  return {
    id: c.id,
    approver: c.approver,
    kind: c.kind,
    publicKey: c.publicKey,
    ...(passkey
      ? {
          passkey: {
            credentialId: passkey.credentialId,
            alg: passkey.alg,
            rpId: passkey.rpId,
            origin: passkey.origin,
          },
        }
      : {}),
    ...(c.label ? { label: c.label } : {}),
    status: c.status,
    createdAt: c.createdAt,
    ...(c.activatedBy ? { activatedBy: c.activatedBy } : {}),
    ...(c.activatedAt ? { activatedAt: c.activatedAt } : {}),
  };
}

const IdParams = z.object({ id: z.uuid({ message: 'not an approval request id' }) });
const CredParams = z.object({ id: z.uuid({ message: 'not a credential id' }) });

export async function approvalsRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  const readers = ['admin', 'operator', 'approver', 'auditor'] as const;
  const getRequest = async (id: string) => {
    const r = await deps.store.approvals.get(id);
    if (!r) throw new ApiError(404, 'not_found', `approval request ${id} does not exist`, 'params.id');
    return r;
  };
  /** After an answer: a withdrawal waiting for it moves on at once (the worker's sweep would, later). */
  const follow = async (r: ApprovalRequest) => {
    const wd = /^withdrawal:(.+)$/.exec(r.subject)?.[1];
    if (wd === undefined || r.status === 'pending') return;
    await followApproval(
      {
        store: deps.store,
        kick: (id, party) => deps.worker.kick(id, party),
        release: (subject) => deps.policy.settle(subject, 'released'),
      },
      wd,
    );
  };

  app.get(
    '/approvals',
    {
      config: { roles: [...readers] },
      schema: {
        tags: ['approvals'],
        summary: 'Approval requests, newest first (default: pending ones)',
        querystring: s(
          z.object({
            status: z
              .enum(['pending', 'approved', 'rejected', 'expired', 'superseded', 'cancelled', 'all'])
              .default('pending'),
            limit: z.coerce.number().int().min(1).max(500).default(100),
          }),
        ),
        response: {
          200: out(z.object({ items: z.array(ApprovalView) }), 'the approval requests, newest first'),
        },
      },
    },
    async (request) => {
      const q = request.query as { status: string; limit: number };
      const rows = await deps.store.approvals.list({
        ...(q.status === 'all' ? {} : { status: q.status as ApprovalRequest['status'] }),
        limit: q.limit,
      });
      return { items: await Promise.all(rows.map((r) => approvalView(deps, r))) };
    },
  );

  app.get(
    '/approvals/:id',
    {
      config: { roles: [...readers] },
      schema: {
        tags: ['approvals'],
        summary: 'One approval request: the statement to sign, the answers so far, what is missing',
        params: s(IdParams),
        response: {
          200: out(ApprovalView, 'the request with its statement, the answers so far and what is missing'),
        },
      },
    },
    async (request) => approvalView(deps, await getRequest((request.params as { id: string }).id), true),
  );

  const answer = (decision: 'approve' | 'reject') => async (request: FastifyRequest) => {
    const { id } = request.params as { id: string };
    const body = request.body as {
      credentialId?: string;
      signature?: string;
      assertion?: Parameters<typeof encodeAssertion>[0];
      statementHash?: string;
      reason?: string;
    };
    // A passkey's assertion is kept as its canonical JSON, in the place of a signature.
    if (body.assertion !== undefined) {
      try {
        body.signature = encodeAssertion(body.assertion);
      } catch (e) {
        throw new ApiError(
          400,
          'invalid_request',
          `body.assertion: ${e instanceof WebAuthnError ? e.message : 'malformed'}`,
          'body.assertion',
        );
      }
    }
    await getRequest(id);
    const r = await deps.policy.answer({
      requestId: id,
      approver: actorOf(request),
      decision,
      ...(body.credentialId !== undefined ? { credentialId: body.credentialId } : {}),
      ...(body.signature !== undefined ? { signature: body.signature } : {}),
      ...(body.statementHash !== undefined ? { statementHash: body.statementHash } : {}),
      ...(body.reason !== undefined ? { reason: body.reason } : {}),
    });
    await follow(r);
    return approvalView(deps, r);
  };

  const Sig = z
    .string()
    .regex(/^[A-Za-z0-9+/]+={0,2}$/, 'base64')
    .max(200);
  const Hash = z.string().regex(/^[0-9a-f]{64}$/, 'hex SHA-256 of the statement');
  const B64U = (max: number) =>
    z
      .string()
      .min(1)
      .max(max)
      .regex(/^[A-Za-z0-9_-]+$/, 'base64url without padding');
  const PasskeyAssertion = z
    .strictObject({
      credentialId: B64U(1400),
      authenticatorData: B64U(5500),
      clientDataJSON: B64U(5500),
      signature: B64U(800),
    })
    .describe(
      "a passkey's answer (navigator.credentials.get, base64url each) whose challenge is approvalMessage(statementHash, decision)",
    );
  app.post(
    '/approvals/:id/approve',
    {
      config: { roles: ['approver'] },
      schema: {
        tags: ['approvals'],
        summary:
          "Approve: the approver's signature (with one of their active credentials) over the request's statement. The requester cannot approve; one approver counts once",
        params: s(IdParams),
        body: s(
          z
            .strictObject({
              credentialId: z.uuid(),
              statementHash: Hash,
              signature: Sig.optional().describe(
                'an Ed25519 credential: base64 signature of approvalMessage(statementHash, "approve") (docs/policy.md)',
              ),
              assertion: PasskeyAssertion.optional().describe('a passkey credential: its assertion'),
            })
            .refine((b) => (b.signature === undefined) !== (b.assertion === undefined), {
              message: 'give signature (an Ed25519 credential) or assertion (a passkey), exactly one',
              path: ['signature'],
            }),
        ),
        response: {
          200: out(ApprovalView, 'the request after the approval (approved when it was the last one needed)'),
        },
      },
    },
    answer('approve'),
  );

  app.post(
    '/approvals/:id/reject',
    {
      config: { roles: ['approver'] },
      schema: {
        tags: ['approvals'],
        summary:
          'Reject: ends the request (and a withdrawal waiting for it is rejected). Signed when a credential is given',
        params: s(IdParams),
        body: s(
          z.strictObject({
            reason: z.string().min(1).max(500),
            credentialId: z.uuid().optional(),
            statementHash: Hash.optional(),
            signature: Sig.optional(),
            assertion: PasskeyAssertion.optional(),
          }),
        ),
        response: { 200: out(ApprovalView, 'the request, rejected') },
      },
    },
    answer('reject'),
  );

  const rpId = () => deps.config.console.webauthn.rpId ?? new URL(deps.publicOrigin()).hostname;
  const Ed25519Registration = z.strictObject({
    kind: z.literal('ed25519'),
    publicKey: z.string().regex(/^[0-9a-f]{64}$/, '32 bytes of hex (the raw Ed25519 public key)'),
    label: z.string().min(1).max(100).optional(),
    proof: Sig,
  });
  const PasskeyRegistration = z.strictObject({
    kind: z.literal('webauthn'),
    label: z.string().min(1).max(100).optional(),
    registration: z
      .strictObject({ clientDataJSON: B64U(5500), attestationObject: B64U(22_000) })
      .describe(
        "navigator.credentials.create()'s response (base64url each) for the options of GET /approvers/credentials/passkey-options",
      ),
  });
  app.post(
    '/approvers/credentials',
    {
      config: { roles: ['approver'] },
      schema: {
        tags: ['approvals'],
        summary:
          "Register one of the caller's approval credentials: an Ed25519 key (the proof is the key's signature of its registration message) or a passkey (the authenticator's answer to the passkey options). Pending until another admin activates it",
        body: s(z.discriminatedUnion('kind', [Ed25519Registration, PasskeyRegistration])),
        response: { 201: out(CredentialView, 'registered, pending activation') },
      },
    },
    async (request, reply) => {
      const body = request.body as
        | z.output<typeof Ed25519Registration>
        | z.output<typeof PasskeyRegistration>;
      const approver = actorOf(request);
      let publicKey: string;
      if (body.kind === 'ed25519') {
        const key = { kind: body.kind, publicKey: body.publicKey };
        if (!verifyApproval(key, registrationMessage(key), body.proof))
          throw new ApiError(
            400,
            'bad_proof',
            'the proof does not verify against this public key: sign the registration message with the key being registered',
            'body.proof',
          );
        publicKey = body.publicKey;
      } else {
        try {
          const passkey = parseRegistration(body.registration, {
            challenge: passkeyRegistrationChallenge(approver, rpId()),
            rpId: rpId(),
            origins: [deps.publicOrigin()],
            requireUserVerification: true,
          });
          publicKey = encodePasskeyKey(passkey);
        } catch (e) {
          if (!(e instanceof WebAuthnError)) throw e;
          throw new ApiError(
            400,
            'bad_registration',
            `the passkey registration was refused (${e.code}): ${e.message} Ask for new options (GET /v1/approvers/credentials/passkey-options) and register again from ${deps.publicOrigin()}`,
            'body.registration',
          );
        }
      }
      const c = await deps.store.approvals.registerCredential({
        approver,
        kind: body.kind,
        publicKey,
        ...(body.label !== undefined ? { label: body.label } : {}),
      });
      return reply.status(201).send(credentialView(c));
    },
  );

  app.get(
    '/approvers/credentials/passkey-options',
    {
      config: { roles: ['approver'] },
      schema: {
        tags: ['approvals'],
        summary:
          "What the caller's browser needs to create a passkey for this service (navigator.credentials.create): the challenge bound to the caller, the relying party, the user, and the caller's passkeys to exclude",
        response: {
          200: out(
            z.object({
              challenge: z.string().describe('base64url'),
              rp: z.object({ id: z.string(), name: z.string() }),
              user: z.object({
                id: z.string().describe('base64url'),
                name: z.string(),
                displayName: z.string(),
              }),
              excludeCredentials: z
                .array(z.string())
                .describe('credential ids (base64url) already registered'),
            }),
            'the creation options',
          ),
        },
      },
    },
    async (request) => {
      const approver = actorOf(request);
      const own = await deps.store.approvals.credentials({ approver });
      const user = createHash('sha256')
        .update(`canton-signer/user\n${approver}`, 'utf8')
        .digest()
        .subarray(0, 16);
      return {
        challenge: Buffer.from(passkeyRegistrationChallenge(approver, rpId())).toString('base64url'),
        rp: { id: rpId(), name: deps.config.console.webauthn.rpName },
        user: { id: user.toString('base64url'), name: approver, displayName: approver },
        excludeCredentials: own.flatMap((c) => {
          const p = passkeyOf(c);
          return p && c.status !== 'revoked' ? [p.credentialId] : [];
        }),
      };
    },
  );

  app.get(
    '/approvers/credentials',
    {
      config: { roles: ['admin', 'approver', 'auditor'] },
      schema: {
        tags: ['approvals'],
        summary:
          "Approver credentials: all of them for an admin or auditor, the caller's own for an approver",
        response: {
          200: out(z.object({ items: z.array(CredentialView) }), 'the credentials the caller may see'),
        },
      },
    },
    async (request) => {
      const roles = request.principal?.roles ?? [];
      const all = roles.includes('admin') || roles.includes('auditor');
      const items = await deps.store.approvals.credentials(all ? {} : { approver: actorOf(request) });
      return { items: items.map(credentialView) };
    },
  );

  app.post(
    '/approvers/credentials/:id/activate',
    {
      config: { roles: ['admin'] },
      schema: {
        tags: ['approvals'],
        summary: 'Activate (and seal) a pending credential. An admin cannot activate their own',
        params: s(CredParams),
        response: {
          200: out(CredentialView, 'the credential, active and sealed: approvals made with it count'),
        },
      },
    },
    async (request) =>
      credentialView(
        await deps.policy.activateCredential((request.params as { id: string }).id, actorOf(request)),
      ),
  );

  app.post(
    '/approvers/credentials/:id/revoke',
    {
      config: { roles: ['admin'] },
      schema: {
        tags: ['approvals'],
        summary: 'Revoke a credential: approvals made with it stop counting at once',
        params: s(CredParams),
        response: {
          200: out(CredentialView, 'the credential, revoked: approvals made with it no longer count'),
        },
      },
    },
    async (request) =>
      credentialView(
        await deps.store.approvals.revokeCredential((request.params as { id: string }).id, {
          actor: actorOf(request),
        }),
      ),
  );
}

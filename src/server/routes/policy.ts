/**
 * /v1/policy: the policy in force and its versions, a new version (in force
 * at once, or pending until the approvals the policy asks for policy
 * changes), and the dry run (`evaluate`: what the policy would decide on an
 * intent or a prepared transaction, nothing reserved or signed). The
 * approvals' routes are in ./approvals.ts (re-exported here).
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { verifyOnly } from '../../flows/sign-execute.js';
import { IntentSchema } from '../../intent/model.js';
import type { PolicyVersion } from '../../store/repos/policy.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import { out, s } from '../schema.js';
import { Requirement } from './approvals.js';
import { actorOf, bookedParty, flowsFor, PartyIdSchema, withKnownParty } from './context.js';
import { requestOf } from './sign.js';

/** Where the server builds its routes: ./approvals.ts has the approvals' own. */
export { approvalsRoutes } from './approvals.js';

const VersionView = z.object({
  version: z.number().describe('0: the built-in allow-all (no policy configured)'),
  sha256: z.string(),
  source: z.enum(['file', 'api', 'builtin']),
  status: z.enum(['in_force', 'pending', 'superseded', 'rejected']),
  format: z.enum(['yaml', 'json']).optional(),
  createdBy: z.string().optional(),
  createdAt: z.string().optional(),
  document: z.string().optional().describe('the document exactly as loaded'),
});

function versionView(v: PolicyVersion, withText = true) {
  return {
    version: v.version,
    sha256: v.sha256,
    source: v.source,
    status: v.status,
    format: v.format,
    createdBy: v.createdBy,
    createdAt: v.createdAt,
    ...(withText ? { document: v.text } : {}),
  };
}

const EvaluateBody = z
  .strictObject({
    party: PartyIdSchema.describe('the party that would sign'),
    intent: IntentSchema.describe('what it would do (the policy decides on its actions)'),
    entryPoint: z.string().min(1).max(64).default('withdrawal').describe('the flow to decide for'),
    preparedTransaction: z
      .string()
      .min(1)
      .optional()
      .describe(
        'base64: decide on this transaction, verified first against the intent (with hash and hashingScheme)',
      ),
    hash: z.string().min(1).optional().describe("the participant's claimed hash, with preparedTransaction"),
    hashingScheme: z.enum(['v2', 'v3']).optional(),
  })
  .refine(
    (b) =>
      (b.preparedTransaction === undefined) === (b.hash === undefined) &&
      (b.hash === undefined) === (b.hashingScheme === undefined),
    { message: 'preparedTransaction, hash and hashingScheme go together: give all three or none' },
  );

const Usage = z.object({ amount: z.string(), count: z.number() });
const EvaluateView = z.object({
  decision: z.enum(['allow', 'deny', 'approve']),
  rule: z.string(),
  reason: z.string(),
  policy: z.object({ version: z.number(), sha256: z.string() }),
  approvals: Requirement.optional(),
  limits: z.array(
    z.object({
      limit: z.string(),
      key: z.string(),
      window: z.string(),
      used: Usage,
      adding: Usage,
      left: z.object({ amount: z.string().optional(), count: z.number().optional() }),
      exceeded: z.boolean(),
    }),
  ),
});

export async function policyRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.get(
    '/policy',
    {
      config: { roles: ['admin', 'operator', 'approver', 'auditor'] },
      schema: {
        tags: ['policy'],
        summary: 'The policy in force: version, SHA-256, where it came from and the document',
        response: { 200: out(VersionView, 'the version in force (version 0: none configured, allow-all)') },
      },
    },
    async () => {
      const p = await deps.policy.current(null);
      if (p.source === 'builtin') return { version: 0, sha256: '', source: 'builtin', status: 'in_force' };
      const v = await deps.store.policy.get(p.version);
      if (!v) throw new ApiError(500, 'internal', 'the version in force is not in the database');
      return versionView(v);
    },
  );

  app.get(
    '/policy/versions',
    {
      config: { roles: ['admin', 'operator', 'approver', 'auditor'] },
      schema: {
        tags: ['policy'],
        summary:
          'Every policy version, newest first (without their documents: GET /policy/versions/{version})',
        response: { 200: out(z.object({ items: z.array(VersionView) }), 'every version, newest first') },
      },
    },
    async () => ({ items: (await deps.store.policy.list()).map((v) => versionView(v, false)) }),
  );

  app.get(
    '/policy/versions/:version',
    {
      config: { roles: ['admin', 'operator', 'approver', 'auditor'] },
      schema: {
        tags: ['policy'],
        summary:
          'One policy version with its document: what approvers of a pending change read before they sign (its sha256 is what they approve)',
        params: s(z.object({ version: z.coerce.number().int().min(1).max(2_147_483_647) })),
        response: { 200: out(VersionView, 'the version and its document exactly as loaded') },
      },
    },
    async (request) => {
      const { version } = request.params as { version: number };
      const v = await deps.store.policy.get(version);
      if (!v)
        throw new ApiError(404, 'not_found', `policy version ${version} does not exist`, 'params.version');
      return versionView(v);
    },
  );

  app.put(
    '/policy',
    {
      config: { roles: ['admin'] },
      schema: {
        tags: ['policy'],
        summary:
          'A new policy version: in force at once, or pending (202) until the approvals the policy in force asks for policy changes are given. 422 invalid_policy names each field at fault',
        body: s(
          z.strictObject({
            document: z.string().min(1).max(1_000_000).describe('the policy document, YAML or JSON'),
            format: z.enum(['yaml', 'json', 'auto']).default('auto'),
          }),
        ),
        response: {
          200: out(VersionView, 'the new version, in force now'),
          202: out(
            z.object({ version: VersionView, approvalRequest: z.string() }),
            'pending: the version in force stays until the approval request is approved',
          ),
          422: out(
            z.object({
              code: z.literal('invalid_policy'),
              message: z.string(),
              problems: z.array(
                z.object({
                  path: z.string(),
                  line: z.number().optional(),
                  column: z.number().optional(),
                  message: z.string(),
                }),
              ),
            }),
            'the document is malformed; nothing changed',
          ),
        },
      },
    },
    async (request, reply) => {
      const body = request.body as { document: string; format: 'yaml' | 'json' | 'auto' };
      const r = await deps.policy.replace(body.document, body.format, actorOf(request));
      if (r.approvalRequest)
        return reply
          .status(202)
          .send({ version: versionView(r.version), approvalRequest: r.approvalRequest.id });
      return versionView(r.version);
    },
  );

  app.post(
    '/policy/evaluate',
    {
      config: { roles: ['admin', 'operator', 'withdrawer', 'approver'] },
      schema: {
        tags: ['policy'],
        summary:
          'Dry run: what the policy would decide on an intent (or a prepared transaction, verified first) and why — rule, limits used and left. Signs nothing, reserves nothing',
        body: s(EvaluateBody),
        response: { 200: out(EvaluateView, 'the decision the policy would make now') },
      },
    },
    async (request) => {
      const body = request.body as z.output<typeof EvaluateBody>;
      const record = await bookedParty(deps, request, body.party, 'body.party');
      const ctx = withKnownParty(flowsFor(deps, request), record);
      let actions: Parameters<typeof deps.policy.evaluate>[0]['actions'];
      let hash = '';
      if (body.preparedTransaction !== undefined && body.hash !== undefined && body.hashingScheme) {
        const { preparedTransaction, hash: claimed, hashingScheme } = body;
        const r = await verifyOnly(
          ctx,
          requestOf({
            party: body.party,
            preparedTransaction,
            hash: claimed,
            hashingScheme,
            intent: body.intent,
          }),
        );
        actions = r.actions;
        hash = r.hash;
      } else actions = intentActions(body.intent, body.party);
      const caller = ctx.policyContext?.caller;
      const { decision, policy } = await deps.policy.evaluate({
        flow: body.entryPoint,
        partyId: body.party,
        keyLabel: record.keyLabel,
        intent: body.intent,
        actions,
        hash,
        subject: `evaluate:${request.id}`,
        ...(caller ? { caller } : {}),
      });
      return {
        decision: decision.outcome,
        rule: decision.rule,
        reason: decision.reason,
        policy: { version: policy.version, sha256: policy.sha256 },
        ...(decision.approvals ? { approvals: decision.approvals } : {}),
        limits: decision.limits,
      };
    },
  );
}

/** The actions an intent asks for, as the recogniser would report them (for a dry run without a transaction). */
function intentActions(intent: z.output<typeof IntentSchema>, party: string) {
  const i = intent as Record<string, unknown> & { kind: string };
  const parties: Record<string, string> = {};
  const amounts: Record<string, string> = {};
  if (typeof i.sender === 'string') parties.sender = i.sender;
  else parties.sender = party;
  if (typeof i.receiver === 'string') parties.receiver = i.receiver;
  if (typeof i.amount === 'string') amounts.amount = i.amount;
  return [
    {
      kind: i.kind as never,
      nodeId: '0',
      template: '',
      actingParties: [party],
      parties,
      amounts,
      deadlines: {},
      ...(i.instrument ? { instrument: i.instrument as { admin: string; id: string } } : {}),
      ...(typeof i.memo === 'string' ? { memo: i.memo } : {}),
    },
  ];
}

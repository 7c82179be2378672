/**
 * /v1/sign: an operator brings a prepared transaction (as a participant's
 * prepare answered it), the hash the participant claims, its hashing scheme
 * and the intent; the one pipeline decodes it strictly, recomputes the hash,
 * checks the intent and the execution window (src/flows/sign-execute.ts):
 *
 * - POST /sign/verify: the verification report only. No key is touched and
 *   nothing is written. A transaction the pipeline would refuse is still a
 *   200 report, `{ok: false, refusal: {reason, message, problems, details}}`
 *   (the report is the answer to "would you sign this?"); a request that is
 *   itself wrong is 400 and an unknown party 404.
 * - POST /sign: verify, policy, sign, check the signature against the
 *   party's registered key, journal it (audit log) → the report and Canton's
 *   signature. A refusal is 422 `refused` with reason and problems, journalled.
 * - POST /sign/execute: the same, then the Ledger API executes it → the
 *   outcome (update id, completion offset). 422 `refused` likewise.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Refusal } from '../../flows/refusal.js';
import { type SignExecuteRequest, verifyOnly } from '../../flows/sign-execute.js';
import { isCanonicalBase64 } from '../../hashing/input.js';
import { IntentSchema } from '../../intent/model.js';
import type { Json } from '../../store/canonical.js';
import type { ServiceDeps } from '../deps.js';
import { out, s } from '../schema.js';
import { bookedParty, callerOf, PartyIdSchema, withKnownParty } from './context.js';
import { runResumable } from './resume.js';

/** What the body accepts as a prepared transaction (the strict decoder refuses URL-safe or unpadded text). */
const BASE64ISH = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** The body of the /sign routes (exported for bench/verify-profile.js). */
export const SignBody = z.strictObject({
  party: PartyIdSchema.describe('the external party that signs (booked in this signer)'),
  preparedTransaction: z
    .string()
    .min(1)
    // Canonical base64 (the usual case) is checked natively; the pattern runs only on other text.
    .refine((v) => isCanonicalBase64(v) || BASE64ISH.test(v), 'base64 of a PreparedTransaction')
    .meta({ pattern: BASE64ISH.source })
    .describe('base64 PreparedTransaction, as the participant returned it'),
  hash: z
    .string()
    .regex(/^([0-9a-fA-F]{64}|[A-Za-z0-9+/_-]{43}=?)$/, '32 bytes as hex or base64')
    .describe('the hash the participant claims: base64 (Ledger API) or hex (validator)'),
  hashingScheme: z.enum(['v2', 'v3']),
  intent: IntentSchema,
  /** When given, must be the command id the transaction's metadata carries. */
  commandId: z.string().min(1).max(255).optional(),
});
type SignBody = z.output<typeof SignBody>;

const Window = z.object({ earliest: z.string().optional(), latest: z.string(), latestSource: z.string() });
const Action = z.looseObject({ kind: z.string(), nodeId: z.string(), template: z.string() });
const RefusalView = z.object({
  reason: z.string(),
  message: z.string(),
  problems: z.array(z.looseObject({ reason: z.string(), message: z.string() })),
  details: z.record(z.string(), z.string()),
});

const Verified = {
  partyId: z.string(),
  hash: z.string().describe('hex of the recomputed hash'),
  scheme: z.enum(['v2', 'v3']),
  commandId: z.string(),
  intent: z.record(z.string(), z.unknown()),
  actions: z.array(Action).describe('the recognised actions, as `inspect --json` shows them'),
  window: Window,
};

const Report = z.union([
  z.object({ ok: z.literal(true), ...Verified }),
  z.object({
    ok: z.literal(false),
    partyId: z.string(),
    hash: z.string().optional().describe('hex of the recomputed hash, when the transaction decoded'),
    scheme: z.enum(['v2', 'v3']),
    refusal: RefusalView,
  }),
]);

const Signature = z.object({
  format: z.string(),
  signature: z.string().describe('base64'),
  signedBy: z.string(),
  signingAlgorithmSpec: z.string(),
});

const Signed = z.object({
  ok: z.literal(true),
  ...Verified,
  signature: Signature,
  signatureHex: z.string(),
});

const Executed = z.object({
  ok: z.literal(true),
  partyId: z.string(),
  hash: z.string(),
  signature: Signature,
  actions: z.array(Action),
  window: Window,
  attempts: z.number(),
  outcome: z.enum(['committed', 'committed-after-ambiguous']),
  updateId: z.string(),
  commandId: z.string(),
  completionOffset: z.number(),
});

const Refused = z.object({
  code: z.literal('refused'),
  reason: z.string(),
  message: z.string(),
  problems: z.array(z.looseObject({ reason: z.string(), message: z.string() })),
  details: z.record(z.string(), z.string()),
});

/** The pipeline's request for a /sign body (also the dry run's, which has no command id). */
export function requestOf(
  body: Pick<SignBody, 'party' | 'preparedTransaction' | 'hash' | 'hashingScheme' | 'intent' | 'commandId'>,
): SignExecuteRequest {
  return {
    partyId: body.party,
    preparedTransaction: body.preparedTransaction,
    claimedHash: body.hash,
    scheme: body.hashingScheme,
    intent: body.intent,
    validatedIntent: body.intent,
    ...(body.commandId !== undefined ? { commandId: body.commandId } : {}),
  };
}

export async function signRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  const setUp = async (request: FastifyRequest) => {
    const body = request.body as SignBody;
    const record = await bookedParty(deps, request, body.party, 'body.party');
    return { body, record };
  };

  app.post(
    '/sign/verify',
    {
      config: { roles: ['operator'] },
      schema: {
        tags: ['sign'],
        summary:
          'Verify a prepared transaction against an intent; signs nothing, writes nothing. A refusal is a 200 report with ok:false and the refusal (400 for a malformed request, 404 for an unknown party)',
        body: s(SignBody),
        response: {
          200: out(
            Report,
            'the report: ok:true with what signing would authorise, or ok:false with the refusal (nothing is signed either way)',
          ),
        },
      },
    },
    async (request) => {
      const { body, record } = await setUp(request);
      try {
        const r = await verifyOnly(withKnownParty(deps.flows, record), requestOf(body));
        return { ok: true, ...r };
      } catch (e) {
        if (!(e instanceof Refusal) || e.reason === 'bad_request') throw e;
        const refusal = e.toJSON();
        return {
          ok: false,
          partyId: body.party,
          ...(refusal.details.hash || refusal.details.computed
            ? { hash: refusal.details.hash ?? refusal.details.computed }
            : {}),
          scheme: body.hashingScheme,
          refusal,
        };
      }
    },
  );

  app.post(
    '/sign',
    {
      config: { roles: ['operator'] },
      schema: {
        tags: ['sign'],
        summary:
          'Verify, apply the policy and sign; the signature is checked against the registered key and journalled. Nothing is executed. 422 refused when the pipeline refuses',
        body: s(SignBody),
        response: {
          200: out(
            Signed,
            'signed: the signature (checked against the registered key) and what it authorises; nothing executed',
          ),
          422: out(Refused, 'the pipeline refused to sign: reason and each problem; no signature exists'),
        },
      },
    },
    async (request) => {
      const { body } = await setUp(request);
      return runResumable(deps, {
        kind: 'sign',
        caller: callerOf(request),
        input: { party: body.party, body: requestOf(body) } as unknown as Json,
      });
    },
  );

  app.post(
    '/sign/execute',
    {
      config: { roles: ['operator'] },
      schema: {
        tags: ['sign'],
        summary:
          'Verify, sign and execute through the Ledger API (one attempt: a supplied transaction cannot be prepared again) → the definite outcome. 422 refused when the pipeline refuses or the ledger rejects it',
        body: s(SignBody),
        response: {
          200: out(Executed, 'signed and committed: the outcome with the update id'),
          422: out(
            Refused,
            'refused: the pipeline would not sign (no signature exists), or the ledger rejected the signed transaction (submission_rejected: nothing committed)',
          ),
        },
      },
    },
    async (request) => {
      const { body } = await setUp(request);
      return runResumable(deps, {
        kind: 'sign-execute',
        caller: callerOf(request),
        input: { party: body.party, body: requestOf(body) } as unknown as Json,
      });
    },
  );
}

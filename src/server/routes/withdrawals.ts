/**
 * /v1/withdrawals: withdrawal bots and operators create withdrawals (an
 * `Idempotency-Key` per caller: the same key and body answers the same
 * withdrawal with `Idempotent-Replayed: true`, another body is a 409), read
 * one, list them (cursor pagination, party and state filters) and cancel one
 * whose signing has not started. Creating only records the request (before any side
 * effect) and kicks the worker (src/flows/withdrawal.ts), which carries it to
 * a definite outcome; once committed, `delivery` says whether the funds
 * reached the receiver, and an operator may take back a pending offer
 * (`withdraw-offer`). A withdrawer reaches only the parties of its token:
 * another party's withdrawal answers 404, as if it did not exist (audited as
 * an access refusal, like every 403).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { withdrawPendingOffer } from '../../flows/withdrawal-delivery.js';
import { withdrawalSubject } from '../../flows/withdrawal-run.js';
import { IdempotencyConflictError } from '../../store/errors.js';
import {
  DELIVERY_STATES,
  OFFER_OUTCOMES,
  WITHDRAWAL_STATES,
  type Withdrawal,
  withdrawalEventData,
} from '../../store/repos/withdrawals.js';
import { AuthError, requirePartyAccess } from '../auth.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import type { Role } from '../roles.js';
import { out, s } from '../schema.js';
import { actorOf, auditAccessRefusal, bookedParty, PartyIdSchema } from './context.js';

const WRITERS: Role[] = ['withdrawer', 'operator'];
const READERS: Role[] = ['withdrawer', 'operator', 'auditor'];

const CreateHeaders = z.looseObject({
  'idempotency-key': z
    .string({ message: 'the Idempotency-Key header is required' })
    .min(1)
    .max(255)
    .describe('the caller-chosen key that makes a retry of this request safe (1..255 characters)'),
});

const CreateBody = z.strictObject({
  party: PartyIdSchema.describe('the sending party (one of this signer’s)'),
  receiver: z.string().min(1).max(255).describe('receiving party id or ANS name'),
  amount: z
    .string()
    .regex(/^[0-9]{1,28}(\.[0-9]{1,10})?$/, 'a positive decimal string with at most 10 decimals')
    .refine((a) => /[1-9]/.test(a), 'must be positive'),
  instrument: z
    .strictObject({ admin: z.string().min(1).max(255), id: z.string().min(1).max(255) })
    .optional()
    .describe('default: Canton Coin'),
  memo: z.string().max(4096).optional(),
  executeBefore: z.iso
    .datetime({ offset: true })
    .optional()
    .describe('deadline: uncommitted by then, the withdrawal expires'),
});

const IdParams = z.object({ id: z.uuid({ message: 'not a withdrawal id' }) });

const ListQuery = z.object({
  party: PartyIdSchema.optional(),
  state: z.enum(WITHDRAWAL_STATES).optional(),
  delivery: z
    .enum(DELIVERY_STATES)
    .optional()
    .describe(
      'only committed withdrawals with this delivery (e.g. offered: offers waiting for the receiver)',
    ),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  cursor: z.string().min(1).max(1000).optional().describe('nextCursor of the previous page'),
});

const CancelBody = z.strictObject({ reason: z.string().max(1000).optional() }).optional();

export const WithdrawalView = z.object({
  id: z.string(),
  state: z.enum(WITHDRAWAL_STATES),
  party: z.string(),
  receiver: z.string(),
  amount: z.string(),
  instrument: z.object({ admin: z.string(), id: z.string() }).optional(),
  memo: z.string().optional(),
  executeBefore: z.string().optional(),
  commandId: z.string().describe('the ledger command id (cs-wd-<id>): the ledger deduplicates on it'),
  attempts: z.number(),
  lastError: z.string().optional(),
  updateId: z.string().optional(),
  delivery: z
    .enum(DELIVERY_STATES)
    .optional()
    .describe(
      'where the funds of a committed withdrawal are: pending (the commit is being read), delivered (the ' +
        'receiver holds them: one-step transfer, or the offer was accepted), offered (a transfer offer waits ' +
        'for the receiver; the amount is locked in the sender’s holdings), returned (the offer ended without ' +
        'delivery; the amount is back with the sender). Absent before the commit',
    ),
  offer: z
    .object({
      instructionCid: z.string().describe('the transfer instruction the receiver may accept'),
      expiresAt: z.string().optional().describe('until when the receiver may accept'),
      outcome: z
        .enum(OFFER_OUTCOMES)
        .optional()
        .describe(
          'how the offer ended: accepted (delivered); rejected, expired, withdrawn, failed (returned)',
        ),
      updateId: z.string().optional().describe('the ledger update that ended the offer'),
    })
    .optional()
    .describe('the transfer offer the withdrawal made, when the receiver had no transfer preapproval'),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const ListView = z.object({
  items: z.array(WithdrawalView),
  nextCursor: z.string().optional().describe('absent on the last page'),
});

/** The withdrawal as the API shows it: the same view its events carry (one definition, in the store). */
export function withdrawalView(w: Withdrawal): z.output<typeof WithdrawalView> {
  return withdrawalEventData(w) as z.output<typeof WithdrawalView>;
}

/**
 * The withdrawal if the caller's grant reaches its party; 404 otherwise (a
 * withdrawer learns nothing, but the refusal is audited).
 */
async function visible(deps: ServiceDeps, request: FastifyRequest, id: string): Promise<Withdrawal> {
  const w = await deps.store.withdrawals.get(id);
  const notFound = () => new ApiError(404, 'not_found', `withdrawal ${id} not found`, 'params.id');
  if (!w) throw notFound();
  try {
    requirePartyAccess(request, w.party);
  } catch (e) {
    if (e instanceof AuthError) await auditAccessRefusal(deps, request, e, 404);
    throw notFound();
  }
  return w;
}

/** The parties a list may show: all, or the withdrawer token's. */
function scope(request: FastifyRequest): 'any' | readonly string[] {
  const a = request.access;
  return a?.allowed && !a.public ? a.parties : [];
}

export async function withdrawalsRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.post(
    '/withdrawals',
    {
      config: { roles: WRITERS },
      schema: {
        tags: ['withdrawals'],
        summary: 'Create a withdrawal (idempotent per caller and Idempotency-Key)',
        description:
          'Records the withdrawal before anything else happens and answers 201; the worker then carries it to ' +
          'committed, rejected, failed or expired. The same Idempotency-Key with the same body answers the same ' +
          'withdrawal (200, `Idempotent-Replayed: true`); with another body, 409 idempotency_conflict.',
        headers: s(CreateHeaders),
        body: s(CreateBody),
        response: {
          200: out(
            WithdrawalView,
            'replayed: this Idempotency-Key was used before with the same body; the withdrawal as it is now (Idempotent-Replayed: true)',
          ),
          201: out(
            WithdrawalView,
            'created: recorded, and a worker carries it to a final state (poll GET /v1/withdrawals/{id})',
          ),
        },
      },
    },
    async (request, reply) => {
      const body = request.body as z.output<typeof CreateBody>;
      const key = (request.headers as z.output<typeof CreateHeaders>)['idempotency-key'];
      const caller = actorOf(request);
      await bookedParty(deps, request, body.party, 'body.party');
      const repo = deps.store.withdrawals;
      if (body.executeBefore !== undefined && Date.parse(body.executeBefore) <= Date.now()) {
        // A replay is answered as the original was; a new request with a past deadline is refused.
        if (!(await repo.getByKey(caller, key)))
          throw new ApiError(
            400,
            'invalid_request',
            'body.executeBefore: must be in the future',
            'body.executeBefore',
          );
      }
      const { withdrawal, created } = await repo
        .create({
          idempotencyKey: key,
          caller,
          actor: caller,
          body: {
            party: body.party,
            receiver: body.receiver,
            amount: body.amount,
            ...(body.instrument ? { instrument: body.instrument } : {}),
            ...(body.memo !== undefined ? { memo: body.memo } : {}),
            ...(body.executeBefore !== undefined ? { options: { executeBefore: body.executeBefore } } : {}),
          },
        })
        .catch((e: unknown) => {
          // Named as every other request field is (the 400 of a missing key says the same).
          if (e instanceof IdempotencyConflictError)
            throw new ApiError(409, e.code, e.message, 'headers.idempotency-key');
          throw e;
        });
      if (created) deps.worker.kick(withdrawal.id, withdrawal.party);
      else reply.header('idempotent-replayed', 'true');
      return reply.status(created ? 201 : 200).send(withdrawalView(withdrawal));
    },
  );

  app.get(
    '/withdrawals/:id',
    {
      config: { roles: READERS },
      schema: {
        tags: ['withdrawals'],
        summary: 'One withdrawal (404 for a withdrawal of a party outside a withdrawer token)',
        params: s(IdParams),
        response: { 200: out(WithdrawalView, 'the withdrawal as it is now') },
      },
    },
    async (request) => withdrawalView(await visible(deps, request, (request.params as { id: string }).id)),
  );

  app.get(
    '/withdrawals',
    {
      config: { roles: READERS },
      schema: {
        tags: ['withdrawals'],
        summary: 'Withdrawals, newest first, a page at a time (filters: party, state, delivery)',
        querystring: s(ListQuery),
        response: {
          200: out(ListView, 'a page of withdrawals, newest first; nextCursor is set while more may follow'),
        },
      },
    },
    async (request) => {
      const q = request.query as z.output<typeof ListQuery>;
      const parties = scope(request);
      if (q.party !== undefined) requirePartyAccess(request, q.party);
      const party = q.party ?? (parties === 'any' ? undefined : [...parties]);
      const page = await deps.store.withdrawals.list({
        limit: q.limit,
        ...(party !== undefined ? { party } : {}),
        ...(q.state !== undefined ? { state: q.state } : {}),
        ...(q.delivery !== undefined ? { delivery: q.delivery } : {}),
        ...(q.cursor !== undefined ? { cursor: q.cursor } : {}),
      });
      return {
        items: page.items.map(withdrawalView),
        ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
      };
    },
  );

  app.post(
    '/withdrawals/:id/cancel',
    {
      config: { roles: WRITERS },
      schema: {
        tags: ['withdrawals'],
        summary:
          'Cancel a withdrawal whose signing has not started (409 invalid_state once it has: prepared or later)',
        params: s(IdParams),
        body: s(CancelBody),
        response: {
          200: out(WithdrawalView, 'cancelled (also when it already was): nothing will be signed for it'),
        },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      await visible(deps, request, id);
      const reason = (request.body as z.output<typeof CancelBody>)?.reason;
      const { withdrawal } = await deps.store.withdrawals.cancel(id, {
        actor: actorOf(request),
        ...(reason !== undefined ? { reason } : {}),
      });
      // Nothing will be signed: its approval request ends, what it reserved is given back.
      const subject = withdrawalSubject(id);
      const pending = await deps.store.approvals.pendingFor(subject);
      if (pending)
        await deps.store.approvals
          .close(pending.id, 'cancelled', {
            actor: actorOf(request),
            reason: `the withdrawal was cancelled${reason !== undefined ? `: ${reason}` : ''}`,
          })
          .catch(() => undefined);
      await deps.policy.settle(subject, 'released');
      return withdrawalView(withdrawal);
    },
  );

  app.post(
    '/withdrawals/:id/withdraw-offer',
    {
      config: { roles: ['operator'] },
      schema: {
        tags: ['withdrawals'],
        summary:
          'Take back the pending transfer offer of a committed withdrawal (the amount returns to the sender)',
        description:
          'For a withdrawal whose delivery is `offered`: the sender exercises TransferInstruction_Withdraw, signed ' +
          'through the pipeline; the answer is the withdrawal, delivery `returned`, offer outcome `withdrawn`. ' +
          '409 invalid_state when it has no pending offer (never offered, or already accepted, rejected or expired: ' +
          'the message names its delivery); 422 refused when the pipeline refuses to sign.',
        params: s(IdParams),
        response: {
          200: out(
            WithdrawalView,
            'the offer is withdrawn: the withdrawal with delivery `returned`, offer outcome `withdrawn`',
          ),
        },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      await visible(deps, request, id);
      const { withdrawal } = await withdrawPendingOffer(
        { ctx: deps.flows, store: deps.store },
        id,
        actorOf(request),
      );
      return withdrawalView(withdrawal);
    },
  );
}

/**
 * /v1/parties/:id/offers: the two-step transfers (token-standard transfer
 * instructions) a booked party sends or receives, and the answers to them —
 * accept or reject (the receiver), withdraw (the sender) — each signed
 * through the one pipeline with an intent naming the party and the
 * instruction (src/flows/offers.ts). Operator; the auditor reads the list.
 * A refusal is 422 `refused` with its reason and problems.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { listOffers } from '../../flows/offers.js';
import type { ServiceDeps } from '../deps.js';
import { out, s } from '../schema.js';
import {
  bookedParty,
  ContractIdSchema,
  callerOf,
  PartyIdSchema,
  PartyParams,
  withKnownParty,
} from './context.js';
import { runResumable } from './resume.js';

const Instrument = z.object({ admin: z.string(), id: z.string() });

const OfferView = z.object({
  instructionCid: z.string(),
  sender: z.string(),
  receiver: z.string(),
  amount: z.string(),
  instrument: Instrument,
  requestedAt: z.string().optional(),
  executeBefore: z.string().optional(),
  memo: z.string().optional(),
  direction: z
    .enum(['in', 'out'])
    .describe('in: the party receives (accept/reject); out: it sends (withdraw)'),
  status: z.string().optional(),
});

const ActionResult = z.object({
  action: z.enum(['accept', 'reject', 'withdraw']),
  partyId: z.string(),
  instructionCid: z.string(),
  updateId: z.string(),
  commandId: z.string(),
  hash: z.string().describe('hex of the prepared-transaction hash signed'),
  attempts: z.number(),
  outcome: z.enum(['committed', 'committed-after-ambiguous']),
});

const OfferParams = z.object({ id: PartyIdSchema, contractId: ContractIdSchema });

const ActionBody = z
  .strictObject({
    /** The command id to prepare under; a retry with the same one is deduplicated by the ledger. */
    commandId: z.string().min(1).max(255).optional(),
  })
  .default({});

const SUMMARY: Record<'accept' | 'reject' | 'withdraw', string> = {
  accept: 'Accept an incoming transfer offer (the receiver takes the amount)',
  reject: 'Reject an incoming transfer offer (the sender gets the locked amount back)',
  withdraw: 'Withdraw an outgoing transfer offer (the sender takes it back)',
};

export async function offersRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.get(
    '/parties/:id/offers',
    {
      config: { roles: ['operator', 'auditor'] },
      schema: {
        tags: ['offers'],
        summary: 'Pending transfer offers a booked party sends or receives',
        params: s(PartyParams),
        response: {
          200: out(
            z.object({ offers: z.array(OfferView) }),
            'the pending offers the party sends or receives (an empty list when none)',
          ),
        },
      },
    },
    async (request) => {
      const { id } = request.params as z.output<typeof PartyParams>;
      const record = await bookedParty(deps, request, id);
      return { offers: await listOffers(withKnownParty(deps.flows, record), id) };
    },
  );

  for (const action of Object.keys(SUMMARY) as (keyof typeof SUMMARY)[])
    app.post(
      `/parties/:id/offers/:contractId/${action}`,
      {
        config: { roles: ['operator'] },
        schema: {
          tags: ['offers'],
          summary: `${SUMMARY[action]}; signed through the pipeline, 422 refused otherwise`,
          params: s(OfferParams),
          body: s(ActionBody),
          response: {
            200: out(ActionResult, 'signed and committed: the outcome on the ledger (update id)'),
          },
        },
      },
      async (request) => {
        const { id, contractId } = request.params as z.output<typeof OfferParams>;
        const { commandId } = (request.body ?? {}) as z.output<typeof ActionBody>;
        await bookedParty(deps, request, id);
        return runResumable(deps, {
          kind: `offer-${action}`,
          caller: callerOf(request),
          input: { party: id, contractId, ...(commandId ? { commandId } : {}) },
        });
      },
    );
}

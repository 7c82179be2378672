/**
 * /v1/deposits: what ledger ingestion recorded of the transfers into the
 * book's parties — filtered by party, state, account or unattributed, paged
 * by an opaque cursor — one deposit, and an operator's assignment of an
 * unattributed deposit to a customer account (audited, once, with a
 * `deposit.assigned` event).
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Deposit } from '../../store/repos/deposits.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import type { Role } from '../roles.js';
import { out, s } from '../schema.js';
import { actorOf } from './context.js';

const READERS: Role[] = ['operator', 'auditor', 'admin'];
const WRITERS: Role[] = ['operator'];

const Instrument = z.object({ admin: z.string(), id: z.string() });

export const DepositView = z.object({
  id: z.string(),
  party: z.string().describe('the party of the book that received it'),
  sender: z.string(),
  instrument: Instrument,
  amount: z.string().describe('decimal, 10 places'),
  memo: z
    .string()
    .optional()
    .describe('the transfer reason (splice.lfdecentralizedtrust.org/reason), as sent'),
  memoTruncated: z.boolean().optional().describe('the memo was longer than allowed: cut, and not attributed'),
  account: z.string().optional().describe('the customer account; absent: unattributed'),
  attribution: z.string().optional().describe('rule:<name> or operator'),
  kind: z.enum(['one_step', 'two_step']),
  state: z.enum(['pending', 'credited', 'returned']),
  outcome: z.string().optional().describe('how the offer ended (two-step)'),
  instructionCid: z.string().optional().describe('the transfer offer (two-step)'),
  executeBefore: z.string().optional(),
  updateId: z.string(),
  offset: z.number(),
  recordTime: z.string(),
  settledUpdateId: z.string().optional().describe('the update that credited or returned it'),
  settledOffset: z.number().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const ListQuery = z.object({
  party: z.string().min(1).max(600).optional(),
  state: z.enum(['pending', 'credited', 'returned']).optional(),
  account: z.string().min(1).max(200).optional(),
  unattributed: z.enum(['true', 'false']).optional().describe('true: only deposits without an account'),
  cursor: z.string().min(1).max(1000).optional().describe('nextCursor of the previous page'),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

const AssignBody = z.strictObject({
  account: z.string().min(1).max(200).describe('the customer account to credit'),
  reason: z.string().min(1).max(1000).optional().describe('why (kept in the audit log)'),
});

const view = (d: Deposit) => ({ ...d });

export async function depositsRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.get(
    '/deposits',
    {
      config: { roles: READERS },
      schema: {
        tags: ['deposits'],
        summary: 'Deposits into the book’s parties, oldest first (filter; page with cursor)',
        querystring: s(ListQuery),
        response: {
          200: out(
            z.object({ items: z.array(DepositView), nextCursor: z.string().optional() }),
            'a page of deposits',
          ),
        },
      },
    },
    async (request) => {
      const q = request.query as z.output<typeof ListQuery>;
      const page = await deps.store.deposits.list({
        ...(q.party ? { party: q.party } : {}),
        ...(q.state ? { state: q.state } : {}),
        ...(q.account ? { account: q.account } : {}),
        ...(q.unattributed === 'true' ? { unattributed: true } : {}),
        ...(q.cursor ? { cursor: q.cursor } : {}),
        limit: q.limit,
      });
      return { items: page.items.map(view), ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
    },
  );

  app.get(
    '/deposits/:id',
    {
      config: { roles: READERS },
      schema: {
        tags: ['deposits'],
        summary: 'One deposit',
        params: s(z.object({ id: z.string().min(1).max(64) })),
        response: { 200: out(DepositView, 'the deposit asked for') },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const d = await deps.store.deposits.get(id);
      if (!d) throw new ApiError(404, 'not_found', `deposit ${id} not found`, 'params.id');
      return view(d);
    },
  );

  app.post(
    '/deposits/:id/assign',
    {
      config: { roles: WRITERS },
      schema: {
        tags: ['deposits'],
        summary: 'Credit an unattributed deposit to a customer account (once; audited)',
        params: s(z.object({ id: z.string().min(1).max(64) })),
        body: s(AssignBody),
        response: { 200: out(DepositView, 'the deposit, attributed by the operator') },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const body = request.body as z.output<typeof AssignBody>;
      if (!(await deps.store.deposits.get(id)))
        throw new ApiError(404, 'not_found', `deposit ${id} not found`, 'params.id');
      return view(
        await deps.store.deposits.assign(id, body.account, {
          actor: actorOf(request),
          ...(body.reason ? { reason: body.reason } : {}),
        }),
      );
    },
  );
}

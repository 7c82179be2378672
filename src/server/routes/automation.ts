/**
 * The exchange automation's routes: the sweeps made (`GET /v1/sweeps`), a
 * pass run now (`POST /v1/sweeps/run`, as the lease holder), and the
 * auto-accept rules in force with the recent decisions (`GET /v1/auto-accept`).
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { recentDecisions } from '../../exchange/auto-accept.js';
import { listSweeps } from '../../exchange/sweeps.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import type { Role } from '../roles.js';
import { out, s } from '../schema.js';

const READERS: Role[] = ['operator', 'auditor', 'admin'];
const RUNNERS: Role[] = ['operator'];

const Instrument = z.object({ admin: z.string(), id: z.string() });
const STATES = ['planned', 'submitted', 'completed', 'failed', 'blocked'] as const;

export const SweepView = z.object({
  id: z.string(),
  rule: z.string(),
  from: z.string(),
  to: z.string(),
  amount: z.string().describe('decimal, 10 places'),
  instrument: Instrument,
  state: z.enum(STATES),
  commandId: z.string(),
  updateId: z.string().optional().describe('the transfer, once completed'),
  error: z.string().optional().describe('why it failed or is blocked'),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const SweepRuleView = z.object({
  name: z.string(),
  from: z.string(),
  to: z.string(),
  instrument: Instrument.optional(),
  maxBalance: z.string(),
  minBalance: z.string(),
});

const DecisionView = z.object({
  instructionCid: z.string(),
  depositId: z.string(),
  party: z.string(),
  action: z.enum(['accept', 'reject', 'wait']),
  rule: z.string().optional().describe('the rule that decided; absent: otherwise'),
  state: z.enum(['done', 'failed', 'waiting']),
  attempts: z.number(),
  error: z.string().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const RuleView = z.object({
  name: z.string(),
  party: z.string(),
  senders: z.array(z.string()).optional(),
  instruments: z.array(Instrument).optional(),
  requireAccount: z.boolean(),
  maxAmount: z.string().optional(),
  action: z.enum(['accept', 'reject']),
});

const ListQuery = z.object({
  rule: z.string().min(1).max(64).optional(),
  state: z.enum(STATES).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

export async function automationRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.get(
    '/sweeps',
    {
      config: { roles: READERS },
      schema: {
        tags: ['automation'],
        summary: 'Treasury sweeps, newest first, and the sweep rules in force',
        querystring: s(ListQuery),
        response: {
          200: out(
            z.object({ rules: z.array(SweepRuleView), items: z.array(SweepView) }),
            'the sweep rules in force and the sweeps, newest first',
          ),
        },
      },
    },
    async (request) => {
      const q = request.query as z.output<typeof ListQuery>;
      const items = await listSweeps(deps.store.db, {
        ...(q.rule ? { rule: q.rule } : {}),
        ...(q.state ? { state: q.state } : {}),
        limit: q.limit,
      });
      return { rules: deps.config.exchange.sweeps, items };
    },
  );

  app.post(
    '/sweeps/run',
    {
      config: { roles: RUNNERS },
      schema: {
        tags: ['automation'],
        summary: 'Run the automation now (sweeps and offers) as the automation lease holder',
        response: {
          200: out(z.object({ items: z.array(SweepView) }), 'the sweeps after the run, newest first'),
        },
      },
    },
    async () => {
      if (!(await deps.automation.runner.runNow()))
        throw new ApiError(
          409,
          'conflict',
          'another instance holds the automation lease and runs the sweeps: ask it, or wait for its next pass',
        );
      return { items: await listSweeps(deps.store.db, { limit: 100 }) };
    },
  );

  app.get(
    '/auto-accept',
    {
      config: { roles: READERS },
      schema: {
        tags: ['automation'],
        summary: 'Auto-accept rules in force and the recent decisions on incoming offers',
        querystring: s(z.object({ limit: z.coerce.number().int().min(1).max(500).default(100) })),
        response: {
          200: out(
            z.object({
              rules: z.array(RuleView),
              otherwise: z.enum(['wait', 'reject']),
              decisions: z.array(DecisionView),
            }),
            'the rules and the decisions, newest first',
          ),
        },
      },
    },
    async (request) => {
      const { limit } = request.query as { limit: number };
      return {
        rules: deps.config.exchange.autoAccept.rules,
        otherwise: deps.config.exchange.autoAccept.otherwise,
        decisions: await recentDecisions(deps.store.db, limit),
      };
    },
  );
}

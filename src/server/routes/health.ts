/**
 * Liveness (`/health`: the process answers) and readiness (`/ready`: the
 * store, the keys and the Canton services answer; 503 with each failing
 * check named by a fixed code otherwise, its detail only in the log). Both
 * public: a load balancer has no token.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ServiceDeps } from '../deps.js';
import { out } from '../schema.js';

const Check = z.object({
  ok: z.boolean(),
  code: z
    .enum(['database_unavailable', 'keys_unavailable', 'ledger_api_unavailable'])
    .optional()
    .describe('why the check fails; the detail is in the service log'),
});
const Ready = z.object({ ok: z.boolean(), checks: z.record(z.string(), Check) });

export async function healthRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.get(
    '/health',
    {
      config: { roles: 'public' },
      schema: {
        tags: ['health'],
        summary: 'Liveness: the process is up',
        response: { 200: out(z.object({ ok: z.literal(true) }), 'the process is up and answering') },
      },
    },
    async () => ({ ok: true as const }),
  );
  app.get(
    '/ready',
    {
      config: { roles: 'public' },
      schema: {
        tags: ['health'],
        summary: 'Readiness: the database, the keys and the Canton services answer',
        response: {
          200: out(Ready, 'every check passed: the service can take requests'),
          503: out(
            Ready,
            'a check failed (named by its code; the detail is in the service log): do not send requests yet',
          ),
        },
      },
    },
    async (_req, reply) => {
      const r = await deps.ready();
      return reply.status(r.ok ? 200 : 503).send(r);
    },
  );
}

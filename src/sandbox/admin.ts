/**
 * The sandbox's own controls (`/sandbox/*`), which no real network has and so
 * live outside the service paths: network facts, DevNet-style taps, moving the
 * clock and the mining rounds, a local receiver's answer to a transfer offer,
 * customers outside the book (./customer-routes.ts) and the fault switches.
 * Unauthenticated; the sandbox binds to localhost.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { balanceOf } from './amulet.js';
import type { SandboxContext } from './context.js';
import { registerCustomerRoutes } from './customer-routes.js';
import { SandboxError } from './errors.js';
import { FaultRuleSchema } from './faults.js';
import { isoMicros } from './ledger/clock.js';
import { VALIDATOR_USER } from './network.js';
import { localInstructionAnswer } from './participant/interpret.js';

const config = { config: { service: 'sandbox' } };

const TapSchema = z.strictObject({
  party: z.string().min(1),
  amount: z
    .string()
    .regex(/^\d{1,12}(\.\d{1,10})?$/, 'amount must be a positive decimal with up to 10 decimals'),
});
const AdvanceSchema = z.strictObject({
  ms: z
    .number()
    .int()
    .min(1)
    .max(10 * 365 * 86_400_000),
});

/** A 400 naming the bad field, in the Splice `{error}` shape the other controls use. */
function parse<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const r = schema.safeParse(body ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const at = issue.path.length > 0 ? issue.path.map(String).join('.') : 'body';
  throw new SandboxError(400, { error: `${at}: ${issue.message}` });
}

export function registerSandboxAdminRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net, faults } = ctx;

  app.get('/sandbox/info', config, async () => ({
    dsoParty: net.dso,
    validatorParty: net.validatorParty,
    participantId: net.participantId,
    synchronizerId: net.synchronizerId,
    migrationId: net.migrationId,
    ansSuffix: `.unverified.${net.ansLabel}`,
    now: isoMicros(net.clock.now()),
    openRounds: net.latestRound().number.toString(),
    externalParties: [...net.parties.keys()],
  }));

  app.post('/sandbox/tap', config, async (req) => {
    const body = parse(TapSchema, req.body);
    if (Number(body.amount) <= 0) throw new SandboxError(400, { error: 'amount: must be positive' });
    if (!net.parties.has(body.party) && !net.localParties.has(body.party))
      throw new SandboxError(404, { error: `party ${body.party} is not known to the sandbox` });
    const c = net.tap(body.party, body.amount);
    return { contractId: c.contractId, balance: balanceOf(net.store, body.party, net.latestRound().number) };
  });

  app.post('/sandbox/advance-round', config, async () => {
    net.advanceRound();
    return { latestOpenRound: net.latestRound().number.toString() };
  });

  app.post('/sandbox/advance-time', config, async (req) => {
    const { ms } = parse(AdvanceSchema, req.body);
    net.clock.advance(ms);
    net.sweep();
    return { now: isoMicros(net.clock.now()) };
  });

  // A receiver hosted here as a local party (the validator operator) answers a transfer offer.
  for (const kind of ['Accept', 'Reject'] as const)
    app.post<{ Params: { cid: string } }>(
      `/sandbox/transfer-instructions/:cid/${kind.toLowerCase()}`,
      config,
      async (req) => {
        const prepared = localInstructionAnswer(net, req.params.cid, kind);
        const { update } = net.commitPrepared(prepared, {
          userId: VALIDATOR_USER,
          submissionId: `sandbox-${randomUUID()}`,
        });
        return { updateId: update.updateId, offset: update.offset };
      },
    );

  app.get('/sandbox/faults', config, async () => ({ faults: faults.list(), applied: faults.applied() }));
  app.post('/sandbox/faults', config, async (req) => ({
    id: faults.inject(parse(FaultRuleSchema, req.body)),
  }));
  app.delete('/sandbox/faults', config, async () => {
    faults.clear();
    return {};
  });
  app.delete<{ Params: { id: string } }>('/sandbox/faults/:id', config, async (req) => {
    if (!faults.remove(req.params.id)) throw new SandboxError(404, { error: `no fault ${req.params.id}` });
    return {};
  });

  registerCustomerRoutes(app, ctx);
}

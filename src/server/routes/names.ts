/**
 * Names of the book's parties (name-service entries, docs/names.md):
 * /v1/parties/:id/names lists and registers them, .../:name/renew pays the
 * next renewal now, .../:name/auto-renew turns the keeper's renewals on or
 * off; /v1/names/quote says whether a name can be registered and what it
 * costs. Registering and renewing sign through the one pipeline (operator);
 * the auditor and the withdrawer read. A name the DSO's rules or Scan refuse
 * is 400 before anything is signed.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { NoOpenRoundError } from '../../flows/ans-ledger.js';
import type { NameView } from '../../flows/names-keeper.js';
import { nameView } from '../../flows/names-keeper.js';
import { quoteName, registerName } from '../../flows/names-register.js';
import { NAME_STATES } from '../../store/repos/names.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import { out, s } from '../schema.js';
import { actorOf, bookedParty, flowsFor, PartyIdSchema, PartyParams } from './context.js';

const READERS = ['admin', 'operator', 'auditor', 'withdrawer'] as const;

export const NameViewSchema = z.object({
  id: z.string(),
  partyId: z.string(),
  name: z.string(),
  url: z.string(),
  description: z.string(),
  state: z.enum(NAME_STATES),
  autoRenew: z.boolean(),
  entryFeeUsd: z.string().describe('the fee per lifetime, USD (AnsRules)'),
  lifetimeDays: z.number(),
  renewalWindowDays: z.number().describe('a renewal can be paid this long before it is due'),
  expiresAt: z.string().optional(),
  nextPaymentDueAt: z.string().optional(),
  renewalWindowOpensAt: z.string().optional(),
  renewals: z.number(),
  paidCc: z.string().describe('CC paid for the entry so far'),
  lastPaymentCc: z.string().optional(),
  lastPrice: z.string().optional().describe('USD per CC of the round the last payment was priced at'),
  entryCid: z.string().optional(),
  waiting: z
    .union([
      z.object({ for: z.literal('signature'), exportId: z.string() }),
      z.object({ for: z.literal('approval'), approvalId: z.string() }),
    ])
    .optional(),
  error: z.string().optional().describe('why the last step failed; it is tried again'),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const Quote = z.object({
  name: z.string(),
  available: z.boolean(),
  problems: z.array(z.string()),
  feeUsd: z.string(),
  feeCc: z.string().describe('the fee in CC at the round’s price: what the DSO collects'),
  maxCc: z
    .string()
    .describe('the most a payment may lock, transfer fees included: the free CC the party needs'),
  amuletPrice: z.string(),
  round: z.number(),
  lifetimeDays: z.number(),
  renewalWindowDays: z.number(),
});

const NameText = z.string().min(1).max(255);
const Register = z.strictObject({
  name: NameText.describe('`<label>.unverified.<acronym>`, lower case'),
  url: z.string().max(255).default(''),
  description: z.string().max(140).default(''),
  autoRenew: z.boolean().default(true),
});
const QuoteQuery = z.strictObject({
  name: NameText,
  url: z.string().max(255).optional(),
  description: z.string().max(140).optional(),
});
const NameParams = z.object({ id: PartyIdSchema, name: NameText });
const AutoRenew = z.strictObject({ enabled: z.boolean() });

/** No round open yet is a moment's wait, not a failure of the service: 503 with what to do. */
function unavailable(e: unknown): never {
  if (e instanceof NoOpenRoundError) throw new ApiError(503, 'unavailable', e.message);
  throw e;
}

/**
 * Paying for a name that nobody then follows would be money spent on an
 * entry left to expire: with the keeper off on this service, registering and
 * renewing are refused.
 */
function requireKeeper(deps: ServiceDeps): void {
  if (!deps.config.names.enabled)
    throw new ApiError(
      503,
      'names_disabled',
      'names are turned off on this service (names.enabled: false): nothing would follow the registration or pay its renewals; turn them on to register or renew names',
    );
}

async function nameOf(deps: ServiceDeps, partyId: string, name: string) {
  const n = (await deps.store.names.ofParty(partyId)).find((x) => x.name === name);
  if (!n) throw new ApiError(404, 'not_found', `${partyId} has no registration of ${name}`, 'params.name');
  return n;
}

export async function namesRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.get(
    '/names/quote',
    {
      config: { roles: ['admin', 'operator', 'auditor'] },
      schema: {
        tags: ['names'],
        summary: 'Whether a name can be registered (the DSO’s rules, Scan) and its fee in USD and CC',
        querystring: s(QuoteQuery),
        response: { 200: out(Quote, 'the verdict and the fee at the current round') },
      },
    },
    async (request) => {
      const q = request.query as z.output<typeof QuoteQuery>;
      return quoteName(flowsFor(deps, request), deps.store, {
        ...q,
        acronym: deps.config.names.acronym,
        feeAllowancePercent: deps.config.names.feeAllowancePercent,
      }).catch(unavailable);
    },
  );

  app.get(
    '/parties/:id/names',
    {
      config: { roles: [...READERS] },
      schema: {
        tags: ['names'],
        summary: 'The party’s name registrations, newest first (ended ones included)',
        params: s(PartyParams),
        response: { 200: out(z.object({ names: z.array(NameViewSchema) }), 'the registrations') },
      },
    },
    async (request) => {
      const { id } = request.params as z.output<typeof PartyParams>;
      await bookedParty(deps, request, id);
      return { names: (await deps.store.names.ofParty(id)).map(nameView) };
    },
  );

  app.post(
    '/parties/:id/names',
    {
      config: { roles: ['operator'] },
      schema: {
        tags: ['names'],
        summary:
          'Register a name for the party: the entry is requested and its first payment locked (signed through the pipeline); the DSO then makes the entry',
        params: s(PartyParams),
        body: s(Register),
        response: {
          201: out(
            z.object({ name: NameViewSchema, quote: Quote, warnings: z.array(z.string()) }),
            'requested and paid (state paid; active once the DSO collects), or waiting (a signature, an approval, funds: see error)',
          ),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params as z.output<typeof PartyParams>;
      const b = request.body as z.output<typeof Register>;
      await bookedParty(deps, request, id);
      requireKeeper(deps);
      const r = await registerName(flowsFor(deps, request), deps.store, deps.names, {
        partyId: id,
        name: b.name,
        url: b.url,
        description: b.description,
        autoRenew: b.autoRenew,
        acronym: deps.config.names.acronym,
        feeAllowancePercent: deps.config.names.feeAllowancePercent,
        actor: actorOf(request),
        airGapTurnaroundMs: deps.config.names.airGapTurnaroundHours * 3_600_000,
      }).catch(unavailable);
      reply.code(201);
      return r;
    },
  );

  app.get(
    '/parties/:id/names/:name',
    {
      config: { roles: [...READERS] },
      schema: {
        tags: ['names'],
        summary: 'One registration of the party (its latest of that name)',
        params: s(NameParams),
        response: { 200: out(NameViewSchema, 'the registration') },
      },
    },
    async (request) => {
      const { id, name } = request.params as z.output<typeof NameParams>;
      await bookedParty(deps, request, id);
      return nameView(await nameOf(deps, id, name));
    },
  );

  app.post(
    '/parties/:id/names/:name/renew',
    {
      config: { roles: ['operator'] },
      schema: {
        tags: ['names'],
        summary: 'Pay the next renewal now (its window must be open); signed through the pipeline',
        params: s(NameParams),
        response: { 200: out(NameViewSchema, 'the registration after the payment (renewing)') },
      },
    },
    async (request) => {
      const { id, name } = request.params as z.output<typeof NameParams>;
      await bookedParty(deps, request, id);
      requireKeeper(deps);
      const n = await nameOf(deps, id, name);
      const r = await deps.names.renewNow(n.id, actorOf(request), flowsFor(deps, request)).catch(unavailable);
      return nameView(r ?? n) satisfies NameView;
    },
  );

  app.delete(
    '/parties/:id/names/:name',
    {
      config: { roles: ['operator'] },
      schema: {
        tags: ['names'],
        summary:
          'Cancel a registration nothing was paid for yet (requesting, requested: e.g. the party lacks funds); 400 once a payment is locked',
        params: s(NameParams),
        response: { 200: out(NameViewSchema, 'the registration, failed: cancelled') },
      },
    },
    async (request) => {
      const { id, name } = request.params as z.output<typeof NameParams>;
      await bookedParty(deps, request, id);
      const n = await nameOf(deps, id, name);
      return nameView((await deps.names.cancel(n.id, actorOf(request))) ?? n);
    },
  );

  app.put(
    '/parties/:id/names/:name/auto-renew',
    {
      config: { roles: ['operator'] },
      schema: {
        tags: ['names'],
        summary: 'Turn the automatic renewal of a name on or off',
        params: s(NameParams),
        body: s(AutoRenew),
        response: { 200: out(NameViewSchema, 'the registration') },
      },
    },
    async (request) => {
      const { id, name } = request.params as z.output<typeof NameParams>;
      const { enabled } = request.body as z.output<typeof AutoRenew>;
      await bookedParty(deps, request, id);
      const n = await nameOf(deps, id, name);
      const moved = await deps.store.names.move(
        n.id,
        [n.state],
        n.state,
        { autoRenew: enabled },
        { actor: actorOf(request), details: { autoRenew: enabled } },
      );
      if (!moved) throw new ApiError(409, 'conflict', `${name} changed meanwhile: ask again`);
      if (enabled) deps.automation.runner.kick();
      return nameView(moved);
    },
  );
}

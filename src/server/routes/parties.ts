/**
 * /v1/parties: onboard an external party (admin; through the participant's
 * Ledger API or the validator, src/flows/onboard.ts, which books the party
 * once the participant hosts it), list the booked parties, show one (book
 * record, hosting, ANS name, preapproval), its balance and its transfer
 * preapproval status. Reads are open to admin, operator, auditor and
 * withdrawer; a withdrawer only sees and reaches the parties of its token.
 * Party ids contain `::`; in a path they may be given as is or URL-encoded.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { partyBalance } from '../../flows/balance.js';
import { onboardViaLedgerApi, onboardViaValidator, showParty } from '../../flows/onboard.js';
import { watchPreapprovals } from '../../flows/preapproval-watch.js';
import type { PartyRecord } from '../../store/parties.js';
import type { ServiceDeps } from '../deps.js';
import type { Role } from '../roles.js';
import { out, s } from '../schema.js';
import { bookedParty, flowsFor, PartyParams, withKnownParty } from './context.js';

const READERS: Role[] = ['admin', 'operator', 'auditor', 'withdrawer'];

export const PartyView = z.object({
  partyId: z.string(),
  hint: z.string(),
  keyLabel: z.string(),
  scheme: z.string(),
  fingerprint: z.string(),
  publicKeySpki: z.string().describe('the key registered on the ledger, SPKI DER base64'),
  via: z.enum(['validator', 'ledger-api']),
  participantUid: z.string().optional(),
  synchronizerId: z.string().optional(),
  ansName: z.string().optional(),
  createdAt: z.string(),
});

const Onboard = z.strictObject({
  hint: z.string().min(1).max(185),
  keyLabel: z.string().min(1).max(64),
  path: z.enum(['ledger-api', 'validator']).default('ledger-api'),
  /** Ledger API path only: the synchronizer to host the party on (default: the participant's first). */
  synchronizerId: z.string().min(1).max(512).optional(),
  participantId: z
    .string()
    .min(1)
    .max(512)
    .optional()
    .describe(
      'the participant the party must be hosted on (PAR:: prefix optional); refused (422, nothing signed) if the participant reports another id',
    ),
  grantRights: z
    .boolean()
    .default(true)
    .describe("grant the service's Ledger API user CanActAs + CanReadAs on the party once it is booked"),
});

const OnboardResult = z.object({
  status: z.enum(['new', 'existing', 'recovered']),
  party: PartyView,
  signedHashes: z.array(z.string()),
  /** What did not work but did not stop the onboarding (a failed rights grant for a booked party). */
  warnings: z.array(z.string()).optional(),
});

const PartyDetail = z.object({
  partyId: z.string(),
  record: PartyView.optional(),
  hosted: z.object({ synchronizerId: z.string(), permission: z.string().optional() }).nullable().optional(),
  ansName: z.string().nullable().optional(),
  preapproval: z
    .object({ contractId: z.string(), provider: z.string().optional(), expiresAt: z.string().optional() })
    .nullable()
    .optional(),
  notes: z.array(z.string()),
});

const Amount = z.string().describe('decimal');
const Balance = z.object({
  partyId: z.string(),
  validator: z
    .object({
      totalUnlocked: Amount,
      totalLocked: Amount,
      holdingFees: Amount,
      computedAsOfRound: z.number(),
    })
    .optional(),
  holdings: z.array(
    z.object({
      instrument: z.object({ admin: z.string(), id: z.string() }),
      unlocked: Amount,
      locked: Amount,
      count: z.number(),
    }),
  ),
  dustCount: z.number(),
  warnings: z.array(z.string()),
});

const Preapproval = z.object({
  partyId: z.string(),
  status: z.enum(['ok', 'expiring', 'missing']),
  contractId: z.string().optional(),
  provider: z.string().optional(),
  expiresAt: z.string().optional(),
  daysLeft: z.number().optional(),
  willRenew: z.boolean(),
  /** Why a preapproval found is not counted as the party's, or will not be renewed (wrong receiver, DSO or provider). */
  problem: z.string().optional(),
});

const PreapprovalQuery = z.object({
  withinDays: z.coerce.number().int().min(0).max(3650).default(30),
});

type Params = z.output<typeof PartyParams>;

export async function partiesRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  app.post(
    '/parties',
    {
      config: { roles: ['admin'] },
      schema: {
        tags: ['parties'],
        summary:
          'Onboard an external party for a key (201 new; 200 when already booked or found hosted). Nothing is signed unless the topology is exactly the requested one (422 refused otherwise)',
        body: s(Onboard),
        response: {
          200: out(
            OnboardResult,
            'the party was booked already, or is hosted as asked by an earlier onboarding of this signer: nothing was signed now',
          ),
          201: out(OnboardResult, 'the party was onboarded now: its topology signed, hosted, and booked'),
        },
      },
    },
    async (request, reply) => {
      const body = request.body as z.output<typeof Onboard>;
      const ctx = flowsFor(deps, request, { writesParties: true });
      const opts = {
        hint: body.hint,
        keyLabel: body.keyLabel,
        grantRights: body.grantRights,
        ...(body.participantId ? { participantId: body.participantId } : {}),
      };
      const r =
        body.path === 'validator'
          ? await onboardViaValidator(ctx, opts)
          : await onboardViaLedgerApi(ctx, {
              ...opts,
              ...(body.synchronizerId ? { synchronizerId: body.synchronizerId } : {}),
            });
      return reply.status(r.status === 'new' ? 201 : 200).send(r);
    },
  );

  app.get(
    '/parties',
    {
      config: { roles: READERS },
      schema: {
        tags: ['parties'],
        summary: "List the booked parties (a withdrawer's token: only its parties)",
        response: {
          200: out(
            z.object({ parties: z.array(PartyView) }),
            'the booked parties the token reaches (an empty list when none)',
          ),
        },
      },
    },
    async (request) => {
      const all = await deps.store.parties.list();
      const scope = request.access?.allowed && !request.access.public ? request.access.parties : [];
      const parties: PartyRecord[] = scope === 'any' ? all : all.filter((p) => scope.includes(p.partyId));
      // Each party's own name next to its id: the entries this signer registered and keeps alive.
      const names = await deps.store.names.activeNames(parties.map((p) => p.partyId));
      return {
        parties: parties.map((p) => {
          const n = names.get(p.partyId);
          return n ? { ...p, ansName: n } : p;
        }),
      };
    },
  );

  app.get(
    '/parties/:id',
    {
      config: { roles: READERS },
      schema: {
        tags: ['parties'],
        summary:
          'Show a booked party: its record, whether the participant hosts it, its ANS name and preapproval; 404 party_not_found',
        params: s(PartyParams),
        response: {
          200: out(PartyDetail, 'the party: its record and what the network says about it now'),
        },
      },
    },
    async (request) => {
      const { id } = request.params as Params;
      const record = await bookedParty(deps, request, id);
      return showParty(withKnownParty(deps.flows, record), id);
    },
  );

  app.get(
    '/parties/:id/balance',
    {
      config: { roles: READERS },
      schema: {
        tags: ['parties'],
        summary: "A booked party's holdings per instrument (and the validator's balance when it keeps one)",
        params: s(PartyParams),
        response: { 200: out(Balance, "the party's holdings per instrument, read from the ledger now") },
      },
    },
    async (request) => {
      const { id } = request.params as Params;
      await bookedParty(deps, request, id);
      return partyBalance(deps.flows, id);
    },
  );

  app.get(
    '/parties/:id/preapprovals',
    {
      config: { roles: READERS },
      schema: {
        tags: ['parties'],
        summary:
          "A booked party's TransferPreapproval: provider, expiry, days left, whether the validator renews it ('expiring' below withinDays)",
        params: s(PartyParams),
        querystring: s(PreapprovalQuery),
        response: {
          200: out(
            Preapproval,
            "the party's preapproval as the network shows it now (none: status 'missing')",
          ),
        },
      },
    },
    async (request) => {
      const { id } = request.params as Params;
      const { withinDays } = request.query as z.output<typeof PreapprovalQuery>;
      const record = await bookedParty(deps, request, id);
      // The watch walks the party book: give it a book of this one party.
      const book = deps.flows.parties;
      const [status] = await watchPreapprovals(
        {
          ...deps.flows,
          parties: { get: (p) => book.get(p), put: (p) => book.put(p), list: async () => [record] },
        },
        { withinDays },
      );
      return status;
    },
  );
}

/**
 * /v1 routes over the ledger ingestion for operators and auditors: a party's
 * reconciliation (the ledger now, the ingested holdings, the movements from
 * an offset, Scan's Canton Coin history), the ingestion's status, and the
 * admin's recovery controls — a rewind (to an offset, or to a record time
 * after a participant restore) and the move to a new ledger's start after a
 * major upgrade. The controls move the cursor only: pause ingestion first.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  type IngestControlDeps,
  IngestControlError,
  IngestLeaseHeldError,
  ingestStatus,
  resumeAfterUpgrade,
  rewindIngestion,
} from '../../exchange/ingest-control.js';
import type { Instrument } from '../../exchange/parse.js';
import { type Reconciliation, reconcile } from '../../exchange/reconcile.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import { out, s } from '../schema.js';
import { actorOf, bookedParty, PartyIdSchema } from './context.js';

const PartyParams = z.object({ id: PartyIdSchema });
const ReconcileQuery = z.object({
  fromOffset: z.coerce.number().int().min(0).default(0).describe('reconcile the movements after this offset'),
});

const InstrumentSchema = z.object({ admin: z.string(), id: z.string() });
const Totals = z.object({ amount: z.string(), locked: z.string(), holdings: z.number() });
const DifferenceSchema = z.object({
  kind: z.enum([
    'ledger_holding_not_ingested',
    'ingested_holding_not_on_ledger',
    'holding_differs',
    'movements_do_not_add_up',
  ]),
  contractIds: z.array(z.string()).optional(),
  contractId: z.string().optional(),
  amount: z.string().optional(),
  ledger: z.object({ amount: z.string(), locked: z.boolean() }).optional(),
  ingested: z.object({ amount: z.string(), locked: z.boolean() }).optional(),
  expected: z.string().optional(),
});
const CursorSchema = z.object({ offset: z.number(), recordTimes: z.record(z.string(), z.string()) });
const ReconciliationSchema = z.object({
  party: z.string(),
  fromOffset: z.number(),
  ledgerEnd: z.number(),
  cursor: CursorSchema.optional(),
  lag: z.number().describe('offsets between the ingestion cursor and the ledger end'),
  instruments: z.array(
    z.object({
      instrument: InstrumentSchema,
      ledger: Totals,
      ingested: Totals,
      movements: z.object({ opening: z.string(), sum: z.string(), count: z.number(), expected: z.string() }),
      differences: z.array(DifferenceSchema),
    }),
  ),
  clean: z.boolean(),
  onlyLag: z.boolean().optional(),
  note: z.string().optional(),
  scan: z.object({
    status: z.enum(['matched', 'differences', 'unavailable']),
    reason: z.string().optional(),
    instrument: InstrumentSchema.optional(),
    window: z.object({ from: z.string(), to: z.string() }).optional(),
    matched: z.number().optional(),
    onlyInScan: z.array(z.object({ updateId: z.string(), date: z.string(), amount: z.string() })).optional(),
    onlyIngested: z
      .array(z.object({ updateId: z.string(), recordTime: z.string(), amount: z.string() }))
      .optional(),
    amountDiffers: z
      .array(z.object({ updateId: z.string(), scan: z.string(), ingested: z.string() }))
      .optional(),
  }),
});

const StatusSchema = z.object({
  cursor: CursorSchema.optional(),
  lastUpdate: z
    .object({
      updateId: z.string(),
      offset: z.number(),
      recordTime: z.string(),
      synchronizerId: z.string().optional(),
    })
    .optional(),
  lease: z.object({ owner: z.string(), fence: z.number(), expiresAt: z.string() }).optional(),
  ledgerEnd: z.number().optional(),
  lag: z.number().optional(),
  ledgerError: z.string().optional(),
});

const RewindBody = z
  .strictObject({
    offset: z.number().int().min(0).optional(),
    recordTime: z.string().min(1).max(64).optional().describe('tRecovery: the last ingested record time'),
    synchronizerId: z.string().min(1).max(600).optional(),
    force: z.boolean().default(false).describe('go ahead although another instance holds the lease'),
  })
  .refine((b) => (b.offset === undefined) !== (b.recordTime === undefined), {
    message: 'give either offset or recordTime',
  });
const UpgradeBody = z.strictObject({ force: z.boolean().default(false) });

const MoveSchema = z.object({
  from: z.number().optional(),
  to: z.number(),
  fencedOut: z.string().optional(),
  resume: z
    .object({
      offset: z.number(),
      recordTime: z.string().optional(),
      firstAtOrAfter: z.object({ offset: z.number(), recordTime: z.string() }).optional(),
      scanned: z.number(),
    })
    .optional(),
});

/** The controls' dependencies, or a 503 naming what is missing. */
function controlDeps(deps: ServiceDeps): IngestControlDeps {
  const ingestion = deps.ingestion;
  if (!ingestion)
    throw new ApiError(503, 'ingestion_unavailable', 'ledger ingestion is not set up in this service');
  return {
    db: deps.store.db,
    leases: deps.store.leases,
    cursor: ingestion.cursor,
    ledger: deps.flows.ledger,
    parties: async () => (await deps.store.parties.list()).map((p) => p.partyId),
  };
}

/** Runs a control, answering its refusals as 409 / 400. */
async function control<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof IngestLeaseHeldError)
      throw new ApiError(409, 'ingest_lease_held', e.message, undefined, {
        holder: e.holder.owner,
        expiresAt: e.holder.expiresAt,
      });
    if (e instanceof IngestControlError) throw new ApiError(400, 'ingest_control_refused', e.message);
    throw e;
  }
}

export async function reconciliationRoutes(app: FastifyInstance, deps: ServiceDeps): Promise<void> {
  let cantonCoin: Instrument | undefined;
  const cc = async (): Promise<Instrument | undefined> => {
    if (cantonCoin || !deps.flows.scan) return cantonCoin;
    try {
      cantonCoin = { admin: (await deps.flows.scan.getDsoPartyId()).dso_party_id, id: 'Amulet' };
    } catch {
      // Scan down: the cross-check says unavailable.
    }
    return cantonCoin;
  };

  app.get(
    '/parties/:id/reconciliation',
    {
      config: { roles: ['auditor', 'operator'] },
      schema: {
        tags: ['exchange'],
        summary: "A party's holdings on the ledger against what ingestion stored, per instrument",
        params: s(PartyParams),
        querystring: s(ReconcileQuery),
        response: { 200: out(ReconciliationSchema, 'every difference named; clean when there is none') },
      },
    },
    async (request): Promise<Reconciliation> => {
      const { id } = request.params as z.output<typeof PartyParams>;
      const q = request.query as z.output<typeof ReconcileQuery>;
      await bookedParty(deps, request, id);
      const ingestion = deps.ingestion;
      if (!ingestion)
        throw new ApiError(503, 'ingestion_unavailable', 'ledger ingestion is not set up in this service');
      return reconcile(
        {
          ledger: deps.flows.ledger,
          ingested: ingestion.ingested,
          scan: deps.flows.scan,
          cantonCoin: await cc(),
        },
        id,
        q.fromOffset,
      );
    },
  );

  app.get(
    '/ingestion',
    {
      config: { roles: ['admin', 'operator', 'auditor'] },
      schema: {
        tags: ['exchange'],
        summary: "The ingestion's cursor, last update, lease holder and lag behind the ledger end",
        response: {
          200: out(StatusSchema, 'the cursor, the last update ingested, the lease holder, the lag'),
        },
      },
    },
    async () => ingestStatus(controlDeps(deps)),
  );

  const moved = (request: FastifyRequest) => ({ actor: actorOf(request) });

  app.post(
    '/ingestion/rewind',
    {
      config: { roles: ['admin'] },
      schema: {
        tags: ['exchange'],
        summary:
          'Rewind ingestion to an offset, or to the offset before a record time (after a participant restore); pause ingestion first',
        body: s(RewindBody),
        response: { 200: out(MoveSchema, 'where the cursor was and where it is now') },
      },
    },
    async (request) => {
      const b = request.body as z.output<typeof RewindBody>;
      const target =
        b.offset !== undefined
          ? { offset: b.offset }
          : { recordTime: b.recordTime!, ...(b.synchronizerId ? { synchronizerId: b.synchronizerId } : {}) };
      return control(() => rewindIngestion(controlDeps(deps), target, { ...moved(request), force: b.force }));
    },
  );

  app.post(
    '/ingestion/resume-after-upgrade',
    {
      config: { roles: ['admin'] },
      schema: {
        tags: ['exchange'],
        summary:
          'After a major upgrade: ingestion reads the new ledger from its start (the imports are recognised)',
        body: s(UpgradeBody),
        response: { 200: out(MoveSchema, 'where the cursor was and where it is now (0)') },
      },
    },
    async (request) => {
      const b = (request.body ?? {}) as z.output<typeof UpgradeBody>;
      return control(() => resumeAfterUpgrade(controlDeps(deps), { ...moved(request), force: b.force }));
    },
  );
}

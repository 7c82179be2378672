/**
 * A contract's events by its id (`POST /v2/events/events-by-contract-id`): the
 * create and, once archived, the archive, each as the requesting parties see
 * it. A contract none of them sees is reported as not found, as Canton does.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { EventFormatSchema } from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError } from '../errors.js';
import { config, decode, participantAccess } from './access.js';
import { archivedEvent, createdEvent, eventFilter, matchContract } from './render.js';

const GetEventsByContractIdRequestSchema = z.object({
  contractId: z.string().min(1),
  eventFormat: EventFormatSchema,
});

export function registerEventRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireRead } = participantAccess(ctx);

  app.post('/v2/events/events-by-contract-id', config('getEventsByContractId'), async (req) => {
    const body = decode(GetEventsByContractIdRequestSchema, req.body);
    const filter = eventFilter(body.eventFormat);
    requireRead(userOf(req), filter.byParty.keys(), filter.anyParty !== undefined);
    const notFound = () =>
      cantonError(
        'CONTRACT_EVENTS_NOT_FOUND',
        11,
        `Contract events not found, or not visible: no events of contract ${body.contractId} are visible to the requested parties`,
        { resources: [['CONTRACT_ID', body.contractId]] },
      );
    const at = net.store.contractEvents(body.contractId);
    const created = at?.created;
    if (!created) throw notFound();
    const contract = created.update.events.find((e) => e.nodeId === created.nodeId)!.contract;
    const m = matchContract(filter, contract);
    if (!m) throw notFound();
    const archived = at.archived;
    return {
      created: {
        createdEvent: createdEvent(
          contract,
          created.update.offset,
          created.nodeId,
          m.witnesses,
          m.match,
          net.dso,
        ),
        synchronizerId: created.update.synchronizerId,
      },
      ...(archived
        ? {
            archived: {
              archivedEvent: archivedEvent(
                contract,
                archived.update.offset,
                archived.nodeId,
                m.witnesses,
                m.match,
              ),
              synchronizerId: archived.update.synchronizerId,
            },
          }
        : {}),
    };
  });
}

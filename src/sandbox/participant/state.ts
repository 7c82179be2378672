/**
 * The participant's state reads: ledger end, active contracts, connected
 * synchronizers and the participant id.
 */
import type { FastifyInstance } from 'fastify';
import { GetActiveContractsRequestSchema } from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError } from '../errors.js';
import { config, decode, participantAccess } from './access.js';
import { createdEvent, eventFilter, matchContract } from './render.js';

export function registerStateRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireRead } = participantAccess(ctx);
  app.get('/v2/state/ledger-end', config('ledgerEnd'), async (req) => {
    userOf(req);
    return { offset: net.store.ledgerEnd() };
  });

  app.post('/v2/state/active-contracts', config('activeContracts'), async (req) => {
    const body = decode(GetActiveContractsRequestSchema, req.body);
    const user = userOf(req);
    const end = net.store.ledgerEnd();
    if (body.activeAtOffset > end)
      throw cantonError(
        'OFFSET_AFTER_LEDGER_END',
        12,
        `Active contracts at offset ${body.activeAtOffset} requested, but the ledger end is ${end}`,
      );
    const filter = eventFilter(body.eventFormat);
    requireRead(user, filter.byParty.keys(), filter.anyParty !== undefined);
    // One party's filter: only that party's contracts can match.
    const only = filter.anyParty || filter.byParty.size !== 1 ? undefined : [...filter.byParty.keys()][0];
    const candidates = net.store.activeAt(body.activeAtOffset, only);
    const out: unknown[] = [];
    for (const c of candidates) {
      const m = matchContract(filter, c);
      if (!m) continue;
      out.push({
        workflowId: '',
        contractEntry: {
          JsActiveContract: {
            createdEvent: createdEvent(c, c.createdOffset, 0, m.witnesses, m.match, net.dso),
            synchronizerId: net.synchronizerId,
            reassignmentCounter: 0,
          },
        },
      });
    }
    return out;
  });

  app.get('/v2/state/connected-synchronizers', config('connectedSynchronizers'), async (req) => {
    userOf(req);
    const q = req.query as Record<string, string | undefined>;
    if (q.participantId !== undefined && q.participantId !== net.participantId)
      return { connectedSynchronizers: [] };
    let permission = 'PARTICIPANT_PERMISSION_SUBMISSION';
    if (q.party !== undefined) {
      if (net.parties.has(q.party)) permission = 'PARTICIPANT_PERMISSION_CONFIRMATION';
      else if (!net.localParties.has(q.party)) return { connectedSynchronizers: [] };
    }
    return {
      connectedSynchronizers: [
        { synchronizerAlias: net.synchronizerAlias, synchronizerId: net.synchronizerId, permission },
      ],
    };
  });

  app.get('/v2/parties/participant-id', config('participantId'), async (req) => {
    userOf(req);
    return { participantId: net.participantId };
  });
}

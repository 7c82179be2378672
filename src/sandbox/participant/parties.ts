/**
 * Parties on the sandbox participant: external-party topology generation and
 * allocation.
 */
import type { FastifyInstance } from 'fastify';
import {
  AllocateExternalPartyRequestSchema,
  GenerateExternalPartyTopologyRequestSchema,
} from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError } from '../errors.js';
import type { SandboxNetwork } from '../network.js';
import { allocateExternalParty, generateLedgerApiTopology } from '../topology.js';
import { config, decode, participantAccess } from './access.js';
export function topologyCtx(net: SandboxNetwork) {
  return { participantUid: net.participantId, synchronizerId: net.synchronizerId };
}

export function registerPartyRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireAdmin } = participantAccess(ctx);

  app.post('/v2/parties/external/generate-topology', config('generateExternalPartyTopology'), async (req) => {
    const body = decode(GenerateExternalPartyTopologyRequestSchema, req.body);
    userOf(req);
    return generateLedgerApiTopology(body, topologyCtx(net));
  });

  app.post('/v2/parties/external/allocate', config('allocateExternalParty'), async (req) => {
    const body = decode(AllocateExternalPartyRequestSchema, req.body);
    const user = userOf(req);
    requireAdmin(user);
    const { partyId, party } = allocateExternalParty(body, topologyCtx(net));
    // Every check before anything is stored: a refused allocation changes nothing.
    const target = body.userId === undefined ? undefined : net.users.get(body.userId);
    if (body.userId !== undefined && !target)
      throw cantonError('USER_NOT_FOUND', 11, `User not found: ${body.userId}`, {
        resources: [['USER_ID', body.userId]],
      });
    if (net.parties.has(partyId) || net.localParties.has(partyId))
      throw cantonError(
        'PARTY_ALREADY_EXISTS',
        10,
        `Party already exists: party ${partyId} is already allocated on this node`,
        {
          resources: [['PARTY', partyId]],
        },
      );
    net.parties.set(partyId, party);
    target?.actAs.add(partyId);
    return { partyId };
  });
}

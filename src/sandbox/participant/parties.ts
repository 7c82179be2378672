/**
 * Parties on the sandbox participant: the party list and details (external
 * parties and the participant's local ones), local-party allocation, and
 * external-party topology generation and allocation.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  AllocateExternalPartyRequestSchema,
  GenerateExternalPartyTopologyRequestSchema,
} from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E } from '../errors.js';
import type { SandboxNetwork, SandboxUser } from '../network.js';
import { allocateExternalParty, generateLedgerApiTopology } from '../topology.js';
import { config, decode, page, pageOf, participantAccess } from './access.js';

/** Canton's default `partyManagement.maxPartiesPageSize`. */
export const MAX_PARTIES_PAGE_SIZE = 10_000;

const AllocatePartyRequestSchema = z.object({
  partyIdHint: z.string().optional(),
  localMetadata: z
    .object({
      resourceVersion: z.string().optional(),
      annotations: z.record(z.string(), z.string()).optional(),
    })
    .optional(),
  identityProviderId: z.string().optional(),
  synchronizerId: z.string().optional(),
  userId: z.string().optional(),
});

export function topologyCtx(net: SandboxNetwork) {
  return { participantUid: net.participantId, synchronizerId: net.synchronizerId };
}

export function registerPartyRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireAdmin } = participantAccess(ctx);

  /** Canton's PartyDetails: `isLocal` for every party hosted here (external ones included). */
  const details = (party: string) => ({
    party,
    isLocal: true,
    localMetadata: { resourceVersion: '0', annotations: {} },
    identityProviderId: '',
  });
  const known = (party: string) => net.parties.has(party) || net.localParties.has(party);
  /** Party lookups need participant admin or CanReadAsAnyParty. */
  const requirePartyReader = (u: SandboxUser) => {
    if (!u.admin && u.readAsAnyParty !== true)
      throw E.permissionDenied('participant_admin or CanReadAsAnyParty right required to look up parties');
  };

  app.get('/v2/parties', config('listKnownParties'), async (req) => {
    requirePartyReader(userOf(req));
    const q = req.query as Record<string, string | undefined>;
    const all = [...net.localParties, ...net.parties.keys()]
      .filter(
        (p) => q['filter-party'] === undefined || q['filter-party'] === '' || p.includes(q['filter-party']),
      )
      .sort();
    const { items, nextPageToken } = page(all, (p) => p, pageOf(q, MAX_PARTIES_PAGE_SIZE));
    return { partyDetails: items.map(details), nextPageToken };
  });

  // Details of the path's party and of the `parties` query's; unknown ones are left out, as Canton
  // does.
  app.get('/v2/parties/:party', config('getParties'), async (req) => {
    requirePartyReader(userOf(req));
    const path = (req.params as { party: string }).party;
    const extra = (req.query as { parties?: string | string[] }).parties;
    const asked = [path, ...(extra === undefined ? [] : Array.isArray(extra) ? extra : [extra])];
    return { partyDetails: [...new Set(asked)].filter(known).map(details) };
  });

  app.post('/v2/parties', config('allocateParty'), async (req) => {
    const body = decode(AllocatePartyRequestSchema, req.body ?? {});
    requireAdmin(userOf(req));
    if (
      body.synchronizerId !== undefined &&
      body.synchronizerId !== '' &&
      body.synchronizerId !== net.synchronizerId
    )
      throw E.invalidArgument(
        `Unknown synchronizer ${body.synchronizerId}: this participant is connected to ${net.synchronizerId} only`,
      );
    const hint = body.partyIdHint || `party-${randomUUID()}`;
    if (!/^[a-zA-Z0-9:_-]{1,185}$/.test(hint) || hint.includes('::'))
      throw E.invalidArgument(
        `partyIdHint ${JSON.stringify(hint)} is not a valid party id hint: use letters, digits, '-', '_' and ':' (no '::'), at most 185 characters`,
      );
    const partyId = `${hint}::${net.participantId.split('::')[1]}`;
    const target = body.userId === undefined || body.userId === '' ? undefined : net.users.get(body.userId);
    if (body.userId !== undefined && body.userId !== '' && !target)
      throw cantonError('USER_NOT_FOUND', 11, `User not found: ${body.userId}`, {
        resources: [['USER_ID', body.userId]],
      });
    if (known(partyId))
      throw cantonError(
        'PARTY_ALREADY_EXISTS',
        10,
        `Party already exists: party ${partyId} is already allocated on this node`,
        { resources: [['PARTY', partyId]] },
      );
    net.localParties.add(partyId);
    target?.actAs.add(partyId);
    return { partyDetails: details(partyId) };
  });

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

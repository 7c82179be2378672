/**
 * The participant's state reads: ledger end, active contracts, connected
 * synchronizers and the participant id.
 */
import type { FastifyInstance } from 'fastify';
import { GetActiveContractsRequestSchema } from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E } from '../errors.js';
import { config, decode, participantAccess } from './access.js';
import { MAX_PARTIES_PAGE_SIZE } from './parties.js';
import { createdEvent, eventFilter, matchContract } from './render.js';
import { MAX_USERS_PAGE_SIZE } from './users.js';

/** The Ledger API version the sandbox answers `GET /v2/version` with (both 3.4 and 3.5 request forms are read). */
export const LEDGER_API_VERSION = '3.4.12';

/**
 * The 3.4 form of an active-contracts request, `{filter, verbose, activeAtOffset}`, as the
 * 3.5 form with `eventFormat`: the deprecated fields stand for an event format when it is absent.
 * A request with neither names no party to read for, and is refused.
 */
export function legacyAcsRequest(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const { filter, verbose, ...rest } = body as Record<string, unknown>;
  if (rest.eventFormat !== undefined) {
    if (filter !== undefined)
      throw E.invalidArgument(
        'both filter and eventFormat are set: send either the legacy filter and verbose or eventFormat, not both',
      );
    return rest;
  }
  if (filter === undefined)
    throw E.invalidArgument(
      'eventFormat is required (or the legacy filter with verbose): it names the parties to read for',
    );
  if (typeof filter !== 'object' || filter === null) return { ...rest, eventFormat: filter };
  return { ...rest, eventFormat: { ...filter, ...(verbose === undefined ? {} : { verbose }) } };
}

export function registerStateRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireRead } = participantAccess(ctx);
  app.get('/v2/state/ledger-end', config('ledgerEnd'), async (req) => {
    userOf(req);
    return { offset: net.store.ledgerEnd() };
  });

  // The version this participant speaks and its limits; the Wallet SDK picks its client by `version`.
  app.get('/v2/version', config('getLedgerApiVersion'), async (req) => {
    userOf(req);
    return {
      version: LEDGER_API_VERSION,
      features: {
        experimental: {
          staticTime: { supported: false },
          commandInspectionService: { supported: false },
        },
        userManagement: {
          supported: true,
          maxRightsPerUser: 1000,
          maxUsersPageSize: MAX_USERS_PAGE_SIZE,
        },
        partyManagement: { maxPartiesPageSize: MAX_PARTIES_PAGE_SIZE },
        offsetCheckpoint: { maxOffsetCheckpointEmissionDelay: { seconds: 1, nanos: 0 } },
        packageFeature: { maxVettedPackagesPageSize: 100 },
      },
    };
  });

  // Nothing is ever pruned here.
  app.get('/v2/state/latest-pruned-offsets', config('getLatestPrunedOffsets'), async (req) => {
    userOf(req);
    return { participantPrunedUpToInclusive: 0, allDivulgedContractsPrunedUpToInclusive: 0 };
  });

  app.post('/v2/state/active-contracts', config('activeContracts'), async (req) => {
    const body = decode(GetActiveContractsRequestSchema, legacyAcsRequest(req.body));
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

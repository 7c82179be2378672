/**
 * What the /v1 route handlers share: the flow context of one request (its
 * journal and party-book writes attributed in the audit log to the caller's
 * identity), the party-book lookup that answers 404 for a party this
 * signer does not hold, the audit row of an access refusal, and the zod
 * pieces for party ids and contract ids in paths.
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { FlowContext } from '../../flows/context.js';
import { parsePartyId } from '../../hashing/canton-hash.js';
import type { PolicyCaller } from '../../policy/hook.js';
import { appendAudit } from '../../store/audit.js';
import type { PartyRecord } from '../../store/parties.js';
import { DbPartyBook } from '../../store/repos/parties.js';
import { DbRecorder } from '../../store/repos/recorder.js';
import { type AuthError, requirePartyAccess } from '../auth.js';
import type { ServiceDeps } from '../deps.js';
import { ApiError } from '../errors.js';

/** The audit actor of a request, which also scopes its idempotency keys: its caller identity (`Principal.caller`). */
export function actorOf(request: FastifyRequest): string {
  return request.principal?.caller ?? 'anonymous';
}

/**
 * Audits an access refusal of an authenticated caller (`access.refused`):
 * its token subject, the route, the party it was refused (the row's subject
 * `party:<id>`), the code and the status answered (403, or 404 where a
 * withdrawer must not learn that another party's withdrawal exists). A
 * failed write is logged; the refusal stands either way.
 */
export async function auditAccessRefusal(
  deps: ServiceDeps,
  request: FastifyRequest,
  e: AuthError,
  status: number = e.statusCode,
): Promise<void> {
  const caller = request.principal?.caller;
  if (caller === undefined) return;
  try {
    await appendAudit(deps.store.db, {
      actor: caller,
      action: 'access.refused',
      subject: e.party !== undefined ? `party:${e.party}` : null,
      details: {
        route: `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}`,
        ...(e.party !== undefined ? { party: e.party } : {}),
        code: e.code,
        reason: e.message,
        status,
        requestId: request.id,
      },
    });
  } catch (err) {
    request.log.error({ err }, 'could not audit an access refusal');
  }
}

/**
 * The service's flow context with this request's caller as the audit actor
 * of every journal record (the service's recorder keeps its metrics
 * observer), as the caller the policy decides on, and, with
 * `writesParties`, as the actor of party-book writes.
 */
export function flowsFor(
  deps: ServiceDeps,
  request: FastifyRequest,
  opts: { writesParties?: boolean } = {},
): FlowContext {
  return flowsAs(deps, callerOf(request), opts);
}

/** Who the request's caller is, as the policy sees them: their id and their token's roles. */
export function callerOf(request: FastifyRequest): PolicyCaller {
  return { id: actorOf(request), roles: request.principal?.roles ?? [] };
}

/** The flow context of `flowsFor` for a caller known by id and roles (a request resumed later). */
export function flowsAs(
  deps: ServiceDeps,
  caller: PolicyCaller,
  opts: { writesParties?: boolean } = {},
): FlowContext {
  const actor = caller.id;
  const recorder = deps.flows.recorder;
  return {
    ...deps.flows,
    // The policy decides on who asked, with the roles of their token.
    policyContext: { ...deps.flows.policyContext, caller },
    // The service's DbRecorder (with its metrics observer) for this caller; any other recorder as it is.
    ...(recorder instanceof DbRecorder ? { recorder: recorder.with({ actor }) } : {}),
    ...(opts.writesParties ? { parties: new DbPartyBook(deps.store.db, { actor }) } : {}),
  };
}

/** `ctx` whose party book answers `record` without asking the database again. */
export function withKnownParty(ctx: FlowContext, record: PartyRecord): FlowContext {
  const book = ctx.parties;
  return {
    ...ctx,
    parties: {
      get: async (id) => (id === record.partyId ? record : book.get(id)),
      list: () => book.list(),
      put: (p) => book.put(p),
    },
  };
}

/**
 * The party-book record of `partyId` after checking that the caller's grant
 * reaches it (403 first, so that a withdrawer learns nothing about other
 * parties), or 404 `party_not_found` naming `field`.
 */
export async function bookedParty(
  deps: ServiceDeps,
  request: FastifyRequest,
  partyId: string,
  field = 'params.id',
): Promise<PartyRecord> {
  requirePartyAccess(request, partyId);
  const p = await deps.store.parties.get(partyId);
  if (!p)
    throw new ApiError(404, 'party_not_found', `party ${partyId} is not in this signer's party book`, field);
  return p;
}

/** A party id (`hint::fingerprint`); in a path it may be URL-encoded (`%3A%3A`). */
export const PartyIdSchema = z
  .string()
  .max(255)
  .refine(
    (s) => {
      try {
        parsePartyId(s);
        return true;
      } catch {
        return false;
      }
    },
    { message: 'not a party id (hint::fingerprint)' },
  );

export const PartyParams = z.object({ id: PartyIdSchema });

export const ContractIdSchema = z
  .string()
  .regex(/^00[0-9a-f]{64}[0-9a-f]*$/, 'a contract id (hex, 00…)')
  .max(512);

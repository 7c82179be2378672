/**
 * What every participant route shares: request decoding with the JSON API's
 * 400 text/plain answer, the route config (service and fault-matching name),
 * the streamed-read query parameters, paging of the list endpoints, and who
 * the caller is and what the caller's user may read, act, execute or administer.
 */
import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { SandboxContext } from '../context.js';
import { cantonError, E } from '../errors.js';
import { LEDGER_API_USER, type SandboxUser } from '../network.js';

/** Decodes a body like the JSON API: failures are 400 text/plain. */
export function decode<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const at = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)';
  throw new PlainError(`Invalid value for: body (${issue.message} at ${at})`);
}

/** The JSON API's request-decoding failure: 400 with a plain-text body. */
export class PlainError extends Error {
  override readonly name = 'PlainError';
}

export const config = (operation: string) => ({
  config: { service: 'ledger-api', operation: `ledger-api.${operation}` },
});

/** The `limit` and `stream_idle_timeout_ms` query parameters of a streamed read (defaults 1000 and 1000 ms). */
export function streamQuery(req: FastifyRequest): { limit: number; idleMs: number } {
  const q = req.query as Record<string, string | undefined>;
  const limit = q.limit === undefined ? 1000 : Number(q.limit);
  const idleMs = q.stream_idle_timeout_ms === undefined ? 1000 : Number(q.stream_idle_timeout_ms);
  if (!Number.isInteger(limit) || limit < 1) throw E.invalidArgument('limit must be a positive integer');
  if (!Number.isInteger(idleMs) || idleMs < 0)
    throw E.invalidArgument('stream_idle_timeout_ms must be a non-negative integer');
  return { limit, idleMs };
}

/** A page size and the token of the last id of the previous page, as the list endpoints take them. */
export function pageOf(
  q: Record<string, string | undefined>,
  max: number,
): { size: number; after: string | undefined } {
  const size = q.pageSize === undefined || q.pageSize === '' || q.pageSize === '0' ? max : Number(q.pageSize);
  if (!Number.isInteger(size) || size < 0)
    throw E.invalidArgument(`pageSize must be a non-negative integer, got ${q.pageSize}`);
  let after: string | undefined;
  if (q.pageToken !== undefined && q.pageToken !== '') {
    after = Buffer.from(q.pageToken, 'base64url').toString('utf8');
    if (after === '') throw E.invalidArgument('pageToken is not a token this participant issued');
  }
  return { size: Math.min(size, max), after };
}

/** One page of sorted ids after `after`, with the token of the next page when there is one. */
export function page<T>(
  sorted: readonly T[],
  idOf: (t: T) => string,
  p: { size: number; after: string | undefined },
): { items: T[]; nextPageToken: string } {
  const start = p.after === undefined ? 0 : sorted.findIndex((t) => idOf(t) > p.after!);
  const from = start < 0 ? sorted.length : start;
  const items = sorted.slice(from, from + p.size);
  const more = from + p.size < sorted.length;
  return {
    items,
    nextPageToken: more && items.length > 0 ? Buffer.from(idOf(items.at(-1)!)).toString('base64url') : '',
  };
}

export interface ParticipantAccess {
  userOf(req: FastifyRequest, bodyUserId?: string): SandboxUser;
  canRead(u: SandboxUser, p: string): boolean;
  requireRead(u: SandboxUser, parties: Iterable<string>, anyParty?: boolean): void;
  canExecute(u: SandboxUser, p: string): boolean;
  requireAdmin(u: SandboxUser): void;
}

export function participantAccess(ctx: SandboxContext): ParticipantAccess {
  const { net } = ctx;

  /**
   * The acting user: the token's, else the request's `userId`, else the default user. With a
   * user token the body's userId must be the token's user, whatever the user's rights (§3.3);
   * without one, a token-only user cannot be named.
   */
  const userOf = (req: FastifyRequest, bodyUserId?: string): SandboxUser => {
    const tokenUser = req.sandboxUser;
    if (tokenUser !== undefined && bodyUserId !== undefined && bodyUserId !== tokenUser)
      throw E.permissionDenied(`userId ${bodyUserId} does not match the token's user ${tokenUser}`);
    const id = bodyUserId ?? tokenUser ?? LEDGER_API_USER;
    const user = net.users.get(id);
    if (!user)
      throw cantonError('USER_NOT_FOUND', 11, `User not found: ${id}`, { resources: [['USER_ID', id]] });
    if (user.tokenOnly && tokenUser === undefined)
      throw E.permissionDenied(`user ${id} acts only with its bearer token: the request has none`);
    return user;
  };
  const canRead = (u: SandboxUser, p: string) =>
    u.readAsAnyParty === true || u.actAs.has(p) || u.readAs.has(p);
  /**
   * Reads (completions, updates, active contracts) need CanReadAs or CanActAs for every party
   * asked about; a party-wildcard filter needs CanReadAsAnyParty (participant admins have it too).
   */
  const requireRead = (u: SandboxUser, parties: Iterable<string>, anyParty = false) => {
    for (const p of parties)
      if (!canRead(u, p)) throw E.permissionDenied(`user ${u.id} may not read as ${p}`);
    if (anyParty && !u.admin && u.readAsAnyParty !== true)
      throw E.permissionDenied(`user ${u.id} may not read as any party (CanReadAsAnyParty)`);
  };
  const canExecute = (u: SandboxUser, p: string) =>
    u.executeAsAnyParty === true || u.actAs.has(p) || u.executeAs.has(p);
  const requireAdmin = (u: SandboxUser) => {
    if (!u.admin) throw E.permissionDenied('participant_admin right required');
  };
  return { userOf, canRead, requireRead, canExecute, requireAdmin };
}

/**
 * Participant users: the authenticated user and user rights (list, grant,
 * revoke), with Canton's permission rules.
 */
import type { FastifyInstance } from 'fastify';
import {
  GrantUserRightsRequestSchema,
  RevokeUserRightsRequestSchema,
} from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E } from '../errors.js';
import type { SandboxUser } from '../network.js';
import { config, decode, participantAccess } from './access.js';

export function registerUserRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireAdmin } = participantAccess(ctx);

  type RightJson = { kind: Record<string, { value: { party?: string } }> };
  const rightsOf = (u: SandboxUser): RightJson[] => [
    ...(u.admin ? [{ kind: { ParticipantAdmin: { value: {} } } }] : []),
    ...[...u.actAs].map((party) => ({ kind: { CanActAs: { value: { party } } } })),
    ...[...u.readAs].map((party) => ({ kind: { CanReadAs: { value: { party } } } })),
    ...[...u.executeAs].map((party) => ({ kind: { CanExecuteAs: { value: { party } } } })),
  ];
  const targetUser = (id: string) => {
    const u = net.users.get(id);
    if (!u)
      throw cantonError('USER_NOT_FOUND', 11, `User not found: ${id}`, { resources: [['USER_ID', id]] });
    return u;
  };
  const applyRights = (
    u: SandboxUser,
    rights: readonly { kind?: object | undefined }[],
    grant: boolean,
  ): RightJson[] => {
    const changed: RightJson[] = [];
    for (const r of rights) {
      const [name, inner] = Object.entries(r.kind ?? {})[0] ?? [];
      const party = (inner as { value?: { party?: string } } | undefined)?.value?.party;
      const set =
        name === 'CanActAs'
          ? u.actAs
          : name === 'CanReadAs'
            ? u.readAs
            : name === 'CanExecuteAs'
              ? u.executeAs
              : undefined;
      if (name === 'ParticipantAdmin') {
        if (u.admin !== grant) {
          u.admin = grant;
          changed.push({ kind: { ParticipantAdmin: { value: {} } } });
        }
        continue;
      }
      if (!set || party === undefined)
        throw E.invalidArgument(`The sandbox does not model the user right ${name ?? '(none)'}`);
      if (grant && !net.parties.has(party) && !net.localParties.has(party))
        throw E.invalidArgument(`Party not known on this participant: ${party}`);
      if (grant === set.has(party)) continue;
      if (grant) set.add(party);
      else set.delete(party);
      changed.push({ kind: { [name!]: { value: { party } } } });
    }
    return changed;
  };

  // The caller's own user (the token's, or the default user without a token), as Canton's `User`.
  app.get('/v2/authenticated-user', config('authenticatedUser'), async (req) => {
    const u = userOf(req);
    return {
      user: {
        id: u.id,
        ...(u.primaryParty !== undefined ? { primaryParty: u.primaryParty } : {}),
        isDeactivated: false,
        metadata: { resourceVersion: '0', annotations: {} },
        identityProviderId: '',
      },
    };
  });

  app.get('/v2/users/:userId/rights', config('listUserRights'), async (req) => {
    const caller = userOf(req);
    const id = (req.params as { userId: string }).userId;
    if (id !== caller.id) requireAdmin(caller);
    return { rights: rightsOf(targetUser(id)) };
  });

  app.post('/v2/users/:userId/rights', config('grantUserRights'), async (req) => {
    const body = decode(GrantUserRightsRequestSchema, req.body);
    requireAdmin(userOf(req));
    const id = (req.params as { userId: string }).userId;
    if (body.userId !== id)
      throw E.invalidArgument(`userId in the body (${body.userId}) differs from the path (${id})`);
    return { newlyGrantedRights: applyRights(targetUser(id), body.rights, true) };
  });

  app.patch('/v2/users/:userId/rights', config('revokeUserRights'), async (req) => {
    const body = decode(RevokeUserRightsRequestSchema, req.body);
    requireAdmin(userOf(req));
    const id = (req.params as { userId: string }).userId;
    if (body.userId !== id)
      throw E.invalidArgument(`userId in the body (${body.userId}) differs from the path (${id})`);
    return { newlyRevokedRights: applyRights(targetUser(id), body.rights, false) };
  });
}

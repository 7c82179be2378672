/**
 * Participant users: the authenticated user, user management (list, create,
 * get, update, delete) and user rights (list, grant, revoke), with Canton's
 * permission rules.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  GrantUserRightsRequestSchema,
  RevokeUserRightsRequestSchema,
} from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E } from '../errors.js';
import type { SandboxUser } from '../network.js';
import { config, decode, page, pageOf, participantAccess } from './access.js';

/** Canton's default `userManagement.maxUsersPageSize`. */
export const MAX_USERS_PAGE_SIZE = 1000;
/** Canton's user-id alphabet. */
const USER_ID = /^[a-zA-Z0-9@^$.!`\-#+'~_|:]{1,128}$/;

const RightSchema = z.object({ kind: z.record(z.string(), z.unknown()).optional() });
const UserSchema = z.object({
  id: z.string(),
  primaryParty: z.string().optional(),
  isDeactivated: z.boolean().optional(),
  metadata: z.unknown().optional(),
  identityProviderId: z.string().optional(),
  primaryPartyAuthentication: z.unknown().optional(),
});
const CreateUserRequestSchema = z.object({ user: UserSchema, rights: z.array(RightSchema).optional() });
const UpdateUserRequestSchema = z.object({
  user: UserSchema,
  updateMask: z.object({ paths: z.array(z.string()) }),
});

export function registerUserRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireAdmin } = participantAccess(ctx);

  type RightJson = { kind: Record<string, { value: { party?: string } }> };
  const rightsOf = (u: SandboxUser): RightJson[] => [
    ...(u.admin ? [{ kind: { ParticipantAdmin: { value: {} } } }] : []),
    ...(u.readAsAnyParty === true ? [{ kind: { CanReadAsAnyParty: { value: {} } } }] : []),
    ...(u.executeAsAnyParty === true ? [{ kind: { CanExecuteAsAnyParty: { value: {} } } }] : []),
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
    // Every right is checked before any is applied: a refused request changes nothing, as in Canton.
    type Flag = 'admin' | 'readAsAnyParty' | 'executeAsAnyParty';
    const FLAGS: Record<string, Flag> = {
      ParticipantAdmin: 'admin',
      CanReadAsAnyParty: 'readAsAnyParty',
      CanExecuteAsAnyParty: 'executeAsAnyParty',
    };
    type Parsed =
      | { name: string; flag: Flag }
      | { name: string; flag?: undefined; party: string; set: Set<string> };
    const parsed = rights.map((r): Parsed => {
      const [name, inner] = Object.entries(r.kind ?? {})[0] ?? [];
      if (name !== undefined && Object.hasOwn(FLAGS, name)) return { name, flag: FLAGS[name]! };
      const party = (inner as { value?: { party?: string } } | undefined)?.value?.party;
      const set =
        name === 'CanActAs'
          ? u.actAs
          : name === 'CanReadAs'
            ? u.readAs
            : name === 'CanExecuteAs'
              ? u.executeAs
              : undefined;
      if (!set || party === undefined)
        throw E.invalidArgument(`The sandbox does not model the user right ${name ?? '(none)'}`);
      if (grant && !net.parties.has(party) && !net.localParties.has(party))
        throw E.invalidArgument(`Party not known on this participant: ${party}`);
      return { name: name!, party, set };
    });
    const changed: RightJson[] = [];
    for (const r of parsed) {
      if (r.flag !== undefined) {
        if ((u[r.flag] === true) === grant) continue;
        if (r.flag === 'admin') u.admin = grant;
        else if (grant) u[r.flag] = true;
        else delete u[r.flag];
        changed.push({ kind: { [r.name]: { value: {} } } });
        continue;
      }
      if (grant === r.set.has(r.party)) continue;
      if (grant) r.set.add(r.party);
      else r.set.delete(r.party);
      changed.push({ kind: { [r.name]: { value: { party: r.party } } } });
    }
    return changed;
  };

  /** Canton's `User`. */
  const userJson = (u: SandboxUser) => ({
    id: u.id,
    ...(u.primaryParty !== undefined ? { primaryParty: u.primaryParty } : {}),
    isDeactivated: false,
    metadata: { resourceVersion: '0', annotations: {} },
    identityProviderId: '',
  });

  // The caller's own user (the token's, or the default user without a token).
  app.get('/v2/authenticated-user', config('authenticatedUser'), async (req) => ({
    user: userJson(userOf(req)),
  }));

  app.get('/v2/users', config('listUsers'), async (req) => {
    requireAdmin(userOf(req));
    const all = [...net.users.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const q = req.query as Record<string, string | undefined>;
    const { items, nextPageToken } = page(all, (u) => u.id, pageOf(q, MAX_USERS_PAGE_SIZE));
    return { users: items.map(userJson), nextPageToken };
  });

  app.post('/v2/users', config('createUser'), async (req) => {
    const body = decode(CreateUserRequestSchema, req.body);
    requireAdmin(userOf(req));
    const { id, primaryParty, isDeactivated } = body.user;
    if (!USER_ID.test(id))
      throw E.invalidArgument(
        `user id ${JSON.stringify(id)} is not valid: 1 to 128 characters of letters, digits and @^$.!\`-#+'~_|:`,
      );
    if (isDeactivated === true)
      throw E.invalidArgument(
        'The sandbox does not model deactivated users: create the user with isDeactivated false',
      );
    if (net.users.has(id))
      throw cantonError('USER_ALREADY_EXISTS', 10, `User already exists: ${id}`, {
        resources: [['USER_ID', id]],
      });
    const party = primaryParty === undefined || primaryParty === '' ? undefined : primaryParty;
    if (party !== undefined && !net.parties.has(party) && !net.localParties.has(party))
      throw E.invalidArgument(`Party not known on this participant: ${party}`);
    // Rights first, on a user not yet stored: a refused right leaves no half-created user.
    const u: SandboxUser = {
      id,
      primaryParty: party,
      actAs: new Set(),
      readAs: new Set(),
      executeAs: new Set(),
      admin: false,
    };
    applyRights(u, body.rights ?? [], true);
    net.users.set(id, u);
    return { user: userJson(u) };
  });

  app.get('/v2/users/:userId', config('getUser'), async (req) => {
    const caller = userOf(req);
    const id = (req.params as { userId: string }).userId;
    if (id !== caller.id) requireAdmin(caller);
    return { user: userJson(targetUser(id)) };
  });

  app.patch('/v2/users/:userId', config('updateUser'), async (req) => {
    const body = decode(UpdateUserRequestSchema, req.body);
    requireAdmin(userOf(req));
    const id = (req.params as { userId: string }).userId;
    if (body.user.id !== id)
      throw E.invalidArgument(`user.id in the body (${body.user.id}) differs from the path (${id})`);
    const u = targetUser(id);
    const paths = body.updateMask.paths;
    for (const path of paths)
      if (path !== 'primary_party' && path !== 'is_deactivated' && path !== 'metadata')
        throw E.invalidArgument(
          `updateMask path ${path} is not updatable: use primary_party, is_deactivated or metadata`,
        );
    if (paths.includes('is_deactivated') && body.user.isDeactivated === true)
      throw E.invalidArgument('The sandbox does not model deactivated users: delete the user instead');
    if (paths.includes('primary_party')) {
      const party =
        body.user.primaryParty === undefined || body.user.primaryParty === ''
          ? undefined
          : body.user.primaryParty;
      if (party !== undefined && !net.parties.has(party) && !net.localParties.has(party))
        throw E.invalidArgument(`Party not known on this participant: ${party}`);
      u.primaryParty = party;
    }
    return { user: userJson(u) };
  });

  app.delete('/v2/users/:userId', config('deleteUser'), async (req) => {
    const caller = userOf(req);
    requireAdmin(caller);
    const id = (req.params as { userId: string }).userId;
    targetUser(id);
    if (id === caller.id) throw E.invalidArgument('A user cannot delete itself');
    net.users.delete(id);
    return {};
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

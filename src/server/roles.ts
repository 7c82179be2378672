/**
 * The service's roles and who may call which route. Every route declares
 * `config: { roles: Role[] | 'public' }`; `enforceRoleDeclarations` makes a
 * route without a valid declaration impossible (the app refuses to become
 * ready and names the route), and `authorize` decides one request: the
 * principal needs one of the route's roles; an auditor only ever reads (GET
 * or HEAD); a withdrawer only reaches the parties listed in its token. No role
 * implies another: an admin reaches a withdrawer-only route only if the token
 * also carries `withdrawer`.
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { Principal } from './auth.js';

export const ROLES = ['admin', 'operator', 'withdrawer', 'approver', 'auditor'] as const;
export type Role = (typeof ROLES)[number];

/** What a route declares: the roles that may call it, or `'public'` (no token needed). */
export type RouteRoles = readonly Role[] | 'public';

declare module 'fastify' {
  interface FastifyContextConfig {
    roles?: RouteRoles;
  }
}

export function isRole(s: unknown): s is Role {
  return typeof s === 'string' && (ROLES as readonly string[]).includes(s);
}

const READ_METHODS = new Set(['GET', 'HEAD']);

/** Which parties a granted request may touch: all of them, or only these (a withdrawer's token). */
export type PartyScope = 'any' | readonly string[];

export type Access =
  | { allowed: true; public: true }
  | { allowed: true; public: false; roles: readonly Role[]; parties: PartyScope }
  | { allowed: false; reason: string };

export interface RouteAccess {
  method: string;
  roles: RouteRoles | undefined;
}

/**
 * May `principal` call this route (and, when given, act on `party`)? The
 * answer for a granted request says through which roles and, for a
 * withdrawer-only grant, the parties it is limited to (list endpoints filter
 * by it; a party-specific request passes `party`).
 */
export function authorize(
  principal: Principal | null,
  route: RouteAccess,
  opts: { party?: string } = {},
): Access {
  const declared = route.roles;
  if (declared === 'public') return { allowed: true, public: true };
  if (!Array.isArray(declared) || declared.length === 0)
    return { allowed: false, reason: 'the route declares no roles' };
  if (!principal) return { allowed: false, reason: 'authentication required' };
  const method = route.method.toUpperCase();
  const granted = principal.roles.filter(
    (r) => declared.includes(r) && (r !== 'auditor' || READ_METHODS.has(method)),
  );
  if (granted.length === 0) {
    const onlyAuditor = principal.roles.includes('auditor') && declared.includes('auditor');
    return {
      allowed: false,
      reason: onlyAuditor
        ? 'the auditor role is read-only'
        : declared.length === 1
          ? `this route needs the ${declared[0]} role`
          : `this route needs one of these roles: ${declared.join(', ')}`,
    };
  }
  // A role other than withdrawer is not limited to parties; a withdrawer is.
  const parties: PartyScope = granted.some((r) => r !== 'withdrawer') ? 'any' : principal.parties;
  if (opts.party !== undefined && parties !== 'any' && !parties.includes(opts.party))
    return { allowed: false, reason: 'the token does not grant access to this party' };
  return { allowed: true, public: false, roles: granted, parties };
}

export interface DeclaredRoute {
  method: string;
  url: string;
  roles: RouteRoles;
}

/** Why a route's declaration is invalid, or undefined if it is valid. */
export function declarationProblem(method: string, roles: unknown): string | undefined {
  if (roles === undefined) return 'declares no roles (config.roles)';
  if (roles === 'public') return undefined;
  if (!Array.isArray(roles) || roles.length === 0)
    return "config.roles must be 'public' or a non-empty list of roles";
  const unknown = roles.filter((r) => !isRole(r));
  if (unknown.length > 0) return `config.roles has unknown roles: ${unknown.map(String).join(', ')}`;
  if (roles.includes('auditor') && !READ_METHODS.has(method))
    return 'gives the read-only auditor role a method that is not GET';
  return undefined;
}

/**
 * Installs the rule "every route declares its roles" on `app` (call it right
 * after creating the app, before registering any route or plugin). Returns the
 * route table, filled as routes are added, for tests that walk every route.
 * A route with a missing or invalid declaration makes `app.ready()` (and so
 * `listen` and `inject`) fail with an error naming each such route.
 */
export function enforceRoleDeclarations(app: FastifyInstance): DeclaredRoute[] {
  const table: DeclaredRoute[] = [];
  const problems: string[] = [];
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const roles = route.config?.roles;
    for (const m of methods) {
      const method = m.toUpperCase();
      const problem = declarationProblem(method, roles);
      if (problem) problems.push(`${method} ${route.url} ${problem}`);
      else if (!table.some((r) => r.method === method && r.url === route.url))
        table.push({ method, url: route.url, roles: roles as RouteRoles });
    }
  });
  app.addHook('onReady', async () => {
    if (problems.length > 0)
      throw new Error(`routes without a valid role declaration:\n  ${problems.join('\n  ')}`);
  });
  return table;
}

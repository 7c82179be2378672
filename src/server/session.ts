/**
 * The second way a request is authenticated: a console session cookie. A
 * person signed in to the web console sends no bearer token; their page's
 * requests carry the session cookie, which names a row of the session store
 * holding the principal their identity provider's claims gave at sign-in.
 * The request then goes through exactly the same role checks as a token's
 * (roles.ts): the console has no authorisation of its own.
 *
 * A cookie authorises a request the browser may send on its own, so every
 * request that is not a read must also carry the session's CSRF token in
 * `X-CSRF-Token` (the page got it from `GET /console/session`, which a
 * cross-site page cannot read), and an `Origin` header, when present, must be
 * the console's own. The cookie is HttpOnly, SameSite=Strict, and Secure
 * (with the `__Host-` prefix) when the console is served over https.
 */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SessionRepo } from '../store/repos/sessions.js';
import type { Principal } from './auth.js';
import { isRole } from './roles.js';

export interface SessionSettings {
  /** The origin the console is served at (`publicUrl`'s; known once the service listens). */
  origin: () => string;
  idleMs: number;
  absoluteMs: number;
}

export interface ResolvedSession {
  /** The cookie's value (the session id, known only to the browser and this request). */
  id: string;
  principal: Principal;
  csrf: string;
  expiresAt: string;
}

/** What authentication needs from the console's sessions. */
export interface SessionAuth {
  readonly cookieName: string;
  /** The live session this request's cookie names, or undefined. */
  resolve(request: FastifyRequest): Promise<ResolvedSession | undefined>;
  /** Why this cookie-authorised request must be refused as a possible cross-site request, or undefined. */
  csrfProblem(request: FastifyRequest, session: ResolvedSession): string | undefined;
  /** Sets the session cookie on `reply`. */
  setCookie(reply: FastifyReply, id: string): void;
  clearCookie(reply: FastifyReply): void;
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The value of cookie `name` in a Cookie header (the first one), or undefined. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** A stored principal back as a Principal; undefined for anything that is not one. */
function principalFrom(v: unknown): Principal | undefined {
  if (v === null || typeof v !== 'object') return undefined;
  const p = v as Record<string, unknown>;
  const strings = (x: unknown) => Array.isArray(x) && x.every((s) => typeof s === 'string');
  if (typeof p.subject !== 'string' || typeof p.issuer !== 'string' || typeof p.caller !== 'string')
    return undefined;
  if (!strings(p.roles) || !strings(p.parties)) return undefined;
  const roles = (p.roles as string[]).filter(isRole);
  if (roles.length === 0) return undefined;
  return {
    subject: p.subject,
    issuer: p.issuer,
    caller: p.caller,
    roles,
    parties: [...(p.parties as string[])],
  };
}

const sameText = (a: string, b: string) => {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
};

/** Session authentication over the session store. */
export function createSessionAuth(sessions: SessionRepo, settings: SessionSettings): SessionAuth {
  const secure = settings.origin().startsWith('https:');
  const cookieName = secure ? '__Host-cs_session' : 'cs_session';
  const attributes = `Path=/; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
  return {
    cookieName,
    async resolve(request) {
      const id = cookieValue(request.headers.cookie, cookieName);
      if (id === undefined || !/^[A-Za-z0-9_-]{20,100}$/.test(id)) return undefined;
      const s = await sessions.use(id, settings.idleMs);
      if (!s) return undefined;
      const principal = principalFrom(s.principal);
      if (!principal) return undefined;
      return { id, principal, csrf: s.csrf, expiresAt: s.expiresAt };
    },
    csrfProblem(request, session) {
      if (READS.has(request.method.toUpperCase())) return undefined;
      const origin = request.headers.origin;
      const own = settings.origin();
      if (origin !== undefined && origin !== own)
        return `a request from ${origin} cannot use the console's session: open the console at ${own}/console/`;
      const given = request.headers['x-csrf-token'];
      if (typeof given !== 'string' || !sameText(given, session.csrf))
        return 'a change made with the console session needs its CSRF token in X-CSRF-Token';
      return undefined;
    },
    setCookie(reply, id) {
      reply.header(
        'set-cookie',
        `${cookieName}=${id}; ${attributes}; Max-Age=${Math.ceil(settings.absoluteMs / 1000)}`,
      );
    },
    clearCookie(reply) {
      reply.header('set-cookie', `${cookieName}=; ${attributes}; Max-Age=0`);
    },
  };
}

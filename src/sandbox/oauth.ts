/**
 * The sandbox's authorization server routes: the OAuth2 token endpoint
 * (client credentials, client_secret_basic or client_secret_post), the OIDC
 * discovery document and the JWKS its tokens verify with. URLs in the
 * discovery document use the origin the caller reached the sandbox at.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DISCOVERY_PATH, JWKS_PATH, TOKEN_PATH } from './auth.js';
import type { SandboxContext } from './context.js';

const oauth = { config: { service: 'oauth' } };

export function registerOAuthRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.post(TOKEN_PATH, oauth, async (req, reply) => {
    const form = (req.body ?? {}) as Record<string, unknown>;
    // A form is flat strings; a JSON body with other values is a malformed request, not a crash.
    if (
      typeof form !== 'object' ||
      Array.isArray(form) ||
      Object.values(form).some((v) => typeof v !== 'string')
    )
      return reply.status(400).header('cache-control', 'no-store').send({
        error: 'invalid_request',
        error_description:
          'the token request must be a form of string parameters (application/x-www-form-urlencoded)',
      });
    const r = await ctx.auth.issue(
      form as Record<string, string>,
      basicAuth(req.headers.authorization),
      originOf(req),
    );
    reply.header('cache-control', 'no-store');
    if (!r.ok) return reply.status(r.status).send(r.body);
    return r.body;
  });
  app.get(DISCOVERY_PATH, oauth, async (req) => ctx.auth.discovery(originOf(req)));
  app.get(JWKS_PATH, oauth, async () => ctx.auth.jwks());
}

/** `http://<host>` as the caller named it (Host header), else the listening address. */
function originOf(req: FastifyRequest): string {
  const host = req.headers.host;
  if (host !== undefined && /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(host))
    return `http://${host}`;
  const addr = req.server.server.address();
  if (addr === null || typeof addr === 'string') return 'http://localhost';
  return `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
}

function basicAuth(header: string | undefined): { id: string; secret: string } | undefined {
  const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header ?? '');
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const i = text.indexOf(':');
  if (i < 0) return undefined;
  return { id: formDecode(text.slice(0, i)), secret: formDecode(text.slice(i + 1)) };
}

/** RFC 6749 §2.3.1 form-encodes the credentials; clients that do not (plain `btoa`) still work. */
function formDecode(s: string): string {
  try {
    return decodeURIComponent(s.replaceAll('+', ' '));
  } catch {
    return s;
  }
}

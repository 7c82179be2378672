/**
 * The sandbox participant's JSON Ledger API v2 (`/v2/...`), with Canton's
 * paths, shapes, statuses and JsCantonError bodies, over HTTP and (the
 * update and completion streams) WebSocket. Each group of routes is
 * its own module; request bodies are decoded with the same zod schemas the
 * client uses, and a body that does not decode gets the JSON API's 400
 * `text/plain` answer (`access.ts`).
 */
import type { FastifyInstance } from 'fastify';
import type { SandboxContext } from '../context.js';
import { registerCommandRoutes } from './commands.js';
import { registerEventRoutes } from './events.js';
import { registerInteractiveRoutes } from './interactive.js';
import { registerPartyRoutes } from './parties.js';
import { registerStateRoutes } from './state.js';
import { registerStreamRoutes } from './streams.js';
import { registerUpdateRoutes } from './updates.js';
import { registerUserRoutes } from './users.js';

export { PlainError } from './access.js';
export { topologyCtx } from './parties.js';

export function registerParticipantRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  registerInteractiveRoutes(app, ctx);
  registerPartyRoutes(app, ctx);
  registerCommandRoutes(app, ctx);
  registerUpdateRoutes(app, ctx);
  registerEventRoutes(app, ctx);
  registerStateRoutes(app, ctx);
  registerUserRoutes(app, ctx);
  registerStreamRoutes(app, ctx);
}

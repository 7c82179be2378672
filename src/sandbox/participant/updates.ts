/**
 * Reading the sandbox ledger's history: command completions and updates
 * (by offset, and the streamed range read with its idle timeout).
 */
import type { FastifyInstance } from 'fastify';
import {
  CompletionStreamRequestSchema,
  GetUpdateByOffsetRequestSchema,
  GetUpdatesRequestSchema,
} from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E } from '../errors.js';
import { config, decode, participantAccess, streamQuery } from './access.js';
import { completionJson, eventFilter, jsTransaction } from './render.js';

export function registerUpdateRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireRead } = participantAccess(ctx);
  app.post('/v2/commands/completions', config('completions'), async (req) => {
    const body = decode(CompletionStreamRequestSchema, req.body);
    const user = userOf(req, body.userId);
    requireRead(user, body.parties);
    const { limit, idleMs } = streamQuery(req);
    const begin = body.beginExclusive ?? 0;
    if (begin > net.store.ledgerEnd())
      throw cantonError(
        'OFFSET_AFTER_LEDGER_END',
        12,
        `Begin offset (${begin}) is after ledger end (${net.store.ledgerEnd()})`,
      );
    const pick = () =>
      net.store
        .completions(begin)
        .filter((c) => c.userId === user.id && c.actAs.some((p) => body.parties.includes(p)))
        .slice(0, limit);
    let found = pick();
    const deadline = Date.now() + Math.min(idleMs, 30_000);
    while (found.length === 0 && Date.now() < deadline) {
      await net.store.waitForChange(deadline - Date.now());
      found = pick();
    }
    return found.map((c) => ({ completionResponse: { Completion: { value: completionJson(c) } } }));
  });

  // ---- updates and state ---------------------------------------------------------------------------

  app.post('/v2/updates/update-by-offset', config('updateByOffset'), async (req) => {
    const body = decode(GetUpdateByOffsetRequestSchema, req.body);
    const user = userOf(req);
    const u = net.store.updateByOffset(body.offset);
    const fmt = body.updateFormat.includeTransactions;
    if (fmt) {
      const f = eventFilter(fmt.eventFormat);
      requireRead(user, f.byParty.keys(), f.anyParty !== undefined);
    }
    const notFound = () =>
      cantonError(
        'UPDATE_NOT_FOUND',
        11,
        `Update not found: no update at offset ${body.offset} visible to the requested parties`,
      );
    if (!u || !fmt) throw notFound();
    const tx = jsTransaction(u, eventFilter(fmt.eventFormat), fmt.transactionShape as never, net.dso) as {
      events: unknown[];
    };
    if (tx.events.length === 0) throw notFound();
    return { update: { Transaction: { value: tx } } };
  });

  app.post('/v2/updates', config('updates'), async (req) => {
    const body = decode(GetUpdatesRequestSchema, req.body);
    const user = userOf(req);
    const fmt = body.updateFormat.includeTransactions;
    if (!fmt)
      throw E.invalidArgument('updateFormat: the sandbox serves transactions only (includeTransactions)');
    const filter = eventFilter(fmt.eventFormat);
    requireRead(user, filter.byParty.keys(), filter.anyParty !== undefined);
    const { limit, idleMs } = streamQuery(req);
    const begin = body.beginExclusive;
    const end = body.endInclusive;
    if (begin > net.store.ledgerEnd())
      throw cantonError(
        'OFFSET_AFTER_LEDGER_END',
        12,
        `Begin offset (${begin}) is after ledger end (${net.store.ledgerEnd()})`,
      );
    const pick = () => {
      const out: unknown[] = [];
      for (const u of net.store.updates(begin, end ?? Number.POSITIVE_INFINITY)) {
        const tx = jsTransaction(u, filter, fmt.transactionShape as never, net.dso) as { events: unknown[] };
        if (tx.events.length > 0) out.push({ update: { Transaction: { value: tx } } });
        if (out.length >= limit) break;
      }
      return out;
    };
    let found = pick();
    // Open-ended: wait for something new until the idle timeout.
    const deadline = Date.now() + Math.min(idleMs, 30_000);
    while (end === undefined && found.length === 0 && Date.now() < deadline) {
      await net.store.waitForChange(deadline - Date.now());
      found = pick();
    }
    return found;
  });
}

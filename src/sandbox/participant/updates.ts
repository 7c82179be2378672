/**
 * Reading the sandbox ledger's history over HTTP: command completions, the
 * update lists (3.5 `/v2/updates` and the legacy flat-transaction and tree
 * lists, each page closed by an offset checkpoint when it caught up), and
 * single updates, transactions and transaction trees by offset or by id.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  CompletionStreamRequestSchema,
  TransactionFormatSchema,
  UpdateFormatSchema,
} from '../../canton/ledger-api/schemas.js';
import type { SandboxContext } from '../context.js';
import { cantonError, E } from '../errors.js';
import type { Update } from '../ledger/store.js';
import type { Json } from '../ledger/value-json.js';
import { config, decode, PlainError, participantAccess, streamQuery } from './access.js';
import { completionJson, type EventFilter, eventFilter, jsTransaction } from './render.js';
import {
  offsetAfterLedgerEnd,
  offsetCheckpoint,
  readsOf,
  type Shape,
  transactionTree,
  type UpdatesKind,
  UpdatesRequestSchema,
  updateElement,
  updateView,
} from './update-feed.js';

const Offset = z.number().int().min(1);
const UpdateByOffsetSchema = z.strictObject({ offset: Offset, updateFormat: UpdateFormatSchema });
const UpdateByIdSchema = z.strictObject({ updateId: z.string().min(1), updateFormat: UpdateFormatSchema });
/** The legacy transaction lookups: `requestingParties` (3.4) or a `transactionFormat`. */
const legacyLookup = {
  requestingParties: z.array(z.string().min(1)).optional(),
  transactionFormat: TransactionFormatSchema.optional(),
};
const TransactionByIdSchema = z.strictObject({ updateId: z.string().min(1), ...legacyLookup });
const TransactionByOffsetSchema = z.strictObject({ offset: Offset, ...legacyLookup });

const UpdatesPageSchema = z.strictObject({
  beginOffsetExclusive: z.number().int().min(0).optional(),
  endOffsetInclusive: z.number().int().min(0).optional(),
  maxPageSize: z.number().int().min(0).optional(),
  updateFormat: UpdateFormatSchema,
  descendingOrder: z.boolean().optional(),
  pageToken: z.string().optional(),
});
/** Default and largest `maxPageSize` of a page of updates. */
const UPDATES_PAGE_DEFAULT = 100;
const UPDATES_PAGE_MAX = 1000;

/** Longest an open-ended HTTP list waits for something new. */
const MAX_IDLE_MS = 30_000;

export function registerUpdateRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const { net } = ctx;
  const { userOf, requireRead } = participantAccess(ctx);

  app.post('/v2/commands/completions', config('completions'), async (req) => {
    const body = decode(CompletionStreamRequestSchema, req.body);
    const user = userOf(req, body.userId);
    requireRead(user, body.parties);
    const { limit, idleMs } = streamQuery(req);
    const begin = body.beginExclusive ?? 0;
    if (begin > net.store.ledgerEnd()) throw offsetAfterLedgerEnd(begin, net.store.ledgerEnd());
    const pick = () => {
      const upTo = net.store.ledgerEnd();
      const found = net.store
        .completions(begin)
        .filter(
          (c) => c.offset <= upTo && c.userId === user.id && c.actAs.some((p) => body.parties.includes(p)),
        )
        .slice(0, limit);
      return { found, upTo };
    };
    let { found, upTo } = pick();
    const deadline = Date.now() + Math.min(idleMs, MAX_IDLE_MS);
    while (found.length === 0 && Date.now() < deadline) {
      await net.store.waitForChange(deadline - Date.now());
      ({ found, upTo } = pick());
    }
    const out: Json[] = found.map((c) => ({
      completionResponse: { Completion: { value: completionJson(c) } },
    }));
    const last = found.at(-1)?.offset ?? begin;
    if (out.length < limit && upTo > last)
      out.push({ completionResponse: { OffsetCheckpoint: offsetCheckpoint(net, upTo) } });
    return out;
  });

  // ---- update lists ---------------------------------------------------------------------------------

  const list = (kind: UpdatesKind) => async (req: FastifyRequest) => {
    const body = decode(UpdatesRequestSchema, req.body);
    const view = updateView(body, kind);
    const user = userOf(req);
    const reads = readsOf(view);
    requireRead(user, reads.parties, reads.anyParty);
    const { limit, idleMs } = streamQuery(req);
    const begin = body.beginExclusive ?? 0;
    const end = body.endInclusive;
    if (begin > net.store.ledgerEnd()) throw offsetAfterLedgerEnd(begin, net.store.ledgerEnd());
    if (end !== undefined && end < begin)
      throw E.invalidArgument(`endInclusive (${end}) is before beginExclusive (${begin})`);
    if (body.descendingOrder === true) {
      // Newest first, from what the ledger holds now; no waiting and no checkpoint.
      const out: Json[] = [];
      const all = net.store.updates(begin, Math.min(end ?? Number.POSITIVE_INFINITY, net.store.ledgerEnd()));
      for (let i = all.length - 1; i >= 0 && out.length < limit; i--) {
        const el = updateElement(all[i] as Update, view, net.dso);
        if (el) out.push(el);
      }
      return out;
    }
    const pick = () => {
      const upTo = Math.min(end ?? Number.POSITIVE_INFINITY, net.store.ledgerEnd());
      const out: Json[] = [];
      let last = begin;
      for (const u of net.store.updates(begin, upTo)) {
        const el = updateElement(u, view, net.dso);
        if (!el) continue;
        out.push(el);
        last = u.offset;
        if (out.length >= limit) break;
      }
      return { out, upTo, last };
    };
    let page = pick();
    // Until the end asked for is reached, wait for something new (at most the idle timeout).
    const deadline = Date.now() + Math.min(idleMs, MAX_IDLE_MS);
    while (
      page.out.length === 0 &&
      (end === undefined || net.store.ledgerEnd() < end) &&
      Date.now() < deadline
    ) {
      await net.store.waitForChange(deadline - Date.now());
      page = pick();
    }
    if (page.out.length < limit && page.upTo > page.last)
      page.out.push({ update: { OffsetCheckpoint: offsetCheckpoint(net, page.upTo) } });
    return page.out;
  };
  app.post('/v2/updates', config('updates'), list('updates'));
  app.post('/v2/updates/flats', config('updatesFlats'), list('flats'));
  app.post('/v2/updates/trees', config('updatesTrees'), list('trees'));

  // ---- single updates -------------------------------------------------------------------------------

  const updateNotFound = (what: string) =>
    cantonError(
      'UPDATE_NOT_FOUND',
      11,
      `Update not found, or not visible: no update ${what} visible to the requested parties`,
    );
  const transactionNotFound = (what: string) =>
    cantonError(
      'TRANSACTION_NOT_FOUND',
      11,
      `Transaction not found, or not visible: no transaction ${what} visible to the requesting parties`,
    );

  /** JsGetUpdateResponse of one update under an update format. */
  const oneUpdate = (
    req: FastifyRequest,
    u: Update | undefined,
    format: z.output<typeof UpdateFormatSchema>,
    what: string,
  ) => {
    const user = userOf(req);
    const fmt = format.includeTransactions;
    const filter = fmt ? eventFilter(fmt.eventFormat) : undefined;
    if (filter) requireRead(user, filter.byParty.keys(), filter.anyParty !== undefined);
    if (!u || !fmt || !filter) throw updateNotFound(what);
    const tx = jsTransaction(u, filter, fmt.transactionShape, net.dso) as { events: unknown[] };
    if (tx.events.length === 0) throw updateNotFound(what);
    return { update: { Transaction: { value: tx } } };
  };

  app.post('/v2/updates/update-by-offset', config('updateByOffset'), async (req) => {
    const body = decode(UpdateByOffsetSchema, req.body);
    return oneUpdate(
      req,
      net.store.updateByOffset(body.offset),
      body.updateFormat,
      `at offset ${body.offset}`,
    );
  });

  // A page of updates (3.5): no waiting; the token carries where the next page starts and the
  // request's bounds, which later pages must repeat.
  app.post('/v2/updates/get-updates-page', config('getUpdatesPage'), async (req) => {
    const body = decode(UpdatesPageSchema, req.body);
    const view = updateView({ updateFormat: body.updateFormat }, 'updates');
    const reads = readsOf(view);
    requireRead(userOf(req), reads.parties, reads.anyParty);
    const size =
      body.maxPageSize === undefined || body.maxPageSize === 0 ? UPDATES_PAGE_DEFAULT : body.maxPageSize;
    if (size > UPDATES_PAGE_MAX)
      throw E.invalidArgument(`maxPageSize ${size} is above this participant's limit of ${UPDATES_PAGE_MAX}`);
    const ledgerEnd = net.store.ledgerEnd();
    const begin = body.beginOffsetExclusive ?? 0;
    const end = body.endOffsetInclusive ?? ledgerEnd;
    if (body.endOffsetInclusive !== undefined && body.endOffsetInclusive > ledgerEnd)
      throw offsetAfterLedgerEnd(body.endOffsetInclusive, ledgerEnd);
    if (end < begin)
      throw E.invalidArgument(`endOffsetInclusive (${end}) is before beginOffsetExclusive (${begin})`);
    const descending = body.descendingOrder === true;
    const bounds = `${begin}:${body.endOffsetInclusive ?? ''}:${descending}`;
    let at: number | undefined;
    if (body.pageToken !== undefined && body.pageToken !== '') {
      const [b, a] = Buffer.from(body.pageToken, 'base64url').toString('utf8').split('@');
      at = Number(a);
      if (b !== bounds || !Number.isInteger(at))
        throw E.invalidArgument(
          "pageToken does not belong to this request: repeat the first request's offsets, format and order",
        );
    }
    const token = (offset: number) => Buffer.from(`${bounds}@${offset}`).toString('base64url');
    const picked: Json[] = [];
    if (!descending) {
      const from = at ?? begin;
      let last = from;
      for (const u of net.store.updates(from, end)) {
        const el = updateElement(u, view, net.dso);
        last = u.offset;
        if (el) picked.push(el);
        if (picked.length >= size) break;
      }
      const full = picked.length >= size;
      const highest = full ? last : end;
      // Without an end the last page keeps a token, to tail the ledger from where it stopped.
      const next = full || body.endOffsetInclusive === undefined ? token(highest) : '';
      return {
        updates: picked,
        lowestPageOffsetExclusive: from,
        highestPageOffsetInclusive: highest,
        nextPageToken: next,
      };
    }
    const to = at === undefined ? end : at - 1;
    const all = net.store.updates(begin, to);
    let lowest = begin;
    for (let i = all.length - 1; i >= 0; i--) {
      const u = all[i] as Update;
      const el = updateElement(u, view, net.dso);
      if (el) picked.push(el);
      if (picked.length >= size) {
        lowest = u.offset - 1;
        break;
      }
    }
    const full = picked.length >= size && lowest > begin;
    return {
      updates: picked,
      lowestPageOffsetExclusive: lowest,
      highestPageOffsetInclusive: to,
      nextPageToken: full ? token(lowest + 1) : '',
    };
  });

  app.post('/v2/updates/update-by-id', config('updateById'), async (req) => {
    const body = decode(UpdateByIdSchema, req.body);
    return oneUpdate(req, net.store.updateById(body.updateId), body.updateFormat, `with id ${body.updateId}`);
  });

  /** The filter and shape of a legacy lookup: the requesting parties' flat view, or a transaction format. */
  const lookupView = (
    body: z.output<z.ZodObject<typeof legacyLookup>>,
  ): { filter: EventFilter; shape: Shape } => {
    if (body.transactionFormat && body.requestingParties?.length)
      throw E.invalidArgument(
        'both requestingParties and transactionFormat are set: send either the legacy requestingParties or transactionFormat',
      );
    if (body.transactionFormat)
      return {
        filter: eventFilter(body.transactionFormat.eventFormat),
        shape: body.transactionFormat.transactionShape,
      };
    if (!body.requestingParties?.length) throw E.missingField('requestingParties (or transactionFormat)');
    return { filter: partiesFilter(body.requestingParties), shape: 'TRANSACTION_SHAPE_ACS_DELTA' };
  };

  const oneTransaction = (
    req: FastifyRequest,
    u: Update | undefined,
    body: z.output<z.ZodObject<typeof legacyLookup>>,
    what: string,
  ) => {
    const { filter, shape } = lookupView(body);
    requireRead(userOf(req), filter.byParty.keys(), filter.anyParty !== undefined);
    if (!u) throw transactionNotFound(what);
    const tx = jsTransaction(u, filter, shape, net.dso) as { events: unknown[] };
    if (tx.events.length === 0) throw transactionNotFound(what);
    return { transaction: tx };
  };

  app.post('/v2/updates/transaction-by-id', config('transactionById'), async (req) => {
    const body = decode(TransactionByIdSchema, req.body);
    return oneTransaction(req, net.store.updateById(body.updateId), body, `with id ${body.updateId}`);
  });

  app.post('/v2/updates/transaction-by-offset', config('transactionByOffset'), async (req) => {
    const body = decode(TransactionByOffsetSchema, req.body);
    return oneTransaction(req, net.store.updateByOffset(body.offset), body, `at offset ${body.offset}`);
  });

  const oneTree = (req: FastifyRequest, u: Update | undefined, what: string) => {
    const parties = queryParties(req);
    if (parties.length === 0) throw E.missingField('parties (query parameter)');
    const filter = partiesFilter(parties);
    requireRead(userOf(req), parties);
    if (!u) throw transactionNotFound(what);
    const tree = transactionTree(u, filter, net.dso);
    if (Object.keys(tree.eventsById).length === 0) throw transactionNotFound(what);
    return { transaction: tree };
  };

  app.get<{ Params: { offset: string } }>(
    '/v2/updates/transaction-tree-by-offset/:offset',
    config('transactionTreeByOffset'),
    async (req) => {
      const offset = Number(req.params.offset);
      if (!/^\d+$/.test(req.params.offset) || !Number.isSafeInteger(offset))
        throw new PlainError('Invalid value for: path parameter offset');
      return oneTree(req, net.store.updateByOffset(offset), `at offset ${offset}`);
    },
  );

  app.get<{ Params: { updateId: string } }>(
    '/v2/updates/transaction-tree-by-id/:updateId',
    config('transactionTreeById'),
    async (req) => {
      const id = req.params.updateId;
      return oneTree(req, net.store.updateById(id), `with id ${id}`);
    },
  );
}

/** Every event the parties see (a wildcard filter per party). */
function partiesFilter(parties: string[]): EventFilter {
  return eventFilter({ filtersByParty: Object.fromEntries(parties.map((p) => [p, {}])) });
}

/** The repeatable `parties` query parameter. */
function queryParties(req: FastifyRequest): string[] {
  const q = (req.query as Record<string, string | string[] | undefined>).parties;
  if (q === undefined) return [];
  return (Array.isArray(q) ? q : [q]).filter((p) => p !== '');
}

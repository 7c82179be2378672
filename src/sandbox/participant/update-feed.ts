/**
 * What the update reads (HTTP lists and WebSocket streams) share: the
 * GetUpdatesRequest in both its 3.5 (`updateFormat`) and legacy 3.4
 * (`filter` + `verbose`) forms, the view a request asks for (flat
 * transactions or transaction trees, for which parties), and the stream
 * elements: a transaction, a transaction tree, an offset checkpoint.
 */
import { z } from 'zod';
import { EventFormatSchema, UpdateFormatSchema } from '../../canton/ledger-api/schemas.js';
import { cantonError, E, type SandboxError } from '../errors.js';
import { isoMicros } from '../ledger/clock.js';
import type { Update } from '../ledger/store.js';
import type { Json } from '../ledger/value-json.js';
import type { SandboxNetwork } from '../network.js';
import { type EventFilter, eventFilter, jsTransaction } from './render.js';

const Offset = z.number().int().min(0);

/** The deprecated `TransactionFilter` of the legacy request form. */
export const TransactionFilterSchema = EventFormatSchema.omit({ verbose: true });

/**
 * `GetUpdatesRequest` as both versions publish it: 3.4.12 lists `updateFormat` as required
 * but still takes the deprecated `filter`/`verbose` (what the SDK's WebSocket client sends);
 * 3.5.1 requires `beginExclusive` and adds `descendingOrder`.
 */
export const UpdatesRequestSchema = z.strictObject({
  beginExclusive: Offset.optional(),
  endInclusive: Offset.optional(),
  updateFormat: UpdateFormatSchema.optional(),
  filter: TransactionFilterSchema.optional(),
  verbose: z.boolean().optional(),
  descendingOrder: z.boolean().optional(),
});
export type UpdatesRequest = z.output<typeof UpdatesRequestSchema>;

export type Shape = 'TRANSACTION_SHAPE_ACS_DELTA' | 'TRANSACTION_SHAPE_LEDGER_EFFECTS';

/** Which endpoint asks: the 3.5 updates, or the legacy flat-transaction or transaction-tree lists. */
export type UpdatesKind = 'updates' | 'flats' | 'trees';

/** What a request wants to see of each update. */
export interface UpdateView {
  /** Transactions under this filter; undefined: no transactions (only checkpoints). */
  filter: EventFilter | undefined;
  shape: Shape;
  /** Render transactions as `TransactionTree` elements (the legacy trees list). */
  tree: boolean;
}

/** The view of a request: `updateFormat` or the legacy `filter`, never both, never neither. */
export function updateView(body: UpdatesRequest, kind: UpdatesKind): UpdateView {
  // `verbose: false` is the protobuf default: clients send it beside `updateFormat` too.
  const legacy = body.filter !== undefined || body.verbose === true;
  if (legacy && body.updateFormat !== undefined)
    throw E.invalidArgument(
      'both filter/verbose and updateFormat are set: send either the legacy filter and verbose or updateFormat, not both',
    );
  const tree = kind === 'trees';
  if (body.updateFormat !== undefined) {
    const f = body.updateFormat;
    if (!f.includeTransactions && !f.includeReassignments && !f.includeTopologyEvents)
      throw E.invalidArgument(
        'updateFormat: set at least one of includeTransactions, includeReassignments, includeTopologyEvents',
      );
    const tx = f.includeTransactions;
    return {
      filter: tx ? eventFilter(tx.eventFormat) : undefined,
      shape: tree
        ? 'TRANSACTION_SHAPE_LEDGER_EFFECTS'
        : (tx?.transactionShape ?? 'TRANSACTION_SHAPE_ACS_DELTA'),
      tree,
    };
  }
  if (body.filter === undefined)
    throw E.invalidArgument('updateFormat is required (or the legacy filter with verbose)');
  // The legacy lists: flat transactions are the ACS delta, trees the ledger effects.
  return {
    filter: eventFilter(body.filter),
    shape: tree ? 'TRANSACTION_SHAPE_LEDGER_EFFECTS' : 'TRANSACTION_SHAPE_ACS_DELTA',
    tree,
  };
}

/** `JsTransactionTree`: the ledger-effects events of a transaction, by node id. */
export function transactionTree(u: Update, filter: EventFilter, dso: string): Json & { eventsById: object } {
  const tx = jsTransaction(u, filter, 'TRANSACTION_SHAPE_LEDGER_EFFECTS', dso) as Record<string, Json> & {
    events: Record<string, { nodeId: number }>[];
  };
  const eventsById: Record<string, Json> = {};
  for (const e of tx.events) {
    const [kind, value] = Object.entries(e)[0] as [string, { nodeId: number }];
    const key = kind === 'CreatedEvent' ? 'CreatedTreeEvent' : 'ExercisedTreeEvent';
    eventsById[String(value.nodeId)] = { [key]: { value: value as unknown as Json } };
  }
  const { events: _events, ...rest } = tx;
  return { ...rest, eventsById };
}

/** The stream element of an update under a view, or undefined when nothing of it is visible. */
export function updateElement(u: Update, view: UpdateView, dso: string): Json | undefined {
  if (!view.filter) return undefined;
  if (view.tree) {
    const tree = transactionTree(u, view.filter, dso);
    if (Object.keys(tree.eventsById).length === 0) return undefined;
    return { update: { TransactionTree: { value: tree } } };
  }
  const tx = jsTransaction(u, view.filter, view.shape, dso) as { events: unknown[] };
  if (tx.events.length === 0) return undefined;
  return { update: { Transaction: { value: tx as unknown as Json } } };
}

/**
 * `OffsetCheckpoint`: the stream has seen everything up to `offset`, with the
 * synchronizer's record time there, so a reader can move its position on even
 * when nothing in between concerned it.
 */
export function offsetCheckpoint(net: SandboxNetwork, offset: number): Json {
  const at = net.store.recordTimeAt(offset) ?? net.clock.now();
  return {
    value: {
      offset,
      synchronizerTimes: [{ synchronizerId: net.synchronizerId, recordTime: isoMicros(at) }],
    },
  };
}

/** The parties a view reads as, and whether it reads as any party. */
export function readsOf(view: UpdateView): { parties: string[]; anyParty: boolean } {
  return {
    parties: [...(view.filter?.byParty.keys() ?? [])],
    anyParty: view.filter?.anyParty !== undefined,
  };
}

/** A read that starts past the ledger end. */
export function offsetAfterLedgerEnd(begin: number, end: number): SandboxError {
  return cantonError('OFFSET_AFTER_LEDGER_END', 12, `Begin offset (${begin}) is after ledger end (${end})`);
}

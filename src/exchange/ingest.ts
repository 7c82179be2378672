/**
 * Ledger ingestion: the Ledger API update stream of every party in the
 * book, read from the stored cursor and turned into what an exchange keeps —
 * holdings, movements per party and instrument, deposits (credited at once,
 * or pending until their offer ends), settled withdrawal deliveries and
 * `transfer.unexpected` alerts — with the events of each change.
 *
 * One instance ingests at a time: it holds the `ingest` lease (renewed every
 * third of its length) and every write checks it (store/repos/ledger.ts);
 * another instance takes over when the lease lapses. Updates are read one
 * HTTP page at a time (`pageSize` items, transactions and offset
 * checkpoints) and each page is written in ONE database transaction with the
 * cursor and its events: after a crash the page is read again, and an update
 * already ingested (kept by update id) is never applied twice.
 *
 * Parties: ingestion follows each party of the book from the cursor at which
 * it first saw it; the holdings the party had then are taken from the active
 * contracts as its opening balance. Import transactions of a major upgrade
 * (record time 0001-01-01) only record holdings not known yet (movement
 * `import`): they move no funds.
 *
 * Transfers are recognised by the token standard's markers (exchange/parse.ts),
 * never by a registry's choice names:
 * - a one-step transfer into a book party from outside the book → deposit,
 *   credited; a transfer offer to a book party from outside → deposit,
 *   pending, and `offer.received`; its end moves it (DEPOSIT_LIFECYCLE);
 * - an offer of a withdrawal (the sender is a book party) ending → the
 *   withdrawal's delivery moves, in the same transaction;
 * - funds of a book party leaving in a transaction this service did not
 *   submit (its command id is neither a withdrawal's nor one the pipeline
 *   signed) → `transfer.unexpected`.
 *
 * One file on purpose: `createIngestion` is one closure over the lease, the
 * cursor and the parties followed, and a page's changes come from one pass over
 * its updates written in one transaction; parsing (parse.ts), the deposit rules
 * (deposits.ts) and the store's writes (store/repos/ledger.ts) are already
 * beside it.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { LedgerApiClient } from '../canton/ledger-api/client.js';
import { updateOffset } from '../canton/ledger-api/client.js';
import type { JsTransaction, Update } from '../canton/ledger-api/schemas.js';
import {
  activeInterfaceViews,
  HOLDING_INTERFACE,
  TRANSFER_INSTRUCTION_INTERFACE,
} from '../flows/holdings.js';
import { addDecimals, compareDecimals, isDecimal } from '../intent/decimal.js';
import { WithdrawalStateError } from '../store/errors.js';
import type { Store } from '../store/index.js';
import type { Deposit } from '../store/repos/deposits.js';
import { type Lease, LeaseExpiredError } from '../store/repos/leases.js';
import type { HoldingRecord, IngestPage, MovementRecord, NewDeposit } from '../store/repos/ledger.js';
import type { DeliveryState, OfferOutcome } from '../store/repos/withdrawals.js';
import type { Attribute } from './deposits.js';
import { INGEST_LEASE, type IngestionAccess } from './ingest-control.js';
import { archivedHoldingIds, holdingOf, type OfferEvent, parseTransaction } from './parse.js';
import { isImportTransaction } from './resume-point.js';

export interface IngestionOptions {
  store: Store;
  ledger: LedgerApiClient;
  attribute: Attribute;
  /** Memos longer than this are stored cut and attribute to nothing (default 256). */
  maxMemoLength?: number;
  /** How often the ledger end is looked at when there was nothing new (ms, default 500). */
  pollMs?: number;
  /** Updates per page, and so per database transaction (default 200). */
  pageSize?: number;
  /** Length of the ingestion lease (ms, default 15 s). */
  leaseMs?: number;
  /** This instance's name in the lease (default host:pid:random). */
  owner?: string;
  logger?: {
    info(obj: object, msg: string): void;
    warn(obj: object, msg: string): void;
  };
}

/** What one ingested page brought, for the automations that act on it. */
export interface IngestedBatch {
  parties: ReadonlySet<string>;
  deposits: readonly Deposit[];
  /** The cursor after the page. */
  offset: number;
}

export interface Ingestion {
  start(): void;
  stop(): Promise<void>;
  /** Look at the ledger now rather than at the next poll. */
  kick(): void;
  /** Called after each page is committed; returns the unsubscribe function. */
  subscribe(fn: (batch: IngestedBatch) => void): () => void;
  /** Reads up to the ledger end as it is now, holding the lease (tests, benches); the updates ingested. */
  catchUp(): Promise<number>;
  access: IngestionAccess;
}

const LEDGER_EFFECTS = 'TRANSACTION_SHAPE_LEDGER_EFFECTS' as const;

/** What ingestion reads of the book's parties (exported for the ingestion benchmark's baseline). */
export function updateFormat(parties: readonly string[]) {
  const iface = (interfaceId: string) => ({
    identifierFilter: {
      InterfaceFilter: { value: { interfaceId, includeInterfaceView: true, includeCreatedEventBlob: false } },
    },
  });
  const filter = {
    cumulative: [
      { identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: false } } } },
      iface(HOLDING_INTERFACE),
      iface(TRANSFER_INSTRUCTION_INTERFACE),
    ],
  };
  return {
    includeTransactions: {
      eventFormat: { filtersByParty: Object.fromEntries(parties.map((p) => [p, filter])), verbose: true },
      transactionShape: LEDGER_EFFECTS,
    },
  };
}

/** Where a withdrawal's funds are once its offer ended so. */
const DELIVERY_OF: Record<
  OfferEvent extends infer _ ? string : never,
  { to: DeliveryState; outcome?: OfferOutcome }
> = {
  completed: { to: 'delivered', outcome: 'accepted' },
  pending: { to: 'offered' },
  rejected: { to: 'returned', outcome: 'rejected' },
  withdrawn: { to: 'returned', outcome: 'withdrawn' },
  expired: { to: 'returned', outcome: 'expired' },
  failed: { to: 'returned', outcome: 'failed' },
  unknown: { to: 'returned', outcome: 'failed' },
};

/** Kinds of movement that only the party itself can make (its signature is needed). */
const PARTY_MADE = new Set(['transfer', 'merge-split', 'burn']);

const isNegative = (a: string) => compareDecimals(a, '0') === -1;
const negated = (a: string) => (a.startsWith('-') ? a.slice(1) : `-${a}`);
/** The change of the unlocked holdings: what only the owner's own signature can spend. */
const unlockedChange = (amount: string, locked: string) => addDecimals([amount, negated(locked)]) ?? amount;
const isPositive = (a: string) => compareDecimals(a, '0') === 1;

function transactionOf(u: Update): JsTransaction | undefined {
  return 'Transaction' in u ? (u as { Transaction: { value: JsTransaction } }).Transaction.value : undefined;
}

function checkpointOf(u: Update): { offset: number; times: Record<string, string> } | undefined {
  if (!('OffsetCheckpoint' in u)) return undefined;
  const v = (u as { OffsetCheckpoint: { value: { offset: number; synchronizerTimes?: unknown } } })
    .OffsetCheckpoint.value;
  const times: Record<string, string> = {};
  for (const t of (v.synchronizerTimes ?? []) as { synchronizerId?: string; recordTime?: string }[])
    if (t.synchronizerId && t.recordTime) times[t.synchronizerId] = t.recordTime;
  return { offset: v.offset, times };
}

export function createIngestion(opts: IngestionOptions): Ingestion {
  const { store, ledger } = opts;
  const pollMs = opts.pollMs ?? 500;
  const pageSize = opts.pageSize ?? 200;
  const leaseMs = opts.leaseMs ?? 15_000;
  const maxMemo = opts.maxMemoLength ?? 256;
  const owner = opts.owner ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = opts.logger;
  const subscribers = new Set<(b: IngestedBatch) => void>();
  let lease: Lease | undefined;
  let renewer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  let wake: (() => void) | undefined;
  let kicked = false;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (kicked || stopped) {
        kicked = false;
        resolve();
        return;
      }
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        wake = undefined;
        kicked = false;
        resolve();
      }
      wake = done;
    });

  function dropLease(why: string) {
    if (!lease) return;
    log?.warn({ owner, fence: lease.fence }, `ledger ingestion lease lost (${why})`);
    lease = undefined;
    clearInterval(renewer);
    renewer = undefined;
  }

  async function holdOrTake(): Promise<Lease | undefined> {
    if (lease) return lease;
    lease = await store.leases.acquire(INGEST_LEASE, owner, leaseMs);
    if (!lease) return undefined;
    log?.info({ owner, fence: lease.fence }, 'ledger ingestion lease taken: this instance ingests');
    const held = lease;
    renewer = setInterval(
      () => {
        store.leases.renew(held, leaseMs).then(
          (ok) => ok || (lease === held && dropLease('not renewed')),
          (e: unknown) => log?.warn({ err: String(e) }, 'ledger ingestion lease renewal failed'),
        );
      },
      Math.max(50, Math.floor(leaseMs / 3)),
    );
    renewer.unref?.();
    return lease;
  }

  /** Starts following the book's parties not followed yet (opening balances at the cursor). */
  async function followNewParties(l: Lease, cursor: number, recordTime: string): Promise<string[]> {
    const book = (await store.parties.list()).map((p) => p.partyId);
    const followed = await store.ledger.parties();
    for (const party of book) {
      if (followed.has(party)) continue;
      const holdings: HoldingRecord[] = [];
      if (cursor > 0)
        for (const { event } of await activeInterfaceViews({ ledger }, party, HOLDING_INTERFACE, cursor)) {
          const h = holdingOf(event);
          if (h && h.owner === party)
            holdings.push({
              contractId: h.contractId,
              party,
              instrument: h.instrument,
              amount: h.amount,
              locked: h.locked,
            });
        }
      await store.ledger.follow(l, party, cursor, recordTime, holdings);
      log?.info({ party, offset: cursor, holdings: holdings.length }, 'ledger ingestion follows a new party');
    }
    return book;
  }

  /** Reads and writes one page; the number of items it read (0: at the ledger end). */
  /** The page read ahead while the previous one was written: used only if it starts at the cursor. */
  let ahead: { from: number; key: string; end: number; page: Promise<Update[]> } | undefined;

  function readPage(from: number, end: number, parties: readonly string[]): Promise<Update[]> {
    return ledger
      .updates(
        { beginExclusive: from, endInclusive: end, updateFormat: updateFormat(parties) },
        { limit: pageSize },
      )
      .then((items) => items.flatMap((i) => (i.update ? [i.update] : [])));
  }

  async function step(l: Lease): Promise<number> {
    const cursor = (await store.ledger.cursor()) ?? { offset: 0, recordTimes: {} };
    const lastTime = Object.values(cursor.recordTimes).sort().at(-1) ?? '';
    const parties = await followNewParties(l, cursor.offset, lastTime);
    if (parties.length === 0) return 0;
    const key = parties.join('\n');
    const next = ahead;
    ahead = undefined;
    let end: number;
    let updates: Update[];
    if (next && next.from === cursor.offset && next.key === key) {
      end = next.end;
      updates = await next.page;
    } else {
      end = (await ledger.ledgerEnd()).offset;
      if (end <= cursor.offset) return 0;
      updates = await readPage(cursor.offset, end, parties);
    }
    if (updates.length === 0) {
      // Nothing for the book's parties up to `end` and no checkpoint: the cursor may move there.
      await store.ledger.writePage(l, emptyPage({ offset: end, recordTimes: {} }));
      return 0;
    }
    const page = await plan(new Set(parties), updates, cursor.offset);
    // The participant renders the next page while this one is written (read only: nothing is
    // lost if the write fails — the next step then reads from the cursor again).
    if (page.cursor.offset < end) {
      const p = readPage(page.cursor.offset, end, parties);
      p.catch(() => {});
      ahead = { from: page.cursor.offset, key, end, page: p };
    }
    const result = await store.ledger.writePage(l, page);
    const batch: IngestedBatch = {
      parties: new Set(parties),
      deposits: result.deposits,
      offset: page.cursor.offset,
    };
    for (const s of subscribers) {
      try {
        s(batch);
      } catch (e) {
        log?.warn({ err: String(e) }, 'an ingestion subscriber failed');
      }
    }
    return updates.length;
  }

  function emptyPage(cursor: IngestPage['cursor']): IngestPage {
    return {
      updates: [],
      created: [],
      archived: [],
      movements: [],
      deposits: [],
      settlements: [],
      events: [],
      cursor,
    };
  }

  /** What a page of updates adds (see the header), with the lookups it needs made first. */
  async function plan(
    parties: ReadonlySet<string>,
    updates: readonly Update[],
    from: number,
  ): Promise<IngestPage> {
    const page = emptyPage({ offset: from, recordTimes: {} });
    const txs: JsTransaction[] = [];
    for (const u of updates) {
      page.cursor.offset = Math.max(page.cursor.offset, updateOffset(u));
      const tx = transactionOf(u);
      if (tx) {
        txs.push(tx);
        const prev = page.cursor.recordTimes[tx.synchronizerId];
        if (!prev || prev < tx.recordTime) page.cursor.recordTimes[tx.synchronizerId] = tx.recordTime;
      }
      const cp = checkpointOf(u);
      if (cp)
        for (const [s, t] of Object.entries(cp.times))
          if (!page.cursor.recordTimes[s] || page.cursor.recordTimes[s]! < t) page.cursor.recordTimes[s] = t;
    }
    const seen = await store.ledger.ingested(txs.map((t) => t.updateId));
    const fresh = txs.filter((t) => !seen.has(t.updateId));
    // Holdings the page archives, and those an upgrade's imports create again (known ones are kept as is).
    const known = await store.ledger.holdingsById([
      ...new Set(
        fresh.flatMap((t) => [...archivedHoldingIds(t), ...(isImportTransaction(t) ? createdIds(t) : [])]),
      ),
    ]);
    const own = await store.ledger.ownCommands([
      ...new Set(fresh.flatMap((t) => (t.commandId ? [t.commandId] : []))),
    ]);
    const parsedAll = fresh.map((tx) => ({ tx, consumed: consumedInstructions(tx) }));
    const byOffer = await store.ledger.withdrawalsByOffer([...new Set(parsedAll.flatMap((p) => p.consumed))]);
    const deliveries: {
      id: string;
      to: DeliveryState;
      outcome?: OfferOutcome;
      next?: string;
      updateId: string;
    }[] = [];
    const inPage = new Map<
      string,
      {
        contractId: string;
        owner: string;
        instrument: { admin: string; id: string };
        amount: string;
        locked: boolean;
      }
    >();
    for (const { tx } of parsedAll) {
      const knownNow = new Map<
        string,
        {
          contractId: string;
          owner: string;
          instrument: { admin: string; id: string };
          amount: string;
          locked: boolean;
        }
      >(inPage);
      for (const [cid, h] of known) knownNow.set(cid, { ...h, owner: h.party });
      const p = parseTransaction(tx, { parties, known: knownNow });
      const at = { updateId: tx.updateId, offset: tx.offset, recordTime: tx.recordTime };
      page.updates.push({ ...at, synchronizerId: tx.synchronizerId });
      const imported = isImportTransaction(tx);
      for (const h of p.holdings) {
        if (h.op === 'create') {
          if (imported && (known.has(h.contractId) || inPage.has(h.contractId))) continue;
          page.created.push({
            contractId: h.contractId,
            party: h.owner,
            instrument: h.instrument,
            amount: h.amount,
            locked: h.locked,
            offset: tx.offset,
            updateId: tx.updateId,
          });
          inPage.set(h.contractId, h);
          if (imported)
            page.movements.push({
              ...at,
              nodeId: h.nodeId,
              party: h.owner,
              kind: 'import',
              instrument: h.instrument,
              amount: h.amount,
              locked: h.locked ? h.amount : '0',
              ours: false,
            });
        } else page.archived.push({ contractId: h.contractId, offset: tx.offset, updateId: tx.updateId });
      }
      if (imported) continue; // an upgrade's import moves no funds
      const ours = tx.commandId !== undefined && own.has(tx.commandId);
      const withdrawalId = tx.commandId ? own.get(tx.commandId) : undefined;
      const unexpected = (m: MovementRecord) =>
        page.events.push({
          type: 'transfer.unexpected',
          subject: `party:${m.party}`,
          data: {
            party: m.party,
            instrument: m.instrument,
            amount: m.amount,
            kind: m.kind,
            updateId: m.updateId,
            offset: m.offset,
            recordTime: m.recordTime,
            ...(tx.commandId ? { commandId: tx.commandId } : {}),
            ...(m.memo !== undefined ? { memo: m.memo } : {}),
            ...(m.counterparty ? { counterparty: m.counterparty } : {}),
          },
        });
      for (const m of p.movements) {
        const memo = m.memo === undefined ? undefined : m.memo.slice(0, maxMemo);
        for (const d of m.deltas) {
          const mv: MovementRecord = {
            ...at,
            nodeId: m.nodeId,
            party: d.party,
            kind: m.kind,
            instrument: d.instrument,
            amount: d.amount,
            locked: d.locked,
            ...(m.sender && m.sender !== d.party ? { counterparty: m.sender } : {}),
            ...(memo !== undefined ? { memo } : {}),
            ours,
            ...(withdrawalId ? { withdrawalId } : {}),
          };
          page.movements.push(mv);
          // A lock released to its receiver (an offer accepted) moves nothing the party still controlled.
          if (isNegative(unlockedChange(d.amount, d.locked)) && !ours && PARTY_MADE.has(m.kind))
            unexpected(mv);
          // A one-step transfer into the book from outside it is a deposit, credited.
          if (
            m.kind === 'transfer' &&
            m.instructionCid === undefined &&
            isPositive(d.amount) &&
            m.sender !== undefined &&
            !parties.has(m.sender)
          )
            page.deposits.push(
              newDeposit(d.party, m.sender, d.instrument, d.amount, m.memo, 'one_step', at, m.nodeId),
            );
        }
      }
      for (const u of p.unexplained) {
        const mv: MovementRecord = {
          ...at,
          nodeId: u.nodeIds[0] ?? 0,
          party: u.party,
          kind: 'unexplained',
          instrument: u.instrument,
          amount: u.amount,
          locked: u.locked,
          ours,
        };
        page.movements.push(mv);
        if (isNegative(unlockedChange(u.amount, u.locked)) && !ours) unexpected(mv);
      }
      const continued = new Set(
        p.offers.flatMap((o) => (o.op === 'consumed' && o.nextInstructionCid ? [o.nextInstructionCid] : [])),
      );
      for (const o of p.offers) {
        if (o.op === 'created') {
          // A later step of a multi-step offer is followed by the deposit of its first instruction.
          const later =
            continued.has(o.instructionCid) ||
            (o.originalInstructionCid !== undefined && o.originalInstructionCid !== o.instructionCid);
          if (!later && parties.has(o.receiver) && !parties.has(o.sender) && isDecimal(o.amount))
            page.deposits.push(
              newDeposit(o.receiver, o.sender, o.instrument, o.amount, o.memo, 'two_step', at, o.nodeId, o),
            );
        } else {
          page.settlements.push({
            instructionCid: o.instructionCid,
            end: o.outcome,
            ...(o.nextInstructionCid ? { nextInstructionCid: o.nextInstructionCid } : {}),
            updateId: tx.updateId,
            offset: tx.offset,
          });
          const w = byOffer.get(o.instructionCid);
          if (w) {
            const d = DELIVERY_OF[o.outcome] ?? { to: 'returned', outcome: 'failed' };
            deliveries.push({
              id: w,
              to: d.to,
              ...(d.outcome ? { outcome: d.outcome } : {}),
              ...(o.nextInstructionCid ? { next: o.nextInstructionCid } : {}),
              updateId: tx.updateId,
            });
          }
        }
      }
    }
    if (deliveries.length > 0)
      page.also = async (q) => {
        for (const d of deliveries)
          try {
            await store.withdrawals.deliver(
              d.id,
              ['offered'],
              d.to,
              {
                ...(d.outcome ? { outcome: d.outcome } : {}),
                ...(d.next ? { offerCid: d.next } : {}),
                updateId: d.updateId,
              },
              { actor: 'ingestion', tx: q },
            );
          } catch (e) {
            // Already moved (the delivery tracker was first): the same facts, nothing to do.
            if (!(e instanceof WithdrawalStateError)) throw e;
          }
      };
    return page;
  }

  function newDeposit(
    party: string,
    sender: string,
    instrument: { admin: string; id: string },
    amount: string,
    memo: string | undefined,
    kind: 'one_step' | 'two_step',
    at: { updateId: string; offset: number; recordTime: string },
    nodeId: number,
    offer?: Extract<OfferEvent, { op: 'created' }>,
  ): NewDeposit {
    const truncated = memo !== undefined && memo.length > maxMemo;
    const a = truncated ? undefined : opts.attribute(party, memo);
    return {
      id: randomUUID(),
      party,
      sender,
      instrument,
      amount,
      ...(memo !== undefined ? { memo: memo.slice(0, maxMemo) } : {}),
      memoTruncated: truncated,
      ...(a ? { account: a.account, attribution: a.by } : {}),
      kind,
      state: kind === 'one_step' ? 'credited' : 'pending',
      ...(offer ? { instructionCid: offer.instructionCid } : {}),
      ...(offer?.executeBefore ? { executeBefore: offer.executeBefore } : {}),
      ...at,
      nodeId,
    };
  }

  async function loop(): Promise<void> {
    let failures = 0;
    while (!stopped) {
      try {
        const l = await holdOrTake();
        if (!l) {
          await sleep(Math.max(pollMs, Math.floor(leaseMs / 3)));
          continue;
        }
        const n = await step(l);
        failures = 0;
        if (n === 0) await sleep(pollMs);
      } catch (e) {
        if (e instanceof LeaseExpiredError) {
          dropLease('another instance took it');
          continue;
        }
        failures++;
        log?.warn(
          { err: e instanceof Error ? e.message : String(e), failures },
          'ledger ingestion step failed',
        );
        await sleep(Math.min(30_000, pollMs * 2 ** Math.min(failures, 6)));
      }
    }
  }

  const access: IngestionAccess = {
    cursor: {
      read: (q) => store.ledger.cursor(q),
      moveTo: (q, offset) => store.ledger.moveCursor(q, offset),
      lastUpdate: (q) => store.ledger.lastUpdate(q),
    },
    ingested: {
      cursor: () => store.ledger.cursor(),
      holdings: (party) => store.ledger.holdings(party),
      holdingsAt: (party, offset) => store.ledger.holdingsAt(party, offset),
      firstRecordTimeAfter: (offset) => store.ledger.firstRecordTimeAfter(offset),
      movements: (party, after) => store.ledger.movements(party, after),
    },
  };

  return {
    access,
    start() {
      if (running) return;
      stopped = false;
      running = loop();
    },
    async stop() {
      stopped = true;
      wake?.();
      await running;
      running = undefined;
      clearInterval(renewer);
      renewer = undefined;
      if (lease) await store.leases.release(lease).catch(() => {});
      lease = undefined;
    },
    kick() {
      kicked = true;
      wake?.();
    },
    subscribe(fn) {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },
    async catchUp() {
      const l = await holdOrTake();
      if (!l) throw new Error('another instance holds the ingestion lease');
      let total = 0;
      for (;;) {
        const n = await step(l);
        if (n === 0) return total;
        total += n;
      }
    },
  };
}

/** Contracts created in `tx`. */
function createdIds(tx: JsTransaction): string[] {
  return (tx.events ?? []).flatMap((e) => {
    const c = (e as { CreatedEvent?: { contractId: string } }).CreatedEvent;
    return c ? [c.contractId] : [];
  });
}

/** Instructions consumed in `tx` (consuming exercises on a TransferInstruction). */
function consumedInstructions(tx: JsTransaction): string[] {
  const out: string[] = [];
  for (const e of tx.events ?? []) {
    const x = (
      e as { ExercisedEvent?: { consuming?: boolean; contractId: string; implementedInterfaces?: string[] } }
    ).ExercisedEvent;
    if (
      x?.consuming &&
      (x.implementedInterfaces ?? []).some((i) =>
        i.endsWith(':Splice.Api.Token.TransferInstructionV1:TransferInstruction'),
      )
    )
      out.push(x.contractId);
  }
  return out;
}

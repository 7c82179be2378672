/**
 * The Ledger API client's update readers against the sandbox: the WebSocket stream
 * (`updatesStream`: token as subprotocol, history then live updates, offset checkpoints, a bounded
 * request closing normally, abort, a JsCantonError and a refused token as CantonApiError, an
 * abnormal close) and the paged HTTP list (`updatesPaged`), which reads the same items.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { type AuthProvider, staticBearer } from '../../src/canton/auth.js';
import { CantonApiError } from '../../src/canton/errors.js';
import { LedgerApiClient, LedgerApiRequestError, updateOffset } from '../../src/canton/ledger-api/client.js';
import type { GetUpdatesRequest, Update } from '../../src/canton/ledger-api/schemas.js';
import { LEDGER_API_USER, VALIDATOR_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { addExternalParty, type TestParty } from '../support/sandbox-party.js';

let sb: RunningSandbox;
let client: LedgerApiClient;
let alice: TestParty;

beforeAll(async () => {
  sb = await startSandbox({
    seed: 'ledger-api-stream',
    timers: false,
    auth: { tokens: { 'user-token': LEDGER_API_USER, 'validator-token': VALIDATOR_USER } },
  });
  client = new LedgerApiClient({
    baseUrl: sb.urls.ledgerApi,
    auth: staticBearer('user-token'),
    retry: { baseDelayMs: 5, maxDelayMs: 20 },
  });
  alice = addExternalParty(sb.ctx.net, 'alice');
  sb.ctx.net.tap(alice.id, '10');
  sb.ctx.net.tap(alice.id, '20');
  // Last: something alice does not see, so her reads end with a checkpoint at the ledger end.
  sb.ctx.net.tap(sb.ctx.net.validatorParty, '1');
});
afterAll(async () => sb?.close());

const request = (party: string, begin: number, end?: number): GetUpdatesRequest => ({
  beginExclusive: begin,
  ...(end !== undefined ? { endInclusive: end } : {}),
  updateFormat: {
    includeTransactions: {
      eventFormat: { filtersByParty: { [party]: {} }, verbose: true },
      transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
    },
  },
});

const kindOf = (u: Update) => Object.keys(u)[0]!;
const ledgerEnd = () => sb.ctx.net.store.ledgerEnd();

/** The offsets of alice's taps (the creates of her amulets), from the sandbox's own log. */
function aliceOffsets(): number[] {
  return sb.ctx.net.store
    .updates(0)
    .filter((u) => u.events.some((e) => e.contract.stakeholders.includes(alice.id)))
    .map((u) => u.offset);
}

async function collect(it: AsyncIterable<Update>): Promise<Update[]> {
  const out: Update[] = [];
  for await (const u of it) out.push(u);
  return out;
}

/** Reads `it` until `pred` holds for an item; returns the items so far (the iterator stays open). */
async function until(it: AsyncIterator<Update>, pred: (u: Update) => boolean, ms = 5000): Promise<Update[]> {
  const out: Update[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`no such item within ${ms} ms; got ${JSON.stringify(out.map(kindOf))}`);
    const r = await Promise.race([
      it.next(),
      new Promise<'late'>((res) => setTimeout(() => res('late'), left)),
    ]);
    if (r === 'late') continue;
    if (r.done) throw new Error('the stream ended');
    out.push(r.value);
    if (pred(r.value)) return out;
  }
}

describe('updatesStream (WebSocket)', () => {
  it('a bounded read: alice’s transactions in offset order, a checkpoint at the end, then a normal end', async () => {
    const end = ledgerEnd();
    const items = await collect(client.updatesStream(request(alice.id, 0, end)));
    const txs = items.filter((u) => kindOf(u) === 'Transaction');
    expect(txs.map(updateOffset)).toEqual(aliceOffsets());
    for (const t of txs)
      expect(
        (t as { Transaction: { value: { events: unknown[] } } }).Transaction.value.events.length,
      ).toBeGreaterThan(0);
    const last = items[items.length - 1]!;
    expect(kindOf(last)).toBe('OffsetCheckpoint');
    const cp = (last as { OffsetCheckpoint: { value: { offset: number; synchronizerTimes: unknown[] } } })
      .OffsetCheckpoint.value;
    expect(cp.offset).toBe(end);
    expect(cp.synchronizerTimes).toEqual([
      { synchronizerId: sb.ctx.net.synchronizerId, recordTime: expect.stringMatching(/Z$/) },
    ]);
    const offsets = items.map(updateOffset);
    expect([...offsets].sort((a, b) => a - b)).toEqual(offsets);
  });

  it('open-ended: catches up with a checkpoint, then a live transaction arrives; abort ends it quietly', async () => {
    const ac = new AbortController();
    const it = client.updatesStream(request(alice.id, 0), { signal: ac.signal })[Symbol.asyncIterator]();
    const end = ledgerEnd();
    const history = await until(it, (u) => kindOf(u) === 'OffsetCheckpoint' && updateOffset(u) >= end);
    expect(history.filter((u) => kindOf(u) === 'Transaction').map(updateOffset)).toEqual(aliceOffsets());
    const tapped = sb.ctx.net.tap(alice.id, '3');
    const live = await until(it, (u) => kindOf(u) === 'Transaction');
    const tx = live[live.length - 1] as {
      Transaction: { value: { offset: number; events: { CreatedEvent?: { contractId: string } }[] } };
    };
    expect(tx.Transaction.value.offset).toBe(tapped.createdOffset);
    expect(tx.Transaction.value.events[0]!.CreatedEvent!.contractId).toBe(tapped.contractId);
    ac.abort();
    const after = await it.next();
    expect(after.done).toBe(true);
  });

  it('a read the user may not make: the JsCantonError the server sends, as CantonApiError', async () => {
    const err = await collect(client.updatesStream(request(sb.ctx.net.validatorParty, 0))).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CantonApiError);
    const e = err as CantonApiError;
    expect(e.code).toBe('PERMISSION_DENIED');
    expect(e.cantonError?.code).toBe('PERMISSION_DENIED');
    expect(e.retryable).toBe(false);
    expect(e.message).toContain('/v2/updates');
    expect(e.message).not.toContain('user-token');
  });

  it('a refused token: 401 after one fresh token was tried, never the token in the error', async () => {
    let invalidated = 0;
    const bad: AuthProvider = {
      authorization: async () => 'Bearer not-a-token',
      invalidate: () => {
        invalidated++;
      },
    };
    const c = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, auth: bad });
    const err = await collect(c.updatesStream(request(alice.id, 0, ledgerEnd()))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CantonApiError);
    expect((err as CantonApiError).status).toBe(401);
    expect(invalidated).toBe(1);
    expect(String((err as Error).message)).not.toContain('not-a-token');
  });

  it('an invalid request is refused before connecting', () => {
    expect(() => client.updatesStream({ ...request(alice.id, 0), beginExclusive: -1 })).toThrow(
      LedgerApiRequestError,
    );
  });

  it('an abnormal close (no error message) ends the iteration with a retryable STREAM_CLOSED', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    wss.on('connection', (socket) =>
      socket.once('message', () => {
        socket.send(
          JSON.stringify({ update: { OffsetCheckpoint: { value: { offset: 7, synchronizerTimes: [] } } } }),
        );
        socket.close(1011, 'going away');
      }),
    );
    await new Promise((r) => wss.once('listening', r));
    try {
      const { port } = wss.address() as AddressInfo;
      const c = new LedgerApiClient({ baseUrl: `http://127.0.0.1:${port}` });
      const seen: Update[] = [];
      const err = await (async () => {
        for await (const u of c.updatesStream(request(alice.id, 0))) seen.push(u);
      })().catch((e: unknown) => e);
      expect(seen.map(updateOffset)).toEqual([7]);
      expect(err).toBeInstanceOf(CantonApiError);
      expect((err as CantonApiError).code).toBe('STREAM_CLOSED');
      expect((err as CantonApiError).retryable).toBe(true);
      expect((err as CantonApiError).detail).toBe('going away');
    } finally {
      await new Promise((r) => wss.close(r));
    }
  });
});

describe('updatesPaged (HTTP list, page by page)', () => {
  it('reads what the stream reads, one item a page, up to the ledger end as of the call', async () => {
    const end = ledgerEnd();
    const streamed = await collect(client.updatesStream(request(alice.id, 0, end)));
    const paged = await collect(client.updatesPaged(request(alice.id, 0), { limit: 1 }));
    expect(paged.map((u) => [kindOf(u), updateOffset(u)])).toEqual(
      streamed.map((u) => [kindOf(u), updateOffset(u)]),
    );
    expect(updateOffset(paged[paged.length - 1]!)).toBe(end);
    // From the middle: only what comes after.
    const first = aliceOffsets()[0]!;
    const rest = await collect(client.updatesPaged(request(alice.id, first), { limit: 2 }));
    expect(rest.every((u) => updateOffset(u) > first)).toBe(true);
    expect(rest.filter((u) => kindOf(u) === 'Transaction').map(updateOffset)).toEqual(
      aliceOffsets().filter((o) => o > first),
    );
  });
});

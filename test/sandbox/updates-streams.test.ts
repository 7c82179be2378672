/**
 * The sandbox participant's update reads: the HTTP lists (3.5 `/v2/updates`
 * with `updateFormat` or the legacy `filter`, the legacy flat and tree lists)
 * closed by an offset checkpoint, the single-transaction and single-update
 * lookups by id and offset (shapes checked against both published specs,
 * unknown ones a 404 with Canton's error id), and the WebSocket streams the
 * SDK opens: the token as a subprotocol, the request as the first message,
 * live updates and completions, refusal of a bad token, and shutdown closing
 * open streams at once.
 */
import { generateKeyPairSync, type KeyObject, randomUUID, sign } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import { fingerprint } from '../../src/hashing/canton-hash.js';
import { bytesToBase64 } from '../../src/hashing/input.js';
import { hashPreparedTransaction } from '../../src/hashing/transaction-hash.js';
import { LEDGER_API_USER, VALIDATOR_USER } from '../../src/sandbox/network.js';
import { type Producer, serveStream } from '../../src/sandbox/participant/streams.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { loadSpec, SPECS_DIR, validateAgainst } from '../support/openapi.js';

const specs = ['3.4.12', '3.5.1'].map((v) => ({
  v,
  spec: loadSpec(join(SPECS_DIR, `canton-ledger-api/openapi-${v}.yaml`)),
}));

/** Problems of `value` as `component` in either published spec, prefixed by the version. */
function shapeProblems(component: string, value: unknown): string[] {
  return specs.flatMap(({ v, spec }) => validateAgainst(spec, component, value).map((p) => `${v}: ${p}`));
}

const TOKENS = { 'user-token': LEDGER_API_USER, 'validator-token': VALIDATOR_USER };

let sb: RunningSandbox;
let closed = false;
let client: LedgerApiClient;
let alice: { id: string; key: KeyObject; fp: string };
/** Alice's committed proposal. */
let committed: { updateId: string; offset: number };

// biome-ignore lint/suspicious/noExplicitAny: plain JSON navigation over the answers
type Json = Record<string, any>;
// biome-ignore lint/suspicious/noExplicitAny: a list or an object, navigated as plain JSON
type Body = any;

async function post(path: string, body: unknown): Promise<{ status: number; body: Body }> {
  const r = await fetch(`${sb.urls.ledgerApi}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  return {
    status: r.status,
    body: text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : { text },
  };
}

async function get(path: string): Promise<{ status: number; body: Body }> {
  const r = await fetch(`${sb.urls.ledgerApi}${path}`);
  return { status: r.status, body: await r.json() };
}

const ledgerEnd = () => sb.ctx.net.store.ledgerEnd();

/** Alice proposes a transfer preapproval: prepare, sign, execute; the completion comes with it. */
async function propose(submissionId = randomUUID()) {
  const prep = await client.prepare({
    userId: LEDGER_API_USER,
    commandId: randomUUID(),
    actAs: [alice.id],
    synchronizerId: sb.ctx.net.synchronizerId,
    commands: [
      {
        CreateCommand: {
          templateId: '#splice-wallet:Splice.Wallet.TransferPreapproval:TransferPreapprovalProposal',
          createArguments: {
            receiver: alice.id,
            provider: sb.ctx.net.validatorParty,
            expectedDso: sb.ctx.net.dso,
          },
        },
      },
    ],
  });
  const hash = hashPreparedTransaction(prep.preparedTransaction, { scheme: 'v2' });
  return client.executeAndWait({
    preparedTransaction: prep.preparedTransaction,
    partySignatures: {
      signatures: [
        {
          party: alice.id,
          signatures: [
            {
              format: 'SIGNATURE_FORMAT_CONCAT',
              signature: bytesToBase64(sign(null, hash, alice.key)),
              signedBy: alice.fp,
              signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519',
            },
          ],
        },
      ],
    },
    hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
    submissionId,
    userId: LEDGER_API_USER,
    deduplicationPeriod: { Empty: {} },
  });
}

const tap = (party: string) =>
  fetch(`${sb.urls.origin}/sandbox/tap`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ party, amount: '5' }),
  }).then(async (r) => (await r.json()) as { contractId: string });

/** A WebSocket stream as the SDK opens it, with its messages queued for the test. */
function openStream(path: string, token: string, request: unknown) {
  const ws = new WebSocket(`${sb.urls.origin.replace('http', 'ws')}${path}`, [
    `jwt.token.${token}`,
    'daml.ws.auth',
  ]);
  const messages: Json[] = [];
  let wake: (() => void) | undefined;
  ws.on('open', () => ws.send(JSON.stringify(request)));
  ws.on('message', (d) => {
    messages.push(JSON.parse(String(d)));
    wake?.();
  });
  const closedAt = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  const opened = new Promise<void>((resolve, reject) => {
    ws.on('open', () => resolve());
    ws.on('unexpected-response', (req, res) => {
      req.destroy();
      reject(new Error(`HTTP ${res.statusCode}`));
    });
    ws.on('error', reject);
  });
  /** The first message (from `from` on) that satisfies `pred`, waiting up to `ms`. */
  async function next(pred: (m: Json) => boolean, ms = 3000, from = 0): Promise<Json> {
    const deadline = Date.now() + ms;
    for (;;) {
      const hit = messages.slice(from).find(pred);
      if (hit) return hit;
      if (Date.now() > deadline) throw new Error(`no such message; got ${JSON.stringify(messages)}`);
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, 50);
      });
    }
  }
  return { ws, messages, next, closedAt, opened };
}

beforeAll(async () => {
  sb = await startSandbox({
    seed: 'updates-streams',
    timers: false,
    // OAuth tokens of this sandbox live one second (the expiry test).
    auth: {
      tokens: TOKENS,
      clients: { brief: { secret: 'brief-secret', userId: LEDGER_API_USER } },
      tokenTtlSeconds: 1,
    },
  });
  client = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { baseDelayMs: 5, maxDelayMs: 20 } });
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const spki = new Uint8Array(publicKey.export({ type: 'spki', format: 'der' }));
  const fp = fingerprint(spki);
  const id = `alice::${fp}`;
  sb.ctx.net.parties.set(id, {
    partyId: id,
    namespace: fp,
    keys: [{ fingerprint: fp, scheme: 'ed25519', spki }],
    threshold: 1,
    hosting: [{ participantUid: sb.ctx.net.participantUid, permission: 'confirmation' }],
    via: 'ledger-api',
  });
  sb.ctx.net.users.get(LEDGER_API_USER)!.actAs.add(id);
  alice = { id, key: privateKey, fp };
  const res = await propose();
  committed = { updateId: res.updateId, offset: res.completionOffset };
  // Something after it that alice does not see: her reads end with a checkpoint past it.
  await tap(sb.ctx.net.validatorParty);
});
afterAll(async () => {
  if (!closed) await sb?.close();
});

const aliceFilter = () => ({ filtersByParty: { [alice.id]: {} } });
const txOf = (items: Json[]) =>
  items.filter((i) => i.update?.Transaction).map((i) => i.update.Transaction.value);

describe('HTTP update lists', () => {
  it('/v2/updates: updateFormat and the legacy filter give the same transactions; the page ends with a checkpoint at the ledger end', async () => {
    const begin = committed.offset - 1;
    const modern = await post('/v2/updates?stream_idle_timeout_ms=10', {
      beginExclusive: begin,
      updateFormat: {
        includeTransactions: { eventFormat: aliceFilter(), transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA' },
      },
      verbose: false,
    });
    const legacy = await post('/v2/updates?stream_idle_timeout_ms=10', {
      beginExclusive: begin,
      filter: aliceFilter(),
      verbose: true,
    });
    expect([modern.status, legacy.status]).toEqual([200, 200]);
    for (const item of [...modern.body, ...legacy.body])
      expect(shapeProblems('JsGetUpdatesResponse', item)).toEqual([]);
    const txs = txOf(modern.body);
    expect(txs[0].updateId).toBe(committed.updateId);
    expect(JSON.stringify(txs[0].events)).toContain('TransferPreapprovalProposal');
    expect(txOf(legacy.body).map((t) => t.updateId)).toEqual(txs.map((t) => t.updateId));
    const cp = modern.body.at(-1).update.OffsetCheckpoint.value;
    expect(cp.offset).toBe(ledgerEnd());
    expect(cp.offset).toBeGreaterThan(txs.at(-1).offset);
    expect(cp.synchronizerTimes).toEqual([
      { synchronizerId: sb.ctx.net.synchronizerId, recordTime: expect.stringMatching(/^\d{4}-.*Z$/) },
    ]);
    // Both forms at once, or neither: INVALID_ARGUMENT.
    const both = await post('/v2/updates', {
      beginExclusive: begin,
      filter: aliceFilter(),
      updateFormat: {
        includeTransactions: { eventFormat: aliceFilter(), transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA' },
      },
    });
    expect([both.status, both.body.code]).toEqual([400, 'INVALID_ARGUMENT']);
    const neither = await post('/v2/updates', { beginExclusive: begin });
    expect([neither.status, neither.body.code]).toEqual([400, 'INVALID_ARGUMENT']);
  });

  it('flats (ACS delta) and trees (ledger effects, events by node id) in the legacy form', async () => {
    const req = {
      beginExclusive: committed.offset - 1,
      endInclusive: committed.offset,
      filter: aliceFilter(),
      verbose: false,
    };
    const flats = await post('/v2/updates/flats', req);
    const trees = await post('/v2/updates/trees', req);
    expect([flats.status, trees.status]).toEqual([200, 200]);
    for (const item of flats.body) expect(shapeProblems('JsGetUpdatesResponse', item)).toEqual([]);
    for (const item of trees.body) expect(shapeProblems('JsGetUpdateTreesResponse', item)).toEqual([]);
    const flat = txOf(flats.body)[0];
    expect(flat.events.map((e: Json) => Object.keys(e)[0])).toEqual(['CreatedEvent']);
    const tree = trees.body[0].update.TransactionTree.value;
    expect(tree.updateId).toBe(committed.updateId);
    const events = Object.entries(tree.eventsById as Record<string, Json>);
    expect(events.length).toBeGreaterThan(0);
    for (const [nodeId, ev] of events) {
      const inner = (ev.CreatedTreeEvent ?? ev.ExercisedTreeEvent).value;
      expect(inner.nodeId).toBe(Number(nodeId));
    }
    // Bounded at the transaction itself: nothing left to checkpoint.
    expect(flats.body).toHaveLength(1);
    // The SDK's flats request: updateFormat with the ledger-effects shape.
    const sdk = await post('/v2/updates/flats', {
      beginExclusive: committed.offset - 1,
      endInclusive: ledgerEnd(),
      updateFormat: {
        includeTransactions: {
          eventFormat: aliceFilter(),
          transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
        },
      },
      verbose: false,
    });
    expect(txOf(sdk.body)[0].updateId).toBe(committed.updateId);
    expect(sdk.body.at(-1).update.OffsetCheckpoint.value.offset).toBe(ledgerEnd());
  });
});

describe('single transactions and updates', () => {
  it('by id and by offset, in both request forms; unknown ones are 404 with Canton error ids', async () => {
    const format = { eventFormat: aliceFilter(), transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA' };
    const byId = await post('/v2/updates/transaction-by-id', {
      updateId: committed.updateId,
      requestingParties: [alice.id],
    });
    const byIdFormat = await post('/v2/updates/transaction-by-id', {
      updateId: committed.updateId,
      transactionFormat: format,
    });
    const byOffset = await post('/v2/updates/transaction-by-offset', {
      offset: committed.offset,
      requestingParties: [alice.id],
    });
    for (const r of [byId, byIdFormat, byOffset]) {
      expect(r.status).toBe(200);
      expect(shapeProblems('JsGetTransactionResponse', r.body)).toEqual([]);
      expect([r.body.transaction.updateId, r.body.transaction.offset]).toEqual([
        committed.updateId,
        committed.offset,
      ]);
    }
    const treeById = await get(
      `/v2/updates/transaction-tree-by-id/${committed.updateId}?parties=${encodeURIComponent(alice.id)}`,
    );
    const treeByOffset = await get(
      `/v2/updates/transaction-tree-by-offset/${committed.offset}?parties=${encodeURIComponent(alice.id)}`,
    );
    for (const r of [treeById, treeByOffset]) {
      expect(r.status).toBe(200);
      expect(shapeProblems('JsGetTransactionTreeResponse', r.body)).toEqual([]);
      expect(r.body.transaction.updateId).toBe(committed.updateId);
    }
    const update = await post('/v2/updates/update-by-id', {
      updateId: committed.updateId,
      updateFormat: { includeTransactions: format },
    });
    expect(update.status).toBe(200);
    expect(shapeProblems('JsGetUpdateResponse', update.body)).toEqual([]);
    expect(update.body.update.Transaction.value.offset).toBe(committed.offset);

    const unknownId = `1220${'ab'.repeat(32)}`;
    const missing = [
      [
        await post('/v2/updates/transaction-by-id', { updateId: unknownId, requestingParties: [alice.id] }),
        'TRANSACTION_NOT_FOUND',
      ],
      [
        await post('/v2/updates/transaction-by-offset', {
          offset: ledgerEnd() + 5,
          requestingParties: [alice.id],
        }),
        'TRANSACTION_NOT_FOUND',
      ],
      [
        await get(`/v2/updates/transaction-tree-by-id/${unknownId}?parties=${encodeURIComponent(alice.id)}`),
        'TRANSACTION_NOT_FOUND',
      ],
      [
        await post('/v2/updates/update-by-id', {
          updateId: unknownId,
          updateFormat: { includeTransactions: format },
        }),
        'UPDATE_NOT_FOUND',
      ],
      // Known, but the tap is not alice's to see.
      [
        await post('/v2/updates/transaction-by-offset', {
          offset: ledgerEnd(),
          requestingParties: [alice.id],
        }),
        'TRANSACTION_NOT_FOUND',
      ],
    ] as const;
    for (const [r, code] of missing) {
      expect([r.status, r.body.code]).toEqual([404, code]);
      expect(shapeProblems('JsCantonError', r.body)).toEqual([]);
    }
  });
});

describe('pages of updates (3.5 get-updates-page)', () => {
  it('pages ascending and descending with tokens, tails the ledger without an end, refuses a token of another request', async () => {
    // Three updates alice sees, beyond the one committed at the start.
    for (let i = 0; i < 3; i++) await propose();
    const updateFormat = {
      includeTransactions: {
        eventFormat: { filtersByParty: { [alice.id]: {} }, verbose: false },
        transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
      },
    };
    const seen = (page: Json) =>
      (page.updates as Json[]).map((u) => u.update.Transaction.value.offset as number);
    const mine = sb.ctx.net.store
      .updates(0, ledgerEnd())
      .filter((u) => u.events.some((e) => e.contract.stakeholders.includes(alice.id)))
      .map((u) => u.offset);
    expect(mine.length).toBeGreaterThanOrEqual(4);

    const up: number[] = [];
    let token = '';
    let pages = 0;
    for (; pages < 10; pages++) {
      const r = await post('/v2/updates/get-updates-page', {
        updateFormat,
        maxPageSize: 2,
        endOffsetInclusive: ledgerEnd(),
        pageToken: token,
      });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      // A 3.5 endpoint: only the 3.5.1 document has its shape.
      expect(validateAgainst(specs[1]!.spec, 'JsGetUpdatesPageResponse', r.body)).toEqual([]);
      up.push(...seen(r.body));
      token = r.body.nextPageToken ?? '';
      if (token === '') break;
    }
    expect(up).toEqual(mine);

    const down: number[] = [];
    token = '';
    for (let i = 0; i < 10; i++) {
      const r = await post('/v2/updates/get-updates-page', {
        updateFormat,
        maxPageSize: 3,
        descendingOrder: true,
        pageToken: token,
      });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      down.push(...seen(r.body));
      token = r.body.nextPageToken ?? '';
      if (token === '') break;
    }
    expect(down).toEqual([...mine].reverse());

    // Without an end, the last page still has a token: the next update is read from it.
    const tail = await post('/v2/updates/get-updates-page', { updateFormat, maxPageSize: 100 });
    expect(seen(tail.body)).toEqual(mine);
    expect(tail.body.nextPageToken).not.toBe('');
    await propose();
    const next = await post('/v2/updates/get-updates-page', {
      updateFormat,
      maxPageSize: 100,
      pageToken: tail.body.nextPageToken,
    });
    const fresh = sb.ctx.net.store
      .updates(mine.at(-1)!, ledgerEnd())
      .filter((u) => u.events.some((e) => e.contract.stakeholders.includes(alice.id)))
      .map((u) => u.offset);
    expect(fresh.length).toBeGreaterThan(0);
    expect(seen(next.body)).toEqual(fresh);

    const other = await post('/v2/updates/get-updates-page', {
      updateFormat,
      beginOffsetExclusive: 1,
      pageToken: tail.body.nextPageToken,
    });
    expect(other.status).toBe(400);
    expect(other.body.cause).toMatch(/pageToken does not belong to this request/);
  });
});

describe('WebSocket streams', () => {
  it('updates: the SDK request form, the auth subprotocol answered, a live update after subscribing, a bounded stream closes normally', async () => {
    const validator = sb.ctx.net.validatorParty;
    const begin = ledgerEnd();
    const s = openStream('/v2/updates', 'validator-token', {
      beginExclusive: begin,
      verbose: true,
      filter: {
        filtersByParty: {
          [validator]: {
            cumulative: [
              { identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: true } } } },
            ],
          },
        },
      },
    });
    await s.opened;
    expect(s.ws.protocol).toBe('daml.ws.auth');
    const { contractId } = await tap(validator);
    const msg = await s.next((m) => m.update?.Transaction !== undefined);
    expect(shapeProblems('JsGetUpdatesResponse', msg)).toEqual([]);
    const tx = msg.update.Transaction.value;
    expect(tx.offset).toBe(begin + 1);
    expect(tx.events[0].CreatedEvent.contractId).toBe(contractId);
    expect(tx.events[0].CreatedEvent.createdEventBlob).toEqual(expect.any(String));
    s.ws.close();
    expect((await s.closedAt).code).toBe(1005);

    // Bounded: from before alice's transaction to the ledger end, as trees; then a normal close.
    const t = openStream('//v2/updates/trees', 'user-token', {
      beginExclusive: committed.offset - 1,
      endInclusive: ledgerEnd(),
      filter: aliceFilter(),
      verbose: false,
    });
    expect((await t.closedAt).code).toBe(1000);
    expect(t.messages[0]!.update.TransactionTree.value.updateId).toBe(committed.updateId);
    expect(t.messages.at(-1)!.update.OffsetCheckpoint.value.offset).toBe(ledgerEnd());
    for (const m of t.messages) expect(shapeProblems('JsGetUpdateTreesResponse', m)).toEqual([]);
  });

  it('completions: a completion committed after subscribing arrives; a request error is a JsCantonError message, then a close', async () => {
    const s = openStream('/v2/commands/completions', 'user-token', {
      beginExclusive: ledgerEnd(),
      userId: LEDGER_API_USER,
      parties: [alice.id],
    });
    await s.opened;
    const submissionId = randomUUID();
    const res = await propose(submissionId);
    const msg = await s.next((m) => m.completionResponse?.Completion !== undefined);
    expect(shapeProblems('CompletionStreamResponse', msg)).toEqual([]);
    const c = msg.completionResponse.Completion.value;
    expect([c.submissionId, c.updateId, c.offset, c.status.code]).toEqual([
      submissionId,
      res.updateId,
      res.completionOffset,
      0,
    ]);
    s.ws.close();

    // Reading as a party the user may not read as: PERMISSION_DENIED as a message, then the close.
    const denied = openStream('/v2/commands/completions', 'user-token', {
      beginExclusive: 0,
      userId: LEDGER_API_USER,
      parties: [sb.ctx.net.validatorParty],
    });
    expect((await denied.closedAt).code).toBe(1011);
    expect(denied.messages).toHaveLength(1);
    expect(denied.messages[0]!.code).toBe('PERMISSION_DENIED');
    expect(shapeProblems('JsCantonError', denied.messages[0])).toEqual([]);
  });

  it('one message in flight per socket: the producer waits until each send has left', async () => {
    // A socket whose sends complete only when the test says so (a reader that does not read).
    const sent: string[] = [];
    const pending: (() => void)[] = [];
    const socket = Object.assign(new EventEmitter(), {
      OPEN: 1,
      readyState: 1,
      send: (data: string, cb: () => void) => {
        sent.push(data);
        pending.push(cb);
      },
      close: () => {
        socket.readyState = 3;
        socket.emit('close');
      },
    });
    let produced = 0;
    const produce: Producer = async function* () {
      for (let i = 0; i < 1000; i++) {
        produced++;
        yield { i };
      }
    };
    const settle = () => new Promise((r) => setTimeout(r, 10));
    serveStream(
      socket as never,
      { log: { error: () => undefined } } as never,
      produce,
      new AbortController().signal,
    );
    socket.emit('message', Buffer.from('{}'));
    await settle();
    expect([produced, sent.length]).toEqual([1, 1]);
    pending.shift()!();
    await settle();
    expect([produced, sent]).toEqual([2, ['{"i":0}', '{"i":1}']]);
    // The reader leaves: nothing more is produced or sent.
    socket.close();
    pending.shift()!();
    await settle();
    expect([produced, sent.length]).toEqual([2, 2]);
  });

  it('a following stream ends when the user loses the read right, or when its token expires', async () => {
    const user = sb.ctx.net.users.get(LEDGER_API_USER)!;
    // From just before the last offset: a first message (an update or a checkpoint) says the stream is on.
    const revoked = openStream('/v2/updates', 'user-token', {
      beginExclusive: ledgerEnd() - 1,
      filter: aliceFilter(),
    });
    await revoked.next(() => true);
    user.actAs.delete(alice.id);
    try {
      await tap(sb.ctx.net.validatorParty); // the ledger moves: the stream looks again
      expect((await revoked.closedAt).code).toBe(1011);
      expect(revoked.messages.at(-1)!.code).toBe('STALE_STREAM_AUTHORIZATION');
    } finally {
      user.actAs.add(alice.id);
    }

    const issued = await fetch(sb.urls.oauthToken, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=brief&client_secret=brief-secret',
    }).then(async (r) => (await r.json()) as { access_token: string });
    const expiring = openStream('/v2/updates', issued.access_token, {
      beginExclusive: ledgerEnd() - 1,
      filter: aliceFilter(),
    });
    await expiring.next(() => true);
    await new Promise((r) => setTimeout(r, 1100));
    await tap(sb.ctx.net.validatorParty);
    expect((await expiring.closedAt).code).toBe(1011);
    expect(expiring.messages.at(-1)).toMatchObject({ code: 'ACCESS_TOKEN_EXPIRED', errorCategory: 6 });
    expect(JSON.stringify(expiring.messages)).not.toContain(issued.access_token);
  });

  it('a bad token, or a status fault on the stream, is refused before the upgrade', async () => {
    const s = openStream('/v2/updates', 'not-a-token', { beginExclusive: 0, filter: aliceFilter() });
    await expect(s.opened).rejects.toThrow('HTTP 401');
    const fault = await fetch(`${sb.urls.origin}/sandbox/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        fault: { kind: 'status', status: 503, retryAfterMs: 1000 },
        operation: 'ledger-api.updatesStream',
        times: 1,
      }),
    });
    expect(fault.status).toBe(200);
    const down = openStream('/v2/updates', 'user-token', { beginExclusive: 0, filter: aliceFilter() });
    await expect(down.opened).rejects.toThrow('HTTP 503');
  });

  it("the sandbox's close() ends open streams at once", async () => {
    const s = openStream('/v2/updates', 'user-token', { beginExclusive: ledgerEnd(), filter: aliceFilter() });
    await s.opened;
    await s.next((m) => m !== undefined, 300).catch(() => undefined);
    const t0 = Date.now();
    closed = true;
    await sb.close();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect((await s.closedAt).code).toBe(1001);
  });
});

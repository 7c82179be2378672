/**
 * The webhook deliverer against real HTTP receivers (node:http), on both
 * drivers: each event delivered once, signed; a receiver down (connection
 * refused), then answering 500, then 200 gets every event (no gap in seq
 * once deduplicated by id); 410 is dead at once; a failing delivery is dead
 * once the horizon passed, and redelivered on request; a receiver that
 * never answers does not hold up another; only subscribed types are sent;
 * and on PostgreSQL two deliverers sharing the database do not both send an
 * event.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseSecret, verifyWebhook } from '../../src/events/signature.js';
import { createWebhookDeliverer, type WebhookDeliverer } from '../../src/events/webhooks.js';
import type { Db } from '../../src/store/db.js';
import { type Store, storeOn } from '../../src/store/index.js';
import { storeDrivers } from '../support/pg.js';
import { type Received, type TestReceiver, testReceiver, until } from '../support/webhook-receiver.js';

const drivers = await storeDrivers();

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const FAST = { horizonMs: 60_000, initialMs: 40, maxIntervalMs: 150 };

const seqs = (got: Received[]) => got.map((r) => (JSON.parse(r.body) as { seq: number }).seq);
/** Each event once (deduplicated by id, as a receiver does), by seq. */
const deduped = (got: Received[]) =>
  [...new Map(got.map((r) => [r.headers['webhook-id'], JSON.parse(r.body) as { seq: number }])).values()]
    .map((b) => b.seq)
    .sort((a, b) => a - b);

describe.each(drivers)('webhook deliverer on $name', (driver) => {
  let db: Db;
  let store: Store;
  const running: WebhookDeliverer[] = [];
  const receivers: TestReceiver[] = [];

  async function deliverer(
    rx: { name: string; url: string; events?: string[]; timeoutMs?: number }[],
    opts: { retry?: typeof FAST; repoStore?: Store } = {},
  ): Promise<WebhookDeliverer> {
    const d = createWebhookDeliverer({
      repo: (opts.repoStore ?? store).webhooks,
      receivers: rx.map((r) => ({
        name: r.name,
        url: r.url,
        events: r.events ?? ['*'],
        secrets: [parseSecret(SECRET)],
        timeoutMs: r.timeoutMs ?? 2000,
      })),
      retry: opts.retry ?? FAST,
      concurrency: 4,
      pollMs: 200,
      random: () => 0.5,
    });
    running.push(d);
    await d.start();
    return d;
  }

  async function receiver(o: Parameters<typeof testReceiver>[0] = {}) {
    const r = await testReceiver(o);
    receivers.push(r);
    return r;
  }

  const append = (n: number, type = 'deposit.credited') =>
    store.events.append(
      Array.from({ length: n }, (_, i) => ({ type, subject: `deposit:d${i}`, data: { amount: `${i}.5` } })),
    );

  const delivery = (name: string, seq: number) => store.webhooks.get(name, seq);

  afterEach(async () => {
    for (const d of running.splice(0)) await d.stop();
    for (const r of receivers.splice(0)) await r.close().catch(() => {});
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('delivers each event once, in seq order, signed, with the event as the body', async () => {
    db = await driver.fresh();
    store = storeOn(db, 'test');
    const rx = await receiver();
    await deliverer([{ name: 'once', url: rx.url }]);
    const events = await append(3);
    const last = events.at(-1)!.seq;
    await until(async () => (await delivery('once', last))?.state === 'delivered', 'the last delivery');
    await until(
      async () => (await store.webhooks.list({ receiver: 'once', state: 'pending' })).items.length === 0,
      'none pending',
    );
    expect(seqs(rx.got)).toEqual(events.map((e) => e.seq));
    for (const [i, r] of rx.got.entries()) {
      const e = events[i]!;
      expect(verifyWebhook([SECRET], r.headers as Record<string, string>, r.body)).toBe(e.id);
      expect(JSON.parse(r.body)).toEqual({
        id: e.id,
        seq: e.seq,
        type: 'deposit.credited',
        subject: e.subject,
        createdAt: e.createdAt,
        data: e.data,
      });
      expect(r.headers['x-canton-signer-event-seq']).toBe(String(e.seq));
      expect(r.headers['x-canton-signer-event-type']).toBe('deposit.credited');
      expect(r.headers['content-type']).toBe('application/json');
    }
    const d = await delivery('once', events[0]!.seq);
    expect(d).toMatchObject({ state: 'delivered', attempts: 1, lastStatus: 200, eventId: events[0]!.id });
    // A poll later, still once each.
    await new Promise((r) => setTimeout(r, 300));
    expect(rx.got).toHaveLength(3);
  });

  it('only sends the types a receiver subscribes to', async () => {
    const rx = await receiver();
    await deliverer([{ name: 'typed', url: rx.url, events: ['withdrawal.committed', 'approval.*'] }]);
    const a = await append(2, 'deposit.credited');
    const b = await append(1, 'withdrawal.committed');
    const c = await append(1, 'approval.required');
    const d = await append(1, 'withdrawal.failed');
    await until(
      async () => (await store.webhooks.status()).find((r) => r.name === 'typed')!.afterSeq >= d[0]!.seq,
      'the cursor past the last',
    );
    await until(
      async () => (await delivery('typed', c[0]!.seq))?.state === 'delivered',
      'the approval event',
    );
    expect(seqs(rx.got)).toEqual([b[0]!.seq, c[0]!.seq]);
    expect(await delivery('typed', a[0]!.seq)).toBeUndefined();
  });

  it('a receiver down, then failing, then up gets every event: no gap once deduplicated', async () => {
    const rx = await receiver();
    await rx.close(); // connection refused
    await deliverer([{ name: 'flaky', url: rx.url }]);
    const events = await append(5);
    const first = events[0]!.seq;
    await until(async () => ((await delivery('flaky', first))?.attempts ?? 0) >= 2, 'two refused attempts');
    const refused = await delivery('flaky', first);
    expect(refused).toMatchObject({ state: 'pending' });
    expect(refused?.lastError).toMatch(/^connection failed \(ECONNREFUSED\)$/);
    // Up again: the first two requests answer 500, then 200.
    rx.respond = (_r, n) => (n <= 2 ? 500 : 200);
    await rx.reopen();
    await until(
      async () => (await store.webhooks.list({ receiver: 'flaky', state: 'delivered' })).items.length === 5,
      'all five delivered',
    );
    expect(deduped(rx.got)).toEqual(events.map((e) => e.seq));
    for (const r of rx.got)
      expect(verifyWebhook([SECRET], r.headers as Record<string, string>, r.body)).toBeTruthy();
    const failedThenOk = (await store.webhooks.list({ receiver: 'flaky' })).items.find((d) => d.attempts > 2);
    expect(failedThenOk).toMatchObject({ state: 'delivered', lastStatus: 200 });
  });

  it('410 Gone: dead at once; past the horizon: dead; a redeliver sends it again', async () => {
    const gone = await receiver({ respond: () => 410 });
    const failing = await receiver({ respond: () => 503 });
    await deliverer(
      [
        { name: 'gone', url: gone.url },
        { name: 'failing', url: failing.url },
      ],
      { retry: { horizonMs: 800, initialMs: 40, maxIntervalMs: 100 } },
    );
    const [e] = await append(1);
    const seq = e!.seq;
    await until(async () => (await delivery('gone', seq))?.state === 'dead', 'the 410 dead');
    expect(await delivery('gone', seq)).toMatchObject({ state: 'dead', attempts: 1, lastStatus: 410 });
    expect(gone.got).toHaveLength(1);
    await until(
      async () => (await delivery('failing', seq))?.state === 'dead',
      'the 503 dead after the horizon',
    );
    const dead = await delivery('failing', seq);
    // The first attempt, retries, and the last one at the horizon.
    expect(dead?.attempts).toBeGreaterThanOrEqual(2);
    expect(dead).toMatchObject({ lastStatus: 503, lastError: 'HTTP 503' });
    expect(failing.got).toHaveLength(dead!.attempts);
    expect((await store.webhooks.list({ state: 'dead' })).items.map((d) => d.receiver).sort()).toEqual([
      'failing',
      'gone',
    ]);
    // Fixed: redelivered, it arrives.
    failing.respond = () => 204;
    const again = await store.webhooks.redeliver('failing', seq, 'ops');
    expect(again).toMatchObject({ state: 'pending', attempts: 0 });
    running[0]!.kick();
    await until(async () => (await delivery('failing', seq))?.state === 'delivered', 'the redelivery');
    expect(await delivery('failing', seq)).toMatchObject({ attempts: 1, lastStatus: 204 });
    const audit = await db.query<{ action: string; subject: string; details: { seq: number } }>(
      `SELECT action, subject, details FROM audit_log WHERE action = 'webhook.redeliver'`,
    );
    expect(audit.rows.map((r) => [r.subject, r.details.seq])).toEqual([['webhook:failing', seq]]);
  });

  it('a receiver that never answers does not hold up another', async () => {
    const stuck = await receiver({ respond: () => 'hang' });
    const fine = await receiver();
    await deliverer([
      { name: 'stuck', url: stuck.url, timeoutMs: 1500 },
      { name: 'fine', url: fine.url },
    ]);
    const events = await append(3);
    const t0 = Date.now();
    await until(() => fine.got.length === 3, 'the fine receiver');
    // All three reached the fine receiver while the stuck one still waits on its first request.
    expect(Date.now() - t0).toBeLessThan(1500);
    // Its first request may reach it after the fine one's three on a loaded machine; never a second.
    await until(() => stuck.got.length >= 1, 'the stuck receiver’s first request');
    expect(stuck.got).toHaveLength(1);
    expect(seqs(fine.got)).toEqual(events.map((e) => e.seq));
    await until(async () => (await delivery('stuck', events[0]!.seq))?.lastError, 'the timeout recorded');
    expect((await delivery('stuck', events[0]!.seq))?.lastError).toBe('no answer within 1500 ms');
  });

  it('a receiver that never answers times out also while the garbage collector runs', async () => {
    // A timeout signal held only by AbortSignal.any() is collected and never fires; force collections.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const stuck = await receiver({ respond: () => 'hang' });
    await deliverer([{ name: 'gc-stuck', url: stuck.url, timeoutMs: 300 }]);
    const [event] = await append(1);
    const collecting = setInterval(() => {
      gc();
      Array.from({ length: 50_000 }, (_, i) => ({ i }));
    }, 50);
    try {
      await until(
        async () => (await delivery('gc-stuck', event!.seq))?.lastError,
        'the timeout recorded',
        5000,
      );
    } finally {
      clearInterval(collecting);
    }
    expect((await delivery('gc-stuck', event!.seq))?.lastError).toBe('no answer within 300 ms');
  });

  // PostgreSQL only: a PGlite database belongs to one process.
  if (driver.name === 'postgres') {
    it('two deliverers on one database do not both send an event', async () => {
      const rx = await receiver();
      const other = storeOn(await driver.another!(), 'test');
      await Promise.all([
        deliverer([{ name: 'shared', url: rx.url }]),
        deliverer([{ name: 'shared', url: rx.url }], { repoStore: other }),
      ]);
      const events: number[] = [];
      for (let i = 0; i < 6; i++) events.push(...(await append(5)).map((e) => e.seq));
      await until(
        async () =>
          (await store.webhooks.list({ receiver: 'shared', state: 'delivered' })).items.length === 30,
        'thirty delivered',
      );
      await new Promise((r) => setTimeout(r, 300));
      expect(rx.got).toHaveLength(30);
      expect(seqs(rx.got).sort((a, b) => a - b)).toEqual(events);
    });
  }
});

/**
 * The event outbox and named leases on both drivers: events numbered without
 * gaps in commit order (also under concurrent appends and after a rollback),
 * append-only, listed by cursor, type and family; leases held by one owner
 * at a time, fenced (the number grows at each change of holder), renewed,
 * released, lapsing, and `holdLease` refusing a holder that lost its lease;
 * on PostgreSQL, a takeover waiting for the holder's transaction.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { appendEvents, EventRepo } from '../../src/store/repos/events.js';
import { holdLease, LeaseExpiredError, LeaseRepo } from '../../src/store/repos/leases.js';
import { postgresDriver, storeDrivers } from '../support/pg.js';

const drivers = await storeDrivers();

describe.each(drivers)('events and leases on $name', (driver) => {
  let db: Db;
  let events: EventRepo;
  let leases: LeaseRepo;

  beforeAll(async () => {
    db = await driver.fresh();
    events = new EventRepo(db);
    leases = new LeaseRepo(db);
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('numbers events 1, 2, 3… in commit order, with no gap after a rollback', async () => {
    const a = await events.append([
      { type: 'deposit.pending', subject: 'deposit:a', data: { amount: '1.5' } },
    ]);
    expect(a.map((e) => e.seq)).toEqual([1]);
    await expect(
      db.transaction(async (tx) => {
        await appendEvents(tx, [{ type: 'deposit.credited', subject: 'deposit:x', data: {} }]);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    const b = await events.append([
      { type: 'deposit.credited', subject: 'deposit:a', data: { amount: '1.5' } },
      { type: 'withdrawal.committed', subject: 'withdrawal:w', data: { id: 'w' } },
    ]);
    expect(b.map((e) => e.seq)).toEqual([2, 3]);
    expect(new Set([...a, ...b].map((e) => e.id)).size).toBe(3);
    expect(await events.head()).toBe(3);
  });

  it('concurrent appends interleave whole transactions and leave no gap', async () => {
    const before = await events.head();
    await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        db.transaction(async (tx) => {
          await tx.query('SELECT 1');
          return appendEvents(tx, [
            { type: 'offer.received', subject: `t:${i}`, data: { i, part: 0 } },
            { type: 'offer.received', subject: `t:${i}`, data: { i, part: 1 } },
          ]);
        }),
      ),
    );
    const all = await events.list({ after: before, limit: 1000 });
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 24 }, (_, k) => before + k + 1));
    // each transaction's two events are adjacent
    for (let k = 0; k < all.length; k += 2) {
      expect(all[k]!.subject).toBe(all[k + 1]!.subject);
      expect([all[k]!.data.part, all[k + 1]!.data.part]).toEqual([0, 1]);
    }
  });

  it('lists by cursor, exact type, family and subject; gets by id or seq', async () => {
    const page = await events.list({ after: 1, limit: 2 });
    expect(page.map((e) => e.seq)).toEqual([2, 3]);
    const deposits = await events.list({ types: ['deposit.*'] });
    expect(deposits.map((e) => e.type)).toEqual(['deposit.pending', 'deposit.credited']);
    const exact = await events.list({ types: ['withdrawal.committed', 'deposit.pending'] });
    expect(exact.map((e) => e.seq)).toEqual([1, 3]);
    expect((await events.list({ subject: 'deposit:a' })).map((e) => e.seq)).toEqual([1, 2]);
    const one = (await events.list({ after: 2, limit: 1 }))[0]!;
    expect(await events.get(one.id)).toEqual(one);
    expect(await events.get(one.seq)).toEqual(one);
    expect(await events.get('not-an-id')).toBeUndefined();
  });

  it('refuses a bad type, and any change or removal of an event', async () => {
    await expect(events.append([{ type: 'Deposit', subject: 's', data: {} }])).rejects.toThrow(/dotted/);
    await expect(db.query(`UPDATE events SET subject = 'x' WHERE seq = 1`)).rejects.toThrow(/append-only/);
    await expect(db.query('DELETE FROM events WHERE seq = 1')).rejects.toThrow(/append-only/);
  });

  it('a lease has one holder; the fence grows at each change of holder', async () => {
    const a = await leases.acquire('ingest', 'a', 60_000);
    expect(a).toMatchObject({ name: 'ingest', owner: 'a', fence: 1 });
    expect(await leases.acquire('ingest', 'b', 60_000)).toBeUndefined();
    const again = await leases.acquire('ingest', 'a', 60_000);
    expect(again?.fence).toBe(1);
    expect(await leases.renew(a!, 60_000)).toBe(true);
    await leases.release(a!);
    const b = await leases.acquire('ingest', 'b', 60_000);
    expect(b).toMatchObject({ owner: 'b', fence: 2 });
    expect(await leases.renew(a!, 60_000)).toBe(false);
    expect((await leases.holder('ingest'))?.owner).toBe('b');
  });

  it('a lapsed lease is taken over; the old holder cannot write any more', async () => {
    const a = (await leases.acquire('sweeps', 'a', 30))!;
    await db.transaction((tx) => holdLease(tx, a));
    await new Promise((r) => setTimeout(r, 60));
    const b = (await leases.acquire('sweeps', 'b', 60_000))!;
    expect(b.fence).toBe(a.fence + 1);
    await expect(db.transaction((tx) => holdLease(tx, a))).rejects.toBeInstanceOf(LeaseExpiredError);
    await db.transaction((tx) => holdLease(tx, b));
  });
});

// PostgreSQL only: a PGlite database has one connection, so there is no second transaction that could
// wait for the holder's. Its own describe, so that no test is reported skipped where PostgreSQL runs.
const onPostgres = drivers.some((d) => d.name === 'postgres');

describe.runIf(onPostgres)('leases on postgres: row locks', () => {
  const driver = postgresDriver();
  let db: Db;
  let leases: LeaseRepo;

  beforeAll(async () => {
    db = await driver.fresh();
    leases = new LeaseRepo(db);
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('a takeover waits for the holder’s transaction to end', async () => {
    const a = (await leases.acquire('fenced', 'a', 200))!;
    const order: string[] = [];
    let inside!: () => void;
    const entered = new Promise<void>((r) => {
      inside = r;
    });
    const holder = db.transaction(async (tx) => {
      await holdLease(tx, a);
      inside();
      await new Promise((r) => setTimeout(r, 400)); // the lease lapses meanwhile
      order.push('holder commits');
    });
    await entered;
    await new Promise((r) => setTimeout(r, 250));
    const b = await leases.acquire('fenced', 'b', 60_000);
    order.push('takeover');
    await holder;
    expect(b?.owner).toBe('b');
    expect(order).toEqual(['holder commits', 'takeover']);
  });
});

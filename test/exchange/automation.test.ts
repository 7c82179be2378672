/**
 * The automation runner over one database: two instances, one acts (the
 * `automation` lease); when the holder stops (releasing the lease) the other
 * takes over. A task writing under a lease it lost writes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AutomationTask, createAutomation } from '../../src/exchange/automation.js';
import { openPglite } from '../../src/store/db.js';
import { type Store, storeOn } from '../../src/store/index.js';
import { migrate } from '../../src/store/migrations.js';
import { holdLease, LeaseExpiredError } from '../../src/store/repos/leases.js';
import { pgliteMigratedBlob } from '../support/pg.js';

let store: Store;

beforeAll(async () => {
  const db = await openPglite('memory', { loadDataDir: await pgliteMigratedBlob() });
  await migrate(db);
  store = storeOn(db, 'test');
}, 30_000);
afterAll(async () => store?.close());

function counting(runs: string[], who: string): AutomationTask {
  return {
    name: 'count',
    async run(lease) {
      await store.db.transaction(async (tx) => holdLease(tx, lease));
      runs.push(who);
    },
  };
}

describe('automation runner', () => {
  it('one of two instances acts; after it stops, the other takes over', async () => {
    const runs: string[] = [];
    const a = createAutomation({ store, tasks: [counting(runs, 'a')], owner: 'a', pollMs: 60_000 });
    const b = createAutomation({ store, tasks: [counting(runs, 'b')], owner: 'b', pollMs: 60_000 });
    expect(await a.runNow()).toBe(true);
    expect(await b.runNow()).toBe(false);
    expect(await a.runNow()).toBe(true);
    expect(runs).toEqual(['a', 'a']);
    expect((await store.leases.holder('automation'))?.owner).toBe('a');
    await a.stop();
    expect(await b.runNow()).toBe(true);
    expect(runs).toEqual(['a', 'a', 'b']);
    await b.stop();
  });

  it('a lease taken over is refused at the next write', async () => {
    const lease = await store.leases.acquire('automation', 'old', 20);
    expect(lease).toBeDefined();
    // Until the lease lapses (20 ms), polled with a deadline.
    const end = Date.now() + 5000;
    while ((await store.leases.holder('automation')) && Date.now() < end) await Promise.resolve();
    expect(await store.leases.acquire('automation', 'new', 10_000)).toBeDefined();
    await expect(
      store.db.transaction(async (tx) => holdLease(tx, lease as NonNullable<typeof lease>)),
    ).rejects.toBeInstanceOf(LeaseExpiredError);
  });
});

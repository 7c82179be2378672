import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import {
  countQueries,
  createPostgresDatabase,
  requirePostgres,
  storeDrivers,
  type TestDatabase,
} from '../support/pg.js';

const available = await requirePostgres();

describe.runIf(available)('PostgreSQL: round trips of a transaction', () => {
  let t: TestDatabase;
  let db: Db;
  beforeAll(async () => {
    t = await createPostgresDatabase();
    // One connection: every transaction below reuses it (BEGIN is prepared on it once).
    db = await t.open({ migrate: false });
    await db.query('CREATE TABLE rt (id int PRIMARY KEY, note text)');
    await db.transaction((tx) => tx.query('SELECT 1'));
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('BEGIN goes with the first statement: two statements cost three round trips, none costs none', async () => {
    const c = countQueries();
    try {
      await db.transaction(async (tx) => {
        await tx.query('INSERT INTO rt VALUES ($1, $2)', [1, 'a']);
        await tx.query('INSERT INTO rt VALUES ($1, $2)', [2, 'b']);
      });
      expect(c.sent).toEqual(['INSERT INTO rt VALUES ($1, $2)', 'INSERT INTO rt VALUES ($1, $2)', 'COMMIT']);
      c.sent.length = 0;
      expect(await db.transaction(async () => 'nothing')).toBe('nothing');
      expect(c.sent).toEqual([]);
    } finally {
      c.stop();
    }
  });

  it('the first statement runs inside the transaction and answers with its own rows and count', async () => {
    const r = await db.transaction(async (tx) => {
      const first = await tx.query<{ id: number; note: string }>(
        'UPDATE rt SET note = $2 WHERE id <= $1 RETURNING id, note',
        [2, 'x'],
      );
      const inTx = await tx.query<{ inside: boolean }>(
        "SELECT now() = statement_timestamp() AS inside, current_setting('transaction_isolation') AS iso",
      );
      return { first, inTx };
    });
    expect(r.first.rowCount).toBe(2);
    expect(r.first.rows.sort((a, b) => a.id - b.id)).toEqual([
      { id: 1, note: 'x' },
      { id: 2, note: 'x' },
    ]);
    // now() is the transaction's start: a later statement of the same transaction sees it earlier.
    expect(r.inTx.rows[0]?.inside).toBe(false);
    // A first statement without parameters also travels with BEGIN.
    const none = await db.transaction((tx) => tx.query<{ n: number }>('SELECT count(*)::int AS n FROM rt'));
    expect(none.rows).toEqual([{ n: 2 }]);
  });

  it('a throw after the first statement rolls it back', async () => {
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO rt VALUES ($1, $2)', [3, 'gone']);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect((await db.query('SELECT id FROM rt WHERE id = $1', [3])).rows).toEqual([]);
  });

  it('a first statement that fails (parsing, binding, running) aborts it, and the connection works after', async () => {
    const insert = 'INSERT INTO rt VALUES ($1, $2) RETURNING id';
    await expect(db.transaction((tx) => tx.query('SELEC $1::int', [1]))).rejects.toMatchObject({
      code: '42601',
    });
    await expect(db.transaction((tx) => tx.query(insert, ['four', 'x']))).rejects.toMatchObject({
      code: '22P02',
    });
    await expect(db.transaction((tx) => tx.query(insert, [1, 'dup']))).rejects.toMatchObject({
      code: '23505',
    });
    // The same texts work afterwards, each inside its transaction.
    for (let i = 10; i < 13; i++)
      expect((await db.transaction((tx) => tx.query(insert, [i, 'ok']))).rows).toEqual([{ id: i }]);
    expect((await db.query('SELECT count(*)::int AS n FROM rt')).rows).toEqual([{ n: 5 }]);
  });
});

describe.runIf(available)('PostgreSQL: a statement with its `first`', () => {
  let t: TestDatabase;
  let db: Db;
  beforeAll(async () => {
    t = await createPostgresDatabase();
    db = await t.open({ migrate: false });
    await db.query('CREATE TABLE rf (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('BEGIN, the lock and the statement in one round trip; the lock held until commit', async () => {
    const lock = 'SELECT pg_advisory_xact_lock(4242)';
    const held =
      'SELECT count(*)::int AS n FROM pg_locks WHERE locktype = $1 AND objid = $2 AND pid = pg_backend_pid()';
    // Once to prepare BEGIN and the lock on the connection.
    await db.transaction((tx) => tx.query('INSERT INTO rf VALUES ($1)', [1], { first: lock }));
    const c = countQueries();
    try {
      const r = await db.transaction(async (tx) => {
        const ins = await tx.query<{ id: number }>('INSERT INTO rf VALUES ($1) RETURNING id', [2], {
          first: lock,
        });
        const locks = await tx.query<{ n: number }>(held, ['advisory', 4242]);
        return { ins, locks };
      });
      expect(r.ins.rows).toEqual([{ id: 2 }]);
      expect(r.locks.rows).toEqual([{ n: 1 }]);
      expect(c.sent).toEqual(['INSERT INTO rf VALUES ($1) RETURNING id', held, 'COMMIT']);
    } finally {
      c.stop();
    }
    // A failing statement after its lock: the transaction is rolled back, the connection works on.
    await expect(
      db.transaction((tx) => tx.query('INSERT INTO rf VALUES ($1)', [2], { first: lock })),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await db.query('SELECT count(*)::int AS n FROM rf')).rows).toEqual([{ n: 2 }]);
    // Outside a transaction: both on one connection.
    expect((await db.query<{ n: number }>('SELECT 7 AS n', [], { first: lock })).rows).toEqual([{ n: 7 }]);
  });
});

describe.each(await storeDrivers())('$name: `first` runs just before the statement', (driver) => {
  it('in and out of a transaction; its result is dropped', async () => {
    const db = await driver.fresh({ migrate: false });
    await db.query('CREATE TABLE rs (id int)');
    await db.transaction(async (tx) => {
      const r = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM rs', [], {
        first: 'INSERT INTO rs VALUES (1)',
      });
      expect(r.rows).toEqual([{ n: 1 }]);
    });
    const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM rs', [], {
      first: 'INSERT INTO rs VALUES (2)',
    });
    expect(r.rows).toEqual([{ n: 2 }]);
    await driver.cleanup();
  });
});

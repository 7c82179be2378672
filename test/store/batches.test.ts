import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAudit } from '../../src/store/audit.js';
import type { Db } from '../../src/store/db.js';
import { later } from '../../src/store/deferred.js';
import { type WithdrawalBody, WithdrawalRepo } from '../../src/store/repos/withdrawals.js';
import { countQueries, storeDrivers } from '../support/pg.js';

const drivers = await storeDrivers();

const body: WithdrawalBody = {
  party: 'alice::1220aa',
  receiver: 'bob::1220bb',
  amount: '10.5',
  instrument: { admin: 'dso::1220cc', id: 'Amulet' },
};

describe.each(drivers)('$name: a batch of statements', (driver) => {
  let db: Db;
  beforeAll(async () => {
    db = await driver.fresh({ migrate: false });
    await db.query('CREATE TABLE bt (id int PRIMARY KEY, note text)');
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('runs in order inside the transaction; each statement answers with its own rows and count', async () => {
    // Twice: the first on a connection prepares the statements, the second sends them together.
    for (const base of [1, 11]) {
      const rs = await db.transaction(async (tx) => {
        if (!tx.batch) throw new Error('a transaction handle without batch');
        return tx.batch([
          { sql: 'INSERT INTO bt VALUES ($1, $2), ($3, $4)', params: [base, 'a', base + 1, 'b'] },
          { sql: 'SELECT count(*)::int AS n FROM bt WHERE id >= $1', params: [base] },
          { sql: "UPDATE bt SET note = 'x' WHERE id = $1 RETURNING id, note", params: [base + 1] },
          {
            sql: "SELECT current_setting('transaction_isolation') AS iso, now() = statement_timestamp() AS first",
          },
        ]);
      });
      expect(rs.map((r) => r.rowCount)).toEqual([2, 1, 1, 1]);
      expect(rs[1]?.rows).toEqual([{ n: 2 }]);
      expect(rs[2]?.rows).toEqual([{ id: base + 1, note: 'x' }]);
      // A later statement of the transaction: now() is its start, not this statement's.
      expect(rs[3]?.rows[0]?.first).toBe(false);
    }
  });

  it('a statement failing mid-batch leaves nothing written, and the connection works after', async () => {
    const before = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM bt')).rows[0]?.n;
    for (let i = 0; i < 2; i++) {
      await expect(
        db.transaction(async (tx) => {
          await tx.query('INSERT INTO bt VALUES ($1, $2)', [100 + i, 'before the batch']);
          return tx.batch?.([
            { sql: 'INSERT INTO bt VALUES ($1, $2)', params: [200 + i, 'first of the batch'] },
            // The primary key taken: fails at run time.
            { sql: 'INSERT INTO bt VALUES ($1, $2)', params: [1, 'duplicate'] },
            { sql: 'INSERT INTO bt VALUES ($1, $2)', params: [300 + i, 'after the failure'] },
          ]);
        }),
      ).rejects.toMatchObject({ code: '23505' });
    }
    // A value that cannot be bound, in the middle.
    await expect(
      db.transaction(async (tx) =>
        tx.batch?.([
          { sql: 'INSERT INTO bt VALUES ($1, $2)', params: [400, 'first'] },
          { sql: 'INSERT INTO bt VALUES ($1, $2)', params: ['four hundred', 'bad'] },
        ]),
      ),
    ).rejects.toMatchObject({ code: '22P02' });
    expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM bt')).rows[0]?.n).toBe(before);
    const ok = await db.transaction(async (tx) =>
      tx.batch?.([
        { sql: 'INSERT INTO bt VALUES ($1, $2)', params: [500, 'ok'] },
        { sql: 'SELECT count(*)::int AS n FROM bt WHERE id = $1', params: [500] },
      ]),
    );
    expect(ok?.[1]?.rows).toEqual([{ n: 1 }]);
  });

  it('held statements travel with the next one; a failing held statement aborts the transaction', async () => {
    const { Deferring } = await import('../../src/store/deferred.js');
    const r = await db.transaction(async (tx) => {
      const d = new Deferring(tx);
      await later(d, 'INSERT INTO bt VALUES ($1, $2)', [600, 'held']);
      return d.query<{ n: number }>('SELECT count(*)::int AS n FROM bt WHERE id = $1', [600]);
    });
    expect(r.rows).toEqual([{ n: 1 }]);
    await expect(
      db.transaction(async (tx) => {
        const d = new Deferring(tx);
        d.hold('INSERT INTO bt VALUES ($1, $2)', [601, 'held']);
        d.hold('INSERT INTO bt VALUES ($1, $2)', [600, 'duplicate']);
        await d.flush();
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await db.query('SELECT id FROM bt WHERE id = $1', [601])).rows).toEqual([]);
  });
});

describe.each(drivers)('$name: statements as one transaction (`atomically`)', (driver) => {
  let db: Db;
  beforeAll(async () => {
    db = await driver.fresh({ migrate: false });
    await db.query('CREATE TABLE at (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('commits all of them with their results, or (one failing) none; on PostgreSQL in one round trip', async () => {
    const batch = (a: number, b: number) =>
      db.atomically([
        { sql: 'SELECT pg_advisory_xact_lock($1)', params: [77] },
        { sql: 'INSERT INTO at VALUES ($1)', params: [a] },
        { sql: 'INSERT INTO at VALUES ($1) RETURNING id', params: [b] },
      ]);
    // The first on a connection prepares its statements.
    expect((await batch(1, 2))[2]?.rows).toEqual([{ id: 2 }]);
    const c = countQueries();
    let rs: Awaited<ReturnType<typeof batch>>;
    try {
      rs = await batch(3, 4);
    } finally {
      c.stop();
    }
    expect(rs.map((r) => r.rowCount)).toEqual([1, 1, 1]);
    if (driver.name === 'postgres') expect(c.sent).toEqual(['COMMIT']);
    // The second insert fails: the first is rolled back with it, the lock released.
    await expect(batch(5, 1)).rejects.toMatchObject({ code: '23505' });
    expect((await db.query('SELECT id FROM at ORDER BY id')).rows).toEqual([
      { id: 1 },
      { id: 2 },
      { id: 3 },
      { id: 4 },
    ]);
    expect(
      (await db.transaction((tx) => tx.query('SELECT pg_try_advisory_xact_lock(77) AS got'))).rows,
    ).toEqual([{ got: true }]);
    expect((await batch(5, 6)).length).toBe(3);
  });
});

describe.each(drivers)('$name: a withdrawal move whose held write fails', (driver) => {
  let db: Db;
  let repo: WithdrawalRepo;
  beforeAll(async () => {
    db = await driver.fresh();
    repo = new WithdrawalRepo(db, { actor: 'test' });
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('is not written: the row keeps its state, no audit row, no event; the next move works', async () => {
    const { withdrawal } = await repo.create({ idempotencyKey: 'held-1', caller: 'bot', body });
    const counts = async () =>
      (
        await db.query<{ audit: number; events: number }>(
          'SELECT (SELECT count(*)::int FROM audit_log) AS audit, (SELECT count(*)::int FROM events) AS events',
        )
      ).rows[0];
    const before = await counts();
    await expect(
      repo.transition(
        withdrawal.id,
        ['received'],
        'prepared',
        {},
        // A held write that fails when it is sent (a foreign key to no withdrawal).
        {
          also: (tx) =>
            later(
              tx,
              `INSERT INTO prepared_transactions (id, withdrawal_id, attempt, hash, hashing_scheme, bytes_raw)
                VALUES (gen_random_uuid(), $1, 1, repeat('a', 64), 'v2', '\\x00')`,
              ['00000000-0000-4000-8000-000000000000'],
            ),
        },
      ),
    ).rejects.toMatchObject({ code: '23503' });
    expect((await repo.get(withdrawal.id))?.state).toBe('received');
    expect(await counts()).toEqual(before);
    const moved = await repo.transition(withdrawal.id, ['received'], 'prepared');
    expect(moved.state).toBe('prepared');
    expect((await verifyAudit(db)).ok).toBe(true);
  });

  it('several moves in one group commit, one of them refused: the others and their held writes are written', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++)
      ids.push((await repo.create({ idempotencyKey: `held-g-${i}`, caller: 'bot', body })).withdrawal.id);
    const insert = `INSERT INTO prepared_transactions (id, withdrawal_id, attempt, hash, hashing_scheme, bytes_raw)
      VALUES (gen_random_uuid(), $1, 1, repeat('b', 64), 'v2', '\\x00')`;
    // Issued in one turn: one batch. The third is refused (not in `signed`).
    const out = await Promise.allSettled(
      ids.map((id, i) =>
        repo.transition(
          id,
          i === 2 ? ['signed'] : ['received'],
          i === 2 ? 'submitted' : 'prepared',
          {},
          {
            also: (tx) => later(tx, insert, [id]),
          },
        ),
      ),
    );
    expect(out.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    const written = await db.query<{ withdrawal_id: string }>(
      `SELECT withdrawal_id FROM prepared_transactions WHERE hash = repeat('b', 64) ORDER BY withdrawal_id`,
    );
    expect(written.rows.map((r) => r.withdrawal_id)).toEqual(
      [ids[0], ids[1], ids[3]].sort((a, b) => ((a ?? '') < (b ?? '') ? -1 : 1)),
    );
    expect((await verifyAudit(db)).ok).toBe(true);
  });

  it('a batch of moves with held writes writes every one of them; on PostgreSQL in four round trips with its COMMIT', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await repo.create({ idempotencyKey: `held-rt-${i}`, caller: 'bot', body })).withdrawal.id);
    const insert = `INSERT INTO prepared_transactions (id, withdrawal_id, attempt, hash, hashing_scheme, bytes_raw)
        VALUES (gen_random_uuid(), $1, 1, repeat('c', 64), 'v2', '\\x00')`;
    const move = (to: 'prepared' | 'signed', from: 'received' | 'prepared') =>
      Promise.all(
        ids.map((id) => repo.transition(id, [from], to, {}, { also: (tx) => later(tx, insert, [id]) })),
      );
    // Once to prepare the statements on the connection.
    await move('prepared', 'received');
    const c = countQueries();
    try {
      await move('signed', 'prepared');
    } finally {
      c.stop();
    }
    const held = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM prepared_transactions WHERE hash = repeat('c', 64) AND withdrawal_id = ANY($1::uuid[])`,
      [ids],
    );
    expect(held.rows[0]?.n).toBe(6);
    if (driver.name !== 'postgres') return; // the embedded engine has no round trips to count
    // The moves (with BEGIN); the held inserts with the audit head's lock; the audit rows with
    // the events; COMMIT.
    expect(c.sent.length).toBe(4);
    expect(c.sent.at(-1)).toBe('COMMIT');
  });
});

/**
 * Edges of statements sent together (db.ts `batch`, deferred.ts) that a
 * review probed: a withdrawal moved twice in one group commit with held
 * writes; a held write failing among other moves (only its move is refused,
 * nothing of it written); on PostgreSQL, a batched statement without
 * parameters whose prepared plan went stale (runs again once unnamed, as a
 * statement with parameters does), and a transaction handle whose batch
 * failed before anything was sent (its next statements must not run outside
 * the transaction).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAudit } from '../../src/store/audit.js';
import { type Db, openPostgres } from '../../src/store/db.js';
import { later } from '../../src/store/deferred.js';
import { type WithdrawalBody, WithdrawalRepo } from '../../src/store/repos/withdrawals.js';
import { createPostgresDatabase, requirePostgres, storeDrivers, type TestDatabase } from '../support/pg.js';

const drivers = await storeDrivers();
const hasPg = await requirePostgres();

const body: WithdrawalBody = {
  party: 'alice::1220aa',
  receiver: 'bob::1220bb',
  amount: '10.5',
  instrument: { admin: 'dso::1220cc', id: 'Amulet' },
};

const INSERT_PREPARED = `INSERT INTO prepared_transactions (id, withdrawal_id, attempt, hash, hashing_scheme, bytes_raw)
  VALUES (gen_random_uuid(), $1, $2, repeat($3, 64), 'v2', '\\x00')`;

describe.each(drivers)('$name: held writes in a group commit of moves', (driver) => {
  let db: Db;
  let repo: WithdrawalRepo;
  beforeAll(async () => {
    db = await driver.fresh();
    repo = new WithdrawalRepo(db, { actor: 'test' });
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('one withdrawal moved twice in one batch: both moves, both held writes, in order', async () => {
    const { withdrawal: w } = await repo.create({ idempotencyKey: 'twice-1', caller: 'bot', body });
    // Issued in one turn: one batch, the same row twice (in submission order).
    const [a, b] = await Promise.allSettled([
      repo.transition(
        w.id,
        ['received'],
        'prepared',
        {},
        { also: (tx) => later(tx, INSERT_PREPARED, [w.id, 1, 'd']) },
      ),
      repo.transition(
        w.id,
        ['prepared'],
        'signed',
        {},
        { also: (tx) => later(tx, INSERT_PREPARED, [w.id, 2, 'e']) },
      ),
    ]);
    expect([a?.status, b?.status]).toEqual(['fulfilled', 'fulfilled']);
    expect((await repo.get(w.id))?.state).toBe('signed');
    const rows = await db.query<{ attempt: number }>(
      'SELECT attempt FROM prepared_transactions WHERE withdrawal_id = $1 ORDER BY attempt',
      [w.id],
    );
    expect(rows.rows.map((r) => r.attempt)).toEqual([1, 2]);
    const events = await db.query<{ type: string }>(
      `SELECT type FROM events WHERE subject = $1 ORDER BY seq`,
      [`withdrawal:${w.id}`],
    );
    expect(events.rows.map((e) => e.type)).toEqual([
      'withdrawal.received',
      'withdrawal.prepared',
      'withdrawal.signed',
    ]);
    expect((await verifyAudit(db)).ok).toBe(true);
  });

  it('a held write failing among other moves: only its move is refused, with its own error, nothing of it written', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++)
      ids.push((await repo.create({ idempotencyKey: `held-fail-${i}`, caller: 'bot', body })).withdrawal.id);
    const ghost = '00000000-0000-4000-8000-000000000000';
    const out = await Promise.allSettled(
      ids.map((id, i) =>
        repo.transition(
          id,
          ['received'],
          'prepared',
          {},
          {
            // The second's held write names no withdrawal (a foreign key violation when it is sent).
            also: (tx) => later(tx, INSERT_PREPARED, [i === 1 ? ghost : id, 1, 'f']),
          },
        ),
      ),
    );
    expect(out.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((out[1] as PromiseRejectedResult).reason).toMatchObject({ code: '23503' });
    expect((await repo.get(ids[1] as string))?.state).toBe('received');
    const written = await db.query<{ withdrawal_id: string }>(
      `SELECT withdrawal_id FROM prepared_transactions WHERE hash = repeat('f', 64)`,
    );
    expect(new Set(written.rows.map((r) => r.withdrawal_id))).toEqual(new Set([ids[0], ids[2], ids[3]]));
    const audited = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM audit_log WHERE subject = $1 AND action = 'withdrawal.prepared'`,
      [`withdrawal:${ids[1]}`],
    );
    expect(audited.rows[0]?.n).toBe(0);
    expect((await verifyAudit(db)).ok).toBe(true);
  });
});

describe.each(drivers)('$name: a transaction whose statement failed', (driver) => {
  let db: Db;
  beforeAll(async () => {
    db = await driver.fresh({ migrate: false });
    await db.query('CREATE TABLE sw (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('is not reported committed when its callback swallowed the error (nothing of it is written)', async () => {
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO sw VALUES ($1)', [1]);
        // A held write failing, its error caught by a caller that then returns normally.
        await tx.batch?.([{ sql: 'INSERT INTO sw VALUES ($1)', params: [1] }]).catch(() => {});
        return 'done';
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await db.query('SELECT id FROM sw')).rows).toEqual([]);
  });
});

describe.runIf(hasPg)('postgres: batches on one connection', () => {
  let t: TestDatabase;
  let db: Db;
  beforeAll(async () => {
    t = await createPostgresDatabase();
    // One connection: what one statement prepared there, the next finds prepared.
    db = await openPostgres(t.url, { max: 1 });
    await db.query('CREATE TABLE st (id int PRIMARY KEY)');
    await db.query('INSERT INTO st VALUES (1)');
  });
  afterAll(async () => {
    await db.close();
    await t.drop();
  });

  it('`atomically` retries a deadlock victim whole: each batch written exactly once', async () => {
    const pool = await openPostgres(t.url, { max: 4 });
    try {
      await pool.query('CREATE TABLE dl (k int, who text)');
      const crossing = (first: number, second: number, who: string) =>
        pool.atomically([
          { sql: 'SELECT pg_advisory_xact_lock($1::bigint)', params: [first] },
          { sql: 'SELECT pg_sleep($1::float8)', params: [0.2] },
          { sql: 'SELECT pg_advisory_xact_lock($1::bigint)', params: [second] },
          { sql: 'INSERT INTO dl VALUES ($1, $2)', params: [first, who] },
        ]);
      // Twice: the first round prepares the statements on the connections (one by one).
      for (let round = 0; round < 2; round++)
        await Promise.all([crossing(1, 2, `a${round}`), crossing(2, 1, `b${round}`)]);
      const rows = await pool.query<{ who: string; n: number }>(
        'SELECT who, count(*)::int AS n FROM dl GROUP BY who ORDER BY who',
      );
      // A deadlock did happen (the server counts them): the batches went through by their retries.
      await pool.query('SELECT pg_stat_force_next_flush()');
      const dead = await pool.query<{ n: number }>(
        'SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()',
      );
      expect(dead.rows[0]?.n).toBeGreaterThan(0);
      expect(rows.rows).toEqual([
        { who: 'a0', n: 1 },
        { who: 'a1', n: 1 },
        { who: 'b0', n: 1 },
        { who: 'b1', n: 1 },
      ]);
    } finally {
      await pool.close();
    }
  });

  it('a batched statement without parameters whose plan went stale runs again (unnamed)', async () => {
    const batch = () =>
      db.transaction(async (tx) => {
        if (!tx.batch) throw new Error('a transaction handle without batch');
        return tx.batch([
          { sql: 'SELECT * FROM st ORDER BY id' },
          { sql: 'SELECT $1::int AS x', params: [1] },
        ]);
      });
    // Twice: the first prepares, the second sends them together.
    await batch();
    expect((await batch())[0]?.rows).toEqual([{ id: 1 }]);
    // The table's columns change under the prepared `SELECT *`.
    await db.query('ALTER TABLE st ADD COLUMN note text');
    expect((await batch())[0]?.rows).toEqual([{ id: 1, note: null }]);
  });

  it('a batch that failed before it was sent leaves the transaction failed: no later statement runs outside it', async () => {
    const insert = 'INSERT INTO st (id) VALUES ($1)';
    // Prepared on the connection: the next batch goes out in one round trip.
    await db.transaction(async (tx) =>
      tx.batch?.([
        { sql: insert, params: [2] },
        { sql: 'SELECT $1::int', params: [1] },
      ]),
    );
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    await expect(
      db.transaction(async (tx) => {
        // A value that cannot be turned into parameter text: the batch fails before anything is sent.
        await tx
          .batch?.([
            { sql: insert, params: [circular] },
            { sql: 'SELECT $1::int', params: [1] },
          ])
          .catch(() => {});
        // A caller that goes on (wrongly) after the error: this must not be committed on its own.
        await tx.query(insert, [3]).catch(() => {});
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect((await db.query('SELECT id FROM st WHERE id = 3')).rows).toEqual([]);
  });
});

describe('deferring(): nothing held is left behind', () => {
  /** A transaction handle that records what reaches it. */
  const recorder = () => {
    const sent: string[] = [];
    const tx = {
      async query(sql: string) {
        sent.push(sql);
        return { rows: [], rowCount: 0 };
      },
    };
    return { sent, tx };
  };

  it('sends what the writer held before it returns, in order', async () => {
    const { sent, tx } = recorder();
    const { deferring } = await import('../../src/store/deferred.js');
    const r = await deferring(tx, async (d) => {
      d.hold('INSERT 1');
      await d.query('SELECT 2');
      d.hold('INSERT 3');
      return 'done';
    });
    expect(r).toBe('done');
    expect(sent).toEqual(['INSERT 1', 'SELECT 2', 'INSERT 3']);
  });

  it('refuses a write held after the writer returned instead of dropping it', async () => {
    const { tx } = recorder();
    const { deferring } = await import('../../src/store/deferred.js');
    let escaped: { hold(sql: string): void } | undefined;
    await deferring(tx, async (d) => {
      escaped = d;
    });
    expect(() => escaped?.hold('INSERT late')).toThrow(/held after/);
  });
});

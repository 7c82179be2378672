/**
 * Schema and migrations on both drivers: migrating is idempotent and safe
 * when several instances start at once (PostgreSQL), a tampered or newer
 * schema is refused, no table can hold private key material, and
 * openDatabase picks the driver (DATABASE_URL → PostgreSQL, else PGlite
 * under dataDir, persisted across reopen).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, describe, expect, it } from 'vitest';
import { appendAudit, verifyAudit } from '../../src/store/audit.js';
import {
  type Db,
  type MaintenanceReport,
  openDatabase,
  openPglite,
  parseTimestamptz,
  type Queryable,
} from '../../src/store/db.js';
import { StoreError } from '../../src/store/errors.js';
import { storeOn } from '../../src/store/index.js';
import { MIGRATIONS, type Migration, migrate, schemaVersion } from '../../src/store/migrations.js';
import { createPostgresDatabase, pgliteTemplateBlob, storeDrivers } from '../support/pg.js';

const drivers = await storeDrivers();
/** A full garbage collection, for measuring what stays on the heap. */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const LATEST = Math.max(...MIGRATIONS.map((m) => m.version));

const TABLES = [
  'air_gap_exports',
  'ans_names',
  'approval_requests',
  'approvals',
  'approver_credentials',
  'audit_head',
  'audit_log',
  'console_sessions',
  'deposits',
  'events',
  'ingest_cursor',
  'ingest_parties',
  'ingested_updates',
  'keys',
  'leases',
  'ledger_holdings',
  'ledger_movements',
  'offer_decisions',
  'parties',
  'policy_usage',
  'policy_versions',
  'prepared_transactions',
  'schema_migrations',
  'signatures',
  'submissions',
  'sweeps',
  'webhook_deliveries',
  'webhook_receivers',
  'withdrawals',
];

async function columns(db: Db): Promise<{ table_name: string; column_name: string }[]> {
  return (
    await db.query<{ table_name: string; column_name: string }>(
      `SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`,
    )
  ).rows;
}

describe.each(drivers)('schema on $name', (driver) => {
  afterAll(async () => {
    await driver.cleanup();
  });

  it('migrates an empty database once; migrating again changes nothing', async () => {
    const db = await driver.fresh({ migrate: false });
    expect(await schemaVersion(db)).toBe(0);
    expect(await migrate(db)).toEqual({ applied: MIGRATIONS.map((m) => m.version), version: LATEST });
    expect(await schemaVersion(db)).toBe(LATEST);
    const before = await columns(db);
    await appendAudit(db, { actor: 't', action: 'kept' });
    expect(await migrate(db)).toEqual({ applied: [], version: LATEST });
    expect(await migrate(db)).toEqual({ applied: [], version: LATEST });
    expect(await columns(db)).toEqual(before);
    expect((await verifyAudit(db)).ok).toBe(true);
    const recorded = await db.query<{ version: number; name: string }>(
      'SELECT version, name FROM schema_migrations',
    );
    expect(recorded.rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
    const tables = await db.query<{ t: string }>(
      `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`,
    );
    expect(tables.rows.map((r) => r.t)).toEqual(TABLES);
  });

  it('no column can hold private key material, secrets or credentials', async () => {
    const db = await driver.fresh();
    const cols = await columns(db);
    const bad = cols.filter((c) =>
      /priv|secret|seed|passphrase|password|\bpin\b|_pin|pkcs8|mnemonic|token|wrapped|encrypted|kek|dek/i.test(
        c.column_name,
      ),
    );
    expect(bad).toEqual([]);
    expect(cols.filter((c) => c.table_name === 'keys').map((c) => c.column_name)).toEqual([
      'label',
      'backend',
      'scheme',
      'fingerprint',
      'public_key_spki',
      'created_at',
      'disabled',
      'updated_at',
    ]);
  });

  it('refuses a database whose applied migration differs from this build, or is newer', async () => {
    const db = await driver.fresh();
    const edited: Migration[] = MIGRATIONS.map((m) =>
      m.version === 1 ? { ...m, statements: [...m.statements, 'SELECT 1'] } : m,
    );
    await expect(migrate(db, edited)).rejects.toThrow(/checksum mismatch/);
    await db.query(`INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'future', 'x')`);
    const e = await migrate(db).catch((x) => x);
    expect(e).toBeInstanceOf(StoreError);
    expect((e as StoreError).code).toBe('schema');
    expect((e as Error).message).toMatch(/schema version 999, newer/);
  });

  it('a failing migration leaves nothing behind (one transaction)', async () => {
    const db = await driver.fresh({ migrate: false });
    const broken: Migration[] = [
      ...MIGRATIONS,
      {
        version: LATEST + 1,
        name: 'broken',
        statements: ['CREATE TABLE half_done (x int)', 'SELECT nonsense('],
      },
    ];
    await expect(migrate(db, broken)).rejects.toThrow();
    expect(await schemaVersion(db)).toBe(0);
    const t = await db.query<{ t: string | null }>(`SELECT to_regclass('withdrawals')::text AS t`);
    expect(t.rows[0]!.t).toBeNull();
  });

  it('timestamps come back as ISO-8601 UTC strings with milliseconds, numbers as numbers', async () => {
    const db = await driver.fresh();
    const r = await db.query<{ t: string; n: number; d: string }>(
      `SELECT '2024-02-29 23:59:59.5+05:30'::timestamptz(3) AS t, 9007199254740991::int8 AS n, 1.5::numeric(38,10) AS d`,
    );
    expect(r.rows[0]).toEqual({ t: '2024-02-29T18:29:59.500Z', n: 9007199254740991, d: '1.5000000000' });
    await expect(db.query('SELECT 9007199254740993::int8 AS n')).rejects.toThrow(/2\^53/);
  });

  it('parameters and columns of every type the store uses come back the same on both drivers', async () => {
    const db = await driver.fresh();
    const r = await db.query(
      `SELECT $1::text AS s, $2::int4 AS i, $3::boolean AS b, $4::text[] AS a, $5::jsonb AS j, $6::text AS nul,
              $7::uuid AS u, 'x'::text = ANY($4::text[]) AS inside, NULL::text AS none`,
      [
        'é \u0001 \'"',
        42,
        true,
        ['a', 'b,c', 'd"e', 'x'],
        JSON.stringify({ k: [1, 'two'] }),
        null,
        '6e5a3c53-8f53-4db6-a13b-173f529f57aa',
      ],
    );
    expect(r).toEqual({
      rows: [
        {
          s: 'é \u0001 \'"',
          i: 42,
          b: true,
          a: ['a', 'b,c', 'd"e', 'x'],
          j: { k: [1, 'two'] },
          nul: null,
          u: '6e5a3c53-8f53-4db6-a13b-173f529f57aa',
          inside: true,
          none: null,
        },
      ],
      rowCount: 1,
    });
    await db.query('CREATE TABLE t_count (v int)');
    expect((await db.query('INSERT INTO t_count SELECT generate_series(1, 3)')).rowCount).toBe(3);
    expect((await db.query('UPDATE t_count SET v = v + 1 WHERE v > 1')).rowCount).toBe(2);
  });

  it('a database error carries its SQLSTATE and the statement, never the parameters', async () => {
    const db = await driver.fresh();
    const e = await db.query('SELECT 1 / $1::int AS x', [0]).catch((x: unknown) => x);
    expect(e).toMatchObject({ code: '22012' });
    expect(String((e as Error).message)).toMatch(/division by zero/);
    // the same session goes on working after an error, inside and outside transactions
    expect((await db.query('SELECT 2 AS two')).rows).toEqual([{ two: 2 }]);
    await expect(
      db.transaction(async (tx) => {
        await tx.query('SELECT 1 / 0');
      }),
    ).rejects.toMatchObject({ code: '22012' });
    expect((await db.query('SELECT 3 AS three')).rows).toEqual([{ three: 3 }]);
    // (PostgreSQL itself quotes a value it cannot convert; the driver adds no parameter of its own)
    const secret = 'not-for-errors-0123456789';
    const e2 = await db.query('SELECT $2::text AS s, 1 / $1::int AS x', [0, secret]).catch((x: unknown) => x);
    expect(e2).toMatchObject({ code: '22012' });
    expect(e2).not.toHaveProperty('params');
    expect(JSON.stringify(e2, Object.getOwnPropertyNames(e2))).not.toContain(secret);
  });

  it('a table changed under a running instance (a migration by another): its statements go on working', async () => {
    const db = await driver.fresh();
    await db.query('CREATE TABLE t_mig (id int PRIMARY KEY, v text)');
    await db.query(`INSERT INTO t_mig VALUES (1, 'a')`);
    const read = () => db.query('SELECT * FROM t_mig WHERE id = $1', [1]);
    const inTx = () => db.transaction((tx) => tx.query('SELECT * FROM t_mig WHERE id = $1', [1]));
    // every pooled connection has it prepared (PostgreSQL prepares per connection)
    for (let i = 0; i < 3; i++)
      await Promise.all(Array.from({ length: 8 }, () => Promise.all([read(), inTx()])));
    await db.query(`ALTER TABLE t_mig ADD COLUMN w text NOT NULL DEFAULT 'new'`);
    for (let i = 0; i < 3; i++) {
      const [r, t] = await Promise.all([read(), inTx()]);
      expect(r.rows).toEqual([{ id: 1, v: 'a', w: 'new' }]);
      expect(t.rows).toEqual([{ id: 1, v: 'a', w: 'new' }]);
    }
  });

  it('a statement that failed (parsing, binding, running, in an aborted transaction) works on its next call', async () => {
    const db = await driver.fresh();
    await db.query('CREATE TABLE t_prep (id int PRIMARY KEY, at timestamptz(3), n int8)');
    const insert = 'INSERT INTO t_prep VALUES ($1, $2, $3) RETURNING *';
    // binding fails: a value the column type refuses
    await expect(db.query(insert, ['one', null, null])).rejects.toMatchObject({ code: '22P02' });
    // running fails: a duplicate key, after a first successful call
    expect((await db.query(insert, [1, '2026-01-02T03:04:05.678Z', 5])).rows).toEqual([
      { id: 1, at: '2026-01-02T03:04:05.678Z', n: 5 },
    ]);
    await expect(db.query(insert, [1, null, null])).rejects.toMatchObject({ code: '23505' });
    // a transaction already aborted: the statement is not even parsed there
    const select = 'SELECT id, at, n FROM t_prep WHERE id = $1';
    await expect(
      db.transaction(async (tx) => {
        await tx.query('SELECT 1 / 0').catch(() => {});
        await tx.query(select, [1]);
      }),
    ).rejects.toMatchObject({ code: '25P02' });
    // every one of them works afterwards, with its columns parsed by type, many times over
    for (let i = 2; i < 6; i++) {
      expect((await db.query(insert, [i, null, 2 ** 40 + i])).rows).toEqual([
        { id: i, at: null, n: 2 ** 40 + i },
      ]);
      expect((await db.query(select, [1])).rows).toEqual([{ id: 1, at: '2026-01-02T03:04:05.678Z', n: 5 }]);
      expect((await db.transaction((tx) => tx.query(select, [i]))).rows).toEqual([
        { id: i, at: null, n: 2 ** 40 + i },
      ]);
    }
    // the first calls of a text overlapping inside one transaction: each answered
    const fresh = 'SELECT id FROM t_prep WHERE id >= $1 ORDER BY id';
    const overlapping = await db.transaction((tx) =>
      Promise.all([tx.query(fresh, [4]), tx.query(fresh, [5]), tx.query(fresh, [3])]),
    );
    expect(overlapping.map((r) => r.rows.length)).toEqual([2, 1, 3]);
    expect((await db.query(fresh, [2])).rows.length).toBe(4);
    // a statement whose text is wrong is reported as such each time
    for (let i = 0; i < 2; i++)
      await expect(db.query('SELEC $1::int', [1])).rejects.toMatchObject({ code: '42601' });
  });

  it('answers are not kept once read: memory stays flat over thousands of statements', async () => {
    const db = await driver.fresh();
    await db.query('CREATE TABLE t_mem (id int, v text)');
    await db.query(`INSERT INTO t_mem SELECT g, repeat('x', 200) FROM generate_series(1, 100) g`);
    const read = async (n: number) => {
      for (let i = 0; i < n; i++) await db.query('SELECT * FROM t_mem WHERE id <= $1', [100]);
    };
    await read(200);
    gc();
    const before = process.memoryUsage().heapUsed;
    // ~25 KB of rows per answer: 1,000 answers kept would be ~35 MB of heap
    await read(1_000);
    gc();
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(10 * 1024 * 1024);
  });

  it('work a transaction leaves behind runs on its own once the transaction ended', async () => {
    const db = await driver.fresh();
    await db.query('CREATE TABLE t_later (v text)');
    let later!: Promise<unknown>;
    await db.transaction(async (tx) => {
      await tx.query(`INSERT INTO t_later VALUES ('in')`);
      // scheduled from inside the transaction, run after it committed
      later = new Promise((resolve, reject) => {
        setTimeout(() => {
          Promise.all([
            db.query(`INSERT INTO t_later VALUES ('after')`),
            db.transaction((t2) => t2.query(`INSERT INTO t_later VALUES ('after tx')`)),
          ]).then(resolve, reject);
        }, 20);
      });
    });
    await later;
    expect((await db.query('SELECT v FROM t_later ORDER BY v')).rows).toEqual([
      { v: 'after' },
      { v: 'after tx' },
      { v: 'in' },
    ]);
  });

  it('a transaction handle used after its transaction ended is refused; a closed database says so', async () => {
    const db = await driver.fresh();
    let kept: Queryable | undefined;
    await db.transaction(async (tx) => {
      kept = tx;
      await tx.query('SELECT 1');
    });
    await expect(kept!.query('SELECT 1')).rejects.toThrow(/after the transaction ended/);
    await db.close();
    await expect(db.query('SELECT 1')).rejects.toThrow(/is closed|after calling end/i);
  });

  it('a statement issued outside an open transaction is not part of it', async () => {
    const db = await driver.fresh();
    await db.query('CREATE TABLE t_iso (v text)');
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let entered!: () => void;
    const inside = new Promise<void>((r) => {
      entered = r;
    });
    const tx = db.transaction(async (q) => {
      await q.query(`INSERT INTO t_iso VALUES ('rolled back')`);
      entered();
      await held;
      throw new Error('roll back');
    });
    await inside;
    // issued while the transaction is open, from another flow: must survive its rollback
    const outside = db.query(`INSERT INTO t_iso VALUES ('kept')`);
    release();
    await expect(tx).rejects.toThrow('roll back');
    await outside;
    expect((await db.query('SELECT v FROM t_iso ORDER BY v')).rows).toEqual([{ v: 'kept' }]);
  });

  it('migration 4: prepared transactions of before it, of older instances and of this build all read back the same', async () => {
    const db = await driver.fresh({ migrate: false });
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version <= 3),
    );
    const w = '00000000-0000-4000-8000-0000000000aa';
    await db.query(
      `INSERT INTO withdrawals (id, caller, idempotency_key, request_hash, party, receiver, amount, command_id)
       VALUES ($1, 'c', 'k', $2, 'p::1220aa', 'r::1220bb', 1, 'cmd-m4')`,
      [w, 'cd'.repeat(32)],
    );
    const originals = [
      Buffer.from([0, 1, 2, 250, 251, 252, 253, 254, 255, 10, 13]),
      Buffer.from('an older instance, after the migration'),
      Buffer.from([255, 0, 255, 0, 7]),
    ];
    const oldInsert = (id: string, bytes: Buffer) =>
      db.query(
        `INSERT INTO prepared_transactions (id, withdrawal_id, attempt, hash, hashing_scheme, bytes, created_at)
         VALUES ($1, $2, 1, $3, 'v2', $4, $5)`,
        [id, w, 'ab'.repeat(32), bytes.toString('base64'), `2026-01-01T00:00:0${id.slice(-1)}Z`],
      );
    // written by the older build before the upgrade
    await oldInsert('00000000-0000-4000-8000-000000000001', originals[0]!);
    expect(await migrate(db)).toEqual({
      applied: MIGRATIONS.filter((m) => m.version > 3).map((m) => m.version),
      version: LATEST,
    });
    // an instance of the older build still running during a rolling upgrade: same statement, still works
    await oldInsert('00000000-0000-4000-8000-000000000002', originals[1]!);
    // this build
    const store = storeOn(db);
    await store.artifacts.recordPrepared({
      withdrawalId: w,
      hash: 'ab'.repeat(32),
      hashingScheme: 'v2',
      bytes: originals[2]!.toString('base64'),
    });
    const read = await store.artifacts.preparedFor(w);
    expect(read.map((p) => p.bytes)).toEqual(originals.map((b) => b.toString('base64')));
    const stored = await db.query<{ text: boolean; raw: boolean }>(
      `SELECT bytes IS NOT NULL AS text, bytes_raw IS NOT NULL AS raw FROM prepared_transactions ORDER BY created_at`,
    );
    expect(stored.rows).toEqual([
      { text: true, raw: false },
      { text: true, raw: false },
      { text: false, raw: true },
    ]);
    // exactly one of the two
    for (const [text, raw] of [
      [null, null],
      ['AAEC', Buffer.from([0, 1, 2])],
    ])
      await expect(
        db.query(
          `INSERT INTO prepared_transactions (id, request_id, hash, hashing_scheme, bytes, bytes_raw)
           VALUES (gen_random_uuid(), 'r', $1, 'v2', $2, $3)`,
          ['ab'.repeat(32), text, raw],
        ),
      ).rejects.toMatchObject({ code: '23514' });
  });
});

describe('embedded database maintenance', () => {
  const open: Db[] = [];
  afterAll(async () => {
    for (const d of open) await d.close().catch(() => {});
  });

  async function churned(every: number, reports: MaintenanceReport[]): Promise<Db> {
    const db = await openPglite('memory', {
      loadDataDir: await pgliteTemplateBlob(),
      maintenance: { every, onRun: (r) => reports.push(r) },
    });
    open.push(db);
    await db.query('CREATE TABLE churn (id int PRIMARY KEY, n int NOT NULL)');
    await db.query('INSERT INTO churn VALUES (1, 0), (2, 0), (3, 0)');
    await db.query('CREATE TABLE still (id int PRIMARY KEY, n int NOT NULL)');
    await db.query('INSERT INTO still SELECT g, 0 FROM generate_series(1, 1000) g');
    return db;
  }

  const stats = async (db: Db, table: string) =>
    (
      await db.query<{ reltuples: number; relallvisible: number; columnStats: number }>(
        `SELECT reltuples::float8 AS reltuples, relallvisible,
                (SELECT count(*)::int FROM pg_stats WHERE tablename = $1) AS "columnStats"
           FROM pg_class WHERE relname = $1`,
        [table],
      )
    ).rows[0];

  it('vacuums and analyzes the tables past their thresholds, never inside a transaction', async () => {
    const reports: MaintenanceReport[] = [];
    const db = await churned(100, reports);
    expect(await stats(db, 'churn')).toEqual({ reltuples: -1, relallvisible: 0, columnStats: 0 });
    // 120 updates of 3 rows in one transaction: a check is due midway, but the transaction is not interrupted
    await db.transaction(async (tx) => {
      for (let i = 0; i < 120; i++)
        await tx.query('UPDATE churn SET n = n + $1 WHERE id = $2', [1, 1 + (i % 3)]);
    });
    expect(reports).toEqual([]);
    // the next statement queues the check behind itself; the one after waits for it
    await db.query('SELECT n FROM churn WHERE id = $1', [1]);
    expect((await db.query<{ n: number }>('SELECT sum(n)::int AS n FROM churn')).rows[0]?.n).toBe(120);
    expect(reports).toEqual([
      // `still`: 1,000 rows inserted, none dead: analyzed only
      { ok: true, ms: expect.any(Number), vacuumed: ['churn'], analyzed: ['churn', 'still'] },
    ]);
    // ANALYZE gathered column statistics; VACUUM marked the page all-visible
    expect(await stats(db, 'churn')).toEqual({ reltuples: 3, relallvisible: 1, columnStats: 2 });
    expect((await stats(db, 'still'))?.columnStats).toBe(2);
  });

  it('checks again only after `every` statements, and leaves tables under their thresholds alone', async () => {
    const reports: MaintenanceReport[] = [];
    const db = await churned(100, reports);
    for (let i = 0; i < 101; i++) await db.query('UPDATE churn SET n = n + 1 WHERE id = $1', [1]);
    await db.query('SELECT 1');
    expect(reports.map((r) => [r.vacuumed, r.analyzed])).toEqual([[['churn'], ['churn', 'still']]]);
    // fewer than 100 statements since that check (the 5 after it, 90 now): none yet, however many dead rows
    for (let i = 0; i < 90; i++) await db.query('UPDATE churn SET n = n + 1 WHERE id = $1', [2]);
    expect(reports).toHaveLength(1);
    // 60 updates of `still` (under 50 + 20 % of 1,000 dead, under 50 + 10 % changed) and churn's again
    for (let i = 0; i < 60; i++) await db.query('UPDATE still SET n = n + 1 WHERE id = $1', [i + 1]);
    await db.query('SELECT 1');
    expect(reports.map((r) => [r.vacuumed, r.analyzed])).toEqual([
      [['churn'], ['churn', 'still']],
      [['churn'], ['churn']],
    ]);
  });

  it('by default checks every 5,000 statements; `maintenance: false` never does', async () => {
    for (const maintenance of [undefined, false] as const) {
      const db = await openPglite('memory', {
        loadDataDir: await pgliteTemplateBlob(),
        ...(maintenance === false ? { maintenance } : {}),
      });
      open.push(db);
      await db.query('CREATE TABLE churn (id int PRIMARY KEY, n int NOT NULL)');
      await db.query('INSERT INTO churn VALUES (1, 0), (2, 0), (3, 0)');
      for (let i = 0; i < 5_000; i++)
        await db.query('UPDATE churn SET n = n + 1 WHERE id = $1', [1 + (i % 3)]);
      await db.query('SELECT 1');
      expect((await stats(db, 'churn'))?.columnStats, String(maintenance)).toBe(
        maintenance === false ? 0 : 2,
      );
    }
  });

  it('refuses a maintenance interval that is not a whole number above 0', async () => {
    for (const every of [0, -1, 1.5, Number.NaN])
      await expect(openPglite('memory', { maintenance: { every } })).rejects.toThrow(/maintenance\.every/);
  });
});

describe('timestamptz parsing', () => {
  it('handles every offset form PostgreSQL prints', () => {
    expect(parseTimestamptz('2024-01-01 00:00:00+00')).toBe('2024-01-01T00:00:00.000Z');
    expect(parseTimestamptz('2024-01-01 00:00:00.123456+00')).toBe('2024-01-01T00:00:00.123Z');
    expect(parseTimestamptz('2024-01-01 05:30:00.1+05:30')).toBe('2024-01-01T00:00:00.100Z');
    expect(parseTimestamptz('2023-12-31 20:00:00-04')).toBe('2024-01-01T00:00:00.000Z');
    expect(parseTimestamptz('1900-01-01 00:00:00+00:09:21')).toBe('1899-12-31T23:50:39.000Z');
    expect(() => parseTimestamptz('infinity')).toThrow(/unexpected timestamptz/);
  });

  it('reads a UTC value as the Date of its instant prints it, whatever its fraction and form', () => {
    // 4,000 instants from 1901 to 2199, in the forms a UTC session prints (and their variants).
    for (let i = 0; i < 4000; i++) {
      const ms = Date.UTC(1901, 0, 1) + Math.floor(((i * 2654435761) % 9_400_000_000) * 1000 + (i % 1000));
      const iso = new Date(ms).toISOString();
      const [date, rest] = iso.slice(0, -1).split('T') as [string, string];
      const micros = `${rest}${String(i % 1000).padStart(3, '0')}`;
      const noFraction = new Date(Math.floor(ms / 1000) * 1000).toISOString();
      expect(parseTimestamptz(`${date} ${micros}+00`)).toBe(iso);
      expect(parseTimestamptz(`${date}T${rest}-00:00`)).toBe(iso);
      expect(parseTimestamptz(`${date} ${rest}Z`)).toBe(iso);
      expect(parseTimestamptz(`${date} ${rest.slice(0, 8)}+00`)).toBe(noFraction);
    }
  });
});

describe.runIf(drivers.some((d) => d.name === 'postgres'))('several instances on one PostgreSQL', () => {
  it('starting at once: every instance migrates successfully, each migration applied once', async () => {
    const t = await createPostgresDatabase();
    try {
      const handles = await Promise.all(Array.from({ length: 5 }, () => t.open({ migrate: false })));
      const results = await Promise.all(handles.map((h) => migrate(h)));
      expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
      for (const r of results) expect(r.version).toBe(LATEST);
      const rows = await handles[0]!.query('SELECT version FROM schema_migrations');
      expect(rows.rows).toHaveLength(MIGRATIONS.length);
      // and through openDatabase, as `serve` does
      const more = await Promise.all([openDatabase({ url: t.url }), openDatabase({ url: t.url })]);
      for (const m of more) {
        expect(m.kind).toBe('postgres');
        expect(await schemaVersion(m)).toBe(LATEST);
        await m.close();
      }
    } finally {
      await t.drop();
    }
  });
});

describe('openDatabase', () => {
  it('uses PGlite under dataDir when no URL is set, and the data persists across reopen', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-open-'));
    const saved = process.env.DATABASE_URL;
    delete process.env.DATABASE_URL;
    try {
      const data = join(dir, 'data');
      // seed the folder from the template (skips a slow initdb), then open it the way the service does
      const seed = await openPglite(data, { loadDataDir: await pgliteTemplateBlob() });
      await seed.close();
      let db = await openDatabase({ dataDir: data });
      expect(db.kind).toBe('pglite');
      expect(db.location).toBe(data);
      await appendAudit(db, { actor: 't', action: 'persisted' });
      await db.close();
      db = await openDatabase({ dataDir: data });
      expect(await schemaVersion(db)).toBe(LATEST);
      const v = await verifyAudit(db);
      expect(v).toMatchObject({ ok: true, rows: 1 });
      await db.close();
    } finally {
      if (saved !== undefined) process.env.DATABASE_URL = saved;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.runIf(drivers.some((d) => d.name === 'postgres'))('uses DATABASE_URL when set', async () => {
    const t = await createPostgresDatabase();
    const saved = process.env.DATABASE_URL;
    process.env.DATABASE_URL = t.url;
    try {
      const db = await openDatabase({ dataDir: '/nonexistent/never-created' });
      expect(db.kind).toBe('postgres');
      expect(await schemaVersion(db)).toBe(LATEST);
      await db.close();
    } finally {
      if (saved === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = saved;
      await t.drop();
    }
  });

  it('names the server, never the password, when PostgreSQL is unreachable', async () => {
    const e = await openDatabase({ url: 'postgresql://u:s3cret-pw@127.0.0.1:1/x' }).catch((x) => x);
    expect((e as Error).message).toMatch(
      /cannot connect to PostgreSQL at postgresql:\/\/u:REDACTED@127\.0\.0\.1:1\/x/,
    );
    expect((e as Error).message).not.toContain('s3cret-pw');
    // A password in the query string (the pg driver reads ?password= and sslpassword=) is hidden too.
    const q = await openDatabase({
      url: 'postgresql://u@127.0.0.1:1/x?password=qs3cret&sslpassword=ssl3cret&application_name=cs',
    }).catch((x) => x);
    expect((q as Error).message).toMatch(/password=REDACTED/);
    expect((q as Error).message).toMatch(/application_name=cs/);
    expect((q as Error).message).not.toMatch(/qs3cret|ssl3cret/);
  });
});

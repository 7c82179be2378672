/**
 * The audit hash chain on both drivers: 100 appends verify; then each kind
 * of tampering (details edited, row removed, two rows' seq swapped, a hash
 * changed, the tail cut, a row rewritten with its hash recomputed) is
 * reported at the right seq; concurrent appends (two handles on one
 * PostgreSQL; many promises on one handle) keep one contiguous chain; the
 * table refuses UPDATE / DELETE / TRUNCATE; `canton-signer audit verify`.
 */
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { AUDIT_GENESIS, appendAudit, auditHash, listAudit, verifyAudit } from '../../src/store/audit.js';
import { type Db, openPglite } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { storeDrivers } from '../support/pg.js';

const drivers = await storeDrivers();

/** Every file under `path` with its mode and a hash of its bytes (and the folder's own mode): what "unchanged" compares. */
function snapshot(path: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string, rel: string) => {
    const st = lstatSync(p);
    out[rel] =
      `${st.mode.toString(8)} ${st.isFile() ? createHash('sha256').update(readFileSync(p)).digest('hex') : ''}`;
    if (st.isDirectory()) for (const n of readdirSync(p)) walk(join(p, n), `${rel}/${n}`);
  };
  walk(path, '.');
  return out;
}

async function fill(db: Db, count: number, actor = 'tester'): Promise<void> {
  for (let i = 1; i <= count; i++)
    await appendAudit(db, {
      actor,
      action: i % 3 ? 'withdrawal.create' : 'flow.signed',
      subject: `withdrawal:${i}`,
      details: {
        i,
        hash: (i % 256).toString(16).padStart(2, '0').repeat(32),
        nested: { z: 1, a: [true, null, 'x'] },
      },
    });
}

/** Runs SQL on the audit table with its append-only triggers off (what an attacker with owner rights can do). */
async function tamper(db: Db, ...statements: [string, unknown[]?][]): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('SET LOCAL session_replication_role = replica');
    for (const [sql, params] of statements) await tx.query(sql, params ?? []);
  });
}

/** Empties the log and rewinds the head (test set-up only). */
async function reset(db: Db): Promise<void> {
  await tamper(db, ['DELETE FROM audit_log'], ['UPDATE audit_head SET seq = 0, hash = $1', [AUDIT_GENESIS]]);
}

describe.each(drivers)('audit log on $name', (driver) => {
  // One database per driver, emptied before each test (a PGlite start costs seconds).
  let db: Db;
  beforeAll(async () => {
    db = await driver.fresh();
  });
  beforeEach(async () => {
    await reset(db);
  });
  afterAll(async () => {
    await driver.cleanup();
  });

  it('100 appends form a contiguous chain that verifies', async () => {
    await fill(db, 100);
    const v = await verifyAudit(db, { batch: 7 });
    expect(v).toMatchObject({ ok: true, rows: 100, head: { seq: 100 } });
    const rows = await listAudit(db, { limit: 1000 });
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(rows[0]!.prevHash).toBe(AUDIT_GENESIS);
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.prevHash).toBe(rows[i - 1]!.hash);
    for (const r of rows) expect(auditHash(r)).toBe(r.hash);
    expect(rows[2]).toMatchObject({ actor: 'tester', action: 'flow.signed', subject: 'withdrawal:3' });
    expect(rows[2]!.details).toEqual({ i: 3, hash: '03'.repeat(32), nested: { a: [true, null, 'x'], z: 1 } });
    expect(rows[2]!.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    if (v.ok) expect(v.head.hash).toBe(rows[99]!.hash);
    expect(await listAudit(db, { subject: 'withdrawal:7' })).toHaveLength(1);
  });

  it('an empty log verifies', async () => {
    expect(await verifyAudit(db)).toEqual({ ok: true, rows: 0, head: { seq: 0, hash: AUDIT_GENESIS } });
  });

  it('the table refuses UPDATE, DELETE and TRUNCATE', async () => {
    await fill(db, 3);
    await expect(db.query(`UPDATE audit_log SET actor = 'x' WHERE seq = 2`)).rejects.toThrow(/append-only/);
    await expect(db.query('DELETE FROM audit_log WHERE seq = 3')).rejects.toThrow(/append-only/);
    await expect(db.query('TRUNCATE audit_log')).rejects.toThrow(/append-only/);
    expect((await verifyAudit(db)).ok).toBe(true);
  });

  const cases: {
    name: string;
    seq: number;
    problem: string;
    message: RegExp;
    run: (d: Db) => Promise<void>;
  }[] = [
    {
      name: "a row's details edited",
      seq: 42,
      problem: 'edited',
      message: /seq 42 .*edited/,
      run: (db) => tamper(db, [`UPDATE audit_log SET details = '{"i": 4242}' WHERE seq = 42`]),
    },
    {
      name: "a row's actor edited",
      seq: 1,
      problem: 'edited',
      message: /seq 1 .*edited/,
      run: (db) => tamper(db, [`UPDATE audit_log SET actor = 'mallory' WHERE seq = 1`]),
    },
    {
      name: "a row's time edited",
      seq: 77,
      problem: 'edited',
      message: /seq 77/,
      run: (db) => tamper(db, [`UPDATE audit_log SET at = at - interval '1 hour' WHERE seq = 77`]),
    },
    {
      name: 'a row removed',
      seq: 50,
      problem: 'removed',
      message: /seq 50 is missing/,
      run: (db) => tamper(db, ['DELETE FROM audit_log WHERE seq = 50']),
    },
    {
      name: 'several rows removed',
      seq: 10,
      problem: 'removed',
      message: /seq 10\.\.12 are missing/,
      run: (db) => tamper(db, ['DELETE FROM audit_log WHERE seq BETWEEN 10 AND 12']),
    },
    {
      name: "two rows' seq swapped",
      seq: 60,
      problem: 'reordered',
      message: /seq 60 holds the entry written as seq 61/,
      run: (db) =>
        tamper(
          db,
          ['UPDATE audit_log SET seq = 1000000 WHERE seq = 60'],
          ['UPDATE audit_log SET seq = 60 WHERE seq = 61'],
          ['UPDATE audit_log SET seq = 61 WHERE seq = 1000000'],
        ),
    },
    {
      name: 'a hash changed',
      seq: 33,
      problem: 'hash',
      message: /seq 33: its stored hash was changed/,
      run: (db) => tamper(db, [`UPDATE audit_log SET hash = $1 WHERE seq = 33`, ['e'.repeat(64)]]),
    },
    {
      name: 'the last row removed (tail cut)',
      seq: 100,
      problem: 'removed',
      message: /seq 100 is missing .*head records seq 100/,
      run: (db) => tamper(db, ['DELETE FROM audit_log WHERE seq = 100']),
    },
    {
      name: 'a row rewritten with its own hash recomputed',
      seq: 21,
      problem: 'link',
      message: /seq 21 does not link to seq 20/,
      run: async (db) => {
        const [row] = await listAudit(db, { afterSeq: 19, limit: 1 });
        const forged = { ...row!, details: { i: 20, forged: true } };
        await tamper(db, [
          'UPDATE audit_log SET details = $1, hash = $2 WHERE seq = 20',
          [JSON.stringify(forged.details), auditHash(forged)],
        ]);
      },
    },
    {
      name: 'a row inserted at the end without the head',
      seq: 101,
      problem: 'head',
      message: /after seq 100/,
      run: async (db) => {
        const [last] = await listAudit(db, { afterSeq: 99, limit: 1 });
        const extra = {
          seq: 101,
          at: last!.at,
          actor: 'mallory',
          action: 'x',
          subject: null,
          details: {},
          prevHash: last!.hash,
        };
        await tamper(db, [
          'INSERT INTO audit_log (seq, at, actor, action, subject, details, prev_hash, hash) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)',
          [101, extra.at, extra.actor, extra.action, null, '{}', extra.prevHash, auditHash(extra)],
        ]);
      },
    },
  ];

  for (const c of cases) {
    it(`detects ${c.name} at seq ${c.seq}`, async () => {
      await fill(db, 100);
      expect((await verifyAudit(db)).ok).toBe(true);
      await c.run(db);
      const v = await verifyAudit(db, { batch: 16 });
      expect(v.ok).toBe(false);
      if (v.ok) return;
      expect({ seq: v.seq, problem: v.problem }).toEqual({ seq: c.seq, problem: c.problem });
      expect(v.message).toMatch(c.message);
    });
  }

  it('concurrent appends keep one contiguous chain (two handles on PostgreSQL, many promises on each)', async () => {
    const a = db;
    const b = driver.another ? await driver.another() : a;
    await Promise.all([
      ...Array.from({ length: 60 }, (_, i) => appendAudit(a, { actor: 'a', action: 'x', subject: `a${i}` })),
      ...Array.from({ length: 60 }, (_, i) => appendAudit(b, { actor: 'b', action: 'x', subject: `b${i}` })),
    ]);
    const v = await verifyAudit(a);
    expect(v).toMatchObject({ ok: true, rows: 120 });
    const rows = await listAudit(b, { limit: 1000 });
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    expect(new Set(rows.map((r) => r.subject)).size).toBe(120);
  });

  it('an append rolled back with its transaction leaves no gap', async () => {
    await fill(db, 2);
    await expect(
      db.transaction(async (tx) => {
        await appendAudit(tx, { actor: 't', action: 'doomed' });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    await appendAudit(db, { actor: 't', action: 'after' });
    const rows = await listAudit(db);
    expect(rows.map((r) => [r.seq, r.action])).toEqual([
      [1, 'withdrawal.create'],
      [2, 'withdrawal.create'],
      [3, 'after'],
    ]);
    expect((await verifyAudit(db)).ok).toBe(true);
  });

  it('stores what it hashes: NUL characters and undefined members are normalised', async () => {
    const row = await appendAudit(db, {
      actor: 'a\u0000b',
      action: 'x',
      details: { s: 'nul\u0000here', keep: '\\u0000', gone: undefined, n: 1.5, big: 1e21 },
    });
    expect(row.actor).toBe('a\ufffdb');
    expect(row.details).toEqual({ s: 'nul\ufffdhere', keep: '\\u0000', n: 1.5, big: 1e21 });
    expect((await listAudit(db))[0]).toEqual(row);
    expect((await verifyAudit(db)).ok).toBe(true);
  });
});

describe('canton-signer audit verify', () => {
  async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const out = vi.spyOn(process.stdout, 'write').mockImplementation((s) => {
      stdout += String(s);
      return true;
    });
    const err = vi.spyOn(process.stderr, 'write').mockImplementation((s) => {
      stderr += String(s);
      return true;
    });
    try {
      const code = await main(['node', 'canton-signer', ...args]);
      return { code, stdout, stderr };
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  }

  it('exit 0 on an intact PGlite folder, 1 naming the row once tampered, 2 without a database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-audit-cli-'));
    try {
      const data = join(dir, 'data');
      const { pgliteTemplateBlob } = await import('../support/pg.js');
      let db = await openPglite(data, { loadDataDir: await pgliteTemplateBlob() });
      await migrate(db);
      await fill(db, 12);
      await db.close();
      let r = await cli(['audit', 'verify', '--data-dir', data]);
      expect(r).toMatchObject({ code: 0, stderr: '' });
      expect(r.stdout).toMatch(/^audit log intact: 12 rows; head seq 12 hash [0-9a-f]{64}\n$/);
      r = await cli(['audit', 'verify', '--data-dir', data, '--json']);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, rows: 12, head: { seq: 12 } });

      db = await openPglite(data);
      await tamper(db, [`UPDATE audit_log SET subject = 'withdrawal:999' WHERE seq = 7`]);
      await db.close();
      r = await cli(['audit', 'verify', '--data-dir', data]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^canton-signer: audit log BROKEN at seq 7 \(edited\): .*seq 7/);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      r = await cli(['audit', 'verify', '--data-dir', data, '--json']);
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: false, seq: 7, problem: 'edited' });

      r = await cli(['audit', 'verify', '--data-dir', join(dir, 'nothing-here')]);
      expect(r.code).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a folder without a database is left exactly as it was: nothing created, exit 2 saying so', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-audit-none-'));
    try {
      const empty = join(dir, 'empty');
      mkdirSync(empty, { mode: 0o777 });
      const other = join(dir, 'other');
      mkdirSync(other);
      writeFileSync(join(other, 'notes.txt'), 'not a database\n');
      for (const folder of [empty, other]) {
        const before = snapshot(folder);
        const r = await cli(['audit', 'verify', '--data-dir', folder]);
        expect(r.code).toBe(2);
        expect(r.stdout).toBe('');
        expect(r.stderr).toBe(
          `canton-signer: ${folder} holds no canton-signer database (use --data-dir, --database-url or --config)\n`,
        );
        expect(snapshot(folder)).toEqual(before);
      }
      const missing = join(dir, 'missing');
      const r = await cli(['audit', 'verify', '--data-dir', missing]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^canton-signer: no database at .*missing: no such folder/);
      expect(existsSync(missing)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a deleted audit table is a broken log (exit 1), not an internal error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-audit-dropped-'));
    try {
      const data = join(dir, 'data');
      const { pgliteTemplateBlob } = await import('../support/pg.js');
      const db = await openPglite(data, { loadDataDir: await pgliteTemplateBlob() });
      await migrate(db);
      await fill(db, 3);
      await db.query('DROP TABLE audit_log CASCADE');
      await db.close();
      let r = await cli(['audit', 'verify', '--data-dir', data]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        "canton-signer: audit log BROKEN at seq 1 (missing): the audit log's table audit_log is missing: the log was deleted (dropped)\n",
      );
      r = await cli(['audit', 'verify', '--data-dir', data, '--json']);
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: false, seq: 1, problem: 'missing', rows: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a folder a running service holds: exit 75 naming the holder and the command that asks the service', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-audit-held-'));
    try {
      const data = join(dir, 'data');
      const { pgliteTemplateBlob } = await import('../support/pg.js');
      const db = await openPglite(data, { loadDataDir: await pgliteTemplateBlob() });
      try {
        await migrate(db);
        const r = await cli(['audit', 'verify', '--data-dir', data]);
        expect(r.code).toBe(75);
        expect(r.stderr).toContain(`is in use by process ${process.pid} on `);
        expect(r.stderr).toContain('canton-signer audit verify --url http://127.0.0.1:8080');
        expect(r.stderr).toContain('CANTON_SIGNER_TOKEN');
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
      } finally {
        await db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--database-url other than postgres:// or postgresql:// is a usage error (exit 2), nothing is tried', async () => {
    for (const url of ['mysql://x', 'mysql://user:secret@db.example/x', 'not a url']) {
      const r = await cli(['audit', 'verify', '--database-url', url]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        'canton-signer: --database-url: must be a postgres:// or postgresql:// URL with a host\n',
      );
    }
  });

  it('without --data-dir or --database-url, finds the database where the service configuration puts it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-audit-config-'));
    const names = [
      'CANTON_SIGNER_CONFIG',
      'CANTON_SIGNER_DATABASE_URL',
      'DATABASE_URL',
      'CANTON_SIGNER_DATA_DIR',
    ] as const;
    const saved = names.map((n) => [n, process.env[n]] as const);
    for (const n of names) delete process.env[n];
    try {
      const data = join(dir, 'data');
      const { pgliteTemplateBlob } = await import('../support/pg.js');
      const db = await openPglite(data, { loadDataDir: await pgliteTemplateBlob() });
      await migrate(db);
      await fill(db, 3);
      await db.close();
      // a file whose dataDir is relative to the file; settings `audit verify` does not use are not checked
      mkdirSync(join(dir, 'conf'));
      const file = join(dir, 'conf', 'service.json');
      writeFileSync(file, JSON.stringify({ database: { dataDir: '../data' }, auth: { unchecked: true } }));
      let r = await cli(['audit', 'verify', '--config', file, '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, rows: 3 });
      process.env.CANTON_SIGNER_CONFIG = file;
      r = await cli(['audit', 'verify', '--json']);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, rows: 3 });
      delete process.env.CANTON_SIGNER_CONFIG;
      process.env.CANTON_SIGNER_DATA_DIR = data;
      r = await cli(['audit', 'verify', '--json']);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, rows: 3 });
      // the environment's URL wins over the folder, as for `serve`; a bad one is named
      process.env.CANTON_SIGNER_DATABASE_URL = 'mysql://elsewhere/db';
      r = await cli(['audit', 'verify']);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('CANTON_SIGNER_DATABASE_URL');
      // an explicit folder wins over every setting
      r = await cli(['audit', 'verify', '--data-dir', data, '--json']);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, rows: 3 });
    } finally {
      for (const [n, v] of saved) {
        if (v === undefined) delete process.env[n];
        else process.env[n] = v;
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.runIf(drivers.some((d) => d.name === 'postgres'))('reads PostgreSQL with --database-url', async () => {
    const { createPostgresDatabase } = await import('../support/pg.js');
    const t = await createPostgresDatabase();
    try {
      const db = await t.open();
      await fill(db, 5);
      let r = await cli(['audit', 'verify', '--database-url', t.url, '--json']);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, rows: 5 });
      await tamper(db, ['DELETE FROM audit_log WHERE seq = 3']);
      r = await cli(['audit', 'verify', '--database-url', t.url]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/BROKEN at seq 3 \(removed\).*seq 3 is missing/);
      r = await cli(['audit', 'verify', '--database-url', 'postgresql://postgres@127.0.0.1:1/none']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/cannot connect/);
    } finally {
      await t.drop();
    }
  });
});

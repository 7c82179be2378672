/**
 * Databases for the store tests: PGlite in memory (always), and a throw-away
 * PostgreSQL database per test file on the server at
 * postgresql://postgres@127.0.0.1:5432 (override with TEST_PG_ADMIN_URL):
 * `CREATE DATABASE cs_test_<random>`, dropped by `drop()`.
 *
 * Policy (as for SoftHSM): PostgreSQL unreachable in CI (CI set) fails the
 * suite; locally the PostgreSQL half is skipped with a loud warning.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { cp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { expect } from 'vitest';
import { type Db, dumpPglite, openPglite, openPostgres } from '../../src/store/db.js';
import { MIGRATIONS, migrate, migrationChecksum } from '../../src/store/migrations.js';

export const PG_ADMIN_URL = process.env.TEST_PG_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

async function reachable(): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    await c.end().catch(() => {});
  }
}

/**
 * true when PostgreSQL can be used. Unreachable: throws in CI; locally warns
 * and returns false (use with describe.each over the available drivers).
 */
export async function requirePostgres(): Promise<boolean> {
  const problem = await reachable();
  if (!problem) return true;
  if (process.env.CI)
    throw new Error(`PostgreSQL is required in CI for the store tests (${PG_ADMIN_URL}): ${problem}`);
  console.warn(
    `\n*** POSTGRESQL STORE TESTS SKIPPED: ${PG_ADMIN_URL} unreachable (${problem}).\n` +
      '*** Run PostgreSQL on 127.0.0.1:5432 with trust auth for user postgres to run them.\n',
  );
  return false;
}

export interface TestDatabase {
  /** URL of the throw-away database. */
  url: string;
  /** Opens a new handle (pool) on it; closed by drop(). */
  open(opts?: { migrate?: boolean }): Promise<Db>;
  drop(): Promise<void>;
}

/** A fresh database `cs_test_<random>` on the test server. */
export async function createPostgresDatabase(): Promise<TestDatabase> {
  const name = `cs_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${name}`;
  const url = u.toString();
  const handles: Db[] = [];
  return {
    url,
    open: async (opts = {}) => {
      const db = await openPostgres(url, { max: 8 });
      handles.push(db);
      if (opts.migrate !== false) await migrate(db);
      return db;
    },
    drop: async () => {
      for (const h of handles) await h.close().catch(() => {});
      const a = new pg.Client({ connectionString: PG_ADMIN_URL });
      await a.connect();
      try {
        await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}

/** One driver under test: `fresh()` gives a new, empty, migrated database handle. */
export interface Driver {
  name: 'pglite' | 'postgres';
  fresh(opts?: { migrate?: boolean }): Promise<Db>;
  /** A second handle on the database `fresh()` last returned (PostgreSQL only). */
  another?(): Promise<Db>;
  cleanup(): Promise<void>;
}

/** A tarball kept in the temp dir under a name keyed by `what`; `make` writes it when it is not there yet. */
async function cachedBlob(what: string, make: () => Promise<Blob>): Promise<Blob> {
  const tag = createHash('sha256').update(what).digest('hex').slice(0, 16);
  const path = join(tmpdir(), `canton-signer-pglite-template-${tag}.tar.gz`);
  if (!existsSync(path)) {
    const blob = await make();
    const tmp = `${path}.${randomBytes(4).toString('hex')}`;
    writeFileSync(tmp, Buffer.from(await blob.arrayBuffer()));
    renameSync(tmp, path);
  }
  return new Blob([readFileSync(path)]);
}

function pgliteVersion(): string {
  const pkg = JSON.parse(
    readFileSync(new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url), 'utf8'),
  ) as { version: string };
  return pkg.version;
}

/**
 * An empty PGlite cluster as a tarball. initdb takes 5-15 s in PGlite, so the
 * first test file to need one makes it and leaves it in the temp dir for the
 * others (keyed by the PGlite version); loading it takes about a second.
 */
export async function pgliteTemplateBlob(): Promise<Blob> {
  return cachedBlob(`pglite ${pgliteVersion()} utc`, async () => {
    const db = await openPglite('memory');
    const blob = await dumpPglite(db);
    await db.close();
    return blob;
  });
}

/**
 * The empty cluster with this build's migrations applied, kept like the empty
 * one (keyed also by every migration's statements, so a changed migration makes
 * a new one): a test database that starts migrated skips the few hundred
 * milliseconds of creating the schema. `fresh()` still runs the migrations on
 * it, which then checks what is applied against this build.
 */
export async function pgliteMigratedBlob(): Promise<Blob> {
  const migrations = MIGRATIONS.map((m) => `${m.version} ${m.name} ${migrationChecksum(m)}`).join('\n');
  return cachedBlob(`pglite ${pgliteVersion()} utc migrated\n${migrations}`, async () => {
    const db = await openPglite('memory', { loadDataDir: await pgliteTemplateBlob() });
    await migrate(db);
    const blob = await dumpPglite(db);
    await db.close();
    return blob;
  });
}

/**
 * A copy of an embedded database folder (PGlite's cluster, migrated by this
 * build) in `dir`, for a `serve` child process whose test is about something
 * else than a first start: the process opens it as an existing database and
 * skips initdb (5-15 s of CPU each, the larger part of such a test). The
 * folder is made once per machine in the temp dir (keyed like the tarballs
 * above, from the migrated one). A test about a fresh folder (the files the
 * engine makes, `npm start` on a fresh clone) must start on an empty one.
 */
export async function seedPgliteDir(dir: string): Promise<void> {
  const migrations = MIGRATIONS.map((m) => `${m.version} ${m.name} ${migrationChecksum(m)}`).join('\n');
  const tag = createHash('sha256')
    .update(`pglite ${pgliteVersion()} utc migrated folder\n${migrations}`)
    .digest('hex')
    .slice(0, 16);
  const template = join(tmpdir(), `canton-signer-pglite-folder-${tag}`);
  if (!existsSync(template)) {
    const tmp = `${template}.${randomBytes(4).toString('hex')}`;
    const db = await openPglite(tmp, { loadDataDir: await pgliteMigratedBlob(), maintenance: false });
    await db.close();
    try {
      renameSync(tmp, template);
    } catch {
      // another test file made it meanwhile
      await rm(tmp, { recursive: true, force: true });
    }
  }
  await cp(template, dir, { recursive: true });
}

export function pgliteDriver(): Driver {
  const open: Db[] = [];
  return {
    name: 'pglite',
    fresh: async (opts = {}) => {
      const migrated = opts.migrate !== false;
      const db = await openPglite('memory', {
        loadDataDir: await (migrated ? pgliteMigratedBlob() : pgliteTemplateBlob()),
      });
      open.push(db);
      if (migrated) expect(await migrate(db)).toEqual({ applied: [], version: MIGRATIONS.at(-1)?.version });
      return db;
    },
    cleanup: async () => {
      for (const d of open) await d.close().catch(() => {});
    },
  };
}

export function postgresDriver(): Driver {
  const dbs: TestDatabase[] = [];
  return {
    name: 'postgres',
    fresh: async (opts = {}) => {
      const t = await createPostgresDatabase();
      dbs.push(t);
      return t.open(opts);
    },
    another: async () => {
      const t = dbs.at(-1);
      if (!t) throw new Error('another() before fresh()');
      return t.open({ migrate: false });
    },
    cleanup: async () => {
      for (const t of dbs) await t.drop().catch((e) => console.warn(`dropping ${t.url}: ${e}`));
    },
  };
}

/**
 * The drivers to run a suite on: PGlite always, PostgreSQL when reachable
 * (required in CI). Call at the top of a test file (top-level await).
 */
export async function storeDrivers(): Promise<Driver[]> {
  return (await requirePostgres()) ? [pgliteDriver(), postgresDriver()] : [pgliteDriver()];
}

/** Every query node-postgres sends (one round trip each: it waits for each answer before the next). */
export function countQueries(): { sent: string[]; stop(): void } {
  const sent: string[] = [];
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function counted(this: pg.Client, q: unknown, ...rest: unknown[]) {
    const text = typeof q === 'string' ? q : (q as { text?: string }).text;
    sent.push(text ?? '?');
    return (query as (...a: unknown[]) => unknown).call(this, q, ...rest);
  } as typeof query;
  return {
    sent,
    stop: () => {
      pg.Client.prototype.query = query;
    },
  };
}

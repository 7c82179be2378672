/**
 * The database handle the store uses: one tiny `Db` interface with two
 * drivers, embedded PGlite (a data folder, or in memory) and a PostgreSQL
 * server through a `pg` pool. Both run the SAME SQL text ($1 parameters) and
 * return the same JavaScript values, because both install the same parsers:
 * `timestamptz` → ISO-8601 UTC string with milliseconds (every timestamp
 * column is `timestamptz(3)`, so the string is exact), `int8` → number
 * (refused beyond 2^53), `numeric` → string, json/jsonb → parsed.
 *
 * Transactions: `transaction(fn)` runs `fn` with a handle that must be used
 * for every statement of the transaction. PGlite has one session, so its
 * transactions are serial by construction; on PostgreSQL they run at READ
 * COMMITTED and the store takes explicit locks (row locks, advisory locks,
 * unique constraints) where it needs them; a serialization failure or a
 * deadlock is retried a few times with the whole `fn`.
 */
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { migrate } from './migrations.js';

export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<T>>;
}

export interface Db extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** Where the data lives, for messages (`memory`, a folder, or the URL without credentials). */
  readonly location: string;
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const OID = { int8: 20, numeric: 1700, timestamptz: 1184, timestamp: 1114, json: 114, jsonb: 3802 } as const;

/** PostgreSQL `timestamptz` text (any DateStyle ISO offset) → ISO-8601 UTC with milliseconds. */
export function parseTimestamptz(text: string): string {
  const m =
    /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(\.\d+)?(?:([+-])(\d{2})(?::?(\d{2}))?(?::?(\d{2}))?|Z)?$/.exec(
      text,
    );
  if (!m) throw new Error(`unexpected timestamptz value from the database: ${text}`);
  const frac = (m[3] ?? '.').slice(1).padEnd(3, '0').slice(0, 3);
  let ms = Date.parse(`${m[1]}T${m[2]}.${frac}Z`);
  if (m[4]) {
    const offset = Number(m[5]) * 3600 + Number(m[6] ?? 0) * 60 + Number(m[7] ?? 0);
    ms -= (m[4] === '-' ? -1 : 1) * offset * 1000;
  }
  return new Date(ms).toISOString();
}

function parseInt8(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${text} is beyond 2^53`);
  return n;
}

const PARSERS: Record<number, (text: string) => unknown> = {
  [OID.int8]: parseInt8,
  [OID.numeric]: (t) => t,
  [OID.timestamptz]: parseTimestamptz,
  [OID.timestamp]: (t) => t,
  [OID.json]: (t) => JSON.parse(t),
  [OID.jsonb]: (t) => JSON.parse(t),
};

/** PostgreSQL error codes that mean "run the transaction again". */
const RETRYABLE = new Set(['40001', '40P01']);

/** The SQLSTATE of a database error, when it has one. */
export function sqlState(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

// ---- PGlite ---------------------------------------------------------------------------------------

class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  constructor(
    private readonly pg: PGlite,
    readonly location: string,
  ) {}

  async query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    const r = await this.pg.query<T>(sql, params);
    return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.pg.transaction(async (t) =>
      fn({
        query: async <R>(sql: string, params: unknown[] = []) => {
          const r = await t.query<R>(sql, params);
          return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
        },
      }),
    );
  }

  dump(): Promise<Blob> {
    return this.pg.dumpDataDir('gzip') as Promise<Blob>;
  }

  async close(): Promise<void> {
    if (!this.pg.closed) await this.pg.close();
  }
}

/**
 * Embedded PostgreSQL (PGlite) in `dir`, created when missing, or in memory
 * with `'memory'`. `loadDataDir`: start from a `dumpPglite` tarball instead
 * of an empty cluster (restoring a backup; tests use it to skip initdb).
 */
export async function openPglite(dir: string | 'memory', opts: { loadDataDir?: Blob } = {}): Promise<Db> {
  let where: string | undefined;
  if (dir !== 'memory') {
    where = resolve(dir);
    mkdirSync(where, { recursive: true, mode: 0o700 });
  }
  // One options object: PGlite ignores a second argument when the first is not a string.
  const db = new PGlite({
    ...(where ? { dataDir: where } : {}),
    parsers: PARSERS,
    ...(opts.loadDataDir ? { loadDataDir: opts.loadDataDir } : {}),
  });
  await db.waitReady;
  await db.query(`SET TIME ZONE 'UTC'`);
  return new PgliteDb(db, where ?? 'memory');
}

/** A gzipped tarball of a PGlite database (a consistent copy: taken between transactions). */
export async function dumpPglite(db: Db): Promise<Blob> {
  if (!(db instanceof PgliteDb)) throw new Error('dumpPglite: not a PGlite database');
  return db.dump();
}

// ---- PostgreSQL server ----------------------------------------------------------------------------

class PostgresDb implements Db {
  readonly kind = 'postgres' as const;
  constructor(
    private readonly pool: pg.Pool,
    readonly location: string,
  ) {}

  async query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    const r = await this.pool.query(sql, params);
    return { rows: r.rows as T[], rowCount: r.rowCount ?? r.rows.length };
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        const result = await fn({
          query: async <R>(sql: string, params: unknown[] = []) => {
            const r = await client.query(sql, params);
            return { rows: r.rows as R[], rowCount: r.rowCount ?? r.rows.length };
          },
        });
        await client.query('COMMIT');
        return result;
      } catch (e) {
        try {
          await client.query('ROLLBACK');
        } catch {
          broken = true;
        }
        const state = sqlState(e);
        if (state && RETRYABLE.has(state) && attempt < 5) {
          await new Promise((r) => setTimeout(r, Math.random() * 20 * attempt));
          continue;
        }
        throw e;
      } finally {
        client.release(broken);
      }
    }
  }

  async close(): Promise<void> {
    if (!this.pool.ended) await this.pool.end();
  }
}

/** `url` without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'postgresql://(unparsable url)';
  }
}

/** A PostgreSQL server through a connection pool. Checks the connection before returning. */
export async function openPostgres(url: string, opts: { max?: number } = {}): Promise<Db> {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    options: '-c TimeZone=UTC',
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        PARSERS[oid] ??
        pg.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
    },
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  try {
    await pool.query('SELECT 1');
  } catch (e) {
    await pool.end().catch(() => {});
    throw new Error(
      `cannot connect to PostgreSQL at ${redactUrl(url)}: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  return new PostgresDb(pool, redactUrl(url));
}

export interface OpenDatabaseOptions {
  /** PostgreSQL URL; default `DATABASE_URL`. */
  url?: string;
  /** PGlite data folder when no URL is given (default `./data`), or `'memory'`. */
  dataDir?: string;
  /** Apply pending migrations (default true). */
  migrate?: boolean;
}

/** DATABASE_URL (or `url`) → PostgreSQL; otherwise PGlite under `dataDir` (default ./data). Migrated. */
export async function openDatabase(opts: OpenDatabaseOptions = {}): Promise<Db> {
  const url = opts.url ?? (process.env.DATABASE_URL || undefined);
  const db = url ? await openPostgres(url) : await openPglite(opts.dataDir ?? './data');
  if (opts.migrate !== false) {
    try {
      await migrate(db);
    } catch (e) {
      await db.close();
      throw e;
    }
  }
  return db;
}

/**
 * The database handle the store uses: one tiny `Db` interface with two
 * drivers, embedded PGlite (a data folder, or in memory) and a PostgreSQL
 * server through a `pg` pool. Both run the SAME SQL text ($1 parameters) and
 * return the same JavaScript values, because both prepare parameters with
 * node-postgres and parse columns with its type parsers plus these:
 * `timestamptz` → ISO-8601 UTC string with milliseconds (every timestamp
 * column is `timestamptz(3)`, so the string is exact), `int8` → number
 * (refused beyond 2^53), `numeric` → string, json/jsonb → parsed.
 *
 * Transactions: `transaction(fn)` runs `fn` with a handle that must be used
 * for every statement of the transaction. PGlite has one session, so its
 * statements and transactions are serialised; on PostgreSQL they run at READ
 * COMMITTED and the store takes explicit locks (row locks, advisory locks,
 * unique constraints) where it needs them; a serialization failure or a
 * deadlock is retried a few times with the whole `fn`.
 *
 * One file on purpose: the two drivers implement one small interface and share
 * the parameter preparation and the type parsers, which must stay the same for
 * both (the same SQL, the same values); apart, they could drift.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  closeSync,
  existsSync,
  fchmodSync,
  constants as fsConstants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { serialize } from 'pg-protocol';
import type {
  BackendMessage,
  CommandCompleteMessage,
  DatabaseError,
  DataRowMessage,
  RowDescriptionMessage,
} from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import { lockFolder } from './folder-lock.js';
import { migrate } from './migrations.js';

export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

export interface QueryOptions {
  /**
   * A statement without parameters run just before this one, on the same
   * session, its result dropped (e.g. taking the advisory lock that the
   * statement's own snapshot must come after). On PostgreSQL both travel in
   * one round trip, as two statements: each has its own snapshot, and the
   * second runs only if the first succeeded.
   */
  first?: string;
}

/** One statement of a `batch`. */
export interface Statement {
  sql: string;
  params?: unknown[];
}

export interface Queryable {
  query<T = Record<string, unknown>>(
    sql: string,
    params?: unknown[],
    opts?: QueryOptions,
  ): Promise<QueryResult<T>>;
  /**
   * Transaction handles only: `statements` in order, each its own statement
   * (its own snapshot under READ COMMITTED), each run only if the ones before
   * it succeeded; their results in order, or the first error (which aborts the
   * transaction, as it would have one by one). On PostgreSQL they travel in
   * one round trip (with BEGIN when they are the transaction's first).
   */
  batch?(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]>;
}

/**
 * `statements` on `q` in order (one round trip where `q` can batch them, see
 * `Queryable.batch`; one by one otherwise, stopping at the first error).
 */
export async function runBatch(
  q: Queryable,
  statements: readonly Statement[],
): Promise<QueryResult<Record<string, unknown>>[]> {
  if (q.batch) return q.batch(statements);
  const out: QueryResult<Record<string, unknown>>[] = [];
  for (const s of statements) out.push(await q.query(s.sql, s.params ?? []));
  return out;
}

export interface Db extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** Where the data lives, for messages (`memory`, a folder, or the URL without credentials). */
  readonly location: string;
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * `statements` as one transaction, each run only if the ones before it
   * succeeded, their results in order; rolled back on the first error. On
   * PostgreSQL BEGIN, the statements and COMMIT travel in one round trip (a
   * failure of that round trip, COMMIT's included, leaves it unknown whether
   * it committed, as a failing COMMIT does).
   */
  atomically(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]>;
  close(): Promise<void>;
}

/** How node-postgres turns a JavaScript value into a parameter's text (arrays, dates, JSON, …): both drivers use it. */
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as {
  prepareValue: (value: unknown) => string | Buffer | null;
};

const OID = { int8: 20, numeric: 1700, timestamptz: 1184, timestamp: 1114, json: 114, jsonb: 3802 } as const;

/**
 * PostgreSQL `timestamptz` text (any DateStyle ISO offset) → ISO-8601 UTC with milliseconds. A
 * value at offset zero (the sessions run in UTC: every value read) is rearranged as text; any
 * other offset goes through a Date.
 */
export function parseTimestamptz(text: string): string {
  const m =
    /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(\.\d+)?(?:([+-])(\d{2})(?::?(\d{2}))?(?::?(\d{2}))?|Z)?$/.exec(
      text,
    );
  if (!m) throw new Error(`unexpected timestamptz value from the database: ${text}`);
  const frac = (m[3] ?? '.').slice(1).padEnd(3, '0').slice(0, 3);
  if (!m[4] || (m[5] === '00' && (m[6] ?? '00') === '00' && (m[7] ?? '00') === '00'))
    return `${m[1]}T${m[2]}.${frac}Z`;
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

/** A transaction handle kept beyond its transaction: refused, not run in whatever holds the session then. */
const ENDED = 'a statement on a transaction handle after the transaction ended';
/** A statement on a transaction handle after one of its statements failed: refused, the transaction is over. */
const FAILED = 'a statement on a transaction handle after one of its statements failed';

/** PostgreSQL error codes that mean "run the transaction again" (and a stale prepared plan, below). */
const RETRYABLE = new Set(['40001', '40P01']);

/** The SQLSTATE of a database error, when it has one. */
export function sqlState(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

// ---- PGlite ---------------------------------------------------------------------------------------

/** At most this many statement texts are kept prepared per connection (or PGlite session); later ones run unnamed. */
const PREPARED_LIMIT = 256;
/** A prepared `SELECT *` after a migration changed the table: run the text unnamed (and its transaction again). */
function isStalePlan(e: unknown): boolean {
  if (sqlState(e) !== '0A000') return false;
  // The routine is the server's own name for the check, whatever language its messages are in.
  const routine = (e as { routine?: unknown }).routine;
  return (
    routine === 'RevalidateCachedQuery' ||
    /cached plan must not change result type/.test(String((e as Error).message))
  );
}

/**
 * PGlite through its wire protocol, one call into the engine per statement:
 * Parse, Bind, Describe, Execute and Sync sent together (PGlite's own
 * `query` makes six calls per statement, each with its own overhead, which
 * made it the largest cost of a withdrawal). Values go in as node-postgres
 * prepares them and come back through the same type parsers as the
 * PostgreSQL driver's, so both drivers return the same JavaScript values.
 *
 * PGlite has one session: statements and transactions are serialised here
 * (`exclusive`). A transaction holds the session until it ends; a statement
 * issued through the Db (not the handle) from inside a transaction's own
 * callbacks runs in that transaction, as PGlite's single session always did.
 */
class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  private tail: Promise<unknown> = Promise.resolve();
  /** The transaction whose callbacks are running (its `open` turns false when it ends). */
  private readonly inTransaction = new AsyncLocalStorage<{ open: boolean }>();

  constructor(
    private readonly pg: PGlite,
    readonly location: string,
    private readonly maintenance: Required<Pick<MaintenanceOptions, 'every'>> & MaintenanceOptions,
    /** Releases the folder's lock (folder-lock.ts); none in memory. */
    private readonly release?: () => void,
  ) {}

  /** Runs `fn` once every earlier statement or transaction finished (and maintenance when due, after it). */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => {});
    if (this.sinceMaintenance >= this.maintenance.every && !this.maintaining) this.maintain();
    return run;
  }

  /** Statements run since the last maintenance check; `maintaining`: a check is queued or running. */
  private sinceMaintenance = 0;
  private maintaining = false;

  /**
   * PGlite runs no autovacuum: without this, every updated row would leave its
   * old versions in the tables and indexes for good, and the planner would
   * plan without statistics. Every `every` statements a check is queued behind
   * the work already waiting (never inside a transaction, which holds the
   * session); it reads the tables' own counters and, with autovacuum's default
   * thresholds, vacuums each table with more than 50 + 20 % dead rows and
   * analyzes each with more than 50 + 10 % rows changed since its last
   * ANALYZE. The session waits while it runs (see docs/operations.md).
   */
  private maintain(): void {
    this.maintaining = true;
    void this.exclusive(async () => {
      const started = performance.now();
      let report: MaintenanceReport | undefined;
      try {
        if (this.pg.closed) return;
        // The counters reach the view when the session flushes them (at most once a second
        // unless asked): ask, so that this check sees the statements just run.
        await this.run('SELECT pg_stat_force_next_flush()', [], true);
        const stats = await this.run<{ name: string; live: number; dead: number; changed: number }>(
          TABLE_STATS_SQL,
          [],
          true,
        );
        const vacuumed: string[] = [];
        const analyzed: string[] = [];
        for (const t of stats.rows) {
          const vacuum = t.dead > 50 + 0.2 * t.live;
          const analyze = t.changed > 50 + 0.1 * t.live;
          if (!vacuum && !analyze) continue;
          const name = `"${t.name.replaceAll('"', '""')}"`;
          await this.run(
            vacuum ? `VACUUM${analyze ? ' (ANALYZE)' : ''} ${name}` : `ANALYZE ${name}`,
            [],
            true,
          );
          if (vacuum) vacuumed.push(t.name);
          if (analyze) analyzed.push(t.name);
        }
        if (vacuumed.length > 0 || analyzed.length > 0)
          report = { ok: true, ms: performance.now() - started, vacuumed, analyzed };
      } catch (e) {
        if (!this.pg.closed)
          report = {
            ok: false,
            ms: performance.now() - started,
            vacuumed: [],
            analyzed: [],
            error: e instanceof Error ? e.message : String(e),
          };
      } finally {
        this.sinceMaintenance = 0;
        this.maintaining = false;
      }
      // Outside the try: a throwing listener is its own problem, not a failed maintenance.
      if (report) this.maintenance.onRun?.(report);
    });
  }

  /**
   * Statement texts → their prepared statement on the session (its name, and
   * its columns once known), so that the engine parses and plans each of the
   * store's few dozen statements once rather than on every call — most of a
   * short statement's cost. As on the server driver, only statements with
   * parameters are prepared (not migrations, BEGIN or COMMIT). `null`: runs
   * unnamed (its plan went stale under a schema change).
   */
  private readonly prepared = new Map<string, Prepared | null>();

  /** One statement in one call into the engine; throws the database's error (with its SQLSTATE `code`). */
  private async run<T>(sql: string, params: readonly unknown[], sync: boolean): Promise<QueryResult<T>> {
    if (this.pg.closed) throw new Error(`the embedded database (${this.location}) is closed`);
    this.sinceMaintenance++;
    let p = this.prepared.get(sql);
    if (p === undefined && params.length > 0 && this.prepared.size < PREPARED_LIMIT) {
      p = { name: `cs_${this.prepared.size}`, parsed: false, parsing: false };
      this.prepared.set(sql, p);
    }
    // Runs unnamed while another call is preparing it (statements of one transaction may overlap).
    const named = p && (p.parsed || !p.parsing) ? p : undefined;
    const values = params.map((v) => prepareValue(v));
    const known = named?.parsed && named.fields ? named.fields : undefined;
    const parse = named !== undefined && !named.parsed;
    const message = known
      ? // Prepared, its columns known: bind and execute only.
        Buffer.concat([
          serialize.bind({ statement: named!.name, values }),
          serialize.execute({}),
          serialize.sync(),
        ])
      : Buffer.concat([
          ...(named?.parsed ? [] : [serialize.parse({ name: named?.name ?? '', text: sql })]),
          serialize.bind({ statement: named?.name ?? '', values }),
          serialize.describe({ type: 'P' }),
          serialize.execute({}),
          serialize.sync(),
        ]);
    // The answer as it streams out of the engine, each chunk copied (it is a view of the engine's
    // memory). Not `execProtocolRaw`: besides its bytes, that parses every answer into objects it
    // keeps until PGlite's own `query` next runs — never, here — so they would pile up forever.
    const chunks: Buffer[] = [];
    if (parse) named.parsing = true;
    try {
      await this.pg.execProtocolRawStream(message, {
        syncToFs: sync,
        onRawData: (chunk) => void chunks.push(Buffer.from(chunk)),
      });
    } catch (e) {
      // Whether the engine kept the statement is unknown (e.g. the data folder could not be
      // written after it ran): the text runs unnamed from now on rather than clash with its name.
      if (parse) this.prepared.set(sql, null);
      throw e;
    } finally {
      if (parse) named.parsing = false;
    }
    const out = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    try {
      return readResult<T>(out, sql, known, named);
    } catch (e) {
      // A plan made stale by a schema change (which PGlite sees only from its own session, so
      // rarely): the text runs unnamed from now on; this statement fails as PostgreSQL failed it.
      if (named && isStalePlan(e)) this.prepared.set(sql, null);
      throw e;
    }
  }

  async query<T>(sql: string, params: unknown[] = [], opts: QueryOptions = {}): Promise<QueryResult<T>> {
    if (this.inTransaction.getStore()?.open) {
      if (opts.first !== undefined) await this.run(opts.first, [], false);
      return this.run<T>(sql, params, false);
    }
    return this.exclusive(async () => {
      try {
        if (opts.first !== undefined) await this.run(opts.first, [], false);
        return await this.run<T>(sql, params, true);
      } catch (e) {
        // Once more, unnamed, when the prepared plan went stale.
        if (isStalePlan(e) && this.prepared.get(sql) === null) return this.run<T>(sql, params, true);
        throw e;
      }
    });
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(fn);
      } catch (e) {
        // A statement's prepared plan went stale (it now runs unnamed): the whole transaction
        // again, as the server driver does (each attempt may find another such statement).
        if (isStalePlan(e) && attempt < 5) continue;
        throw e;
      }
    }
  }

  atomically(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
    return this.transaction((tx) => runBatch(tx, statements));
  }

  private once<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    if (this.inTransaction.getStore()?.open)
      return Promise.reject(new Error('a PGlite transaction cannot be started inside another one'));
    // Work a transaction's callbacks leave behind (a timer, a batch scheduled then) may run after it
    // ended: it then runs as any other statement, which `open` tells.
    const self = { open: true };
    return this.exclusive(() =>
      this.inTransaction.run(self, async () => {
        try {
          await this.run('BEGIN', [], false);
          let result: T;
          // The first statement that failed: the transaction is not committed (COMMIT would only
          // roll it back, and say nothing), as on the server driver.
          let failed: { error: unknown } | undefined;
          const noted = async <R>(go: () => Promise<R>): Promise<R> => {
            try {
              return await go();
            } catch (e) {
              failed ??= { error: e };
              throw e;
            }
          };
          try {
            result = await fn({
              query: <R>(sql: string, params: unknown[] = [], opts: QueryOptions = {}) =>
                noted(async () => {
                  if (!self.open) throw new Error(ENDED);
                  if (opts.first !== undefined) await this.run(opts.first, [], false);
                  return this.run<R>(sql, params, false);
                }),
              // One call into the engine per statement, as always: the session is in this process.
              batch: (statements) =>
                noted(async () => {
                  const out: QueryResult<Record<string, unknown>>[] = [];
                  for (const st of statements) {
                    if (!self.open) throw new Error(ENDED);
                    out.push(await this.run(st.sql, st.params ?? [], false));
                  }
                  return out;
                }),
            });
            if (failed) throw failed.error;
          } catch (e) {
            // The first error is the one that matters; a failing ROLLBACK does not replace it.
            await this.run('ROLLBACK', [], true).catch(() => {});
            throw e;
          }
          await this.run('COMMIT', [], true);
          return result;
        } finally {
          self.open = false;
        }
      }),
    );
  }

  dump(): Promise<Blob> {
    // The engine's archiver reads every entry of the folder and fails on the lock's socket.
    if (this.release)
      return Promise.reject(
        new Error(
          `dumpPglite: only an in-memory database; to copy the one in ${this.location}, stop the process holding it and copy the folder`,
        ),
      );
    return this.exclusive(() => this.pg.dumpDataDir('gzip') as Promise<Blob>);
  }

  async close(): Promise<void> {
    await this.exclusive(async () => {
      if (!this.pg.closed) {
        await this.pg.close();
        this.release?.();
      }
    });
  }
}

/** The text-format parser of a column type: the same as the PostgreSQL driver's. */
function typeParser(oid: number): (text: string) => unknown {
  return PARSERS[oid] ?? (pg.types.getTypeParser(oid, 'text') as (text: string) => unknown);
}

/** A column of a statement's answer: its name and its type's text parser. */
interface Field {
  name: string;
  parse: (text: string) => unknown;
}

/**
 * A statement prepared on PGlite's session under `name` once `parsed` (`parsing`: a call is
 * preparing it now); `fields`: its columns, once described.
 */
interface Prepared {
  name: string;
  parsed: boolean;
  parsing: boolean;
  fields?: Field[];
}

/**
 * A statement's answer, from the backend messages PGlite wrote; its
 * ErrorResponse thrown. `known`: the columns, when the statement was not
 * described again; `p`: the prepared statement, told that it was parsed and
 * what its columns are.
 */
function readResult<T>(data: Uint8Array, sql: string, known?: Field[], p?: Prepared): QueryResult<T> {
  const rows: Record<string, unknown>[] = [];
  let fields: Field[] = known ?? [];
  let rowCount: number | undefined;
  let error: Error | undefined;
  new Parser().parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength), (msg: BackendMessage) => {
    switch (msg.name) {
      case 'parseComplete':
        if (p) p.parsed = true;
        break;
      case 'rowDescription':
        fields = (msg as RowDescriptionMessage).fields.map((f) => ({
          name: f.name,
          parse: typeParser(f.dataTypeID),
        }));
        if (p) p.fields = fields;
        break;
      case 'noData':
        if (p) p.fields = [];
        break;
      case 'dataRow': {
        const values = (msg as DataRowMessage).fields;
        const row: Record<string, unknown> = {};
        for (let i = 0; i < fields.length; i++) {
          const f = fields[i]!;
          const v = values[i];
          row[f.name] = v === null || v === undefined ? null : f.parse(v);
        }
        rows.push(row);
        break;
      }
      case 'commandComplete': {
        const n = /(\d+)$/.exec((msg as CommandCompleteMessage).text);
        if (n) rowCount = Number(n[1]);
        break;
      }
      case 'error':
        error ??= msg as DatabaseError;
        break;
      default:
        break;
    }
  });
  if (error) {
    // The statement, for whoever reads the error; never its parameters (they may carry secrets).
    Object.assign(error, { query: sql });
    throw error;
  }
  return { rows: rows as T[], rowCount: rowCount ?? rows.length };
}

/** The embedded database's own upkeep (VACUUM and ANALYZE, which PGlite never runs by itself). */
export interface MaintenanceOptions {
  /** Statements between two checks of the tables' counters (default 5,000). */
  every?: number;
  /** Told after each check that did something or failed (to log it). */
  onRun?: (r: MaintenanceReport) => void;
}

export interface MaintenanceReport {
  ok: boolean;
  /** How long the check held the database. */
  ms: number;
  /** Tables vacuumed, and tables analyzed. */
  vacuumed: string[];
  analyzed: string[];
  error?: string;
}

export const MAINTENANCE_EVERY = 5_000;

const TABLE_STATS_SQL = `SELECT relname AS name, n_live_tup AS live, n_dead_tup AS dead, n_mod_since_analyze AS changed
  FROM pg_stat_user_tables WHERE schemaname = 'public' ORDER BY relname`;

/**
 * The folder 0700 and everything in it owner-only. The engine writes a new
 * cluster (and a restored one) from an archive whose files are 0666 — 968
 * files, readable and writable by anyone who can reach the folder — while
 * the files it creates later are 0600 whatever the umask; so the folder is
 * tightened before the engine opens it (a folder made more open, files left
 * by an older build) and once more when it is ready.
 */
function tightenFolder(dir: string): void {
  const walk = (path: string) => {
    const st = lstatSync(path);
    if (!st.isFile() && !st.isDirectory()) return;
    // Changed through a descriptor opened without following a link: a file swapped for a link
    // after the lstat above makes the open fail, never changes the link's target.
    let fd: number;
    try {
      fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
    } catch {
      return;
    }
    try {
      const now = fstatSync(fd);
      if (now.ino !== st.ino) return;
      if ((now.mode & 0o077) !== 0) fchmodSync(fd, now.mode & 0o700);
    } finally {
      closeSync(fd);
    }
    if (st.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(dir);
}

/** Whether `dir` holds an embedded database (PGlite's cluster files); reading it creates nothing. */
export function holdsPglite(dir: string): boolean {
  return existsSync(join(dir, 'PG_VERSION'));
}

/**
 * Embedded PostgreSQL (PGlite) in `dir`, created when missing, or in memory
 * with `'memory'`. `loadDataDir`: start from a `dumpPglite` tarball instead
 * of an empty cluster (restoring a backup; tests use it to skip initdb).
 * `maintenance`: its upkeep (see `MaintenanceOptions`; `false`: none).
 * The folder is locked to this process while open (folder-lock.ts) and its
 * files are owner-only.
 */
export async function openPglite(
  dir: string | 'memory',
  opts: { loadDataDir?: Blob; maintenance?: MaintenanceOptions | false } = {},
): Promise<Db> {
  // `false`: none (a read-only check such as `audit verify` leaves the database as it found it).
  const every =
    opts.maintenance === false ? Number.MAX_SAFE_INTEGER : (opts.maintenance?.every ?? MAINTENANCE_EVERY);
  if (!Number.isSafeInteger(every) || every < 1)
    throw new Error(`maintenance.every: a whole number of statements above 0, not ${every}`);
  let where: string | undefined;
  let release: (() => void) | undefined;
  if (dir !== 'memory') {
    where = resolve(dir);
    mkdirSync(where, { recursive: true, mode: 0o700 });
    // Before the engine touches the folder: a second process must not open it at all.
    release = await lockFolder(where);
    try {
      tightenFolder(where);
    } catch (e) {
      release();
      throw e;
    }
  }
  try {
    // One options object: PGlite ignores a second argument when the first is not a string.
    const db = new PGlite({
      ...(where ? { dataDir: where } : {}),
      ...(opts.loadDataDir ? { loadDataDir: opts.loadDataDir } : {}),
    });
    await db.waitReady;
    if (where) tightenFolder(where);
    await db.query(`SET TIME ZONE 'UTC'`);
    return new PgliteDb(db, where ?? 'memory', { ...(opts.maintenance || {}), every }, release);
  } catch (e) {
    release?.();
    throw e;
  }
}

/** A gzipped tarball of an in-memory PGlite database (a consistent copy: taken between transactions). */
export async function dumpPglite(db: Db): Promise<Blob> {
  if (!(db instanceof PgliteDb)) throw new Error('dumpPglite: not a PGlite database');
  return db.dump();
}

// ---- PostgreSQL server ----------------------------------------------------------------------------

/** What node-postgres's Query and Connection do that `batched` builds on (their typings leave these out). */
interface PgQuery {
  queryMode?: string;
  callback?: (err: Error | null, res: pg.QueryResult | pg.QueryResult[]) => void;
  prepare(connection: PgConnection): void;
}
interface PgConnection {
  parsedStatements: Record<string, string>;
  bind(m: { statement?: string; values?: unknown[] }): void;
  describe(m: { type: 'P' | 'S'; name?: string }): void;
  execute(m: { portal?: string; rows?: number }): void;
}
const PgQueryClass = (pg as unknown as { Query: new (config: pg.QueryConfig) => PgQuery }).Query;

/** A statement that `batched` runs ahead of another, prepared on the connection under `name`. */
interface Step {
  name: string;
  text: string;
  values?: unknown[];
}

/** Distinct batch steps prepared per connection at most (past it, a step runs on its own). */
const STEP_LIMIT = 32;

/** BEGIN, prepared once per connection (the store's own statements are `cs_<n>`). */
const BEGIN: Step = { name: 'cs_begin', text: 'BEGIN' };

/**
 * `config` with `steps` ahead of it in ONE round trip: they go out as one
 * extended-protocol batch under a single Sync, so the server runs each
 * statement only if those before it succeeded (an error skips the rest of
 * the batch) and answers all at once; each is its own statement (its own
 * snapshot under READ COMMITTED). Every statement's result, in order. A step
 * not yet prepared on this connection makes the whole batch go one statement
 * per round trip, preparing it (a parse answer inside the batch would be taken
 * for the last statement's by node-postgres): from then on it travels in the
 * batch. A step's values are turned into parameter text before anything is
 * sent, so that a value that cannot be sent fails the batch before it starts.
 */
async function batched(
  client: pg.PoolClient,
  steps: readonly Step[],
  config: pg.QueryConfig,
): Promise<pg.QueryResult[]> {
  const connection = (client as unknown as { connection: PgConnection }).connection;
  if (steps.some((s) => connection.parsedStatements[s.name] === undefined)) {
    const out: pg.QueryResult[] = [];
    for (const s of steps)
      out.push(await client.query({ name: s.name, text: s.text, ...(s.values ? { values: s.values } : {}) }));
    out.push(await client.query(config));
    return out;
  }
  const ahead = steps.map((s) => ({ name: s.name, values: s.values?.map((v) => prepareValue(v)) }));
  const q = new PgQueryClass(config);
  // Always the extended protocol (a statement without parameters would otherwise be sent as a
  // simple query, on its own).
  q.queryMode = 'extended';
  const prepare = q.prepare.bind(q);
  q.prepare = (c) => {
    for (const s of ahead) {
      c.bind({ statement: s.name, ...(s.values ? { values: s.values } : {}) });
      // Described, so that a step's rows (a lock's void) can be read like any others.
      c.describe({ type: 'P', name: '' });
      c.execute({});
    }
    prepare(c);
  };
  const results = await new Promise<pg.QueryResult[]>((resolve, reject) => {
    q.callback = (err, res) => {
      if (err) reject(err);
      // One result per statement: the steps' first, then the statement's.
      else resolve(Array.isArray(res) ? res : [res]);
    };
    client.query(q as unknown as pg.QueryConfig);
  });
  if (results.length !== steps.length + 1)
    throw new Error(`a batch of ${steps.length + 1} statements answered ${results.length} results`);
  return results;
}

class PostgresDb implements Db {
  readonly kind = 'postgres' as const;
  /**
   * Statement texts with parameters → the name they are prepared under on each
   * connection (node-postgres prepares a named statement once per connection),
   * so that the server parses and plans the store's few dozen statements once
   * instead of on every call. A text whose prepared plan went stale (the
   * schema changed under a running instance) runs unnamed from then on.
   */
  private readonly names = new Map<string, string | null>();

  constructor(
    private readonly pool: pg.Pool,
    readonly location: string,
  ) {}

  private config(sql: string, params: unknown[]): pg.QueryConfig {
    if (params.length === 0) return { text: sql };
    let name = this.names.get(sql);
    if (name === undefined && this.names.size < PREPARED_LIMIT) {
      name = `cs_${this.names.size}`;
      this.names.set(sql, name);
    }
    return name ? { name, text: sql, values: params } : { text: sql, values: params };
  }

  /** Batch steps' texts → the name each is prepared under (a few constant statements). */
  private readonly stepNames = new Map<string, string>();

  /** Step texts whose prepared plan went stale: they run unnamed from then on. */
  private readonly staleSteps = new Set<string>();

  /** `sql` (no parameters) as a batch step, prepared under a name of its own; undefined past the limit. */
  private step(sql: string): Step | undefined {
    if (this.staleSteps.has(sql)) return undefined;
    let name = this.stepNames.get(sql);
    if (name === undefined) {
      if (this.stepNames.size >= STEP_LIMIT) return undefined;
      name = `cs_step_${this.stepNames.size}`;
      this.stepNames.set(sql, name);
    }
    return { name, text: sql };
  }

  /** A statement as a batch step: prepared under its own name; undefined when it runs unnamed. */
  private asStep(sql: string, params: unknown[]): Step | undefined {
    if (params.length === 0) return this.step(sql);
    const c = this.config(sql, params);
    return c.name ? { name: c.name, text: sql, values: params } : undefined;
  }

  /** `opts.first` added to `steps` (or, past the limit, run now, after them, on `client`). */
  private async withFirst(client: pg.PoolClient, steps: Step[], opts: QueryOptions): Promise<Step[]> {
    if (opts.first === undefined) return steps;
    const st = this.step(opts.first);
    if (st) return [...steps, st];
    await this.run(client, opts.first, [], steps);
    return [];
  }

  /**
   * Runs on `on` (the pool or a client); a stale prepared plan marks the text unnamed and is
   * rethrown. `steps`: statements that go in the same round trip, ahead of this one.
   */
  private async run<T>(
    on: pg.Pool | pg.PoolClient,
    sql: string,
    params: unknown[],
    steps: readonly Step[] = [],
  ): Promise<QueryResult<T>> {
    try {
      const config = this.config(sql, params);
      const r =
        steps.length > 0
          ? ((await batched(on as pg.PoolClient, steps, config)).at(-1) as pg.QueryResult)
          : await on.query(config);
      return { rows: r.rows as T[], rowCount: r.rowCount ?? r.rows.length };
    } catch (e) {
      if (isStalePlan(e) && this.names.get(sql)) this.names.set(sql, null);
      throw e;
    }
  }

  /**
   * `statements` on `client` after `ahead` (BEGIN), in one round trip (`batched`); their results,
   * without `ahead`'s. One by one when one of them cannot be named (past the limits).
   */
  private async runAll(
    client: pg.PoolClient,
    ahead: readonly Step[],
    statements: readonly Statement[],
  ): Promise<QueryResult<Record<string, unknown>>[]> {
    const [head, ...rest] = statements;
    if (!head) return [];
    const steps = [...ahead];
    for (const st of statements.slice(0, -1)) {
      const s = this.asStep(st.sql, st.params ?? []);
      if (!s) {
        const out = [await this.run<Record<string, unknown>>(client, head.sql, head.params ?? [], ahead)];
        for (const x of rest)
          out.push(await this.run<Record<string, unknown>>(client, x.sql, x.params ?? []));
        return out;
      }
      steps.push(s);
    }
    const last = statements.at(-1) as Statement;
    try {
      const rs = await batched(client, steps, this.config(last.sql, last.params ?? []));
      return rs
        .slice(ahead.length)
        .map((r) => ({ rows: r.rows as Record<string, unknown>[], rowCount: r.rowCount ?? r.rows.length }));
    } catch (e) {
      // Which statement's plan went stale is not told: each runs unnamed from now on (those
      // without parameters too, which run as named steps ahead of the last).
      if (isStalePlan(e))
        for (const st of statements) {
          if (this.names.get(st.sql)) this.names.set(st.sql, null);
          if ((st.params ?? []).length === 0 && this.stepNames.has(st.sql)) this.staleSteps.add(st.sql);
        }
      throw e;
    }
  }

  async query<T>(sql: string, params: unknown[] = [], opts: QueryOptions = {}): Promise<QueryResult<T>> {
    // Both on one connection.
    if (opts.first !== undefined) {
      const client = await this.pool.connect();
      try {
        return await this.run<T>(client, sql, params, await this.withFirst(client, [], opts));
      } finally {
        client.release();
      }
    }
    try {
      return await this.run<T>(this.pool, sql, params);
    } catch (e) {
      // Once more, unnamed, when the prepared plan went stale.
      if (isStalePlan(e) && this.names.get(sql) === null) return this.run<T>(this.pool, sql, params);
      throw e;
    }
  }

  /**
   * `attempt` on a pooled connection; again (at most five times in all, after a short random
   * pause) when PostgreSQL refused it as a serialization failure or a deadlock victim, or a
   * prepared plan went stale: nothing of a refused attempt was committed. `attempt` rolls back what
   * it began and marks the connection broken when it could not.
   */
  private async retrying<T>(
    attempt: (client: pg.PoolClient, conn: { broken: boolean }) => Promise<T>,
  ): Promise<T> {
    for (let n = 1; ; n++) {
      const client = await this.pool.connect();
      const conn = { broken: false };
      try {
        return await attempt(client, conn);
      } catch (e) {
        const state = sqlState(e);
        if (((state && RETRYABLE.has(state)) || isStalePlan(e)) && n < 5) {
          await new Promise((r) => setTimeout(r, Math.random() * 20 * n));
          continue;
        }
        throw e;
      } finally {
        client.release(conn.broken);
      }
    }
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.retrying(async (client, conn) => {
      let open = true;
      // BEGIN is sent with the transaction's first statement (one round trip for both); a
      // transaction that ran no statement sends neither BEGIN nor COMMIT.
      let begun = false;
      // The first statement of the transaction that failed: the transaction is then over, it is
      // not committed (COMMIT would only roll it back, and say nothing). The server aborts it on
      // its own errors (a later statement is answered 25P02); an error raised here instead (a
      // value that cannot be sent, an answer that cannot be read) may have kept BEGIN from going
      // out: no later statement is sent, it could run outside the transaction.
      let failed: { error: unknown } | undefined;
      const guarded = async <R>(go: () => Promise<R>): Promise<R> => {
        if (!open) throw new Error(ENDED);
        if (failed && sqlState(failed.error) === undefined) throw new Error(FAILED);
        try {
          return await go();
        } catch (e) {
          failed ??= { error: e };
          throw e;
        }
      };
      try {
        const result = await fn({
          query: <R>(sql: string, params: unknown[] = [], opts: QueryOptions = {}) =>
            guarded(async () => {
              const steps = begun ? [] : [BEGIN];
              begun = true;
              return this.run<R>(client, sql, params, await this.withFirst(client, steps, opts));
            }),
          batch: (statements) =>
            guarded(async () => {
              if (statements.length === 0) return [];
              const steps = begun ? [] : [BEGIN];
              begun = true;
              return this.runAll(client, steps, statements);
            }),
        });
        // A statement failed and `fn` went on: COMMIT would only roll back (and say nothing).
        if (failed) throw failed.error;
        if (begun) await client.query('COMMIT');
        return result;
      } catch (e) {
        try {
          if (begun) await client.query('ROLLBACK');
        } catch {
          conn.broken = true;
        }
        throw e;
      } finally {
        open = false;
      }
    });
  }

  async atomically(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
    if (statements.length === 0) return [];
    return this.retrying(async (client, conn) => {
      try {
        const rs = await this.runAll(client, [BEGIN], [...statements, { sql: 'COMMIT' }]);
        return rs.slice(0, -1);
      } catch (e) {
        // The batch stopped at its first error: the transaction is still open unless COMMIT ran.
        try {
          await client.query('ROLLBACK');
        } catch {
          conn.broken = true;
        }
        throw e;
      }
    });
  }

  async close(): Promise<void> {
    if (!this.pool.ended) await this.pool.end();
  }
}

const SECRET_QUERY = /pass|secret|token|key|credential/i;

/**
 * A URL with its password and secret-looking query parameters (`?password=`,
 * `sslpassword=`, `token=` …) replaced, for messages. Text that is not a URL
 * with a host comes back unchanged.
 */
export function redactUrl(s: string): string {
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return s;
  }
  if (!u.host) return s;
  let changed = false;
  if (u.password) {
    u.password = 'REDACTED';
    changed = true;
  }
  for (const k of [...u.searchParams.keys()])
    if (SECRET_QUERY.test(k)) {
      u.searchParams.set(k, 'REDACTED');
      changed = true;
    }
  return changed ? u.toString() : s;
}

/** A PostgreSQL server through a connection pool. Checks the connection before returning. */
export async function openPostgres(url: string, opts: { max?: number } = {}): Promise<Db> {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    // A server that drops packets instead of refusing must not hold a connection attempt for the
    // OS's ~2 minutes, nor a dead connection open forever.
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
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
  /** The embedded database's upkeep (PGlite only: a PostgreSQL server runs its own autovacuum). */
  maintenance?: MaintenanceOptions;
}

/** DATABASE_URL (or `url`) → PostgreSQL; otherwise PGlite under `dataDir` (default ./data). Migrated. */
export async function openDatabase(opts: OpenDatabaseOptions = {}): Promise<Db> {
  const url = opts.url ?? (process.env.DATABASE_URL || undefined);
  const db = url
    ? await openPostgres(url)
    : await openPglite(opts.dataDir ?? './data', opts.maintenance ? { maintenance: opts.maintenance } : {});
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

/**
 * Statements whose results nobody reads, held back on a transaction handle
 * and sent with the transaction's next statement in one round trip (db.ts
 * `batch`): the same statements, in the same order, in the same transaction,
 * fewer round trips. An error in a held statement is thrown by the statement
 * it travelled with (the transaction fails there, as it would have one by
 * one), or by `flush`, which a writer calls before it returns so that nothing
 * is left for the commit.
 */
import { type Queryable, type QueryOptions, type QueryResult, runBatch, type Statement } from './db.js';

export class Deferring implements Queryable {
  private readonly held: Statement[] = [];
  private closed = false;

  constructor(private readonly tx: Queryable) {}

  /** Holds `sql` until the next statement (or `flush`). */
  hold(sql: string, params: unknown[] = []): void {
    // A write held after the last flush would never be sent: refuse it instead of losing it.
    if (this.closed) throw new Error("a write was held after its transaction's writes were sent");
    this.held.push({ sql, params });
  }

  async query<T = Record<string, unknown>>(
    sql: string,
    params: unknown[] = [],
    opts: QueryOptions = {},
  ): Promise<QueryResult<T>> {
    if (this.held.length === 0) return this.tx.query<T>(sql, params, opts);
    const statements = this.held.splice(0);
    if (opts.first !== undefined) statements.push({ sql: opts.first });
    statements.push({ sql, params });
    const rs = await runBatch(this.tx, statements);
    return rs.at(-1) as QueryResult<T>;
  }

  async batch(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
    const n = this.held.length;
    const rs = await runBatch(this.tx, [...this.held.splice(0), ...statements]);
    return rs.slice(n);
  }

  /** Sends what is held, if anything. */
  async flush(): Promise<void> {
    if (this.held.length > 0) await runBatch(this.tx, this.held.splice(0));
  }

  /** Sends what is held, and refuses anything held from now on. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }
}

/**
 * `fn` on a `Deferring` handle over `tx`; what it held is sent before its
 * result is returned, so nothing is left behind for the commit, and a write
 * held later (by something `fn` let escape) is refused, not dropped.
 */
export async function deferring<T>(tx: Queryable, fn: (d: Deferring) => Promise<T>): Promise<T> {
  const d = new Deferring(tx);
  const result = await fn(d);
  await d.close();
  return result;
}

/**
 * `sql` on `q`, its result not needed: held for the next statement when `q`
 * is a `Deferring` handle, run now otherwise.
 */
export async function later(q: Queryable, sql: string, params: unknown[] = []): Promise<void> {
  if (q instanceof Deferring) q.hold(sql, params);
  else await q.query(sql, params);
}

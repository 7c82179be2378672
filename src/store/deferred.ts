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

  constructor(private readonly tx: Queryable) {}

  /** Holds `sql` until the next statement (or `flush`). */
  hold(sql: string, params: unknown[] = []): void {
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
}

/**
 * `sql` on `q`, its result not needed: held for the next statement when `q`
 * is a `Deferring` handle, run now otherwise.
 */
export async function later(q: Queryable, sql: string, params: unknown[] = []): Promise<void> {
  if (q instanceof Deferring) q.hold(sql, params);
  else await q.query(sql, params);
}

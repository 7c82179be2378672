/**
 * Group commit: writes that arrive in the same event-loop turn, or while a
 * batch is being written, share one database transaction — one BEGIN/COMMIT
 * (one WAL flush on PostgreSQL), one audit-head lock and one audit statement
 * for the whole batch instead of one each. The store's hot writes (creating
 * withdrawals, moving them between states) go through it.
 *
 * Each write still gets its own answer: the batch function returns one
 * outcome per write, in order, either a value or a `Failed` (an answer that
 * is an error, e.g. a state conflict found without a database error, which
 * leaves the transaction usable). When the batch's statements fail (a
 * database error, a throw), nothing of it was committed and every write is
 * tried again alone, so that one bad write cannot fail the others. When the
 * COMMIT fails, whether the batch committed is unknown: every write gets
 * that error and none is written again.
 */
import type { Db, Queryable } from './db.js';

/** A write's answer that is an error, given without aborting the batch's transaction. */
export class Failed {
  constructor(readonly error: unknown) {}
}

export type BatchWriter<P, R> = (tx: Queryable, batch: readonly P[]) => Promise<(R | Failed)[]>;

interface Pending<P, R> {
  p: P;
  resolve: (r: R) => void;
  reject: (e: unknown) => void;
}

export class GroupCommit<P, R> {
  private readonly queue: Pending<P, R>[] = [];
  private writing = false;

  /** `write` runs one batch inside the transaction it is given; at most `max` writes per batch. */
  constructor(
    private readonly db: Db,
    private readonly write: BatchWriter<P, R>,
    private readonly max = 256,
  ) {}

  /** Resolves once `p` is committed (with its value), rejects with its error. */
  submit(p: P): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ p, resolve, reject });
      this.schedule();
    });
  }

  /**
   * The next batch is written after the current event-loop turn (setImmediate),
   * so that every write issued in that turn joins it. With PGlite this is what
   * makes batches at all: its queries run on this thread without yielding to
   * I/O, so nothing new arrives while a batch is written.
   */
  private schedule(): void {
    if (this.writing || this.queue.length === 0) return;
    this.writing = true;
    setImmediate(() => void this.flush());
  }

  /** Writes one batch and settles each write; never throws. */
  private async flush(): Promise<void> {
    const batch = this.queue.splice(0, this.max);
    // Whether the batch's statements all ran: a failure after that (the COMMIT itself, a lost
    // connection) leaves it unknown whether the batch committed, so it is not written again.
    let written = false;
    try {
      const out = await this.db.transaction(async (tx) => {
        written = false;
        const o = await this.write(
          tx,
          batch.map((b) => b.p),
        );
        written = true;
        return o;
      });
      for (const [i, b] of batch.entries()) settle(b, out[i]);
    } catch (e) {
      if (batch.length === 1 || written) for (const b of batch) b.reject(e);
      // Nothing of the batch was committed: each write again alone, with its own outcome.
      else
        for (const b of batch) {
          try {
            settle(b, (await this.db.transaction((tx) => this.write(tx, [b.p])))[0]);
          } catch (e1) {
            b.reject(e1);
          }
        }
    } finally {
      this.writing = false;
      this.schedule();
    }
  }
}

function settle<P, R>(b: Pending<P, R>, o: R | Failed | undefined): void {
  if (o === undefined) b.reject(new Error('a group-commit batch lost a result'));
  else if (o instanceof Failed) b.reject(o.error);
  else b.resolve(o);
}

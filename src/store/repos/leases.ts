/**
 * Named leases: one holder at a time for a task that must not run twice
 * across instances sharing the database (ledger ingestion, say). A lease is
 * held until `expiresAt`; its holder renews it well before; when the holder
 * dies, the lease lapses and another instance acquires it. Every change of
 * holder raises `fence`, and a holder writes only inside a transaction that
 * first calls `holdLease`: it locks the lease row and checks that the lease
 * is still this holder's, with the same fence and not expired. A takeover
 * (which updates that row) therefore waits for such a transaction to end and
 * then sees its result; a holder that lost the lease finds out at its next
 * write and stops, having written nothing.
 */
import type { Db, Queryable } from '../db.js';
import { StoreError } from '../errors.js';

export interface Lease {
  name: string;
  owner: string;
  fence: number;
  expiresAt: string;
}

/** This holder's lease was taken over (or lapsed): stop, write nothing more. */
export class LeaseExpiredError extends StoreError {
  constructor(readonly lease: Lease) {
    super(
      'invalid_state',
      `the lease ${lease.name} is no longer held by ${lease.owner}: another instance took it`,
    );
    this.name = 'LeaseExpiredError';
  }
}

interface Row {
  name: string;
  owner: string;
  fence: number;
  expires_at: string;
}

const fromRow = (r: Row): Lease => ({
  name: r.name,
  owner: r.owner,
  fence: r.fence,
  expiresAt: r.expires_at,
});
const ms = (n: number) => Math.max(1, Math.round(n));

export class LeaseRepo {
  constructor(private readonly db: Db) {}

  /**
   * Takes (or, for its holder, extends) the lease `name` for `durationMs`;
   * undefined while another owner holds an unexpired one. The fence grows
   * whenever the holder changes.
   */
  async acquire(name: string, owner: string, durationMs: number): Promise<Lease | undefined> {
    const r = await this.db.query<Row>(
      `INSERT INTO leases (name, owner, fence, expires_at)
         VALUES ($1, $2, 1, now() + $3::int * interval '1 millisecond')
       ON CONFLICT (name) DO UPDATE SET
         owner = EXCLUDED.owner,
         fence = CASE WHEN leases.owner = EXCLUDED.owner AND leases.expires_at > now()
                      THEN leases.fence ELSE leases.fence + 1 END,
         expires_at = EXCLUDED.expires_at,
         acquired_at = CASE WHEN leases.owner = EXCLUDED.owner AND leases.expires_at > now()
                            THEN leases.acquired_at ELSE now() END
         WHERE leases.owner = EXCLUDED.owner OR leases.expires_at <= now()
       RETURNING name, owner, fence, expires_at`,
      [name, owner, ms(durationMs)],
    );
    return r.rows[0] && fromRow(r.rows[0]);
  }

  /** Extends a lease still held (same owner and fence, not expired); false when it was lost. */
  async renew(lease: Lease, durationMs: number): Promise<boolean> {
    const r = await this.db.query<Row>(
      `UPDATE leases SET expires_at = now() + $4::int * interval '1 millisecond'
        WHERE name = $1 AND owner = $2 AND fence = $3 AND expires_at > now()
        RETURNING name, owner, fence, expires_at`,
      [lease.name, lease.owner, lease.fence, ms(durationMs)],
    );
    const row = r.rows[0];
    if (row) lease.expiresAt = row.expires_at;
    return row !== undefined;
  }

  /** Gives the lease up now (another instance may take it at once). */
  async release(lease: Lease): Promise<void> {
    await this.db.query(
      `UPDATE leases SET expires_at = now() WHERE name = $1 AND owner = $2 AND fence = $3`,
      [lease.name, lease.owner, lease.fence],
    );
  }

  /** Who holds `name` now (undefined when nobody holds an unexpired lease). */
  async holder(name: string): Promise<Lease | undefined> {
    const r = await this.db.query<Row>(
      'SELECT name, owner, fence, expires_at FROM leases WHERE name = $1 AND expires_at > now()',
      [name],
    );
    return r.rows[0] && fromRow(r.rows[0]);
  }
}

/**
 * Inside a transaction: locks the lease row and throws LeaseExpiredError
 * unless `lease` still holds it. Call it first in every transaction whose
 * writes only the holder may make.
 */
export async function holdLease(tx: Queryable, lease: Lease): Promise<void> {
  const r = await tx.query(
    `SELECT 1 FROM leases WHERE name = $1 AND owner = $2 AND fence = $3 AND expires_at > now() FOR SHARE`,
    [lease.name, lease.owner, lease.fence],
  );
  if (r.rows.length === 0) throw new LeaseExpiredError(lease);
}

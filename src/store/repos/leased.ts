/**
 * The fence of the records a worker writes for a withdrawal it carries,
 * beside the row's own moves (which check the lease themselves): the
 * preparation of a resubmission, the submission written ahead of an execute,
 * the request sent across the air gap. Each is written only while the
 * withdrawal is still leased to that worker, so a worker whose lease lapsed
 * and was taken over leaves nothing that the new holder would act on.
 */
import type { Queryable } from '../db.js';
import { LeaseLostError } from '../errors.js';

/**
 * `into` (an INSERT naming its columns) of `values`, whose `at`-th (from 1) is
 * the withdrawal's id, only while that withdrawal is leased to `lease`: the
 * insert share-locks the withdrawal's row, so a worker taking the lease over
 * waits for it and then finds the row on record, or takes it first and the
 * insert writes nothing (LeaseLostError). `returning` (a RETURNING clause) is
 * how a row written is told from none.
 */
export async function insertLeased<T>(
  q: Queryable,
  into: string,
  values: readonly unknown[],
  at: number,
  lease: string,
  returning: string,
): Promise<T> {
  const withdrawalId = values[at - 1];
  if (typeof withdrawalId !== 'string') throw new TypeError('a leased record belongs to a withdrawal');
  const columns = values.map((_, i) => (i + 1 === at ? 'w.id' : `$${i + 1}`)).join(', ');
  const r = await q.query<T>(
    `${into} SELECT ${columns} FROM withdrawals w WHERE w.id = $${at} AND w.lease_owner = $${values.length + 1}
       FOR SHARE ${returning}`,
    [...values, lease],
  );
  if (!r.rows[0]) throw new LeaseLostError(withdrawalId, lease);
  return r.rows[0];
}

/**
 * A transaction's execution window and its commit deadline (src/flows/window.ts)
 * on a real token transfer from the shared vectors, its metadata changed:
 * `max_record_time` bounds the window only under V3 (V2 does not sign it);
 * the commit deadline takes only bounds the signature covers (preparation
 * time, ledger-time bounds, V3's max_record_time), never an input contract's
 * contents such as a mining round's closing time.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commitDeadlineUs, executionWindow } from '../../src/flows/window.js';
import { decodePreparedTransaction } from '../../src/hashing/decode.js';
import { base64ToBytes } from '../../src/hashing/input.js';
import type { DecodedTransaction } from '../../src/hashing/model.js';
import { VECTORS_DIR } from '../support/vectors.js';

const HOUR = 3_600_000_000n;

function transfer(): DecodedTransaction {
  const v = JSON.parse(
    readFileSync(join(VECTORS_DIR, 'real', 'v2_bitgo_cantontokentransferprepareresponse.json'), 'utf8'),
  ) as { prepared_transaction_base64: string };
  const tx = decodePreparedTransaction(base64ToBytes(v.prepared_transaction_base64));
  tx.metadata.maxRecordTime = undefined;
  tx.metadata.maxLedgerEffectiveTime = undefined;
  return tx;
}

describe('execution window and commit deadline', () => {
  it('without other bounds: the preparation time plus 24 h, for both', () => {
    const tx = transfer();
    const prep = tx.metadata.preparationTime;
    expect(commitDeadlineUs(tx, 'v2')).toBe(prep + 24n * HOUR);
    expect(commitDeadlineUs(tx, 'v3', { preparationTimeToleranceUs: 2n * HOUR })).toBe(prep + 2n * HOUR);
  });

  it('max_record_time bounds the window and the deadline under V3 only', () => {
    const tx = transfer();
    const prep = tx.metadata.preparationTime;
    tx.metadata.maxRecordTime = prep + 60_000_000n;
    const v3 = executionWindow(tx, [], {}, 'v3');
    expect(v3.latestUs).toBe(prep + 60_000_000n);
    expect(v3.latestSource).toBe('max_record_time');
    expect(commitDeadlineUs(tx, 'v3')).toBe(prep + 60_000_000n);
    // V2: the participant could change or drop it, so neither the window nor the deadline trusts it
    const v2 = executionWindow(tx, [], {}, 'v2');
    expect(v2.latestSource).not.toBe('max_record_time');
    expect(v2.latestUs).toBeGreaterThan(prep + 60_000_000n);
    expect(commitDeadlineUs(tx, 'v2')).toBe(prep + 24n * HOUR);
  });

  it('the ledger-time bound counts with its tolerance', () => {
    const tx = transfer();
    const prep = tx.metadata.preparationTime;
    tx.metadata.maxLedgerEffectiveTime = prep + HOUR;
    expect(commitDeadlineUs(tx, 'v2')).toBe(prep + HOUR + 60_000_000n);
    expect(commitDeadlineUs(tx, 'v2', { ledgerTimeToleranceUs: 5_000_000n })).toBe(prep + HOUR + 5_000_000n);
  });

  it("an action's deadline shortens the window but never the commit deadline", () => {
    const tx = transfer();
    const prep = tx.metadata.preparationTime;
    const soon = new Date(Number((prep + 120_000_000n) / 1000n)).toISOString();
    const actions = [{ deadlines: { executeBefore: soon } }] as never;
    expect(executionWindow(tx, actions, {}, 'v2').latestSource).toBe('executeBefore');
    expect(commitDeadlineUs(tx, 'v2')).toBe(prep + 24n * HOUR);
  });
});

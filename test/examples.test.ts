/**
 * The sample transaction shipped for the README's `hash` / `inspect` examples
 * (examples/prepared.b64) is a real vector, byte for byte, and hashes to the
 * hashes its README states, which are the vector's published ones.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bytesToHex } from '../src/hashing/input.js';
import { hashPreparedTransaction } from '../src/hashing/transaction-hash.js';
import { ROOT } from './support/cli.js';
import { VECTORS_DIR } from './support/vectors.js';

const sample = readFileSync(join(ROOT, 'examples', 'prepared.b64'), 'utf8');
const vector = JSON.parse(
  readFileSync(join(VECTORS_DIR, 'real', 'v2_bitgo_cantontokentransferprepareresponse.json'), 'utf8'),
) as { prepared_transaction_base64: string; expected_hash_hex: string; reference_v3_hex: string };

describe('examples/prepared.b64', () => {
  it('is the published vector, and its README states its V2 and V3 hashes', () => {
    expect(sample.trim()).toBe(vector.prepared_transaction_base64);
    const v2 = bytesToHex(hashPreparedTransaction(sample.trim(), { scheme: 'v2' }));
    const v3 = bytesToHex(hashPreparedTransaction(sample.trim(), { scheme: 'v3' }));
    expect(v2).toBe(vector.expected_hash_hex);
    expect(v3).toBe(vector.reference_v3_hex);
    const readme = readFileSync(join(ROOT, 'examples', 'README.md'), 'utf8');
    expect(readme).toContain(`V2 (the participant's): \`${v2}\``);
    expect(readme).toContain(`V3 (Canton's reference implementation): \`${v3}\``);
  });
});

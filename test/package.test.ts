/**
 * The package entry: `canton-signer` imports itself by name (package.json
 * `exports`, built into dist/ by `npm test` before vitest runs) and exposes
 * the API names other code depends on.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VECTORS_DIR } from './support/vectors.js';

const STABLE = [
  'decodePreparedTransaction',
  'hashPreparedTransaction',
  'topologyTransactionHash',
  'multiHash',
  'fingerprint',
  'partyId',
  'TransactionError',
];

describe('package entry', () => {
  it('resolves by its own name to the built library and exports the stable names', async () => {
    const lib = (await import('canton-signer')) as Record<string, unknown>;
    for (const name of STABLE) expect(typeof lib[name], name).toBe('function');
    const hash = (lib.hashPreparedTransaction as (b: string) => Uint8Array)(
      JSON.parse(
        readFileSync(join(VECTORS_DIR, 'real', 'v2_canton_network_wallet_sdk_utils_ping.json'), 'utf8'),
      ).prepared_transaction_base64,
    );
    expect(Buffer.from(hash).toString('hex')).toBe(
      '069dac2bc8aa0fed20d1087d72098f7f42a5ed7b49b3bd747f24aebb3b372dc2',
    );
  });

  it('declares the bin and the exports map', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    expect(pkg.name).toBe('canton-signer');
    expect(pkg.bin['canton-signer']).toBe('./bin/canton-signer.js');
    expect(pkg.exports['.'].import).toBe('./dist/index.js');
  });
});

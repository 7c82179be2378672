/**
 * Where the shared test vectors live (`../shared/vectors` beside the
 * repository, or CANTON_VECTORS_DIR), for every test that reads them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const VECTORS_DIR: string =
  process.env.CANTON_VECTORS_DIR ?? fileURLToPath(new URL('../../../shared/vectors/', import.meta.url));

/** The real prepared transactions (`real/*.json`), as bytes, in file-name order. */
export function realPreparedBytes(): Uint8Array[] {
  const dir = join(VECTORS_DIR, 'real');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => {
      const v = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { prepared_transaction_base64: string };
      return new Uint8Array(Buffer.from(v.prepared_transaction_base64, 'base64'));
    });
}

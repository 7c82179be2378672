/**
 * Where the shared test vectors live (`../shared/vectors` beside the
 * repository, or CANTON_VECTORS_DIR), for every test that reads them.
 */
import { fileURLToPath } from 'node:url';

export const VECTORS_DIR: string =
  process.env.CANTON_VECTORS_DIR ?? fileURLToPath(new URL('../../../shared/vectors/', import.meta.url));

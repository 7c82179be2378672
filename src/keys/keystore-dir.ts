/**
 * Where the file keystore is: the folder given explicitly, else
 * $CANTON_SIGNER_KEYSTORE, else ./keystore. Kept apart from the backends so
 * that the CLI can name the folder without loading any key code.
 */
import { resolve } from 'node:path';

export function keystoreDir(env: NodeJS.ProcessEnv = process.env, explicit?: string): string {
  return resolve(explicit ?? env.CANTON_SIGNER_KEYSTORE ?? 'keystore');
}

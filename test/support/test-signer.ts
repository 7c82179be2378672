/**
 * `testSigner`: a Signer over a temp file keystore with a cheap scrypt cost.
 * Apart from flow-env.ts (which re-exports it) so that a test that only needs
 * a keystore does not load the sandbox and the Canton clients.
 */
import { join } from 'node:path';
import type { KeyBackend } from '../../src/keys/backend.js';
import { FileBackend } from '../../src/keys/file-backend.js';
import { OfflineBackend } from '../../src/keys/offline-backend.js';
import { Signer } from '../../src/keys/signer.js';

/** A Signer over a file keystore in `dir` (cheap scrypt), with `pkcs11` as its second backend if given. */
export function testSigner(dir: string, passphrase: string, pkcs11?: KeyBackend): Signer {
  return new Signer({
    file: new FileBackend({ dir, passphrase: () => passphrase, scrypt: { N: 2 ** 14, r: 8, p: 1 } }),
    ...(pkcs11 ? { pkcs11 } : {}),
    offline: new OfflineBackend({ dir: join(dir, 'offline') }),
    stateDir: dir,
  });
}

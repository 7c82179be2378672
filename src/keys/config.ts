/**
 * Builds the Signer from configuration: the file keystore (folder from
 * CANTON_SIGNER_KEYSTORE, default ./keystore; passphrase from
 * CANTON_SIGNER_PASSPHRASE / _FILE or a prompt) and, when
 * CANTON_SIGNER_PKCS11_MODULE is set, the PKCS#11 backend. The PKCS#11 module
 * (a native addon) is loaded only when configured.
 */
import { join } from 'node:path';
import type { KeyBackend } from './backend.js';
import { FileBackend } from './file-backend.js';
import { keystoreDir } from './keystore-dir.js';
import { OfflineBackend } from './offline-backend.js';
import { getSecret, PASSPHRASE } from './passphrase.js';
import { Signer } from './signer.js';

export interface SignerConfig {
  keystore?: string;
  /** Prompt for the passphrase on a terminal when the environment has none. */
  interactive?: boolean;
  /** Ask twice (when creating keys interactively). */
  confirmPassphrase?: boolean;
  /**
   * Called with the file keystore's passphrase before it is first used (e.g.
   * to refuse a weak one for a new keystore); what it throws stops the use.
   */
  onPassphrase?: (passphrase: string) => void;
  /** Open the PKCS#11 backend if configured (default true). */
  pkcs11?: boolean;
  env?: NodeJS.ProcessEnv;
}

export { keystoreDir };

export async function openSigner(config: SignerConfig = {}): Promise<Signer> {
  const env = config.env ?? process.env;
  // A passphrase in the environment is taken now: it leaves the process environment at start-up, before any
  // child process could inherit it. A passphrase file or a prompt is read when a key is first decrypted.
  let cached: Promise<string> | undefined = env[PASSPHRASE.env] ? getSecret(PASSPHRASE, { env }) : undefined;
  const file = new FileBackend({
    dir: keystoreDir(env, config.keystore),
    // Asked for only when a key must be encrypted or decrypted, and then once.
    passphrase: async () => {
      cached ??= getSecret(PASSPHRASE, {
        interactive: config.interactive,
        confirm: config.confirmPassphrase,
        env,
      });
      const p = await cached;
      config.onPassphrase?.(p);
      return p;
    },
  });
  let pkcs11: KeyBackend | undefined;
  if (config.pkcs11 !== false && env.CANTON_SIGNER_PKCS11_MODULE) {
    const { Pkcs11Backend, pkcs11ConfigFromEnv } = await import('./pkcs11-backend.js');
    const cfg = pkcs11ConfigFromEnv(env);
    if (cfg) pkcs11 = await Pkcs11Backend.open(cfg);
  }
  return new Signer({ file, pkcs11, offline: new OfflineBackend({ dir: join(file.dir, 'offline') }) });
}

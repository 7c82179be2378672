/**
 * The PKCS#11 backend's settings, and reading them from the environment
 * (CANTON_SIGNER_PKCS11_*).
 */
import { KeyError } from '../backend.js';
import { PKCS11_PIN, secretFromEnv } from '../passphrase.js';

export interface Pkcs11Config {
  /** Path of the PKCS#11 module (shared library). */
  module: string;
  /** Token label. */
  token?: string;
  /** Slot id (when there is no label, or to choose among tokens with the same label). */
  slot?: number;
  pin: string;
  /** Sessions in the pool: how many signatures the token is asked for at once (default 4). */
  sessions?: number;
}

/**
 * The PKCS#11 configuration from the environment: CANTON_SIGNER_PKCS11_MODULE,
 * CANTON_SIGNER_PKCS11_TOKEN (label) and/or CANTON_SIGNER_PKCS11_SLOT,
 * CANTON_SIGNER_PKCS11_SESSIONS, and the PIN from CANTON_SIGNER_PKCS11_PIN or
 * the file named by CANTON_SIGNER_PKCS11_PIN_FILE. Undefined when no module is
 * configured.
 */
export function pkcs11ConfigFromEnv(env: NodeJS.ProcessEnv = process.env): Pkcs11Config | undefined {
  const module = env.CANTON_SIGNER_PKCS11_MODULE;
  if (module === undefined || module === '') return undefined;
  const pin = secretFromEnv(PKCS11_PIN, env);
  if (pin === undefined)
    throw new KeyError(
      'no_pin',
      `a PKCS#11 module is configured but no PIN: set ${PKCS11_PIN.env} or ${PKCS11_PIN.fileEnv}`,
    );
  const config: Pkcs11Config = { module, pin };
  const token = env.CANTON_SIGNER_PKCS11_TOKEN;
  if (token !== undefined && token !== '') config.token = token;
  const slot = env.CANTON_SIGNER_PKCS11_SLOT;
  if (slot !== undefined && slot !== '') {
    if (!/^(?:\d{1,15}|0x[0-9a-fA-F]{1,12})$/.test(slot))
      throw new KeyError('token_not_found', 'CANTON_SIGNER_PKCS11_SLOT must be a slot id (a number)');
    config.slot = Number(slot);
  }
  const sessions = env.CANTON_SIGNER_PKCS11_SESSIONS;
  if (sessions !== undefined && sessions !== '') {
    if (!/^\d{1,3}$/.test(sessions))
      throw new KeyError(
        'backend_unavailable',
        'CANTON_SIGNER_PKCS11_SESSIONS must be a number from 1 to 64',
      );
    config.sessions = Number(sessions);
  }
  return config;
}

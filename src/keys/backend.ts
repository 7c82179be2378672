/**
 * What a key store must provide (file keystore, PKCS#11 token, the public
 * keys of cold keys held on an offline machine), and the errors every part
 * of key custody reports. The rest of canton-signer never talks to a backend
 * directly: it uses the Signer (signer.ts).
 */
import type { KeyScheme } from './schemes.js';

export type BackendKind = 'file' | 'pkcs11' | 'offline';

export const BACKEND_KINDS: readonly BackendKind[] = ['file', 'pkcs11', 'offline'];

/** A key as a backend knows it: no private material ever leaves a backend. */
export interface BackendKey {
  label: string;
  scheme: KeyScheme;
  /** SubjectPublicKeyInfo DER. */
  spki: Uint8Array;
  /** ISO-8601; for an HSM, the day recorded in CKA_START_DATE at generation, or '' if none. */
  createdAt: string;
}

/** The BackendKey of a key file's public part (file keystore, offline keys: the same fields). */
export function backendKeyOf(f: {
  label: string;
  scheme: KeyScheme;
  publicKeySpki: string;
  createdAt: string;
}): BackendKey {
  return {
    label: f.label,
    scheme: f.scheme,
    spki: new Uint8Array(Buffer.from(f.publicKeySpki, 'base64')),
    createdAt: f.createdAt,
  };
}

export interface KeyBackend {
  readonly kind: BackendKind;
  /** Schemes this backend can generate and sign with (after probing, for an HSM). */
  schemes(): Promise<KeyScheme[]>;
  generate(label: string, scheme: KeyScheme): Promise<BackendKey>;
  list(): Promise<BackendKey[]>;
  find(label: string): Promise<BackendKey | undefined>;
  /**
   * Signs for Canton: Ed25519 over `message` (64 bytes out); ECDSA over
   * digest(`message`), DER out.
   */
  sign(key: BackendKey, message: Uint8Array): Promise<Uint8Array>;
  /** Destroys the key for good. */
  remove(label: string): Promise<void>;
  /**
   * Checks that the backend can use its keys now (file: the passphrase opens
   * one key; nothing to check without keys). Throws the KeyError signing would.
   */
  checkAccess?(): Promise<void>;
  close(): Promise<void>;
}

export type KeyErrorCode =
  | 'invalid_label' // label does not follow the naming rules
  | 'key_exists' // a key with this label already exists (in any backend)
  | 'key_not_found'
  | 'key_disabled' // the key exists but is disabled: nothing is signed with it
  | 'unsupported_scheme' // the backend cannot use this scheme
  | 'invalid_key_material' // an import that is not a usable private key
  | 'no_passphrase' // no passphrase configured for the file keystore
  | 'wrong_passphrase'
  | 'tampered_key_file' // the key file was changed after it was written
  | 'public_key_mismatch' // the decrypted private key does not belong to the stored public key
  | 'invalid_key_file' // not a canton-signer key file, or an unknown version
  | 'keystore_io' // the keystore folder or a file cannot be read or written
  | 'backend_unavailable' // the backend is not configured
  | 'hsm_module' // the PKCS#11 module cannot be loaded
  | 'token_not_found'
  | 'mechanism_missing' // the token lacks a mechanism the scheme needs
  | 'wrong_pin'
  | 'pin_locked'
  | 'no_pin'
  | 'hsm_error' // any other PKCS#11 failure (with its CKR name)
  | 'offline_key' // a cold key: it is generated on the offline machine, not here
  | 'awaiting_offline_signature' // a cold key's signature for this message has not come through the air gap
  | 'invalid_message'; // not a Canton hash: the signer signs nothing else

export class KeyError extends Error {
  override readonly name = 'KeyError';
  constructor(
    readonly code: KeyErrorCode,
    message: string,
    /** The system error behind it (a file's errno), for callers that explain it; never a secret. */
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const LABEL = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Labels: 1–64 characters of letters, digits, `.`, `_`, `-`, starting with a letter or digit. */
export function checkLabel(label: string): void {
  if (!LABEL.test(label))
    throw new KeyError(
      'invalid_label',
      `invalid key label ${JSON.stringify(label.slice(0, 80))}: use 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit`,
    );
}

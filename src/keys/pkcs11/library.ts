/**
 * The loaded PKCS#11 module (one per process and path, shared by every
 * backend that uses it: PKCS#11 state is per process), and what its errors
 * mean: which CKR values call for a reconnection, which map to a KeyError
 * code, and the KeyError a failure becomes (the PIN scrubbed from it).
 */
import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { PKCS11 } from 'pkcs11js';
import { KeyError, type KeyErrorCode } from '../backend.js';

export const pkcs11js = createRequire(import.meta.url)('pkcs11js') as typeof import('pkcs11js');

/** Failures after which the sessions, the login or the library must be set up again. */
export const RECOVERABLE = new Set([
  'CKR_SESSION_HANDLE_INVALID',
  'CKR_SESSION_CLOSED',
  'CKR_DEVICE_REMOVED',
  'CKR_TOKEN_NOT_PRESENT',
  'CKR_TOKEN_NOT_RECOGNIZED',
  'CKR_USER_NOT_LOGGED_IN',
  'CKR_DEVICE_ERROR',
  'CKR_CRYPTOKI_NOT_INITIALIZED',
  'CKR_SLOT_ID_INVALID',
  // SoftHSM answers this when its token was deleted under it; one reconnection settles it.
  'CKR_GENERAL_ERROR',
]);

export const CKR_CODES: Readonly<Record<string, KeyErrorCode>> = {
  CKR_PIN_INCORRECT: 'wrong_pin',
  CKR_PIN_INVALID: 'wrong_pin',
  CKR_PIN_LEN_RANGE: 'wrong_pin',
  CKR_PIN_LOCKED: 'pin_locked',
  CKR_MECHANISM_INVALID: 'mechanism_missing',
  CKR_CURVE_NOT_SUPPORTED: 'unsupported_scheme',
  CKR_DOMAIN_PARAMS_INVALID: 'unsupported_scheme',
  CKR_KEY_HANDLE_INVALID: 'key_not_found',
  CKR_OBJECT_HANDLE_INVALID: 'key_not_found',
};

/** CKR names by value, from pkcs11js's constants (plus the few it lacks). */
export const CKR_NAMES: ReadonlyMap<number, string> = (() => {
  const m = new Map<number, string>([[0x140, 'CKR_CURVE_NOT_SUPPORTED']]);
  for (const [name, value] of Object.entries(pkcs11js))
    if (name.startsWith('CKR_') && typeof value === 'number' && !m.has(value)) m.set(value, name);
  return m;
})();

/** The CKR name of a pkcs11js error, or undefined for anything else. */
export function ckrName(e: unknown): string | undefined {
  if (!(e instanceof Error) || e instanceof KeyError) return undefined;
  if (/^CKR_[A-Z0-9_]+$/.test(e.message)) return e.message;
  const code = (e as { code?: unknown }).code;
  if (e instanceof pkcs11js.Pkcs11Error && typeof code === 'number' && code !== 0)
    return CKR_NAMES.get(code) ?? `CKR_0x${code.toString(16).padStart(8, '0')}`;
  return undefined;
}

/** A session that is not logged in: raised as the token would, so that the call reconnects. */
export class NotLoggedIn extends Error {
  constructor() {
    super('CKR_USER_NOT_LOGGED_IN');
  }
}

/** One loaded module, shared by every backend of the process that uses it. */
export interface SharedLibrary {
  path: string;
  lib: PKCS11;
  users: number;
  initialized: boolean;
  /** Counts C_Initialize calls: session handles from an earlier epoch are meaningless. */
  epoch: number;
  /** Keyed digest of the PIN each slot was logged in with (login state is per process). */
  logins: Map<string, Buffer>;
}

export const LIBRARIES = new Map<string, SharedLibrary>();
export const PIN_DIGEST_KEY = randomBytes(32);

export function loadLibrary(path: string): SharedLibrary {
  let key = path;
  try {
    key = realpathSync(path);
  } catch {
    // a bare library name for the dynamic loader to find, or a missing file: load() says which
  }
  const known = LIBRARIES.get(key);
  if (known) return known;
  const lib = new pkcs11js.PKCS11();
  try {
    lib.load(path);
  } catch (e) {
    throw new KeyError('hsm_module', `cannot load the PKCS#11 module ${path}: ${firstLine(e)}`);
  }
  const shared: SharedLibrary = { path, lib, users: 0, initialized: false, epoch: 0, logins: new Map() };
  LIBRARIES.set(key, shared);
  return shared;
}

export function initialize(shared: SharedLibrary): void {
  try {
    shared.lib.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK });
  } catch (e) {
    if (ckrName(e) !== 'CKR_CRYPTOKI_ALREADY_INITIALIZED')
      throw new KeyError(
        'hsm_module',
        `the PKCS#11 module ${shared.path} failed to initialise (${ckrName(e) ?? firstLine(e)})` +
          (/softhsm/i.test(shared.path) ? '; check SOFTHSM2_CONF and the token directory' : ''),
      );
  }
  shared.initialized = true;
  shared.epoch++;
  shared.logins.clear();
}

export function finalize(shared: SharedLibrary): void {
  try {
    shared.lib.C_Finalize();
  } catch {
    // already finalised (by another user of the library in this process)
  }
  shared.initialized = false;
  shared.logins.clear();
}

export function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? '';
}

/** Any failure as a KeyError naming the operation, the token and the CKR code; never the PIN. */
export function keyErrorOf(e: unknown, what: string, tokenLabel: string, pin: string): KeyError {
  const scrub = (text: string) => (pin.length > 0 ? text.split(pin).join('***') : text);
  if (e instanceof KeyError)
    return scrub(e.message) === e.message ? e : new KeyError(e.code, scrub(e.message));
  const name = ckrName(e);
  const token = `token "${tokenLabel}"`;
  if (name === undefined)
    return new KeyError('hsm_error', scrub(`${what} on ${token} failed: ${firstLine(e)}`));
  const code = CKR_CODES[name] ?? 'hsm_error';
  switch (code) {
    case 'wrong_pin':
      return new KeyError(
        'wrong_pin',
        `${token} refused the PIN (${name}); not trying again: tokens lock the PIN after a few failures`,
      );
    case 'pin_locked':
      return new KeyError(
        'pin_locked',
        `the user PIN of ${token} is locked (${name}); a security officer must unlock it`,
      );
    case 'mechanism_missing':
      return new KeyError('mechanism_missing', `${what}: ${token} does not support the mechanism (${name})`);
    case 'unsupported_scheme':
      return new KeyError('unsupported_scheme', `${what}: ${token} does not support the curve (${name})`);
    case 'key_not_found':
      return new KeyError('key_not_found', `${what}: the key is no longer on ${token} (${name})`);
    default:
      return new KeyError(code, `${what} on ${token} failed (${name})`);
  }
}

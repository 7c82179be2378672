/**
 * The objects on a token as the PKCS#11 backend sees them: the initialised
 * tokens in the slots, searching objects, reading attributes (a missing or
 * sensitive one is undefined), a private key with its public key (same
 * CKA_ID) as a key canton-signer can use, and the check that a generated
 * private key is protected. Stateless: each call names the loaded module and
 * the token (its label, for messages); the session pool and recovery stay in
 * src/keys/pkcs11-backend.ts.
 */
import type { PKCS11, Template } from 'pkcs11js';
import { KeyError } from '../backend.js';
import { type KeyScheme, spkiFromRaw } from '../schemes.js';
import { ckrName, NotLoggedIn, pkcs11js } from './library.js';
import {
  CKK_EC,
  CKK_EC_EDWARDS,
  CKS_RO_USER_FUNCTIONS,
  CKS_RW_USER_FUNCTIONS,
  isoDate,
  rawPublicKey,
  schemeOf,
  ulong,
} from './mechanisms.js';

/** The loaded module and the label of the token it is used for (named in errors). */
export interface TokenRef {
  readonly lib: PKCS11;
  readonly label: string;
}

/** A private key on the token and what canton-signer knows of it. */
export interface TokenKey {
  label: string;
  scheme: KeyScheme;
  spki: Buffer;
  createdAt: string;
  privateKey: Buffer;
  id: Buffer;
}

export function initializedTokens(lib: PKCS11): { slot: Buffer; id: number; label: string; flags: number }[] {
  const out: { slot: Buffer; id: number; label: string; flags: number }[] = [];
  for (const slot of lib.C_GetSlotList(true)) {
    let info: { label: string; flags: number };
    try {
      info = lib.C_GetTokenInfo(slot);
    } catch (e) {
      if (ckrName(e) === 'CKR_CRYPTOKI_NOT_INITIALIZED') throw e;
      continue; // a token going away
    }
    if ((info.flags & pkcs11js.CKF_TOKEN_INITIALIZED) === 0) continue;
    out.push({ slot, id: ulong(slot), label: info.label.replace(/[\s\0]+$/, ''), flags: info.flags });
  }
  return out;
}

/**
 * The one initialised token with the wanted label and/or slot id; refused when none or several
 * match (naming the tokens present), or when its user PIN is locked.
 */
export function locateToken(
  lib: PKCS11,
  modulePath: string,
  want: { label?: string; slot?: number },
): { slot: Buffer; label: string } {
  const { label, slot } = want;
  const tokens = initializedTokens(lib);
  const matches = tokens.filter(
    (t) => (label === undefined || t.label === label) && (slot === undefined || t.id === slot),
  );
  const wanted =
    label !== undefined && slot !== undefined
      ? `labelled "${label}" in slot ${slot}`
      : label !== undefined
        ? `labelled "${label}"`
        : slot !== undefined
          ? `in slot ${slot}`
          : '(none named: set CANTON_SIGNER_PKCS11_TOKEN)';
  const present = tokens.map((t) => `"${t.label}" (slot ${t.id})`).join(', ') || 'none';
  if (matches.length !== 1)
    throw new KeyError(
      'token_not_found',
      matches.length === 0
        ? `no initialised PKCS#11 token ${wanted} in ${modulePath}; tokens present: ${present}`
        : `${matches.length} PKCS#11 tokens match ${wanted === '(none named: set CANTON_SIGNER_PKCS11_TOKEN)' ? 'an unnamed token' : wanted}; name one (CANTON_SIGNER_PKCS11_TOKEN / CANTON_SIGNER_PKCS11_SLOT). Tokens present: ${present}`,
    );
  const token = matches[0]!;
  if (token.flags & pkcs11js.CKF_USER_PIN_LOCKED)
    throw new KeyError(
      'pin_locked',
      `the user PIN of token "${token.label}" is locked; a security officer must unlock it`,
    );
  return { slot: token.slot, label: token.label };
}

/**
 * Private objects are invisible to a session that is not logged in (the login can be lost
 * without an error, e.g. by another C_Logout or an HSM's idle timeout): before "not found" is
 * believed, the session must be logged in.
 */
export function requireLogin(t: TokenRef, session: Buffer): void {
  const state = t.lib.C_GetSessionInfo(session).state;
  if (state !== CKS_RO_USER_FUNCTIONS && state !== CKS_RW_USER_FUNCTIONS) throw new NotLoggedIn();
}

export function findObjects(t: TokenRef, session: Buffer, template: Template): Buffer[] {
  const lib = t.lib;
  lib.C_FindObjectsInit(session, template);
  const out: Buffer[] = [];
  try {
    for (;;) {
      const batch = lib.C_FindObjects(session, 256);
      out.push(...batch);
      if (batch.length < 256) break;
    }
  } finally {
    try {
      lib.C_FindObjectsFinal(session);
    } catch {
      // the session is gone; the error that matters was raised above
    }
  }
  return out;
}

/** One attribute; undefined when the object does not have it (or it cannot be read). */
export function attribute(t: TokenRef, session: Buffer, object: Buffer, type: number): Buffer | undefined {
  try {
    const [a] = t.lib.C_GetAttributeValue(session, object, [{ type }]);
    return a?.value;
  } catch (e) {
    const name = ckrName(e);
    if (name === 'CKR_ATTRIBUTE_TYPE_INVALID' || name === 'CKR_ATTRIBUTE_SENSITIVE') return undefined;
    if (name === undefined) return undefined; // pkcs11js could not convert the value
    throw e;
  }
}

export function lookupKey(t: TokenRef, session: Buffer, label: string): TokenKey | undefined {
  const privates = findObjects(t, session, [
    { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
    { type: pkcs11js.CKA_LABEL, value: label },
  ]);
  if (privates.length === 0) {
    requireLogin(t, session);
    return undefined;
  }
  if (privates.length > 1)
    throw new KeyError(
      'hsm_error',
      `${privates.length} private keys are labelled "${label}" on token "${t.label}"; remove the extra ones with the token's tools`,
    );
  return describeKey(t, session, privates[0]!);
}

/**
 * A private key with its public key (same CKA_ID) as canton-signer sees it;
 * undefined when it is not a key canton-signer can use.
 */
export function describeKey(t: TokenRef, session: Buffer, privateKey: Buffer): TokenKey | undefined {
  const label = attribute(t, session, privateKey, pkcs11js.CKA_LABEL)?.toString('utf8');
  const id = attribute(t, session, privateKey, pkcs11js.CKA_ID);
  const keyType = attribute(t, session, privateKey, pkcs11js.CKA_KEY_TYPE);
  if (!label || !id || id.length === 0 || !keyType) return undefined;
  if (ulong(keyType) !== CKK_EC && ulong(keyType) !== CKK_EC_EDWARDS) return undefined;
  const privateScheme = schemeOf(ulong(keyType), attribute(t, session, privateKey, pkcs11js.CKA_EC_PARAMS));
  const publics = findObjects(t, session, [
    { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY },
    { type: pkcs11js.CKA_ID, value: id },
  ]);
  if (publics.length !== 1) return undefined;
  const pub = publics[0]!;
  const pubType = attribute(t, session, pub, pkcs11js.CKA_KEY_TYPE);
  const scheme = pubType && schemeOf(ulong(pubType), attribute(t, session, pub, pkcs11js.CKA_EC_PARAMS));
  if (!scheme || (privateScheme !== undefined && privateScheme !== scheme)) return undefined;
  const point = attribute(t, session, pub, pkcs11js.CKA_EC_POINT);
  const raw = point && rawPublicKey(scheme, point);
  let spki: Buffer;
  try {
    if (!raw) throw new Error('bad encoding');
    spki = spkiFromRaw(scheme, raw);
  } catch {
    throw new KeyError(
      'hsm_error',
      `the public key of "${label}" on token "${t.label}" is not a valid ${scheme} key`,
    );
  }
  // SoftHSM cannot read CKA_START_DATE back from private objects: it is set on both, read from the public key.
  const createdAt = isoDate(attribute(t, session, pub, pkcs11js.CKA_START_DATE));
  return { label, scheme, spki, createdAt, privateKey, id };
}

export function checkProtected(t: TokenRef, session: Buffer, privateKey: Buffer): void {
  const flag = (type: number) => attribute(t, session, privateKey, type)?.[0];
  const sensitive = flag(pkcs11js.CKA_SENSITIVE);
  const extractable = flag(pkcs11js.CKA_EXTRACTABLE);
  const never = flag(pkcs11js.CKA_NEVER_EXTRACTABLE);
  const always = flag(pkcs11js.CKA_ALWAYS_SENSITIVE);
  const isPrivate = flag(pkcs11js.CKA_PRIVATE);
  if (sensitive !== 1 || extractable !== 0 || never !== 1 || always !== 1 || isPrivate !== 1)
    throw new KeyError(
      'hsm_error',
      `token "${t.label}" made a private key that is not protected ` +
        `(CKA_SENSITIVE=${sensitive}, CKA_EXTRACTABLE=${extractable}, CKA_NEVER_EXTRACTABLE=${never}, ` +
        `CKA_ALWAYS_SENSITIVE=${always}, CKA_PRIVATE=${isPrivate}); it was destroyed`,
    );
}

export function destroyQuietly(t: TokenRef, session: Buffer, handle: Buffer): void {
  try {
    t.lib.C_DestroyObject(session, handle);
  } catch {
    // nothing more to do
  }
}

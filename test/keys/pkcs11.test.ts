/**
 * The PKCS#11 backend against a real SoftHSM2 token: capability probe, key
 * generation for every scheme (signatures checked with node:crypto and
 * @noble/curves, fingerprints computed independently), key protection
 * attributes read back with a separate pkcs11js handle, 1,000 concurrent
 * signatures, restart, lost sessions, a finalised library, a re-initialised
 * and a re-created token, PIN handling, configuration errors, and that no PIN
 * ever shows in an error or on the console.
 *
 * In CI a missing SoftHSM fails this file; locally it is skipped with a warning.
 */
import { createHash, createPublicKey, randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { p256, p384 } from '@noble/curves/nist.js';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import type { PKCS11 } from 'pkcs11js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { fingerprint } from '../../src/hashing/canton-hash.js';
import { type BackendKey, KeyError, type KeyErrorCode } from '../../src/keys/backend.js';
import { Pkcs11Backend, pkcs11ConfigFromEnv } from '../../src/keys/pkcs11-backend.js';
import { KEY_SCHEMES, type KeyScheme, verifySignature } from '../../src/keys/schemes.js';
import { createSoftHsmToken, requireSoftHsm, type SoftHsmToken } from '../support/softhsm.js';

const pkcs11js = createRequire(import.meta.url)('pkcs11js') as typeof import('pkcs11js');

const CKM_ECDSA_SHA256 = 0x1044;
const CKM_EDDSA = 0x1057;
const CKM_EC_EDWARDS_KEY_PAIR_GEN = 0x1055;

// Every C_Login of this process, the backend's included: pkcs11js copies the native methods onto
// each PKCS11 instance when it is constructed, so wrapping the native one first sees them all.
let loginCalls = 0;
const nativeProto = Object.getPrototypeOf(pkcs11js.PKCS11.prototype) as {
  C_Login: (...args: unknown[]) => unknown;
};
const nativeLogin = nativeProto.C_Login;
nativeProto.C_Login = function (this: unknown, ...args: unknown[]) {
  loginCalls++;
  return nativeLogin.apply(this, args);
};

// Everything written to the console, and every error a test saw: no PIN may be in any of it.
const written: string[] = [];
for (const level of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) {
  const original = console[level].bind(console);
  vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
    written.push(args.map((a) => (typeof a === 'string' ? a : inspect(a))).join(' '));
    original(...args);
  });
}
const errors: string[] = [];
const secrets: string[] = [];

async function keyError(p: Promise<unknown>, code: KeyErrorCode): Promise<KeyError> {
  let caught: unknown;
  try {
    await p;
  } catch (e) {
    caught = e;
  }
  if (caught === undefined) throw new Error(`expected KeyError ${code}, but the call succeeded`);
  errors.push(caught instanceof Error ? `${caught.message}\n${caught.stack}` : String(caught));
  expect(caught).toBeInstanceOf(KeyError);
  expect((caught as KeyError).code, (caught as KeyError).message).toBe(code);
  return caught as KeyError;
}

// ---- independent checks ----------------------------------------------------------------------

/** Raw public key via node:crypto's JWK export: 32 bytes (Ed25519) or 04 ‖ x ‖ y. */
function rawKey(spki: Uint8Array): Buffer {
  const jwk = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' }).export({
    format: 'jwk',
  });
  if (jwk.kty === 'OKP') return Buffer.from(jwk.x!, 'base64url');
  return Buffer.concat([
    Buffer.from([4]),
    Buffer.from(jwk.x!, 'base64url'),
    Buffer.from(jwk.y!, 'base64url'),
  ]);
}

/** CantonHash(12, K) = 0x12 0x20 ‖ SHA-256(be32(12) ‖ K); K = raw Ed25519 key, or the SPKI DER (ECDSA). */
function cantonFingerprint(scheme: KeyScheme, spki: Uint8Array): string {
  const k = scheme === 'ed25519' ? rawKey(spki) : Buffer.from(spki);
  const purpose = Buffer.from([0, 0, 0, 12]);
  return `1220${createHash('sha256').update(purpose).update(k).digest('hex')}`;
}

const NOBLE = { 'ecdsa-p256': p256, 'ecdsa-secp256k1': secp256k1, 'ecdsa-p384': p384 } as const;
const DIGEST = { 'ecdsa-p256': 'sha256', 'ecdsa-secp256k1': 'sha256', 'ecdsa-p384': 'sha384' } as const;

/** ECDSA verification of a DER signature over `digest` taken as is (no hashing). */
function verifiesOverDigest(
  scheme: Exclude<KeyScheme, 'ed25519'>,
  spki: Uint8Array,
  digest: Uint8Array,
  sig: Uint8Array,
) {
  try {
    return NOBLE[scheme].verify(sig, digest, rawKey(spki), { prehash: false, lowS: false, format: 'der' });
  } catch {
    return false;
  }
}

function checkSignature(key: BackendKey, message: Uint8Array, sig: Uint8Array): void {
  expect(verifySignature(key.scheme, key.spki, message, sig), `${key.scheme} ${key.label}`).toBe(true);
  if (key.scheme === 'ed25519') {
    expect(sig.length).toBe(64);
    return;
  }
  const digest = createHash(DIGEST[key.scheme]).update(message).digest();
  expect(verifiesOverDigest(key.scheme, key.spki, digest, sig), 'over digest(message)').toBe(true);
  expect(verifiesOverDigest(key.scheme, key.spki, message, sig), 'over the raw message').toBe(false);
}

// ---- a second pkcs11js handle on the same module, as another part of the process would have ----

let raw: PKCS11 | undefined;

function rawLib(module: string): PKCS11 {
  if (!raw) {
    raw = new pkcs11js.PKCS11();
    raw.load(module);
  }
  try {
    raw.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK });
  } catch (e) {
    if ((e as Error).message !== 'CKR_CRYPTOKI_ALREADY_INITIALIZED') throw e;
  }
  return raw;
}

function rawSlot(lib: PKCS11, label: string): Buffer {
  const slot = lib.C_GetSlotList(true).find((s) => {
    try {
      return lib.C_GetTokenInfo(s).label.trim() === label;
    } catch {
      return false;
    }
  });
  if (!slot) throw new Error(`no token ${label}`);
  return slot;
}

function withRawSession<T>(lib: PKCS11, slot: Buffer, fn: (session: Buffer) => T): T {
  const session = lib.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION);
  try {
    return fn(session);
  } finally {
    lib.C_CloseSession(session);
  }
}

// -------------------------------------------------------------------------------------------------

const MODULE = requireSoftHsm();
const today = () => `${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`;
const message = () => randomBytes(32);

describe('pkcs11ConfigFromEnv', () => {
  it('nothing configured without a module; the PIN from the environment or a file, never an argument', () => {
    expect(pkcs11ConfigFromEnv({})).toBeUndefined();
    expect(pkcs11ConfigFromEnv({ CANTON_SIGNER_PKCS11_PIN: '1234' })).toBeUndefined();
    expect(
      pkcs11ConfigFromEnv({
        CANTON_SIGNER_PKCS11_MODULE: '/m.so',
        CANTON_SIGNER_PKCS11_TOKEN: 'tok',
        CANTON_SIGNER_PKCS11_PIN: 'pin-env-1',
        CANTON_SIGNER_PKCS11_SESSIONS: '8',
      }),
    ).toEqual({ module: '/m.so', token: 'tok', pin: 'pin-env-1', sessions: 8 });
    const file = join(tmpdir(), `canton-signer-pin-${process.pid}-${randomBytes(4).toString('hex')}`);
    writeFileSync(file, 'pin-from-file-9\n', { mode: 0o600 });
    try {
      expect(
        pkcs11ConfigFromEnv({
          CANTON_SIGNER_PKCS11_MODULE: '/m.so',
          CANTON_SIGNER_PKCS11_SLOT: '42',
          CANTON_SIGNER_PKCS11_PIN_FILE: file,
        }),
      ).toEqual({ module: '/m.so', slot: 42, pin: 'pin-from-file-9' });
    } finally {
      rmSync(file, { force: true });
    }
  });

  it('a module without a PIN is no_pin; a bad slot id is refused', async () => {
    await keyError(
      (async () =>
        pkcs11ConfigFromEnv({ CANTON_SIGNER_PKCS11_MODULE: '/m.so', CANTON_SIGNER_PKCS11_TOKEN: 't' }))(),
      'no_pin',
    );
    await keyError(
      (async () =>
        pkcs11ConfigFromEnv({
          CANTON_SIGNER_PKCS11_MODULE: '/m.so',
          CANTON_SIGNER_PKCS11_SLOT: 'first',
          CANTON_SIGNER_PKCS11_PIN: '1234',
        }))(),
      'token_not_found',
    );
    await keyError(Pkcs11Backend.open({ module: '/m.so', pin: '' }), 'no_pin');
  });
});

describe.skipIf(!MODULE)('PKCS#11 backend on SoftHSM2', () => {
  let token: SoftHsmToken;
  let backend: Pkcs11Backend;
  const keys = new Map<KeyScheme, BackendKey>();
  const open = (extra: Partial<Parameters<typeof Pkcs11Backend.open>[0]> = {}) =>
    Pkcs11Backend.open({ module: token.module, token: token.tokenLabel, pin: token.pin, ...extra });

  beforeAll(async () => {
    token = await createSoftHsmToken();
    secrets.push(token.pin, token.soPin);
    backend = await open();
  });

  afterAll(async () => {
    await backend?.close();
    await token?.cleanup();
  });

  it('probes the mechanisms: all four schemes; no CKM_ECDSA_SHA256 on SoftHSM 2.6, so ECDSA hashes on the host', async () => {
    expect(backend.kind).toBe('pkcs11');
    expect(backend.token).toBe(token.tokenLabel);
    expect(await backend.schemes()).toEqual([...KEY_SCHEMES]);
    const lib = rawLib(token.module);
    const mechanisms = lib.C_GetMechanismList(rawSlot(lib, token.tokenLabel));
    expect(mechanisms).toContain(CKM_EDDSA);
    expect(mechanisms).toContain(CKM_EC_EDWARDS_KEY_PAIR_GEN);
    expect(mechanisms).toContain(pkcs11js.CKM_ECDSA);
    // The host-digest path below is the one exercised (pinned by Debian's softhsm2 2.6.1).
    expect(mechanisms).not.toContain(CKM_ECDSA_SHA256);
  });

  it.each([...KEY_SCHEMES])(
    'generates %s: the signature verifies; SPKI and fingerprint are Canton’s',
    async (scheme) => {
      const label = `key-${scheme}`;
      const dayBefore = today();
      const key = await backend.generate(label, scheme);
      keys.set(scheme, key);
      expect(key.label).toBe(label);
      expect(key.scheme).toBe(scheme);
      // Tokens record no creation time: the day, from CKA_START_DATE.
      expect([dayBefore, today()]).toContain(key.createdAt);
      // The SPKI is the canonical DER encoding (what node:crypto exports), with the named curve.
      const spki = Buffer.from(key.spki);
      const reexported = createPublicKey({ key: spki, format: 'der', type: 'spki' }).export({
        type: 'spki',
        format: 'der',
      });
      expect(spki.equals(reexported)).toBe(true);
      expect(fingerprint(key.spki)).toBe(cantonFingerprint(scheme, key.spki));
      if (scheme === 'ed25519')
        expect(fingerprint(rawKey(key.spki))).toBe(cantonFingerprint(scheme, key.spki));
      for (const m of [
        message(),
        Buffer.concat([Buffer.from([0x12, 0x20]), randomBytes(32)]),
        randomBytes(1000),
      ]) {
        const sig = await backend.sign(key, m);
        checkSignature(key, m, sig);
      }
      expect(await backend.find(label)).toEqual(key);
    },
  );

  it('private keys are sensitive, never extractable, private, sign-only; the public key matches', () => {
    const lib = rawLib(token.module);
    const slot = rawSlot(lib, token.tokenLabel);
    // The backend's login is the process's: this session sees the private objects too.
    withRawSession(lib, slot, (session) => {
      for (const [scheme, key] of keys) {
        lib.C_FindObjectsInit(session, [
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
          { type: pkcs11js.CKA_LABEL, value: key.label },
        ]);
        const found = lib.C_FindObjects(session, 10);
        lib.C_FindObjectsFinal(session);
        expect(found, scheme).toHaveLength(1);
        const attrs = lib.C_GetAttributeValue(session, found[0]!, [
          { type: pkcs11js.CKA_TOKEN },
          { type: pkcs11js.CKA_PRIVATE },
          { type: pkcs11js.CKA_SENSITIVE },
          { type: pkcs11js.CKA_ALWAYS_SENSITIVE },
          { type: pkcs11js.CKA_EXTRACTABLE },
          { type: pkcs11js.CKA_NEVER_EXTRACTABLE },
          { type: pkcs11js.CKA_SIGN },
          { type: pkcs11js.CKA_DERIVE },
          { type: pkcs11js.CKA_ID },
        ]);
        const [tok, priv, sens, alwaysSens, extr, neverExtr, sign, derive, id] = attrs.map((a) => a.value);
        expect(
          [tok, priv, sens, alwaysSens, extr, neverExtr, sign, derive].map((v) => v?.[0]),
          scheme,
        ).toEqual([1, 1, 1, 1, 0, 1, 1, 0]);
        expect(id?.length, scheme).toBe(16);
        expect(() => lib.C_GetAttributeValue(session, found[0]!, [{ type: pkcs11js.CKA_VALUE }])).toThrow(
          /CKR_ATTRIBUTE_SENSITIVE/,
        );
        // The public key with the same CKA_ID holds the point the SPKI was built from.
        lib.C_FindObjectsInit(session, [
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PUBLIC_KEY },
          { type: pkcs11js.CKA_ID, value: id! },
        ]);
        const pub = lib.C_FindObjects(session, 10);
        lib.C_FindObjectsFinal(session);
        expect(pub, scheme).toHaveLength(1);
        const [point] = lib.C_GetAttributeValue(session, pub[0]!, [{ type: pkcs11js.CKA_EC_POINT }]);
        const rawPoint = rawKey(key.spki);
        // DER OCTET STRING around the raw key.
        expect(point!.value.subarray(2).equals(rawPoint), scheme).toBe(true);
        expect(point!.value.subarray(0, 2)).toEqual(Buffer.from([0x04, rawPoint.length]));
      }
    });
  });

  it('ECDSA without CKM_ECDSA_SHA256 signs SHA-256 (SHA-384) of the message, not the message as a digest', async () => {
    for (const scheme of ['ecdsa-p256', 'ecdsa-secp256k1', 'ecdsa-p384'] as const) {
      const key = keys.get(scheme)!;
      const m = message();
      const sig = await backend.sign(key, m);
      expect(verifySignature(scheme, key.spki, m, sig)).toBe(true);
      expect(verifiesOverDigest(scheme, key.spki, createHash(DIGEST[scheme]).update(m).digest(), sig)).toBe(
        true,
      );
      expect(verifiesOverDigest(scheme, key.spki, m, sig)).toBe(false);
    }
  });

  it('1,000 concurrent signatures per scheme all verify (session pool of 4)', async () => {
    const rates: string[] = [];
    for (const scheme of KEY_SCHEMES) {
      const key = keys.get(scheme)!;
      const messages = Array.from({ length: 1000 }, message);
      const started = performance.now();
      const sigs = await Promise.all(messages.map((m) => backend.sign(key, m)));
      const seconds = (performance.now() - started) / 1000;
      rates.push(`${scheme} ${Math.round(1000 / seconds)} sig/s`);
      sigs.forEach((sig, i) => {
        expect(verifySignature(scheme, key.spki, messages[i]!, sig), `${scheme} #${i}`).toBe(true);
      });
    }
    console.info(`PKCS#11 (SoftHSM2, 4 sessions): ${rates.join(', ')}`);
  });

  it('list and find: every key, by label; unknown labels; taken and invalid labels are refused', async () => {
    const listed = await backend.list();
    expect(listed.map((k) => k.label)).toEqual([...keys.values()].map((k) => k.label).sort());
    for (const k of listed) expect(k).toEqual(keys.get(k.scheme));
    expect(await backend.find('no-such-key')).toBeUndefined();
    await keyError(backend.generate('key-ed25519', 'ecdsa-p256'), 'key_exists');
    await keyError(backend.generate('bad label', 'ed25519'), 'invalid_label');
    await keyError(backend.find('../x'), 'invalid_label');
    await keyError(backend.generate('x', 'rsa' as KeyScheme), 'unsupported_scheme');
  });

  it('an empty message is refused before it reaches the token (SoftHSM would leave the operation active); ECDSA signs its digest', async () => {
    const ed = keys.get('ed25519')!;
    expect((await keyError(backend.sign(ed, new Uint8Array(0)), 'hsm_error')).message).toContain('empty');
    const m = message();
    checkSignature(ed, m, await backend.sign(ed, m));
    const ec = keys.get('ecdsa-p256')!;
    checkSignature(ec, new Uint8Array(0), await backend.sign(ec, new Uint8Array(0)));
  });

  it('a key signs only as itself: a stale BackendKey with another public key is refused', async () => {
    const ed = keys.get('ed25519')!;
    const other = keys.get('ecdsa-p256')!;
    await keyError(
      backend.sign({ ...ed, spki: other.spki, scheme: other.scheme }, message()),
      'public_key_mismatch',
    );
    await keyError(backend.sign({ ...ed, label: 'never-made' }, message()), 'key_not_found');
  });

  it('after a restart (new backend) the keys are found again by label and sign', async () => {
    await backend.close();
    await keyError(backend.sign(keys.get('ed25519')!, message()), 'backend_unavailable');
    backend = await open();
    for (const [scheme, key] of keys) {
      const again = await backend.find(key.label);
      expect(again, scheme).toEqual(key);
      const m = message();
      checkSignature(key, m, await backend.sign(key, m));
    }
  });

  it('sessions closed under it (C_CloseAllSessions from another handle): the next sign reconnects and succeeds', async () => {
    const lib = rawLib(token.module);
    const key = keys.get('ed25519')!;
    const logins = loginCalls;
    lib.C_CloseAllSessions(rawSlot(lib, token.tokenLabel));
    const m = message();
    checkSignature(key, m, await backend.sign(key, m));
    expect(loginCalls - logins).toBe(1); // logged in again, once
  });

  // The sessions are closed while no call is on the token: SoftHSM 2.6.1 frees a session that
  // C_CloseAllSessions closes while another thread is inside C_Sign on it, and crashes (seen with
  // bare pkcs11js too). The first signatures take pooled sessions and reach the token at once, so
  // closing with signatures in flight would race that crash; the backend itself never closes a
  // session that a call is using.
  it('sessions closed, then 1,000 concurrent signatures: every one succeeds, after one reconnection', async () => {
    const lib = rawLib(token.module);
    const slot = rawSlot(lib, token.tokenLabel);
    const logins = loginCalls;
    for (const scheme of ['ed25519', 'ecdsa-p256'] as const) {
      const key = keys.get(scheme)!;
      const before = loginCalls;
      const messages = Array.from({ length: 1000 }, message);
      lib.C_CloseAllSessions(slot);
      const pending = messages.map((m) => backend.sign(key, m));
      const sigs = await Promise.all(pending);
      sigs.forEach((sig, i) => {
        expect(verifySignature(key.scheme, key.spki, messages[i]!, sig), `${scheme} #${i}`).toBe(true);
      });
      expect(loginCalls - before, scheme).toBe(1);
    }
    expect(loginCalls - logins).toBe(2);
  });

  it('logged out under it (C_Logout from another handle): the next call logs in again, not "key not found"', async () => {
    const lib = rawLib(token.module);
    const logout = () =>
      withRawSession(lib, rawSlot(lib, token.tokenLabel), (session) => lib.C_Logout(session));
    const logins = loginCalls;
    // A key whose handle is cached (just used) …
    const cached = keys.get('ecdsa-p256')!;
    await backend.sign(cached, message());
    logout();
    const m = message();
    checkSignature(cached, m, await backend.sign(cached, m));
    expect(loginCalls - logins).toBe(1);
    // … and one looked up afresh: a session that is not logged in sees no private keys at all.
    logout();
    const fresh = keys.get('ecdsa-p384')!;
    checkSignature(fresh, m, await backend.sign(fresh, m));
    expect(loginCalls - logins).toBe(2);
    logout();
    expect(await backend.list()).toHaveLength(keys.size);
    logout();
    expect(await backend.find(fresh.label)).toEqual(fresh);
    expect(loginCalls - logins).toBe(4);
  });

  it('the library finalised under it (C_Finalize from another handle): the next sign initialises again', async () => {
    rawLib(token.module).C_Finalize();
    const key = keys.get('ecdsa-secp256k1')!;
    const m = message();
    checkSignature(key, m, await backend.sign(key, m));
    expect(await backend.list()).toHaveLength(keys.size);
  });

  it('remove destroys both objects; the key is then not found', async () => {
    const key = await backend.generate('to-remove', 'ed25519');
    await backend.remove('to-remove');
    expect(await backend.find('to-remove')).toBeUndefined();
    await keyError(backend.sign(key, message()), 'key_not_found');
    await keyError(backend.remove('to-remove'), 'key_not_found');
    const lib = rawLib(token.module);
    withRawSession(lib, rawSlot(lib, token.tokenLabel), (session) => {
      lib.C_FindObjectsInit(session, [{ type: pkcs11js.CKA_LABEL, value: 'to-remove' }]);
      expect(lib.C_FindObjects(session, 10)).toHaveLength(0);
      lib.C_FindObjectsFinal(session);
    });
    // The label is free again.
    const again = await backend.generate('to-remove', 'ecdsa-p256');
    await backend.remove(again.label);
  });

  it('token re-initialised in place: signing says key_not_found (not a crash); a new key works, also after a restart', async () => {
    const old = keys.get('ed25519')!;
    await token.reinit();
    await keyError(backend.sign(old, message()), 'key_not_found');
    expect(await backend.list()).toEqual([]);
    expect(await backend.find(old.label)).toBeUndefined();
    const fresh = await backend.generate('after-reinit', 'ed25519');
    const m = message();
    checkSignature(fresh, m, await backend.sign(fresh, m));
    await backend.close();
    backend = await open();
    expect(await backend.find('after-reinit')).toEqual(fresh);
    checkSignature(fresh, m, await backend.sign(fresh, m));
    keys.clear();
    keys.set('ed25519', fresh);
  });

  it('token deleted: token_not_found; made again (new slot id): the old key is not found, a new key works', async () => {
    const old = keys.get('ed25519')!;
    await token.deleteToken();
    await keyError(backend.sign(old, message()), 'key_not_found');
    const gone = await keyError(backend.generate('while-gone', 'ed25519'), 'token_not_found');
    expect(gone.message).toContain(token.tokenLabel);
    await keyError(backend.list(), 'token_not_found'); // tried again, still not there
    await token.initToken();
    await keyError(backend.sign(old, message()), 'key_not_found');
    const fresh = await backend.generate('after-recreate', 'ecdsa-p384');
    const m = message();
    checkSignature(fresh, m, await backend.sign(fresh, m));
    expect((await backend.list()).map((k) => k.label)).toEqual(['after-recreate']);
    await backend.close();
    backend = await open();
    checkSignature(fresh, m, await backend.sign(fresh, m));
  });

  describe('PIN and configuration errors', () => {
    beforeAll(async () => {
      // No backend logged in: the token itself must judge the PIN.
      await backend.close();
    });

    it('a wrong PIN is wrong_pin, at once, after exactly one C_Login; the token is not locked', async () => {
      const wrong = `wrong-${randomBytes(6).toString('hex')}`;
      secrets.push(wrong);
      const before = loginCalls;
      const started = performance.now();
      const e = await keyError(open({ pin: wrong }), 'wrong_pin');
      expect(performance.now() - started).toBeLessThan(2000);
      expect(loginCalls - before).toBe(1);
      expect(e.message).toContain('CKR_PIN_INCORRECT');
      const lib = rawLib(token.module);
      const info = lib.C_GetTokenInfo(rawSlot(lib, token.tokenLabel));
      expect(info.flags & pkcs11js.CKF_USER_PIN_LOCKED).toBe(0);
      // The right PIN still works.
      backend = await open();
      expect(await backend.list()).toHaveLength(1);
    });

    it('a second backend with a wrong PIN is refused even though the process is logged in', async () => {
      const wrong = `other-${randomBytes(6).toString('hex')}`;
      secrets.push(wrong);
      await keyError(open({ pin: wrong }), 'wrong_pin');
      // The first backend is unaffected.
      const [key] = await backend.list();
      const m = message();
      checkSignature(key!, m, await backend.sign(key!, m));
    });

    it('a PIN from CANTON_SIGNER_PKCS11_PIN_FILE opens the token; so does the slot id alone', async () => {
      const file = join(token.dir, 'pin');
      writeFileSync(file, `${token.pin}\n`, { mode: 0o600 });
      const config = pkcs11ConfigFromEnv({
        CANTON_SIGNER_PKCS11_MODULE: token.module,
        CANTON_SIGNER_PKCS11_TOKEN: token.tokenLabel,
        CANTON_SIGNER_PKCS11_PIN_FILE: file,
        CANTON_SIGNER_PKCS11_SESSIONS: '2',
      });
      const second = await Pkcs11Backend.open(config!);
      expect((await second.list()).map((k) => k.label)).toEqual(['after-recreate']);
      await second.close();
      const lib = rawLib(token.module);
      const slotId = Number(rawSlot(lib, token.tokenLabel).readBigUInt64LE());
      const bySlot = await Pkcs11Backend.open({ module: token.module, slot: slotId, pin: token.pin });
      expect(bySlot.token).toBe(token.tokenLabel);
      await bySlot.close();
      // The first backend still works after the others closed.
      const [key] = await backend.list();
      const m = message();
      checkSignature(key!, m, await backend.sign(key!, m));
    });

    it('an unknown token label is token_not_found, naming the tokens present', async () => {
      const e = await keyError(open({ token: 'no-such-token' }), 'token_not_found');
      expect(e.message).toContain('no-such-token');
      expect(e.message).toContain(`"${token.tokenLabel}"`);
      await keyError(open({ token: undefined, slot: 999_999 }), 'token_not_found');
    });

    it('a module that fails to initialise (SoftHSM without its configuration) is hsm_module', async () => {
      await backend.close(); // the library is finalised: the next C_Initialize reads SOFTHSM2_CONF
      const conf = process.env.SOFTHSM2_CONF;
      process.env.SOFTHSM2_CONF = join(token.dir, 'missing.conf');
      try {
        const e = await keyError(open(), 'hsm_module');
        expect(e.message).toContain('SOFTHSM2_CONF');
      } finally {
        process.env.SOFTHSM2_CONF = conf;
      }
      backend = await open();
    });

    it('a module that cannot be loaded is hsm_module, naming the path', async () => {
      const path = join(token.dir, 'no-such-module.so');
      const e = await keyError(open({ module: path }), 'hsm_module');
      expect(e.message).toContain(path);
      const notALibrary = join(token.dir, 'softhsm2.conf');
      expect((await keyError(open({ module: notALibrary }), 'hsm_module')).message).toContain(notALibrary);
    });

    it('a bad session pool size is refused', async () => {
      await keyError(open({ sessions: 0 }), 'backend_unavailable');
    });

    afterAll(async () => {
      // inspect() of a live backend shows no PIN either.
      secrets.push(inspect(backend, { depth: 4 }).includes(token.pin) ? 'PIN-IN-INSPECT' : '');
      await backend.close();
    });
  });
});

describe.skipIf(!MODULE)('a token without EdDSA (SoftHSM slots.mechanisms)', () => {
  let token: SoftHsmToken;
  let backend: Pkcs11Backend;

  beforeAll(async () => {
    // Every backend of this process is closed: the library is finalised, and the next
    // C_Initialize reads this configuration.
    token = await createSoftHsmToken();
    secrets.push(token.pin, token.soPin);
    writeFileSync(
      process.env.SOFTHSM2_CONF!,
      `directories.tokendir = ${join(token.dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n` +
        // SoftHSM 2.6.1 ignores the first entry of a "-" list, hence CKM_EDDSA twice.
        'slots.mechanisms = -CKM_EDDSA,CKM_EDDSA,CKM_EC_EDWARDS_KEY_PAIR_GEN\n',
    );
    backend = await Pkcs11Backend.open({ module: token.module, token: token.tokenLabel, pin: token.pin });
  });

  afterAll(async () => {
    await backend?.close();
    await token?.cleanup();
  });

  it('schemes() leaves Ed25519 out; generating it is mechanism_missing, naming what is missing', async () => {
    expect(await backend.schemes()).toEqual(['ecdsa-p256', 'ecdsa-secp256k1', 'ecdsa-p384']);
    const e = await keyError(backend.generate('ed', 'ed25519'), 'mechanism_missing');
    expect(e.message).toContain('CKM_EC_EDWARDS_KEY_PAIR_GEN');
    expect(e.message).toContain('CKM_EDDSA');
    const key = await backend.generate('ec', 'ecdsa-p256');
    const m = message();
    checkSignature(key, m, await backend.sign(key, m));
  });
});

describe.skipIf(!MODULE)('secrets', () => {
  it('no PIN appears in any error message or stack, on the console, or in inspect(backend)', () => {
    const pins = secrets.filter((s) => s.length > 0);
    expect(pins).not.toContain('PIN-IN-INSPECT');
    expect(pins.length).toBeGreaterThanOrEqual(6);
    expect(errors.length).toBeGreaterThan(10);
    expect(written.some((w) => w.includes('sig/s'))).toBe(true); // the console spy saw output
    for (const pin of pins) {
      for (const text of [...errors, ...written])
        expect(text.includes(pin), `a secret of length ${pin.length}`).toBe(false);
    }
  });
});

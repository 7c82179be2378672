/**
 * One conformance suite for every key backend, through the Signer contract
 * only (src/keys/signer.ts). A backend's test file calls
 *
 *   signerConformance('file', async () => ({ signer, backend: 'file', schemes, reopen, cleanup, secrets }))
 *
 * and gets the same tests as every other backend. Nothing here trusts the
 * product's own crypto helpers: Canton's fingerprint (canton-apis §4.2), the
 * key spec / algorithm / format table (§5) and the signature checks are
 * computed independently, with node:crypto and (as a second, unrelated
 * implementation, and to check the "not over the raw digest" rule) with
 * @noble/curves.
 *
 * The setup is called once per suite (beforeAll); tests use their own labels
 * in that one store. `cleanup` must close `signer` and remove whatever setup
 * created; the suite closes the Signers it got from `reopen()` itself, just
 * before calling `cleanup`.
 */
import { createHash, createPublicKey, type KeyObject, verify as nodeVerify, randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { ed25519 } from '@noble/curves/ed25519.js';
import { p256, p384 } from '@noble/curves/nist.js';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { afterAll, beforeAll, describe, expect, it, type MockInstance, vi } from 'vitest';
import { KeyError } from '../../src/keys/backend.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import type { KeyDescription, Signer, SignOutput } from '../../src/keys/signer.js';

export interface ConformanceSetup {
  signer: Signer;
  backend: 'file' | 'pkcs11';
  /** Schemes the backend must support; every test covers each of them. */
  schemes: KeyScheme[];
  /** A new Signer over the same store (same keys, same state folder). */
  reopen: () => Promise<Signer>;
  /** Closes `signer` and removes what setup created. */
  cleanup: () => Promise<void>;
  /** Passphrases / PINs used by the setup: none may show up in an error or on the console. */
  secrets: string[];
}

// ---- independent reference values and checks -----------------------------------------------

interface CantonScheme {
  keySpec: string;
  algorithm: string;
  format: string;
  /** Length of publicKeyRaw: the Ed25519 key, or the uncompressed point 04 ‖ x ‖ y. */
  rawLength: number;
  /** node:crypto digest name for crypto.verify (null: Ed25519 signs the message itself). */
  digest: 'sha256' | 'sha384' | null;
  /** OpenSSL curve name (ECDSA). */
  curve?: string;
}

/** canton-apis.md §5, typed out again here on purpose (not imported from src/keys/schemes.ts). */
export const CANTON: Readonly<Record<KeyScheme, CantonScheme>> = {
  ed25519: {
    keySpec: 'SIGNING_KEY_SPEC_EC_CURVE25519',
    algorithm: 'SIGNING_ALGORITHM_SPEC_ED25519',
    format: 'SIGNATURE_FORMAT_CONCAT',
    rawLength: 32,
    digest: null,
  },
  'ecdsa-p256': {
    keySpec: 'SIGNING_KEY_SPEC_EC_P256',
    algorithm: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
    format: 'SIGNATURE_FORMAT_DER',
    rawLength: 65,
    digest: 'sha256',
    curve: 'prime256v1',
  },
  'ecdsa-secp256k1': {
    keySpec: 'SIGNING_KEY_SPEC_EC_SECP256K1',
    algorithm: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_256',
    format: 'SIGNATURE_FORMAT_DER',
    rawLength: 65,
    digest: 'sha256',
    curve: 'secp256k1',
  },
  'ecdsa-p384': {
    keySpec: 'SIGNING_KEY_SPEC_EC_P384',
    algorithm: 'SIGNING_ALGORITHM_SPEC_EC_DSA_SHA_384',
    format: 'SIGNATURE_FORMAT_DER',
    rawLength: 97,
    digest: 'sha384',
    curve: 'secp384r1',
  },
};

const NOBLE = { 'ecdsa-p256': p256, 'ecdsa-secp256k1': secp256k1, 'ecdsa-p384': p384 } as const;

function spkiKey(spki: Uint8Array): KeyObject {
  return createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
}

/** Raw public key from SPKI via node:crypto's JWK export: 32 bytes (Ed25519) or 04 ‖ x ‖ y. */
export function rawPublicKey(spki: Uint8Array): Buffer {
  const jwk = spkiKey(spki).export({ format: 'jwk' });
  if (jwk.kty === 'OKP') return Buffer.from(jwk.x!, 'base64url');
  return Buffer.concat([
    Buffer.from([4]),
    Buffer.from(jwk.x!, 'base64url'),
    Buffer.from(jwk.y!, 'base64url'),
  ]);
}

/**
 * Canton fingerprint (canton-apis §4.1/§4.2): 0x12 0x20 ‖ SHA-256(be32(12) ‖ K), K = the raw
 * 32-byte key for Ed25519, the exact SPKI DER for ECDSA.
 */
export function cantonFingerprint(scheme: KeyScheme, spki: Uint8Array): string {
  const k = scheme === 'ed25519' ? rawPublicKey(spki) : Buffer.from(spki);
  const purpose = Buffer.alloc(4);
  purpose.writeUInt32BE(12);
  const digest = createHash('sha256').update(purpose).update(k).digest();
  return Buffer.concat([Buffer.from([0x12, 0x20]), digest]).toString('hex');
}

/** Verifies the way Canton does (JCA Ed25519 / SHA256withECDSA / SHA384withECDSA), with node:crypto. */
export function verifyCanton(
  scheme: KeyScheme,
  spki: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): boolean {
  if (scheme === 'ed25519' && signature.length !== 64) return false;
  return nodeVerify(CANTON[scheme].digest, message, { key: spkiKey(spki), dsaEncoding: 'der' }, signature);
}

/** ECDSA verification with @noble/curves over `digest` used as is (no hashing). */
function verifiesOverDigest(
  scheme: KeyScheme,
  spki: Uint8Array,
  digest: Uint8Array,
  sig: Uint8Array,
): boolean {
  const curve = NOBLE[scheme as keyof typeof NOBLE];
  try {
    return curve.verify(sig, digest, rawPublicKey(spki), { prehash: false, format: 'der', lowS: false });
  } catch {
    return false;
  }
}

/**
 * Strict DER check of an ECDSA signature: SEQUENCE { INTEGER r, INTEGER s }, minimal
 * encodings, nothing trailing, 0 < r, s < n.
 */
export function strictDer(scheme: KeyScheme, sig: Uint8Array): { r: bigint; s: bigint } {
  const n = NOBLE[scheme as keyof typeof NOBLE].Point.Fn.ORDER;
  const b = Buffer.from(sig);
  if (b[0] !== 0x30) throw new Error('not a SEQUENCE');
  if (b[1]! >= 0x80 || b[1] !== b.length - 2) throw new Error('bad SEQUENCE length');
  let at = 2;
  const integer = (): bigint => {
    if (b[at] !== 0x02) throw new Error('not an INTEGER');
    const len = b[at + 1]!;
    if (len === 0 || len >= 0x80 || at + 2 + len > b.length) throw new Error('bad INTEGER length');
    const v = b.subarray(at + 2, at + 2 + len);
    if (v[0]! & 0x80) throw new Error('negative INTEGER');
    if (v[0] === 0 && (len === 1 || !(v[1]! & 0x80))) throw new Error('non-minimal INTEGER');
    at += 2 + len;
    const x = BigInt(`0x${v.toString('hex')}`);
    if (x <= 0n || x >= n) throw new Error('INTEGER out of range');
    return x;
  };
  const r = integer();
  const s = integer();
  if (at !== b.length) throw new Error('trailing bytes');
  return { r, s };
}

/** A 34-byte topology-style hash: 0x12 0x20 ‖ 32 bytes. */
export function topologyHash(): Buffer {
  return Buffer.concat([Buffer.from([0x12, 0x20]), randomBytes(32)]);
}

/** Everything the Canton signature object and the sign output must satisfy. */
export function checkSignature(out: SignOutput, d: KeyDescription, message: Uint8Array): void {
  const scheme = d.scheme;
  const c = CANTON[scheme];
  const what = `${scheme} (${d.label})`;
  expect(out.signature.format, what).toBe(c.format);
  expect(out.signature.signingAlgorithmSpec, what).toBe(c.algorithm);
  expect(out.signature.signedBy, what).toBe(cantonFingerprint(scheme, d.publicKeySpki));
  const bytes = Buffer.from(out.signature.signature, 'base64');
  expect(bytes.toString('base64'), `${what}: canonical base64`).toBe(out.signature.signature);
  expect(Buffer.from(out.bytes).equals(bytes), `${what}: bytes = base64 signature`).toBe(true);
  expect(out.signatureHex, what).toBe(bytes.toString('hex'));
  expect(out.signatureHex, what).toMatch(/^[0-9a-f]+$/);
  if (scheme === 'ed25519') {
    expect(bytes.length, what).toBe(64);
    expect(ed25519.verify(bytes, message, rawPublicKey(d.publicKeySpki), { zip215: false }), what).toBe(true);
  } else {
    expect(() => strictDer(scheme, bytes), `${what}: strict DER`).not.toThrow();
    // Canton verifies SHA256withECDSA (SHA384withECDSA) over the message it is given: the key
    // signs digest(message), never the message itself taken as a digest.
    const digest = createHash(c.digest!).update(message).digest();
    expect(verifiesOverDigest(scheme, d.publicKeySpki, digest, bytes), `${what}: noble over digest`).toBe(
      true,
    );
    expect(
      verifiesOverDigest(scheme, d.publicKeySpki, message, bytes),
      `${what}: raw message as digest`,
    ).toBe(false);
  }
  expect(verifyCanton(scheme, d.publicKeySpki, message, bytes), `${what}: node:crypto verify`).toBe(true);
  const other = Buffer.from(message);
  other[0]! ^= 1;
  expect(verifyCanton(scheme, d.publicKeySpki, other, bytes), `${what}: other message`).toBe(false);
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected the operation to fail, but it succeeded');
}

// ---- the suite ----------------------------------------------------------------------------

export function signerConformance(name: string, setup: () => Promise<ConformanceSetup>): void {
  describe(`signer conformance: ${name}`, () => {
    let ctx: ConformanceSetup;
    const reopened: Signer[] = [];
    const errors: unknown[] = [];
    const spies: MockInstance[] = [];
    let debugSpy: MockInstance | undefined;
    const keys = new Map<KeyScheme, Promise<KeyDescription>>();

    const reopen = async (): Promise<Signer> => {
      const s = await ctx.reopen();
      reopened.push(s);
      return s;
    };

    const secretProblems = (text: string): string[] =>
      ctx.secrets.filter((s) => text.includes(s)).map((s) => `secret of length ${s.length}`);

    /** Expects a KeyError with `code`; keeps it for the final secrets check. */
    const expectCode = async (p: Promise<unknown>, code: string, what = ''): Promise<KeyError> => {
      const e = await rejection(p);
      errors.push(e);
      if (!(e instanceof KeyError)) throw new Error(`${what}: expected KeyError ${code}, got ${inspect(e)}`);
      expect(e.code, `${what}: ${e.message}`).toBe(code);
      expect(secretProblems(`${e.message}\n${e.stack}`), what).toEqual([]);
      return e;
    };

    /** One long-lived key per scheme, generated by whichever test needs it first. */
    const keyFor = (scheme: KeyScheme): Promise<KeyDescription> => {
      let k = keys.get(scheme);
      if (!k) {
        k = ctx.signer.generate({ label: `base-${scheme}`, scheme, backend: ctx.backend });
        keys.set(scheme, k);
      }
      return k;
    };

    const codeOf = async (p: Promise<unknown>): Promise<string> => {
      try {
        await p;
        return 'ok';
      } catch (e) {
        errors.push(e);
        if (e instanceof KeyError) return e.code;
        throw e;
      }
    };

    beforeAll(async () => {
      for (const m of ['log', 'info', 'warn', 'error', 'trace'] as const) spies.push(vi.spyOn(console, m));
      debugSpy = vi.spyOn(console, 'debug');
      spies.push(debugSpy);
      spies.push(vi.spyOn(process.stderr, 'write'));
      spies.push(vi.spyOn(process.stdout, 'write'));
      ctx = await setup();
    });

    afterAll(async () => {
      for (const s of spies) s.mockRestore();
      for (const s of reopened) await s.close();
      await ctx?.cleanup();
    });

    it('setup: at least one scheme, and the secrets to look for', () => {
      expect(ctx.schemes.length).toBeGreaterThan(0);
      expect(new Set(ctx.schemes).size).toBe(ctx.schemes.length);
      expect(ctx.secrets.length).toBeGreaterThan(0);
      for (const s of ctx.secrets) expect(s.length).toBeGreaterThanOrEqual(4);
    });

    it("the test's own oracles: Canton's fingerprint vector, and SHA-256-with-ECDSA vs raw-digest signatures", () => {
      // canton-apis §4.2 (Canton tutorial): raw Ed25519 key → fingerprint.
      const raw = Buffer.from('2RwUiIHVUVdulxzD8NKtPmIaaBqMer1A90rDjoklJPY=', 'base64');
      const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]);
      expect(cantonFingerprint('ed25519', spki)).toBe(
        '1220205057e331cc8929dd217e2f8e63f503b7081773de60d01fb46839700bc5caaa',
      );
      // A signature made over the raw 32 bytes as a digest must fail the Canton check, and one
      // over SHA-256 of them must pass: the checks used below can tell the two apart.
      const secret = p256.utils.randomSecretKey();
      const pub = p256.getPublicKey(secret, false);
      const spkiP256 = createPublicKey({
        key: {
          kty: 'EC',
          crv: 'P-256',
          x: Buffer.from(pub.subarray(1, 33)).toString('base64url'),
          y: Buffer.from(pub.subarray(33)).toString('base64url'),
        },
        format: 'jwk',
      }).export({ type: 'spki', format: 'der' });
      const msg = randomBytes(32);
      const rawSig = p256.sign(msg, secret, { prehash: false, format: 'der' });
      const goodSig = p256.sign(msg, secret, { prehash: true, format: 'der' });
      expect(verifyCanton('ecdsa-p256', spkiP256, msg, rawSig)).toBe(false);
      expect(verifyCanton('ecdsa-p256', spkiP256, msg, goodSig)).toBe(true);
      expect(verifiesOverDigest('ecdsa-p256', spkiP256, msg, rawSig)).toBe(true);
      expect(verifiesOverDigest('ecdsa-p256', spkiP256, msg, goodSig)).toBe(false);
    });

    it('generate → describe: Canton key spec, algorithm, format, public key, fingerprint, party id preview', async () => {
      for (const scheme of ctx.schemes) {
        const c = CANTON[scheme];
        const g = await keyFor(scheme);
        const d = await ctx.signer.describe(`base-${scheme}`);
        const what = scheme;
        expect(d, what).toEqual(g);
        expect(d.label, what).toBe(`base-${scheme}`);
        expect(d.backend, what).toBe(ctx.backend);
        expect(d.scheme, what).toBe(scheme);
        expect(d.keySpec, what).toBe(c.keySpec);
        expect(d.signingAlgorithmSpec, what).toBe(c.algorithm);
        expect(d.signatureFormat, what).toBe(c.format);
        expect(d.disabled, what).toBe(false);
        expect(d.partyIdPreview, what).toBeUndefined();
        expect(typeof d.createdAt, what).toBe('string');
        if (d.createdAt !== '') expect(Number.isNaN(Date.parse(d.createdAt)), what).toBe(false);
        // The public key: a canonical SPKI of the right type and curve; raw form derived independently.
        const key = spkiKey(d.publicKeySpki);
        expect(key.asymmetricKeyType, what).toBe(scheme === 'ed25519' ? 'ed25519' : 'ec');
        if (c.curve) expect(key.asymmetricKeyDetails?.namedCurve, what).toBe(c.curve);
        const canonical =
          scheme === 'ed25519'
            ? key.export({ type: 'spki', format: 'der' })
            : createPublicKey({ key: key.export({ format: 'jwk' }), format: 'jwk' }).export({
                type: 'spki',
                format: 'der',
              });
        expect(Buffer.from(d.publicKeySpki).equals(canonical), `${what}: canonical SPKI`).toBe(true);
        expect(d.publicKeyRaw.length, what).toBe(c.rawLength);
        expect(Buffer.from(d.publicKeyRaw).equals(rawPublicKey(d.publicKeySpki)), `${what}: raw key`).toBe(
          true,
        );
        if (scheme !== 'ed25519') expect(d.publicKeyRaw[0], what).toBe(4);
        // Fingerprint and party id.
        const fp = cantonFingerprint(scheme, d.publicKeySpki);
        expect(d.fingerprint, what).toBe(fp);
        expect(d.fingerprint, what).toMatch(/^1220[0-9a-f]{64}$/);
        const withHint = await ctx.signer.describe(`base-${scheme}`, { partyHint: 'alice-custody' });
        expect(withHint.partyIdPreview, what).toBe(`alice-custody::${fp}`);
        expect({ ...withHint, partyIdPreview: undefined }, what).toEqual({ ...d, partyIdPreview: undefined });
        // list() reports the same.
        const listed = (await ctx.signer.list()).find((k) => k.label === `base-${scheme}`);
        expect(listed, what).toEqual(d);
      }
      // Keys are fresh: no two share a public key.
      const fps = await Promise.all(ctx.schemes.map(async (s) => (await keyFor(s)).fingerprint));
      expect(new Set(fps).size).toBe(fps.length);
    });

    it('two keys of one scheme are different keys', async () => {
      for (const scheme of ctx.schemes) {
        const a = await ctx.signer.generate({ label: `twin-a-${scheme}`, scheme, backend: ctx.backend });
        const b = await ctx.signer.generate({ label: `twin-b-${scheme}`, scheme, backend: ctx.backend });
        expect(a.fingerprint, scheme).not.toBe(b.fingerprint);
        const msg = randomBytes(32);
        const sa = await ctx.signer.sign(a.label, msg);
        const sb = await ctx.signer.sign(b.label, msg);
        checkSignature(sa, a, msg);
        checkSignature(sb, b, msg);
        expect(verifyCanton(scheme, b.publicKeySpki, msg, sa.bytes), scheme).toBe(false);
      }
    });

    it('sign a 32-byte transaction hash and a 34-byte topology hash: Canton signature object, verified independently', async () => {
      for (const scheme of ctx.schemes) {
        const d = await keyFor(scheme);
        for (const msg of [randomBytes(32), topologyHash()]) {
          const out = await ctx.signer.sign(d.label, msg);
          checkSignature(out, d, msg);
          expect(out.key, scheme).toEqual(d);
          expect(out.signature.signedBy, scheme).toBe(d.fingerprint);
        }
      }
    });

    it('1,000 concurrent signatures across schemes all verify', async () => {
      const ds = await Promise.all(ctx.schemes.map((s) => keyFor(s)));
      const jobs = Array.from({ length: 1000 }, (_, i) => {
        const d = ds[i % ds.length]!;
        const msg = i % 2 === 0 ? randomBytes(32) : topologyHash();
        return { d, msg, out: ctx.signer.sign(d.label, msg) };
      });
      const outs = await Promise.all(jobs.map((j) => j.out));
      let verified = 0;
      for (const [i, out] of outs.entries()) {
        const { d, msg } = jobs[i]!;
        expect(out.signature.signedBy).toBe(d.fingerprint);
        expect(out.signature.signingAlgorithmSpec).toBe(CANTON[d.scheme].algorithm);
        expect(out.signatureHex).toBe(Buffer.from(out.bytes).toString('hex'));
        if (verifyCanton(d.scheme, d.publicKeySpki, msg, out.bytes)) verified++;
      }
      expect(verified).toBe(1000);
    });

    it('reopen(): a new Signer over the same store finds every key with identical fingerprints and signs', async () => {
      const ds = await Promise.all(ctx.schemes.map((s) => keyFor(s)));
      const before = await ctx.signer.list();
      const again = await reopen();
      const after = await again.list();
      expect(after.map((k) => k.label)).toEqual(before.map((k) => k.label));
      for (const d of ds) {
        const r = await again.describe(d.label);
        expect(r.fingerprint, d.scheme).toBe(d.fingerprint);
        expect(Buffer.from(r.publicKeySpki).equals(Buffer.from(d.publicKeySpki)), d.scheme).toBe(true);
        expect({ ...r, createdAt: '' }, d.scheme).toEqual({ ...d, createdAt: '' });
        if (ctx.backend === 'file') expect(r.createdAt, d.scheme).toBe(d.createdAt);
        expect(after.find((k) => k.label === d.label)?.fingerprint, d.scheme).toBe(d.fingerprint);
        const msg = topologyHash();
        checkSignature(await again.sign(d.label, msg), d, msg);
      }
    });

    it('disable → sign refused (key_disabled) → enable → signs again; other keys unaffected', async () => {
      for (const scheme of ctx.schemes) {
        const d = await ctx.signer.generate({ label: `toggle-${scheme}`, scheme, backend: ctx.backend });
        const msg = randomBytes(32);
        checkSignature(await ctx.signer.sign(d.label, msg), d, msg);
        await ctx.signer.disable(d.label, 'conformance test');
        expect((await ctx.signer.describe(d.label)).disabled, scheme).toBe(true);
        expect((await ctx.signer.list()).find((k) => k.label === d.label)?.disabled, scheme).toBe(true);
        await expectCode(ctx.signer.sign(d.label, msg), 'key_disabled', `${scheme} disabled`);
        await expectCode(ctx.signer.sign(d.label, topologyHash()), 'key_disabled', `${scheme} disabled`);
        // The other keys still sign.
        const base = await keyFor(scheme);
        checkSignature(await ctx.signer.sign(base.label, msg), base, msg);
        // Disabling twice is harmless; enable restores signing.
        await ctx.signer.disable(d.label);
        await ctx.signer.enable(d.label);
        expect((await ctx.signer.describe(d.label)).disabled, scheme).toBe(false);
        checkSignature(await ctx.signer.sign(d.label, msg), d, msg);
      }
    });

    it('a disable by another Signer instance takes effect in this one within ~1.5 s, and so does enable', async () => {
      const scheme = ctx.schemes[0]!;
      const d = await ctx.signer.generate({ label: `remote-toggle-${scheme}`, scheme, backend: ctx.backend });
      const msg = randomBytes(32);
      checkSignature(await ctx.signer.sign(d.label, msg), d, msg);
      const other = await reopen();

      const until = async (want: string): Promise<{ code: string; ms: number }> => {
        const t0 = Date.now();
        let code = await codeOf(ctx.signer.sign(d.label, msg));
        while (code !== want && Date.now() - t0 < 1500) {
          await new Promise((r) => setTimeout(r, 25));
          code = await codeOf(ctx.signer.sign(d.label, msg));
        }
        return { code, ms: Date.now() - t0 };
      };

      await other.disable(d.label, 'from another instance');
      const off = await until('key_disabled');
      expect(off.code).toBe('key_disabled');
      expect(off.ms).toBeLessThanOrEqual(1500);
      await expectCode(ctx.signer.sign(d.label, msg), 'key_disabled', 'still disabled');

      await other.enable(d.label);
      const on = await until('ok');
      expect(on.code).toBe('ok');
      expect(on.ms).toBeLessThanOrEqual(1500);
      checkSignature(await ctx.signer.sign(d.label, msg), d, msg);
    });

    it('delete → key_not_found everywhere; the label can be reused for a new key (not disabled, new fingerprint)', async () => {
      const reused: KeyDescription[] = [];
      for (const [i, scheme] of ctx.schemes.entries()) {
        const label = `del-${scheme}`;
        const old = await ctx.signer.generate({ label, scheme, backend: ctx.backend });
        const msg = randomBytes(32);
        checkSignature(await ctx.signer.sign(label, msg), old, msg);
        await ctx.signer.disable(label, 'about to be deleted');
        await ctx.signer.delete(label);
        await expectCode(ctx.signer.sign(label, msg), 'key_not_found', `${scheme} sign after delete`);
        await expectCode(ctx.signer.describe(label), 'key_not_found', `${scheme} describe after delete`);
        await expectCode(ctx.signer.disable(label), 'key_not_found', `${scheme} disable after delete`);
        await expectCode(ctx.signer.enable(label), 'key_not_found', `${scheme} enable after delete`);
        await expectCode(ctx.signer.delete(label), 'key_not_found', `${scheme} delete after delete`);
        expect(
          (await ctx.signer.list()).some((k) => k.label === label),
          scheme,
        ).toBe(false);
        // Reuse the label, with another scheme when there is one.
        const nextScheme = ctx.schemes[(i + 1) % ctx.schemes.length]!;
        const fresh = await ctx.signer.generate({ label, scheme: nextScheme, backend: ctx.backend });
        expect(fresh.fingerprint, scheme).not.toBe(old.fingerprint);
        expect(fresh.disabled, scheme).toBe(false);
        expect((await ctx.signer.describe(label)).disabled, scheme).toBe(false);
        const out = await ctx.signer.sign(label, msg);
        checkSignature(out, fresh, msg);
        expect(verifyCanton(scheme, old.publicKeySpki, msg, out.bytes), scheme).toBe(false);
        reused.push(fresh);
      }
      // A new instance sees the new keys only.
      const again = await reopen();
      for (const d of reused)
        expect((await again.describe(d.label)).fingerprint, d.label).toBe(d.fingerprint);
    });

    it('a key that does not exist: key_not_found for describe, sign, disable, enable and delete', async () => {
      const s = ctx.signer;
      for (const label of ['no-such-key', 'base-unknown', 'x']) {
        await expectCode(s.describe(label), 'key_not_found', `describe ${label}`);
        await expectCode(s.describe(label, { partyHint: 'alice' }), 'key_not_found', `describe ${label}`);
        await expectCode(s.sign(label, randomBytes(32)), 'key_not_found', `sign ${label}`);
        await expectCode(s.disable(label), 'key_not_found', `disable ${label}`);
        await expectCode(s.enable(label), 'key_not_found', `enable ${label}`);
        await expectCode(s.delete(label), 'key_not_found', `delete ${label}`);
      }
      // Labels are case-sensitive.
      const d = await keyFor(ctx.schemes[0]!);
      await expectCode(s.describe(d.label.toUpperCase()), 'key_not_found', 'upper-case label');
    });

    it('a label that is taken: key_exists (same or other scheme), and the existing key is untouched', async () => {
      for (const scheme of ctx.schemes) {
        const d = await keyFor(scheme);
        for (const other of ctx.schemes)
          await expectCode(
            ctx.signer.generate({ label: d.label, scheme: other, backend: ctx.backend }),
            'key_exists',
            `${scheme} label, generate ${other}`,
          );
        const now = await ctx.signer.describe(d.label);
        expect(now.fingerprint, scheme).toBe(d.fingerprint);
        const msg = randomBytes(32);
        checkSignature(await ctx.signer.sign(d.label, msg), d, msg);
      }
    });

    it('labels outside the rules: invalid_label for every operation, nothing created; the edge cases that are valid work', async () => {
      const s = ctx.signer;
      const scheme = ctx.schemes[0]!;
      const bad = [
        '',
        '-leading-dash',
        '.leading-dot',
        '_leading-underscore',
        '.',
        '..',
        '../escape',
        'a/b',
        'a\\b',
        'has space',
        'tab\there',
        'new\nline',
        'nul\u0000byte',
        'colon:x',
        'ünïcode',
        'a'.repeat(65),
        `${'b'.repeat(64)}.key`,
      ];
      const before = (await s.list()).map((k) => k.label);
      for (const label of bad) {
        const what = JSON.stringify(label);
        await expectCode(
          s.generate({ label, scheme, backend: ctx.backend }),
          'invalid_label',
          `generate ${what}`,
        );
        await expectCode(s.describe(label), 'invalid_label', `describe ${what}`);
        await expectCode(s.sign(label, randomBytes(32)), 'invalid_label', `sign ${what}`);
        await expectCode(s.disable(label), 'invalid_label', `disable ${what}`);
        await expectCode(s.enable(label), 'invalid_label', `enable ${what}`);
        await expectCode(s.delete(label), 'invalid_label', `delete ${what}`);
      }
      expect((await s.list()).map((k) => k.label)).toEqual(before);
      for (const label of ['a'.repeat(64), '0', 'Z.9_x-y']) {
        const d = await s.generate({ label, scheme, backend: ctx.backend });
        expect(d.label).toBe(label);
        const msg = randomBytes(32);
        checkSignature(await s.sign(label, msg), d, msg);
      }
    });

    it('no secret (passphrase, PIN) in any error message or stack, or on the console', () => {
      // The checks above must have produced errors to look at.
      expect(errors.length).toBeGreaterThan(100);
      for (const e of errors) {
        expect(e).toBeInstanceOf(KeyError);
        const text = `${(e as Error).message}\n${(e as Error).stack}\n${inspect(e)}`;
        expect(secretProblems(text)).toEqual([]);
      }
      // The console spies are live…
      debugSpy!.mockImplementationOnce(() => {});
      console.debug('signer conformance: console spy check');
      const text = (a: unknown): string =>
        typeof a === 'string' ? a : a instanceof Uint8Array ? Buffer.from(a).toString('utf8') : inspect(a);
      const written = spies.flatMap((s) => s.mock.calls.map((args) => args.map(text).join(' ')));
      expect(written.some((w) => w.includes('signer conformance: console spy check'))).toBe(true);
      // …and nothing written during the suite holds a secret.
      for (const w of written) expect(secretProblems(w)).toEqual([]);
    });
  });
}

/**
 * verifySignature with its parsed-key cache: the answer depends on the exact
 * SPKI bytes given at each call (the same array changed in place verifies
 * against the new key), for every scheme; a key of another scheme and
 * undecodable SPKI behave as without a cache.
 */
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KEY_SCHEMES, type KeyScheme, SCHEMES, verifySignature } from '../../src/keys/schemes.js';

function pair(scheme: KeyScheme): { spki: Uint8Array; privateKey: KeyObject } {
  const { publicKey, privateKey } =
    scheme === 'ed25519'
      ? generateKeyPairSync('ed25519')
      : generateKeyPairSync('ec', { namedCurve: SCHEMES[scheme].curve! });
  return { spki: new Uint8Array(publicKey.export({ format: 'der', type: 'spki' })), privateKey };
}

function signWith(scheme: KeyScheme, key: KeyObject, message: Uint8Array): Uint8Array {
  return scheme === 'ed25519'
    ? sign(null, message, key)
    : sign(SCHEMES[scheme].digest!, message, { key, dsaEncoding: 'der' });
}

describe('verifySignature', () => {
  const message = new Uint8Array(32).fill(7);

  it.each(KEY_SCHEMES)('%s: answers by the exact key bytes of each call, cached or not', (scheme) => {
    const a = pair(scheme);
    const b = pair(scheme);
    const sigA = signWith(scheme, a.privateKey, message);
    const sigB = signWith(scheme, b.privateKey, message);
    for (let i = 0; i < 3; i++) {
      expect(verifySignature(scheme, a.spki, message, sigA)).toBe(true);
      expect(verifySignature(scheme, a.spki, message, sigB)).toBe(false);
      expect(verifySignature(scheme, b.spki, message, sigB)).toBe(true);
    }
    // The same array, now holding b's key: the earlier parse of a's bytes must not answer.
    const buf = new Uint8Array(a.spki);
    expect(verifySignature(scheme, buf, message, sigA)).toBe(true);
    buf.set(b.spki);
    expect(verifySignature(scheme, buf, message, sigA)).toBe(false);
    expect(verifySignature(scheme, buf, message, sigB)).toBe(true);
    // A view into a larger buffer is read at its offset.
    const big = new Uint8Array(a.spki.length + 10);
    big.set(a.spki, 5);
    expect(verifySignature(scheme, big.subarray(5, 5 + a.spki.length), message, sigA)).toBe(true);
    // The wrong message, or a key claimed under another scheme.
    expect(verifySignature(scheme, a.spki, new Uint8Array(32), sigA)).toBe(false);
    const other = KEY_SCHEMES.find((s) => s !== scheme)!;
    expect(verifySignature(other, a.spki, message, sigA)).toBe(false);
  });

  it('throws on bytes that are not a public key, every time', () => {
    const junk = new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x00]);
    for (let i = 0; i < 2; i++)
      expect(() => verifySignature('ed25519', junk, message, new Uint8Array(64))).toThrow();
  });
});

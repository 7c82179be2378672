/** The shared wording helpers: "a" / "an" as a word is read, and lists with a last "and" / "or". */
import { describe, expect, it } from 'vitest';
import { aKeyOf } from '../../src/keys/schemes.js';
import { article, listOf, withArticle } from '../../src/text/english.js';

describe('article', () => {
  it.each([
    ['ed25519', 'an'],
    ['Ed25519', 'an'],
    ['ECDSA P-256', 'an'],
    ['exercise', 'an'],
    ['allocation-allocate', 'an'],
    ['Amulet', 'an'],
    ['offer', 'an'],
    ['create', 'a'],
    ['transfer', 'a'],
    ['preapproval-send', 'a'],
    ['user', 'a'],
    ['unique id', 'a'],
    ['RSA key', 'an'],
    ['PEM file', 'a'],
    ['SPKI', 'an'],
    ['x25519 key', 'an'],
    ['8-byte value', 'an'],
    ['11-byte value', 'an'],
    ['64-byte signature', 'a'],
    ['hour', 'an'],
  ] as const)('%s takes "%s"', (word, want) => {
    expect(article(word)).toBe(want);
  });

  it('withArticle and aKeyOf name schemes as people know them', () => {
    expect(withArticle('exercise')).toBe('an exercise');
    expect(aKeyOf('ed25519')).toBe('an Ed25519 key');
    expect(aKeyOf('ecdsa-p256')).toBe('an ECDSA P-256 key');
    expect(aKeyOf('ecdsa-secp256k1')).toBe('an ECDSA secp256k1 key');
  });
});

describe('listOf', () => {
  it('joins with commas and a last "and" or "or"', () => {
    expect(listOf([])).toBe('');
    expect(listOf(['operator'])).toBe('operator');
    expect(listOf(['operator', 'admin'], 'or')).toBe('operator or admin');
    expect(listOf(['a', 'b', 'c'])).toBe('a, b and c');
  });
});

/**
 * Wording shared by messages for people: "a" or "an" before a word, and lists
 * joined with commas and a last "and" / "or". Imports nothing, so any layer's
 * messages can use it.
 */

/** "a" or "an" for `word` as it is read aloud: an exercise, a create, an ECDSA key, an 8-byte value, a user. */
export function article(word: string): 'a' | 'an' {
  const w = word.trim();
  if (/^(uni|use|usa|usu|eu|one\b|once)/i.test(w)) return 'a';
  if (/^(hour|honest|honou?r|x\d)/i.test(w)) return 'an';
  // An abbreviation is read letter by letter: F, H, L, M, N, R, S and X start with a vowel sound.
  if (/^[A-Z]{2,}(?![a-z])/.test(w) || /^[A-Z](?![A-Za-z])/.test(w))
    return /^[AEFHILMNORSX]/.test(w) ? 'an' : 'a';
  // eight…, eleven, eighteen
  if (/^(8|1[18](?!\d))/.test(w)) return 'an';
  return /^[aeiou]/i.test(w) ? 'an' : 'a';
}

/** `word` with its article: `withArticle('exercise')` is "an exercise". */
export const withArticle = (word: string): string => `${article(word)} ${word}`;

/** "x", "x and y", "x, y and z" (or with "or"); "" for none. */
export function listOf(items: readonly string[], conjunction: 'and' | 'or' = 'and'): string {
  if (items.length <= 1) return items[0] ?? '';
  return `${items.slice(0, -1).join(', ')} ${conjunction} ${items[items.length - 1]}`;
}

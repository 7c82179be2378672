/**
 * The name service's off-ledger rules (src/canton/ans-rules.ts) against the
 * DSO's own pattern, `[a-z0-9_-]{1,N}\.unverified\.<acronym>` with
 * N = 60 − len(suffix): the same answer for generated names of every
 * length and alphabet (fast-check), the boundaries, a sentence for each
 * refusal, and the renewal window (open from due − renewalDuration, closed
 * at the entry's expiry, no grace).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ansDescriptionProblem,
  ansUrlProblem,
  checkAnsName,
  maxAnsLabel,
  renewalPhase,
  renewalWindowOpens,
} from '../../src/canton/ans-rules.js';

/** The DSO's rule, written independently of the module under test. */
const dsoAccepts = (name: string, acronym = 'cns') => {
  const suffix = `.unverified.${acronym}`;
  const n = 60 - suffix.length;
  return new RegExp(`^[a-z0-9_-]{1,${n}}\\.unverified\\.${acronym}$`).test(name);
};

describe('names', () => {
  it('agrees with the DSO on generated names (1,000 of each kind)', () => {
    const label = fc.string({ unit: fc.constantFrom(...'abcz09_-.A Zé/'.split('')), maxLength: 50 });
    fc.assert(
      fc.property(label, fc.constantFrom('', '.unverified.cns', '.unverified.cn', '.cns'), (l, s) => {
        const name = l + s;
        expect(checkAnsName(name).ok).toBe(dsoAccepts(name));
      }),
      { numRuns: 1000 },
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 70 }), (name) => {
        expect(checkAnsName(name).ok).toBe(dsoAccepts(name));
      }),
      { numRuns: 1000 },
    );
  });

  it('takes labels of 1 to 45 characters for cns, and counts the suffix of another acronym', () => {
    expect(maxAnsLabel()).toBe(45);
    expect(checkAnsName(`${'a'.repeat(45)}.unverified.cns`)).toMatchObject({
      ok: true,
      label: 'a'.repeat(45),
    });
    expect(checkAnsName(`${'a'.repeat(46)}.unverified.cns`)).toMatchObject({
      ok: false,
      reason: expect.stringContaining('at most 45'),
    });
    expect(checkAnsName(`${'a'.repeat(46)}.unverified.ans`, 'ans').ok).toBe(false);
    expect(checkAnsName('treasury-1_b.unverified.ans', 'ans').ok).toBe(true);
  });

  it('says what to change', () => {
    const reason = (n: string) => (checkAnsName(n) as { reason: string }).reason;
    expect(reason('Alice.unverified.cns')).toContain('upper-case letter (A');
    expect(reason('ALICE.UNVERIFIED.CNS')).toContain('names are lower case: alice.unverified.cns');
    expect(reason('alice')).toContain('e.g. alice.unverified.cns');
    expect(reason('a.b.unverified.cns')).toContain('a dot');
    expect(reason('.unverified.cns')).toContain('nothing before');
    expect(reason('dso.cns')).toContain('ends with .unverified.cns');
    expect(reason('bo b.unverified.cns')).toContain('" "');
    expect(reason('')).toBe('the name is empty');
  });
});

describe('url and description', () => {
  it('follow the DSO: empty or http(s) up to 255; descriptions up to 140 characters', () => {
    expect(ansUrlProblem('')).toBeUndefined();
    expect(ansUrlProblem('https://example.com/x')).toBeUndefined();
    expect(ansUrlProblem('ftp://example.com')).toContain('http or https');
    expect(ansUrlProblem('example.com')).toContain('absolute');
    expect(ansUrlProblem(`https://e.com/${'a'.repeat(242)}`)).toContain('at most 255');
    expect(ansUrlProblem(`https://e.com/${'a'.repeat(241)}`)).toBeUndefined();
    expect(ansDescriptionProblem('é'.repeat(140))).toBeUndefined();
    expect(ansDescriptionProblem('x'.repeat(141))).toContain('at most 140');
  });
});

describe('the renewal window', () => {
  const DAY = 86_400_000;
  const due = new Date('2027-03-01T00:00:00Z');
  const entry = { nextPaymentDueAt: due, expiresAt: due };

  it('opens renewalDuration before the due date and closes at the expiry, with no grace', () => {
    expect(renewalWindowOpens(due, 30 * DAY).toISOString()).toBe('2027-01-30T00:00:00.000Z');
    expect(renewalPhase(new Date('2027-01-29T23:59:59.999Z'), entry, 30 * DAY)).toBe('not_yet');
    expect(renewalPhase(new Date('2027-01-30T00:00:00Z'), entry, 30 * DAY)).toBe('open');
    expect(renewalPhase(new Date('2027-02-28T23:59:59.999Z'), entry, 30 * DAY)).toBe('open');
    expect(renewalPhase(due, entry, 30 * DAY)).toBe('expired');
  });
});

describe('URLs a strict URI parser refuses', () => {
  it.each(['http://example.com/a[1]', 'https://example.com/#x[y]', 'https://example.com/?q=[1]'])(
    'refuses brackets outside an IPv6 host: %s',
    (url) => {
      expect(ansUrlProblem(url)).toMatch(/outside an IPv6 host/);
    },
  );

  it.each([
    'https://example.com/a b',
    'https://example.com/ä',
    'https://example.com\\x',
    'https://example.com/%zz',
    'https://example.com/a|b',
    'https://example.com/{x}',
    'https://example.com/a^b',
    'https://example.com/"q"',
  ])('refuses %s (a WHATWG parser would repair it, the DSO would not)', (url) => {
    expect(ansUrlProblem(url)).toMatch(/percent-encode it/);
  });

  it.each(['https://example.com/path?q=1&r=%20#frag', 'http://[::1]:8080/x', 'https://a.example/~u/(1)'])(
    'accepts %s',
    (url) => {
      expect(ansUrlProblem(url)).toBeUndefined();
    },
  );
});

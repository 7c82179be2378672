/**
 * The auto-accept rule match: a table of offers and rules, and what `decide`
 * answers for each (first matching rule wins, else `otherwise`).
 */
import { describe, expect, it } from 'vitest';
import { type AutoAcceptRule, decide } from '../../src/exchange/auto-accept.js';
import { exchangeSchema } from '../../src/server/config.js';

const CC = { admin: 'DSO::1220aa', id: 'Amulet' };
const OTHER = { admin: 'issuer::1220bb', id: 'USDX' };
const base = { party: 'treasury::1', sender: 'alice::1', amount: '50', instrument: CC, account: '1001' };

const RULES: AutoAcceptRule[] = [
  { name: 'blocked-sender', party: '*', senders: ['mallory::1'], requireAccount: false, action: 'reject' },
  { name: 'small-cc', party: 'treasury::1', instruments: [CC], maxAmount: '100', action: 'accept' },
  { name: 'any-known', party: '*', senders: ['bob::1'], requireAccount: false, action: 'accept' },
];

describe('decide', () => {
  it.each([
    ['attributed, small, Canton Coin', {}, 'wait', { action: 'accept', rule: 'small-cc' }],
    ['exactly maxAmount', { amount: '100.0000000000' }, 'wait', { action: 'accept', rule: 'small-cc' }],
    ['above maxAmount', { amount: '100.0000000001' }, 'wait', { action: 'wait' }],
    ['no account (requireAccount by default)', { account: undefined }, 'wait', { action: 'wait' }],
    ['no account, otherwise reject', { account: undefined }, 'reject', { action: 'reject' }],
    ['another instrument', { instrument: OTHER }, 'wait', { action: 'wait' }],
    ['another party', { party: 'hot::1' }, 'wait', { action: 'wait' }],
    [
      'a blocked sender, first rule wins',
      { sender: 'mallory::1' },
      'wait',
      { action: 'reject', rule: 'blocked-sender' },
    ],
    [
      'a listed sender without account',
      { sender: 'bob::1', account: undefined, amount: '5000' },
      'wait',
      { action: 'accept', rule: 'any-known' },
    ],
  ] as const)('%s', (_what, over, otherwise, want) => {
    const d = { ...base, ...over } as typeof base;
    expect(decide(d, RULES, otherwise)).toEqual(want);
  });

  it('no rules: otherwise decides; a wildcard sender rule covers everyone', () => {
    expect(decide(base, [], 'wait')).toEqual({ action: 'wait' });
    expect(decide(base, [], 'reject')).toEqual({ action: 'reject' });
    expect(decide(base, [{ name: 'all', party: '*', senders: ['*'], action: 'accept' }])).toEqual({
      action: 'accept',
      rule: 'all',
    });
  });
});

describe('exchange.autoAccept and exchange.sweeps configuration', () => {
  it('defaults, and refuses a sweep whose floor is not below its ceiling or a non-decimal', () => {
    const d = exchangeSchema.parse({});
    expect(d.autoAccept).toEqual({ rules: [], otherwise: 'wait' });
    expect(d.sweeps).toEqual([]);
    expect(d.automationPollMs).toBe(2000);
    const rule = exchangeSchema.parse({
      autoAccept: { rules: [{ name: 'r', party: '*', action: 'accept' }] },
    }).autoAccept.rules[0];
    expect(rule?.requireAccount).toBe(true);
    const sweep = { name: 's', from: 'a::1', to: 'b::1', maxBalance: '100', minBalance: '100' };
    const bad = exchangeSchema.safeParse({ sweeps: [sweep] });
    expect(bad.success).toBe(false);
    expect(JSON.stringify(bad.error?.issues)).toMatch(/minBalance \(100\) must be below maxBalance \(100\)/);
    expect(exchangeSchema.safeParse({ sweeps: [{ ...sweep, maxBalance: '1e3' }] }).success).toBe(false);
    expect(exchangeSchema.safeParse({ sweeps: [{ ...sweep, minBalance: '99.9999999999' }] }).success).toBe(
      true,
    );
  });
});

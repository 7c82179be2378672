import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { subscriptionDescription, targetAmount, withAllowance } from '../../src/flows/ans-ledger.js';
import { NAME_LIFECYCLE, type NameFacts, nextStep } from '../../src/flows/names-lifecycle.js';
import type { NameRecord } from '../../src/store/repos/names.js';

const DAY = 86_400_000_000n;

const row = (o: Partial<NameRecord> = {}): NameRecord => ({
  id: 'n1',
  party: 'alice::1220ab',
  name: 'alice.unverified.cns',
  url: '',
  description: '',
  state: 'active',
  autoRenew: true,
  dso: 'dso::1220cd',
  entryFeeUsd: '1.0000000000',
  lifetimeUs: 90n * DAY,
  renewalUs: 30n * DAY,
  descriptionPrefix: 'CNS entry: ',
  renewals: 0,
  paidCc: '0',
  repaid: 0,
  notified: '',
  createdAt: '',
  updatedAt: '',
  ...o,
});
const facts = (o: Partial<NameFacts> = {}): NameFacts => ({
  nowUs: 1000n * DAY,
  request: false,
  exportOpen: false,
  backingOff: false,
  ...o,
});
const H = { expiringUs: 7n * DAY };

describe('the name lifecycle table', () => {
  it('is printed in docs/names.md line for line', () => {
    const doc = readFileSync(new URL('../../docs/names.md', import.meta.url), 'utf8');
    const printed = doc
      .split('\n')
      .filter((l) => /^\| (requesting|requested|paid|active|renewing|lapsed) \|/.test(l))
      .map((l) =>
        l
          .split('|')
          .slice(1, -1)
          .map((c) => c.trim()),
      );
    expect(printed).toEqual(NAME_LIFECYCLE.map((l) => [l.state, l.when, l.action, l.next, l.event ?? '']));
  });

  it('pays a renewal once its window opens, announcing it first, and never before', () => {
    const due = 1010n * DAY;
    const r = row({ expiresUs: due, nextDueUs: due });
    const entry = { cid: '00e', expiresUs: due };
    const before = facts({ nowUs: due - 31n * DAY, idle: { cid: '00i', dueUs: due }, entry });
    expect(nextStep(r, before, H)?.action).toBe('none');
    const open = facts({ nowUs: due - 29n * DAY, idle: { cid: '00i', dueUs: due }, entry });
    expect(nextStep(r, open, H)?.event).toBe('name.renewal_due');
    expect(nextStep({ ...r, notified: 'renewal_due' }, open, H)?.action).toBe('pay-renewal');
    // auto-renew off: announced, then only the expiring warning
    const off = { ...r, autoRenew: false, notified: 'renewal_due' };
    expect(nextStep(off, open, H)?.action).toBe('none');
    const late = facts({ nowUs: due - 2n * DAY, idle: { cid: '00i', dueUs: due }, entry });
    expect(nextStep(off, late, H)?.event).toBe('name.expiring');
  });

  it('never pays while the payment is already on the ledger, an export is open or a retry pause runs', () => {
    const due = 1010n * DAY;
    const r = row({ expiresUs: due, nextDueUs: due, notified: 'renewal_due' });
    const idle = { cid: '00i', dueUs: due };
    const entry = { cid: '00e', expiresUs: due };
    const paid = facts({ nowUs: due - DAY, idle, entry, payment: { cid: '00p', dueUs: due } });
    expect(nextStep(r, paid, H)).toMatchObject({ action: 'record', next: 'renewing' });
    for (const f of [
      facts({ nowUs: due - DAY, idle, entry, exportOpen: true }),
      facts({ nowUs: due - DAY, idle, entry, backingOff: true }),
    ])
      expect(nextStep(r, f, H)?.action).not.toMatch(/^pay/);
  });

  it('tells a rejection, an expiry and a stuck payment apart', () => {
    expect(nextStep(row({ state: 'paid' }), facts(), H)).toMatchObject({
      next: 'rejected',
      event: 'name.rejected',
    });
    expect(
      nextStep(
        row({ state: 'paid' }),
        facts({ initialPayment: { cid: '00p', lockExpiresUs: 999n * DAY } }),
        H,
      ),
    ).toMatchObject({ action: 'reclaim' });
    expect(nextStep(row({ expiresUs: 999n * DAY }), facts(), H)).toMatchObject({
      next: 'expired',
      event: 'name.expired',
    });
    const lapsed = nextStep(
      row({ state: 'renewing', expiresUs: 999n * DAY }),
      facts({ payment: { cid: '00p', dueUs: 999n * DAY } }),
      H,
    );
    expect(lapsed).toMatchObject({ next: 'lapsed', event: 'name.expired' });
    expect(nextStep(row({ state: 'expired' }), facts(), H)).toBeUndefined();
  });
});

describe('name payments', () => {
  it('prices the fee in CC as Numeric 10, half to even', () => {
    expect(targetAmount('1.0', '0.005')).toBe('200.0000000000');
    expect(targetAmount('1.0', '3')).toBe('0.3333333333');
    expect(targetAmount('2.0', '3')).toBe('0.6666666667');
    // exactly half a unit: to the even neighbour
    expect(targetAmount('0.0000000001', '2')).toBe('0.0000000000');
    expect(targetAmount('0.0000000003', '2')).toBe('0.0000000002');
  });

  it('allows the lock a bounded margin for fees, rounded up', () => {
    expect(withAllowance('200', 10)).toBe('220.0000000000');
    expect(withAllowance('0.0000000001', 10)).toBe('0.0000000002');
    expect(withAllowance('5', 0)).toBe('5.0000000000');
  });

  it("writes the subscription's description as Daml's show of the name", () => {
    expect(subscriptionDescription('CNS entry: ', 'bob.unverified.cns')).toBe(
      'CNS entry: "bob.unverified.cns"',
    );
    expect(subscriptionDescription('', 'a"b\\c')).toBe('"a\\"b\\\\c"');
  });
});

/**
 * Holdings (src/flows/holdings.ts, balance.ts, merge.ts): the input selection's
 * properties over random holdings (covers the target, fewest possible, only
 * unlocked holdings of the instrument, at most 100, exact decimals, refusals
 * with the numbers), and against the sandbox: the Holding views, the balance
 * report's totals, dust and warnings, and a merge of 25 holdings into at most
 * 10 with the total unchanged.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ScanClient } from '../../src/canton/scan/client.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import { DUST_THRESHOLD, partyBalance } from '../../src/flows/balance.js';
import type { FlowContext } from '../../src/flows/context.js';
import {
  feeRoundOf,
  type Holding,
  listHoldings,
  MAX_INPUTS,
  selectInputs,
  sumUnits,
  toUnits,
} from '../../src/flows/holdings.js';
import { mergeHoldings } from '../../src/flows/merge.js';
import { Refusal } from '../../src/flows/refusal.js';
import { acceptSetupProposal } from '../../src/flows/setup-accept.js';
import { transfer } from '../../src/flows/transfer.js';
import { fromUnits, shortAmount } from '../../src/intent/decimal.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type FlowEnv, flowEnv } from '../support/flow-env.js';

const CC = { admin: 'DSO::1220aa', id: 'Amulet' };
const OTHER = { admin: 'Issuer::1220bb', id: 'Token' };

/** Random holdings: amounts of up to 10 decimals as scaled integers, some locked, some of another instrument. */
const holdingArb = fc
  .record({
    units: fc.bigInt({ min: 1n, max: 10n ** 14n }),
    locked: fc.boolean(),
    other: fc.boolean(),
  })
  .map(
    (x): Omit<Holding, 'cid'> => ({
      amount: fromUnits(x.units),
      instrument: x.other ? OTHER : CC,
      locked: x.locked,
    }),
  );
const holdingsArb = fc
  .array(holdingArb, { minLength: 0, maxLength: 40 })
  .map((hs) => hs.map((h, i) => ({ ...h, cid: `00${i.toString(16).padStart(64, '0')}` })));

/** The fewest holdings of `pool` that reach `target` (the k largest). */
function minimalCount(pool: Holding[], target: bigint): number {
  const sorted = pool.map((h) => toUnits(h.amount)).sort((a, b) => (a > b ? -1 : a < b ? 1 : 0));
  let s = 0n;
  for (let k = 0; k < sorted.length; k++) {
    s += sorted[k]!;
    if (s >= target) return k + 1;
  }
  return Number.POSITIVE_INFINITY;
}

function refusalOf(f: () => unknown): Refusal {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(Refusal);
    return e as Refusal;
  }
  throw new Error('expected a refusal');
}

describe('decimal units', () => {
  it('round-trips every Numeric 10 exactly (no floats)', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 28n }), (n) => {
        expect(toUnits(fromUnits(n))).toBe(n);
      }),
    );
    expect(toUnits('0.1') + toUnits('0.2')).toBe(toUnits('0.3'));
    expect(fromUnits(toUnits('12.5'))).toBe('12.5000000000');
    expect(shortAmount('12.5000000000')).toBe('12.5');
    expect(() => toUnits('1.00000000001')).toThrow(/more than 10 decimals/);
    expect(() => toUnits('-1')).toThrow(/not a non-negative decimal/);
    expect(() => toUnits('1e3')).toThrow(Refusal);
  });
});

describe('selectInputs', () => {
  it('covers amount + reserve with the fewest unlocked holdings of the instrument, or refuses with the numbers', () => {
    fc.assert(
      fc.property(
        holdingsArb,
        fc.bigInt({ min: 1n, max: 2n * 10n ** 15n }),
        fc.bigInt({ min: 0n, max: 10n ** 12n }),
        (hs, amountUnits, reserveUnits) => {
          const amount = fromUnits(amountUnits);
          const feeReserve = fromUnits(reserveUnits);
          const pool = hs.filter((h) => !h.locked && h.instrument === CC);
          const target = amountUnits + reserveUnits;
          const k = minimalCount(pool, target);
          if (k === Number.POSITIVE_INFINITY) {
            const e = refusalOf(() => selectInputs(hs, amount, { feeReserve, instrument: CC }));
            expect(e.reason).toBe('bad_request');
            expect(e.message).toMatch(/insufficient funds/);
            expect(e.details.available).toBe(fromUnits(sumUnits(pool)));
            expect(e.details.needed).toBe(fromUnits(target));
            return;
          }
          const s = selectInputs(hs, amount, { feeReserve, instrument: CC });
          expect(s.inputs).toHaveLength(k);
          expect(new Set(s.inputs.map((h) => h.cid)).size).toBe(k);
          for (const h of s.inputs) {
            expect(h.locked).toBe(false);
            expect(h.instrument).toEqual(CC);
          }
          expect(sumUnits(s.inputs) >= target).toBe(true);
          expect(toUnits(s.total)).toBe(sumUnits(s.inputs));
          expect(toUnits(s.target)).toBe(target);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('uses small holdings first when the count allows: no chosen holding can be swapped for a smaller unchosen one', () => {
    fc.assert(
      fc.property(holdingsArb, fc.bigInt({ min: 1n, max: 10n ** 14n }), (hs, amountUnits) => {
        const pool = hs.filter((h) => !h.locked && h.instrument === CC);
        if (minimalCount(pool, amountUnits) === Number.POSITIVE_INFINITY) return;
        const s = selectInputs(hs, fromUnits(amountUnits), { instrument: CC });
        const chosen = new Set(s.inputs.map((h) => h.cid));
        const sum = sumUnits(s.inputs);
        for (const c of s.inputs)
          for (const u of pool)
            if (!chosen.has(u.cid) && toUnits(u.amount) < toUnits(c.amount))
              expect(sum - toUnits(c.amount) + toUnits(u.amount) < amountUnits).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('refuses when more than 100 inputs would be needed, suggesting a merge', () => {
    const hs: Holding[] = Array.from({ length: 150 }, (_, i) => ({
      cid: `00${i.toString(16).padStart(64, '0')}`,
      amount: '1',
      instrument: CC,
      locked: false,
    }));
    expect(selectInputs(hs, '100').inputs).toHaveLength(MAX_INPUTS);
    const e = refusalOf(() => selectInputs(hs, '100.5'));
    expect(e.message).toMatch(/needs 101 holdings but at most 100/);
    expect(e.message).toMatch(/merge/);
    expect(refusalOf(() => selectInputs(hs, '3', { maxInputs: 2 })).details.inputsNeeded).toBe('3');
    expect(refusalOf(() => selectInputs(hs, '0')).message).toMatch(/must be positive/);
    expect(refusalOf(() => selectInputs([], '1')).message).toMatch(/insufficient funds/);
  });

  it('values Amulet holdings after holding fees as of the round; holdings without fee info accrue none', () => {
    const fee = { createdInRound: 5, ratePerRound: '0.5' };
    const hs: Holding[] = [
      { cid: '00a', amount: '10', instrument: CC, locked: false, holdingFee: fee },
      { cid: '00b', amount: '1', instrument: CC, locked: false, holdingFee: { ...fee, createdInRound: 6 } },
    ];
    // As of round 7: 10 − 2 × 0.5 = 9 and 1 − 0.5 = 0.5.
    const e = refusalOf(() => selectInputs(hs, '10', { instrument: CC, asOfRound: 7 }));
    expect(e.message).toMatch(
      /insufficient funds: 2 unlocked Amulet holding\(s\) hold 9\.5 after 1\.5 of holding fees as of round 7 \(11 before fees\), the transfer needs 10/,
    );
    expect(e.details).toMatchObject({
      available: '9.5000000000',
      holdingFees: '1.5000000000',
      asOfRound: '7',
    });
    const s = selectInputs(hs, '9', { instrument: CC, asOfRound: 7 });
    expect(s.inputs.map((h) => h.cid)).toEqual(['00a']);
    expect(s).toMatchObject({ total: '9.0000000000', holdingFees: '1.0000000000', asOfRound: 7 });
    // The fee never exceeds the amount: a holding can be worth 0, not less.
    expect(refusalOf(() => selectInputs(hs, '9.5', { asOfRound: 1000 })).details.available).toBe(
      '0.0000000000',
    );
    // Default round: the round a transfer runs in as listHoldings learned it; else the newest created-in round.
    expect(feeRoundOf(hs)).toBe(6);
    expect(feeRoundOf([{ ...hs[0]!, holdingFee: { ...fee, currentRound: 8 } }])).toBe(8);
    expect(refusalOf(() => selectInputs(hs, '10.6')).details).toMatchObject({
      available: '10.5000000000',
      holdingFees: '0.5000000000',
    });
    // No fee info (another instrument): the view's amount is the value.
    const other: Holding[] = [{ cid: '00c', amount: '10', instrument: OTHER, locked: false }];
    expect(selectInputs(other, '10', { asOfRound: 1000 })).toMatchObject({
      total: '10.0000000000',
      holdingFees: '0.0000000000',
    });
    expect(feeRoundOf(other)).toBeUndefined();
  });
});

/**
 * The flow context with new Scan and validator clients: they have learned no rounds
 * yet, as after ROUND_TTL_MS (the sandbox opens a round as it creates it, where
 * Splice lists it a tick ahead). `scan: false`: no Scan, the validator's scan proxy.
 */
function freshCtx(env: FlowEnv, opts: { scan?: boolean } = {}): FlowContext {
  const { scan: _scan, ...rest } = env.ctx;
  const validator = new ValidatorClient({ baseUrl: env.sb.urls.validator, retry: { attempts: 1 } });
  if (opts.scan === false) return { ...rest, validator };
  return { ...rest, validator, scan: new ScanClient({ baseUrl: env.sb.urls.scan, retry: { attempts: 1 } }) };
}

const RATE = '0.0000190259';

describe('against the sandbox', () => {
  let env: FlowEnv;
  let alice: PartyRecord;

  beforeAll(async () => {
    env = await flowEnv({ seed: 'holdings' });
    alice = await env.addParty('alice');
    // 25 holdings: 5 of them dust
    for (let i = 0; i < 20; i++) env.net.tap(alice.partyId, `${i + 1}.5`);
    for (let i = 0; i < 5; i++) env.net.tap(alice.partyId, '0.25');
  });
  afterAll(async () => env?.close());

  it('lists the Holding views and reports the balance, the dust and a merge warning', async () => {
    const hs = await listHoldings(env.ctx, alice.partyId);
    expect(hs).toHaveLength(25);
    for (const h of hs) expect(h.instrument).toEqual({ admin: env.net.dso, id: 'Amulet' });
    const expected = fromUnits(20n * toUnits('0.5') + toUnits(String((20 * 21) / 2)) + 5n * toUnits('0.25'));
    expect(fromUnits(sumUnits(hs))).toBe(expected);

    const b = await partyBalance(env.ctx, alice.partyId);
    expect(b.holdings).toEqual([
      {
        instrument: { admin: env.net.dso, id: 'Amulet' },
        unlocked: expected,
        locked: '0.0000000000',
        count: 25,
      },
    ]);
    expect(DUST_THRESHOLD).toBe('1.0');
    expect(b.dustCount).toBe(5);
    expect(b.warnings.join('\n')).toMatch(/25 unlocked .* holdings .*merge/);
    // Onboarded through the Ledger API: no validator wallet by design, so no section and no warning
    // (the same sentence in every balance of such a party would be noise).
    expect(b.validator).toBeUndefined();
    expect(b.warnings.join('\n')).not.toMatch(/validator keeps no external-party wallet/);
    expect(new Set(b.warnings).size).toBe(b.warnings.length);
    // A party the book says the validator onboarded, without a wallet there: that is worth a warning.
    await env.ctx.parties.put({ ...alice, via: 'validator' });
    try {
      const v = await partyBalance(env.ctx, alice.partyId);
      expect(v.warnings.join('\n')).toMatch(/validator keeps no external-party wallet/);
    } finally {
      await env.ctx.parties.put(alice);
    }
  });

  it('merges 25 holdings into at most 10 by self-transfers; the total is unchanged (no fees in the sandbox)', async () => {
    const before = await listHoldings(env.ctx, alice.partyId);
    const r = await mergeHoldings(env.ctx, alice.partyId, { threshold: 10 });
    expect(r.before).toEqual({ count: 25, total: fromUnits(sumUnits(before)) });
    expect(r.after.count).toBeLessThanOrEqual(10);
    expect(r.after.total).toBe(r.before.total);
    expect(r.dustBefore).toBe(5);
    expect(r.dustAfter).toBe(0); // the smallest go first
    expect(r.transactions.length).toBeGreaterThan(0);
    for (const t of r.transactions) {
      expect(t.kind).toBe('self');
      expect(t.receiver).toBe(alice.partyId);
    }
    const after = await listHoldings(env.ctx, alice.partyId);
    expect(after).toHaveLength(r.after.count);
    expect(fromUnits(sumUnits(after))).toBe(r.before.total);
    const merges = env.journal.records.filter((x) => x.flow === 'holdings-merge' && x.step === 'committed');
    expect(merges).toHaveLength(r.transactions.length);
    expect(merges[0]!.intent).toMatchObject({
      transferKind: 'self',
      sender: alice.partyId,
      receiver: alice.partyId,
    });
    // Nothing to do the second time.
    const again = await mergeHoldings(env.ctx, alice.partyId, { threshold: 10 });
    expect(again.transactions).toEqual([]);
  });

  it('merges in batches of at most `batch` inputs', async () => {
    const bob = await env.addParty('bob');
    for (let i = 0; i < 12; i++) env.net.tap(bob.partyId, '2');
    const r = await mergeHoldings(env.ctx, bob.partyId, { threshold: 3, batch: 4 });
    expect(r.after.count).toBeLessThanOrEqual(3);
    for (const t of r.transactions) expect(t.inputs.length).toBeLessThanOrEqual(4);
    expect(r.transactions.length).toBeGreaterThan(2);
    expect(r.after.total).toBe('24.0000000000');
    await expect(mergeHoldings(env.ctx, bob.partyId, { batch: 1 })).rejects.toThrow(/batch/);
  });

  it('a transfer after rounds passed: the whole initial amount is refused before anything is prepared, naming the fees; its value goes through', async () => {
    const carol = await env.addParty('carol');
    // Onboarded through the validator's setup proposal (the validator keeps a wallet): no difference now.
    await env.validator.createSetupProposal({ user_party_id: carol.partyId });
    await acceptSetupProposal(env.ctx, carol.partyId);
    const tapped = env.net.tap(carol.partyId, '10');
    env.net.advanceRound();
    env.net.advanceRound();
    const ctx = freshCtx(env);
    const amulet = { admin: env.net.dso, id: 'Amulet' };
    const [h] = await listHoldings(ctx, carol.partyId, { instrument: amulet });
    // The exact round the registry's choice context uses: the newest open round (opened on creation here).
    expect(h).toMatchObject({
      cid: tapped.contractId,
      amount: '10.0000000000',
      holdingFee: { ratePerRound: RATE, currentRound: Number(env.net.latestRound().number) },
    });
    const before = env.journal.records.length;
    const e = await transfer(ctx, { from: carol.partyId, to: carol.partyId, amount: '10' }).then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(Refusal);
    expect((e as Refusal).message).toMatch(
      /insufficient funds: .* of holding fees as of round \d+ \(10 before fees\)/,
    );
    expect(env.journal.records.length).toBe(before); // nothing prepared, nothing signed
    const r = await transfer(ctx, { from: carol.partyId, to: carol.partyId, amount: '9.99' });
    expect(r.kind).toBe('self');
    // The rounds are remembered for ROUND_TTL_MS: more transfers cost no more calls to Scan.
    const asked = vi.spyOn(ctx.scan!, 'getOpenAndIssuingMiningRounds');
    try {
      for (let i = 0; i < 3; i++) await listHoldings(ctx, carol.partyId, { instrument: amulet });
      expect(asked).not.toHaveBeenCalled();
    } finally {
      asked.mockRestore();
    }
  });
});

describe('after rounds passed, for a party the validator keeps no wallet for', () => {
  let env: FlowEnv;
  const amulet = () => ({ admin: env.net.dso, id: 'Amulet' });
  /** Fees of `n` holdings created in round `created`, as of round `asOf`, as a decimal. */
  const feesOf = (n: number, created: bigint, asOf: bigint) =>
    fromUnits(BigInt(n) * toUnits(RATE) * (asOf - created));

  beforeAll(async () => {
    env = await flowEnv({ seed: 'holdings-rounds' });
  });
  afterAll(async () => env?.close());

  it.each([
    ['Scan', true],
    ['the validator scan proxy', false],
  ])(
    'sending the whole holding is refused before anything is prepared, with the fee figures (rounds from %s); its exact value goes through',
    async (_source, scan) => {
      const dave = await env.addParty('dave');
      const created = env.net.latestRound().number;
      env.net.tap(dave.partyId, '10');
      env.net.advanceRound();
      env.net.advanceRound();
      env.net.advanceRound();
      const round = env.net.latestRound().number;
      const ctx = freshCtx(env, { scan });
      // No external-party wallet: the validator's balance endpoint has no round for this party.
      await expect(env.validator.externalPartyBalance(dave.partyId)).rejects.toMatchObject({ status: 404 });
      const fees = feesOf(1, created, round);
      const value = fromUnits(toUnits('10') - toUnits(fees));
      const before = env.journal.records.length;
      const e = await transfer(ctx, { from: dave.partyId, to: dave.partyId, amount: '10' }).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(Refusal);
      expect((e as Refusal).message).toBe(
        `insufficient funds: 1 unlocked Amulet holding(s) hold ${shortAmount(value)} after ${shortAmount(fees)} of holding fees as of round ${round} (10 before fees), the transfer needs 10`,
      );
      expect((e as Refusal).details).toEqual({
        available: value,
        needed: '10.0000000000',
        holdingFees: fees,
        asOfRound: String(round),
      });
      expect(env.journal.records.length).toBe(before); // nothing prepared, nothing signed
      // "Send the whole balance": its value as of the round the transfer runs in is accepted.
      const r = await transfer(ctx, { from: dave.partyId, to: dave.partyId, amount: value });
      expect(r.kind).toBe('self');
      const after = await listHoldings(ctx, dave.partyId, { instrument: amulet() });
      expect(after.map((h) => h.amount)).toEqual([value]);
    },
  );

  it('a merge (no fee reserve) succeeds, into one holding, with the total reduced by the fees', async () => {
    const erin = await env.addParty('erin');
    const created = env.net.latestRound().number;
    for (let i = 0; i < 12; i++) env.net.tap(erin.partyId, '2');
    env.net.advanceRound();
    env.net.advanceRound();
    const round = env.net.latestRound().number;
    const r = await mergeHoldings(freshCtx(env), erin.partyId, { threshold: 1 });
    const fees = feesOf(12, created, round);
    expect(r.before).toEqual({ count: 12, total: '24.0000000000' });
    expect(r.after).toEqual({ count: 1, total: fromUnits(toUnits('24') - toUnits(fees)) });
    expect(r.transactions).toHaveLength(1);
    expect(r.transactions[0]!.inputs).toHaveLength(12);
  });

  it('Scan failing: the proxy answers instead; both failing: holdings are valued without the round, the transfer is not failed here', async () => {
    const frank = await env.addParty('frank');
    env.net.tap(frank.partyId, '10');
    env.net.advanceRound();
    const round = env.net.latestRound().number;
    const down = () => Promise.reject(new Error('unreachable'));
    const ctx = freshCtx(env);
    vi.spyOn(ctx.scan!, 'getOpenAndIssuingMiningRounds').mockImplementation(down);
    const [h] = await listHoldings(ctx, frank.partyId, { instrument: amulet() });
    expect(h!.holdingFee?.currentRound).toBe(Number(round));
    const dark = freshCtx(env);
    vi.spyOn(dark.scan!, 'getOpenAndIssuingMiningRounds').mockImplementation(down);
    vi.spyOn(dark.validator!, 'scanProxyOpenAndIssuingMiningRounds').mockImplementation(down);
    const [g] = await listHoldings(dark, frank.partyId, { instrument: amulet() });
    expect(g!.holdingFee?.currentRound).toBeUndefined();
    const r = await transfer(dark, { from: frank.partyId, to: frank.partyId, amount: '5' });
    expect(r.kind).toBe('self');
  });

  it("a source that failed is asked again only after the TTL; another network's rounds count as no answer", async () => {
    const gina = await env.addParty('gina');
    env.net.tap(gina.partyId, '10');
    env.net.advanceRound();
    const round = env.net.latestRound().number;
    const ctx = freshCtx(env);
    const failing = vi
      .spyOn(ctx.scan!, 'getOpenAndIssuingMiningRounds')
      .mockImplementation(() => Promise.reject(new Error('unreachable')));
    for (let i = 0; i < 3; i++) {
      const [h] = await listHoldings(ctx, gina.partyId, { instrument: amulet() });
      expect(h!.holdingFee?.currentRound).toBe(Number(round)); // from the proxy
    }
    expect(failing).toHaveBeenCalledTimes(1);
    // Scan answering rounds of another DSO: not used; the proxy answers.
    const other = freshCtx(env);
    const real = other.scan!.getOpenAndIssuingMiningRounds.bind(other.scan!);
    vi.spyOn(other.scan!, 'getOpenAndIssuingMiningRounds').mockImplementation(async (...a) => {
      const r = await real(...a);
      const rounds = Object.fromEntries(
        Object.entries(r.open_mining_rounds).map(([k, e]) => [
          k,
          {
            ...e,
            contract: { ...e.contract!, payload: { ...(e.contract!.payload as object), dso: 'dso::1220ff' } },
          },
        ]),
      );
      return { ...r, open_mining_rounds: rounds };
    });
    const proxy = vi.spyOn(other.validator!, 'scanProxyOpenAndIssuingMiningRounds');
    const [g] = await listHoldings(other, gina.partyId, { instrument: amulet() });
    expect(g!.holdingFee?.currentRound).toBe(Number(round));
    expect(proxy).toHaveBeenCalledTimes(1);
  });
});

/**
 * Token-standard transfers as the product runs them (src/flows/transfer.ts,
 * offers.ts) against the sandbox: two-step offers accepted, rejected and
 * withdrawn with exact balances; a direct transfer through the receiver's
 * preapproval; a self-transfer; an ANS name as receiver; insufficient funds
 * refused before anything is prepared; a closed mining round re-prepared under
 * the same command id with exactly one transaction; an ambiguous execute
 * resolved from the completion stream; tampered preparations refused with no
 * signature and nothing on the ledger; ECDSA senders.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { RegistryClient } from '../../src/canton/validator/registry.js';
import { listHoldings, toUnits } from '../../src/flows/holdings.js';
import { acceptOffer, listOffers, rejectOffer, withdrawOffer } from '../../src/flows/offers.js';
import { transfer } from '../../src/flows/transfer.js';
import { fromUnits } from '../../src/intent/decimal.js';
import { verifySignature } from '../../src/keys/schemes.js';
import { ansEntryContract, transferPreapprovalContract } from '../../src/sandbox/amulet.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { ambiguousExecute, type FlowEnv, flowEnv, refusal } from '../support/flow-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;
let carol: PartyRecord;

beforeAll(async () => {
  env = await flowEnv({ seed: 'transfer-flows' });
  alice = await env.addParty('alice', { fund: '1000' });
  bob = await env.addParty('bob');
  carol = await env.addParty('carol');
  const net = env.net;
  net.commitInternal({
    archives: [],
    creates: [
      // carol can receive directly; bob has an ANS name
      transferPreapprovalContract(net.dso, carol.partyId, net.validatorParty, net.clock.now()),
      ansEntryContract(net.dso, bob.partyId, 'bob.unverified.cns', net.clock.now() + 86_400_000_000n),
    ],
    commandId: 'transfer-test-setup',
  });
});
afterAll(async () => env?.close());

beforeEach(() => env.reset());

async function totals(p: PartyRecord): Promise<{ unlocked: string; locked: string; count: number }> {
  const hs = await listHoldings(env.ctx, p.partyId);
  const sum = (locked: boolean) =>
    fromUnits(hs.filter((h) => h.locked === locked).reduce((a, h) => a + toUnits(h.amount), 0n));
  return { unlocked: sum(false), locked: sum(true), count: hs.filter((h) => !h.locked).length };
}

const plus = (a: string, b: string) => fromUnits(toUnits(a) + toUnits(b));
const minus = (a: string, b: string) => fromUnits(toUnits(a) - toUnits(b));

/** Updates committed under a command id (what the ledger actually holds). */
const updatesOf = (commandId: string) => env.net.store.updates().filter((u) => u.commandId === commandId);

describe('two-step transfers (the receiver has no preapproval)', () => {
  it('offer, then the receiver accepts: amounts move exactly, the journal has each step', async () => {
    const a0 = await totals(alice);
    const b0 = await totals(bob);
    const r = await transfer(env.ctx, {
      from: alice.partyId,
      to: bob.partyId,
      amount: '100.5',
      memo: 'invoice 42',
    });
    expect(r.kind).toBe('offer');
    expect(r.outcome).toBe('committed');
    expect(r.attempts).toBe(1);
    expect(r.amount).toBe('100.5000000000');
    expect(r.inputs.length).toBeGreaterThan(0);
    expect(updatesOf(r.commandId)).toHaveLength(1);
    expect(await totals(alice)).toMatchObject({
      unlocked: minus(a0.unlocked, '100.5'),
      locked: plus(a0.locked, '100.5'),
    });

    const incoming = await listOffers(env.ctx, bob.partyId);
    expect(incoming).toHaveLength(1);
    expect(incoming[0]).toMatchObject({
      direction: 'in',
      sender: alice.partyId,
      receiver: bob.partyId,
      memo: 'invoice 42',
      instrument: { admin: env.net.dso, id: 'Amulet' },
      executeBefore: r.executeBefore,
    });
    expect(toUnits(incoming[0]!.amount)).toBe(toUnits('100.5'));
    const outgoing = await listOffers(env.ctx, alice.partyId);
    expect(outgoing.map((o) => [o.instructionCid, o.direction])).toEqual([
      [incoming[0]!.instructionCid, 'out'],
    ]);

    const acc = await acceptOffer(env.ctx, bob.partyId, incoming[0]!.instructionCid);
    expect(acc.updateId).toMatch(/./);
    expect(await listOffers(env.ctx, bob.partyId)).toEqual([]);
    expect(await totals(bob)).toMatchObject({ unlocked: plus(b0.unlocked, '100.5'), locked: b0.locked });
    expect(await totals(alice)).toMatchObject({ unlocked: minus(a0.unlocked, '100.5'), locked: a0.locked });

    expect(env.journal.records.map((x) => [x.flow, x.step])).toEqual([
      ['transfer', 'signed'],
      ['transfer', 'submitted'],
      ['transfer', 'committed'],
      ['offer-accept', 'signed'],
      ['offer-accept', 'submitted'],
      ['offer-accept', 'committed'],
    ]);
    const committed = env.journal.records[2]!;
    expect(committed.intent).toMatchObject({
      kind: 'transfer',
      sender: alice.partyId,
      receiver: bob.partyId,
      transferKind: 'offer',
      inputs: r.inputs,
      memo: 'invoice 42',
    });
    expect(committed.facts).toMatchObject({ updateId: r.updateId, receiver: bob.partyId });
    expect(env.journal.records[5]!.intent).toEqual({
      kind: 'transfer-instruction-accept',
      party: bob.partyId,
      instructionCid: incoming[0]!.instructionCid,
    });
  });

  it('offer, then the receiver rejects: the sender has its amount back, the receiver nothing', async () => {
    const a0 = await totals(alice);
    const b0 = await totals(bob);
    const r = await transfer(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '50' });
    expect(r.kind).toBe('offer');
    const [offer] = await listOffers(env.ctx, bob.partyId);
    await rejectOffer(env.ctx, bob.partyId, offer!.instructionCid);
    expect(await listOffers(env.ctx, alice.partyId)).toEqual([]);
    expect(await totals(alice)).toMatchObject({ unlocked: a0.unlocked, locked: a0.locked });
    expect(await totals(bob)).toMatchObject({ unlocked: b0.unlocked });
  });

  it('offer, then the sender withdraws it', async () => {
    const a0 = await totals(alice);
    await transfer(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '25' });
    const [offer] = await listOffers(env.ctx, alice.partyId);
    expect(offer!.direction).toBe('out');
    expect((await totals(alice)).locked).toBe(plus(a0.locked, '25'));
    const w = await withdrawOffer(env.ctx, alice.partyId, offer!.instructionCid);
    expect(w.action).toBe('withdraw');
    expect(await listOffers(env.ctx, alice.partyId)).toEqual([]);
    expect(await totals(alice)).toMatchObject({ unlocked: a0.unlocked, locked: a0.locked });
  });
});

describe('direct, self and by name', () => {
  it('direct through the receiver’s TransferPreapproval: one transaction moves the funds', async () => {
    const a0 = await totals(alice);
    const c0 = await totals(carol);
    const r = await transfer(env.ctx, { from: alice.partyId, to: carol.partyId, amount: '12.25' });
    expect(r.kind).toBe('direct');
    expect(await listOffers(env.ctx, carol.partyId)).toEqual([]);
    expect((await totals(carol)).unlocked).toBe(plus(c0.unlocked, '12.25'));
    expect((await totals(alice)).unlocked).toBe(minus(a0.unlocked, '12.25'));
    expect(env.journal.records.at(-1)!.intent).toMatchObject({ transferKind: 'direct' });
  });

  it('self: the inputs are merged into the party’s own holding, the total is unchanged', async () => {
    await transfer(env.ctx, { from: alice.partyId, to: carol.partyId, amount: '1' }); // more holdings
    env.net.tap(alice.partyId, '3');
    const a0 = await totals(alice);
    expect(a0.count).toBeGreaterThan(1);
    const r = await transfer(env.ctx, { from: alice.partyId, to: alice.partyId, amount: '5' });
    expect(r.kind).toBe('self');
    expect(r.receiver).toBe(alice.partyId);
    expect(await totals(alice)).toMatchObject({ unlocked: a0.unlocked, locked: a0.locked });
    expect(env.journal.records.at(-1)!.intent).toMatchObject({ transferKind: 'self' });
  });

  it('an ANS name as receiver: resolved to the party; the journal records name and party', async () => {
    const b0 = await totals(bob);
    const r = await transfer(env.ctx, { from: alice.partyId, to: 'bob.unverified.cns', amount: '2' });
    expect(r.receiver).toBe(bob.partyId);
    expect(r.receiverName).toBe('bob.unverified.cns');
    expect(env.journal.records.at(-1)!.facts).toMatchObject({
      receiver: bob.partyId,
      receiverName: 'bob.unverified.cns',
    });
    const [offer] = await listOffers(env.ctx, bob.partyId);
    await acceptOffer(env.ctx, bob.partyId, offer!.instructionCid);
    expect((await totals(bob)).unlocked).toBe(plus(b0.unlocked, '2'));
  });
});

/** The open round a prepare request's choice context names. */
function openRoundIn(body: unknown): unknown {
  const cmd = (body as { commands: { ExerciseCommand: { choiceArgument: Record<string, unknown> } }[] })
    .commands[0]!.ExerciseCommand.choiceArgument;
  const extra = cmd.extraArgs as { context: { values: Record<string, unknown> } };
  return extra.context.values['open-round'];
}

describe('the registry context remembered between transfers', () => {
  /** A new receiver with a TransferPreapproval; its contract id. */
  async function withPreapproval(hint: string): Promise<{ party: PartyRecord; preapproval: string }> {
    const party = await env.addParty(hint);
    const net = env.net;
    const u = net.commitInternal({
      archives: [],
      creates: [transferPreapprovalContract(net.dso, party.partyId, net.validatorParty, net.clock.now())],
      commandId: `preapproval-${hint}`,
    });
    return { party, preapproval: u.events[0]!.contract.contractId };
  }

  it('transfers of one sender to one receiver in one round ask the registry once', async () => {
    const { party: dave } = await withPreapproval('dave');
    const factory = vi.spyOn(RegistryClient.prototype, 'getTransferFactory');
    for (let i = 0; i < 3; i++) {
      const r = await transfer(env.ctx, { from: alice.partyId, to: dave.partyId, amount: '1' });
      expect(r.kind).toBe('direct');
      expect(r.attempts).toBe(1);
    }
    expect(factory).toHaveBeenCalledTimes(1);
    expect((await totals(dave)).unlocked).toBe('3.0000000000');
  });

  it('a remembered offer is reused for offers; a transfer that must be delivered asks again and goes direct', async () => {
    const frank = await env.addParty('frank');
    const factory = vi.spyOn(RegistryClient.prototype, 'getTransferFactory');
    for (let i = 0; i < 2; i++)
      expect((await transfer(env.ctx, { from: alice.partyId, to: frank.partyId, amount: '1' })).kind).toBe(
        'offer',
      );
    expect(factory).toHaveBeenCalledTimes(1);
    // frank sets up a preapproval: a transfer that must be delivered is not refused on the remembered offer.
    const net = env.net;
    net.commitInternal({
      archives: [],
      creates: [transferPreapprovalContract(net.dso, frank.partyId, net.validatorParty, net.clock.now())],
      commandId: 'preapproval-frank',
    });
    const r = await transfer(env.ctx, {
      from: alice.partyId,
      to: frank.partyId,
      amount: '1',
      requireDelivery: true,
    });
    expect(r.kind).toBe('direct');
    expect(factory).toHaveBeenCalledTimes(2);
  });

  it('a transaction prepared with a remembered context and rejected: the context is forgotten', async () => {
    const gina = await env.addParty('gina');
    const factory = vi.spyOn(RegistryClient.prototype, 'getTransferFactory');
    await transfer(env.ctx, { from: alice.partyId, to: gina.partyId, amount: '1' });
    env.sb.ctx.faults.inject({
      fault: { kind: 'status', status: 429 },
      operation: 'ledger-api.executeAndWait',
      times: 1,
    });
    const e = await refusal(transfer(env.ctx, { from: alice.partyId, to: gina.partyId, amount: '1' }));
    expect(e.reason).toBe('submission_rejected');
    expect(factory).toHaveBeenCalledTimes(1);
    await transfer(env.ctx, { from: alice.partyId, to: gina.partyId, amount: '1' });
    expect(factory).toHaveBeenCalledTimes(2);
  });

  it('a remembered context gone stale (the preapproval archived): prepared again with a fresh one, exactly one transaction', async () => {
    const { party: erin, preapproval } = await withPreapproval('erin');
    await transfer(env.ctx, { from: alice.partyId, to: erin.partyId, amount: '1' });
    // erin's preapproval goes away: the remembered context still names it (a direct transfer).
    env.net.commitInternal({ archives: [preapproval], creates: [], commandId: 'preapproval-erin-gone' });
    const factory = vi.spyOn(RegistryClient.prototype, 'getTransferFactory');
    const commandId = `stale-context-${Date.now()}`;
    const r = await transfer(env.ctx, { from: alice.partyId, to: erin.partyId, amount: '2', commandId });
    // The fresh answer: an offer (no preapproval any more), signed and committed once.
    expect(r.kind).toBe('offer');
    expect(r.outcome).toBe('committed');
    expect(factory).toHaveBeenCalledTimes(1);
    expect(updatesOf(commandId)).toHaveLength(1);
    expect(await listOffers(env.ctx, erin.partyId)).toHaveLength(1);
    // Caught at the preparation (the participant refused the archived contract): nothing was signed
    // with the stale context.
    const steps = env.journal.records.filter((x) => x.commandId === commandId).map((x) => x.step);
    expect(steps).toEqual(['signed', 'submitted', 'committed']);
  });
});

describe('refusals and recoveries', () => {
  it('insufficient funds: refused with the numbers before anything is prepared or signed', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const prepare = vi.spyOn(env.ledger, 'prepare');
    const end = (await env.ledger.ledgerEnd()).offset;
    const { unlocked } = await totals(alice);
    const e = await refusal(transfer(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '100000' }));
    expect(e.reason).toBe('bad_request');
    expect(e.message).toMatch(/insufficient funds/);
    expect(e.message).toContain('100000');
    expect(e.details.available).toBe(unlocked);
    expect(sign).not.toHaveBeenCalled();
    expect(prepare).not.toHaveBeenCalled();
    expect((await env.ledger.ledgerEnd()).offset).toBe(end);
  });

  it('a mining round that closed before execute: re-prepared under the same command id, one transaction', async () => {
    env.sb.ctx.faults.inject({ fault: { kind: 'expiredRound' }, operation: 'ledger-api.prepare', times: 1 });
    const c0 = await totals(carol);
    const commandId = `stale-round-${Date.now()}`;
    const factory = vi.spyOn(RegistryClient.prototype, 'getTransferFactory');
    const prepare = vi.spyOn(env.ledger, 'prepare');
    const r = await transfer(env.ctx, { from: alice.partyId, to: carol.partyId, amount: '3', commandId });
    expect(r.commandId).toBe(commandId);
    expect(r.attempts).toBe(2);
    expect(r.outcome).toBe('committed');
    expect(updatesOf(commandId)).toHaveLength(1);
    // The second preparation asked the registry again (the first may have used the context an
    // earlier transfer of alice to carol remembered): a fresh open round in the context.
    expect(factory).toHaveBeenCalled();
    const [round1, round2] = prepare.mock.calls.map(([body]) => openRoundIn(body));
    expect(prepare).toHaveBeenCalledTimes(2);
    expect(round2).not.toEqual(round1);
    expect((await totals(carol)).unlocked).toBe(plus(c0.unlocked, '3'));
    expect(env.journal.steps()).toEqual([
      'signed',
      'submitted',
      'rejected',
      'reprepared',
      'signed',
      'submitted',
      'committed',
    ]);
    expect(env.journal.records[2]!.reason).toBe('LOCAL_VERDICT_INACTIVE_CONTRACTS');
    expect(new Set(env.journal.records.map((x) => x.commandId))).toEqual(new Set([commandId]));
  });

  it('an ambiguous execute (timeout after commit): committed-after-ambiguous, exactly one transaction', async () => {
    const ctx = ambiguousExecute(env);
    const c0 = await totals(carol);
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await transfer(ctx, { from: alice.partyId, to: carol.partyId, amount: '4' });
    expect(r.outcome).toBe('committed-after-ambiguous');
    expect(r.attempts).toBe(1);
    expect(sign).toHaveBeenCalledTimes(1);
    expect(updatesOf(r.commandId)).toHaveLength(1);
    expect(r.updateId).toBe(updatesOf(r.commandId)[0]!.updateId);
    expect((await totals(carol)).unlocked).toBe(plus(c0.unlocked, '4'));
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'ambiguous', 'resolved', 'committed']);
  });

  const tampering = [
    ['receiver', 'tampered', 'intent_mismatch'],
    ['amount', 'tampered', 'intent_mismatch'],
    ['instrument', 'tampered', 'intent_mismatch'],
    ['extraRoot', 'tampered', 'intent_mismatch'],
    ['receiver', 'original', 'hash_mismatch'],
    ['amount', 'original', 'hash_mismatch'],
  ] as const;
  for (const [change, hash, reason] of tampering)
    it(`a tampered preparation (${change}, ${hash} hash): ${reason}, no signature, nothing on the ledger`, async () => {
      env.sb.ctx.faults.inject({
        fault: { kind: 'tamper', change, hash },
        operation: 'ledger-api.prepare',
        times: 1,
      });
      const sign = vi.spyOn(env.signer, 'sign');
      const a0 = await totals(alice);
      const end = (await env.ledger.ledgerEnd()).offset;
      const commandId = `tampered-${change}-${hash}-${Date.now()}`;
      const e = await refusal(
        transfer(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '7', commandId }),
      );
      expect(e.reason).toBe(reason);
      if (reason === 'intent_mismatch') expect(e.problems.length).toBeGreaterThan(0);
      expect(sign).not.toHaveBeenCalled();
      expect(updatesOf(commandId)).toEqual([]);
      expect((await env.ledger.ledgerEnd()).offset).toBe(end);
      expect(await totals(alice)).toEqual(a0);
      expect(env.journal.steps()).toEqual(['refused']);
    });
});

describe('ECDSA senders', () => {
  for (const scheme of ['ecdsa-p256', 'ecdsa-secp256k1'] as const)
    it(`${scheme}: an offer signed, verified against the registered key, and accepted`, async () => {
      const sender = await env.addParty(`sender-${scheme}`, { scheme, fund: '40' });
      const b0 = await totals(bob);
      const sign = vi.spyOn(env.signer, 'sign');
      const r = await transfer(env.ctx, { from: sender.partyId, to: bob.partyId, amount: '10' });
      expect(sign).toHaveBeenCalledTimes(1);
      const produced = await sign.mock.results[0]!.value;
      expect(
        verifySignature(
          scheme,
          Buffer.from(sender.publicKeySpki, 'base64'),
          Buffer.from(r.hash, 'hex'),
          produced.bytes,
        ),
      ).toBe(true);
      expect(r.kind).toBe('offer');
      const signed = env.journal.records.find((x) => x.step === 'signed')!;
      expect(signed.signedBy).toBe(sender.fingerprint);
      const [offer] = (await listOffers(env.ctx, bob.partyId)).filter((o) => o.sender === sender.partyId);
      await acceptOffer(env.ctx, bob.partyId, offer!.instructionCid);
      expect((await totals(bob)).unlocked).toBe(plus(b0.unlocked, '10'));
      expect((await totals(sender)).unlocked).toBe('30.0000000000');
    });
});

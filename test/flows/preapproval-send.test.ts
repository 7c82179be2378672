/**
 * The legacy preapproval send against the sandbox validator and its SV
 * automation: a send is tracked to `sent` and moves the amount; concurrent
 * sends from one party get distinct consecutive nonces and all go through; a
 * receiver without preapproval, a tampered prepare-send and a non-Ed25519
 * sender are refused with zero signatures and free their nonce; a command
 * whose deadline passes while a lower nonce is in flight is tracked as
 * `expired`, and the next send reads the counter again; a lost submit-send
 * answer is resolved from the command status. Against an untrusted validator:
 * an ANS name resolves through Scan only (a proxy answering with another
 * party is refused), the DSO is pinned from Scan and the delegate to the
 * configured validator party.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ValidatorClient } from '../../src/canton/validator/client.js';
import type { FlowContext } from '../../src/flows/context.js';
import {
  counterNonce,
  inFlightNonces,
  type SendResult,
  sendViaPreapproval,
  trackSend,
} from '../../src/flows/preapproval-send.js';
import { acceptSetupProposal } from '../../src/flows/setup-accept.js';
import { ansEntryContract, balanceOf, transferPreapprovalContract } from '../../src/sandbox/amulet.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type FlowEnv, flowEnv, refusal } from '../support/flow-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;
let carol: PartyRecord;
const FAST = { intervalMs: 5, timeoutMs: 3000 };

beforeAll(async () => {
  env = await flowEnv({ seed: 'preapproval-send' });
  alice = await env.addParty('alice', { fund: '100' });
  bob = await env.addParty('bob');
  carol = await env.addParty('carol');
  await env.validator.createSetupProposal({ user_party_id: bob.partyId });
  await acceptSetupProposal(env.ctx, bob.partyId);
});
afterAll(async () => env?.close());
beforeEach(() => env.reset());

const unlocked = (p: PartyRecord) =>
  balanceOf(env.net.store, p.partyId, env.net.latestRound().number).totalUnlocked;

describe('sendViaPreapproval', () => {
  it('sends, tracks the command to sent and moves the amount', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await sendViaPreapproval(
      env.ctx,
      { from: alice.partyId, to: bob.partyId, amount: '12.5', description: 'rent' },
      FAST,
    );
    expect(sign).toHaveBeenCalledTimes(1);
    expect(r).toMatchObject({ nonce: 0, amount: '12.5', receiver: bob.partyId, outcome: 'committed' });
    expect(r.tracking).toMatchObject({ status: 'sent' });
    expect(r.tracking?.status === 'sent' && r.tracking.contractId.startsWith(r.transferCommandCid)).toBe(
      true,
    );
    expect(r.transferCommandCid).toMatch(/^00[0-9a-f]{64}/);
    expect(unlocked(alice)).toBe('87.5000000000');
    expect(unlocked(bob)).toBe('12.5000000000');
    expect(await counterNonce(env.ctx, alice.partyId)).toBe(1);
    expect(inFlightNonces(env.ctx, alice.partyId)).toEqual([]);
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'committed']);
    expect(env.journal.records[0]!.intent).toMatchObject({
      kind: 'preapproval-send',
      nonce: 0,
      amount: '12.5',
      description: 'rent',
    });
    expect(env.journal.records.at(-1)!.facts).toMatchObject({ nonce: '0', receiver: bob.partyId });
  });

  it('gives 5 concurrent sends from one party distinct consecutive nonces; all are sent', async () => {
    const start = await counterNonce(env.ctx, alice.partyId);
    const rs = await Promise.all(
      [1, 2, 3, 4, 5].map((i) =>
        sendViaPreapproval(env.ctx, { from: alice.partyId, to: bob.partyId, amount: `${i}` }, FAST),
      ),
    );
    expect(rs.map((r) => r.nonce).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4].map((i) => start + i));
    expect(rs.map((r) => r.tracking?.status)).toEqual(['sent', 'sent', 'sent', 'sent', 'sent']);
    expect(new Set(rs.map((r) => r.transferCommandCid)).size).toBe(5);
    expect(unlocked(bob)).toBe('27.5000000000'); // 12.5 + 1+2+3+4+5
    expect(await counterNonce(env.ctx, alice.partyId)).toBe(start + 5);
  });

  it('refuses a receiver without preapproval with the validator text; nothing signed, nonce freed', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(
      sendViaPreapproval(env.ctx, { from: alice.partyId, to: carol.partyId, amount: '1' }),
    );
    expect(e.reason).toBe('bad_request');
    expect(e.message).toBe(
      `the validator would not prepare the send: Receiver ${carol.partyId} does not have a TransferPreapproval`,
    );
    expect(sign).not.toHaveBeenCalled();
    expect(inFlightNonces(env.ctx, alice.partyId)).toEqual([]);
  });

  it.each([
    ['tampered', 'intent_mismatch'],
    ['original', 'hash_mismatch'],
  ] as const)(
    'refuses a tampered prepare-send (claimed hash %s: %s) with zero signatures',
    async (hash, reason) => {
      env.sb.ctx.faults.inject({
        fault: { kind: 'tamper', change: 'amount', hash },
        operation: 'validator.prepareTransferPreapprovalSend',
        times: 1,
      });
      const sign = vi.spyOn(env.signer, 'sign');
      const submit = vi.spyOn(env.validator, 'submitTransferPreapprovalSend');
      const before = unlocked(bob);
      const e = await refusal(
        sendViaPreapproval(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '2' }),
      );
      expect(e.reason).toBe(reason);
      if (reason === 'intent_mismatch') expect(e.problems.map((p) => p.reason)).toContain('amount_mismatch');
      expect(sign).not.toHaveBeenCalled();
      expect(submit).not.toHaveBeenCalled();
      expect(unlocked(bob)).toBe(before);
      expect(inFlightNonces(env.ctx, alice.partyId)).toEqual([]);
      expect(env.journal.steps()).toEqual(['refused']);
    },
  );

  it('refuses a sender whose key is not Ed25519 and a bad amount before anything is prepared', async () => {
    const erin = await env.addParty('erin', { scheme: 'ecdsa-p256', fund: '5' });
    const prep = vi.spyOn(env.validator, 'prepareTransferPreapprovalSend');
    const k = await refusal(
      sendViaPreapproval(env.ctx, { from: erin.partyId, to: bob.partyId, amount: '1' }),
    );
    expect(k.reason).toBe('bad_request');
    expect(k.message).toMatch(/Ed25519 keys only/);
    const a = await refusal(
      sendViaPreapproval(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '1.5x' }),
    );
    expect(a.message).toMatch(/^amount: /);
    const past = await refusal(
      sendViaPreapproval(env.ctx, {
        from: alice.partyId,
        to: bob.partyId,
        amount: '1',
        expiresAt: '2020-01-01T00:00:00Z',
      }),
    );
    expect(past.message).toMatch(/^expiresAt: .* is not in the future/);
    expect(prep).not.toHaveBeenCalled();
  });

  it('tracks a command whose deadline passes while a lower nonce is in flight as expired', async () => {
    // A validator whose first submit-send waits for the test: its nonce stays in flight.
    let entered!: () => void;
    const inGate = new Promise<void>((r) => {
      entered = r;
    });
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const gated = Object.create(env.validator) as ValidatorClient;
    let calls = 0;
    gated.submitTransferPreapprovalSend = async (req, o) => {
      if (calls++ === 0) {
        entered();
        await gate;
      }
      return env.validator.submitTransferPreapprovalSend(req, o);
    };
    const ctx: FlowContext = { ...env.ctx, validator: gated };
    const n0 = await counterNonce(ctx, alice.partyId);
    const first = sendViaPreapproval(ctx, { from: alice.partyId, to: bob.partyId, amount: '1' }, FAST);
    await inGate;
    const expiresAt = new Date(Number(env.net.clock.now() / 1000n) + 60_000);
    const late = await sendViaPreapproval(
      ctx,
      { from: alice.partyId, to: bob.partyId, amount: '1', expiresAt },
      { wait: false },
    );
    expect(late.nonce).toBe(n0 + 1);
    expect(late.tracking).toBeUndefined();
    expect(
      await trackSend(ctx, alice.partyId, late.nonce, {
        ...FAST,
        timeoutMs: 50,
        prefix: late.transferCommandCid,
      }),
    ).toEqual({
      status: 'pending',
      lastSeen: 'created',
    });
    expect(inFlightNonces(ctx, alice.partyId)).toEqual([n0, n0 + 1]);
    env.net.clock.advance(120_000);
    env.net.sweep();
    const t = await trackSend(ctx, alice.partyId, late.nonce, { ...FAST, prefix: late.transferCommandCid });
    expect(t).toMatchObject({ status: 'expired', reason: expect.stringMatching(/expired/) });
    open();
    const r0: SendResult = await first;
    expect(r0.nonce).toBe(n0);
    expect(r0.tracking).toMatchObject({ status: 'sent' });
    expect(inFlightNonces(ctx, alice.partyId)).toEqual([]);
    // The expired nonce was never consumed: the next send reads the counter and reuses it.
    const next = await sendViaPreapproval(ctx, { from: alice.partyId, to: bob.partyId, amount: '1' }, FAST);
    expect(next.nonce).toBe(n0 + 1);
    expect(next.tracking).toMatchObject({ status: 'sent' });
  });

  it('resolves a lost submit-send answer from the command status', async () => {
    env.sb.ctx.faults.inject({
      fault: { kind: 'lostResponse' },
      operation: 'validator.submitTransferPreapprovalSend',
      times: 1,
    });
    const before = unlocked(bob);
    const r = await sendViaPreapproval(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '3' }, FAST);
    expect(r.outcome).toBe('committed-after-ambiguous');
    expect(r.updateId).toBeUndefined();
    expect(r.tracking).toMatchObject({ status: 'sent' });
    expect(Number(unlocked(bob)) - Number(before)).toBe(3);
    expect(env.journal.steps()).toEqual(['signed', 'submitted', 'ambiguous', 'resolved', 'committed']);
  });
});

describe('sendViaPreapproval against an untrusted validator', () => {
  const BOB_NAME = 'send-bob.unverified.cns';
  const pinned = (party: string): FlowContext => ({ ...env.ctx, validatorParty: party }) as FlowContext;

  beforeAll(() => {
    const net = env.net;
    net.commitInternal({
      archives: [],
      creates: [
        ansEntryContract(net.dso, bob.partyId, BOB_NAME, net.clock.now() + 86_400_000_000n),
        // Mallory can receive: a send to her would go through if her party became the intent's receiver.
        transferPreapprovalContract(net.dso, net.mallory, net.validatorParty, net.clock.now()),
      ],
      commandId: 'untrusted-validator-test',
    });
  });

  /** The validator's scan proxy answers every name with mallory's party. */
  const lyingProxy = () =>
    vi.spyOn(env.validator, 'scanProxyAnsEntryByName').mockImplementation(async (name) => ({
      entry: { user: env.net.mallory, name, url: '', description: '' },
    }));

  it('sends to an ANS name as Scan resolves it, with the DSO from Scan in the intent', async () => {
    const r = await sendViaPreapproval(env.ctx, { from: alice.partyId, to: BOB_NAME, amount: '1' }, FAST);
    expect(r).toMatchObject({ receiver: bob.partyId, receiverName: BOB_NAME });
    expect(r.tracking).toMatchObject({ status: 'sent' });
    expect(env.journal.records[0]!.intent).toMatchObject({ receiver: bob.partyId, dso: env.net.dso });
  });

  it("refuses a name the validator's proxy resolves to its own party, before preparing", async () => {
    lyingProxy();
    const prep = vi.spyOn(env.validator, 'prepareTransferPreapprovalSend');
    const sign = vi.spyOn(env.signer, 'sign');
    const before = unlocked(alice);
    const e = await refusal(sendViaPreapproval(env.ctx, { from: alice.partyId, to: BOB_NAME, amount: '5' }));
    expect(e.reason).toBe('bad_request');
    expect(e.message).toBe(
      `${BOB_NAME}: Scan resolves it to ${bob.partyId} but the validator's scan proxy to ${env.net.mallory}; not used (pass a party id)`,
    );
    // Without Scan the proxy's answer alone is not enough to pay anyone.
    const { scan: _s, ...noScan } = env.ctx;
    const alone = await refusal(
      sendViaPreapproval(noScan as FlowContext, { from: alice.partyId, to: BOB_NAME, amount: '5' }),
    );
    expect(alone.reason).toBe('bad_request');
    expect(alone.message).toMatch(/ANS names are resolved through Scan, not through the validator alone/);
    expect(prep).not.toHaveBeenCalled();
    expect(sign).not.toHaveBeenCalled();
    expect(unlocked(alice)).toBe(before);
    expect(inFlightNonces(env.ctx, alice.partyId)).toEqual([]);
  });

  it('refuses a send under another DSO than Scan names, with zero signatures', async () => {
    const realDso = env.net.dso;
    const fakeDso = `DSO::${realDso.split('::')[1]!.replace(/.$/, (c) => (c === '0' ? '1' : '0'))}`;
    vi.spyOn(env.scan, 'getDsoPartyId').mockResolvedValue({ dso_party_id: fakeDso });
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(
      sendViaPreapproval(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '1' }),
    );
    expect(e.reason).toBe('intent_mismatch');
    expect(e.problems.map((p) => [p.reason, p.where])).toEqual([['party_mismatch', 'node 0: expectedDso']]);
    expect(e.problems[0]!.message).toBe(`the send expects the DSO ${realDso} but the DSO is ${fakeDso}.`);
    expect(sign).not.toHaveBeenCalled();
    expect(inFlightNonces(env.ctx, alice.partyId)).toEqual([]);
  });

  it('pins the delegate to the configured validator party', async () => {
    const other = `other-validator::${env.net.validatorParty.split('::')[1]}`;
    const sign = vi.spyOn(env.signer, 'sign');
    const e = await refusal(
      sendViaPreapproval(pinned(other), { from: alice.partyId, to: bob.partyId, amount: '1' }),
    );
    expect(e.reason).toBe('intent_mismatch');
    expect(e.problems.map((p) => p.reason)).toContain('party_mismatch');
    expect(e.problems.map((p) => p.where)).toContain('node 0: delegate');
    expect(sign).not.toHaveBeenCalled();
    const r = await sendViaPreapproval(
      pinned(env.net.validatorParty),
      { from: alice.partyId, to: bob.partyId, amount: '1' },
      FAST,
    );
    expect(r.tracking).toMatchObject({ status: 'sent' });
    expect(env.journal.records.at(-1)!.intent).toMatchObject({
      delegate: env.net.validatorParty,
      dso: env.net.dso,
    });
  });
});

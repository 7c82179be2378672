/**
 * The validator-path flows with Ed25519 keys inside a SoftHSM2 token (PKCS#11
 * backend): setup-accept for the receiver, then a preapproval send from an
 * HSM-held sender, tracked to `sent`. The HSM signs each 32-byte hash; the
 * pipeline verifies every signature against the registered key, and the
 * validator accepts the raw public key taken from the party's SPKI. Fails
 * (never skips) when SoftHSM2 is not installed: flowEnv throws.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sendViaPreapproval } from '../../src/flows/preapproval-send.js';
import { acceptSetupProposal } from '../../src/flows/setup-accept.js';
import { balanceOf } from '../../src/sandbox/amulet.js';
import { str } from '../../src/sandbox/ledger/value-json.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type FlowEnv, flowEnv } from '../support/flow-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;

beforeAll(async () => {
  env = await flowEnv({ seed: 'validator-hsm', hsm: true });
  alice = await env.addParty('alice', { backend: 'pkcs11', fund: '50' });
  bob = await env.addParty('bob', { backend: 'pkcs11' });
});
afterAll(async () => env?.close());

const unlocked = (p: PartyRecord) =>
  balanceOf(env.net.store, p.partyId, env.net.latestRound().number).totalUnlocked;

describe('validator path with HSM keys', () => {
  it('the keys live in the token', async () => {
    for (const p of [alice, bob]) expect((await env.signer.describe(p.keyLabel)).backend).toBe('pkcs11');
  });

  it('setup-accept: the HSM key signs the accept; the preapproval exists', async () => {
    await env.validator.createSetupProposal({ user_party_id: bob.partyId });
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await acceptSetupProposal(env.ctx, bob.partyId);
    expect(sign).toHaveBeenCalledTimes(1);
    expect(sign.mock.calls[0]![0]).toBe(bob.keyLabel);
    expect(r.alreadyAccepted).toBe(false);
    const pre = env.net.store.get(r.preapprovalCid)!;
    expect(str(pre.argument, 'receiver')).toBe(bob.partyId);
    expect(str(pre.argument, 'provider')).toBe(env.net.validatorParty);
    sign.mockRestore();
  });

  it('send: the HSM key signs the TransferCommand; it is sent and the amount moves', async () => {
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await sendViaPreapproval(
      env.ctx,
      { from: alice.partyId, to: bob.partyId, amount: '7.25' },
      { intervalMs: 5, timeoutMs: 3000 },
    );
    expect(sign).toHaveBeenCalledTimes(1);
    expect(sign.mock.calls[0]![0]).toBe(alice.keyLabel);
    expect(r.nonce).toBe(0);
    expect(r.tracking).toMatchObject({ status: 'sent' });
    expect(unlocked(alice)).toBe('42.7500000000');
    expect(unlocked(bob)).toBe('7.2500000000');
    sign.mockRestore();
  });
});

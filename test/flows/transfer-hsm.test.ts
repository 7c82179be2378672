/**
 * Token-standard transfers with keys inside a SoftHSM2 token (PKCS#11
 * backend): an Ed25519 sender offers, an ECDSA P-256 receiver accepts, and a
 * secp256k1 sender sends directly to a party with a preapproval. The HSM signs
 * each hash; the pipeline verifies each signature against the registered key.
 * This file fails (never skips) when SoftHSM2 is not installed: flowEnv throws.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listHoldings, sumUnits } from '../../src/flows/holdings.js';
import { acceptOffer, listOffers } from '../../src/flows/offers.js';
import { transfer } from '../../src/flows/transfer.js';
import { fromUnits } from '../../src/intent/decimal.js';
import { transferPreapprovalContract } from '../../src/sandbox/amulet.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type FlowEnv, flowEnv } from '../support/flow-env.js';

let env: FlowEnv;
let alice: PartyRecord;
let bob: PartyRecord;

beforeAll(async () => {
  env = await flowEnv({ seed: 'transfer-hsm', hsm: true });
  alice = await env.addParty('hsm-alice', { backend: 'pkcs11', fund: '100' });
  bob = await env.addParty('hsm-bob', { backend: 'pkcs11', scheme: 'ecdsa-p256' });
});
afterAll(async () => env?.close());

const unlocked = async (p: PartyRecord) =>
  fromUnits(sumUnits((await listHoldings(env.ctx, p.partyId)).filter((h) => !h.locked)));

describe('transfers signed in the HSM', () => {
  it('an Ed25519 HSM key offers, an ECDSA P-256 HSM key accepts', async () => {
    expect((await env.signer.describe(alice.keyLabel)).backend).toBe('pkcs11');
    expect((await env.signer.describe(bob.keyLabel)).backend).toBe('pkcs11');
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await transfer(env.ctx, { from: alice.partyId, to: bob.partyId, amount: '30' });
    expect(r.kind).toBe('offer');
    const [offer] = await listOffers(env.ctx, bob.partyId);
    const a = await acceptOffer(env.ctx, bob.partyId, offer!.instructionCid);
    expect(a.outcome).toBe('committed');
    expect(sign.mock.calls.map((c) => c[0])).toEqual([alice.keyLabel, bob.keyLabel]);
    expect(await unlocked(bob)).toBe('30.0000000000');
    expect(await unlocked(alice)).toBe('70.0000000000');
    const signed = env.journal.records.filter((x) => x.step === 'signed').map((x) => x.signedBy);
    expect(signed).toEqual([alice.fingerprint, bob.fingerprint]);
  });

  it('a secp256k1 HSM key sends directly to a party with a preapproval', async () => {
    const sender = await env.addParty('hsm-k1', { backend: 'pkcs11', scheme: 'ecdsa-secp256k1', fund: '10' });
    const net = env.net;
    net.commitInternal({
      archives: [],
      creates: [transferPreapprovalContract(net.dso, bob.partyId, net.validatorParty, net.clock.now())],
      commandId: 'hsm-preapproval',
    });
    const r = await transfer(env.ctx, { from: sender.partyId, to: bob.partyId, amount: '4.5' });
    expect(r.kind).toBe('direct');
    expect(await unlocked(bob)).toBe('34.5000000000');
    expect(await unlocked(sender)).toBe('5.5000000000');
  });
});

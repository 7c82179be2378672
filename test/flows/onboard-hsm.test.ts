/**
 * External-party onboarding with keys inside a SoftHSM2 token (PKCS#11
 * backend): the validator path with an Ed25519 key and the Ledger API path
 * with Ed25519, P-256 and secp256k1 keys. The HSM signs every hash; the
 * pipeline verifies each signature against the registered key. This file
 * fails (never skips) when SoftHSM2 is not installed: flowEnv throws.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { onboardViaLedgerApi, onboardViaValidator } from '../../src/flows/onboard.js';
import { Refusal } from '../../src/flows/refusal.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { type FlowEnv, flowEnv } from '../support/flow-env.js';

let env: FlowEnv;

beforeAll(async () => {
  env = await flowEnv({ seed: 'onboard-hsm', hsm: true });
  env.net.users.get(LEDGER_API_USER)!.admin = true;
});
afterAll(async () => env?.close());

describe('onboarding with HSM keys', () => {
  it('validator path: an Ed25519 key in the HSM signs the three topology hashes', async () => {
    const key = await env.signer.generate({ label: 'hsm-val', scheme: 'ed25519', backend: 'pkcs11' });
    expect(key.backend).toBe('pkcs11');
    const sign = vi.spyOn(env.signer, 'sign');
    const r = await onboardViaValidator(env.ctx, { hint: 'hsm-val', keyLabel: key.label });
    expect(r.status).toBe('new');
    expect(sign).toHaveBeenCalledTimes(3);
    const p = env.net.parties.get(r.party.partyId)!;
    expect(p.keys.map((k) => k.fingerprint)).toEqual([key.fingerprint]);
    expect(p.via).toBe('validator');
    expect(env.net.users.get(LEDGER_API_USER)!.actAs.has(r.party.partyId)).toBe(true);
    sign.mockRestore();
  });

  for (const scheme of ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'] as const) {
    it(`Ledger API path: a ${scheme} key in the HSM signs the multi-hash`, async () => {
      const key = await env.signer.generate({ label: `hsm-${scheme}`, scheme, backend: 'pkcs11' });
      const r = await onboardViaLedgerApi(env.ctx, { hint: `hsm-${scheme}`, keyLabel: key.label });
      expect(r.status).toBe('new');
      expect(r.party).toMatchObject({ scheme, via: 'ledger-api', keyLabel: key.label });
      const p = env.net.parties.get(r.party.partyId)!;
      expect(p.keys.map((k) => k.fingerprint)).toEqual([key.fingerprint]);
      expect(env.net.users.get(LEDGER_API_USER)!.actAs.has(r.party.partyId)).toBe(true);
      expect(env.journal.records.filter((x) => x.partyId === r.party.partyId).map((x) => x.step)).toEqual([
        'signed',
        'submitted',
        'committed',
      ]);
    });
  }

  it('an HSM key that is not Ed25519 is refused on the validator path', async () => {
    const key = await env.signer.generate({ label: 'hsm-val-ec', scheme: 'ecdsa-p256', backend: 'pkcs11' });
    const e = await onboardViaValidator(env.ctx, { hint: 'hsm-val-ec', keyLabel: key.label }).catch((x) => x);
    expect(e).toBeInstanceOf(Refusal);
    expect((e as Refusal).reason).toBe('bad_request');
  });
});

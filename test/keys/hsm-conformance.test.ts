/**
 * The backend-agnostic signer conformance suite (conformance.ts) on the
 * PKCS#11 backend, with a fresh SoftHSM2 token. In CI a missing SoftHSM2
 * fails this file; locally the suite is skipped with a loud warning
 * (test/support/softhsm.ts, requireSoftHsm).
 *
 * One token for the whole file: SoftHSM reads SOFTHSM2_CONF when the library
 * is initialised, once per process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'vitest';
import { Pkcs11Backend } from '../../src/keys/pkcs11-backend.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import { Signer } from '../../src/keys/signer.js';
import { createSoftHsmToken, requireSoftHsm } from '../support/softhsm.js';
import { signerConformance } from './conformance.js';

const REQUIRED: KeyScheme[] = ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'];
const module = requireSoftHsm();

describe.skipIf(module === undefined)('PKCS#11 backend (SoftHSM2)', () => {
  signerConformance('pkcs11 (SoftHSM2)', async () => {
    const token = await createSoftHsmToken({ module });
    const stateDir = mkdtempSync(join(tmpdir(), 'cs-hsm-state-'));
    const open = () =>
      Pkcs11Backend.open({ module: token.module, token: token.tokenLabel, pin: token.pin, sessions: 4 });
    const backend = await open();
    const signer = new Signer({ pkcs11: backend, stateDir });
    const schemes = await backend.schemes();
    const missing = REQUIRED.filter((s) => !schemes.includes(s));
    if (missing.length > 0)
      throw new Error(`the SoftHSM2 token offers ${schemes.join(', ')}: missing ${missing.join(', ')}`);
    return {
      signer,
      backend: 'pkcs11',
      schemes,
      reopen: async () => new Signer({ pkcs11: await open(), stateDir }),
      cleanup: async () => {
        await signer.close();
        await token.cleanup();
        rmSync(stateDir, { recursive: true, force: true });
      },
      secrets: [token.pin, token.soPin],
    };
  });
});

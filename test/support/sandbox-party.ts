/**
 * An external Ed25519 party registered straight on a sandbox network (no
 * onboarding round trip), with the default Ledger API user allowed to act as
 * it: for tests whose subject is what such a party submits, not how it was
 * onboarded.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { fingerprint } from '../../src/hashing/canton-hash.js';
import { LEDGER_API_USER, type SandboxNetwork } from '../../src/sandbox/network.js';

export interface TestParty {
  id: string;
  key: KeyObject;
  fp: string;
}

export function addExternalParty(net: SandboxNetwork, hint: string): TestParty {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const spki = new Uint8Array(publicKey.export({ type: 'spki', format: 'der' }));
  const fp = fingerprint(spki);
  const id = `${hint}::${fp}`;
  net.parties.set(id, {
    partyId: id,
    namespace: fp,
    keys: [{ fingerprint: fp, scheme: 'ed25519', spki }],
    threshold: 1,
    hosting: [{ participantUid: net.participantUid, permission: 'confirmation' }],
    via: 'ledger-api',
  });
  net.users.get(LEDGER_API_USER)!.actAs.add(id);
  return { id, key: privateKey, fp };
}

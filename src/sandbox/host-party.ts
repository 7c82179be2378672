/**
 * Putting an external party straight onto a sandbox network, without the
 * onboarding transactions: its signing key registered in the topology state,
 * hosted (confirmation) on the sandbox participant, the Ledger API user given
 * the right to act as it, and optionally funded from the tap. The sandbox
 * ledger lives in memory, so a service that runs on a fresh sandbox (dev mode,
 * load tests) re-hosts the parties of its party book this way at each start.
 */
import { partyId as makePartyId } from '../hashing/canton-hash.js';
import type { KeyScheme } from '../keys/schemes.js';
import type { KeyDescription } from '../keys/signer.js';
import type { PartyRecord } from '../store/parties.js';
import { LEDGER_API_USER, type SandboxNetwork } from './network.js';

export interface HostableParty {
  partyId: string;
  /** Fingerprint of the party's signing key (its namespace, for single-key parties). */
  fingerprint: string;
  scheme: KeyScheme;
  /** SubjectPublicKeyInfo DER of the key, raw or base64. */
  publicKeySpki: Uint8Array | string;
}

/** Hosts `p` on `net` (idempotent) and taps `fund` Amulet to it when given. */
export function hostExternalParty(
  net: SandboxNetwork,
  p: HostableParty,
  opts: { fund?: string; userId?: string } = {},
): void {
  const spki =
    typeof p.publicKeySpki === 'string'
      ? new Uint8Array(Buffer.from(p.publicKeySpki, 'base64'))
      : p.publicKeySpki;
  const namespace = p.partyId.slice(p.partyId.lastIndexOf('::') + 2);
  net.parties.set(p.partyId, {
    partyId: p.partyId,
    namespace,
    keys: [{ fingerprint: p.fingerprint, scheme: p.scheme, spki }],
    threshold: 1,
    hosting: [{ participantUid: net.participantUid, permission: 'confirmation' }],
    via: 'ledger-api',
  });
  const user = net.users.get(opts.userId ?? LEDGER_API_USER);
  if (!user) throw new Error(`sandbox: no user ${opts.userId ?? LEDGER_API_USER}`);
  user.actAs.add(p.partyId);
  if (opts.fund) net.tap(p.partyId, opts.fund);
}

/** The party-book record of `hint`'s party for `key`, hosted on `net`'s participant and synchronizer. */
export function sandboxPartyRecord(
  net: SandboxNetwork,
  hint: string,
  key: Pick<KeyDescription, 'label' | 'scheme' | 'fingerprint' | 'publicKeySpki'>,
): PartyRecord {
  return {
    partyId: makePartyId(hint, key.fingerprint),
    hint,
    keyLabel: key.label,
    scheme: key.scheme,
    fingerprint: key.fingerprint,
    publicKeySpki: Buffer.from(key.publicKeySpki).toString('base64'),
    via: 'ledger-api',
    participantUid: net.participantId,
    synchronizerId: net.synchronizerId,
    createdAt: new Date().toISOString(),
  };
}

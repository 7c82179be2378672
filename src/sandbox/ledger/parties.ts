/**
 * What the sandbox's topology state knows about a party: its registered
 * signing keys and threshold (from PartyToParticipant's party signing keys or
 * a PartyToKeyMapping) and where it is hosted. Filled by the topology module
 * on allocation / validator topology submit; read by the submission checks.
 */
import type { KeyScheme } from '../../keys/schemes.js';

export interface RegisteredKey {
  /** Canton fingerprint (68 hex, `1220…`): what a signature's `signedBy` must name. */
  fingerprint: string;
  scheme: KeyScheme;
  /** SubjectPublicKeyInfo DER of the key (what `verifySignature` takes). */
  spki: Uint8Array;
}

export interface HostingEntry {
  participantUid: string;
  permission: 'submission' | 'confirmation' | 'observation';
}

export interface ExternalParty {
  partyId: string;
  /** Namespace fingerprint (the right half of the party id). */
  namespace: string;
  /** Keys that may sign the party's transactions (Protocol usage). */
  keys: RegisteredKey[];
  /** Distinct valid signatures a transaction needs. */
  threshold: number;
  hosting: HostingEntry[];
  /** Onboarded through the validator (`topology/submit`) or the Ledger API (`allocate`). */
  via: 'validator' | 'ledger-api';
}

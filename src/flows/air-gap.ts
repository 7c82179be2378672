/**
 * Where the pipeline meets the air gap: a party whose key is held
 * offline cannot sign here, so once a transaction has passed every check the
 * pipeline hands it to an `AirGapExporter`, which seals and records a signing
 * request (src/offline/online.ts), and the flow stops with
 * `AwaitingSignature`. Nothing was signed or submitted. When the response is
 * imported, the same transaction goes through the pipeline again and the
 * offline key's signature is verified against the registered key like any
 * other.
 */
import type { ParticipantPermission } from '../canton/topology/model.js';
import type { KeyScheme } from '../keys/schemes.js';
import type { Verified } from './pipeline.js';

/** The flow stopped: its signing request is across the air gap. Not a refusal, not a failure. */
export class AwaitingSignature extends Error {
  override readonly name = 'AwaitingSignature';
  constructor(
    readonly exportId: string,
    /** Hex of the hashes the request asks to be signed. */
    readonly hashes: readonly string[],
    /** When the request's window closes (ISO). */
    readonly windowLatest: string,
  ) {
    super(
      `the party's key is held offline: signing request ${exportId} waits for the offline signer (window closes ${windowLatest})`,
    );
  }
}

/** Onboarding topology of a party whose key is held offline, checked and ready to be signed. */
export interface TopologyExport {
  partyId: string;
  key: { fingerprint: string; scheme: KeyScheme; publicKeySpki: string };
  /** The serialized topology transactions, base64, in order. */
  transactions: string[];
  /** What the key signs: each transaction's hash (validator) or their multi-hash (Ledger API). */
  messages: Uint8Array[];
  expect: {
    participantUid: string;
    permission: ParticipantPermission;
    threshold: number;
    path: 'validator' | 'ledger-api';
  };
  synchronizerId: string;
  /** How to run the onboarding again after the import: the options it was asked with. */
  onboarding: {
    hint: string;
    keyLabel: string;
    path: 'validator' | 'ledger-api';
    synchronizerId?: string;
    participantId?: string;
    /** Only when false (the default grants). */
    grantRights?: boolean;
  };
}

export interface AirGapExporter {
  /** Seals and records a request for this verified transaction (or finds the one already open for its hash). */
  exportPrepared(v: Verified): Promise<AwaitingSignature>;
  /** The same for onboarding topology (the onboarding is run again after the import). */
  exportTopology?(t: TopologyExport): Promise<AwaitingSignature>;
}

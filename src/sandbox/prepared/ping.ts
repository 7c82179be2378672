/**
 * Canton's built-in `Canton.Internal.Ping:Ping` (package
 * canton-builtin-admin-workflow-ping): the create the wallet SDK's examples
 * submit as a connectivity check (a single root create, shape of
 * v2_canton_network_wallet_sdk_utils_ping) and its consuming `Archive`.
 */
import type { PreparedTransaction } from '../../hashing/model.js';
import {
  archiveNode,
  assemble,
  type ContractRef,
  createNode,
  type Envelope,
  ident,
  mintContractId,
  party,
  record,
  text,
} from './common.js';

/** Package id and name of the Ping template, as in the vector. */
export const PING_PACKAGE = {
  id: 'de2cc2f90eb523414ff54e899951dadd8789a4c07e0f71f6d6c9eaf57d412a54',
  name: 'canton-builtin-admin-workflow-ping',
} as const;
export const PING_ID = ident(PING_PACKAGE.id, 'Canton.Internal.Ping', 'Ping');

export interface PingFields {
  id: string;
  initiator: string;
  responder: string;
}

/** The Ping's argument record: `Ping { id, initiator, responder }`. */
export const pingRecord = (p: PingFields) =>
  record(PING_ID, [
    ['id', text(p.id)],
    ['initiator', party(p.initiator)],
    ['responder', party(p.responder)],
  ]);

/** Signatory: the initiator; observer: the responder. */
const pingRef = (contractId: string, p: PingFields): ContractRef => ({
  contractId,
  packageName: PING_PACKAGE.name,
  templateId: PING_ID,
  signatories: [p.initiator],
  stakeholders: [p.initiator, p.responder],
});

export function pingCreate(i: Envelope & PingFields): PreparedTransaction {
  const node = createNode(pingRef(mintContractId(i.seeds(0)), i), pingRecord(i));
  return assemble(i, [node], []);
}

export interface PingArchiveInput extends Envelope {
  ping: PingFields & { contractId: string; createdAt: bigint };
}

/** `Archive` on a Ping: consuming, exercised by its signatory, no children. */
export function pingArchive(i: PingArchiveInput): PreparedTransaction {
  const ref = pingRef(i.ping.contractId, i.ping);
  return assemble(
    i,
    [archiveNode(ref, [i.ping.initiator])],
    [{ ref, argument: pingRecord(i.ping), createdAt: i.ping.createdAt }],
  );
}

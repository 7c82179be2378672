/**
 * Typed model of `com.daml.ledger.api.v2.interactive.PreparedTransaction`
 * (ledger API v2, transaction v1 nodes, value.proto). Field names follow the
 * protobuf names in camelCase; integers that can exceed 2^53 are bigint.
 * Only the decoder creates these objects, after strict validation.
 */

export interface Identifier {
  packageId: string;
  moduleName: string;
  entityName: string;
}

export type Value =
  | { kind: 'unit' }
  | { kind: 'bool'; value: boolean }
  | { kind: 'int64'; value: bigint }
  | { kind: 'numeric'; value: string }
  | { kind: 'timestamp'; value: bigint } // µs since epoch
  | { kind: 'date'; value: number } // days since epoch
  | { kind: 'party'; value: string }
  | { kind: 'text'; value: string }
  | { kind: 'contractId'; value: string } // lowercase hex
  | { kind: 'optional'; value: Value | undefined }
  | { kind: 'list'; elements: Value[] }
  | { kind: 'textMap'; entries: { key: string; value: Value }[] }
  | { kind: 'genMap'; entries: { key: Value; value: Value }[] }
  | { kind: 'record'; recordId: Identifier | undefined; fields: { label: string; value: Value }[] }
  | { kind: 'variant'; variantId: Identifier | undefined; constructor: string; value: Value }
  | { kind: 'enum'; enumId: Identifier | undefined; constructor: string };

export interface GlobalKey {
  templateId: Identifier;
  packageName: string;
  key: Value;
  hash: Uint8Array; // 32 bytes
}

export interface GlobalKeyWithMaintainers {
  key: GlobalKey;
  maintainers: string[];
}

/**
 * Node types take the type of their top-level values (an argument, a chosen
 * value, a result) as `TV`: a decoded `Value` in the model; for the streaming
 * hasher's visitor `Value | WireValue` (decode-values.ts `TopValue`), as the
 * values are left on the wire. Contract keys are always decoded.
 */
export interface CreateNode<TV = Value> {
  type: 'create';
  lfVersion: string;
  contractId: string;
  packageName: string;
  templateId: Identifier;
  argument: TV;
  signatories: string[];
  stakeholders: string[];
  key: GlobalKeyWithMaintainers | undefined;
}

export interface ExerciseNode<TV = Value> {
  type: 'exercise';
  lfVersion: string;
  contractId: string;
  packageName: string;
  templateId: Identifier;
  signatories: string[];
  stakeholders: string[];
  actingParties: string[];
  interfaceId: Identifier | undefined;
  choiceId: string;
  chosenValue: TV;
  consuming: boolean;
  children: string[];
  exerciseResult: TV | undefined;
  choiceObservers: string[];
  key: GlobalKeyWithMaintainers | undefined;
  byKey: boolean;
}

export interface FetchNode {
  type: 'fetch';
  lfVersion: string;
  contractId: string;
  packageName: string;
  templateId: Identifier;
  signatories: string[];
  stakeholders: string[];
  actingParties: string[];
  interfaceId: Identifier | undefined;
  key: GlobalKeyWithMaintainers | undefined;
  byKey: boolean;
}

export interface RollbackNode {
  type: 'rollback';
  children: string[];
}

export interface QueryByKeyNode {
  type: 'queryByKey';
  lfVersion: string;
  packageName: string;
  templateId: Identifier;
  exhaustive: boolean;
  key: GlobalKeyWithMaintainers;
  result: string[]; // contract ids
}

export type NodeBody<TV = Value> =
  | CreateNode<TV>
  | ExerciseNode<TV>
  | FetchNode
  | RollbackNode
  | QueryByKeyNode;

export interface Node<TV = Value> {
  nodeId: string;
  node: NodeBody<TV>;
}

export interface NodeSeed {
  nodeId: number;
  seed: Uint8Array; // 32 bytes
}

export interface DamlTransaction<TV = Value> {
  version: string;
  roots: string[];
  nodes: Node<TV>[];
  nodeSeeds: NodeSeed[];
}

export interface InputContract<TV = Value> {
  contract: CreateNode<TV>; // the `v1` branch; the hash treats it as a create without seed
  createdAt: bigint; // µs
  eventBlob: Uint8Array; // not hashed; a view into the decoded bytes
}

export interface Metadata<TV = Value> {
  submitterInfo: { actAs: string[]; commandId: string };
  synchronizerId: string;
  mediatorGroup: number; // uint32
  transactionUuid: string;
  preparationTime: bigint; // µs
  inputContracts: InputContract<TV>[];
  minLedgerEffectiveTime: bigint | undefined;
  maxLedgerEffectiveTime: bigint | undefined;
  maxRecordTime: bigint | undefined;
}

export interface PreparedTransaction {
  transaction: DamlTransaction;
  metadata: Metadata;
}

/** A decoded transaction with its node index, as returned by `decodePreparedTransaction`. */
export interface DecodedTransaction extends PreparedTransaction {
  /** node id → node, for every node in `transaction.nodes`. */
  readonly nodeById: ReadonlyMap<string, NodeBody>;
  /** node id → 32-byte seed. */
  readonly seedById: ReadonlyMap<string, Uint8Array>;
  /** The protobuf bytes exactly as decoded (what must be submitted). */
  readonly bytes: Uint8Array;
}

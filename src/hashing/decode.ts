/**
 * Strict decoder for `PreparedTransaction` protobuf bytes: the entry points
 * and the top-level messages (transaction, node seeds, metadata, input
 * contracts). Fields, values and nodes are read by the classes it builds on
 * (decode-fields.ts, decode-values.ts, decode-nodes.ts); the node structure is
 * checked by decode-structure.ts.
 *
 * Only fields this module knows are accepted: anything else would be bytes the
 * signer cannot show or hash, so it is refused with the field path. On top of
 * the wire rules it checks what the participant itself checks when it
 * recomputes the hash (sorted sets, canonical numerics, ids and UUIDs, 32-byte
 * seeds, a proper tree of nodes) so that a transaction that decodes here is one
 * whose hash means what the decoded model shows. Scheme-specific rules (V2 vs
 * V3) are applied by the hasher, not here.
 */
import { uuidProblem } from './canonical.js';
import { KNOWN_LF_VERSIONS, truncate } from './decode-fields.js';
import { NodeDecoder, type NodeFields } from './decode-nodes.js';
import { checkStructure, type NodeShape, type StructureInput } from './decode-structure.js';
import { inputBytes, type TransactionInput } from './input.js';
import { keepAlive } from './keep-alive.js';
import type {
  CreateNode,
  DamlTransaction,
  DecodedTransaction,
  InputContract,
  Metadata,
  Node,
  NodeBody,
  NodeSeed,
  PreparedTransaction,
} from './model.js';
import { WT_LEN, WT_VARINT } from './wire.js';

export { KNOWN_LF_VERSIONS } from './decode-fields.js';
export type { NodeFields, PartyField } from './decode-nodes.js';
export type { NodeShape } from './decode-structure.js';
export { MAX_VALUE_DEPTH } from './decode-values.js';

import type { TopValue, WireValues } from './decode-values.js';

export interface DecodeOptions {
  /**
   * TEST ONLY. Accepts nodes shared between parents and nodes unreachable from
   * the roots, as in the Canton-derived hash vectors. Cycles stay refused.
   * A transaction accepted only with this flag must never be signed.
   */
  unsafeAllowNonTreeForTests?: boolean;
}

export function decodePreparedTransaction(
  input: TransactionInput,
  options: DecodeOptions = {},
): DecodedTransaction {
  const bytes = inputBytes(input);
  const d = new Decoder(bytes);
  // Values are not deferred (`deferValues` is off): every top-level value was decoded into a `Value`.
  const { transaction, metadata } = d.preparedTransaction() as PreparedTransaction;
  const { nodeById, seedById } = checkStructure(transaction, options);
  keepDecoderShapes();
  return { transaction, metadata, nodeById, seedById, bytes };
}

const NO_BYTES = new Uint8Array(0);

/** An empty decoder made after the work, so it has the maps now in use (keep-alive.ts says why). */
function keepDecoderShapes(): void {
  keepAlive('decoder', new Decoder(NO_BYTES));
}

/**
 * Receives each node as soon as it is decoded, so that a caller that only
 * hashes never holds the whole decoded transaction. `seeds` comes first (all
 * node seeds, as decoded), then `node` once per node in wire order; what
 * `node` returns is kept in place of the node for the structure checks.
 */
export interface NodeVisitor<S extends NodeShape> {
  /**
   * First of all: the walker of the values left on the wire. The top-level
   * values of nodes and of input contracts (arguments, chosen values, results;
   * not contract keys) are `WireValue`s, not decoded nor checked: the visitor
   * must walk every one of them through `values` (which checks them) before it
   * accepts the transaction.
   */
  begin(values: WireValues): void;
  seeds(seeds: readonly NodeSeed[]): void;
  node(node: Node<TopValue>, index: number): S;
  /**
   * Instead of `node`, when present: the node's fields as read and checked,
   * text as byte ranges of the input (no model node is built). `fields` is
   * reused for the next node: what is kept of it must be copied.
   */
  fields?(fields: NodeFields, index: number): S;
}

/**
 * The same decoding and the same checks as `decodePreparedTransaction`, every
 * rule shared with it, but nodes go to `visitor` one by one and only what it
 * returns for them is kept, and the top-level values are left on the wire for
 * the visitor to walk (`NodeVisitor.begin`): their checks run as it walks them.
 * Once the visitor has walked every value, a transaction this accepts is one
 * `decodePreparedTransaction` accepts; when it refuses, the error may be a
 * different one of the transaction's faults (the order of the checks differs),
 * so callers that report refusals take the error from `decodePreparedTransaction`.
 */
export function visitPreparedTransaction<S extends NodeShape>(
  bytes: Uint8Array,
  visitor: NodeVisitor<S>,
): {
  version: string;
  roots: readonly string[];
  metadata: Metadata<TopValue>;
  nodeById: ReadonlyMap<string, S>;
} {
  const d = new Decoder(bytes);
  d.deferValues = true;
  visitor.begin(d);
  const { transaction, metadata } = d.preparedTransaction(visitor);
  const shaped = transaction as unknown as StructureInput<S>;
  const { nodeById } = checkStructure(shaped, {});
  keepDecoderShapes();
  return { version: transaction.version, roots: transaction.roots, metadata, nodeById };
}

class Decoder extends NodeDecoder {
  // ---- messages ----------------------------------------------------------

  preparedTransaction(visitor?: NodeVisitor<NodeShape>): {
    transaction: DamlTransaction<TopValue>;
    metadata: Metadata<TopValue>;
  } {
    const end = this.r.buf.length;
    let transaction: DamlTransaction<TopValue> | undefined;
    let metadata: Metadata<TopValue> | undefined;
    let seen = 0;
    while (this.r.pos < end) {
      if (transaction && metadata)
        this.p.fail(
          'trailing_bytes',
          `${end - this.r.pos} bytes follow a complete prepared transaction (at byte ${this.r.pos})`,
        );
      const tag = this.r.tag(end);
      switch (tag >>> 3) {
        case 1: {
          seen = this.once(seen, 1, 'transaction');
          const stop = this.enter(tag, end, 'transaction');
          transaction = this.damlTransaction(stop, visitor);
          this.leave(stop);
          break;
        }
        case 2: {
          seen = this.once(seen, 2, 'metadata');
          const stop = this.enter(tag, end, 'metadata');
          metadata = this.metadata(stop);
          this.leave(stop);
          break;
        }
        default:
          this.unknown(tag);
      }
    }
    if (!transaction) this.p.fail('missing_field', 'no transaction', 'transaction');
    if (!metadata) this.p.fail('missing_field', 'no metadata', 'metadata');
    return { transaction, metadata };
  }

  /**
   * With a visitor, two passes: the first decodes everything but the nodes
   * (whose bytes it only delimits), so that the seeds are known before any
   * node; the second decodes the nodes one by one and hands each to the visitor.
   */
  private damlTransaction(end: number, visitor?: NodeVisitor<NodeShape>): DamlTransaction<TopValue> {
    const start = this.r.pos;
    let version = '';
    const roots: string[] = [];
    const nodes: Node<TopValue>[] = [];
    const nodeSeeds: NodeSeed[] = [];
    let seen = 0;
    let skipped = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      switch (tag >>> 3) {
        case 1:
          seen = this.once(seen, 1, 'version');
          version = this.str(tag, end, 'version');
          break;
        case 2:
          roots.push(this.str(tag, end, 'roots', roots.length));
          break;
        case 3: {
          if (visitor) {
            const stop = this.enter(tag, end, 'nodes', skipped);
            this.r.pos = stop;
            this.leave(stop, skipped++);
            break;
          }
          const i = nodes.length;
          const stop = this.enter(tag, end, 'nodes', i);
          nodes.push(this.node(stop));
          this.leave(stop, i);
          break;
        }
        case 4: {
          const i = nodeSeeds.length;
          const stop = this.enter(tag, end, 'node_seeds', i);
          nodeSeeds.push(this.nodeSeed(stop));
          this.leave(stop, i);
          break;
        }
        default:
          this.unknown(tag);
      }
    }
    if (!KNOWN_LF_VERSIONS.has(version))
      this.p.fail(
        'unsupported_version',
        `unknown Daml-LF version ${JSON.stringify(truncate(version))}`,
        'version',
      );
    if (visitor) {
      visitor.seeds(nodeSeeds);
      // Second pass: every field but the nodes was read above, and all are length-delimited.
      this.r.pos = start;
      while (this.r.pos < end) {
        const tag = this.r.tag(end);
        const stop = this.r.len(end);
        if (tag >>> 3 !== 3) {
          this.r.pos = stop;
          continue;
        }
        const i = nodes.length;
        this.p.push('nodes');
        this.p.push(i);
        if (visitor.fields) {
          const f = this.nodeFields(stop);
          this.leave(stop, i);
          nodes.push({ nodeId: f.nodeId, node: visitor.fields(f, i) as NodeBody<TopValue> });
          continue;
        }
        const node = this.node(stop);
        this.leave(stop, i);
        nodes.push({ nodeId: node.nodeId, node: visitor.node(node, i) as NodeBody<TopValue> });
      }
    }
    return { version, roots, nodes, nodeSeeds };
  }

  private nodeSeed(end: number): NodeSeed {
    let nodeId = 0;
    let seed: Uint8Array | undefined;
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      switch (tag >>> 3) {
        case 1:
          seen = this.once(seen, 1, 'node_id');
          nodeId = this.int32(tag, end, 'node_id');
          if (nodeId < 0) this.p.fail('seed', `negative node id ${nodeId}`, 'node_id');
          break;
        case 2:
          seen = this.once(seen, 2, 'seed');
          this.r.expect(tag, WT_LEN, 'seed');
          this.p.push('seed');
          seed = this.r.bytes(end);
          this.p.pop();
          break;
        default:
          this.unknown(tag);
      }
    }
    if (seed?.length !== 32)
      this.p.fail('seed', `seed must be exactly 32 bytes (got ${seed?.length ?? 0})`, 'seed');
    return { nodeId, seed };
  }

  // ---- metadata ----------------------------------------------------------

  private metadata(end: number): Metadata<TopValue> {
    const m: Metadata<TopValue> = {
      submitterInfo: { actAs: [], commandId: '' },
      synchronizerId: '',
      mediatorGroup: 0,
      transactionUuid: '',
      preparationTime: 0n,
      inputContracts: [],
      minLedgerEffectiveTime: undefined,
      maxLedgerEffectiveTime: undefined,
      maxRecordTime: undefined,
    };
    let seen = 0;
    let gkm = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 2: {
          seen = this.once(seen, f, 'submitter_info');
          const stop = this.enter(tag, end, 'submitter_info');
          m.submitterInfo = this.submitterInfo(stop);
          this.leave(stop);
          break;
        }
        case 3:
          seen = this.once(seen, f, 'synchronizer_id');
          m.synchronizerId = this.str(tag, end, 'synchronizer_id');
          break;
        case 4:
          seen = this.once(seen, f, 'mediator_group');
          this.r.expect(tag, WT_VARINT, 'mediator_group');
          this.p.push('mediator_group');
          m.mediatorGroup = this.r.varint32(end, 'mediator_group');
          this.p.pop();
          break;
        case 5: {
          seen = this.once(seen, f, 'transaction_uuid');
          m.transactionUuid = this.str(tag, end, 'transaction_uuid');
          const bad = uuidProblem(m.transactionUuid);
          if (bad)
            this.p.fail(
              'non_canonical',
              `${JSON.stringify(truncate(m.transactionUuid))} ${bad}`,
              'transaction_uuid',
            );
          break;
        }
        case 6:
          seen = this.once(seen, f, 'preparation_time');
          m.preparationTime = this.uint64(tag, end, 'preparation_time');
          break;
        case 7: {
          const i = m.inputContracts.length;
          const stop = this.enter(tag, end, 'input_contracts', i);
          m.inputContracts.push(this.inputContract(stop));
          this.leave(stop, i);
          break;
        }
        case 8: {
          // Deprecated: Canton 3.5+ writes it empty and ignores it, no scheme hashes it. Each entry is
          // decoded strictly (no byte the signer does not know), then dropped: nothing reads it.
          const stop = this.enter(tag, end, 'global_key_mapping', gkm);
          this.globalKeyMappingEntry(stop);
          this.leave(stop, gkm++);
          break;
        }
        case 9:
          seen = this.once(seen, f, 'min_ledger_effective_time');
          m.minLedgerEffectiveTime = this.uint64(tag, end, 'min_ledger_effective_time');
          break;
        case 10:
          seen = this.once(seen, f, 'max_ledger_effective_time');
          m.maxLedgerEffectiveTime = this.uint64(tag, end, 'max_ledger_effective_time');
          break;
        case 11:
          seen = this.once(seen, f, 'max_record_time');
          m.maxRecordTime = this.uint64(tag, end, 'max_record_time');
          break;
        default:
          this.unknown(tag);
      }
    }
    this.require(seen, [2, 5], ['submitter_info', 'transaction_uuid']);
    if (m.submitterInfo.actAs.length === 0)
      this.p.fail(
        'missing_field',
        'act_as is empty: no party would authorise this transaction',
        'submitter_info.act_as',
      );
    for (let i = 1; i < m.inputContracts.length; i++) {
      const a = m.inputContracts[i - 1]!.contract.contractId;
      const b = m.inputContracts[i]!.contract.contractId;
      if (a === b)
        this.p.fail('duplicate', `input contract ${truncate(b)} appears twice`, `input_contracts[${i}]`);
      if (a > b)
        this.p.fail(
          'unsorted',
          'input contracts are not sorted by contract id',
          `input_contracts[${i}].v1.contract_id`,
        );
    }
    return m;
  }

  /** `GlobalKeyMappingEntry { GlobalKey key = 1; optional Value value = 2; }`, checked and not kept. */
  private globalKeyMappingEntry(end: number): void {
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, 1, 'key');
        const stop = this.enter(tag, end, 'key');
        this.globalKey(stop);
        this.leave(stop);
      } else if (f === 2) {
        seen = this.once(seen, 2, 'value');
        const stop = this.enter(tag, end, 'value');
        this.value(stop, 0);
        this.leave(stop);
      } else this.unknown(tag);
    }
  }

  private submitterInfo(end: number): { actAs: string[]; commandId: string } {
    const actAs: string[] = [];
    let commandId = '';
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      if (f === 1) actAs.push(this.party(tag, end, 'act_as', actAs.length));
      else if (f === 2) {
        seen = this.once(seen, 2, 'command_id');
        commandId = this.str(tag, end, 'command_id');
      } else this.unknown(tag);
    }
    this.sortedSet(actAs, 'act_as');
    return { actAs, commandId };
  }

  private inputContract(end: number): InputContract<TopValue> {
    let contract: CreateNode<TopValue> | undefined;
    let createdAt = 0n;
    let eventBlob: Uint8Array = new Uint8Array(0);
    let seenCreated = false;
    let seenBlob = false;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        if (contract) this.p.fail('duplicate_field', 'contract oneof set more than once', 'v1');
        const stop = this.enter(tag, end, 'v1');
        contract = this.create(stop);
        this.leave(stop);
      } else if (f === 1000) {
        if (seenCreated) this.p.fail('duplicate_field', 'singular field occurs more than once', 'created_at');
        seenCreated = true;
        createdAt = this.uint64(tag, end, 'created_at');
      } else if (f === 1002) {
        if (seenBlob) this.p.fail('duplicate_field', 'singular field occurs more than once', 'event_blob');
        seenBlob = true;
        this.r.expect(tag, WT_LEN, 'event_blob');
        this.p.push('event_blob');
        eventBlob = this.r.view(end);
        this.p.pop();
      } else this.unknown(tag);
    }
    if (!contract) this.p.fail('missing_field', 'input contract has no v1 create', 'v1');
    return { contract, createdAt, eventBlob };
  }
}

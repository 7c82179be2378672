/**
 * Strict decoder for `PreparedTransaction` protobuf bytes.
 *
 * Only fields this module knows are accepted: anything else would be bytes the
 * signer cannot show or hash, so it is refused with the field path. On top of
 * the wire rules it checks what the participant itself checks when it
 * recomputes the hash (sorted sets, canonical numerics, ids and UUIDs, 32-byte
 * seeds, a proper tree of nodes) so that a transaction that decodes here is one
 * whose hash means what the decoded model shows. Scheme-specific rules (V2 vs
 * V3) are applied by the hasher, not here.
 */
import {
  compareUtf8,
  contractIdProblem,
  dottedNameProblem,
  nodeIdProblem,
  numericProblem,
  packageIdProblem,
  packageNameProblem,
  partyProblem,
  uuidProblem,
} from './canonical.js';
import { TransactionError } from './errors.js';
import { inputBytes, type TransactionInput } from './input.js';
import { MessageDecoder } from './message-decoder.js';
import type {
  CreateNode,
  DamlTransaction,
  DecodedTransaction,
  ExerciseNode,
  FetchNode,
  GlobalKey,
  GlobalKeyWithMaintainers,
  Identifier,
  InputContract,
  Metadata,
  Node,
  NodeBody,
  NodeSeed,
  QueryByKeyNode,
  RollbackNode,
  Value,
} from './model.js';
import { ByteCache, WT_I64, WT_LEN, WT_VARINT } from './wire.js';

/** Daml-LF serialization versions a V2 or V3 hash can cover. */
export const KNOWN_LF_VERSIONS: ReadonlySet<string> = new Set(['2.1', '2']);

/**
 * Daml limits value nesting to 100 (`MAXIMUM_NESTING`), counted as Daml does:
 * a top-level value (an argument, a chosen value, a result, a key) is at
 * nesting 0 and each list element, optional, record field, variant, map entry
 * one deeper, so 100 wrappers around a leaf are accepted and 101 refused —
 * before they can exhaust the stack.
 */
export const MAX_VALUE_DEPTH = 100;

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
  const { transaction, metadata } = d.preparedTransaction();
  const { nodeById, seedById } = checkStructure(transaction, options);
  return { transaction, metadata, nodeById, seedById, bytes };
}

/** The shape of a node the structure checks need: its kind and, for exercises and rollbacks, its children. */
export interface NodeShape {
  readonly type: NodeBody['type'];
  readonly children?: readonly string[];
}

/**
 * Receives each node as soon as it is decoded, so that a caller that only
 * hashes never holds the whole decoded transaction. `seeds` comes first (all
 * node seeds, as decoded), then `node` once per node in wire order; what
 * `node` returns is kept in place of the node for the structure checks.
 */
export interface NodeVisitor<S extends NodeShape> {
  seeds(seeds: readonly NodeSeed[]): void;
  node(node: Node, index: number): S;
}

/**
 * The same decoding and the same checks as `decodePreparedTransaction`, every
 * rule shared with it, but nodes go to `visitor` one by one and only what it
 * returns for them is kept. A transaction this accepts is one
 * `decodePreparedTransaction` accepts; when it refuses, the error may be a
 * different one of the transaction's faults (the order of the checks differs),
 * so callers that report refusals take the error from `decodePreparedTransaction`.
 */
export function visitPreparedTransaction<S extends NodeShape>(
  bytes: Uint8Array,
  visitor: NodeVisitor<S>,
): { version: string; roots: readonly string[]; metadata: Metadata; nodeById: ReadonlyMap<string, S> } {
  const d = new Decoder(bytes);
  const { transaction, metadata } = d.preparedTransaction(visitor);
  const shaped = transaction as unknown as StructureInput<S>;
  const { nodeById } = checkStructure(shaped, {});
  return { version: transaction.version, roots: transaction.roots, metadata, nodeById };
}

const EMPTY_ID: Identifier = Object.freeze({ packageId: '', moduleName: '', entityName: '' });

/**
 * Caches shared by all decodes. Transactions name the same few templates and
 * parties again and again. Identifiers are keyed by their exact wire bytes and
 * frozen, so a cached object can never differ from a fresh decode; parties are
 * remembered only once they passed validation. Both are bounded.
 */
const CACHE_LIMIT = 10_000;
const IDENTIFIERS = new ByteCache<Identifier>(CACHE_LIMIT);
const PARTIES = new ByteCache<string>(CACHE_LIMIT);

class Decoder extends MessageDecoder {
  // ---- helpers -----------------------------------------------------------

  private readonly identifiers = IDENTIFIERS;
  private readonly parties = PARTIES;

  private str(tag: number, end: number, name: string, index?: number): string {
    return this.r.string(tag, end, name, index);
  }

  private party(tag: number, end: number, name: string, index?: number): string {
    const r = this.r;
    r.expect(tag, WT_LEN, name, index);
    const stop = r.len(end, name, index);
    const start = r.pos;
    r.pos = stop;
    // Party ids repeat: a hit skips decoding and validation, both done when it was cached.
    const hit = this.parties.get(r, start, stop);
    if (hit !== undefined) return hit;
    const s = r.text(start, stop, name, index);
    const bad = partyProblem(s);
    if (bad) this.p.fail('non_canonical', `party ${JSON.stringify(truncate(s))} ${bad}`, name, index);
    this.parties.set(r, start, stop, s);
    return s;
  }

  /** A node's or key's `package_name`, as Daml-LF defines package names. */
  private packageName(tag: number, end: number): string {
    const s = this.r.string(tag, end, 'package_name');
    const bad = packageNameProblem(s);
    if (bad)
      this.p.fail('invalid_identifier', `package name ${JSON.stringify(truncate(s))} ${bad}`, 'package_name');
    return s;
  }

  private contractId(tag: number, end: number, name: string, index?: number): string {
    const s = this.r.string(tag, end, name, index);
    const bad = contractIdProblem(s);
    if (bad) this.p.fail('non_canonical', `contract id ${JSON.stringify(truncate(s))} ${bad}`, name, index);
    return s;
  }

  private uint64(tag: number, end: number, name: string): bigint {
    this.r.expect(tag, WT_VARINT, name);
    this.p.push(name);
    const v = this.r.varint64(end, name);
    this.p.pop();
    return v;
  }

  private int32(tag: number, end: number, name: string): number {
    this.r.expect(tag, WT_VARINT, name);
    this.p.push(name);
    const v = BigInt.asIntN(64, this.r.varint64(end, name));
    if (v < -0x80000000n || v > 0x7fffffffn) this.p.fail('malformed', `int32 value ${v} out of range`);
    this.p.pop();
    return Number(v);
  }

  /** Checks a party list is strictly ascending (a set, as the participant hashes it). */
  private sortedSet(list: string[], name: string): void {
    for (let i = 1; i < list.length; i++) {
      const a = list[i - 1]!;
      const b = list[i]!;
      if (a === b) this.p.fail('duplicate', `${JSON.stringify(truncate(b))} appears twice in a set`, name);
      if (a > b)
        this.p.fail(
          'unsorted',
          `set is not in ascending order at index ${i}: the participant hashes it sorted`,
          name,
        );
    }
  }

  // ---- messages ----------------------------------------------------------

  preparedTransaction(visitor?: NodeVisitor<NodeShape>): {
    transaction: DamlTransaction;
    metadata: Metadata;
  } {
    const end = this.r.buf.length;
    let transaction: DamlTransaction | undefined;
    let metadata: Metadata | undefined;
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
  private damlTransaction(end: number, visitor?: NodeVisitor<NodeShape>): DamlTransaction {
    const start = this.r.pos;
    let version = '';
    const roots: string[] = [];
    const nodes: Node[] = [];
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
        const node = this.node(stop);
        this.leave(stop, i);
        nodes.push({ nodeId: node.nodeId, node: visitor.node(node, i) as NodeBody });
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

  private node(end: number): Node {
    let nodeId = '';
    let node: NodeBody | undefined;
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const field = tag >>> 3;
      if (field === 1) {
        seen = this.once(seen, 1, 'node_id');
        nodeId = this.str(tag, end, 'node_id');
      } else if (field === 1000) {
        if (node) this.p.fail('duplicate_field', 'versioned node set more than once', 'v1');
        const stop = this.enter(tag, end, 'v1');
        node = this.v1Node(stop);
        this.leave(stop);
      } else this.unknown(tag);
    }
    if (!node) this.p.fail('missing_field', 'node has no versioned body (expected v1)', 'v1');
    return { nodeId, node };
  }

  private v1Node(end: number): NodeBody {
    let body: NodeBody | undefined;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const field = tag >>> 3;
      if (field < 1 || field > 5) this.unknown(tag);
      const name = ['', 'create', 'fetch', 'exercise', 'rollback', 'query_by_key'][field]!;
      if (body) this.p.fail('duplicate_field', 'node_type oneof set more than once', name);
      const stop = this.enter(tag, end, name);
      switch (field) {
        case 1:
          body = this.create(stop);
          break;
        case 2:
          body = this.fetch(stop);
          break;
        case 3:
          body = this.exercise(stop);
          break;
        case 4:
          body = this.rollback(stop);
          break;
        default:
          body = this.queryByKey(stop);
      }
      this.leave(stop);
    }
    if (!body) this.p.fail('missing_field', 'node_type is not set');
    return body;
  }

  private lfVersion(tag: number, end: number): string {
    const v = this.str(tag, end, 'lf_version');
    if (!KNOWN_LF_VERSIONS.has(v))
      this.p.fail(
        'unsupported_version',
        `unknown Daml-LF version ${JSON.stringify(truncate(v))}`,
        'lf_version',
      );
    return v;
  }

  private create(end: number): CreateNode {
    const n: CreateNode = {
      type: 'create',
      lfVersion: '',
      contractId: '',
      packageName: '',
      templateId: EMPTY_ID,
      argument: { kind: 'unit' },
      signatories: [],
      stakeholders: [],
      key: undefined,
    };
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 1:
          seen = this.once(seen, f, 'lf_version');
          n.lfVersion = this.lfVersion(tag, end);
          break;
        case 2:
          seen = this.once(seen, f, 'contract_id');
          n.contractId = this.contractId(tag, end, 'contract_id');
          break;
        case 3:
          seen = this.once(seen, f, 'package_name');
          n.packageName = this.packageName(tag, end);
          break;
        case 4:
          seen = this.once(seen, f, 'template_id');
          n.templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 5: {
          seen = this.once(seen, f, 'argument');
          const stop = this.enter(tag, end, 'argument');
          n.argument = this.value(stop, 0);
          this.leave(stop);
          break;
        }
        case 6:
          n.signatories.push(this.party(tag, end, 'signatories', n.signatories.length));
          break;
        case 7:
          n.stakeholders.push(this.party(tag, end, 'stakeholders', n.stakeholders.length));
          break;
        case 8:
          seen = this.once(seen, f, 'key');
          n.key = this.keyField(tag, end, 'key');
          break;
        default:
          this.unknown(tag);
      }
    }
    this.require(
      seen,
      [1, 2, 3, 4, 5],
      ['lf_version', 'contract_id', 'package_name', 'template_id', 'argument'],
    );
    this.sortedSet(n.signatories, 'signatories');
    this.sortedSet(n.stakeholders, 'stakeholders');
    return n;
  }

  private exercise(end: number): ExerciseNode {
    const n: ExerciseNode = {
      type: 'exercise',
      lfVersion: '',
      contractId: '',
      packageName: '',
      templateId: EMPTY_ID,
      signatories: [],
      stakeholders: [],
      actingParties: [],
      interfaceId: undefined,
      choiceId: '',
      chosenValue: { kind: 'unit' },
      consuming: false,
      children: [],
      exerciseResult: undefined,
      choiceObservers: [],
      key: undefined,
      byKey: false,
    };
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 1:
          seen = this.once(seen, f, 'lf_version');
          n.lfVersion = this.lfVersion(tag, end);
          break;
        case 2:
          seen = this.once(seen, f, 'contract_id');
          n.contractId = this.contractId(tag, end, 'contract_id');
          break;
        case 3:
          seen = this.once(seen, f, 'package_name');
          n.packageName = this.packageName(tag, end);
          break;
        case 4:
          seen = this.once(seen, f, 'template_id');
          n.templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 5:
          n.signatories.push(this.party(tag, end, 'signatories', n.signatories.length));
          break;
        case 6:
          n.stakeholders.push(this.party(tag, end, 'stakeholders', n.stakeholders.length));
          break;
        case 7:
          n.actingParties.push(this.party(tag, end, 'acting_parties', n.actingParties.length));
          break;
        case 8:
          seen = this.once(seen, f, 'interface_id');
          n.interfaceId = this.identifierField(tag, end, 'interface_id');
          break;
        case 9:
          seen = this.once(seen, f, 'choice_id');
          n.choiceId = this.str(tag, end, 'choice_id');
          break;
        case 10: {
          seen = this.once(seen, f, 'chosen_value');
          const stop = this.enter(tag, end, 'chosen_value');
          n.chosenValue = this.value(stop, 0);
          this.leave(stop);
          break;
        }
        case 11:
          seen = this.once(seen, f, 'consuming');
          n.consuming = this.bool(tag, end, 'consuming');
          break;
        case 12:
          n.children.push(this.str(tag, end, 'children', n.children.length));
          break;
        case 13: {
          seen = this.once(seen, f, 'exercise_result');
          const stop = this.enter(tag, end, 'exercise_result');
          n.exerciseResult = this.value(stop, 0);
          this.leave(stop);
          break;
        }
        case 14:
          n.choiceObservers.push(this.party(tag, end, 'choice_observers', n.choiceObservers.length));
          break;
        case 15:
          seen = this.once(seen, f, 'key');
          n.key = this.keyField(tag, end, 'key');
          break;
        case 16:
          seen = this.once(seen, f, 'by_key');
          n.byKey = this.bool(tag, end, 'by_key');
          break;
        case 17:
          this.p.fail(
            'unsupported',
            'external call results exist only in Daml-LF dev and are not covered by hashing schemes V2/V3',
            'external_call_results',
          );
          break;
        default:
          this.unknown(tag);
      }
    }
    this.require(
      seen,
      [1, 2, 3, 4, 9, 10],
      ['lf_version', 'contract_id', 'package_name', 'template_id', 'choice_id', 'chosen_value'],
    );
    this.sortedSet(n.signatories, 'signatories');
    this.sortedSet(n.stakeholders, 'stakeholders');
    this.sortedSet(n.actingParties, 'acting_parties');
    this.sortedSet(n.choiceObservers, 'choice_observers');
    return n;
  }

  private fetch(end: number): FetchNode {
    const n: FetchNode = {
      type: 'fetch',
      lfVersion: '',
      contractId: '',
      packageName: '',
      templateId: EMPTY_ID,
      signatories: [],
      stakeholders: [],
      actingParties: [],
      interfaceId: undefined,
      key: undefined,
      byKey: false,
    };
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 1:
          seen = this.once(seen, f, 'lf_version');
          n.lfVersion = this.lfVersion(tag, end);
          break;
        case 2:
          seen = this.once(seen, f, 'contract_id');
          n.contractId = this.contractId(tag, end, 'contract_id');
          break;
        case 3:
          seen = this.once(seen, f, 'package_name');
          n.packageName = this.packageName(tag, end);
          break;
        case 4:
          seen = this.once(seen, f, 'template_id');
          n.templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 5:
          n.signatories.push(this.party(tag, end, 'signatories', n.signatories.length));
          break;
        case 6:
          n.stakeholders.push(this.party(tag, end, 'stakeholders', n.stakeholders.length));
          break;
        case 7:
          n.actingParties.push(this.party(tag, end, 'acting_parties', n.actingParties.length));
          break;
        case 8:
          seen = this.once(seen, f, 'interface_id');
          n.interfaceId = this.identifierField(tag, end, 'interface_id');
          break;
        case 9:
          seen = this.once(seen, f, 'key');
          n.key = this.keyField(tag, end, 'key');
          break;
        case 10:
          seen = this.once(seen, f, 'by_key');
          n.byKey = this.bool(tag, end, 'by_key');
          break;
        default:
          this.unknown(tag);
      }
    }
    this.require(seen, [1, 2, 3, 4], ['lf_version', 'contract_id', 'package_name', 'template_id']);
    this.sortedSet(n.signatories, 'signatories');
    this.sortedSet(n.stakeholders, 'stakeholders');
    this.sortedSet(n.actingParties, 'acting_parties');
    return n;
  }

  private rollback(end: number): RollbackNode {
    const children: string[] = [];
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      if (tag >>> 3 !== 1) this.unknown(tag);
      children.push(this.str(tag, end, 'children', children.length));
    }
    return { type: 'rollback', children };
  }

  private queryByKey(end: number): QueryByKeyNode {
    const n: QueryByKeyNode = {
      type: 'queryByKey',
      lfVersion: '',
      packageName: '',
      templateId: EMPTY_ID,
      exhaustive: false,
      key: undefined as unknown as GlobalKeyWithMaintainers,
      result: [],
    };
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 1:
          seen = this.once(seen, f, 'lf_version');
          n.lfVersion = this.lfVersion(tag, end);
          break;
        case 2:
          seen = this.once(seen, f, 'package_name');
          n.packageName = this.packageName(tag, end);
          break;
        case 3:
          seen = this.once(seen, f, 'template_id');
          n.templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 4:
          seen = this.once(seen, f, 'exhaustive');
          n.exhaustive = this.bool(tag, end, 'exhaustive');
          break;
        case 5:
          seen = this.once(seen, f, 'key');
          n.key = this.keyField(tag, end, 'key');
          break;
        case 6:
          n.result.push(this.contractId(tag, end, 'result', n.result.length));
          break;
        default:
          this.unknown(tag);
      }
    }
    this.require(seen, [1, 2, 3, 5], ['lf_version', 'package_name', 'template_id', 'key']);
    return n;
  }

  private require(seen: number, fields: number[], names: string[]): void {
    for (let i = 0; i < fields.length; i++) {
      if (!(seen & (1 << fields[i]!))) this.p.fail('missing_field', 'required field is absent', names[i]);
    }
  }

  private identifierField(tag: number, end: number, name: string): Identifier {
    const stop = this.enter(tag, end, name);
    const start = this.r.pos;
    let id = this.identifiers.get(this.r, start, stop);
    if (id) this.r.pos = stop;
    else {
      id = Object.freeze(this.identifier(stop));
      this.identifiers.set(this.r, start, stop, id);
    }
    this.leave(stop);
    return id;
  }

  private identifier(end: number): Identifier {
    const id: Identifier = { packageId: '', moduleName: '', entityName: '' };
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 1:
          seen = this.once(seen, f, 'package_id');
          id.packageId = this.str(tag, end, 'package_id');
          break;
        case 2:
          seen = this.once(seen, f, 'module_name');
          id.moduleName = this.str(tag, end, 'module_name');
          break;
        case 3:
          seen = this.once(seen, f, 'entity_name');
          id.entityName = this.str(tag, end, 'entity_name');
          break;
        default:
          this.unknown(tag);
      }
    }
    // Daml-LF's identifier rules, which the participant applies when it decodes: they also bound
    // every identifier's encoding to a few kilobytes.
    if (id.packageId === '') this.p.fail('missing_field', 'identifier has no package id', 'package_id');
    const pkg = packageIdProblem(id.packageId);
    if (pkg)
      this.p.fail(
        'invalid_identifier',
        `package id ${JSON.stringify(truncate(id.packageId))} ${pkg}`,
        'package_id',
      );
    const m = dottedNameProblem(id.moduleName);
    if (m)
      this.p.fail(
        'invalid_identifier',
        `module name ${JSON.stringify(truncate(id.moduleName))} ${m}`,
        'module_name',
      );
    const e = dottedNameProblem(id.entityName);
    if (e)
      this.p.fail(
        'invalid_identifier',
        `entity name ${JSON.stringify(truncate(id.entityName))} ${e}`,
        'entity_name',
      );
    return id;
  }

  private keyField(tag: number, end: number, name: string): GlobalKeyWithMaintainers {
    const stop = this.enter(tag, end, name);
    let key: GlobalKey | undefined;
    const maintainers: string[] = [];
    let seen = 0;
    while (this.r.pos < stop) {
      const t = this.r.tag(stop);
      const f = t >>> 3;
      if (f === 1) {
        seen = this.once(seen, f, 'key');
        const s2 = this.enter(t, stop, 'key');
        key = this.globalKey(s2);
        this.leave(s2);
      } else if (f === 2) {
        maintainers.push(this.party(t, stop, 'maintainers', maintainers.length));
      } else this.unknown(t);
    }
    if (!key) this.p.fail('missing_field', 'key with maintainers has no key', 'key');
    this.sortedSet(maintainers, 'maintainers');
    this.leave(stop);
    return { key, maintainers };
  }

  private globalKey(end: number): GlobalKey {
    let templateId: Identifier | undefined;
    let packageName = '';
    let key: Value | undefined;
    let hash: Uint8Array | undefined;
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      switch (f) {
        case 1:
          seen = this.once(seen, f, 'template_id');
          templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 2:
          seen = this.once(seen, f, 'package_name');
          packageName = this.packageName(tag, end);
          break;
        case 3: {
          seen = this.once(seen, f, 'key');
          const stop = this.enter(tag, end, 'key');
          key = this.value(stop, 0);
          this.leave(stop);
          break;
        }
        case 4:
          seen = this.once(seen, f, 'hash');
          this.r.expect(tag, WT_LEN, 'hash');
          this.p.push('hash');
          hash = this.r.bytes(end);
          this.p.pop();
          break;
        default:
          this.unknown(tag);
      }
    }
    if (!templateId) this.p.fail('missing_field', 'global key has no template id', 'template_id');
    if (!key) this.p.fail('missing_field', 'global key has no key value', 'key');
    if (hash?.length !== 32)
      this.p.fail('non_canonical', `global key hash must be 32 bytes (got ${hash?.length ?? 0})`, 'hash');
    return { templateId, packageName, key, hash };
  }

  // ---- values (recursive, bounded by MAX_VALUE_DEPTH; a top-level value is depth 0) ----

  private value(end: number, depth: number): Value {
    if (depth > MAX_VALUE_DEPTH)
      this.p.fail('too_deep', `value nesting exceeds the Daml limit of ${MAX_VALUE_DEPTH}`);
    let v: Value | undefined;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      if (f < 1 || f > 16) this.unknown(tag);
      if (v) this.p.fail('duplicate_field', 'value oneof set more than once', VALUE_NAMES[f]);
      v = this.valueSum(tag, f, end, depth);
    }
    if (!v) this.p.fail('missing_field', 'value has no variant set (sum oneof is empty)');
    return v;
  }

  private valueSum(tag: number, f: number, end: number, depth: number): Value {
    const r = this.r;
    switch (f) {
      case 1: {
        const stop = this.enter(tag, end, 'unit');
        if (r.pos < stop) this.unknown(r.tag(stop));
        this.leave(stop);
        return { kind: 'unit' };
      }
      case 2:
        return { kind: 'bool', value: this.bool(tag, end, 'bool') };
      case 3: {
        r.expect(tag, WT_VARINT, 'int64');
        const u = r.varint64(end, 'int64');
        // ZigZag: (u >>> 1) ^ -(u & 1)
        return { kind: 'int64', value: BigInt.asIntN(64, (u >> 1n) ^ -(u & 1n)) };
      }
      case 4:
        return { kind: 'date', value: this.int32(tag, end, 'date') };
      case 5:
        r.expect(tag, WT_I64, 'timestamp');
        return { kind: 'timestamp', value: r.sfixed64(end) };
      case 6: {
        const s = this.str(tag, end, 'numeric');
        const bad = numericProblem(s);
        if (bad) this.p.fail('non_canonical', `numeric ${JSON.stringify(truncate(s))} ${bad}`, 'numeric');
        return { kind: 'numeric', value: s };
      }
      case 7:
        return { kind: 'party', value: this.party(tag, end, 'party') };
      case 8:
        return { kind: 'text', value: this.str(tag, end, 'text') };
      case 9:
        return { kind: 'contractId', value: this.contractId(tag, end, 'contract_id') };
      case 10: {
        const stop = this.enter(tag, end, 'optional');
        let inner: Value | undefined;
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          if (inner) this.p.fail('duplicate_field', 'singular field occurs more than once', 'value');
          const s2 = this.enter(t, stop, 'value');
          inner = this.value(s2, depth + 1);
          this.leave(s2);
        }
        this.leave(stop);
        return { kind: 'optional', value: inner };
      }
      case 11: {
        const stop = this.enter(tag, end, 'list');
        const elements: Value[] = [];
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          const i = elements.length;
          const s2 = this.enter(t, stop, 'elements', i);
          elements.push(this.value(s2, depth + 1));
          this.leave(s2, i);
        }
        this.leave(stop);
        return { kind: 'list', elements };
      }
      case 12: {
        const stop = this.enter(tag, end, 'text_map');
        const entries: { key: string; value: Value }[] = [];
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          const i = entries.length;
          const s2 = this.enter(t, stop, 'entries', i);
          let key = '';
          let value: Value | undefined;
          let seen = 0;
          while (r.pos < s2) {
            const t2 = r.tag(s2);
            const f2 = t2 >>> 3;
            if (f2 === 1) {
              seen = this.once(seen, 1, 'key');
              key = this.str(t2, s2, 'key');
            } else if (f2 === 2) {
              seen = this.once(seen, 2, 'value');
              const s3 = this.enter(t2, s2, 'value');
              value = this.value(s3, depth + 1);
              this.leave(s3);
            } else this.unknown(t2);
          }
          if (!value) this.p.fail('missing_field', 'text-map entry has no value', 'value');
          if (i > 0) {
            const c = compareUtf8(entries[i - 1]!.key, key);
            if (c === 0)
              this.p.fail('duplicate', `text-map key ${JSON.stringify(truncate(key))} appears twice`, 'key');
            if (c > 0) this.p.fail('unsorted', 'text-map keys are not in ascending UTF-8 order', 'key');
          }
          entries.push({ key, value });
          this.leave(s2, i);
        }
        this.leave(stop);
        return { kind: 'textMap', entries };
      }
      case 13: {
        const stop = this.enter(tag, end, 'gen_map');
        const entries: { key: Value; value: Value }[] = [];
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t >>> 3 !== 1) this.unknown(t);
          const i = entries.length;
          const s2 = this.enter(t, stop, 'entries', i);
          let key: Value | undefined;
          let value: Value | undefined;
          let seen = 0;
          while (r.pos < s2) {
            const t2 = r.tag(s2);
            const f2 = t2 >>> 3;
            if (f2 !== 1 && f2 !== 2) this.unknown(t2);
            const name = f2 === 1 ? 'key' : 'value';
            seen = this.once(seen, f2, name);
            const s3 = this.enter(t2, s2, name);
            const v = this.value(s3, depth + 1);
            this.leave(s3);
            if (f2 === 1) key = v;
            else value = v;
          }
          if (!key) this.p.fail('missing_field', 'gen-map entry has no key', 'key');
          if (!value) this.p.fail('missing_field', 'gen-map entry has no value', 'value');
          entries.push({ key, value });
          this.leave(s2, i);
        }
        this.leave(stop);
        return { kind: 'genMap', entries };
      }
      case 14: {
        const stop = this.enter(tag, end, 'record');
        let recordId: Identifier | undefined;
        const fields: { label: string; value: Value }[] = [];
        let seen = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          const f2 = t >>> 3;
          if (f2 === 1) {
            seen = this.once(seen, 1, 'record_id');
            recordId = this.identifierField(t, stop, 'record_id');
          } else if (f2 === 2) {
            const i = fields.length;
            const s2 = this.enter(t, stop, 'fields', i);
            fields.push(this.recordField(s2, depth));
            this.leave(s2, i);
          } else this.unknown(t);
        }
        this.uniqueLabels(fields);
        this.leave(stop);
        return { kind: 'record', recordId, fields };
      }
      case 15: {
        const stop = this.enter(tag, end, 'variant');
        let variantId: Identifier | undefined;
        let ctor = '';
        let value: Value | undefined;
        let seen = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          const f2 = t >>> 3;
          if (f2 === 1) {
            seen = this.once(seen, 1, 'variant_id');
            variantId = this.identifierField(t, stop, 'variant_id');
          } else if (f2 === 2) {
            seen = this.once(seen, 2, 'constructor');
            ctor = this.str(t, stop, 'constructor');
          } else if (f2 === 3) {
            seen = this.once(seen, 3, 'value');
            const s2 = this.enter(t, stop, 'value');
            value = this.value(s2, depth + 1);
            this.leave(s2);
          } else this.unknown(t);
        }
        if (ctor === '') this.p.fail('missing_field', 'variant has no constructor', 'constructor');
        if (!value) this.p.fail('missing_field', 'variant has no value', 'value');
        this.leave(stop);
        return { kind: 'variant', variantId, constructor: ctor, value };
      }
      default: {
        const stop = this.enter(tag, end, 'enum');
        let enumId: Identifier | undefined;
        let ctor = '';
        let seen = 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          const f2 = t >>> 3;
          if (f2 === 1) {
            seen = this.once(seen, 1, 'enum_id');
            enumId = this.identifierField(t, stop, 'enum_id');
          } else if (f2 === 2) {
            seen = this.once(seen, 2, 'constructor');
            ctor = this.str(t, stop, 'constructor');
          } else this.unknown(t);
        }
        if (ctor === '') this.p.fail('missing_field', 'enum has no constructor', 'constructor');
        this.leave(stop);
        return { kind: 'enum', enumId, constructor: ctor };
      }
    }
  }

  /**
   * Daml records never repeat a field. Canton would hash a repeated label, but every reader of the
   * model finds fields by label (the inspect JSON keeps one value per label, the recogniser the
   * first): a repeat would hide a hashed field from the person signing (docs/hashing.md).
   */
  private uniqueLabels(fields: { label: string }[]): void {
    const n = fields.length;
    if (n < 2) return;
    if (n <= 16) {
      for (let i = 1; i < n; i++)
        for (let j = 0; j < i; j++)
          if (fields[i]!.label === fields[j]!.label)
            this.p.fail(
              'duplicate',
              `record field label ${JSON.stringify(truncate(fields[i]!.label))} repeats`,
              'fields',
              i,
            );
      return;
    }
    const seen = new Set<string>();
    fields.forEach((f, i) => {
      if (seen.has(f.label))
        this.p.fail(
          'duplicate',
          `record field label ${JSON.stringify(truncate(f.label))} repeats`,
          'fields',
          i,
        );
      seen.add(f.label);
    });
  }

  private recordField(end: number, depth: number): { label: string; value: Value } {
    let label = '';
    let value: Value | undefined;
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const f = tag >>> 3;
      if (f === 1) {
        seen = this.once(seen, 1, 'label');
        label = this.str(tag, end, 'label');
      } else if (f === 2) {
        seen = this.once(seen, 2, 'value');
        const stop = this.enter(tag, end, 'value');
        value = this.value(stop, depth + 1);
        this.leave(stop);
      } else this.unknown(tag);
    }
    if (label === '')
      this.p.fail(
        'missing_field',
        'record field has an empty label (the participant and the reference hashers disagree on how to hash it)',
        'label',
      );
    if (!value) this.p.fail('missing_field', 'record field has no value', 'value');
    return { label, value };
  }

  // ---- metadata ----------------------------------------------------------

  private metadata(end: number): Metadata {
    const m: Metadata = {
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

  private inputContract(end: number): InputContract {
    let contract: CreateNode | undefined;
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

const VALUE_NAMES = [
  '',
  'unit',
  'bool',
  'int64',
  'date',
  'timestamp',
  'numeric',
  'party',
  'text',
  'contract_id',
  'optional',
  'list',
  'text_map',
  'gen_map',
  'record',
  'variant',
  'enum',
];

function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

// ---- tree structure ---------------------------------------------------------

function childrenOf(n: NodeShape): readonly string[] | undefined {
  return n.type === 'exercise' || n.type === 'rollback' ? n.children : undefined;
}

/** What the structure checks read of a transaction. */
interface StructureInput<S extends NodeShape> {
  readonly roots: readonly string[];
  readonly nodes: readonly { readonly nodeId: string; readonly node: S }[];
  readonly nodeSeeds: readonly NodeSeed[];
}

/**
 * Checks that nodes form a forest reachable from `roots` with every node used
 * once, and that seeds are exactly the ones the hash needs. Iterative: a
 * 10,000-deep chain costs no stack.
 */
function checkStructure<S extends NodeShape>(
  tx: StructureInput<S>,
  options: DecodeOptions,
): { nodeById: Map<string, S>; seedById: Map<string, Uint8Array> } {
  const lenient = options.unsafeAllowNonTreeForTests === true;
  const nodeById = new Map<string, S>();
  const indexById = new Map<string, number>();
  tx.nodes.forEach((n, i) => {
    const bad = nodeIdProblem(n.nodeId);
    if (bad)
      throw new TransactionError(
        'node_id',
        `transaction.nodes[${i}].node_id`,
        `${JSON.stringify(n.nodeId)} ${bad}`,
      );
    if (nodeById.has(n.nodeId))
      throw new TransactionError(
        'node_id',
        `transaction.nodes[${i}].node_id`,
        `node id ${n.nodeId} is used twice`,
      );
    nodeById.set(n.nodeId, n.node);
    indexById.set(n.nodeId, i);
  });
  if (tx.roots.length === 0)
    throw new TransactionError('missing_field', 'transaction.roots', 'transaction has no roots');

  // Reference counting: each node may be named once, by the roots or by one parent.
  const parentOf = new Map<string, string>(); // child → parent id ('' for roots)
  const reference = (id: string, parent: string, path: string) => {
    if (!nodeById.has(id))
      throw new TransactionError('missing_node', path, `node ${JSON.stringify(id)} does not exist`);
    if (parentOf.has(id) && !lenient)
      throw new TransactionError('shared_node', path, `node ${id} is referenced more than once`);
    if (!parentOf.has(id)) parentOf.set(id, parent);
  };
  tx.roots.forEach((id, i) => {
    reference(id, '', `transaction.roots[${i}]`);
  });
  tx.nodes.forEach((n, i) => {
    const kids = childrenOf(n.node);
    if (!kids) return;
    kids.forEach((id, j) => {
      reference(id, n.nodeId, `transaction.nodes[${i}].v1.${n.node.type}.children[${j}]`);
    });
  });

  // Reachability from the roots (explicit stack; `seen` also stops cycles in lenient mode).
  const reached = new Set<string>();
  const stack = [...tx.roots].reverse();
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (reached.has(id)) continue;
    reached.add(id);
    const kids = childrenOf(nodeById.get(id)!);
    if (kids) for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]!);
  }
  if (lenient) {
    // Only cycles matter here; they are refused even in test mode.
    const state = new Map<string, 1 | 2>();
    for (const start of nodeById.keys()) {
      if (state.has(start)) continue;
      const work: [string, number][] = [[start, 0]];
      state.set(start, 1);
      while (work.length > 0) {
        const top = work[work.length - 1]!;
        const kids = childrenOf(nodeById.get(top[0])!) ?? [];
        if (top[1] >= kids.length) {
          state.set(top[0], 2);
          work.pop();
          continue;
        }
        const next = kids[top[1]++]!;
        const st = state.get(next);
        if (st === 1)
          throw new TransactionError(
            'cycle',
            `transaction.nodes[${indexById.get(next)}]`,
            `node ${next} is its own ancestor`,
          );
        if (st === undefined) {
          state.set(next, 1);
          work.push([next, 0]);
        }
      }
    }
  } else if (reached.size !== nodeById.size) {
    for (const [id, i] of indexById) {
      if (reached.has(id)) continue;
      // Walk up the unique parents: coming back to `id` means a cycle.
      let cur: string | undefined = parentOf.get(id);
      let steps = 0;
      while (cur !== undefined && cur !== '' && cur !== id && steps <= nodeById.size) {
        cur = parentOf.get(cur);
        steps++;
      }
      if (cur === id)
        throw new TransactionError(
          'cycle',
          `transaction.nodes[${i}]`,
          `node ${id} is its own ancestor (cycle)`,
        );
      throw new TransactionError(
        'orphan_node',
        `transaction.nodes[${i}]`,
        `node ${id} is not reachable from the roots: it would be shown nowhere and not covered by the hash`,
      );
    }
  }

  // Seeds: unique, naming existing nodes; creates and exercises in the tree need one; others' are dropped.
  const seedById = new Map<string, Uint8Array>();
  const seeded = new Set<string>();
  tx.nodeSeeds.forEach((s, i) => {
    const id = String(s.nodeId);
    const path = `transaction.node_seeds[${i}].node_id`;
    if (seeded.has(id)) throw new TransactionError('seed', path, `node ${id} has two seeds`);
    seeded.add(id);
    const node = nodeById.get(id);
    if (!node) throw new TransactionError('seed', path, `seed names node ${id}, which does not exist`);
    // A seed for a node kind that is never seeded (fetch, rollback, query-by-key) is not hashed and
    // not used: it is accepted and dropped, as Canton's hasher ignores it (docs/hashing.md).
    if (node.type === 'create' || node.type === 'exercise' || lenient) seedById.set(id, s.seed);
  });
  for (const [id, node] of nodeById) {
    if ((node.type === 'create' || node.type === 'exercise') && !seedById.has(id) && reached.has(id))
      throw new TransactionError(
        'seed',
        `transaction.nodes[${indexById.get(id)}]`,
        `${node.type} node ${id} has no seed (the participant requires one)`,
      );
  }
  return { nodeById, seedById };
}

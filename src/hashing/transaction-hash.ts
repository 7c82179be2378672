/**
 * The prepared-transaction hash, schemes V2 and V3 (hashing-spec §3–§9).
 *
 *   node_hash     = SHA256(node encoding)                       (no purpose)
 *   tx_hash       = SHA256(purpose ‖ string(version) ‖ int32(#roots) ‖ root hashes)
 *   metadata_hash = SHA256(purpose ‖ metadata encoding)
 *   final         = SHA256(purpose ‖ scheme byte ‖ tx_hash ‖ metadata_hash)   32 raw bytes
 *
 * Everything that differs between V2 and V3 is in `SCHEMES` and in the
 * branches that read it; nothing else changes between the two.
 * Node hashes are computed bottom-up with an explicit stack (no recursion over
 * nodes); value encoding recurses, bounded by the decoder's depth limit.
 * From bytes, Daml values are encoded straight from the wire (`WireHasher`,
 * a consumer of the decoder's value walker), and so are a node's own text
 * fields (`WireText`, over the decoder's `NodeFields`); from a decoded
 * transaction, from the model (`Hasher.value`, `ModelNode`). The node encoding
 * itself (`Hasher.head`) is written once, over either. The property tests hold
 * the two to one hash.
 */
import type { Hash } from 'node:crypto';
import {
  type DecodeOptions,
  decodePreparedTransaction,
  type NodeFields,
  type NodeShape,
  type PartyField,
  visitPreparedTransaction,
} from './decode.js';
import { type TopValue, type ValueConsumer, WireValue, type WireValues } from './decode-values.js';
import { InvariantError, TransactionError } from './errors.js';
import { base64ToScratch, inputBytes, type TransactionInput } from './input.js';
import { keepAlive } from './keep-alive.js';
import type {
  DecodedTransaction,
  GlobalKeyWithMaintainers,
  Identifier,
  Metadata,
  NodeBody,
  Value,
} from './model.js';
import { Sha256Sink } from './sink.js';
import type { WireReader } from './wire.js';

export type HashingScheme = 'v2' | 'v3';

/** Identifier encodings are the same in V2 and V3; decoded identifiers are interned and immutable. */
const identifierEncodings = new WeakMap<Identifier, Uint8Array>();
/** Encoded form (length ‖ UTF-8) of party ids, identical in V2 and V3. Bounded. */
const partyEncodings = new Map<string, Uint8Array>();

/** HashPurpose.PreparedSubmission = 48, written as a 4-byte int before every non-node hash. */
export const PREPARED_SUBMISSION_PURPOSE = 48;

interface SchemeRules {
  /** The byte that names the scheme inside the final hash. */
  readonly versionByte: number;
  /** V2 starts every node and the metadata with an encoding-version byte `01`; V3 dropped it. */
  readonly encodingVersionByte: boolean;
  /** V3 covers contract keys, by-key flags and QueryByKey nodes. */
  readonly keys: boolean;
  /** V3 appends `optional(max_record_time)` to the metadata; V2 leaves it unsigned. */
  readonly maxRecordTime: boolean;
  /** Daml-LF versions whose nodes the scheme can hash. */
  readonly lfVersions: ReadonlySet<string>;
}

export const SCHEMES: Readonly<Record<HashingScheme, SchemeRules>> = {
  v2: {
    versionByte: 2,
    encodingVersionByte: true,
    keys: false,
    maxRecordTime: false,
    lfVersions: new Set(['2.1']),
  },
  v3: {
    versionByte: 3,
    encodingVersionByte: false,
    keys: true,
    maxRecordTime: true,
    lfVersions: new Set(['2.1', '2']),
  },
};

export interface HashOptions extends DecodeOptions {
  /** Default `v2`, as the participant's default. */
  scheme?: HashingScheme;
  /**
   * Refuse unless the hash covers `max_record_time` (V3 only). Under V2 the
   * executing participant may change or drop the deadline after signing.
   */
  requireMaxRecordTimeSigned?: boolean;
}

export interface HashParts {
  scheme: HashingScheme;
  transactionHash: Uint8Array;
  metadataHash: Uint8Array;
  hash: Uint8Array;
  /** Hash of every node reachable from the roots, by node id. */
  nodeHashes: ReadonlyMap<string, Uint8Array>;
}

/** Decodes (strictly) and hashes; returns the 32-byte hash the party signs. */
export function hashPreparedTransaction(
  input: TransactionInput | DecodedTransaction,
  options: HashOptions = {},
): Uint8Array {
  return hashParts(input, options).hash;
}

export function hashParts(
  input: TransactionInput | DecodedTransaction,
  options: HashOptions = {},
): HashParts {
  const scheme = options.scheme ?? 'v2';
  const rules = SCHEMES[scheme];
  if (!rules)
    throw new TransactionError('unsupported_version', '', `unknown hashing scheme ${String(scheme)}`);
  if (options.requireMaxRecordTimeSigned && !rules.maxRecordTime)
    throw new TransactionError(
      'not_covered',
      'metadata.max_record_time',
      `hashing scheme ${scheme.toUpperCase()} does not cover max_record_time; use V3 to have the deadline signed`,
    );
  const hasher = new Hasher(rules, scheme);
  keepAlive('hasher', hasher);
  if (isDecoded(input)) return hasher.run(input);
  // Base64 text is decoded into a reused buffer: nothing returned from here refers to the bytes.
  const bytes =
    typeof input === 'string' ? base64ToScratch(input, 'prepared transaction') : inputBytes(input);
  if (options.unsafeAllowNonTreeForTests) return hasher.run(decodePreparedTransaction(bytes, options));
  try {
    return hasher.stream(bytes);
  } catch (e) {
    // Refused. The streaming pass checks in another order, so which of several faults it met
    // first can differ: the refusal reported is always the one decoding then hashing gives.
    // A value whose fields come out of field-number order cannot be encoded in wire order: the
    // same path takes it (and hashes it, if it is otherwise valid).
    if (!(e instanceof TransactionError) && !(e instanceof NotStreamable)) throw e;
    return hasher.run(decodePreparedTransaction(bytes, options));
  }
}

/** Thrown by the wire encoder when a value's fields are not in field-number order (valid protobuf, rare). */
class NotStreamable extends Error {}

/**
 * The streaming pass alone, without falling back to decode-then-hash when it
 * refuses (so its refusal may name another of the input's faults). For the
 * test that holds it to `hashParts`; not part of the library's interface.
 */
export function hashPartsStreaming(bytes: Uint8Array, scheme: HashingScheme): HashParts {
  const hasher = new Hasher(SCHEMES[scheme], scheme);
  try {
    return hasher.stream(bytes);
  } catch (e) {
    if (!(e instanceof NotStreamable)) throw e;
    return hasher.run(decodePreparedTransaction(bytes));
  }
}

const PROTO_NODE_NAMES: Record<NodeBody['type'], string> = {
  create: 'create',
  exercise: 'exercise',
  fetch: 'fetch',
  rollback: 'rollback',
  queryByKey: 'query_by_key',
};

/** Protobuf path of a node, e.g. `transaction.nodes[3].v1.exercise` (computed only when refusing). */
function nodePath(tx: DecodedTransaction, id: string): string {
  const i = tx.transaction.nodes.findIndex((n) => n.nodeId === id);
  const node = tx.nodeById.get(id);
  return node ? `transaction.nodes[${i}].v1.${PROTO_NODE_NAMES[node.type]}` : `transaction.nodes[?${id}]`;
}

function childrenOf(n: NodeShape): readonly string[] | undefined {
  return n.type === 'exercise' || n.type === 'rollback' ? n.children : undefined;
}

/** What the streaming hasher keeps of a node: its hash, or its children and its encoding so far (bytes or SHA-256 state). */
interface Shape extends NodeShape {
  readonly hash: Uint8Array | undefined;
  readonly open: Hash | Uint8Array | undefined;
}

/** The fields of a node the encoding reads as they are: a `NodeFields` as read, or a `ModelNode`. */
interface NodeLike {
  readonly type: NodeBody['type'];
  readonly lfVersion: string;
  readonly templateId: Identifier;
  readonly interfaceId: Identifier | undefined;
  /** A create's argument, an exercise's chosen value. */
  readonly argument: TopValue;
  readonly exerciseResult: TopValue | undefined;
  readonly consuming: boolean;
  readonly byKey: boolean;
  readonly exhaustive: boolean;
  readonly key: GlobalKeyWithMaintainers | undefined;
  readonly children?: readonly string[];
}

type PartyList = 'signatories' | 'stakeholders' | 'actingParties' | 'choiceObservers';

/** Writes the text fields of a node: contract ids as the bytes their hex denotes, text length-prefixed. */
interface NodeText {
  contractId(s: Sha256Sink): void;
  packageName(s: Sha256Sink): void;
  choiceId(s: Sha256Sink): void;
  /** Party lists: int32(#parties) ‖ each party. */
  signatories(s: Sha256Sink): void;
  stakeholders(s: Sha256Sink): void;
  actingParties(s: Sha256Sink): void;
  choiceObservers(s: Sha256Sink): void;
  /** A query-by-key's result: int32(#ids) ‖ each contract id. */
  result(s: Sha256Sink): void;
}

const NONE: readonly string[] = [];
const EMPTY_IDENTIFIER: Identifier = Object.freeze({ packageId: '', moduleName: '', entityName: '' });
const UNIT: Value = Object.freeze({ kind: 'unit' });

/** A node of the model seen as `NodeLike` and `NodeText` (one reused per run: `set` it to each node). */
class ModelNode implements NodeLike, NodeText {
  type: NodeBody['type'] = 'create';
  lfVersion = '';
  templateId: Identifier = EMPTY_IDENTIFIER;
  interfaceId: Identifier | undefined = undefined;
  argument: TopValue = UNIT;
  exerciseResult: TopValue | undefined = undefined;
  consuming = false;
  byKey = false;
  exhaustive = false;
  key: GlobalKeyWithMaintainers | undefined = undefined;
  children: readonly string[] | undefined = undefined;
  private cid = '';
  private pkg = '';
  private choice = '';
  private lists: Record<PartyList, readonly string[]> = {
    signatories: NONE,
    stakeholders: NONE,
    actingParties: NONE,
    choiceObservers: NONE,
  };
  private resultIds: readonly string[] = NONE;

  /** Every field is set from `n` (or to its kind's absent value): nothing of the previous node is left. */
  set(n: NodeBody<TopValue>): void {
    const rollback = n.type === 'rollback';
    const action = n.type === 'exercise' || n.type === 'fetch';
    const withParties = n.type === 'create' || action;
    this.type = n.type;
    this.children = childrenOf(n);
    this.lfVersion = rollback ? '' : n.lfVersion;
    this.pkg = rollback ? '' : n.packageName;
    this.templateId = rollback ? EMPTY_IDENTIFIER : n.templateId;
    this.key = rollback ? undefined : n.key;
    this.interfaceId = action ? n.interfaceId : undefined;
    this.byKey = action ? n.byKey : false;
    this.exhaustive = n.type === 'queryByKey' && n.exhaustive;
    this.resultIds = n.type === 'queryByKey' ? n.result : NONE;
    this.cid = withParties ? n.contractId : '';
    this.lists = {
      signatories: withParties ? n.signatories : NONE,
      stakeholders: withParties ? n.stakeholders : NONE,
      actingParties: action ? n.actingParties : NONE,
      choiceObservers: n.type === 'exercise' ? n.choiceObservers : NONE,
    };
    this.argument = n.type === 'create' ? n.argument : n.type === 'exercise' ? n.chosenValue : UNIT;
    this.exerciseResult = n.type === 'exercise' ? n.exerciseResult : undefined;
    this.consuming = n.type === 'exercise' && n.consuming;
    this.choice = n.type === 'exercise' ? n.choiceId : '';
  }

  contractId(s: Sha256Sink): void {
    s.hex(this.cid);
  }
  packageName(s: Sha256Sink): void {
    s.string(this.pkg);
  }
  choiceId(s: Sha256Sink): void {
    s.string(this.choice);
  }
  signatories(s: Sha256Sink): void {
    modelParties(s, this.lists.signatories);
  }
  stakeholders(s: Sha256Sink): void {
    modelParties(s, this.lists.stakeholders);
  }
  actingParties(s: Sha256Sink): void {
    modelParties(s, this.lists.actingParties);
  }
  choiceObservers(s: Sha256Sink): void {
    modelParties(s, this.lists.choiceObservers);
  }
  result(s: Sha256Sink): void {
    s.i32(this.resultIds.length);
    for (const c of this.resultIds) s.hex(c);
  }
}

function modelParties(s: Sha256Sink, list: readonly string[]): void {
  s.i32(list.length);
  for (const x of list) encodeParty(s, x);
}

/** A party list as read, copied from the wire bytes. */
function wireParties(s: Sha256Sink, buf: Uint8Array, p: PartyField): void {
  const n = p.length;
  const spans = p.spans;
  s.i32(n);
  for (let i = 0; i < 2 * n; i += 2) s.utf8(buf, spans[i]!, spans[i + 1]!);
}

/** The text fields of a node as read while streaming (`f`), written straight from the wire bytes. */
class WireText implements NodeText {
  f: NodeFields | undefined;
  contractId(s: Sha256Sink): void {
    const f = this.f!;
    s.hexBytes(f.buf, f.contractIdStart, f.contractIdEnd);
  }
  packageName(s: Sha256Sink): void {
    const f = this.f!;
    s.utf8(f.buf, f.packageNameStart, f.packageNameEnd);
  }
  choiceId(s: Sha256Sink): void {
    const f = this.f!;
    s.utf8(f.buf, f.choiceIdStart, f.choiceIdEnd);
  }
  signatories(s: Sha256Sink): void {
    wireParties(s, this.f!.buf, this.f!.signatories);
  }
  stakeholders(s: Sha256Sink): void {
    wireParties(s, this.f!.buf, this.f!.stakeholders);
  }
  actingParties(s: Sha256Sink): void {
    wireParties(s, this.f!.buf, this.f!.actingParties);
  }
  choiceObservers(s: Sha256Sink): void {
    wireParties(s, this.f!.buf, this.f!.choiceObservers);
  }
  result(s: Sha256Sink): void {
    const f = this.f!;
    const r = f.result;
    s.i32(r.length >>> 1);
    for (let i = 0; i < r.length; i += 2) s.hexBytes(f.buf, r[i]!, r[i + 1]!);
  }
}

function isDecoded(x: unknown): x is DecodedTransaction {
  return typeof x === 'object' && x !== null && !(x instanceof Uint8Array) && 'nodeById' in x;
}

/**
 * One sink for every hash: hashing is synchronous and a sink is reset by
 * `begin()`, so sharing it saves a 64 KiB buffer per transaction.
 */
const SINK = new Sha256Sink();

class Hasher {
  private readonly s = SINK;
  /** Writes the text fields of the node being hashed while streaming, from the wire bytes. */
  private readonly wireText = new WireText();
  /** While streaming: the decoder's walker of the values it left on the wire, and the encoder it drives. */
  private wire: WireValues | undefined;
  private readonly wireHasher = new WireHasher(SINK);
  constructor(
    private readonly rules: SchemeRules,
    private readonly scheme: HashingScheme,
  ) {}

  run(tx: DecodedTransaction): HashParts {
    this.checkVersion(tx.transaction.version);
    const m = new ModelNode();
    const nodeHashes = this.postOrder(tx.transaction.roots, tx.nodeById, (id, n, done) => {
      this.s.begin();
      m.set(n);
      this.head(m, m, tx.seedById.get(id), () => nodePath(tx, id));
      const kids = childrenOf(n);
      if (kids) this.children(kids, done);
      return this.s.digest();
    });
    return this.finish(tx.transaction.version, tx.transaction.roots, nodeHashes, tx.metadata);
  }

  /**
   * The same hash without keeping the decoded transaction: each node is
   * decoded, checked and encoded as it comes (`visitPreparedTransaction`), and
   * only its hash is kept — or, for an exercise or a rollback, the SHA-256
   * state after everything but its children, finished once they are hashed.
   * Every check is the decoder's and `head`'s, as in `run`.
   */
  stream(bytes: Uint8Array): HashParts {
    try {
      return this.streamParts(bytes);
    } finally {
      // The hasher outlives the call (keep-alive.ts): nothing it keeps may hold the input.
      this.wire = undefined;
      this.wireText.f = undefined;
    }
  }

  private streamParts(bytes: Uint8Array): HashParts {
    const s = this.s;
    const seeds = new Map<string, Uint8Array>();
    const decoded = visitPreparedTransaction<Shape>(bytes, {
      begin: (values) => {
        this.wire = values;
      },
      seeds: (list) => {
        for (const x of list) seeds.set(String(x.nodeId), x.seed);
      },
      node: () => {
        throw new InvariantError('the streaming hasher reads node fields, not nodes');
      },
      fields: (f, i) => {
        s.begin();
        this.wireText.f = f;
        this.head(f, this.wireText, seeds.get(f.nodeId), () => `transaction.nodes[${i}]`);
        const kids = childrenOf(f);
        if (kids) return { type: f.type, children: kids, hash: undefined, open: s.detach() };
        return { type: f.type, children: undefined, hash: s.digest(), open: undefined };
      },
    });
    this.checkVersion(decoded.version);
    const nodeHashes = this.postOrder(decoded.roots, decoded.nodeById, (_id, n, done) => {
      if (n.hash) return n.hash;
      s.resume(n.open!);
      this.children(n.children!, done);
      return s.digest();
    });
    const parts = this.finish(decoded.version, decoded.roots, nodeHashes, decoded.metadata);
    const wire = this.wire!;
    // Every value left on the wire was checked as it was hashed; one left unhashed would be unchecked.
    // Unreachable: `head` walks every top-level value of every node and input contract.
    if (wire.walked !== wire.deferred)
      throw new InvariantError(
        `${wire.deferred - wire.walked} values of the transaction were left on the wire unchecked`,
      );
    return parts;
  }

  private checkVersion(version: string): void {
    if (!this.rules.lfVersions.has(version)) throw this.refuseVersion('transaction.version', version);
  }

  private finish(
    version: string,
    roots: readonly string[],
    nodeHashes: Map<string, Uint8Array>,
    metadata: Metadata<TopValue>,
  ): HashParts {
    const { rules, s } = this;
    s.begin();
    s.i32(PREPARED_SUBMISSION_PURPOSE);
    s.string(version);
    s.i32(roots.length);
    for (const r of roots) s.raw(nodeHashes.get(r)!);
    const transactionHash = s.digest();

    const metadataHash = this.metadata(metadata);

    s.begin();
    s.i32(PREPARED_SUBMISSION_PURPOSE);
    s.u8(rules.versionByte);
    s.raw(transactionHash);
    s.raw(metadataHash);
    return { scheme: this.scheme, transactionHash, metadataHash, hash: s.digest(), nodeHashes };
  }

  private refuseVersion(path: string, v: string): TransactionError {
    const hint = v === '2' && !this.rules.keys ? ' (contract-key transactions need scheme V3)' : '';
    return new TransactionError(
      'unsupported_version',
      path,
      `Daml-LF version ${JSON.stringify(v)} cannot be hashed with scheme ${this.scheme.toUpperCase()}${hint}`,
    );
  }

  /** Post-order over the nodes reachable from the roots; each node hashed once, children first. */
  private postOrder<N extends NodeShape>(
    roots: readonly string[],
    nodeById: ReadonlyMap<string, N>,
    hash: (id: string, node: N, done: Map<string, Uint8Array>) => Uint8Array,
  ): Map<string, Uint8Array> {
    const done = new Map<string, Uint8Array>();
    const open = new Set<string>();
    const stack: string[] = [];
    for (let r = roots.length - 1; r >= 0; r--) stack.push(roots[r]!);
    while (stack.length > 0) {
      const id = stack[stack.length - 1]!;
      if (done.has(id)) {
        stack.pop();
        continue;
      }
      const node = nodeById.get(id);
      if (!node) throw new TransactionError('missing_node', 'transaction', `node ${id} does not exist`);
      const kids = childrenOf(node);
      if (kids && !open.has(id)) {
        open.add(id);
        for (let k = kids.length - 1; k >= 0; k--) {
          const kid = kids[k]!;
          if (open.has(kid))
            throw new TransactionError('cycle', 'transaction', `node ${kid} is its own ancestor`);
          if (!done.has(kid)) stack.push(kid);
        }
        continue;
      }
      stack.pop();
      open.delete(id);
      done.set(id, hash(id, node, done));
    }
    return done;
  }

  /**
   * A node's encoding, after `begin()`, up to its children: all of it for a
   * create, fetch or query-by-key, all but `int32(#children) ‖ child hashes`
   * for an exercise or a rollback. `n` holds its fields, `t` writes its text
   * fields (from the model's strings or straight from the wire bytes); `path`
   * names the node when refusing.
   */
  private head(n: NodeLike, t: NodeText, seed: Uint8Array | undefined, path: () => string): void {
    const { s, rules } = this;
    if (n.type !== 'rollback' && !rules.lfVersions.has(n.lfVersion))
      throw this.refuseVersion(`${path()}.lf_version`, n.lfVersion);
    if (!rules.keys) this.refuseKeys(n, path);
    if (rules.encodingVersionByte) s.u8(1);
    switch (n.type) {
      case 'create':
        this.create(n, t, seed);
        break;
      case 'exercise': {
        if (!seed) throw new TransactionError('seed', path(), 'exercise node has no seed');
        s.string(n.lfVersion);
        s.u8(1);
        s.raw(seed);
        t.contractId(s);
        t.packageName(s);
        this.identifier(n.templateId);
        t.signatories(s);
        t.stakeholders(s);
        t.actingParties(s);
        this.optIdentifier(n.interfaceId);
        t.choiceId(s);
        this.topValue(n.argument);
        s.bool(n.consuming);
        if (n.exerciseResult === undefined) s.u8(0);
        else {
          s.u8(1);
          this.topValue(n.exerciseResult);
        }
        t.choiceObservers(s);
        if (rules.keys) {
          s.bool(n.byKey);
          this.optKey(n.key);
        }
        break;
      }
      case 'fetch':
        s.string(n.lfVersion);
        s.u8(2);
        t.contractId(s);
        t.packageName(s);
        this.identifier(n.templateId);
        t.signatories(s);
        t.stakeholders(s);
        this.optIdentifier(n.interfaceId);
        t.actingParties(s);
        if (rules.keys) {
          s.bool(n.byKey);
          this.optKey(n.key);
        }
        break;
      case 'rollback':
        s.u8(3);
        break;
      case 'queryByKey':
        s.string(n.lfVersion);
        s.u8(4);
        t.packageName(s);
        this.identifier(n.templateId);
        s.bool(n.exhaustive);
        this.key(n.key!);
        t.result(s);
        break;
    }
  }

  /** V2 has no encoding for contract keys: refusing is the only way not to sign what is not hashed. */
  private refuseKeys(n: NodeLike, path: () => string): void {
    const why = 'is not covered by hashing scheme V2 (use V3)';
    if (n.type === 'queryByKey')
      throw new TransactionError('unsupported', path(), `a QueryByKey node ${why}`);
    if (n.type === 'rollback') return;
    if (n.key !== undefined)
      throw new TransactionError('unsupported', `${path()}.key`, `a contract key ${why}`);
    if (n.type !== 'create' && n.byKey)
      throw new TransactionError('unsupported', `${path()}.by_key`, `an action by key ${why}`);
  }

  /** Create encoding after the optional V2 version byte; `seed` absent for input contracts. */
  private create(n: NodeLike, t: NodeText, seed: Uint8Array | undefined): void {
    const s = this.s;
    s.string(n.lfVersion);
    s.u8(0);
    if (seed === undefined) s.u8(0);
    else {
      s.u8(1);
      s.raw(seed);
    }
    t.contractId(s);
    t.packageName(s);
    this.identifier(n.templateId);
    this.topValue(n.argument);
    t.signatories(s);
    t.stakeholders(s);
    if (this.rules.keys) this.optKey(n.key);
  }

  private children(ids: readonly string[], done: Map<string, Uint8Array>): void {
    this.s.i32(ids.length);
    for (const c of ids) this.s.raw(done.get(c)!);
  }

  private metadata(m: Metadata<TopValue>): Uint8Array {
    const { s, rules } = this;
    // Input-contract create hashes first: the sink hashes one thing at a time.
    const mn = new ModelNode();
    const inputs = m.inputContracts.map((ic, i) => {
      const path = `metadata.input_contracts[${i}].v1`;
      mn.set(ic.contract);
      if (!rules.lfVersions.has(mn.lfVersion)) throw this.refuseVersion(`${path}.lf_version`, mn.lfVersion);
      if (!rules.keys) this.refuseKeys(mn, () => path);
      s.begin();
      if (rules.encodingVersionByte) s.u8(1);
      this.create(mn, mn, undefined);
      return s.digest();
    });
    s.begin();
    s.i32(PREPARED_SUBMISSION_PURPOSE);
    if (rules.encodingVersionByte) s.u8(1);
    this.parties(m.submitterInfo.actAs);
    s.string(m.submitterInfo.commandId);
    s.string(m.transactionUuid);
    s.i32(m.mediatorGroup);
    s.string(m.synchronizerId);
    this.optI64(m.minLedgerEffectiveTime);
    this.optI64(m.maxLedgerEffectiveTime);
    s.i64(m.preparationTime);
    s.i32(inputs.length);
    m.inputContracts.forEach((ic, i) => {
      s.i64(ic.createdAt);
      s.raw(inputs[i]!);
    });
    if (rules.maxRecordTime) this.optI64(m.maxRecordTime);
    return s.digest();
  }

  private optI64(v: bigint | undefined): void {
    if (v === undefined) this.s.u8(0);
    else {
      this.s.u8(1);
      this.s.i64(v);
    }
  }

  /** A party list: length ‖ each encoded, through the party-encoding cache. */
  private parties(list: string[]): void {
    this.s.i32(list.length);
    for (const x of list) encodeParty(this.s, x);
  }

  private identifier(id: Identifier): void {
    encodeIdentifier(this.s, id);
  }

  /** A node's top-level value: still on the wire when streaming (checked as it is encoded), or decoded. */
  private topValue(v: TopValue): void {
    if (v instanceof WireValue) this.wire!.walkDeferred(v, this.wireHasher);
    else this.value(v);
  }

  private optIdentifier(id: Identifier | undefined): void {
    if (id === undefined) this.s.u8(0);
    else {
      this.s.u8(1);
      this.identifier(id);
    }
  }

  /** key_with_maintainers (V3): package_name first, although it is proto field 2. */
  private key(k: GlobalKeyWithMaintainers): void {
    const s = this.s;
    s.string(k.key.packageName);
    this.identifier(k.key.templateId);
    this.value(k.key.key);
    s.raw(k.key.hash);
    this.parties(k.maintainers);
  }

  private optKey(k: GlobalKeyWithMaintainers | undefined): void {
    if (k === undefined) this.s.u8(0);
    else {
      this.s.u8(1);
      this.key(k);
    }
  }

  /** Value encoding (identical in V2 and V3): one type tag byte, then the payload. */
  private value(v: Value): void {
    const s = this.s;
    switch (v.kind) {
      case 'unit':
        s.u8(0x00);
        return;
      case 'bool':
        s.u8(0x01);
        s.bool(v.value);
        return;
      case 'int64':
        s.u8(0x02);
        s.i64(v.value);
        return;
      case 'numeric':
        s.u8(0x03);
        s.string(v.value);
        return;
      case 'timestamp':
        s.u8(0x04);
        s.i64(v.value);
        return;
      case 'date':
        s.u8(0x05);
        s.i32(v.value);
        return;
      case 'party':
        s.u8(0x06);
        encodeParty(s, v.value);
        return;
      case 'text':
        s.u8(0x07);
        s.string(v.value);
        return;
      case 'contractId':
        s.u8(0x08);
        s.hex(v.value);
        return;
      case 'optional':
        s.u8(0x09);
        if (v.value === undefined) s.u8(0);
        else {
          s.u8(1);
          this.value(v.value);
        }
        return;
      case 'list':
        s.u8(0x0a);
        s.i32(v.elements.length);
        for (const e of v.elements) this.value(e);
        return;
      case 'textMap':
        s.u8(0x0b);
        s.i32(v.entries.length);
        for (const e of v.entries) {
          s.string(e.key);
          this.value(e.value);
        }
        return;
      case 'record':
        s.u8(0x0c);
        this.optIdentifier(v.recordId);
        s.i32(v.fields.length);
        for (const f of v.fields) {
          // An empty label is "no label" for the participant (P7); the decoder refuses it anyway.
          if (f.label === '') s.u8(0);
          else {
            s.u8(1);
            s.string(f.label);
          }
          this.value(f.value);
        }
        return;
      case 'variant':
        s.u8(0x0d);
        this.optIdentifier(v.variantId);
        s.string(v.constructor);
        this.value(v.value);
        return;
      case 'enum':
        s.u8(0x0e);
        this.optIdentifier(v.enumId);
        s.string(v.constructor);
        return;
      case 'genMap':
        s.u8(0x0f);
        s.i32(v.entries.length);
        for (const e of v.entries) {
          this.value(e.key);
          this.value(e.value);
        }
        return;
    }
  }
}

/**
 * Party ids repeat, and the decoder hands out the same string objects for
 * them (their hash is already computed), so looking up their encoding is
 * cheaper than encoding them again.
 */
function encodeParty(s: Sha256Sink, p: string): void {
  let enc = partyEncodings.get(p);
  if (enc === undefined) {
    if (partyEncodings.size >= 10_000) partyEncodings.clear();
    enc = s.capture(4 + 3 * p.length, () => s.string(p));
    partyEncodings.set(p, enc);
  } else s.raw(enc);
}

/** string(package_id) ‖ list(module_name split on '.') ‖ list(entity_name split on '.'). */
function encodeIdentifier(s: Sha256Sink, id: Identifier): void {
  let enc = identifierEncodings.get(id);
  if (enc === undefined) {
    const { packageId, moduleName, entityName } = id;
    // The largest the encoding can be (each dot becomes at most 4 bytes of length prefix,
    // characters at most 3 UTF-8 bytes): room for it keeps the captured copy in one piece.
    const max =
      12 +
      3 * (packageId.length + moduleName.length + entityName.length) +
      4 * (moduleName.length + entityName.length);
    enc = s.capture(max, () => {
      s.string(packageId);
      encodeStrings(s, moduleName.split('.'));
      encodeStrings(s, entityName.split('.'));
    });
    identifierEncodings.set(id, enc);
  } else s.raw(enc);
}

function encodeStrings(s: Sha256Sink, list: string[]): void {
  s.i32(list.length);
  for (const x of list) s.string(x);
}

/**
 * Canton's value encoding (the same in V2 and V3, as `Hasher.value` writes it
 * from the model) written straight from the wire bytes as the decoder's value
 * walker reads and checks them: no `Value` objects, text and contract ids
 * copied from their bytes. Counts that precede items are counted from the
 * tags first. It only encodes: every check is the walker's.
 */
class WireHasher implements ValueConsumer<undefined> {
  constructor(private readonly s: Sha256Sink) {}
  unit(): undefined {
    this.s.u8(0x00);
  }
  bool(v: boolean): undefined {
    this.s.u8(0x01);
    this.s.u8(v ? 1 : 0);
  }
  /** ZigZag decoded on the two words: (u >>> 1) ^ -(u & 1), written big-endian. */
  int64(lo: number, hi: number): undefined {
    let l = ((lo >>> 1) | (hi << 31)) >>> 0;
    let h = hi >>> 1;
    if (lo & 1) {
      l = ~l >>> 0;
      h = ~h >>> 0;
    }
    this.s.u8(0x02);
    this.s.i32(h);
    this.s.i32(l);
  }
  date(v: number): undefined {
    this.s.u8(0x05);
    this.s.i32(v);
  }
  /** The sfixed64's 8 bytes, little-endian on the wire, written big-endian. */
  timestamp(r: WireReader, at: number): undefined {
    this.s.u8(0x04);
    this.s.fixed64BE(r.buf, at);
  }
  text(r: WireReader, start: number, stop: number, kind: 'text' | 'numeric'): undefined {
    this.s.u8(kind === 'text' ? 0x07 : 0x03);
    this.s.utf8(r.buf, start, stop);
  }
  party(_p: string, r: WireReader, start: number, stop: number): undefined {
    this.s.u8(0x06);
    this.s.utf8(r.buf, start, stop);
  }
  contractId(r: WireReader, start: number, stop: number): undefined {
    this.s.u8(0x08);
    this.s.hexBytes(r.buf, start, stop);
  }
  optionalStart(present: boolean): void {
    this.s.u8(0x09);
    this.s.u8(present ? 1 : 0);
  }
  optional(): undefined {}
  listStart(r: WireReader, start: number, stop: number): unknown {
    this.s.u8(0x0a);
    this.s.i32(r.countLen(start, stop, 1));
    return undefined;
  }
  listItem(): void {}
  list(): undefined {}
  textMapStart(r: WireReader, start: number, stop: number): unknown {
    this.s.u8(0x0b);
    this.s.i32(r.countLen(start, stop, 1));
    return undefined;
  }
  textMapKey(_acc: unknown, r: WireReader, start: number, stop: number): void {
    this.s.utf8(r.buf, start, stop);
  }
  textMapValueStart(_acc: unknown, keySeen: number): void {
    if (keySeen === 0) this.s.i32(0); // no key field: the empty text
  }
  textMapEntry(): void {}
  textMap(): undefined {}
  genMapStart(r: WireReader, start: number, stop: number): unknown {
    this.s.u8(0x0f);
    this.s.i32(r.countLen(start, stop, 1));
    return undefined;
  }
  genMapEntry(): void {}
  genMap(): undefined {}
  /** optional(record_id) ‖ int32(#fields): written here, or after the record id when it comes first. */
  recordStart(r: WireReader, start: number, stop: number, idFirst: boolean): unknown {
    this.s.u8(0x0c);
    const n = r.countLen(start, stop, 2);
    if (idFirst) return n;
    this.s.u8(0);
    this.s.i32(n);
    return n;
  }
  recordId(acc: unknown, id: Identifier): void {
    this.s.u8(1);
    encodeIdentifier(this.s, id);
    this.s.i32(acc as number);
  }
  fieldLabel(_acc: unknown, r: WireReader, start: number, stop: number): void {
    this.s.u8(1);
    this.s.utf8(r.buf, start, stop);
  }
  field(): void {}
  record(): undefined {}
  /** optional(variant_id): absent unless the variant id comes first (written by `variantId`). */
  variantStart(_r: WireReader, _start: number, _stop: number, idFirst: boolean): unknown {
    this.s.u8(0x0d);
    if (!idFirst) this.s.u8(0);
    return undefined;
  }
  variantId(_acc: unknown, id: Identifier): void {
    this.s.u8(1);
    encodeIdentifier(this.s, id);
  }
  constructorName(_acc: unknown, r: WireReader, start: number, stop: number): void {
    this.s.utf8(r.buf, start, stop);
  }
  variant(): undefined {}
  enumStart(_r: WireReader, _start: number, _stop: number, idFirst: boolean): unknown {
    this.s.u8(0x0e);
    if (!idFirst) this.s.u8(0);
    return undefined;
  }
  enumId(_acc: unknown, id: Identifier): void {
    this.s.u8(1);
    encodeIdentifier(this.s, id);
  }
  enum(): undefined {}
  unordered(): void {
    throw new NotStreamable('value fields out of field-number order');
  }
}

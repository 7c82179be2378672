/**
 * Transaction nodes: the versioned node wrapper and the five node kinds
 * (create, exercise, fetch, rollback, query-by-key) with their required
 * fields and sorted party sets. External-call results are refused here.
 *
 * A node's fields are read, with every check, into one reusable `NodeFields`
 * (text as byte ranges of the wire, checked; identifiers from the cache;
 * top-level values as the value decoder hands them out). From it the decoder
 * builds the model's node, or the streaming hasher encodes the node straight
 * from the wire bytes: the reading and its checks are the same for both.
 */
import { EMPTY_ID } from './decode-fields.js';
import { type TopValue, ValueDecoder } from './decode-values.js';
import type {
  CreateNode,
  ExerciseNode,
  FetchNode,
  GlobalKeyWithMaintainers,
  Identifier,
  Node,
  NodeBody,
  QueryByKeyNode,
  RollbackNode,
} from './model.js';

/**
 * A repeated party field as read: the party ids (from the party cache) and
 * their byte ranges. Scratch: the first `length` entries are this node's.
 */
export class PartyField {
  length = 0;
  readonly ids: string[] = [];
  /** Start and end of each party's bytes in the input, in pairs. */
  readonly spans: number[] = [];

  add(id: string, start: number, end: number): void {
    const i = this.length++;
    this.ids[i] = id;
    this.spans[2 * i] = start;
    this.spans[2 * i + 1] = end;
  }

  /** The party ids, in a new array. */
  list(): string[] {
    return this.ids.slice(0, this.length);
  }
}

/**
 * One node's fields as read and checked, before they become a model node or
 * an encoding. Reused from node to node (scratch: read it before the next node
 * is read), except `children`, which is fresh for every exercise or rollback.
 * Text fields are byte ranges [start, end) of `buf`, already checked.
 */
export class NodeFields {
  type: NodeBody['type'] = 'create';
  nodeId = '';
  /** One of the known Daml-LF versions (the same string objects every time). */
  lfVersion = '';
  contractIdStart = 0;
  contractIdEnd = 0;
  packageNameStart = 0;
  packageNameEnd = 0;
  choiceIdStart = 0;
  choiceIdEnd = 0;
  templateId: Identifier = EMPTY_ID;
  interfaceId: Identifier | undefined = undefined;
  /** A create's argument, or an exercise's chosen value. */
  argument: TopValue = UNIT;
  exerciseResult: TopValue | undefined = undefined;
  consuming = false;
  byKey = false;
  exhaustive = false;
  key: GlobalKeyWithMaintainers | undefined = undefined;
  children: string[] = NO_CHILDREN;
  readonly signatories = new PartyField();
  readonly stakeholders = new PartyField();
  readonly actingParties = new PartyField();
  readonly choiceObservers = new PartyField();
  /** A query-by-key's result: start and end of each contract id, in pairs (fresh for every query-by-key). */
  result: number[] = NO_SPANS;
  constructor(readonly buf: Uint8Array) {}

  reset(type: NodeBody['type']): void {
    this.type = type;
    this.lfVersion = '';
    this.contractIdStart = this.contractIdEnd = 0;
    this.packageNameStart = this.packageNameEnd = 0;
    this.choiceIdStart = this.choiceIdEnd = 0;
    this.templateId = EMPTY_ID;
    this.interfaceId = undefined;
    this.argument = UNIT;
    this.exerciseResult = undefined;
    this.consuming = false;
    this.byKey = false;
    this.exhaustive = false;
    this.key = undefined;
    this.children = NO_CHILDREN;
    this.signatories.length = 0;
    this.stakeholders.length = 0;
    this.actingParties.length = 0;
    this.choiceObservers.length = 0;
    this.result = NO_SPANS;
  }
}

const UNIT: TopValue = Object.freeze({ kind: 'unit' });
const NO_CHILDREN: string[] = [];
const NO_SPANS: number[] = [];

export abstract class NodeDecoder extends ValueDecoder {
  /** The scratch every node is read into. */
  private readonly fields = new NodeFields(this.r.buf);

  /** A node of the model. */
  protected node(end: number): Node<TopValue> {
    const f = this.nodeFields(end);
    return { nodeId: f.nodeId, node: this.build(f) };
  }

  /** A node's fields, read and checked (valid until the next node is read). */
  protected nodeFields(end: number): NodeFields {
    let nodeId = '';
    let f: NodeFields | undefined;
    let seen = 0;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const field = tag >>> 3;
      if (field === 1) {
        seen = this.once(seen, 1, 'node_id');
        nodeId = this.str(tag, end, 'node_id');
      } else if (field === 1000) {
        if (f) this.p.fail('duplicate_field', 'versioned node set more than once', 'v1');
        const stop = this.enter(tag, end, 'v1');
        f = this.v1Node(stop);
        this.leave(stop);
      } else this.unknown(tag);
    }
    if (!f) this.p.fail('missing_field', 'node has no versioned body (expected v1)', 'v1');
    f.nodeId = nodeId;
    return f;
  }

  private v1Node(end: number): NodeFields {
    let f: NodeFields | undefined;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      const field = tag >>> 3;
      if (field < 1 || field > 5) this.unknown(tag);
      const name = ['', 'create', 'fetch', 'exercise', 'rollback', 'query_by_key'][field]!;
      if (f) this.p.fail('duplicate_field', 'node_type oneof set more than once', name);
      const stop = this.enter(tag, end, name);
      switch (field) {
        case 1:
          f = this.readCreate(stop);
          break;
        case 2:
          f = this.readFetch(stop);
          break;
        case 3:
          f = this.readExercise(stop);
          break;
        case 4:
          f = this.readRollback(stop);
          break;
        default:
          f = this.readQueryByKey(stop);
      }
      this.leave(stop);
    }
    if (!f) this.p.fail('missing_field', 'node_type is not set');
    return f;
  }

  /** A create of the model (transaction nodes and input contracts). */
  protected create(end: number): CreateNode<TopValue> {
    return this.build(this.readCreate(end)) as CreateNode<TopValue>;
  }

  /** The model's node from its fields, as read. */
  private build(f: NodeFields): NodeBody<TopValue> {
    const r = this.r;
    switch (f.type) {
      case 'create':
        return {
          type: 'create',
          lfVersion: f.lfVersion,
          contractId: r.utf8(f.contractIdStart, f.contractIdEnd),
          packageName: r.utf8(f.packageNameStart, f.packageNameEnd),
          templateId: f.templateId,
          argument: f.argument,
          signatories: f.signatories.list(),
          stakeholders: f.stakeholders.list(),
          key: f.key,
        } satisfies CreateNode<TopValue>;
      case 'exercise':
        return {
          type: 'exercise',
          lfVersion: f.lfVersion,
          contractId: r.utf8(f.contractIdStart, f.contractIdEnd),
          packageName: r.utf8(f.packageNameStart, f.packageNameEnd),
          templateId: f.templateId,
          signatories: f.signatories.list(),
          stakeholders: f.stakeholders.list(),
          actingParties: f.actingParties.list(),
          interfaceId: f.interfaceId,
          choiceId: r.utf8(f.choiceIdStart, f.choiceIdEnd),
          chosenValue: f.argument,
          consuming: f.consuming,
          children: f.children,
          exerciseResult: f.exerciseResult,
          choiceObservers: f.choiceObservers.list(),
          key: f.key,
          byKey: f.byKey,
        } satisfies ExerciseNode<TopValue>;
      case 'fetch':
        return {
          type: 'fetch',
          lfVersion: f.lfVersion,
          contractId: r.utf8(f.contractIdStart, f.contractIdEnd),
          packageName: r.utf8(f.packageNameStart, f.packageNameEnd),
          templateId: f.templateId,
          signatories: f.signatories.list(),
          stakeholders: f.stakeholders.list(),
          actingParties: f.actingParties.list(),
          interfaceId: f.interfaceId,
          key: f.key,
          byKey: f.byKey,
        } satisfies FetchNode;
      case 'rollback':
        return { type: 'rollback', children: f.children } satisfies RollbackNode;
      case 'queryByKey': {
        const result: string[] = [];
        for (let i = 0; i < f.result.length; i += 2) result.push(r.utf8(f.result[i]!, f.result[i + 1]!));
        return {
          type: 'queryByKey',
          lfVersion: f.lfVersion,
          packageName: r.utf8(f.packageNameStart, f.packageNameEnd),
          templateId: f.templateId,
          exhaustive: f.exhaustive,
          key: f.key!,
          result,
        } satisfies QueryByKeyNode;
      }
    }
  }

  /** Reads a repeated party field's next party into `into`. */
  private partyInto(into: PartyField, tag: number, end: number, name: string): void {
    const id = this.party(tag, end, name, into.length);
    into.add(id, this.partyAt, this.r.pos);
  }

  private readCreate(end: number): NodeFields {
    const n = this.fields;
    n.reset('create');
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
          n.contractIdStart = this.contractIdSpan(tag, end, 'contract_id');
          n.contractIdEnd = this.r.pos;
          break;
        case 3:
          seen = this.once(seen, f, 'package_name');
          n.packageNameStart = this.packageNameSpan(tag, end);
          n.packageNameEnd = this.r.pos;
          break;
        case 4:
          seen = this.once(seen, f, 'template_id');
          n.templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 5:
          seen = this.once(seen, f, 'argument');
          n.argument = this.topValue(tag, end, 'argument');
          break;
        case 6:
          this.partyInto(n.signatories, tag, end, 'signatories');
          break;
        case 7:
          this.partyInto(n.stakeholders, tag, end, 'stakeholders');
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
    this.sortedSet(n.signatories.ids, 'signatories', n.signatories.length);
    this.sortedSet(n.stakeholders.ids, 'stakeholders', n.stakeholders.length);
    return n;
  }

  private readExercise(end: number): NodeFields {
    const n = this.fields;
    n.reset('exercise');
    n.children = [];
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
          n.contractIdStart = this.contractIdSpan(tag, end, 'contract_id');
          n.contractIdEnd = this.r.pos;
          break;
        case 3:
          seen = this.once(seen, f, 'package_name');
          n.packageNameStart = this.packageNameSpan(tag, end);
          n.packageNameEnd = this.r.pos;
          break;
        case 4:
          seen = this.once(seen, f, 'template_id');
          n.templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 5:
          this.partyInto(n.signatories, tag, end, 'signatories');
          break;
        case 6:
          this.partyInto(n.stakeholders, tag, end, 'stakeholders');
          break;
        case 7:
          this.partyInto(n.actingParties, tag, end, 'acting_parties');
          break;
        case 8:
          seen = this.once(seen, f, 'interface_id');
          n.interfaceId = this.identifierField(tag, end, 'interface_id');
          break;
        case 9:
          seen = this.once(seen, f, 'choice_id');
          n.choiceIdStart = this.utf8Span(tag, end, 'choice_id');
          n.choiceIdEnd = this.r.pos;
          break;
        case 10:
          seen = this.once(seen, f, 'chosen_value');
          n.argument = this.topValue(tag, end, 'chosen_value');
          break;
        case 11:
          seen = this.once(seen, f, 'consuming');
          n.consuming = this.bool(tag, end, 'consuming');
          break;
        case 12:
          n.children.push(this.str(tag, end, 'children', n.children.length));
          break;
        case 13:
          seen = this.once(seen, f, 'exercise_result');
          n.exerciseResult = this.topValue(tag, end, 'exercise_result');
          break;
        case 14:
          this.partyInto(n.choiceObservers, tag, end, 'choice_observers');
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
    this.sortedSet(n.signatories.ids, 'signatories', n.signatories.length);
    this.sortedSet(n.stakeholders.ids, 'stakeholders', n.stakeholders.length);
    this.sortedSet(n.actingParties.ids, 'acting_parties', n.actingParties.length);
    this.sortedSet(n.choiceObservers.ids, 'choice_observers', n.choiceObservers.length);
    return n;
  }

  private readFetch(end: number): NodeFields {
    const n = this.fields;
    n.reset('fetch');
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
          n.contractIdStart = this.contractIdSpan(tag, end, 'contract_id');
          n.contractIdEnd = this.r.pos;
          break;
        case 3:
          seen = this.once(seen, f, 'package_name');
          n.packageNameStart = this.packageNameSpan(tag, end);
          n.packageNameEnd = this.r.pos;
          break;
        case 4:
          seen = this.once(seen, f, 'template_id');
          n.templateId = this.identifierField(tag, end, 'template_id');
          break;
        case 5:
          this.partyInto(n.signatories, tag, end, 'signatories');
          break;
        case 6:
          this.partyInto(n.stakeholders, tag, end, 'stakeholders');
          break;
        case 7:
          this.partyInto(n.actingParties, tag, end, 'acting_parties');
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
    this.sortedSet(n.signatories.ids, 'signatories', n.signatories.length);
    this.sortedSet(n.stakeholders.ids, 'stakeholders', n.stakeholders.length);
    this.sortedSet(n.actingParties.ids, 'acting_parties', n.actingParties.length);
    return n;
  }

  private readRollback(end: number): NodeFields {
    const n = this.fields;
    n.reset('rollback');
    const children: string[] = [];
    n.children = children;
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      if (tag >>> 3 !== 1) this.unknown(tag);
      children.push(this.str(tag, end, 'children', children.length));
    }
    return n;
  }

  private readQueryByKey(end: number): NodeFields {
    const n = this.fields;
    n.reset('queryByKey');
    n.result = [];
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
          n.packageNameStart = this.packageNameSpan(tag, end);
          n.packageNameEnd = this.r.pos;
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
          n.result.push(this.contractIdSpan(tag, end, 'result', n.result.length / 2), this.r.pos);
          break;
        default:
          this.unknown(tag);
      }
    }
    this.require(seen, [1, 2, 3, 5], ['lf_version', 'package_name', 'template_id', 'key']);
    return n;
  }
}

/**
 * Transaction nodes: the versioned node wrapper and the five node kinds
 * (create, exercise, fetch, rollback, query-by-key) with their required
 * fields and sorted party sets. External-call results are refused here.
 */
import { EMPTY_ID } from './decode-fields.js';
import { ValueDecoder } from './decode-values.js';
import type {
  CreateNode,
  ExerciseNode,
  FetchNode,
  GlobalKeyWithMaintainers,
  Node,
  NodeBody,
  QueryByKeyNode,
  RollbackNode,
} from './model.js';

export abstract class NodeDecoder extends ValueDecoder {
  protected node(end: number): Node {
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

  protected v1Node(end: number): NodeBody {
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

  protected create(end: number): CreateNode {
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
        case 5:
          seen = this.once(seen, f, 'argument');
          n.argument = this.topValue(tag, end, 'argument');
          break;
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

  protected exercise(end: number): ExerciseNode {
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
        case 10:
          seen = this.once(seen, f, 'chosen_value');
          n.chosenValue = this.topValue(tag, end, 'chosen_value');
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

  protected fetch(end: number): FetchNode {
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

  protected rollback(end: number): RollbackNode {
    const children: string[] = [];
    while (this.r.pos < end) {
      const tag = this.r.tag(end);
      if (tag >>> 3 !== 1) this.unknown(tag);
      children.push(this.str(tag, end, 'children', children.length));
    }
    return { type: 'rollback', children };
  }

  protected queryByKey(end: number): QueryByKeyNode {
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
}

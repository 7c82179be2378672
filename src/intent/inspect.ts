/**
 * What a prepared transaction does, for the person (or script) deciding
 * whether to sign it: every node reachable from the roots in display order,
 * the arguments that matter (amounts, parties, instruments, times), the
 * metadata, which of it the chosen scheme covers, and the hash.
 *
 * The report is built from the strictly decoded model only, so it shows
 * exactly what the hash covers. Nodes are a flat list (with depth and parent)
 * so a 10,000-deep chain renders without recursion. The JSON form is a stable,
 * versioned document (docs/inspect-json.md).
 */

import { bytesToHex } from '../hashing/input.js';
import type {
  CreateNode,
  DecodedTransaction,
  ExerciseNode,
  FetchNode,
  Identifier,
  NodeBody,
  Value,
} from '../hashing/model.js';
import { isoMicros, type JsonValue, templateName, valueToJson } from '../hashing/render.js';
import { type HashingScheme, hashParts } from '../hashing/transaction-hash.js';
import { INSPECT_FORMAT } from './inspect-format.js';
import type { RecognisedAction } from './model.js';
import { recogniseActions } from './recognise.js';

export { INSPECT_FORMAT, type JsonValue };

export interface Highlight {
  kind: 'amount' | 'party' | 'instrument' | 'time';
  /** Record labels from the argument root, e.g. `transfer.amount` or `outputs[0].receiver`. */
  path: string;
  value: string | { admin: string; id: string };
}

export interface InspectNode {
  nodeId: string;
  parent: string | null;
  depth: number;
  type: NodeBody['type'];
  nodeHash: string;
  lfVersion?: string;
  /** `package-name:Module:Entity` */
  template?: string;
  templateId?: Identifier;
  contractId?: string;
  choice?: string;
  consuming?: boolean;
  interface?: string;
  actingParties?: string[];
  signatories?: string[];
  stakeholders?: string[];
  /** Stakeholders that are not signatories. */
  observers?: string[];
  choiceObservers?: string[];
  byKey?: boolean;
  hasKey?: boolean;
  exhaustive?: boolean;
  result?: string[];
  argument?: JsonValue;
  exerciseResult?: JsonValue;
  highlights?: Highlight[];
  children?: string[];
}

export interface InspectInputContract {
  contractId: string;
  template: string;
  templateId: Identifier;
  createdAt: string;
  signatories: string[];
  stakeholders: string[];
  argument: JsonValue;
  highlights: Highlight[];
}

export interface InspectReport {
  format: typeof INSPECT_FORMAT;
  scheme: HashingScheme;
  hash: string;
  transactionHash: string;
  metadataHash: string;
  maxRecordTimeCovered: boolean;
  warnings: string[];
  transaction: { version: string; roots: string[]; nodeCount: number; nodes: InspectNode[] };
  metadata: {
    actAs: string[];
    commandId: string;
    synchronizerId: string;
    mediatorGroup: number;
    transactionUuid: string;
    preparationTime: string;
    minLedgerEffectiveTime: string | null;
    maxLedgerEffectiveTime: string | null;
    maxRecordTime: string | null;
    inputContracts: InspectInputContract[];
  };
  /** What each create or exercise root does, as the intent recogniser reads it (src/intent/recognise.ts). */
  intents: RecognisedAction[];
}

export function inspectTransaction(tx: DecodedTransaction, scheme: HashingScheme = 'v2'): InspectReport {
  const parts = hashParts(tx, { scheme });
  const nodes: InspectNode[] = [];
  const stack: { id: string; parent: string | null; depth: number }[] = [];
  const roots = tx.transaction.roots;
  for (let i = roots.length - 1; i >= 0; i--) stack.push({ id: roots[i]!, parent: null, depth: 0 });
  while (stack.length > 0) {
    const { id, parent, depth } = stack.pop()!;
    const body = tx.nodeById.get(id)!;
    nodes.push(describeNode(id, body, parent, depth, bytesToHex(parts.nodeHashes.get(id)!)));
    if (body.type === 'exercise' || body.type === 'rollback')
      for (let i = body.children.length - 1; i >= 0; i--)
        stack.push({ id: body.children[i]!, parent: id, depth: depth + 1 });
  }

  const m = tx.metadata;
  const covered = scheme === 'v3';
  const warnings: string[] = [];
  if (!covered && m.maxRecordTime !== undefined)
    warnings.push(
      'max_record_time is NOT covered by the V2 hash: the executing participant can change or drop it. Use V3 to have it signed.',
    );
  if (!covered && m.maxRecordTime === undefined)
    warnings.push('no max_record_time, and the V2 hash could not cover one anyway.');
  if (m.minLedgerEffectiveTime === undefined && m.maxLedgerEffectiveTime === undefined)
    warnings.push('ledger effective time is not bounded by the signed metadata.');

  return {
    format: INSPECT_FORMAT,
    scheme,
    hash: bytesToHex(parts.hash),
    transactionHash: bytesToHex(parts.transactionHash),
    metadataHash: bytesToHex(parts.metadataHash),
    maxRecordTimeCovered: covered,
    warnings,
    transaction: { version: tx.transaction.version, roots: [...roots], nodeCount: nodes.length, nodes },
    metadata: {
      actAs: [...m.submitterInfo.actAs],
      commandId: m.submitterInfo.commandId,
      synchronizerId: m.synchronizerId,
      mediatorGroup: m.mediatorGroup,
      transactionUuid: m.transactionUuid,
      preparationTime: isoMicros(m.preparationTime),
      minLedgerEffectiveTime: optTime(m.minLedgerEffectiveTime),
      maxLedgerEffectiveTime: optTime(m.maxLedgerEffectiveTime),
      maxRecordTime: optTime(m.maxRecordTime),
      inputContracts: m.inputContracts.map((ic) => ({
        contractId: ic.contract.contractId,
        template: templateName(ic.contract.packageName, ic.contract.templateId),
        templateId: { ...ic.contract.templateId },
        createdAt: isoMicros(ic.createdAt),
        signatories: [...ic.contract.signatories],
        stakeholders: [...ic.contract.stakeholders],
        argument: valueToJson(ic.contract.argument),
        highlights: highlights(ic.contract.argument),
      })),
    },
    intents: recogniseActions(tx),
  };
}

/** Fields every node that names a contract template shares. */
function contractFields(n: CreateNode | ExerciseNode | FetchNode) {
  return {
    lfVersion: n.lfVersion,
    template: templateName(n.packageName, n.templateId),
    templateId: { ...n.templateId },
    contractId: n.contractId,
    signatories: [...n.signatories],
    stakeholders: [...n.stakeholders],
    observers: n.stakeholders.filter((p) => !n.signatories.includes(p)),
    hasKey: n.key !== undefined,
  };
}

function describeNode(
  id: string,
  n: NodeBody,
  parent: string | null,
  depth: number,
  nodeHash: string,
): InspectNode {
  const base = { nodeId: id, parent, depth, type: n.type, nodeHash };
  switch (n.type) {
    case 'create':
      return {
        ...base,
        ...contractFields(n),
        argument: valueToJson(n.argument),
        highlights: highlights(n.argument),
      };
    case 'exercise':
      return {
        ...base,
        ...contractFields(n),
        choice: n.choiceId,
        consuming: n.consuming,
        ...(n.interfaceId ? { interface: qualified(n.interfaceId) } : {}),
        actingParties: [...n.actingParties],
        choiceObservers: [...n.choiceObservers],
        byKey: n.byKey,
        argument: valueToJson(n.chosenValue),
        ...(n.exerciseResult ? { exerciseResult: valueToJson(n.exerciseResult) } : {}),
        highlights: highlights(n.chosenValue),
        children: [...n.children],
      };
    case 'fetch':
      return {
        ...base,
        ...contractFields(n),
        ...(n.interfaceId ? { interface: qualified(n.interfaceId) } : {}),
        actingParties: [...n.actingParties],
        byKey: n.byKey,
      };
    case 'rollback':
      return { ...base, children: [...n.children] };
    case 'queryByKey':
      return {
        ...base,
        lfVersion: n.lfVersion,
        template: templateName(n.packageName, n.templateId),
        templateId: { ...n.templateId },
        exhaustive: n.exhaustive,
        result: [...n.result],
      };
  }
}

function qualified(id: Identifier): string {
  return `${id.packageId}:${id.moduleName}:${id.entityName}`;
}

function optTime(v: bigint | undefined): string | null {
  return v === undefined ? null : isoMicros(v);
}

const MAX_HIGHLIGHTS = 64;

/** Amounts, parties, instrument ids and times found in a value, with their label paths. */
export function highlights(root: Value): Highlight[] {
  const out: Highlight[] = [];
  const walk = (v: Value, path: string): void => {
    if (out.length >= MAX_HIGHLIGHTS) return;
    switch (v.kind) {
      case 'numeric':
        out.push({ kind: 'amount', path, value: v.value });
        return;
      case 'party':
        out.push({ kind: 'party', path, value: v.value });
        return;
      case 'timestamp':
        out.push({ kind: 'time', path, value: isoMicros(v.value) });
        return;
      case 'record': {
        const admin = v.fields.find((f) => f.label === 'admin');
        const id = v.fields.find((f) => f.label === 'id');
        if (v.fields.length === 2 && admin?.value.kind === 'party' && id?.value.kind === 'text') {
          out.push({ kind: 'instrument', path, value: { admin: admin.value.value, id: id.value.value } });
          return;
        }
        for (const f of v.fields) walk(f.value, path ? `${path}.${f.label}` : f.label);
        return;
      }
      case 'variant':
        walk(v.value, path ? `${path}.${v.constructor}` : v.constructor);
        return;
      case 'optional':
        if (v.value) walk(v.value, path);
        return;
      case 'list':
        v.elements.forEach((e, i) => {
          walk(e, `${path}[${i}]`);
        });
        return;
      case 'textMap':
        for (const e of v.entries) walk(e.value, `${path}[${JSON.stringify(e.key)}]`);
        return;
      case 'genMap':
        v.entries.forEach((e, i) => {
          walk(e.key, `${path}{${i}}.key`);
          walk(e.value, `${path}{${i}}.value`);
        });
        return;
      default:
        return;
    }
  };
  walk(root, '');
  return out;
}

// ---- text rendering --------------------------------------------------------------

const MAX_INDENT = 24;

function short(s: string, max = 120): string {
  return s.length > max ? `${s.slice(0, max)}… (${s.length} characters)` : s;
}

function cid(s: string): string {
  return s.length > 24 ? `${s.slice(0, 20)}…${s.slice(-4)}` : s;
}

function list(xs: string[] | undefined): string {
  return xs && xs.length > 0 ? xs.join(', ') : '(none)';
}

function highlightText(h: Highlight): string {
  const v = typeof h.value === 'string' ? short(h.value) : `${h.value.id} (admin ${h.value.admin})`;
  return `${h.kind} ${h.path || '(argument)'} = ${v}`;
}

/** Human-readable report: node tree, metadata, coverage notes, then the hash. */
export function renderInspectText(r: InspectReport): string {
  const lines: string[] = [];
  const t = r.transaction;
  lines.push(
    `Prepared transaction: Daml-LF ${t.version}, ${t.roots.length} root node${t.roots.length === 1 ? '' : 's'}, ${t.nodeCount} node${t.nodeCount === 1 ? '' : 's'}`,
  );
  lines.push('');
  for (const n of t.nodes) {
    const deep = n.depth > MAX_INDENT;
    const pad = '  '.repeat(Math.min(n.depth, MAX_INDENT));
    const at = deep ? ` (depth ${n.depth})` : '';
    const head = `${pad}[${n.nodeId}]${at} ${n.type.toUpperCase()}`;
    switch (n.type) {
      case 'create':
        lines.push(`${head} ${n.template}`);
        lines.push(`${pad}    contract ${cid(n.contractId!)}`);
        lines.push(`${pad}    signatories: ${list(n.signatories)}`);
        lines.push(`${pad}    observers: ${list(n.observers)}`);
        break;
      case 'exercise':
        lines.push(
          `${head} ${n.template} choice ${n.choice}${n.consuming ? ' (consuming)' : ' (non-consuming)'}`,
        );
        if (n.interface) lines.push(`${pad}    via interface ${n.interface}`);
        lines.push(`${pad}    on contract ${cid(n.contractId!)}${n.byKey ? ' (by key)' : ''}`);
        lines.push(`${pad}    acting parties: ${list(n.actingParties)}`);
        lines.push(`${pad}    signatories: ${list(n.signatories)}`);
        if (n.choiceObservers && n.choiceObservers.length > 0)
          lines.push(`${pad}    choice observers: ${list(n.choiceObservers)}`);
        break;
      case 'fetch':
        lines.push(`${head} ${n.template}`);
        lines.push(`${pad}    contract ${cid(n.contractId!)}${n.byKey ? ' (by key)' : ''}`);
        lines.push(`${pad}    acting parties: ${list(n.actingParties)}`);
        break;
      case 'rollback':
        lines.push(`${head} (effects below are rolled back)`);
        break;
      case 'queryByKey':
        lines.push(
          `${head} ${n.template} (${n.exhaustive ? 'exhaustive' : 'first match'}, ${n.result?.length ?? 0} results)`,
        );
        break;
    }
    for (const h of n.highlights ?? []) lines.push(`${pad}    ${highlightText(h)}`);
  }
  if (r.intents.length > 0) {
    lines.push('');
    lines.push('Recognised actions');
    for (const a of r.intents) lines.push(...actionText(a));
  }
  const m = r.metadata;
  lines.push('');
  lines.push('Metadata');
  lines.push(`  act as:            ${list(m.actAs)}`);
  lines.push(`  command id:        ${m.commandId}`);
  lines.push(`  synchronizer:      ${m.synchronizerId}`);
  lines.push(`  mediator group:    ${m.mediatorGroup}`);
  lines.push(`  transaction uuid:  ${m.transactionUuid}`);
  lines.push(`  preparation time:  ${m.preparationTime}`);
  lines.push(
    `  ledger time:       ${m.minLedgerEffectiveTime ?? 'unbounded'} .. ${m.maxLedgerEffectiveTime ?? 'unbounded'}`,
  );
  lines.push(
    `  max record time:   ${m.maxRecordTime ?? '(none)'} — ${r.maxRecordTimeCovered ? 'covered by the V3 hash' : 'NOT covered by the V2 hash'}`,
  );
  lines.push(`  input contracts:   ${m.inputContracts.length}`);
  for (const ic of m.inputContracts) {
    lines.push(`    ${cid(ic.contractId)} ${ic.template}, created ${ic.createdAt}`);
    for (const h of ic.highlights.slice(0, 8)) lines.push(`      ${highlightText(h)}`);
  }
  if (r.warnings.length > 0) {
    lines.push('');
    for (const w of r.warnings) lines.push(`WARNING: ${w}`);
  }
  lines.push('');
  lines.push(`Hash (${r.scheme.toUpperCase()}): ${r.hash}`);
  return `${lines.join('\n')}\n`;
}

/** One recognised action: kind and node, then its parties, amounts, instrument, deadlines and extras. */
function actionText(a: RecognisedAction): string[] {
  const what = a.choice ? `${a.template} choice ${a.choice}` : a.template;
  const out = [`  [${a.nodeId}] ${a.kind}${a.transferKind ? ` (${a.transferKind})` : ''}: ${what}`];
  const pairs = (o: Record<string, string>) =>
    Object.entries(o)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  if (a.contractId) out.push(`      contract ${cid(a.contractId)}`);
  if (Object.keys(a.parties).length > 0) out.push(`      parties: ${pairs(a.parties)}`);
  if (Object.keys(a.amounts).length > 0) out.push(`      amounts: ${pairs(a.amounts)}`);
  if (a.instrument) out.push(`      instrument: ${a.instrument.id} (admin ${a.instrument.admin})`);
  if (Object.keys(a.deadlines).length > 0) out.push(`      deadlines: ${pairs(a.deadlines)}`);
  if (a.memo !== undefined) out.push(`      memo: ${short(JSON.stringify(a.memo))}`);
  if (a.nonce !== undefined) out.push(`      nonce: ${a.nonce}`);
  if (a.inputs) out.push(`      inputs: ${a.inputs.length === 0 ? '(none)' : a.inputs.map(cid).join(', ')}`);
  return out;
}

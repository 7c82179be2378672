/**
 * Canonical protobuf encoder for the PreparedTransaction model: fields in
 * field-number order, proto3 defaults omitted, oneof members always written,
 * as the Java runtime the participant uses would write them. The product uses
 * it where it must *produce* prepared transactions (the sandbox participant);
 * signing never re-encodes: it submits the exact bytes it decoded and hashed.
 */
import type {
  CreateNode,
  ExerciseNode,
  FetchNode,
  GlobalKeyWithMaintainers,
  Identifier,
  InputContract,
  Metadata,
  NodeBody,
  PreparedTransaction,
  QueryByKeyNode,
  Value,
} from './model.js';
import { Writer } from './wire-writer.js';

export function encodePreparedTransaction(tx: PreparedTransaction): Uint8Array {
  const w = new Writer();
  w.message(1, (t) => {
    t.stringField(1, tx.transaction.version);
    for (const r of tx.transaction.roots) t.stringField(2, r, true);
    for (const n of tx.transaction.nodes)
      t.message(3, (nw) => {
        nw.stringField(1, n.nodeId);
        nw.message(1000, (v1) => node(v1, n.node));
      });
    for (const s of tx.transaction.nodeSeeds)
      t.message(4, (sw) => {
        sw.varintField(1, s.nodeId);
        sw.bytesField(2, s.seed);
      });
  });
  w.message(2, (m) => metadata(m, tx.metadata));
  return w.finish();
}

export function encodeValue(v: Value): Uint8Array {
  const w = new Writer();
  value(w, v);
  return w.finish();
}

function node(w: Writer, n: NodeBody): void {
  switch (n.type) {
    case 'create':
      w.message(1, (c) => create(c, n));
      return;
    case 'fetch':
      w.message(2, (f) => fetch(f, n));
      return;
    case 'exercise':
      w.message(3, (e) => exercise(e, n));
      return;
    case 'rollback':
      w.message(4, (r) => {
        for (const c of n.children) r.stringField(1, c, true);
      });
      return;
    case 'queryByKey':
      w.message(5, (q) => queryByKey(q, n));
      return;
  }
}

function create(w: Writer, n: CreateNode): void {
  w.stringField(1, n.lfVersion);
  w.stringField(2, n.contractId);
  w.stringField(3, n.packageName);
  w.message(4, (i) => identifier(i, n.templateId));
  w.message(5, (v) => value(v, n.argument));
  for (const p of n.signatories) w.stringField(6, p, true);
  for (const p of n.stakeholders) w.stringField(7, p, true);
  if (n.key) w.message(8, (k) => key(k, n.key!));
}

/** Fields 1–8, numbered alike in Exercise and Fetch. */
function actionHeader(w: Writer, n: ExerciseNode | FetchNode): void {
  w.stringField(1, n.lfVersion);
  w.stringField(2, n.contractId);
  w.stringField(3, n.packageName);
  w.message(4, (i) => identifier(i, n.templateId));
  for (const p of n.signatories) w.stringField(5, p, true);
  for (const p of n.stakeholders) w.stringField(6, p, true);
  for (const p of n.actingParties) w.stringField(7, p, true);
  if (n.interfaceId) w.message(8, (i) => identifier(i, n.interfaceId!));
}

function exercise(w: Writer, n: ExerciseNode): void {
  actionHeader(w, n);
  w.stringField(9, n.choiceId);
  w.message(10, (v) => value(v, n.chosenValue));
  w.boolField(11, n.consuming);
  for (const c of n.children) w.stringField(12, c, true);
  if (n.exerciseResult) w.message(13, (v) => value(v, n.exerciseResult!));
  for (const p of n.choiceObservers) w.stringField(14, p, true);
  if (n.key) w.message(15, (k) => key(k, n.key!));
  w.boolField(16, n.byKey);
}

function fetch(w: Writer, n: FetchNode): void {
  actionHeader(w, n);
  if (n.key) w.message(9, (k) => key(k, n.key!));
  w.boolField(10, n.byKey);
}

function queryByKey(w: Writer, n: QueryByKeyNode): void {
  w.stringField(1, n.lfVersion);
  w.stringField(2, n.packageName);
  w.message(3, (i) => identifier(i, n.templateId));
  w.boolField(4, n.exhaustive);
  w.message(5, (k) => key(k, n.key));
  for (const c of n.result) w.stringField(6, c, true);
}

function key(w: Writer, k: GlobalKeyWithMaintainers): void {
  w.message(1, (g) => {
    g.message(1, (i) => identifier(i, k.key.templateId));
    g.stringField(2, k.key.packageName);
    g.message(3, (v) => value(v, k.key.key));
    g.bytesField(4, k.key.hash);
  });
  for (const m of k.maintainers) w.stringField(2, m, true);
}

function identifier(w: Writer, id: Identifier): void {
  w.stringField(1, id.packageId);
  w.stringField(2, id.moduleName);
  w.stringField(3, id.entityName);
}

function metadata(w: Writer, m: Metadata): void {
  w.message(2, (s) => {
    for (const p of m.submitterInfo.actAs) s.stringField(1, p, true);
    s.stringField(2, m.submitterInfo.commandId);
  });
  w.stringField(3, m.synchronizerId);
  w.varintField(4, m.mediatorGroup);
  w.stringField(5, m.transactionUuid);
  w.varintField(6, m.preparationTime);
  for (const ic of m.inputContracts) w.message(7, (i) => inputContract(i, ic));
  if (m.minLedgerEffectiveTime !== undefined) w.varintField(9, m.minLedgerEffectiveTime, true);
  if (m.maxLedgerEffectiveTime !== undefined) w.varintField(10, m.maxLedgerEffectiveTime, true);
  if (m.maxRecordTime !== undefined) w.varintField(11, m.maxRecordTime, true);
}

function inputContract(w: Writer, ic: InputContract): void {
  w.message(1, (c) => create(c, ic.contract));
  w.varintField(1000, ic.createdAt);
  if (ic.eventBlob.length > 0) w.bytesField(1002, ic.eventBlob);
}

function value(w: Writer, v: Value): void {
  switch (v.kind) {
    case 'unit':
      w.message(1, () => {});
      return;
    case 'bool':
      w.boolField(2, v.value, true);
      return;
    case 'int64': {
      const zz = BigInt.asUintN(64, (v.value << 1n) ^ (v.value >> 63n));
      w.varintField(3, zz, true);
      return;
    }
    case 'date':
      w.varintField(4, BigInt.asUintN(64, BigInt(v.value)), true);
      return;
    case 'timestamp':
      w.sfixed64Field(5, v.value);
      return;
    case 'numeric':
      w.stringField(6, v.value, true);
      return;
    case 'party':
      w.stringField(7, v.value, true);
      return;
    case 'text':
      w.stringField(8, v.value, true);
      return;
    case 'contractId':
      w.stringField(9, v.value, true);
      return;
    case 'optional':
      w.message(10, (o) => {
        if (v.value) o.message(1, (x) => value(x, v.value!));
      });
      return;
    case 'list':
      w.message(11, (l) => {
        for (const e of v.elements) l.message(1, (x) => value(x, e));
      });
      return;
    case 'textMap':
      w.message(12, (m) => {
        for (const e of v.entries)
          m.message(1, (x) => {
            x.stringField(1, e.key);
            x.message(2, (y) => value(y, e.value));
          });
      });
      return;
    case 'genMap':
      w.message(13, (m) => {
        for (const e of v.entries)
          m.message(1, (x) => {
            x.message(1, (y) => value(y, e.key));
            x.message(2, (y) => value(y, e.value));
          });
      });
      return;
    case 'record':
      w.message(14, (r) => {
        if (v.recordId) r.message(1, (i) => identifier(i, v.recordId!));
        for (const f of v.fields)
          r.message(2, (x) => {
            x.stringField(1, f.label);
            x.message(2, (y) => value(y, f.value));
          });
      });
      return;
    case 'variant':
      w.message(15, (x) => {
        if (v.variantId) x.message(1, (i) => identifier(i, v.variantId!));
        x.stringField(2, v.constructor);
        x.message(3, (y) => value(y, v.value));
      });
      return;
    case 'enum':
      w.message(16, (x) => {
        if (v.enumId) x.message(1, (i) => identifier(i, v.enumId!));
        x.stringField(2, v.constructor);
      });
      return;
  }
}

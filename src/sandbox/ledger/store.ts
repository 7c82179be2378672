/**
 * The sandbox's ledger: the active contract set, the update log with offsets,
 * and command completions. Every state change — an externally signed
 * transaction or the sandbox's own automation (rounds, preapprovals, transfer
 * commands) — goes through `commit`, which archives and creates atomically and
 * appends one update.
 */

import { encodeValue } from '../../hashing/encode.js';
import { bytesToBase64 } from '../../hashing/input.js';
import type { Identifier, Node, Value } from '../../hashing/model.js';
import { newUpdateId } from './ids.js';

export interface Contract {
  contractId: string;
  templateId: Identifier;
  packageName: string;
  argument: Value;
  signatories: string[];
  /** Signatories and observers. */
  stakeholders: string[];
  /** Ledger effective time of the creating transaction, µs. */
  createdAt: bigint;
  createdOffset: number;
  /**
   * Opaque base64 blob standing for the created event (usable as a disclosed
   * contract here only). Encoded on first read: most contracts are never disclosed.
   */
  readonly createdEventBlob: string;
  /** Interfaces the template implements that the sandbox serves views for. */
  interfaces: Identifier[];
}

export interface NewContract {
  /** Final (suffixed) id. */
  contractId: string;
  templateId: Identifier;
  packageName: string;
  argument: Value;
  signatories: string[];
  stakeholders: string[];
  interfaces?: Identifier[];
  /** Node id in the transaction (events are ordered by it). */
  nodeId: number;
}

export type LedgerEvent =
  | { kind: 'created'; nodeId: number; contract: Contract }
  | { kind: 'archived'; nodeId: number; contract: Contract };

export interface Update {
  offset: number;
  updateId: string;
  commandId: string;
  workflowId: string;
  userId: string | undefined;
  submissionId: string | undefined;
  actAs: string[];
  recordTime: bigint;
  effectiveAt: bigint;
  synchronizerId: string;
  events: LedgerEvent[];
  /** The executed transaction's nodes and the suffixed ids of its creates (ledger-effects views). */
  tree?: LedgerTree;
}

export interface LedgerTree {
  roots: string[];
  nodes: Node[];
  /** Unsuffixed id in the prepared transaction → committed id. */
  ids: ReadonlyMap<string, string>;
}

export interface CompletionStatus {
  /** google.rpc.Code; 0 = OK. */
  code: number;
  message: string;
  /** Canton error id of a rejection. */
  errorId?: string;
  /** google.rpc.Status details of a rejection (packed `google.rpc.ErrorInfo` and the like). */
  details?: { typeUrl: string; value: string }[];
}

export interface Completion {
  offset: number;
  commandId: string;
  submissionId: string;
  userId: string;
  actAs: string[];
  updateId: string | undefined;
  status: CompletionStatus;
  recordTime: bigint;
  synchronizerId: string;
}

export interface CommitInput {
  updateId?: string;
  commandId: string;
  workflowId?: string;
  userId?: string;
  submissionId?: string;
  actAs: string[];
  recordTime: bigint;
  effectiveAt: bigint;
  synchronizerId: string;
  archives: { contractId: string; nodeId: number }[];
  creates: NewContract[];
  tree?: LedgerTree;
}

/** Where a contract's create and archive are in the update log. */
export interface ContractEvents {
  created?: { update: Update; nodeId: number };
  archived?: { update: Update; nodeId: number };
}

export class InactiveContractError extends Error {
  override readonly name = 'InactiveContractError';
  constructor(readonly contractIds: string[]) {
    super(`inactive contracts: ${contractIds.join(', ')}`);
  }
}

type Listener = () => void;

export class LedgerStore {
  private readonly active = new Map<string, Contract>();
  /** The active contracts again, by template entity name (same order): lookups by entity skip the rest. */
  private readonly activeByEntity = new Map<string, Map<string, Contract>>();
  /** And by stakeholder (same order): one party's active contracts without the rest of the ledger. */
  private readonly activeByParty = new Map<string, Map<string, Contract>>();
  private readonly archived = new Map<string, Contract>();
  private readonly log: Update[] = [];
  /** The update log again, by update id. */
  private readonly byUpdateId = new Map<string, Update>();
  /** Where each contract was created and archived: the update and the node. */
  private readonly byContract = new Map<string, ContractEvents>();
  private readonly completionLog: Completion[] = [];
  private offset = 0;
  private readonly listeners = new Set<Listener>();

  ledgerEnd(): number {
    return this.offset;
  }

  get(contractId: string): Contract | undefined {
    return this.active.get(contractId);
  }

  isArchived(contractId: string): boolean {
    return this.archived.has(contractId);
  }

  /** Active contracts, optionally only those of a template entity (`Module:Entity` or just `Entity`). */
  activeContracts(entity?: string): Contract[] {
    if (!entity) return [...this.active.values()];
    const named = this.activeByEntity.get(entity.slice(entity.lastIndexOf(':') + 1));
    if (!named) return [];
    const out: Contract[] = [];
    for (const c of named.values()) if (matchesEntity(c.templateId, entity)) out.push(c);
    return out;
  }

  /**
   * Active contracts as of an offset (≤ ledger end): created at or before it
   * and not archived by then, in creation order; with `party`, only those it
   * is a stakeholder of. Computed by rewinding the updates after `offset` from
   * the current active set (a few, under load: the ledger moves on while a
   * client reads), not by replaying the log from its start.
   */
  activeAt(offset: number, party?: string): Contract[] {
    const now =
      party === undefined ? this.active : (this.activeByParty.get(party) ?? new Map<string, Contract>());
    if (offset >= this.offset) return [...now.values()];
    const out: Contract[] = [];
    for (const c of now.values()) if (c.createdOffset <= offset) out.push(c);
    // Archived after `offset` but created by then: active at `offset` again.
    let restored = false;
    for (let i = this.log.length - 1; i >= 0 && (this.log[i] as Update).offset > offset; i--)
      for (const e of (this.log[i] as Update).events)
        if (
          e.kind === 'archived' &&
          e.contract.createdOffset <= offset &&
          (party === undefined || e.contract.stakeholders.includes(party))
        ) {
          out.push(e.contract);
          restored = true;
        }
    if (!restored) return out;
    // Creation order: by creating offset, then by node within the creating update (stable sort).
    return out.sort(
      (a, b) => a.createdOffset - b.createdOffset || this.createdPosition(a) - this.createdPosition(b),
    );
  }

  /** Where `c` is among the events of the update that created it. */
  private createdPosition(c: Contract): number {
    const u = this.updateByOffset(c.createdOffset);
    return u ? u.events.findIndex((e) => e.kind === 'created' && e.contract.contractId === c.contractId) : -1;
  }

  /** Atomically archives and creates; throws InactiveContractError (nothing changed) if an input is gone. */
  commit(input: CommitInput): Update {
    const gone = input.archives.filter((a) => !this.active.has(a.contractId)).map((a) => a.contractId);
    if (gone.length > 0) throw new InactiveContractError(gone);
    const offset = ++this.offset;
    const events: LedgerEvent[] = [];
    for (const a of input.archives) {
      const c = this.active.get(a.contractId)!;
      this.active.delete(a.contractId);
      this.activeByEntity.get(c.templateId.entityName)?.delete(a.contractId);
      for (const p of c.stakeholders) this.activeByParty.get(p)?.delete(a.contractId);
      this.archived.set(a.contractId, c);
      events.push({ kind: 'archived', nodeId: a.nodeId, contract: c });
    }
    // Created in node order, as a replay of the update log would list them.
    const creates = [...input.creates].sort((a, b) => a.nodeId - b.nodeId);
    for (const n of creates) {
      const c = contract(n, input.effectiveAt, offset);
      this.active.set(c.contractId, c);
      indexed(this.activeByEntity, c.templateId.entityName).set(c.contractId, c);
      for (const p of c.stakeholders) indexed(this.activeByParty, p).set(c.contractId, c);
      events.push({ kind: 'created', nodeId: n.nodeId, contract: c });
    }
    events.sort((a, b) => a.nodeId - b.nodeId);
    const update: Update = {
      offset,
      updateId: input.updateId ?? newUpdateId(),
      commandId: input.commandId,
      workflowId: input.workflowId ?? '',
      userId: input.userId,
      submissionId: input.submissionId,
      actAs: input.actAs,
      recordTime: input.recordTime,
      effectiveAt: input.effectiveAt,
      synchronizerId: input.synchronizerId,
      events,
    };
    if (input.tree) update.tree = input.tree;
    this.log.push(update);
    this.byUpdateId.set(update.updateId, update);
    for (const e of events) {
      const at = { update, nodeId: e.nodeId };
      const known = this.byContract.get(e.contract.contractId) ?? {};
      if (e.kind === 'created') known.created = at;
      else known.archived = at;
      this.byContract.set(e.contract.contractId, known);
    }
    this.notify();
    return update;
  }

  /** Records a completion (success or rejection); a rejection takes an offset of its own. */
  complete(c: Omit<Completion, 'offset'> & { offset?: number }): Completion {
    const completion: Completion = { ...c, offset: c.offset ?? ++this.offset };
    // Kept in offset order (readers binary-search it), also if an earlier offset completes late.
    this.completionLog.splice(this.firstAfter(this.completionLog, completion.offset), 0, completion);
    this.notify();
    return completion;
  }

  updates(afterOffset = 0, upTo = Number.POSITIVE_INFINITY): Update[] {
    const out: Update[] = [];
    for (let i = this.firstAfter(this.log, afterOffset); i < this.log.length; i++) {
      const u = this.log[i] as Update;
      if (u.offset > upTo) break;
      out.push(u);
    }
    return out;
  }

  updateByOffset(offset: number): Update | undefined {
    const u = this.log[this.firstAfter(this.log, offset - 1)];
    return u?.offset === offset ? u : undefined;
  }

  /** The updates that created and archived a contract (either may be missing). */
  contractEvents(contractId: string): ContractEvents | undefined {
    return this.byContract.get(contractId);
  }

  updateById(updateId: string): Update | undefined {
    return this.byUpdateId.get(updateId);
  }

  /**
   * The record time of the synchronizer as of `offset`: that of the last update or
   * completion at or before it (undefined before the first).
   */
  recordTimeAt(offset: number): bigint | undefined {
    const u = this.log[this.firstAfter(this.log, offset) - 1];
    const c = this.completionLog[this.firstAfter(this.completionLog, offset) - 1];
    if (u === undefined) return c?.recordTime;
    if (c === undefined) return u.recordTime;
    return u.recordTime > c.recordTime ? u.recordTime : c.recordTime;
  }

  /** Index of the first entry of an offset-ordered log past `offset` (binary search). */
  private firstAfter(log: readonly { offset: number }[], offset: number): number {
    let lo = 0;
    let hi = log.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((log[mid] as { offset: number }).offset <= offset) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  completions(afterOffset: number): Completion[] {
    return this.completionLog.slice(this.firstAfter(this.completionLog, afterOffset));
  }

  /**
   * A restore from a backup taken at `keepUntil`, then re-synchronised: the
   * updates after it come back (same update ids, record times, contracts) under
   * new offsets, numbered in order from `keepUntil + gap + 1`. Offsets that only
   * a rejected command took are not replayed, so with `gap` 0 the later updates
   * move down (compaction). Completions of the replayed updates follow them.
   */
  renumberAfter(keepUntil: number, gap: number): { renumbered: number; droppedRejections: number } {
    if (!Number.isSafeInteger(keepUntil) || keepUntil < 0 || keepUntil > this.offset)
      throw new RangeError(`keepUntil must be an offset from 0 to the ledger end ${this.offset}`);
    if (!Number.isSafeInteger(gap) || gap < 0) throw new RangeError('gap must be a non-negative integer');
    const moved = new Map<number, number>();
    let next = keepUntil + gap;
    for (let i = this.firstAfter(this.log, keepUntil); i < this.log.length; i++) {
      const u = this.log[i] as Update;
      moved.set(u.offset, ++next);
      u.offset = next;
      for (const e of u.events) if (e.kind === 'created') e.contract.createdOffset = next;
    }
    const from = this.firstAfter(this.completionLog, keepUntil);
    const later = this.completionLog.splice(from);
    let droppedRejections = 0;
    for (const c of later) {
      const to = moved.get(c.offset);
      if (c.updateId === undefined || to === undefined) droppedRejections++;
      else this.completionLog.push({ ...c, offset: to });
    }
    this.offset = moved.size > 0 || gap > 0 ? next : keepUntil;
    this.notify();
    return { renumbered: moved.size, droppedRejections };
  }

  /**
   * A major upgrade: the history is gone and offsets start again at 1. Each
   * active contract (same id, same arguments) is imported as a transaction of
   * its own at `recordTime`, in creation order; archived contracts and
   * completions are forgotten. Returns the import updates.
   */
  restartFromImport(recordTime: bigint, synchronizerId: string): Update[] {
    const contracts = [...this.active.values()];
    this.log.length = 0;
    this.byUpdateId.clear();
    this.byContract.clear();
    this.archived.clear();
    this.completionLog.length = 0;
    this.offset = 0;
    const imports: Update[] = [];
    for (const c of contracts) {
      const offset = ++this.offset;
      c.createdOffset = offset;
      const update: Update = {
        offset,
        updateId: newUpdateId(),
        commandId: '',
        workflowId: '',
        userId: undefined,
        submissionId: undefined,
        actAs: [],
        recordTime,
        effectiveAt: c.createdAt,
        synchronizerId,
        events: [{ kind: 'created', nodeId: 0, contract: c }],
      };
      this.log.push(update);
      this.byUpdateId.set(update.updateId, update);
      this.byContract.set(c.contractId, { created: { update, nodeId: 0 } });
      imports.push(update);
    }
    this.notify();
    return imports;
  }

  /** Resolves when the ledger changes, after `ms`, or when `signal` aborts, whichever is first. */
  waitForChange(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.listeners.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.listeners.add(done);
      if (signal?.aborted) done();
      else signal?.addEventListener('abort', done, { once: true });
    });
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }
}

/** The index entry of `key`, created empty when missing. */
function indexed(index: Map<string, Map<string, Contract>>, key: string): Map<string, Contract> {
  let m = index.get(key);
  if (!m) {
    m = new Map();
    index.set(key, m);
  }
  return m;
}

/** A committed contract; its blob is encoded when first read (then kept). */
function contract(n: NewContract, createdAt: bigint, createdOffset: number): Contract {
  let blob: string | undefined;
  return {
    contractId: n.contractId,
    templateId: n.templateId,
    packageName: n.packageName,
    argument: n.argument,
    signatories: n.signatories,
    stakeholders: n.stakeholders,
    createdAt,
    createdOffset,
    get createdEventBlob() {
      blob ??= bytesToBase64(encodeValue(n.argument));
      return blob;
    },
    interfaces: n.interfaces ?? [],
  };
}

/** `Module:Entity` or `Entity` against an identifier. */
export function matchesEntity(id: Identifier, entity: string): boolean {
  const at = entity.lastIndexOf(':');
  if (at < 0) return id.entityName === entity;
  return id.moduleName === entity.slice(0, at) && id.entityName === entity.slice(at + 1);
}

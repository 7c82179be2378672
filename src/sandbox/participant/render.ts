/**
 * Ledger API JSON for what the sandbox ledger holds: CreatedEvent (with
 * interface views for Holding and TransferInstruction), ArchivedEvent,
 * ExercisedEvent (ledger-effects shape, from the executed nodes), JsTransaction,
 * active contracts and completions — filtered per party the way event formats
 * ask.
 */
import type { Identifier } from '../../hashing/model.js';
import { HOLDING_INTERFACE, type HoldingView, holdingView } from '../amulet.js';
import { isoMicros } from '../ledger/clock.js';
import type { Completion, Contract, LedgerTree, Update } from '../ledger/store.js';
import { identifierString, type Json, mapContractIds, str, valueToJson } from '../ledger/value-json.js';
import { interfacesOf } from '../network.js';
import { ID } from '../prepared/common.js';
import { transferOf } from './interpret.js';

/** One party's (or any party's) filter: which templates/interfaces, with blob or view. */
interface PartyFilter {
  wildcard: boolean;
  blob: boolean;
  templates: { id: string; blob: boolean }[];
  interfaces: { id: string; view: boolean; blob: boolean }[];
}

export interface EventFilter {
  byParty: Map<string, PartyFilter>;
  anyParty: PartyFilter | undefined;
}

type FiltersJson = {
  cumulative?: { identifierFilter?: Record<string, { value?: Record<string, unknown> } | object> }[];
};

function partyFilter(f: FiltersJson | undefined): PartyFilter {
  const pf: PartyFilter = { wildcard: false, blob: false, templates: [], interfaces: [] };
  const cumulative = f?.cumulative ?? [];
  if (cumulative.length === 0) pf.wildcard = true;
  for (const c of cumulative) {
    const idf = c.identifierFilter as Record<string, { value?: Record<string, unknown> }> | undefined;
    if (!idf || 'Empty' in idf) {
      pf.wildcard = true;
      continue;
    }
    const v = (k: string) => (idf[k]?.value ?? {}) as Record<string, unknown>;
    if (idf.WildcardFilter) {
      pf.wildcard = true;
      pf.blob ||= v('WildcardFilter').includeCreatedEventBlob === true;
    }
    if (idf.TemplateFilter)
      pf.templates.push({
        id: String(v('TemplateFilter').templateId),
        blob: v('TemplateFilter').includeCreatedEventBlob === true,
      });
    if (idf.InterfaceFilter)
      pf.interfaces.push({
        id: String(v('InterfaceFilter').interfaceId),
        view: v('InterfaceFilter').includeInterfaceView === true,
        blob: v('InterfaceFilter').includeCreatedEventBlob === true,
      });
  }
  return pf;
}

export function eventFilter(format: {
  filtersByParty?: Record<string, FiltersJson> | undefined;
  filtersForAnyParty?: FiltersJson | undefined;
}): EventFilter {
  const byParty = new Map<string, PartyFilter>();
  for (const [p, f] of Object.entries(format.filtersByParty ?? {})) byParty.set(p, partyFilter(f));
  return {
    byParty,
    anyParty: format.filtersForAnyParty ? partyFilter(format.filtersForAnyParty) : undefined,
  };
}

/** Does `ref` (`#pkg-name:M:E` or `pkgId:M:E`) name `id` (of a package called `packageName`)? */
export function refersTo(ref: string, id: Identifier, packageName: string): boolean {
  const [pkg, mod, ent] = ref.split(':');
  if (mod !== id.moduleName || ent !== id.entityName) return false;
  return pkg === id.packageId || pkg === `#${packageName}`;
}

const IFACE_PACKAGE: Record<string, string> = {
  [HOLDING_INTERFACE.packageId]: 'splice-api-token-holding-v1',
  [ID.transferInstructionIface.packageId]: 'splice-api-token-transfer-instruction-v1',
};

export interface Match {
  blob: boolean;
  views: Identifier[];
}

/** What a filter looks at of a contract: its template, package and interfaces. */
type Matchable = Pick<Contract, 'templateId' | 'packageName' | 'interfaces'>;

function matchOne(pf: PartyFilter, c: Matchable): Match | undefined {
  let matched = pf.wildcard;
  let blob = pf.wildcard && pf.blob;
  const views: Identifier[] = [];
  for (const t of pf.templates)
    if (refersTo(t.id, c.templateId, c.packageName)) {
      matched = true;
      blob ||= t.blob;
    }
  for (const f of pf.interfaces) {
    const iface = c.interfaces.find((i) => refersTo(f.id, i, IFACE_PACKAGE[i.packageId] ?? ''));
    if (iface) {
      matched = true;
      blob ||= f.blob;
      if (f.view) views.push(iface);
    }
  }
  return matched ? { blob, views } : undefined;
}

/** Which of `c`'s stakeholders see it under the filter, with what extras. */
export function matchContract(
  filter: EventFilter,
  c: Contract,
): { witnesses: string[]; match: Match } | undefined {
  const witnesses: string[] = [];
  let merged: Match | undefined;
  const add = (m: Match | undefined, party: string | undefined) => {
    if (!m) return;
    if (party) witnesses.push(party);
    merged = merged
      ? {
          blob: merged.blob || m.blob,
          views: [...merged.views, ...m.views.filter((v) => !merged!.views.includes(v))],
        }
      : m;
  };
  for (const [p, pf] of filter.byParty) if (c.stakeholders.includes(p)) add(matchOne(pf, c), p);
  if (filter.anyParty) {
    const m = matchOne(filter.anyParty, c);
    if (m) for (const p of c.stakeholders) if (!witnesses.includes(p)) witnesses.push(p);
    add(m, undefined);
  }
  return merged ? { witnesses: witnesses.sort(), match: merged } : undefined;
}

/**
 * What the filters of the requested parties among `witnesses` (and the any-party filter) ask
 * for of `c`: in the ledger-effects shape a party sees the nodes it witnesses, not only the
 * contracts it is a stakeholder of, and gets the interface views its own filter asks for.
 */
export function matchWitnessed(
  filter: EventFilter,
  witnesses: readonly string[],
  c: Matchable,
): Match | undefined {
  let merged: Match | undefined;
  const add = (m: Match | undefined) => {
    if (!m) return;
    merged = merged
      ? {
          blob: merged.blob || m.blob,
          views: [...merged.views, ...m.views.filter((v) => !merged!.views.includes(v))],
        }
      : m;
  };
  for (const p of witnesses) {
    const pf = filter.byParty.get(p);
    if (pf) add(matchOne(pf, c));
  }
  if (filter.anyParty) add(matchOne(filter.anyParty, c));
  return merged;
}

/** Amulet's Holding-view metadata keys: the round an amulet was created in and its holding fee per round. */
export const AMULET_CREATED_IN_ROUND = 'amulet.splice.lfdecentralizedtrust.org/created-in-round';
export const AMULET_RATE_PER_ROUND = 'amulet.splice.lfdecentralizedtrust.org/rate-per-round';

/** Daml's `show` of a Decimal: no trailing zeros, at least one decimal digit (`10.0`, `0.0000190259`). */
function showDecimal(d: string): string {
  return d.includes('.') ? d.replace(/0+$/, '').replace(/\.$/, '.0') : `${d}.0`;
}

/**
 * The Holding view's `meta` of an Amulet or LockedAmulet, as Splice's
 * `amuletMetadata` fills it: the view's `amount` is the initial amount, and
 * these two let a reader compute the holding fees accrued since.
 */
function amuletHoldingMeta(h: HoldingView): Record<string, string> {
  return {
    [AMULET_CREATED_IN_ROUND]: String(h.createdRound),
    [AMULET_RATE_PER_ROUND]: showDecimal(h.rate),
  };
}

function interfaceView(c: Contract, iface: Identifier, dso: string): Json {
  const status = { code: 0, message: '', details: [] };
  const interfaceId = identifierString(iface);
  if (iface.entityName === 'Holding') {
    const h = holdingView(c, 0n);
    const lock: Json = h?.locked
      ? {
          holders: h.lockHolders,
          expiresAt: h.lockExpiresAt === undefined ? null : isoMicros(h.lockExpiresAt),
          expiresAfter: null,
          context: null,
        }
      : null;
    return {
      interfaceId,
      viewStatus: status,
      viewValue: {
        owner: h?.owner ?? '',
        instrumentId: { admin: dso, id: 'Amulet' },
        amount: h?.initialAmount ?? '0.0000000000',
        lock,
        meta: { values: h ? amuletHoldingMeta(h) : {} },
      },
      implementationPackageId: c.templateId.packageId,
    };
  }
  if (iface.entityName === 'TransferInstruction') {
    const t = transferOf(c);
    return {
      interfaceId,
      viewStatus: status,
      viewValue: {
        originalInstructionCid: null,
        transfer: {
          sender: t.sender,
          receiver: t.receiver,
          amount: t.amount,
          instrumentId: { admin: t.admin, id: t.instrument },
          requestedAt: isoMicros(t.requestedAt),
          executeBefore: isoMicros(t.executeBefore),
          inputHoldingCids: t.inputHoldingCids,
          meta: { values: t.meta },
        },
        status: { tag: 'TransferPendingReceiverAcceptance', value: {} },
        meta: { values: {} },
      },
      implementationPackageId: c.templateId.packageId,
    };
  }
  return { interfaceId, viewStatus: status, viewValue: {}, implementationPackageId: c.templateId.packageId };
}

export function createdEvent(
  c: Contract,
  offset: number,
  nodeId: number,
  witnesses: string[],
  match: Match,
  dso: string,
): Json {
  const ev: Record<string, Json> = {
    offset,
    nodeId,
    contractId: c.contractId,
    templateId: identifierString(c.templateId),
    contractKey: null,
    createArgument: valueToJson(c.argument),
    interfaceViews: match.views.map((v) => interfaceView(c, v, dso)),
    witnessParties: witnesses,
    signatories: c.signatories,
    observers: c.stakeholders.filter((p) => !c.signatories.includes(p)),
    createdAt: isoMicros(c.createdAt),
    packageName: c.packageName,
    representativePackageId: c.templateId.packageId,
    acsDelta: true,
  };
  if (match.blob) ev.createdEventBlob = c.createdEventBlob;
  return ev;
}

/** Events of an update under a filter, ACS-delta shape (creates and archives). */
function acsDeltaEvents(u: Update, filter: EventFilter, dso: string): Json[] {
  const out: Json[] = [];
  for (const e of u.events) {
    const m = matchContract(filter, e.contract);
    if (!m) continue;
    if (e.kind === 'created')
      out.push({ CreatedEvent: createdEvent(e.contract, u.offset, e.nodeId, m.witnesses, m.match, dso) });
    else out.push({ ArchivedEvent: archivedEvent(e.contract, u.offset, e.nodeId, m.witnesses, m.match) });
  }
  return out;
}

export function archivedEvent(
  c: Contract,
  offset: number,
  nodeId: number,
  witnesses: string[],
  match: Match,
): Json {
  return {
    offset,
    nodeId,
    contractId: c.contractId,
    templateId: identifierString(c.templateId),
    witnessParties: witnesses,
    packageName: c.packageName,
    implementedInterfaces: match.views.map(identifierString),
  };
}

/** Ledger-effects shape: creates and exercises of the executed nodes a requested party witnesses. */
function ledgerEffectsEvents(u: Update, filter: EventFilter, dso: string): Json[] {
  const parties = [...filter.byParty.keys()];
  if (!u.tree) return automationEffects(u, filter, parties, dso);
  const tree = u.tree;
  const rewrite = (cid: string) => tree.ids.get(cid) ?? cid;
  const byId = new Map(tree.nodes.map((n) => [n.nodeId, n.node]));
  const lastDescendant = (id: string): number => {
    const n = byId.get(id);
    if (n?.type !== 'exercise' || n.children.length === 0) return Number(id);
    return lastDescendant(n.children[n.children.length - 1]!);
  };
  // A node's witnesses: its informees (stakeholders, and the actors of an exercise) and those of
  // every action above it, as Canton reports them.
  const informed = new Map<string, Set<string>>();
  const inform = (id: string, above: ReadonlySet<string>) => {
    const n = byId.get(id);
    if (n?.type !== 'create' && n?.type !== 'exercise') return;
    const own = new Set([...above, ...n.stakeholders, ...(n.type === 'exercise' ? n.actingParties : [])]);
    informed.set(id, own);
    if (n.type === 'exercise') for (const c of n.children) inform(c, own);
  };
  for (const r of tree.roots) inform(r, new Set());
  const out: Json[] = [];
  for (const { nodeId, node } of tree.nodes) {
    if (node.type !== 'create' && node.type !== 'exercise') continue;
    const all = [...(informed.get(nodeId) ?? node.stakeholders)].sort();
    const witnesses = filter.anyParty ? all : all.filter((p) => parties.includes(p));
    if (witnesses.length === 0) continue;
    if (node.type === 'create') {
      const created = u.events.find(
        (e) => e.kind === 'created' && e.contract.contractId === rewrite(node.contractId),
      );
      // The interface views (and blob) the witnesses' filters ask for. A contract archived in the
      // same transaction is not in the store's events: its views come from the node itself.
      const contract = created?.contract ?? transientContract(node, u, rewrite);
      const m = matchWitnessed(filter, witnesses, contract);
      out.push({
        CreatedEvent: {
          offset: u.offset,
          nodeId: Number(nodeId),
          contractId: rewrite(node.contractId),
          templateId: identifierString(node.templateId),
          contractKey: null,
          createArgument: valueToJson(mapContractIds(node.argument, rewrite)),
          interfaceViews: m ? m.views.map((v) => interfaceView(contract, v, dso)) : [],
          witnessParties: witnesses,
          signatories: node.signatories,
          observers: node.stakeholders.filter((p) => !node.signatories.includes(p)),
          createdAt: isoMicros(u.effectiveAt),
          packageName: node.packageName,
          representativePackageId: node.templateId.packageId,
          acsDelta: created !== undefined,
          ...(created && m?.blob ? { createdEventBlob: created.contract.createdEventBlob } : {}),
        },
      });
    } else {
      const ev: Record<string, Json> = {
        offset: u.offset,
        nodeId: Number(nodeId),
        contractId: rewrite(node.contractId),
        templateId: identifierString(node.templateId),
        choice: node.choiceId,
        choiceArgument: valueToJson(mapContractIds(node.chosenValue, rewrite)),
        actingParties: node.actingParties,
        consuming: node.consuming,
        witnessParties: witnesses,
        lastDescendantNodeId: lastDescendant(nodeId),
        exerciseResult: node.exerciseResult
          ? valueToJson(mapContractIds(node.exerciseResult, rewrite))
          : null,
        packageName: node.packageName,
        // The exercised contract's interfaces that the witnesses' filters ask views of.
        implementedInterfaces: (
          matchWitnessed(filter, witnesses, {
            templateId: node.templateId,
            packageName: node.packageName,
            interfaces: interfacesOf(node.templateId),
          })?.views ?? []
        ).map(identifierString),
        acsDelta: node.consuming && !tree.ids.has(node.contractId),
      };
      if (node.interfaceId) ev.interfaceId = identifierString(node.interfaceId);
      out.push({ ExercisedEvent: ev });
    }
  }
  return out;
}

/**
 * Ledger effects of an update the network's own automation committed (no
 * executed tree: rounds, taps, expiries): each archive as the consuming
 * `Archive` exercise Canton shows for it, each create as a created event.
 */
function automationEffects(u: Update, filter: EventFilter, parties: string[], dso: string): Json[] {
  const out: Json[] = [];
  for (const e of u.events) {
    const c = e.contract;
    const witnesses = filter.anyParty
      ? c.stakeholders
      : c.stakeholders.filter((p) => parties.includes(p)).sort();
    if (witnesses.length === 0) continue;
    const views = matchWitnessed(filter, witnesses, c)?.views ?? [];
    if (e.kind === 'created')
      out.push({
        CreatedEvent: {
          offset: u.offset,
          nodeId: e.nodeId,
          contractId: c.contractId,
          templateId: identifierString(c.templateId),
          contractKey: null,
          createArgument: valueToJson(c.argument),
          interfaceViews: views.map((v) => interfaceView(c, v, dso)),
          witnessParties: witnesses,
          signatories: c.signatories,
          observers: c.stakeholders.filter((p) => !c.signatories.includes(p)),
          createdAt: isoMicros(u.effectiveAt),
          packageName: c.packageName,
          representativePackageId: c.templateId.packageId,
          acsDelta: true,
        },
      });
    else
      out.push({
        ExercisedEvent: {
          offset: u.offset,
          nodeId: e.nodeId,
          contractId: c.contractId,
          templateId: identifierString(c.templateId),
          choice: 'Archive',
          choiceArgument: {},
          actingParties: c.signatories,
          consuming: true,
          witnessParties: witnesses,
          lastDescendantNodeId: e.nodeId,
          exerciseResult: {},
          packageName: c.packageName,
          implementedInterfaces: views.map(identifierString),
          acsDelta: true,
        },
      });
  }
  return out;
}

/** A contract created and archived within `u`, as its create node describes it (it never reached the store). */
function transientContract(
  node: Extract<LedgerTree['nodes'][number]['node'], { type: 'create' }>,
  u: Update,
  rewrite: (cid: string) => string,
): Contract {
  return {
    contractId: rewrite(node.contractId),
    templateId: node.templateId,
    packageName: node.packageName,
    argument: mapContractIds(node.argument, rewrite),
    signatories: node.signatories,
    stakeholders: node.stakeholders,
    createdAt: u.effectiveAt,
    createdOffset: u.offset,
    createdEventBlob: '',
    interfaces: interfacesOf(node.templateId),
  };
}

export function jsTransaction(
  u: Update,
  filter: EventFilter,
  shape: 'TRANSACTION_SHAPE_ACS_DELTA' | 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
  dso: string,
): Json {
  const tx: Record<string, Json> = {
    updateId: u.updateId,
    commandId: u.commandId,
    workflowId: u.workflowId,
    effectiveAt: isoMicros(u.effectiveAt),
    events:
      shape === 'TRANSACTION_SHAPE_LEDGER_EFFECTS'
        ? ledgerEffectsEvents(u, filter, dso)
        : acsDeltaEvents(u, filter, dso),
    offset: u.offset,
    synchronizerId: u.synchronizerId,
    recordTime: isoMicros(u.recordTime),
  };
  return tx;
}

export function completionJson(c: Completion): Json {
  const out: Record<string, Json> = {
    commandId: c.commandId,
    status: {
      code: c.status.code,
      message: c.status.message,
      details: (c.status.details ?? []).map((d) => ({ ...d, unknownFields: { fields: {} } })),
    },
    userId: c.userId,
    actAs: c.actAs,
    submissionId: c.submissionId,
    offset: c.offset,
    synchronizerTime: { synchronizerId: c.synchronizerId, recordTime: isoMicros(c.recordTime) },
  };
  if (c.updateId !== undefined) out.updateId = c.updateId;
  return out;
}

/** The owner in a Holding view (tests and scan use it). */
export const ownerOf = (c: Contract) => str(c.argument, 'owner');

/**
 * One simulated Canton network: the identities (DSO, validator operator,
 * participant, synchronizer), the ledger store, the topology state of external
 * parties, users and rights, prepared transactions awaiting execution, and the
 * automation the real network runs on its own (mining rounds advancing on a
 * timer, the validator accepting preapproval proposals, SV automation sending
 * TransferCommands, expiry of transfer instructions). The HTTP servers are thin
 * views over this object.
 */
import { randomBytes } from 'node:crypto';
import type { Identifier, PreparedTransaction } from '../hashing/model.js';
import {
  amuletContract,
  amuletRulesContract,
  ansEntryContract,
  ansRulesContract,
  externalRulesContract,
  HOLDING_INTERFACE,
  newRoundContract,
  openRounds,
} from './amulet.js';
import { DeduplicationTable } from './checks/dedup.js';
import { SandboxClock } from './ledger/clock.js';
import { builtinNamespace, newUpdateId, suffixContractId } from './ledger/ids.js';
import type { ExternalParty } from './ledger/parties.js';
import { type Contract, LedgerStore, type NewContract, type Update } from './ledger/store.js';
import { mapContractIds } from './ledger/value-json.js';
import { type AnsConfig, DEFAULT_ANS_CONFIG } from './prepared/ans.js';
import { ID, mintContractId } from './prepared/common.js';

export interface SandboxNetworkOptions {
  /** Seeds the built-in identities' namespaces (default: random per start). */
  seed?: string;
  /** How often a new mining round opens (and the oldest of the two open ones closes). Default 10 minutes. */
  roundIntervalMs?: number;
  /** Amulet the validator operator holds at start. Default 1,000,000. */
  validatorFunds?: string;
  /** Label of the name service (`alice.unverified.<label>`). Default `cns`. */
  ansLabel?: string;
  /**
   * The name service's AnsRules configuration: entry fee in USD (default
   * '1.0'), entry lifetime (default 90 days), renewal window (default 30
   * days), the subscription description's prefix (default 'CNS entry: ').
   */
  ans?: {
    entryFee?: string;
    entryLifetimeMs?: number;
    renewalDurationMs?: number;
    descriptionPrefix?: string;
  };
}

function ansConfigOf(o: SandboxNetworkOptions['ans'] = {}): AnsConfig {
  const us = (ms: number | undefined, dflt: bigint, what: string) => {
    if (ms === undefined) return dflt;
    if (!Number.isSafeInteger(ms) || ms <= 0)
      throw new RangeError(`ans.${what} must be a positive whole number of ms`);
    return BigInt(ms) * 1000n;
  };
  const fee = o.entryFee ?? DEFAULT_ANS_CONFIG.entryFee;
  if (!/^(0|[1-9]\d{0,27})(\.\d{1,10})?$/.test(fee) || /^0(\.0*)?$/.test(fee))
    throw new RangeError(`ans.entryFee must be a positive decimal with at most 10 decimals, got ${fee}`);
  return {
    entryFee: fee,
    entryLifetimeUs: us(o.entryLifetimeMs, DEFAULT_ANS_CONFIG.entryLifetimeUs, 'entryLifetimeMs'),
    renewalDurationUs: us(o.renewalDurationMs, DEFAULT_ANS_CONFIG.renewalDurationUs, 'renewalDurationMs'),
    descriptionPrefix: o.descriptionPrefix ?? DEFAULT_ANS_CONFIG.descriptionPrefix,
  };
}

/** A user of the participant (Ledger API) and its rights. */
export interface SandboxUser {
  id: string;
  primaryParty: string | undefined;
  actAs: Set<string>;
  readAs: Set<string>;
  executeAs: Set<string>;
  admin: boolean;
  /**
   * Reached only with its bearer token: a request without a token may not name it as its
   * userId (as on a participant with authentication on, where every request carries one).
   */
  tokenOnly?: boolean;
  /** CanReadAsAnyParty: reads as every party, also with a party-wildcard filter. */
  readAsAnyParty?: boolean;
  /** CanExecuteAsAnyParty: executes interactive submissions of every party. */
  executeAsAnyParty?: boolean;
}

/** A prepared transaction the participant handed out, keyed by its hash. */
export interface Preparation {
  prepared: PreparedTransaction;
  scheme: 'v2' | 'v3';
  hashHex: string;
  userId: string;
  /** Runs after the transaction committed (scan history, automation triggers). */
  onCommit?: (update: Update, ids: ReadonlyMap<string, string>) => void;
}

export const VALIDATOR_USER = 'validator-operator';
export const LEDGER_API_USER = 'sandbox-user';

export class SandboxNetwork {
  readonly clock = new SandboxClock();
  readonly store = new LedgerStore();
  readonly seed: string;
  readonly namespace: string;
  readonly dso: string;
  readonly validatorParty: string;
  /** A party hosted here that tampered transactions pay instead of the intended receiver. */
  readonly mallory: string;
  readonly participantUid: string;
  readonly synchronizerId: string;
  readonly synchronizerAlias = 'global';
  readonly ansLabel: string;
  /** The configuration the network's AnsRules is created with. */
  readonly ansConfig: AnsConfig;
  /** Splice's migration id: 0, one more after each major upgrade. */
  migrationId = 0;
  readonly parties = new Map<string, ExternalParty>();
  readonly users = new Map<string, SandboxUser>();
  readonly preparations = new Map<string, Preparation>();
  /** Change ids of accepted submissions (command deduplication). */
  readonly dedup = new DeduplicationTable();
  /** Parties hosted on the participant that are not external (DSO, validator operator). */
  readonly localParties = new Set<string>();
  readonly roundIntervalMs: number;
  private timers: NodeJS.Timeout[] = [];
  private readonly commitHooks: ((u: Update) => void)[] = [];

  constructor(opts: SandboxNetworkOptions = {}) {
    this.seed = opts.seed ?? randomBytes(16).toString('hex');
    this.namespace = builtinNamespace('sv', this.seed);
    this.dso = `DSO::${builtinNamespace('dso', this.seed)}`;
    const validatorNs = builtinNamespace('validator', this.seed);
    this.validatorParty = `sandbox-validator-1::${validatorNs}`;
    this.participantUid = `PAR::sandbox-participant-1::${validatorNs}`;
    this.mallory = `mallory::${validatorNs}`;
    this.synchronizerId = `global-domain::${this.namespace}`;
    this.ansLabel = opts.ansLabel ?? 'cns';
    this.ansConfig = ansConfigOf(opts.ans);
    this.roundIntervalMs = opts.roundIntervalMs ?? 600_000;
    this.localParties.add(this.dso).add(this.validatorParty).add(this.mallory);
    this.addUser(VALIDATOR_USER, this.validatorParty, true);
    this.users.get(VALIDATOR_USER)!.actAs.add(this.validatorParty);
    this.addUser(LEDGER_API_USER, undefined, false);
    this.bootstrap(opts.validatorFunds ?? '1000000');
  }

  /** participant id without the `PAR::` prefix, as generate-topology and hosting lists print it. */
  get participantId(): string {
    return this.participantUid.slice('PAR::'.length);
  }

  addUser(id: string, primaryParty: string | undefined, admin: boolean): SandboxUser {
    const u: SandboxUser = {
      id,
      primaryParty,
      actAs: new Set(),
      readAs: new Set(),
      executeAs: new Set(),
      admin,
    };
    this.users.set(id, u);
    return u;
  }

  /** Starts the timers (rounds, automation sweeps). */
  start(): void {
    if (this.timers.length > 0) return;
    const t = setInterval(() => this.advanceRound(), this.roundIntervalMs);
    t.unref();
    this.timers.push(t);
    const sweep = setInterval(() => this.sweep(), 1000);
    sweep.unref();
    this.timers.push(sweep);
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }

  onCommit(hook: (u: Update) => void): void {
    this.commitHooks.push(hook);
  }

  // ---- contracts the network itself maintains -------------------------------------------------

  amuletRules(): Contract {
    return this.store.activeContracts('Splice.AmuletRules:AmuletRules')[0]!;
  }

  externalPartyAmuletRules(): Contract {
    return this.store.activeContracts('Splice.ExternalPartyAmuletRules:ExternalPartyAmuletRules')[0]!;
  }

  /** The DSO's AnsRules (the name service's configuration). */
  ansRules(): Contract {
    return this.store.activeContracts('Splice.Ans:AnsRules')[0]!;
  }

  /** The newest open round: what choice contexts hand out. */
  latestRound() {
    const rs = openRounds(this.store);
    return rs[rs.length - 1]!;
  }

  /** Opens the next round and closes the oldest of the open ones (two stay open). */
  advanceRound(): Update {
    const rs = openRounds(this.store);
    const now = this.clock.now();
    const next = (rs[rs.length - 1]?.number ?? -1n) + 1n;
    const tickUs = BigInt(this.roundIntervalMs) * 1000n;
    return this.commitInternal({
      archives: rs.length >= 2 ? [rs[0]!.contractId] : [],
      creates: [newRoundContract(this.dso, next, now, tickUs)],
      commandId: `sandbox-round-${next}`,
    });
  }

  /** Creates contracts and archives others as the DSO/validator automation (no external signature). */
  commitInternal(x: { archives: string[]; creates: NewContract[]; commandId: string }): Update {
    const now = this.clock.now();
    const update = this.store.commit({
      commandId: x.commandId,
      actAs: [this.dso],
      recordTime: now,
      effectiveAt: now,
      synchronizerId: this.synchronizerId,
      archives: x.archives.map((contractId, i) => ({ contractId, nodeId: i })),
      creates: x.creates.map((c, i) => ({ ...c, nodeId: x.archives.length + i })),
    });
    for (const h of this.commitHooks) h(update);
    return update;
  }

  /**
   * Commits an executed prepared transaction: consuming exercises on existing
   * contracts archive them, creates that survive the transaction become active
   * with suffixed ids (references inside arguments are rewritten). Throws
   * InactiveContractError when an input is no longer active.
   */
  commitPrepared(
    p: PreparedTransaction,
    meta: { userId: string; submissionId: string },
  ): {
    update: Update;
    ids: Map<string, string>;
  } {
    const nodes = p.transaction.nodes;
    const created = new Set<string>();
    const consumed: { contractId: string; nodeId: number }[] = [];
    for (const n of nodes) {
      if (n.node.type === 'create') created.add(n.node.contractId);
      if (n.node.type === 'exercise' && n.node.consuming)
        consumed.push({ contractId: n.node.contractId, nodeId: Number(n.nodeId) });
    }
    const consumedIds = new Set(consumed.map((c) => c.contractId));
    const updateId = newUpdateId();
    const ids = new Map<string, string>();
    for (const c of created) ids.set(c, suffixContractId(c, updateId));
    const rewrite = (cid: string) => ids.get(cid) ?? cid;
    const creates: NewContract[] = [];
    for (const n of nodes) {
      const node = n.node;
      if (node.type !== 'create' || consumedIds.has(node.contractId)) continue;
      creates.push({
        contractId: rewrite(node.contractId),
        templateId: node.templateId,
        packageName: node.packageName,
        argument: mapContractIds(node.argument, rewrite),
        signatories: node.signatories,
        stakeholders: node.stakeholders,
        interfaces: interfacesOf(node.templateId),
        nodeId: Number(n.nodeId),
      });
    }
    const archives = consumed.filter((c) => !created.has(c.contractId));
    const now = this.clock.now();
    const update = this.store.commit({
      updateId,
      commandId: p.metadata.submitterInfo.commandId,
      userId: meta.userId,
      submissionId: meta.submissionId,
      actAs: p.metadata.submitterInfo.actAs,
      recordTime: now,
      effectiveAt: now,
      synchronizerId: p.metadata.synchronizerId,
      archives,
      creates,
      tree: { roots: p.transaction.roots, nodes, ids },
    });
    for (const h of this.commitHooks) h(update);
    return { update, ids };
  }

  /** Contract ids a prepared transaction reads that no longer are active. */
  inactiveInputs(p: PreparedTransaction): string[] {
    const created = new Set(
      p.transaction.nodes.flatMap((n) => (n.node.type === 'create' ? [n.node.contractId] : [])),
    );
    const used = new Set<string>(p.metadata.inputContracts.map((c) => c.contract.contractId));
    for (const n of p.transaction.nodes)
      if (n.node.type === 'exercise' || n.node.type === 'fetch') used.add(n.node.contractId);
    return [...used].filter((c) => !created.has(c) && !this.store.get(c));
  }

  /** Fresh node seeds for a transaction (32 random bytes per node). */
  seeds(): (nodeId: number) => Uint8Array {
    const cache = new Map<number, Uint8Array>();
    return (nodeId) => {
      let s = cache.get(nodeId);
      if (!s) {
        s = new Uint8Array(randomBytes(32));
        cache.set(nodeId, s);
      }
      return s;
    };
  }

  /** An unsuffixed contract id of the form the builders mint (for tests that need one). */
  static unsuffixed(seed: Uint8Array): string {
    return mintContractId(seed);
  }

  /** Gives `party` a fresh Amulet (DevNet tap; the sandbox's only source of funds besides the genesis mint). */
  tap(party: string, amount: string): Contract {
    const round = this.latestRound().number;
    const c = amuletContract(this.dso, party, amount, round);
    const update = this.commitInternal({
      archives: [],
      creates: [c],
      commandId: `sandbox-tap-${newUpdateId()}`,
    });
    return update.events[0]!.contract;
  }

  /** Periodic automation: expire what has expired. Subclasses/hooks extend it. */
  sweep(): void {
    for (const s of this.sweepers) s(this.clock.now());
  }

  private readonly sweepers: ((now: bigint) => void)[] = [];
  onSweep(f: (now: bigint) => void): void {
    this.sweepers.push(f);
  }

  private bootstrap(validatorFunds: string): void {
    const now = this.clock.now();
    const tickUs = BigInt(this.roundIntervalMs) * 1000n;
    const entryExpiry = now + 90n * 86_400_000_000n;
    this.commitInternal({
      archives: [],
      commandId: 'sandbox-genesis',
      creates: [
        amuletRulesContract(this.dso),
        externalRulesContract(this.dso),
        ansRulesContract(this.dso, this.ansConfig),
        newRoundContract(this.dso, 0n, now, tickUs),
        newRoundContract(this.dso, 1n, now, tickUs),
        ansEntryContract(this.dso, this.dso, `dso.${this.ansLabel}`, entryExpiry),
        ansEntryContract(
          this.dso,
          this.validatorParty,
          `sandbox-validator-1.unverified.${this.ansLabel}`,
          entryExpiry,
        ),
      ],
    });
    this.commitInternal({
      archives: [],
      commandId: 'sandbox-genesis-mint',
      creates: [amuletContract(this.dso, this.validatorParty, validatorFunds, 1n)],
    });
  }
}

/** Interfaces the sandbox serves views for, by template. */
export function interfacesOf(templateId: Identifier): Identifier[] {
  const name = `${templateId.moduleName}:${templateId.entityName}`;
  if (name === 'Splice.Amulet:Amulet' || name === 'Splice.Amulet:LockedAmulet') return [HOLDING_INTERFACE];
  if (name === 'Splice.AmuletTransferInstruction:AmuletTransferInstruction')
    return [ID.transferInstructionIface];
  if (name === 'Splice.ExternalPartyAmuletRules:ExternalPartyAmuletRules') return [ID.transferFactory];
  return [];
}

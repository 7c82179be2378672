/**
 * The policy engine: the service's `PolicyGate`. It holds the policy in
 * force, decides on every verified transaction, reserves against the limits,
 * opens approval requests and counts approvals — each approval's signature
 * verified, right before the decision, against a credential the service
 * itself sealed — and brings new policy versions into force.
 *
 * Trust: the database is not trusted to say what is allowed. The policy in
 * force and every approver credential carry the service's seal (an Ed25519
 * signature by the seal key, held by the signer contract like every other
 * key); an approval carries the approver's signature over the request's
 * statement. A row someone wrote into the database without those keys never
 * counts: a policy version without a valid seal is not used, a credential
 * without one verifies nothing, and an approval that does not verify against
 * its credential for this exact statement is ignored.
 *
 * Decision (one database round trip when limits apply): evaluate the rules
 * (evaluate.ts) → reserve the transaction's amounts under a lock
 * (store `policy_reserve`, which also returns the version in force, so a
 * version changed by another instance is noticed) → decide. An `approve`
 * outcome opens (or finds) the subject's approval request: the statement
 * says what exactly is approved, from what was verified, never from the
 * caller's JSON. A transaction prepared again with the same decoded intent
 * finds the same request; any difference opens a new one.
 *
 * One file on purpose: it is one class around one piece of state (the sealed
 * policy in force, reloaded when another instance changes it), and every method
 * (decide, answer, replace, the credentials) reads and guards that state; the
 * pure parts are already beside it (evaluate.ts, approval.ts, document.ts,
 * webauthn.ts).
 */
import { randomUUID } from 'node:crypto';
import { KeyError } from '../keys/backend.js';
import type { Signer } from '../keys/signer.js';
import { canonicalJson, type Json } from '../store/canonical.js';
import type { Store } from '../store/index.js';
import type { ApprovalRequest, Credential } from '../store/repos/approvals.js';
import type { PolicyVersion } from '../store/repos/policy.js';
import {
  type ApprovalStatement,
  type Approver,
  approvalMessage,
  credentialSealMessage,
  passkeyOf,
  policySealMessage,
  satisfies,
  statementHash,
  verifyApproval,
} from './approval.js';
import { ALLOW_ALL, durationMs, type LoadedPolicy, type PolicyDocument, parsePolicy } from './document.js';
import {
  type Decision,
  decide,
  evaluate,
  type Facts,
  type LimitCheck,
  namesIn,
  type PolicyAction,
  policyActions,
  type Requirement,
  type Usage,
} from './evaluate.js';
import {
  ALLOW_ALL_REF,
  type PolicyDecision,
  type PolicyGate,
  type PolicyRef,
  type PolicyRequest,
} from './hook.js';

/** The policy in force, as the engine holds it. */
export interface ActivePolicy {
  version: number;
  sha256: string;
  doc: PolicyDocument;
  source: 'file' | 'api' | 'builtin';
  /** Whether the document has limits (reservations to settle) and `newReceiver` conditions. */
  limited: boolean;
  asksNewReceiver: boolean;
}

const BUILTIN: ActivePolicy = {
  version: 0,
  sha256: '',
  doc: ALLOW_ALL.doc,
  source: 'builtin',
  limited: false,
  asksNewReceiver: false,
};

/**
 * What is in force when the database shows no version this service can trust
 * although it sealed one before (the version in force cleared, or an older
 * version put back): nothing is signed until a trusted version is in force.
 */
const NO_TRUSTED_POLICY: ActivePolicy = {
  version: 0,
  sha256: '',
  doc: parsePolicy(`version: 1
name: no trusted policy version in force
default: deny
rules:
  - id: no-trusted-policy
    decision: deny
    reason: no policy version carrying this service's seal is in force (the database was changed); nothing is signed until an admin puts a policy in force (PUT /v1/policy or policy.file)
`).doc,
  source: 'builtin',
  limited: false,
  asksNewReceiver: false,
};

function active(v: Pick<PolicyVersion, 'version' | 'sha256' | 'source'>, doc: PolicyDocument): ActivePolicy {
  return {
    version: v.version,
    sha256: v.sha256,
    doc,
    source: v.source,
    limited: (doc.limits ?? []).length > 0,
    asksNewReceiver: JSON.stringify(doc).includes('"newReceiver"'),
  };
}

export interface PolicyEngineOptions {
  store: Store;
  signer: Signer;
  /** Label of the seal key (created as an Ed25519 file key on first use when absent). */
  sealKey?: string;
  /** ANS name → party (Scan), for names in receiver lists; undefined when it does not resolve. */
  resolveName?: (name: string) => Promise<string | undefined>;
  now?: () => Date;
  /** How long the engine trusts its copy of the version in force before it looks again (ms). */
  refreshMs?: number;
  logger?: { warn(o: object, m: string): void; info?(o: object, m: string): void };
  /** Told of each decision (metrics). */
  observe?: (outcome: PolicyDecision['outcome'], rule: string) => void;
  /** Told when an approval request was approved in full (the service resumes what waited for it). */
  onApproved?: (request: ApprovalRequest) => void;
}

export const DEFAULT_SEAL_KEY = 'approvals-seal';

/** Why something cannot be done: the routes answer it with `status`. */
export class PolicyEngineError extends Error {
  override readonly name = 'PolicyEngineError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The part of a statement that two preparations of the same request share (no id, no expiry). */
function statementContent(s: Omit<ApprovalStatement, 'request' | 'expiresAt'>): string {
  const { v, subject, party, entryPoint, requester, actions, policy, requirement } = s;
  return canonicalJson({ v, subject, party, entryPoint, requester, actions, policy, requirement });
}

function sameContent(a: ApprovalStatement, b: Omit<ApprovalStatement, 'request' | 'expiresAt'>): boolean {
  return statementContent(a) === statementContent(b);
}

const NAME_TTL_MS = 60_000;

/** What the store reserves for a decision: its subject and each limit's check. */
function reservation(
  p: ActivePolicy,
  req: PolicyRequest,
  actions: readonly PolicyAction[],
  limits: readonly LimitCheck[],
) {
  return {
    subject: req.subject,
    policyVersion: p.version,
    party: req.partyId,
    ...(req.caller ? { caller: req.caller.id } : {}),
    ...(actions[0]?.receiver ? { receiver: actions[0].receiver } : {}),
    checks: limits.map((l) => ({
      key: l.key,
      limit: l.limit,
      windowMs: l.windowMs,
      ...(l.maxAmount !== undefined ? { maxAmount: l.maxAmount } : {}),
      ...(l.maxCount !== undefined ? { maxCount: l.maxCount } : {}),
      adding: l.adding,
    })),
  };
}

export class PolicyEngine implements PolicyGate {
  private active: ActivePolicy = BUILTIN;
  /** The newest version this instance verified: an older one is never used again (a rollback). */
  private highest = 0;
  private checkedAt = 0;
  private sealPublic: Uint8Array | undefined;
  private readonly names = new Map<string, { party: string | undefined; at: number }>();
  private readonly store: Store;
  private readonly now: () => Date;
  private readonly refreshMs: number;
  readonly sealKey: string;

  constructor(private readonly opts: PolicyEngineOptions) {
    this.store = opts.store;
    this.now = opts.now ?? (() => new Date());
    this.refreshMs = opts.refreshMs ?? 2000;
    this.sealKey = opts.sealKey ?? DEFAULT_SEAL_KEY;
  }

  // ---- the seal ------------------------------------------------------------------------------

  /** The seal key's public key (created on first use when the keystore has none). */
  private async sealPublicKey(create: boolean): Promise<Uint8Array | undefined> {
    if (this.sealPublic) return this.sealPublic;
    const { signer } = this.opts;
    if (!(await signer.has(this.sealKey))) {
      if (!create) return undefined;
      try {
        await signer.generate({ label: this.sealKey, scheme: 'ed25519', backend: 'file' });
        this.opts.logger?.info?.(
          { key: this.sealKey },
          'created the seal key for policies and approver keys',
        );
      } catch (e) {
        // Another process sharing the keystore (serve --workers) created it meanwhile: use that one.
        if (!(e instanceof KeyError && e.code === 'key_exists')) throw e;
      }
    }
    const d = await signer.describe(this.sealKey);
    if (d.scheme !== 'ed25519')
      throw new PolicyEngineError(
        500,
        'seal_key_invalid',
        `the seal key ${this.sealKey} is ${d.scheme}; it must be an Ed25519 key`,
      );
    this.sealPublic = d.publicKeyRaw;
    return this.sealPublic;
  }

  private async seal(message: Uint8Array): Promise<string> {
    await this.sealPublicKey(true);
    const out = await this.opts.signer.sign(this.sealKey, message);
    return Buffer.from(out.bytes).toString('base64');
  }

  private async sealValid(message: Uint8Array, seal: string | null | undefined): Promise<boolean> {
    if (!seal) return false;
    const pub = await this.sealPublicKey(false).catch(() => undefined);
    if (!pub) return false;
    // The one strict Ed25519 check the approvals use (canonical base64, 64 bytes, RFC 8032).
    return verifyApproval({ kind: 'ed25519', publicKey: Buffer.from(pub).toString('hex') }, message, seal);
  }

  // ---- the version in force ------------------------------------------------------------------

  /**
   * At start: the configured file (if any) and the database agree on the
   * version in force. A file not yet recorded (or changed since) comes into
   * force as a new version: whoever edits the service's configuration on its
   * host is trusted like its keystore. Without a file, the database's version
   * in force is used when its seal verifies; else the built-in allow-all.
   */
  async start(file?: LoadedPolicy): Promise<ActivePolicy> {
    const found = await this.trustedInForce();
    if (file) {
      // The seal key first: several processes starting at once (serve --workers) each get it before
      // any of them writes a version it must seal.
      await this.sealPublicKey(true);
      const lastFile = (await this.store.policy.list()).find((v) => v.source === 'file');
      // The file comes into force when it is new or changed, and when the version in force cannot be
      // trusted (no seal of this service, or not the newest sealed one): the file, the operator's,
      // replaces it.
      if (found.kind === 'untrusted')
        this.opts.logger?.warn(
          { version: found.version ?? null },
          `${found.why}: the configured policy file comes into force in its place`,
        );
      if (lastFile?.sha256 !== file.sha256 || found.kind !== 'trusted') {
        if (found.kind === 'trusted' && found.loaded.doc.policyChanges?.approvals?.length)
          this.opts.logger?.warn(
            { version: found.v.version },
            "the configured policy file changed: it comes into force without the approvals the version in force asks for policy changes (the file is the operator's)",
          );
        const v = await this.store.policy.addVersion({
          text: file.text,
          format: file.format,
          sha256: file.sha256,
          source: 'file',
          status: 'in_force',
          createdBy: 'configuration',
        });
        await this.store.policy.setSeal(v.version, await this.seal(policySealMessage(v)));
        await this.store.approvals.supersedeBefore(v.version, { actor: 'configuration' });
        return this.use(v, file.doc);
      }
    }
    if (found.kind === 'none') {
      this.active = BUILTIN;
      this.checkedAt = Date.now();
      return this.active;
    }
    if (found.kind === 'untrusted')
      throw new PolicyEngineError(
        500,
        'policy_not_sealed',
        `${found.why} (seal key ${this.sealKey}): it was not written by this service, or the keystore holds another seal key. Configure a policy file (policy.file), which then comes into force in its place, or give this instance the keystore (seal key) of the other instances`,
      );
    return this.use(found.v, found.loaded.doc);
  }

  /**
   * The version in force, if it can be trusted: it carries this service's
   * seal over its number and SHA-256, its text hashes to that SHA-256, and no
   * newer version carries a seal (an older sealed version put back in force
   * by a database edit is a rollback). No version in force is `none` only
   * when no version was ever sealed.
   */
  private async trustedInForce(): Promise<
    | { kind: 'trusted'; v: PolicyVersion; loaded: LoadedPolicy }
    | { kind: 'none' }
    | { kind: 'untrusted'; version?: number; why: string }
  > {
    const all = await this.store.policy.list();
    const inForce = all.find((v) => v.status === 'in_force');
    for (const v of all) {
      // Newest first: the first one with a valid seal must be the one in force.
      if (v.status === 'pending' || v.status === 'rejected') continue;
      const loaded = await this.verified(v);
      if (!loaded) continue;
      if (v === inForce) return { kind: 'trusted', v, loaded };
      return inForce
        ? {
            kind: 'untrusted',
            version: inForce.version,
            why: `policy version ${inForce.version} is in force in the database, but version ${v.version}, newer, carries this service's seal: an older version was put back`,
          }
        : {
            kind: 'untrusted',
            why: `no policy version is in force in the database, but version ${v.version} was`,
          };
    }
    if (!inForce) return { kind: 'none' };
    return {
      kind: 'untrusted',
      version: inForce.version,
      why: `policy version ${inForce.version} in force in the database does not carry this service's seal`,
    };
  }

  private use(v: PolicyVersion, doc: PolicyDocument): ActivePolicy {
    this.highest = Math.max(this.highest, v.version);
    this.active = active(v, doc);
    this.checkedAt = Date.now();
    return this.active;
  }

  /** The version's document when its text hashes to its SHA-256 and its seal verifies. */
  private async verified(v: PolicyVersion): Promise<LoadedPolicy | undefined> {
    if (!(await this.sealValid(policySealMessage(v), v.seal))) return undefined;
    try {
      const p = parsePolicy(v.text, v.format);
      return p.sha256 === v.sha256 ? p : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The policy in force; looked up again after `refreshMs`, or at once when
   * `seen` is given and differs from the version in use (a version number
   * another instance reported; `null`: look now).
   */
  async current(seen?: number | null): Promise<ActivePolicy> {
    const stale = Date.now() - this.checkedAt >= this.refreshMs;
    if (!stale && (seen === undefined || seen === (this.active.version || null))) return this.active;
    const v = await this.store.policy.inForce();
    this.checkedAt = Date.now();
    if (!v) {
      // Nothing in force although this instance used a sealed version: fail closed, never allow-all.
      if (this.active.source !== 'builtin' || this.active === NO_TRUSTED_POLICY) {
        if (this.active !== NO_TRUSTED_POLICY)
          this.opts.logger?.warn({}, 'no policy version is in force in the database: nothing is signed');
        this.active = NO_TRUSTED_POLICY;
      }
      return this.active;
    }
    if (v.version === this.active.version) return this.active;
    const loaded = v.version >= this.highest ? await this.verified(v) : undefined;
    if (!loaded) {
      // Keep the version this instance verified (an older one is a rollback); say so loudly.
      this.opts.logger?.warn(
        { version: v.version, kept: this.active.version },
        'the policy version in force in the database is not sealed by this service, or is older than the one in use: it is not used',
      );
      return this.active;
    }
    return this.use(v, loaded.doc);
  }

  // ---- decisions -----------------------------------------------------------------------------

  private ref(p: ActivePolicy, rule: string): PolicyRef {
    if (p === BUILTIN) return ALLOW_ALL_REF;
    return { version: p.version, sha256: p.sha256, rule };
  }

  private async resolve(doc: PolicyDocument): Promise<Map<string, string | undefined>> {
    const out = new Map<string, string | undefined>();
    const now = Date.now();
    for (const name of namesIn(doc)) {
      const hit = this.names.get(name);
      if (hit && now - hit.at < NAME_TTL_MS) {
        out.set(name, hit.party);
        continue;
      }
      const party = await this.opts.resolveName?.(name).catch(() => undefined);
      // An unresolved name never matches: it is not cached, so the next decision asks again.
      if (party !== undefined) this.names.set(name, { party, at: now });
      out.set(name, party);
    }
    return out;
  }

  /** The facts a decision is made on: what was verified, the caller, the time. */
  private async facts(p: ActivePolicy, req: PolicyRequest): Promise<Facts> {
    const actions = policyActions(req.actions);
    const receivers = [...new Set(actions.map((a) => a.receiver).filter((r) => r !== undefined))];
    return {
      entryPoint: req.flow,
      party: req.partyId,
      actions,
      ...(req.caller ? { caller: req.caller } : {}),
      now: this.now(),
      names: await this.resolve(p.doc),
      paidBefore:
        p.asksNewReceiver && receivers.length > 0
          ? await this.store.policy.paidBefore(req.partyId, receivers)
          : new Set<string>(),
    };
  }

  async decide(req: PolicyRequest): Promise<PolicyDecision> {
    const d = await this.decideOnce(req, false);
    this.opts.observe?.(d.outcome, d.policy.rule);
    return d;
  }

  private async decideOnce(req: PolicyRequest, retried: boolean): Promise<PolicyDecision> {
    const p = await this.current();
    if (p === BUILTIN) return { outcome: 'allow', policy: ALLOW_ALL_REF };
    const facts = await this.facts(p, req);
    const ev = evaluate(p.doc, facts);
    if (ev.rule.decision === 'deny')
      return {
        outcome: 'deny',
        reason: decide(ev, new Map()).reason,
        policy: this.ref(p, ev.rule.id),
      };
    let usage = new Map<string, Usage>();
    if (ev.limits.length > 0) {
      const r = await this.store.policy.reserve({
        ...reservation(p, req, facts.actions, ev.limits),
        mode: 'if-fits',
      });
      // Another instance brought a new version into force: decide again under it (once).
      if (r.inForce !== null && r.inForce !== p.version && !retried) {
        await this.store.policy.settle(req.subject, 'released');
        await this.current(r.inForce);
        return this.decideOnce(req, true);
      }
      usage = r.usage;
    }
    const decision = decide(ev, usage);
    const policy = this.ref(p, decision.rule);
    if (decision.outcome === 'allow') return { outcome: 'allow', policy, limits: decision.limits };
    if (decision.outcome === 'deny') {
      await this.store.policy.settle(req.subject, 'released');
      return { outcome: 'deny', reason: decision.reason, policy, limits: decision.limits };
    }
    return this.approvals(p, req, [...facts.actions], decision, ev.limits.length > 0);
  }

  /**
   * The approval path: the subject's request for exactly this statement
   * (opened when there is none), and its approvals counted afresh — each
   * signature verified against a sealed credential of an approver in a group
   * the requirement names, never the requester, one approver once.
   */
  private async approvals(
    p: ActivePolicy,
    req: PolicyRequest,
    actions: PolicyAction[],
    decision: Decision,
    limited: boolean,
  ): Promise<PolicyDecision> {
    const requirement: Requirement = decision.approvals ?? [];
    const policy = this.ref(p, decision.rule);
    const requester = req.requester ?? req.caller?.id ?? 'service';
    const content = {
      v: 1 as const,
      subject: req.subject,
      party: req.partyId,
      entryPoint: req.flow,
      requester,
      actions,
      policy: { version: p.version, sha256: p.sha256, rule: decision.rule },
      requirement,
    };
    let request = await this.store.approvals.latestFor(req.subject);
    const same =
      request !== undefined && sameContent(request.statement as unknown as ApprovalStatement, content);
    // Rejected stays rejected for exactly this statement; anything else changed asks afresh.
    if (request !== undefined && same && request.status === 'rejected') return this.rejected(request, policy);
    if (!request || !same || (request.status !== 'pending' && request.status !== 'approved')) {
      const ttl = durationMs(p.doc.approvals?.ttl ?? '24h');
      const statement: ApprovalStatement = {
        ...content,
        request: randomUUID(),
        expiresAt: new Date(this.now().getTime() + ttl).toISOString(),
      };
      request = await this.store.approvals.open({
        id: statement.request,
        subject: req.subject,
        statement: statement as unknown as Json,
        statementHash: statementHash(statement),
        party: req.partyId,
        requester,
        entryPoint: req.flow,
        policyVersion: p.version,
        rule: decision.rule,
        requirement,
        expiresAt: statement.expiresAt,
      });
    }
    const count = await this.count(request, p);
    if (!count.met) {
      return {
        outcome: 'approve',
        request: request.id,
        missing: count.missing,
        expiresAt: request.expiresAt,
        policy,
      };
    }
    if (request.status === 'pending')
      request = await this.store.approvals.close(request.id, 'approved', { actor: 'policy' });
    // Approved: what it moves is now reserved, whatever the limits said (people approved it).
    if (limited) await this.reserveApproved(p, req, actions);
    return { outcome: 'allow', policy, approvedBy: count.approvers, limits: decision.limits };
  }

  private rejected(request: ApprovalRequest, policy: PolicyRef): PolicyDecision {
    return {
      outcome: 'deny',
      reason: `approval request ${request.id} was rejected${request.decidedBy ? ` by ${request.decidedBy}` : ''}${request.reason ? `: ${request.reason}` : ''}`,
      policy,
    };
  }

  private async reserveApproved(p: ActivePolicy, req: PolicyRequest, actions: PolicyAction[]): Promise<void> {
    const facts = await this.facts(p, req);
    const ev = evaluate(p.doc, { ...facts, actions });
    await this.store.policy.reserve({ ...reservation(p, req, actions, ev.limits), mode: 'always' });
  }

  /**
   * The approvals of `request` that count, verified now: the statement's
   * hash recomputed from the statement, each approval's signature checked
   * against its credential, each credential's seal checked, the approver in
   * a group of the requirement under the policy in force, not the requester,
   * and (while the request is pending) not past its expiry.
   */
  async count(
    request: ApprovalRequest,
    p?: ActivePolicy,
  ): Promise<{ met: boolean; missing: { group: string; need: number }[]; approvers: string[] }> {
    const policy = p ?? (await this.current());
    const statement = request.statement as unknown as ApprovalStatement;
    const hash = statementHash(statement);
    const requirement = statement.requirement;
    const expired = Date.parse(statement.expiresAt) <= this.now().getTime();
    const valid: Approver[] = [];
    if (hash === request.statementHash && !(expired && request.status !== 'approved')) {
      const message = approvalMessage(hash, 'approve');
      const seen = new Set<string>();
      for (const a of await this.store.approvals.approvalsOf(request.id)) {
        if (a.decision !== 'approve' || !a.signature || seen.has(a.approver)) continue;
        if (a.approver === statement.requester) continue;
        if (a.credentialId === undefined) continue;
        const c = await this.store.approvals.credential(a.credentialId);
        if (!c || c.approver !== a.approver || !(await this.credentialValid(c))) continue;
        if (!verifyApproval({ kind: c.kind, publicKey: c.publicKey }, message, a.signature)) continue;
        const groups = requirement
          .map((r) => r.group)
          .filter((g) => (policy.doc.approverGroups?.[g] ?? []).includes(a.approver));
        if (groups.length === 0) continue;
        seen.add(a.approver);
        valid.push({ approver: a.approver, groups });
      }
    }
    const s = satisfies(requirement, valid);
    return { met: s.met, missing: s.missing, approvers: valid.map((v) => v.approver) };
  }

  /** A credential counts when it is active and carries the service's seal over exactly its fields. */
  async credentialValid(c: Credential): Promise<boolean> {
    if (c.status !== 'active' || !c.activatedBy || (c.kind !== 'ed25519' && c.kind !== 'webauthn'))
      return false;
    return this.sealValid(
      credentialSealMessage({
        id: c.id,
        approver: c.approver,
        kind: c.kind,
        publicKey: c.publicKey,
        activatedBy: c.activatedBy,
      }),
      c.seal,
    );
  }

  /**
   * Under a policy without limits nothing was reserved: no database call. (A
   * reservation left by an earlier version then stays `reserved`, which
   * counts as `committed` does, and ages out of its window.)
   */
  async settle(subject: string, outcome: 'committed' | 'released'): Promise<void> {
    if (!this.active.limited && Date.now() - this.checkedAt < this.refreshMs) return;
    await this.store.policy.settle(subject, outcome);
  }

  // ---- dry run -------------------------------------------------------------------------------

  /** What the policy would decide, and why; nothing is reserved, nothing is opened. */
  async evaluate(req: PolicyRequest): Promise<{ decision: Decision; policy: PolicyRef }> {
    const p = await this.current();
    const facts = await this.facts(p, req);
    const ev = evaluate(p.doc, facts);
    const usage =
      ev.limits.length > 0 && p.source !== 'builtin'
        ? await this.store.policy.usage(
            ev.limits.map((l) => ({ key: l.key, limit: l.limit, windowMs: l.windowMs, adding: l.adding })),
            req.subject,
          )
        : new Map<string, Usage>();
    const decision = decide(ev, usage);
    return { decision, policy: this.ref(p, decision.rule) };
  }

  // ---- approvals by people -------------------------------------------------------------------

  /**
   * Records an approval (or a rejection) by `approver` with one of its own
   * credentials. Checked here so that a person learns at once what is wrong;
   * checked again at every decision, where it counts.
   */
  async answer(a: {
    requestId: string;
    approver: string;
    decision: 'approve' | 'reject';
    credentialId?: string;
    signature?: string;
    statementHash?: string;
    reason?: string;
  }): Promise<ApprovalRequest> {
    const request = await this.store.approvals.get(a.requestId);
    if (!request)
      throw new PolicyEngineError(404, 'not_found', `approval request ${a.requestId} does not exist`);
    if (request.status !== 'pending')
      throw new PolicyEngineError(
        409,
        'approval_closed',
        `approval request ${request.id} is ${request.status}: it takes no more answers`,
      );
    const statement = request.statement as unknown as ApprovalStatement;
    const hash = statementHash(statement);
    if (Date.parse(statement.expiresAt) <= this.now().getTime())
      throw new PolicyEngineError(
        409,
        'approval_expired',
        `approval request ${request.id} expired at ${statement.expiresAt}`,
      );
    if (a.approver === statement.requester)
      throw new PolicyEngineError(
        403,
        'separation_of_duties',
        `${a.approver} requested this and cannot ${a.decision} it: another approver must`,
      );
    const p = await this.current();
    const groups = statement.requirement
      .map((r) => r.group)
      .filter((g) => (p.doc.approverGroups?.[g] ?? []).includes(a.approver));
    if (groups.length === 0)
      throw new PolicyEngineError(
        403,
        'not_an_approver_here',
        `${a.approver} is in none of the groups this request needs (${statement.requirement.map((r) => r.group).join(', ')}) under policy version ${p.version}`,
      );
    const signed = a.signature !== undefined || a.decision === 'approve';
    if (signed) {
      if (a.statementHash !== hash)
        throw new PolicyEngineError(
          409,
          'statement_changed',
          `the statement signed (${a.statementHash ?? 'none'}) is not this request's (${hash}): show the request again and sign what it says now`,
        );
      if (!a.credentialId || !a.signature)
        throw new PolicyEngineError(400, 'bad_request', 'an approval needs credentialId and signature');
      const c = await this.store.approvals.credential(a.credentialId);
      if (!c || c.approver !== a.approver)
        throw new PolicyEngineError(
          403,
          'credential_not_yours',
          `credential ${a.credentialId} is not one of ${a.approver}'s`,
        );
      if (!(await this.credentialValid(c)))
        throw new PolicyEngineError(
          403,
          'credential_inactive',
          `credential ${c.id} is ${c.status === 'active' ? 'not sealed by this service' : c.status}: an admin must activate it first`,
        );
      if (
        !verifyApproval(
          { kind: c.kind, publicKey: c.publicKey },
          approvalMessage(hash, a.decision),
          a.signature,
        )
      )
        throw new PolicyEngineError(
          400,
          'signature_invalid',
          `the signature does not verify against credential ${c.id} for ${a.decision} of statement ${hash}`,
        );
    }
    await this.store.approvals.record({
      requestId: request.id,
      approver: a.approver,
      ...(a.credentialId !== undefined ? { credentialId: a.credentialId } : {}),
      decision: a.decision,
      ...(a.reason !== undefined ? { reason: a.reason } : {}),
      ...(a.signature !== undefined ? { signature: a.signature } : {}),
    });
    if (a.decision === 'reject') {
      const closed = await this.store.approvals.close(request.id, 'rejected', {
        actor: a.approver,
        reason: a.reason ?? 'rejected',
      });
      await this.store.policy.settle(request.subject, 'released');
      return closed;
    }
    const count = await this.count(request, p);
    if (!count.met) return (await this.store.approvals.get(request.id)) ?? request;
    const done = await this.store.approvals.close(request.id, 'approved', { actor: a.approver });
    await this.approved(done);
    return done;
  }

  /** An approval request approved in full: a policy change comes into force; anything else resumes. */
  private async approved(request: ApprovalRequest): Promise<void> {
    // What was approved is what the approvers signed: the statement (its hash checked), never the
    // request's other columns, which a database edit could change.
    const statement = request.statement as unknown as ApprovalStatement;
    if (statementHash(statement) !== request.statementHash) {
      this.opts.logger?.warn(
        { request: request.id },
        'an approved request whose statement does not match its hash: ignored',
      );
      return;
    }
    if (statement.entryPoint === 'policy-change') {
      const { version, sha256 } = statement.policy;
      const v = await this.store.policy.get(version);
      // Exactly the document the approvers were shown: its number, SHA-256 and text.
      let exact = false;
      try {
        exact =
          v?.status === 'pending' && v.sha256 === sha256 && parsePolicy(v.text, v.format).sha256 === sha256;
      } catch {
        exact = false;
      }
      if (!v || !exact) {
        this.opts.logger?.warn(
          { request: request.id, version },
          'the approved policy version is not the document its approvers signed: it is not brought into force',
        );
        return;
      }
      const seal = await this.seal(policySealMessage(v));
      const done = await this.store.policy.decide(version, 'in_force', { actor: 'policy', seal });
      const loaded = await this.verified(done);
      if (loaded) this.use(done, loaded.doc);
      await this.store.approvals.supersedeBefore(version, { actor: 'policy' });
      return;
    }
    this.opts.onApproved?.({ ...request, subject: statement.subject });
  }

  /** Expires the approval requests past their expiry; what they reserved is given back. */
  async sweep(): Promise<ApprovalRequest[]> {
    const due = await this.store.approvals.due(this.now());
    const out: ApprovalRequest[] = [];
    for (const r of due) {
      try {
        out.push(await this.store.approvals.close(r.id, 'expired', { actor: 'policy' }));
        await this.store.policy.settle(r.subject, 'released');
      } catch {
        // Answered or expired by another instance meanwhile.
      }
    }
    return out;
  }

  // ---- policy versions -----------------------------------------------------------------------

  /**
   * A new version from the API: in force at once, or pending until the
   * approvals the version in force asks for policy changes are given.
   */
  async replace(
    text: string,
    format: 'yaml' | 'json' | 'auto',
    actor: string,
  ): Promise<{ version: PolicyVersion; approvalRequest?: ApprovalRequest }> {
    const loaded = parsePolicy(text, format);
    const p = await this.current(null);
    const need = p.source === 'builtin' ? undefined : p.doc.policyChanges?.approvals;
    if (!need || need.length === 0) {
      const v = await this.store.policy.addVersion({
        text: loaded.text,
        format: loaded.format,
        sha256: loaded.sha256,
        source: 'api',
        status: 'in_force',
        createdBy: actor,
      });
      const seal = await this.seal(policySealMessage(v));
      await this.store.policy.setSeal(v.version, seal);
      this.use({ ...v, seal }, loaded.doc);
      await this.store.approvals.supersedeBefore(v.version, { actor });
      return { version: { ...v, seal } };
    }
    const v = await this.store.policy.addVersion({
      text: loaded.text,
      format: loaded.format,
      sha256: loaded.sha256,
      source: 'api',
      status: 'pending',
      createdBy: actor,
    });
    const statement: ApprovalStatement = {
      v: 1,
      request: randomUUID(),
      subject: `policy:${v.version}`,
      party: `policy:${v.version}`,
      entryPoint: 'policy-change',
      requester: actor,
      actions: [],
      policy: { version: v.version, sha256: v.sha256, rule: 'policyChanges' },
      requirement: need,
      expiresAt: new Date(this.now().getTime() + durationMs(p.doc.approvals?.ttl ?? '24h')).toISOString(),
    };
    const request = await this.store.approvals.open({
      id: statement.request,
      subject: statement.subject,
      statement: statement as unknown as Json,
      statementHash: statementHash(statement),
      party: statement.party,
      requester: actor,
      entryPoint: 'policy-change',
      policyVersion: p.version,
      rule: 'policyChanges',
      requirement: need,
      expiresAt: statement.expiresAt,
    });
    return { version: v, approvalRequest: request };
  }

  // ---- approver credentials ------------------------------------------------------------------

  /** An admin activates a registered credential: the service seals it. */
  async activateCredential(id: string, actor: string): Promise<Credential> {
    const c = await this.store.approvals.credential(id);
    if (!c) throw new PolicyEngineError(404, 'not_found', `approver credential ${id} does not exist`);
    if (c.status !== 'pending')
      throw new PolicyEngineError(
        409,
        'credential_state',
        `approver credential ${id} is ${c.status}, not pending`,
      );
    if (c.approver === actor)
      throw new PolicyEngineError(
        403,
        'separation_of_duties',
        `${actor} registered this credential and cannot activate it: another admin must`,
      );
    if (c.kind !== 'ed25519' && !passkeyOf(c))
      throw new PolicyEngineError(
        400,
        'unsupported_credential',
        `credential ${id} (${c.kind}) holds no key this service can verify`,
      );
    const seal = await this.seal(
      credentialSealMessage({
        id: c.id,
        approver: c.approver,
        kind: c.kind,
        publicKey: c.publicKey,
        activatedBy: actor,
      }),
    );
    return this.store.approvals.activateCredential(id, { actor, seal });
  }
}

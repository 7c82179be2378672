/**
 * Policy evaluation, pure: which rule decides a request (`evaluate`) and, once
 * the store has said what each limit's window already holds, the outcome
 * (`decide`).
 *
 * - Rules are tried per action in document order, first match wins (like a
 *   firewall); no match → the document's `default`. Across the actions of one
 *   transaction the most restrictive outcome wins: deny > approve > allow.
 *   Several approve rules merge their approvals (per group, the largest count).
 * - A transaction without any recognised action (a topology transaction, say)
 *   is evaluated as ONE pseudo-action with no action fields: conditions on the
 *   request (entryPoints, parties, partyGroups, callers, callerRoles, time)
 *   apply to it, and every condition on an action field (actions, instruments,
 *   amount, receivers, receiversNot, newReceiver, memo) never matches it.
 * - A condition on a field the action lacks never matches (an amount
 *   condition and an action without an amount; `receiversNot` and an action
 *   without a receiver). An ANS name that did not resolve never matches a
 *   receiver, so `receiversNot: [name]` keeps matching (the allow-list
 *   idiom fails closed). `memo` holds when the memo is present (required) and
 *   fully matches `pattern`.
 * - Time windows are read in the policy's time zone: `from` inclusive, `to`
 *   exclusive, `from > to` wraps past midnight, and then `days` names the day
 *   the window STARTED (fri 22:00-06:00 covers Saturday 03:00).
 * - Limits: an action counts towards a limit when it has an amount and the
 *   limit's `when` matches it; the actions sharing a key are summed into one
 *   `LimitCheck` per distinct key. Amounts are decimal strings, never floats.
 */
import { addDecimals, compareDecimals, decimalUnits, fromUnits, shortAmount } from '../intent/decimal.js';
import type { ActionKind, InstrumentId, RecognisedAction } from '../intent/model.js';
import {
  type Conditions,
  durationMs,
  type LimitDimension,
  type PolicyDocument,
  type PolicyLimit,
  type PolicyRule,
  type Weekday,
} from './document.js';

export type Requirement = { group: string; count: number }[];

export interface PolicyAction {
  kind: ActionKind;
  sender?: string;
  receiver?: string;
  amount?: string;
  instrument?: InstrumentId;
  memo?: string;
}

/** The action fields policy looks at, from what the recogniser found. */
export function policyActions(actions: readonly RecognisedAction[]): PolicyAction[] {
  return actions.map((a) => {
    const out: PolicyAction = { kind: a.kind };
    const sender = a.parties.sender ?? a.actingParties[0];
    if (sender !== undefined) out.sender = sender;
    if (a.parties.receiver !== undefined) out.receiver = a.parties.receiver;
    if (a.amounts.amount !== undefined) out.amount = a.amounts.amount;
    if (a.instrument) out.instrument = { admin: a.instrument.admin, id: a.instrument.id };
    if (a.memo !== undefined) out.memo = a.memo;
    return out;
  });
}

export interface PolicyCaller {
  id: string;
  roles: readonly string[];
}

export interface Facts {
  entryPoint: string;
  party: string;
  actions: readonly PolicyAction[];
  caller?: PolicyCaller;
  now: Date;
  /** ANS names the document mentions → the party each resolves to (undefined: unresolved → never matches) */
  names: ReadonlyMap<string, string | undefined>;
  /** receivers this party has paid before (committed), among the actions' receivers */
  paidBefore: ReadonlySet<string>;
}

const isName = (s: string) => !s.includes('::');

/** Entries of receivers/receiversNot (rules and limits) that are ANS names, not party ids; each once. */
export function namesIn(doc: PolicyDocument): string[] {
  const out = new Set<string>();
  const add = (c: Conditions | undefined) => {
    for (const r of [...(c?.receivers ?? []), ...(c?.receiversNot ?? [])]) if (isName(r)) out.add(r);
  };
  for (const r of doc.rules) add(r.when);
  for (const l of doc.limits ?? []) add(l.when);
  return [...out];
}

export interface LimitCheck {
  limit: string;
  key: string;
  windowMs: number;
  maxAmount?: string;
  maxCount?: number;
  adding: { amount: string; count: number };
  exceeded: 'deny' | 'approve';
  approvals?: Requirement;
}

export type RuleDecision = 'allow' | 'deny' | 'approve';

export interface Evaluation {
  rule: { id: string; decision: RuleDecision; reason?: string; approvals?: Requirement };
  limits: LimitCheck[];
}

// ---- matching -----------------------------------------------------------------------------------

/** An action as matched: the pseudo-action of a transaction without actions has no fields at all. */
type MatchAction = Partial<PolicyAction>;

const WEEKDAY_OF: Record<string, Weekday> = {
  Mon: 'mon',
  Tue: 'tue',
  Wed: 'wed',
  Thu: 'thu',
  Fri: 'fri',
  Sat: 'sat',
  Sun: 'sun',
};
const DAY_ORDER: readonly Weekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

const formatters = new Map<string, Intl.DateTimeFormat>();

/** Weekday and minute of the day of `now` in `timeZone`. */
export function localTime(now: Date, timeZone: string): { day: Weekday; minute: number } {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    });
    formatters.set(timeZone, f);
  }
  const parts = Object.fromEntries(f.formatToParts(now).map((p) => [p.type, p.value]));
  const day = WEEKDAY_OF[parts.weekday ?? ''];
  if (!day) throw new Error(`cannot read the weekday of ${now.toISOString()} in ${timeZone}`);
  return { day, minute: (Number(parts.hour) % 24) * 60 + Number(parts.minute) };
}

const minutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

function inWindow(t: NonNullable<Conditions['time']>, now: Date, timeZone: string): boolean {
  const { day, minute } = localTime(now, timeZone);
  const from = t.from === undefined ? 0 : minutes(t.from);
  const to = t.to === undefined ? 24 * 60 : minutes(t.to);
  let startDay = day;
  if (from < to) {
    if (minute < from || minute >= to) return false;
  } else {
    // Wraps midnight: [from, 24:00) on the start day, [00:00, to) on the next.
    if (minute >= from) startDay = day;
    else if (minute < to) startDay = DAY_ORDER[(DAY_ORDER.indexOf(day) + 6) % 7]!;
    else return false;
  }
  return t.days === undefined || t.days.includes(startDay);
}

function amountMatches(a: NonNullable<Conditions['amount']>, amount: string | undefined): boolean {
  if (amount === undefined) return false;
  const cmp = (bound: string) => compareDecimals(amount, bound);
  const checks: [string | undefined, (c: number) => boolean][] = [
    [a.gt, (c) => c > 0],
    [a.gte, (c) => c >= 0],
    [a.lt, (c) => c < 0],
    [a.lte, (c) => c <= 0],
  ];
  for (const [bound, ok] of checks) {
    if (bound === undefined) continue;
    const c = cmp(bound);
    if (c === undefined || !ok(c)) return false;
  }
  return true;
}

const patterns = new Map<string, RegExp>();
function fullMatch(pattern: string, s: string): boolean {
  let re = patterns.get(pattern);
  if (!re) {
    re = new RegExp(`^(?:${pattern})$`, 'u');
    patterns.set(pattern, re);
  }
  return re.test(s);
}

/** The parties a receivers list names: party ids as written, names resolved (unresolved dropped). */
function resolved(list: readonly string[], names: Facts['names']): Set<string> {
  const out = new Set<string>();
  for (const r of list) {
    if (!isName(r)) out.add(r);
    else {
      const p = names.get(r);
      if (p !== undefined) out.add(p);
    }
  }
  return out;
}

function matches(c: Conditions | undefined, a: MatchAction, doc: PolicyDocument, facts: Facts): boolean {
  if (!c) return true;
  if (c.entryPoints && !(c.entryPoints as readonly string[]).includes(facts.entryPoint)) return false;
  if (c.parties && !c.parties.includes(facts.party)) return false;
  if (c.partyGroups && !c.partyGroups.some((g) => doc.partyGroups?.[g]?.includes(facts.party))) return false;
  if (c.callers && (facts.caller === undefined || !c.callers.includes(facts.caller.id))) return false;
  if (
    c.callerRoles &&
    !(facts.caller?.roles ?? []).some((r) => (c.callerRoles as readonly string[]).includes(r))
  )
    return false;
  if (c.time && !inWindow(c.time, facts.now, doc.timezone)) return false;
  if (c.actions && (a.kind === undefined || !c.actions.includes(a.kind))) return false;
  if (c.instruments) {
    const i = a.instrument;
    if (!i || !c.instruments.some((x) => x.id === i.id && (x.admin === undefined || x.admin === i.admin)))
      return false;
  }
  if (c.amount && !amountMatches(c.amount, a.amount)) return false;
  if (c.receivers && (a.receiver === undefined || !resolved(c.receivers, facts.names).has(a.receiver)))
    return false;
  if (c.receiversNot && (a.receiver === undefined || resolved(c.receiversNot, facts.names).has(a.receiver)))
    return false;
  if (c.newReceiver !== undefined) {
    if (a.receiver === undefined) return false;
    if (!facts.paidBefore.has(a.receiver) !== c.newReceiver) return false;
  }
  if (c.memo) {
    if (c.memo.required && !a.memo) return false;
    if (c.memo.pattern !== undefined && (a.memo === undefined || !fullMatch(c.memo.pattern, a.memo)))
      return false;
  }
  return true;
}

// ---- evaluate -----------------------------------------------------------------------------------

const SEVERITY: Record<RuleDecision, number> = { allow: 0, approve: 1, deny: 2 };

/** Per group the largest count, in the order groups first appear. */
export function mergeRequirements(reqs: readonly (Requirement | undefined)[]): Requirement | undefined {
  const out = new Map<string, number>();
  for (const req of reqs)
    for (const r of req ?? []) out.set(r.group, Math.max(out.get(r.group) ?? 0, r.count));
  return out.size ? [...out].map(([group, count]) => ({ group, count })) : undefined;
}

const DEFAULT_RULE = '(default)';

function firstMatch(doc: PolicyDocument, a: MatchAction, facts: Facts): PolicyRule | undefined {
  return doc.rules.find((r) => matches(r.when, a, doc, facts));
}

const KEY_PART: Record<LimitDimension, (a: MatchAction, facts: Facts) => string> = {
  party: (_a, facts) => `party=${facts.party}`,
  caller: (_a, facts) => `caller=${facts.caller?.id ?? ''}`,
  receiver: (a) => `receiver=${a.receiver ?? ''}`,
  instrument: (a) => `instrument=${a.instrument ? `${a.instrument.admin}/${a.instrument.id}` : ''}`,
};

/** `${limit.id}|party=…|instrument=admin/id|…`, in the order of `per`. */
function limitKey(l: PolicyLimit, a: MatchAction, facts: Facts): string {
  return [l.id, ...l.per.map((d) => KEY_PART[d](a, facts))].join('|');
}

function limitChecks(doc: PolicyDocument, actions: readonly MatchAction[], facts: Facts): LimitCheck[] {
  const out: LimitCheck[] = [];
  for (const l of doc.limits ?? []) {
    const byKey = new Map<string, { amounts: string[]; count: number }>();
    for (const a of actions) {
      if (a.amount === undefined || !matches(l.when, a, doc, facts)) continue;
      const key = limitKey(l, a, facts);
      const entry = byKey.get(key) ?? { amounts: [], count: 0 };
      entry.amounts.push(a.amount);
      entry.count += 1;
      byKey.set(key, entry);
    }
    for (const [key, { amounts, count }] of byKey) {
      const sum = addDecimals(amounts);
      if (sum === undefined)
        throw new Error(
          `limit ${l.id}: an action's amount is not a decimal (${amounts.join(', ')}); refusing`,
        );
      const check: LimitCheck = {
        limit: l.id,
        key,
        windowMs: durationMs(l.window),
        adding: { amount: sum, count },
        exceeded: l.exceeded,
      };
      if (l.maxAmount !== undefined) check.maxAmount = l.maxAmount;
      if (l.maxCount !== undefined) check.maxCount = l.maxCount;
      if (l.exceeded === 'approve' && l.approvals) check.approvals = l.approvals.map((r) => ({ ...r }));
      out.push(check);
    }
  }
  return out;
}

/**
 * The rule deciding the request (most restrictive of each action's first
 * match; the default when none matches) and the limit checks its actions need.
 */
export function evaluate(doc: PolicyDocument, facts: Facts): Evaluation {
  const actions: MatchAction[] = facts.actions.length ? [...facts.actions] : [{}];
  const picks = actions.map((a) => firstMatch(doc, a, facts));
  const decisionOf = (r: PolicyRule | undefined): RuleDecision => r?.decision ?? doc.default;
  const worst = picks.reduce<RuleDecision>(
    (w, r) => (SEVERITY[decisionOf(r)] > SEVERITY[w] ? decisionOf(r) : w),
    'allow',
  );
  const winners = picks.filter((r) => decisionOf(r) === worst);
  const ids = [...new Set(winners.map((r) => r?.id ?? DEFAULT_RULE))];
  let rule: Evaluation['rule'];
  if (worst === 'deny') {
    const first = winners[0];
    rule = first
      ? { id: first.id, decision: 'deny', reason: first.reason ?? 'the policy denies it' }
      : { id: DEFAULT_RULE, decision: 'deny', reason: 'no rule matched and the policy denies by default' };
  } else if (worst === 'approve') {
    rule = {
      id: ids.join('+'),
      decision: 'approve',
      approvals: mergeRequirements(winners.map((r) => r?.approvals)),
    };
  } else rule = { id: ids.join('+'), decision: 'allow' };
  return { rule, limits: limitChecks(doc, actions, facts) };
}

// ---- decide -------------------------------------------------------------------------------------

export interface Usage {
  amount: string;
  count: number;
}

export interface LimitReport {
  limit: string;
  key: string;
  window: string;
  used: Usage;
  adding: Usage;
  left: { amount?: string; count?: number };
  exceeded: boolean;
}

export interface Decision {
  outcome: RuleDecision;
  rule: string;
  /** A sentence. */
  reason: string;
  /** Merged: per group the max count. */
  approvals?: Requirement;
  limits: LimitReport[];
}

/** A window for people: `24 h`, `7 d`, `30 min`, `45 s`. */
export function windowText(ms: number): string {
  if (ms % 86_400_000 === 0 && ms >= 2 * 86_400_000) return `${ms / 86_400_000} d`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1000} s`;
}

/** An amount for people: no trailing zeros, thousands separated (`9,500.25`). */
export function amountText(s: string): string {
  const short = shortAmount(s);
  const neg = short.startsWith('-');
  const [whole = '', frac] = (neg ? short.slice(1) : short).split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${neg ? '-' : ''}${grouped}${frac ? `.${frac}` : ''}`;
}

function units(s: string, what: string): bigint {
  const u = decimalUnits(s);
  if (u === undefined) throw new Error(`${what} "${s}" is not a decimal with at most 10 decimals`);
  return u;
}

const list = (req: Requirement) => req.map((r) => `${r.count} of ${r.group}`).join(' and ');

/**
 * The outcome once `usage` (what each key's window already holds, without
 * this request) is known: any deny wins (a deny rule, or an exceeded limit
 * with `exceeded: deny`); else approve when the rule or an exceeded limit
 * says so (approvals merged); else allow.
 */
export function decide(e: Evaluation, usage: ReadonlyMap<string, Usage>): Decision {
  const reports: LimitReport[] = [];
  const exceededDeny: { limit: string; why: string }[] = [];
  const exceededApprove: { limit: string; why: string; approvals?: Requirement }[] = [];
  for (const c of e.limits) {
    const used = usage.get(c.key) ?? { amount: '0', count: 0 };
    const window = windowText(c.windowMs);
    const left: LimitReport['left'] = {};
    const why: string[] = [];
    if (c.maxAmount !== undefined) {
      const max = units(c.maxAmount, `limit ${c.limit}: maxAmount`);
      const u = units(used.amount, `limit ${c.limit}: used amount`);
      const add = units(c.adding.amount, `limit ${c.limit}: amount`);
      left.amount = shortAmount(fromUnits(max - u > 0n ? max - u : 0n));
      if (u + add > max)
        why.push(
          `${window} amount ${amountText(used.amount)} used + ${amountText(c.adding.amount)} asked exceeds ${amountText(c.maxAmount)}`,
        );
    }
    if (c.maxCount !== undefined) {
      left.count = Math.max(0, c.maxCount - used.count);
      if (used.count + c.adding.count > c.maxCount)
        why.push(`${window} count ${used.count} used + ${c.adding.count} asked exceeds ${c.maxCount}`);
    }
    const exceeded = why.length > 0;
    reports.push({
      limit: c.limit,
      key: c.key,
      window,
      used: { amount: used.amount, count: used.count },
      adding: { ...c.adding },
      left,
      exceeded,
    });
    if (!exceeded) continue;
    const text = `limit ${c.limit}: ${why.join('; ')}`;
    if (c.exceeded === 'deny') exceededDeny.push({ limit: c.limit, why: text });
    else exceededApprove.push({ limit: c.limit, why: text, approvals: c.approvals });
  }

  const r = e.rule;
  const ruleText = r.id === DEFAULT_RULE ? 'no rule matched' : `rule ${r.id}`;
  if (r.decision === 'deny')
    return {
      outcome: 'deny',
      rule: r.id,
      reason: sentence(
        r.id === DEFAULT_RULE
          ? 'Denied: no rule matched and the policy denies by default'
          : `Denied by rule ${r.id}: ${r.reason ?? 'the policy denies it'}`,
      ),
      limits: reports,
    };
  if (exceededDeny.length)
    return {
      outcome: 'deny',
      rule: `limit:${exceededDeny[0]!.limit}`,
      reason: sentence(`Denied: ${exceededDeny.map((x) => x.why).join('; ')}`),
      limits: reports,
    };
  if (r.decision === 'approve' || exceededApprove.length) {
    const approvals = mergeRequirements([r.approvals, ...exceededApprove.map((x) => x.approvals)]) ?? [];
    const ids = [
      ...(r.decision === 'approve' ? [r.id] : []),
      ...[...new Set(exceededApprove.map((x) => x.limit))].map((id) => `limit:${id}`),
    ];
    const because = [
      ...(r.decision === 'approve' ? [ruleText] : []),
      ...exceededApprove.map((x) => x.why),
    ].join('; ');
    return {
      outcome: 'approve',
      rule: ids.join('+'),
      reason: sentence(`Needs approval (${list(approvals)}): ${because}`),
      approvals,
      limits: reports,
    };
  }
  return {
    outcome: 'allow',
    rule: r.id,
    reason: sentence(
      r.id === DEFAULT_RULE
        ? 'Allowed: no rule matched and the policy allows by default'
        : `Allowed by ${ruleText}`,
    ),
    limits: reports,
  };
}

function sentence(s: string): string {
  const t = s.trim();
  return /[.!?]$/.test(t) ? t : `${t}.`;
}

/**
 * The policy document: its zod schema (strict objects everywhere, unknown keys
 * refused), `parsePolicy` for YAML and JSON text, the cross-reference checks
 * zod cannot express, the built-in allow-all policy and the JSON Schema
 * published as docs/policy.schema.json.
 *
 * Every problem names the field path (`rules[2].approvals[0].group`), the
 * line and column of the offending node in the text (YAML through the `yaml`
 * package's Document/LineCounter; JSON is read by the same parser for the
 * positions only, its value comes from JSON.parse) and what to do. Decimals
 * are strings: a number where a decimal belongs is refused, because a YAML or
 * JSON number is a float and loses precision.
 *
 * One file on purpose: the schema, the positions and the cross-reference checks
 * all feed the one list of problems `parsePolicy` returns, each with a path and
 * a line; the sections (building blocks, conditions, the document, errors,
 * positions, zod issues, cross-references) are marked below.
 */
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { isMap, isScalar, isSeq, LineCounter, type Node, type Pair, parseDocument } from 'yaml';
import { type ZodType, z } from 'zod';
import { ACTION_KINDS } from '../intent/model.js';
import { sha256Hex, unstorableText } from '../store/canonical.js';

// ---- building blocks ----------------------------------------------------------------------------

/** Ids of rules and limits. */
const SLUG = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const slug = z
  .string()
  .regex(
    SLUG,
    'must be an id of lower-case letters, digits, "-" and "_" (at most 64, starting with a letter or digit), e.g. "small-auto"',
  );

/** Names of party groups and approver groups (map keys). */
const groupName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/,
    'must be a group name of letters, digits, ".", "-" and "_" (at most 64)',
  );

const text = (max: number) => z.string().min(1).max(max);

/** A decimal string; a number is refused with the string to write instead. */
const decimal = z
  .string({
    error: (iss) =>
      typeof iss.input === 'number'
        ? `a number is refused here (it is a float and loses precision): write it as a string: "${String(iss.input)}"`
        : undefined,
  })
  .regex(
    /^[0-9]+(\.[0-9]{1,10})?$/,
    'must be a decimal string such as "1000" or "0.5" (at most 10 decimals)',
  );

const DURATION = /^([1-9][0-9]{0,7})([smhd])$/;
const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const MAX_DURATION_MS = 90 * UNIT_MS.d;

/** Milliseconds of a duration `<n>s|m|h|d` (1 s .. 90 d); throws on anything else. */
export function durationMs(s: string): number {
  const m = DURATION.exec(s);
  if (!m) throw new Error(`"${s}" is not a duration: write <n>s, <n>m, <n>h or <n>d, e.g. "24h"`);
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  if (ms > MAX_DURATION_MS) throw new Error(`duration "${s}" is longer than 90 days: use at most "90d"`);
  return ms;
}

const duration = z.string().superRefine((s, ctx) => {
  try {
    durationMs(s);
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: (e as Error).message });
  }
});

const timezone = z.string().superRefine((tz, ctx) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    ctx.addIssue({
      code: 'custom',
      message: `"${tz}" is not a time zone this runtime knows: use an IANA name such as "Europe/Zurich" or "UTC"`,
    });
  }
});

/**
 * Why `p` could take exponential time on a crafted memo (JavaScript's
 * engine backtracks): a repeated group that itself repeats or alternates,
 * like `(a+)+` or `(a|ab)*`, or a back-reference. Undefined when none.
 * Character classes and escapes are skipped; this refuses some safe
 * patterns, never an unsafe one of these shapes.
 */
export function backtrackingProblem(p: string): string | undefined {
  const stack: { risky: boolean }[] = [];
  let lastGroupRisky = false;
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    const quantifier =
      c === '*' || c === '+' || c === '?' || (c === '{' && /^\{\d+(,\d*)?\}/.test(p.slice(i)));
    if (c === '\\') {
      if (/[1-9k]/.test(p[i + 1] ?? '')) return 'a back-reference';
      i++;
      lastGroupRisky = false;
      continue;
    }
    if (c === '[') {
      const end = p.indexOf(']', i + 2);
      i = end < 0 ? p.length : end;
      lastGroupRisky = false;
      continue;
    }
    if (quantifier) {
      if (lastGroupRisky)
        return 'a repeated group that itself repeats or has alternatives, e.g. (a+)+ or (a|b)*';
      if (stack.length > 0) (stack[stack.length - 1] as { risky: boolean }).risky = true;
      lastGroupRisky = false;
      continue;
    }
    if (c === '(') {
      stack.push({ risky: false });
      lastGroupRisky = false;
      // The group's kind, not a quantifier: (?: (?= (?! (?<= (?<! (?<name>
      const kind = /^\?(?::|=|!|<=|<!|<[A-Za-z_][A-Za-z0-9_]*>)/.exec(p.slice(i + 1));
      if (kind) i += kind[0].length;
      continue;
    }
    if (c === ')') {
      const g = stack.pop();
      lastGroupRisky = g?.risky ?? false;
      if (g?.risky && stack.length > 0) (stack[stack.length - 1] as { risky: boolean }).risky = true;
      continue;
    }
    if (c === '|' && stack.length > 0) (stack[stack.length - 1] as { risky: boolean }).risky = true;
    lastGroupRisky = false;
  }
  return undefined;
}

/** A memo pattern: a full match, compiled at load; no shape that backtracks exponentially. */
const memoPattern = z
  .string()
  .max(1024)
  .superRefine((p, ctx) => {
    try {
      new RegExp(`^(?:${p})$`, 'u');
    } catch (e) {
      ctx.addIssue({
        code: 'custom',
        message: `not a valid regular expression (${(e as Error).message}): fix the pattern`,
      });
      return;
    }
    const risk = backtrackingProblem(p);
    if (risk)
      ctx.addIssue({
        code: 'custom',
        message: `the pattern has ${risk}, which can take exponential time on a crafted memo: write it without nesting (e.g. [A-Z0-9-]+ instead of ([A-Z0-9]+-?)+)`,
      });
  });

const HHMM = /^([01][0-9]|2[0-3]):[0-5][0-9]$/;
const clock = z
  .string()
  .regex(HHMM, 'must be a time of day "HH:MM" between "00:00" and "23:59", quoted, e.g. "09:00"');

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

const party = text(255);
/** A receiver: a party id (has `::`) or an ANS name resolved at evaluation. */
const receiver = text(255);

const requirement = z
  .array(
    z.strictObject({
      group: groupName,
      count: z.int().min(1).max(100),
    }),
  )
  .min(1)
  .max(16);

// ---- conditions ---------------------------------------------------------------------------------

/**
 * The entry points a policy can name: every flow that signs (the pipeline's
 * flow name). A test checks that every flow of src/flows is listed, so that a
 * typo in a policy is an error rather than a rule that never fires.
 */
export const ENTRY_POINTS = [
  'withdrawal',
  'transfer',
  'sign',
  'sign-and-execute',
  'offer-accept',
  'offer-reject',
  'offer-withdraw',
  'preapproval-send',
  'setup-accept',
  'holdings-merge',
  'onboard-validator',
  'onboard-ledger-api',
  'name-request',
  'name-pay',
  'name-renew',
  'name-reclaim',
] as const;

/** The service's roles (src/server/roles.ts ROLES; a test keeps the two equal). */
export const CALLER_ROLES = ['admin', 'operator', 'withdrawer', 'approver', 'auditor'] as const;

export const ConditionsSchema = z.strictObject({
  /** The pipeline's flow name (withdrawal, sign, sign-and-execute, offer-accept, onboard-ledger-api, …). */
  entryPoints: z
    .array(z.enum(ENTRY_POINTS))
    .min(1)
    .max(64)
    .optional()
    .describe(
      'the pipeline flow names (withdrawal, sign, sign-and-execute, offer-accept, onboard-ledger-api, …; compared exactly)',
    ),
  /** The party the request acts for. */
  parties: z
    .array(party)
    .min(1)
    .max(1000)
    .optional()
    .describe('the party the request acts for is one of these'),
  /** The party the request acts for is in one of these groups. */
  partyGroups: z
    .array(groupName)
    .min(1)
    .max(64)
    .optional()
    .describe('the party the request acts for is in one of these groups'),
  actions: z
    .array(z.enum(ACTION_KINDS))
    .min(1)
    .optional()
    .describe('the recognised action is of one of these kinds'),
  /** `admin` absent: any admin. */
  instruments: z
    .array(z.strictObject({ admin: party.optional(), id: text(255) }))
    .min(1)
    .max(64)
    .optional(),
  amount: z
    .strictObject({
      gt: decimal.optional(),
      gte: decimal.optional(),
      lt: decimal.optional(),
      lte: decimal.optional(),
    })
    .optional()
    .describe('bounds as decimal strings; an action without an amount never matches'),
  receivers: z
    .array(receiver)
    .min(1)
    .max(1000)
    .optional()
    .describe('the receiver is one of these party ids or ANS names'),
  receiversNot: z
    .array(receiver)
    .min(1)
    .max(1000)
    .optional()
    .describe(
      'the action has a receiver that is NOT one of these (the allow-list idiom, with decision deny)',
    ),
  newReceiver: z
    .boolean()
    .optional()
    .describe('true: the party never paid this receiver before; false: it did'),
  memo: z
    .strictObject({ required: z.boolean().optional(), pattern: memoPattern.optional() })
    .optional()
    .describe('the memo is present (required) and fully matches pattern (a regular expression)'),
  callers: z.array(text(1024)).min(1).max(1000).optional().describe('caller ids as the audit log names them'),
  callerRoles: z
    .array(z.enum(CALLER_ROLES))
    .min(1)
    .max(64)
    .optional()
    .describe('the caller has one of these roles'),
  time: z
    .strictObject({
      days: z.array(z.enum(WEEKDAYS)).min(1).max(7).optional(),
      from: clock.optional(),
      to: clock.optional(),
    })
    .optional()
    .describe('in the policy time zone: from inclusive, to exclusive; from > to wraps past midnight'),
});
export type Conditions = z.infer<typeof ConditionsSchema>;

// ---- the document -------------------------------------------------------------------------------

export const LIMIT_DIMENSIONS = ['party', 'caller', 'receiver', 'instrument'] as const;
export type LimitDimension = (typeof LIMIT_DIMENSIONS)[number];

export const LimitSchema = z.strictObject({
  id: slug,
  description: text(1024).optional(),
  per: z
    .array(z.enum(LIMIT_DIMENSIONS))
    .min(1)
    .max(4)
    .describe('one running total per distinct value of these'),
  window: duration.describe('a duration <n>s|m|h|d, 1 s .. 90 d'),
  maxAmount: decimal.optional(),
  maxCount: z.int().min(0).max(1_000_000_000).optional(),
  when: ConditionsSchema.optional().describe('which actions count (default: every action with an amount)'),
  exceeded: z.enum(['deny', 'approve']).default('deny'),
  approvals: requirement.optional(),
});
export type PolicyLimit = z.infer<typeof LimitSchema>;

export const RuleSchema = z.strictObject({
  id: slug,
  description: text(1024).optional(),
  when: ConditionsSchema.optional(),
  decision: z.enum(['allow', 'deny', 'approve']),
  reason: text(1024).optional(),
  approvals: requirement.optional(),
});
export type PolicyRule = z.infer<typeof RuleSchema>;

export const PolicyDocumentSchema = z.strictObject({
  /** Format version. */
  version: z.literal(1),
  name: text(255).optional(),
  /** IANA zone for time windows. */
  timezone: timezone.default('UTC').describe('IANA time zone of the time conditions'),
  /** When no rule matches. */
  default: z.enum(['deny', 'allow']).default('deny').describe('the decision when no rule matches'),
  partyGroups: z.record(groupName, z.array(party).min(1).max(10_000)).optional(),
  approverGroups: z.record(groupName, z.array(text(1024)).min(1).max(1000)).optional(),
  approvals: z.strictObject({ ttl: duration.default('24h') }).default({ ttl: '24h' }),
  policyChanges: z.strictObject({ approvals: requirement }).optional(),
  limits: z.array(LimitSchema).max(256).optional(),
  rules: z
    .array(RuleSchema)
    .min(1)
    .max(1024)
    .describe(
      'tried in order for each action, the first match decides; across actions the most restrictive wins',
    ),
});
export type PolicyDocument = z.infer<typeof PolicyDocumentSchema>;

// ---- errors -------------------------------------------------------------------------------------

export interface PolicyProblem {
  path: string;
  line?: number;
  column?: number;
  message: string;
}

function problemLine(p: PolicyProblem): string {
  const where = p.line === undefined ? '' : `line ${p.line}, column ${p.column ?? 1}: `;
  return `${where}${p.path || '(document)'}: ${p.message}`;
}

export class PolicyError extends Error {
  override readonly name = 'PolicyError';
  constructor(
    readonly problems: PolicyProblem[],
    /** The file the document was read from, when it was. */
    readonly file?: string,
    /** `unreadable`: the file could not be read at all (its one problem says why). */
    kind: 'invalid' | 'unreadable' = 'invalid',
  ) {
    const shown = problems.slice(0, 5).map(problemLine);
    const more = problems.length > 5 ? `; and ${problems.length - 5} more` : '';
    super(
      kind === 'unreadable'
        ? (problems[0]?.message ?? 'cannot read the policy file')
        : `${file ? `${file}: ` : ''}the policy document is not valid (${problems.length} problem${problems.length === 1 ? '' : 's'}): ${shown.join('; ')}${more}`,
    );
  }
}

export interface LoadedPolicy {
  doc: PolicyDocument;
  text: string;
  sha256: string;
  format: 'yaml' | 'json';
}

// ---- positions ----------------------------------------------------------------------------------

type Segment = string | number;

/** `rules[2].approvals[0].group`; keys that are not plain names are quoted: `partyGroups["a b"]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(String(seg))) out += out ? `.${String(seg)}` : String(seg);
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out;
}

interface Located {
  /** The deepest node of the path that exists (the key when a map value is empty). */
  node: Node | null;
  /** The pair whose value is `node`, when `node` is a map value. */
  pair?: Pair;
  /** Whether the whole path was found. */
  complete: boolean;
}

function locate(root: Node | null, path: readonly Segment[]): Located {
  let node: Node | null = root;
  let pair: Pair | undefined;
  for (const seg of path) {
    if (isMap(node)) {
      const p = node.items.find((it) => (isScalar(it.key) ? it.key.value : it.key) === seg) as
        | Pair
        | undefined;
      if (!p) return { node, pair, complete: false };
      pair = p;
      node = (p.value as Node | null) ?? (p.key as Node);
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg] as Node | undefined;
      if (!item) return { node, pair, complete: false };
      pair = undefined;
      node = item;
    } else return { node, pair, complete: false };
  }
  return { node, pair, complete: true };
}

class Positions {
  private readonly lc = new LineCounter();
  readonly root: Node | null;
  readonly errors: { offset: number; message: string; code: string }[];

  readonly doc: ReturnType<typeof parseDocument>;

  constructor(readonly source: string) {
    this.doc = parseDocument(source, { lineCounter: this.lc, prettyErrors: false, uniqueKeys: true });
    this.root = this.doc.contents as Node | null;
    this.errors = this.doc.errors.map((e) => ({ offset: e.pos[0], message: e.message, code: e.code }));
  }

  at(offset: number): { line: number; column: number } {
    const { line, col } = this.lc.linePos(offset);
    return { line, column: col };
  }

  /**
   * Position of the node at `path` (of the deepest existing parent when the
   * path is missing; of the map key when `key` is given and present).
   */
  of(path: readonly Segment[], key?: string): { line?: number; column?: number; node?: Node } {
    const found = locate(this.root, path);
    const node = found.node;
    if (key !== undefined && found.complete && isMap(node)) {
      const p = node.items.find((it) => (isScalar(it.key) ? it.key.value : it.key) === key);
      if (p && isScalar(p.key) && p.key.range) return this.at(p.key.range[0]);
    }
    if (node?.range) return { ...this.at(node.range[0]), node: found.complete ? node : undefined };
    const k = found.pair?.key;
    return isScalar(k) && k.range ? this.at(k.range[0]) : {};
  }

  /** The exact source text of a scalar. */
  sourceOf(node: Node | undefined): string | undefined {
    if (!node || !isScalar(node) || !node.range) return undefined;
    return this.source.slice(node.range[0], node.range[1]).trim();
  }
}

// ---- zod issues to problems ---------------------------------------------------------------------

/** Whether the last key of `path` is absent from its parent in the parsed value. */
function absent(value: unknown, path: readonly Segment[]): boolean {
  let v = value;
  for (const seg of path.slice(0, -1)) {
    if (v === null || typeof v !== 'object') return false;
    v = (v as Record<string | number, unknown>)[seg];
  }
  const last = path[path.length - 1];
  return last !== undefined && v !== null && typeof v === 'object' && !Object.hasOwn(v, last);
}

function issueProblems(
  issues: readonly z.core.$ZodIssue[],
  value: unknown,
  pos: Positions | undefined,
): PolicyProblem[] {
  const out: PolicyProblem[] = [];
  for (const iss of issues) {
    const path = iss.path.filter((s): s is Segment => typeof s !== 'symbol');
    if (iss.code === 'unrecognized_keys') {
      for (const key of iss.keys)
        out.push({
          path: formatPath([...path, key]),
          ...where(pos?.of(path, key)),
          message: `unknown field "${key}": remove it or correct its spelling`,
        });
      continue;
    }
    const at = pos?.of(path);
    let message = humanMessage(iss);
    if (absent(value, path)) message = `missing: add "${String(path[path.length - 1])}" (it ${message})`;
    else if (
      iss.code === 'invalid_type' &&
      typeof iss.input === 'number' &&
      message.includes('write it as a string')
    ) {
      // Quote the number exactly as written when it is a plain decimal (String() of a float may have lost digits).
      const src = pos?.sourceOf(at?.node);
      if (src && /^[0-9]+(\.[0-9]+)?$/.test(src))
        message = message.replace(`"${String(iss.input)}"`, `"${src}"`);
    }
    out.push({ path: formatPath(path), ...where(at), message });
  }
  return out;
}

const typeName = (v: unknown) =>
  v === null
    ? 'null'
    : Array.isArray(v)
      ? 'a list'
      : typeof v === 'object'
        ? 'a mapping'
        : `${typeof v} ${JSON.stringify(v)}`;

const EXPECTED: Record<string, string> = {
  array: 'a list',
  object: 'a mapping',
  record: 'a mapping',
  int: 'a whole number',
  number: 'a number',
  boolean: 'true or false',
};

/** zod's message, phrased as what the field must be. */
function humanMessage(iss: z.core.$ZodIssue): string {
  switch (iss.code) {
    case 'invalid_type':
      if (iss.message.includes('write it as a string')) return iss.message;
      return `must be ${EXPECTED[iss.expected] ?? `a ${iss.expected}`}${iss.input === undefined ? '' : `, not ${typeName(iss.input)}`}`;
    case 'invalid_value':
      return iss.values.length === 1
        ? `must be ${JSON.stringify(iss.values[0])}`
        : `must be one of: ${iss.values.map((v) => String(v)).join(', ')}`;
    case 'too_small':
      if (iss.origin === 'array')
        return `must list at least ${iss.minimum} entr${iss.minimum === 1 ? 'y' : 'ies'}`;
      if (iss.origin === 'string')
        return Number(iss.minimum) <= 1
          ? 'must not be empty'
          : `must have at least ${iss.minimum} characters`;
      return `must be at least ${iss.minimum}`;
    case 'too_big':
      if (iss.origin === 'array') return `must list at most ${iss.maximum} entries: shorten the list`;
      if (iss.origin === 'string') return `must have at most ${iss.maximum} characters: shorten it`;
      return `must be at most ${iss.maximum}`;
    default:
      return iss.message;
  }
}

function where(p: { line?: number; column?: number } | undefined): { line?: number; column?: number } {
  return p?.line === undefined ? {} : { line: p.line, column: p.column };
}

// ---- cross-reference checks ---------------------------------------------------------------------

interface Raw {
  path: Segment[];
  message: string;
  key?: string;
}

function crossCheck(doc: PolicyDocument): Raw[] {
  const out: Raw[] = [];
  const approverGroups = doc.approverGroups ?? {};
  const partyGroups = doc.partyGroups ?? {};

  const checkRequirement = (req: PolicyRule['approvals'], path: Segment[]) => {
    const seen = new Set<string>();
    (req ?? []).forEach((r, i) => {
      const members = approverGroups[r.group];
      if (!members)
        out.push({
          path: [...path, i, 'group'],
          message: `approver group "${r.group}" is not defined: add it under approverGroups or name one of: ${Object.keys(approverGroups).join(', ') || '(none defined)'}`,
        });
      else if (new Set(members).size < r.count)
        out.push({
          path: [...path, i, 'count'],
          message: `needs ${r.count} approvals but group "${r.group}" has only ${new Set(members).size} member(s): lower the count or add members`,
        });
      if (seen.has(r.group))
        out.push({
          path: [...path, i, 'group'],
          message: `group "${r.group}" is listed twice: list it once with the count needed`,
        });
      seen.add(r.group);
    });
  };

  const checkConditions = (c: Conditions | undefined, path: Segment[]) => {
    if (!c) return;
    c.partyGroups?.forEach((g, i) => {
      if (!partyGroups[g])
        out.push({
          path: [...path, 'partyGroups', i],
          message: `party group "${g}" is not defined: add it under partyGroups or name one of: ${Object.keys(partyGroups).join(', ') || '(none defined)'}`,
        });
    });
    const a = c.amount;
    if (a) {
      if (a.gt === undefined && a.gte === undefined && a.lt === undefined && a.lte === undefined)
        out.push({
          path: [...path, 'amount'],
          message: 'an empty amount condition: give gt, gte, lt or lte, or remove it',
        });
      if (a.gt !== undefined && a.gte !== undefined)
        out.push({ path: [...path, 'amount', 'gte'], message: 'give either gt or gte, not both' });
      if (a.lt !== undefined && a.lte !== undefined)
        out.push({ path: [...path, 'amount', 'lte'], message: 'give either lt or lte, not both' });
    }
    if (c.memo && c.memo.required === undefined && c.memo.pattern === undefined)
      out.push({
        path: [...path, 'memo'],
        message: 'an empty memo condition: give required or pattern, or remove it',
      });
    const t = c.time;
    if (t) {
      if (t.days === undefined && t.from === undefined && t.to === undefined)
        out.push({
          path: [...path, 'time'],
          message: 'an empty time condition: give days, from or to, or remove it',
        });
      if (t.from !== undefined && t.from === t.to)
        out.push({
          path: [...path, 'time', 'to'],
          message: 'from and to are equal, so the window would be empty: omit both for the whole day',
        });
      if (t.days && new Set(t.days).size !== t.days.length)
        out.push({ path: [...path, 'time', 'days'], message: 'a day is listed twice: list each day once' });
    }
  };

  const ruleIds = new Map<string, number>();
  doc.rules.forEach((r, i) => {
    const path: Segment[] = ['rules', i];
    const first = ruleIds.get(r.id);
    if (first !== undefined)
      out.push({
        path: [...path, 'id'],
        message: `duplicate rule id "${r.id}" (also rules[${first}]): give each rule its own id`,
      });
    else ruleIds.set(r.id, i);
    if (r.decision === 'approve' && !r.approvals)
      out.push({
        path,
        key: 'decision',
        message: 'decision approve needs approvals: add approvals: [{ group: <approver group>, count: <n> }]',
      });
    if (r.decision !== 'approve' && r.approvals)
      out.push({
        path: [...path, 'approvals'],
        message: `approvals are only for decision approve: remove them or change the decision (it is ${r.decision})`,
      });
    if (r.decision === 'deny' && !r.reason)
      out.push({
        path,
        key: 'decision',
        message: 'decision deny needs a reason (shown to the caller): add reason: "…"',
      });
    checkRequirement(r.approvals, [...path, 'approvals']);
    checkConditions(r.when, [...path, 'when']);
  });

  const limitIds = new Map<string, number>();
  (doc.limits ?? []).forEach((l, i) => {
    const path: Segment[] = ['limits', i];
    const first = limitIds.get(l.id);
    if (first !== undefined)
      out.push({
        path: [...path, 'id'],
        message: `duplicate limit id "${l.id}" (also limits[${first}]): give each limit its own id`,
      });
    else limitIds.set(l.id, i);
    if (l.maxAmount === undefined && l.maxCount === undefined)
      out.push({ path, key: 'id', message: 'a limit needs maxAmount, maxCount or both: add one' });
    if (new Set(l.per).size !== l.per.length)
      out.push({ path: [...path, 'per'], message: 'a dimension is listed twice: list each once' });
    if (l.exceeded === 'approve' && !l.approvals)
      out.push({
        path,
        key: 'exceeded',
        message:
          'exceeded: approve needs approvals: add approvals: [{ group: <approver group>, count: <n> }]',
      });
    if (l.exceeded !== 'approve' && l.approvals)
      out.push({
        path: [...path, 'approvals'],
        message: 'approvals are only for exceeded: approve: remove them or set exceeded: approve',
      });
    checkRequirement(l.approvals, [...path, 'approvals']);
    checkConditions(l.when, [...path, 'when']);
  });

  if (doc.policyChanges) checkRequirement(doc.policyChanges.approvals, ['policyChanges', 'approvals']);
  return out;
}

// ---- parsing ------------------------------------------------------------------------------------

const MAX_TEXT = 1024 * 1024;

function jsonSyntaxProblem(e: Error, pos: Positions): PolicyProblem {
  const lc = /\(line (\d+) column (\d+)\)/.exec(e.message);
  if (lc)
    return { path: '', line: Number(lc[1]), column: Number(lc[2]), message: `not valid JSON: ${e.message}` };
  const at = /at position (\d+)/.exec(e.message);
  return {
    path: '',
    ...(at ? pos.at(Number(at[1])) : {}),
    message: `not valid JSON: ${e.message}: fix the syntax (or give the document as YAML)`,
  };
}

/**
 * Parses and checks a policy document; throws `PolicyError` listing every
 * problem found. `auto` (the default) reads JSON when the text starts with `{`.
 */
export function parsePolicy(text: string, format: 'yaml' | 'json' | 'auto' = 'auto'): LoadedPolicy {
  const fmt = format === 'auto' ? (text.trimStart().startsWith('{') ? 'json' : 'yaml') : format;
  if (text.length > MAX_TEXT)
    throw new PolicyError([
      { path: '', message: `the document has ${text.length} characters; at most ${MAX_TEXT}: shorten it` },
    ]);
  if (unstorableText(text))
    throw new PolicyError([
      {
        path: '',
        message: 'the text holds a U+0000 or an unpaired surrogate, which cannot be stored: remove it',
      },
    ]);
  const pos = new Positions(text);
  let value: unknown;
  if (fmt === 'json') {
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new PolicyError([jsonSyntaxProblem(e as Error, pos)]);
    }
    // JSON.parse keeps the last of duplicate keys silently; refuse them as YAML does.
    const dup = pos.errors.filter((e) => e.code === 'DUPLICATE_KEY');
    if (dup.length)
      throw new PolicyError(
        dup.map((e) => ({ path: '', ...pos.at(e.offset), message: `${e.message}: keep one of them` })),
      );
  } else {
    if (pos.errors.length)
      throw new PolicyError(
        pos.errors.map((e) => ({
          path: '',
          ...pos.at(e.offset),
          message: `not valid YAML: ${e.message}${e.code === 'DUPLICATE_KEY' ? ': keep one of them' : ''}`,
        })),
      );
    try {
      value = pos.doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      throw new PolicyError([{ path: '', message: `not valid YAML: ${(e as Error).message}` }]);
    }
  }
  if (value === null || value === undefined || typeof value !== 'object' || Array.isArray(value))
    throw new PolicyError([
      {
        path: '',
        ...(pos.root?.range ? pos.at(pos.root.range[0]) : {}),
        message: 'the document must be a mapping with at least version: 1 and rules: [...]',
      },
    ]);
  const parsed = PolicyDocumentSchema.safeParse(value, { reportInput: true });
  if (!parsed.success) throw new PolicyError(issueProblems(parsed.error.issues, value, pos));
  const cross = crossCheck(parsed.data);
  if (cross.length)
    throw new PolicyError(
      cross.map((c) => ({
        path: formatPath(c.key ? [...c.path, c.key] : c.path),
        ...where(pos.of(c.path, c.key)),
        message: c.message,
      })),
    );
  return { doc: parsed.data, text, sha256: sha256Hex(text), format: fmt };
}

/**
 * Reads and checks the policy file at `path` (format from its extension:
 * `.json` JSON, else by content). A file that cannot be read is a problem
 * naming the file; every problem's message starts with the file's name.
 */
export async function readPolicyFile(path: string): Promise<LoadedPolicy> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new PolicyError(
      [
        {
          path: '',
          message: `cannot read the policy file ${path} (${code === 'ENOENT' ? 'no such file' : (code ?? 'error')}): check the path (policy.file, CANTON_SIGNER_POLICY_FILE or --policy)`,
        },
      ],
      path,
      'unreadable',
    );
  }
  try {
    return parsePolicy(text, extname(path).toLowerCase() === '.json' ? 'json' : 'auto');
  } catch (e) {
    if (e instanceof PolicyError) throw new PolicyError(e.problems, path);
    throw e;
  }
}

// ---- built-in policy and JSON Schema ------------------------------------------------------------

const ALLOW_ALL_TEXT = `# Built-in policy used when none is configured: everything is allowed, no limits.
version: 1
name: built-in allow-all (no policy configured)
default: allow
rules:
  - id: allow-all
    description: no policy is configured
    decision: allow
`;

/** The built-in policy (version 0 when in force): every request allowed, no limits. */
export const ALLOW_ALL: LoadedPolicy = parsePolicy(ALLOW_ALL_TEXT, 'yaml');

/** JSON Schema (draft 2020-12) of the document as written (defaults optional); docs/policy.schema.json. */
export function policyJsonSchema(): object {
  return {
    ...(z.toJSONSchema(PolicyDocumentSchema as ZodType, {
      target: 'draft-2020-12',
      io: 'input',
      unrepresentable: 'any',
    }) as object),
    $id: 'https://canton-signer.dev/schemas/policy-1.json',
    title: 'canton-signer policy document, format version 1',
  };
}

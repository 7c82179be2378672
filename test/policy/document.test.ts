/**
 * The policy document: problems name the field path, the line and column and
 * what to do (YAML and JSON), cross-references are checked, numbers are
 * refused where a decimal belongs, the shipped examples parse, and
 * docs/policy.schema.json is the schema the code generates — regenerate it
 * with `UPDATE_SCHEMAS=1 npx vitest run test/policy/document.test.ts && npx
 * biome format --write docs/policy.schema.json` after a format change (the
 * file is compared as JSON).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ALLOW_ALL,
  backtrackingProblem,
  CALLER_ROLES,
  durationMs,
  ENTRY_POINTS,
  type PolicyError,
  type PolicyProblem,
  parsePolicy,
  policyJsonSchema,
} from '../../src/policy/document.js';
import { ROLES } from '../../src/server/roles.js';
import { sha256Hex } from '../../src/store/canonical.js';

const MINIMAL = `version: 1
rules:
  - id: all
    decision: allow
`;

function problems(text: string, format?: 'yaml' | 'json'): PolicyProblem[] {
  try {
    parsePolicy(text, format);
  } catch (e) {
    expect((e as Error).name).toBe('PolicyError');
    return (e as PolicyError).problems;
  }
  throw new Error('expected the document to be refused');
}

function only(text: string, format?: 'yaml' | 'json'): PolicyProblem {
  const ps = problems(text, format);
  expect(ps, JSON.stringify(ps)).toHaveLength(1);
  return ps[0]!;
}

describe('parsePolicy: valid documents', () => {
  it('fills defaults and hashes the exact text', () => {
    const p = parsePolicy(MINIMAL);
    expect(p.format).toBe('yaml');
    expect(p.doc.default).toBe('deny');
    expect(p.doc.timezone).toBe('UTC');
    expect(p.doc.approvals.ttl).toBe('24h');
    expect(p.sha256).toBe(sha256Hex(MINIMAL));
    expect(parsePolicy(`${MINIMAL}\n`).sha256).not.toBe(p.sha256);
  });

  it('reads JSON (auto when the text starts with {)', () => {
    const text = JSON.stringify(
      { version: 1, default: 'allow', rules: [{ id: 'a', decision: 'allow' }] },
      null,
      2,
    );
    const p = parsePolicy(text);
    expect(p.format).toBe('json');
    expect(p.doc.default).toBe('allow');
    expect(p.text).toBe(text);
  });

  it('ALLOW_ALL allows by default and has its one allow rule', () => {
    expect(ALLOW_ALL.doc.default).toBe('allow');
    expect(ALLOW_ALL.doc.rules).toEqual([expect.objectContaining({ id: 'allow-all', decision: 'allow' })]);
    expect(ALLOW_ALL.doc.limits ?? []).toEqual([]);
    expect(ALLOW_ALL.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('durationMs reads s, m, h, d between 1 s and 90 d', () => {
    expect(durationMs('1s')).toBe(1000);
    expect(durationMs('15m')).toBe(900_000);
    expect(durationMs('24h')).toBe(86_400_000);
    expect(durationMs('90d')).toBe(90 * 86_400_000);
    expect(() => durationMs('91d')).toThrow(/90 days/);
    expect(() => durationMs('0s')).toThrow(/not a duration/);
    expect(() => durationMs('1w')).toThrow(/not a duration/);
    expect(() => durationMs('1.5h')).toThrow(/not a duration/);
  });
});

describe('parsePolicy: each problem names the field, the line and what to do', () => {
  it('a wrong enum value deep in a rule', () => {
    const p = only(`version: 1
rules:
  - id: a
    decision: allow
  - id: b
    decision: maybe
`);
    expect(p.path).toBe('rules[1].decision');
    expect(p.line).toBe(6);
    expect(p.column).toBe(15);
  });

  it('an unknown approver group, at the group node', () => {
    const p = only(`version: 1
approverGroups:
  treasury: [alice, bob]
rules:
  - id: a
    decision: allow
  - id: b
    decision: allow
  - id: c
    decision: approve
    approvals:
      - group: tresury
        count: 1
`);
    expect(p.path).toBe('rules[2].approvals[0].group');
    expect(p.line).toBe(12);
    expect(p.column).toBe(16);
    expect(p.message).toMatch(/"tresury" is not defined.*treasury/);
  });

  it('an unknown key, at the key, telling to remove it', () => {
    const p = only(`version: 1
rules:
  - id: a
    decison: allow
    decision: allow
`);
    expect(p.path).toBe('rules[0].decison');
    expect(p.line).toBe(4);
    expect(p.column).toBe(5);
    expect(p.message).toMatch(/unknown field "decison": remove it/);
  });

  it('a missing required field, at its parent', () => {
    const p = only(`version: 1
rules:
  - id: a
`);
    expect(p.path).toBe('rules[0].decision');
    expect(p.line).toBe(3);
    expect(p.message).toMatch(/missing: add "decision"/);
  });

  it('numbers are refused where a decimal belongs, quoting the number as written', () => {
    const p = only(`version: 1
limits:
  - id: l
    per: [party]
    window: 24h
    maxAmount: 1000
rules:
  - id: a
    decision: allow
`);
    expect(p.path).toBe('limits[0].maxAmount');
    expect(p.line).toBe(6);
    expect(p.column).toBe(16);
    expect(p.message).toContain('write it as a string: "1000"');
    const q = only(`version: 1
rules:
  - id: a
    when: { amount: { gt: 0.12345678901234567890 } }
    decision: allow
`);
    expect(q.path).toBe('rules[0].when.amount.gt');
    expect(q.message).toContain('write it as a string: "0.12345678901234567890"');
  });

  it('a decimal with more than 10 decimals is refused', () => {
    const p = only(`version: 1
rules:
  - id: a
    when: { amount: { gt: "0.12345678901" } }
    decision: allow
`);
    expect(p.path).toBe('rules[0].when.amount.gt');
    expect(p.message).toMatch(/at most 10 decimals/);
  });

  it('a JSON document: path, line and column too', () => {
    const text = `{
  "version": 1,
  "rules": [
    { "id": "a", "decision": "allow" },
    { "id": "b", "decision": "approve", "approvals": [{ "group": "x", "count": "2" }] }
  ]
}`;
    const ps = problems(text);
    expect(ps).toHaveLength(1);
    expect(ps[0]!.path).toBe('rules[1].approvals[0].count');
    expect(ps[0]!.line).toBe(5);
    expect(ps[0]!.column).toBe(80);
  });

  it('a JSON number for a decimal and JSON duplicate keys are refused', () => {
    const p =
      only(`{"version": 1, "limits": [{"id": "l", "per": ["party"], "window": "1h", "maxAmount": 10.50}],
 "rules": [{"id": "a", "decision": "allow"}]}`);
    expect(p.path).toBe('limits[0].maxAmount');
    expect(p.line).toBe(1);
    expect(p.message).toContain('write it as a string: "10.50"');
    const d = only(
      '{"version": 1, "default": "allow", "default": "deny", "rules": [{"id": "a", "decision": "allow"}]}',
    );
    expect(d.message).toMatch(/unique|duplicate/i);
    expect(d.line).toBe(1);
  });

  it('JSON indented with tabs still gets positions', () => {
    const text =
      '{\n\t"version": 1,\n\t"rules": [\n\t\t{"id": "a", "decision": "allow", "reason": ""}\n\t]\n}';
    const p = only(text);
    expect(p.path).toBe('rules[0].reason');
    expect(p.line).toBe(4);
    expect(p.column).toBe(46);
    expect(p.message).toBe('must not be empty');
  });

  it('an empty value, a wrong type, a group name that is not a plain key', () => {
    const ps = problems(`version: 1
approverGroups:
  "bad name": [alice]
rules:
  - id: a
    decision:
  - id: b
    decision: allow
    when: { actions: transfer }
`);
    expect(ps.map((p) => [p.path, p.line])).toEqual([
      ['approverGroups["bad name"]', 3],
      ['rules[0].decision', 6],
      ['rules[1].when.actions', 9],
    ]);
    expect(ps[1]!.message).toBe('must be one of: allow, deny, approve');
    expect(ps[2]!.message).toBe('must be a list, not string "transfer"');
  });

  it('JSON syntax errors say so', () => {
    const p = only('{"version": 1,, "rules": []}', 'json');
    expect(p.message).toMatch(/^not valid JSON/);
  });

  it('YAML syntax errors and duplicate keys name the line', () => {
    const p = only(`version: 1
rules:
  - id: a
    decision: allow
    decision: deny
`);
    expect(p.line).toBe(5);
    expect(p.message).toMatch(/keep one/);
    const q = problems(`version: 1
rules: [ { id: a
`);
    expect(q[0]!.message).toMatch(/^not valid YAML/);
    expect(q[0]!.line).toBeGreaterThanOrEqual(2);
  });

  it('duplicate rule and limit ids', () => {
    const ps = problems(`version: 1
limits:
  - { id: l, per: [party], window: 1h, maxCount: 1 }
  - { id: l, per: [party], window: 1h, maxCount: 2 }
rules:
  - id: a
    decision: allow
  - id: a
    decision: allow
`);
    expect(ps.map((p) => [p.path, p.line])).toEqual([
      ['rules[1].id', 8],
      ['limits[1].id', 4],
    ]);
    expect(ps[0]!.message).toMatch(/duplicate rule id "a" \(also rules\[0\]\)/);
  });

  it('approve without approvals, deny without reason, approvals on allow', () => {
    const ps = problems(`version: 1
approverGroups: { t: [alice] }
rules:
  - id: a
    decision: approve
  - id: b
    decision: deny
  - id: c
    decision: allow
    approvals: [{ group: t, count: 1 }]
`);
    expect(ps.map((p) => [p.path, p.line])).toEqual([
      ['rules[0].decision', 5],
      ['rules[1].decision', 7],
      ['rules[2].approvals', 10],
    ]);
    expect(ps[0]!.message).toMatch(/needs approvals/);
    expect(ps[1]!.message).toMatch(/needs a reason/);
  });

  it('a count larger than the group, an unknown party group', () => {
    const ps = problems(`version: 1
approverGroups: { t: [alice, bob] }
rules:
  - id: a
    when: { partyGroups: [hot] }
    decision: approve
    approvals: [{ group: t, count: 3 }]
`);
    expect(ps.map((p) => p.path)).toEqual(['rules[0].approvals[0].count', 'rules[0].when.partyGroups[0]']);
    expect(ps[0]!.message).toMatch(/only 2 member/);
    expect(ps[1]!.message).toMatch(/party group "hot" is not defined/);
  });

  it('a bad regex, a bad time zone, a bad duration, a bad time of day', () => {
    const ps = problems(`version: 1
timezone: Mars/Olympus
limits:
  - { id: l, per: [party], window: 3w, maxCount: 1 }
rules:
  - id: a
    when:
      memo: { pattern: "INV-(" }
      time: { from: "25:00" }
    decision: allow
`);
    expect(ps.map((p) => [p.path, p.line])).toEqual([
      ['timezone', 2],
      ['limits[0].window', 4],
      ['rules[0].when.memo.pattern', 8],
      ['rules[0].when.time.from', 9],
    ]);
    expect(ps[0]!.message).toMatch(/IANA/);
    expect(ps[1]!.message).toMatch(/<n>s, <n>m, <n>h or <n>d/);
    expect(ps[2]!.message).toMatch(/regular expression/);
  });

  it('limits need a maximum, approvals iff exceeded: approve', () => {
    const ps = problems(`version: 1
limits:
  - { id: l, per: [party], window: 1h }
  - { id: m, per: [party], window: 1h, maxCount: 1, exceeded: approve }
rules:
  - { id: a, decision: allow }
`);
    expect(ps.map((p) => p.path)).toEqual(['limits[0].id', 'limits[1].exceeded']);
  });

  it('the error message lists problems with line and column', () => {
    try {
      parsePolicy('version: 2\nrules: []\n');
      expect.unreachable();
    } catch (e) {
      expect((e as Error).message).toMatch(/line 1, column 10: version: /);
      expect((e as Error).message).toMatch(/line 2, column 8: rules: /);
    }
  });

  it('an empty document or a list is refused', () => {
    expect(only('').message).toMatch(/must be a mapping/);
    expect(only('- a\n').message).toMatch(/must be a mapping/);
  });
});

describe('shipped examples', () => {
  for (const name of ['policy.exchange.yaml', 'policy.custodian.yaml'])
    it(`examples/${name} parses`, () => {
      const text = readFileSync(new URL(`../../examples/${name}`, import.meta.url), 'utf8');
      const p = parsePolicy(text);
      expect(p.format).toBe('yaml');
      expect(p.doc.rules.length).toBeGreaterThan(1);
    });
});

describe('docs/policy.schema.json', () => {
  const FILE = new URL('../../docs/policy.schema.json', import.meta.url);
  it('is the schema the code generates', () => {
    const generated = policyJsonSchema();
    if (process.env.UPDATE_SCHEMAS) writeFileSync(FILE, `${JSON.stringify(generated, null, 2)}\n`);
    const doc = JSON.parse(readFileSync(FILE, 'utf8')) as Record<string, unknown>;
    expect(
      doc,
      'docs/policy.schema.json is stale: regenerate it with UPDATE_SCHEMAS=1 npx vitest run test/policy/document.test.ts && npx biome format --write docs/policy.schema.json',
    ).toEqual(generated);
    expect(doc.$schema).toMatch(/2020-12/);
    expect(doc.additionalProperties).toBe(false);
    expect(JSON.stringify(doc)).toContain('"maxAmount"');
  });
});

describe('memo patterns that backtrack exponentially', () => {
  it('refuses nested repetition, repeated alternatives and back-references; keeps the ordinary ones', () => {
    for (const p of [
      '([A-Z0-9]+-?)+',
      '(a+)+',
      '(a|ab)*',
      '(a*)*',
      '((ab)+c)+',
      '(x)\\1',
      '(?:a+)+$',
      '(a{2,})+',
    ])
      expect(backtrackingProblem(p), p).toBeDefined();
    for (const p of [
      '[A-Z0-9-]+',
      'INV-[0-9]{6}',
      '(ab)+',
      '(a|b)',
      'deposit-[a-z]+',
      '\\d+',
      '[(a+)+]',
      '(?:abc)?x*',
    ])
      expect(backtrackingProblem(p), p).toBeUndefined();
  });

  it('a policy with such a pattern does not load, naming the field', () => {
    const text =
      'version: 1\nrules:\n  - id: r\n    when: { memo: { pattern: "([A-Z0-9]+-?)+" } }\n    decision: allow\n';
    expect(() => parsePolicy(text)).toThrow(
      /rules\[0\]\.when\.memo\.pattern: the pattern has a repeated group/,
    );
  });
});

describe('closed lists: entry points and roles', () => {
  it('a typo in entryPoints or callerRoles does not load (it would be a rule that never fires)', () => {
    const withdrawl =
      'version: 1\nrules:\n  - id: r\n    when: { entryPoints: [withdrawl] }\n    decision: deny\n    reason: x\n';
    expect(() => parsePolicy(withdrawl)).toThrow(
      /rules\[0\]\.when\.entryPoints\[0\]: must be one of: withdrawal/,
    );
    const operater =
      'version: 1\nrules:\n  - id: r\n    when: { callerRoles: [operater] }\n    decision: allow\n';
    expect(() => parsePolicy(operater)).toThrow(/callerRoles\[0\]: must be one of: admin/);
  });

  it("every flow of src/flows is an entry point a policy can name; the roles are the service's", () => {
    const src = readdirSync('src/flows')
      .filter((f) => f.endsWith('.ts'))
      .map((f) => readFileSync(join('src/flows', f), 'utf8'))
      .join('\n');
    const named = new Set<string>();
    for (const m of src.matchAll(/(?:name|flowName): '([a-z-]+)'/g)) named.add(m[1]!);
    for (const m of src.matchAll(/const flow = '([a-z-]+)'/g)) named.add(m[1]!);
    for (const c of ['accept', 'reject', 'withdraw']) named.add(`offer-${c}`);
    expect(named.size).toBeGreaterThan(8);
    for (const n of named) expect(ENTRY_POINTS as readonly string[], n).toContain(n);
    expect([...CALLER_ROLES]).toEqual([...ROLES]);
  });
});

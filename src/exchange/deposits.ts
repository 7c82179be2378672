/**
 * Which customer account a deposit belongs to, from its memo (the token
 * standard's `splice.lfdecentralizedtrust.org/reason`). The rules are the
 * configuration's `exchange.deposits.attribution`, tried in order; the first
 * that matches names the account:
 *
 * - `exact`:  the memo is the account (optionally only memos matching
 *   `value`, a regular expression over the whole memo, e.g. `^[0-9]{4,12}$`);
 * - `prefix`: the memo starts with `value`; the account is the rest
 *   (`acct-42` with prefix `acct-` → `42`);
 * - `regex`:  `value` is a regular expression with a capture group; the
 *   account is `account` with `$1`… replaced (default `$1`).
 *
 * A rule may be limited to one party of the book (`party`). A memo is text
 * from a stranger: it is never interpreted beyond these rules, and one
 * longer than `maxMemoLength` attributes to nothing (an operator looks at it).
 * An account is 1–200 characters without surrounding spaces.
 */

export interface AttributionRule {
  name: string;
  /** A party id, or `*` (default): every party of the book. */
  party?: string;
  match: 'exact' | 'prefix' | 'regex';
  /** exact: optional whole-memo pattern; prefix: the prefix; regex: the pattern. */
  value?: string;
  /** regex: the account, with `$1`… for the groups (default `$1`). */
  account?: string;
}

export interface Attribution {
  account: string;
  /** `rule:<name>`. */
  by: string;
}

export type Attribute = (party: string, memo: string | undefined) => Attribution | undefined;

const ACCOUNT = /^\S(.{0,198}\S)?$/s;

/** Why a rule cannot be used, or undefined when it can (configuration checks call this). */
export function ruleProblem(r: AttributionRule): string | undefined {
  if (r.match === 'prefix') return r.value ? undefined : 'a prefix rule needs a non-empty value';
  if (r.match === 'exact' && r.value === undefined) return undefined;
  if (!r.value) return `a ${r.match} rule needs a value (a regular expression)`;
  let re: RegExp;
  try {
    re = new RegExp(r.value, 'u');
  } catch (e) {
    return `value is not a regular expression: ${e instanceof Error ? e.message : String(e)}`;
  }
  if (r.match === 'regex') {
    const groups = new RegExp(`${re.source}|`, 'u').exec('')!.length - 1;
    if (groups < 1) return 'a regex rule needs a capture group, e.g. ^acct-([0-9]+)$';
    const refs = [...(r.account ?? '$1').matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
    if (refs.some((n) => n < 1 || n > groups))
      return `account refers to a group the pattern does not have (it has ${groups})`;
  }
  return undefined;
}

/** The attribution function of `rules` (checked first: a bad rule throws, naming it). */
export function attributionOf(rules: readonly AttributionRule[], maxMemoLength = 256): Attribute {
  const compiled = rules.map((r) => {
    const problem = ruleProblem(r);
    if (problem) throw new TypeError(`attribution rule ${r.name}: ${problem}`);
    const re = r.match === 'prefix' || r.value === undefined ? undefined : new RegExp(r.value, 'u');
    return { r, re };
  });
  return (party, memo) => {
    if (memo === undefined || memo.length === 0 || memo.length > maxMemoLength) return undefined;
    for (const { r, re } of compiled) {
      if (r.party !== undefined && r.party !== '*' && r.party !== party) continue;
      let account: string | undefined;
      if (r.match === 'exact') account = !re || wholeMatch(re, memo) ? memo : undefined;
      else if (r.match === 'prefix')
        account = memo.startsWith(r.value!) ? memo.slice(r.value!.length) : undefined;
      else {
        const m = re!.exec(memo);
        if (m) account = (r.account ?? '$1').replace(/\$(\d+)/g, (_, n: string) => m[Number(n)] ?? '');
      }
      if (account !== undefined && ACCOUNT.test(account)) return { account, by: `rule:${r.name}` };
    }
    return undefined;
  };
}

function wholeMatch(re: RegExp, s: string): boolean {
  const m = re.exec(s);
  return m !== null && m.index === 0 && m[0].length === s.length;
}

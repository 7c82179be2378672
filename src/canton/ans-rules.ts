/**
 * The name service's rules that are checked off the ledger, as the DSO's
 * automation applies them when an initial payment for an entry appears: the
 * name (`<label>.unverified.<acronym>`: a label of lower-case ASCII letters,
 * digits, `_` and `-`, the whole name at most 60 characters), the URL (empty,
 * or an absolute http/https URL of at most 255 characters) and the
 * description (at most 140 characters). A request that breaks one is
 * rejected by the DSO after the party paid, which returns the funds minus the
 * fees of locking them: checking first spares that. Also the renewal window
 * of a subscription: a payment is accepted from `nextPaymentDueAt −
 * renewalDuration` and must be collected before the entry's `expiresAt`
 * (there is no grace period). Pure: no I/O.
 */

/** The network's name service acronym on the public networks (Scan's `name_service_name_acronym`). */
export const DEFAULT_ANS_ACRONYM = 'cns';

/** The longest name the DSO accepts, suffix included. */
export const MAX_ANS_NAME = 60;
export const MAX_ANS_URL = 255;
export const MAX_ANS_DESCRIPTION = 140;

export type AnsNameCheck = { ok: true; name: string; label: string } | { ok: false; reason: string };

/** `.unverified.<acronym>`: the suffix every name a party can register ends with. */
export function ansSuffix(acronym = DEFAULT_ANS_ACRONYM): string {
  return `.unverified.${acronym}`;
}

/** The longest label for `acronym` (45 for `cns`). */
export function maxAnsLabel(acronym = DEFAULT_ANS_ACRONYM): number {
  return MAX_ANS_NAME - ansSuffix(acronym).length;
}

const LABEL_CHAR = /^[a-z0-9_-]$/;

/**
 * Whether `name` is one a party may register, and if not, why — in a
 * sentence that says what to change. Nothing is lower-cased or trimmed: the
 * DSO does not either, so `Alice.unverified.cns` is refused here as there.
 */
export function checkAnsName(name: string, acronym = DEFAULT_ANS_ACRONYM): AnsNameCheck {
  const suffix = ansSuffix(acronym);
  const max = maxAnsLabel(acronym);
  if (typeof name !== 'string' || name === '') return { ok: false, reason: 'the name is empty' };
  if (!name.endsWith(suffix)) {
    const lower = name.toLowerCase();
    const hint = lower.endsWith(suffix)
      ? ` (names are lower case: ${lower})`
      : ` (e.g. ${label(name)}${suffix})`;
    return { ok: false, reason: `a name a party can register ends with ${suffix}${hint}` };
  }
  const l = name.slice(0, -suffix.length);
  if (l === '') return { ok: false, reason: `the name has nothing before ${suffix}` };
  if (l.length > max)
    return {
      ok: false,
      reason: `the part before ${suffix} is ${l.length} characters; at most ${max} (the whole name at most ${MAX_ANS_NAME})`,
    };
  for (const ch of l) {
    if (LABEL_CHAR.test(ch)) continue;
    const what =
      ch === '.'
        ? 'a dot (the part before the suffix is one label)'
        : /[A-Z]/.test(ch)
          ? `an upper-case letter (${ch}; names are lower case)`
          : `the character ${JSON.stringify(ch)}`;
    return { ok: false, reason: `the name holds ${what}: use a-z, 0-9, _ and - only` };
  }
  return { ok: true, name, label: l };
}

/** A plausible label from any text, for the hint of a refusal. */
function label(text: string): string {
  const l = text
    .toLowerCase()
    .split('.')[0]!
    .replace(/[^a-z0-9_-]/g, '-')
    .slice(0, maxAnsLabel());
  return l === '' ? 'name' : l;
}

/**
 * The characters RFC 3986 allows in a URI, percent signs only as `%HH`. The
 * DSO parses the URL strictly (an RFC 3986 parser), while a WHATWG URL parser
 * accepts and repairs spaces, backslashes, non-ASCII and stray `%`: anything
 * outside this set is refused here rather than by the DSO, after paying.
 */
const URI_CHARS = /^(?:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$/;

/** Why the entry's URL would be refused by the DSO, or undefined. */
export function ansUrlProblem(url: string): string | undefined {
  if (url === '') return undefined;
  if (url.length > MAX_ANS_URL) return `the URL is ${url.length} characters; at most ${MAX_ANS_URL}`;
  if (!URI_CHARS.test(url))
    return 'the URL holds a character a strict URI parser refuses (a space, a backslash, a non-ASCII letter, a % not followed by two hex digits, or one of "<>{}|^`): percent-encode it';
  // Brackets belong only around an IPv6 host, never in the path, query or fragment.
  const rest = url.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/, '');
  if (/[[\]]/.test(rest)) return 'the URL has [ or ] outside an IPv6 host: percent-encode them (%5B, %5D)';
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'the URL is not an absolute URL (give http(s)://… or nothing)';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'the URL must be http or https';
  return undefined;
}

/** Why the entry's description would be refused by the DSO, or undefined. */
export function ansDescriptionProblem(description: string): string | undefined {
  // Counted as the DSO's JVM counts: UTF-16 code units (an emoji counts 2).
  const n = description.length;
  return n > MAX_ANS_DESCRIPTION
    ? `the description is ${n} characters; at most ${MAX_ANS_DESCRIPTION}`
    : undefined;
}

/** When a subscription's next payment may be made: `nextPaymentDueAt − renewalDuration`. */
export function renewalWindowOpens(nextPaymentDueAt: Date, renewalDurationMs: number): Date {
  return new Date(nextPaymentDueAt.getTime() - renewalDurationMs);
}

export type RenewalPhase =
  /** Too early: MakePayment would fail its `now + renewalDuration >= nextPaymentDueAt` check. */
  | 'not_yet'
  /** The window is open and the entry still lives: pay now. */
  | 'open'
  /** The entry expired: a payment now would never be collected (and would stay locked). */
  | 'expired';

/** Where `now` falls for an entry whose subscription is due at `nextPaymentDueAt`. */
export function renewalPhase(
  now: Date,
  entry: { nextPaymentDueAt: Date; expiresAt: Date },
  renewalDurationMs: number,
): RenewalPhase {
  if (now.getTime() >= entry.expiresAt.getTime()) return 'expired';
  if (now.getTime() < renewalWindowOpens(entry.nextPaymentDueAt, renewalDurationMs).getTime())
    return 'not_yet';
  return 'open';
}

/**
 * The values flow commands take on the command line, checked before anything
 * is opened or asked of the network: amounts, parties (a party id or an ANS
 * name; a bare hint found in the party book gets its party id suggested),
 * instruments, instants, whole numbers and command ids. A bad value is a
 * UsageError (exit 2) naming the option and the form it expects.
 */

import { isPartyId } from '../flows/names.js';
import { Refusal } from '../flows/refusal.js';
import { checkCallerCommandId } from '../flows/transfer.js';
import { partyHintProblem } from '../hashing/canton-hash.js';
import { decimalUnits, isDecimal, NUMERIC_SCALE } from '../intent/decimal.js';
import type { InstrumentId } from '../intent/model.js';
import { parseInstantMicros } from '../intent/time.js';
import { keystoreDir } from '../keys/keystore-dir.js';
import { FilePartyBook, type PartyRecord } from '../store/parties.js';
import { listOf } from '../text/english.js';
import { UsageError } from './input.js';

/**
 * An amount as Daml's `Numeric 10` takes it: digits, a dot, at most ten
 * decimals; positive unless `zero` allows 0. Returned as given (trimmed).
 */
export function amountArg(s: string, option: string, opts: { zero?: boolean } = {}): string {
  const t = s.trim();
  const form = `a decimal number with a dot and at most ${NUMERIC_SCALE} decimals, e.g. 12.5`;
  if (/^-?[0-9]+,[0-9]+$/.test(t))
    throw new UsageError(
      `${option}: ${s} uses a comma: write the decimals after a dot (${t.replace(',', '.')})`,
    );
  if (!isDecimal(t) || t.startsWith('-'))
    throw new UsageError(`${option}: expected ${form}${opts.zero ? ' (or 0)' : ''}; got ${s}`);
  const units = decimalUnits(t);
  if (units === undefined)
    throw new UsageError(`${option}: ${s} has more than ${NUMERIC_SCALE} decimals: expected ${form}`);
  if (units === 0n && !opts.zero) throw new UsageError(`${option}: must be more than 0; got ${s}`);
  return t;
}

/** ANS names always end in `.<acronym>` (`alice.unverified.cns`): a value without a dot is none. */
const looksLikeAnsName = (s: string) => s.includes('.') && !s.includes('::');

/**
 * A party id, or (unless `ansName` is false) an ANS name, for `option`. A value
 * that is neither, e.g. the hint `treasury`, is refused; when parties in
 * `book` have that hint, their ids are suggested.
 */
export function partyArg(
  s: string,
  option: string,
  book: readonly PartyRecord[] = [],
  opts: { ansName?: boolean } = {},
): string {
  const t = s.trim();
  const ans = opts.ansName !== false;
  const forms = ans
    ? 'a party id (hint::1220…) or an ANS name (name.unverified.cns)'
    : 'a party id (hint::1220…)';
  if (t.length === 0) throw new UsageError(`${option}: empty: expected ${forms}`);
  if (isPartyId(t)) return t;
  const matches = book.filter((p) => p.hint === t).map((p) => p.partyId);
  if (matches.length > 0)
    throw new UsageError(
      `${option}: ${t} is a party hint, not a party id: did you mean ${listOf(matches, 'or')}? (\`canton-signer party list\` shows the party book)`,
    );
  if (t.includes('::'))
    throw new UsageError(
      `${option}: ${t} is not a well-formed party id: expected hint::1220 followed by 64 hexadecimal digits`,
    );
  if (ans && looksLikeAnsName(t)) return t;
  throw new UsageError(`${option}: ${t} is neither ${forms.replace(' or ', ' nor ')}`);
}

/** A party argument: its value, the option (or argument) it came by, and whether an ANS name will do. */
export type PartyValue = [value: string, option: string, opts?: { ansName?: boolean }];

/**
 * Checks each party argument with `partyArg`; the party book of the keystore
 * (`--keystore`, else $CANTON_SIGNER_KEYSTORE or ./keystore) is read only when
 * a value is not a party id, to suggest one (an unreadable book suggests nothing).
 */
export async function partyArgs(keystore: string | undefined, values: readonly PartyValue[]): Promise<void> {
  let book: PartyRecord[] = [];
  if (values.some(([v]) => !isPartyId(v.trim())))
    book = await new FilePartyBook(keystoreDir(process.env, keystore)).list().catch(() => []);
  for (const [v, option, opts] of values) partyArg(v, option, book, opts);
}

/** `--hint`: a party hint as Canton allows it. */
export function hintArg(s: string, option = '--hint'): string {
  const bad = partyHintProblem(s);
  if (bad) throw new UsageError(`${option}: ${bad}`);
  return s;
}

/** `admin:id`; the admin is a party id (`hint::1220…`), so the id is after the last colon. */
export function instrumentArg(s: string, option = '--instrument'): InstrumentId {
  const i = s.lastIndexOf(':');
  const admin = s.slice(0, i);
  const id = s.slice(i + 1);
  if (i <= 0 || !isPartyId(admin) || id.length === 0)
    throw new UsageError(`${option}: expected ADMIN_PARTY:ID (e.g. DSO::1220…:Amulet); got ${s}`);
  return { admin, id };
}

/** An ISO-8601 instant with a zone, in the future when `future`; returned as given. */
export function instantArg(s: string, option: string, opts: { future?: boolean } = {}): string {
  const us = parseInstantMicros(s.trim());
  if (us === undefined)
    throw new UsageError(
      `${option}: expected an ISO-8601 time with a time zone, e.g. 2030-01-31T12:00:00Z; got ${s}`,
    );
  if (opts.future && us <= BigInt(Date.now()) * 1000n)
    throw new UsageError(`${option}: ${s} is not in the future: give a later time`);
  return s.trim();
}

/** A whole number from `min` to `max`. */
export function intArg(s: string, option: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = /^[0-9]+$/.test(s.trim()) ? Number(s.trim()) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw new UsageError(
      `${option}: expected a whole number ${max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`}; got ${s}`,
    );
  return n;
}

/** A command id the Ledger API takes, and not one reserved for withdrawals. */
export function commandIdArg(s: string, option = '--command-id'): string {
  try {
    return checkCallerCommandId(s);
  } catch (e) {
    if (e instanceof Refusal) throw new UsageError(`${option}: ${e.message.replace(/^commandId: /, '')}`);
    throw e;
  }
}

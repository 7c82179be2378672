/**
 * Amulet Name Service names where a party is accepted: `resolveParty` turns a
 * name (`alice.unverified.cns`) into its party through Scan; a party id is
 * taken as is. The validator's scan proxy is not trusted with a name that
 * decides who is paid: the validator that prepares a transaction could answer
 * with its own party, which would then pass the receiver check. So a name
 * resolves only through Scan; when the validator is configured too, its proxy
 * must give the same answer (a proxy that cannot be reached is not asked
 * again: Scan's answer stands). Without Scan a name is refused.
 * `nameOfParty` is the reverse lookup, for display only (best effort: Scan
 * first, then the proxy). Flows record both the name and the party.
 */
import { isCantonApiError } from '../canton/errors.js';
import type { LookupAnsEntryResponse } from '../canton/scan/schemas.js';
import { parsePartyId } from '../hashing/canton-hash.js';
import { TransactionError } from '../hashing/errors.js';
import type { FlowContext } from './context.js';
import { Refusal } from './refusal.js';

export interface ResolvedParty {
  partyId: string;
  /** The ANS name it was given by, when it was given by name. */
  name?: string;
}

/** Whether `s` is a well-formed party id (`hint::1220…`). */
export function isPartyId(s: string): boolean {
  try {
    parsePartyId(s);
    return true;
  } catch (e) {
    if (e instanceof TransactionError) return false;
    throw e;
  }
}

const notFound = (e: unknown) => isCantonApiError(e) && e.status === 404;

type Lookup = (key: string) => Promise<LookupAnsEntryResponse>;
type Entry = LookupAnsEntryResponse['entry'];

/** One service's answer: the entry, undefined on 404; other failures throw. */
async function lookupOne(f: Lookup, key: string): Promise<Entry | undefined> {
  try {
    return (await f(key)).entry;
  } catch (e) {
    if (notFound(e)) return undefined;
    throw e;
  }
}

/**
 * Best effort, for display: the first service that answers (Scan, then the
 * validator's proxy); a 404 is the answer (undefined), other failures fall
 * through, and of the last service throw.
 */
async function lookupAny(sources: (Lookup | undefined)[], key: string): Promise<Entry | undefined> {
  const fs = sources.filter((f) => f !== undefined);
  if (fs.length === 0)
    throw new Refusal(
      'bad_request',
      'looking up an ANS name needs Scan or the validator (scan proxy): neither is configured',
    );
  let last: unknown;
  for (const f of fs) {
    try {
      return await lookupOne(f, key);
    } catch (e) {
      last = e;
    }
  }
  throw last;
}

/**
 * A party id as is, or the party an ANS name belongs to according to Scan
 * (and the validator's proxy agreeing, when it is configured and answers).
 */
export async function resolveParty(ctx: FlowContext, nameOrParty: string): Promise<ResolvedParty> {
  const s = nameOrParty.trim();
  if (s.length === 0) throw new Refusal('bad_request', 'a party id or an ANS name is required');
  if (isPartyId(s)) return { partyId: s };
  if (s.includes('::'))
    throw new Refusal('bad_request', `${s} is neither a well-formed party id (hint::1220…) nor an ANS name`);
  const scan = ctx.scan;
  if (!scan)
    throw new Refusal(
      'bad_request',
      `${s}: ANS names are resolved through Scan, not through the validator alone (it could answer with any party); configure network.scanUrl (--scan) or pass a party id`,
    );
  const entry = await lookupOne((n) => scan.lookupAnsEntryByName(n), s);
  if (!entry) throw new Refusal('bad_request', `no ANS entry named ${s}`);
  if (entry.name !== s || !isPartyId(entry.user))
    throw new Refusal(
      'bad_request',
      `the ANS lookup of ${s} answered an entry for ${entry.name} (party ${entry.user}): not used`,
    );
  if (ctx.validator) {
    const validator = ctx.validator;
    let proxied: Entry | undefined | 'unreachable';
    try {
      proxied = await lookupOne((n) => validator.scanProxyAnsEntryByName(n), s);
    } catch {
      proxied = 'unreachable'; // Scan's answer stands; the proxy adds no trust, only a cross-check.
    }
    if (proxied !== 'unreachable' && proxied?.user !== entry.user)
      throw new Refusal(
        'bad_request',
        `${s}: Scan resolves it to ${entry.user} but the validator's scan proxy to ${proxied?.user ?? 'no party'}; not used (pass a party id)`,
      );
  }
  return { partyId: entry.user, name: s };
}

/**
 * The party's ANS name, or undefined when it has none; for display only, never
 * to decide who is paid. Throws when no service could answer.
 */
export async function nameOfParty(ctx: FlowContext, partyId: string): Promise<string | undefined> {
  const entry = await lookupAny(
    [
      ctx.scan ? (p) => ctx.scan!.lookupAnsEntryByParty(p) : undefined,
      ctx.validator ? (p) => ctx.validator!.scanProxyAnsEntryByParty(p) : undefined,
    ],
    partyId,
  );
  return entry && entry.user === partyId ? entry.name : undefined;
}

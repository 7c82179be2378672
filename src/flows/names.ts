/**
 * Amulet Name Service names where a party is accepted: `resolveParty` turns a
 * name (`alice.unverified.cns`) into its party through the validator's BFT
 * scan proxy, falling back to Scan when no validator is configured or the
 * proxy fails; a party id is taken as is. `nameOfParty` is the reverse lookup
 * (best effort). Flows record both the name and the party.
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

/**
 * Looks an ANS entry up: the validator's scan proxy first, then Scan. A 404
 * from the first service that answers is the answer (undefined); other
 * failures of the proxy fall through to Scan, and of the last service throw.
 */
async function lookup(
  viaValidator: ((n: string) => Promise<LookupAnsEntryResponse>) | undefined,
  viaScan: ((n: string) => Promise<LookupAnsEntryResponse>) | undefined,
  key: string,
): Promise<LookupAnsEntryResponse['entry'] | undefined> {
  const sources = [viaValidator, viaScan].filter((f) => f !== undefined);
  if (sources.length === 0)
    throw new Refusal(
      'bad_request',
      'looking up an ANS name needs the validator (scan proxy) or Scan: neither is configured',
    );
  let last: unknown;
  for (const f of sources) {
    try {
      return (await f(key)).entry;
    } catch (e) {
      if (notFound(e)) return undefined;
      last = e;
    }
  }
  throw last;
}

/** A party id as is, or the party an ANS name belongs to. */
export async function resolveParty(ctx: FlowContext, nameOrParty: string): Promise<ResolvedParty> {
  const s = nameOrParty.trim();
  if (s.length === 0) throw new Refusal('bad_request', 'a party id or an ANS name is required');
  if (isPartyId(s)) return { partyId: s };
  if (s.includes('::'))
    throw new Refusal('bad_request', `${s} is neither a well-formed party id (hint::1220…) nor an ANS name`);
  const entry = await lookup(
    ctx.validator ? (n) => ctx.validator!.scanProxyAnsEntryByName(n) : undefined,
    ctx.scan ? (n) => ctx.scan!.lookupAnsEntryByName(n) : undefined,
    s,
  );
  if (!entry) throw new Refusal('bad_request', `no ANS entry named ${s}`);
  if (entry.name !== s || !isPartyId(entry.user))
    throw new Refusal(
      'bad_request',
      `the ANS lookup of ${s} answered an entry for ${entry.name} (party ${entry.user}): not used`,
    );
  return { partyId: entry.user, name: s };
}

/** The party's ANS name, or undefined when it has none. Throws when no service could answer. */
export async function nameOfParty(ctx: FlowContext, partyId: string): Promise<string | undefined> {
  const entry = await lookup(
    ctx.validator ? (p) => ctx.validator!.scanProxyAnsEntryByParty(p) : undefined,
    ctx.scan ? (p) => ctx.scan!.lookupAnsEntryByParty(p) : undefined,
    partyId,
  );
  return entry && entry.user === partyId ? entry.name : undefined;
}

/**
 * What the participant and the journal say about a party being onboarded:
 * where the participant reports it hosted (and whether that is as the
 * onboarding asked: confirmation permission, on the wanted participant and
 * synchronizer), the synchronizer to host it on, and which of this signer's
 * runs signed and submitted its onboarding. Lookups only: nothing is
 * journaled or refused here (src/flows/onboard-run.ts does that).
 */

import { participantUidOf } from '../intent/topology.js';
import type { FlowContext } from './context.js';
import { Refusal } from './refusal.js';

/** Whether the participant reports the party hosted on some synchronizer (its permission, when it says). */
export async function hostedOn(
  ctx: FlowContext,
  partyId: string,
): Promise<{ synchronizerId: string; permission?: string } | undefined> {
  const r = await ctx.ledger.connectedSynchronizers({ party: partyId });
  const s = r.connectedSynchronizers[0];
  return s
    ? { synchronizerId: s.synchronizerId, ...(s.permission ? { permission: s.permission } : {}) }
    : undefined;
}

/** Where the onboarding must find the party hosted: the participant (as it names itself), permission, synchronizer. */
export interface HostingWanted {
  /** The participant id exactly as `participantId()` answered (the query parameter wants that form). */
  participantId: string;
  /** Required on the Ledger API path (the synchronizer allocated on); any synchronizer on the validator path. */
  synchronizerId?: string;
}

const CONFIRMATION = 'PARTICIPANT_PERMISSION_CONFIRMATION';

/** Every synchronizer on which `participantId` reports hosting the party, with the permission it reports. */
export async function hostingOf(
  ctx: FlowContext,
  partyId: string,
  participantId: string,
): Promise<{ synchronizerId: string; permission?: string }[]> {
  const r = await ctx.ledger.connectedSynchronizers({ party: partyId, participantId });
  return r.connectedSynchronizers.map((s) => ({
    synchronizerId: s.synchronizerId,
    ...(s.permission ? { permission: s.permission } : {}),
  }));
}

/** The entry that shows the party hosted as asked (confirmation, on the wanted synchronizer), if any. */
export function hostedAsAsked(
  seen: { synchronizerId: string; permission?: string }[],
  want: HostingWanted,
): { synchronizerId: string } | undefined {
  const s = seen.find(
    (x) =>
      x.permission === CONFIRMATION &&
      (want.synchronizerId === undefined || x.synchronizerId === want.synchronizerId),
  );
  return s ? { synchronizerId: s.synchronizerId } : undefined;
}

export function describeSeen(seen: { synchronizerId: string; permission?: string }[]): string {
  return seen.length === 0
    ? 'not hosted'
    : seen.map((x) => `${x.synchronizerId} (${x.permission ?? 'permission not reported'})`).join(', ');
}

export function describeWanted(want: HostingWanted): string {
  return `with confirmation permission on participant ${participantUidOf(want.participantId)}${
    want.synchronizerId ? ` and synchronizer ${want.synchronizerId}` : ''
  }`;
}

/**
 * The runs of this signer that may have created the party, by the journal:
 * each signed its onboarding with our key and submitted it, and its
 * submission was not definitely rejected (no `rejected` record, no
 * `resolved: rejected`). `undefined`: the journal cannot be read back (no
 * recorder, or one without `partyRecords`).
 */
export async function journalEvidence(
  ctx: FlowContext,
  partyId: string,
  fingerprint: string,
): Promise<string[] | undefined> {
  const records = await ctx.recorder?.partyRecords?.(partyId);
  if (records === undefined) return undefined;
  const runs = new Map<string, { signed: boolean; submitted: boolean; rejected: boolean }>();
  // Records written before runs were named carry no run id: they are paired by their order
  // (a run starts with its first `signed` record after another step).
  let legacy = 0;
  let previous: string | undefined;
  for (const x of records) {
    if (!x.flow.startsWith('onboard-')) continue;
    if (x.facts?.run === undefined && x.step === 'signed' && previous !== 'signed') legacy += 1;
    if (x.facts?.run === undefined) previous = x.step;
    const id = x.facts?.run ?? `legacy-${legacy}`;
    const r = runs.get(id) ?? { signed: false, submitted: false, rejected: false };
    if (x.step === 'signed' && x.signedBy === fingerprint) r.signed = true;
    if (x.step === 'submitted') r.submitted = true;
    if (x.step === 'rejected' || (x.step === 'resolved' && x.reason === 'rejected')) r.rejected = true;
    runs.set(id, r);
  }
  return [...runs].filter(([, r]) => r.signed && r.submitted && !r.rejected).map(([id]) => id);
}

/**
 * The synchronizer to host the party on, as the participant names it among
 * its connected synchronizers: `wanted` (also given as a physical id, i.e.
 * with its protocol-version suffix), else the first. Refused before anything
 * is generated or signed when the participant is not connected to it, so
 * that the hosting checked after the submission is looked for under the
 * id the participant reports.
 */
export async function connectedSynchronizer(ctx: FlowContext, wanted: string | undefined): Promise<string> {
  const ids = (await ctx.ledger.connectedSynchronizers({})).connectedSynchronizers.map(
    (s) => s.synchronizerId,
  );
  if (wanted === undefined) {
    const first = ids[0];
    if (first === undefined)
      throw new Refusal(
        'bad_request',
        'the participant is connected to no synchronizer: give --synchronizer ID',
      );
    return first;
  }
  // Either side may carry the physical id (the logical one with its protocol-version suffix).
  const found =
    ids.find((id) => id === wanted) ??
    ids.find((id) => wanted.startsWith(`${id}::`) || id.startsWith(`${wanted}::`));
  if (found === undefined)
    throw new Refusal(
      'bad_request',
      `the participant is not connected to synchronizer ${wanted} (connected: ${ids.length > 0 ? ids.join(', ') : 'none'})`,
    );
  return found;
}

/**
 * External-party onboarding on both paths (the steps they share are in
 * src/flows/onboard-run.ts, the hosting lookups in src/flows/onboard-hosting.ts;
 * `showParty` is in src/flows/party-view.ts and re-exported here).
 *
 * - validator (`/v0/admin/external-party/topology/*`, Ed25519 only): generate →
 *   check every transaction (src/intent/topology.ts) → sign each 34-byte
 *   topology hash → submit;
 * - Ledger API (`/v2/parties/external/*`, Ed25519 / P-256 / secp256k1):
 *   generate-topology → check → sign the recomputed multi-hash → allocate →
 *   grant the Ledger API user CanActAs + CanReadAs.
 *
 * Nothing is signed unless the topology is exactly the requested one, and
 * every signature goes through the policy hook and `signAndVerify`. After the
 * submission the participant must report the party hosted with confirmation
 * permission on the participant the topology names (and, on the Ledger API
 * path, on the synchronizer it was allocated on) before it enters the party
 * book; only then are the Ledger API user's rights granted. What is booked is
 * where the party was seen hosted. A failure after the submission is journaled
 * as `outcome_unknown` (the party may exist). A re-run with the same key
 * returns the booked party (and grants the rights again, if asked); a party
 * already hosted but not booked (a run that stopped after submitting) is
 * booked without signing again only if this signer's journal shows it signed
 * and submitted that party's onboarding.
 */
import type { ParticipantPermission } from '../canton/topology/model.js';
import { multiHash } from '../hashing/canton-hash.js';
import { base64ToBytes, bytesToBase64, bytesToHex } from '../hashing/input.js';
import {
  checkTopology,
  participantUidOf,
  type TopologyExpectation,
  type TopologyTxInput,
} from '../intent/topology.js';
import type { KeyScheme } from '../keys/schemes.js';
import type { FlowContext } from './context.js';
import { connectedSynchronizer, type HostingWanted, hostingOf } from './onboard-hosting.js';
import {
  afterFailedSubmit,
  carried,
  describeKey,
  existingResult,
  finish,
  mismatch,
  type OnboardOptions,
  type OnboardResult,
  participantOf,
  partyMismatchAfterSubmit,
  prelude,
  recoverHosted,
  refuse,
  signingParty,
  signOrExport,
  startRun,
} from './onboard-run.js';
import { Refusal } from './refusal.js';

export type { OnboardOptions, OnboardPath, OnboardResult } from './onboard-run.js';
export { type PartyView, showParty } from './party-view.js';

const LEDGER_API_SCHEMES: readonly KeyScheme[] = ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'];

/** Onboards `hint::fingerprint(key)` through the validator (Ed25519 keys only). */
export async function onboardViaValidator(ctx: FlowContext, opts: OnboardOptions): Promise<OnboardResult> {
  const flow = 'onboard-validator';
  if (!ctx.validator)
    throw new Refusal(
      'bad_request',
      'onboarding through the validator needs the validator API: no validator URL is configured',
    );
  const validator = ctx.validator;
  const key = await describeKey(ctx, opts.keyLabel);
  if (key.scheme !== 'ed25519')
    throw new Refusal(
      'bad_request',
      `the validator onboards Ed25519 keys only; key ${key.label} is ${key.scheme}: onboard it through the Ledger API (--via ledger-api)`,
    );
  const { partyId, existing } = await prelude(ctx, opts, key);
  if (existing) return existingResult(ctx, opts, flow, existing);
  const run = startRun(ctx, flow, partyId);
  const participantId = await participantOf(ctx, run, opts);
  const participantUid = participantUidOf(participantId);
  const want: HostingWanted = { participantId };
  const base = { opts, key, via: 'validator' as const, want };
  const seen = await hostingOf(ctx, partyId, participantId);
  if (seen.length > 0) {
    const hosted = await recoverHosted(ctx, run, seen, want, key);
    return finish(ctx, run, { ...base, hosted, status: 'recovered', signed: [], hashes: [] });
  }

  const publicKeyHex = bytesToHex(key.publicKeyRaw);
  const gen = await validator.generateTopology({ party_hint: opts.hint, public_key: publicKeyHex });
  const expect: TopologyExpectation = {
    partyId,
    publicKeySpki: key.publicKeySpki,
    scheme: key.scheme,
    participantUid,
    permission: 'confirmation',
    threshold: 1,
    path: 'validator',
  };
  const inputs: TopologyTxInput[] = gen.topology_txs.map((t) => ({
    transaction: t.topology_tx,
    claimedHash: t.hash,
  }));
  const { hashes, problems } = checkTopology(inputs, expect);
  if (gen.party_id !== partyId)
    problems.unshift({
      reason: 'party_mismatch',
      message: `expected the validator to name the party ${partyId}, found ${gen.party_id}`,
    });
  if (problems.length > 0) return refuse(run, mismatch('validator', problems));

  const signed = await signOrExport(ctx, run, signingParty(partyId, key), hashes, async () => ({
    transactions: gen.topology_txs.map((t) => t.topology_tx),
    expect: { participantUid, permission: 'confirmation', threshold: 1, path: 'validator' },
    synchronizerId: ctx.synchronizerId ?? (await connectedSynchronizer(ctx, undefined)),
    onboarding: { hint: opts.hint, keyLabel: opts.keyLabel, path: 'validator', ...carried(opts) },
  }));
  await run.rec('submitted');
  let hosted: { synchronizerId: string } | undefined;
  let reported: string | undefined;
  try {
    const r = await validator.submitTopology({
      public_key: publicKeyHex,
      signed_topology_txs: gen.topology_txs.map((t, i) => ({
        topology_tx: t.topology_tx,
        signed_hash: signed[i]!.signatureHex,
      })),
    });
    reported = r.party_id;
  } catch (e) {
    if (e instanceof Refusal) throw e;
    hosted = await afterFailedSubmit(ctx, run, e, want, key.fingerprint);
  }
  if (reported !== undefined && reported !== partyId)
    await partyMismatchAfterSubmit(run, `the validator reports party ${reported}, expected ${partyId}`);
  return finish(ctx, run, { ...base, ...(hosted ? { hosted } : {}), status: 'new', signed, hashes });
}

/** Onboards `hint::fingerprint(key)` through the participant's Ledger API. */
export async function onboardViaLedgerApi(
  ctx: FlowContext,
  opts: OnboardOptions & { synchronizerId?: string },
): Promise<OnboardResult> {
  const flow = 'onboard-ledger-api';
  const key = await describeKey(ctx, opts.keyLabel);
  if (!LEDGER_API_SCHEMES.includes(key.scheme))
    throw new Refusal(
      'bad_request',
      `key ${key.label} is ${key.scheme}; external parties are onboarded with ${LEDGER_API_SCHEMES.join(', ')} keys`,
    );
  const { partyId, existing } = await prelude(ctx, opts, key);
  if (existing) return existingResult(ctx, opts, flow, existing);
  const run = startRun(ctx, flow, partyId);
  const participantId = await participantOf(ctx, run, opts);
  const participantUid = participantUidOf(participantId);
  const synchronizerId = await connectedSynchronizer(ctx, opts.synchronizerId ?? ctx.synchronizerId);
  const want: HostingWanted = { participantId, synchronizerId };
  const base = { opts, key, via: 'ledger-api' as const, want };
  const seen = await hostingOf(ctx, partyId, participantId);
  if (seen.length > 0) {
    const hosted = await recoverHosted(ctx, run, seen, want, key);
    return finish(ctx, run, { ...base, hosted, status: 'recovered', signed: [], hashes: [] });
  }

  const gen = await ctx.ledger.generateExternalPartyTopology({
    synchronizer: synchronizerId,
    partyHint: opts.hint,
    publicKey: {
      format: 'CRYPTO_KEY_FORMAT_DER_X509_SUBJECT_PUBLIC_KEY_INFO',
      keyData: bytesToBase64(key.publicKeySpki),
      keySpec: key.keySpec,
    },
  });
  const expect: TopologyExpectation = {
    partyId,
    publicKeySpki: key.publicKeySpki,
    scheme: key.scheme,
    participantUid,
    permission: 'confirmation' satisfies ParticipantPermission,
    threshold: 1,
    path: 'ledger-api',
  };
  const { hashes, problems } = checkTopology(
    gen.topologyTransactions.map((transaction) => ({ transaction })),
    expect,
  );
  if (gen.partyId !== partyId)
    problems.unshift({
      reason: 'party_mismatch',
      message: `expected the participant to name the party ${partyId}, found ${gen.partyId}`,
    });
  if (gen.publicKeyFingerprint !== key.fingerprint)
    problems.push({
      reason: 'key_mismatch',
      message: `expected the participant to report our key's fingerprint ${key.fingerprint}, found ${gen.publicKeyFingerprint}`,
    });
  let combined: Uint8Array | undefined;
  if (hashes.length > 0 && hashes.length === gen.topologyTransactions.length) {
    combined = multiHash(hashes);
    let claimed: Uint8Array | undefined;
    try {
      claimed = base64ToBytes(gen.multiHash, 'multiHash');
    } catch {
      claimed = undefined;
    }
    if (!claimed || bytesToHex(claimed) !== bytesToHex(combined))
      problems.push({
        reason: 'hash_mismatch',
        message: `expected the multi-hash ${bytesToHex(combined)} (recomputed from the transactions), found ${claimed ? bytesToHex(claimed) : gen.multiHash}`,
      });
  }
  if (problems.length > 0 || !combined) return refuse(run, mismatch('Ledger API', problems));

  const [signed] = await signOrExport(ctx, run, signingParty(partyId, key), [combined], async () => ({
    transactions: gen.topologyTransactions,
    expect: { participantUid, permission: 'confirmation', threshold: 1, path: 'ledger-api' },
    synchronizerId,
    onboarding: {
      hint: opts.hint,
      keyLabel: opts.keyLabel,
      path: 'ledger-api',
      ...(opts.synchronizerId ? { synchronizerId: opts.synchronizerId } : {}),
      ...carried(opts),
    },
  }));
  await run.rec('submitted', { hash: bytesToHex(combined) });
  let hosted: { synchronizerId: string } | undefined;
  let reported: string | undefined;
  try {
    const r = await ctx.ledger.allocateExternalParty({
      synchronizer: synchronizerId,
      onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
      multiHashSignatures: [signed!.signature],
    });
    reported = r.partyId;
  } catch (e) {
    if (e instanceof Refusal) throw e;
    hosted = await afterFailedSubmit(ctx, run, e, want, key.fingerprint);
  }
  if (reported !== undefined && reported !== partyId)
    await partyMismatchAfterSubmit(run, `the participant allocated party ${reported}, expected ${partyId}`);
  return finish(ctx, run, {
    ...base,
    ...(hosted ? { hosted } : {}),
    status: 'new',
    signed: [signed!],
    hashes: [combined],
  });
}

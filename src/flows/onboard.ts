/**
 * External-party onboarding on both paths, and `showParty`.
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
 * submission the participant must report the party as hosted before it enters
 * the party book. A re-run with the same key returns the booked party; a party
 * already hosted but not booked (a run that stopped after submitting) is
 * booked without signing again — its id is in our key's namespace, so only
 * our key can have created it.
 */
import { isCantonApiError } from '../canton/errors.js';
import type { RightRequest } from '../canton/ledger-api/schemas.js';
import type { ParticipantPermission } from '../canton/topology/model.js';
import { partyId as makePartyId, multiHash, partyHintProblem } from '../hashing/canton-hash.js';
import { base64ToBytes, bytesToBase64, bytesToHex } from '../hashing/input.js';
import type { Intent } from '../intent/model.js';
import {
  checkTopology,
  participantUidOf,
  type TopologyExpectation,
  type TopologyProblem,
  type TopologyTxInput,
} from '../intent/topology.js';
import { isAwaitingOfflineSignature } from '../keys/offline-backend.js';
import type { KeyScheme } from '../keys/schemes.js';
import type { KeyDescription, SignOutput } from '../keys/signer.js';
import { allowAll } from '../policy/hook.js';
import type { JournalStep } from '../store/journal.js';
import type { PartyRecord } from '../store/parties.js';
import type { TopologyExport } from './air-gap.js';
import type { FlowContext } from './context.js';
import { nameOfParty } from './names.js';
import { type SigningParty, signAndVerify } from './pipeline.js';
import { Refusal } from './refusal.js';

export type OnboardPath = 'validator' | 'ledger-api';

export interface OnboardResult {
  party: PartyRecord;
  /** `new`: onboarded now; `existing`: already in the party book; `recovered`: hosted, now booked. */
  status: 'new' | 'existing' | 'recovered';
  /** Hex of each hash signed (none for existing / recovered). */
  signedHashes: string[];
}

export interface OnboardOptions {
  hint: string;
  keyLabel: string;
  /** Give `ctx.userId` CanActAs + CanReadAs on the party (default true). */
  grantRights?: boolean;
  /** How long to wait for the participant to report the party hosted (default 5 s). */
  hostedTimeoutMs?: number;
}

const LEDGER_API_SCHEMES: readonly KeyScheme[] = ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'];

/** The intent the policy hook sees for an onboarding signature: the party's own onboarding. */
function onboardingIntent(partyId: string): Intent {
  return { kind: 'create', party: partyId, template: 'canton-topology:Onboarding:ExternalParty' };
}

interface Run {
  flow: string;
  partyId: string;
  intent: Intent;
  rec(step: JournalStep, extra?: Record<string, unknown>): Promise<void>;
}

function startRun(ctx: FlowContext, flow: string, partyId: string): Run {
  const intent = onboardingIntent(partyId);
  return {
    flow,
    partyId,
    intent,
    rec: async (step, extra = {}) => {
      await ctx.recorder?.record({ flow, step, partyId, intent, ...extra });
    },
  };
}

/** Refusal → journal `refused` → rethrow. */
async function refuse(run: Run, e: Refusal): Promise<never> {
  await run.rec('refused', { reason: e.reason, message: e.message });
  throw e;
}

async function describeKey(ctx: FlowContext, label: string): Promise<KeyDescription> {
  return ctx.signer.describe(label);
}

/** Hint check, the party id, and the party book: existing record, or a conflict. */
async function prelude(
  ctx: FlowContext,
  opts: OnboardOptions,
  key: KeyDescription,
): Promise<{ partyId: string; existing?: PartyRecord }> {
  const bad = partyHintProblem(opts.hint);
  if (bad) throw new Refusal('bad_request', `--hint: ${bad}`);
  const partyId = makePartyId(opts.hint, key.fingerprint);
  const existing = await ctx.parties.get(partyId);
  if (existing) {
    if (existing.fingerprint !== key.fingerprint)
      throw new Refusal(
        'bad_request',
        `party ${partyId} is already in the party book with key ${existing.keyLabel} (${existing.fingerprint}), not ${key.label}`,
      );
    return { partyId, existing };
  }
  const clash = (await ctx.parties.list()).find(
    (p) => p.hint === opts.hint && p.fingerprint !== key.fingerprint,
  );
  if (clash)
    throw new Refusal(
      'bad_request',
      `hint ${opts.hint} is already used by party ${clash.partyId} with key ${clash.keyLabel}; key ${key.label} would make a different party — choose another hint`,
    );
  return { partyId };
}

/** Whether the participant reports the party hosted on some synchronizer (its permission, when it says). */
async function hostedOn(
  ctx: FlowContext,
  partyId: string,
): Promise<{ synchronizerId: string; permission?: string } | undefined> {
  const r = await ctx.ledger.connectedSynchronizers({ party: partyId });
  const s = r.connectedSynchronizers[0];
  return s
    ? { synchronizerId: s.synchronizerId, ...(s.permission ? { permission: s.permission } : {}) }
    : undefined;
}

async function waitHosted(ctx: FlowContext, run: Run, timeoutMs: number) {
  const until = Date.now() + timeoutMs;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
    const h = await hostedOn(ctx, run.partyId);
    if (h) return h;
    if (Date.now() + delay > until) break;
    await new Promise((r) => setTimeout(r, delay));
  }
  return refuse(
    run,
    new Refusal(
      'outcome_unknown',
      `the onboarding was accepted but the participant does not report ${run.partyId} as hosted after ${timeoutMs} ms; run the onboarding again to check (it does not sign twice once the party is hosted)`,
    ),
  );
}

async function grant(ctx: FlowContext, partyId: string): Promise<void> {
  const rights: RightRequest[] = [
    { kind: { CanActAs: { value: { party: partyId } } } },
    { kind: { CanReadAs: { value: { party: partyId } } } },
  ];
  await ctx.ledger.grantUserRights(ctx.userId, rights);
}

function signingParty(partyId: string, key: KeyDescription): SigningParty {
  return {
    partyId,
    keyLabel: key.label,
    scheme: key.scheme,
    fingerprint: key.fingerprint,
    publicKeySpki: bytesToBase64(key.publicKeySpki),
  };
}

/**
 * `signHashes`, or — for a key held offline with no imported signatures yet —
 * the checked topology exported across the air gap (the flow stops with
 * `AwaitingSignature`; after the import the same onboarding is run again:
 * the participant generates the same transactions, and the imported
 * signatures are found).
 */
async function signOrExport(
  ctx: FlowContext,
  run: Run,
  party: SigningParty,
  messages: Uint8Array[],
  t: Omit<TopologyExport, 'partyId' | 'key' | 'messages'>,
): Promise<SignOutput[]> {
  try {
    return await signHashes(ctx, run, party, messages);
  } catch (e) {
    if (!isAwaitingOfflineSignature(e) || !ctx.airGap?.exportTopology) throw e;
    const a = await ctx.airGap.exportTopology({
      ...t,
      partyId: party.partyId,
      key: { fingerprint: party.fingerprint, scheme: party.scheme, publicKeySpki: party.publicKeySpki },
      messages,
    });
    await run.rec('exported', { hash: a.hashes[0], facts: { export: a.exportId } });
    throw a;
  }
}

/** Policy, then sign and verify each hash; journal each signature. */
async function signHashes(
  ctx: FlowContext,
  run: Run,
  party: SigningParty,
  hashes: Uint8Array[],
): Promise<SignOutput[]> {
  const out: SignOutput[] = [];
  for (const h of hashes) {
    const hash = bytesToHex(h);
    const decision = await (ctx.policy ?? allowAll)({
      flow: run.flow,
      partyId: run.partyId,
      keyLabel: party.keyLabel,
      intent: run.intent,
      actions: [],
      hash,
    });
    if (!decision.allow)
      return refuse(run, new Refusal('policy_denied', `policy refused: ${decision.reason}`));
    let s: SignOutput;
    try {
      s = await signAndVerify(ctx.signer, party, h);
    } catch (e) {
      if (e instanceof Refusal) return refuse(run, e);
      throw e;
    }
    await run.rec('signed', { hash, signedBy: s.signature.signedBy });
    out.push(s);
  }
  return out;
}

function mismatch(what: string, problems: TopologyProblem[]): Refusal {
  return new Refusal(
    'topology_mismatch',
    `the ${what} onboarding transactions are not the ones asked for: ${problems.map((p) => p.message).join('; ')}`,
    problems,
  );
}

/**
 * The submission failed. Definite → `rejected` + Refusal('submission_rejected');
 * ambiguous, or "already exists": the truth is whether the party is hosted now.
 */
async function afterFailedSubmit(
  ctx: FlowContext,
  run: Run,
  e: unknown,
): Promise<{ synchronizerId: string } | never> {
  if (!isCantonApiError(e)) throw e;
  const exists = e.status === 409 || e.code === 'PARTY_ALREADY_EXISTS';
  if (e.ambiguous || exists) {
    await run.rec('ambiguous', { reason: e.code, message: e.message });
    const h = await hostedOn(ctx, run.partyId).catch(() => undefined);
    await run.rec('resolved', { reason: h ? 'committed' : 'unknown' });
    if (h) return h;
    if (e.ambiguous)
      return refuse(
        run,
        new Refusal(
          'outcome_unknown',
          `the onboarding submission's outcome is unknown (${e.code}) and ${run.partyId} is not hosted yet; run it again later (it signs again only if the party does not exist)`,
          [],
          { code: e.code },
        ),
      );
  }
  const message = e.detail ? `${e.message}: ${e.detail}` : e.message;
  await run.rec('rejected', { reason: e.code, message });
  throw new Refusal('submission_rejected', `the onboarding was rejected: ${message}`, [], { code: e.code });
}

async function finish(
  ctx: FlowContext,
  run: Run,
  args: {
    opts: OnboardOptions;
    key: KeyDescription;
    via: OnboardPath;
    participantUid: string;
    synchronizerId?: string;
    status: 'new' | 'recovered';
    signed: SignOutput[];
    hashes: Uint8Array[];
  },
): Promise<OnboardResult> {
  if (args.opts.grantRights ?? true) await grant(ctx, run.partyId);
  const hosted = await waitHosted(ctx, run, args.opts.hostedTimeoutMs ?? 5000);
  const record: PartyRecord = {
    partyId: run.partyId,
    hint: args.opts.hint,
    keyLabel: args.key.label,
    scheme: args.key.scheme,
    fingerprint: args.key.fingerprint,
    publicKeySpki: bytesToBase64(args.key.publicKeySpki),
    via: args.via,
    participantUid: args.participantUid,
    synchronizerId: args.synchronizerId ?? hosted.synchronizerId,
    createdAt: new Date().toISOString(),
  };
  await ctx.parties.put(record);
  await run.rec('committed', {
    ...(args.hashes.length === 1 ? { hash: bytesToHex(args.hashes[0]!) } : {}),
    facts: {
      via: args.via,
      participantUid: args.participantUid,
      synchronizerId: record.synchronizerId ?? '',
      ...(args.status === 'recovered' ? { recovered: 'true' } : {}),
      ...(args.hashes.length > 1 ? { hashes: args.hashes.map(bytesToHex).join(',') } : {}),
    },
  });
  return {
    party: record,
    status: args.status,
    signedHashes: args.signed.length ? args.hashes.map(bytesToHex) : [],
  };
}

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
  if (existing) return { party: existing, status: 'existing', signedHashes: [] };
  const run = startRun(ctx, flow, partyId);
  const participantUid = participantUidOf((await ctx.ledger.participantId()).participantId);
  const base = { opts, key, via: 'validator' as const, participantUid };
  if (await hostedOn(ctx, partyId))
    return finish(ctx, run, { ...base, status: 'recovered', signed: [], hashes: [] });

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

  const signed = await signOrExport(ctx, run, signingParty(partyId, key), hashes, {
    transactions: gen.topology_txs.map((t) => t.topology_tx),
    expect: { participantUid, permission: 'confirmation', threshold: 1, path: 'validator' },
    synchronizerId: ctx.synchronizerId ?? (await firstSynchronizer(ctx)),
    onboarding: { hint: opts.hint, keyLabel: opts.keyLabel, path: 'validator' },
  });
  await run.rec('submitted', {});
  try {
    const r = await validator.submitTopology({
      public_key: publicKeyHex,
      signed_topology_txs: gen.topology_txs.map((t, i) => ({
        topology_tx: t.topology_tx,
        signed_hash: signed[i]!.signatureHex,
      })),
    });
    if (r.party_id !== partyId)
      return refuse(
        run,
        new Refusal('topology_mismatch', `the validator reports party ${r.party_id}, expected ${partyId}`),
      );
  } catch (e) {
    if (e instanceof Refusal) throw e;
    await afterFailedSubmit(ctx, run, e);
  }
  return finish(ctx, run, { ...base, status: 'new', signed, hashes });
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
  if (existing) return { party: existing, status: 'existing', signedHashes: [] };
  const run = startRun(ctx, flow, partyId);
  const participantUid = participantUidOf((await ctx.ledger.participantId()).participantId);
  const synchronizerId = opts.synchronizerId ?? ctx.synchronizerId ?? (await firstSynchronizer(ctx));
  const base = { opts, key, via: 'ledger-api' as const, participantUid, synchronizerId };
  if (await hostedOn(ctx, partyId))
    return finish(ctx, run, { ...base, status: 'recovered', signed: [], hashes: [] });

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

  const [signed] = await signOrExport(ctx, run, signingParty(partyId, key), [combined], {
    transactions: gen.topologyTransactions,
    expect: { participantUid, permission: 'confirmation', threshold: 1, path: 'ledger-api' },
    synchronizerId,
    onboarding: {
      hint: opts.hint,
      keyLabel: opts.keyLabel,
      path: 'ledger-api',
      ...(opts.synchronizerId ? { synchronizerId: opts.synchronizerId } : {}),
    },
  });
  await run.rec('submitted', { hash: bytesToHex(combined) });
  try {
    const r = await ctx.ledger.allocateExternalParty({
      synchronizer: synchronizerId,
      onboardingTransactions: gen.topologyTransactions.map((transaction) => ({ transaction })),
      multiHashSignatures: [signed!.signature],
    });
    if (r.partyId !== partyId)
      return refuse(
        run,
        new Refusal('topology_mismatch', `the participant allocated party ${r.partyId}, expected ${partyId}`),
      );
  } catch (e) {
    if (e instanceof Refusal) throw e;
    await afterFailedSubmit(ctx, run, e);
  }
  return finish(ctx, run, { ...base, status: 'new', signed: [signed!], hashes: [combined] });
}

async function firstSynchronizer(ctx: FlowContext): Promise<string> {
  const r = await ctx.ledger.connectedSynchronizers({});
  const s = r.connectedSynchronizers[0];
  if (!s)
    throw new Refusal(
      'bad_request',
      'the participant is connected to no synchronizer: give --synchronizer ID',
    );
  return s.synchronizerId;
}

export interface PartyView {
  partyId: string;
  /** The party book's record; absent for a party this signer does not hold. */
  record?: PartyRecord;
  /** Whether the participant reports the party hosted (and where). */
  hosted?: { synchronizerId: string; permission?: string } | null;
  ansName?: string | null;
  preapproval?: { contractId: string; provider?: string; expiresAt?: string } | null;
  /** What could not be looked up, one sentence each. */
  notes: string[];
}

const reason = (e: unknown) =>
  isCantonApiError(e)
    ? `${e.message}${e.detail ? `: ${e.detail}` : ''}`
    : e instanceof Error
      ? e.message
      : String(e);

/**
 * The party as this signer and the network see it: the book record, whether it
 * is hosted, its ANS name and its transfer preapproval. `null` means "looked
 * up: none"; an absent field means it could not be looked up (see `notes`).
 */
export async function showParty(ctx: FlowContext, partyId: string): Promise<PartyView> {
  const notes: string[] = [];
  const view: PartyView = { partyId, notes };
  const record = await ctx.parties.get(partyId);
  if (record) view.record = record;
  else notes.push(`${partyId} is not in this signer's party book`);
  try {
    view.hosted = (await hostedOn(ctx, partyId)) ?? null;
  } catch (e) {
    notes.push(`hosting could not be checked: ${reason(e)}`);
  }
  if (ctx.validator || ctx.scan) {
    try {
      view.ansName = (await nameOfParty(ctx, partyId)) ?? null;
    } catch (e) {
      notes.push(`the ANS name could not be looked up: ${reason(e)}`);
    }
  }
  if (ctx.validator) {
    try {
      const c = (await ctx.validator.scanProxyTransferPreapproval(partyId)).transfer_preapproval.contract;
      const p = c.payload as Record<string, unknown>;
      view.preapproval = {
        contractId: c.contract_id,
        ...(typeof p.provider === 'string' ? { provider: p.provider } : {}),
        ...(typeof p.expiresAt === 'string' ? { expiresAt: p.expiresAt } : {}),
      };
    } catch (e) {
      if (isCantonApiError(e) && e.status === 404) view.preapproval = null;
      else notes.push(`the transfer preapproval could not be looked up: ${reason(e)}`);
    }
  }
  return view;
}

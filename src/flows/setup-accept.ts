/**
 * Accepting the validator's ExternalPartySetupProposal for an external party
 * (validator path, canton-apis §2.2–2.4, §6.2): find the proposal, prepare-accept,
 * the one pipeline (hash, intent, window, policy, sign, verify), submit-accept.
 * The result is the party's TransferPreapproval (provider = the validator) and
 * ValidatorRight. Idempotent: a preapproval the validator already provides is
 * returned without signing, once its receiver, provider and DSO are checked.
 * The validator is not trusted to say who it is: the intent's validator is the
 * configured `network.validatorParty` when one is pinned (else the proposal's),
 * its DSO is Scan's when Scan is configured, and the preapproval's expiry must
 * lie in the future and at most MAX_PREAPPROVAL_LIFETIME_MS ahead. Also owns
 * the small helpers every validator-path flow shares (raw Ed25519 key, the
 * submission body, stale rejections, the pinned validator party, Scan's DSO).
 */
import { isCantonApiError } from '../canton/errors.js';
import type { ContractWithState } from '../canton/scan/schemas.js';
import type { ExternalPartySubmission } from '../canton/validator/schemas.js';
import { base64ToBytes, bytesToHex } from '../hashing/input.js';
import type { Intent, IntentProblem } from '../intent/model.js';
import { aKeyOf } from '../keys/schemes.js';
import { type FlowContext, partyOf, requireValidator } from './context.js';
import { STALE_CODES } from './ledger.js';
import { isPartyId } from './names.js';
import {
  type Flow,
  type FlowResult,
  runFlow,
  type SignedTransaction,
  type SigningParty,
} from './pipeline.js';
import { Refusal } from './refusal.js';

// ---- shared by the validator-path flows --------------------------------------------------------

/** DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410); the raw key is the 32 bytes after it. */
const ED25519_SPKI_PREFIX = '302a300506032b6570032100';

/**
 * The party's raw Ed25519 public key in hex, as the validator's endpoints take it.
 * The validator path accepts Ed25519 only: any other scheme is refused here,
 * before anything is prepared.
 */
export function rawEd25519KeyHex(party: SigningParty, what: string): string {
  if (party.scheme !== 'ed25519')
    throw new Refusal(
      'bad_request',
      `${what} goes through the validator, which accepts Ed25519 keys only; ${party.partyId} has ${aKeyOf(party.scheme)} (use the token-standard flow on the Ledger API instead)`,
    );
  const hex = bytesToHex(base64ToBytes(party.publicKeySpki, 'registered public key'));
  if (hex.length !== ED25519_SPKI_PREFIX.length + 64 || !hex.startsWith(ED25519_SPKI_PREFIX))
    throw new Refusal('key_mismatch', `the registered key of ${party.partyId} is not an Ed25519 SPKI`);
  return hex.slice(ED25519_SPKI_PREFIX.length);
}

/** The `ExternalPartySubmission` for a signed validator-prepared transaction. */
export function validatorSubmission(
  signed: SignedTransaction,
  publicKeyHex: string,
): ExternalPartySubmission {
  return {
    party_id: signed.party.partyId,
    transaction: signed.preparedTransactionBase64,
    signed_tx_hash: signed.signatureHex,
    public_key: publicKeyHex,
  };
}

/** A definite validator rejection that means "the preparation went stale": prepare again. */
export function isValidatorStale(e: unknown): boolean {
  if (!isCantonApiError(e) || e.ambiguous) return false;
  const text = e.spliceError ?? e.detail ?? '';
  for (const code of STALE_CODES) if (text.startsWith(code) || e.code === code) return true;
  return false;
}

export const isNotFound = (e: unknown): boolean => isCantonApiError(e) && e.status === 404;

/** A string field of a Splice contract payload. */
export function payloadText(c: ContractWithState, field: string): string | undefined {
  const v = c.contract.payload[field];
  return typeof v === 'string' ? v : undefined;
}

/**
 * The validator party pinned by configuration (`network.validatorParty`, carried on the flow
 * context as `validatorParty`), or undefined when none is pinned. The validator cannot be asked
 * who it is: every answer of its own (a proposal, a preapproval it lists) is its claim.
 */
export function pinnedValidatorParty(ctx: FlowContext): string | undefined {
  const p = ctx.validatorParty;
  if (p === undefined || p === '') return undefined;
  if (!isPartyId(p))
    throw new Refusal('bad_request', `the configured validator party is not a party id: ${String(p)}`);
  return p;
}

/** The DSO party according to Scan, or undefined without Scan; never the validator's proxy. */
export async function scanDso(ctx: FlowContext): Promise<string | undefined> {
  if (!ctx.scan) return undefined;
  const dso = (await ctx.scan.getDsoPartyId()).dso_party_id;
  if (!isPartyId(dso)) throw new Refusal('bad_request', `Scan answered a DSO that is not a party id: ${dso}`);
  return dso;
}

/**
 * What is wrong with a TransferPreapproval the validator reports for `partyId`: another receiver,
 * a provider other than the expected validator (when one is known independently), another DSO
 * (when Scan gave one). Empty when it is the party's.
 */
export function preapprovalProblems(
  pre: ContractWithState,
  partyId: string,
  expect: { validator?: string; dso?: string },
): IntentProblem[] {
  const out: IntentProblem[] = [];
  const cid = pre.contract.contract_id;
  const check = (field: string, want: string | undefined, what: string) => {
    const found = payloadText(pre, field);
    if (want === undefined ? found !== undefined && isPartyId(found) : found === want) return;
    out.push({
      reason: 'party_mismatch',
      message: `the TransferPreapproval ${cid} the validator reports names ${found ?? 'no party'} as ${field}, but ${what}`,
      where: `preapproval ${cid}: ${field}`,
    });
  };
  check('receiver', partyId, `it is looked up for ${partyId}.`);
  check(
    'provider',
    expect.validator,
    expect.validator ? `the validator party is ${expect.validator}.` : 'it must be a party.',
  );
  if (expect.dso !== undefined) check('dso', expect.dso, `the DSO (from Scan) is ${expect.dso}.`);
  return out;
}

// ---- setup-proposal accept ---------------------------------------------------------------------

/**
 * The latest a TransferPreapproval created by a setup acceptance may expire: 366 days from now.
 * The validator's proposals last 90 days by default (canton-apis §2.2); a longer lifetime is a
 * validator setting, an absurd one is refused.
 */
export const MAX_PREAPPROVAL_LIFETIME_MS = 366 * 86_400_000;

export interface SetupAcceptResult {
  partyId: string;
  preapprovalCid: string;
  /** Absent when the preapproval already existed or the commit was established by lookup. */
  updateId?: string;
  /** The provider (validator party). */
  provider?: string;
  /** True when nothing was signed because the validator already provides a preapproval. */
  alreadyAccepted: boolean;
  proposalCid?: string;
  /** The signed hash and how the outcome was established (absent when nothing was signed). */
  flow?: Pick<FlowResult<unknown>, 'hash' | 'outcome' | 'attempts' | 'window'>;
}

interface Accepted {
  preapprovalCid: string;
  updateId?: string;
}

/** The TransferPreapproval this validator provides for `partyId`, if any (validator store). */
async function ownPreapproval(ctx: FlowContext, partyId: string): Promise<ContractWithState | undefined> {
  try {
    return (await requireValidator(ctx, 'setup-accept').lookupTransferPreapproval(partyId))
      .transfer_preapproval;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

export async function acceptSetupProposal(
  ctx: FlowContext,
  partyId: string,
  opts: { proposalCid?: string } = {},
): Promise<SetupAcceptResult> {
  const validator = requireValidator(ctx, 'setup-accept');
  const party = await partyOf(ctx, partyId);
  const publicKey = rawEd25519KeyHex(party, 'setup-accept');
  const pinned = pinnedValidatorParty(ctx);
  const dso = await scanDso(ctx);

  const existing = await ownPreapproval(ctx, partyId);
  if (existing) {
    // The validator's claim that the party already has a preapproval is checked like a transaction.
    const problems = preapprovalProblems(existing, partyId, {
      ...(pinned ? { validator: pinned } : {}),
      ...(dso ? { dso } : {}),
    });
    if (problems.length > 0)
      throw new Refusal(
        'intent_mismatch',
        `the validator reports a TransferPreapproval for ${partyId} that is not the one a setup acceptance would create: ${problems.map((p) => p.message).join(' ')}`,
        problems,
      );
    const provider = payloadText(existing, 'provider');
    return {
      partyId,
      preapprovalCid: existing.contract.contract_id,
      ...(provider ? { provider } : {}),
      alreadyAccepted: true,
    };
  }

  const proposals = (await validator.listSetupProposals()).contracts;
  let proposal: ContractWithState | undefined;
  if (opts.proposalCid !== undefined) {
    proposal = proposals.find((c) => c.contract.contract_id === opts.proposalCid);
    if (!proposal)
      throw new Refusal(
        'bad_request',
        `proposal ${opts.proposalCid}: the validator lists no ExternalPartySetupProposal with this contract id`,
      );
    const user = payloadText(proposal, 'user');
    if (user !== partyId)
      throw new Refusal(
        'bad_request',
        `proposal ${opts.proposalCid} is for party ${user ?? '(unreadable)'}, not for ${partyId}`,
      );
  } else {
    const mine = proposals.filter((c) => payloadText(c, 'user') === partyId);
    proposal = mine.find((c) => pinned === undefined || payloadText(c, 'validator') === pinned) ?? mine[0];
    if (!proposal)
      throw new Refusal(
        'bad_request',
        `the validator has no ExternalPartySetupProposal for ${partyId}: the validator operator creates one first (POST /v0/admin/external-party/setup-proposal)`,
      );
  }
  const proposalCid = proposal.contract.contract_id;
  const proposed = payloadText(proposal, 'validator');
  if (pinned !== undefined && proposed !== pinned)
    throw new Refusal(
      'bad_request',
      `proposal ${proposalCid} names ${proposed ?? 'no party'} as validator, not the configured validator party ${pinned}`,
    );
  // The provider is the pinned validator party when one is configured; else only the proposal says.
  const provider = pinned ?? proposed;
  const now = ctx.nowUs ? Number(ctx.nowUs() / 1000n) : Date.now();
  const intent: Intent = {
    kind: 'setup-proposal-accept',
    party: partyId,
    proposalCid,
    ...(provider ? { validator: provider } : {}),
    ...(dso ? { dso } : {}),
    expires: {
      after: new Date(now).toISOString(),
      notAfter: new Date(now + MAX_PREAPPROVAL_LIFETIME_MS).toISOString(),
    },
  };
  const matches = (pre: ContractWithState) =>
    preapprovalProblems(pre, partyId, {
      ...(provider ? { validator: provider } : {}),
      ...(dso ? { dso } : {}),
    }).length === 0;

  const flow: Flow<Accepted> = {
    name: 'setup-accept',
    party,
    intent,
    async prepare() {
      const res = await validator.prepareAcceptSetupProposal({
        contract_id: proposalCid,
        user_party_id: partyId,
      });
      return { preparedTransaction: res.transaction, claimedHash: res.tx_hash, scheme: 'v2' };
    },
    async submit(signed) {
      const res = await validator.submitAcceptSetupProposal({
        submission: validatorSubmission(signed, publicKey),
      });
      return { preapprovalCid: res.transfer_preapproval_contract_id, updateId: res.update_id };
    },
    async resolveAmbiguous() {
      // The preapproval exists: committed. The proposal is still there and no preapproval: this
      // accept did not commit (and cannot commit later alongside another: both consume the proposal).
      const pre = await ownPreapproval(ctx, partyId);
      if (pre && matches(pre))
        return { status: 'committed', result: { preapprovalCid: pre.contract.contract_id } };
      if (pre) return { status: 'unknown' };
      const still = (await validator.listSetupProposals()).contracts.some(
        (c) => c.contract.contract_id === proposalCid,
      );
      return still ? { status: 'not-committed' } : { status: 'unknown' };
    },
    isStale: isValidatorStale,
    facts: (r) => ({
      preapprovalCid: r.preapprovalCid,
      proposalCid,
      ...(r.updateId ? { updateId: r.updateId } : {}),
    }),
  };
  const out = await runFlow(flow, ctx);
  return {
    partyId,
    preapprovalCid: out.result.preapprovalCid,
    ...(out.result.updateId ? { updateId: out.result.updateId } : {}),
    ...(provider ? { provider } : {}),
    alreadyAccepted: false,
    proposalCid,
    flow: { hash: out.hash, outcome: out.outcome, attempts: out.attempts, window: out.window },
  };
}

/**
 * Sending Canton Coin through the receiver's TransferPreapproval with the
 * validator's legacy endpoints (canton-apis §2.3, §6.4): the sender's nonce
 * (its TransferCommandCounter from the scan proxy, 404 → 0, skipping the nonces
 * this process has in flight for the sender, so concurrent sends get distinct
 * consecutive nonces), prepare-send → the one pipeline → submit-send, and
 * tracking of the TransferCommand the SV automation executes later (status by
 * sender and nonce, matched on the prepared command's contract id prefix).
 * A receiver given by ANS name is resolved through Scan (src/flows/names.ts);
 * the DSO is pinned from Scan when it is configured, and the delegate (who
 * executes the command) to the configured validator party when one is pinned.
 */
import { isCantonApiError } from '../canton/errors.js';
import { decimalToJsonNumber } from '../canton/validator/client.js';
import { type PreapprovalSendIntent, PreapprovalSendIntentSchema } from '../intent/model.js';
import { type FlowContext, partyOf, requireValidator } from './context.js';
import { resolveParty } from './names.js';
import { type Flow, type FlowResult, runFlow, type SignedTransaction } from './pipeline.js';
import { Refusal } from './refusal.js';
import {
  isNotFound,
  isValidatorStale,
  pinnedValidatorParty,
  rawEd25519KeyHex,
  scanDso,
  validatorSubmission,
} from './setup-accept.js';

export interface SendRequest {
  from: string;
  /** A party id or an ANS name. */
  to: string;
  /** Decimal string, at most 10 fractional digits. */
  amount: string;
  /** When the SV automation must have executed the command by; default one hour from now. */
  expiresAt?: string | Date;
  description?: string;
}

export interface TrackOptions {
  /** Give up (status `pending`) after this long; default 60 s. */
  timeoutMs?: number;
  /** Pause between status reads; default 1 s. */
  intervalMs?: number;
  /** `transfer_command_contract_id_prefix`: which command with this nonce is ours. */
  prefix?: string;
}

export type TrackResult =
  | { status: 'sent'; contractId: string }
  | { status: 'failed'; failureKind: 'failed' | 'withdrawn'; reason: string; contractId: string }
  | { status: 'expired'; reason: string; contractId: string }
  /** Not settled when tracking stopped: still `created`, or not (yet) visible to Scan. */
  | { status: 'pending'; lastSeen: 'created' | 'not-found' };

export interface SendResult {
  sender: string;
  receiver: string;
  receiverName?: string;
  amount: string;
  nonce: number;
  expiresAt: string;
  description?: string;
  /** The TransferCommand's contract id as prepared (Scan's key starts with it). */
  transferCommandCid: string;
  updateId?: string;
  hash: string;
  outcome: 'committed' | 'committed-after-ambiguous';
  attempts: number;
  /** Absent with `wait: false`. */
  tracking?: TrackResult;
}

export interface SendOptions extends Omit<TrackOptions, 'prefix'> {
  /** Track the command until it settles (default true). */
  wait?: boolean;
}

const HOUR_MS = 3_600_000;

// ---- nonces ----------------------------------------------------------------------------------------

/**
 * This process's reserved nonces per sender. Allocation is serialised per sender; a nonce is
 * the smallest value ≥ the on-ledger counter that is not reserved. A reservation is released
 * when its preparation failed before anything was signed, or when tracking saw its command
 * settle; reservations below the counter are dropped (the counter has passed them).
 */
class NonceBook {
  private readonly reserved = new Map<string, Set<number>>();
  private readonly locks = new Map<string, Promise<unknown>>();

  async reserve(sender: string, counter: () => Promise<number>): Promise<number> {
    const prev = this.locks.get(sender) ?? Promise.resolve();
    const run = prev.then(async () => {
      const c = await counter();
      const set = this.reserved.get(sender) ?? new Set<number>();
      for (const n of set) if (n < c) set.delete(n);
      let n = c;
      while (set.has(n)) n++;
      set.add(n);
      this.reserved.set(sender, set);
      return n;
    });
    this.locks.set(
      sender,
      run.catch(() => {}),
    );
    return run;
  }

  release(sender: string, nonce: number): void {
    this.reserved.get(sender)?.delete(nonce);
  }

  inFlight(sender: string): number[] {
    return [...(this.reserved.get(sender) ?? [])].sort((a, b) => a - b);
  }
}

/** One book per validator client (the CLI and a service hold one client per process). */
const books = new WeakMap<object, NonceBook>();
function bookOf(ctx: FlowContext): NonceBook {
  const key = requireValidator(ctx, 'send');
  let b = books.get(key);
  if (!b) {
    b = new NonceBook();
    books.set(key, b);
  }
  return b;
}

/** The nonces this process holds for `sender` (reserved, not yet known to be settled). */
export function inFlightNonces(ctx: FlowContext, sender: string): number[] {
  return bookOf(ctx).inFlight(sender);
}

/** The sender's TransferCommandCounter (`nextNonce`) from the scan proxy; no counter yet → 0. */
export async function counterNonce(ctx: FlowContext, sender: string): Promise<number> {
  try {
    const r = await requireValidator(ctx, 'send').scanProxyTransferCommandCounter(sender);
    const v = r.transfer_command_counter.contract.payload.nextNonce;
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 0)
      throw new Refusal(
        'bad_request',
        `the sender's TransferCommandCounter has an unreadable nextNonce (${String(v)})`,
      );
    return n;
  } catch (e) {
    if (isNotFound(e)) return 0;
    throw e;
  }
}

// ---- send ------------------------------------------------------------------------------------------

const nowMs = (ctx: FlowContext): number => (ctx.nowUs ? Number(ctx.nowUs() / 1000n) : Date.now());

function expiryOf(ctx: FlowContext, at: string | Date | undefined): string {
  const now = nowMs(ctx);
  const ms = at === undefined ? now + HOUR_MS : at instanceof Date ? at.getTime() : Date.parse(at);
  if (Number.isNaN(ms)) throw new Refusal('bad_request', `expiresAt: not an ISO-8601 time: ${String(at)}`);
  if (ms <= now)
    throw new Refusal('bad_request', `expiresAt: ${new Date(ms).toISOString()} is not in the future`);
  return new Date(ms).toISOString();
}

function checkAmount(amount: string): void {
  try {
    decimalToJsonNumber(amount);
  } catch (e) {
    throw new Refusal('bad_request', `amount: ${(e as Error).message}`);
  }
}

/** The TransferCommand create in the transaction that was signed: its contract id is the prefix. */
function commandCidOf(signed: SignedTransaction): string {
  for (const { node } of signed.tx.transaction.nodes)
    if (node.type === 'create' && node.templateId.entityName === 'TransferCommand') return node.contractId;
  return '';
}

export async function sendViaPreapproval(
  ctx: FlowContext,
  req: SendRequest,
  opts: SendOptions = {},
): Promise<SendResult> {
  const validator = requireValidator(ctx, 'send');
  const party = await partyOf(ctx, req.from);
  const publicKey = rawEd25519KeyHex(party, 'send');
  checkAmount(req.amount);
  const expiresAt = expiryOf(ctx, req.expiresAt);
  const to = await resolveParty(ctx, req.to);
  // Neither comes from the validator that prepares the send: the DSO from Scan, the delegate from
  // the configuration (without them the transaction's own expectedDso / delegate are only checked
  // for consistency).
  const dso = await scanDso(ctx);
  const delegate = pinnedValidatorParty(ctx);
  const draft = {
    kind: 'preapproval-send' as const,
    sender: party.partyId,
    receiver: to.partyId,
    amount: req.amount,
    nonce: 0,
    expiresAt,
    ...(req.description !== undefined ? { description: req.description } : {}),
    ...(delegate !== undefined ? { delegate } : {}),
    ...(dso !== undefined ? { dso } : {}),
  };
  const checked = PreapprovalSendIntentSchema.safeParse(draft);
  if (!checked.success) {
    const i = checked.error.issues[0];
    throw new Refusal('bad_request', `${i?.path.join('.') || 'intent'}: ${i?.message ?? 'invalid'}`);
  }

  const book = bookOf(ctx);
  const nonce = await book.reserve(party.partyId, () => counterNonce(ctx, party.partyId));
  const intent: PreapprovalSendIntent = { ...checked.data, nonce };
  let submitted = false;
  let commandCid = '';
  const flow: Flow<{ updateId?: string }> = {
    name: 'preapproval-send',
    party,
    intent,
    async prepare() {
      try {
        const res = await validator.prepareTransferPreapprovalSend({
          sender_party_id: party.partyId,
          receiver_party_id: to.partyId,
          amount: req.amount,
          expires_at: expiresAt,
          nonce,
          ...(req.description !== undefined ? { description: req.description } : {}),
        });
        return { preparedTransaction: res.transaction, claimedHash: res.tx_hash, scheme: 'v2' };
      } catch (e) {
        if (isCantonApiError(e) && !e.ambiguous && e.status >= 400 && e.status < 500 && e.status !== 429)
          throw new Refusal(
            'bad_request',
            `the validator would not prepare the send: ${e.spliceError ?? e.detail ?? e.message}`,
            [],
            { code: e.code, status: String(e.status) },
          );
        throw e;
      }
    },
    async submit(signed) {
      submitted = true;
      commandCid = commandCidOf(signed);
      const res = await validator.submitTransferPreapprovalSend({
        submission: validatorSubmission(signed, publicKey),
      });
      return { updateId: res.update_id };
    },
    async resolveAmbiguous(signed) {
      const cid = commandCidOf(signed);
      const t = await readStatus(ctx, party.partyId, nonce, cid);
      return t === 'not-found' || cid === '' ? { status: 'unknown' } : { status: 'committed', result: {} };
    },
    isStale: isValidatorStale,
    facts: (r) => ({
      nonce: String(nonce),
      receiver: to.partyId,
      ...(to.name ? { receiverName: to.name } : {}),
      ...(r.updateId ? { updateId: r.updateId } : {}),
    }),
  };
  let out: FlowResult<{ updateId?: string }>;
  try {
    out = await runFlow(flow, ctx);
  } catch (e) {
    // Free the nonce when no TransferCommand can exist for it: nothing was submitted, or the
    // validator definitely rejected the submission. After an unknown outcome it stays reserved
    // until its command is seen to settle (a second command with the same nonce would only fail).
    if (!submitted || (e instanceof Refusal && e.reason === 'submission_rejected'))
      book.release(party.partyId, nonce);
    throw e;
  }
  const result: SendResult = {
    sender: party.partyId,
    receiver: to.partyId,
    ...(to.name ? { receiverName: to.name } : {}),
    amount: req.amount,
    nonce,
    expiresAt,
    ...(req.description !== undefined ? { description: req.description } : {}),
    transferCommandCid: commandCid,
    ...(out.result.updateId ? { updateId: out.result.updateId } : {}),
    hash: out.hash,
    outcome: out.outcome,
    attempts: out.attempts,
  };
  if (opts.wait === false) return result;
  const tracking = await trackSend(ctx, party.partyId, nonce, {
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
    ...(opts.intervalMs !== undefined ? { intervalMs: opts.intervalMs } : {}),
    prefix: commandCid,
  });
  return { ...result, tracking };
}

// ---- tracking --------------------------------------------------------------------------------------

type Observed = 'not-found' | { contractId: string; status: TrackResult | 'created' };

/** One status read: our command (by prefix; without one, the only command with this nonce). */
async function readStatus(
  ctx: FlowContext,
  sender: string,
  nonce: number,
  prefix: string | undefined,
): Promise<Observed> {
  let entries: [string, { status: { status: string; failure_kind?: string; reason?: string } }][];
  try {
    const r = await requireValidator(ctx, 'send').scanProxyTransferCommandStatus({ sender, nonce });
    entries = Object.entries(r.transfer_commands_by_contract_id);
  } catch (e) {
    if (isNotFound(e)) return 'not-found';
    throw e;
  }
  const mine = prefix ? entries.filter(([cid]) => cid.startsWith(prefix)) : entries;
  if (mine.length !== 1) return 'not-found';
  const [contractId, { status: s }] = mine[0]!;
  switch (s.status) {
    case 'sent':
      return { contractId, status: { status: 'sent', contractId } };
    case 'failed':
      return {
        contractId,
        status:
          s.failure_kind === 'expired'
            ? { status: 'expired', reason: s.reason ?? 'expired', contractId }
            : {
                status: 'failed',
                failureKind: s.failure_kind === 'withdrawn' ? 'withdrawn' : 'failed',
                reason: s.reason ?? '',
                contractId,
              },
      };
    default:
      return { contractId, status: 'created' };
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Polls the TransferCommand status of (sender, nonce) until it is sent, failed or expired,
 * or `timeoutMs` passes (`pending`). A settled command frees its nonce in this process, so the
 * next send reads the counter again rather than assuming it.
 */
export async function trackSend(
  ctx: FlowContext,
  sender: string,
  nonce: number,
  opts: TrackOptions = {},
): Promise<TrackResult> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  const interval = Math.max(1, opts.intervalMs ?? 1000);
  for (;;) {
    const o = await readStatus(ctx, sender, nonce, opts.prefix);
    if (o !== 'not-found' && o.status !== 'created') {
      bookOf(ctx).release(sender, nonce);
      return o.status;
    }
    if (Date.now() + interval > deadline)
      return { status: 'pending', lastSeen: o === 'not-found' ? 'not-found' : 'created' };
    await sleep(interval);
  }
}

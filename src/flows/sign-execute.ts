/**
 * Generic sign-and-execute: an operator brings a prepared transaction (from
 * another tool, a participant's prepare answer) and an explicit Intent; the
 * one pipeline verifies it (hash, intent, window, policy), signs, and the
 * Ledger API executes it. It cannot be prepared again here (one attempt); an
 * ambiguous execute is resolved from the completion stream by the command id
 * the transaction's own metadata carries. `verifyOnly` runs the checks and
 * signs nothing; `signOnly` verifies and signs (journalled) without executing.
 */

import { isCantonApiError } from '../canton/errors.js';
import { decodePreparedTransaction } from '../hashing/decode.js';
import { base64ToBytes } from '../hashing/input.js';
import type { HashingScheme } from '../hashing/transaction-hash.js';
import { type Intent, IntentSchema, type RecognisedAction } from '../intent/model.js';
import type { CantonSignature } from '../keys/signer.js';
import { withdrawalCommandId } from '../store/repos/withdrawals.js';
import { type FlowContext, partyOf } from './context.js';
import { executeSigned, type LedgerOutcome, lookupCompletion, TAKEN_CODES, takenOutcome } from './ledger.js';
import {
  type Flow,
  type FlowResult,
  type PreparedInput,
  runFlow,
  settlePolicy,
  stepRecorder,
  verifyAndSign,
  verifyPrepared,
} from './pipeline.js';
import { Refusal } from './refusal.js';
import { checkCallerCommandId } from './transfer.js';
import { describeWindow } from './window.js';

export interface SignExecuteRequest {
  partyId: string;
  /** Base64 `PreparedTransaction`. */
  preparedTransaction: string;
  /** The hash the preparer claims (base64 or hex). */
  claimedHash: string;
  scheme: HashingScheme;
  /** Validated with `IntentSchema`; the error names the field. */
  intent: unknown;
  /**
   * The same intent as `IntentSchema` already output it (the route validated
   * the request body with it): when given, it is used and not parsed again.
   */
  validatedIntent?: Intent;
  /** When given, must be the command id in the transaction's metadata. */
  commandId?: string;
  /**
   * Set by the withdrawal flow only (an offline-signed withdrawal carried on
   * after its import): the transaction is that withdrawal's, under exactly
   * its command id. Without it, a withdrawal's command id (`cs-wd-…`) is refused.
   */
  withdrawalId?: string;
}

export interface VerifyReport {
  partyId: string;
  hash: string;
  scheme: HashingScheme;
  commandId: string;
  intent: Intent;
  actions: RecognisedAction[];
  window: { earliest?: string; latest: string; latestSource: string };
}

/** The intent from untrusted JSON, or a refusal naming the field that is wrong. */
export function parseIntent(raw: unknown): Intent {
  const r = IntentSchema.safeParse(raw);
  if (r.success) return r.data;
  const i = r.error.issues[0];
  const where = i && i.path.length > 0 ? `intent.${i.path.join('.')}` : 'intent';
  throw new Refusal('bad_request', `${where}: ${i?.message ?? 'invalid'}`);
}

async function setUp(ctx: FlowContext, req: SignExecuteRequest) {
  const intent = req.validatedIntent ?? parseIntent(req.intent);
  const party = await partyOf(ctx, req.partyId);
  const input: PreparedInput = {
    preparedTransaction: req.preparedTransaction,
    claimedHash: req.claimedHash,
    scheme: req.scheme,
  };
  return { intent, party, input };
}

function checkCommandId(req: SignExecuteRequest, inTx: string): void {
  if (req.commandId !== undefined && req.commandId !== inTx)
    throw new Refusal(
      'bad_request',
      `commandId: the transaction's metadata carries command id ${inTx}, not ${req.commandId}`,
    );
}

/**
 * Before anything is signed: the transaction's command id is not a
 * withdrawal's, and is the one the caller named (if it named one). An
 * undecodable transaction is left to the pipeline, which refuses it as such.
 */
function commandIdBeforeSigning(req: SignExecuteRequest): void {
  const inTx = metadataCommandId(req.preparedTransaction);
  if (inTx === undefined) return;
  if (req.withdrawalId === undefined) checkCallerCommandId(inTx);
  else if (inTx !== withdrawalCommandId(req.withdrawalId))
    throw new Refusal(
      'bad_request',
      `commandId: the transaction carries ${inTx}, not withdrawal ${req.withdrawalId}'s command id`,
    );
  checkCommandId(req, inTx);
}

function metadataCommandId(b64: string): string | undefined {
  try {
    return decodePreparedTransaction(base64ToBytes(b64, 'prepared transaction')).metadata.submitterInfo
      .commandId;
  } catch {
    return undefined;
  }
}

/** The checks of the pipeline without a signature: what signing this would authorise. */
export async function verifyOnly(ctx: FlowContext, req: SignExecuteRequest): Promise<VerifyReport> {
  const { intent, party, input } = await setUp(ctx, req);
  const v = verifyPrepared('sign-and-execute', input, party, intent, ctx);
  const commandId = v.tx.metadata.submitterInfo.commandId;
  checkCommandId(req, commandId);
  return {
    partyId: party.partyId,
    hash: Buffer.from(v.hash).toString('hex'),
    scheme: v.scheme,
    commandId,
    intent,
    actions: v.actions,
    window: describeWindow(v.window),
  };
}

export interface SignReport extends VerifyReport {
  /** Canton's Signature message (Ledger API JSON form). */
  signature: CantonSignature;
  /** The signature bytes in hex (the validator's endpoints take this). */
  signatureHex: string;
}

/** Verify, policy, sign and check the signature, journalled as flow `sign`; nothing is executed. */
export async function signOnly(ctx: FlowContext, req: SignExecuteRequest): Promise<SignReport> {
  const { intent, party, input } = await setUp(ctx, req);
  commandIdBeforeSigning(req);
  const rec = stepRecorder(ctx.recorder, {
    flow: 'sign',
    partyId: party.partyId,
    intent,
    ...(req.commandId !== undefined ? { commandId: req.commandId } : {}),
  });
  const s = await verifyAndSign('sign', input, party, intent, ctx, rec);
  // The signature is handed out: whatever it moves counts against the limits from now on.
  await settlePolicy(ctx, s.policy.subject, 'committed');
  return {
    partyId: party.partyId,
    hash: Buffer.from(s.hash).toString('hex'),
    scheme: s.scheme,
    commandId: s.tx.metadata.submitterInfo.commandId,
    intent,
    actions: s.actions,
    window: describeWindow(s.window),
    signature: s.signature,
    signatureHex: s.signatureHex,
  };
}

export async function signAndExecute(
  ctx: FlowContext,
  req: SignExecuteRequest,
): Promise<FlowResult<LedgerOutcome>> {
  const { intent, party, input } = await setUp(ctx, req);
  // The command id is read from the transaction the pipeline decoded and signed, never from the caller.
  let beginExclusive: number | undefined;
  let commandId: string | undefined;
  const flow: Flow<LedgerOutcome> = {
    name: 'sign-and-execute',
    party,
    intent,
    ...(req.commandId !== undefined ? { commandId: req.commandId } : {}),
    maxAttempts: 1,
    async prepare() {
      commandIdBeforeSigning(req);
      return input;
    },
    async submit(signed) {
      commandId = signed.tx.metadata.submitterInfo.commandId;
      beginExclusive = (await ctx.ledger.ledgerEnd()).offset;
      try {
        return { ...(await executeSigned(ctx, signed)), commandId };
      } catch (e) {
        // The command id is taken: this transaction (or another of the command) committed before
        // or is in flight. Its commit when the completions show it, else outcome unknown: never a
        // rejection, which would invite the caller to pay again under a new command id.
        if (isCantonApiError(e) && TAKEN_CODES.has(e.code))
          return await takenOutcome(ctx, e, { party: party.partyId, commandId, from: beginExclusive });
        throw e;
      }
    },
    async resolveAmbiguous(signed) {
      const id = commandId ?? signed.tx.metadata.submitterInfo.commandId;
      if (beginExclusive === undefined) return { status: 'unknown' };
      return lookupCompletion(ctx, { party: party.partyId, commandId: id, beginExclusive });
    },
    facts: (r) => ({ commandId: r.commandId, updateId: r.updateId }),
  };
  return runFlow(flow, ctx);
}

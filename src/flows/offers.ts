/**
 * Two-step transfers waiting for an answer (token-standard TransferInstruction,
 * canton-apis §6.1 "receiving side"): `listOffers` reads the instructions the
 * party is sender or receiver of from the Ledger API ACS (interface views);
 * `acceptOffer` / `rejectOffer` (the receiver) and `withdrawOffer` (the sender)
 * get the registry's choice context, exercise the TransferInstruction choice
 * through the interface and sign it through the one pipeline with an intent
 * naming the party and the instruction.
 */
import { randomUUID } from 'node:crypto';
import type { TransferInstructionChoice } from '../canton/validator/registry.js';
import type { InstrumentId } from '../intent/model.js';
import { type FlowContext, partyOf, requireValidator } from './context.js';
import { activeInterfaceViews, instrumentOf, TRANSFER_INSTRUCTION_INTERFACE } from './holdings.js';
import { type LedgerOutcome, ledgerFlow } from './ledger.js';
import { type FlowResult, runFlow } from './pipeline.js';
import { Refusal } from './refusal.js';
import { checkCallerCommandId, disclosedForLedger, REASON_KEY, synchronizerOf } from './transfer.js';

export interface Offer {
  instructionCid: string;
  sender: string;
  receiver: string;
  amount: string;
  instrument: InstrumentId;
  requestedAt?: string;
  executeBefore?: string;
  memo?: string;
  /** `in`: the party receives (may accept or reject); `out`: the party sends (may withdraw). */
  direction: 'in' | 'out';
  /** e.g. `TransferPendingReceiverAcceptance`. */
  status?: string;
}

export interface OfferActionResult {
  action: TransferInstructionChoice;
  partyId: string;
  instructionCid: string;
  updateId: string;
  commandId: string;
  hash: string;
  attempts: number;
  outcome: FlowResult<LedgerOutcome>['outcome'];
}

const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const obj = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};

/** Pending transfer instructions where `partyId` is the sender (out) or the receiver (in). */
export async function listOffers(ctx: FlowContext, partyId: string): Promise<Offer[]> {
  const out: Offer[] = [];
  for (const { event, view } of await activeInterfaceViews(ctx, partyId, TRANSFER_INSTRUCTION_INTERFACE)) {
    const t = obj(view.transfer);
    const sender = text(t.sender);
    const receiver = text(t.receiver);
    const amount = text(t.amount);
    const instrument = instrumentOf(t.instrumentId);
    if (!sender || !receiver || amount === undefined || !instrument) continue;
    if (sender !== partyId && receiver !== partyId) continue;
    const requestedAt = text(t.requestedAt);
    const executeBefore = text(t.executeBefore);
    const memo = text(obj(obj(t.meta).values)[REASON_KEY]);
    const status = text(obj(view.status).tag);
    out.push({
      instructionCid: event.contractId,
      sender,
      receiver,
      amount,
      instrument,
      ...(requestedAt ? { requestedAt } : {}),
      ...(executeBefore ? { executeBefore } : {}),
      ...(memo !== undefined ? { memo } : {}),
      direction: receiver === partyId ? 'in' : 'out',
      ...(status ? { status } : {}),
    });
  }
  return out;
}

const CHOICE_NAME: Record<TransferInstructionChoice, string> = {
  accept: 'TransferInstruction_Accept',
  reject: 'TransferInstruction_Reject',
  withdraw: 'TransferInstruction_Withdraw',
};

export interface OfferActionOptions {
  commandId?: string;
}

async function instructionChoice(
  ctx: FlowContext,
  choice: TransferInstructionChoice,
  partyId: string,
  instructionCid: string,
  opts: OfferActionOptions,
): Promise<OfferActionResult> {
  const registry = requireValidator(ctx, `${choice} of a transfer offer`).registry();
  const party = await partyOf(ctx, partyId);
  if (!/^00[0-9a-f]{64}[0-9a-f]*$/.test(instructionCid))
    throw new Refusal('bad_request', `instruction: not a contract id: ${instructionCid}`);
  const commandId = checkCallerCommandId(opts.commandId ?? randomUUID());
  const flow = ledgerFlow(ctx, {
    name: `offer-${choice}`,
    party,
    intent: { kind: `transfer-instruction-${choice}`, party: party.partyId, instructionCid },
    commandId,
    async request() {
      const context =
        choice === 'accept'
          ? await registry.getTransferInstructionAcceptContext(instructionCid, { excludeDebugFields: true })
          : choice === 'reject'
            ? await registry.getTransferInstructionRejectContext(instructionCid, { excludeDebugFields: true })
            : await registry.getTransferInstructionWithdrawContext(instructionCid, {
                excludeDebugFields: true,
              });
      const synchronizerId = synchronizerOf(
        context.disclosedContracts,
        party.synchronizerId ?? ctx.synchronizerId,
      );
      return {
        commands: [
          {
            ExerciseCommand: {
              templateId: TRANSFER_INSTRUCTION_INTERFACE,
              contractId: instructionCid,
              choice: CHOICE_NAME[choice],
              choiceArgument: { extraArgs: { context: context.choiceContextData, meta: { values: {} } } },
            },
          },
        ],
        disclosedContracts: disclosedForLedger(context.disclosedContracts),
        ...(synchronizerId ? { synchronizerId } : {}),
      };
    },
  });
  flow.facts = (r) => ({ updateId: r.updateId, commandId: r.commandId, instructionCid, action: choice });
  const out = await runFlow(flow, ctx);
  return {
    action: choice,
    partyId: party.partyId,
    instructionCid,
    updateId: out.result.updateId,
    commandId,
    hash: out.hash,
    attempts: out.attempts,
    outcome: out.outcome,
  };
}

/** The receiver takes the offered amount. */
export const acceptOffer = (ctx: FlowContext, partyId: string, cid: string, opts: OfferActionOptions = {}) =>
  instructionChoice(ctx, 'accept', partyId, cid, opts);
/** The receiver declines; the sender gets the locked amount back. */
export const rejectOffer = (ctx: FlowContext, partyId: string, cid: string, opts: OfferActionOptions = {}) =>
  instructionChoice(ctx, 'reject', partyId, cid, opts);
/** The sender takes the offer back. */
export const withdrawOffer = (
  ctx: FlowContext,
  partyId: string,
  cid: string,
  opts: OfferActionOptions = {},
) => instructionChoice(ctx, 'withdraw', partyId, cid, opts);

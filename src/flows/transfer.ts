/**
 * Token-standard transfers through the Ledger API (canton-apis §6.1): sender
 * and receiver by party id or ANS name, instrument (default Canton Coin: the
 * DSO's `Amulet`), inputs chosen from the sender's holdings, the registry's
 * TransferFactory and choice context, `TransferFactory_Transfer` prepared
 * under one command id and signed through the one pipeline with an intent
 * that names sender, receiver, amount, instrument, memo, deadline, inputs and
 * the path the registry announced (direct, offer or self). A stale
 * preparation (a closed mining round) is prepared again under the same
 * command id with a fresh context and the SAME inputs (so that it conflicts
 * with the first, should that one still commit after all); an ambiguous
 * execute is resolved from the completion stream. Also owns the registry
 * helpers the offers flow shares (disclosed contracts for the Ledger API and
 * their synchronizer).
 */

import { randomUUID } from 'node:crypto';
import type { DisclosedContract } from '../canton/ledger-api/schemas.js';
import type { RegistryDisclosedContract } from '../canton/validator/registry.js';
import { isoMicros } from '../hashing/render.js';
import { fromUnits } from '../intent/decimal.js';
import { type InstrumentId, type TransferIntent, TransferIntentSchema } from '../intent/model.js';
import { WITHDRAWAL_COMMAND_PREFIX } from '../store/repos/withdrawals.js';
import { withArticle } from '../text/english.js';
import { type FlowContext, partyOf, requireValidator } from './context.js';
import { cachedFactory, forgetFactory, rememberFactory } from './factory-cache.js';
import {
  feeRoundOf,
  type Holding,
  instrumentText,
  listHoldings,
  sameInstrument,
  selectInputs,
  TRANSFER_FACTORY_INTERFACE,
  toUnits,
} from './holdings.js';
import { type LedgerOutcome, ledgerFlow } from './ledger.js';
import { resolveParty } from './names.js';
import { type FlowResult, runFlow } from './pipeline.js';
import { Refusal } from './refusal.js';

/** Metadata key of a token-standard transfer's free-text reason. */
export const REASON_KEY = 'splice.lfdecentralizedtrust.org/reason';
/** Default time the transfer may take to execute. */
const DEFAULT_WINDOW_US = 3_600_000_000n;
/** `requestedAt` is backdated by this much (as the wallet SDK does): it must be in the past. */
const REQUESTED_AT_SKEW_US = 60_000_000n;

export interface TransferRequest {
  /** Party id or ANS name of the sender (must be in the party book). */
  from: string;
  /** Party id or ANS name of the receiver. */
  to: string;
  /** Decimal string, at most 10 decimals, positive. */
  amount: string;
  /** Default: Canton Coin (`{admin: DSO, id: 'Amulet'}`). */
  instrument?: InstrumentId;
  memo?: string;
  /** ISO time or Date; default one hour from now. */
  executeBefore?: string | Date;
  /** The ledger deduplicates on it: give the same id to make a retry of the same transfer safe. */
  commandId?: string;
  /** Kept on top of the amount when selecting inputs (decimal, default 0). */
  feeReserve?: string;
  /** Use exactly these holdings (no reselection on a stale retry). Holdings merges use it. */
  inputs?: readonly Holding[];
  /** Preparations at most (default 3). */
  maxAttempts?: number;
  /** Journal flow name (default `transfer`). */
  flowName?: string;
  /**
   * Deliver in one step or not at all: when the registry announces a
   * two-step transfer (an offer the receiver must accept: no valid transfer
   * preapproval), refuse (`delivery_required`) before anything is prepared
   * or signed. The announced kind is then part of the intent, so a
   * transaction that makes an offer all the same is refused too.
   */
  requireDelivery?: boolean;
}

export interface TransferResult {
  kind: 'direct' | 'offer' | 'self';
  updateId: string;
  commandId: string;
  hash: string;
  sender: string;
  senderName?: string;
  receiver: string;
  receiverName?: string;
  amount: string;
  instrument: InstrumentId;
  memo?: string;
  executeBefore: string;
  inputs: string[];
  attempts: number;
  outcome: FlowResult<LedgerOutcome>['outcome'];
  window: FlowResult<LedgerOutcome>['window'];
}

// ---- registry helpers --------------------------------------------------------------------------

/** Registry disclosed contracts as the Ledger API takes them (the `debug*` fields dropped). */
export function disclosedForLedger(ds: readonly RegistryDisclosedContract[]): DisclosedContract[] {
  return ds.map(({ templateId, contractId, createdEventBlob, synchronizerId }) => ({
    templateId,
    contractId,
    createdEventBlob,
    synchronizerId,
  }));
}

/** The one synchronizer the disclosed contracts live on (refused when they differ), else the fallback. */
export function synchronizerOf(
  ds: readonly RegistryDisclosedContract[],
  fallback: string | undefined,
): string | undefined {
  const ids = [...new Set(ds.map((d) => d.synchronizerId))];
  if (ids.length > 1)
    throw new Refusal(
      'bad_request',
      `the registry's disclosed contracts are on different synchronizers (${ids.join(', ')}); the transaction cannot be prepared on one`,
    );
  return ids[0] ?? fallback;
}

/** How long the DSO party read from a validator is reused (it is fixed for a network's life). */
const DSO_TTL_MS = 5 * 60_000;
const dsoCache = new WeakMap<object, { dso: string; until: number }>();

/**
 * Canton Coin: the DSO party's `Amulet` (the DSO from the validator's scan
 * proxy, asked once per validator client every few minutes: every transfer
 * needs it and it never changes on a network; failures are not kept).
 */
export async function amuletInstrument(ctx: FlowContext): Promise<InstrumentId> {
  const validator = requireValidator(ctx, 'a Canton Coin transfer');
  const hit = dsoCache.get(validator);
  if (hit && hit.until > Date.now()) return { admin: hit.dso, id: 'Amulet' };
  const dso = (await validator.scanProxyDsoPartyId()).dso_party_id;
  dsoCache.set(validator, { dso, until: Date.now() + DSO_TTL_MS });
  return { admin: dso, id: 'Amulet' };
}

const COMMAND_ID = /^[A-Za-z0-9#:\-_/ ]{1,255}$/;

/**
 * A command id a caller chose (an offer action, a transaction brought to be
 * signed): well-formed, and not a withdrawal's (`cs-wd-…`), since a withdrawal
 * takes any commit under its command id for its own.
 */
export function checkCallerCommandId(id: string): string {
  checkCommandId(id);
  if (id.startsWith(WITHDRAWAL_COMMAND_PREFIX))
    throw new Refusal(
      'bad_request',
      `commandId: ${id} is a withdrawal's command id (${WITHDRAWAL_COMMAND_PREFIX}…); only that withdrawal submits under it`,
    );
  return id;
}

export function checkCommandId(id: string): string {
  if (!COMMAND_ID.test(id))
    throw new Refusal(
      'bad_request',
      'commandId: 1 to 255 characters of letters, digits, space and #:-_/ (a Ledger API command id)',
    );
  return id;
}

function isoTime(t: string | Date, what: string): bigint {
  const ms = typeof t === 'string' ? Date.parse(t) : t.getTime();
  if (Number.isNaN(ms)) throw new Refusal('bad_request', `${what}: not an ISO-8601 time: ${String(t)}`);
  const frac = typeof t === 'string' ? (/\.(\d{1,6})/.exec(t)?.[1] ?? '') : '';
  return BigInt(ms) * 1000n + BigInt(frac.padEnd(6, '0').slice(3) || '0');
}

function parseIntent(raw: TransferIntent): TransferIntent {
  const r = TransferIntentSchema.safeParse(raw);
  if (r.success) return r.data;
  const i = r.error.issues[0];
  throw new Refusal('bad_request', `${i?.path.join('.') || 'transfer'}: ${i?.message ?? 'invalid'}`);
}

// ---- the transfer ------------------------------------------------------------------------------

export async function transfer(ctx: FlowContext, req: TransferRequest): Promise<TransferResult> {
  const validator = requireValidator(ctx, 'a token-standard transfer');
  const registry = validator.registry();
  const from = await resolveParty(ctx, req.from);
  const to = await resolveParty(ctx, req.to);
  const party = await partyOf(ctx, from.partyId);
  const amount = fromUnits(toUnits(req.amount, 'amount'));
  if (toUnits(amount) <= 0n) throw new Refusal('bad_request', `amount: must be positive, got ${req.amount}`);
  const instrument = req.instrument ?? (await amuletInstrument(ctx));
  const now = (ctx.nowUs ?? (() => BigInt(Date.now()) * 1000n))();
  const executeBefore =
    req.executeBefore !== undefined ? isoTime(req.executeBefore, 'executeBefore') : now + DEFAULT_WINDOW_US;
  if (executeBefore <= now)
    throw new Refusal('bad_request', `executeBefore: ${isoMicros(executeBefore)} is not in the future`);
  const commandId = checkCommandId(req.commandId ?? randomUUID());
  if (req.inputs) {
    const bad = req.inputs.find((h) => h.locked || !sameInstrument(h.instrument, instrument));
    if (bad)
      throw new Refusal(
        'bad_request',
        `input ${bad.cid} is locked or not ${withArticle(instrumentText(instrument))} holding`,
      );
  }

  const select = async (): Promise<Holding[]> => {
    if (req.inputs) return [...req.inputs];
    const holdings = await listHoldings(ctx, party.partyId, { instrument });
    return selectInputs(holdings, amount, {
      instrument,
      ...(req.feeReserve !== undefined ? { feeReserve: req.feeReserve } : {}),
    }).inputs;
  };
  // Selected before anything is prepared: insufficient funds are refused here.
  const inputs = await select();

  // Canton Coin's factory and choice context are remembered between transfers of one sender to one
  // receiver in one round (factory-cache.ts); the first preparation may use them, and any failure
  // of a preparation made with them prepares again with a fresh answer.
  const factoryKey =
    instrument.id === 'Amulet' && sameInstrument(instrument, await amuletInstrument(ctx))
      ? [instrument.admin, instrument.id, party.partyId, to.partyId, feeRoundOf(inputs) ?? ''].join('\n')
      : undefined;
  /** The preparation under way used a remembered answer; `fresh`: ask the registry whatever is remembered. */
  let fromCache = false;
  let fresh = false;
  const factoryFor = async (cids: string[], attempt: number) => {
    const remembered =
      factoryKey !== undefined && attempt === 1 && !fresh ? cachedFactory(validator, factoryKey) : undefined;
    // A remembered offer never refuses a transfer that must be delivered: the receiver may have a
    // preapproval by now, so the registry is asked.
    const hit = remembered?.transferKind === 'offer' && req.requireDelivery ? undefined : remembered;
    fromCache = hit !== undefined;
    if (hit) return hit;
    const answer = await registry.getTransferFactory({
      choiceArguments: choiceArguments(cids, { values: {} }),
      excludeDebugFields: true,
    });
    if (factoryKey !== undefined) rememberFactory(validator, factoryKey, answer);
    return answer;
  };

  const intentFor = (cids: string[], kind: TransferIntent['transferKind']): TransferIntent =>
    parseIntent({
      kind: 'transfer',
      sender: party.partyId,
      receiver: to.partyId,
      amount,
      instrument,
      ...(req.memo !== undefined ? { memo: req.memo } : {}),
      executeBefore: isoMicros(executeBefore),
      inputs: cids,
      ...(kind ? { transferKind: kind } : {}),
    });

  const choiceArguments = (cids: string[], context: Record<string, unknown>) => ({
    expectedAdmin: instrument.admin,
    transfer: {
      sender: party.partyId,
      receiver: to.partyId,
      amount,
      instrumentId: instrument,
      requestedAt: isoMicros((ctx.nowUs ?? (() => BigInt(Date.now()) * 1000n))() - REQUESTED_AT_SKEW_US),
      executeBefore: isoMicros(executeBefore),
      inputHoldingCids: cids,
      meta: { values: req.memo !== undefined ? { [REASON_KEY]: req.memo } : {} },
    },
    extraArgs: { context, meta: { values: {} } },
  });

  const flow = ledgerFlow(ctx, {
    name: req.flowName ?? 'transfer',
    party,
    intent: intentFor(
      inputs.map((h) => h.cid),
      undefined,
    ),
    commandId,
    ...(req.maxAttempts !== undefined ? { maxAttempts: req.maxAttempts } : {}),
    async request(attempt) {
      // Every re-preparation spends the same holdings as the first: if an earlier one was sent
      // (and a participant's "rejected" was not the truth), the two conflict on the synchronizer and
      // at most one commits — command deduplication is the executing participant's own check.
      const cids = inputs.map((h) => h.cid);
      const factory = await factoryFor(cids, attempt);
      if (req.requireDelivery && factory.transferKind === 'offer') {
        const refusal = new Refusal(
          'delivery_required',
          `${to.name ?? to.partyId} has no valid transfer preapproval, so the transfer would only be an offer waiting for the receiver; this service delivers in one step or not at all (withdrawals.requireDelivery). Nothing was signed. The receiver can set up a transfer preapproval, then send a new withdrawal`,
          [],
          { receiver: to.partyId },
        );
        // Journalled as the pipeline journals its own refusals (audit, refusal metrics).
        await ctx.recorder?.record({
          flow: req.flowName ?? 'transfer',
          step: 'refused',
          partyId: party.partyId,
          commandId,
          intent: flow.intent,
          reason: refusal.reason,
          message: refusal.message,
        });
        throw refusal;
      }
      // The intent of this attempt: its inputs and the path the registry announced (the
      // intent check refuses a transaction that takes another path).
      flow.intent = intentFor(cids, factory.transferKind);
      const disclosed = factory.choiceContext.disclosedContracts;
      const synchronizerId = synchronizerOf(disclosed, party.synchronizerId ?? ctx.synchronizerId);
      return {
        commands: [
          {
            ExerciseCommand: {
              templateId: TRANSFER_FACTORY_INTERFACE,
              contractId: factory.factoryId,
              choice: 'TransferFactory_Transfer',
              choiceArgument: choiceArguments(cids, factory.choiceContext.choiceContextData),
            },
          },
        ],
        disclosedContracts: disclosedForLedger(disclosed),
        ...(synchronizerId ? { synchronizerId } : {}),
      };
    },
  });
  if (factoryKey !== undefined) {
    const key = factoryKey;
    // A preparation with a remembered context that fails: the context may be what is stale. It is
    // forgotten and the transaction prepared once more with a fresh one (preparing commits nothing).
    const prepare = flow.prepare.bind(flow);
    flow.prepare = async (attempt) => {
      try {
        return await prepare(attempt);
      } catch (e) {
        if (!fromCache || e instanceof Refusal) throw e;
        forgetFactory(validator, key);
        fresh = true;
        return prepare(attempt);
      }
    };
    // Executed and rejected with a remembered context: it is forgotten, so that the next
    // preparation (a stale one's, attempt 2, asks the registry anyway) or the next transfer
    // starts from a fresh answer. Whether to prepare again is decided as without it.
    const stale = flow.isStale?.bind(flow);
    flow.isStale = (e) => {
      if (fromCache) forgetFactory(validator, key);
      return stale?.(e) ?? false;
    };
  }
  flow.facts = (r) => ({
    updateId: r.updateId,
    commandId: r.commandId,
    sender: party.partyId,
    ...(from.name ? { senderName: from.name } : {}),
    receiver: to.partyId,
    ...(to.name ? { receiverName: to.name } : {}),
    amount,
    instrument: instrumentText(instrument),
    inputs: inputs.map((h) => h.cid).join(','),
  });

  const out = await runFlow(flow, ctx);
  const signedIntent = flow.intent as TransferIntent;
  const kind = out.actions[0]?.transferKind ?? signedIntent.transferKind ?? 'offer';
  return {
    kind,
    updateId: out.result.updateId,
    commandId,
    hash: out.hash,
    sender: party.partyId,
    ...(from.name ? { senderName: from.name } : {}),
    receiver: to.partyId,
    ...(to.name ? { receiverName: to.name } : {}),
    amount,
    instrument,
    ...(req.memo !== undefined ? { memo: req.memo } : {}),
    executeBefore: isoMicros(executeBefore),
    inputs: signedIntent.inputs ?? [],
    attempts: out.attempts,
    outcome: out.outcome,
    window: out.window,
  };
}

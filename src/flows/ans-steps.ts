/**
 * The party's own steps in the name service, each one Ledger API
 * prepare → pipeline → executeAndWait with the party alone acting:
 *
 * - `requestEntry`: `AnsRules_RequestEntry` on the AnsRules disclosed from
 *   Scan; creates the SubscriptionRequest and the AnsEntryContext.
 * - `payEntry`: `SubscriptionRequest_AcceptAndMakePayment` (first payment) or
 *   `SubscriptionIdleState_MakePayment` (renewal), the party its own wallet
 *   provider, AmuletRules and the open round disclosed: locks the fee in CC
 *   for the DSO to collect.
 * - `expirePayment`: `SubscriptionPayment_Expire` /
 *   `SubscriptionInitialPayment_Expire` once the lock has expired: the CC
 *   comes back.
 *
 * Every step runs under a command id the caller derives from what it is
 * about (the ledger deduplicates on it), and each consumes the contract it
 * exercises (the request, the idle state, the payment), so no step can be
 * paid twice. The intent pins the DSO, the name, the terms and the amounts.
 */
import { isoMicros } from '../hashing/render.js';
import {
  type AnsEntryRequestIntent,
  type AnsPaymentExpireIntent,
  type AnsPaymentIntent,
  IntentSchema,
} from '../intent/model.js';
import {
  ANS_TEMPLATE,
  type AnsTerms,
  loadPaymentContext,
  targetAmount,
  withAllowance,
} from './ans-ledger.js';
import { type FlowContext, partyOf } from './context.js';
import { listHoldings, selectInputs, toUnits } from './holdings.js';
import { type LedgerOutcome, ledgerFlow } from './ledger.js';
import { type FlowResult, runFlow } from './pipeline.js';
import { Refusal } from './refusal.js';
import { amuletInstrument } from './transfer.js';

const nowOf = (ctx: FlowContext) => (ctx.nowUs ?? (() => BigInt(Date.now()) * 1000n))();

function parsed<T>(intent: T): T {
  const r = IntentSchema.safeParse(intent);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new Refusal('bad_request', `${i?.path.join('.') || 'intent'}: ${i?.message ?? 'invalid'}`);
  }
  return r.data as T;
}

export interface RequestEntryInput {
  partyId: string;
  name: string;
  url: string;
  description: string;
  terms: AnsTerms;
  commandId: string;
}

export async function requestEntry(
  ctx: FlowContext,
  i: RequestEntryInput,
): Promise<FlowResult<LedgerOutcome>> {
  const party = await partyOf(ctx, i.partyId);
  const t = i.terms;
  const intent = parsed<AnsEntryRequestIntent>({
    kind: 'ans-entry-request',
    party: party.partyId,
    dso: t.dso,
    ansRulesCid: t.rulesCid,
    name: i.name,
    url: i.url,
    description: i.description,
    entryFee: t.entryFee,
    entryLifetimeUs: t.lifetimeUs.toString(),
    renewalDurationUs: t.renewalUs.toString(),
    descriptionPrefix: t.descriptionPrefix,
  });
  const flow = ledgerFlow(ctx, {
    name: 'name-request',
    party,
    intent,
    commandId: i.commandId,
    async request() {
      return {
        commands: [
          {
            ExerciseCommand: {
              templateId: ANS_TEMPLATE.ansRules,
              contractId: t.rulesCid,
              choice: 'AnsRules_RequestEntry',
              choiceArgument: { name: i.name, url: i.url, description: i.description, user: party.partyId },
            },
          },
        ],
        disclosedContracts: [t.disclosed],
        synchronizerId: t.synchronizerId,
      };
    },
  });
  flow.facts = (r) => ({ updateId: r.updateId, name: i.name });
  return runFlow(flow, ctx);
}

export interface PayEntryInput {
  partyId: string;
  name: string;
  dso: string;
  entryFee: string;
  /** The SubscriptionRequest (first payment) or SubscriptionIdleState (renewal). */
  kind: 'ans-entry-pay' | 'ans-renewal-pay';
  contractId: string;
  /** Renewals: the idle state's `nextPaymentDueAt` (µs). */
  dueAtUs?: bigint;
  /** How much above the collected amount the lock may hold for fees, in percent. */
  feeAllowancePercent: number;
  commandId: string;
}

export interface PayEntryResult {
  flow: FlowResult<LedgerOutcome>;
  /** CC the DSO collects. */
  targetAmount: string;
  /** The round's price it was computed at (USD per CC). */
  amuletPrice: string;
  round: number;
}

export async function payEntry(ctx: FlowContext, i: PayEntryInput): Promise<PayEntryResult> {
  const party = await partyOf(ctx, i.partyId);
  const instrument = await amuletInstrument(ctx);
  if (instrument.admin !== i.dso)
    throw new Refusal(
      'bad_request',
      `the validator's Canton Coin admin ${instrument.admin} is not Scan's DSO ${i.dso}`,
    );
  let priced: { target: string; price: string; round: number } | undefined;
  const intentFor = (target: string, cids?: string[]): AnsPaymentIntent =>
    parsed<AnsPaymentIntent>({
      kind: i.kind,
      party: party.partyId,
      dso: i.dso,
      contractId: i.contractId,
      name: i.name,
      targetAmount: target,
      maxAmount: withAllowance(target, i.feeAllowancePercent),
      ...(cids ? { inputs: cids } : {}),
      ...(i.dueAtUs !== undefined ? { dueAt: isoMicros(i.dueAtUs) } : {}),
    });
  const first = await loadPaymentContext(ctx, i.dso, nowOf(ctx));
  const target0 = targetAmount(i.entryFee, first.round.amuletPrice);
  const flow = ledgerFlow(ctx, {
    name: i.kind === 'ans-entry-pay' ? 'name-pay' : 'name-renew',
    party,
    // Replaced by each attempt's own (its inputs and price) before anything is verified.
    intent: intentFor(target0),
    commandId: i.commandId,
    async request(attempt) {
      const pc = attempt === 1 ? first : await loadPaymentContext(ctx, i.dso, nowOf(ctx));
      const target = targetAmount(i.entryFee, pc.round.amuletPrice);
      const max = withAllowance(target, i.feeAllowancePercent);
      const holdings = await listHoldings(ctx, party.partyId, { instrument });
      let inputs: string[];
      try {
        inputs = selectInputs(holdings, max, { instrument }).inputs.map((h) => h.cid);
      } catch (e) {
        if (e instanceof Refusal)
          throw new Refusal(
            'bad_request',
            `${party.partyId} cannot pay ${max} CC (${i.entryFee} USD at ${pc.round.amuletPrice} USD/CC, fees included) for ${i.name}: ${e.message}`,
          );
        throw e;
      }
      priced = { target, price: pc.round.amuletPrice, round: pc.round.number };
      flow.intent = intentFor(target, inputs);
      const context = {
        amuletRules: pc.amuletRules.contractId,
        context: {
          openMiningRound: pc.round.contractId,
          issuingMiningRounds: [],
          validatorRights: [],
          featuredAppRight: null,
        },
      };
      return {
        commands: [
          {
            ExerciseCommand: {
              templateId: i.kind === 'ans-entry-pay' ? ANS_TEMPLATE.request : ANS_TEMPLATE.idleState,
              contractId: i.contractId,
              choice:
                i.kind === 'ans-entry-pay'
                  ? 'SubscriptionRequest_AcceptAndMakePayment'
                  : 'SubscriptionIdleState_MakePayment',
              choiceArgument: {
                inputs: inputs.map((cid) => ({ tag: 'InputAmulet', value: cid })),
                context,
                walletProvider: party.partyId,
              },
            },
          },
        ],
        disclosedContracts: [pc.amuletRules, pc.round.disclosed],
        synchronizerId: pc.synchronizerId,
      };
    },
  });
  flow.facts = (r) => ({ updateId: r.updateId, name: i.name, targetAmount: priced?.target ?? target0 });
  const out = await runFlow(flow, ctx);
  const p = priced ?? { target: target0, price: first.round.amuletPrice, round: first.round.number };
  if (toUnits(p.target) <= 0n) throw new Refusal('bad_request', 'the payment computed to nothing');
  return { flow: out, targetAmount: p.target, amuletPrice: p.price, round: p.round };
}

export interface ExpirePaymentInput {
  partyId: string;
  name: string;
  dso: string;
  /** The SubscriptionPayment (renewal) or SubscriptionInitialPayment (first payment). */
  paymentCid: string;
  initial: boolean;
  commandId: string;
}

export async function expirePayment(
  ctx: FlowContext,
  i: ExpirePaymentInput,
): Promise<FlowResult<LedgerOutcome>> {
  const party = await partyOf(ctx, i.partyId);
  const intent = parsed<AnsPaymentExpireIntent>({
    kind: 'ans-payment-expire',
    party: party.partyId,
    dso: i.dso,
    contractId: i.paymentCid,
    name: i.name,
  });
  const flow = ledgerFlow(ctx, {
    name: 'name-reclaim',
    party,
    intent,
    commandId: i.commandId,
    async request() {
      const pc = await loadPaymentContext(ctx, i.dso, nowOf(ctx));
      return {
        commands: [
          {
            ExerciseCommand: {
              templateId: i.initial ? ANS_TEMPLATE.initialPayment : ANS_TEMPLATE.payment,
              contractId: i.paymentCid,
              choice: i.initial ? 'SubscriptionInitialPayment_Expire' : 'SubscriptionPayment_Expire',
              choiceArgument: {
                actor: party.partyId,
                transferContext: {
                  amuletRules: pc.amuletRules.contractId,
                  openMiningRound: pc.round.contractId,
                  featuredAppRight: null,
                },
              },
            },
          },
        ],
        disclosedContracts: [pc.amuletRules, pc.round.disclosed],
        synchronizerId: pc.synchronizerId,
      };
    },
  });
  flow.facts = (r) => ({ updateId: r.updateId, name: i.name });
  return runFlow(flow, ctx);
}

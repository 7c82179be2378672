/**
 * Auto-accept: answers the book's pending incoming transfer offers (pending
 * two-step deposits) by configured rules. `decide` is the pure rule match:
 * the first rule covering the offer gives its action, else `otherwise`.
 * The runner carries an accept or reject out through the one pipeline
 * (flows/offers.ts: decode, hash, intent, policy, sign), retrying a bounded
 * number of times with backoff, and records each decision once in
 * `offer_decisions` with its event (same transaction, under the automation
 * lease). An offer that ended meanwhile is not an error: it is recorded as
 * done with what was found.
 */
import type { FlowContext } from '../flows/context.js';
import { toUnits } from '../flows/holdings.js';
import { acceptOffer, listOffers, rejectOffer } from '../flows/offers.js';
import type { Queryable } from '../store/db.js';
import type { Store } from '../store/index.js';
import type { Deposit } from '../store/repos/deposits.js';
import { appendEvents } from '../store/repos/events.js';
import { holdLease, type Lease } from '../store/repos/leases.js';
import type { AutomationTask } from './automation.js';

export type OfferAction = 'accept' | 'reject';

export interface AutoAcceptRule {
  name: string;
  /** A party id of the book or `*`. */
  party: string;
  senders?: readonly string[];
  instruments?: readonly { admin: string; id: string }[];
  /** Default true: only deposits with an account. */
  requireAccount?: boolean;
  /** Decimal string. */
  maxAmount?: string;
  action: OfferAction;
}

export type Otherwise = 'wait' | 'reject';

export interface Decision {
  action: OfferAction | 'wait';
  /** The rule that matched; absent: `otherwise` decided. */
  rule?: string;
}

type Offered = Pick<Deposit, 'party' | 'sender' | 'amount' | 'instrument'> & { account?: string | undefined };

/** Whether `rule` covers the offer `d`. */
export function ruleCovers(rule: AutoAcceptRule, d: Offered): boolean {
  if (rule.party !== '*' && rule.party !== d.party) return false;
  if (rule.senders && !rule.senders.some((s) => s === '*' || s === d.sender)) return false;
  if (
    rule.instruments &&
    !rule.instruments.some((i) => i.admin === d.instrument.admin && i.id === d.instrument.id)
  )
    return false;
  if ((rule.requireAccount ?? true) && d.account === undefined) return false;
  if (rule.maxAmount !== undefined && toUnits(d.amount) > toUnits(rule.maxAmount)) return false;
  return true;
}

/** The first rule covering the offer decides; none: `otherwise`. */
export function decide(
  d: Offered,
  rules: readonly AutoAcceptRule[],
  otherwise: Otherwise = 'wait',
): Decision {
  const rule = rules.find((r) => ruleCovers(r, d));
  return rule ? { action: rule.action, rule: rule.name } : { action: otherwise };
}

export type DecisionState = 'done' | 'failed' | 'waiting';

export interface OfferDecision {
  instructionCid: string;
  depositId: string;
  party: string;
  action: OfferAction | 'wait';
  rule?: string;
  state: DecisionState;
  attempts: number;
  error?: string;
  createdAt: string;
  updatedAt: string;
}

interface Row {
  instruction_cid: string;
  deposit_id: string;
  party: string;
  action: OfferAction | 'wait';
  rule: string | null;
  state: DecisionState;
  attempts: number;
  error: string | null;
  created_at: string;
  updated_at: string;
}

const fromRow = (r: Row): OfferDecision => ({
  instructionCid: r.instruction_cid,
  depositId: r.deposit_id,
  party: r.party,
  action: r.action,
  ...(r.rule !== null ? { rule: r.rule } : {}),
  state: r.state,
  attempts: r.attempts,
  ...(r.error !== null ? { error: r.error } : {}),
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const COLUMNS =
  'instruction_cid, deposit_id, party, action, rule, state, attempts, error, created_at, updated_at';

/** The most recent decisions, newest first. */
export async function recentDecisions(q: Queryable, limit = 100): Promise<OfferDecision[]> {
  const r = await q.query<Row>(`SELECT ${COLUMNS} FROM offer_decisions ORDER BY updated_at DESC LIMIT $1`, [
    Math.min(Math.max(1, Math.trunc(limit)), 500),
  ]);
  return r.rows.map(fromRow);
}

async function decisionOf(q: Queryable, cid: string): Promise<OfferDecision | undefined> {
  const r = await q.query<Row>(`SELECT ${COLUMNS} FROM offer_decisions WHERE instruction_cid = $1`, [cid]);
  return r.rows[0] && fromRow(r.rows[0]);
}

const EVENT: Record<OfferAction | 'wait', string> = {
  accept: 'offer.accepted',
  reject: 'offer.rejected',
  wait: 'offer.waiting',
};

export interface AutoAcceptOptions {
  store: Store;
  flows: FlowContext;
  rules: readonly AutoAcceptRule[];
  otherwise?: Otherwise;
  /** Tries of one accept or reject (default 3). */
  maxAttempts?: number;
  /** First backoff (ms, default 500), doubled per try. */
  backoffMs?: number;
}

export interface AutoAccept extends AutomationTask {
  rules: readonly AutoAcceptRule[];
  otherwise: Otherwise;
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e)).slice(0, 2000);

export function createAutoAccept(opts: AutoAcceptOptions): AutoAccept {
  const { store, flows, rules } = opts;
  const otherwise = opts.otherwise ?? 'wait';
  const maxAttempts = opts.maxAttempts ?? 3;
  const backoffMs = opts.backoffMs ?? 500;

  /** Records the decision and its event in one transaction, as the lease holder. */
  async function record(
    lease: Lease,
    d: Deposit,
    decision: Decision,
    state: DecisionState,
    extra: {
      attempts?: number;
      error?: string;
      updateId?: string;
      commandId?: string;
      event?: string;
      /** The offer had ended before the answer: nothing was done. */
      gone?: boolean;
    },
  ): Promise<void> {
    const cid = d.instructionCid as string;
    await store.db.transaction(async (tx) => {
      await holdLease(tx, lease);
      await tx.query(
        `INSERT INTO offer_decisions (instruction_cid, deposit_id, party, action, rule, state, attempts, error)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (instruction_cid) DO UPDATE SET action = EXCLUDED.action, rule = EXCLUDED.rule,
           state = EXCLUDED.state, attempts = EXCLUDED.attempts, error = EXCLUDED.error, updated_at = now()`,
        [
          cid,
          d.id,
          d.party,
          decision.action,
          decision.rule ?? null,
          state,
          extra.attempts ?? 0,
          extra.error ?? null,
        ],
      );
      await appendEvents(tx, [
        {
          type: extra.event ?? EVENT[decision.action],
          subject: `deposit:${d.id}`,
          data: {
            instructionCid: cid,
            depositId: d.id,
            party: d.party,
            sender: d.sender,
            amount: d.amount,
            instrument: d.instrument,
            ...(d.account !== undefined ? { account: d.account } : {}),
            action: decision.action,
            ...(decision.rule !== undefined ? { rule: decision.rule } : {}),
            state,
            ...(extra.updateId !== undefined ? { updateId: extra.updateId } : {}),
            ...(extra.commandId !== undefined ? { commandId: extra.commandId } : {}),
            ...(extra.gone ? { gone: true } : {}),
            ...(extra.error !== undefined ? { error: extra.error } : {}),
          },
        },
      ]);
    });
  }

  /** Whether the offer is still open on the ledger (for the receiver). */
  async function stillOpen(d: Deposit): Promise<boolean> {
    const offers = await listOffers(flows, d.party);
    return offers.some((o) => o.instructionCid === d.instructionCid);
  }

  async function carryOut(lease: Lease, d: Deposit, decision: Decision & { action: OfferAction }) {
    const cid = d.instructionCid as string;
    const act = decision.action === 'accept' ? acceptOffer : rejectOffer;
    let last = '';
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      try {
        const r = await act(flows, d.party, cid);
        await record(lease, d, decision, 'done', {
          attempts: attempt,
          updateId: r.updateId,
          commandId: r.commandId,
        });
        return;
      } catch (e) {
        last = errorText(e);
        // Gone already (accepted elsewhere, withdrawn, expired): nothing left to answer.
        const open = await stillOpen(d).catch(() => true);
        if (!open) {
          await record(lease, d, decision, 'done', {
            attempts: attempt,
            gone: true,
            error: `the offer was no longer open when answered: ${last}`,
          });
          return;
        }
        if (attempt < maxAttempts) await new Promise((r) => setTimeout(r, backoffMs * 2 ** (attempt - 1)));
      }
    }
    await record(lease, d, decision, 'failed', {
      attempts: maxAttempts,
      error: `${decision.action} failed ${maxAttempts} times, the offer stays pending for an operator: ${last}`,
      event: 'offer.failed',
    });
  }

  return {
    name: 'auto-accept',
    rules,
    otherwise,
    async run(lease) {
      for (const d of await store.deposits.pending()) {
        if (!d.instructionCid) continue;
        const prior = await decisionOf(store.db, d.instructionCid);
        if (prior && prior.state !== 'waiting') continue;
        const decision = decide(d, rules, otherwise);
        if (decision.action === 'wait') {
          // Recorded (and announced) once; a later rule change may still decide it.
          if (!prior) await record(lease, d, decision, 'waiting', {});
          continue;
        }
        await carryOut(lease, d, { ...decision, action: decision.action });
      }
    },
  };
}

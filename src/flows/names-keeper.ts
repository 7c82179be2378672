/**
 * The name keeper: registers names for the book's parties and keeps them
 * alive. Each pass (one instance at a time, under the automation lease)
 * reads each party's name-service contracts once, then for every open
 * registration takes the step the lifecycle table (names-lifecycle.ts) names
 * and records the result with its events. Registration runs the same steps
 * at once for the caller (request, then the first payment).
 *
 * A step that cannot sign now waits without failing: a key across the air
 * gap (the export is open; a new one is made when its window closes
 * unsigned), a payment waiting for approvals. Any other failure is recorded
 * on the row and tried again after `retryMs`; the entry's expiry is the
 * deadline, and `name.expiring` says when it comes close. A payment's
 * command id is written on the row before it is submitted or exported, so
 * a payment made without the keeper recording it (a killed run, an import
 * of an offline signature) is counted once, from the journal.
 *
 * One file on purpose: `createNameKeeper` is one closure over the keeper's
 * state (the pass in progress, each registration's retry time) whose steps call
 * each other; the lifecycle table, registration and the name-service steps are
 * already beside it (names-lifecycle.ts, names-register.ts, ans-steps.ts, ans-
 * ledger.ts).
 */
import { decimalEquals } from '../intent/decimal.js';
import { AwaitingApproval } from '../policy/hook.js';
import type { Queryable } from '../store/db.js';
import type { Store } from '../store/index.js';
import { holdLease, type Lease } from '../store/repos/leases.js';
import type { NameEvent, NamePatch, NameRecord } from '../store/repos/names.js';
import { AwaitingSignature } from './air-gap.js';
import {
  type AnsContract,
  type AnsSnapshot,
  ansSnapshot,
  fieldText,
  fieldTime,
  loadAnsTerms,
  lockOf,
  referenceOf,
  subscriptionDataOf,
  subscriptionDescription,
} from './ans-ledger.js';
import { expirePayment, payEntry, requestEntry } from './ans-steps.js';
import type { FlowContext } from './context.js';
import { MAX_REPAYMENTS, type NameFacts, type NameHorizons, nextStep } from './names-lifecycle.js';
import { Refusal } from './refusal.js';

export interface NameKeeperOptions {
  store: Store;
  flows: FlowContext;
  /** How far above the collected amount a lock may go for fees (percent). */
  feeAllowancePercent: number;
  /** A failed step is tried again after this long (ms). */
  retryMs: number;
  /** `name.expiring` when less than this is left before the entry expires (ms). */
  expiringMs: number;
  /** How long a signature across the air gap takes (ms): warned about when a renewal window is shorter. */
  airGapTurnaroundMs: number;
  /** A pass over all registrations at most this often (ms); `advance` and `renewNow` are not limited. */
  pollMs?: number;
  /** Told of each payment made, failed renewal and warning (metrics). */
  observe?: (what: 'payment' | 'renewal_failed' | 'warning', n: NameRecord) => void;
}

/** A registration as the REST API shows it (also every name event's data). */
export interface NameView {
  id: string;
  partyId: string;
  name: string;
  url: string;
  description: string;
  state: NameRecord['state'];
  autoRenew: boolean;
  entryFeeUsd: string;
  lifetimeDays: number;
  renewalWindowDays: number;
  expiresAt?: string;
  nextPaymentDueAt?: string;
  renewalWindowOpensAt?: string;
  renewals: number;
  paidCc: string;
  lastPaymentCc?: string;
  lastPrice?: string;
  entryCid?: string;
  waiting?: { for: 'signature'; exportId: string } | { for: 'approval'; approvalId: string };
  error?: string;
  createdAt: string;
  updatedAt: string;
}

const DAY_US = 86_400_000_000n;
const isoUs = (us: bigint) => new Date(Number(us / 1000n)).toISOString();
const days = (us: bigint) => Math.round((Number(us) / Number(DAY_US)) * 100) / 100;

export function nameView(n: NameRecord): NameView {
  return {
    id: n.id,
    partyId: n.party,
    name: n.name,
    url: n.url,
    description: n.description,
    state: n.state,
    autoRenew: n.autoRenew,
    entryFeeUsd: n.entryFeeUsd,
    lifetimeDays: days(n.lifetimeUs),
    renewalWindowDays: days(n.renewalUs),
    ...(n.expiresUs !== undefined ? { expiresAt: isoUs(n.expiresUs) } : {}),
    ...(n.nextDueUs !== undefined
      ? { nextPaymentDueAt: isoUs(n.nextDueUs), renewalWindowOpensAt: isoUs(n.nextDueUs - n.renewalUs) }
      : {}),
    renewals: n.renewals,
    paidCc: n.paidCc,
    ...(n.lastPaymentCc !== undefined ? { lastPaymentCc: n.lastPaymentCc } : {}),
    ...(n.lastPrice !== undefined ? { lastPrice: n.lastPrice } : {}),
    ...(n.entryCid !== undefined ? { entryCid: n.entryCid } : {}),
    ...(n.exportId !== undefined
      ? { waiting: { for: 'signature' as const, exportId: n.exportId } }
      : n.approvalId !== undefined
        ? { waiting: { for: 'approval' as const, approvalId: n.approvalId } }
        : {}),
    ...(n.error !== undefined ? { error: n.error } : {}),
    createdAt: n.createdAt,
    updatedAt: n.updatedAt,
  };
}

const REJECTED =
  'the DSO did not make the entry (the name invalid or taken meanwhile, or the payment’s round closed before it was collected) and returned the payment to the party, minus the fees of locking it';

/** The keeper's name among the automation's tasks (in its log lines). */
const KEEPER_TASK = 'name-keeper';

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e)).slice(0, 2000);

export interface NameKeeper {
  name: string;
  run(lease: Lease): Promise<void>;
  /** Takes steps for one registration until it waits (no lease: the caller's request). */
  advance(id: string, opts?: { actor?: string; flows?: FlowContext }): Promise<NameRecord | undefined>;
  /** Pays the next renewal now if its window is open (auto-renew or not). */
  renewNow(id: string, actor: string, ctx?: FlowContext): Promise<NameRecord | undefined>;
  /** Gives up a registration nothing was paid for yet (`failed`); refused once a payment is locked. */
  cancel(id: string, actor: string): Promise<NameRecord | undefined>;
}

export function createNameKeeper(opts: NameKeeperOptions): NameKeeper {
  const { store, flows } = opts;
  const names = store.names;
  const horizons: NameHorizons = { expiringUs: BigInt(opts.expiringMs) * 1000n };
  let lastPass = 0;
  const now = () => (flows.nowUs ?? (() => BigInt(Date.now()) * 1000n))();

  /** What the ledger shows about `n`, from the party's snapshot. */
  async function factsOf(n: NameRecord, snap: AnsSnapshot): Promise<NameFacts> {
    const nowUs = now();
    const ref = n.requestCid;
    const lockUs = (cid: string | undefined) => {
      const l = cid === undefined ? undefined : snap.locks.find((x) => x.contractId === cid);
      return l ? lockOf(l).expiresAt : undefined;
    };
    const mine = (xs: AnsContract[]) => (ref === undefined ? [] : xs.filter((c) => referenceOf(c) === ref));
    const init = mine(snap.initialPayments)[0];
    const idle = mine(snap.idleStates)[0];
    const pay = mine(snap.payments)[0];
    const entry = snap.entries.find(
      (e) => fieldText(e, 'name') === n.name && fieldText(e, 'user') === n.party,
    );
    let exportOpen = false;
    if (n.exportId !== undefined) {
      const x = await store.airGap.get(n.exportId);
      exportOpen =
        x !== undefined &&
        (x.status === 'open' || x.status === 'imported') &&
        Date.parse(x.windowLatest) * 1000 > Number(nowUs);
    }
    const want = subscriptionDescription(n.descriptionPrefix, n.name);
    // Only a request whose entry context carries this registration's URL and description.
    const own =
      ref === undefined
        ? snap.requests.find((c) => {
            const d = subscriptionDataOf(c);
            const context = snap.contexts.find((x) => referenceOf(x) === c.contractId);
            return (
              d.sender === n.party &&
              d.dso === n.dso &&
              d.description === want &&
              context !== undefined &&
              fieldText(context, 'url') === n.url &&
              fieldText(context, 'description') === n.description
            );
          })
        : undefined;
    return {
      nowUs,
      request: ref !== undefined && snap.requests.some((c) => c.contractId === ref),
      ...(own ? { ownRequest: own.contractId } : {}),
      ...(init
        ? {
            initialPayment: {
              cid: init.contractId,
              ...(fieldText(init, 'targetAmount') ? { targetAmount: fieldText(init, 'targetAmount')! } : {}),
              ...(lockUs(fieldText(init, 'lockedAmulet')) !== undefined
                ? { lockExpiresUs: lockUs(fieldText(init, 'lockedAmulet'))! }
                : {}),
            },
          }
        : {}),
      ...(idle && fieldTime(idle, 'nextPaymentDueAt') !== undefined
        ? { idle: { cid: idle.contractId, dueUs: fieldTime(idle, 'nextPaymentDueAt')! } }
        : {}),
      ...(pay
        ? {
            payment: {
              cid: pay.contractId,
              ...(fieldText(pay, 'targetAmount') ? { targetAmount: fieldText(pay, 'targetAmount')! } : {}),
              dueUs: fieldTime(pay, 'thisPaymentDueAt') ?? 0n,
              ...(lockUs(fieldText(pay, 'lockedAmulet')) !== undefined
                ? { lockExpiresUs: lockUs(fieldText(pay, 'lockedAmulet'))! }
                : {}),
            },
          }
        : {}),
      ...(entry && fieldTime(entry, 'expiresAt') !== undefined
        ? { entry: { cid: entry.contractId, expiresUs: fieldTime(entry, 'expiresAt')! } }
        : {}),
      exportOpen,
      backingOff: n.retryAtUs !== undefined && nowUs < n.retryAtUs,
    };
  }

  /**
   * What the ledger shows, written onto the row (cids, expiry, due date), and
   * a payment made but not yet counted: one the row's `pendingCommand` names
   * that committed without this keeper recording it (a run killed after
   * paying, or a payment signed offline and submitted by its import). The
   * journal says what it paid: its committed record, or — when the ledger
   * shows the payment made — its last submitted one. Counted in the same
   * write that clears `pendingCommand`, so once.
   */
  async function observed(n: NameRecord, f: NameFacts): Promise<NamePatch> {
    const p: NamePatch = {};
    if (n.requestCid === undefined && f.ownRequest !== undefined) p.requestCid = f.ownRequest;
    if (f.entry) {
      p.entryCid = f.entry.cid;
      p.expiresUs = f.entry.expiresUs;
    }
    if (f.idle) p.nextDueUs = f.idle.dueUs;
    if (f.payment) p.paymentCid = f.payment.cid;
    else if (f.initialPayment) p.paymentCid = f.initialPayment.cid;
    // A new due date: the warnings and repayments of the last one are spent.
    if (f.idle && n.nextDueUs !== undefined && f.idle.dueUs !== n.nextDueUs) {
      p.notified = '';
      p.repaid = 0;
    }
    if (n.exportId !== undefined && !f.exportOpen) p.exportId = null;
    if (n.pendingCommand !== undefined) {
      const records = (await store.recorder.records(`command:${n.pendingCommand}`)).reverse();
      const committed = records.find((x) => x.step === 'committed');
      const renewal = n.pendingCommand.startsWith('cs-ans-renew-');
      const seen = renewal
        ? f.payment !== undefined ||
          (f.entry !== undefined && n.expiresUs !== undefined && f.entry.expiresUs > n.expiresUs)
        : f.initialPayment !== undefined || f.entry !== undefined;
      const r = committed ?? (seen ? records.find((x) => x.step === 'submitted') : undefined);
      const intent = r?.intent as { kind?: string; targetAmount?: string } | undefined;
      if ((intent?.kind === 'ans-entry-pay' || intent?.kind === 'ans-renewal-pay') && intent.targetAmount) {
        p.paid = intent.targetAmount;
        p.pendingCommand = null;
      }
    }
    // The payment counted and locked: collected (the entry made or extended), or gone without that
    // (refused, taken back by whoever): then what it cost is counted back.
    const outstanding = p.paid ?? n.outstandingCc;
    if (outstanding !== undefined) {
      const first = n.state === 'requesting' || n.state === 'requested' || n.state === 'paid';
      const collected = first
        ? f.entry !== undefined
        : f.entry !== undefined && n.expiresUs !== undefined && f.entry.expiresUs > n.expiresUs;
      const locked = first ? f.initialPayment !== undefined : f.payment !== undefined;
      if (collected) p.settled = true;
      else if (!locked) p.refunded = outstanding;
    }
    return p;
  }

  const events = (type: string | undefined, extra: Record<string, unknown> = {}) =>
    type ? (n: NameRecord): NameEvent[] => [{ type, data: { ...nameView(n), ...extra } }] : undefined;

  async function stepOnce(
    n: NameRecord,
    snap: AnsSnapshot,
    guard: ((tx: Queryable) => Promise<void>) | undefined,
    actor: string,
    ctx: FlowContext,
  ): Promise<{ row: NameRecord; acted: boolean }> {
    const f = await factsOf(n, snap);
    const line = nextStep(n, f, horizons);
    if (!line) return { row: n, acted: false };
    const base = await observed(n, f);
    const move = (
      to: typeof line.next,
      patch: NamePatch,
      type = line.event,
      extra: Record<string, unknown> = {},
    ) =>
      names.move(
        n.id,
        [n.state],
        to,
        { ...base, ...patch },
        {
          actor,
          ...(guard ? { guard } : {}),
          ...(events(type, extra) ? { events: events(type, extra)! } : {}),
        },
      );
    switch (line.action) {
      case 'none': {
        const changed = Object.keys(base).length > 0;
        return { row: (changed ? await move(n.state, {}, undefined) : n) ?? n, acted: false };
      }
      case 'record': {
        const patch: NamePatch = { error: null, retryAtUs: null, approvalId: null };
        if (line.event === 'name.renewed') {
          patch.renewals = n.renewals + 1;
          patch.paymentCid = null;
        }
        if (line.next === 'expired' || line.next === 'lapsed') patch.entryCid = null;
        const extra = line.next === 'rejected' ? { reason: REJECTED } : {};
        // What ended it stays on the registration, for whoever lists it later.
        if (line.next === 'rejected') patch.error = REJECTED;
        const row = await names.move(
          n.id,
          [n.state],
          line.next,
          { ...base, ...patch },
          {
            actor,
            match: { renewals: n.renewals },
            ...(guard ? { guard } : {}),
            ...(events(line.event, extra) ? { events: events(line.event, extra)! } : {}),
          },
        );
        return { row: row ?? n, acted: row !== undefined && line.next !== n.state };
      }
      case 'warn': {
        const what = line.event === 'name.renewal_due' ? 'renewal_due' : 'expiring';
        const warnings: string[] = [];
        const left = f.entry ? f.entry.expiresUs - f.nowUs : undefined;
        const cold = await isCold(n.party);
        if (cold && left !== undefined && left < BigInt(opts.airGapTurnaroundMs) * 1000n)
          warnings.push(
            `the party's key is across the air gap and ${days(left)} days are left before the entry expires, less than the configured turnaround of ${days(BigInt(opts.airGapTurnaroundMs) * 1000n)} days: sign the exported renewal now`,
          );
        if (!n.autoRenew && what === 'renewal_due')
          warnings.push('auto-renew is off: renew it yourself or the entry expires');
        const notifiedNow = [...n.notified.split(',').filter(Boolean), what].join(',');
        // Only if no one announced it meanwhile (another pass, a request handler).
        const row = await names.move(
          n.id,
          [n.state],
          n.state,
          { ...base, notified: notifiedNow },
          {
            actor,
            match: { notified: n.notified },
            ...(guard ? { guard } : {}),
            events: events(line.event, warnings.length ? { warnings } : {})!,
          },
        );
        if (row) opts.observe?.('warning', row);
        return { row: row ?? n, acted: true };
      }
      default:
        return act(n, f, line.action, line.next, base, guard, actor, ctx);
    }
  }

  async function isCold(party: string): Promise<boolean> {
    const p = await flows.parties.get(party);
    if (!p) return false;
    try {
      return (await flows.signer.describe(p.keyLabel)).backend === 'offline';
    } catch {
      return false;
    }
  }

  async function act(
    n: NameRecord,
    f: NameFacts,
    action: 'request' | 'pay-initial' | 'pay-renewal' | 'reclaim',
    next: NameRecord['state'],
    base: NamePatch,
    guard: ((tx: Queryable) => Promise<void>) | undefined,
    actor: string,
    ctx: FlowContext,
  ): Promise<{ row: NameRecord; acted: boolean }> {
    // After a payment's marking move, the step's news (`base`) is written: not again.
    let news: NamePatch = base;
    let marking: string | undefined;
    const keep = (patch: NamePatch) =>
      names.move(n.id, [n.state], n.state, { ...news, ...patch }, { actor, ...(guard ? { guard } : {}) });
    try {
      if (action === 'request') {
        await requestEntry(ctx, {
          partyId: n.party,
          name: n.name,
          url: n.url,
          description: n.description,
          terms: await termsOf(ctx, n),
          commandId: `cs-ans-req-${n.id}`,
        });
        const snap = await ansSnapshot(ctx, n.party);
        const want = subscriptionDescription(n.descriptionPrefix, n.name);
        const req = snap.requests.find((c) => {
          const d = subscriptionDataOf(c);
          return d.sender === n.party && d.dso === n.dso && d.description === want;
        });
        if (!req)
          throw new Error(
            'the request committed but its SubscriptionRequest is not among the party’s contracts',
          );
        const row = await names.move(
          n.id,
          ['requesting'],
          'requested',
          { ...base, requestCid: req.contractId, error: null, retryAtUs: null },
          { actor, ...(guard ? { guard } : {}) },
        );
        return { row: row ?? n, acted: true };
      }
      if (action === 'pay-initial' || action === 'pay-renewal') {
        const renewal = action === 'pay-renewal';
        const cid = renewal ? f.idle!.cid : n.requestCid!;
        // One command per idle state: the payment consumes it, and after a payment is taken back a new
        // one appears (same due date), whose payment must not be deduplicated against the first.
        const commandId = renewal ? `cs-ans-renew-${n.id}-${cid.slice(2, 34)}` : `cs-ans-pay-${n.id}`;
        // Written before anything is submitted: a run that dies after paying leaves it for the next
        // one to count (see `observed`). The row's other news goes with it, once.
        const marked = await names.move(
          n.id,
          [n.state],
          n.state,
          { ...base, pendingCommand: commandId },
          {
            actor,
            ...(guard ? { guard } : {}),
          },
        );
        if (!marked) return { row: n, acted: false };
        news = {};
        marking = commandId;
        const r = await payEntry(ctx, {
          partyId: n.party,
          name: n.name,
          dso: n.dso,
          entryFee: n.entryFeeUsd,
          kind: renewal ? 'ans-renewal-pay' : 'ans-entry-pay',
          contractId: cid,
          ...(renewal ? { dueAtUs: f.idle!.dueUs } : {}),
          feeAllowancePercent: opts.feeAllowancePercent,
          commandId,
        });
        const row = await names.move(
          n.id,
          [n.state],
          renewal ? 'renewing' : 'paid',
          {
            paid: r.targetAmount,
            pendingCommand: null,
            lastPrice: r.amuletPrice,
            error: null,
            retryAtUs: null,
            exportId: null,
            approvalId: null,
          },
          {
            actor,
            ...(guard ? { guard } : {}),
            details: { updateId: r.flow.result.updateId, targetAmount: r.targetAmount, round: r.round },
          },
        );
        if (row) opts.observe?.('payment', row);
        return { row: row ?? n, acted: true };
      }
      // reclaim
      const initial = f.initialPayment !== undefined && n.state === 'paid';
      const paymentCid = initial ? f.initialPayment!.cid : f.payment!.cid;
      const refunded =
        n.outstandingCc ?? (initial ? f.initialPayment!.targetAmount : f.payment!.targetAmount);
      const repaid = next === 'active' ? n.repaid + 1 : n.repaid;
      const r = await expirePayment(ctx, {
        partyId: n.party,
        name: n.name,
        dso: n.dso,
        paymentCid,
        initial,
        commandId: `cs-ans-reclaim-${n.id}-${paymentCid.slice(2, 18)}`,
      });
      const row = await names.move(
        n.id,
        [n.state],
        next,
        {
          ...base,
          paymentCid: null,
          retryAtUs: null,
          repaid,
          error:
            repaid > MAX_REPAYMENTS
              ? `the DSO left ${repaid} payments for this due date uncollected: not paying again (check the network's SV automation and mining rounds; renew by hand once it collects again)`
              : null,
          ...(refunded ? { refunded } : {}),
        },
        {
          actor,
          ...(guard ? { guard } : {}),
          details: { updateId: r.result.updateId, reclaimed: paymentCid },
          events: (x) => [
            {
              type: 'name.payment_reclaimed',
              data: {
                ...nameView(x),
                reason:
                  'the DSO did not collect the payment before its lock expired; the locked CC is back with the party',
              },
            },
            ...(next === 'rejected' ? [{ type: 'name.rejected', data: { ...nameView(x) } }] : []),
          ],
        },
      );
      return { row: row ?? n, acted: true };
    } catch (e) {
      if (e instanceof AwaitingSignature) {
        const row = await keep({ exportId: e.exportId, error: null });
        return { row: row ?? n, acted: false };
      }
      if (e instanceof AwaitingApproval) {
        const row = await keep({ approvalId: e.requestId, error: null });
        return { row: row ?? n, acted: false };
      }
      const retryAtUs = now() + BigInt(opts.retryMs) * 1000n;
      // The request itself refused before anything was paid: nothing to keep alive.
      if (action === 'request' && e instanceof Refusal) {
        const row = await names.move(
          n.id,
          ['requesting'],
          'failed',
          { error: errorText(e) },
          {
            actor,
            ...(guard ? { guard } : {}),
            events: events('name.failed', { reason: errorText(e) })!,
          },
        );
        return { row: row ?? n, acted: false };
      }
      // A payment that never reached the ledger (refused, no funds) leaves nothing to count.
      const submitted =
        marking !== undefined &&
        (await store.recorder.records(`command:${marking}`)).some(
          (x) => x.step === 'submitted' || x.step === 'committed',
        );
      const row = await keep({
        error: errorText(e),
        retryAtUs,
        ...(marking !== undefined && !submitted ? { pendingCommand: null } : {}),
      });
      if (row && action === 'pay-renewal') opts.observe?.('renewal_failed', row);
      return { row: row ?? n, acted: false };
    }
  }

  async function termsOf(ctx: FlowContext, n: NameRecord) {
    const t = await loadAnsTerms(ctx);
    if (t.dso !== n.dso || !decimalEquals(t.entryFee, n.entryFeeUsd))
      throw new Refusal(
        'bad_request',
        `the name service's terms changed since ${n.name} was asked for (DSO or fee): register it again`,
      );
    return t;
  }

  /** Steps for `n` until it waits; at most a few, so a pass never loops. */
  async function drive(
    n0: NameRecord,
    guard: ((tx: Queryable) => Promise<void>) | undefined,
    actor: string,
    ctx: FlowContext = flows,
  ) {
    let n = n0;
    for (let i = 0; i < 6; i++) {
      const snap = await ansSnapshot(flows, n.party);
      const r = await stepOnce(n, snap, guard, actor, ctx);
      n = r.row;
      if (!r.acted) break;
    }
    return n;
  }

  return {
    name: KEEPER_TASK,
    async run(lease) {
      const t = Date.now();
      if (opts.pollMs !== undefined && t - lastPass < opts.pollMs) return;
      lastPass = t;
      const guard = (tx: Queryable) => holdLease(tx, lease);
      const problems: string[] = [];
      let after: NameRecord | undefined;
      for (;;) {
        const page = await names.open(after ? { after } : {});
        for (const n of page)
          await drive(n, guard, 'name-keeper').catch((e: unknown) =>
            problems.push(`${n.name}: ${errorText(e)}`),
          );
        after = page.at(-1);
        if (!after) break;
      }
      if (problems.length > 0) throw new Error(problems.join('; '));
    },
    async advance(id, o = {}) {
      const n = await names.get(id);
      return n && drive(n, undefined, o.actor ?? 'name-keeper', o.flows ?? flows);
    },
    async cancel(id, actor) {
      const n = await names.get(id);
      if (!n) return undefined;
      if (n.state !== 'requesting' && n.state !== 'requested')
        throw new Refusal(
          'bad_request',
          `${n.name} is ${n.state}: only a registration nothing was paid for yet (requesting, requested) can be cancelled`,
        );
      const inFlight =
        n.exportId !== undefined
          ? `its payment waits for the offline signature of export ${n.exportId} (sign it, or let its window close)`
          : n.approvalId !== undefined
            ? `its payment waits for approval request ${n.approvalId} (reject it, or let it expire)`
            : n.pendingCommand !== undefined
              ? `a payment (command ${n.pendingCommand}) was submitted and its outcome is not recorded yet`
              : undefined;
      if (inFlight) throw new Refusal('bad_request', `${n.name} cannot be cancelled now: ${inFlight}`);
      const f = await factsOf(n, await ansSnapshot(flows, n.party));
      if (f.initialPayment || f.entry)
        throw new Refusal(
          'bad_request',
          `${n.name} is already paid for on the ledger: it can no longer be cancelled`,
        );
      const reason = `cancelled by ${actor} before anything was paid`;
      // Only while nothing is in flight (a keeper pass may be about to pay); the request left on
      // the ledger may be taken up by a later registration of the same name, URL and description.
      const row = await names.move(
        n.id,
        [n.state],
        'failed',
        { error: reason, retryAtUs: null, requestCid: null },
        { actor, match: { quiet: true }, events: events('name.failed', { reason })! },
      );
      if (!row)
        throw new Refusal(
          'bad_request',
          `${n.name} changed meanwhile (a payment may be under way): look at it again`,
        );
      return row;
    },
    async renewNow(id, actor, ctx = flows) {
      const n = await names.get(id);
      if (!n) return undefined;
      if (n.state !== 'active')
        throw new Refusal('bad_request', `${n.name} is ${n.state}: only an active entry is renewed`);
      const snap = await ansSnapshot(flows, n.party);
      const f = await factsOf(n, snap);
      if (!f.idle)
        throw new Refusal('bad_request', `${n.name} has no subscription waiting for a payment on the ledger`);
      if (f.nowUs >= f.idle.dueUs)
        throw new Refusal(
          'bad_request',
          `${n.name} was due at ${isoUs(f.idle.dueUs)}: a payment now could not be collected before the entry expires; register the name again once it has expired`,
        );
      if (f.nowUs < f.idle.dueUs - n.renewalUs)
        throw new Refusal(
          'bad_request',
          `the renewal window of ${n.name} opens at ${isoUs(f.idle.dueUs - n.renewalUs)} (${days(n.renewalUs)} days before the due date ${isoUs(f.idle.dueUs)}); the name service refuses an earlier payment`,
        );
      const r = await act(n, f, 'pay-renewal', 'renewing', await observed(n, f), undefined, actor, ctx);
      if (r.row.error !== undefined && r.row.retryAtUs !== undefined)
        throw new Refusal('bad_request', `the renewal of ${n.name} was not paid: ${r.row.error}`);
      return r.row;
    },
  };
}

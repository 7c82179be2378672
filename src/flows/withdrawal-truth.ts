/**
 * What the ledger says about a withdrawal that may have been submitted, and
 * until when what was sent for it may still commit: the completions of its
 * command id after the recorded ledger end (read to the stream's end), the
 * record of every submission sent for it, each with its commit deadline.
 * Also the input holdings a resubmission must spend again (`pinnedInputs`).
 *
 * "Definitely not committed" needs every submission ever sent for the
 * withdrawal past its transaction's commit deadline (the bounds its
 * signature covers, plus a margin for clock skew) — a rejection the
 * participant reports is not proof — with a complete read of the
 * completions showing no success — or every transaction those submissions
 * may have sent spending a holding that a transaction of another command
 * consumed (`spentElsewhere`): a holding is consumed once, so none of them
 * committed, nor can one commit any more. Another flow of the same party (a
 * withdrawal run by another instance, or after this one's run ended with its
 * outcome unknown; a sweep; a merge) may well select those holdings while
 * they are still active; without this the withdrawal would wait for its
 * commit deadline (the transfer's executeBefore: an hour by default).
 */
import { decodePreparedTransaction } from '../hashing/decode.js';
import { base64ToBytes } from '../hashing/input.js';
import { recogniseActions } from '../intent/recognise.js';
import { descendants } from '../intent/tree.js';
import type { Store } from '../store/index.js';
import type { PreparedRecord, SubmissionRecord } from '../store/repos/artifacts.js';
import type { Withdrawal } from '../store/repos/withdrawals.js';
import type { FlowContext } from './context.js';
import { type Holding, listHoldings } from './holdings.js';
import { findConsumer, scanCompletions } from './ledger.js';
import { Refusal } from './refusal.js';
import { LEDGER_TIME_TOLERANCE_US, PREPARATION_TIME_TOLERANCE_US } from './window.js';
import type { Truth } from './withdrawal-lifecycle.js';

export type { Truth } from './withdrawal-lifecycle.js';

/** What reading the truth needs: the flows' context (the ledger) and the store. */
export interface TruthEnv {
  ctx: FlowContext;
  store: Store;
}

/**
 * How long after a submission's commit deadline (a record time, on the
 * synchronizer's clock) this host still counts it as possibly committed:
 * for clock skew between the two, the ledger-time tolerance twice over.
 */
export const SETTLE_MARGIN_MS = Number((2n * LEDGER_TIME_TOLERANCE_US) / 1000n);

/** Until when a submission may still commit (ms since the epoch). */
export function openUntil(s: SubmissionRecord): number {
  // Rows of older builds have no deadline (nor would an unreadable one count as passed): the
  // preparation-time tolerance from when it was sent.
  const recorded = s.commitDeadline !== undefined ? Date.parse(s.commitDeadline) : Number.NaN;
  const closes = Number.isFinite(recorded)
    ? recorded
    : Date.parse(s.createdAt) + Number(PREPARATION_TIME_TOLERANCE_US / 1000n);
  return closes + SETTLE_MARGIN_MS;
}

/**
 * Submissions that may still commit: those before their commit deadline. A
 * rejection the participant reports does not close one — the participant is
 * not trusted, and its deduplication is its own — only the deadline the
 * synchronizer enforces does. (A reported rejection still lets the worker try
 * again at once, with the same input holdings: see `pinnedInputs`.)
 */
export function openSubmissions(subs: readonly SubmissionRecord[], now: number): SubmissionRecord[] {
  return subs.filter((s) => openUntil(s) > now);
}

/** No submission of the withdrawal can still commit, going by their records (each past its commit deadline). */
export async function noneOpen(store: Store, commandId: string): Promise<boolean> {
  const subs = await store.artifacts.submissionsFor(commandId);
  return openSubmissions(subs, Date.now()).length === 0;
}

/**
 * The truth about a withdrawal that may have been submitted: the completions
 * of its command id after the recorded ledger end, read to the stream's end,
 * and the record of every submission sent for it. Committed when a success
 * completion is found; not committed only when the read was complete and no
 * submission can still commit (each past its commit deadline).
 */
export async function ledgerTruth(env: TruthEnv, w: Withdrawal): Promise<Truth> {
  const from = await env.store.withdrawals.lookupFrom(w.id);
  if (from === undefined) return { status: 'unknown' };
  const subs = await env.store.artifacts.submissionsFor(w.commandId);
  const scan = await scanCompletions(env.ctx, {
    party: w.party,
    commandId: w.commandId,
    beginExclusive: from,
  });
  if (!scan.committed) {
    const open = openSubmissions(subs, Date.now());
    if (scan.complete && open.length === 0) return { status: 'not-committed' };
    // A holding every open submission spends is gone: whose transaction consumed it settles it.
    const spent =
      open.length > 0 ? await spentElsewhere(env, w, subs, open).catch(() => undefined) : undefined;
    if (spent) return spent;
    return open.length > 0
      ? { status: 'unknown', until: Math.max(...open.map(openUntil)) }
      : { status: 'unknown' };
  }
  const { updateId, completionOffset, submissionId } = scan.committed;
  // The submission record of ours that committed, when the run that sent it stopped before
  // writing its outcome: written with the move to committed.
  const ours =
    submissionId !== undefined &&
    subs.some((s) => s.submissionId === submissionId && s.outcome !== 'committed');
  return {
    status: 'committed',
    updateId,
    ...(ours ? { outcome: { submissionId, completionOffset, updateId } } : {}),
  };
}

/** Why a `submitted` withdrawal waits instead of ending (an earlier submission may still commit). */
export function mayStillCommit(truth: Truth | undefined): string {
  const until = truth?.status === 'unknown' && truth.until !== undefined ? truth.until : undefined;
  return until !== undefined
    ? `a submission may still commit until ${new Date(until).toISOString()}: the withdrawal stays submitted until its outcome is known`
    : 'the outcome of a submission is not known yet: the withdrawal stays submitted until it is';
}

/**
 * The input holdings of the withdrawal's last prepared transaction: while a
 * transaction sent for it may still commit, every new preparation spends
 * these same holdings, so that any two conflict on the synchronizer and at
 * most one commits. Undefined when none was prepared or it names none.
 */
export async function pinnedInputs(env: TruthEnv, w: Withdrawal): Promise<string[] | undefined> {
  const last = (await env.store.artifacts.preparedFor(w.id)).at(-1);
  return last ? inputsOf(last.bytes) : undefined;
}

/** The input holdings a prepared transaction (base64) spends; undefined when it names none. */
function inputsOf(bytes: string): string[] | undefined {
  const tx = decodePreparedTransaction(base64ToBytes(bytes, 'the prepared transaction'));
  const inputs = recogniseActions(tx)[0]?.inputs;
  return inputs && inputs.length > 0 ? inputs : undefined;
}

/**
 * The input holdings a prepared transaction (base64) names that it also
 * consumes itself: a consuming exercise on the holding, not undone by a
 * rollback. Only such a holding, once consumed by another transaction,
 * proves that this one cannot commit: a registry's transfer may name an
 * input it never touches. Undefined when it names none.
 */
function consumedInputsOf(bytes: string): string[] | undefined {
  const tx = decodePreparedTransaction(base64ToBytes(bytes, 'the prepared transaction'));
  const named = recogniseActions(tx)[0]?.inputs;
  if (!named || named.length === 0) return undefined;
  const consumed = new Set<string>();
  for (const root of tx.transaction.roots) {
    const top = tx.nodeById.get(root);
    const nodes = [...(top ? [{ node: top, rolledBack: false }] : []), ...descendants(tx, root)];
    for (const { node, rolledBack } of nodes)
      if (!rolledBack && node.type === 'exercise' && node.consuming) consumed.add(node.contractId);
  }
  return named.filter((c) => consumed.has(c));
}

/**
 * The truth when a holding that every transaction the `open` submissions of
 * `w` may have sent consumes (`consumedInputsOf`) is no longer active: the transaction that
 * consumed it (read from the party's updates after the earliest ledger end
 * recorded before a submission, when the holding was still active) is this
 * withdrawal's command — committed, whatever the completions showed — or
 * another command's — not committed: that holding is consumed once, so none
 * of them committed nor can commit. Undefined (nothing settled) otherwise:
 * the holdings all active, a transaction that may have been sent whose
 * inputs are not on record (one signed offline), the consuming transaction not found, or its
 * command id not shown. Which transactions the open submissions may have
 * sent: `sentPreparations`.
 */
async function spentElsewhere(
  env: TruthEnv,
  w: Withdrawal,
  subs: readonly SubmissionRecord[],
  open: readonly SubmissionRecord[],
): Promise<Truth | undefined> {
  const starts = subs.map((s) => s.ledgerEndBefore).filter((o): o is number => o !== undefined);
  if (starts.length === 0) return undefined;
  // A transaction signed offline is prepared in another run than the one that submits it: the
  // preparations on record may not be what was sent. Such a withdrawal waits for its deadline.
  if ((await env.store.airGap.list({ withdrawalId: w.id, limit: 1 })).length > 0) return undefined;
  const sentPrepared = sentPreparations(await env.store.artifacts.preparedFor(w.id), open);
  if (!sentPrepared) return undefined;
  const sent = sentPrepared.map((p) => consumedInputsOf(p.bytes));
  if (sent.some((ins) => ins === undefined || ins.length === 0)) return undefined;
  const [head, ...rest] = sent as string[][];
  const everywhere = (head ?? []).filter((c) => rest.every((ins) => ins.includes(c)));
  if (everywhere.length === 0) return undefined;
  const active = new Set((await listHoldings(env.ctx, w.party)).map((h) => h.cid));
  const gone = new Set(everywhere.filter((c) => !active.has(c)));
  if (gone.size === 0) return undefined;
  // The party's transactions from where every one of those holdings was still active.
  const found = await findConsumer(env.ctx, {
    party: w.party,
    from: Math.min(...starts),
    end: (await env.ctx.ledger.ledgerEnd()).offset,
    wanted: (c) => gone.has(c),
  });
  if ('readTo' in found || !found.tx.commandId) return undefined;
  return found.tx.commandId === w.commandId
    ? { status: 'committed', updateId: found.tx.updateId }
    : { status: 'not-committed' };
}

/**
 * The preparations the open submissions may have sent: the ones they name;
 * for submissions of older builds, which name none, the preparation recorded
 * last before the earliest of them and every one after it (each submission
 * is of the preparation recorded before it). Undefined when that is unclear.
 */
function sentPreparations(
  prepared: readonly PreparedRecord[],
  open: readonly SubmissionRecord[],
): readonly PreparedRecord[] | undefined {
  if (open.every((s) => s.preparedId !== undefined)) {
    const named = open.map((s) => prepared.find((p) => p.id === s.preparedId));
    return named.every((p) => p !== undefined) ? (named as PreparedRecord[]) : undefined;
  }
  const earliest = Math.min(...open.map((s) => Date.parse(s.createdAt)));
  let first = -1;
  prepared.forEach((p, i) => {
    if (Date.parse(p.createdAt) <= earliest) first = i;
  });
  return first < 0 ? undefined : prepared.slice(first);
}

/** The holdings `cids` of the sender, all still active, or outcome_unknown (something spent them). */
export async function activeHoldings(
  env: TruthEnv,
  w: Withdrawal,
  cids: readonly string[],
): Promise<Holding[]> {
  const held = new Map((await listHoldings(env.ctx, w.party)).map((h) => [h.cid, h]));
  const missing = cids.filter((c) => !held.has(c));
  if (missing.length > 0)
    throw new Refusal(
      'outcome_unknown',
      `the holdings an earlier submission of this withdrawal spends are no longer active (${missing.join(', ')}): it may have committed. The withdrawal waits for its outcome or its commit deadline before spending other holdings`,
      [],
      { commandId: w.commandId },
    );
  return cids.map((c) => held.get(c) as Holding);
}

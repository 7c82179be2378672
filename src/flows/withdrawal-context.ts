/**
 * The flow context of one withdrawal run: the ledger client and the signer
 * wrapped to record the evidence (prepared transaction, signature,
 * submission), and a recorder that turns the pipeline's journal steps into
 * the lifecycle's events. The pipeline calls them in this order, and the
 * table (withdrawal-lifecycle.ts) says what each does to the row:
 *
 *   about to sign   (`sign`)      → prepared: the prepared transaction recorded;
 *                     a cancelled withdrawal fails here, so it is never signed,
 *                     and a cancel after this move is refused (it authorises signing)
 *   journal signed    (`signed`)    → signed: the signature recorded, nothing sent
 *   journal submitted (`submitted`) → submitted, with the ledger end read first
 *                     (write-ahead: the row says "maybe on the ledger" before
 *                     execute is called)
 *   journal committed (`committed`) → committed, with the update id.
 *
 * A resubmission (the row stays `submitted`: the outcome of what was sent is
 * unknown) records the same evidence without leaving `submitted`. The journal
 * record of a step that moves the row is written in the same transaction as
 * the move; any other record on its own. Each write is finished before the
 * pipeline goes on; a write of ours that fails aborts the flow and marks the
 * run (`ownFailure`), so that what the pipeline reports next is not taken
 * for the ledger's answer.
 */
import { randomUUID } from 'node:crypto';
import { isCantonApiError } from '../canton/errors.js';
import type { LedgerApiClient } from '../canton/ledger-api/client.js';
import { bytesToHex } from '../hashing/input.js';
import type { Signer } from '../keys/signer.js';
import type { FlowRecorder, JournalRecord } from '../store/journal.js';
import { DbRecorder } from '../store/repos/recorder.js';
import type { TransitionOptions } from '../store/repos/withdrawals.js';
import type { FlowContext } from './context.js';
import { TAKEN_CODES } from './ledger.js';
import { type ActionOf, lineFor, type WithdrawalFacts, type WithdrawalLine } from './withdrawal-lifecycle.js';
import { errorText, outcomeWith, type Run } from './withdrawal-steps.js';
import { noneOpen } from './withdrawal-truth.js';

function schemeName(v: string): string {
  const m = /_V(\d+)$/.exec(v);
  return m ? `v${m[1]}` : 'v2';
}

type JournalEvent = 'signed' | 'submitted' | 'committed' | 'rejected' | 'resolved';
const JOURNAL_EVENTS: readonly string[] = ['signed', 'submitted', 'committed', 'rejected', 'resolved'];
type Rec = Omit<JournalRecord, 'at'>;
/** What a journal step's action gets: the record, and the journal entry to write with its move (if any). */
type Step = { rec: Rec; journal: Pick<TransitionOptions, 'audit'> | undefined };

/** The table's line for the run's row meeting `event` (a missing one is a bug: the pipeline's order is fixed). */
function lineOf(r: Run, event: 'sign' | JournalEvent, facts: WithdrawalFacts): WithdrawalLine {
  const line = lineFor(r.w.state, event, facts);
  if (!line) throw new Error(`the withdrawal lifecycle has no line for ${r.w.state} on ${event}`);
  return line;
}

export function withdrawalContext(r: Run): FlowContext {
  const { ctx, store } = r.env;
  const run = r.flags;
  const id = r.w.id;
  /** A move forward clears the error an earlier attempt left. */
  const cleared = (): { lastError?: null } => (r.w.lastError !== undefined ? { lastError: null } : {});

  const ledger = Object.create(ctx.ledger) as LedgerApiClient;
  ledger.ledgerEnd = async (o) => {
    const end = run.unusedEnd;
    run.unusedEnd = undefined;
    if (end !== undefined) return { offset: end };
    const read = await ctx.ledger.ledgerEnd(o);
    if (!run.sent) run.seenEnd ??= read.offset;
    return read;
  };
  ledger.prepare = async (req, o) => {
    const res = await ctx.ledger.prepare(req, o);
    run.prepared = { bytes: res.preparedTransaction, scheme: schemeName(res.hashingSchemeVersion) };
    return res;
  };
  ledger.executeAndWait = async (req, o) => {
    run.unusedEnd = undefined;
    run.seenEnd = undefined;
    run.sent = true;
    const sid = req.submissionId ?? `${r.w.commandId}:${Date.now()}`;
    // Written ahead of the execute, with the transaction's commit deadline: what was sent is always on record.
    try {
      await store.artifacts.recordSubmission({
        submissionId: sid,
        commandId: r.w.commandId,
        withdrawalId: id,
        ...(run.preparedId !== undefined ? { preparedId: run.preparedId } : {}),
        // A worker records it only while it holds the lease (another may have taken the row over).
        ...(r.env.owner !== undefined ? { lease: r.env.owner } : {}),
        ...(run.ledgerEnd !== undefined ? { ledgerEndBefore: run.ledgerEnd } : {}),
        ...(run.commitDeadline !== undefined ? { commitDeadline: run.commitDeadline } : {}),
      });
    } catch (e) {
      run.ownFailure = true;
      throw e;
    }
    run.lastSubmissionId = sid;
    try {
      const res = await ctx.ledger.executeAndWait(req, o);
      run.executedOk = true;
      // Written with the move to `committed`, which follows (or when the run ends without it).
      run.outcome = { submissionId: sid, completionOffset: res.completionOffset, updateId: res.updateId };
      return res;
    } catch (e) {
      const unknown = isCantonApiError(e) && (e.ambiguous || TAKEN_CODES.has(e.code));
      await store.artifacts
        .setSubmissionOutcome(sid, {
          outcome: unknown ? 'ambiguous' : 'rejected',
          reason: errorText(e).slice(0, 1000),
        })
        .catch(() => {});
      throw e;
    }
  };

  // ---- `sign`: the actions before the signer is called -------------------------------------
  const signing: { [A in ActionOf<'sign'>]: (hash: string) => Promise<void> } = {
    // Fails (WithdrawalStateError) when the withdrawal was cancelled meanwhile: nothing is signed.
    'authorise-signing': async (hash) => {
      const record = recordPrepared(hash);
      await r.move(
        ['received', 'prepared', 'submitted'],
        'prepared',
        { incrementAttempts: true, ...cleared() },
        {
          details: { hash },
          ...(record ? { also: async (tx, x) => void (await record(tx, x.attempts)) } : {}),
        },
      );
      await r.at('prepared');
    },
    // A resubmission: the row stays `submitted`; the new preparation is on record all the same —
    // written on its own, so a worker writes it only while it holds the lease: the next
    // resubmission spends the holdings of the latest preparation on record (`pinnedInputs`).
    'keep-submitted': async (hash) => {
      await recordPrepared(hash)?.(undefined, r.w.attempts + 1, r.env.owner);
    },
  };
  /** The write of the preparation about to be signed (its id: what the signature and submission name). */
  function recordPrepared(hash: string) {
    const prepared = run.prepared;
    const preparedId = prepared ? randomUUID() : undefined;
    run.preparedId = preparedId;
    return prepared
      ? (tx: Parameters<typeof store.artifacts.writePrepared>[1], attempt: number, lease?: string) =>
          store.artifacts.writePrepared(
            {
              id: preparedId as string,
              withdrawalId: id,
              attempt,
              hash,
              hashingScheme: prepared.scheme,
              bytes: prepared.bytes,
              ...(lease !== undefined ? { lease } : {}),
            },
            tx,
          )
      : undefined;
  }

  const signer = Object.create(ctx.signer) as Signer;
  signer.sign = async (label, message) => {
    const hash = bytesToHex(message);
    const line = lineOf(r, 'sign', { definitelyNot: run.definitelyNot });
    await signing[line.action as ActionOf<'sign'>](hash);
    const out = await ctx.signer.sign(label, message);
    run.signed = out;
    return out;
  };

  // ---- the journal steps ---------------------------------------------------------------------
  const base: FlowRecorder | undefined =
    ctx.recorder instanceof DbRecorder ? ctx.recorder.with({ subject: `withdrawal:${id}` }) : ctx.recorder;
  /**
   * A move refused (the lease was lost) or failed: the step happened all the same (a signature
   * was made, a transaction committed), so its record is written on its own, as before the move.
   */
  const recorded = async (s: Step, moveIt: () => Promise<unknown>) => {
    try {
      await moveIt();
    } catch (e) {
      const entry = s.journal?.audit?.[0];
      if (entry && base instanceof DbRecorder) await base.append(entry).catch(() => {});
      throw e;
    }
  };
  /** The ledger end before submitting (the one this run saw before sending anything, else read now). */
  const endBefore = async (s: Step) => {
    run.commitDeadline = s.rec.facts?.commitDeadline;
    const end = run.seenEnd ?? (await ctx.ledger.ledgerEnd()).offset;
    run.ledgerEnd = end;
    run.unusedEnd = end;
    return end;
  };
  const signatureOf = (s: Step) => {
    const sig = run.signed;
    return sig
      ? {
          also: async (tx: Parameters<typeof store.artifacts.writeSignature>[1]) =>
            void (await store.artifacts.writeSignature(
              {
                withdrawalId: id,
                ...(run.preparedId !== undefined ? { preparedId: run.preparedId } : {}),
                hash: s.rec.hash ?? '',
                signedBy: sig.signature.signedBy,
                keyLabel: sig.key.label,
                scheme: sig.key.scheme,
                signatureFormat: sig.signature.format,
                signature: sig.signature.signature,
              },
              tx,
            )),
        }
      : {};
  };
  const journalled: { [A in ActionOf<JournalEvent>]: (s: Step) => Promise<void> } = {
    'record-signature': async (s) => {
      const details = { hash: s.rec.hash ?? null, signedBy: s.rec.signedBy ?? null };
      await recorded(s, () =>
        r.move(['prepared'], 'signed', cleared(), { details, ...s.journal, ...signatureOf(s) }),
      );
      await r.at('signed');
    },
    'record-resubmission': async (s) => {
      const details = { hash: s.rec.hash ?? null, signedBy: s.rec.signedBy ?? null };
      await recorded(s, () =>
        r.move(
          ['submitted'],
          'submitted',
          { incrementAttempts: true, ...cleared() },
          { details: { ...details, resubmission: true }, ...s.journal, ...signatureOf(s) },
        ),
      );
      await r.at('signed');
    },
    'write-ahead': async (s) => {
      const end = await endBefore(s);
      await recorded(s, () =>
        r.move(
          ['signed'],
          'submitted',
          { lookupFrom: end, ...cleared() },
          { details: { hash: s.rec.hash ?? null, ledgerEndBefore: end }, ...s.journal },
        ),
      );
      await r.at('submitted');
    },
    'note-ledger-end': async (s) => {
      await store.withdrawals.setLookupFrom(id, await endBefore(s));
      await r.at('submitted');
    },
    'record-commit': async (s) => {
      const outcome = run.outcome;
      await recorded(s, () =>
        r.move(
          ['submitted'],
          'committed',
          { ...(s.rec.facts?.updateId ? { updateId: s.rec.facts.updateId } : {}), lastError: null },
          { ...s.journal, ...outcomeWith(r.env, outcome) },
        ),
      );
      if (run.outcome === outcome) run.outcome = undefined;
    },
    // It settles this run's submission; the row may leave `submitted` only when no earlier one
    // can still commit either.
    'note-rejection': async () => {
      run.definitelyNot = await noneOpen(store, r.w.commandId);
    },
    'note-not-committed': async () => {
      const sid = run.lastSubmissionId;
      if (sid !== undefined)
        await store.artifacts.setSubmissionOutcome(sid, {
          outcome: 'rejected',
          reason: 'a rejection completion was found after an ambiguous execute',
        });
      run.definitelyNot = await noneOpen(store, r.w.commandId);
    },
    none: async () => {},
  };

  async function step(rec: Rec): Promise<void> {
    if (rec.step === 'committed') await r.at('executed');
    let line: WithdrawalLine | undefined;
    try {
      line = JOURNAL_EVENTS.includes(rec.step)
        ? lineOf(r, rec.step as JournalEvent, {
            ours: run.executedOk || run.ownFailure,
            ...(rec.reason !== undefined ? { resolution: rec.reason } : {}),
          })
        : undefined;
    } catch (e) {
      // A step the table has no line for still leaves its journal record before the run fails.
      await base?.record(rec);
      throw e;
    }
    // The journal record of a step that moves the row is written in the move's own transaction
    // (both committed, or neither); any other record on its own.
    const moves = line !== undefined && line.next !== 'same';
    const entry = moves && base instanceof DbRecorder ? base.entry(rec) : undefined;
    if (!entry) await base?.record(rec);
    if (line)
      await journalled[line.action as ActionOf<JournalEvent>]({
        rec,
        journal: entry ? { audit: [entry] } : undefined,
      });
  }
  const recorder: FlowRecorder = {
    async record(rec: Rec) {
      try {
        await step(rec);
      } catch (e) {
        run.ownFailure = true;
        throw e;
      }
    },
  };
  return { ...ctx, ledger, signer, recorder };
}

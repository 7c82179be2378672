/**
 * The timeline of one withdrawal: received, verified, approvals, signed,
 * submitted, committed, delivered — each step with its time. An auditor
 * reads it from the audit log (`GET /v1/audit?subject=withdrawal:<id>`,
 * every state move, pipeline record and approval); the other roles get what
 * their routes show: the withdrawal's own times and, for roles that read
 * approvals, its approval request with each answer.
 */
import { get, query } from './api.js';
import type { ViewContext } from './context.js';
import { h, pill, shortId, time } from './dom.js';

export interface Withdrawal {
  id: string;
  state: string;
  party: string;
  receiver: string;
  amount: string;
  instrument?: { admin: string; id: string };
  memo?: string;
  commandId: string;
  attempts: number;
  lastError?: string;
  updateId?: string;
  delivery?: string;
  offer?: { expiresAt?: string; outcome?: string };
  createdAt: string;
  updatedAt: string;
}

interface AuditEntry {
  seq: number;
  at: string;
  actor: string;
  action: string;
  details: unknown;
}

interface ApprovalRequest {
  id: string;
  subject: string;
  status: string;
  createdAt: string;
  decidedAt?: string;
  approvals: { approver: string; decision: string; reason?: string; at: string }[];
}

export interface Step {
  at: string;
  label: string;
  by?: string;
  note?: string;
}

/** What an audit action means on a withdrawal's timeline. */
const LABELS: Record<string, string> = {
  'withdrawal.create': 'Received',
  'withdrawal.prepared': 'Prepared and verified',
  'withdrawal.awaiting_approval': 'Waiting for approvals',
  'withdrawal.awaiting_signature': 'Waiting for the offline signature',
  'approval.requested': 'Approval requested',
  'approval.approve': 'Approved',
  'approval.reject': 'Rejected by an approver',
  'approval.closed': 'Approval request closed',
  'approval.result': 'Approval decided',
  'flow.refused': 'Refused by the signing pipeline',
  'flow.signed': 'Verified and signed',
  'withdrawal.signed': 'Signed',
  'flow.submitted': 'Submitted to the ledger',
  'withdrawal.submitted': 'Submitted',
  'flow.committed': 'Committed on the ledger',
  'withdrawal.committed': 'Committed',
  'withdrawal.delivery.delivered': 'Delivered to the receiver',
  'withdrawal.delivery.offered': 'Offered to the receiver (waits for acceptance)',
  'withdrawal.delivery.returned': 'Returned to the sender',
  'withdrawal.error': 'Error (retried)',
};

function noteOf(details: unknown): string | undefined {
  if (details === null || typeof details !== 'object') return undefined;
  const d = details as Record<string, unknown>;
  for (const k of ['reason', 'error', 'message', 'outcome'])
    if (typeof d[k] === 'string' && d[k] !== '') return d[k] as string;
  return undefined;
}

/** The steps an audit log gives, oldest first. */
export function stepsFromAudit(entries: readonly AuditEntry[]): Step[] {
  return entries.map((e) => {
    const note = noteOf(e.details);
    return {
      at: e.at,
      label: LABELS[e.action] ?? e.action,
      by: e.actor,
      ...(note !== undefined ? { note } : {}),
    };
  });
}

/** The steps the withdrawal and its approval request show, oldest first. */
export function stepsFromViews(w: Withdrawal, approvals: readonly ApprovalRequest[]): Step[] {
  const steps: Step[] = [{ at: w.createdAt, label: 'Received' }];
  for (const a of approvals) {
    steps.push({ at: a.createdAt, label: 'Approval requested' });
    for (const x of a.approvals)
      steps.push({
        at: x.at,
        label: x.decision === 'approve' ? 'Approved' : 'Rejected by an approver',
        by: x.approver,
        ...(x.reason ? { note: x.reason } : {}),
      });
    if (a.decidedAt) steps.push({ at: a.decidedAt, label: `Approval ${a.status}` });
  }
  if (w.state !== 'received')
    steps.push({
      at: w.updatedAt,
      label: w.delivery ? `${w.state}, ${w.delivery}` : w.state,
      ...(w.lastError ? { note: w.lastError } : {}),
    });
  return steps.sort((x, y) => Date.parse(x.at) - Date.parse(y.at));
}

async function loadSteps(w: Withdrawal, ctx: ViewContext): Promise<{ steps: Step[]; source: string }> {
  if (ctx.can('auditor', 'admin')) {
    const entries: AuditEntry[] = [];
    let after = 0;
    for (let page = 0; page < 20; page++) {
      const r = await get<{ entries: AuditEntry[]; nextAfterSeq?: number }>(
        `/v1/audit${query({ subject: `withdrawal:${w.id}`, afterSeq: after, limit: 1000 })}`,
      );
      entries.push(...r.entries);
      if (r.nextAfterSeq === undefined) break;
      after = r.nextAfterSeq;
    }
    return { steps: stepsFromAudit(entries), source: 'from the audit log' };
  }
  let approvals: ApprovalRequest[] = [];
  if (ctx.can('approver', 'operator'))
    approvals = (
      await get<{ items: ApprovalRequest[] }>(`/v1/approvals${query({ status: 'all', limit: 500 })}`)
    ).items.filter((a) => a.subject === `withdrawal:${w.id}`);
  return { steps: stepsFromViews(w, approvals), source: 'from the withdrawal and its approvals' };
}

/** The timeline section of one withdrawal. */
export async function timeline(id: string, ctx: ViewContext): Promise<HTMLElement> {
  const w = await get<Withdrawal>(`/v1/withdrawals/${encodeURIComponent(id)}`);
  const { steps, source } = await loadSteps(w, ctx);
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'timeline-title' },
    h('h2', { id: 'timeline-title' }, 'Withdrawal ', shortId(w.id, 13), ' ', pill(w.state)),
    h(
      'dl',
      null,
      h('dt', null, 'From'),
      h('dd', null, shortId(w.party, 30)),
      h('dt', null, 'To'),
      h('dd', null, shortId(w.receiver, 30)),
      h('dt', null, 'Amount'),
      h('dd', { class: 'amount' }, `${w.amount} ${w.instrument?.id ?? 'Amulet'}`),
      w.memo !== undefined ? [h('dt', null, 'Memo'), h('dd', null, h('q', { class: 'memo' }, w.memo))] : null,
      h('dt', null, 'Command id'),
      h('dd', null, shortId(w.commandId, 30)),
      w.updateId ? [h('dt', null, 'Ledger update'), h('dd', null, shortId(w.updateId, 30))] : null,
    ),
    h('p', { class: 'muted' }, `Steps ${source}:`),
    h(
      'ol',
      { class: 'timeline' },
      steps.map((s) =>
        h(
          'li',
          { class: 'step' },
          time(s.at),
          ' ',
          h('span', { class: 'step-label' }, s.label),
          s.by ? h('span', { class: 'step-by' }, ` by ${s.by}`) : null,
          s.note ? h('div', { class: 'step-note' }, s.note) : null,
        ),
      ),
    ),
  );
}

/**
 * Approvals: the requests waiting for people, each with what was verified
 * (who sends what to whom, memo, the policy rule and version that asked for
 * approval, the approvals so far, the time left) and the decoded transaction
 * one click away. Approve signs the request's statement with a passkey;
 * reject asks for a reason. The service checks everything again: a button
 * shown here grants nothing.
 */
import { ApiFailure, get, post, query } from './api.js';
import type { ViewContext } from './context.js';
import { fill, h, notice, pill, shortId, time } from './dom.js';
import { approvalChallenge, signWithPasskey } from './webauthn.js';

interface Action {
  kind?: string;
  amount?: string;
  instrument?: { admin: string; id: string };
  sender?: string;
  receiver?: string;
  memo?: string;
}

interface Statement {
  party: string;
  entryPoint: string;
  requester: string;
  actions: Action[];
  policy: { version: number; sha256: string; rule: string };
  requirement: { group: string; count: number }[];
  expiresAt: string;
}

export interface Approval {
  id: string;
  subject: string;
  status: string;
  statement: Statement;
  statementHash: string;
  approvals: { approver: string; decision: string; reason?: string; at: string }[];
  missing: { group: string; need: number }[];
  expiresAt: string;
  reason?: string;
  decidedBy?: string;
  summary: string[];
  names?: Record<string, string>;
  transaction?: unknown;
}

interface Credential {
  id: string;
  kind: string;
  status: string;
  label?: string;
  passkey?: { credentialId: string; rpId: string };
}

/** "3 min 20 s left", or "expired". */
export function timeLeft(expiresAt: string, now = Date.now()): string {
  const ms = Date.parse(expiresAt) - now;
  if (!(ms > 0)) return 'expired';
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86_400);
  const hh = Math.floor((s % 86_400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  if (d > 0) return `${d} d ${hh} h left`;
  if (hh > 0) return `${hh} h ${mm} min left`;
  return `${mm} min ${ss} s left`;
}

function party(id: string | undefined, names: Record<string, string> | undefined): HTMLElement {
  if (!id) return h('span', { class: 'muted' }, '—');
  const name = names?.[id];
  return h('span', { class: 'party' }, name ? h('strong', null, name, ' ') : null, shortId(id, 24));
}

export async function renderApprovals(main: HTMLElement, ctx: ViewContext) {
  const status = ctx.params.get('status') ?? 'pending';
  const list = h('div', { class: 'cards', 'aria-live': 'polite', 'aria-busy': 'true' });
  const message = h('div');
  const filter = h(
    'form',
    { class: 'filters', onsubmit: (e: Event) => e.preventDefault() },
    h('label', { for: 'approval-status' }, 'Show'),
    h(
      'select',
      {
        id: 'approval-status',
        onchange: (e: Event) =>
          ctx.navigate(`#/approvals${query({ status: (e.target as HTMLSelectElement).value })}`),
      },
      ['pending', 'approved', 'rejected', 'expired', 'all'].map((s) =>
        h('option', { value: s, selected: s === status }, s),
      ),
    ),
  );
  fill(main, filter, message, list);

  let passkeys: Credential[] = [];
  if (ctx.can('approver'))
    passkeys = (await get<{ items: Credential[] }>('/v1/approvers/credentials')).items.filter(
      (c) => c.kind === 'webauthn' && c.status === 'active' && c.passkey,
    );

  const timers: number[] = [];
  const load = async () => {
    for (const t of timers.splice(0)) clearInterval(t);
    let items: Approval[];
    try {
      items = (await get<{ items: Approval[] }>(`/v1/approvals${query({ status })}`)).items;
    } catch (e) {
      fill(message, notice('error', e instanceof Error ? e.message : 'Could not load approvals.'));
      return;
    }
    list.setAttribute('aria-busy', 'false');
    if (items.length === 0) {
      fill(list, h('p', { class: 'empty' }, status === 'pending' ? 'Nothing waits for approval.' : 'None.'));
      return;
    }
    fill(
      list,
      items.map((a) => card(a)),
    );
  };

  const card = (a: Approval): HTMLElement => {
    const st = a.statement;
    const mine = st.requester === ctx.session.caller;
    const out = h('div', { 'aria-live': 'polite' });
    const countdown = h('span', { class: 'countdown' }, timeLeft(a.expiresAt));
    if (a.status === 'pending')
      timers.push(window.setInterval(() => (countdown.textContent = timeLeft(a.expiresAt)), 1000));
    const details = h('pre', { class: 'tx', tabindex: 0 });
    const txBox = h(
      'details',
      {
        ontoggle: async (e: Event) => {
          if (!(e.target as HTMLDetailsElement).open || details.textContent !== '') return;
          details.textContent = 'Loading…';
          try {
            const full = await get<Approval>(`/v1/approvals/${a.id}`);
            details.textContent = JSON.stringify(full.transaction ?? full.statement, null, 2);
          } catch (err) {
            details.textContent = err instanceof Error ? err.message : 'Could not load the transaction.';
          }
        },
      },
      h('summary', null, 'Decoded transaction (as inspect shows it)'),
      details,
    );

    const canAnswer = a.status === 'pending' && ctx.can('approver');
    const approveWhy = mine
      ? 'You requested this: another approver must approve it.'
      : passkeys.length === 0
        ? 'Register a passkey first (Passkeys page); an admin must activate it.'
        : undefined;
    const approve = h(
      'button',
      {
        type: 'button',
        class: 'primary',
        disabled: !canAnswer || approveWhy !== undefined,
        'aria-describedby': approveWhy ? `why-${a.id}` : undefined,
        onclick: async (ev: Event) => {
          const btn = ev.currentTarget as HTMLButtonElement;
          btn.disabled = true;
          fill(out, notice('info', 'Confirm with your passkey…'));
          try {
            const key = passkeys[0]!;
            const challenge = await approvalChallenge(a.statementHash, 'approve');
            const assertion = await signWithPasskey(
              ctx.session.webauthn.rpId,
              key.passkey!.credentialId,
              challenge,
            );
            const r = await post<Approval>(`/v1/approvals/${a.id}/approve`, {
              credentialId: key.id,
              statementHash: a.statementHash,
              assertion,
            });
            fill(
              out,
              notice(
                'ok',
                r.status === 'approved' ? 'Approved: it goes on now.' : 'Your approval is recorded.',
              ),
            );
            await load();
          } catch (err) {
            btn.disabled = false;
            fill(out, notice('error', describe(err)));
          }
        },
      },
      'Approve with passkey',
    );
    const reasonId = `reason-${a.id}`;
    const reason = h('textarea', { id: reasonId, rows: 2, maxlength: 500, required: true });
    const reject = h(
      'form',
      {
        class: 'reject',
        onsubmit: async (ev: Event) => {
          ev.preventDefault();
          const text = reason.value.trim();
          if (text === '') {
            fill(out, notice('error', 'Say why you reject it.'));
            reason.focus();
            return;
          }
          try {
            await post(`/v1/approvals/${a.id}/reject`, { reason: text });
            fill(out, notice('ok', 'Rejected.'));
            await load();
          } catch (err) {
            fill(out, notice('error', describe(err)));
          }
        },
      },
      h('label', { for: reasonId }, 'Reason for rejecting'),
      reason,
      h('button', { type: 'submit', class: 'danger', disabled: !canAnswer }, 'Reject'),
    );

    return h(
      'article',
      { class: 'card approval', 'aria-labelledby': `title-${a.id}`, 'data-approval': a.id },
      h(
        'h2',
        { id: `title-${a.id}` },
        `${st.entryPoint} `,
        pill(a.status),
        ' ',
        a.status === 'pending' ? countdown : null,
      ),
      h(
        'dl',
        null,
        h('dt', null, 'Request'),
        h('dd', null, shortId(a.subject, 40)),
        h('dt', null, 'Party'),
        h('dd', null, party(st.party, a.names)),
        h('dt', null, 'Requested by'),
        h('dd', null, st.requester, mine ? ' (you)' : ''),
        st.actions.map((act, i) => [
          h('dt', null, st.actions.length > 1 ? `Action ${i + 1}` : 'Action'),
          h(
            'dd',
            { class: 'action' },
            h('span', null, act.kind ?? 'action'),
            act.amount !== undefined
              ? h('span', { class: 'amount' }, ` ${act.amount} ${act.instrument?.id ?? ''}`)
              : null,
            act.sender !== undefined ? h('div', null, 'from ', party(act.sender, a.names)) : null,
            act.receiver !== undefined ? h('div', null, 'to ', party(act.receiver, a.names)) : null,
            act.memo !== undefined ? h('div', null, 'memo ', h('q', { class: 'memo' }, act.memo)) : null,
          ),
        ]),
        h('dt', null, 'Policy'),
        h('dd', null, `version ${st.policy.version}, rule `, h('code', null, st.policy.rule)),
        h('dt', null, 'Needs'),
        h('dd', null, st.requirement.map((r) => `${r.count} of ${r.group}`).join(' and ')),
        h('dt', null, 'Answers so far'),
        h(
          'dd',
          null,
          a.approvals.length === 0
            ? 'none'
            : h(
                'ul',
                null,
                a.approvals.map((x) =>
                  h(
                    'li',
                    null,
                    `${x.approver}: ${x.decision}`,
                    x.reason ? ` (${x.reason})` : '',
                    ' ',
                    time(x.at),
                  ),
                ),
              ),
        ),
        a.missing.length > 0
          ? [
              h('dt', null, 'Still missing'),
              h('dd', null, a.missing.map((m) => `${m.need} of ${m.group}`).join(', ')),
            ]
          : null,
        h('dt', null, 'Expires'),
        h('dd', null, time(a.expiresAt)),
        h('dt', null, 'Statement hash'),
        h('dd', null, shortId(a.statementHash, 16)),
      ),
      txBox,
      canAnswer
        ? h(
            'div',
            { class: 'actions' },
            approve,
            approveWhy ? h('p', { id: `why-${a.id}`, class: 'why' }, approveWhy) : null,
            reject,
          )
        : null,
      out,
    );
  };

  await load();
  const off = ctx.live.subscribe(['approval.', 'withdrawal.'], () => void load());
  const stopPolling = ctx.live.whileOffline(() => void load());
  return () => {
    off();
    stopPolling();
    for (const t of timers) clearInterval(t);
  };
}

function describe(e: unknown): string {
  if (e instanceof ApiFailure) return `${e.message} (${e.code})`;
  if (e instanceof DOMException && e.name === 'NotAllowedError')
    return 'The passkey prompt was cancelled or timed out.';
  return e instanceof Error ? e.message : 'Something went wrong.';
}

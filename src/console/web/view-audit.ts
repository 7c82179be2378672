/**
 * Audit: the hash-chained audit log (`GET /v1/audit`), a page at a time in
 * seq order, optionally for one subject (`#/audit?subject=withdrawal:<id>`),
 * and the chain's verification (`GET /v1/audit/verify`): intact with its
 * head (to anchor elsewhere), or the first edited, removed or reordered row.
 */
import { get, query } from './api.js';
import type { ViewContext } from './context.js';
import { fill, h, notice, pill, shortId, table, time } from './dom.js';

interface Entry {
  seq: number;
  at: string;
  actor: string;
  action: string;
  subject: string | null;
  details: unknown;
  hash: string;
}

interface Verification {
  ok: boolean;
  rows: number;
  head?: { seq: number; hash: string };
  problem?: { seq: number; kind: string; message: string };
}

const PAGE = 100;

export async function renderAudit(main: HTMLElement, ctx: ViewContext) {
  const subject = ctx.params.get('subject') ?? '';
  const verifyBox = h('div', { 'aria-live': 'polite' });
  const message = h('div');
  const listBox = h('div', { 'aria-busy': 'true' });
  const pager = h('div', { class: 'pager' });
  const subjectInput = h('input', {
    id: 'audit-subject',
    name: 'subject',
    value: subject,
    placeholder: 'withdrawal:<id>, party:<id>, key:<label>',
    maxlength: 600,
  });
  const filters = h(
    'form',
    {
      class: 'filters',
      onsubmit: (e: Event) => {
        e.preventDefault();
        ctx.navigate(`#/audit${query({ subject: subjectInput.value.trim() })}`);
      },
    },
    h('label', { for: 'audit-subject' }, 'Subject'),
    subjectInput,
    h('button', { type: 'submit' }, 'Show'),
  );
  fill(main, verifyBox, filters, message, listBox, pager);

  let head: number | undefined;
  const verify = async () => {
    fill(verifyBox, notice('info', 'Verifying the hash chain…'));
    try {
      const v = await get<Verification>('/v1/audit/verify');
      head = v.head?.seq;
      const again = h('button', { type: 'button', onclick: () => void verify() }, 'Verify again');
      fill(
        verifyBox,
        v.ok
          ? h(
              'section',
              { class: 'card verify verify-ok', 'aria-label': 'Chain verification' },
              h('p', null, pill('intact', 'ok'), ` ${v.rows} entries checked; the chain is intact.`),
              v.head
                ? h('p', null, `Head: entry ${v.head.seq}, hash `, h('code', { class: 'hash' }, v.head.hash))
                : null,
              again,
            )
          : h(
              'section',
              { class: 'card verify verify-broken', role: 'alert', 'aria-label': 'Chain verification' },
              h('p', null, pill('broken'), ` ${v.rows} entries checked good, then:`),
              v.problem
                ? h('p', null, `Entry ${v.problem.seq} (${v.problem.kind}): `, v.problem.message)
                : null,
              again,
            ),
      );
    } catch (e) {
      fill(verifyBox, notice('error', e instanceof Error ? e.message : 'Could not verify the chain.'));
    }
  };

  // Cursors of the pages seen, so that "Previous" goes back the way it came.
  const cursors: number[] = [];
  let after = 0;
  const load = async (from: number): Promise<void> => {
    listBox.setAttribute('aria-busy', 'true');
    let page: { entries: Entry[]; nextAfterSeq?: number };
    try {
      page = await get(`/v1/audit${query({ subject, afterSeq: from, limit: PAGE })}`);
    } catch (e) {
      fill(message, notice('error', e instanceof Error ? e.message : 'Could not load the audit log.'));
      return;
    }
    after = from;
    fill(message);
    listBox.setAttribute('aria-busy', 'false');
    fill(
      listBox,
      table(
        subject ? `Audit log of ${subject}` : 'Audit log',
        ['#', 'Time', 'Actor', 'Action', 'Subject', 'Details'],
        page.entries.map((e) => [
          String(e.seq),
          time(e.at),
          e.actor,
          h('code', null, e.action),
          e.subject ? shortId(e.subject, 30) : '',
          e.details === undefined || e.details === null
            ? ''
            : h(
                'details',
                null,
                h('summary', null, 'Details'),
                h('pre', { class: 'doc', tabindex: 0 }, JSON.stringify(e.details, null, 2)),
              ),
        ]),
        subject ? 'No entries for this subject.' : 'The audit log is empty.',
      ),
    );
    next = page.nextAfterSeq;
    renderPager();
  };

  let next: number | undefined;
  function renderPager() {
    fill(
      pager,
      h(
        'button',
        {
          type: 'button',
          disabled: cursors.length === 0,
          onclick: () => void load(cursors.pop() ?? 0),
        },
        'Previous',
      ),
      h(
        'button',
        {
          type: 'button',
          disabled: next === undefined,
          onclick: () => {
            cursors.push(after);
            if (next !== undefined) void load(next);
          },
        },
        'Next',
      ),
      // The latest entries of the whole log: the page ending at the head the verification found.
      !subject && head !== undefined && head > PAGE
        ? h(
            'button',
            {
              type: 'button',
              onclick: () => {
                cursors.push(after);
                void load(Math.max(0, (head ?? 0) - PAGE));
              },
            },
            'Latest',
          )
        : null,
    );
  }

  await Promise.all([verify(), load(0)]);
  // The verification may answer after the first page: offer "Latest" once the head is known.
  renderPager();
  return undefined;
}

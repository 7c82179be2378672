/**
 * Withdrawals: the list (`GET /v1/withdrawals`) filtered by party and state
 * (the filters live in the address: `#/withdrawals?party=…&state=…`), kept
 * current by the live `withdrawal.*` events (each carries the withdrawal as
 * the API shows it, so a row is replaced in place), and the timeline of one
 * withdrawal (`#/withdrawals?id=…`).
 */
import { get, query } from './api.js';
import type { ViewContext } from './context.js';
import { fill, h, notice, pill, shortId, table, time } from './dom.js';
import { timeline, type Withdrawal } from './withdrawal-timeline.js';

const STATES = [
  'received',
  'prepared',
  'awaiting_approval',
  'awaiting_signature',
  'signed',
  'submitted',
  'committed',
  'rejected',
  'failed',
  'cancelled',
  'expired',
];

const PAGE = 50;

function matches(w: Withdrawal, party: string, state: string): boolean {
  return (party === '' || w.party === party) && (state === '' || w.state === state);
}

export async function renderWithdrawals(main: HTMLElement, ctx: ViewContext) {
  const party = ctx.params.get('party') ?? '';
  const state = ctx.params.get('state') ?? '';
  const id = ctx.params.get('id') ?? '';
  const here = (extra: Record<string, string | undefined> = {}) =>
    `#/withdrawals${query({ party, state, ...extra })}`;

  const partySelect = h(
    'select',
    { id: 'wd-party', name: 'party' },
    h('option', { value: '' }, 'All parties'),
    party !== '' ? h('option', { value: party, selected: true }, party) : null,
  );
  const stateSelect = h(
    'select',
    { id: 'wd-state', name: 'state' },
    h('option', { value: '' }, 'Any state'),
    STATES.map((s) => h('option', { value: s, selected: s === state }, s)),
  );
  const filters = h(
    'form',
    {
      class: 'filters',
      onsubmit: (e: Event) => {
        e.preventDefault();
        ctx.navigate(`#/withdrawals${query({ party: partySelect.value, state: stateSelect.value })}`);
      },
    },
    h('label', { for: 'wd-party' }, 'Party'),
    partySelect,
    h('label', { for: 'wd-state' }, 'State'),
    stateSelect,
    h('button', { type: 'submit' }, 'Show'),
  );
  const detail = h('div', { 'aria-live': 'polite' });
  const message = h('div');
  const listBox = h('div', { 'aria-busy': 'true' });
  const more = h('div');
  fill(main, detail, filters, message, listBox, more);

  // The party choices: the booked parties the token reaches (names shown as text).
  void get<{ parties: { partyId: string; hint: string }[] }>('/v1/parties')
    .then(({ parties }) => {
      fill(
        partySelect,
        h('option', { value: '' }, 'All parties'),
        parties.map((p) =>
          h(
            'option',
            { value: p.partyId, selected: p.partyId === party },
            `${p.hint} (${p.partyId.slice(0, 24)}…)`,
          ),
        ),
      );
    })
    .catch(() => {
      // the select keeps the party of the address; the list still loads
    });

  if (id !== '') {
    fill(detail, notice('info', 'Loading the timeline…'));
    try {
      fill(
        detail,
        await timeline(id, ctx),
        h('p', null, h('a', { href: here(), class: 'button' }, 'Close the timeline')),
      );
    } catch (e) {
      fill(detail, notice('error', e instanceof Error ? e.message : 'Could not load the withdrawal.'));
    }
  }

  let items: Withdrawal[] = [];
  let nextCursor: string | undefined;

  const row = (w: Withdrawal) => [
    time(w.createdAt),
    shortId(w.party, 20),
    shortId(w.receiver, 20),
    h('span', { class: 'amount' }, `${w.amount} ${w.instrument?.id ?? 'Amulet'}`),
    pill(w.state),
    w.delivery ? pill(w.delivery) : '',
    time(w.updatedAt),
    h(
      'button',
      {
        type: 'button',
        'aria-label': `Timeline of withdrawal ${w.id}`,
        onclick: () => ctx.navigate(here({ id: w.id })),
      },
      'Timeline',
    ),
  ];

  const show = () => {
    listBox.setAttribute('aria-busy', 'false');
    fill(
      listBox,
      table(
        'Withdrawals',
        ['Created', 'Party', 'Receiver', 'Amount', 'State', 'Delivery', 'Updated', ''],
        items.map(row),
        party !== '' || state !== '' ? 'No withdrawal matches these filters.' : 'No withdrawals yet.',
      ),
    );
    fill(
      more,
      nextCursor ? h('button', { type: 'button', onclick: () => void load(true) }, 'Show more') : null,
    );
  };

  const load = async (append = false) => {
    try {
      const page = await get<{ items: Withdrawal[]; nextCursor?: string }>(
        `/v1/withdrawals${query({ party, state, limit: PAGE, cursor: append ? nextCursor : undefined })}`,
      );
      items = append ? [...items, ...page.items] : page.items;
      nextCursor = page.nextCursor;
      fill(message);
      show();
    } catch (e) {
      fill(message, notice('error', e instanceof Error ? e.message : 'Could not load withdrawals.'));
    }
  };

  await load();

  // A live event carries the withdrawal as the API shows it: replace its row, or add it on top.
  let timelineRefresh: number | undefined;
  const off = ctx.live.subscribe(['withdrawal.'], (e) => {
    const w = e.data as unknown as Withdrawal;
    if (typeof w?.id !== 'string') return;
    const at = items.findIndex((x) => x.id === w.id);
    if (at >= 0) {
      if (matches(w, party, state)) items[at] = w;
      else items.splice(at, 1);
    } else if (matches(w, party, state)) items.unshift(w);
    show();
    if (w.id === id && timelineRefresh === undefined)
      timelineRefresh = window.setTimeout(async () => {
        timelineRefresh = undefined;
        try {
          const t = await timeline(id, ctx);
          detail.firstElementChild?.replaceWith(t);
        } catch {
          // the shown timeline stays; the next event tries again
        }
      }, 300);
  });
  const stopPolling = ctx.live.whileOffline(() => void load());
  return () => {
    off();
    stopPolling();
    if (timelineRefresh !== undefined) clearTimeout(timelineRefresh);
  };
}

/**
 * Parties: the booked parties the token reaches (`GET /v1/parties`), each
 * with its holdings (`GET /v1/parties/{id}/balance`) and its transfer
 * preapproval's expiry (`GET /v1/parties/{id}/preapprovals`), both read from
 * the ledger now, one party at a time, so a slow or failing party shows its
 * own error and the others still fill in; and its names in the name service
 * (`GET /v1/parties/{id}/names`: state, expiry, renewal, what went wrong).
 */
import { get, query } from './api.js';
import type { ViewContext } from './context.js';
import { fill, h, notice, pill, shortId, table, time } from './dom.js';

interface Party {
  partyId: string;
  hint: string;
  keyLabel: string;
  scheme: string;
  fingerprint: string;
  via: string;
  ansName?: string;
  createdAt: string;
}

interface Balance {
  holdings: { instrument: { admin: string; id: string }; unlocked: string; locked: string; count: number }[];
  dustCount: number;
  warnings: string[];
}

interface Preapproval {
  status: 'ok' | 'expiring' | 'missing';
  expiresAt?: string;
  daysLeft?: number;
  willRenew: boolean;
  problem?: string;
}

interface NameRow {
  name: string;
  state: string;
  autoRenew: boolean;
  expiresAt?: string;
  renewalWindowOpensAt?: string;
  waiting?: { for: string };
  error?: string;
}

const WITHIN_DAYS = 30;
const ENDED = new Set(['expired', 'rejected', 'failed']);

function namesCell(r: { names: NameRow[] }): HTMLElement {
  const live = r.names.filter((n) => !ENDED.has(n.state));
  if (live.length === 0) return h('span', { class: 'muted' }, 'none');
  return h(
    'ul',
    { class: 'names' },
    live.map((n) =>
      h(
        'li',
        null,
        h('strong', null, n.name),
        ' ',
        pill(n.state),
        n.expiresAt ? h('div', { class: 'muted' }, 'until ', time(n.expiresAt)) : null,
        n.renewalWindowOpensAt
          ? h(
              'div',
              { class: 'muted' },
              n.autoRenew ? 'renewed automatically from ' : 'auto-renew off; renewable from ',
              time(n.renewalWindowOpensAt),
            )
          : null,
        n.waiting ? h('div', { class: 'warning' }, `waiting for ${n.waiting.for}`) : null,
        n.error ? h('div', { class: 'warning' }, n.error) : null,
      ),
    ),
  );
}

function balanceCell(b: Balance): HTMLElement {
  if (b.holdings.length === 0) return h('span', { class: 'muted' }, 'no holdings');
  return h(
    'ul',
    { class: 'holdings' },
    b.holdings.map((x) =>
      h(
        'li',
        null,
        h('span', { class: 'amount' }, `${x.unlocked} ${x.instrument.id}`),
        x.locked !== '0' && !/^0(\.0+)?$/.test(x.locked)
          ? h('span', { class: 'muted' }, ` (+${x.locked} locked)`)
          : null,
        h('span', { class: 'muted' }, ` in ${x.count} holding${x.count === 1 ? '' : 's'}`),
      ),
    ),
    b.warnings.map((w) => h('li', { class: 'warning' }, w)),
  );
}

function preapprovalCell(p: Preapproval): HTMLElement {
  return h(
    'div',
    null,
    pill(p.status),
    p.expiresAt ? [' until ', time(p.expiresAt)] : null,
    p.daysLeft !== undefined ? h('span', { class: 'muted' }, ` (${p.daysLeft} days left)`) : null,
    p.status !== 'missing'
      ? h('div', { class: 'muted' }, p.willRenew ? 'renewed automatically' : 'not renewed')
      : null,
    p.problem ? h('div', { class: 'warning' }, p.problem) : null,
  );
}

/** A cell that fills itself when its request answers (its error as text otherwise). */
function later<T>(load: () => Promise<T>, show: (v: T) => HTMLElement): HTMLElement {
  const cell = h('div', { 'aria-busy': 'true' }, h('span', { class: 'muted' }, 'Loading…'));
  load()
    .then((v) => fill(cell, show(v)))
    .catch((e: unknown) =>
      fill(cell, h('span', { class: 'error' }, e instanceof Error ? e.message : 'unavailable')),
    )
    .finally(() => cell.setAttribute('aria-busy', 'false'));
  return cell;
}

export async function renderParties(main: HTMLElement, _ctx: ViewContext) {
  const message = h('div');
  const listBox = h('div');
  const reload = h('button', { type: 'button', onclick: () => void load() }, 'Refresh balances');
  fill(
    main,
    h(
      'p',
      { class: 'muted' },
      `Holdings and preapprovals are read from the ledger now. A preapproval is "expiring" within ${WITHIN_DAYS} days.`,
    ),
    h('div', { class: 'actions' }, reload),
    message,
    listBox,
  );

  const load = async () => {
    let parties: Party[];
    try {
      parties = (await get<{ parties: Party[] }>('/v1/parties')).parties;
    } catch (e) {
      fill(message, notice('error', e instanceof Error ? e.message : 'Could not load the parties.'));
      return;
    }
    fill(message);
    fill(
      listBox,
      table(
        'Parties',
        ['Party', 'Key', 'Balance', 'Transfer preapproval', 'Names', 'Onboarded'],
        parties.map((p) => {
          const id = encodeURIComponent(p.partyId);
          return [
            h(
              'div',
              { class: 'party' },
              h('strong', null, p.hint),
              p.ansName ? h('div', { class: 'muted' }, p.ansName) : null,
              h('div', null, shortId(p.partyId, 30)),
            ),
            h(
              'div',
              null,
              h('code', null, p.keyLabel),
              h('div', { class: 'muted' }, `${p.scheme}, via ${p.via}`),
            ),
            later(() => get<Balance>(`/v1/parties/${id}/balance`), balanceCell),
            later(
              () => get<Preapproval>(`/v1/parties/${id}/preapprovals${query({ withinDays: WITHIN_DAYS })}`),
              preapprovalCell,
            ),
            later(() => get<{ names: NameRow[] }>(`/v1/parties/${id}/names`), namesCell),
            time(p.createdAt),
          ];
        }),
        'No parties are booked (or your token reaches none).',
      ),
    );
  };
  await load();
  return undefined;
}

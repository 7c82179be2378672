/**
 * Building the page's elements. Text is always set as text (a text node),
 * never parsed as HTML: a memo or a name holding `<script>` shows as those
 * characters. There is no innerHTML anywhere in the console.
 */

export type Child = Node | string | number | boolean | null | undefined | Child[];

export interface Props {
  [name: string]: unknown;
}

function append(el: Element, child: Child): void {
  if (child === null || child === undefined || child === false || child === true) return;
  if (Array.isArray(child)) {
    for (const c of child) append(el, c);
    return;
  }
  el.append(child instanceof Node ? child : document.createTextNode(String(child)));
}

/**
 * An element with attributes and children. `on<event>` props are listeners,
 * boolean props set or omit the attribute, `class` may be an array (falsy
 * entries dropped), everything else is an attribute with the value as text.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2).toLowerCase(), value as EventListener);
    } else if (name === 'class' && Array.isArray(value)) {
      el.setAttribute('class', value.filter(Boolean).join(' '));
    } else if (name === 'value' && 'value' in el) {
      (el as HTMLInputElement).value = String(value);
    } else if (value === true) {
      el.setAttribute(name, '');
    } else {
      el.setAttribute(name, String(value));
    }
  }
  for (const c of children) append(el, c);
  return el;
}

/** Replaces the children of `el`. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  for (const c of children) append(el, c);
}

/** A short form of a long id (party, contract, hash) with the whole of it in a tooltip. */
export function shortId(id: string, keep = 18): HTMLElement {
  const shown = id.length > keep + 3 ? `${id.slice(0, keep)}…` : id;
  return h('code', { class: 'id', title: id }, shown);
}

/** A local time for an ISO timestamp, the ISO text in a tooltip. */
export function time(iso: string | undefined): HTMLElement {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  return h('time', { datetime: iso, title: iso }, Number.isNaN(d.getTime()) ? iso : d.toLocaleString());
}

/** A status pill. */
export function pill(text: string, kind = text): HTMLElement {
  return h('span', { class: ['pill', `pill-${kind.replace(/[^a-z_-]/gi, '')}`] }, text);
}

/** A table inside a horizontally scrolling wrapper (narrow screens scroll the table, not the page). */
export function table(
  caption: string,
  head: string[],
  rows: Child[][],
  empty = 'Nothing here.',
): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h(
    'div',
    { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption },
    h(
      'table',
      null,
      h('caption', { class: 'visually-hidden' }, caption),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          head.map((c) => h('th', { scope: 'col' }, c)),
        ),
      ),
      h(
        'tbody',
        null,
        rows.map((r) =>
          h(
            'tr',
            null,
            r.map((c) => h('td', null, c)),
          ),
        ),
      ),
    ),
  );
}

/** A message area that screen readers announce. */
export function notice(kind: 'error' | 'info' | 'ok', text: Child): HTMLElement {
  return h('p', { class: ['notice', `notice-${kind}`], role: kind === 'error' ? 'alert' : 'status' }, text);
}

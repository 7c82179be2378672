/**
 * Policy: the version in force (`GET /v1/policy`: version, SHA-256, where it
 * came from, the document exactly as loaded) and, when a change waits for
 * approvals, the pending version (`GET /v1/policy/versions`, then its
 * document from `GET /v1/policy/versions/{version}`) as a line diff against
 * the one in force — what its approvers sign. Then every version.
 */
import { get } from './api.js';
import type { ViewContext } from './context.js';
import { type DiffLine, diffLines, diffStats } from './diff.js';
import { fill, h, notice, pill, shortId, table, time } from './dom.js';

interface Version {
  version: number;
  sha256: string;
  source: 'file' | 'api' | 'builtin';
  status: 'in_force' | 'pending' | 'superseded' | 'rejected';
  format?: string;
  createdBy?: string;
  createdAt?: string;
  document?: string;
}

const MARK: Record<DiffLine['kind'], string> = { same: ' ', add: '+', del: '-' };

function diffView(lines: readonly DiffLine[]): HTMLElement {
  return h(
    'pre',
    { class: 'diff', tabindex: 0, 'aria-label': 'Changes: lines starting with + are added, with - removed' },
    lines.map((l) =>
      h(
        'span',
        { class: ['diff-line', l.kind] },
        h(
          'span',
          { class: 'diff-no', 'aria-hidden': 'true' },
          String(l.oldNo ?? '').padStart(4),
          ' ',
          String(l.newNo ?? '').padStart(4),
          ' ',
        ),
        `${MARK[l.kind]} ${l.text}`,
      ),
    ),
  );
}

function versionFacts(v: Version): HTMLElement {
  return h(
    'dl',
    null,
    h('dt', null, 'Version'),
    h('dd', null, String(v.version), ' ', pill(v.status.replace('_', ' '), v.status)),
    h('dt', null, 'SHA-256'),
    h('dd', null, v.sha256 ? h('code', { class: 'hash' }, v.sha256) : h('span', { class: 'muted' }, '—')),
    h('dt', null, 'Source'),
    h('dd', null, v.source, v.format ? ` (${v.format})` : ''),
    v.createdBy ? [h('dt', null, 'Loaded by'), h('dd', null, v.createdBy)] : null,
    v.createdAt ? [h('dt', null, 'Loaded'), h('dd', null, time(v.createdAt))] : null,
  );
}

export async function renderPolicy(main: HTMLElement, ctx: ViewContext) {
  const message = h('div');
  const current = h('section', { class: 'card', 'aria-labelledby': 'policy-current' });
  const pendingBox = h('div');
  const history = h('section', { 'aria-labelledby': 'policy-history' });
  fill(main, message, pendingBox, current, history);

  const load = async () => {
    let inForce: Version;
    let versions: Version[];
    try {
      [inForce, versions] = await Promise.all([
        get<Version>('/v1/policy'),
        get<{ items: Version[] }>('/v1/policy/versions').then((r) => r.items),
      ]);
    } catch (e) {
      fill(message, notice('error', e instanceof Error ? e.message : 'Could not load the policy.'));
      return;
    }
    fill(message);
    fill(
      current,
      h('h2', { id: 'policy-current' }, 'In force'),
      versionFacts(inForce),
      inForce.version === 0
        ? notice('info', 'No policy is configured: the built-in policy allows everything.')
        : h(
            'details',
            { open: true },
            h('summary', null, 'Document'),
            h('pre', { class: 'doc', tabindex: 0 }, inForce.document ?? ''),
          ),
    );

    const pending = versions.filter((v) => v.status === 'pending');
    const sections: HTMLElement[] = [];
    for (const p of pending) {
      try {
        const full = await get<Version>(`/v1/policy/versions/${p.version}`);
        const lines = diffLines(inForce.document ?? '', full.document ?? '');
        const { added, removed } = diffStats(lines);
        sections.push(
          h(
            'section',
            { class: 'card pending', 'aria-labelledby': `policy-pending-${p.version}` },
            h('h2', { id: `policy-pending-${p.version}` }, `Pending: version ${p.version}`),
            h(
              'p',
              null,
              'Waits for approvals (Approvals page). Approvers sign its SHA-256: ',
              h('code', { class: 'hash' }, full.sha256),
            ),
            versionFacts(full),
            h('h3', null, `Changes against version ${inForce.version}: ${added} added, ${removed} removed`),
            diffView(lines),
          ),
        );
      } catch (e) {
        sections.push(
          notice('error', `Version ${p.version}: ${e instanceof Error ? e.message : 'could not be loaded'}`),
        );
      }
    }
    fill(pendingBox, sections);

    fill(
      history,
      h('h2', { id: 'policy-history' }, 'Every version'),
      table(
        'Policy versions',
        ['Version', 'Status', 'Source', 'SHA-256', 'Loaded by', 'Loaded'],
        versions.map((v) => [
          String(v.version),
          pill(v.status.replace('_', ' '), v.status),
          v.source,
          v.sha256 ? shortId(v.sha256, 16) : '',
          v.createdBy ?? '',
          time(v.createdAt),
        ]),
        'No version was ever loaded (the built-in allow-all is in force).',
      ),
    );
  };

  await load();
  // A policy change moves with its approval request: look again when one is decided.
  const off = ctx.live.subscribe(['approval.', 'policy.'], () => void load());
  return () => off();
}

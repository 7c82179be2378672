/**
 * Passkeys: an approver registers a passkey (the browser's authenticator
 * makes a key bound to this console's origin) and sees their credentials; an
 * admin sees everyone's and activates (seals) or revokes them — never their
 * own: another admin must. A passkey counts for approvals only once active.
 */
import { ApiFailure, get, post } from './api.js';
import type { ViewContext } from './context.js';
import { fill, h, notice, pill, shortId, table, time } from './dom.js';
import { createPasskey, type RegistrationOptions } from './webauthn.js';

interface Credential {
  id: string;
  approver: string;
  kind: string;
  status: string;
  label?: string;
  createdAt: string;
  activatedBy?: string;
  passkey?: { credentialId: string; rpId: string };
}

export async function renderPasskeys(main: HTMLElement, ctx: ViewContext) {
  const out = h('div', { 'aria-live': 'polite' });
  const listBox = h('div');
  const load = async () => {
    const items = (await get<{ items: Credential[] }>('/v1/approvers/credentials')).items;
    const admin = ctx.can('admin');
    fill(
      listBox,
      table(
        admin ? 'Approver credentials' : 'Your credentials',
        ['Approver', 'Kind', 'Label', 'Status', 'Registered', 'Activated by', admin ? 'Actions' : ''],
        items.map((c) => [
          c.approver,
          c.kind === 'webauthn' ? 'passkey' : c.kind,
          c.label ?? '',
          pill(c.status),
          time(c.createdAt),
          c.activatedBy ?? '',
          admin ? actions(c) : c.passkey ? shortId(c.passkey.credentialId, 10) : '',
        ]),
        'No credentials yet.',
      ),
    );
  };
  const act = (c: Credential, what: 'activate' | 'revoke') => async () => {
    try {
      await post(`/v1/approvers/credentials/${c.id}/${what}`);
      fill(out, notice('ok', what === 'activate' ? `Activated ${c.approver}'s credential.` : 'Revoked.'));
      await load();
    } catch (e) {
      fill(out, notice('error', e instanceof ApiFailure ? `${e.message} (${e.code})` : String(e)));
    }
  };
  const actions = (c: Credential) =>
    h(
      'span',
      { class: 'row-actions' },
      c.status === 'pending'
        ? h(
            'button',
            {
              type: 'button',
              onclick: act(c, 'activate'),
              disabled: c.approver === ctx.session.caller,
              title:
                c.approver === ctx.session.caller
                  ? 'Another admin must activate your own credential'
                  : undefined,
              'aria-label': `Activate ${c.approver}'s ${c.label ?? c.kind}`,
            },
            'Activate',
          )
        : null,
      c.status !== 'revoked'
        ? h(
            'button',
            {
              type: 'button',
              class: 'danger',
              onclick: act(c, 'revoke'),
              'aria-label': `Revoke ${c.approver}'s ${c.label ?? c.kind}`,
            },
            'Revoke',
          )
        : null,
    );

  const label = h('input', { id: 'passkey-label', maxlength: 100, value: 'My passkey', required: true });
  const register = ctx.can('approver')
    ? h(
        'form',
        {
          class: 'card',
          onsubmit: async (ev: Event) => {
            ev.preventDefault();
            fill(out, notice('info', 'Follow your browser’s prompt to create the passkey…'));
            try {
              const options = await get<RegistrationOptions>('/v1/approvers/credentials/passkey-options');
              const registration = await createPasskey(options);
              await post('/v1/approvers/credentials', {
                kind: 'webauthn',
                label: label.value.trim() || 'passkey',
                registration,
              });
              fill(out, notice('ok', 'Passkey registered. An admin must activate it before it counts.'));
              await load();
            } catch (e) {
              fill(
                out,
                notice(
                  'error',
                  e instanceof ApiFailure
                    ? `${e.message} (${e.code})`
                    : e instanceof DOMException
                      ? 'The passkey prompt was cancelled, timed out, or this passkey is already registered.'
                      : String(e),
                ),
              );
            }
          },
        },
        h('h2', null, 'Register a passkey'),
        h(
          'p',
          null,
          `Your passkey will sign approvals for ${ctx.session.webauthn.rpId}. It counts once an admin activates it.`,
        ),
        h('label', { for: 'passkey-label' }, 'Name of this passkey'),
        label,
        h('button', { type: 'submit', class: 'primary' }, 'Create passkey'),
      )
    : null;
  fill(main, register, out, listBox);
  await load();
  return undefined;
}

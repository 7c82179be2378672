/**
 * The console's entry point: finds out who is signed in, shows the sign-in
 * page when no one is, else the navigation (only the views the person's
 * roles can read) and the view the address names (`#/approvals`, …). A view
 * is rendered into <main>, which takes the focus on each change of view.
 */
import { ApiFailure, get, onSignedOut, post, setCsrf } from './api.js';
import type { Cleanup, Role, Session, View, ViewContext } from './context.js';
import { fill, h, notice } from './dom.js';
import { openLive } from './live.js';
import { VIEWS } from './views.js';

const SIGN_IN_ERRORS: Record<string, string> = {
  no_provider: 'No identity provider is configured (console.oidc in the configuration).',
  provider_unavailable: 'The identity provider could not be reached. Try again, or tell the operator.',
  sign_in_failed: 'The identity provider’s answer was refused. Try signing in again.',
  no_role:
    'You signed in, but your identity provider gave you none of this service’s roles. Ask your administrator for one.',
  login_expired: 'The sign-in took too long or was started in another browser. Start again.',
};

interface SignInOptions {
  oidc: boolean;
  dev: boolean;
  issuer?: string;
  signedIn: boolean;
}

async function main(): Promise<void> {
  const root = document.getElementById('app');
  if (!root) return;
  let options: SignInOptions = { oidc: false, dev: false, signedIn: false };
  try {
    options = await get<SignInOptions>('/console/auth/options');
  } catch {
    // shown on the sign-in page as "no way to sign in"
  }
  if (!options.signedIn) {
    signInPage(root, options);
    return;
  }
  let session: Session;
  try {
    session = await get<Session>('/console/session');
  } catch (e) {
    if (e instanceof ApiFailure && (e.status === 401 || e.status === 403)) {
      signInPage(root, options, e.status === 403 ? e.message : undefined);
      return;
    }
    fill(root, notice('error', e instanceof Error ? e.message : 'The console could not start.'));
    return;
  }
  setCsrf(session.session?.csrf);
  shell(root, session);
}

function signInPage(root: HTMLElement, options: SignInOptions, refusal?: string): void {
  const error = new URLSearchParams(location.search).get('error');
  const returnTo = location.hash.startsWith('#/') ? location.hash : '';
  const status = h('div', { 'aria-live': 'polite' });
  const devForm = options.dev
    ? h(
        'form',
        {
          class: 'card dev',
          onsubmit: async (ev: Event) => {
            ev.preventDefault();
            const name = (document.getElementById('dev-name') as HTMLInputElement).value.trim();
            try {
              await post('/console/auth/dev', { name: name === '' ? 'dev-demo' : name });
              history.replaceState(null, '', `/console/${returnTo}`);
              location.reload();
            } catch (e) {
              fill(status, notice('error', e instanceof Error ? e.message : 'Sign-in failed.'));
            }
          },
        },
        h('h2', null, 'Development mode'),
        h(
          'p',
          { class: 'warning', role: 'note' },
          'DEVELOPMENT MODE: anyone who can open this page signs in with every role. Never run a service that signs for real parties like this.',
        ),
        h('label', { for: 'dev-name' }, 'Demo user name'),
        h('input', {
          id: 'dev-name',
          name: 'name',
          value: 'dev-demo',
          autocomplete: 'username',
          pattern: '[a-z][a-z0-9\\-]{0,39}',
          required: true,
        }),
        h('button', { type: 'submit', class: 'primary' }, 'Sign in as demo user'),
      )
    : null;
  fill(
    root,
    h(
      'main',
      { id: 'main', class: 'signin', tabindex: -1 },
      h('h1', null, 'canton-signer console'),
      h('p', null, 'Approvals, withdrawals and the audit trail of this signing service.'),
      refusal ? notice('error', refusal) : null,
      error ? notice('error', SIGN_IN_ERRORS[error] ?? 'Signing in failed. Try again.') : null,
      options.oidc
        ? h(
            'p',
            null,
            h(
              'a',
              {
                class: 'button primary',
                href: `/console/auth/login${returnTo ? `?return=${encodeURIComponent(returnTo)}` : ''}`,
              },
              `Sign in with ${options.issuer ?? 'your identity provider'}`,
            ),
          )
        : null,
      devForm,
      !options.oidc && !options.dev
        ? notice('info', 'No sign-in is configured: set console.oidc (docs/console.md).')
        : null,
      status,
    ),
  );
}

function shell(root: HTMLElement, session: Session): void {
  const can = (...roles: Role[]) => roles.some((r) => session.roles.includes(r));
  const views = VIEWS.filter((v) => v.roles.some((r) => session.roles.includes(r)));
  const live = openLive(session.roles);
  const mainEl = h('main', { id: 'main', tabindex: -1 });
  const nav = h('nav', { 'aria-label': 'Console' });
  const signOut = h(
    'button',
    {
      type: 'button',
      onclick: async () => {
        try {
          await post('/console/auth/logout');
        } finally {
          location.replace('/console/');
        }
      },
    },
    'Sign out',
  );
  fill(
    root,
    h('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    session.dev
      ? h(
          'div',
          { class: 'dev-banner', role: 'note' },
          'DEVELOPMENT MODE: demo sign-in, every role. Not for real parties.',
        )
      : null,
    h(
      'header',
      null,
      h('span', { class: 'brand' }, 'canton-signer'),
      nav,
      h(
        'div',
        { class: 'who' },
        h('span', { class: 'caller', title: session.roles.join(', ') }, session.caller),
        signOut,
      ),
    ),
    mainEl,
  );
  onSignedOut(() => {
    live.close();
    fill(
      mainEl,
      notice('info', 'Your session ended (signed out, idle too long, or expired).'),
      h('p', null, h('a', { class: 'button primary', href: '/console/' }, 'Sign in again')),
    );
  });

  let cleanup: Cleanup | undefined;
  const render = async () => {
    cleanup?.();
    cleanup = undefined;
    const hash = location.hash.replace(/^#\/?/, '');
    const [path = '', qs = ''] = hash.split('?');
    const view: View | undefined = views.find((v) => v.path === path) ?? views[0];
    fill(
      nav,
      h(
        'ul',
        null,
        views.map((v) =>
          h(
            'li',
            null,
            h('a', { href: `#/${v.path}`, 'aria-current': v === view ? 'page' : undefined }, v.title),
          ),
        ),
      ),
    );
    if (!view) {
      fill(mainEl, notice('info', 'Your roles give you no view of this console.'));
      return;
    }
    document.title = `${view.title} · canton-signer`;
    const body = h('div', { class: 'view' });
    fill(mainEl, h('h1', null, view.title), body);
    mainEl.focus({ preventScroll: true });
    const ctx: ViewContext = {
      session,
      params: new URLSearchParams(qs),
      live,
      can,
      navigate: (to) => {
        location.hash = to;
      },
    };
    try {
      cleanup = (await view.render(body, ctx)) ?? undefined;
    } catch (e) {
      fill(body, notice('error', e instanceof Error ? e.message : 'This view could not be shown.'));
    }
  };
  window.addEventListener('hashchange', () => void render());
  void render();
}

void main();

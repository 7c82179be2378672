/**
 * Keys: the signer's keys as `GET /v1/keys` describes them (public parts
 * only): label, backend, scheme, Canton fingerprint, whether it signs.
 * Read-only here; enabling and disabling stay with the API and the CLI.
 */
import { get } from './api.js';
import type { ViewContext } from './context.js';
import { fill, h, notice, pill, shortId, table, time } from './dom.js';

interface Key {
  label: string;
  backend: string;
  scheme: string;
  fingerprint: string;
  createdAt: string;
  disabled: boolean;
}

export async function renderKeys(main: HTMLElement, _ctx: ViewContext) {
  let keys: Key[];
  try {
    keys = (await get<{ keys: Key[] }>('/v1/keys')).keys;
  } catch (e) {
    fill(main, notice('error', e instanceof Error ? e.message : 'Could not load the keys.'));
    return undefined;
  }
  fill(
    main,
    table(
      'Signing keys',
      ['Label', 'Backend', 'Scheme', 'Fingerprint', 'Status', 'Created'],
      keys.map((k) => [
        h('code', null, k.label),
        k.backend,
        k.scheme,
        shortId(k.fingerprint, 20),
        k.disabled ? pill('disabled', 'revoked') : pill('enabled', 'active'),
        time(k.createdAt),
      ]),
      'The signer has no keys.',
    ),
  );
  return undefined;
}

/**
 * The environment variables the service's configuration reads
 * (`CANTON_SIGNER_*`, which win over the file), each with the setting it fills
 * and how its text becomes that setting's value. Used by `loadConfig`
 * (src/server/config.ts) and listed in docs/configuration.md.
 */
import { resolve } from 'node:path';

export type EnvKind = 'string' | 'path' | 'number' | 'boolean' | 'list' | 'oneOrList' | 'pemFiles';

export interface EnvSetting {
  path: string;
  env: readonly string[];
  kind: EnvKind;
}

/** Every environment variable the configuration reads, in order of precedence within a setting. */
export const ENV_SETTINGS: readonly EnvSetting[] = [
  { path: 'listen.host', env: ['CANTON_SIGNER_HOST'], kind: 'string' },
  { path: 'listen.port', env: ['CANTON_SIGNER_PORT'], kind: 'number' },
  { path: 'database.url', env: ['CANTON_SIGNER_DATABASE_URL', 'DATABASE_URL'], kind: 'string' },
  { path: 'database.dataDir', env: ['CANTON_SIGNER_DATA_DIR'], kind: 'string' },
  { path: 'keystore.dir', env: ['CANTON_SIGNER_KEYSTORE'], kind: 'string' },
  { path: 'network.sandbox', env: ['CANTON_SIGNER_SANDBOX'], kind: 'boolean' },
  { path: 'network.ledgerApiUrl', env: ['CANTON_SIGNER_LEDGER_API_URL'], kind: 'string' },
  { path: 'network.validatorUrl', env: ['CANTON_SIGNER_VALIDATOR_URL'], kind: 'string' },
  { path: 'network.scanUrl', env: ['CANTON_SIGNER_SCAN_URL'], kind: 'string' },
  { path: 'network.ledgerApiUser', env: ['CANTON_SIGNER_LEDGER_API_USER'], kind: 'string' },
  { path: 'network.validatorParty', env: ['CANTON_SIGNER_VALIDATOR_PARTY'], kind: 'string' },
  { path: 'auth.issuer', env: ['CANTON_SIGNER_AUTH_ISSUER'], kind: 'oneOrList' },
  { path: 'auth.audience', env: ['CANTON_SIGNER_AUTH_AUDIENCE'], kind: 'oneOrList' },
  { path: 'auth.jwksUrl', env: ['CANTON_SIGNER_AUTH_JWKS_URL'], kind: 'string' },
  { path: 'auth.publicKeys', env: ['CANTON_SIGNER_AUTH_PUBLIC_KEY_FILES'], kind: 'pemFiles' },
  { path: 'auth.sharedSecret', env: ['CANTON_SIGNER_AUTH_SHARED_SECRET'], kind: 'string' },
  { path: 'auth.algorithms', env: ['CANTON_SIGNER_AUTH_ALGORITHMS'], kind: 'list' },
  { path: 'auth.rolesClaim', env: ['CANTON_SIGNER_AUTH_ROLES_CLAIM'], kind: 'string' },
  { path: 'auth.partiesClaim', env: ['CANTON_SIGNER_AUTH_PARTIES_CLAIM'], kind: 'string' },
  { path: 'auth.clockToleranceSeconds', env: ['CANTON_SIGNER_AUTH_CLOCK_TOLERANCE_SECONDS'], kind: 'number' },
  { path: 'auth.maxTokenAgeSeconds', env: ['CANTON_SIGNER_AUTH_MAX_TOKEN_AGE_SECONDS'], kind: 'number' },
  { path: 'auth.tokenType', env: ['CANTON_SIGNER_AUTH_TOKEN_TYPE'], kind: 'string' },
  { path: 'auth.jwksCacheSeconds', env: ['CANTON_SIGNER_AUTH_JWKS_CACHE_SECONDS'], kind: 'number' },
  { path: 'auth.jwksTimeoutMs', env: ['CANTON_SIGNER_AUTH_JWKS_TIMEOUT_MS'], kind: 'number' },
  { path: 'pipeline.requireScheme', env: ['CANTON_SIGNER_REQUIRE_SCHEME'], kind: 'string' },
  { path: 'pipeline.minWindowSeconds', env: ['CANTON_SIGNER_MIN_WINDOW_SECONDS'], kind: 'number' },
  {
    path: 'pipeline.preparationTimeToleranceSeconds',
    env: ['CANTON_SIGNER_PREPARATION_TIME_TOLERANCE_SECONDS'],
    kind: 'number',
  },
  {
    path: 'pipeline.ledgerTimeToleranceSeconds',
    env: ['CANTON_SIGNER_LEDGER_TIME_TOLERANCE_SECONDS'],
    kind: 'number',
  },
  { path: 'worker.concurrency', env: ['CANTON_SIGNER_WORKER_CONCURRENCY'], kind: 'number' },
  { path: 'worker.pollMs', env: ['CANTON_SIGNER_WORKER_POLL_MS'], kind: 'number' },
  {
    path: 'worker.networkWaitSeconds',
    env: ['CANTON_SIGNER_WORKER_NETWORK_WAIT_SECONDS'],
    kind: 'number',
  },
  {
    path: 'withdrawals.requireDelivery',
    env: ['CANTON_SIGNER_WITHDRAWALS_REQUIRE_DELIVERY'],
    kind: 'boolean',
  },
  { path: 'withdrawals.offerPollMs', env: ['CANTON_SIGNER_WITHDRAWALS_OFFER_POLL_MS'], kind: 'number' },
  { path: 'airGap.exportKey', env: ['CANTON_SIGNER_AIR_GAP_EXPORT_KEY'], kind: 'string' },
  { path: 'policy.file', env: ['CANTON_SIGNER_POLICY_FILE'], kind: 'path' },
  { path: 'policy.sealKey', env: ['CANTON_SIGNER_POLICY_SEAL_KEY'], kind: 'string' },
  { path: 'exchange.ingestion.enabled', env: ['CANTON_SIGNER_INGESTION'], kind: 'boolean' },
  { path: 'webhooks.concurrency', env: ['CANTON_SIGNER_WEBHOOKS_CONCURRENCY'], kind: 'number' },
  { path: 'webhooks.pollMs', env: ['CANTON_SIGNER_WEBHOOKS_POLL_MS'], kind: 'number' },
  { path: 'log.level', env: ['CANTON_SIGNER_LOG_LEVEL'], kind: 'string' },
];

/** The file the configuration is read from when `loadConfig` is given none. */
export const CONFIG_FILE_ENV = 'CANTON_SIGNER_CONFIG';

function list(s: string): string[] {
  return s
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
}

/** An environment string as the setting's type; left as a string when it does not parse (zod reports it). */
export function fromEnv(kind: EnvKind, raw: string, cwd: string): unknown {
  switch (kind) {
    case 'string':
      return raw;
    case 'path':
      return raw === '' ? raw : resolve(cwd, raw);
    case 'number':
      return /^\s*-?\d+(\.\d+)?\s*$/.test(raw) ? Number(raw) : raw;
    case 'boolean': {
      const s = raw.trim().toLowerCase();
      if (['true', '1', 'yes'].includes(s)) return true;
      if (['false', '0', 'no'].includes(s)) return false;
      return raw;
    }
    case 'list':
      return list(raw);
    case 'oneOrList': {
      const l = list(raw);
      return l.length === 1 ? l[0] : l;
    }
    case 'pemFiles':
      return list(raw).map((f) => ({ pemFile: resolve(cwd, f) }));
  }
}

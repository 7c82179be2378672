/**
 * Service configuration: defaults, a JSON or YAML file, environment variables
 * on top; every setting validated, every problem reported at once by path and
 * environment variable, no secret in any message, and redaction for printing.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConfigError,
  ENV_SETTINGS,
  formatProblem,
  loadConfig,
  REDACTED,
  redactConfig,
  type ServiceConfig,
} from '../../src/server/config.js';

let dir: string;
const pem = {
  rsa: '',
  rsaPrivate: '',
  rsa1024: '',
  ec: '',
  ed: '',
  secp256k1: '',
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cs-config-'));
  const spki = { type: 'spki', format: 'pem' } as const;
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  pem.rsa = rsa.publicKey.export(spki) as string;
  pem.rsaPrivate = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  pem.rsa1024 = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export(spki) as string;
  pem.ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export(spki) as string;
  pem.ed = generateKeyPairSync('ed25519').publicKey.export(spki) as string;
  pem.secp256k1 = generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).publicKey.export(spki) as string;
  writeFileSync(join(dir, 'idp.pem'), pem.rsa);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A configuration file's content, loosely typed so tests can break it. */
type Raw = { auth: Record<string, unknown>; [setting: string]: unknown };

/** A small valid configuration (as a file's content). */
function base(): Raw {
  return {
    network: { sandbox: true },
    auth: { issuer: 'https://idp.example.com/', audience: 'canton-signer', publicKeys: [{ pem: pem.ec }] },
  };
}

let n = 0;
function file(content: unknown, ext = '.json'): string {
  const f = join(dir, `c${n++}${ext}`);
  writeFileSync(f, typeof content === 'string' ? content : JSON.stringify(content));
  return f;
}

async function problems(opts: Parameters<typeof loadConfig>[0]): Promise<string[]> {
  const e = await loadConfig(opts).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'the configuration was accepted').toBeInstanceOf(ConfigError);
  return (e as ConfigError).problems.map(formatProblem);
}

/** The problems of `base()` with one change. */
function withChange(change: (c: Raw) => void) {
  const c = base() as Raw;
  change(c);
  return problems({ file: file(c), env: {} });
}

describe('loading', () => {
  it('fills defaults around the few required settings', async () => {
    const cfg = await loadConfig({ file: file(base()), env: {}, cwd: '/srv/cs' });
    expect(cfg).toMatchObject<Partial<ServiceConfig>>({
      listen: { host: '127.0.0.1', port: 8080 },
      database: { dataDir: '/srv/cs/data' },
      keystore: { dir: '/srv/cs/keystore' },
      network: { sandbox: true },
      pipeline: {
        minWindowSeconds: 0,
        preparationTimeToleranceSeconds: 86_400,
        ledgerTimeToleranceSeconds: 60,
      },
      log: { level: 'info' },
    });
    expect(cfg.auth).toMatchObject({
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      rolesClaim: 'canton_signer_roles',
      partiesClaim: 'canton_signer_parties',
      clockToleranceSeconds: 30,
      jwksCacheSeconds: 600,
      jwksTimeoutMs: 5000,
    });
    expect(cfg.database.url).toBeUndefined();
  });

  it('reads a full JSON file; relative paths are relative to the file', async () => {
    const f = file({
      listen: { host: '0.0.0.0', port: 9000 },
      database: { url: 'postgresql://cs:pw@db.internal:5432/cs', dataDir: 'var/data' },
      keystore: { dir: '../keys' },
      network: {
        ledgerApiUrl: 'https://participant.example.com',
        validatorUrl: 'https://validator.example.com/api/validator',
        scanUrl: 'https://scan.example.com/api/scan',
        ledgerApiUser: 'custody',
      },
      auth: {
        issuer: ['https://a/', 'https://b/'],
        audience: 'cs',
        publicKeys: [{ pemFile: 'idp.pem', kid: 'k1', alg: 'RS256' }],
        algorithms: ['RS256'],
        rolesClaim: 'roles',
        partiesClaim: 'parties',
        clockToleranceSeconds: 5,
      },
      pipeline: { requireScheme: 'v3', minWindowSeconds: 60, ledgerTimeToleranceSeconds: 30 },
      log: { level: 'debug' },
    });
    const cfg = await loadConfig({ file: f, env: {} });
    expect(cfg.listen).toEqual({ host: '0.0.0.0', port: 9000 });
    expect(cfg.database).toEqual({
      url: 'postgresql://cs:pw@db.internal:5432/cs',
      dataDir: join(dir, 'var/data'),
    });
    expect(cfg.keystore.dir).toBe(join(dir, '..', 'keys'));
    expect(cfg.network).toMatchObject({ sandbox: false, ledgerApiUser: 'custody' });
    expect(cfg.auth.publicKeys[0]).toMatchObject({ kid: 'k1', alg: 'RS256', pem: pem.rsa });
    expect(cfg.auth.issuer).toEqual(['https://a/', 'https://b/']);
    expect(cfg.pipeline).toEqual({
      requireScheme: 'v3',
      minWindowSeconds: 60,
      preparationTimeToleranceSeconds: 86_400,
      ledgerTimeToleranceSeconds: 30,
    });
    expect(cfg.log.level).toBe('debug');
  });

  it('reads YAML', async () => {
    const f = file(
      [
        'network:',
        '  sandbox: true',
        'listen:',
        '  port: 7001',
        'auth:',
        '  issuer: https://idp/',
        '  audience: [a, b]',
        '  jwksUrl: https://idp/.well-known/jwks.json',
      ].join('\n'),
      '.yaml',
    );
    const cfg = await loadConfig({ file: f, env: {} });
    expect(cfg.listen.port).toBe(7001);
    expect(cfg.auth.audience).toEqual(['a', 'b']);
    expect(cfg.auth.jwksUrl).toBe('https://idp/.well-known/jwks.json');
  });

  it('lets environment variables override the file, and finds the file through CANTON_SIGNER_CONFIG', async () => {
    const f = file({ ...base(), listen: { port: 1 }, log: { level: 'warn' } });
    const cfg = await loadConfig({
      env: {
        CANTON_SIGNER_CONFIG: f,
        CANTON_SIGNER_PORT: '8443',
        CANTON_SIGNER_HOST: '::',
        CANTON_SIGNER_SANDBOX: 'false',
        CANTON_SIGNER_LEDGER_API_URL: 'http://p:7575',
        CANTON_SIGNER_VALIDATOR_URL: 'http://p:7575/api/validator',
        CANTON_SIGNER_LEDGER_API_USER: 'u',
        CANTON_SIGNER_AUTH_AUDIENCE: 'x, y',
        CANTON_SIGNER_AUTH_ISSUER: 'https://only/',
        CANTON_SIGNER_AUTH_ALGORITHMS: 'ES256,HS512',
        CANTON_SIGNER_AUTH_SHARED_SECRET: 'k'.repeat(64),
        CANTON_SIGNER_AUTH_CLOCK_TOLERANCE_SECONDS: '0',
        CANTON_SIGNER_AUTH_MAX_TOKEN_AGE_SECONDS: '900',
        CANTON_SIGNER_AUTH_TOKEN_TYPE: 'at+jwt',
        CANTON_SIGNER_AUTH_ROLES_CLAIM: 'r',
        DATABASE_URL: 'postgres://generic@h/db',
        CANTON_SIGNER_DATABASE_URL: 'postgres://specific@h/db',
        CANTON_SIGNER_DATA_DIR: 'd',
        CANTON_SIGNER_KEYSTORE: '/k',
        CANTON_SIGNER_REQUIRE_SCHEME: 'v3',
        CANTON_SIGNER_MIN_WINDOW_SECONDS: '2.5',
        CANTON_SIGNER_PREPARATION_TIME_TOLERANCE_SECONDS: '172800',
        CANTON_SIGNER_LOG_LEVEL: '',
      },
      cwd: '/w',
    });
    expect(cfg.listen).toEqual({ host: '::', port: 8443 });
    expect(cfg.network).toMatchObject({ sandbox: false, ledgerApiUrl: 'http://p:7575', ledgerApiUser: 'u' });
    expect(cfg.auth).toMatchObject({
      audience: ['x', 'y'],
      issuer: 'https://only/',
      algorithms: ['ES256', 'HS512'],
      clockToleranceSeconds: 0,
      maxTokenAgeSeconds: 900,
      tokenType: 'at+jwt',
      rolesClaim: 'r',
    });
    expect(cfg.database).toEqual({ url: 'postgres://specific@h/db', dataDir: '/w/d' });
    expect(cfg.keystore.dir).toBe('/k');
    expect(cfg.pipeline).toEqual({
      requireScheme: 'v3',
      minWindowSeconds: 2.5,
      preparationTimeToleranceSeconds: 172_800,
      ledgerTimeToleranceSeconds: 60,
    });
    expect(cfg.log.level).toBe('warn'); // an empty variable counts as unset
  });

  it('takes public key files and DATABASE_URL from the environment alone', async () => {
    const cfg = await loadConfig({
      env: {
        CANTON_SIGNER_SANDBOX: '1',
        CANTON_SIGNER_AUTH_ISSUER: 'i',
        CANTON_SIGNER_AUTH_AUDIENCE: 'a',
        CANTON_SIGNER_AUTH_PUBLIC_KEY_FILES: 'idp.pem',
        DATABASE_URL: 'postgres://h/db',
      },
      cwd: dir,
    });
    expect(cfg.auth.publicKeys).toEqual([{ pemFile: join(dir, 'idp.pem'), pem: pem.rsa }]);
    expect(cfg.database.url).toBe('postgres://h/db');
  });

  it('uses the defaults layer below file and environment', async () => {
    const cfg = await loadConfig({
      defaults: { listen: { port: 1234 }, ...base() },
      file: file({ log: { level: 'error' } }),
      env: { CANTON_SIGNER_HOST: 'h' },
    });
    expect(cfg.listen).toEqual({ host: 'h', port: 1234 });
    expect(cfg.log.level).toBe('error');
  });

  it('reports a file it cannot use, without quoting it', async () => {
    expect(await problems({ file: join(dir, 'missing.json'), env: {} })).toEqual([
      expect.stringMatching(/^\(file\) \(CANTON_SIGNER_CONFIG\): cannot read .*missing\.json \(ENOENT\)$/),
    ]);
    const bad = await problems({ file: file('{"auth": {"sharedSecret": "hunter2hunter2" oops}}'), env: {} });
    expect(bad).toEqual([expect.stringMatching(/is not valid JSON$/)]);
    expect(bad.join()).not.toContain('hunter2');
    const badYaml = await problems({
      file: file('auth:\n  sharedSecret: "hunter2\n  x: [', '.yml'),
      env: {},
    });
    expect(badYaml).toEqual([expect.stringMatching(/is not valid YAML \(line \d+, column \d+\)$/)]);
    expect(badYaml.join()).not.toContain('hunter2');
    expect(await problems({ file: file('[]'), env: {} })).toEqual([
      expect.stringMatching(/must hold an object/),
    ]);
    expect(await problems({ file: file('x=1', '.ini'), env: {} })).toEqual([
      expect.stringMatching(/unknown configuration format/),
    ]);
  });
});

describe('validation', () => {
  it('lists every problem at once, by path and environment variable', async () => {
    const list = await problems({
      file: file({
        listen: { port: 'http' },
        auth: { clockToleranceSeconds: 9999, maxTokenAgeSeconds: 1.5, tokenType: '' },
        log: { level: 'loud' },
        extra: 1,
      }),
      env: { CANTON_SIGNER_PORT: '', CANTON_SIGNER_MIN_WINDOW_SECONDS: 'soon' },
    });
    expect(list).toEqual(
      expect.arrayContaining([
        'listen.port (CANTON_SIGNER_PORT): Invalid input: expected number, received string',
        'auth.issuer (CANTON_SIGNER_AUTH_ISSUER): required',
        'auth.audience (CANTON_SIGNER_AUTH_AUDIENCE): required',
        'auth.clockToleranceSeconds (CANTON_SIGNER_AUTH_CLOCK_TOLERANCE_SECONDS): at most 300',
        'auth.maxTokenAgeSeconds (CANTON_SIGNER_AUTH_MAX_TOKEN_AGE_SECONDS): a whole number of seconds',
        expect.stringMatching(/^auth\.tokenType \(CANTON_SIGNER_AUTH_TOKEN_TYPE\): /),
        expect.stringMatching(/^auth\.jwksUrl \(CANTON_SIGNER_AUTH_JWKS_URL\): no key to verify/),
        'pipeline.minWindowSeconds (CANTON_SIGNER_MIN_WINDOW_SECONDS): Invalid input: expected number, received string',
        expect.stringMatching(/^log\.level \(CANTON_SIGNER_LOG_LEVEL\): Invalid option/),
        'extra: unknown setting',
        'network.ledgerApiUrl (CANTON_SIGNER_LEDGER_API_URL): required unless network.sandbox is true',
        'network.validatorUrl (CANTON_SIGNER_VALIDATOR_URL): required unless network.sandbox is true',
        'network.ledgerApiUser (CANTON_SIGNER_LEDGER_API_USER): required unless network.sandbox is true',
      ]),
    );
    expect(list).toHaveLength(13);
    const e = await loadConfig({ env: {} }).catch((err: ConfigError) => err);
    expect((e as ConfigError).message).toMatch(/^invalid configuration \(\d+ problems\):\n {2}/);
    expect((e as ConfigError).message).toContain('auth.audience (CANTON_SIGNER_AUTH_AUDIENCE): required');
  });

  it('names the variable that supplied a bad value, or all that could', async () => {
    expect(await problems({ file: file(base()), env: { DATABASE_URL: 'mysql://u:pw@h/db' } })).toEqual([
      'database.url (DATABASE_URL): must be a postgres:// or postgresql:// URL with a host',
    ]);
    const c = base();
    (c as Raw).database = { url: 'nope' };
    expect(await problems({ file: file(c), env: {} })).toEqual([
      'database.url (CANTON_SIGNER_DATABASE_URL or DATABASE_URL): must be a postgres:// or postgresql:// URL with a host',
    ]);
  });

  // One bad setting on a valid base: exactly one problem, at that path.
  const cases: [string, (c: Raw) => void, RegExp][] = [
    [
      'listen.host',
      (c) => (c.listen = { host: '' }),
      /^listen\.host \(CANTON_SIGNER_HOST\): must not be empty/,
    ],
    ['listen.port range', (c) => (c.listen = { port: 70000 }), /^listen\.port .*65535/],
    ['listen.port integer', (c) => (c.listen = { port: 80.5 }), /^listen\.port .*integer/],
    [
      'database.dataDir',
      (c) => (c.database = { dataDir: '' }),
      /^database\.dataDir \(CANTON_SIGNER_DATA_DIR\)/,
    ],
    [
      'keystore.dir',
      (c) => (c.keystore = { dir: 3 }),
      /^keystore\.dir \(CANTON_SIGNER_KEYSTORE\): Invalid input/,
    ],
    [
      'network.sandbox type',
      (c) => (c.network = { sandbox: 'yes' }),
      /^network\.sandbox \(CANTON_SIGNER_SANDBOX\)/,
    ],
    [
      'network.sandbox with URLs',
      (c) => (c.network = { sandbox: true, scanUrl: 'https://scan' }),
      /^network\.sandbox .*cannot be combined with network\.scanUrl/,
    ],
    [
      'network.ledgerApiUrl',
      (c) => (c.network = { ledgerApiUrl: 'ftp://x', validatorUrl: 'https://v', ledgerApiUser: 'u' }),
      /^network\.ledgerApiUrl \(CANTON_SIGNER_LEDGER_API_URL\): must be an http\(s\) URL/,
    ],
    [
      'network.validatorUrl',
      (c) => (c.network = { ledgerApiUrl: 'https://p', validatorUrl: 'not a url', ledgerApiUser: 'u' }),
      /^network\.validatorUrl .*not a URL/,
    ],
    [
      'network.ledgerApiUser',
      (c) => (c.network = { sandbox: true, ledgerApiUser: '' }),
      /^network\.ledgerApiUser/,
    ],
    [
      'network unknown key',
      (c) => (c.network = { sandbox: true, ledgerApi: 'x' }),
      /^network\.ledgerApi: unknown setting/,
    ],
    ['auth.issuer', (c) => (c.auth.issuer = []), /^auth\.issuer \(CANTON_SIGNER_AUTH_ISSUER\)/],
    [
      'auth.audience',
      (c) => (c.auth.audience = 5),
      /^auth\.audience .*must be a string or a list of strings/,
    ],
    [
      'auth.jwksUrl plain http',
      (c) => {
        c.auth.publicKeys = [];
        c.auth.jwksUrl = 'http://idp.example.com/jwks';
      },
      /^auth\.jwksUrl \(CANTON_SIGNER_AUTH_JWKS_URL\): must be https/,
    ],
    [
      'auth.jwksUrl with publicKeys',
      (c) => (c.auth.jwksUrl = 'https://idp/jwks'),
      /^auth\.publicKeys .*not both/,
    ],
    [
      'auth.publicKeys private key',
      (c) => (c.auth.publicKeys = [{ pem: pem.rsaPrivate }]),
      /^auth\.publicKeys\[0\]\.pem \(CANTON_SIGNER_AUTH_PUBLIC_KEY_FILES\): is a private key/,
    ],
    [
      'auth.publicKeys garbage',
      (c) => (c.auth.publicKeys = [{ pem: 'hello' }]),
      /^auth\.publicKeys\[0\]\.pem .*not a PEM/,
    ],
    [
      'auth.publicKeys broken PEM',
      (c) => (c.auth.publicKeys = [{ pem: '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n' }]),
      /not a readable PEM public key/,
    ],
    [
      'auth.publicKeys small RSA',
      (c) => (c.auth.publicKeys = [{ pem: pem.rsa1024 }]),
      /1024 bits; at least 2048/,
    ],
    ['auth.publicKeys curve', (c) => (c.auth.publicKeys = [{ pem: pem.secp256k1 }]), /curve secp256k1/],
    [
      'auth.publicKeys missing file',
      (c) => (c.auth.publicKeys = [{ pemFile: 'nope.pem' }]),
      /^auth\.publicKeys\[0\]\.pemFile .*cannot be read/,
    ],
    [
      'auth.publicKeys two sources',
      (c) => (c.auth.publicKeys = [{ pem: pem.ec, jwk: { kty: 'EC' } }]),
      /exactly one of pem, pemFile or jwk/,
    ],
    [
      'auth.publicKeys private JWK',
      (c) => (c.auth.publicKeys = [{ jwk: { kty: 'EC', crv: 'P-256', x: 'a', y: 'b', d: 'c' } }]),
      /^auth\.publicKeys\[0\]\.jwk .*private key material/,
    ],
    [
      'auth.publicKeys oct JWK',
      (c) => (c.auth.publicKeys = [{ jwk: { kty: 'oct', k: 'abc' } }]),
      /symmetric key/,
    ],
    [
      'auth.publicKeys bad JWK',
      (c) => (c.auth.publicKeys = [{ jwk: { kty: 'EC', crv: 'P-256', x: 'a' } }]),
      /not a valid public JWK/,
    ],
    [
      'auth.publicKeys alg type',
      (c) => (c.auth.publicKeys = [{ pem: pem.ec, alg: 'RS256' }]),
      /^auth\.publicKeys\[0\]\.alg .*does not fit/,
    ],
    [
      'auth.publicKeys alg not allowed',
      (c) => (c.auth.publicKeys = [{ pem: pem.rsa, alg: 'PS256' }]),
      /^auth\.publicKeys\[0\]\.alg .*PS256 is not in auth\.algorithms/,
    ],
    [
      'auth.publicKeys fits no algorithm',
      (c) => (c.auth.algorithms = ['RS256']),
      /^auth\.publicKeys\[0\] .*fits none of auth\.algorithms/,
    ],
    [
      'auth.algorithms none',
      (c) => (c.auth.algorithms = ['ES256', 'none']),
      /^auth\.algorithms\[1\] .*'none' never is/,
    ],
    ['auth.algorithms empty', (c) => (c.auth.algorithms = []), /^auth\.algorithms .*must not be empty/],
    [
      'auth.algorithms HS without secret',
      (c) => (c.auth.algorithms = ['ES256', 'HS256']),
      /^auth\.sharedSecret \(CANTON_SIGNER_AUTH_SHARED_SECRET\): required when auth\.algorithms includes HS256/,
    ],
    [
      'auth.sharedSecret without HS',
      (c) => (c.auth.sharedSecret = 'x'.repeat(40)),
      /^auth\.algorithms .*no HS256\/HS384\/HS512 algorithm is allowed/,
    ],
    [
      'auth.sharedSecret too short',
      (c) => {
        c.auth.algorithms = ['ES256', 'HS512'];
        c.auth.sharedSecret = 'y'.repeat(40);
      },
      /^auth\.sharedSecret .*at least 64 bytes/,
    ],
    [
      'auth.rolesClaim',
      (c) => (c.auth.rolesClaim = ''),
      /^auth\.rolesClaim \(CANTON_SIGNER_AUTH_ROLES_CLAIM\)/,
    ],
    [
      'auth.partiesClaim',
      (c) => (c.auth.partiesClaim = ['p']),
      /^auth\.partiesClaim \(CANTON_SIGNER_AUTH_PARTIES_CLAIM\)/,
    ],
    [
      'auth.clockToleranceSeconds',
      (c) => (c.auth.clockToleranceSeconds = -1),
      /^auth\.clockToleranceSeconds/,
    ],
    [
      'auth.jwksCacheSeconds',
      (c) => (c.auth.jwksCacheSeconds = -5),
      /^auth\.jwksCacheSeconds \(CANTON_SIGNER_AUTH_JWKS_CACHE_SECONDS\)/,
    ],
    [
      'auth.jwksTimeoutMs',
      (c) => (c.auth.jwksTimeoutMs = 0),
      /^auth\.jwksTimeoutMs \(CANTON_SIGNER_AUTH_JWKS_TIMEOUT_MS\)/,
    ],
    ['auth unknown key', (c) => (c.auth.audiance = 'x'), /^auth\.audiance: unknown setting/],
    [
      'pipeline.requireScheme',
      (c) => (c.pipeline = { requireScheme: 'v4' }),
      /^pipeline\.requireScheme \(CANTON_SIGNER_REQUIRE_SCHEME\)/,
    ],
    [
      'pipeline.minWindowSeconds',
      (c) => (c.pipeline = { minWindowSeconds: -1 }),
      /^pipeline\.minWindowSeconds/,
    ],
    ['log.level', (c) => (c.log = { level: 'loud' }), /^log\.level \(CANTON_SIGNER_LOG_LEVEL\)/],
  ];

  it.each(cases)('rejects a bad %s', async (_name, change, pattern) => {
    const list = await withChange(change);
    expect(list, list.join('\n')).toHaveLength(1);
    expect(list[0]).toMatch(pattern);
  });

  it('accepts each key type with the algorithms that fit it, and HS-only with a secret', async () => {
    for (const [key, algs] of [
      [pem.rsa, ['RS256', 'PS512']],
      [pem.ec, ['ES256']],
      [pem.ed, ['EdDSA', 'Ed25519']],
    ] as const) {
      const c = base() as Raw;
      c.auth.publicKeys = [{ pem: key }];
      c.auth.algorithms = algs;
      await expect(loadConfig({ file: file(c), env: {} })).resolves.toBeDefined();
    }
    const c = base() as Raw;
    c.auth = { issuer: 'i', audience: 'a', algorithms: ['HS256'], sharedSecret: 'z'.repeat(32) };
    await expect(loadConfig({ file: file(c), env: {} })).resolves.toBeDefined();
  });

  it('never puts a secret value in a problem', async () => {
    const secret = 'Sup3rS3cretSup3rS3cret';
    const c = base() as Raw;
    c.auth.algorithms = ['HS256'];
    c.auth.sharedSecret = secret; // too short for HS256
    const list = await problems({
      file: file(c),
      env: { DATABASE_URL: `mysql://admin:${secret}@db/x`, CANTON_SIGNER_PORT: secret },
    });
    expect(list.length).toBeGreaterThanOrEqual(3);
    expect(list.join('\n')).not.toContain(secret);
    const priv = await withChange((x) => (x.auth.publicKeys = [{ pem: pem.rsaPrivate }]));
    expect(priv.join('\n')).not.toContain(pem.rsaPrivate.split('\n')[1]);
  });

  it('maps every documented environment variable to a setting', () => {
    const names = ENV_SETTINGS.flatMap((s) => s.env);
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) expect(n).toMatch(/^(CANTON_SIGNER_[A-Z0-9_]+|DATABASE_URL)$/);
  });
});

describe('redactConfig', () => {
  it('replaces secrets and passwords, leaves the rest and the original alone', async () => {
    const secret = 'q'.repeat(48);
    const cfg = await loadConfig({
      env: {
        CANTON_SIGNER_AUTH_ISSUER: 'https://idp/',
        CANTON_SIGNER_AUTH_AUDIENCE: 'cs',
        CANTON_SIGNER_AUTH_ALGORITHMS: 'HS384',
        CANTON_SIGNER_AUTH_SHARED_SECRET: secret,
        DATABASE_URL: 'postgresql://cs:p%40ss-word@db:5432/cs?sslmode=require&sslpassword=kpass',
        CANTON_SIGNER_LEDGER_API_URL: 'https://user:ledgerpw@participant/',
        CANTON_SIGNER_VALIDATOR_URL: 'https://validator/api/validator?token=abc',
        CANTON_SIGNER_LEDGER_API_USER: 'custody',
      },
    });
    const shown = redactConfig(cfg);
    const text = JSON.stringify(shown);
    for (const s of [secret, 'p%40ss-word', 'kpass', 'ledgerpw', 'token=abc']) expect(text).not.toContain(s);
    expect(shown.auth.sharedSecret).toBe(REDACTED);
    expect(shown.database.url).toBe(
      'postgresql://cs:REDACTED@db:5432/cs?sslmode=require&sslpassword=REDACTED',
    );
    expect(shown.network.ledgerApiUrl).toBe('https://user:REDACTED@participant/');
    expect(shown.network.ledgerApiUser).toBe('custody');
    expect(shown.auth.algorithms).toEqual(['HS384']);
    expect(shown.listen).toEqual(cfg.listen);
    expect(cfg.auth.sharedSecret).toBe(secret);
    expect(cfg.database.url).toContain('p%40ss-word');
  });
});

/**
 * The shipped example configuration (canton-signer.example.yaml) and the test
 * token issuer (`canton-signer token issuer` / `token mint`): the example
 * loads with the service's own configuration loader and names every setting;
 * `serve` started with it accepts a minted token and refuses tokens from
 * another issuer or key; the issuer's private key is owner-only and never
 * overwritten; bad mint arguments are usage errors (exit 2).
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ENV_SETTINGS, loadConfig } from '../../src/server/config.js';
import { cliEnv, ROOT, runCli } from '../support/cli.js';
import { seedPgliteDir } from '../support/pg.js';
import { LISTENING, startServe, stopAll } from '../support/serve-process.js';

const EXAMPLE = join(ROOT, 'canton-signer.example.yaml');
let dir: string;

const cli = (args: string[]) => runCli(args, { env: cliEnv() });
const at = (f: string) => join(dir, f);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-token-'));
  const r = await cli([
    'token',
    'issuer',
    '--key',
    at('issuer-key.pem'),
    '--public-key',
    at('issuer-public.pem'),
  ]);
  expect(r.status, r.stderr).toBe(0);
  await copyFile(EXAMPLE, at('canton-signer.yaml'));
});
afterEach(() => stopAll());
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('canton-signer token issuer', () => {
  it('writes an owner-only private key and a public key, prints auth settings, never overwrites', async () => {
    expect((await stat(at('issuer-key.pem'))).mode & 0o777).toBe(0o600);
    expect(await readFile(at('issuer-key.pem'), 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(await readFile(at('issuer-public.pem'), 'utf8')).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    const before = await readFile(at('issuer-key.pem'), 'utf8');
    const again = await cli(['token', 'issuer', '--key', at('issuer-key.pem'), '--public-key', at('x.pem')]);
    expect(again.status).toBe(2);
    expect(again.stderr).toContain(`${at('issuer-key.pem')} already exists: not overwritten`);
    expect(await readFile(at('issuer-key.pem'), 'utf8')).toBe(before);
    // a public key file in the way: nothing written, not even the private half
    const half = await cli([
      'token',
      'issuer',
      '--key',
      at('k2.pem'),
      '--public-key',
      at('issuer-public.pem'),
    ]);
    expect(half.status).toBe(2);
    expect(half.stderr).toContain(`${at('issuer-public.pem')} already exists`);
    expect(existsSync(at('k2.pem'))).toBe(false);
    const other = await mkdtemp(join(tmpdir(), 'canton-signer-token-2-'));
    try {
      const r = await cli([
        'token',
        'issuer',
        '--key',
        join(other, 'k.pem'),
        '--public-key',
        join(other, 'p.pem'),
        '--issuer',
        'https://idp.test/',
      ]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain('issuer: https://idp.test/');
      expect(r.stdout).toContain(`publicKeys: [{ pemFile: ${join(other, 'p.pem')}, kid: test-issuer }]`);
      expect(r.stdout).not.toContain('PRIVATE KEY');
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });
});

describe('canton-signer.example.yaml', () => {
  it("loads with the service's configuration loader and names every setting", async () => {
    const cfg = await loadConfig({ file: at('canton-signer.yaml'), env: {} });
    expect(cfg.network.sandbox).toBe(true);
    expect(cfg.auth.issuer).toBe('canton-signer-test-issuer');
    expect(cfg.auth.audience).toBe('canton-signer');
    expect(cfg.auth.publicKeys[0]?.pem).toMatch(/BEGIN PUBLIC KEY/);
    expect(cfg.keystore.dir).toBe(at('keystore'));
    const text = await readFile(EXAMPLE, 'utf8');
    for (const s of ENV_SETTINGS) {
      const leaf = s.path.split('.').at(-1)!;
      expect(text, `the example shows ${s.path}`).toMatch(new RegExp(`^\\s*#?\\s*(- \\{ )?${leaf}:`, 'm'));
    }
  });
});

describe('a minted token against serve with the example configuration', () => {
  it('is accepted; a token of another issuer or signed by another key is refused (401)', async () => {
    // The subject is the tokens: the example's embedded database (./data) starts as an existing
    // one, which spares initdb.
    await seedPgliteDir(at('data'));
    const s = startServe(['--config', at('canton-signer.yaml')], {
      cwd: dir,
      env: { CANTON_SIGNER_PORT: '0', CANTON_SIGNER_PASSPHRASE: 'token-test-passphrase-long-enough' },
    });
    const url = (await s.waitFor(LISTENING, 60_000))[1]!;
    const mint = async (extra: string[]) => {
      const r = await cli(['token', 'mint', '--key', at('issuer-key.pem'), '--sub', 'tester', ...extra]);
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim();
    };
    const get = (token: string) =>
      fetch(`${url}/v1/keys`, { headers: { authorization: `Bearer ${token}` } }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as { code?: string },
      }));

    const good = await mint(['--roles', 'admin,auditor', '--expires-in', '10m']);
    expect((await get(good)).status).toBe(200);

    const wrongIssuer = await mint(['--roles', 'admin', '--issuer', 'someone-else']);
    expect(await get(wrongIssuer)).toMatchObject({ status: 401, body: { code: 'wrong_issuer' } });

    const otherDir = await mkdtemp(join(tmpdir(), 'canton-signer-token-3-'));
    try {
      const k = join(otherDir, 'k.pem');
      expect(
        (await cli(['token', 'issuer', '--key', k, '--public-key', join(otherDir, 'p.pem')])).status,
      ).toBe(0);
      const r = await cli(['token', 'mint', '--key', k, '--sub', 'tester', '--roles', 'admin']);
      expect(await get(r.stdout.trim())).toMatchObject({ status: 401, body: { code: 'bad_signature' } });
    } finally {
      await rm(otherDir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('canton-signer token mint: bad arguments', () => {
  it('exit 2 naming the problem: an unknown role, a withdrawer without parties, a missing key file', async () => {
    const base = ['token', 'mint', '--key', at('issuer-key.pem'), '--sub', 'x'];
    const role = await cli([...base, '--roles', 'root']);
    expect(role.status).toBe(2);
    expect(role.stderr).toContain('--roles: root is not a role; the roles are admin, operator, withdrawer');
    const w = await cli([...base, '--roles', 'withdrawer']);
    expect(w.status).toBe(2);
    expect(w.stderr).toContain('a withdrawer token must list the parties');
    const missing = await cli(['token', 'mint', '--key', at('nope.pem'), '--sub', 'x', '--roles', 'admin']);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('create one with `canton-signer token issuer`');
  });
});

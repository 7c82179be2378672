/**
 * `canton-signer serve` as a real process: a bad configuration exits 2 naming
 * each bad setting and no secret, and so does `--dev` with a configuration
 * that leaves the built-in sandbox; a good one listens, answers, logs JSON with
 * the configuration redacted, and on SIGTERM finishes the request in flight
 * (held back by a sandbox latency fault) before it exits 0. What another
 * process holds: a port in use (serve, sandbox) and a data folder a running
 * service holds (a second serve, audit verify) exit 75 with one sentence
 * naming it and what to do; the embedded database's files are owner-only
 * even in a folder of mode 0777 under umask 000. Where the subject is not a
 * first start, the service starts on a copy of an existing embedded database
 * (`seedPgliteDir`), which spares it initdb.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildDist, runCli } from '../support/cli.js';
import { seedPgliteDir } from '../support/pg.js';
import { LISTENING, SANDBOX_ORIGIN, startServe, stopAll } from '../support/serve-process.js';
import { testSigner } from '../support/test-signer.js';

const SECRET = 'serve-test-shared-secret-0123456789-abcdef';
const PASSPHRASE = 'serve-test-passphrase-do-not-log';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-serve-'));
});
afterEach(() => stopAll());
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('serve: configuration errors', () => {
  it('exits 2 naming every bad setting, without the secret values', async () => {
    const r = await runCli(['serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        CANTON_SIGNER_SANDBOX: 'true',
        CANTON_SIGNER_AUTH_SHARED_SECRET: 'short-secret-XYZZY',
        CANTON_SIGNER_AUTH_ALGORITHMS: 'HS256',
        CANTON_SIGNER_DATABASE_URL: 'postgres://user:pw-PLUGH@/nohost',
        CANTON_SIGNER_PORT: 'eighty',
      },
    });
    expect(r.status).toBe(2);
    const all = r.stdout + r.stderr;
    expect(r.stderr).toMatch(/invalid configuration/);
    expect(r.stderr).toMatch(/auth\.issuer/);
    expect(r.stderr).toMatch(/auth\.audience/);
    expect(r.stderr).toMatch(
      /auth\.sharedSecret \(CANTON_SIGNER_AUTH_SHARED_SECRET\): must be at least 32 bytes/,
    );
    expect(r.stderr).toMatch(/database\.url \(CANTON_SIGNER_DATABASE_URL\)/);
    expect(r.stderr).toMatch(/listen\.port \(CANTON_SIGNER_PORT\)/);
    expect(all).not.toMatch(/XYZZY|PLUGH/);
  });

  it('exits 2 for an unreadable or unknown configuration file', async () => {
    const bad = join(dir, 'bad.json');
    await writeFile(
      bad,
      JSON.stringify({ listen: { port: 1 }, nonsense: true, auth: { sharedSecret: 'XYZZY' } }),
    );
    const r = await runCli(['serve', '--config', bad], { env: { PATH: process.env.PATH ?? '' } });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/nonsense: unknown setting/);
    expect(r.stderr).toMatch(/network\.ledgerApiUrl/);
    expect(r.stdout + r.stderr).not.toMatch(/XYZZY/);
    const missing = await runCli(['serve', '--config', join(dir, 'nope.json')], {
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/cannot read .*nope\.json/);
  });

  it('exits 2 for a malformed or missing policy file, naming the setting, the line and the field', async () => {
    const policy = join(dir, 'bad-policy.yaml');
    await writeFile(policy, 'version: 1\nrules:\n  - id: r\n    decision: deny\n');
    const config = join(dir, 'policy-config.json');
    const write = (file: string) =>
      writeFile(
        config,
        JSON.stringify({
          network: { sandbox: true },
          database: { dataDir: join(dir, 'policy-data') },
          keystore: { dir: join(dir, 'policy-keys') },
          auth: { issuer: 'i', audience: 'a', sharedSecret: SECRET, algorithms: ['HS256'] },
          policy: { file },
        }),
      );
    const env = { PATH: process.env.PATH ?? '', CANTON_SIGNER_PASSPHRASE: PASSPHRASE };
    await seedPgliteDir(join(dir, 'policy-data'));
    await write(policy);
    const r = await runCli(['serve', '--config', config, '--port', '0'], { env });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/policy\.file .*line 4, column \d+: rules\[0\]\.decision: .*reason/);
    expect(r.stderr).not.toMatch(/internal error/);
    await write(join(dir, 'no-such-policy.yaml'));
    const missing = await runCli(['serve', '--config', config, '--port', '0'], { env });
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/cannot read the policy file .*no-such-policy\.yaml \(no such file\)/);
  });
});

describe('serve: keys at start', () => {
  it('a wrong keystore passphrase stops the start (exit 1, the keystore named, not the passphrase)', async () => {
    buildDist(['cli/serve.js', 'server/service.js', 'keys/file-backend.js', 'keys/signer.js']);
    const keystore = join(dir, 'ks-wrong');
    const signer = testSigner(keystore, 'the-right-passphrase');
    await signer.generate({ label: 'treasury', scheme: 'ed25519', backend: 'file' });
    await signer.close();
    await seedPgliteDir(join(dir, 'ks-wrong-data'));
    const r = await runCli(['serve'], {
      env: serveEnv(join(dir, 'ks-wrong-data'), {
        CANTON_SIGNER_KEYSTORE: keystore,
        CANTON_SIGNER_PASSPHRASE: 'a-wrong-passphrase-XYZZY',
      }),
    });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toContain(
      `wrong_passphrase: the keystore ${keystore} is protected by another passphrase`,
    );
    expect(r.stdout + r.stderr).not.toContain('XYZZY');
  }, 60_000);

  it('a passphrase file that does not exist stops the start even with an empty keystore (exit 1, the file named)', async () => {
    buildDist(['cli/serve.js', 'keys/file-backend.js']);
    const missing = join(dir, 'no-such-passphrase');
    await seedPgliteDir(join(dir, 'ks-empty-data'));
    const r = await runCli(['serve'], {
      env: serveEnv(join(dir, 'ks-empty-data'), {
        CANTON_SIGNER_KEYSTORE: join(dir, 'ks-empty'),
        CANTON_SIGNER_PASSPHRASE: undefined,
        CANTON_SIGNER_PASSPHRASE_FILE: missing,
      }),
    });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toContain(missing);
    expect(r.stderr).toContain('does not exist');
    expect(r.stdout).not.toMatch(/listening/);
  }, 60_000);
});

describe('serve --dev: only on the built-in sandbox', () => {
  it('exits 2 naming network.sandbox when the final configuration names a real network', async () => {
    buildDist(['cli/serve.js', 'server/dev.js']);
    const config = join(dir, 'real-network.json');
    await writeFile(
      config,
      JSON.stringify({
        network: {
          sandbox: false,
          ledgerApiUrl: 'http://127.0.0.1:9',
          validatorUrl: 'http://127.0.0.1:9',
          ledgerApiUser: 'custody',
        },
      }),
    );
    const base = {
      PATH: process.env.PATH ?? '',
      CANTON_SIGNER_DATA_DIR: join(dir, 'dev-data'),
      CANTON_SIGNER_KEYSTORE: join(dir, 'dev-keystore'),
    };
    for (const [what, args, env] of [
      ['a configuration file', ['serve', '--dev', '--config', config], base],
      [
        'the environment',
        ['serve', '--dev'],
        {
          ...base,
          CANTON_SIGNER_SANDBOX: 'false',
          CANTON_SIGNER_LEDGER_API_URL: 'http://127.0.0.1:9',
          CANTON_SIGNER_VALIDATOR_URL: 'http://127.0.0.1:9',
          CANTON_SIGNER_LEDGER_API_USER: 'custody',
        },
      ],
    ] as const) {
      const r = await runCli([...args], { env });
      expect(r.status, `${what}: ${r.stderr}`).toBe(2);
      expect(r.stderr, what).toMatch(/--dev runs only on the built-in sandbox/);
      expect(r.stderr, what).toMatch(/network\.sandbox \(CANTON_SIGNER_SANDBOX\)/);
      // refused before anything of development mode happened: no banner, no dev secret
      expect(r.stderr, what).not.toContain('DEVELOPMENT MODE');
      expect(existsSync(join(dir, 'dev-data', 'dev-auth.json')), what).toBe(false);
    }
  }, 60_000);

  it('exits 2 when DATABASE_URL names a PostgreSQL server: --dev writes only its embedded database', async () => {
    buildDist(['cli/serve.js', 'server/dev.js']);
    const r = await runCli(['serve', '--dev'], {
      env: {
        PATH: process.env.PATH ?? '',
        CANTON_SIGNER_DATA_DIR: join(dir, 'dev-data-pg'),
        CANTON_SIGNER_KEYSTORE: join(dir, 'dev-keystore-pg'),
        DATABASE_URL: 'postgresql://custody:hunter2@db.internal:5432/signer',
      },
    });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/--dev keeps its data in the embedded database/);
    expect(r.stderr).not.toContain('hunter2');
    expect(r.stderr).not.toContain('DEVELOPMENT MODE');
    expect(existsSync(join(dir, 'dev-data-pg', 'dev-auth.json'))).toBe(false);
  }, 60_000);
});

describe('serve: a running service', () => {
  it('listens, logs JSON with the configuration redacted, and shuts down gracefully on SIGTERM', async () => {
    const cfgFile = join(dir, 'config.json');
    await writeFile(
      cfgFile,
      JSON.stringify({
        listen: { host: '127.0.0.1', port: 0 },
        database: { dataDir: './db' },
        keystore: { dir: './keys' },
        network: { sandbox: true },
        auth: {
          issuer: 'https://issuer.test',
          audience: 'serve-test',
          sharedSecret: SECRET,
          algorithms: ['HS256'],
        },
        log: { level: 'info' },
      }),
    );
    await seedPgliteDir(join(dir, 'db'));
    const p = startServe(['--config', cfgFile], {
      cwd: dir,
      env: { CANTON_SIGNER_PASSPHRASE: PASSPHRASE },
    });
    const url = (await p.waitFor(LISTENING))[1]!;
    const sandbox = p.stdout().match(SANDBOX_ORIGIN)?.[1];
    expect(sandbox).toBeDefined();

    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true });

    // Every ledger-end call now takes 2 s: /ready is a slow request.
    const fault = await fetch(`${sandbox}/sandbox/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ fault: { kind: 'latency', ms: 2000 }, operation: 'ledger-api.ledgerEnd' }),
    });
    expect(fault.status).toBe(200);
    const started = Date.now();
    const slow = fetch(`${url}/ready`).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as { ok: boolean },
    }));
    await new Promise((r) => setTimeout(r, 400));
    p.child.kill('SIGTERM');
    await p.waitFor(/shutting down/);
    // No new connections once shutting down.
    await expect(fetch(`${url}/health`)).rejects.toThrow();

    const ready = await slow;
    expect(ready.status).toBe(200);
    expect(ready.body.ok).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
    const { code } = await p.exited;
    expect(code).toBe(0);

    const lines = p
      .stdout()
      .split('\n')
      .filter((l) => l.trim() !== '');
    const logs = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const start = logs.find((l) => l.msg === 'canton-signer starting') as { config: { auth: unknown } };
    expect(start.config.auth).toMatchObject({ sharedSecret: '[redacted]', issuer: 'https://issuer.test' });
    expect(logs.at(-1)!.msg).toBe('stopped');
    const all = p.stdout() + p.stderr();
    expect(all).not.toContain(SECRET);
    expect(all).not.toContain(PASSPHRASE);
  });
});

/** The service's settings in the environment (no file), its data in `data`; `extra` on top (`undefined` removes one). */
function serveEnv(data: string, extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH ?? '',
    CANTON_SIGNER_SANDBOX: 'true',
    CANTON_SIGNER_AUTH_ISSUER: 'https://issuer.test',
    CANTON_SIGNER_AUTH_AUDIENCE: 'canton-signer-test',
    CANTON_SIGNER_AUTH_ALGORITHMS: 'HS256',
    CANTON_SIGNER_AUTH_SHARED_SECRET: SECRET,
    CANTON_SIGNER_KEYSTORE: join(dir, 'held-keys'),
    CANTON_SIGNER_DATA_DIR: data,
    CANTON_SIGNER_PORT: '0',
    CANTON_SIGNER_PASSPHRASE: PASSPHRASE,
    CANTON_SIGNER_LOG_LEVEL: 'info',
    ...extra,
  };
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
}

/** The command's own error line (a library warning may come before it). */
function errorLine(stderr: string): string | undefined {
  const lines = stderr.split('\n').filter((l) => l.startsWith('canton-signer:'));
  expect(lines).toHaveLength(1);
  return `${lines[0]}\n`;
}

function occupy(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const a = server.address();
      resolve({ server, port: typeof a === 'object' && a ? a.port : 0 });
    });
  });
}

describe('serve and sandbox: what another process holds', () => {
  it('a port in use: exit 75 naming the port and how to choose another', async () => {
    const { server, port } = await occupy();
    await seedPgliteDir(join(dir, 'port-data'));
    try {
      const r = await runCli(['serve'], {
        env: serveEnv(join(dir, 'port-data'), { CANTON_SIGNER_PORT: String(port) }),
      });
      expect(r.status, r.stderr).toBe(75);
      expect(errorLine(r.stderr)).toBe(
        `canton-signer: cannot listen on 127.0.0.1:${port}: the port is in use by another process. Stop it, or choose another port with --port or CANTON_SIGNER_PORT (listen.port in the configuration file), e.g. CANTON_SIGNER_PORT=${port + 1} canton-signer serve …\n`,
      );
      expect(r.stderr).not.toMatch(/internal error/);
      // --port is the same setting on the command line
      const flag = await runCli(['serve', '--port', String(port)], { env: serveEnv(join(dir, 'port-data')) });
      expect(flag.status, flag.stderr).toBe(75);
      expect(errorLine(flag.stderr)).toContain(`cannot listen on 127.0.0.1:${port}: the port is in use`);
      const sb = await runCli(['sandbox', '--port', String(port)]);
      expect(sb.status, sb.stderr).toBe(75);
      expect(errorLine(sb.stderr)).toBe(
        `canton-signer: cannot listen on 127.0.0.1:${port}: the port is in use by another process (another sandbox?). Stop it, or choose another port: --port ${port + 1} (--port 0: any free port)\n`,
      );
    } finally {
      server.close();
    }
  }, 60_000);

  it('a data folder a running service holds: a second serve and audit verify exit 75 naming it; its files are owner-only', async () => {
    const data = join(dir, 'held-data');
    mkdirSync(data, { mode: 0o777 });
    const old = process.umask(0);
    let first: ReturnType<typeof startServe>;
    try {
      first = startServe([], { cwd: dir, env: serveEnv(data) });
    } finally {
      process.umask(old);
    }
    await first.waitFor(LISTENING, 60_000);
    const served = first.stdout().match(/"url":"(http:\/\/[^"]+)"/)?.[1];
    expect(served).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const second = await runCli(['serve'], { env: serveEnv(data) });
    expect(second.status, second.stderr).toBe(75);
    expect(second.stderr).toContain(
      `the embedded database in ${data} is in use by process ${first.child.pid} on `,
    );
    expect(second.stderr).toContain('database.dataDir, CANTON_SIGNER_DATA_DIR');
    expect(second.stderr.split('\n').filter((l) => l.startsWith('canton-signer:'))).toHaveLength(1);

    const audit = await runCli(['audit', 'verify', '--data-dir', data]);
    expect(audit.status, audit.stderr).toBe(75);
    expect(audit.stderr).toContain(`in use by process ${first.child.pid}`);
    // the running service's own URL, from the lock file it wrote once it listened
    expect(audit.stderr).toContain(`canton-signer audit verify --url ${served}`);
    expect(second.stderr).toContain(`canton-signer audit verify --url ${served}`);

    // every file and folder the engine made: owner-only, though the folder was 0777 and the umask 000
    const open: string[] = [];
    let files = 0;
    const walk = (p: string) => {
      const st = lstatSync(p);
      if (st.isSocket()) return;
      files++;
      if ((st.mode & 0o077) !== 0) open.push(`${p} ${(st.mode & 0o777).toString(8)}`);
      if (st.isDirectory()) for (const n of readdirSync(p)) walk(join(p, n));
    };
    walk(data);
    expect(files).toBeGreaterThan(100);
    expect(open).toEqual([]);

    // as docs/security.md says: a passphrase given as a variable leaves process.env (no child
    // inherits it: test/keys/file.test.ts) but stays in the environment the process started with
    if (process.platform === 'linux')
      expect(readFileSync(`/proc/${first.child.pid}/environ`, 'latin1')).toContain(
        `CANTON_SIGNER_PASSPHRASE=${PASSPHRASE}`,
      );
    first.child.kill('SIGTERM');
    expect((await first.exited).code).toBe(0);
  }, 120_000);

  it.runIf(process.platform === 'linux')(
    'a passphrase given as a file: the environment the service started with holds only its path',
    async () => {
      const file = join(dir, 'passphrase');
      await writeFile(file, `${PASSPHRASE}\n`, { mode: 0o600 });
      const env = serveEnv(join(dir, 'file-data'), { CANTON_SIGNER_PASSPHRASE_FILE: file });
      await seedPgliteDir(join(dir, 'file-data'));
      const p = startServe([], { cwd: dir, env: { ...env, CANTON_SIGNER_PASSPHRASE: undefined } });
      await p.waitFor(LISTENING, 60_000);
      const environ = readFileSync(`/proc/${p.child.pid}/environ`, 'latin1');
      expect(environ).toContain(`CANTON_SIGNER_PASSPHRASE_FILE=${file}`);
      expect(environ).not.toContain(PASSPHRASE);
      p.child.kill('SIGTERM');
      expect((await p.exited).code).toBe(0);
    },
    120_000,
  );
});

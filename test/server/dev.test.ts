/**
 * Development mode (`serve --dev`, what `npm start` runs) in a fresh folder:
 * it warns loudly, makes ./dev/data (with dev-auth.json, 0600) and
 * ./dev/keystore (never the CLI's ./keystore, whose passphrase is the user's),
 * hosts and funds the demo parties on its sandbox, prints the URLs, a token
 * the service accepts and the curl lines; a restart reuses the secret, the
 * keys and the parties (and the first run's token still works).
 */
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createVerifier } from '../../src/server/auth.js';
import { configSchema } from '../../src/server/config.js';
import { DEV_AUDIENCE, DEV_ISSUER, DEV_PASSPHRASE, DEV_TOKEN_ROLES } from '../../src/server/dev.js';
import { cliEnv, runCli } from '../support/cli.js';
import { seedPgliteDir } from '../support/pg.js';
import { devEnv, type ServeProcess, startServe, stopAll } from '../support/serve-process.js';

let cwd: string;
beforeAll(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'canton-signer-dev-'));
});
afterEach(() => stopAll());
afterAll(async () => {
  await rm(cwd, { recursive: true, force: true });
});

interface DevRun {
  p: ServeProcess;
  url: string;
  sandbox: string;
  token: string;
  alice: string;
  bob: string;
}

async function startDev(): Promise<DevRun> {
  const p = startServe(['--dev'], {
    cwd,
    env: devEnv(),
  });
  const token = (await p.waitFor(/export TOKEN=(\S+)/, 60_000))[1]!;
  return {
    p,
    token,
    url: p.stdout().match(/ service +(http:\/\/\S+)/)![1]!,
    sandbox: p.stdout().match(/ sandbox +(http:\/\/\S+)/)![1]!,
    alice: p.stdout().match(/ alice +(alice::1220[0-9a-f]{64})/)![1]!,
    bob: p.stdout().match(/ bob +(bob::1220[0-9a-f]{64})/)![1]!,
  };
}

async function stop(run: DevRun): Promise<void> {
  run.p.child.kill('SIGINT');
  expect((await run.p.exited).code).toBe(0);
}

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

async function devSecret(): Promise<string> {
  return (
    JSON.parse(await readFile(join(cwd, 'dev', 'data', 'dev-auth.json'), 'utf8')) as { sharedSecret: string }
  ).sharedSecret;
}

/** The dev token as the service's own verifier reads it. */
async function verifyWithDevConfig(token: string) {
  const auth = configSchema.parse({
    network: { sandbox: true },
    auth: {
      issuer: DEV_ISSUER,
      audience: DEV_AUDIENCE,
      sharedSecret: await devSecret(),
      algorithms: ['HS256'],
    },
  }).auth;
  return createVerifier(auth).verify(`Bearer ${token}`);
}

describe('serve --dev', () => {
  let first: { token: string; alice: string; bob: string; secret: string; keys: Record<string, string> };

  it('starts on a fresh folder: warning, data, keystore, funded demo parties, token, curl', async () => {
    const run = await startDev();
    const err = run.p.stderr();
    expect(err).toMatch(/DEVELOPMENT MODE/);
    expect(err).toMatch(/NEVER FOR REAL FUNDS/);
    expect(err).toMatch(/PUBLIC development passphrase/);
    const out = run.p.stdout();
    for (const path of ['/docs', '/metrics']) expect(out).toContain(`${run.url}${path}`);
    expect(out).toMatch(/curl -s -X POST http:\/\/\S+\/v1\/withdrawals /);
    expect(out).toMatch(/Idempotency-Key: /);
    expect(out).toContain(`"party":"${run.alice}","receiver":"${run.bob}","amount":"10"`);
    expect(out).toMatch(/curl -s http:\/\/\S+\/v1\/withdrawals -H/);

    // The secret file: private, never printed.
    const secretFile = join(cwd, 'dev', 'data', 'dev-auth.json');
    expect((await stat(secretFile)).mode & 0o777).toBe(0o600);
    const secret = await devSecret();
    expect(out + err).not.toContain(secret);
    expect(out + err).not.toContain(DEV_PASSPHRASE);

    // The token: the service's roles and the demo parties, accepted by the dev configuration.
    const principal = await verifyWithDevConfig(run.token);
    expect([...principal.roles].sort()).toEqual([...DEV_TOKEN_ROLES].sort());
    expect(principal.parties).toEqual(expect.arrayContaining([run.alice, run.bob]));

    expect((await fetch(`${run.url}/health`, { headers: bearer(run.token) })).status).toBe(200);
    const ready = await fetch(`${run.url}/ready`);
    expect(ready.status).toBe(200);
    // A /v1 route: the token is accepted; without it, 401.
    const parties = await fetch(`${run.url}/v1/parties`, { headers: bearer(run.token) });
    expect(parties.status).toBe(200);
    expect(JSON.stringify(await parties.json())).toContain(run.alice);
    expect((await fetch(`${run.url}/v1/parties`)).status).toBe(401);

    // alice is hosted and funded on the sandbox; bob hosted.
    const info = (await (await fetch(`${run.sandbox}/sandbox/info`)).json()) as { externalParties: string[] };
    expect(info.externalParties).toEqual(expect.arrayContaining([run.alice, run.bob]));
    const tap = await fetch(`${run.sandbox}/sandbox/tap`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ party: run.alice, amount: '1' }),
    });
    expect(((await tap.json()) as { balance: { totalUnlocked: string } }).balance.totalUnlocked).toMatch(
      /^1000001(\.0+)?$/,
    );

    // The printed curl's request: a withdrawal alice → bob that the worker commits.
    const printed = out.match(/-d '(\{[^']+\})'/)![1]!;
    const created = await fetch(`${run.url}/v1/withdrawals`, {
      method: 'POST',
      headers: { ...bearer(run.token), 'content-type': 'application/json', 'idempotency-key': 'dev-test-1' },
      body: printed,
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    let state = '';
    for (let i = 0; i < 100 && state !== 'committed'; i++) {
      const r = await fetch(`${run.url}/v1/withdrawals/${id}`, { headers: bearer(run.token) });
      state = ((await r.json()) as { state: string }).state;
      if (!['received', 'prepared', 'signed', 'submitted', 'committed'].includes(state)) break;
      if (state !== 'committed') await new Promise((r) => setTimeout(r, 200));
    }
    expect(state).toBe('committed');

    const keys: Record<string, string> = {};
    for (const f of await readdir(join(cwd, 'dev', 'keystore')))
      keys[f] = await readFile(join(cwd, 'dev', 'keystore', f), 'utf8');
    expect(Object.keys(keys)).toEqual(expect.arrayContaining(['dev-alice.key.json', 'dev-bob.key.json']));
    first = { token: run.token, alice: run.alice, bob: run.bob, secret, keys };
    await stop(run);
  });

  it('restarts with the same secret, keys and parties; the first token still works', async () => {
    expect(first).toBeDefined();
    const run = await startDev();
    expect(await devSecret()).toBe(first.secret);
    expect(run.alice).toBe(first.alice);
    expect(run.bob).toBe(first.bob);
    for (const [f, text] of Object.entries(first.keys))
      expect(await readFile(join(cwd, 'dev', 'keystore', f), 'utf8')).toBe(text);
    const principal = await verifyWithDevConfig(first.token);
    expect(principal.parties).toEqual(expect.arrayContaining([first.alice]));
    const parties = await fetch(`${run.url}/v1/parties`, { headers: bearer(first.token) });
    expect(parties.status).toBe(200);
    // The fresh sandbox knows the parties again, and alice is funded again.
    const info = (await (await fetch(`${run.sandbox}/sandbox/info`)).json()) as { externalParties: string[] };
    expect(info.externalParties).toEqual(expect.arrayContaining([first.alice, first.bob]));
    await stop(run);
  });
});

describe('serve --dev and the CLI keystore of the README', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'canton-signer-dev-cli-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a ./keystore under your passphrase: npm start uses its own keystore and starts', async () => {
    const keystore = join(dir, 'keystore');
    const made = await runCli(['keys', 'create', '--label', 'treasury', '--keystore', keystore], {
      env: cliEnv({ CANTON_SIGNER_PASSPHRASE: 'the passphrase of the README flows' }),
    });
    expect(made.status, made.stderr).toBe(0);
    // The subject is the keystores: the embedded database starts as an existing one (a first start
    // on a fresh folder is the test above), which spares initdb.
    await seedPgliteDir(join(dir, 'dev', 'data'));
    const p = startServe(['--dev'], { cwd: dir, env: devEnv() });
    await p.waitFor(/export TOKEN=(\S+)/, 90_000);
    expect((await readdir(keystore)).sort()).toEqual(['.keystore.json', 'treasury.key.json']);
    expect(await readdir(join(dir, 'dev', 'keystore'))).toEqual(
      expect.arrayContaining(['dev-alice.key.json', 'dev-bob.key.json']),
    );
    p.child.kill('SIGINT');
    expect((await p.exited).code).toBe(0);
  });

  it("the README's passphrase file left exported: npm start keeps the development passphrase for its own keystore, says so, and starts again either way", async () => {
    const file = join(dir, 'readme-passphrase');
    await writeFile(file, 'the passphrase of the README flows\n', { mode: 0o600 });
    for (const env of [devEnv({ CANTON_SIGNER_PASSPHRASE_FILE: file }), devEnv()]) {
      const p = startServe(['--dev'], { cwd: dir, env });
      await p.waitFor(/export TOKEN=(\S+)/, 90_000);
      if (env.CANTON_SIGNER_PASSPHRASE_FILE)
        expect(p.stderr()).toContain(
          'CANTON_SIGNER_PASSPHRASE_FILE is not used: ./dev/keystore has the development passphrase',
        );
      else expect(p.stderr()).not.toContain('is not used');
      p.child.kill('SIGINT');
      expect((await p.exited).code).toBe(0);
    }
  });

  it('pointed at that keystore, it exits 1 saying which keystore and how to proceed', async () => {
    const keystore = join(dir, 'keystore');
    const p = startServe(['--dev'], { cwd: dir, env: devEnv({ CANTON_SIGNER_KEYSTORE: keystore }) });
    const { code } = await p.exited;
    expect(code).toBe(1);
    expect(p.stderr()).toContain(
      `wrong_passphrase: the keystore ${keystore} is protected by another passphrase`,
    );
    expect(p.stderr()).toMatch(/unset CANTON_SIGNER_KEYSTORE .*\.\/dev\/keystore/);
    expect(p.stderr()).toMatch(/CANTON_SIGNER_PASSPHRASE_FILE/);
    expect(p.stdout()).not.toMatch(/export TOKEN/);
  });
});

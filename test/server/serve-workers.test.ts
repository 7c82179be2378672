/**
 * `canton-signer serve --workers N` as real processes: N service processes
 * share one port over one PostgreSQL against real network URLs (a sandbox
 * network started here); a worker that dies is replaced; SIGTERM stops them
 * all gracefully (exit 0). Configurations that cannot run in several
 * processes (embedded PGlite, the built-in sandbox, dev mode) exit 2 naming
 * the setting.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { runCli } from '../support/cli.js';
import { createPostgresDatabase, requirePostgres, type TestDatabase } from '../support/pg.js';
import { LISTENING, sandboxNetwork, startServe, stopAll } from '../support/serve-process.js';

const SECRET = 'serve-workers-shared-secret-0123456789-abcdef';
const hasPg = await requirePostgres();

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-serve-workers-'));
});
afterEach(() => stopAll());
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The pids of the processes whose parent is `pid` (Linux /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function until<T>(
  f: () => T | undefined | Promise<T | undefined>,
  what: string,
  ms = 30_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function configFile(name: string, extra: Record<string, unknown>): Promise<string> {
  const file = join(dir, name);
  await writeFile(
    file,
    JSON.stringify({
      listen: { host: '127.0.0.1', port: 0 },
      keystore: { dir: './keys' },
      auth: {
        issuer: 'https://issuer.test',
        audience: 'serve-test',
        sharedSecret: SECRET,
        algorithms: ['HS256'],
      },
      log: { level: 'info' },
      ...extra,
    }),
  );
  return file;
}

describe('serve --workers: what cannot run in several processes', () => {
  it.each([
    [
      'the embedded database',
      { database: { dataDir: './db' }, network: { sandbox: true } },
      [],
      /database\.url/,
    ],
    [
      'the built-in sandbox',
      { database: { url: 'postgresql://postgres@127.0.0.1:5432/postgres' }, network: { sandbox: true } },
      [],
      /network\.sandbox/,
    ],
    ['development mode', { database: { dataDir: './db' } }, ['--dev'], /development mode/],
  ] as const)('%s: exit 2 naming it', async (_what, cfg, flags, message) => {
    const file = await configFile(`bad-${Math.random()}.json`, cfg);
    const r = await runCli(['serve', '--config', file, '--workers', '2', ...flags]);
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('--workers must be a whole number from 1', async () => {
    for (const v of ['0', 'two', '1.5']) {
      const r = await runCli(['serve', '--workers', v]);
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(/--workers/);
    }
  });
});

describe.runIf(hasPg)('serve --workers 2 over PostgreSQL and network URLs', () => {
  let sandbox: RunningSandbox;
  let db: TestDatabase;

  beforeAll(async () => {
    sandbox = await startSandbox({ seed: 'serve-workers', timers: false });
    db = await createPostgresDatabase();
  }, 60_000);
  afterAll(async () => {
    await db?.drop();
    await sandbox?.close();
  });

  it('two processes answer on one port; a dead one is replaced; SIGTERM stops both (exit 0)', async () => {
    const file = await configFile('workers.json', {
      database: { url: db.url },
      network: sandboxNetwork(sandbox),
    });
    const p = startServe(['--config', file, '--workers', '2'], {
      cwd: dir,
      env: { CANTON_SIGNER_PASSPHRASE: 'serve-workers-passphrase' },
    });
    const primary = p.child.pid!;
    await p.waitFor(new RegExp(`${LISTENING.source}[\\s\\S]*${LISTENING.source}`), 60_000);
    const urls = [...p.stdout().matchAll(new RegExp(LISTENING.source, 'g'))].map((m) => m[1]);
    expect(new Set(urls).size).toBe(1); // one shared port
    const url = urls[0]!;
    const workers = childrenOf(primary);
    expect(workers).toHaveLength(2);
    for (let i = 0; i < 8; i++) expect((await fetch(`${url}/health`)).status).toBe(200);
    expect((await fetch(`${url}/ready`)).status).toBe(200);

    // A worker dies: the primary starts another; the service keeps answering meanwhile.
    process.kill(workers[0]!, 'SIGKILL');
    await p.waitFor(/a worker process died/);
    expect((await fetch(`${url}/health`)).status).toBe(200);
    const replaced = await until(() => {
      const now = childrenOf(primary);
      return now.length === 2 && !now.includes(workers[0]!) ? now : undefined;
    }, 'a replacement worker');
    expect(replaced).toContain(workers[1]);
    await until(
      () => ((p.stdout().match(new RegExp(LISTENING.source, 'g')) ?? []).length >= 3 ? true : undefined),
      'the replacement listening',
    );

    p.child.kill('SIGTERM');
    const { code } = await p.exited;
    expect(code, p.stderr()).toBe(0);
    expect(childrenOf(primary)).toEqual([]);
    for (const pid of replaced) expect(() => process.kill(pid, 0)).toThrow();
    await expect(fetch(`${url}/health`)).rejects.toThrow();
  }, 120_000);
});

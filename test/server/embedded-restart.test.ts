/**
 * The embedded database after a crash: a process carrying a queued withdrawal
 * over a PGlite folder is killed (SIGKILL, right after the withdrawal was
 * signed); the next process finds the folder's lock socket and a lock file
 * naming its own process id on this host — what a container restarted as
 * PID 1 finds — and must open the folder and finish the withdrawal, once.
 * The child is test/support/crash-worker.mjs (the compiled worker; needs
 * dist/, `npm run build`).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Signer } from '../../src/keys/signer.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { openPglite } from '../../src/store/db.js';
import { LOCK_FILE, LOCK_SOCKET } from '../../src/store/folder-lock.js';
import { migrate, type Store, storeOn } from '../../src/store/index.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { cliEnv, ROOT } from '../support/cli.js';
import { type FlowEnv, flowEnv, hostParty, testSigner } from '../support/flow-env.js';
import { pgliteMigratedBlob } from '../support/pg.js';

const CHILD = join(ROOT, 'test', 'support', 'crash-worker.mjs');
const PASSPHRASE = 'embedded-restart-passphrase';

let env: FlowEnv;
let dir: string;
let dataDir: string;
let keystore: string;
let signer: Signer;
let alice: PartyRecord;
let bob: PartyRecord;

function child(
  withdrawalId: string,
  extra: Record<string, string>,
): Promise<{ status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const config = {
    dataDir,
    keystore,
    passphrase: PASSPHRASE,
    ledgerApi: env.sb.urls.ledgerApi,
    validator: env.sb.urls.validator,
    scan: env.sb.urls.scan,
    userId: LEDGER_API_USER,
    synchronizerId: env.net.synchronizerId,
  };
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CHILD], {
      cwd: ROOT,
      env: cliEnv({ CRASH_CONFIG: JSON.stringify(config), WITHDRAWAL_ID: withdrawalId, ...extra }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    p.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    p.on('error', reject);
    p.on('close', (status, signal) => resolve({ status, signal, stdout: out, stderr: err }));
  });
}

async function withStore<T>(fn: (s: Store) => Promise<T>): Promise<T> {
  const store = storeOn(await openPglite(dataDir, { maintenance: false }), 'test');
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

describe('embedded database: a killed service restarts as the same process id and resumes', () => {
  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist', 'flows', 'withdrawal.js')))
      throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
    env = await flowEnv({ seed: 'embedded-restart' });
    dir = await mkdtemp(join(tmpdir(), 'canton-signer-embedded-restart-'));
    dataDir = join(dir, 'data');
    keystore = join(dir, 'keystore');
    signer = testSigner(keystore, PASSPHRASE);
    const db = await openPglite(dataDir, { loadDataDir: await pgliteMigratedBlob(), maintenance: false });
    await migrate(db);
    const store = storeOn(db, 'test');
    alice = await hostParty(env.net, signer, store.parties, 'alice', { label: 'er-alice', fund: '100' });
    bob = await hostParty(env.net, signer, store.parties, 'bob', { label: 'er-bob' });
    await store.close();
  }, 120_000);
  afterAll(async () => {
    await signer?.close();
    await env?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('kill -9 with a queued withdrawal; the restart (lock file naming itself) opens the folder and commits it once', async () => {
    const w = await withStore(
      async (s) =>
        (
          await s.withdrawals.create({
            idempotencyKey: 'embedded-restart',
            caller: 'bot',
            body: { party: alice.partyId, receiver: bob.partyId, amount: '2.5' },
          })
        ).withdrawal,
    );
    const crashed = await child(w.id, { CRASH_AT: 'signed' });
    expect(crashed.signal, crashed.stderr).toBe('SIGKILL');
    // the crash left its lock behind (opened by nothing since: the next process finds it as left)
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(true);
    expect(existsSync(join(dataDir, LOCK_SOCKET))).toBe(true);
    const resumed = await child(w.id, { LOCK_NAMES_ME: '1' });
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout.trim().split('\n').at(-1)!)).toMatchObject({ state: 'committed' });
    expect(env.net.store.updates().filter((u) => u.commandId === w.commandId)).toHaveLength(1);
    expect(await withStore(async (s) => (await s.withdrawals.get(w.id))?.state)).toBe('committed');
  }, 180_000);
});

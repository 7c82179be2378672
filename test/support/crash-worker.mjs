/**
 * Child process of the withdrawal crash test (test/server/withdrawal-crash.test.ts):
 * the compiled withdrawal worker (dist/) against the parent's sandbox URLs,
 * the parent's file keystore and a PostgreSQL database (or an embedded
 * database folder, `dataDir`) that outlives this process. With
 * LOCK_NAMES_ME set, the folder's lock file is first made to name this very
 * process, as a restarted container finds it. With CRASH_AT set, the worker's test hook SIGKILLs this process
 * right after that step of withdrawal WITHDRAWAL_ID; without it, the worker
 * runs until that withdrawal is finished and prints its final state.
 * Configuration comes in the CRASH_CONFIG environment variable (JSON).
 * Cold parties: the signer has the keystore's offline (public-only)
 * keys, whose signatures come from the air-gap exports in the database; with
 * STOP_AWAITING set, the child also stops once the withdrawal awaits its
 * offline signature.
 */
import { writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { LedgerApiClient } from '../../dist/canton/ledger-api/client.js';
import { ScanClient } from '../../dist/canton/scan/client.js';
import { ValidatorClient } from '../../dist/canton/validator/client.js';
import { createWithdrawalWorker } from '../../dist/flows/withdrawal.js';
import { FileBackend } from '../../dist/keys/file-backend.js';
import { OfflineBackend } from '../../dist/keys/offline-backend.js';
import { Signer } from '../../dist/keys/signer.js';
import { OnlineAirGap } from '../../dist/offline/online.js';
import { openStore } from '../../dist/store/index.js';

const cfg = JSON.parse(process.env.CRASH_CONFIG ?? '{}');
const crashAt = process.env.CRASH_AT || undefined;
const target = process.env.WITHDRAWAL_ID;

if (cfg.dataDir && process.env.LOCK_NAMES_ME) {
  // What a restarted container finds: a lock file left by a killed process that had this very
  // process id (PID 1 again) on this host.
  writeFileSync(
    join(cfg.dataDir, '.canton-signer.lock'),
    JSON.stringify({ pid: process.pid, host: hostname(), since: '2020-01-01T00:00:00.000Z' }),
  );
}
const store = await openStore({
  ...(cfg.dataDir ? { dataDir: cfg.dataDir } : { url: cfg.databaseUrl }),
  actor: 'crash-child',
});
const signer = new Signer({
  file: new FileBackend({
    dir: cfg.keystore,
    passphrase: () => cfg.passphrase,
    scrypt: { N: 2 ** 14, r: 8, p: 1 },
  }),
  offline: new OfflineBackend({ dir: join(cfg.keystore, 'offline') }),
  stateDir: cfg.keystore,
});
const airGap = new OnlineAirGap(store, signer);
signer.offline().setSignatureSource(airGap);
const retry = { attempts: 1 };
const ctx = {
  signer,
  ledger: new LedgerApiClient({ baseUrl: cfg.ledgerApi, retry }),
  validator: new ValidatorClient({ baseUrl: cfg.validator, retry }),
  scan: new ScanClient({ baseUrl: cfg.scan, retry }),
  userId: cfg.userId,
  parties: store.parties,
  recorder: store.recorder,
  synchronizerId: cfg.synchronizerId,
};
const worker = createWithdrawalWorker({
  ctx,
  store,
  airGap,
  pollMs: 50,
  retryMs: 50,
  leaseMs: 1000,
  at: (point, w) => {
    if (point === crashAt && w.id === target) process.kill(process.pid, 'SIGKILL');
  },
});
await worker.start();
worker.kick(target);
const terminal = ['committed', 'rejected', 'failed', 'cancelled', 'expired'];
if (process.env.STOP_AWAITING) terminal.push('awaiting_signature');
const deadline = Date.now() + 60_000;
for (;;) {
  const w = await store.withdrawals.get(target);
  if (w && terminal.includes(w.state)) {
    await worker.stop();
    await store.close();
    await signer.close();
    process.stdout.write(`${JSON.stringify({ state: w.state, updateId: w.updateId ?? null })}\n`);
    process.exit(0);
  }
  if (Date.now() > deadline) {
    process.stderr.write(`withdrawal ${target} still ${w?.state}\n`);
    process.exit(3);
  }
  await new Promise((r) => setTimeout(r, 50));
}

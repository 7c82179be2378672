#!/usr/bin/env node
/**
 * The service's own CPU per completed withdrawal: `npm run bench:withdrawal`.
 *
 * Three processes, so that what is measured is the service alone:
 *   - the sandbox network (participant, validator, scan, registry) in a child
 *     process pinned to core 1 (`taskset -c 1`); it also sets up a fresh
 *     PostgreSQL database (migrated), the keystore and the funded parties;
 *   - the service, `canton-signer serve` over that database, pinned to core 0
 *     (`taskset -c 0`), with bench/service-probe.js loaded into it: it counts
 *     the service's database round trips and HTTP exchanges and answers with
 *     its own `process.cpuUsage()`;
 *   - this process, the load generator, pinned to core 1: it keeps a backlog
 *     of unfinished withdrawals (POST /v1/withdrawals over keep-alive
 *     connections) and watches their states in the database.
 *
 * Over a steady-state window (from BENCH_FROM to BENCH_TO of the withdrawals
 * committed; creation goes on during it) it reports withdrawals committed per
 * second, the service's CPU per committed withdrawal (its own accounting, and
 * /proc as a cross-check), the other processes' CPU, the database round trips
 * and HTTP exchanges per withdrawal with their breakdown, and PASS or FAIL
 * against BENCH_TARGET_MS (default 4 ms). Without taskset (or with fewer than
 * two cores) nothing is pinned, and the output says so.
 *
 * Environment: BENCH_WITHDRAWALS (default 2000), BENCH_PARTIES (sending
 * parties, default 16), BENCH_BACKLOG (unfinished withdrawals kept, default
 * 64), BENCH_FROM / BENCH_TO (window, fractions of the withdrawals, default
 * 0.15 / 0.85), BENCH_PG_ADMIN_URL (default
 * postgresql://postgres@127.0.0.1:5432/postgres: a database is created for
 * the run and dropped after it), BENCH_PROF (a folder: a V8 CPU profile of
 * the service over the window, service-window.cpuprofile), BENCH_TARGET_MS,
 * BENCH_WORKER_POLL_MS (the worker's poll interval, default 200 ms),
 * BENCH_PREAPPROVAL=1 (the receiver holds a transfer preapproval: one-step
 * transfers instead of offers, which leave each sender a locked holding).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { BENCH_PASSPHRASE, benchConfig, benchService, benchToken, withdrawalPoster } from './common.js';

const WITHDRAWALS = Number(process.env.BENCH_WITHDRAWALS ?? 2000);
const PARTIES = Number(process.env.BENCH_PARTIES ?? 16);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 64);
const FROM = Number(process.env.BENCH_FROM ?? 0.15);
const TO = Number(process.env.BENCH_TO ?? 0.85);
const TARGET_MS = Number(process.env.BENCH_TARGET_MS ?? 4);
const PREAPPROVAL = process.env.BENCH_PREAPPROVAL === '1';
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 5000);
const PG_ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const SECRET = 'bench-shared-secret-0123456789-0123456789';
const FINAL = ['committed', 'rejected', 'failed', 'cancelled', 'expired'];
const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const dist = (p) => new URL(`../dist/${p}`, import.meta.url).href;

/** Whether processes can be pinned here, and why not. */
function pinning() {
  if (cpus().length < 2) return { ok: false, why: `only ${cpus().length} core` };
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
    return { ok: true };
  } catch {
    return { ok: false, why: 'taskset is not installed' };
  }
}

/** `node args…`, pinned to `core` when pinning works. */
function pinned(pin, core, args, opts) {
  return pin.ok
    ? spawn('taskset', ['-c', String(core), process.execPath, ...args], opts)
    : spawn(process.execPath, args, opts);
}

/** User + system CPU ms of `pid` so far, from /proc (undefined elsewhere). */
async function procCpuMs(pid) {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!stat) return undefined;
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Clock ticks, 100 per second on Linux.
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** CPU ms of every PostgreSQL server process on this machine (its backends, checkpointer, WAL writer, …). */
async function postgresCpuMs() {
  let ms = 0;
  for (const d of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(d)) continue;
    const comm = await readFile(`/proc/${d}/comm`, 'utf8').catch(() => '');
    if (comm.startsWith('postgres')) ms += (await procCpuMs(d)) ?? 0;
  }
  return ms;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** The next IPC message of `child` of type `type` (after sending `send`, if given). */
function answer(child, type, send) {
  return new Promise((resolve, reject) => {
    const on = (m) => {
      if (m?.type !== type) return;
      child.off('message', on);
      child.off('exit', onExit);
      resolve(m);
    };
    const onExit = (code, signal) =>
      reject(new Error(`child exited (${code ?? signal}) waiting for ${type}`));
    child.on('message', on);
    child.once('exit', onExit);
    if (send) child.send(send);
  });
}

// ------------------------------------------------------------------ the sandbox network (child, core 1)

async function sandboxMain() {
  const { startSandbox } = await import(dist('sandbox/server.js'));
  const { LEDGER_API_USER } = await import(dist('sandbox/network.js'));
  const { openPostgres } = await import(dist('store/index.js'));
  const { dir, dbUrl, port } = JSON.parse(process.argv[3]);
  const sandbox = await startSandbox({ seed: 'bench-withdrawal-cpu' });
  const db = await openPostgres(dbUrl, { max: 4 });
  // Migrate, keys, parties: through a service of this process (not listening, no worker).
  const setup = await benchService(dist, { db, dir, secret: SECRET, concurrency: 1, sandbox, worker: false });
  const senders = [];
  for (let i = 0; i < PARTIES; i++) senders.push(await setup.host(`sender${i}`, '1000000'));
  const receiver = await setup.host('receiver');
  if (PREAPPROVAL) {
    // The receiver holds a transfer preapproval: each withdrawal is a one-step transfer, as to an
    // exchange's customers who have one, and leaves the sender no locked holding behind.
    const { transferPreapprovalContract } = await import(dist('sandbox/amulet.js'));
    const net = sandbox.ctx.net;
    net.commitInternal({
      archives: [],
      creates: [transferPreapprovalContract(net.dso, receiver, net.validatorParty, net.clock.now())],
      commandId: 'bench-receiver-preapproval',
    });
  }
  await setup.service.close();
  await setup.signer.close?.();
  await db.close();
  const config = benchConfig({ dir, sandbox, ledgerApiUser: LEDGER_API_USER, databaseUrl: dbUrl, port });
  await writeFile(join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  process.send({ type: 'ready', senders, receiver });
  process.on('message', async (m) => {
    if (m?.type === 'close') {
      await sandbox.close();
      process.exit(0);
    }
  });
}

// ------------------------------------------------------------------ the load generator (this process, core 1)

async function main() {
  const pin = pinning();
  if (pin.ok) execFileSync('taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });
  const load = loadavg()[0];
  const { default: pg } = await import('pg');
  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-bench-wcpu-'));
  const dbName = `cs_bench_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${dbName}`;
  const dbUrl = u.toString();
  const port = await freePort();
  let sandbox;
  let service;
  let watcher;
  try {
    sandbox = pinned(pin, 1, [here(import.meta.url), '--sandbox', JSON.stringify({ dir, dbUrl, port })], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const { senders, receiver } = await answer(sandbox, 'ready');

    service = pinned(
      pin,
      0,
      [
        '--import',
        here('./service-probe.js'),
        here('../bin/canton-signer.js'),
        'serve',
        '--config',
        join(dir, 'config.json'),
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
        env: {
          ...process.env,
          CANTON_SIGNER_PASSPHRASE: BENCH_PASSPHRASE,
          CANTON_SIGNER_AUTH_SHARED_SECRET: SECRET,
        },
      },
    );
    createInterface({ input: service.stdout }).on('line', (l) => process.stderr.write(`serve: ${l}\n`));
    const url = `http://127.0.0.1:${port}`;
    for (const deadline = Date.now() + 60_000; ; ) {
      if (service.exitCode !== null) throw new Error(`canton-signer serve exited (${service.exitCode})`);
      const r = await fetch(`${url}/ready`).catch(() => undefined);
      await r?.arrayBuffer();
      if (r?.status === 200) break;
      if (Date.now() > deadline) throw new Error('canton-signer serve not ready after 60 s');
      await new Promise((res) => setTimeout(res, 200));
    }

    watcher = new pg.Client({ connectionString: dbUrl });
    await watcher.connect();
    // The service's background work with nothing to do (worker polls, ingestion, lease renewals):
    // its rate, so that a slow window (a loaded machine) can be told from a costly withdrawal.
    await new Promise((r) => setTimeout(r, 2000));
    const idle0 = await sample(performance.now(), 0, { service, sandbox });
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const idle1 = await sample(performance.now(), 0, { service, sandbox });
    const result = await drive({ url, senders, receiver, service, sandbox, watcher });
    report({ ...result, idle: [idle0, idle1] }, { pin, load });
  } finally {
    await watcher?.end().catch(() => {});
    if (service && service.exitCode === null) {
      const exited = new Promise((r) => service.once('exit', r));
      service.kill('SIGTERM');
      const t = setTimeout(() => service.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(t);
    }
    if (sandbox && sandbox.exitCode === null) {
      const exited = new Promise((r) => sandbox.once('exit', r));
      sandbox.send({ type: 'close' });
      await exited;
    }
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    await admin.end();
    await rm(dir, { recursive: true, force: true });
  }
}

/** Everything one sample of the window needs: time, committed count, each process's CPU, the counters. */
async function sample(t, committed, { service, sandbox }) {
  const probe = await answer(service, 'probe', { type: 'probe' });
  return {
    t,
    committed,
    serviceCpu: (probe.cpu.user + probe.cpu.system) / 1000,
    serviceSys: probe.cpu.system / 1000,
    serviceProc: await procCpuMs(service.pid),
    sandboxProc: await procCpuMs(sandbox.pid),
    postgres: await postgresCpuMs(),
    bench: (() => {
      const c = process.cpuUsage();
      return (c.user + c.system) / 1000;
    })(),
    db: probe.db,
    http: probe.http,
  };
}

async function drive({ url, senders, receiver, service, sandbox, watcher }) {
  const token = await benchToken(SECRET);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const { post, agent } = withdrawalPoster(http, {
    url,
    headers,
    keyPrefix: 'wcpu',
    bodyOf: (i) =>
      JSON.stringify({ party: senders[i % senders.length], receiver, amount: '1', memo: `bench ${i}` }),
  });

  let created = 0;
  let createErrors = 0;
  let final = 0;
  let byState = {};
  let stop = false;
  const creator = async () => {
    while (!stop && created < WITHDRAWALS) {
      if (created - final >= BACKLOG) {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      const i = created++;
      const status = await post(i);
      if (status !== 201 && status !== 200) createErrors++;
    }
  };
  const t0 = performance.now();
  const creators = Promise.all(Array.from({ length: 16 }, creator));
  const from = Math.round(WITHDRAWALS * FROM);
  const to = Math.round(WITHDRAWALS * TO);
  let first;
  let last;
  const prof = process.env.BENCH_PROF ? resolve(process.env.BENCH_PROF) : undefined;
  const deadline = Date.now() + 600_000;
  try {
    for (;;) {
      const r = await watcher.query('SELECT state, count(*)::int AS n FROM withdrawals GROUP BY state');
      byState = Object.fromEntries(r.rows.map((x) => [x.state, x.n]));
      final = FINAL.reduce((n, s) => n + (byState[s] ?? 0), 0);
      const committed = byState.committed ?? 0;
      if (!first && committed >= from) {
        first = await sample(performance.now(), committed, { service, sandbox });
        if (prof) await answer(service, 'prof-started', { type: 'prof-start' });
      }
      if (first && !last && committed >= to) {
        if (prof) {
          await answer(service, 'prof-stopped', {
            type: 'prof-stop',
            file: join(prof, 'service-window.cpuprofile'),
          });
        }
        last = await sample(performance.now(), committed, { service, sandbox });
      }
      if (final >= WITHDRAWALS - createErrors || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    stop = true;
    await creators.catch(() => {});
    agent.destroy();
  }
  return { first, last, byState, createErrors, totalMs: performance.now() - t0 };
}

function diffCounts(a, b) {
  const out = {};
  for (const [k, v] of Object.entries(b)) if (v - (a[k] ?? 0) > 0) out[k] = v - (a[k] ?? 0);
  return out;
}

function report({ first, last, byState, createErrors, totalMs, idle }, { pin, load }) {
  console.log(
    `\nwithdrawal CPU benchmark: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, load average ${load.toFixed(2)} at start`,
  );
  console.log(
    pin.ok
      ? 'pinned: service (canton-signer serve) on core 0; sandbox network and load generator on core 1; PostgreSQL unpinned'
      : `NOT pinned (${pin.why}): every process shares every core; CPU per withdrawal is still each process's own`,
  );
  console.log(
    `${WITHDRAWALS} withdrawals over ${PARTIES} parties, backlog ${BACKLOG}, ` +
      `${PREAPPROVAL ? 'the receiver with a transfer preapproval (one-step transfers)' : 'the receiver without a preapproval (transfer offers)'}; final states ${JSON.stringify(byState)}; ` +
      `create errors ${createErrors}; ${(totalMs / 1000).toFixed(1)} s in all`,
  );
  if (!first || !last) {
    console.log('FAIL: the window was never reached (too few withdrawals committed)');
    process.exitCode = 1;
    return;
  }
  const n = last.committed - first.committed;
  const s = (last.t - first.t) / 1000;
  const per = (k) => (last[k] - first[k]) / n;
  console.log(`window: ${n} withdrawals committed in ${s.toFixed(2)} s: ${(n / s).toFixed(1)} withdrawals/s`);
  const svc = per('serviceCpu');
  console.log(
    `CPU per committed withdrawal: service ${svc.toFixed(2)} ms (process.cpuUsage, ${per('serviceSys').toFixed(2)} ms of it in the kernel; /proc: ${per('serviceProc').toFixed(2)} ms), ` +
      `sandbox network ${per('sandboxProc').toFixed(2)} ms, load generator ${per('bench').toFixed(2)} ms, ` +
      `PostgreSQL (every server process on the machine) ${per('postgres').toFixed(2)} ms`,
  );
  console.log(
    `service CPU busy ${(((last.serviceCpu - first.serviceCpu) / 1000 / s) * 100).toFixed(0)} % of one core over the window`,
  );
  // Background work at its idle rate over the window's length, per withdrawal: the share of the
  // figure above that depends on how fast the window went rather than on the withdrawals.
  const [i0, i1] = idle;
  const idleS = (i1.t - i0.t) / 1000;
  const idleRate = (i1.serviceCpu - i0.serviceCpu) / idleS;
  const rate = (a, b) => Object.values(diffCounts(a, b)).reduce((x, y) => x + y, 0) / idleS;
  const background = (idleRate * s) / n;
  console.log(
    `idle service (before the load, ${idleS.toFixed(1)} s): ${idleRate.toFixed(1)} ms CPU/s, ` +
      `${rate(i0.db, i1.db).toFixed(1)} round trips/s, ${rate(i0.http, i1.http).toFixed(1)} HTTP exchanges/s; ` +
      `at that rate over the window ${background.toFixed(2)} ms per withdrawal, so ${(svc - background).toFixed(2)} ms net of it`,
  );
  const table = (title, a, b) => {
    const d = diffCounts(a, b);
    const total = Object.values(d).reduce((x, y) => x + y, 0);
    console.log(`\n${title}: ${(total / n).toFixed(2)} per withdrawal`);
    for (const [k, v] of Object.entries(d).sort((x, y) => y[1] - x[1]))
      if (v / n >= 0.01) console.log(`  ${(v / n).toFixed(2)}  ${k}`);
  };
  table('database round trips', first.db, last.db);
  table('HTTP exchanges with the network', first.http, last.http);
  console.log(
    `\n${svc <= TARGET_MS ? 'PASS' : 'FAIL'}: ${svc.toFixed(2)} ms of service CPU per withdrawal against ${TARGET_MS} ms ` +
      `(${(1000 / svc).toFixed(0)} withdrawals/s per core for the service alone). ` +
      'Figures taken while other work shares the machine need a quiet machine to be final.',
  );
}

if (process.argv[2] === '--sandbox') await sandboxMain();
else await main();

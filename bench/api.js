#!/usr/bin/env node
/**
 * REST API load benchmark: `npm run bench:api`.
 *
 * A real listening service (createService from dist/, the built-in sandbox,
 * PGlite, the withdrawal worker on) runs in a CHILD process, so that it has
 * its own core; autocannon drives it from this process (the other core).
 * Measured, in this order:
 *   0. GET /health: the framework floor (routing, hooks, metrics, JSON).
 *   1. POST /v1/sign/verify with a real prepared transfer obtained from the
 *      sandbox's Ledger API prepare: decode, re-hash, intent and window check.
 *   2. Withdrawals completed end to end: N withdrawals created over HTTP from
 *      several funded parties, timed until all reached a final state.
 *   3. POST /v1/withdrawals accepted (unique Idempotency-Key per request),
 *      with the worker stopped, so that only acceptance is measured.
 * Prints a table with req/s, p99, ratios to /health and to the targets.
 *
 * Worker mode, BENCH_WORKERS=N: the service is `canton-signer serve
 * [--workers N] --config FILE` (N processes sharing the port; 1 runs serve
 * without --workers), over a throw-away PostgreSQL database. This process
 * runs the sandbox network (the services reach it by its URLs), sets up the
 * database, keystore and parties, and drives the same measures; withdrawal
 * counts come from the database; for the accepted measure, the workers
 * (which cannot be stopped from outside) are kept off the new withdrawals by
 * a trigger that leases each to the bench as it is inserted.
 *
 * Environment: BENCH_DURATION (s per autocannon run, default 10),
 * BENCH_CONNECTIONS (default 32), BENCH_WITHDRAWALS (default 500),
 * BENCH_PARTIES (sending parties, default 16), BENCH_CONCURRENCY (worker,
 * default = parties; not in worker mode, where serve's default applies),
 * BENCH_DB (memory | dir | postgres: a throw-away database on
 * BENCH_PG_ADMIN_URL, default postgresql://postgres@127.0.0.1:5432/postgres;
 * default memory; postgres in worker mode), BENCH_WORKERS (see above),
 * BENCH_PROF (a folder: CPU profiles of the service process(es); in the
 * default mode one profile per measure, <measure>.cpuprofile, covering only
 * its measured window; in worker mode each process's whole life),
 * BENCH_POLICY (a policy file the service decides under, e.g.
 * bench/policy.yaml; default none: the built-in allow-all),
 * BENCH_ONLY (a comma-separated subset of health, verify, completed,
 * accepted: the measures to run; default all).
 */
import { fork, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  BENCH_PASSPHRASE,
  benchConfig,
  benchService,
  benchToken,
  inProcessTimings,
  throwAwayPostgres,
  verifyBodyFrom,
  withdrawalPoster,
} from './common.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const WITHDRAWALS = Number(process.env.BENCH_WITHDRAWALS ?? 500);
const PARTIES = Number(process.env.BENCH_PARTIES ?? 16);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? PARTIES);
const WORKERS = process.env.BENCH_WORKERS === undefined ? 0 : Number(process.env.BENCH_WORKERS);
if (!Number.isInteger(WORKERS) || WORKERS < 0 || WORKERS > 64)
  throw new Error(
    `BENCH_WORKERS: a whole number of service processes from 1 to 64, not ${process.env.BENCH_WORKERS}`,
  );
if (WORKERS > 0 && process.env.BENCH_DB !== undefined && process.env.BENCH_DB !== 'postgres')
  throw new Error(`BENCH_WORKERS needs BENCH_DB=postgres (or unset), not ${process.env.BENCH_DB}`);
/** BENCH_ONLY=health,verify,completed,accepted: run only these measures (the others print as skipped). */
const ONLY = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : undefined;
const runs = (m) => ONLY === undefined || ONLY.has(m);
const SKIPPED = { rps: 0, p50: 0, p99: 0, ok: 0, bad: 0, skipped: true };
const DB = WORKERS > 0 ? 'postgres' : (process.env.BENCH_DB ?? 'memory');
const PG_ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const SECRET = 'bench-shared-secret-0123456789-0123456789';
const TARGETS = { verify: 2000, verifyP99: 20, accepted: 1000, completed: 200 };
const dist = (p) => new URL(`../dist/${p}`, import.meta.url).href;

/** The sending parties (funded), the receiver and the verifier (funded), hosted and booked through `host`. */
async function hostParties(host) {
  const senders = [];
  for (let i = 0; i < PARTIES; i++) senders.push(await host(`sender${i}`, '1000000'));
  const receiver = await host('receiver');
  const verifier = await host('verifier', '1000');
  return { senders, receiver, verifier };
}

// ------------------------------------------------------------------ the service (child process, default mode)

async function serverMain() {
  const { openPglite } = await import(dist('store/index.js'));
  const { transfer } = await import(dist('flows/transfer.js'));

  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-bench-api-'));
  let dropDb = async () => {};
  let db;
  if (DB === 'postgres') {
    // A throw-away database on the PostgreSQL server (BENCH_PG_ADMIN_URL).
    const pg = await throwAwayPostgres(dist, PG_ADMIN_URL);
    db = pg.db;
    dropDb = pg.drop;
  } else {
    db = await openPglite(DB === 'memory' ? 'memory' : join(dir, 'db'));
  }
  const { service, store, host } = await benchService(dist, {
    db,
    dir,
    secret: SECRET,
    concurrency: CONCURRENCY,
  });
  const { senders, receiver, verifier } = await hostParties(host);

  // A real prepared transfer: the transfer flow's own prepare, captured on its way.
  const verifyBody = await verifyBodyFrom(service.deps.flows, transfer, verifier, receiver);
  // The pipeline alone (decode, re-hash, intent, window), no HTTP: where the verify route's time goes.
  const { pipelineMs, partyGetMs, policyMs } = await inProcessTimings(dist, {
    flows: service.deps.flows,
    store,
    verifyBody,
  });
  const token = await benchToken(SECRET);
  const url = await service.listen();

  let profiler;
  process.on('message', async (m) => {
    // A profiler that cannot start or stop says so in the answer (the bench reports it), never hangs.
    if (m.type === 'prof-start') {
      try {
        const { Session } = await import('node:inspector');
        profiler = new Session();
        profiler.connect();
        const post = (method) =>
          new Promise((res, rej) => profiler.post(method, (e, r) => (e ? rej(e) : res(r))));
        await post('Profiler.enable');
        await post('Profiler.start');
        profiler.stopTo = async (file) => {
          const { profile } = await post('Profiler.stop');
          await writeFile(file, JSON.stringify(profile));
          profiler.disconnect();
        };
        process.send({ type: 'prof-started' });
      } catch (e) {
        process.send({ type: 'prof-started', error: String(e) });
      }
    }
    if (m.type === 'prof-stop') {
      try {
        await profiler.stopTo(join(process.env.BENCH_PROF, `${m.name}.cpuprofile`));
        process.send({ type: 'prof-stopped' });
      } catch (e) {
        process.send({ type: 'prof-stopped', error: String(e) });
      }
    }
    if (m.type === 'counts') process.send({ type: 'counts', counts: await store.withdrawals.countByState() });
    if (m.type === 'pause') {
      await service.deps.worker.stop();
      process.send({ type: 'paused' });
    }
    if (m.type === 'close') {
      await service.close();
      await store.close();
      await dropDb();
      await rm(dir, { recursive: true, force: true });
      process.exit(0);
    }
  });
  process.send({
    type: 'ready',
    url,
    token,
    verifyBody,
    senders,
    receiver,
    pipelineMs,
    partyGetMs,
    policyMs,
  });
}

// ------------------------------------------------------------------ the measures (both modes)

async function cannon(autocannon, opts) {
  const r = await autocannon({ connections: CONNECTIONS, duration: DURATION, pipelining: 1, ...opts });
  const ok = r['2xx'];
  return {
    rps: ok / (r.duration || DURATION),
    p50: r.latency.p50,
    p99: r.latency.p99,
    ok,
    bad: r.non2xx + r.errors + r.timeouts,
  };
}

const FINAL = ['committed', 'rejected', 'failed', 'cancelled', 'expired'];

/**
 * Every measure against the service at `url`, in order: health, verify (32
 * and 4 connections), withdrawals completed (`counts()`: withdrawals by
 * state), withdrawals accepted (after `stopWorker()`, which keeps the
 * withdrawal worker off what is accepted next).
 */
async function measure(opts) {
  const { url, token, verifyBody, senders, receiver, counts, stopWorker, servicePid } = opts;
  const profiled = opts.profiled ?? ((_name, run) => run());
  const { default: autocannon } = await import('autocannon');
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const warm = (opts) => autocannon({ connections: 8, duration: 2, ...opts });

  // 0. the floor
  let health = SKIPPED;
  if (runs('health')) {
    await warm({ url: `${url}/health` });
    health = await cannon(autocannon, { url: `${url}/health` });
  }

  // 1. verification only
  const check = await fetch(`${url}/v1/sign/verify`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify(verifyBody),
  });
  const report = await check.json();
  if (check.status !== 200 || report.ok !== true)
    throw new Error(`verify setup: ${check.status} ${JSON.stringify(report).slice(0, 500)}`);
  const verifyOpts = {
    url: `${url}/v1/sign/verify`,
    method: 'POST',
    headers: auth,
    body: JSON.stringify(verifyBody),
  };
  let verify = SKIPPED;
  let verifyLight = SKIPPED;
  if (runs('verify')) {
    await warm(verifyOpts);
    verify = await profiled('verify', () => cannon(autocannon, verifyOpts));
    // The same at light load: latency without queueing behind 32 connections.
    verifyLight = await cannon(autocannon, { ...verifyOpts, connections: 4 });
  }
  const completed = runs('completed')
    ? await profiled('completed', () => completeAll({ url, auth, senders, receiver, counts, servicePid }))
    : { perSecond: 0, committed: 0, counts: {}, e2eMs: 0, createdMs: 0, createErrors: 0, skipped: true };
  const accepted = runs('accepted')
    ? await acceptMany({ url, auth, senders, receiver, stopWorker, profiled })
    : SKIPPED;
  return { health, verify, verifyLight, accepted, completed };
}

/** Withdrawals completed end to end (worker on): WITHDRAWALS created over HTTP, timed until all are final. */
async function completeAll({ url, auth, senders, receiver, counts, servicePid }) {
  const body = (i) =>
    JSON.stringify({ party: senders[i % senders.length], receiver, amount: '1', memo: `bench ${i}` });
  const cpu0 = await cpuMs(servicePid);
  const t0 = performance.now();
  let next = 0;
  let createErrors = 0;
  const { post, agent } = withdrawalPoster(http, { url, headers: auth, keyPrefix: 'e2e', bodyOf: body });
  const create = async () => {
    while (next < WITHDRAWALS) {
      const i = next++;
      const status = await post(i);
      if (status !== 201 && status !== 200) createErrors++;
    }
  };
  try {
    await Promise.all(Array.from({ length: 16 }, create));
  } finally {
    agent.destroy();
  }
  const createdMs = performance.now() - t0;
  let byState = {};
  const deadline = Date.now() + 300_000;
  for (;;) {
    byState = await counts();
    const done = FINAL.reduce((n, s) => n + (byState[s] ?? 0), 0);
    if (done >= WITHDRAWALS - createErrors || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const e2eMs = performance.now() - t0;
  const cpu1 = await cpuMs(servicePid);
  const committed = byState.committed ?? 0;
  const per = (k) => (cpu1[k] - cpu0[k]) / Math.max(1, committed);
  return {
    cpuPerWithdrawal: { service: per('service'), postgres: per('postgres'), bench: per('bench') },
    perSecond: committed / (e2eMs / 1000),
    committed,
    counts: byState,
    e2eMs,
    createdMs,
    createErrors,
  };
}

/** POST /v1/withdrawals accepted, with the worker stopped or held off (`stopWorker`). */
async function acceptMany({ url, auth, senders, receiver, stopWorker, profiled }) {
  const { default: autocannon } = await import('autocannon');
  const warm = (opts) => autocannon({ connections: 8, duration: 2, ...opts });
  await stopWorker();
  let n = 0;
  const acceptOpts = {
    url: `${url}/v1/withdrawals`,
    requests: [
      {
        method: 'POST',
        headers: auth,
        setupRequest: (req) => {
          const i = n++;
          return {
            ...req,
            headers: { ...req.headers, 'idempotency-key': randomUUID() },
            body: JSON.stringify({ party: senders[i % senders.length], receiver, amount: '1' }),
          };
        },
      },
    ],
  };
  await warm(acceptOpts);
  return profiled('accepted', () => cannon(autocannon, acceptOpts));
}

// ------------------------------------------------------------------ default mode: one service child process

function rpc(child, type, answer, extra = {}) {
  return new Promise((resolve) => {
    const on = (m) => {
      if (m.type === answer) {
        child.off('message', on);
        resolve(m);
      }
    };
    child.on('message', on);
    child.send({ type, ...extra });
  });
}

async function driverMain() {
  const load = loadavg()[0];
  const child = fork(fileURLToPath(import.meta.url), ['--server'], {
    stdio: 'inherit',
  });
  const ready = await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`service exited (${code}) before it was ready`)));
  });
  const { pipelineMs, partyGetMs, policyMs } = ready;
  try {
    const results = await measure({
      ...ready,
      counts: async () => (await rpc(child, 'counts', 'counts')).counts,
      servicePid: child.pid,
      stopWorker: () => rpc(child, 'pause', 'paused'),
      // BENCH_PROF=<dir>: a V8 CPU profile of the service process per measured window.
      profiled: process.env.BENCH_PROF
        ? async (name, run) => {
            const started = await rpc(child, 'prof-start', 'prof-started');
            if (started.error) throw new Error(`BENCH_PROF: the profiler did not start: ${started.error}`);
            try {
              return await run();
            } finally {
              const stopped = await rpc(child, 'prof-stop', 'prof-stopped', { name });
              if (stopped.error) console.error(`BENCH_PROF: no ${name} profile: ${stopped.error}`);
            }
          }
        : undefined,
    });
    report_(results, {
      mode: `one service child process (createService, built-in sandbox inside it), database ${DB}`,
      load,
      worker: `worker concurrency ${CONCURRENCY}`,
      inProcess: { where: 'in the service process', pipelineMs, partyGetMs, policyMs },
      acceptedNote: 'the withdrawal worker stopped: acceptance alone',
    });
  } finally {
    // autocannon stops mid-request at the end of a run; let those handlers finish first.
    await new Promise((r) => setTimeout(r, 1000));
    child.send({ type: 'close' });
    await new Promise((r) => child.once('exit', r));
  }
}

// ------------------------------------------------------------------ worker mode: `canton-signer serve`

/** A port nothing listens on right now. */
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

/** Resolves once `url`/ready answers 200; rejects when `child` exits first or after `timeoutMs`. */
async function untilReady(url, child, timeoutMs = 60_000) {
  let exited;
  const onExit = (code, signal) => {
    exited = `${code ?? signal}`;
  };
  child.once('exit', onExit);
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      if (exited !== undefined) throw new Error(`canton-signer serve exited (${exited}) before it was ready`);
      const r = await fetch(`${url}/ready`).catch(() => undefined);
      if (r?.status === 200) return;
      await r?.arrayBuffer();
      if (Date.now() > deadline) throw new Error(`canton-signer serve not ready after ${timeoutMs / 1000} s`);
      await new Promise((res) => setTimeout(res, 200));
    }
  } finally {
    child.off('exit', onExit);
  }
}

/**
 * From now on, every new withdrawal is born leased (for an hour) to an owner no
 * worker is, so the workers of the service processes, which cannot be stopped
 * from outside, claim none of them: the accepted measure then measures
 * acceptance alone, as the default mode does with its worker stopped.
 */
async function holdNewWithdrawals(db) {
  await db.query(`CREATE FUNCTION bench_hold() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      NEW.lease_owner := 'bench-hold';
      NEW.lease_until := now() + interval '1 hour';
      RETURN NEW;
    END $$`);
  await db.query(
    'CREATE TRIGGER bench_hold BEFORE INSERT ON withdrawals FOR EACH ROW EXECUTE FUNCTION bench_hold()',
  );
}

/** The child process ids of `pid` (Linux /proc; [] elsewhere). */
async function childrenOf(pid) {
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '');
  return text.split(/\s+/).filter(Boolean).map(Number);
}

/**
 * CPU time (user + system, ms) used so far by `pid` and its descendants, and by every
 * PostgreSQL server process (Linux /proc; zeros elsewhere): what one measure cost.
 */
async function cpuMs(pid) {
  const { readFile, readdir } = await import('node:fs/promises');
  const ticks = async (p) => {
    const stat = await readFile(`/proc/${p}/stat`, 'utf8').catch(() => undefined);
    if (!stat) return 0;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]);
  };
  let service = 0;
  for (const todo = [pid]; todo.length > 0; ) {
    const p = todo.pop();
    service += await ticks(p);
    todo.push(...(await childrenOf(p)));
  }
  let postgres = 0;
  for (const d of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(d)) continue;
    const comm = await readFile(`/proc/${d}/comm`, 'utf8').catch(() => '');
    if (comm.startsWith('postgres')) postgres += await ticks(d);
  }
  const own = process.cpuUsage();
  // /proc counts in clock ticks (100 per second on Linux).
  return { service: service * 10, postgres: postgres * 10, bench: (own.user + own.system) / 1000 };
}

/** The number of child processes of `pid` (Linux /proc; undefined elsewhere). */
async function childCount(pid) {
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => undefined);
  return text === undefined ? undefined : text.split(/\s+/).filter(Boolean).length;
}

async function workersMain() {
  const load = loadavg()[0];
  const { startSandbox } = await import(dist('sandbox/server.js'));
  const { LEDGER_API_USER } = await import(dist('sandbox/network.js'));
  const { transfer } = await import(dist('flows/transfer.js'));

  // The network in this process, so that every service process reaches the same one by its URLs.
  const sandbox = await startSandbox({ seed: 'bench-api' });
  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-bench-api-'));
  let pg;
  let store;
  let child;
  try {
    pg = await throwAwayPostgres(dist, PG_ADMIN_URL, { max: 4 });
    // Set-up through a service of this process (not listening, no worker) over the same database
    // and keystore: migrate, keys, parties, the verify body, the in-process timings.
    const setup = await benchService(dist, {
      db: pg.db,
      dir,
      secret: SECRET,
      concurrency: CONCURRENCY,
      sandbox,
      worker: false,
    });
    store = setup.store;
    const { senders, receiver, verifier } = await hostParties(setup.host);
    const verifyBody = await verifyBodyFrom(setup.service.deps.flows, transfer, verifier, receiver);
    const inProcess = await inProcessTimings(dist, { flows: setup.service.deps.flows, store, verifyBody });
    await setup.service.close();
    await setup.signer.close?.();
    const token = await benchToken(SECRET);

    const port = await freePort();
    const configFile = join(dir, 'config.json');
    const config = benchConfig({ dir, sandbox, ledgerApiUser: LEDGER_API_USER, databaseUrl: pg.url, port });
    // Secrets through the environment only: the file holds none.
    await writeFile(configFile, `${JSON.stringify(config, null, 2)}\n`);
    const args = [
      ...(process.env.BENCH_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROF}`] : []),
      fileURLToPath(new URL('../bin/canton-signer.js', import.meta.url)),
      'serve',
      ...(WORKERS > 1 ? ['--workers', String(WORKERS)] : []),
      '--config',
      configFile,
    ];
    child = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        CANTON_SIGNER_PASSPHRASE: BENCH_PASSPHRASE,
        CANTON_SIGNER_AUTH_SHARED_SECRET: SECRET,
      },
    });
    // Its log lines (level warn: only problems) go on to this process's stderr.
    createInterface({ input: child.stdout }).on('line', (l) => process.stderr.write(`serve: ${l}\n`));
    const url = `http://127.0.0.1:${port}`;
    await untilReady(url, child);
    // Readiness is one process answering; with several, let the others finish starting too.
    if (WORKERS > 1) {
      const until = Date.now() + 30_000;
      while (((await childCount(child.pid)) ?? WORKERS) < WORKERS && Date.now() < until)
        await new Promise((r) => setTimeout(r, 200));
      await new Promise((r) => setTimeout(r, 2000));
    }

    const results = await measure({
      url,
      token,
      verifyBody,
      senders,
      receiver,
      counts: () => store.withdrawals.countByState(),
      servicePid: child.pid,
      stopWorker: () => holdNewWithdrawals(pg.db),
    });
    report_(results, {
      mode:
        `\`canton-signer serve${WORKERS > 1 ? ` --workers ${WORKERS}` : ''}\` (${WORKERS} service process${WORKERS > 1 ? 'es' : ''}), ` +
        'sandbox network and autocannon in this process, database postgres',
      load,
      worker: "worker concurrency serve's default per process",
      inProcess: { where: 'in the bench process', ...inProcess },
      acceptedNote:
        'the withdrawal workers running but kept off every new withdrawal (a trigger on the throw-away ' +
        'database leases each to the bench as it is inserted; each request still costs one failing claim): acceptance alone',
    });
  } finally {
    // autocannon stops mid-request at the end of a run; let those handlers finish first.
    await new Promise((r) => setTimeout(r, 1000));
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      const { code, signal } = await exited;
      clearTimeout(timer);
      if (code !== 0) console.error(`canton-signer serve exited with ${code ?? signal} after SIGTERM`);
    }
    await store?.close();
    await pg?.drop();
    await sandbox.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Prints the table. `run`: the mode (processes, database), the load average at start, the
 * withdrawal worker's setting, the in-process timings and what ran during the accepted measure.
 */
function report_({ health, verify, verifyLight, accepted, completed }, run) {
  const { inProcess } = run;
  const f0 = (x) => x.toFixed(0);
  const pct = (a, b) => `${((a / b) * 100).toFixed(0)}%`;
  const rows = [
    ['GET /health (floor)', f0(health.rps), `${health.p99} ms`, '100%', '-', health.bad],
    [
      'POST /v1/sign/verify',
      f0(verify.rps),
      `${verify.p99} ms`,
      pct(verify.rps, health.rps),
      `${pct(verify.rps, TARGETS.verify)} of ${TARGETS.verify}/s; p99 ${verify.p99 < TARGETS.verifyP99 ? 'meets' : 'misses'} < ${TARGETS.verifyP99} ms`,
      verify.bad,
    ],
    [
      'POST /v1/sign/verify, 4 connections',
      f0(verifyLight.rps),
      `${verifyLight.p99} ms`,
      pct(verifyLight.rps, health.rps),
      `p99 ${verifyLight.p99 < TARGETS.verifyP99 ? 'meets' : 'misses'} < ${TARGETS.verifyP99} ms`,
      verifyLight.bad,
    ],
    [
      'POST /v1/withdrawals (accepted)',
      f0(accepted.rps),
      `${accepted.p99} ms`,
      pct(accepted.rps, health.rps),
      `${pct(accepted.rps, TARGETS.accepted)} of ${TARGETS.accepted}/s`,
      accepted.bad,
    ],
    [
      `withdrawals completed (${WITHDRAWALS})`,
      completed.perSecond.toFixed(1),
      '-',
      '-',
      `${pct(completed.perSecond, TARGETS.completed)} of ${TARGETS.completed}/s`,
      completed.createErrors,
    ],
  ];
  const head = ['measure', 'req/s', 'p99', 'vs /health', 'vs target', 'non-2xx/errors'];
  console.log(
    `\nREST API benchmark: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}`,
  );
  console.log(`mode: ${run.mode}; load average ${run.load.toFixed(2)} at start`);
  console.log(
    `autocannon: ${CONNECTIONS} connections, ${DURATION} s per run; database ${DB}; ${PARTIES} sending parties, ${run.worker}\n`,
  );
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  const measured = [health, verify, verifyLight, accepted, completed];
  rows.forEach((r, i) => {
    if (!measured[i].skipped) console.log(`| ${r.join(' | ')} |`);
  });
  console.log(
    `\nend to end: ${completed.committed} committed of ${WITHDRAWALS} in ${(completed.e2eMs / 1000).toFixed(2)} s ` +
      `(all created after ${(completed.createdMs / 1000).toFixed(2)} s); final states ${JSON.stringify(completed.counts)}`,
  );
  if (completed.cpuPerWithdrawal) {
    const c = completed.cpuPerWithdrawal;
    console.log(
      `CPU per committed withdrawal (creation included): service ${c.service.toFixed(1)} ms, ` +
        `PostgreSQL ${c.postgres.toFixed(1)} ms, bench process ${c.bench.toFixed(1)} ms ` +
        `(${run.mode.includes('sandbox network and autocannon in this process') ? 'the sandbox network and the HTTP clients' : 'the HTTP clients'}); ` +
        `${(c.service + c.postgres + c.bench).toFixed(1)} ms in all, against ${((cpus().length * 1000) / TARGETS.completed).toFixed(0)} ms that ${TARGETS.completed}/s on ${cpus().length} cores allows`,
    );
  }
  console.log(
    `${inProcess.where}, no HTTP: verification pipeline ${inProcess.pipelineMs.toFixed(3)} ms ` +
      `(${(1000 / inProcess.pipelineMs).toFixed(0)}/s on one core); party book lookup ${inProcess.partyGetMs.toFixed(3)} ms; ` +
      `policy decision and settlement ${inProcess.policyMs.toFixed(3)} ms (${((100 * inProcess.policyMs) / inProcess.pipelineMs).toFixed(1)} % of the pipeline; ${process.env.BENCH_POLICY ? `policy ${process.env.BENCH_POLICY}` : 'no policy: the built-in allow-all'})`,
  );
  console.log(`p50: health ${health.p50} ms, verify ${verify.p50} ms, accepted ${accepted.p50} ms`);
  console.log(`accepted measured with ${run.acceptedNote}`);
}

if (process.argv[2] === '--server') await serverMain();
else if (WORKERS > 0) await workersMain();
else await driverMain();

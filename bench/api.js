#!/usr/bin/env node
/**
 * REST API load benchmark (issue 6 §7): `npm run bench:api`.
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
 * Environment: BENCH_DURATION (s per autocannon run, default 10),
 * BENCH_CONNECTIONS (default 32), BENCH_WITHDRAWALS (default 500),
 * BENCH_PARTIES (sending parties, default 16), BENCH_CONCURRENCY (worker,
 * default = parties), BENCH_DB (memory | dir | postgres: a throw-away database
 * on BENCH_PG_ADMIN_URL, default postgresql://postgres@127.0.0.1:5432/postgres;
 * default memory), BENCH_PROF
 * (a folder: CPU profile of the service process).
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchService, verifyBodyFrom } from './common.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const WITHDRAWALS = Number(process.env.BENCH_WITHDRAWALS ?? 500);
const PARTIES = Number(process.env.BENCH_PARTIES ?? 16);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? PARTIES);
const DB = process.env.BENCH_DB ?? 'memory';
const PG_ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const SECRET = 'bench-shared-secret-0123456789-0123456789';
const TARGETS = { verify: 2000, verifyP99: 20, accepted: 1000, completed: 200 };

// ------------------------------------------------------------------ the service (child process)

async function serverMain() {
  const dist = (p) => new URL(`../dist/${p}`, import.meta.url).href;
  const { openPglite, openPostgres } = await import(dist('store/index.js'));
  const { transfer } = await import(dist('flows/transfer.js'));
  const { SignJWT } = await import('jose');

  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-bench-api-'));
  let dropDb = async () => {};
  let db;
  if (DB === 'postgres') {
    // A throw-away database on the PostgreSQL server (BENCH_PG_ADMIN_URL).
    const { default: pg } = await import('pg');
    const name = `cs_bench_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    const u = new URL(PG_ADMIN_URL);
    u.pathname = `/${name}`;
    db = await openPostgres(u.toString(), { max: 10 });
    dropDb = async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    };
  } else {
    db = await openPglite(DB === 'memory' ? 'memory' : join(dir, 'db'));
  }
  const { service, store, host } = await benchService(dist, {
    db,
    dir,
    secret: SECRET,
    concurrency: CONCURRENCY,
  });
  const senders = [];
  for (let i = 0; i < PARTIES; i++) senders.push(await host(`sender${i}`, '1000000'));
  const receiver = await host('receiver');
  const verifier = await host('verifier', '1000');

  // A real prepared transfer: the transfer flow's own prepare, captured on its way.
  const verifyBody = await verifyBodyFrom(service, transfer, verifier, receiver);
  // The pipeline alone (decode, re-hash, intent, window), no HTTP: where the verify route's time goes.
  const { verifyOnly } = await import(dist('flows/sign-execute.js'));
  const { withKnownParty } = await import(dist('server/routes/context.js'));
  const record = await store.parties.get(verifier);
  const direct = () =>
    verifyOnly(withKnownParty(service.deps.flows, record), {
      partyId: verifier,
      preparedTransaction: verifyBody.preparedTransaction,
      claimedHash: verifyBody.hash,
      scheme: verifyBody.hashingScheme,
      intent: verifyBody.intent,
    });
  for (let i = 0; i < 200; i++) await direct();
  let t0 = performance.now();
  for (let i = 0; i < 1000; i++) await direct();
  const pipelineMs = (performance.now() - t0) / 1000;
  t0 = performance.now();
  for (let i = 0; i < 1000; i++) await store.parties.get(verifier);
  const partyGetMs = (performance.now() - t0) / 1000;
  const token = await new SignJWT({ canton_signer_roles: ['operator'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('bench')
    .setIssuer('bench')
    .setAudience('bench')
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(new TextEncoder().encode(SECRET));
  const url = await service.listen();

  process.on('message', async (m) => {
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
  process.send({ type: 'ready', url, token, verifyBody, senders, receiver, pipelineMs, partyGetMs });
}

// ------------------------------------------------------------------ the driver

function rpc(child, type, answer) {
  return new Promise((resolve) => {
    const on = (m) => {
      if (m.type === answer) {
        child.off('message', on);
        resolve(m);
      }
    };
    child.on('message', on);
    child.send({ type });
  });
}

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

async function driverMain() {
  const { default: autocannon } = await import('autocannon');
  const child = fork(fileURLToPath(import.meta.url), ['--server'], {
    stdio: 'inherit',
    // BENCH_PROF=<dir>: a V8 CPU profile of the service process, for finding where the time goes.
    execArgv: process.env.BENCH_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROF}`] : [],
  });
  const ready = await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`service exited (${code}) before it was ready`)));
  });
  const { url, token, verifyBody, senders, receiver, pipelineMs, partyGetMs } = ready;
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const warm = (opts) => autocannon({ connections: 8, duration: 2, ...opts });

  try {
    // 0. the floor
    await warm({ url: `${url}/health` });
    const health = await cannon(autocannon, { url: `${url}/health` });

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
    await warm(verifyOpts);
    const verify = await cannon(autocannon, verifyOpts);
    // The same at light load: latency without queueing behind 32 connections.
    const verifyLight = await cannon(autocannon, { ...verifyOpts, connections: 4 });

    // 2. completed end to end (worker on)
    const body = (i) =>
      JSON.stringify({ party: senders[i % senders.length], receiver, amount: '1', memo: `bench ${i}` });
    const t0 = performance.now();
    let next = 0;
    let createErrors = 0;
    const create = async () => {
      while (next < WITHDRAWALS) {
        const i = next++;
        const r = await fetch(`${url}/v1/withdrawals`, {
          method: 'POST',
          headers: { ...auth, 'idempotency-key': `e2e-${i}` },
          body: body(i),
        });
        if (r.status !== 201 && r.status !== 200) createErrors++;
        await r.arrayBuffer();
      }
    };
    await Promise.all(Array.from({ length: 16 }, create));
    const createdMs = performance.now() - t0;
    let counts = {};
    const deadline = Date.now() + 300_000;
    for (;;) {
      counts = (await rpc(child, 'counts', 'counts')).counts;
      const done = FINAL.reduce((n, s) => n + (counts[s] ?? 0), 0);
      if (done >= WITHDRAWALS - createErrors || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const e2eMs = performance.now() - t0;
    const committed = counts.committed ?? 0;
    const completed = {
      perSecond: committed / (e2eMs / 1000),
      committed,
      counts,
      e2eMs,
      createdMs,
      createErrors,
    };

    // 3. accepted (worker stopped)
    await rpc(child, 'pause', 'paused');
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
    const accepted = await cannon(autocannon, acceptOpts);

    report_(health, verify, verifyLight, accepted, completed, { pipelineMs, partyGetMs });
  } finally {
    // autocannon stops mid-request at the end of a run; let those handlers finish first.
    await new Promise((r) => setTimeout(r, 1000));
    child.send({ type: 'close' });
    await new Promise((r) => child.once('exit', r));
  }
}

function report_(health, verify, verifyLight, accepted, completed, inProcess) {
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
  console.log(
    `autocannon: ${CONNECTIONS} connections, ${DURATION} s per run; database ${DB}; ${PARTIES} sending parties, worker concurrency ${CONCURRENCY}\n`,
  );
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  console.log(
    `\nend to end: ${completed.committed} committed of ${WITHDRAWALS} in ${(completed.e2eMs / 1000).toFixed(2)} s ` +
      `(all created after ${(completed.createdMs / 1000).toFixed(2)} s); final states ${JSON.stringify(completed.counts)}`,
  );
  console.log(
    `in the service process, no HTTP: verification pipeline ${inProcess.pipelineMs.toFixed(3)} ms ` +
      `(${(1000 / inProcess.pipelineMs).toFixed(0)}/s on one core); party book lookup ${inProcess.partyGetMs.toFixed(3)} ms`,
  );
  console.log(`p50: health ${health.p50} ms, verify ${verify.p50} ms, accepted ${accepted.p50} ms`);
}

if (process.argv[2] === '--server') await serverMain();
else await driverMain();

#!/usr/bin/env node
/**
 * Ledger ingestion benchmark: `npm run bench:ingest`.
 *
 * This process runs a sandbox network (timers off), hosts a treasury party
 * on it, books it in a throw-away PostgreSQL database, gives it a transfer
 * preapproval and has customers outside the book deposit into it
 * (BENCH_UPDATES deposits through the sandbox's batch control, one in five
 * two-step, memo acct-<n>). Then it measures:
 *   A. the Ledger API alone: the same updates read page by page from offset 0
 *      to the ledger end, with the filter ingestion uses (updates/s);
 *   B. ingestion (exchange/ingest.ts) in a CHILD process (this script forked
 *      with --ingest) over a fresh database per page size, from cursor 0 to
 *      the ledger end: updates/s, the child's CPU per update, PostgreSQL's CPU
 *      per update, and where the child's wall time went (Ledger API reads,
 *      each store.ledger call);
 *   C. deposit → webhook latency: `canton-signer serve` (a child) over the
 *      last caught-up database, with a webhook receiver in this process;
 *      single deposits sent through the control at a steady rate, each timed
 *      from the control's answer to its `deposit.credited` webhook.
 * Prints a table with the ratio B/A and the goal (2,000 updates/s).
 *
 * Environment: BENCH_UPDATES (deposits, default 5000), BENCH_PAGE (page
 * sizes, comma-separated, the first is the headline; default 200,50,1000),
 * BENCH_RATE (deposits/s in C, default 50), BENCH_SECONDS (length of C,
 * default 10), BENCH_POLL_MS (ingestion poll of the serve in C; default the
 * service's, 500), BENCH_PG_ADMIN_URL (default
 * postgresql://postgres@127.0.0.1:5432/postgres), BENCH_PROF (a folder: CPU
 * profiles of the ingestion children and of the serve process).
 */
import { fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { BENCH_PASSPHRASE, benchConfig, benchService, throwAwayPostgres } from './common.js';

const UPDATES = Number(process.env.BENCH_UPDATES ?? 5000);
const PAGES = (process.env.BENCH_PAGE ?? '200,50,1000').split(',').map(Number);
const RATE = Number(process.env.BENCH_RATE ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const POLL_MS = process.env.BENCH_POLL_MS ? Number(process.env.BENCH_POLL_MS) : undefined;
const PG_ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const SECRET = 'bench-shared-secret-0123456789-0123456789';
const GOAL = 2000;
const RULES = [{ name: 'accounts', match: 'prefix', value: 'acct-' }];
const dist = (p) => new URL(`../dist/${p}`, import.meta.url).href;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The filter ingestion reads with (the same function). */
async function ingestionFormat(parties) {
  const { updateFormat } = await import(dist('exchange/ingest.js'));
  return updateFormat(parties);
}

// ------------------------------------------------------------------ B: the ingestion child

async function ingestMain() {
  const { openPostgres, storeOn } = await import(dist('store/index.js'));
  const { LedgerApiClient } = await import(dist('canton/ledger-api/client.js'));
  const { createIngestion } = await import(dist('exchange/ingest.js'));
  const { attributionOf } = await import(dist('exchange/deposits.js'));
  const db = await openPostgres(process.env.BENCH_DB_URL, { max: 4 });
  const store = storeOn(db, 'ingest');
  const ledger = new LedgerApiClient({ baseUrl: process.env.BENCH_LEDGER_URL });
  // Wall time per call of the Ledger API reads and of each store.ledger method (awaited, so
  // nested or overlapping calls would count twice; ingestion makes them one after the other).
  const spent = new Map();
  const timed = (obj, name, label) => {
    const f = obj[name].bind(obj);
    obj[name] = async (...a) => {
      const t = performance.now();
      try {
        return await f(...a);
      } finally {
        const s = spent.get(label) ?? { ms: 0, calls: 0 };
        s.ms += performance.now() - t;
        s.calls++;
        spent.set(label, s);
      }
    };
  };
  // Each statement inside a transaction (writePage's), by its first words.
  const transaction = db.transaction.bind(db);
  db.transaction = (fn) =>
    transaction((tx) => {
      const q = {
        query: async (sql, params) => {
          const t = performance.now();
          try {
            return await tx.query(sql, params);
          } finally {
            const label = `  sql ${sql.replace(/\s+/g, ' ').trim().slice(0, 48)}`;
            const s = spent.get(label) ?? { ms: 0, calls: 0 };
            s.ms += performance.now() - t;
            s.calls++;
            spent.set(label, s);
          }
        },
      };
      return fn(q);
    });
  timed(ledger, 'updates', 'ledger-api updates');
  timed(ledger, 'ledgerEnd', 'ledger-api ledgerEnd');
  timed(ledger, 'activeContracts', 'ledger-api activeContracts');
  for (const name of Object.getOwnPropertyNames(Object.getPrototypeOf(store.ledger)))
    if (name !== 'constructor' && typeof store.ledger[name] === 'function')
      timed(store.ledger, name, `store.ledger.${name}`);
  const ingestion = createIngestion({
    store,
    ledger,
    attribute: attributionOf(RULES, 256),
    pageSize: Number(process.env.BENCH_PAGE_SIZE),
    pollMs: 50,
  });
  process.send({ ready: true });
  await new Promise((r) => process.once('message', r));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const ingested = await ingestion.catchUp();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await ingestion.stop();
  // Still connected: the parent reads the CPU of this database's server processes first.
  process.send({ ingested, ms, cpuMs: (cpu.user + cpu.system) / 1000, spent: [...spent] });
  await new Promise((r) => process.once('message', r));
  await store.close();
  process.disconnect();
}

/** CPU ms of each postgres process so far, by pid (Linux /proc, 100 ticks a second; none elsewhere). */
async function postgresCpuMs() {
  const ms = new Map();
  for (const d of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(d)) continue;
    const comm = await readFile(`/proc/${d}/comm`, 'utf8').catch(() => '');
    if (!comm.startsWith('postgres')) continue;
    const stat = await readFile(`/proc/${d}/stat`, 'utf8').catch(() => '');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ms.set(d, (Number(f[11] ?? 0) + Number(f[12] ?? 0)) * 10);
  }
  return ms;
}

/**
 * PostgreSQL CPU ms between two samples, of the server processes `pids` only (the
 * measured database's connections: the server is shared with other work).
 */
function postgresCpuBetween(before, after, pids) {
  let ms = 0;
  for (const pid of pids) ms += (after.get(pid) ?? 0) - (before.get(pid) ?? 0);
  return ms;
}

/** A fresh database with the schema and the treasury booked; runs one ingestion child over it. */
async function measureIngestion({ sandbox, record, pageSize, end }) {
  const { migrate, storeOn } = await import(dist('store/index.js'));
  const pg = await throwAwayPostgres(dist, PG_ADMIN_URL, { max: 2 });
  await migrate(pg.db);
  const store = storeOn(pg.db, 'bench');
  await store.parties.put(record);
  const child = fork(fileURLToPath(import.meta.url), ['--ingest'], {
    execArgv: process.env.BENCH_PROF
      ? [
          '--cpu-prof',
          `--cpu-prof-dir=${process.env.BENCH_PROF}`,
          `--cpu-prof-name=ingest-page${pageSize}.cpuprofile`,
        ]
      : [],
    env: {
      ...process.env,
      BENCH_DB_URL: pg.url,
      BENCH_LEDGER_URL: sandbox.urls.ledgerApi,
      BENCH_PAGE_SIZE: String(pageSize),
    },
  });
  const next = () =>
    new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`the ingestion child exited with ${code}`)));
    });
  await next();
  const pg0 = await postgresCpuMs();
  const own0 = process.cpuUsage();
  child.send('go');
  const r = await next();
  const own = process.cpuUsage(own0);
  const pids = (
    await pg.db.query(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    )
  ).rows.map((x) => String(x.pid));
  const pgMs = postgresCpuBetween(pg0, await postgresCpuMs(), pids);
  child.send('close');
  // This process meanwhile: the sandbox serving the Ledger API reads.
  const sandboxMs = (own.user + own.system) / 1000;
  await new Promise((res) => (child.exitCode === null ? child.once('exit', res) : res()));
  const cursor = Number((await pg.db.query('SELECT "offset" FROM ingest_cursor')).rows[0]?.offset ?? -1);
  const deposits = (await pg.db.query('SELECT state, count(*)::int AS n FROM deposits GROUP BY state')).rows;
  if (cursor < end) throw new Error(`ingestion stopped at offset ${cursor}, before the ledger end ${end}`);
  return { pageSize, ...r, pgMs, sandboxMs, cursor, deposits, pg, store };
}

// ------------------------------------------------------------------ A: the Ledger API alone

async function measureRead(ledger, format, pageSize, end) {
  const { updateOffset } = await import(dist('canton/ledger-api/client.js'));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let offset = 0;
  let updates = 0;
  let first;
  while (offset < end) {
    const items = await ledger.updates(
      { beginExclusive: offset, endInclusive: end, updateFormat: format },
      { limit: pageSize },
    );
    const us = items.flatMap((i) => (i.update ? [i.update] : []));
    if (us.length === 0) break;
    first ??= us;
    updates += us.length;
    offset = Math.max(...us.map(updateOffset));
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  // Both sides are this process: the sandbox serving and the client reading.
  // The size of an update as JSON (after the client's parsing; the wire form is about the same).
  const bytes = first ? JSON.stringify(first).length / first.length : 0;
  return {
    pageSize,
    updates,
    ms,
    perSecond: (updates * 1000) / ms,
    cpuMs: (cpu.user + cpu.system) / 1000,
    bytes,
  };
}

// ------------------------------------------------------------------ C: deposit → webhook

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function untilReady(url, child) {
  const until = Date.now() + 60_000;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`canton-signer serve exited with ${child.exitCode}`);
    const ok = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await sleep(200);
  }
  throw new Error('canton-signer serve did not answer /health within 60 s');
}

const percentile = (sorted, p) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

async function measureLatency({ sandbox, dir, pg, treasury, ledger }) {
  const { LEDGER_API_USER } = await import(dist('sandbox/network.js'));
  const arrived = new Map();
  let hooks = 0;
  const receiver = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      hooks++;
      try {
        const e = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const id = e.data?.updateId ?? e.data?.settledUpdateId;
        if (e.type === 'deposit.credited' && id && !arrived.has(id))
          arrived.set(id, { at, created: Date.parse(e.createdAt) });
      } catch {}
      res.writeHead(204).end();
    });
  });
  await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
  const port = await freePort();
  const config = {
    ...benchConfig({ dir, sandbox, ledgerApiUser: LEDGER_API_USER, databaseUrl: pg.url, port }),
    webhooks: {
      receivers: [
        {
          name: 'bench',
          url: `http://127.0.0.1:${receiver.address().port}/hook`,
          events: ['deposit.credited'],
          secretEnv: ['BENCH_WEBHOOK_SECRET'],
        },
      ],
    },
    exchange: {
      ingestion: { enabled: true, ...(POLL_MS ? { pollMs: POLL_MS } : {}) },
      deposits: { attribution: RULES },
    },
  };
  const configFile = join(dir, 'serve.json');
  await writeFile(configFile, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  const child = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_PROF
        ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROF}`, '--cpu-prof-name=serve.cpuprofile']
        : []),
      fileURLToPath(new URL('../bin/canton-signer.js', import.meta.url)),
      'serve',
      '--config',
      configFile,
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        CANTON_SIGNER_PASSPHRASE: BENCH_PASSPHRASE,
        CANTON_SIGNER_AUTH_SHARED_SECRET: SECRET,
        BENCH_WEBHOOK_SECRET: randomBytes(32).toString('hex'),
      },
    },
  );
  createInterface({ input: child.stdout }).on('line', (l) => process.stderr.write(`serve: ${l}\n`));
  try {
    await untilReady(`http://127.0.0.1:${port}`, child);
    // Caught up: the cursor at the ledger end as it is now.
    const end = (await ledger.ledgerEnd()).offset;
    const until = Date.now() + 60_000;
    for (;;) {
      const c = Number((await pg.db.query('SELECT "offset" FROM ingest_cursor')).rows[0]?.offset ?? 0);
      if (c >= end) break;
      if (Date.now() > until) throw new Error(`serve's ingestion did not reach ${end} (at ${c})`);
      await sleep(100);
    }
    const sent = [];
    const total = Math.round(RATE * SECONDS);
    const t0 = performance.now();
    const inFlight = [];
    for (let i = 0; i < total; i++) {
      const due = t0 + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(
        fetch(`${sandbox.urls.origin}/sandbox/customer/deposit`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ to: treasury, amount: '1', memo: `acct-c${i}`, mode: 'one-step' }),
        }).then(async (r) => {
          const answered = performance.now();
          const answeredWall = Date.now();
          const j = await r.json();
          if (!r.ok) throw new Error(`deposit ${i}: ${r.status} ${JSON.stringify(j)}`);
          sent.push({ updateId: j.updateId, answered, answeredWall });
        }),
      );
    }
    await Promise.all(inFlight);
    const sendMs = performance.now() - t0;
    const deadline = Date.now() + 30_000;
    while (sent.some((s) => !arrived.has(s.updateId)) && Date.now() < deadline) await sleep(50);
    const got = sent.filter((s) => arrived.has(s.updateId));
    const inOrder = got.map((s) => arrived.get(s.updateId).at - s.answered);
    const lat = [...inOrder].sort((a, b) => a - b);
    // Latency of the first and the last tenth sent: growing means the pipeline falls behind the rate.
    const tenth = Math.max(1, Math.floor(inOrder.length / 10));
    const median = (xs) =>
      percentile(
        [...xs].sort((a, b) => a - b),
        50,
      );
    // The event's createdAt is the start of the ingestion transaction that wrote it (PostgreSQL
    // now()): answer → event is reading and planning, event → webhook is writing and delivery.
    const toEvent = got.map((s) => arrived.get(s.updateId).created - s.answeredWall).sort((a, b) => a - b);
    return {
      sent: sent.length,
      received: lat.length,
      hooks,
      rate: (sent.length * 1000) / sendMs,
      p50: percentile(lat, 50),
      p99: percentile(lat, 99),
      max: lat.at(-1),
      min: lat[0],
      // The webhooks' own rate, first to last arrival: what one receiver is served at.
      hookRate: (() => {
        const ts = got.map((x) => arrived.get(x.updateId).at).sort((a, b) => a - b);
        return ts.length > 1 ? ((ts.length - 1) * 1000) / (ts.at(-1) - ts[0]) : Number.NaN;
      })(),
      firstTenth: median(inOrder.slice(0, tenth)),
      lastTenth: median(inOrder.slice(-tenth)),
      toEvent50: percentile(toEvent, 50),
      toEvent99: percentile(toEvent, 99),
    };
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    receiver.close();
  }
}

// ------------------------------------------------------------------ the driver

async function main() {
  const load = loadavg()[0];
  const { startSandbox } = await import(dist('sandbox/server.js'));
  const { acceptSetupProposal } = await import(dist('flows/setup-accept.js'));
  const sandbox = await startSandbox({ seed: 'bench-ingest', timers: false });
  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-bench-ingest-'));
  const cleanups = [];
  try {
    const setupDb = await throwAwayPostgres(dist, PG_ADMIN_URL, { max: 2 });
    cleanups.push(() => setupDb.drop());
    const setup = await benchService(dist, { db: setupDb.db, dir, secret: SECRET, sandbox, worker: false });
    cleanups.push(() => setup.store.close());
    cleanups.push(() => setup.service.close());
    const flows = setup.service.deps.flows;
    const treasury = await setup.host('treasury', '100');
    const record = await setup.store.parties.get(treasury);
    await flows.validator.createSetupProposal({ user_party_id: treasury });
    await acceptSetupProposal(flows, treasury);

    // The deposits, a thousand a request.
    const t = performance.now();
    for (let n = 0; n < UPDATES; n += 1000) {
      const deposits = [];
      for (let i = n; i < Math.min(UPDATES, n + 1000); i++)
        deposits.push({
          to: treasury,
          amount: '1',
          memo: `acct-${i}`,
          mode: i % 5 === 4 ? 'two-step' : 'one-step',
          customer: `c${i % 50}`,
        });
      const r = await fetch(`${sandbox.urls.origin}/sandbox/customer/deposit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ deposits }),
      });
      if (!r.ok) throw new Error(`deposit batch at ${n}: ${r.status} ${await r.text()}`);
    }
    const depositMs = performance.now() - t;
    const end = (await flows.ledger.ledgerEnd()).offset;
    console.error(`${UPDATES} deposits in ${(depositMs / 1000).toFixed(1)} s; ledger end ${end}`);

    // A: the same updates read alone, page by page.
    const format = await ingestionFormat([treasury]);
    const reads = [];
    for (const p of PAGES) reads.push(await measureRead(flows.ledger, format, p, end));

    // B: ingestion in a child, per page size, each over a fresh database.
    const ingests = [];
    for (const p of PAGES) {
      const r = await measureIngestion({ sandbox, record, pageSize: p, end });
      cleanups.push(() => r.pg.drop());
      cleanups.push(() => r.store.close());
      ingests.push(r);
      console.error(`page ${p}: ${r.ingested} updates in ${(r.ms / 1000).toFixed(2)} s`);
    }

    // C: the serve process over the headline database (caught up), deposits one at a time.
    const latency = await measureLatency({
      sandbox,
      dir,
      pg: ingests[0].pg,
      treasury,
      ledger: flows.ledger,
    });
    report({ load, reads, ingests, latency, depositMs, end });
  } finally {
    for (const c of cleanups.reverse()) await c().catch((e) => console.error(`cleanup: ${e}`));
    await sandbox.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function report({ load, reads, ingests, latency, depositMs, end }) {
  const f0 = (x) => x.toFixed(0);
  console.log(
    `\nLedger ingestion benchmark: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}; load average ${load.toFixed(2)} at start`,
  );
  console.log(
    `${UPDATES} deposits (one in five two-step) into one treasury party through the sandbox's batch control in ${(depositMs / 1000).toFixed(1)} s; ledger end ${end}; database postgres\n`,
  );
  const head = [
    'measure',
    'page',
    'updates',
    'updates/s',
    'B/A',
    'ingestion CPU/update',
    'PostgreSQL CPU/update',
    'sandbox CPU/update',
    'goal',
  ];
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  for (const a of reads)
    console.log(
      `| A: Ledger API read alone | ${a.pageSize} | ${a.updates} | ${f0(a.perSecond)} | - | - | - | ${f0((a.cpuMs * 1000) / a.updates)} µs (with the client) | - |`,
    );
  for (const b of ingests) {
    const a = reads.find((x) => x.pageSize === b.pageSize);
    const ps = (b.ingested * 1000) / b.ms;
    console.log(
      `| B: ingestion (child) | ${b.pageSize} | ${b.ingested} | ${f0(ps)} | ${(ps / a.perSecond).toFixed(2)} | ` +
        `${((b.cpuMs * 1000) / b.ingested).toFixed(0)} µs | ${((b.pgMs * 1000) / b.ingested).toFixed(0)} µs | ` +
        `${((b.sandboxMs * 1000) / b.ingested).toFixed(0)} µs | ` +
        `${ps >= GOAL ? 'met' : 'missed'} (≥ ${GOAL}/s) |`,
    );
  }
  console.log(
    `\nC: deposit → deposit.credited webhook (serve, ingestion poll ${POLL_MS ?? 500} ms): ${latency.sent} deposits at ${latency.rate.toFixed(1)}/s, ` +
      `${latency.received} webhooks matched (${latency.hooks} received): p50 ${f0(latency.p50 ?? Number.NaN)} ms, p99 ${f0(latency.p99 ?? Number.NaN)} ms, max ${f0(latency.max ?? Number.NaN)} ms, min ${f0(latency.min ?? Number.NaN)} ms; ` +
      `of which control answer → event created (the ingestion transaction's start) p50 ${f0(latency.toEvent50 ?? Number.NaN)} ms, p99 ${f0(latency.toEvent99 ?? Number.NaN)} ms; ` +
      `webhooks arrived at ${latency.hookRate.toFixed(1)}/s; p50 of the first tenth sent ${f0(latency.firstTenth ?? Number.NaN)} ms, of the last tenth ${f0(latency.lastTenth ?? Number.NaN)} ms`,
  );
  console.log(`an update is ${(reads[0].bytes / 1024).toFixed(1)} KiB of JSON on average (first page)`);
  for (const b of ingests) {
    const parts = b.spent
      .sort((x, y) => y[1].ms - x[1].ms)
      .map(([k, s]) => `${k} ${((100 * s.ms) / b.ms).toFixed(0)}% (${s.calls})`)
      .join(', ');
    console.log(
      `B page ${b.pageSize}: wall ${(b.ms / 1000).toFixed(2)} s — ${parts}; deposits ${JSON.stringify(b.deposits)}`,
    );
  }
}

if (process.argv[2] === '--ingest') await ingestMain();
else await main();

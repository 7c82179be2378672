#!/usr/bin/env node
/**
 * CPU cost of one `POST /v1/sign/verify`, in process (no sockets, no load
 * generator): `node bench/verify-profile.js` after `npm run build`.
 *
 * Builds the same service as bench/api.js (createService from dist/, the
 * built-in sandbox, PGlite in memory), captures a real prepared transfer from
 * the transfer flow's own prepare, then measures with process.cpuUsage:
 *   - inject: the whole route through fastify.inject (auth hook, zod body
 *     validation, party lookup, verifyOnly, the report's serialisation);
 *   - pipeline: verifyOnly called directly;
 *   - the parts: JSON.parse of the body, JWT verification, zod validation of
 *     the body, base64, decode, hash, intent check, window, JSON.stringify;
 *   - outside the route: encode (the sandbox's encoder on the same
 *     transaction) and verify-sig (verifySignature against the party's key);
 *   - http: real HTTP requests to the listening service, sent by autocannon
 *     from a child process (4 connections), with the CPU of this process
 *     (the service alone) per request;
 * Each measure runs BENCH_N times (default 2000) after a warm-up, repeated
 * BENCH_REPEAT times (default 5), and prints µs of CPU (user+system) per call
 * (the least disturbed run, then every run) and the least wall time.
 *
 * Environment: BENCH_N, BENCH_REPEAT, BENCH_DIST (folder of the built sources,
 * default ../dist), BENCH_ONLY (comma-separated measure names), BENCH_PROF (a
 * folder: a V8 CPU profile of the measured calls only, `<measure>.cpuprofile`),
 * BENCH_HEAP (a folder: a sampling heap profile of everything the measured
 * calls allocated, collected or not, `<measure>.heapprofile`), BENCH_SAVE_TX (a
 * file: the captured prepared transaction, base64).
 */
import { fork } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchService, verifyBodyFrom } from './common.js';

const N = Number(process.env.BENCH_N ?? 2000);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 5);
const DIST = process.env.BENCH_DIST
  ? pathToFileURL(`${resolve(process.env.BENCH_DIST)}/`).href
  : new URL('../dist/', import.meta.url).href;
const ONLY = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : undefined;
const SECRET = 'bench-shared-secret-0123456789-0123456789';

const PROF = process.env.BENCH_PROF;
const HEAP = process.env.BENCH_HEAP;

const dist = (p) => new URL(p, DIST).href;

async function measure(name, fn) {
  if (ONLY && !ONLY.has(name)) return;
  for (let i = 0; i < Math.min(N, 1000); i++) await fn(i);
  let session;
  if (PROF) {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    await session.post('Profiler.start');
  }
  if (HEAP) {
    session = new Session();
    session.connect();
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  const runs = [];
  for (let r = 0; r < REPEAT; r++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < N; i++) await fn(i);
    const c = process.cpuUsage(c0);
    const wall = performance.now() - t0;
    runs.push({ cpu: (c.user + c.system) / N, wall: (wall * 1000) / N });
  }
  if (session && HEAP) {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    await writeFile(join(HEAP, `${name}.heapprofile`), JSON.stringify(profile));
    session.disconnect();
  } else if (session) {
    const { profile } = await session.post('Profiler.stop');
    await writeFile(join(PROF, `${name}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
  const cpu = runs.map((r) => r.cpu.toFixed(1)).join(' · ');
  const min = Math.min(...runs.map((r) => r.cpu)).toFixed(1);
  const wall = Math.min(...runs.map((r) => r.wall)).toFixed(1);
  console.log(`${name.padEnd(13)} CPU µs/call min ${min.padStart(7)} (${cpu}); wall min ${wall}`);
}

/** The load generator of the `http` measure, in a child process: BENCH_N requests, then its report. */
async function clientMain() {
  const { default: autocannon } = await import('autocannon');
  process.on('message', async (m) => {
    const r = await autocannon({ ...m.opts, connections: 4, pipelining: 1, amount: m.amount });
    process.send({ ok: r['2xx'], bad: r.non2xx + r.errors + r.timeouts, p99: r.latency.p99 });
  });
  process.send({ ready: true });
}

async function measureHttp(url, headers, payload) {
  if (ONLY && !ONLY.has('http')) return;
  const child = fork(fileURLToPath(import.meta.url), ['--client'], { stdio: 'inherit' });
  const ask = (m) =>
    new Promise((resolve) => {
      child.once('message', resolve);
      if (m) child.send(m);
    });
  await ask();
  const opts = { url: `${url}/v1/sign/verify`, method: 'POST', headers, body: payload };
  await ask({ opts, amount: Math.min(N, 1000) });
  const runs = [];
  for (let r = 0; r < REPEAT; r++) {
    const c0 = process.cpuUsage();
    const res = await ask({ opts, amount: N });
    const c = process.cpuUsage(c0);
    if (res.bad > 0 || res.ok !== N) throw new Error(`http: ${res.ok} of ${N} answered 2xx`);
    runs.push({ cpu: (c.user + c.system) / N, p99: res.p99 });
  }
  child.kill();
  const min = Math.min(...runs.map((r) => r.cpu)).toFixed(1);
  const all = runs.map((r) => r.cpu.toFixed(1)).join(' · ');
  console.log(
    `${'http'.padEnd(13)} CPU µs/req  min ${min.padStart(7)} (${all}); p99 ms ${runs.map((r) => r.p99).join(' · ')}`,
  );
}

async function main() {
  const { createVerifier } = await import(dist('server/auth.js'));
  const { openPglite } = await import(dist('store/index.js'));
  const { transfer } = await import(dist('flows/transfer.js'));
  const { verifyOnly } = await import(dist('flows/sign-execute.js'));
  const { withKnownParty } = await import(dist('server/routes/context.js'));
  const { base64ToBytes } = await import(dist('hashing/input.js'));
  const { decodePreparedTransaction } = await import(dist('hashing/decode.js'));
  const { hashParts } = await import(dist('hashing/transaction-hash.js'));
  const { checkIntent } = await import(dist('intent/check.js'));
  const { IntentSchema } = await import(dist('intent/model.js'));
  const { executionWindow, describeWindow } = await import(dist('flows/window.js'));
  const { SignJWT } = await import('jose');

  const dir = await mkdtemp(join(tmpdir(), 'canton-signer-verify-profile-'));
  const db = await openPglite('memory');
  const { service, store, signer, host } = await benchService(dist, {
    db,
    dir,
    secret: SECRET,
    concurrency: 1,
  });
  await service.deps.worker?.stop?.();
  const receiver = await host('receiver');
  const verifier = await host('verifier', '1000');

  // A real prepared transfer: the transfer flow's own prepare, captured on its way.
  const verifyBody = await verifyBodyFrom(service.deps.flows, transfer, verifier, receiver);
  const payload = JSON.stringify(verifyBody);
  if (process.env.BENCH_SAVE_TX) await writeFile(process.env.BENCH_SAVE_TX, verifyBody.preparedTransaction);
  const token = await new SignJWT({ canton_signer_roles: ['operator'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('bench')
    .setIssuer('bench')
    .setAudience('bench')
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(new TextEncoder().encode(SECRET));
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const app = service.app;

  const first = await app.inject({ method: 'POST', url: '/v1/sign/verify', headers, payload });
  const report = first.json();
  if (first.statusCode !== 200 || report.ok !== true)
    throw new Error(`verify setup: ${first.statusCode} ${first.body.slice(0, 500)}`);
  console.log(
    `prepared transaction ${Buffer.from(verifyBody.preparedTransaction, 'base64').length} bytes, body ${payload.length} bytes, report ${first.body.length} bytes; N=${N}, ${REPEAT} runs`,
  );

  await measure('inject', async () => {
    const r = await app.inject({ method: 'POST', url: '/v1/sign/verify', headers, payload });
    if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
  });
  await measureHttp(await service.listen(), headers, payload);
  await measure('inject-health', async () => {
    await app.inject({ method: 'GET', url: '/health' });
  });
  const record = await store.parties.get(verifier);
  const intent = IntentSchema.parse(verifyBody.intent);
  const request = {
    partyId: verifier,
    preparedTransaction: verifyBody.preparedTransaction,
    claimedHash: verifyBody.hash,
    scheme: verifyBody.hashingScheme,
    intent,
    validatedIntent: intent,
  };
  await measure('pipeline', () => verifyOnly(withKnownParty(service.deps.flows, record), request));
  const jwt = createVerifier(service.deps.config.auth);
  await measure('jwt', () => jwt.verify(headers.authorization));
  await measure('json.parse', () => JSON.parse(payload));
  const { SignBody } = await import(dist('server/routes/sign.js'));
  const parsed = JSON.parse(payload);
  if (SignBody) await measure('zod-body', () => SignBody.parse(parsed));
  const sjson = (await import('secure-json-parse')).default;
  await measure('secure-json', () =>
    sjson.parse(payload, { protoAction: 'error', constructorAction: 'error' }),
  );
  await measure('zod-intent', () => IntentSchema.parse(verifyBody.intent));
  await measure('base64', () => base64ToBytes(verifyBody.preparedTransaction, 'p'));
  const bytes = base64ToBytes(verifyBody.preparedTransaction, 'p');
  await measure('decode', () => decodePreparedTransaction(bytes));
  const tx = decodePreparedTransaction(bytes);
  await measure('hash', () => hashParts(tx, { scheme: verifyBody.hashingScheme }));
  await measure('intent', () => checkIntent(tx, intent));
  const { actions } = checkIntent(tx, intent);
  await measure('window', () => describeWindow(executionWindow(tx, actions)));
  await measure('stringify', () => JSON.stringify(report));
  // Outside the verify route: the sandbox's encoder (each prepare) and the signature check of /sign.
  const { encodePreparedTransaction } = await import(dist('hashing/encode.js'));
  await measure('encode', () => encodePreparedTransaction(tx));
  const { verifySignature } = await import(dist('keys/schemes.js'));
  const message = new Uint8Array(32).fill(1);
  const signed = await signer.sign(record.keyLabel, message);
  const spki = base64ToBytes(record.publicKeySpki, 'spki');
  await measure('verify-sig', () => {
    if (!verifySignature(record.scheme, spki, message, signed.bytes)) throw new Error('signature');
  });

  await service.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
}

if (process.argv.includes('--client')) await clientMain();
else {
  await main();
  process.exit(0);
}

#!/usr/bin/env node
/**
 * The store's share of a withdrawal alone, on PostgreSQL: this process's CPU
 * and database round trips per withdrawal for what the worker writes — the
 * create, the claim, the four moves of the state machine (received →
 * prepared → signed → submitted → committed) with the artifacts each writes
 * in its transaction (prepared transaction, signature, submission outcome)
 * and the submission written ahead of the execute — with 16 parties at once,
 * so that group commits batch as they do in the service. No network, no
 * signing: what changes in the store layer shows without the end-to-end
 * bench's noise. `node bench/withdrawal-moves.js [dist folder]` (default
 * ../dist; another build's dist/ to compare). Environment: BENCH_WITHDRAWALS
 * (default 2000), BENCH_PARTIES (16), BENCH_PG_ADMIN_URL.
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

const DIST = resolve(process.argv[2] ?? new URL('../dist', import.meta.url).pathname);
const N = Number(process.env.BENCH_WITHDRAWALS ?? 2000);
const PARTIES = Number(process.env.BENCH_PARTIES ?? 16);
const ADMIN = process.env.BENCH_PG_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

const { openPostgres, migrate, storeOn } = await import(pathToFileURL(`${DIST}/store/index.js`).href);

let trips = 0;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function counted(...a) {
  trips++;
  return query.apply(this, a);
};

const name = `cs_moves_${randomUUID().replaceAll('-', '')}`;
const admin = new pg.Client({ connectionString: ADMIN });
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const url = new URL(ADMIN);
url.pathname = `/${name}`;
const db = await openPostgres(url.toString());
try {
  await migrate(db);
  const store = storeOn(db, 'bench');
  const art = store.artifacts;
  const bytes = Buffer.alloc(30_000, 7).toString('base64');
  const hash = 'ab'.repeat(32);
  const one = async (party, i) => {
    const { withdrawal: w } = await store.withdrawals.create({
      idempotencyKey: `k-${i}`,
      caller: 'bench',
      body: { party, receiver: 'bob::1220bb', amount: '1.0' },
    });
    const owner = 'bench-owner';
    if (!(await store.withdrawals.claim(w.id, owner, 60_000))) throw new Error('not claimed');
    const prepared = (tx, x) =>
      art.writePrepared
        ? art.writePrepared({ withdrawalId: w.id, attempt: x.attempts, hash, hashingScheme: 'v2', bytes }, tx)
        : art.recordPrepared(
            { withdrawalId: w.id, attempt: x.attempts, hash, hashingScheme: 'v2', bytes },
            tx,
          );
    await store.withdrawals.transition(
      w.id,
      ['received'],
      'prepared',
      { incrementAttempts: true },
      { owner, also: prepared },
    );
    const sig = {
      withdrawalId: w.id,
      hash,
      signedBy: party,
      keyLabel: 'k',
      scheme: 'ed25519',
      signatureFormat: 'SIGNATURE_FORMAT_CONCAT',
      signature: 'c2ln',
    };
    await store.withdrawals.transition(
      w.id,
      ['prepared'],
      'signed',
      {},
      {
        owner,
        also: (tx) => (art.writeSignature ? art.writeSignature(sig, tx) : art.recordSignature(sig, tx)),
      },
    );
    await store.withdrawals.transition(w.id, ['signed'], 'submitted', { lookupFrom: 1 }, { owner });
    const sid = `${w.commandId}:1`;
    await art.recordSubmission({ submissionId: sid, commandId: w.commandId, withdrawalId: w.id });
    const outcome = { outcome: 'committed', completionOffset: 2, updateId: `u-${i}` };
    await store.withdrawals.transition(
      w.id,
      ['submitted'],
      'committed',
      { updateId: `u-${i}` },
      {
        owner,
        also: (tx) =>
          art.writeSubmissionOutcome
            ? art.writeSubmissionOutcome(sid, outcome, tx)
            : art.setSubmissionOutcome(sid, outcome, tx),
      },
    );
    await store.withdrawals.releaseLease(w.id, owner);
  };
  const run = async (from, to) => {
    let next = from;
    await Promise.all(
      Array.from({ length: PARTIES }, async (_, p) => {
        for (let i = next++; i < to; i = next++) await one(`party-${p}::1220aa`, i);
      }),
    );
  };
  await run(0, Math.min(200, N / 10));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const trips0 = trips;
  const from = Math.min(200, N / 10);
  await run(from, N);
  const cpu = process.cpuUsage(cpu0);
  const done = N - from;
  const ms = performance.now() - t0;
  console.log(
    `${DIST}: ${done} withdrawals in ${(ms / 1000).toFixed(1)} s (${((done * 1000) / ms).toFixed(0)}/s), ` +
      `load average ${loadavg()[0].toFixed(2)}; this process's CPU ${((cpu.user + cpu.system) / 1000 / done).toFixed(3)} ms ` +
      `per withdrawal, ${((trips - trips0) / done).toFixed(2)} round trips per withdrawal`,
  );
} finally {
  await db.close();
  await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
  await admin.end();
}

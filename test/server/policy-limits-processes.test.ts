/**
 * A policy limit holds across service processes: `canton-signer serve
 * --workers 2` (two processes, one PostgreSQL database, a sandbox network
 * started here) with a policy file whose limit sums every withdrawal of the
 * instrument over 24 h. Many funded parties each ask for a withdrawal at the
 * same moment over HTTP, so both processes take requests and both workers
 * carry them: exactly as many commit as fit under the limit, the others end
 * `rejected` naming the limit, the committed sum never exceeds it, the
 * ledger has one update per committed withdrawal and none for the others,
 * and the `policy_usage` rows say the same. Several runs with random amounts
 * and counts (fast-check), each under a new limit id (a new policy version
 * through PUT /v1/policy), after one fixed run under the file's own limit.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decimalUnits, fromUnits } from '../../src/intent/decimal.js';
import type { Signer } from '../../src/keys/signer.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import type { Role } from '../../src/server/roles.js';
import { type Store, storeOn } from '../../src/store/index.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { buildDist } from '../support/cli.js';
import { hostParty, testSigner } from '../support/flow-env.js';
import { createPostgresDatabase, requirePostgres, type TestDatabase } from '../support/pg.js';
import {
  LISTENING,
  policyServeConfig,
  type ServeProcess,
  startServe,
  stopAll,
} from '../support/serve-process.js';
import { mintToken } from '../support/tokens.js';

const hasPg = await requirePostgres();

function units(s: string): bigint {
  const u = decimalUnits(s);
  if (u === undefined) throw new Error(`not a decimal: ${s}`);
  return u;
}
const PASS = 'policy-limits-processes-passphrase';
const PARTIES = 12;
const MAX = '500';

const policyYaml = (limitId: string) => `version: 1
name: one pot for everyone
default: deny
limits:
  - id: ${limitId}
    per: [instrument]
    window: 24h
    maxAmount: "${MAX}"
rules:
  - id: everything
    decision: allow
`;

const auth = async (sub: string, roles: Role[]) => ({
  authorization: `Bearer ${await mintToken(roles, { sub })}`,
});

describe.runIf(hasPg)('a limit across two service processes on one database', () => {
  let dir: string;
  let sandbox: RunningSandbox;
  let db: TestDatabase;
  let store: Store;
  let signer: Signer;
  let serve: ServeProcess;
  let url: string;
  let senders: PartyRecord[];
  let receiver: PartyRecord;

  beforeAll(async () => {
    buildDist(['cli/main.js', 'policy/engine.js', 'store/migrations.js']);
    dir = await mkdtemp(join(tmpdir(), 'canton-signer-policy-limits-'));
    sandbox = await startSandbox({ seed: 'policy-limits-processes', timers: false });
    db = await createPostgresDatabase();
    store = storeOn(await db.open(), 'test');
    const keys = join(dir, 'keys');
    signer = testSigner(keys, PASS);
    senders = [];
    for (let i = 0; i < PARTIES; i++)
      senders.push(await hostParty(sandbox.ctx.net, signer, store.parties, `sender${i}`, { fund: '100000' }));
    receiver = await hostParty(sandbox.ctx.net, signer, store.parties, 'receiver');
    const policy = join(dir, 'policy.yaml');
    await writeFile(policy, policyYaml('pot'));
    const config = join(dir, 'config.json');
    await writeFile(
      config,
      JSON.stringify(policyServeConfig({ keystore: keys, databaseUrl: db.url, sandbox, policyFile: policy })),
    );
    serve = startServe(['--config', config, '--workers', '2'], {
      cwd: dir,
      env: { CANTON_SIGNER_PASSPHRASE: PASS },
    });
    await serve.waitFor(new RegExp(`${LISTENING.source}[\\s\\S]*${LISTENING.source}`), 90_000);
    url = serve.stdout().match(LISTENING)![1]!;
  }, 150_000);

  afterAll(async () => {
    stopAll();
    await store?.close();
    await db?.drop();
    await signer?.close();
    await sandbox?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** `count` parties each ask for a withdrawal of `amount` at the same moment; their ids. */
  async function withdrawAll(amount: string, count: number): Promise<string[]> {
    const headers = {
      ...(await auth('desk', ['withdrawer', 'operator'])),
      'content-type': 'application/json',
    };
    const answers = await Promise.all(
      senders.slice(0, count).map((p) =>
        fetch(`${url}/v1/withdrawals`, {
          method: 'POST',
          headers: { ...headers, 'idempotency-key': randomUUID() },
          body: JSON.stringify({ party: p.partyId, receiver: receiver.partyId, amount }),
        }),
      ),
    );
    const ids: string[] = [];
    for (const r of answers) {
      const body = (await r.json()) as { id: string };
      expect(r.status, JSON.stringify(body)).toBe(201);
      ids.push(body.id);
    }
    return ids;
  }

  async function settled(ids: string[], ms = 60_000) {
    const end = Date.now() + ms;
    for (;;) {
      const ws = await Promise.all(ids.map((id) => store.withdrawals.get(id)));
      if (ws.every((w) => w && ['committed', 'rejected', 'failed', 'expired', 'cancelled'].includes(w.state)))
        return ws.map((w) => w!);
      if (Date.now() > end)
        throw new Error(`not settled in time: ${ws.map((w) => w?.state).join(', ')}\n${serve.stderr()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * Runs `ask` while a transaction of the test holds policy_usage locked, until `n` sessions of the
   * service wait for a lock (each decision's reservation, on the table or on its limit key's lock):
   * then every decision goes on at the same moment, on both processes.
   */
  async function atOnce<T>(n: number, ask: () => Promise<T>): Promise<T> {
    const gate = new pg.Client({ connectionString: db.url });
    await gate.connect();
    try {
      await gate.query('BEGIN');
      await gate.query('LOCK TABLE policy_usage IN ACCESS EXCLUSIVE MODE');
      const asked = ask();
      const end = Date.now() + 30_000;
      for (;;) {
        const { rows } = await store.db.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
          [(gate as unknown as { processID: number }).processID],
        );
        if (Number(rows[0]!.n) >= n) break;
        if (Date.now() > end)
          throw new Error(`only ${rows[0]!.n} of ${n} decisions reached the limit's reservation in 30 s`);
        await new Promise((r) => setTimeout(r, 20));
      }
      await gate.query('COMMIT');
      return await asked;
    } finally {
      await gate.end().catch(() => {});
    }
  }

  /** One round: `count` withdrawals of `amount` at once, all under limit `limitId`. */
  async function round(limitId: string, amount: string, count: number): Promise<void> {
    const ids = await atOnce(count, () => withdrawAll(amount, count));
    const ws = await settled(ids);
    // Both processes took some of the requests, and neither died meanwhile.
    const takers = new Set(
      serve
        .stdout()
        .split('\n')
        .filter((l) => l.includes('"method":"POST","url":"/v1/withdrawals"'))
        .map((l) => (JSON.parse(l) as { pid: number }).pid),
    );
    expect(takers.size).toBe(2);
    expect(serve.stdout() + serve.stderr()).not.toMatch(/a worker process died/);
    const fit = Number(units(MAX) / units(amount));
    const committed = ws.filter((w) => w.state === 'committed');
    const rejected = ws.filter((w) => w.state === 'rejected');
    expect(committed.length, ws.map((w) => `${w.state} ${w.lastError ?? ''}`).join('\n')).toBe(
      Math.min(fit, count),
    );
    expect(rejected.length).toBe(count - committed.length);
    for (const w of rejected) expect(w.lastError).toMatch(new RegExp(`^policy_denied: .*limit ${limitId}`));
    const sum = committed.reduce((s, w) => s + units(w.amount), 0n);
    expect(sum <= units(MAX)).toBe(true);
    // The ledger: one update per committed withdrawal, none for a refused one.
    const updates = sandbox.ctx.net.store.updates();
    for (const w of committed) expect(updates.filter((u) => u.commandId === w.commandId)).toHaveLength(1);
    for (const w of rejected) expect(updates.filter((u) => u.commandId === w.commandId)).toEqual([]);
    // policy_usage: one committed row per committed withdrawal, nothing held for the refused.
    // A reservation is settled just after its withdrawal's final move: wait until none is still held.
    type Usage = { subject: string; amount: string; count: number; state: string };
    let rows: Usage[] = [];
    for (const end = Date.now() + 10_000; ; ) {
      ({ rows } = await store.db.query<Usage>(
        `SELECT subject, amount::text AS amount, count, state FROM policy_usage WHERE limit_id = $1`,
        [limitId],
      ));
      if (rows.every((r) => r.state !== 'reserved') || Date.now() > end) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const held = rows.filter((r) => r.state !== 'released');
    expect(held.map((r) => r.subject).sort()).toEqual(committed.map((w) => `withdrawal:${w.id}`).sort());
    expect(held.every((r) => r.state === 'committed' && r.count === 1)).toBe(true);
    expect(fromUnits(held.reduce((s, r) => s + units(r.amount), 0n))).toBe(fromUnits(sum));
  }

  it('ten withdrawals of 90 at once against 500: exactly five commit, the others are refused naming the limit', async () => {
    await round('pot', '90', 10);
  }, 90_000);

  it('any amounts and counts: never more than the limit commits, and exactly what fits does', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 40, max: 260 }),
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 4, max: PARTIES }),
        async (whole, tenths, count) => {
          const limitId = `pot-${++run}`;
          const r = await fetch(`${url}/v1/policy`, {
            method: 'PUT',
            headers: { ...(await auth('ada', ['admin'])), 'content-type': 'application/json' },
            body: JSON.stringify({ document: policyYaml(limitId) }),
          });
          expect(r.status, await r.clone().text()).toBe(200);
          // Each process looks at the version in force again within 2 s.
          await new Promise((res) => setTimeout(res, 2500));
          await round(limitId, `${whole}.${tenths}`, count);
        },
      ),
      { numRuns: 3 },
    );
  }, 240_000);
});

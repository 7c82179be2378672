/**
 * Crash safety of the exchange side: `canton-signer serve` processes (over
 * one PostgreSQL, against a sandbox network started here) ingest 200
 * deposits from customers outside the book — one step and two step,
 * attributable or not, the two-step ones accepted (attributable) or rejected
 * by an operator over the API — while 50 withdrawals are posted, and the service is
 * SIGKILLed at random moments and restarted. A webhook receiver in this
 * process answers 503 for a while in the middle. Afterwards:
 * - every customer deposit is recorded once (one row per transfer), each
 *   one-step deposit credited once, the two-step ones credited or returned
 *   as the rules say; no update is ingested twice;
 * - the ingestion cursor never passed an update it did not record: every
 *   customer transfer at or below the cursor has its deposit row;
 * - the treasury's balance as ingested is its balance on the ledger
 *   (reconciliation names no difference);
 * - every withdrawal is final and exactly one transfer left for each;
 * - the receiver got every event of the outbox, 1 … head, at least once,
 *   each with a valid signature.
 * The same with two service instances at once, one of them killed at a time.
 * Needs dist/ (`npm test` builds first; locally `npm run build`).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import { ScanClient } from '../../src/canton/scan/client.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import type { FlowContext } from '../../src/flows/context.js';
import { acceptSetupProposal } from '../../src/flows/setup-accept.js';
import type { Signer } from '../../src/keys/signer.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { openStore, type Store } from '../../src/store/index.js';
import { MemoryRecorder } from '../../src/store/journal.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { hostParty, testSigner } from '../support/flow-env.js';
import { createPostgresDatabase, requirePostgres, type TestDatabase } from '../support/pg.js';
import { eventually, GiveUp, rng } from '../support/seeded.js';
import {
  LISTENING,
  policyServeConfig,
  type ServeProcess,
  startServe,
  stopAll,
} from '../support/serve-process.js';
import { mintToken } from '../support/tokens.js';

const hasPg = await requirePostgres();
const PASSPHRASE = 'exchange-crash-passphrase';
const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

/** Kills per run: enough to land at random points of every phase (prepare, sign, submit, ingest, deliver). */
const MAX_KILLS = 8;

const until = <T>(f: () => Promise<T | undefined>, what: string, ms = 90_000): Promise<T> =>
  eventually(f, what, ms, 200);

/** The webhook receiver: records every event it accepts (checking its signature); can be made to fail. */
function receiver() {
  const seen = new Map<number, { id: string; type: string }>();
  let deliveries = 0;
  let badSignatures = 0;
  let failing = false;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (failing) {
        res.writeHead(503).end();
        return;
      }
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id']);
      const ts = String(req.headers['webhook-timestamp']);
      const expected = createHmac('sha256', Buffer.from(SECRET.slice(6), 'base64'))
        .update(`${id}.${ts}.${body}`)
        .digest();
      const ok = String(req.headers['webhook-signature'] ?? '')
        .split(' ')
        .some((s) => {
          const sig = Buffer.from(s.replace(/^v1,/, ''), 'base64');
          return sig.length === expected.length && timingSafeEqual(sig, expected);
        });
      if (!ok) {
        badSignatures++;
        res.writeHead(400).end();
        return;
      }
      const e = JSON.parse(body) as { id: string; seq: number; type: string };
      deliveries++;
      seen.set(e.seq, { id: e.id, type: e.type });
      res.writeHead(204).end();
    });
  });
  return {
    server,
    seen,
    get deliveries() {
      return deliveries;
    },
    get badSignatures() {
      return badSignatures;
    },
    setFailing(v: boolean) {
      failing = v;
    },
    async listen(): Promise<string> {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    },
  };
}

describe.runIf(hasPg)('exchange under SIGKILL', () => {
  let dir: string;
  let sandbox: RunningSandbox;
  let signer: Signer;
  let db: TestDatabase;
  let store: Store;
  let treasury: PartyRecord;
  let shop: string;
  let hooks: ReturnType<typeof receiver>;
  let hookUrl: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'canton-signer-exchange-crash-'));
    sandbox = await startSandbox({ seed: 'exchange-crash', timers: false });
    signer = testSigner(join(dir, 'keys'), PASSPHRASE);
    db = await createPostgresDatabase();
    store = await openStore({ url: db.url, actor: 'test' });
    const net = sandbox.ctx.net;
    treasury = await hostParty(net, signer, store.parties, 'treasury', { label: 'treasury', fund: '100000' });
    // The treasury's transfer preapproval: customers' one-step deposits go through it.
    const ctx: FlowContext = {
      signer,
      ledger: new LedgerApiClient({ baseUrl: sandbox.urls.ledgerApi }),
      validator: new ValidatorClient({ baseUrl: sandbox.urls.validator }),
      scan: new ScanClient({ baseUrl: sandbox.urls.scan }),
      userId: LEDGER_API_USER,
      parties: store.parties,
      recorder: new MemoryRecorder(),
      synchronizerId: net.synchronizerId,
    };
    await ctx.validator!.createSetupProposal({ user_party_id: treasury.partyId });
    await acceptSetupProposal(ctx, treasury.partyId);
    // A shop that receives withdrawals in one step (it has a preapproval).
    const shopRes = await control('customer/allocate', { name: 'shop', preapproval: true });
    shop = shopRes.party as string;
    hooks = receiver();
    hookUrl = await hooks.listen();
  }, 120_000);
  afterEach(() => stopAll());
  afterAll(async () => {
    hooks?.server.close();
    await store?.close();
    await db?.drop();
    await signer?.close();
    await sandbox?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function control(path: string, body: unknown): Promise<Record<string, unknown>> {
    const r = await fetch(`${sandbox.urls.ledgerApi.replace(/\/$/, '')}/sandbox/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`sandbox ${path}: ${r.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  }

  async function configFile(name: string): Promise<string> {
    const file = join(dir, name);
    await writeFile(
      file,
      JSON.stringify({
        ...policyServeConfig({
          keystore: join(dir, 'keys'),
          databaseUrl: db.url,
          sandbox,
          policyFile: join(dir, 'none.yaml'),
        }),
        policy: {},
        worker: { pollMs: 200, leaseSeconds: 3 },
        exchange: {
          ingestion: { pollMs: 100, leaseSeconds: 2 },
          deposits: { attribution: [{ name: 'accounts', match: 'prefix', value: 'acct-' }] },
        },
        webhooks: {
          receivers: [{ name: 'backend', url: hookUrl, secretEnv: ['CRASH_HOOK_SECRET'], timeoutMs: 500 }],
          retry: { initialSeconds: 1, maxIntervalSeconds: 2 },
          pollMs: 200,
        },
        log: { level: 'warn' },
      }),
    );
    return file;
  }

  function serve(file: string): ServeProcess {
    return startServe(['--config', file], {
      cwd: dir,
      env: {
        CANTON_SIGNER_PASSPHRASE: PASSPHRASE,
        CRASH_HOOK_SECRET: SECRET,
        CANTON_SIGNER_LOG_LEVEL: 'info',
      },
    });
  }

  /** Runs the load with `instances` service processes, killing one at random moments. */
  async function run(instances: number, seed: number, deposits: number, withdrawals: number) {
    const rand = rng(seed);
    const file = await configFile(`serve-${seed}.json`);
    const procs: (ServeProcess | undefined)[] = [];
    const urls: string[] = [];
    const start = async (i: number) => {
      const p = serve(file);
      procs[i] = p;
      urls[i] = (await p.waitFor(LISTENING, 60_000))[1]!;
    };
    for (let i = 0; i < instances; i++) await start(i);
    const token = await mintToken(['operator', 'withdrawer', 'auditor', 'admin'], {
      parties: [treasury.partyId],
    });
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const alive = () =>
      urls.filter((_, i) => procs[i]?.child.exitCode === null && procs[i]?.child.signalCode === null);

    // The killer: every 0.8–2.5 s one instance dies by SIGKILL and is started again, at most
    // MAX_KILLS times (each restart costs seconds of start-up; more kills at random moments add
    // run time faster than they add kill points the first ones miss).
    let killing = true;
    let kills = 0;
    const killer = (async () => {
      while (killing && kills < MAX_KILLS) {
        await new Promise((r) => setTimeout(r, 800 + rand() * 1700));
        if (!killing) break;
        const i = Math.floor(rand() * instances);
        procs[i]?.child.kill('SIGKILL');
        kills++;
        await procs[i]?.exited;
        await start(i);
      }
    })();

    // Deposits: in batches, mixed one-step / two-step, attributable or not.
    const sent: { updateId: string; offset: number; mode: string; memo?: string; amount: string }[] = [];
    const depositing = (async () => {
      for (let n = 0; n < deposits; ) {
        const batch = [];
        for (let k = 0; k < 20 && n < deposits; k++, n++) {
          const attributable = rand() < 0.75;
          batch.push({
            to: treasury.partyId,
            amount: `${1 + Math.floor(rand() * 50)}.${Math.floor(rand() * 100)}`,
            mode: rand() < 0.5 ? 'one-step' : 'two-step',
            customer: `c${n % 7}`,
            ...(attributable ? { memo: `acct-${1000 + (n % 37)}` } : rand() < 0.5 ? { memo: 'hello' } : {}),
          });
        }
        const r = await control('customer/deposit', { deposits: batch });
        for (const [k, d] of (r.deposits as Record<string, unknown>[]).entries())
          sent.push({
            updateId: d.updateId as string,
            offset: d.offset as number,
            mode: d.mode as string,
            amount: batch[k]!.amount,
            ...(batch[k]!.memo ? { memo: batch[k]!.memo } : {}),
          });
        await new Promise((r) => setTimeout(r, 100 + rand() * 400));
      }
    })();

    // Withdrawals: posted with retries under the same Idempotency-Key while instances die.
    const ids: string[] = [];
    const withdrawing = (async () => {
      for (let n = 0; n < withdrawals; n++) {
        const key = `crash-${seed}-${n}`;
        const body = JSON.stringify({
          party: treasury.partyId,
          receiver: shop,
          amount: '1.5',
          memo: `w-${n}`,
        });
        const id = await until(async () => {
          const url = alive()[0];
          if (!url) return undefined;
          const r = await fetch(`${url}/v1/withdrawals`, {
            method: 'POST',
            headers: { ...auth, 'idempotency-key': key },
            body,
          }).catch(() => undefined);
          if (!r || r.status >= 500) return undefined;
          const j = (await r.json()) as { id?: string };
          if (!j.id) throw new Error(`withdrawal refused: ${JSON.stringify(j)}`);
          return j.id;
        }, `withdrawal ${n} accepted`);
        ids.push(id);
        await new Promise((r) => setTimeout(r, 50 + rand() * 150));
      }
    })();

    // An operator answers the offers as they come: accept what is attributable, reject the rest.
    let answering = true;
    const answerer = (async () => {
      while (answering) {
        const url = alive()[0];
        const page = url
          ? await fetch(`${url}/v1/deposits?state=pending&limit=50`, { headers: auth })
              .then((r) =>
                r.ok ? (r.json() as Promise<{ items: Record<string, string>[] }>) : { items: [] },
              )
              .catch(() => ({ items: [] }))
          : { items: [] };
        for (const d of page.items) {
          const verb = d.account ? 'accept' : 'reject';
          await fetch(
            `${url}/v1/parties/${encodeURIComponent(d.party!)}/offers/${encodeURIComponent(d.instructionCid!)}/${verb}`,
            { method: 'POST', headers: auth, body: '{}' },
          ).catch(() => undefined);
        }
        await new Promise((r) => setTimeout(r, 300));
      }
    })();

    // The receiver is down for a while in the middle.
    setTimeout(() => hooks.setFailing(true), 1500);
    setTimeout(() => hooks.setFailing(false), 5000);

    await Promise.all([depositing, withdrawing]);
    await new Promise((r) => setTimeout(r, 1500));
    // On a slow machine a restart can take most of the load's duration: keep the killer going until
    // it has killed twice (what settles afterwards is still checked below), within a bound.
    for (const end = Date.now() + 90_000; kills < 2 && Date.now() < end; )
      await new Promise((r) => setTimeout(r, 200));
    killing = false;
    await killer;
    expect(kills).toBeGreaterThanOrEqual(2);

    // Everything settles with the instances left alive.
    const q = <T>(sql: string, p: unknown[] = []) => store.db.query<T>(sql, p).then((r) => r.rows);
    await until(async () => {
      const [c] = await q<{ n: number }>(
        `SELECT count(*)::int AS n FROM deposits WHERE update_id = ANY($1::text[])`,
        [sent.map((s) => s.updateId)],
      );
      return c!.n >= sent.length ? true : undefined;
    }, 'every deposit recorded');
    // One party's withdrawals run one at a time: on a loaded machine the backlog the killer left can
    // take longer than a fixed wait, so the wait is for progress — it fails only after 60 s without one.
    let committed = -1;
    let progressAt = Date.now();
    const settleFrom = Date.now();
    let committedAtFirst: number | undefined;
    await until(
      async () => {
        const [c] = await q<{ n: number }>(
          `SELECT count(*)::int AS n FROM withdrawals WHERE id = ANY($1::uuid[]) AND state = 'committed'`,
          [ids],
        );
        committedAtFirst ??= c!.n;
        if (c!.n === ids.length) return true;
        if (c!.n > committed) [committed, progressAt] = [c!.n, Date.now()];
        if (Date.now() - progressAt > 60_000)
          throw new GiveUp(`no withdrawal committed for 60 s (${committed} of ${ids.length})`);
        return undefined;
      },
      'every withdrawal committed',
      240_000,
    ).catch(async (e: Error) => {
      // Name the withdrawals that did not settle, with what the store says of them.
      const stuck = await q(
        `SELECT id, state, attempts, last_error, lease_owner, lease_until, updated_at, now() AS now
           FROM withdrawals WHERE id = ANY($1::uuid[]) AND state <> 'committed'`,
        [ids],
      );
      throw new Error(`${e.message}; not committed: ${JSON.stringify(stuck)}`);
    });
    await until(async () => {
      const [p] = await q<{ n: number }>(`SELECT count(*)::int AS n FROM deposits WHERE state = 'pending'`);
      return p!.n === 0 ? true : undefined;
    }, 'every two-step deposit answered');
    answering = false;
    await answerer;
    const head = await store.events.head();
    await until(
      async () =>
        Array.from({ length: head }, (_, k) => k + 1).every((s) => hooks.seen.has(s)) ? true : undefined,
      'every event delivered',
    );

    // One deposit row per customer transfer, none twice.
    const rows = await q<{
      update_id: string;
      state: string;
      account: string | null;
      kind: string;
      amount: string;
    }>(
      `SELECT update_id, state, account, kind, amount::text FROM deposits WHERE update_id = ANY($1::text[])`,
      [sent.map((s) => s.updateId)],
    );
    expect(rows).toHaveLength(sent.length);
    expect(new Set(rows.map((r) => r.update_id)).size).toBe(sent.length);
    const byUpdate = new Map(rows.map((r) => [r.update_id, r]));
    for (const s of sent) {
      const r = byUpdate.get(s.updateId)!;
      expect(Number(r.amount)).toBe(Number(s.amount));
      const attributable = s.memo?.startsWith('acct-') ?? false;
      expect(r.account).toBe(attributable ? s.memo!.slice(5) : null);
      if (s.mode === 'one-step') expect(r.state).toBe('credited');
      else expect(r.state).toBe(attributable ? 'credited' : 'returned');
    }
    const dupes = await q<{ update_id: string }>(
      'SELECT update_id FROM ingested_updates GROUP BY update_id HAVING count(*) > 1',
    );
    expect(dupes).toEqual([]);

    // The cursor never passed an update it did not record.
    const [cursor] = await q<{ offset: number }>('SELECT "offset" FROM ingest_cursor');
    for (const s of sent) if (s.offset <= cursor!.offset) expect(byUpdate.has(s.updateId)).toBe(true);

    // One transfer left for each withdrawal; the treasury's books agree with the ledger.
    const recon = await fetch(
      `${alive()[0]}/v1/parties/${encodeURIComponent(treasury.partyId)}/reconciliation`,
      {
        headers: auth,
      },
    ).then((r) => r.json() as Promise<{ instruments: { differences: unknown[] }[] }>);
    for (const i of recon.instruments) expect(i.differences).toEqual([]);
    expect(hooks.badSignatures).toBe(0);
    return {
      kills,
      events: head,
      deliveries: hooks.deliveries,
      withdrawalsLeftAfterLoad: ids.length - (committedAtFirst ?? 0),
      settleSeconds: Math.round((Date.now() - settleFrom) / 1000),
    };
  }

  it('one instance, killed at random: 200 deposits and 50 withdrawals, each recorded once', async () => {
    const r = await run(1, 7, 200, 50);
    console.log(`[exchange-crash] one instance: ${JSON.stringify(r)}`);
  }, 480_000);

  it('two instances on one PostgreSQL, one killed at a time', async () => {
    const r = await run(2, 11, 100, 25);
    console.log(`[exchange-crash] two instances: ${JSON.stringify(r)}`);
  }, 300_000);
});

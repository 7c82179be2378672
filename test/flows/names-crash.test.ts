/**
 * Crash safety of name renewals: a sandbox network with its timers on and a
 * name lifetime of seconds runs in this process; a `canton-signer serve`
 * child process (over a throw-away PostgreSQL database) registers a name for
 * a party over REST, and its keeper renews it as each renewal window opens.
 * The service is SIGKILLed and started again while it renews: as the renewal
 * is prepared (before anything is signed), as the signed payment reaches the
 * participant's execute (the answer never read), right after the payment
 * commits (the answer never read, nothing recorded), and at random moments
 * between renewals.
 * Afterwards every due date was paid exactly once (one SubscriptionPayment
 * each, collected once, the party's CC down by one fee per lifetime and the
 * service's `paidCc` saying the same), the entry is active and extended by
 * exactly one lifetime per renewal, and nothing expired in between.
 *
 * A killed process leaves its automation lease to run out (30 s in `serve`);
 * here the test lets it lapse as soon as the process is dead, which is what a
 * lease of a second would do: the lifetimes are seconds, not days.
 * Needs dist/ (`npm test` builds first; locally `npm run build`).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import type { Signer } from '../../src/keys/signer.js';
import { balanceOf } from '../../src/sandbox/amulet.js';
import { ansAutomationLog } from '../../src/sandbox/ans-automation.js';
import type { LedgerEvent } from '../../src/sandbox/ledger/store.js';
import { big, str } from '../../src/sandbox/ledger/value-json.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import { openStore, type Store } from '../../src/store/index.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { ROOT } from '../support/cli.js';
import { hostParty, testSigner } from '../support/flow-env.js';
import { createPostgresDatabase, requirePostgres, type TestDatabase } from '../support/pg.js';
import { eventually, rng } from '../support/seeded.js';
import {
  LISTENING,
  policyServeConfig,
  type ServeProcess,
  startServe,
  stopAll,
} from '../support/serve-process.js';
import { mintToken } from '../support/tokens.js';

const hasPg = await requirePostgres();
const PASSPHRASE = 'names-crash-passphrase';
/** The entry's lifetime and the renewal window before its end: a renewal every 16 s, the first 4 s in. */
const LIFETIME_MS = 16_000;
const WINDOW_MS = 12_000;
const LIFETIME_US = BigInt(LIFETIME_MS) * 1000n;
const RENEWALS = 3;
const NAME = 'crash-names.unverified.cns';

const until = <T>(f: () => Promise<T | undefined>, what: string, ms = 30_000): Promise<T> =>
  eventually(f, what, ms, 100);

/** Where the service is killed in a renewal: the participant sees the request, or the payment commits. */
type KillPoint = 'prepare' | 'execute' | 'payment-committed';

describe.runIf(hasPg)('name renewals under SIGKILL', () => {
  let dir: string;
  let sandbox: RunningSandbox;
  let signer: Signer;
  let db: TestDatabase;
  let store: Store;
  let alice: PartyRecord;

  /** The creation of a renewal payment of alice's. */
  const isAlicePayment = (e: LedgerEvent) =>
    e.kind === 'created' &&
    e.contract.templateId.entityName === 'SubscriptionPayment' &&
    str(e.contract.argument, 'subscriptionData', 'sender') === alice.partyId;

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js')))
      throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
    dir = await mkdtemp(join(tmpdir(), 'canton-signer-names-crash-'));
    sandbox = await startSandbox({
      seed: 'names-crash',
      ans: { entryLifetimeMs: LIFETIME_MS, renewalDurationMs: WINDOW_MS },
    });
    signer = testSigner(join(dir, 'keys'), PASSPHRASE);
    db = await createPostgresDatabase();
    store = await openStore({ url: db.url, actor: 'test' });
    alice = await hostParty(sandbox.ctx.net, signer, store.parties, 'alice', {
      label: 'names-crash-alice',
      fund: '1000',
    });
  }, 60_000);
  afterEach(() => stopAll());
  afterAll(async () => {
    await store?.close();
    await db?.drop();
    await signer?.close();
    await sandbox?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(`pays each of ${RENEWALS} renewals exactly once while the service is killed around its payments`, async () => {
    const t0 = Date.now();
    const net = sandbox.ctx.net;
    const seed = Number(process.env.NAMES_CRASH_SEED ?? 5);
    const rand = rng(seed);
    const file = join(dir, 'serve.json');
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
        exchange: { ingestion: { enabled: false }, automationPollMs: 100 },
        names: { pollMs: 200, retrySeconds: 1, expiringHours: 1 },
        log: { level: 'warn' },
      }),
    );

    // The service, and its restarts.
    let proc: ServeProcess | undefined;
    const procs: ServeProcess[] = [];
    let url = '';
    const kills: { at: number; why: string; paymentsBefore: number; paymentsOnceDead?: number }[] = [];
    const paymentsSoFar = () =>
      net.store
        .updates()
        .flatMap((u) => u.events)
        .filter(isAlicePayment).length;
    let restarting: Promise<void> | undefined;
    let over = false;
    const start = async () => {
      const p = startServe(['--config', file], {
        cwd: dir,
        env: { CANTON_SIGNER_PASSPHRASE: PASSPHRASE, CANTON_SIGNER_LOG_LEVEL: 'info' },
      });
      proc = p;
      procs.push(p);
      url = (await p.waitFor(LISTENING, 30_000))[1]!;
    };
    const restartTimes: number[] = [];
    // The leases of dead processes lapse at once, and again every 100 ms: a query the killed process
    // had sent (its first lease acquisition, say) may still run on its database connection after
    // the process is gone, taking the lease for a holder that no longer exists.
    const dead: string[] = [];
    const lapse = () =>
      store.db.query(`UPDATE leases SET expires_at = now() WHERE expires_at > now() AND owner LIKE ANY($1)`, [
        dead,
      ]);
    const reaper = setInterval(() => void lapse().catch(() => {}), 100);
    /** SIGKILLs the service now (synchronously: called from the sandbox's hooks), then starts it again. */
    const kill = (why: string) => {
      const p = proc;
      if (!p || restarting || p.child.exitCode !== null || p.child.signalCode !== null) return false;
      p.child.kill('SIGKILL');
      const k = { at: Date.now() - t0, why, paymentsBefore: paymentsSoFar() } as (typeof kills)[number];
      kills.push(k);
      const k0 = Date.now();
      restarting = (async () => {
        await p.exited;
        dead.push(`%:${p.child.pid}:%`);
        await lapse();
        k.paymentsOnceDead = paymentsSoFar();
        if (!over) await start();
        restartTimes.push(Date.now() - k0);
      })().finally(() => {
        restarting = undefined;
      });
      return true;
    };

    // The targeted kills: one (or more) per renewal, armed once the previous one was collected.
    const plan: KillPoint[][] = [['payment-committed'], ['execute'], ['prepare', 'payment-committed']];
    let armed: KillPoint[] = [];
    const fire = (point: KillPoint) => {
      if (armed[0] !== point || restarting) return;
      if (kill(point)) armed = armed.slice(1);
    };
    net.onCommit((u) => {
      if (!over && u.events.some(isAlicePayment)) fire('payment-committed');
    });
    const onRequest = (req: IncomingMessage) => {
      if (req.method !== 'POST') return;
      if (req.url?.startsWith('/v2/interactive-submission/prepare')) fire('prepare');
      else if (req.url?.startsWith('/v2/interactive-submission/execute')) fire('execute');
    };
    sandbox.app.server.on('request', onRequest);
    onTestFinished(() => {
      over = true;
      clearInterval(reaper);
      sandbox.app.server.off('request', onRequest);
      proc?.child.kill('SIGKILL');
    });

    await start();
    const token = await mintToken(['operator', 'auditor'], { parties: [alice.partyId] });
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const round = () => net.latestRound().number;
    const holdings0 = balanceOf(net.store, alice.partyId, round()).totalHoldings;

    // Registration over REST (nothing killed yet): the DSO collects the first payment at once.
    const reg = await fetch(`${url}/v1/parties/${encodeURIComponent(alice.partyId)}/names`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: NAME, description: 'killed and restarted' }),
    });
    const regBody = (await reg.json()) as { quote: { feeCc: string } };
    expect(reg.status, JSON.stringify(regBody)).toBe(201);
    const feeCc = Number(regBody.quote.feeCc);
    const log = () => ansAutomationLog(net).filter((e) => e.name === NAME);
    const collected = await until(
      async () => log().find((e) => e.kind === 'collected'),
      'the first payment collected',
    );
    if (collected.kind !== 'collected') throw new Error('unreachable');
    const firstExpiry = collected.expiresAt;
    const tRegistered = Date.now() - t0;

    // The renewals: the plan's kills armed for each once the previous one was collected; in the first
    // two, a kill besides at a random moment before the window opens (a pass with nothing to pay, the
    // record of the last renewal, a restart still under way as the window opens).
    const renewedCount = () => log().filter((e) => e.kind === 'renewed').length;
    const ms = (us: bigint) => Number(us / 1000n);
    for (let k = 1; k <= RENEWALS; k++) {
      armed = [...plan[k - 1]!];
      const opens = ms(firstExpiry) + (k - 1) * LIFETIME_MS - WINDOW_MS;
      const latest = opens - 1000;
      let randomAt = k < RENEWALS ? Date.now() + rand() * Math.max(0, latest - Date.now()) : Number.NaN;
      for (const end = opens + WINDOW_MS + 2000; renewedCount() < k; ) {
        if (Date.now() >= randomAt && Date.now() <= latest && kill('random')) randomAt = Number.NaN;
        if (Date.now() > end) {
          const rows = await store.db.query('SELECT * FROM ans_names');
          throw new Error(
            `renewal ${k} never collected; kills: ${JSON.stringify(kills)}\nrows: ${JSON.stringify(rows.rows)}\n${procs
              .slice(-3)
              .map((q) => `serve ${q.child.pid}: ${q.stdout().slice(-5000)}\n${q.stderr().slice(-2000)}`)
              .join('\n')}`,
          );
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      // What of the plan did not come to pass before the payment (a restart paid it at once) is dropped.
      armed = [];
    }
    await restarting;

    // The service took note of every renewal (it may have been told by the ledger after a restart).
    const finalExpiry = firstExpiry + BigInt(RENEWALS) * LIFETIME_US;
    const iso = (us: bigint) => new Date(Number(us / 1000n)).toISOString();
    const row = await until(async () => {
      const r = await fetch(`${url}/v1/parties/${encodeURIComponent(alice.partyId)}/names/${NAME}`, {
        headers: auth,
      }).catch(() => undefined);
      if (!r?.ok) return undefined;
      const n = (await r.json()) as { state: string; renewals: number; expiresAt?: string; paidCc: string };
      return n.state === 'active' && n.renewals === RENEWALS ? n : undefined;
    }, 'the service records the last renewal');
    expect(row.expiresAt).toBe(iso(finalExpiry));
    const events = await fetch(`${url}/v1/events?after=0&limit=500`, { headers: auth })
      .then((r) => r.json() as Promise<{ items: { type: string; data: { name?: string } }[] }>)
      .then((b) => b.items.filter((e) => e.data.name === NAME).map((e) => e.type));
    over = true;
    proc?.child.kill('SIGKILL');
    const tDone = Date.now() - t0;

    // One SubscriptionPayment per due date, each due date one lifetime after the last; none twice.
    const payments = net.store
      .updates()
      .flatMap((u) => u.events)
      .filter(isAlicePayment)
      .map((e) => big(e.contract.argument, 'thisPaymentDueAt')!);
    expect(payments).toEqual(
      Array.from({ length: RENEWALS }, (_, i) => firstExpiry + BigInt(i) * LIFETIME_US),
    );

    // The DSO collected each once, before the entry's end; nothing expired, nothing left uncollected.
    const ans = log();
    expect(ans.map((e) => e.kind)).toEqual(['collected', ...Array(RENEWALS).fill('renewed')]);
    for (const [i, e] of ans.slice(1).entries()) {
      if (e.kind !== 'renewed') throw new Error('unreachable');
      expect(e.expiresAt).toBe(firstExpiry + BigInt(i + 1) * LIFETIME_US);
      expect(e.at).toBeLessThan(firstExpiry + BigInt(i) * LIFETIME_US);
    }
    const entries = net.store
      .activeContracts('Splice.Ans:AnsEntry')
      .filter((c) => str(c.argument, 'name') === NAME);
    expect(entries).toHaveLength(1);
    expect(str(entries[0]!.argument, 'user')).toBe(alice.partyId);
    expect(big(entries[0]!.argument, 'expiresAt')).toBe(finalExpiry);

    // The party paid one fee per lifetime: the first and each renewal, nothing more (nothing locked either).
    const after = balanceOf(net.store, alice.partyId, round());
    expect(Number(after.totalLocked)).toBe(0);
    expect(Number(holdings0) - Number(after.totalHoldings)).toBeCloseTo((RENEWALS + 1) * feeCc, 3);
    // and the service counts the same, also the payments whose process died before recording them
    expect(Number(row.paidCc)).toBe((RENEWALS + 1) * feeCc);

    // The service's events: registered once, renewed once per renewal, never expired or failed.
    expect(events.filter((t) => t === 'name.registered')).toHaveLength(1);
    expect(events.filter((t) => t === 'name.renewed')).toHaveLength(RENEWALS);
    expect(events.filter((t) => /expired|lapsed|failed|rejected|reclaimed/.test(t))).toEqual([]);

    // Every planned kill happened (each restart resumed), and at least one per renewal.
    expect(kills.filter((k) => !k.why.startsWith('random')).length).toBeGreaterThanOrEqual(RENEWALS);
    console.log(
      `[names-crash] ${JSON.stringify({
        seed,
        registeredAtMs: tRegistered,
        doneAtMs: tDone,
        kills,
        restartMs: restartTimes,
        feeCc,
        paidCc: row.paidCc,
      })}`,
    );
  }, 90_000);
});

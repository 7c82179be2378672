/**
 * Crash safety of withdrawals: a child process runs the
 * compiled worker (test/support/crash-worker.mjs) against this process's
 * sandbox and a throw-away PostgreSQL database, and SIGKILLs itself right
 * after one step of a withdrawal (received; prepared recorded; signed
 * recorded; submitted recorded, before execute; execute returned, before
 * committed is recorded). A second child without the hook resumes it.
 * Each withdrawal must end committed with exactly one ledger transaction
 * under its command id, and the sender's funds must move exactly once.
 * The same for a cold party's withdrawal after its offline signature was
 * imported: the exported transaction is submitted exactly once and
 * the offline signature is never asked for again.
 * Needs dist/ (`npm test` builds first; locally `npm run build`).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listHoldings, toUnits } from '../../src/flows/holdings.js';
import { resumeAfterImport } from '../../src/flows/withdrawal-air-gap.js';
import type { WithdrawalPoint } from '../../src/flows/withdrawal-run.js';
import type { Signer } from '../../src/keys/signer.js';
import { parseRequestEnvelope, trustedExportKey } from '../../src/offline/format.js';
import { OnlineAirGap } from '../../src/offline/online.js';
import { reviewRequest, signReview } from '../../src/offline/review.js';
import { hostExternalParty, sandboxPartyRecord } from '../../src/sandbox/host-party.js';
import { LEDGER_API_USER } from '../../src/sandbox/network.js';
import { type Store, storeOn } from '../../src/store/index.js';
import type { PartyRecord } from '../../src/store/parties.js';
import type { WithdrawalState } from '../../src/store/repos/withdrawals.js';
import { cliEnv, ROOT } from '../support/cli.js';
import { type FlowEnv, flowEnv, hostParty, testSigner } from '../support/flow-env.js';
import { createPostgresDatabase, requirePostgres, type TestDatabase } from '../support/pg.js';

const CHILD = join(ROOT, 'test', 'support', 'crash-worker.mjs');
const PASSPHRASE = 'crash-test-passphrase';
const hasPg = await requirePostgres();

let env: FlowEnv;
let db: TestDatabase;
let store: Store;
let signer: Signer;
let keystore: string;
let alice: PartyRecord;
let bob: PartyRecord;

interface ChildRun {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function child(
  withdrawalId: string,
  crashAt?: WithdrawalPoint,
  extra: Record<string, string> = {},
): Promise<ChildRun> {
  const config = {
    databaseUrl: db.url,
    keystore,
    passphrase: PASSPHRASE,
    ledgerApi: env.sb.urls.ledgerApi,
    validator: env.sb.urls.validator,
    scan: env.sb.urls.scan,
    userId: LEDGER_API_USER,
    synchronizerId: env.net.synchronizerId,
  };
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CHILD], {
      cwd: ROOT,
      env: cliEnv({
        CRASH_CONFIG: JSON.stringify(config),
        WITHDRAWAL_ID: withdrawalId,
        ...(crashAt ? { CRASH_AT: crashAt } : {}),
        ...extra,
      }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    p.stdout.on('data', (c: Buffer) => out.push(c));
    p.stderr.on('data', (c: Buffer) => err.push(c));
    p.on('error', reject);
    p.on('close', (status, signal) =>
      resolve({
        status,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
  });
}

const updatesOf = (commandId: string) => env.net.store.updates().filter((u) => u.commandId === commandId);

async function locked(p: PartyRecord): Promise<bigint> {
  const hs = await listHoldings(env.ctx, p.partyId);
  return hs.filter((h) => h.locked).reduce((a, h) => a + toUnits(h.amount), 0n);
}

describe.runIf(hasPg)('withdrawals survive SIGKILL at every step (PostgreSQL)', () => {
  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist', 'flows', 'withdrawal.js')))
      throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
    env = await flowEnv({ seed: 'withdrawal-crash' });
    db = await createPostgresDatabase();
    store = storeOn(await db.open(), 'test');
    keystore = await mkdtemp(join(tmpdir(), 'canton-signer-crash-'));
    signer = testSigner(keystore, PASSPHRASE);
    alice = await hostParty(env.net, signer, store.parties, 'alice', { label: 'crash-alice', fund: '1000' });
    bob = await hostParty(env.net, signer, store.parties, 'bob', { label: 'crash-bob' });
  }, 60_000);
  afterAll(async () => {
    await store?.close();
    await db?.drop();
    await signer?.close();
    await env?.close();
    if (keystore) await rm(keystore, { recursive: true, force: true });
  });

  const expectedAfterCrash: Record<WithdrawalPoint, { state: WithdrawalState; onLedger: number }> = {
    received: { state: 'received', onLedger: 0 },
    prepared: { state: 'prepared', onLedger: 0 },
    signed: { state: 'signed', onLedger: 0 },
    submitted: { state: 'submitted', onLedger: 0 },
    executed: { state: 'submitted', onLedger: 1 },
  };
  const ids: string[] = [];

  for (const [i, point] of (Object.keys(expectedAfterCrash) as WithdrawalPoint[]).entries())
    it(`killed after "${point}", restarted: committed, exactly one transaction`, async () => {
      const amount = `${i + 1}.25`;
      const l0 = await locked(alice);
      const { withdrawal: w } = await store.withdrawals.create({
        idempotencyKey: `crash-${point}`,
        caller: 'bot',
        body: { party: alice.partyId, receiver: bob.partyId, amount },
      });
      ids.push(w.id);

      const crashed = await child(w.id, point);
      expect(crashed.signal, crashed.stderr).toBe('SIGKILL');
      const after = await store.withdrawals.get(w.id);
      expect(after?.state).toBe(expectedAfterCrash[point].state);
      expect(updatesOf(w.commandId)).toHaveLength(expectedAfterCrash[point].onLedger);

      const resumed = await child(w.id);
      expect(resumed.status, resumed.stderr).toBe(0);
      expect(JSON.parse(resumed.stdout.trim().split('\n').at(-1)!)).toMatchObject({ state: 'committed' });
      const done = await store.withdrawals.get(w.id);
      expect(done?.state).toBe('committed');
      const ups = updatesOf(w.commandId);
      expect(ups).toHaveLength(1);
      expect(done?.updateId).toBe(ups[0]!.updateId);
      // the submission that committed has its outcome recorded, also when the process was killed
      // between the execute and the move to committed (the restart learns it from completions)
      const subs = await store.artifacts.submissionsFor(w.commandId);
      expect(subs.filter((s) => s.outcome === 'committed').map((s) => s.updateId)).toEqual([done?.updateId]);
      // bob has no preapproval: the amount is locked in one offer, exactly once
      expect((await locked(alice)) - l0).toBe(toUnits(amount));
    }, 90_000);

  it('none lost: every withdrawal committed, none left unfinished', async () => {
    for (const id of ids) expect((await store.withdrawals.get(id))?.state).toBe('committed');
    expect(await store.withdrawals.unfinished()).toEqual([]);
  });

  describe("a cold party's withdrawal, after its offline signature was imported", () => {
    let cold: Signer;
    let coldDir: string;
    let carol: PartyRecord;
    let airGap: OnlineAirGap;

    beforeAll(async () => {
      coldDir = await mkdtemp(join(tmpdir(), 'canton-signer-crash-cold-'));
      cold = testSigner(coldDir, 'cold machine passphrase');
      const key = await cold.generate({ label: 'crash-carol', scheme: 'ed25519', backend: 'file' });
      const pub = await signer.importPublicKey('crash-carol-pub', 'ed25519', key.publicKeySpki);
      carol = sandboxPartyRecord(env.net, 'carol', pub);
      await store.parties.put(carol);
      hostExternalParty(env.net, carol, { fund: '1000' });
      airGap = new OnlineAirGap(store, signer);
      await airGap.createExportKey('test');
    }, 60_000);
    afterAll(async () => {
      await cold?.close();
      if (coldDir) await rm(coldDir, { recursive: true, force: true });
    });

    /** The offline machine signs the withdrawal's export; the import is checked and the withdrawal resumed. */
    async function signAndImport(id: string): Promise<string> {
      const x = await store.airGap.currentFor(id);
      expect(x?.status).toBe('open');
      const k = await airGap.exportKey();
      const trusted = [trustedExportKey(k.scheme, k.publicKeySpki)];
      const review = reviewRequest(parseRequestEnvelope(JSON.stringify(x!.envelope)), {
        trusted,
        minWindowMs: 0,
      });
      const response = await signReview(review, cold);
      const { export: imported } = await airGap.importResponse(response, 'test');
      expect((await resumeAfterImport(store, imported, 'test', () => {}))?.state).toBe('prepared');
      return imported.id;
    }

    const expected: Record<WithdrawalPoint, { state: WithdrawalState; onLedger: number }> = {
      received: { state: 'prepared', onLedger: 0 },
      prepared: { state: 'prepared', onLedger: 0 },
      signed: { state: 'signed', onLedger: 0 },
      submitted: { state: 'submitted', onLedger: 0 },
      executed: { state: 'submitted', onLedger: 1 },
    };

    for (const [i, point] of (Object.keys(expected) as WithdrawalPoint[]).entries())
      it(`parked, signed offline, imported, killed after "${point}", restarted: committed once`, async () => {
        const amount = `${i + 1}.5`;
        const { withdrawal: w } = await store.withdrawals.create({
          idempotencyKey: `cold-crash-${point}`,
          caller: 'bot',
          body: { party: carol.partyId, receiver: bob.partyId, amount },
        });
        const parked = await child(w.id, undefined, { STOP_AWAITING: '1' });
        expect(parked.status, parked.stderr).toBe(0);
        expect((await store.withdrawals.get(w.id))?.state).toBe('awaiting_signature');
        expect(updatesOf(w.commandId)).toHaveLength(0);
        const exportId = await signAndImport(w.id);

        const crashed = await child(w.id, point);
        expect(crashed.signal, crashed.stderr).toBe('SIGKILL');
        expect((await store.withdrawals.get(w.id))?.state).toBe(expected[point].state);
        expect(updatesOf(w.commandId)).toHaveLength(expected[point].onLedger);

        const resumed = await child(w.id);
        expect(resumed.status, resumed.stderr).toBe(0);
        const done = await store.withdrawals.get(w.id);
        expect(done?.state).toBe('committed');
        const ups = updatesOf(w.commandId);
        expect(ups).toHaveLength(1);
        expect(done?.updateId).toBe(ups[0]!.updateId);
        expect((await store.airGap.get(exportId))?.status).toBe('done');
        // the one export: the offline signature was never asked for again
        expect(await store.airGap.list({ withdrawalId: w.id })).toHaveLength(1);
      }, 120_000);
  });
});

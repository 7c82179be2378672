/**
 * The approval flow end to end, with real processes: `canton-signer serve`
 * (PostgreSQL, a sandbox network started here) under a policy that asks two
 * of treasury for a withdrawal above 100. One approver registers a file key
 * with the command line (`keys create`, `approvers register`), the other a
 * key inside a SoftHSM2 token (PKCS#11); an admin activates both with
 * `approvers activate`. A withdrawal of 250 waits in `awaiting_approval`;
 * `approvals list` shows it, `approvals show` prints its receiver and
 * amount. The service is killed (SIGKILL) while it waits and started again
 * on the same database; the first approver approves with `approvals
 * approve`, the second through REST with a signature made by the HSM key
 * here; the withdrawal commits, with exactly one update on the ledger.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSigner } from '../../src/keys/config.js';
import type { Signer } from '../../src/keys/signer.js';
import { approvalMessage } from '../../src/policy/approval.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import type { Role } from '../../src/server/roles.js';
import { type Store, storeOn } from '../../src/store/index.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { buildDist, type CliRun, cliEnv, runCli } from '../support/cli.js';
import { hostParty, testSigner } from '../support/flow-env.js';
import { createPostgresDatabase, requirePostgres, type TestDatabase } from '../support/pg.js';
import {
  LISTENING,
  policyServeConfig,
  type ServeProcess,
  startServe,
  stopAll,
} from '../support/serve-process.js';
import { createSoftHsmToken, requireSoftHsm, type SoftHsmToken } from '../support/softhsm.js';
import { mintToken } from '../support/tokens.js';

const hasPg = await requirePostgres();
const MODULE = requireSoftHsm();
const SERVICE_PASS = 'approvals-e2e service passphrase';
const TARA_PASS = 'tara keeps her approval key under this long passphrase';
const HUGO_PASS = 'hugo has a file keystore too, his approval key is in the HSM';

const POLICY = `version: 1
name: two of treasury above 100
default: deny
approverGroups:
  treasury: [tara, hugo, tina]
approvals: { ttl: 1h }
rules:
  - id: large
    when: { amount: { gt: "100" } }
    decision: approve
    approvals: [{ group: treasury, count: 2 }]
  - id: small
    decision: allow
`;

const token = (sub: string, roles: Role[]) => mintToken(roles, { sub, expiresIn: '1h' });

describe.runIf(hasPg && MODULE)(
  'approvals end to end: serve, the command line, an HSM key, a restart',
  () => {
    let dir: string;
    let sandbox: RunningSandbox;
    let db: TestDatabase;
    let store: Store;
    let serviceSigner: Signer;
    let hsm: SoftHsmToken;
    let config: string;
    let serve: ServeProcess;
    let url: string;
    let alice: PartyRecord;
    let bob: PartyRecord;
    let taraKeys: string;
    let hugoKeys: string;

    /** The environment of an approver's or admin's command: their token, their keystore's secrets. */
    async function as(
      sub: string,
      roles: Role[],
      extra: Record<string, string> = {},
    ): Promise<NodeJS.ProcessEnv> {
      return { ...cliEnv(), CANTON_SIGNER_TOKEN: await token(sub, roles), CANTON_SIGNER_URL: url, ...extra };
    }

    const hugoHsm = (): Record<string, string> => ({
      CANTON_SIGNER_PASSPHRASE: HUGO_PASS,
      CANTON_SIGNER_PKCS11_MODULE: hsm.module,
      CANTON_SIGNER_PKCS11_TOKEN: hsm.tokenLabel,
      CANTON_SIGNER_PKCS11_PIN: hsm.pin,
    });

    const ok = (r: CliRun, what: string) => {
      expect(r.status, `${what}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`).toBe(0);
      return r.stdout;
    };

    async function start(): Promise<void> {
      serve = startServe(['--config', config], { cwd: dir, env: { CANTON_SIGNER_PASSPHRASE: SERVICE_PASS } });
      url = (await serve.waitFor(LISTENING, 90_000))[1]!;
    }

    async function api<T>(method: string, path: string, sub: string, roles: Role[], body?: unknown) {
      const r = await fetch(`${url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${await token(sub, roles)}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(method === 'POST' && path === '/v1/withdrawals' ? { 'idempotency-key': randomUUID() } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      return { status: r.status, body: (await r.json()) as T };
    }

    async function until(id: string, states: string[], ms = 30_000) {
      const end = Date.now() + ms;
      for (;;) {
        const w = await store.withdrawals.get(id);
        if (w && states.includes(w.state)) return w;
        if (Date.now() > end)
          throw new Error(`withdrawal ${id} is ${w?.state}, not ${states.join('|')}\n${serve.stderr()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }

    beforeAll(async () => {
      buildDist(['cli/main.js', 'cli/approvals.js', 'policy/engine.js']);
      dir = await mkdtemp(join(tmpdir(), 'canton-signer-approvals-e2e-'));
      hsm = await createSoftHsmToken({ module: MODULE! });
      sandbox = await startSandbox({ seed: 'approvals-e2e', timers: false });
      db = await createPostgresDatabase();
      store = storeOn(await db.open(), 'test');
      const keys = join(dir, 'service-keys');
      serviceSigner = testSigner(keys, SERVICE_PASS);
      alice = await hostParty(sandbox.ctx.net, serviceSigner, store.parties, 'alice', { fund: '10000' });
      bob = await hostParty(sandbox.ctx.net, serviceSigner, store.parties, 'bob');
      taraKeys = join(dir, 'tara-keys');
      hugoKeys = join(dir, 'hugo-keys');
      const policy = join(dir, 'policy.yaml');
      await writeFile(policy, POLICY);
      config = join(dir, 'config.json');
      await writeFile(
        config,
        JSON.stringify(
          policyServeConfig({ keystore: keys, databaseUrl: db.url, sandbox, policyFile: policy }),
        ),
      );
      await start();
    }, 150_000);

    afterAll(async () => {
      stopAll();
      await store?.close();
      await db?.drop();
      await serviceSigner?.close();
      await sandbox?.close();
      await hsm?.cleanup();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('two approvers (a file key, an HSM key) approve across a SIGKILL of the service: committed once', async () => {
      // Approver one: a file key in her own keystore, registered with the command line.
      ok(
        await runCli(['keys', 'create', '--label', 'tara-approvals', '--keystore', taraKeys], {
          env: { ...cliEnv(), CANTON_SIGNER_PASSPHRASE: TARA_PASS },
        }),
        'tara creates her key',
      );
      const taraReg = JSON.parse(
        ok(
          await runCli(
            ['approvers', 'register', '--key', 'tara-approvals', '--keystore', taraKeys, '--json'],
            {
              env: await as('tara', ['approver'], { CANTON_SIGNER_PASSPHRASE: TARA_PASS }),
            },
          ),
          'tara registers her key',
        ),
      ) as { id: string; status: string; approver: string };
      expect(taraReg).toMatchObject({ status: 'pending', approver: 'tara' });

      // Approver two: a key inside the HSM, registered with the command line too.
      ok(
        await runCli(
          ['keys', 'create', '--label', 'hugo-approvals', '--backend', 'pkcs11', '--keystore', hugoKeys],
          {
            env: { ...cliEnv(), ...hugoHsm() },
          },
        ),
        'hugo creates his HSM key',
      );
      const hugoReg = JSON.parse(
        ok(
          await runCli(
            ['approvers', 'register', '--key', 'hugo-approvals', '--keystore', hugoKeys, '--json'],
            {
              env: await as('hugo', ['approver'], hugoHsm()),
            },
          ),
          'hugo registers his HSM key',
        ),
      ) as { id: string; status: string; approver: string };
      expect(hugoReg).toMatchObject({ status: 'pending', approver: 'hugo' });

      // An admin activates both.
      for (const id of [taraReg.id, hugoReg.id]) {
        const out = ok(
          await runCli(['approvers', 'activate', id], { env: await as('ada', ['admin']) }),
          `ada activates ${id}`,
        );
        expect(out).toMatch(new RegExp(`credential ${id}: active, .*activated by ada`));
      }

      // A withdrawal above the threshold waits for approvals.
      const created = await api<{ id: string; commandId: string }>(
        'POST',
        '/v1/withdrawals',
        'desk',
        ['withdrawer', 'operator'],
        { party: alice.partyId, receiver: bob.partyId, amount: '250' },
      );
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const w = created.body;
      await until(w.id, ['awaiting_approval']);
      const request = await store.approvals.latestFor(`withdrawal:${w.id}`);
      expect(request?.status).toBe('pending');
      const requestId = request!.id;

      const list = ok(await runCli(['approvals', 'list'], { env: await as('tara', ['approver']) }), 'list');
      expect(list).toMatch(
        new RegExp(`${requestId}\\s+pending\\s+${alice.partyId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
      );
      const show = ok(
        await runCli(['approvals', 'show', requestId], { env: await as('tara', ['approver']) }),
        'show',
      );
      expect(show).toContain(bob.partyId);
      expect(show).toMatch(/→ \S+, 250(\.0+)? Amulet/);
      expect(show).toMatch(/missing: +2 of treasury/);

      // The service dies while the withdrawal waits; it starts again on the same database.
      serve.child.kill('SIGKILL');
      expect((await serve.exited).signal).toBe('SIGKILL');
      await start();
      expect((await store.withdrawals.get(w.id))?.state).toBe('awaiting_approval');

      // Approver one approves with the command line.
      const approved = ok(
        await runCli(['approvals', 'approve', requestId, '--key', 'tara-approvals', '--keystore', taraKeys], {
          env: await as('tara', ['approver'], { CANTON_SIGNER_PASSPHRASE: TARA_PASS }),
        }),
        'tara approves',
      );
      expect(approved).toMatch(/approved \(signed\): request .* is now pending, still missing 1 of treasury/);
      expect((await store.withdrawals.get(w.id))?.state).toBe('awaiting_approval');

      // Approver two approves through REST, signing the statement's approval message with the HSM key.
      const view = await api<{ statementHash: string; missing: unknown[] }>(
        'GET',
        `/v1/approvals/${requestId}`,
        'hugo',
        ['approver'],
      );
      expect(view.status).toBe(200);
      expect(view.body.missing).toEqual([{ group: 'treasury', need: 1 }]);
      const hugoSigner = await openSigner({ keystore: hugoKeys, env: { ...process.env, ...hugoHsm() } });
      let signature: string;
      try {
        expect((await hugoSigner.describe('hugo-approvals')).backend).toBe('pkcs11');
        const out = await hugoSigner.sign(
          'hugo-approvals',
          approvalMessage(view.body.statementHash, 'approve'),
        );
        signature = Buffer.from(out.bytes).toString('base64');
      } finally {
        await hugoSigner.close();
      }
      const second = await api<{ status: string }>(
        'POST',
        `/v1/approvals/${requestId}/approve`,
        'hugo',
        ['approver'],
        {
          credentialId: hugoReg.id,
          statementHash: view.body.statementHash,
          signature,
        },
      );
      expect(second.status, JSON.stringify(second.body)).toBe(200);
      expect(second.body.status).toBe('approved');

      const done = await until(w.id, ['committed', 'rejected', 'failed', 'expired']);
      expect(done.state, done.lastError).toBe('committed');
      expect(sandbox.ctx.net.store.updates().filter((u) => u.commandId === w.commandId)).toHaveLength(1);
      const pending = ok(
        await runCli(['approvals', 'list'], { env: await as('tara', ['approver']) }),
        'list',
      );
      expect(pending).not.toContain(requestId);
    }, 180_000);
  },
);

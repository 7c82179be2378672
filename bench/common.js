/**
 * What bench/api.js and bench/verify-profile.js share: the service they
 * measure (built from dist/, a sandbox network — built in, or one this
 * process runs — a given database, a file keystore with a cheap scrypt, a
 * shared-secret JWT) with a helper that hosts funded parties on its sandbox,
 * the body they send to `POST /v1/sign/verify`, the bench's bearer token,
 * the pipeline's own cost without HTTP, and a throw-away PostgreSQL database.
 */
import { randomUUID } from 'node:crypto';
import { join, resolve } from 'node:path';

/**
 * How often the bench's withdrawal worker looks for work (ms): 200 by default
 * (serve's own default is 2,000), BENCH_WORKER_POLL_MS to change it.
 */
const WORKER_POLL_MS = Number(process.env.BENCH_WORKER_POLL_MS ?? 200);

/** Passphrase of the bench keystore (file keys only the bench uses, in a temporary folder). */
export const BENCH_PASSPHRASE = 'bench-passphrase';

/**
 * The service configuration the bench runs with, before parsing. With
 * `sandbox` (a RunningSandbox this process started) the network is that
 * sandbox's URLs, as a separately started service would be configured;
 * without, the service's built-in sandbox. The shared secret is left out:
 * callers add it (in memory, or through the environment of a child).
 */
export function benchConfig({ dir, sandbox, ledgerApiUser, databaseUrl, port = 0 }) {
  return {
    listen: { host: '127.0.0.1', port },
    database: databaseUrl ? { url: databaseUrl } : { dataDir: join(dir, 'db') },
    keystore: { dir: join(dir, 'keystore') },
    network: sandbox
      ? {
          sandbox: false,
          ledgerApiUrl: sandbox.urls.ledgerApi,
          validatorUrl: sandbox.urls.validator,
          scanUrl: sandbox.urls.scan,
          ledgerApiUser,
        }
      : { sandbox: true },
    auth: { issuer: 'bench', audience: 'bench', algorithms: ['HS256'] },
    // The same worker tuning as the single-process mode (its workerOptions), per process.
    worker: { concurrency: 16, pollMs: WORKER_POLL_MS },
    // BENCH_POLICY=FILE: the service decides under this policy (bench/policy.yaml has limits).
    ...(process.env.BENCH_POLICY ? { policy: { file: resolve(process.env.BENCH_POLICY) } } : {}),
    log: { level: 'warn' },
  };
}

/**
 * The measured service over `db` (migrated here), its keys in `dir`/keystore.
 * `sandbox`: a RunningSandbox of this process to use instead of the built-in
 * one; `worker: false` leaves the withdrawal worker out.
 */
export async function benchService(dist, { db, dir, secret, concurrency, sandbox, worker = true }) {
  const { configSchema } = await import(dist('server/config.js'));
  const { createService } = await import(dist('server/service.js'));
  const { migrate, storeOn } = await import(dist('store/index.js'));
  const { hostExternalParty, sandboxPartyRecord } = await import(dist('sandbox/host-party.js'));
  const { LEDGER_API_USER } = await import(dist('sandbox/network.js'));
  const { Signer } = await import(dist('keys/signer.js'));
  const { FileBackend } = await import(dist('keys/file-backend.js'));
  await migrate(db);
  const store = storeOn(db, 'service');
  // Cheaper scrypt than production: it only costs the one unlock per key, not the measured paths.
  // The cost is stored in each key file, so a service started separately unlocks them the same way.
  const signer = new Signer({
    file: new FileBackend({
      dir: join(dir, 'keystore'),
      passphrase: () => BENCH_PASSPHRASE,
      scrypt: { N: 2 ** 14, r: 8, p: 1 },
    }),
  });
  const raw = benchConfig({ dir, sandbox, ledgerApiUser: LEDGER_API_USER });
  const config = configSchema.parse({ ...raw, auth: { ...raw.auth, sharedSecret: secret } });
  const service = await createService({
    config,
    store,
    signer,
    ...(sandbox ? {} : { sandbox: { seed: 'bench-api' } }),
    ...(worker ? { workerOptions: { pollMs: WORKER_POLL_MS, concurrency } } : { worker: false }),
  });
  const net = (sandbox ?? service.sandbox).ctx.net;
  /** A new Ed25519 key, its party hosted on the sandbox (funded with `fund`) and booked. */
  const host = async (hint, fund) => {
    const key = await signer.generate({ label: hint, scheme: 'ed25519', backend: 'file' });
    const rec = sandboxPartyRecord(net, hint, key);
    hostExternalParty(net, rec, { userId: service.deps.flows.userId, ...(fund ? { fund } : {}) });
    await store.parties.put(rec);
    return rec.partyId;
  };
  return { service, store, signer, host };
}

/**
 * A real prepared transfer from `verifier` to `receiver`, captured from the
 * transfer flow's own Ledger API prepare through `flows` (a FlowContext, e.g.
 * `service.deps.flows`), with the intent the request states.
 */
export async function verifyBodyFrom(flows, transfer, verifier, receiver) {
  const ledger = flows.ledger;
  let captured;
  const spy = Object.create(ledger);
  spy.prepare = async (body, o) => {
    const r = await ledger.prepare(body, o);
    captured ??= { body, r };
    return r;
  };
  await transfer({ ...flows, ledger: spy }, { from: verifier, to: receiver, amount: '10', memo: 'bench' });
  const t = captured.body.commands[0].ExerciseCommand.choiceArgument.transfer;
  return {
    party: verifier,
    preparedTransaction: captured.r.preparedTransaction,
    hash: captured.r.preparedTransactionHash,
    hashingScheme: captured.r.hashingSchemeVersion === 'HASHING_SCHEME_VERSION_V3' ? 'v3' : 'v2',
    intent: {
      kind: 'transfer',
      sender: t.sender,
      receiver: t.receiver,
      amount: t.amount,
      instrument: t.instrumentId,
      memo: 'bench',
      executeBefore: t.executeBefore,
      inputs: t.inputHoldingCids,
    },
  };
}

/** An operator token for the bench's shared secret, valid two hours. */
export async function benchToken(secret) {
  const { SignJWT } = await import('jose');
  return new SignJWT({ canton_signer_roles: ['operator'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('bench')
    .setIssuer('bench')
    .setAudience('bench')
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(new TextEncoder().encode(secret));
}

/**
 * The verification pipeline alone (decode, re-hash, intent, window), no HTTP,
 * and one party book lookup, each in ms per call in this process: where the
 * verify route's time goes.
 */
export async function inProcessTimings(dist, { flows, store, verifyBody }) {
  const { verifyOnly } = await import(dist('flows/sign-execute.js'));
  const { withKnownParty } = await import(dist('server/routes/context.js'));
  const party = verifyBody.party;
  const record = await store.parties.get(party);
  const direct = () =>
    verifyOnly(withKnownParty(flows, record), {
      partyId: party,
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
  for (let i = 0; i < 1000; i++) await store.parties.get(party);
  const partyGetMs = (performance.now() - t0) / 1000;
  // The policy step the signing routes add to this pipeline: one decision (with its reservation
  // when the policy has limits) and the settlement that ends it, per transaction.
  const { actions, hash } = await direct();
  const decision = async (i) => {
    const subject = `bench:${i}`;
    await flows.policy.decide({
      flow: 'sign',
      partyId: party,
      keyLabel: record.keyLabel,
      intent: verifyBody.intent,
      actions,
      hash,
      subject,
      caller: { id: 'bench', roles: ['operator'] },
    });
    await flows.policy.settle(subject, 'released');
  };
  for (let i = 0; i < 200; i++) await decision(-i - 1);
  t0 = performance.now();
  for (let i = 0; i < 1000; i++) await decision(i);
  const policyMs = (performance.now() - t0) / 1000;
  return { pipelineMs, partyGetMs, policyMs };
}

/**
 * A new, empty database on the PostgreSQL server behind `adminUrl`, opened
 * here (`db`, a pool of `max`), with its URL and `drop()` (closes nothing
 * else: close what uses the database first).
 */
export async function throwAwayPostgres(dist, adminUrl, { max = 10 } = {}) {
  const { openPostgres } = await import(dist('store/index.js'));
  const { default: pg } = await import('pg');
  const name = `cs_bench_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const db = await openPostgres(url, { max });
  return {
    db,
    url,
    name,
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/**
 * A poster of withdrawals over node:http with keep-alive (not fetch: the load generator shares the
 * cores with what it measures, and fetch costs it ~1 ms of CPU per request). `post(i)` sends
 * `bodyOf(i)` under Idempotency-Key `${keyPrefix}-${i}` and resolves with the status code;
 * `agent.destroy()` closes its connections.
 */
export function withdrawalPoster(http, { url, headers, keyPrefix, bodyOf }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const post = (i) =>
    new Promise((resolve, reject) => {
      const req = http.request(
        `${url}/v1/withdrawals`,
        { method: 'POST', agent, headers: { ...headers, 'idempotency-key': `${keyPrefix}-${i}` } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(bodyOf(i));
    });
  return { post, agent };
}

/**
 * What bench/api.js and bench/verify-profile.js share: the service they
 * measure (built from dist/, the built-in sandbox, a given database, a file
 * keystore with a cheap scrypt, a shared-secret JWT) with a helper that
 * hosts funded parties on its sandbox, and the body they send to
 * `POST /v1/sign/verify`.
 */
import { join } from 'node:path';

/** The measured service over `db` (migrated here), its keys in `dir`/keystore. */
export async function benchService(dist, { db, dir, secret, concurrency }) {
  const { configSchema } = await import(dist('server/config.js'));
  const { createService } = await import(dist('server/service.js'));
  const { migrate, storeOn } = await import(dist('store/index.js'));
  const { hostExternalParty, sandboxPartyRecord } = await import(dist('sandbox/host-party.js'));
  const { Signer } = await import(dist('keys/signer.js'));
  const { FileBackend } = await import(dist('keys/file-backend.js'));
  await migrate(db);
  const store = storeOn(db, 'service');
  // Cheaper scrypt than production: it only costs the one unlock per key, not the measured paths.
  const signer = new Signer({
    file: new FileBackend({
      dir: join(dir, 'keystore'),
      passphrase: () => 'bench-passphrase',
      scrypt: { N: 2 ** 14, r: 8, p: 1 },
    }),
  });
  const config = configSchema.parse({
    listen: { host: '127.0.0.1', port: 0 },
    database: { dataDir: join(dir, 'db') },
    keystore: { dir: join(dir, 'keystore') },
    network: { sandbox: true },
    auth: { issuer: 'bench', audience: 'bench', sharedSecret: secret, algorithms: ['HS256'] },
    log: { level: 'warn' },
  });
  const service = await createService({
    config,
    store,
    signer,
    sandbox: { seed: 'bench-api' },
    workerOptions: { pollMs: 200, concurrency },
  });
  const net = service.sandbox.ctx.net;
  /** A new Ed25519 key, its party hosted on the sandbox (funded with `fund`) and booked. */
  const host = async (hint, fund) => {
    const key = await signer.generate({ label: hint, scheme: 'ed25519', backend: 'file' });
    const rec = sandboxPartyRecord(net, hint, key);
    hostExternalParty(net, rec, fund ? { fund } : {});
    await store.parties.put(rec);
    return rec.partyId;
  };
  return { service, store, signer, host };
}

/**
 * A real prepared transfer from `verifier` to `receiver`, captured from the
 * transfer flow's own Ledger API prepare against the service's sandbox, with
 * the intent the request states.
 */
export async function verifyBodyFrom(service, transfer, verifier, receiver) {
  const ledger = service.deps.flows.ledger;
  let captured;
  const spy = Object.create(ledger);
  spy.prepare = async (body, o) => {
    const r = await ledger.prepare(body, o);
    captured ??= { body, r };
    return r;
  };
  await transfer(
    { ...service.deps.flows, ledger: spy },
    { from: verifier, to: receiver, amount: '10', memo: 'bench' },
  );
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

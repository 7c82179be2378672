/**
 * One environment for the service tests: the flow environment (sandbox,
 * signer over a temp keystore, clients; SoftHSM2 with `hsm: true`), a store
 * (PGlite in memory by default, or any Db given), and the service built on
 * them with HS256 tokens the test mints with `token(roles, parties)`.
 * `addParty` hosts a new key's party on the sandbox and records it in the
 * SERVICE's party book (the store), funded when asked.
 */
import type { BackendKind } from '../../src/keys/backend.js';
import type { KeyScheme } from '../../src/keys/schemes.js';
import { configSchema, type ServiceConfig } from '../../src/server/config.js';
import type { Role } from '../../src/server/roles.js';
import { createService, type Service, type ServiceOptions } from '../../src/server/service.js';
import { openPglite } from '../../src/store/db.js';
import { type Store, storeOn } from '../../src/store/index.js';
import { migrate } from '../../src/store/migrations.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type FlowEnv, flowEnv, hostParty } from './flow-env.js';
import { pgliteMigratedBlob } from './pg.js';
import { mintToken, TEST_AUDIENCE, TEST_ISSUER, TEST_SECRET } from './tokens.js';

export { mintToken, TEST_AUDIENCE, TEST_ISSUER, TEST_SECRET } from './tokens.js';

export function testConfig(overrides: Record<string, unknown> = {}): ServiceConfig {
  return configSchema.parse({
    listen: { host: '127.0.0.1', port: 0 },
    network: { sandbox: true },
    auth: { issuer: TEST_ISSUER, audience: TEST_AUDIENCE, sharedSecret: TEST_SECRET, algorithms: ['HS256'] },
    log: { level: 'silent' },
    // Ledger ingestion runs where a test asks for it (an `exchange` override turns it on):
    // elsewhere it would only poll in the background of every service test.
    exchange: { ingestion: { enabled: false } },
    ...overrides,
  });
}

export interface ServiceEnv {
  flow: FlowEnv;
  store: Store;
  service: Service;
  /** `Authorization` header value for these roles (and a withdrawer's parties). */
  auth(roles: readonly Role[], parties?: readonly string[]): Promise<{ authorization: string }>;
  addParty(
    hint: string,
    opts?: { scheme?: KeyScheme; backend?: BackendKind; fund?: string },
  ): Promise<PartyRecord>;
  close(): Promise<void>;
}

export async function serviceEnv(
  opts: {
    seed?: string;
    hsm?: boolean;
    store?: Store;
    worker?: boolean;
    /** The service's flows read the sandbox's clock (tests that move time with `net.clock.advance`). */
    sandboxClock?: boolean;
    service?: Partial<ServiceOptions>;
  } = {},
): Promise<ServiceEnv> {
  const flow = await flowEnv({ seed: opts.seed ?? 'service', ...(opts.hsm ? { hsm: true } : {}) });
  let store = opts.store;
  if (!store) {
    // From the migrated template cluster (about 1 s) rather than a fresh initdb (3-15 s); migrate()
    // then only checks what is applied against this build.
    const db = await openPglite('memory', { loadDataDir: await pgliteMigratedBlob() });
    await migrate(db);
    store = storeOn(db, 'service');
  }
  const service = await createService({
    config: testConfig(),
    store,
    signer: flow.signer,
    clients: {
      ledger: flow.ledger,
      validator: flow.validator,
      scan: flow.scan,
      userId: flow.ctx.userId,
    },
    worker: opts.worker ?? true,
    workerOptions: { pollMs: 100 },
    ...(opts.sandboxClock ? { flowOverrides: { nowUs: () => flow.net.clock.now() } } : {}),
    ...opts.service,
  });
  const s = store;
  return {
    flow,
    store: s,
    service,
    async auth(roles, parties) {
      return { authorization: `Bearer ${await mintToken(roles, parties ? { parties } : {})}` };
    },
    addParty: (hint, o = {}) => hostParty(flow.net, flow.signer, s.parties, hint, o),
    async close() {
      await service.close();
      await s.close();
      await flow.close();
    },
  };
}

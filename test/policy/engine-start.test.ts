/**
 * PolicyEngine.start with a policy file, as `serve --workers N` starts it:
 * several processes at once on one database and one keystore. Each of them
 * starts (none fails on the seal key another one created meanwhile, none
 * finds the version another one wrote but had not sealed yet), and the
 * version in force afterwards carries a valid seal. A process stopped
 * between writing the file's version and sealing it does not keep the
 * service from starting: the file comes into force again, sealed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/document.js';
import { PolicyEngine } from '../../src/policy/engine.js';
import { type Store, storeOn } from '../../src/store/index.js';
import { storeDrivers } from '../support/pg.js';
import { testSigner } from '../support/test-signer.js';

const drivers = await storeDrivers();
const PASS = 'engine-start-passphrase';
const FILE = parsePolicy('version: 1\ndefault: deny\nrules:\n  - id: all\n    decision: allow\n');

describe.each(drivers)('PolicyEngine.start with a file ($name)', (driver) => {
  const dirs: string[] = [];
  afterAll(async () => {
    await driver.cleanup();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  async function setup(instances: number) {
    const dir = await mkdtemp(join(tmpdir(), 'cs-engine-start-'));
    dirs.push(dir);
    const first = await driver.fresh();
    const stores: Store[] = [storeOn(first, 'i0')];
    for (let i = 1; i < instances; i++)
      stores.push(storeOn(driver.another ? await driver.another() : first, `i${i}`));
    // One keystore folder, one Signer per process: each sees the others' keys only on disk.
    const engines = stores.map((store) => new PolicyEngine({ store, signer: testSigner(dir, PASS) }));
    return { stores, engines };
  }

  it('several processes starting at once all start; the version in force is sealed', async () => {
    const { stores, engines } = await setup(3);
    const started = await Promise.all(engines.map((e) => e.start(FILE)));
    for (const a of started) expect(a).toMatchObject({ sha256: FILE.sha256, source: 'file' });
    const inForce = await stores[0]!.policy.inForce();
    expect(inForce?.sha256).toBe(FILE.sha256);
    // A process started later without the file takes the version in force only if its seal verifies.
    const later = new PolicyEngine({ store: stores[0]!, signer: testSigner(dirs.at(-1)!, PASS) });
    expect(await later.start()).toMatchObject({ version: inForce!.version, sha256: FILE.sha256 });
  });

  it("the file's version in force without a seal (stopped before sealing): the file comes into force again, sealed", async () => {
    const { stores, engines } = await setup(1);
    const unsealed = await stores[0]!.policy.addVersion({
      text: FILE.text,
      format: FILE.format,
      sha256: FILE.sha256,
      source: 'file',
      status: 'in_force',
      createdBy: 'configuration',
    });
    const a = await engines[0]!.start(FILE);
    expect(a.version).toBeGreaterThan(unsealed.version);
    const later = new PolicyEngine({ store: stores[0]!, signer: testSigner(dirs.at(-1)!, PASS) });
    expect((await later.start()).version).toBe(a.version);
  });
});

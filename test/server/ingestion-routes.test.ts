/**
 * The ingestion's REST controls and the `canton-signer ingest` commands over
 * them, on a service whose real ledger ingestion is caught up by hand (the
 * worker does not run): status for an auditor, a rewind to an offset by an
 * admin (audited with the caller), refused to an operator, refused while
 * another instance holds the lease and forced through it, a body naming both
 * targets refused; the reconciliation of a party funded after the last
 * catch-up names its ledger holdings ingestion does not know, and is clean
 * once ingestion caught up; with ingestion disabled the controls still
 * work; the CLI prints the status, rewinds to an offset
 * and to a record time, and refuses a usage without a target.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_LEASE } from '../../src/exchange/ingest-control.js';
import { listAudit } from '../../src/store/index.js';
import { buildDist, type CliRun, cliEnv, runCli } from '../support/cli.js';
import { type ServiceEnv, serviceEnv, testConfig } from '../support/service.js';

let env: ServiceEnv;
let url: string;

/** The service's ingestion up to the ledger end; the lease let go afterwards (as when paused). */
async function catchUp(): Promise<void> {
  const ingestion = env.service.ingestion!;
  try {
    await ingestion.catchUp();
  } finally {
    await ingestion.stop();
  }
}

beforeAll(async () => {
  buildDist(['cli/main.js', 'cli/ingest.js']);
  env = await serviceEnv({
    seed: 'ingestion-routes',
    worker: false,
    service: { config: testConfig({ exchange: { ingestion: { enabled: true } } }) },
  });
  await env.addParty('treasury', { fund: '30' });
  await catchUp();
  url = await env.service.listen({ port: 0, host: '127.0.0.1' });
}, 60_000);
afterAll(async () => env?.close());

const call = async (
  method: 'GET' | 'POST',
  path: string,
  roles: ('admin' | 'operator' | 'auditor')[],
  body?: unknown,
) =>
  env.service.app.inject({
    method,
    url: path,
    headers: await env.auth(roles),
    ...(body === undefined ? {} : { payload: body as object }),
  });

describe('ingestion controls over REST', () => {
  it('status for an auditor; a rewind by an admin, audited; refused to an operator', async () => {
    const s = await call('GET', '/v1/ingestion', ['auditor']);
    expect(s.statusCode).toBe(200);
    const end = s.json().ledgerEnd as number;
    expect(end).toBeGreaterThan(1);
    expect(s.json()).toMatchObject({
      cursor: { offset: end },
      lag: 0,
      lastUpdate: { offset: expect.any(Number) },
    });
    expect((await call('POST', '/v1/ingestion/rewind', ['operator'], { offset: 1 })).statusCode).toBe(403);
    const r = await call('POST', '/v1/ingestion/rewind', ['admin'], { offset: 1 });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ from: end, to: 1 });
    expect((await call('GET', '/v1/ingestion', ['auditor'])).json()).toMatchObject({ lag: end - 1 });
    const audit = await listAudit(env.store.db, { subject: 'ingest' });
    expect(audit.at(-1)).toMatchObject({
      action: 'ingest.rewind',
      actor: 'test-admin',
      details: { toOffset: 1 },
    });
  });

  it('409 while another instance holds the lease; forced, it is fenced out', async () => {
    await env.store.leases.acquire(INGEST_LEASE, 'instance-b', 60_000);
    const held = await call('POST', '/v1/ingestion/rewind', ['admin'], { offset: 0 });
    expect(held.statusCode).toBe(409);
    expect(held.json()).toMatchObject({ code: 'ingest_lease_held', holder: 'instance-b' });
    const forced = await call('POST', '/v1/ingestion/rewind', ['admin'], { offset: 0, force: true });
    expect(forced.json()).toEqual({ from: 1, to: 0, fencedOut: 'instance-b' });
    expect(await env.store.leases.holder(INGEST_LEASE)).toBeUndefined();
  });

  it('refuses a body with both an offset and a record time', async () => {
    const r = await call('POST', '/v1/ingestion/rewind', ['admin'], {
      offset: 1,
      recordTime: '2026-01-01T00:00:00Z',
    });
    expect(r.statusCode).toBe(400);
  });

  it("a funded party's reconciliation names the ledger holdings ingestion does not know", async () => {
    await catchUp();
    const p = await env.addParty('recon', { fund: '12' });
    const r = await call('GET', `/v1/parties/${encodeURIComponent(p.partyId)}/reconciliation`, ['auditor']);
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(body.clean).toBe(false);
    expect(body.instruments[0].ledger.amount).toBe('12.0000000000');
    expect(body.instruments[0].differences).toEqual([
      expect.objectContaining({ kind: 'ledger_holding_not_ingested', amount: '12.0000000000' }),
    ]);
    await catchUp();
    const after = await call('GET', `/v1/parties/${encodeURIComponent(p.partyId)}/reconciliation`, [
      'auditor',
    ]);
    expect(after.json()).toMatchObject({ clean: true, lag: 0 });
    expect(after.json().instruments[0].ingested.amount).toBe('12.0000000000');
    const unknown = await call('GET', `/v1/parties/nobody%3A%3A1220${'ab'.repeat(32)}/reconciliation`, [
      'auditor',
    ]);
    expect(unknown.statusCode).toBe(404);
  });
});

describe('with ingestion disabled (paused)', () => {
  it('the controls still read and move its cursor', async () => {
    const paused = await serviceEnv({
      seed: 'ingestion-paused',
      service: { config: testConfig({ exchange: { ingestion: { enabled: false } } }) },
    });
    try {
      expect(paused.service.ingestion).toBeUndefined();
      const as = async (roles: ('admin' | 'auditor')[]) => paused.auth(roles);
      const s = await paused.service.app.inject({
        method: 'GET',
        url: '/v1/ingestion',
        headers: await as(['auditor']),
      });
      expect(s.statusCode, s.body).toBe(200);
      expect(s.json()).not.toHaveProperty('cursor');
      const r = await paused.service.app.inject({
        method: 'POST',
        url: '/v1/ingestion/rewind',
        headers: await as(['admin']),
        payload: { offset: 2 },
      });
      expect(r.statusCode, r.body).toBe(200);
      expect(r.json()).toEqual({ to: 2 });
      expect((await paused.store.ledger.cursor())?.offset).toBe(2);
    } finally {
      await paused.close();
    }
  }, 60_000);
});

describe('canton-signer ingest', () => {
  const cli = async (args: string[], roles: ('admin' | 'auditor')[]): Promise<CliRun> =>
    runCli(['ingest', ...args], {
      env: cliEnv({
        CANTON_SIGNER_URL: url,
        CANTON_SIGNER_TOKEN: (await env.auth(roles)).authorization.slice('Bearer '.length),
      }),
    });

  it('prints the status, rewinds, and refuses a rewind without a target', async () => {
    const last = (await env.store.ledger.lastUpdate())!;
    const end = (await env.store.ledger.cursor())!.offset;
    const s = await cli(['status'], ['auditor']);
    expect(s.status, s.stderr).toBe(0);
    expect(s.stdout).toContain(`cursor: offset ${end}\n`);
    expect(s.stdout).toContain(
      `last update: ${last.updateId} at offset ${last.offset}, record time ${last.recordTime}`,
    );
    expect(s.stdout).toContain('lease: free');
    expect(s.stdout).toContain(`ledger end: ${end} (ingestion 0 offsets behind)`);
    const r = await cli(['rewind', '--offset', '0', '--json'], ['admin']);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ from: end, to: 0 });
    // tRecovery = the last update's record time: the cursor goes to the largest offset before it.
    const t = await cli(['rewind', '--record-time', last.recordTime], ['admin']);
    expect(t.status, t.stderr).toBe(0);
    const to = (await env.store.ledger.cursor())!.offset;
    expect(to).toBeGreaterThan(0);
    expect(to).toBeLessThan(last.offset);
    expect(t.stdout).toContain(`rewound: cursor moved from offset 0 to offset ${to}`);
    expect(t.stdout).toMatch(new RegExp(`the largest offset before the record time: ${to} \\(record time `));
    await catchUp();
    expect((await env.store.ledger.cursor())!.offset).toBe(end);
    const bad = await cli(['rewind'], ['admin']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('give either --record-time <iso> or --offset <n>');
  });
});

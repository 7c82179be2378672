/**
 * The ingestion's REST controls and the `canton-signer ingest` commands over
 * them, on a service given a stand-in ingestion (a cursor row in its
 * database, nothing ingested): status for an auditor, a rewind to an offset
 * by an admin (audited with the caller), refused to an operator, refused
 * while another instance holds the lease and forced through it, a body
 * naming both targets refused; the reconciliation of a funded party names
 * its ledger holdings ingestion does not know; the CLI prints the status and
 * rewinds, and refuses a usage without a target.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_LEASE, type IngestionAccess } from '../../src/exchange/ingest-control.js';
import { listAudit } from '../../src/store/index.js';
import { buildDist, type CliRun, cliEnv, runCli } from '../support/cli.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
let url: string;

const ingestion = (): IngestionAccess => ({
  cursor: {
    async read(q) {
      const r = await q.query<{ off: string }>('SELECT off::text AS off FROM test_cursor WHERE id = 1');
      const row = r.rows[0];
      return row ? { offset: Number(row.off), recordTimes: {} } : undefined;
    },
    async moveTo(q, offset) {
      await q.query(
        `INSERT INTO test_cursor (id, off) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET off = EXCLUDED.off`,
        [offset],
      );
    },
    lastUpdate: async () => undefined,
  },
  ingested: {
    cursor: async () => ({ offset: 5, recordTimes: {} }),
    holdings: async () => [],
    holdingsAt: async () => [],
    firstRecordTimeAfter: async () => undefined,
    movements: async () => [],
  },
});

beforeAll(async () => {
  buildDist(['cli/main.js', 'cli/ingest.js']);
  env = await serviceEnv({
    seed: 'ingestion-routes',
    worker: false,
    service: {
      beforeStart: async ({ deps }) => {
        deps.ingestion = ingestion();
      },
    },
  });
  await env.store.db.query('CREATE TABLE test_cursor (id int PRIMARY KEY, off bigint NOT NULL)');
  await env.store.db.query('INSERT INTO test_cursor (id, off) VALUES (1, 42)');
  url = await env.service.listen({ port: 0, host: '127.0.0.1' });
});
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
    expect(s.json()).toMatchObject({ cursor: { offset: 42 } });
    expect(s.json().ledgerEnd).toBeGreaterThan(0);
    expect((await call('POST', '/v1/ingestion/rewind', ['operator'], { offset: 3 })).statusCode).toBe(403);
    const r = await call('POST', '/v1/ingestion/rewind', ['admin'], { offset: 3 });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ from: 42, to: 3 });
    const audit = await listAudit(env.store.db, { subject: 'ingest' });
    expect(audit.at(-1)).toMatchObject({
      action: 'ingest.rewind',
      actor: 'test-admin',
      details: { toOffset: 3 },
    });
  });

  it('409 while another instance holds the lease; forced, it is fenced out', async () => {
    await env.store.leases.acquire(INGEST_LEASE, 'instance-b', 60_000);
    const held = await call('POST', '/v1/ingestion/rewind', ['admin'], { offset: 1 });
    expect(held.statusCode).toBe(409);
    expect(held.json()).toMatchObject({ code: 'ingest_lease_held', holder: 'instance-b' });
    const forced = await call('POST', '/v1/ingestion/rewind', ['admin'], { offset: 1, force: true });
    expect(forced.json()).toEqual({ from: 3, to: 1, fencedOut: 'instance-b' });
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
    const p = await env.addParty('recon', { fund: '12' });
    const r = await call('GET', `/v1/parties/${encodeURIComponent(p.partyId)}/reconciliation`, ['auditor']);
    expect(r.statusCode).toBe(200);
    const body = r.json();
    expect(body.clean).toBe(false);
    expect(body.instruments[0].ledger.amount).toBe('12.0000000000');
    expect(body.instruments[0].differences).toEqual([
      expect.objectContaining({ kind: 'ledger_holding_not_ingested', amount: '12.0000000000' }),
    ]);
    const unknown = await call('GET', `/v1/parties/nobody%3A%3A1220${'ab'.repeat(32)}/reconciliation`, [
      'auditor',
    ]);
    expect(unknown.statusCode).toBe(404);
  });
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
    const s = await cli(['status'], ['auditor']);
    expect(s.status, s.stderr).toBe(0);
    expect(s.stdout).toContain('cursor: offset 1');
    expect(s.stdout).toContain('lease: free');
    const r = await cli(['rewind', '--offset', '0', '--json'], ['admin']);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ from: 1, to: 0 });
    const bad = await cli(['rewind'], ['admin']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('give either --record-time <iso> or --offset <n>');
  });
});

/**
 * /v1/audit: entries in seq order with the cursor and the subject filter,
 * request errors naming the field, the chain verification (ok with the head;
 * an edited row found), and who may read it (auditor and admin only);
 * `canton-signer audit verify --url` asking a running service.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { type ServiceEnv, serviceEnv } from '../support/service.js';

let env: ServiceEnv;
let auditor: { authorization: string };

beforeAll(async () => {
  env = await serviceEnv({ seed: 'audit-routes', worker: false });
  auditor = await env.auth(['auditor']);
  const admin = await env.auth(['admin']);
  for (const label of ['a1', 'a2', 'a3'])
    await env.service.app.inject({
      method: 'POST',
      url: '/v1/keys',
      headers: admin,
      payload: { label, scheme: 'ed25519' },
    });
}, 60_000);
afterAll(async () => env?.close());

const get = (url: string, headers = auditor) => env.service.app.inject({ method: 'GET', url, headers });

describe('GET /v1/audit', () => {
  it('pages through the log with the cursor', async () => {
    const all = (await get('/v1/audit?limit=1000')).json().entries;
    expect(all.length).toBeGreaterThanOrEqual(3);
    const seen: number[] = [];
    let after = 0;
    for (;;) {
      const page = (await get(`/v1/audit?limit=2&afterSeq=${after}`)).json();
      seen.push(...page.entries.map((e: { seq: number }) => e.seq));
      if (page.nextAfterSeq === undefined) break;
      after = page.nextAfterSeq;
    }
    expect(seen).toEqual(all.map((e: { seq: number }) => e.seq));
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
  });

  it('filters by subject; entries name the actor and the action', async () => {
    const r = await get('/v1/audit?subject=key:a2');
    expect(r.statusCode).toBe(200);
    expect(r.json().entries).toEqual([
      expect.objectContaining({ subject: 'key:a2', action: 'key.create', actor: 'test-admin' }),
      expect.objectContaining({ subject: 'key:a2', action: 'key.put', actor: 'test-admin' }),
    ]);
    expect(r.json().entries[0].hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it.each([
    ['limit=0', 'query.limit'],
    ['limit=5000', 'query.limit'],
    ['afterSeq=-1', 'query.afterSeq'],
    ['afterSeq=abc', 'query.afterSeq'],
  ])('400 for %s naming %s', async (q, field) => {
    const r = await get(`/v1/audit?${q}`);
    expect(r.statusCode).toBe(400);
    expect(r.json().field).toBe(field);
  });

  it('is for auditors and admins only', async () => {
    expect((await get('/v1/audit', await env.auth(['admin']))).statusCode).toBe(200);
    for (const role of ['operator', 'withdrawer'] as const)
      expect((await get('/v1/audit', await env.auth([role], []))).statusCode).toBe(403);
  });
});

/** `canton-signer ARGS` in this process, with CANTON_SIGNER_TOKEN set to `token`. */
async function cli(
  args: string[],
  token?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((s) => {
    stdout += String(s);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((s) => {
    stderr += String(s);
    return true;
  });
  const saved = process.env.CANTON_SIGNER_TOKEN;
  if (token === undefined) delete process.env.CANTON_SIGNER_TOKEN;
  else process.env.CANTON_SIGNER_TOKEN = token;
  try {
    const code = await main(['node', 'canton-signer', ...args]);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
    if (saved === undefined) delete process.env.CANTON_SIGNER_TOKEN;
    else process.env.CANTON_SIGNER_TOKEN = saved;
  }
}

describe('GET /v1/audit/verify', () => {
  let url: string;
  const token = () => auditor.authorization.replace(/^Bearer /, '');

  it('canton-signer audit verify --url asks the running service (an auditor token)', async () => {
    url = await env.service.listen({ port: 0, host: '127.0.0.1' });
    let r = await cli(['audit', 'verify', '--url', url, '--json'], token());
    expect(r.code, r.stderr).toBe(0);
    const v = JSON.parse(r.stdout);
    expect(v).toMatchObject({ ok: true, head: { seq: v.rows } });
    r = await cli(['audit', 'verify', '--url', url], token());
    expect(r.stdout).toBe(`audit log intact: ${v.rows} rows; head seq ${v.head.seq} hash ${v.head.hash}\n`);
    r = await cli(['audit', 'verify', '--url', url]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'canton-signer: --url asks the service, which needs a bearer token of an auditor or admin: set $CANTON_SIGNER_TOKEN (or give --token)\n',
    );
    r = await cli(['audit', 'verify', '--url', url, '--token', 'not-a-token']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^canton-signer: refused \(malformed\)/);
    r = await cli(['audit', 'verify', '--url', url, '--data-dir', 'data'], token());
    expect(r.code).toBe(2);
  });

  it('ok with the head; an edited row is found and named', async () => {
    const ok = await get('/v1/audit/verify');
    expect(ok.statusCode).toBe(200);
    const v = ok.json();
    expect(v.ok).toBe(true);
    expect(v.head.seq).toBe(v.rows);
    expect(v.head.hash).toMatch(/^[0-9a-f]{64}$/);
    // What an attacker with owner rights can do: the append-only triggers off, one row edited.
    await env.store.db.transaction(async (tx) => {
      await tx.query('SET LOCAL session_replication_role = replica');
      await tx.query(`UPDATE audit_log SET actor = 'mallory' WHERE seq = 2`);
    });
    const bad = (await get('/v1/audit/verify')).json();
    expect(bad).toMatchObject({ ok: false, rows: 1, problem: { seq: 2, kind: 'edited' } });
    const r = await cli(['audit', 'verify', '--url', url], token());
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^canton-signer: audit log BROKEN at seq 2 \(edited\): /);
  });
});

import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeyScheme } from '../../src/keys/schemes.js';
import { parseRequestEnvelope, parseResponse } from '../../src/offline/format.js';
import type { PartyRecord } from '../../src/store/parties.js';
import { type AirGapEnv, airGapEnv } from '../support/air-gap-env.js';
import { buildDist, type CliRun, cliEnv, runCli } from '../support/cli.js';
import { mintToken, type ServiceEnv } from '../support/service.js';

let ag: AirGapEnv;
let env: ServiceEnv;
let dir: string;
let url: string;
let token: string;
let operator: { authorization: string };
let onlineEnv: NodeJS.ProcessEnv;
let offlineEnv: NodeJS.ProcessEnv;
let pem: string;
const runs: CliRun[] = [];

const p = (name: string) => join(dir, name);

async function cli(args: string[], o: { env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<CliRun> {
  const r = await runCli(args, {
    env: o.env ?? onlineEnv,
    ...(o.input !== undefined ? { input: o.input } : {}),
  });
  runs.push(r);
  return r;
}

const _until: AirGapEnv['until'] = (f, what, ms) => ag.until(f, what, ms);
const withdrawalIn = (id: string, states: string[]) => ag.withdrawalIn(id, states);
const coldParty = (hint: string, scheme: KeyScheme): Promise<PartyRecord> => ag.coldParty(hint, { scheme });

/** A withdrawal of `party` parked in awaiting_signature. */
async function parkedWithdrawal(party: PartyRecord): Promise<string> {
  const id = await ag.createWithdrawal(party.partyId);
  expect((await withdrawalIn(id, ['awaiting_signature', 'failed', 'rejected'])).state).toBe(
    'awaiting_signature',
  );
  return id;
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const expectRefused = (r: CliRun, code: string) => {
  expect(r.status, r.stderr).toBe(1);
  expect(r.stderr).toContain(`refused (${code})`);
};

beforeAll(async () => {
  buildDist(['cli/air-gap.js', 'cli/main.js', 'cli/offline.js', 'offline/format.js']);
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-cli-online-'));
  ag = await airGapEnv({ seed: 'cli-online' });
  env = ag.env;
  url = await env.service.listen({ port: 0, host: '127.0.0.1' });
  token = await mintToken(['operator']);
  operator = { authorization: `Bearer ${token}` };
  onlineEnv = cliEnv({ CANTON_SIGNER_URL: url, CANTON_SIGNER_TOKEN: token });
  delete onlineEnv.CANTON_SIGNER_KEYSTORE;
  offlineEnv = cliEnv({ CANTON_SIGNER_KEYSTORE: ag.coldDir, CANTON_SIGNER_PASSPHRASE: ag.coldPassphrase });
  delete offlineEnv.CANTON_SIGNER_TOKEN;
  delete offlineEnv.CANTON_SIGNER_URL;
  pem = p('export.pem');
}, 180_000);

afterAll(async () => {
  await ag?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('export-key', () => {
  it('writes the PEM the offline machine trusts and prints its fingerprint; never overwrites', async () => {
    const served = (
      await env.service.app.inject({ method: 'GET', url: '/v1/air-gap/export-key', headers: operator })
    ).json() as { fingerprint: string; pem: string };
    const r = await cli(['export-key', '--out', pem]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain(served.fingerprint);
    expect(readFileSync(pem, 'utf8')).toBe(served.pem);
    expect(readFileSync(pem, 'utf8')).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
    writeFileSync(p('other.pem'), 'keep me');
    const again = await cli(['export-key', '--out', p('other.pem')]);
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(/already exists/);
    expect(readFileSync(p('other.pem'), 'utf8')).toBe('keep me');
    const forced = await cli(['export-key', '--out', p('other.pem'), '--force']);
    expect(forced.status, forced.stderr).toBe(0);
    expect(readFileSync(p('other.pem'), 'utf8')).toBe(served.pem);
    // stdout when there is no --out
    const out = await cli(['export-key']);
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toBe(served.pem);
    // --create is an admin's: refused with the operator's token; with an admin's, the existing key
    expectRefused(await cli(['export-key', '--create']), 'forbidden');
    const admin = cliEnv({ CANTON_SIGNER_URL: url, CANTON_SIGNER_TOKEN: await mintToken(['admin']) });
    delete admin.CANTON_SIGNER_KEYSTORE;
    const created = await cli(['export-key', '--create'], { env: admin });
    expect(created.status, created.stderr).toBe(0);
    expect(created.stdout).toBe(served.pem);
  });
});

describe('a withdrawal carried across the air gap as files', () => {
  let party: PartyRecord;
  let id: string;
  let exportId: string;

  beforeAll(async () => {
    party = await coldParty('cold-file', 'ed25519');
    id = await parkedWithdrawal(party);
  }, 60_000);

  it('export → offline sign → refused imports → import → committed; a second import is a replay', async () => {
    const req = p('request.json');
    const ex = await cli(['export', '--withdrawal', id, '--out', req]);
    expect(ex.status, ex.stderr).toBe(0);
    const text = readFileSync(req, 'utf8');
    expect(text).toBe(`${JSON.stringify(JSON.parse(text), null, 2)}\n`); // pretty, 2 spaces
    expect(text).toMatch(/^\{\n {2}"/);
    const envelope = parseRequestEnvelope(text);
    expect(envelope.request.partyId).toBe(party.partyId);
    const current = await env.store.airGap.currentFor(id);
    exportId = current!.id;
    for (const s of [exportId, party.partyId, current!.windowLatest, ...current!.hashes])
      expect(ex.stderr).toContain(s);
    expect(ex.stdout).toBe('');
    // an existing --out is not overwritten, and nothing is asked of the service for it
    const kept = await cli(['export', '--withdrawal', id, '--out', req]);
    expect(kept.status).toBe(2);
    expect(readFileSync(req, 'utf8')).toBe(text);

    const resp = p('response.json');
    const signed = await cli(['offline', 'sign', req, '--trust', pem, '--yes', '--out', resp], {
      env: offlineEnv,
    });
    expect(signed.status, signed.stderr).toBe(0);
    const response = parseResponse(readFileSync(resp, 'utf8'));
    expect(response.hashes).toEqual(current!.hashes);

    // a malformed response: refused locally, naming the field; the service saw nothing
    writeFileSync(p('malformed.json'), JSON.stringify({ ...response, hashes: ['not-hex'] }));
    const bad = await cli(['import', p('malformed.json')]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('response.hashes.0');
    expect(bad.stderr).toMatch(/not sent/);
    const garbage = await cli(['import', '-'], { input: 'this is not json' });
    expect(garbage.status).toBe(2);
    expect(garbage.stderr).toMatch(/not JSON/);
    expect((await env.store.airGap.get(exportId))?.status).toBe('open');
    expect((await env.store.withdrawals.get(id))?.state).toBe('awaiting_signature');

    // no token: the service's 401 code
    const noToken = { ...onlineEnv };
    delete noToken.CANTON_SIGNER_TOKEN;
    expectRefused(await cli(['import', resp], { env: noToken }), 'missing_token');
    // a token with the wrong role: 403
    const auditor = await mintToken(['auditor']);
    const forbidden = await cli(['import', resp], { env: { ...onlineEnv, CANTON_SIGNER_TOKEN: auditor } });
    expect(forbidden.status).toBe(1);
    expect(forbidden.stderr).toMatch(/refused \(\w+\)/);
    expect(forbidden.stderr).not.toContain(auditor);

    // nothing listening at the URL: a connection error naming the URL, without its credentials
    const port = await closedPort();
    const down = await cli(['import', resp, '--url', `http://127.0.0.1:${port}`]);
    expect(down.status).toBe(1);
    expect(down.stderr).toContain(`cannot reach the service at http://127.0.0.1:${port}`);
    expect(down.stderr).toMatch(/ECONNREFUSED/);
    const creds = await cli(['import', resp, '--url', `http://user:hunter22@127.0.0.1:${port}`]);
    expect(creds.status).toBe(2);
    expect(creds.stderr).toContain(`http://127.0.0.1:${port}`);
    expect(creds.stderr).not.toContain('hunter22');

    // one hex digit of requestDigest changed: the service refuses it
    const tampered = readFileSync(resp, 'utf8').replace(
      `"requestDigest": "${response.requestDigest}"`,
      `"requestDigest": "${response.requestDigest.slice(0, -1)}${response.requestDigest.endsWith('0') ? '1' : '0'}"`,
    );
    expect(tampered).not.toBe(readFileSync(resp, 'utf8'));
    writeFileSync(p('tampered.json'), tampered);
    expectRefused(await cli(['import', p('tampered.json')]), 'digest_mismatch');
    expect((await env.store.withdrawals.get(id))?.state).toBe('awaiting_signature');

    // the genuine response
    const ok = await cli(['import', resp]);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`export ${exportId}`);
    expect(ok.stdout).toMatch(new RegExp(`withdrawal ${id} is \\w+`));
    const done = await withdrawalIn(id, ['committed', 'failed', 'rejected']);
    expect(done.state, done.lastError).toBe('committed');

    // accepted once
    expectRefused(await cli(['import', resp]), 'nonce_replayed');
    // the withdrawal awaits no signature any more
    expectRefused(
      await cli(['export', '--withdrawal', id, '--out', p('late.json')]),
      'not_awaiting_signature',
    );
    expect(existsSync(p('late.json'))).toBe(false);
  }, 120_000);

  it('export --export ID fetches an export by id (any status), with a note when it is not open', async () => {
    const r = await cli(['export', '--export', exportId]);
    expect(r.status, r.stderr).toBe(0);
    expect(parseRequestEnvelope(r.stdout).request.partyId).toBe(party.partyId);
    expect(r.stderr).toMatch(/is done: a response to it will not be accepted/);
    const unknown = await cli(['export', '--export', '00000000-0000-4000-8000-000000000000']);
    expectRefused(unknown, 'not_found');
    const both = await cli(['export', '--export', exportId, '--withdrawal', id]);
    expect(both.status).toBe(2);
    const neither = await cli(['export']);
    expect(neither.status).toBe(2);
  });
});

describe('a withdrawal carried as QR frames', () => {
  it('export --qr → offline sign --from-qr --qr → import --from-qr → committed', async () => {
    const party = await coldParty('cold-qr', 'ecdsa-p256');
    const id = await parkedWithdrawal(party);
    const qrReq = p('qr-request');
    const ex = await cli(['export', '--withdrawal', id, '--qr', qrReq]);
    expect(ex.status, ex.stderr).toBe(0);
    expect(ex.stderr).toMatch(/QR frame\(s\) in/);
    expect(readdirSync(qrReq).filter((f) => f.endsWith('.png')).length).toBeGreaterThan(0);
    expect(parseRequestEnvelope(ex.stdout).request.partyId).toBe(party.partyId);
    // frames already there: refused before anything is fetched or written
    const again = await cli(['export', '--withdrawal', id, '--qr', qrReq]);
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(/already holds QR frames/);

    const qrResp = p('qr-response');
    const signed = await cli(
      ['offline', 'sign', '--from-qr', qrReq, '--trust', pem, '--yes', '--qr', qrResp, '--out', p('qr.json')],
      { env: offlineEnv },
    );
    expect(signed.status, signed.stderr).toBe(0);
    const imp = await cli(['import', '--from-qr', qrResp, '--json']);
    expect(imp.status, imp.stderr).toBe(0);
    const body = JSON.parse(imp.stdout) as { export: { status: string }; withdrawal: { id: string } };
    expect(body.withdrawal.id).toBe(id);
    const done = await withdrawalIn(id, ['committed', 'failed', 'rejected']);
    expect(done.state, done.lastError).toBe('committed');
  }, 120_000);
});

describe('exports', () => {
  it('lists the exports as a table and as JSON, with filters', async () => {
    const all = (await env.store.airGap.list({ limit: 100 })).map((x) => x.id);
    expect(all.length).toBeGreaterThanOrEqual(2);
    const t = await cli(['exports']);
    expect(t.status, t.stderr).toBe(0);
    expect(t.stdout.split('\n')[0]).toMatch(/^ID\s+STATUS\s+PARTY\s+WITHDRAWAL\s+WINDOW LATEST$/);
    for (const x of all) expect(t.stdout).toContain(x);
    const j = await cli(['exports', '--json', '--status', 'done']);
    expect(j.status, j.stderr).toBe(0);
    const items = (JSON.parse(j.stdout) as { items: { id: string; status: string }[] }).items;
    expect(items.length).toBe(2);
    expect(items.every((x) => x.status === 'done')).toBe(true);
    const none = await cli(['exports', '--status', 'open']);
    expect(none.status, none.stderr).toBe(0);
    expect(none.stdout).toBe('no exports\n');
    expect((await cli(['exports', '--status', 'nope'])).status).toBe(2);
  });

  it('--help tells to prefer the token variable', async () => {
    const h = await cli(['import', '--help']);
    expect(h.status).toBe(0);
    expect(h.stdout).toContain('CANTON_SIGNER_TOKEN');
    expect(h.stdout).toMatch(/process\s+lists/);
  });
});

describe('the token', () => {
  it('never appears in any output, also when given with --token', async () => {
    const viaFlag = await cli(
      ['exports', '--token', token, '--url', `http://127.0.0.1:${await closedPort()}`],
      {
        env: cliEnv(),
      },
    );
    expect(viaFlag.status).toBe(1);
    const listed = await cli(['exports', '--token', token, '--url', url], { env: cliEnv() });
    expect(listed.status, listed.stderr).toBe(0);
    expect(runs.length).toBeGreaterThan(20);
    for (const r of runs) {
      expect(r.stdout).not.toContain(token);
      expect(r.stderr).not.toContain(token);
    }
  });
});

/**
 * `canton-signer sandbox` as a user runs it: the compiled command starts the
 * network on a free port, prints its endpoints as one JSON line, serves the
 * Ledger API, the validator, Scan and the controls there, and exits 0 on
 * SIGTERM. Bad options exit 2 with a message naming the option.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { SignJWT } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN } from '../support/cli.js';

const children: ChildProcess[] = [];

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const i = out.indexOf('\n');
      if (i >= 0) resolve(out.slice(0, i));
    });
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.on('exit', (code) => reject(new Error(`exited ${code} before printing: ${err}`)));
  });
}

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

describe('canton-signer sandbox', () => {
  it('starts, serves every service on one port, and stops cleanly on SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      [
        BIN,
        'sandbox',
        '--port',
        '0',
        '--json',
        '--seed',
        'cli-test',
        '--name-lifetime',
        '10m',
        '--name-renewal-window',
        '5m',
        '--name-fee',
        '2.5',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    const info = JSON.parse(await firstLine(child)) as Record<string, string>;
    // the name service's terms as given
    const rules = (await (
      await fetch(`${info.scan}/v0/ans-rules`, {
        method: 'POST',
        body: '{}',
        headers: { 'content-type': 'application/json' },
      })
    ).json()) as { ans_rules_update: { contract: { payload: { config: Record<string, unknown> } } } };
    expect(rules.ans_rules_update.contract.payload.config).toMatchObject({
      entryLifetime: { microseconds: '600000000' },
      renewalDuration: { microseconds: '300000000' },
      entryFee: '2.5000000000',
    });
    expect(info.ledgerApi).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(info.validator).toBe(`${info.ledgerApi}/api/validator`);
    expect(info.scan).toBe(`${info.ledgerApi}/api/scan`);
    expect(info.oidcDiscovery).toBe(`${info.ledgerApi}/.well-known/openid-configuration`);
    expect(info.dsoParty).toMatch(/^DSO::1220[0-9a-f]{64}$/);

    const end = (await (await fetch(`${info.ledgerApi}/v2/state/ledger-end`)).json()) as { offset: number };
    expect(end.offset).toBeGreaterThan(0);
    const dso = (await (await fetch(`${info.scan}/v0/dso-party-id`)).json()) as { dso_party_id: string };
    expect(dso.dso_party_id).toBe(info.dsoParty);
    const users = await fetch(`${info.validator}/v0/admin/users`);
    expect(users.status).toBe(200);
    const sandboxInfo = (await (await fetch(`${info.controls}/info`)).json()) as {
      validatorParty: string;
      participantId: string;
    };
    expect(sandboxInfo.validatorParty).toBe(info.validatorParty);
    // The participant id in the form the Ledger API gives it (no `PAR::`), the same everywhere.
    const participant = (await (await fetch(`${info.ledgerApi}/v2/parties/participant-id`)).json()) as {
      participantId: string;
    };
    expect(info.participantId).toMatch(/^sandbox-participant-1::1220[0-9a-f]{64}$/);
    expect(sandboxInfo.participantId).toBe(info.participantId);
    expect(participant.participantId).toBe(info.participantId);

    // The same seed gives the same identities.
    const again = spawn(process.execPath, [BIN, 'sandbox', '--port', '0', '--json', '--seed', 'cli-test'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(again);
    const info2 = JSON.parse(await firstLine(again)) as Record<string, string>;
    expect(info2.dsoParty).toBe(info.dsoParty);
    expect(info2.ledgerApi).not.toBe(info.ledgerApi);

    for (const c of [child, again]) {
      const exited = new Promise<number | null>((r) => c.on('exit', (code) => r(code)));
      c.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });

  it('with --require-auth, --token and --unsafe-hmac-secret: no token is 401, the tokens work, and neither they nor the secret are printed', async () => {
    const child = spawn(
      process.execPath,
      [
        BIN,
        'sandbox',
        '--port',
        '0',
        '--json',
        '--require-auth',
        '--token',
        'tok-9f8e7d=sandbox-user',
        '--unsafe-hmac-secret',
        'hmac-5e6f7a',
        '--audience',
        'https://ledger.test.example',
        '--log',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let all = '';
    child.stdout!.on('data', (d: Buffer) => {
      all += d.toString();
    });
    child.stderr!.on('data', (d: Buffer) => {
      all += d.toString();
    });
    const info = JSON.parse(await firstLine(child)) as Record<string, string>;
    expect((await fetch(`${info.ledgerApi}/v2/state/ledger-end`)).status).toBe(401);
    const ok = await fetch(`${info.ledgerApi}/v2/state/ledger-end`, {
      headers: { authorization: 'Bearer tok-9f8e7d' },
    });
    expect(ok.status).toBe(200);
    // A client that puts its token or secret in the query (RFC 6750's access_token) is refused,
    // and the logged URL keeps the parameter's name but not its value.
    const inQuery = await fetch(`${info.ledgerApi}/v2/state/ledger-end?access_token=tok-9f8e7d`);
    expect(inQuery.status).toBe(401);
    await fetch(`${info.oauthToken}?client_secret=hmac-5e6f7a`, { method: 'POST' });
    // The discovery document names the token endpoint; an HS256 token over the secret for the
    // configured audience is accepted, one for the default audience is not.
    expect(info.audience).toBe('https://ledger.test.example');
    const discovery = (await (await fetch(info.oidcDiscovery!)).json()) as Record<string, string>;
    expect(discovery.token_endpoint).toBe(info.oauthToken);
    const hs256 = (aud: string) =>
      new SignJWT({ sub: 'sandbox-user', aud, exp: Math.floor(Date.now() / 1000) + 60 })
        .setProtectedHeader({ alg: 'HS256' })
        .sign(new TextEncoder().encode('hmac-5e6f7a'));
    for (const [aud, status] of [
      ['https://ledger.test.example', 200],
      ['https://canton.network.global', 401],
    ] as const) {
      const r = await fetch(`${info.ledgerApi}/v2/authenticated-user`, {
        headers: { authorization: `Bearer ${await hs256(aud)}` },
      });
      expect(r.status, aud).toBe(status);
    }
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(all).toContain('/v2/state/ledger-end'); // --log logged the requests …
    expect(all).toContain('access_token=***');
    expect(all).not.toContain('tok-9f8e7d'); // … never the token
    expect(all).not.toContain('hmac-5e6f7a'); // … nor the secret
  });

  it.each([
    [['--port', '70000'], '--port'],
    [['--round-interval', '0'], '--round-interval'],
    [['--token', 'no-user'], '--token'],
    [['--client', 'a:b'], '--client'],
    [['--audience', ''], '--audience'],
    [['--name-lifetime', '10 minutes'], '--name-lifetime'],
    [['--name-fee', '0'], '--name-fee'],
  ])('bad option %j exits 2 naming %s', (args, name) => {
    const r = spawnSync(process.execPath, [BIN, 'sandbox', ...args], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(name);
    expect(r.stdout).toBe('');
  });
});

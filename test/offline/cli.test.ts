/**
 * `canton-signer offline verify|sign` as the operator of the air-gapped
 * machine runs it: the built bin, a keystore holding the party's key, a
 * request prepared by the sandbox participant and sealed by the online
 * service's export key (another keystore). Checks the summary, the
 * confirmation rule (no terminal and no --yes: refused, nothing written),
 * the response file (parses, verifies, never overwritten), refusals and their
 * exit codes, QR frames in and out; and that signing opens no socket: every
 * way to the network is replaced by a recorder in a preload (itself shown to
 * record), the command runs inside a network namespace with no network, and
 * its module graph contains no network client, server or database driver.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerApiClient } from '../../src/canton/ledger-api/client.js';
import { ValidatorClient } from '../../src/canton/validator/client.js';
import { base64ToBytes } from '../../src/hashing/input.js';
import { verifySignature } from '../../src/keys/schemes.js';
import type { Signer } from '../../src/keys/signer.js';
import {
  type AirGapRequestEnvelope,
  type PreparedAirGapRequest,
  parseResponse,
} from '../../src/offline/format.js';
import { ANSI_HOME_CLEAR, readQrPngs, renderTerminalFrames, writeQrPngs } from '../../src/offline/qr.js';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/server.js';
import type { PartyRecord } from '../../src/store/parties.js';
import {
  BIN,
  buildDist,
  type CliKeystore,
  type CliRun,
  cliEnv,
  cliKeystore,
  ROOT,
  runCli,
} from '../support/cli.js';
import {
  copy,
  NETWORK_CONTROL_SCRIPT,
  NO_NETWORK_PRELOAD,
  preparedRequest,
  seal,
  validatorTopologyRequest,
} from '../support/offline-env.js';
import { testSigner } from '../support/test-signer.js';

const PASS = 'offline cli passphrase';
let sb: RunningSandbox;
let ks: CliKeystore;
let online: Signer;
let dir: string;
let alice: PartyRecord;
let bob: PartyRecord;
let request: PreparedAirGapRequest;
let envelope: AirGapRequestEnvelope;
let requestFile: string;
let trustPem: string;
let trustB64: string;
let env: NodeJS.ProcessEnv;

const p = (name: string) => join(dir, name);
const offline = (args: string[], o: { input?: string; env?: NodeJS.ProcessEnv } = {}) =>
  runCli(['offline', ...args], { env: o.env ?? env, ...(o.input !== undefined ? { input: o.input } : {}) });

function expectSignedResponse(text: string, party: PartyRecord, hash: string) {
  const r = parseResponse(text);
  expect(r.hashes).toEqual([hash]);
  expect(r.partyId).toBe(party.partyId);
  expect(r.requestDigest).toBe(envelope.digest);
  expect(r.nonce).toBe(request.nonce);
  expect(
    verifySignature(
      party.scheme,
      base64ToBytes(party.publicKeySpki),
      Buffer.from(hash, 'hex'),
      base64ToBytes(r.signatures[0]!.signature),
    ),
  ).toBe(true);
}

beforeAll(async () => {
  buildDist(['cli/offline.js', 'offline/review.js', 'offline/format.js']);
  dir = await mkdtemp(join(tmpdir(), 'canton-signer-offline-cli-'));
  sb = await startSandbox({ seed: 'offline-cli', timers: false });
  ks = await cliKeystore(sb, 'offline', PASS);
  alice = await ks.addParty('alice');
  bob = await ks.addParty('bob', { scheme: 'ecdsa-p256' });
  // The online service's export key lives in another keystore (the online machine).
  online = testSigner(p('online-keystore'), 'online passphrase');
  const exportKey = await online.generate({ label: 'export', scheme: 'ecdsa-p256', backend: 'file' });
  trustPem = p('export.pem');
  writeFileSync(
    trustPem,
    createPublicKey({ key: Buffer.from(exportKey.publicKeySpki), format: 'der', type: 'spki' }).export({
      type: 'spki',
      format: 'pem',
    }),
  );
  trustB64 = p('export.b64');
  writeFileSync(trustB64, `${Buffer.from(exportKey.publicKeySpki).toString('base64')}\n`);
  const ledger = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { attempts: 1 } });
  request = await preparedRequest(ledger, sb.ctx.net, alice);
  envelope = await seal(request, online, 'export');
  requestFile = p('request.json');
  writeFileSync(requestFile, JSON.stringify(envelope, null, 2));
  env = cliEnv({ CANTON_SIGNER_KEYSTORE: ks.dir, CANTON_SIGNER_PASSPHRASE: PASS });
}, 180_000);

afterAll(async () => {
  await online?.close();
  await ks?.close();
  await sb?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const expectRefused = (r: CliRun, code: string) => {
  expect(r.status, r.stderr).toBe(1);
  expect(r.stderr).toContain(`refused (${code})`);
};

describe('offline verify', () => {
  it('prints the checked summary and signs nothing; --json gives the facts', async () => {
    const r = await offline(['verify', requestFile, '--trust', trustPem]);
    expect(r.status, r.stderr).toBe(0);
    for (const s of [
      'AIR-GAP SIGNING REQUEST',
      alice.partyId,
      alice.fingerprint,
      request.claimedHash,
      request.commandId,
      request.window.latest,
      envelope.exportKey.fingerprint,
      'Prepared transaction: Daml-LF',
      'nothing was signed',
    ])
      expect(r.stdout).toContain(s);
    const j = await offline(['verify', requestFile, '--json'], {
      env: { ...env, CANTON_SIGNER_TRUSTED_EXPORT_KEYS: trustB64 },
    });
    expect(j.status, j.stderr).toBe(0);
    const doc = JSON.parse(j.stdout);
    expect(doc.hashes).toEqual([request.claimedHash]);
    expect(doc.commandId).toBe(request.commandId);
    expect(doc.exporter).toBe(envelope.exportKey.fingerprint);
  });

  it('without a trusted export key it is a usage error (2); a request changed in transit is refused (1)', async () => {
    const none = await offline(['verify', requestFile]);
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/--trust/);
    const t = copy(envelope);
    (t.request as PreparedAirGapRequest).intent = {
      ...request.intent,
      provider: sb.ctx.net.mallory,
    } as never;
    writeFileSync(p('tampered.json'), JSON.stringify(t));
    expectRefused(
      await offline(['verify', p('tampered.json'), '--trust', trustPem]),
      'export_signature_invalid',
    );
    const garbage = await offline(['verify', '-', '--trust', trustPem], { input: '{"request": 1}' });
    expectRefused(garbage, 'malformed');
  });

  it('--min-window: a window shorter than it is refused; --help states the 5 minute default', async () => {
    expectRefused(
      await offline(['verify', requestFile, '--trust', trustPem, '--min-window', '25h']),
      'window_too_short',
    );
    expect((await offline(['verify', requestFile, '--trust', trustPem, '--min-window', 'soon'])).status).toBe(
      2,
    );
    const help = await offline(['sign', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/default: 5m/);
  });
});

describe('offline sign', () => {
  it('without a terminal and without --yes: refused, nothing written', async () => {
    const out = p('no-tty.json');
    const r = await offline(['sign', requestFile, '--trust', trustPem, '--out', out]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/not signed: no terminal/);
    expect(r.stderr).toContain(alice.partyId); // the summary was shown
    expect(existsSync(out)).toBe(false);
    expect(readdirSync(dir).filter((f) => f.includes('no-tty'))).toEqual([]);
  });

  it('on a terminal: the summary, then "sign" signs and anything else refuses (script(1) gives it a terminal)', async () => {
    const onTty = (out: string, answer: string): Promise<CliRun> =>
      new Promise((res, rej) => {
        const q = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
        const cmd = [process.execPath, BIN, 'offline', 'sign', requestFile, '--trust', trustPem, '--out', out]
          .map(q)
          .join(' ');
        const child = spawn('script', ['-qec', cmd, '/dev/null'], {
          cwd: ROOT,
          env,
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let stdout = '';
        child.stdout.on('data', (c: Buffer) => {
          stdout += c.toString();
        });
        child.on('error', rej);
        child.on('close', (status, signal) => res({ status, signal, stdout, stderr: '' }));
        child.stdin.end(`${answer}\n`);
      });
    const yes = await onTty(p('tty-yes.json'), 'sign');
    expect(yes.status, yes.stdout).toBe(0);
    expect(yes.stdout).toContain('Type "sign" to sign this hash');
    expect(yes.stdout).toContain(request.claimedHash);
    expectSignedResponse(readFileSync(p('tty-yes.json'), 'utf8'), alice, request.claimedHash);
    const no = await onTty(p('tty-no.json'), 'yes');
    expect(no.status).toBe(1);
    expect(no.stdout).toMatch(/not signed: the operator did not confirm/);
    expect(existsSync(p('tty-no.json'))).toBe(false);
  });

  it('--yes writes a response that parses and verifies; an existing --out is never overwritten (unless --force)', async () => {
    const out = p('response.json');
    const r = await offline(['sign', requestFile, '--trust', trustPem, '--out', out, '--yes']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/signed 1 hash for .*response written to/);
    const first = readFileSync(out, 'utf8');
    expectSignedResponse(first, alice, request.claimedHash);
    const again = await offline(['sign', requestFile, '--trust', trustPem, '--out', out, '--yes']);
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(/already exists/);
    expect(readFileSync(out, 'utf8')).toBe(first);
    const forced = await offline([
      'sign',
      requestFile,
      '--trust',
      trustPem,
      '--out',
      out,
      '--yes',
      '--force',
    ]);
    expect(forced.status, forced.stderr).toBe(0);
    expectSignedResponse(readFileSync(out, 'utf8'), alice, request.claimedHash);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('REQUEST "-" reads stdin; without --out the response is the only thing on stdout', async () => {
    const r = await offline(['sign', '-', '--trust', trustPem, '--yes'], {
      input: readFileSync(requestFile, 'utf8'),
    });
    expect(r.status, r.stderr).toBe(0);
    expectSignedResponse(r.stdout, alice, request.claimedHash);
  });

  it('--key naming another key, a keystore without the key, an expired window: refused, nothing written', async () => {
    const out = p('refused.json');
    expectRefused(
      await offline(['sign', requestFile, '--trust', trustPem, '--out', out, '--yes', '--key', bob.keyLabel]),
      'key_mismatch',
    );
    const empty = await offline(['sign', requestFile, '--trust', trustPem, '--out', out, '--yes'], {
      env: { ...env, CANTON_SIGNER_KEYSTORE: p('empty-keystore') },
    });
    expectRefused(empty, 'key_mismatch');
    expect(empty.stderr).toContain(alice.fingerprint);
    const expired = copy(request);
    expired.window = { ...expired.window, latest: '2020-01-01T00:00:00Z' };
    writeFileSync(p('expired.json'), JSON.stringify(await seal(expired, online, 'export')));
    // the stated window is checked against the transaction's before anything else about time
    const r = await offline(['sign', p('expired.json'), '--trust', trustPem, '--out', out, '--yes']);
    expectRefused(r, 'malformed');
    expect(r.stderr).toMatch(/window/);
    expect(existsSync(out)).toBe(false);
  });

  it('topology: a validator onboarding request is signed (one signature per transaction); an expired one is refused', async () => {
    const keys = testSigner(ks.dir, PASS);
    let key: Awaited<ReturnType<Signer['generate']>>;
    try {
      key = await keys.generate({ label: 'onboard', scheme: 'ed25519', backend: 'file' });
    } finally {
      await keys.close();
    }
    const validator = new ValidatorClient({ baseUrl: sb.urls.validator, retry: { attempts: 1 } });
    const ledger = new LedgerApiClient({ baseUrl: sb.urls.ledgerApi, retry: { attempts: 1 } });
    const req = await validatorTopologyRequest(validator, ledger, sb.ctx.net, key, 'offcli');
    writeFileSync(p('topology.json'), JSON.stringify(await seal(req, online, 'export')));
    const out = p('topology-response.json');
    const r = await offline(['sign', p('topology.json'), '--trust', trustPem, '--out', out, '--yes']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('PartyToParticipant');
    const resp = parseResponse(readFileSync(out, 'utf8'));
    expect(resp.hashes).toEqual(req.claimedHashes);
    resp.hashes.forEach((h, i) => {
      expect(
        verifySignature(
          'ed25519',
          key.publicKeySpki,
          Buffer.from(h, 'hex'),
          base64ToBytes(resp.signatures[i]!.signature),
        ),
      ).toBe(true);
    });
    const expired = {
      ...copy(req),
      window: { latest: new Date(Date.now() - 1000).toISOString(), latestSource: 'test' },
    };
    writeFileSync(p('topology-expired.json'), JSON.stringify(await seal(expired, online, 'export')));
    const e = await offline([
      'sign',
      p('topology-expired.json'),
      '--trust',
      trustPem,
      '--out',
      p('t2.json'),
      '--yes',
    ]);
    expectRefused(e, 'window_closed');
    expect(existsSync(p('t2.json'))).toBe(false);
  });

  it('QR: the request read from a folder of frame PNGs, the response written as frames too', async () => {
    const qrIn = p('qr-request');
    await writeQrPngs(readFileSync(requestFile, 'utf8'), qrIn);
    const qrOut = p('qr-response');
    const out = p('qr-response.json');
    const r = await offline([
      'sign',
      '--from-qr',
      qrIn,
      '--trust',
      trustPem,
      '--out',
      out,
      '--qr',
      qrOut,
      '--yes',
    ]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/QR frame/);
    const text = readFileSync(out, 'utf8');
    expectSignedResponse(text, alice, request.claimedHash);
    expect(await readQrPngs(qrOut)).toBe(text);
    // frames already in the --qr folder: refused before anything is signed or written
    const again = await offline([
      'sign',
      requestFile,
      '--trust',
      trustPem,
      '--out',
      p('qr-2.json'),
      '--qr',
      qrOut,
      '--yes',
    ]);
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(/already holds QR frames/);
    expect(existsSync(p('qr-2.json'))).toBe(false);
    // a folder given as REQUEST works the same
    const v = await offline(['verify', qrIn, '--trust', trustPem]);
    expect(v.status, v.stderr).toBe(0);
  });

  it('--qr-show cycles the response frames on the terminal; --qr-html writes a page that shows them', async () => {
    const out = p('shown.json');
    const html = p('shown.html');
    const r = await offline([
      'sign',
      requestFile,
      '--trust',
      trustPem,
      '--out',
      out,
      '--qr-html',
      html,
      '--qr-show',
      '--qr-loops',
      '2',
      '--qr-interval',
      '1',
      '--yes',
    ]);
    expect(r.status, r.stderr).toBe(0);
    const text = readFileSync(out, 'utf8');
    const frames = renderTerminalFrames(text);
    expect(frames.length).toBeGreaterThan(1);
    // every frame, twice, each after a clear screen, in order
    const shown = r.stderr.split(ANSI_HOME_CLEAR).slice(1);
    expect(shown).toHaveLength(2 * frames.length);
    expect(shown[0]).toContain(frames[0]!);
    expect(shown[frames.length]).toContain(frames[0]!);
    expect(r.stdout).toContain(`${frames.length} QR frame(s) shown`);
    const page = readFileSync(html, 'utf8');
    expect(page).toMatch(/<svg/);
    expect(page.match(/<svg/g)?.length).toBeGreaterThanOrEqual(2);
    // an existing page is not overwritten
    const again = await offline([
      'sign',
      requestFile,
      '--trust',
      trustPem,
      '--out',
      p('shown-2.json'),
      '--qr-html',
      html,
      '--yes',
    ]);
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(/--qr-html/);
    expect(existsSync(p('shown-2.json'))).toBe(false);
  });
});

describe('offline errors a person understands', () => {
  it('offline sign without a passphrase: one line before any summary, nothing written', async () => {
    const out = p('no-passphrase.json');
    const r = await offline(['sign', requestFile, '--trust', trustPem, '--out', out, '--yes'], {
      env: { ...env, CANTON_SIGNER_PASSPHRASE: '' },
    });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'canton-signer: no_passphrase: no keystore passphrase: set CANTON_SIGNER_PASSPHRASE or CANTON_SIGNER_PASSPHRASE_FILE, or run on a terminal\n',
    );
    expect(existsSync(out)).toBe(false);
  });

  it('a response given to offline verify (and a request given to import) is named for what it is', async () => {
    const response = p('for-verify-response.json');
    const signed = await offline(['sign', requestFile, '--trust', trustPem, '--out', response, '--yes']);
    expect(signed.status, signed.stderr).toBe(0);
    const r = await offline(['verify', response, '--trust', trustPem]);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      "canton-signer: refused (malformed): this is an air-gap response (the offline signer's answer), not a request: take it to the online machine and give it to `canton-signer import`; `offline verify` and `offline sign` read the request that `canton-signer export` wrote\n",
    );
    const back = await runCli(['import', requestFile, '--url', 'http://127.0.0.1:9'], { env });
    expect(back.status).toBe(2);
    expect(back.stderr).toContain(
      'this is an air-gap request (what `canton-signer export` wrote), not a response: sign it on the offline machine with `canton-signer offline sign`, then import the response it writes',
    );
  });
});

describe('no network on the offline side', () => {
  let preload: string;
  beforeAll(() => {
    preload = p('no-network.mjs');
    writeFileSync(preload, NO_NETWORK_PRELOAD);
  });

  function node(args: string[], log: string, opts: { prefix?: string[] } = {}): Promise<CliRun> {
    return new Promise((res, rej) => {
      const cmd = opts.prefix ? opts.prefix[0]! : process.execPath;
      const argv = opts.prefix ? [...opts.prefix.slice(1), process.execPath, ...args] : args;
      const child = spawn(cmd, argv, {
        cwd: ROOT,
        env: { ...env, OFFLINE_NET_LOG: log },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString();
      });
      child.stderr.on('data', (c: Buffer) => {
        stderr += c.toString();
      });
      child.on('error', rej);
      child.on('close', (status, signal) => res({ status, signal, stdout, stderr }));
      child.stdin.end('');
    });
  }
  const recorded = (log: string): string[] =>
    existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];

  it('the preload records every attempt to reach the network (control)', async () => {
    const log = p('control.log');
    const r = await node(
      ['--import', pathToFileURL(preload).href, '--input-type=module', '-e', NETWORK_CONTROL_SCRIPT],
      log,
    );
    expect(r.status, r.stderr).toBe(0);
    const what = recorded(log).map((l) => JSON.parse(l).what);
    for (const w of ['net.connect', 'net.Socket.connect', 'dns.lookup', 'http.get', 'fetch'])
      expect(what).toContain(w);
    expect(what.length).toBeGreaterThanOrEqual(6);
  });

  it('offline sign succeeds with every socket API replaced by a recorder, and records nothing', async () => {
    const log = p('sign.log');
    const out = p('no-network-response.json');
    const r = await node(
      [
        '--import',
        pathToFileURL(preload).href,
        BIN,
        'offline',
        'sign',
        requestFile,
        '--trust',
        trustPem,
        '--out',
        out,
        '--yes',
      ],
      log,
    );
    expect(r.status, r.stderr).toBe(0);
    expectSignedResponse(readFileSync(out, 'utf8'), alice, request.claimedHash);
    expect(recorded(log)).toEqual([]);
  });

  it('offline sign succeeds inside a network namespace with no network (unshare -rn)', async () => {
    expect(spawnSync('unshare', ['-rn', 'true']).status, 'unshare -rn is not available here').toBe(0);
    const out = p('netns-response.json');
    const r = await node(
      [BIN, 'offline', 'sign', requestFile, '--trust', trustPem, '--out', out, '--yes'],
      p('netns.log'),
      {
        prefix: ['unshare', '-rn'],
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expectSignedResponse(readFileSync(out, 'utf8'), alice, request.claimedHash);
    // control: inside the namespace the sandbox is unreachable
    const c = spawnSync('unshare', [
      '-rn',
      process.execPath,
      '-e',
      `fetch(${JSON.stringify(sb.urls.ledgerApi)}).then(() => process.exit(0), () => process.exit(3))`,
    ]);
    expect(c.status).toBe(3);
  });

  it("the offline commands' module graph holds no network client, server or database driver", () => {
    const seen = new Set<string>();
    const packages = new Set<string>();
    const walk = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(
        /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g,
      )) {
        const spec = m[1] ?? m[2]!;
        if (spec.startsWith('.')) walk(resolve(dirname(file), spec));
        else if (!spec.startsWith('node:'))
          packages.add(
            spec
              .split('/')
              .slice(0, spec.startsWith('@') ? 2 : 1)
              .join('/'),
          );
      }
    };
    walk(join(ROOT, 'dist', 'cli', 'offline.js'));
    const files = [...seen].map((f) => f.slice(join(ROOT, 'dist').length + 1));
    expect(files).toContain('offline/review.js');
    expect(files).toContain('flows/pipeline.js');
    const network = files.filter(
      (f) =>
        (f.startsWith('canton/') && f !== 'canton/errors.js' && !f.startsWith('canton/topology/')) ||
        f.startsWith('server/') ||
        f.startsWith('store/repos') ||
        f === 'store/db.js' ||
        f.startsWith('sandbox/') ||
        /^cli\/(?!offline|input|options|system-errors)/.test(f),
    );
    expect(network).toEqual([]);
    for (const pkg of ['fastify', 'pg', '@electric-sql/pglite', 'undici', 'pino', 'prom-client'])
      expect([...packages]).not.toContain(pkg);
  });
});

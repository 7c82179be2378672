/**
 * Cold keys on the command line, as two operators use it: on the offline
 * machine `keys create` then `keys export-public` (PEM, or --json with the
 * base64 SPKI and fingerprint); on the online machine `keys import-public`
 * with that PEM file, the base64 SPKI or the raw key in hex — no passphrase
 * needed — after which `show`/`list` give the same fingerprint and `sign`
 * says the signature must come through the air gap. The built bin, two
 * temporary keystores.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = new URL('../../bin/canton-signer.js', import.meta.url).pathname;
const PASSPHRASE = 'cold machine passphrase';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let dir: string;
let coldKeystore: string;
let onlineKeystore: string;

function cli(args: string[], keystore: string, passphrase = ''): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      {
        env: {
          PATH: process.env.PATH ?? '',
          CANTON_SIGNER_KEYSTORE: keystore,
          CANTON_SIGNER_PASSPHRASE: passphrase,
        },
        timeout: 60_000,
      },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: number }).code ?? 1) : 0;
        resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}
const coldCli = (args: string[]) => cli(args, coldKeystore, PASSPHRASE);
/** The online side never has the cold keys' passphrase, and import-public needs none. */
const onlineCli = (args: string[]) => cli(args, onlineKeystore);

interface ColdKey {
  label: string;
  scheme: string;
  publicKeySpki: string;
  publicKeyRaw: string;
  fingerprint: string;
}
const coldKeys = new Map<string, ColdKey>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cs-cli-offline-'));
  coldKeystore = join(dir, 'cold');
  onlineKeystore = join(dir, 'online');
  for (const scheme of ['ed25519', 'ecdsa-p256']) {
    const r = await coldCli(['keys', 'create', '--label', `c-${scheme}`, '--scheme', scheme, '--json']);
    expect(r.code, r.stderr).toBe(0);
    coldKeys.set(scheme, JSON.parse(r.stdout));
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('cold side: export-public', () => {
  it('--json prints the base64 SPKI and the fingerprint (what show --json prints too), without the passphrase', async () => {
    const c = coldKeys.get('ed25519')!;
    const r = await cli(['keys', 'export-public', c.label, '--json'], coldKeystore);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      label: c.label,
      scheme: 'ed25519',
      publicKeySpki: c.publicKeySpki,
      publicKeyRaw: c.publicKeyRaw,
      fingerprint: c.fingerprint,
    });
  });
});

describe('online side: import-public', () => {
  it('from the PEM file export-public wrote: same fingerprint, backend offline, no passphrase asked', async () => {
    const c = coldKeys.get('ecdsa-p256')!;
    const pem = await coldCli(['keys', 'export-public', c.label]);
    expect(pem.stdout).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
    const file = join(dir, 'cold-p256.pem');
    writeFileSync(file, pem.stdout);
    const r = await onlineCli([
      'keys',
      'import-public',
      'cold-p256',
      '--scheme',
      'ecdsa-p256',
      '--public-key',
      file,
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      label: 'cold-p256',
      backend: 'offline',
      scheme: 'ecdsa-p256',
      publicKeySpki: c.publicKeySpki,
      fingerprint: c.fingerprint,
      disabled: false,
    });
    const show = JSON.parse((await onlineCli(['keys', 'show', 'cold-p256', '--json'])).stdout);
    expect(show.fingerprint).toBe(c.fingerprint);
    expect(readdirSync(join(onlineKeystore, 'offline'))).toEqual(['cold-p256.public.json']);
  });

  it('from base64 SPKI and from the raw key in hex (Ed25519 32 bytes, EC 65-byte point)', async () => {
    const ed = coldKeys.get('ed25519')!;
    const p256 = coldKeys.get('ecdsa-p256')!;
    const b64 = await onlineCli([
      'keys',
      'import-public',
      'cold-ed-b64',
      '--scheme',
      'ed25519',
      '--public-key',
      ed.publicKeySpki,
      '--json',
    ]);
    expect(b64.code, b64.stderr).toBe(0);
    expect(JSON.parse(b64.stdout).fingerprint).toBe(ed.fingerprint);
    expect(ed.publicKeyRaw).toMatch(/^[0-9a-f]{64}$/);
    const hex = await onlineCli([
      'keys',
      'import-public',
      'cold-ed-hex',
      '--scheme',
      'ed25519',
      '--public-key',
      ed.publicKeyRaw,
      '--json',
    ]);
    expect(hex.code, hex.stderr).toBe(0);
    expect(JSON.parse(hex.stdout).fingerprint).toBe(ed.fingerprint);
    expect(p256.publicKeyRaw).toMatch(/^04[0-9a-f]{128}$/);
    const point = await onlineCli([
      'keys',
      'import-public',
      'cold-p256-hex',
      '--scheme',
      'ecdsa-p256',
      '--public-key',
      p256.publicKeyRaw,
    ]);
    expect(point.code, point.stderr).toBe(0);
    expect(point.stdout).toContain(`fingerprint:  ${p256.fingerprint}`);
    expect(point.stdout).toContain('backend:      offline');
    const list = await onlineCli(['keys', 'list']);
    expect(list.stdout).toContain(`cold-ed-hex\toffline\ted25519\t${ed.fingerprint}`);
  });

  it('sign with a cold key: exit 1, awaiting_offline_signature, pointing at the air gap', async () => {
    const r = await onlineCli(['keys', 'sign', 'cold-ed-b64', '--hash', '00'.repeat(32)]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('awaiting_offline_signature');
    expect(r.stderr).toContain('air gap');
  });

  it('refusals: wrong scheme names it (exit 1), a private key or garbage is bad usage (exit 2), duplicates key_exists', async () => {
    const p256 = coldKeys.get('ecdsa-p256')!;
    const wrong = await onlineCli([
      'keys',
      'import-public',
      'w',
      '--scheme',
      'ecdsa-secp256k1',
      '--public-key',
      p256.publicKeySpki,
    ]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('invalid_key_material');
    expect(wrong.stderr).toContain('not an ECDSA secp256k1 public key');
    const short = await onlineCli([
      'keys',
      'import-public',
      'w',
      '--scheme',
      'ed25519',
      '--public-key',
      p256.publicKeyRaw,
    ]);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('invalid_key_material');
    expect(short.stderr).toContain('not an Ed25519 public key');

    const privPem = join(dir, 'private.pem');
    writeFileSync(
      privPem,
      '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----\n',
    );
    const priv = await onlineCli([
      'keys',
      'import-public',
      'w',
      '--scheme',
      'ed25519',
      '--public-key',
      privPem,
    ]);
    expect(priv.code).toBe(2);
    expect(priv.stderr).toContain('PRIVATE key');
    expect(priv.stderr).not.toContain('MC4CAQAw');
    const junk = await onlineCli([
      'keys',
      'import-public',
      'w',
      '--scheme',
      'ed25519',
      '--public-key',
      'not a key!',
    ]);
    expect(junk.code).toBe(2);
    expect(junk.stderr).toContain('base64');
    const noScheme = await onlineCli(['keys', 'import-public', 'w', '--public-key', p256.publicKeySpki]);
    expect(noScheme.code).toBe(2);
    expect(noScheme.stderr).toContain('--scheme');

    const dup = await onlineCli([
      'keys',
      'import-public',
      'cold-p256',
      '--scheme',
      'ecdsa-p256',
      '--public-key',
      p256.publicKeySpki,
    ]);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain('key_exists');
    expect(readdirSync(join(onlineKeystore, 'offline')).sort()).toEqual(
      ['cold-ed-b64', 'cold-ed-hex', 'cold-p256', 'cold-p256-hex'].map((l) => `${l}.public.json`).sort(),
    );
    // Nothing from the cold keystore's private files reached the online side.
    const coldFile = JSON.parse(readFileSync(join(coldKeystore, 'c-ecdsa-p256.key.json'), 'utf8'));
    const onlineText = readFileSync(join(onlineKeystore, 'offline', 'cold-p256.public.json'), 'utf8');
    expect(onlineText).not.toContain(coldFile.cipher.ciphertext);
  });
});

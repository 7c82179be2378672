/**
 * `canton-signer keys …` as an operator uses it: the built bin, a temporary
 * keystore, the passphrase from the environment (or a file), default scrypt
 * cost. Checks output shapes, exit codes, and that no secret is printed.
 */
import { execFile } from 'node:child_process';
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, verify } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = new URL('../../bin/canton-signer.js', import.meta.url).pathname;
const PASSPHRASE = 'cli test passphrase ✓';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let dir: string;
let keystore: string;

function cli(args: string[], env: Record<string, string> = {}, input?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      {
        env: {
          PATH: process.env.PATH ?? '',
          CANTON_SIGNER_KEYSTORE: keystore,
          CANTON_SIGNER_PASSPHRASE: PASSPHRASE,
          ...env,
        },
        timeout: 60_000,
      },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: number }).code ?? 1) : 0;
        resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
    else child.stdin?.end();
  });
}

function noSecrets(r: Run): void {
  expect(r.stdout + r.stderr).not.toContain(PASSPHRASE);
}

function fingerprintOf(spkiB64: string, scheme: string): string {
  const spki = Buffer.from(spkiB64, 'base64');
  const keyBytes = scheme === 'ed25519' ? spki.subarray(spki.length - 32) : spki;
  const p = Buffer.alloc(4);
  p.writeUInt32BE(12);
  return `1220${createHash('sha256').update(p).update(keyBytes).digest('hex')}`;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cs-cli-keys-'));
  keystore = join(dir, 'keystore');
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('keys create / show / list / sign / export-public', () => {
  for (const scheme of ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1'] as const) {
    it(`${scheme}: create --json, then sign a hash that verifies with the exported public key`, async () => {
      const label = `cli-${scheme}`;
      const created = await cli(['keys', 'create', '--label', label, '--scheme', scheme, '--json']);
      expect(created.stderr).toBe('');
      expect(created.code).toBe(0);
      const d = JSON.parse(created.stdout);
      expect(d).toMatchObject({ label, backend: 'file', scheme, disabled: false });
      expect(d.fingerprint).toBe(fingerprintOf(d.publicKeySpki, scheme));
      noSecrets(created);

      const hash = randomBytes(32).toString('hex');
      const signed = await cli(['keys', 'sign', label, '--hash', hash, '--json']);
      expect(signed.code, signed.stderr).toBe(0);
      const s = JSON.parse(signed.stdout);
      expect(s.signature.signedBy).toBe(d.fingerprint);
      expect(s.signatureHex).toBe(Buffer.from(s.signature.signature, 'base64').toString('hex'));
      const pem = await cli(['keys', 'export-public', label]);
      expect(pem.code).toBe(0);
      expect(pem.stdout).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
      const key = createPublicKey(pem.stdout);
      const sig = Buffer.from(s.signature.signature, 'base64');
      const ok =
        scheme === 'ed25519'
          ? verify(null, Buffer.from(hash, 'hex'), key, sig)
          : verify('sha256', Buffer.from(hash, 'hex'), { key, dsaEncoding: 'der' }, sig);
      expect(ok).toBe(true);
      noSecrets(signed);
    });
  }

  it('the key file has mode 0600 in a 0700 folder, with the default scrypt cost', async () => {
    const name = readdirSync(keystore).find((n) => n.endsWith('.key.json'))!;
    expect(statSync(join(keystore, name)).mode & 0o777).toBe(0o600);
    expect(statSync(keystore).mode & 0o777).toBe(0o700);
    const f = JSON.parse(await import('node:fs').then((fs) => fs.readFileSync(join(keystore, name), 'utf8')));
    expect(f.kdf).toMatchObject({ name: 'scrypt', N: 2 ** 17, r: 8, p: 1 });
  });

  it('show --party-hint previews the party id; list shows every key', async () => {
    const show = await cli(['keys', 'show', 'cli-ed25519', '--party-hint', 'alice', '--json']);
    expect(show.code).toBe(0);
    const d = JSON.parse(show.stdout);
    expect(d.partyIdPreview).toBe(`alice::${d.fingerprint}`);
    const list = await cli(['keys', 'list', '--json']);
    expect(JSON.parse(list.stdout).map((k: { label: string }) => k.label)).toEqual([
      'cli-ecdsa-p256',
      'cli-ecdsa-secp256k1',
      'cli-ed25519',
    ]);
  });

  it('show and list need no passphrase', async () => {
    const r = await cli(['keys', 'show', 'cli-ed25519'], { CANTON_SIGNER_PASSPHRASE: '' });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('fingerprint:');
  });
});

describe('secrets and failures', () => {
  it('the passphrase can come from a file', async () => {
    const pf = join(dir, 'passphrase.txt');
    writeFileSync(pf, `${PASSPHRASE}\n`, { mode: 0o600 });
    const r = await cli(['keys', 'sign', 'cli-ed25519', '--hash', '00'.repeat(32)], {
      CANTON_SIGNER_PASSPHRASE: '',
      CANTON_SIGNER_PASSPHRASE_FILE: pf,
    });
    expect(r.code, r.stderr).toBe(0);
  });

  it('a wrong passphrase exits 1 with wrong_passphrase, without echoing either passphrase', async () => {
    const r = await cli(['keys', 'sign', 'cli-ed25519', '--hash', '00'.repeat(32)], {
      CANTON_SIGNER_PASSPHRASE: 'not the passphrase',
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('wrong_passphrase');
    expect(r.stderr).not.toContain('not the passphrase');
    noSecrets(r);
  });

  it('no passphrase and no terminal: no_passphrase naming the variables', async () => {
    const r = await cli(['keys', 'sign', 'cli-ed25519', '--hash', '00'.repeat(32)], {
      CANTON_SIGNER_PASSPHRASE: '',
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no_passphrase');
    expect(r.stderr).toContain('CANTON_SIGNER_PASSPHRASE_FILE');
  });

  it('there is no option to pass a passphrase or a PIN on the command line', async () => {
    for (const opt of ['--passphrase', '--pin']) {
      const r = await cli(['keys', 'create', '--label', 'x', opt, 'secret']);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('unknown option');
    }
  });

  it('disable refuses signing (exit 1, key_disabled) until enable', async () => {
    expect((await cli(['keys', 'disable', 'cli-ecdsa-p256', '--reason', 'test'])).code).toBe(0);
    const refused = await cli(['keys', 'sign', 'cli-ecdsa-p256', '--hash', '11'.repeat(32)]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('key_disabled');
    const listed = JSON.parse((await cli(['keys', 'list', '--json'])).stdout);
    expect(listed.find((k: { label: string }) => k.label === 'cli-ecdsa-p256').disabled).toBe(true);
    expect((await cli(['keys', 'enable', 'cli-ecdsa-p256'])).code).toBe(0);
    expect((await cli(['keys', 'sign', 'cli-ecdsa-p256', '--hash', '11'.repeat(32)])).code).toBe(0);
  });

  it('bad usage exits 2: a hash of the wrong length, an unknown scheme, delete without --yes', async () => {
    expect((await cli(['keys', 'sign', 'cli-ed25519', '--hash', 'abcd'])).code).toBe(2);
    expect((await cli(['keys', 'create', '--label', 'y', '--scheme', 'rsa'])).code).toBe(2);
    const del = await cli(['keys', 'delete', 'cli-ed25519']);
    expect(del.code).toBe(2);
    expect(del.stderr).toContain('--yes');
  });

  it('duplicate labels, missing keys and invalid labels are refused with their codes', async () => {
    const dup = await cli(['keys', 'create', '--label', 'cli-ed25519']);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain('key_exists');
    const missing = await cli(['keys', 'show', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('key_not_found');
    const bad = await cli(['keys', 'create', '--label', '../escape']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('invalid_label');
  });

  it('import: an Ed25519 seed and a PKCS#8 PEM secp256k1 key; the public keys match', async () => {
    const seed = randomBytes(32).toString('hex');
    const r1 = await cli(['keys', 'import', '--label', 'imported-ed', '--json'], {}, `${seed}\n`);
    expect(r1.code, r1.stderr).toBe(0);
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'secp256k1' });
    const pemFile = join(dir, 'k1.pem');
    writeFileSync(pemFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    const r2 = await cli(['keys', 'import', '--label', 'imported-k1', pemFile, '--json']);
    expect(r2.code, r2.stderr).toBe(0);
    const d = JSON.parse(r2.stdout);
    expect(d.scheme).toBe('ecdsa-secp256k1');
    expect(d.publicKeySpki).toBe(publicKey.export({ type: 'spki', format: 'der' }).toString('base64'));
    expect(r1.stdout + r2.stdout).not.toContain(seed);
  });

  it('delete --yes removes the key for good', async () => {
    expect((await cli(['keys', 'delete', 'imported-ed', '--yes'])).code).toBe(0);
    const r = await cli(['keys', 'show', 'imported-ed']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('key_not_found');
  });

  it('keys backends lists the file backend and the offline (cold key) backend with their schemes', async () => {
    const r = await cli(['keys', 'backends', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([
      { backend: 'file', schemes: ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1', 'ecdsa-p384'] },
      { backend: 'offline', schemes: ['ed25519', 'ecdsa-p256', 'ecdsa-secp256k1', 'ecdsa-p384'] },
    ]);
  });
});

describe('errors a person understands', () => {
  it('a mistyped option is reported with a suggestion, before a missing required option', async () => {
    const r = await cli(['keys', 'create', '--lable', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("canton-signer: unknown option '--lable' (did you mean --label?)\n");
    const cmd = await cli(['keys', 'crate', '--label', 'x']);
    expect(cmd.code).toBe(2);
    expect(cmd.stderr).toBe("canton-signer: unknown command 'crate' (did you mean create?)\n");
    const missing = await cli(['keys', 'create']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe("canton-signer: required option '--label <name>' not specified\n");
  });

  it('a keystore path that is a file: exit 2 naming the path and the option, no ENOTDIR', async () => {
    const file = join(dir, 'not-a-folder');
    writeFileSync(file, 'x');
    const r = await cli(['keys', 'create', '--label', 'x', '--keystore', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `canton-signer: the keystore ${file} is a file, not a folder: give --keystore a folder (it is created when missing)\n`,
    );
    const env = await cli(['keys', 'list'], { CANTON_SIGNER_KEYSTORE: file });
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('give CANTON_SIGNER_KEYSTORE a folder');
    // A file further up the path: one sentence naming that file, the code only in brackets.
    const below = await cli(['keys', 'list', '--keystore', join(file, 'sub')]);
    expect(below.code).toBe(1);
    expect(below.stderr).toBe(
      `canton-signer: keystore_io: cannot list keystore ${join(file, 'sub')}: ${file} is a file where a folder is expected (ENOTDIR): give a folder path, or move the file away\n`,
    );
  });

  it('a passphrase file that does not exist is named, with what to check', async () => {
    const missing = join(dir, 'no-such-passphrase-file');
    const r = await cli(['keys', 'sign', 'cli-ed25519', '--hash', '00'.repeat(32)], {
      CANTON_SIGNER_PASSPHRASE: '',
      CANTON_SIGNER_PASSPHRASE_FILE: missing,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `canton-signer: keystore_io: cannot read the keystore passphrase file ${missing} (named by CANTON_SIGNER_PASSPHRASE_FILE): ${missing} does not exist (ENOENT): check the path\n`,
    );
  });

  it('a short passphrase is refused for a new keystore (exit 2, nothing written) and warned about in one with keys', async () => {
    const fresh = join(dir, 'weak-keystore');
    const short = 'tiny-pass';
    const r = await cli(['keys', 'create', '--label', 'w'], {
      CANTON_SIGNER_KEYSTORE: fresh,
      CANTON_SIGNER_PASSPHRASE: short,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'canton-signer: the keystore passphrase is shorter than 12 characters: choose a longer one (a few words) for a new keystore; no key was written\n',
    );
    expect(r.stdout + r.stderr).not.toContain(short);
    expect(readdirSync(fresh)).toEqual([]);
    const imported = await cli(
      ['keys', 'import', '--label', 'w'],
      { CANTON_SIGNER_KEYSTORE: fresh, CANTON_SIGNER_PASSPHRASE: short },
      `${randomBytes(32).toString('hex')}\n`,
    );
    expect(imported.code).toBe(2);
    expect(readdirSync(fresh)).toEqual([]);

    // A keystore that already has keys under a short passphrase: the key is made, with one warning line.
    const old = join(dir, 'old-weak-keystore');
    const { FileBackend } = await import('../../src/keys/file-backend.js');
    await new FileBackend({ dir: old, passphrase: () => short, scrypt: { N: 2 ** 14, r: 8, p: 1 } }).generate(
      'first',
      'ed25519',
    );
    const more = await cli(['keys', 'create', '--label', 'second'], {
      CANTON_SIGNER_KEYSTORE: old,
      CANTON_SIGNER_PASSPHRASE: short,
    });
    expect(more.code, more.stderr).toBe(0);
    expect(more.stderr).toBe(
      "canton-signer: warning: this keystore's passphrase is shorter than 12 characters; a longer one protects the keys better (see docs/keys.md)\n",
    );
    expect(more.stdout + more.stderr).not.toContain(short);
  });

  it('key schemes are named with the right article ("an Ed25519 public key", not "a ed25519")', async () => {
    const p256 = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey.export({ format: 'jwk' });
    const point = Buffer.concat([
      Buffer.from([4]),
      Buffer.from(p256.x as string, 'base64url'),
      Buffer.from(p256.y as string, 'base64url'),
    ]).toString('hex');
    const r = await cli(['keys', 'import-public', 'cold-x', '--scheme', 'ed25519', '--public-key', point]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^canton-signer: invalid_key_material: not an Ed25519 public key: /);
  });
});

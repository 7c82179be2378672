/**
 * `canton-signer keys …`: create, list, show, import, import-public (a cold
 * key's public key), export-public, sign, disable, enable, delete. Secrets
 * come from the environment or a prompt, never from arguments (see
 * docs/keys.md).
 */
import { createPublicKey } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { KeyError } from '../keys/backend.js';
import { openSigner } from '../keys/config.js';
import { isShortPassphrase, MIN_PASSPHRASE_LENGTH } from '../keys/passphrase.js';
import { KEY_SCHEMES, type KeyScheme, schemeTitle, spkiFromRaw } from '../keys/schemes.js';
import type { KeyDescription, Signer } from '../keys/signer.js';
import { withArticle } from '../text/english.js';
import { readSource, UsageError } from './input.js';
import { keystoreFolder } from './options.js';
import { out } from './output.js';

export function keyJson(d: KeyDescription): Record<string, unknown> {
  return {
    label: d.label,
    backend: d.backend,
    scheme: d.scheme,
    keySpec: d.keySpec,
    signingAlgorithmSpec: d.signingAlgorithmSpec,
    signatureFormat: d.signatureFormat,
    publicKeySpki: Buffer.from(d.publicKeySpki).toString('base64'),
    publicKeyRaw: Buffer.from(d.publicKeyRaw).toString('hex'),
    fingerprint: d.fingerprint,
    createdAt: d.createdAt,
    disabled: d.disabled,
    ...(d.partyIdPreview ? { partyIdPreview: d.partyIdPreview } : {}),
  };
}

function keyText(d: KeyDescription): string {
  const lines = [
    `label:        ${d.label}`,
    `backend:      ${d.backend}`,
    `scheme:       ${d.scheme} (${d.keySpec}, ${d.signingAlgorithmSpec})`,
    `fingerprint:  ${d.fingerprint}`,
    `public key:   ${Buffer.from(d.publicKeyRaw).toString('hex')}`,
    `created:      ${d.createdAt || '(not recorded by the backend)'}`,
    `status:       ${d.disabled ? 'DISABLED' : 'enabled'}`,
  ];
  if (d.partyIdPreview) lines.push(`party id:     ${d.partyIdPreview}`);
  return `${lines.join('\n')}\n`;
}

const PUBLIC_KEY_FORMS =
  'base64 SPKI DER, hex raw public key (32-byte Ed25519 or 65/97-byte uncompressed EC point), or a PEM file (BEGIN PUBLIC KEY)';

/**
 * A cold key's public key as given to `keys import-public`: the path of a PEM
 * (or DER) file, PEM text, the raw public key in hex, or base64 SPKI DER.
 * Returns SPKI DER; whether it is a key of `scheme` is the signer's check.
 */
export function publicKeySpki(scheme: KeyScheme, value: string): Uint8Array {
  const v = value.trim();
  if (v === '') throw new UsageError(`--public-key is empty: give ${PUBLIC_KEY_FORMS}`);
  let isFile = false;
  try {
    isFile = statSync(v).isFile();
  } catch {
    isFile = false;
  }
  if (isFile || v.startsWith('-----BEGIN')) {
    const data = isFile ? readFileSync(v) : Buffer.from(v, 'utf8');
    const text = data.toString('latin1');
    if (/-----BEGIN (EC |RSA |ENCRYPTED )?PRIVATE KEY-----/.test(text))
      throw new UsageError(
        'that is a PRIVATE key: import-public takes the public key only (keys export-public on the offline machine)',
      );
    if (text.includes('-----BEGIN PUBLIC KEY-----')) {
      try {
        return new Uint8Array(
          createPublicKey({ key: text, format: 'pem' }).export({ type: 'spki', format: 'der' }),
        );
      } catch {
        throw new KeyError(
          'invalid_key_material',
          `not ${withArticle(`${schemeTitle(scheme)} public key`)}: the PEM in ${isFile ? v : '--public-key'} cannot be read`,
        );
      }
    }
    if (!isFile) throw new UsageError(`--public-key: expected a "BEGIN PUBLIC KEY" PEM`);
    const t = text.trim();
    return /^[0-9a-fA-F]+$/.test(t) || /^[A-Za-z0-9+/\s]+=*$/.test(t)
      ? publicKeySpki(scheme, t)
      : new Uint8Array(data);
  }
  if (/^([0-9a-fA-F]{2})+$/.test(v) && [32, 65, 97].includes(v.length / 2)) {
    try {
      return new Uint8Array(spkiFromRaw(scheme, Buffer.from(v, 'hex')));
    } catch (e) {
      throw new KeyError(
        'invalid_key_material',
        `not ${withArticle(`${schemeTitle(scheme)} public key`)}: ${(e as Error).message}`,
      );
    }
  }
  const b64 = v.replace(/\s+/g, '');
  if (/^[A-Za-z0-9+/]+={0,2}$/.test(b64) && b64.length % 4 === 0)
    return new Uint8Array(Buffer.from(b64, 'base64'));
  throw new UsageError(
    `--public-key is neither an existing file nor hex nor base64: give ${PUBLIC_KEY_FORMS}`,
  );
}

/**
 * What a passphrase that encrypts a new file key must be: a keystore's first
 * key refuses one shorter than MIN_PASSPHRASE_LENGTH (exit 2, nothing
 * written); a keystore that already has keys takes it, with a one-line
 * warning (its passphrase is already chosen). The passphrase is never shown.
 */
function passphrasePolicy(firstKey: () => boolean): (p: string) => void {
  let warned = false;
  return (p) => {
    if (!isShortPassphrase(p)) return;
    if (firstKey())
      throw new UsageError(
        `the keystore passphrase is shorter than ${MIN_PASSPHRASE_LENGTH} characters: choose a longer one (a few words) for a new keystore; no key was written`,
      );
    if (!warned)
      process.stderr.write(
        `canton-signer: warning: this keystore's passphrase is shorter than ${MIN_PASSPHRASE_LENGTH} characters; a longer one protects the keys better (see docs/keys.md)\n`,
      );
    warned = true;
  };
}

async function withSigner<T>(
  opts: { keystore?: string },
  extra: { interactive?: boolean; confirm?: boolean; newKey?: boolean },
  fn: (s: Signer) => Promise<T>,
): Promise<T> {
  let hasFileKeys = true;
  const signer = await openSigner({
    keystore: keystoreFolder(opts.keystore),
    interactive: extra.interactive,
    confirmPassphrase: extra.confirm,
    ...(extra.newKey ? { onPassphrase: passphrasePolicy(() => !hasFileKeys) } : {}),
  });
  if (extra.newKey) hasFileKeys = (await signer.backend('file').list()).length > 0;
  try {
    return await fn(signer);
  } finally {
    await signer.close();
  }
}

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('Manage signing keys (file keystore or PKCS#11 HSM)');
  const keystoreOpt = () =>
    new Option('--keystore <dir>', 'keystore folder (default $CANTON_SIGNER_KEYSTORE or ./keystore)');

  keys
    .command('create')
    .description('Generate a key in the keystore or inside the HSM')
    .requiredOption('--label <name>', 'key label (letters, digits, . _ -)')
    .addOption(new Option('--scheme <scheme>', 'signing scheme').choices([...KEY_SCHEMES]).default('ed25519'))
    .addOption(
      new Option('--backend <backend>', 'where the key lives').choices(['file', 'pkcs11']).default('file'),
    )
    .addOption(keystoreOpt())
    .option('--json', 'print JSON')
    .action(
      async (opts: {
        label: string;
        scheme: KeyScheme;
        backend: 'file' | 'pkcs11';
        keystore?: string;
        json?: boolean;
      }) =>
        withSigner(opts, { interactive: true, confirm: true, newKey: true }, async (s) => {
          const d = await s.generate({ label: opts.label, scheme: opts.scheme, backend: opts.backend });
          out(opts.json, keyJson(d), keyText(d));
        }),
    );

  keys
    .command('list')
    .description('List keys of every configured backend')
    .addOption(keystoreOpt())
    .option('--json', 'print JSON')
    .action(async (opts: { keystore?: string; json?: boolean }) =>
      withSigner(opts, {}, async (s) => {
        const all = await s.list();
        for (const p of s.keystoreProblems())
          process.stderr.write(`canton-signer: warning: ${p.file} not listed: ${p.code}: ${p.message}\n`);
        const text =
          all.length === 0
            ? 'no keys\n'
            : `${all
                .map(
                  (d) =>
                    `${d.label}\t${d.backend}\t${d.scheme}\t${d.fingerprint}${d.disabled ? '\tDISABLED' : ''}`,
                )
                .join('\n')}\n`;
        out(opts.json, all.map(keyJson), text);
      }),
    );

  keys
    .command('show')
    .description('Show one key: public key, Canton key spec, fingerprint')
    .argument('<label>')
    .option('--party-hint <hint>', 'also show the party id this key would give with that hint')
    .addOption(keystoreOpt())
    .option('--json', 'print JSON')
    .action(async (label: string, opts: { partyHint?: string; keystore?: string; json?: boolean }) =>
      withSigner(opts, {}, async (s) => {
        const d = await s.describe(label, { partyHint: opts.partyHint });
        out(opts.json, keyJson(d), keyText(d));
      }),
    );

  keys
    .command('import')
    .description('Import a private key into the file keystore (PKCS#8 PEM/DER, or an Ed25519 seed in hex)')
    .requiredOption('--label <name>', 'key label')
    .argument('[file]', 'file with the key; "-" or absent: stdin')
    .addOption(keystoreOpt())
    .option('--json', 'print JSON')
    .action(async (file: string | undefined, opts: { label: string; keystore?: string; json?: boolean }) => {
      const material = await readSource(file);
      try {
        await withSigner(opts, { interactive: true, confirm: true, newKey: true }, async (s) => {
          const d = await s.import({ label: opts.label, material: new Uint8Array(material) });
          out(opts.json, keyJson(d), keyText(d));
        });
      } finally {
        material.fill(0);
      }
    });

  keys
    .command('import-public')
    .description(
      'Register a cold key: the public key of a key held on an offline machine (its signatures come through the air gap)',
    )
    .argument('<label>', 'key label here (letters, digits, . _ -)')
    .addOption(
      new Option('--scheme <scheme>', 'signing scheme of the key')
        .choices([...KEY_SCHEMES])
        .makeOptionMandatory(),
    )
    .requiredOption('--public-key <key>', PUBLIC_KEY_FORMS)
    .addOption(keystoreOpt())
    .option('--json', 'print JSON')
    .action(
      async (
        label: string,
        opts: { scheme: KeyScheme; publicKey: string; keystore?: string; json?: boolean },
      ) => {
        const spki = publicKeySpki(opts.scheme, opts.publicKey);
        await withSigner(opts, {}, async (s) => {
          const d = await s.importPublicKey(label, opts.scheme, spki);
          out(opts.json, keyJson(d), keyText(d));
        });
      },
    );

  keys
    .command('export-public')
    .description(
      'Print the public key as SPKI PEM, or with --json its base64 SPKI and fingerprint (private keys are never exported)',
    )
    .argument('<label>')
    .addOption(keystoreOpt())
    .option('--json', 'print {label, scheme, publicKeySpki (base64 DER), publicKeyRaw (hex), fingerprint}')
    .action(async (label: string, opts: { keystore?: string; json?: boolean }) =>
      withSigner(opts, {}, async (s) => {
        const d = await s.describe(label);
        if (opts.json) {
          const k = keyJson(d);
          out(
            true,
            {
              label,
              scheme: d.scheme,
              publicKeySpki: k.publicKeySpki,
              publicKeyRaw: k.publicKeyRaw,
              fingerprint: d.fingerprint,
            },
            '',
          );
          return;
        }
        const pem = createPublicKey({
          key: Buffer.from(d.publicKeySpki),
          format: 'der',
          type: 'spki',
        }).export({
          type: 'spki',
          format: 'pem',
        });
        process.stdout.write(String(pem));
      }),
    );

  keys
    .command('sign')
    .description('Sign a 32-byte hash (or a 34-byte topology hash) and print the Canton signature object')
    .argument('<label>')
    .requiredOption('--hash <hex>', 'the hash to sign, in hex')
    .addOption(keystoreOpt())
    .option('--json', 'print JSON (the signature object plus the hex form)')
    .action(async (label: string, opts: { hash: string; keystore?: string; json?: boolean }) => {
      const hex = opts.hash.trim().toLowerCase();
      if (!/^([0-9a-f]{2})+$/.test(hex) || (hex.length !== 64 && hex.length !== 68))
        throw new UsageError(
          '--hash must be 64 hex characters (a transaction hash) or 68 (a topology multihash)',
        );
      await withSigner(opts, { interactive: true }, async (s) => {
        const r = await s.sign(label, Buffer.from(hex, 'hex'));
        out(
          opts.json,
          { signature: r.signature, signatureHex: r.signatureHex },
          `${JSON.stringify(r.signature, null, 2)}\n`,
        );
      });
    });

  keys
    .command('backends')
    .description('Show the configured backends and the schemes each can do (probes the HSM)')
    .addOption(keystoreOpt())
    .option('--json', 'print JSON')
    .action(async (opts: { keystore?: string; json?: boolean }) =>
      withSigner(opts, {}, async (s) => {
        const caps = await s.capabilities();
        out(opts.json, caps, caps.map((c) => `${c.backend}\t${c.schemes.join(', ') || '(none)'}\n`).join(''));
      }),
    );

  keys
    .command('disable')
    .description('Refuse all signing with a key until it is enabled again')
    .argument('<label>')
    .option('--reason <text>', 'why (kept in the key state)')
    .addOption(keystoreOpt())
    .action(async (label: string, opts: { reason?: string; keystore?: string }) =>
      withSigner(opts, {}, async (s) => {
        await s.disable(label, opts.reason);
        process.stdout.write(`disabled ${label}\n`);
      }),
    );

  keys
    .command('enable')
    .description('Allow signing with a disabled key again')
    .argument('<label>')
    .addOption(keystoreOpt())
    .action(async (label: string, opts: { keystore?: string }) =>
      withSigner(opts, {}, async (s) => {
        await s.enable(label);
        process.stdout.write(`enabled ${label}\n`);
      }),
    );

  keys
    .command('delete')
    .description('Destroy a key for good (file removed, or HSM objects destroyed)')
    .argument('<label>')
    .option('--yes', 'confirm: this cannot be undone')
    .addOption(keystoreOpt())
    .action(async (label: string, opts: { yes?: boolean; keystore?: string }) => {
      if (!opts.yes) throw new UsageError(`deleting ${label} cannot be undone: repeat with --yes`);
      await withSigner(opts, {}, async (s) => {
        await s.delete(label);
        process.stdout.write(`deleted ${label}\n`);
      });
    });
}

/**
 * `canton-signer token issuer` and `token mint`: a stand-in identity provider
 * for test setups of `serve`. `issuer` makes an Ed25519 key pair (the private
 * key owner-only, never overwritten) and prints the `auth:` settings that
 * trust its public key; `mint` signs a JWT with that private key for a
 * subject, its roles and (for a withdrawer) its parties, valid for a while,
 * and prints it. The token is what the service's JWT verification
 * (src/server/auth.ts) expects with the default claim names; nothing here is
 * for production, where the identity provider issues the tokens.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { exportPKCS8, exportSPKI, generateKeyPair, importPKCS8, SignJWT } from 'jose';
import { isPartyId } from '../flows/names.js';
import { writeNewFile } from '../keys/key-files.js';
import { DEFAULT_PARTIES_CLAIM, DEFAULT_ROLES_CLAIM } from '../server/config.js';
import { isRole, ROLES } from '../server/roles.js';
import { parseDuration } from './flows.js';
import { UsageError } from './input.js';
import { print } from './output.js';

/** The issuer and audience `token issuer` writes into its settings and `token mint` signs for by default. */
export const TEST_ISSUER = 'canton-signer-test-issuer';
export const TEST_AUDIENCE = 'canton-signer';
export const DEFAULT_KEY_FILE = 'issuer-key.pem';
export const DEFAULT_PUBLIC_FILE = 'issuer-public.pem';
/** The key id `issuer` sets and `mint` puts in the token header. */
export const TEST_KID = 'test-issuer';

const list = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');

async function createIssuer(opts: { key: string; public: string; issuer: string; audience: string }) {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const exists = (path: string) =>
    new UsageError(
      `${path} already exists: not overwritten (mint tokens with it, or give another --key / --public-key)`,
    );
  // Both or neither: a pair half written would block the next run on the half that exists.
  for (const path of [opts.key, opts.public]) if (existsSync(path)) throw exists(path);
  const written: string[] = [];
  try {
    for (const [path, text] of [
      [opts.key, await exportPKCS8(privateKey)],
      [opts.public, await exportSPKI(publicKey)],
    ] as const) {
      try {
        await writeNewFile(path, text);
      } catch (e) {
        throw (e as NodeJS.ErrnoException).code === 'EEXIST' ? exists(path) : e;
      }
      written.push(path);
    }
  } catch (e) {
    for (const path of written) await rm(path, { force: true });
    throw e;
  }
  process.stderr.write(`private key written to ${opts.key} (owner-only), public key to ${opts.public}\n`);
  print(
    [
      '# the auth settings of the service configuration that trust this issuer',
      'auth:',
      `  issuer: ${opts.issuer}`,
      `  audience: ${opts.audience}`,
      `  publicKeys: [{ pemFile: ${opts.public}, kid: ${TEST_KID} }]`,
      '  algorithms: [EdDSA]',
    ].join('\n'),
  );
}

interface MintOptions {
  key: string;
  sub: string;
  roles: string;
  parties?: string;
  issuer: string;
  audience: string;
  expiresIn: string;
  rolesClaim: string;
  partiesClaim: string;
}

async function mint(opts: MintOptions): Promise<void> {
  const roles = list(opts.roles);
  if (roles.length === 0) throw new UsageError(`--roles: give at least one of ${ROLES.join(', ')}`);
  for (const r of roles)
    if (!isRole(r)) throw new UsageError(`--roles: ${r} is not a role; the roles are ${ROLES.join(', ')}`);
  const parties = opts.parties === undefined ? [] : list(opts.parties);
  for (const p of parties)
    if (!isPartyId(p)) throw new UsageError(`--parties: not a party id (hint::1220…): ${p}`);
  if (roles.includes('withdrawer') && parties.length === 0)
    throw new UsageError('--parties: a withdrawer token must list the parties it may withdraw from');
  const seconds = Math.round(parseDuration(opts.expiresIn, '--expires-in') / 1000);
  let pem: string;
  try {
    pem = await readFile(opts.key, 'utf8');
  } catch (e) {
    throw new UsageError(
      `cannot read the issuer key ${resolve(opts.key)} (${(e as NodeJS.ErrnoException).code ?? 'error'}): create one with \`canton-signer token issuer\``,
    );
  }
  let key: Awaited<ReturnType<typeof importPKCS8>>;
  try {
    key = await importPKCS8(pem, 'EdDSA');
  } catch {
    throw new UsageError(`${opts.key} is not an Ed25519 private key made by \`canton-signer token issuer\``);
  }
  const token = await new SignJWT({
    [opts.rolesClaim]: roles,
    ...(parties.length > 0 ? { [opts.partiesClaim]: parties } : {}),
  })
    .setProtectedHeader({ alg: 'EdDSA', kid: TEST_KID, typ: 'JWT' })
    .setIssuer(opts.issuer)
    .setAudience(opts.audience)
    .setSubject(opts.sub)
    .setIssuedAt()
    .setExpirationTime(`${seconds}s`)
    .setJti(randomUUID())
    .sign(key);
  print(token);
}

export function registerToken(program: Command): void {
  const token = program
    .command('token')
    .description(
      'Test setups: a stand-in JWT issuer for `serve` (production tokens come from your identity provider)',
    );

  token
    .command('issuer')
    .description('Create an Ed25519 issuer key pair and print the auth settings that trust it')
    .option('--key <file>', 'private key file to create (owner-only; never overwritten)', DEFAULT_KEY_FILE)
    .option('--public-key <file>', 'public key file to create (the service reads it)', DEFAULT_PUBLIC_FILE)
    .option('--issuer <iss>', 'issuer name for the settings', TEST_ISSUER)
    .option('--audience <aud>', 'audience for the settings', TEST_AUDIENCE)
    .action(async (o: { key: string; publicKey: string; issuer: string; audience: string }) =>
      createIssuer({ key: o.key, public: o.publicKey, issuer: o.issuer, audience: o.audience }),
    );

  token
    .command('mint')
    .description('Sign a JWT with an issuer key (from `token issuer`) and print it')
    .requiredOption('--sub <subject>', 'who the caller is (the audit log names it)')
    .requiredOption('--roles <roles>', `comma-separated: ${ROLES.join(', ')}`)
    .option('--parties <ids>', "comma-separated party ids a withdrawer's token reaches")
    .option('--key <file>', 'issuer private key', DEFAULT_KEY_FILE)
    .option('--issuer <iss>', 'iss claim: one of the service’s auth.issuer', TEST_ISSUER)
    .option('--audience <aud>', 'aud claim: one of the service’s auth.audience', TEST_AUDIENCE)
    .option('--expires-in <duration>', 'lifetime, e.g. 90s, 30m, 1h, 2d', '1h')
    .option('--roles-claim <name>', 'claim holding the roles (auth.rolesClaim)', DEFAULT_ROLES_CLAIM)
    .option('--parties-claim <name>', 'claim holding the parties (auth.partiesClaim)', DEFAULT_PARTIES_CLAIM)
    .action(async (o: MintOptions) => mint(o));
}

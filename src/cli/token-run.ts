/**
 * What `canton-signer token issuer` and `token mint` do (their options are in
 * token.ts): make the issuer's key pair and print its auth settings, and sign
 * a token with it. Loaded only when one of them runs.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import { exportPKCS8, exportSPKI, generateKeyPair, importPKCS8, SignJWT } from 'jose';
import { isPartyId } from '../flows/names.js';
import { writeNewFile } from '../keys/key-files.js';
import { isRole, ROLES } from '../server/roles.js';
import { parseDuration } from './flows.js';
import { UsageError } from './input.js';
import { print } from './output.js';
import { TEST_KID } from './token.js';

const list = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');

export async function createIssuer(opts: { key: string; public: string; issuer: string; audience: string }) {
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

export interface MintOptions {
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

export async function mint(opts: MintOptions): Promise<void> {
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

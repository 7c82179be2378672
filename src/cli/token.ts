/**
 * `canton-signer token issuer` and `token mint`: a stand-in identity provider
 * for test setups of `serve`. `issuer` makes an Ed25519 key pair (the private
 * key owner-only, never overwritten) and prints the `auth:` settings that
 * trust its public key; `mint` signs a JWT with that private key for a
 * subject, its roles and (for a withdrawer) its parties, valid for a while,
 * and prints it. The token is what the service's JWT verification
 * (src/server/auth.ts) expects with the default claim names; nothing here is
 * for production, where the identity provider issues the tokens. This module
 * defines the commands; what they do (and jose) is loaded from token-run.ts
 * when one runs.
 */
import type { Command } from 'commander';
import { DEFAULT_PARTIES_CLAIM, DEFAULT_ROLES_CLAIM } from '../server/claims.js';
import { ROLES } from '../server/roles.js';
import type { MintOptions } from './token-run.js';

/** The issuer and audience `token issuer` writes into its settings and `token mint` signs for by default. */
export const TEST_ISSUER = 'canton-signer-test-issuer';
export const TEST_AUDIENCE = 'canton-signer';
export const DEFAULT_KEY_FILE = 'issuer-key.pem';
export const DEFAULT_PUBLIC_FILE = 'issuer-public.pem';
/** The key id `issuer` sets and `mint` puts in the token header. */
export const TEST_KID = 'test-issuer';

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
      (await import('./token-run.js')).createIssuer({
        key: o.key,
        public: o.publicKey,
        issuer: o.issuer,
        audience: o.audience,
      }),
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
    .action(async (o: MintOptions) => (await import('./token-run.js')).mint(o));
}

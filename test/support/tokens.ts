/**
 * The test service's token settings (issuer, audience, HS256 secret) and
 * `mintToken`. Apart from service.ts so that a test that only needs a token
 * for a `serve` child process does not load the whole service.
 */
import { SignJWT } from 'jose';
import type { Role } from '../../src/server/roles.js';

export const TEST_ISSUER = 'https://issuer.test';
export const TEST_AUDIENCE = 'canton-signer-test';
export const TEST_SECRET = 'test-shared-secret-of-at-least-32-bytes!!';

/** A bearer token for the test service. */
export async function mintToken(
  roles: readonly Role[] | readonly string[],
  opts: { parties?: readonly string[]; sub?: string; expiresIn?: string } = {},
): Promise<string> {
  return new SignJWT({
    canton_signer_roles: [...roles],
    ...(opts.parties ? { canton_signer_parties: [...opts.parties] } : {}),
  })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(opts.sub ?? `test-${roles.join('-') || 'none'}`)
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(opts.expiresIn ?? '10m')
    .sign(new TextEncoder().encode(TEST_SECRET));
}

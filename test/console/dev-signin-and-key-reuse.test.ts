/**
 * Review findings on the console and passkeys, as failing tests: the one-click
 * development sign-in accepted from a configuration file outside development
 * mode, and one authenticator key registered as two approvers' passkeys (only
 * the credential id differs) so that one person's assertion verifies for both.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalMessage, passkeyRegistrationChallenge, verifyApproval } from '../../src/policy/approval.js';
import { encodeAssertion, encodePasskeyKey, parseRegistration } from '../../src/policy/webauthn.js';
import { loadConfig } from '../../src/server/config.js';
import type { Db } from '../../src/store/db.js';
import { ApprovalRepo } from '../../src/store/repos/approvals.js';
import { storeDrivers } from '../support/pg.js';
import { assertion, registration, softPasskey } from '../support/soft-passkey.js';

const RP = 'localhost';
const ORIGIN = 'http://localhost:8080';
const expect_ = (approver: string) => ({
  challenge: passkeyRegistrationChallenge(approver, RP),
  rpId: RP,
  origins: [ORIGIN],
  requireUserVerification: true,
});
const drivers = await storeDrivers();
const b64u = (b: Uint8Array) => Buffer.from(b).toString('base64url');

describe('console.devSignIn outside development mode', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cs-review-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is refused when a configuration file turns it on for a service with real auth', async () => {
    const file = join(dir, 'cs.yaml');
    writeFileSync(
      file,
      [
        'listen: { host: 0.0.0.0, port: 8080 }',
        'network:',
        '  ledgerApiUrl: https://participant.example.com',
        '  validatorUrl: https://validator.example.com/api/validator',
        '  ledgerApiUser: canton-signer',
        'auth:',
        '  issuer: https://login.example.com/',
        '  audience: canton-signer',
        '  jwksUrl: https://login.example.com/jwks',
        'console:',
        '  devSignIn: true',
        '',
      ].join('\n'),
    );
    // `serve` without --dev loads exactly this: today it starts, and POST /console/auth/dev
    // hands anyone who reaches the port a session with every role (admin and approver included).
    await expect(loadConfig({ file, env: {}, cwd: dir })).rejects.toThrow(/devSignIn/);
  });
});

describe('one authenticator key as two approvers’ passkeys', () => {
  it('lets ada’s assertion verify for a credential mallory registered with ada’s public key', () => {
    const ada = softPasskey(RP, ORIGIN);
    const adaKey = parseRegistration(
      registration(ada, b64u(passkeyRegistrationChallenge('ada', RP))),
      expect_('ada'),
    );
    // Mallory needs no private key: attestation 'none' signs nothing at registration, so she
    // relays ada's key (recoverable from one ES256 signature) under another credential id.
    const copy = { ...ada, credentialId: new Uint8Array(16).fill(7) };
    const malloryKey = parseRegistration(
      registration(copy, b64u(passkeyRegistrationChallenge('mallory', RP))),
      expect_('mallory'),
    );
    expect(malloryKey.publicKey).toBe(adaKey.publicKey);
    const statement = 'ab'.repeat(32);
    const a = assertion(ada, approvalMessage(statement, 'approve'));
    const relayed = encodeAssertion({ ...a, credentialId: malloryKey.credentialId });
    // The credential id is not covered by the assertion's signature, so this verifies:
    // the defence has to be at registration (one public key, one credential).
    expect(
      verifyApproval(
        { kind: 'webauthn', publicKey: encodePasskeyKey(malloryKey) },
        approvalMessage(statement, 'approve'),
        relayed,
      ),
    ).toBe(true);
  });

  describe.each(drivers)('the credential store on $name', (driver) => {
    let db: Db;
    let repo: ApprovalRepo;
    beforeAll(async () => {
      db = await driver.fresh();
      repo = new ApprovalRepo(db, { actor: 'test' });
    });
    afterAll(async () => {
      await driver.cleanup();
    });

    it('refuses a second passkey with the same public key under another approver', async () => {
      const ada = softPasskey(RP, ORIGIN);
      const adaKey = parseRegistration(
        registration(ada, b64u(passkeyRegistrationChallenge('ada', RP))),
        expect_('ada'),
      );
      await repo.registerCredential({
        approver: 'ada',
        kind: 'webauthn',
        publicKey: encodePasskeyKey(adaKey),
      });
      const copy = { ...ada, credentialId: new Uint8Array(16).fill(7) };
      const malloryKey = parseRegistration(
        registration(copy, b64u(passkeyRegistrationChallenge('mallory', RP))),
        expect_('mallory'),
      );
      await expect(
        repo.registerCredential({
          approver: 'mallory',
          kind: 'webauthn',
          publicKey: encodePasskeyKey(malloryKey),
        }),
      ).rejects.toThrow();
    });
  });
});

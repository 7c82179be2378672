/**
 * Smoke test of the browser-test harness (test/support/browser.ts, oidc.ts):
 * Chromium's virtual authenticator completes a passkey registration and a
 * signed assertion on a localhost page, and a relying party built on
 * openid-client completes an authorization-code + PKCE sign-in against the
 * test OpenID provider, with the roles claim in the ID token.
 */
import { createHash, verify } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as oidc from 'openid-client';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addVirtualAuthenticator, launchBrowser, newPage, screenshotBoth } from '../support/browser.js';
import { ROLES_SCOPE, signInAtProvider, startOidcProvider } from '../support/oidc.js';

type Handler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void> | void;

/** A node:http server on 127.0.0.1, addressed as http://localhost:<port> (a secure context). */
async function serve(handler: Handler): Promise<{ origin: string; server: Server }> {
  let origin = '';
  const server = createServer((req, res) => {
    Promise.resolve(handler(req, res, new URL(req.url ?? '/', origin))).catch((err: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://localhost:${(server.address() as AddressInfo).port}`;
  return { origin, server };
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

// The passkey page: a button runs registration then authentication and writes
// what came back (base64url fields) as JSON into #result.
const WEBAUTHN_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>passkey</title></head>
<body><button id="go">go</button><pre id="result"></pre>
<script type="module">
const b64u = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf)))
  .replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
const rand = (n) => crypto.getRandomValues(new Uint8Array(n));
document.getElementById('go').addEventListener('click', async () => {
  const out = document.getElementById('result');
  try {
    const created = await navigator.credentials.create({ publicKey: {
      rp: { name: 'harness', id: location.hostname },
      user: { id: rand(16), name: 'ann', displayName: 'Ann' },
      challenge: rand(32),
      pubKeyCredParams: [{ type: 'public-key', alg: -7 }],
      authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
    } });
    const challenge = rand(32);
    const got = await navigator.credentials.get({ publicKey: {
      challenge, rpId: location.hostname, userVerification: 'required',
      allowCredentials: [{ type: 'public-key', id: created.rawId }],
    } });
    out.textContent = JSON.stringify({
      createdId: created.id,
      publicKey: b64u(created.response.getPublicKey()),
      publicKeyAlgorithm: created.response.getPublicKeyAlgorithm(),
      gotId: got.id,
      challenge: b64u(challenge),
      clientDataJSON: b64u(got.response.clientDataJSON),
      authenticatorData: b64u(got.response.authenticatorData),
      signature: b64u(got.response.signature),
    });
  } catch (e) {
    out.textContent = JSON.stringify({ error: String(e) });
  }
  out.dataset.done = '1';
});
</script></body></html>`;

let browser: Browser;
beforeAll(async () => {
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
});

describe('browser harness', () => {
  it('a virtual authenticator registers a passkey and signs an assertion with it', async () => {
    const { origin, server } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(WEBAUTHN_PAGE);
    });
    try {
      const page = await newPage(browser);
      const authenticator = await addVirtualAuthenticator(page);
      expect(await authenticator.credentials()).toEqual([]);
      await page.goto(`${origin}/`);
      await page.click('#go');
      await page.locator('#result[data-done]').waitFor();
      const result = JSON.parse(await page.locator('#result').innerText());
      expect(result.error).toBeUndefined();
      expect(result.gotId).toBe(result.createdId);
      expect(result.publicKeyAlgorithm).toBe(-7);

      // The assertion is what a server would check: right ceremony, origin and
      // challenge, user verified, and a valid ES256 signature over
      // authenticatorData ‖ SHA-256(clientDataJSON) by the registered key.
      const clientDataJSON = Buffer.from(result.clientDataJSON, 'base64url');
      const clientData = JSON.parse(clientDataJSON.toString('utf8'));
      expect(clientData).toMatchObject({ type: 'webauthn.get', origin, challenge: result.challenge });
      const authData = Buffer.from(result.authenticatorData, 'base64url');
      expect(authData.subarray(0, 32)).toEqual(createHash('sha256').update('localhost').digest());
      const flags = authData[32]!;
      expect(flags & 0x01).toBe(0x01); // user present
      expect(flags & 0x04).toBe(0x04); // user verified
      const signed = Buffer.concat([authData, createHash('sha256').update(clientDataJSON).digest()]);
      const key = { key: Buffer.from(result.publicKey, 'base64url'), format: 'der', type: 'spki' } as const;
      expect(verify('sha256', signed, key, Buffer.from(result.signature, 'base64url'))).toBe(true);
      signed[0]! ^= 1;
      expect(verify('sha256', signed, key, Buffer.from(result.signature, 'base64url'))).toBe(false);

      const held = await authenticator.credentials();
      expect(held).toHaveLength(1);
      expect(held[0]!.credentialId).toBe(result.createdId);
      expect(held[0]!.isResidentCredential).toBe(true);
      expect(held[0]!.rpId).toBe('localhost');
      expect(held[0]!.signCount).toBeGreaterThanOrEqual(1);
      expect(authData.readUInt32BE(33)).toBe(held[0]!.signCount);

      await screenshotBoth(page, 'harness-webauthn');
      await authenticator.remove();
    } finally {
      await close(server);
    }
  });

  it('signs in through the test OpenID provider with authorization code + PKCE', async () => {
    // The relying party's origin must be known before the provider registers its redirect URI.
    const flows = new Map<string, { verifier: string; nonce: string }>();
    const signedIn: Record<string, unknown>[] = [];
    let config: oidc.Configuration | undefined;
    const rp = await serve(async (_req, res, url) => {
      if (url.pathname === '/login') {
        const verifier = oidc.randomPKCECodeVerifier();
        const state = oidc.randomState();
        const nonce = oidc.randomNonce();
        flows.set(state, { verifier, nonce });
        const to = oidc.buildAuthorizationUrl(config!, {
          redirect_uri: `${rp.origin}/callback`,
          scope: `openid profile ${ROLES_SCOPE}`,
          code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
          code_challenge_method: 'S256',
          state,
          nonce,
        });
        res.writeHead(302, { location: to.href }).end();
      } else if (url.pathname === '/callback') {
        const state = url.searchParams.get('state') ?? '';
        const flow = flows.get(state);
        if (!flow) throw new Error('unknown state');
        flows.delete(state);
        const tokens = await oidc.authorizationCodeGrant(config!, url, {
          pkceCodeVerifier: flow.verifier,
          expectedState: state,
          expectedNonce: flow.nonce,
        });
        const claims: Record<string, unknown> = tokens.claims() ?? {};
        signedIn.push(claims);
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end(`<!doctype html><title>signed in</title><p id="who">${String(claims.sub)}</p>`);
      } else {
        res.writeHead(404).end();
      }
    });
    const provider = await startOidcProvider({
      clientId: 'console',
      redirectUris: [`${rp.origin}/callback`],
      postLogoutRedirectUris: [`${rp.origin}/`],
      accounts: { ann: { name: 'Ann', roles: ['approver'] }, bob: { name: 'Bob', roles: [] } },
    });
    try {
      config = await oidc.discovery(provider.url, 'console', undefined, oidc.None(), {
        execute: [oidc.allowInsecureRequests],
      });
      expect(config.serverMetadata().issuer).toBe(provider.issuer);

      const page = await newPage(browser);
      await page.goto(`${rp.origin}/login`);
      expect(new URL(page.url()).origin).toBe(provider.issuer);
      await signInAtProvider(page, 'ann');
      expect(new URL(page.url()).pathname).toBe('/callback');
      expect(await page.locator('#who').innerText()).toBe('ann');

      expect(signedIn).toHaveLength(1);
      expect(signedIn[0]).toMatchObject({ iss: provider.issuer, aud: 'console', sub: 'ann', name: 'Ann' });
      expect(signedIn[0]!.roles).toEqual(['approver']);
    } finally {
      await provider.close();
      await close(rp.server);
    }
  });
});

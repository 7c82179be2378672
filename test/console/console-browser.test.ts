/**
 * The console in a real Chromium (Debian's, driven by playwright-core),
 * against a real OpenID provider (oidc-provider) and the sandbox network:
 * people sign in with authorization code + PKCE; tara registers a passkey
 * with Chromium's virtual authenticator and ada (an admin) activates it;
 * a withdrawal over the policy threshold is approved with the passkey — with
 * the keyboard alone — and ada's withdrawals page shows it reach committed
 * without a reload; another is rejected with a reason; tom, who requested a
 * third, sees approve disabled and the API refuses him anyway; a memo holding
 * `<script>` renders as text. Every page is shot at 1280×800 and 390×844
 * (test-output/screenshots) and none is wider than a phone's screen.
 */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consolePlugin } from '../../src/console/plugin.js';
import type { PartyRecord } from '../../src/store/parties.js';
import {
  addVirtualAuthenticator,
  launchBrowser,
  MOBILE,
  newPage,
  screenshotBoth,
} from '../support/browser.js';
import { type OidcProvider, signInAtProvider, startOidcProvider } from '../support/oidc.js';
import { freePort } from '../support/ports.js';
import { type ServiceEnv, serviceEnv, TEST_AUDIENCE, TEST_SECRET, testConfig } from '../support/service.js';

const POLICY = `version: 1
approverGroups: { treasury: [tara, tom], admins: [ada] }
approvals: { ttl: 1h }
policyChanges: { approvals: [{ group: treasury, count: 1 }] }
rules:
  - id: large
    when: { amount: { gte: "100" } }
    decision: approve
    approvals: [{ group: treasury, count: 1 }]
  - id: rest
    decision: allow
`;
const MEMO = '<script>window.__owned = 1</script><img src=x onerror="window.__owned = 2">';

let env: ServiceEnv;
let oidc: OidcProvider;
let browser: Browser;
let base: string;
let alice: PartyRecord;
let bob: PartyRecord;

/** A bearer token from the same issuer the console's people come from. */
async function token(sub: string, roles: string[]): Promise<string> {
  return new SignJWT({ canton_signer_roles: roles })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(sub)
    .setIssuer(oidc.issuer)
    .setAudience(TEST_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(TEST_SECRET));
}

async function withdraw(amount: string, sub = 'desk'): Promise<{ id: string; commandId: string }> {
  const r = await env.service.app.inject({
    method: 'POST',
    url: '/v1/withdrawals',
    headers: {
      authorization: `Bearer ${await token(sub, ['withdrawer', 'operator'])}`,
      'idempotency-key': randomUUID(),
    },
    payload: { party: alice.partyId, receiver: bob.partyId, amount, memo: MEMO },
  });
  expect(r.statusCode, r.body).toBe(201);
  return r.json();
}

async function until(id: string, states: string[], ms = 20_000) {
  const end = Date.now() + ms;
  for (;;) {
    const w = await env.store.withdrawals.get(id);
    if (w && states.includes(w.state)) return w;
    if (Date.now() > end) throw new Error(`withdrawal ${id} is ${w?.state}, not ${states.join('|')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A page signed in as `login` through the identity provider. */
async function signedIn(login: string): Promise<Page> {
  const page = await newPage(browser);
  await page.goto(`${base}/console/`);
  await page.getByRole('link', { name: /Sign in with/ }).click();
  await signInAtProvider(page, login);
  await page.waitForURL(`${base}/console/**`);
  // Signed in (the shell with Sign out), or the sign-in page saying why not: fail with what it says.
  await page.locator('header .who button, .notice-error').first().waitFor({ timeout: 60_000 });
  if (!(await page.getByRole('button', { name: 'Sign out' }).isVisible()))
    throw new Error(`${login} is not signed in at ${page.url()}: ${await page.locator('main').innerText()}`);
  return page;
}

/** The page is no wider than the screen at phone size (the content reflows; tables scroll inside). */
async function fitsPhone(page: Page, name: string): Promise<void> {
  const size = page.viewportSize();
  await page.setViewportSize(MOBILE);
  const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
  expect(overflow, `${name} is wider than a phone's screen`).toBeLessThanOrEqual(0);
  if (size) await page.setViewportSize(size);
}

async function shoot(page: Page, name: string): Promise<void> {
  await screenshotBoth(page, name);
  await fitsPhone(page, name);
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://localhost:${port}`;
  oidc = await startOidcProvider({
    clientId: 'console',
    redirectUris: [`${base}/console/auth/callback`],
    rolesClaim: 'canton_signer_roles',
    accounts: {
      tara: { name: 'Tara', roles: ['approver'] },
      tom: { name: 'Tom', roles: ['approver'] },
      ada: { name: 'Ada', roles: ['admin', 'operator', 'auditor'] },
    },
  });
  const dir = mkdtempSync(join(tmpdir(), 'cs-console-'));
  const file = join(dir, 'policy.yaml');
  writeFileSync(file, POLICY);
  env = await serviceEnv({
    seed: 'console-browser',
    service: {
      config: testConfig({
        listen: { host: '127.0.0.1', port },
        auth: {
          issuer: oidc.issuer,
          audience: TEST_AUDIENCE,
          sharedSecret: TEST_SECRET,
          algorithms: ['HS256'],
        },
        policy: { file },
        console: {
          publicUrl: base,
          oidc: { issuer: oidc.issuer, clientId: 'console', scopes: ['openid', 'profile', 'roles'] },
        },
      }),
      plugins: [consolePlugin()],
    },
  });
  await env.service.listen();
  alice = await env.addParty('alice', { fund: '100000' });
  bob = await env.addParty('bob');
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await env?.close();
  await oidc?.close();
});

describe('the console in Chromium', () => {
  let tara: Page;
  let ada: Page;

  it('signs people in with the identity provider (code + PKCE) and shows only their views', async () => {
    const anon = await newPage(browser);
    await anon.goto(`${base}/console/`);
    await anon.getByRole('link', { name: /Sign in with/ }).waitFor();
    await shoot(anon, 'console-signin');
    tara = await signedIn('tara');
    const nav = tara.getByRole('navigation', { name: 'Console' });
    await expect(nav.getByRole('link').allTextContents()).resolves.toEqual([
      'Approvals',
      'Policy',
      'Passkeys',
    ]);
    ada = await signedIn('ada');
    const adaNav = await ada.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents();
    expect(adaNav).toEqual(expect.arrayContaining(['Approvals', 'Withdrawals', 'Audit log', 'Passkeys']));
    const cookies = await tara.context().cookies();
    const session = cookies.find((c) => c.name === 'cs_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
  }, 60_000);

  it('tara registers a passkey; ada activates it', async () => {
    const authenticator = await addVirtualAuthenticator(tara);
    await tara.goto(`${base}/console/#/passkeys`);
    await tara.getByLabel('Name of this passkey').fill("Tara's laptop");
    await tara.getByRole('button', { name: 'Create passkey' }).click();
    await tara.getByText('Passkey registered').waitFor();
    expect(await authenticator.credentials()).toHaveLength(1);
    await shoot(tara, 'console-passkeys');
    await ada.goto(`${base}/console/#/passkeys`);
    await ada.getByRole('button', { name: "Activate tara's Tara's laptop" }).click();
    await ada.getByText("Activated tara's credential.").waitFor();
    await shoot(ada, 'console-passkeys-admin');
  }, 60_000);

  it('an approval with the passkey, by keyboard alone; ada sees the withdrawal reach committed live', async () => {
    await ada.goto(`${base}/console/#/withdrawals`);
    await ada.getByRole('heading', { name: 'Withdrawals' }).waitFor();
    const w = await withdraw('150');
    await until(w.id, ['awaiting_approval']);
    await tara.goto(`${base}/console/#/approvals`);
    const card = tara.locator('article.approval').first();
    await card.waitFor();
    // The memo is shown as the characters it holds, and none of it ran.
    await expect(card.locator('q.memo').textContent()).resolves.toBe(MEMO);
    expect(await tara.evaluate('window.__owned')).toBeUndefined();
    await shoot(tara, 'console-approvals');
    // Keyboard only: tab to the approve button and press Enter.
    await tara.locator('body').focus();
    let reached = false;
    for (let i = 0; i < 60 && !reached; i++) {
      await tara.keyboard.press('Tab');
      reached = await tara.evaluate<boolean>(
        "document.activeElement?.textContent === 'Approve with passkey'",
      );
    }
    expect(reached).toBe(true);
    await tara.keyboard.press('Enter');
    await tara
      .getByText(/Approved: it goes on now|Nothing waits for approval/)
      .first()
      .waitFor();
    await until(w.id, ['committed']);
    // Ada's page was not reloaded: the row changed on the live event.
    await ada.locator('tr', { hasText: 'committed' }).first().waitFor({ timeout: 15_000 });
    await shoot(ada, 'console-withdrawals');
    // Its timeline, from the journal: received … approved … committed.
    await ada.getByRole('button', { name: `Timeline of withdrawal ${w.id}` }).click();
    const timeline = ada.locator('ol.timeline');
    await timeline.waitFor();
    const steps = (await timeline.locator('li').allTextContents()).join(' | ');
    expect(steps).toMatch(/received/i);
    expect(steps).toMatch(/approv/i);
    expect(steps).toMatch(/signed/i);
    expect(steps).toMatch(/committed/i);
    await shoot(ada, 'console-withdrawal-timeline');
  }, 90_000);

  it('a rejection with a reason ends the withdrawal', async () => {
    const w = await withdraw('200');
    await until(w.id, ['awaiting_approval']);
    await tara.goto(`${base}/console/#/approvals`);
    const card = tara.locator('article.approval').first();
    await card.getByLabel('Reason for rejecting').fill('not on the customer’s allow-list');
    await card.getByRole('button', { name: 'Reject' }).click();
    const done = await until(w.id, ['rejected', 'failed']);
    expect(done.state).toMatch(/rejected|failed/);
    const r = await env.store.approvals.latestFor(`withdrawal:${w.id}`);
    expect(r).toMatchObject({
      status: 'rejected',
      reason: 'not on the customer’s allow-list',
      decidedBy: 'tara',
    });
  }, 60_000);

  it('the requester sees approve disabled, and the API refuses them anyway', async () => {
    const w = await withdraw('300', 'tom');
    await until(w.id, ['awaiting_approval']);
    const tom = await signedIn('tom');
    await addVirtualAuthenticator(tom);
    await tom.goto(`${base}/console/#/approvals`);
    const card = tom.locator('article.approval').first();
    await card.getByText('You requested this: another approver must approve it.').waitFor();
    await expect(card.getByRole('button', { name: 'Approve with passkey' }).isDisabled()).resolves.toBe(true);
    const request = (await env.store.approvals.latestFor(`withdrawal:${w.id}`))!;
    // Through the same route the button would call, with tom's own session.
    const answer = await tom.evaluate(
      async ({ id, hash }) => {
        const s = (await (await fetch('/console/session')).json()) as { session: { csrf: string } };
        const r = await fetch(`/v1/approvals/${id}/approve`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-csrf-token': s.session.csrf },
          body: JSON.stringify({ credentialId: crypto.randomUUID(), statementHash: hash, signature: 'AAAA' }),
        });
        return { status: r.status, body: (await r.json()) as { code: string } };
      },
      { id: request.id, hash: request.statementHash },
    );
    expect(answer.status).toBe(403);
    expect(answer.body.code).toBe('separation_of_duties');
    expect((await env.store.withdrawals.get(w.id))?.state).toBe('awaiting_approval');
    await tom.close();
  }, 60_000);

  it('a pending policy change shows its diff against the version in force', async () => {
    const changed = POLICY.replace('gte: "100"', 'gte: "50"');
    const r = await env.service.app.inject({
      method: 'PUT',
      url: '/v1/policy',
      headers: { authorization: `Bearer ${await token('ada', ['admin'])}` },
      payload: { document: changed },
    });
    expect(r.statusCode, r.body).toBe(202);
    await ada.goto(`${base}/console/#/policy`);
    await ada.locator('.diff').waitFor();
    await expect(ada.locator('.diff .add').allTextContents()).resolves.toEqual([
      expect.stringContaining('gte: "50"'),
    ]);
    await expect(ada.locator('.diff .del').allTextContents()).resolves.toEqual([
      expect.stringContaining('gte: "100"'),
    ]);
    await shoot(ada, 'console-policy-pending');
  }, 30_000);

  it('every page at both sizes; the parties page shows a party’s name', async () => {
    const r = await env.service.app.inject({
      method: 'POST',
      url: `/v1/parties/${alice.partyId}/names`,
      headers: { authorization: `Bearer ${await token('desk', ['operator'])}` },
      payload: { name: 'alice-console.unverified.cns' },
    });
    expect(r.statusCode, r.body).toBe(201);
    await ada.goto(`${base}/console/#/parties`);
    await ada.locator('ul.names li', { hasText: 'alice-console.unverified.cns' }).waitFor();
    for (const view of ['parties', 'keys', 'audit', 'policy']) {
      await ada.goto(`${base}/console/#/${view}`);
      await ada.locator('main h1').waitFor();
      await ada.waitForLoadState('networkidle');
      await shoot(ada, `console-${view}`);
    }
  }, 60_000);

  it('signing out ends the session', async () => {
    await ada.getByRole('button', { name: 'Sign out' }).click();
    await ada.getByRole('link', { name: /Sign in with/ }).waitFor();
    const r = await ada.evaluate(async () => (await fetch('/console/session')).status);
    expect(r).toBe(401);
  }, 30_000);
});

/**
 * Browser tests' Chromium: launching the system Chromium through playwright-core
 * (never a downloaded browser; `CHROMIUM_PATH` overrides /usr/bin/chromium), new
 * pages at a given viewport, a CDP virtual WebAuthn authenticator (a platform
 * passkey with user verification that answers without a prompt), and
 * screenshots written to test-output/screenshots/ for a human to look at.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type CDPSession, chromium, type Page } from 'playwright-core';

/** Where screenshots go: `<repo>/test-output/screenshots` (git-ignored). */
export const SCREENSHOT_DIR = join(
  fileURLToPath(new URL('../../', import.meta.url)),
  'test-output',
  'screenshots',
);

/** The two viewports every console screen is checked at: a laptop and a phone. */
export const DESKTOP = { width: 1280, height: 800 } as const;
export const MOBILE = { width: 390, height: 844 } as const;

export interface Viewport {
  width: number;
  height: number;
}

/**
 * Chromium headless with flags for a root-run container: no sandbox (root
 * cannot use the setuid/namespace sandbox), no GPU, and none of the background
 * traffic (QUIC probing, component updates, sync, first-run) that would make a
 * test reach the network; host names other than localhost do not resolve.
 */
export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-default-apps',
      '--disable-domain-reliability',
      '--metrics-recording-only',
      '--no-default-browser-check',
      '--password-store=basic',
      // Names other than localhost resolve to nothing, so a page (oidc-provider's dev login
      // page @imports Google Fonts) cannot reach the network or stall waiting for it.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost',
    ],
  });
}

/** A page in its own context (own cookies and storage) at `viewport` (default: desktop). */
export async function newPage(browser: Browser, viewport: Viewport = DESKTOP): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: viewport.width, height: viewport.height } });
  return context.newPage();
}

/** CDP sends binary fields as standard base64; WebAuthn pages use base64url. */
const base64url = (b64: string): string => Buffer.from(b64, 'base64').toString('base64url');

/**
 * One credential as the virtual authenticator holds it (CDP `WebAuthn.Credential`),
 * with `credentialId` and `userHandle` as base64url, i.e. as `PublicKeyCredential.id` shows them.
 */
export interface VirtualCredential {
  credentialId: string;
  isResidentCredential: boolean;
  rpId?: string;
  /** PKCS#8 private key, base64: test-only material from the virtual device. */
  privateKey: string;
  userHandle?: string;
  /** The authenticator's signature counter: 0 after registration, +1 per assertion. */
  signCount: number;
}

export interface VirtualAuthenticator {
  authenticatorId: string;
  /** The credentials it holds now. */
  credentials(): Promise<VirtualCredential[]>;
  /** Detach it from the page (later ceremonies find no authenticator). */
  remove(): Promise<void>;
}

/**
 * Attach a virtual platform authenticator (CTAP2, internal transport,
 * resident keys, user verification that always succeeds, presence simulated)
 * to `page`. Passkey ceremonies on the page then complete without a prompt.
 */
export async function addVirtualAuthenticator(page: Page): Promise<VirtualAuthenticator> {
  const cdp: CDPSession = await page.context().newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return {
    authenticatorId,
    async credentials() {
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
      return credentials.map((c) => ({
        credentialId: base64url(c.credentialId),
        isResidentCredential: c.isResidentCredential,
        rpId: c.rpId,
        privateKey: c.privateKey,
        userHandle: c.userHandle === undefined ? undefined : base64url(c.userHandle),
        signCount: c.signCount,
      }));
    },
    async remove() {
      await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId });
      await cdp.detach();
    },
  };
}

/** Save a full-page PNG as test-output/screenshots/<name>.png; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * Shoot `page` at desktop then mobile size (`<name>-desktop.png`,
 * `<name>-mobile.png`), then put its viewport back. Returns both paths.
 */
export async function screenshotBoth(page: Page, name: string): Promise<{ desktop: string; mobile: string }> {
  const before = page.viewportSize();
  await page.setViewportSize(DESKTOP);
  const desktop = await screenshot(page, `${name}-desktop`);
  await page.setViewportSize(MOBILE);
  const mobile = await screenshot(page, `${name}-mobile`);
  if (before) await page.setViewportSize(before);
  return { desktop, mobile };
}

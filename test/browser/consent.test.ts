import { createServer, type Server } from 'node:http';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATEGORY_IDS } from '../../src/core/categories.js';
import { verifyAccessToken } from '../../src/oauth/grants.js';
import type { TestApp } from '../helpers/app.js';
import { CHROMIUM, skipWithoutChromium, startBrowserApp } from '../helpers/browser.js';
import { authorizeUrl, exchangeCode, pkcePair, registerClient } from '../helpers/oauth-flow.js';

/** The consent page in a real browser: labels, CSP (inline style hash, form-action with the redirect), cookies. */

/** The one browser API used inside `evaluate` (the project compiles without the DOM library). */
type BrowserGlobals = { getComputedStyle(el: unknown): { backgroundColor: string } };

let t: TestApp;
let browser: Browser;
let origin: string;
let callbackServer: Server;
let callbackUrl: string;
let user: { id: string; email: string; password: string };

beforeAll(async () => {
  if (!CHROMIUM) return;
  ({ t, origin, browser } = await startBrowserApp());
  user = await (await t.tenant()).user();
  // Stands in for the client's loopback redirect listener.
  callbackServer = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window.'));
  await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
  const address = callbackServer.address();
  callbackUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/callback`;
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => (callbackServer ? callbackServer.close(resolve) : resolve(undefined)));
  await t?.close();
});

describe.skipIf(skipWithoutChromium())('consent page in Chromium (skipped: /usr/bin/chromium is not installed)', () => {
  it('shows Approve, Deny and the read-only choice without scrolling on a 1280×800 laptop screen', async () => {
    const client = await registerClient(t.app, { redirect_uris: [callbackUrl], client_name: 'Laptop client' });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${origin}${authorizeUrl({ clientId: client.client_id, redirectUri: callbackUrl, challenge: pkcePair().challenge, state: 's' })}`);
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('button', { name: 'Approve' }).isVisible()).resolves.toBe(true);
    if (process.env.CONSENT_SCREENSHOT) await page.screenshot({ path: process.env.CONSENT_SCREENSHOT });
    const inView = async (name: string, box: { x: number; y: number; width: number; height: number } | null) => {
      expect(box, name).not.toBeNull();
      expect(box!.y, name).toBeGreaterThanOrEqual(0);
      expect(box!.y + box!.height, `${name} ends below the fold`).toBeLessThanOrEqual(800);
      expect(box!.x + box!.width, name).toBeLessThanOrEqual(1280);
    };
    await inView('Approve', await page.getByRole('button', { name: 'Approve' }).boundingBox());
    await inView('Deny', await page.getByRole('button', { name: 'Deny' }).boundingBox());
    await inView('Read only', await page.getByLabel('Read only').boundingBox());
    await inView('Read and change', await page.getByLabel('Read and change').boundingBox());
    // Every category is in view too.
    for (const id of CATEGORY_IDS) await inView(id, await page.getByLabel(id, { exact: true }).boundingBox());
    await context.close();
  });

  it('signs in, ticks a category, approves and lands on the redirect URI with a code', async () => {
    const client = await registerClient(t.app, { redirect_uris: [callbackUrl], client_name: 'Browser test client' });
    const pkce = pkcePair();
    const context = await browser.newContext();
    const page = await context.newPage();
    const cspViolations: string[] = [];
    page.on('console', (msg) => {
      if (/Content Security Policy/i.test(msg.text())) cspViolations.push(msg.text());
    });

    const response = await page.goto(`${origin}${authorizeUrl({ clientId: client.client_id, redirectUri: callbackUrl, challenge: pkce.challenge, state: 'browser-state', scope: 'mcp offline_access' })}`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await expect(page.title()).resolves.toContain('Sign in');

    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill('wrong password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toBe('Incorrect email or password.');

    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByText('Browser test client').first().isVisible()).resolves.toBe(true);

    const contacts = page.getByLabel('contacts', { exact: true });
    await expect(contacts.isChecked()).resolves.toBe(false);
    await expect(page.getByLabel('messages', { exact: true }).isChecked()).resolves.toBe(false);
    await contacts.check();
    // The inline stylesheet is allowed by its hash: the Approve button is styled.
    const approve = page.getByRole('button', { name: 'Approve' });
    await expect(approve.evaluate((el) => (globalThis as unknown as BrowserGlobals).getComputedStyle(el).backgroundColor)).resolves.toBe('rgb(29, 78, 216)');

    const session = (await context.cookies()).find((c) => c.name === 'sb_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax' });

    await Promise.all([page.waitForURL((u) => u.href.startsWith(callbackUrl)), approve.click()]);
    const landed = new URL(page.url());
    expect(landed.searchParams.get('state')).toBe('browser-state');
    expect(landed.searchParams.get('iss')).toBe(origin);
    expect(cspViolations).toEqual([]);

    const tokens = await exchangeCode(t.app, { clientId: client.client_id, code: landed.searchParams.get('code')!, verifier: pkce.verifier, redirectUri: callbackUrl });
    expect(tokens.status).toBe(200);
    const grant = await verifyAccessToken(t.database.db, tokens.json.access_token, () => new Date());
    expect(grant?.categories).toEqual(['contacts']);
    await context.close();
  });

  it('Deny sends the browser back with access_denied', async () => {
    const client = await registerClient(t.app, { redirect_uris: [callbackUrl] });
    const page = await browser.newPage();
    await page.goto(`${origin}${authorizeUrl({ clientId: client.client_id, redirectUri: callbackUrl, challenge: pkcePair().challenge, state: 'deny-state' })}`);
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await Promise.all([page.waitForURL((u) => u.href.startsWith(callbackUrl)), page.getByRole('button', { name: 'Deny' }).click()]);
    const landed = new URL(page.url());
    expect(landed.searchParams.get('error')).toBe('access_denied');
    expect(landed.searchParams.get('state')).toBe('deny-state');
    await page.close();
  });

  it('cannot be framed', async () => {
    const client = await registerClient(t.app, { redirect_uris: [callbackUrl] });
    const page = await browser.newPage();
    const target = `${origin}${authorizeUrl({ clientId: client.client_id, redirectUri: callbackUrl, challenge: pkcePair().challenge, state: 's' })}`;
    // A page on another origin (the callback server) tries to frame the sign-in form.
    await page.goto(callbackUrl);
    await page.setContent(`<iframe src="${target.replace(/&/g, '&amp;')}"></iframe>`);
    await page.waitForTimeout(500);
    const framed = page.frames().find((f) => f !== page.mainFrame());
    const hasForm = framed ? await framed.locator('input[name="password"]').count().catch(() => 0) : 0;
    expect(hasForm).toBe(0);
    await page.close();
  });
});

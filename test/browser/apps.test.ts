import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { verifyAccessToken } from '../../src/oauth/grants.js';
import type { TestApp } from '../helpers/app.js';
import { obtainTokens } from '../helpers/oauth-flow.js';
import { CHROMIUM, skipWithoutChromium, startBrowserApp } from '../helpers/browser.js';

/** The connected-apps page in a real browser: sign in, change an app's categories, revoke it. */

/** The one browser API used inside `evaluate` (the project compiles without the DOM library). */
type BrowserGlobals = { getComputedStyle(el: unknown): { backgroundColor: string } };

let t: TestApp;
let browser: Browser;
let origin: string;

beforeAll(async () => {
  if (!CHROMIUM) return;
  ({ t, origin, browser } = await startBrowserApp());
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe.skipIf(skipWithoutChromium())('connected apps page in Chromium', () => {
  it('lists the approved app, changes its categories and revokes it', async () => {
    const user = await (await t.tenant()).user();
    const { tokens } = await obtainTokens(t.app, { ...user, categories: ['contacts', 'messages'], clientOverrides: { client_name: 'Desk Assistant' } });
    const works = async () => (await verifyAccessToken(t.database.db, tokens.access_token, systemClock)) !== undefined;
    expect(await works()).toBe(true);

    const page = await (await browser.newContext()).newPage();
    const cspViolations: string[] = [];
    page.on('console', (msg) => void (/Content Security Policy/i.test(msg.text()) && cspViolations.push(msg.text())));
    await page.goto(`${origin}/account/apps`);
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();

    const app = page.getByRole('region', { name: 'Desk Assistant' });
    await expect(app.getByRole('heading', { name: 'Desk Assistant' }).isVisible()).resolves.toBe(true);
    await expect(app.getByLabel('contacts').isChecked()).resolves.toBe(true);
    await expect(app.getByLabel('messages', { exact: true }).isChecked()).resolves.toBe(true);

    if (process.env.APPS_SCREENSHOT) await page.screenshot({ path: process.env.APPS_SCREENSHOT, fullPage: true });
    // When it was approved and last connected, to the minute.
    const details = (await app.locator('p.muted').first().textContent())!;
    expect(details).toMatch(/approved \d{4}-\d\d-\d\d \d\d:\d\d UTC · last connected \d{4}-\d\d-\d\d \d\d:\d\d UTC/);
    // Revoking looks like the destructive action it is, in a form of its own, apart from Save.
    const save = app.getByRole('button', { name: 'Save' });
    const revoke = app.getByRole('button', { name: 'Revoke access' });
    await expect(revoke.evaluate((el) => (globalThis as unknown as BrowserGlobals).getComputedStyle(el).backgroundColor)).resolves.toBe('rgb(185, 28, 28)');
    await expect(save.evaluate((el) => (globalThis as unknown as BrowserGlobals).getComputedStyle(el).backgroundColor)).resolves.not.toBe('rgb(185, 28, 28)');
    const [saveBox, revokeBox] = [(await save.boundingBox())!, (await revoke.boundingBox())!];
    expect(revokeBox.y - (saveBox.y + saveBox.height)).toBeGreaterThanOrEqual(48);
    await expect(revoke.evaluate((el, form) => (el as unknown as { form: unknown }).form !== form, await save.evaluateHandle((el) => (el as unknown as { form: unknown }).form))).resolves.toBe(true);

    await expect(app.getByLabel('Read and change').isChecked()).resolves.toBe(true);
    await app.getByLabel('messages', { exact: true }).uncheck();
    await app.getByLabel('Read only').check();
    await app.getByRole('button', { name: 'Save' }).click();
    await expect(page.getByRole('region', { name: 'Desk Assistant' }).getByLabel('messages', { exact: true }).isChecked()).resolves.toBe(false);
    await expect(page.getByRole('region', { name: 'Desk Assistant' }).getByLabel('Read only').isChecked()).resolves.toBe(true);
    expect(await verifyAccessToken(t.database.db, tokens.access_token, systemClock)).toMatchObject({ categories: ['contacts'], readOnly: true });

    await page.getByRole('region', { name: 'Desk Assistant' }).getByRole('button', { name: 'Revoke access' }).click();
    await expect(page.getByText('No application is connected.').isVisible()).resolves.toBe(true);
    expect(await works()).toBe(false);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await expect(page.getByRole('button', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    expect(cspViolations).toEqual([]);
  });
});

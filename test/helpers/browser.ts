import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { createTestApp, type TestApp } from './app.js';
import { freePort } from './listen.js';
import { skipWithout } from './requirements.js';

/** Debian's Chromium, driven by playwright-core for the pages that people see. */
export const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser', process.env.CHROMIUM_PATH].find((p): p is string => !!p && existsSync(p));

/** Whether to skip the browser tests: without Chromium on a developer's machine (a failure under CI=true). */
export const skipWithoutChromium = () => skipWithout(CHROMIUM !== undefined, 'Chromium (/usr/bin/chromium)');

/** A headless Chromium that reaches nothing but what a test opens. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM!,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** The app listening on a free loopback port, with PUBLIC_URL set to that origin, and a browser to open it in. */
export async function startBrowserApp(): Promise<{ t: TestApp; origin: string; browser: Browser }> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const t = await createTestApp({ env: { PUBLIC_URL: origin } });
  await t.app.listen({ port, host: '127.0.0.1' });
  return { t, origin, browser: await launchBrowser() };
}

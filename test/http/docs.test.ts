import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATEGORY_IDS } from '../../src/core/categories.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { launchBrowser, skipWithoutChromium } from '../helpers/browser.js';

/** The API reference page at `{base_url}/docs`: served with its assets from this server, nothing from a CDN. */

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t.close());

/** Absolute http(s) URLs in `src`/`href` attributes, CSS `url(...)` and `@import`: what a page would load. */
const LOADS = /(?:\b(?:src|href)\s*=\s*["']?|url\(\s*["']?|@import\s+["']?)(?:https?:)?\/\/[^"')\s>]+/gi;

describe('GET /v1/docs', () => {
  it('needs no key, answers the HTML page (after the slash redirect) with a request id', async () => {
    const bare = await t.app.inject({ method: 'GET', url: '/v1/docs' });
    expect(bare.statusCode).toBe(301);
    expect(bare.headers.location).toBe('/v1/docs/');
    const page = await t.app.inject({ method: 'GET', url: '/v1/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['x-request-id']).toBeTruthy();
    expect(page.body).toContain('Switchboard API reference');
  });

  it('opens on an introduction that names every area of the API, events and webhooks included', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { info: { description: string }; tags: { name: string }[] };
    expect(CATEGORY_IDS).toEqual(expect.arrayContaining(['events', 'webhooks']));
    for (const area of CATEGORY_IDS) expect(doc.info.description, area).toContain(`**${area}**`);
    expect(doc.tags.map((tag) => tag.name)).toEqual(CATEGORY_IDS);
  });

  it('loads its script and the OpenAPI document from this server only; the browser is told to refuse other hosts', async () => {
    const page = await t.app.inject({ method: 'GET', url: '/v1/docs/' });
    expect(page.body.match(LOADS) ?? []).toEqual([]);
    const scripts = [...page.body.matchAll(/<script[^>]*\bsrc="([^"]+)"/g)].map((m) => m[1]!);
    const links = [...page.body.matchAll(/<link[^>]*\bhref="([^"]+)"/g)].map((m) => m[1]!);
    expect(scripts.length).toBeGreaterThan(0);
    for (const ref of [...scripts, ...links]) {
      expect(ref, 'a relative reference').not.toMatch(/^([a-z]+:)?\/\//i);
      const asset = await t.app.inject({ method: 'GET', url: new URL(ref, 'http://x/v1/docs/').pathname });
      expect(asset.statusCode, ref).toBe(200);
      expect(asset.headers['content-type']).toMatch(/javascript|css/);
      expect(asset.body.length).toBeGreaterThan(1000);
    }
    // The document the page reads, relative to it.
    const url = /"url":\s*"([^"]+)"/.exec(page.body)?.[1];
    expect(url).toBeDefined();
    const spec = await t.app.inject({ method: 'GET', url: new URL(url!, 'http://x/v1/docs/').pathname });
    expect(spec.statusCode).toBe(200);
    expect(spec.json().openapi).toBe('3.1.0');
    // The default fonts (a CDN) are off and the policy forbids any other origin.
    expect(page.body).toContain('"withDefaultFonts": false');
    const csp = page.headers['content-security-policy'] as string;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("font-src 'self'");
    expect(csp).not.toMatch(/https?:/);
  });

  // A real browser, where one is installed: the page renders the operations and asks no other host for anything.
  it.skipIf(skipWithoutChromium() || testDbKind !== 'pglite')('renders in a browser without any request to another host', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      const foreign: string[] = [];
      const violations: string[] = [];
      page.on('request', (req) => {
        const u = new URL(req.url());
        if (!['data:', 'blob:'].includes(u.protocol) && u.host !== `127.0.0.1:${port}`) foreign.push(req.url());
      });
      page.on('console', (msg) => {
        if (/Content Security Policy/i.test(msg.text())) violations.push(msg.text());
      });
      await page.goto(`http://127.0.0.1:${port}/v1/docs`, { waitUntil: 'networkidle' });
      await page.getByText('List contacts').first().waitFor({ timeout: 20_000 });
      expect(await page.title()).toContain('Switchboard');
      expect(foreign).toEqual([]);
      expect(violations).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});

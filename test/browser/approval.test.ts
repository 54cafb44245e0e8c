import { randomBytes } from 'node:crypto';
import { Client, StreamableHTTPClientTransport, UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/client';
import { eq, sql } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { events, messages } from '../../src/db/schema.js';
import { createMailSender } from '../../src/workers/mail-sender.js';
import type { AutomationEngine } from '../../src/workers/automation-engine.js';
import { engineFor, silent } from '../automations/live-engine.js';
import type { Tenant } from '../helpers/app.js';
import { CHROMIUM, launchBrowser, skipWithoutChromium } from '../helpers/browser.js';
import { startRelay, type Relay } from '../helpers/smtp-relay.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { startLiveApp, type LiveApp } from '../mcp/helpers.js';

/**
 * An assistant (the official SDK client with its OAuth flow) sets up an automation that forwards mail out of
 * the organization and asks to approve it; a person opens the link in Chromium, reads what it will do and
 * approves or rejects it. Sending needs its own consent.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
/** The one browser value read inside `evaluate` (the project compiles without the DOM library). */
type BrowserGlobals = { document: { documentElement: { scrollWidth: number } } };

const REDIRECT = 'http://127.0.0.1:8976/callback';
let t: LiveApp;
let a: Tenant;
let browser: Browser;
let relay: Relay;
let engine: AutomationEngine;
let sender: ReturnType<typeof createMailSender>;
let person: { email: string; password: string };
let channelId: string;

beforeAll(async () => {
  if (!CHROMIUM) return;
  t = await startLiveApp({ env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' } });
  a = await t.tenant({ credits: 1000 });
  person = await a.user();
  browser = await launchBrowser();
  relay = await startRelay();
  engine = engineFor(t);
  sender = createMailSender({ db: t.database.db, clock: () => new Date(), log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
  await verifyDomainFor(t.database.db, a.orgId, 'acme.example');
  const res = await a.request('POST', '/v1/channels', {
    type: 'email',
    name: 'Acme Support',
    address: 'support@acme.example',
    inbound: { mode: 'smtp' },
    outbound: { host: '127.0.0.1', port: relay.port, secure: false, username: relay.user, password: relay.pass, tls: 'none' },
  });
  expect(res.status, res.body).toBe(201);
  channelId = (res.json.data as Json).id as string;
});
afterAll(async () => {
  await browser?.close();
  await relay?.close();
  await t?.close();
});

/** What the SDK asks a client application to keep, in memory. */
class MemoryProvider implements OAuthClientProvider {
  info: Awaited<ReturnType<OAuthClientProvider['clientInformation']>>;
  saved: Awaited<ReturnType<OAuthClientProvider['tokens']>>;
  verifier = '';
  authorizationUrl: URL | undefined;
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return { client_name: 'Mail Assistant', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: NonNullable<MemoryProvider['info']>) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: NonNullable<MemoryProvider['saved']>) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** Signs in on whatever sign-in form the page shows. */
async function signIn(page: Page) {
  await page.getByLabel('Email').fill(person.email);
  await page.getByLabel('Password').fill(person.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** The assistant connects; the person gives consent in Chromium (automations and messages, sending if `send`). */
async function connect(send: boolean): Promise<Client> {
  const provider = new MemoryProvider();
  const url = new URL(`${t.origin}/mcp`);
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await expect(new Client({ name: 'mail-assistant', version: '1.0.0' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
  const context = await browser.newContext();
  const page = await context.newPage();
  let callback: URL | undefined;
  await page.route(`${REDIRECT}**`, async (route) => {
    callback = new URL(route.request().url());
    await route.fulfill({ status: 200, contentType: 'text/plain', body: 'You can close this window.' });
  });
  await page.goto(provider.authorizationUrl!.href);
  await signIn(page);
  await page.getByLabel('automations', { exact: true }).check();
  await page.getByLabel('messages', { exact: true }).check();
  const sending = page.getByLabel('Send email and text messages on your behalf');
  await expect(sending.isChecked()).resolves.toBe(false);
  if (send) await sending.check();
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForURL(`${REDIRECT}**`);
  await context.close();
  await first.finishAuth(callback!.searchParams);
  const client = new Client({ name: 'mail-assistant', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
  return client;
}

async function tool(client: Client, name: string, args: Json) {
  return (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: { type: string; text: string }[]; structuredContent?: Json };
}

/** A mail from the outside arrives through the channel (as the receiver records it: the message and its event know the channel). */
async function mailArrives(text: string): Promise<string> {
  const res = await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', sender: 'customer@vendor.example', recipient: 'support@acme.example', summary: 'Order', text });
  expect(res.status, res.body).toBe(201);
  const id = (res.json.data as Json).id as string;
  await t.database.db.update(messages).set({ channelId }).where(eq(messages.id, id));
  await t.database.db
    .update(events)
    .set({ data: sql`jsonb_set(${events.data}::jsonb, '{channelId}', ${JSON.stringify(channelId)}::jsonb)::json` })
    .where(eq(events.resourceId, id));
  return id;
}

/** The assistant creates the forwarding rule and asks to approve it: answers the automation's id and the link. */
async function forwardingAsked(client: Client, name: string): Promise<{ id: string; link: string }> {
  const created = await tool(client, 'automations_write', {
    method: 'create',
    name,
    instructions: 'Forward every email to x@elsewhere.example',
    triggerEvent: 'message.received',
    actions: [{ operation: 'messages.forward', input: { id: '{{event.resourceId}}', to: ['x@elsewhere.example'] } }],
  });
  expect(created.isError, JSON.stringify(created.content)).toBeFalsy();
  const id = (created.structuredContent!.data as Json).id as string;
  await engine.runOnce();
  const asked = await tool(client, 'automations_write', { method: 'approve', id });
  expect(asked.isError, JSON.stringify(asked.content)).toBeFalsy();
  const link = `${t.origin}/account/automations/${id}`;
  expect(asked.structuredContent!.data).toMatchObject({ status: 'pending_approval', approvalUrl: link });
  expect(asked.content.some((c) => c.text.includes(link) && /person/.test(c.text))).toBe(true);
  return { id, link };
}

const status = async (id: string) => ((await a.request('GET', `/v1/automations/${id}`)).json.data as Json).status as string;

describe.skipIf(skipWithoutChromium())('an assistant asks, a person approves in Chromium', () => {
  it('approves a forwarding rule after reading it: the external address is marked, the preview rendered; the next mail is forwarded', async () => {
    const client = await connect(true);
    const earlier = await mailArrives('An earlier order');
    const { id, link } = await forwardingAsked(client, 'Forward all mail');
    expect(await status(id)).toBe('pending_approval');

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const cspViolations: string[] = [];
    page.on('console', (msg) => void (/Content Security Policy/i.test(msg.text()) && cspViolations.push(msg.text())));
    await page.goto(link);
    await signIn(page);
    await expect(page.getByRole('heading', { name: 'Forward all mail' }).isVisible()).resolves.toBe(true);
    await expect(page.locator('mark.external').first().textContent()).resolves.toBe('x@elsewhere.example');
    await expect(page.getByRole('note', { name: 'Outside your organization' }).isVisible()).resolves.toBe(true);
    // The dry run rendered the step for the latest mail: its id, not the template.
    const steps = (await page.getByRole('region', { name: 'Steps' }).textContent())!;
    expect(steps).toContain(earlier);
    expect(steps).not.toContain('{{event.resourceId}}');
    expect(steps).toMatch(/dry run on the latest message\.received event/);
    await expect(page.getByText('Mail Assistant').first().isVisible()).resolves.toBe(true);
    if (process.env.APPROVAL_SCREENSHOT) await page.screenshot({ path: process.env.APPROVAL_SCREENSHOT, fullPage: true });
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect(page.getByText('Approved: it runs from now on').isVisible()).resolves.toBe(true);
    expect(await status(id)).toBe('active');

    await mailArrives('Please send 40 crates');
    await engine.runOnce();
    await engine.runOnce();
    while ((await sender.runOnce()) > 0);
    const [mail] = await relay.waitFor(1, 10_000);
    expect(mail!.to).toContain('x@elsewhere.example');
    expect(mail!.raw.toString()).toContain('Please send 40 crates');

    // The list: waiting ones first, and it fits a phone's width.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${t.origin}/account/automations`);
    await expect(page.getByRole('listitem', { name: 'Forward all mail' }).getByRole('button', { name: 'Pause' }).isVisible()).resolves.toBe(true);
    await expect(page.evaluate(() => (globalThis as unknown as BrowserGlobals).document.documentElement.scrollWidth)).resolves.toBeLessThanOrEqual(390);
    await page.getByRole('listitem', { name: 'Forward all mail' }).getByRole('button', { name: 'Pause' }).click();
    expect(await status(id)).toBe('paused');
    expect(cspViolations).toEqual([]);
    await context.close();
    await client.close();
  });

  it('rejects one: archived with the reason, and it never forwards', async () => {
    const client = await connect(true);
    const { id, link } = await forwardingAsked(client, 'Forward to a stranger');
    const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const page = await context.newPage();
    await page.goto(link);
    await signIn(page);
    await expect(page.evaluate(() => (globalThis as unknown as BrowserGlobals).document.documentElement.scrollWidth)).resolves.toBeLessThanOrEqual(390);
    await page.getByLabel('Reason (optional)').fill('We never forward mail outside');
    await page.getByRole('button', { name: 'Reject' }).click();
    await expect(page.getByText('Rejected: the automation is archived').isVisible()).resolves.toBe(true);
    const row = (await a.request('GET', `/v1/automations/${id}`)).json.data as Json;
    expect(row).toMatchObject({ status: 'archived', statusReason: expect.stringContaining('We never forward mail outside') });
    await context.close();
    await client.close();
  });

  it('the same assistant without the sending consent cannot send, reply or forward', async () => {
    const client = await connect(false);
    const id = await mailArrives('Hello');
    for (const args of [
      { method: 'send', channelId, to: ['x@elsewhere.example'], subject: 'Hi', text: 'Hi' },
      { method: 'reply', id, text: 'Thanks' },
      { method: 'forward', id, to: ['x@elsewhere.example'] },
    ]) {
      const res = await tool(client, 'messages_write', args);
      expect(res.isError, args.method).toBe(true);
      expect(JSON.parse(res.content[0]!.text)).toMatchObject({ error: { code: 'FORBIDDEN', message: expect.stringContaining('Send email and text messages on your behalf') } });
    }
    await client.close();
  });
});

import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser } from '../../src/accounts/accounts.js';
import { automations } from '../../src/db/schema.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createAutomationEngine, type AutomationEngine } from '../../src/workers/automation-engine.js';
import { createMailSender } from '../../src/workers/mail-sender.js';
import { createSmsSender } from '../../src/workers/sms-sender.js';
import { createWebhookDelivery } from '../../src/workers/webhook-delivery.js';
import { ok, useTestApp } from '../helpers/app.js';
import { relayChannel } from '../helpers/domains.js';
import { startRelay, type Relay } from '../helpers/smtp-relay.js';
import { startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * Channel health for every kind: a text channel whose provider refuses its credentials and an email channel
 * whose relay refuses its login turn `error` with a `lastError` that says what to fix, and `active` again at
 * the next success; `channel.error` (once per outage) and `channel.recovered` reach webhooks and automations,
 * and "When a channel stops working, email me" mails the person who wrote it through an email channel that
 * works.
 */

const silent = { error: () => {}, warn: () => {} };
const clock = () => new Date();
const { t, a } = useTestApp({ credits: 1000, app: { env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_INSECURE: 'true' } } });
let twilio: FakeTwilio;
let relay: Relay;
let receiver: Receiver;
let engine: AutomationEngine;
let texts: ReturnType<typeof createSmsSender>;
let mail: ReturnType<typeof createMailSender>;
let hooks: ReturnType<typeof createWebhookDelivery>;

beforeAll(async () => {
  [twilio, relay, receiver] = await Promise.all([startFakeTwilio(), startRelay(), startReceiver()]);
  engine = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock, log: silent });
  texts = createSmsSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, sleep: async () => {} });
  mail = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
  hooks = createWebhookDelivery({ db: t.database.db, clock, log: silent, allowInsecure: true });
});
afterAll(async () => {
  await texts?.stop();
  await Promise.all([twilio?.close(), relay?.close(), receiver?.close()]);
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const channelOf = async (id: string) => (await ok(await a.request('GET', `/v1/channels/${id}`))) as Json;
const eventsOf = async (type: string) => ((await ok(await a.request('GET', `/v1/events?type=${type}&limit=50`))) as unknown as Json[]).reverse();

/** Everything the workers have to do, done: texts, automations, the mail they send, webhooks. */
async function settle() {
  await texts.runOnce();
  await texts.idle();
  for (let i = 0; i < 3; i++) await engine.runOnce();
  await mail.runOnce();
  await hooks.runOnce();
}

async function sendText(channelId: string, to: string) {
  return ok(await a.request('POST', '/v1/messages/send', { channelId, to: [to], text: 'Your order is ready' }), 201);
}

describe('channel health', () => {
  it('a text provider that refuses the token: error with what to fix, one channel.error, an email to the person who asked, active again at the next text', async () => {
    const office = await relayChannel(t.database.db, a, { name: 'Office', address: 'office@acme.example', port: relay.port, username: relay.user, password: relay.pass });
    const shop = await ok(
      await a.request('POST', '/v1/channels', { type: 'sms', name: 'Shop', address: '+12122004001', provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } }),
      201,
    );
    const hook = await ok(await a.request('POST', '/v1/webhooks', { url: receiver.url, eventTypes: ['channel.error', 'channel.recovered'] }), 201);
    expect(hook.eventTypes).toEqual(['channel.error', 'channel.recovered']);

    // "me": the person who wrote it (here the automation's creator is set to a person of the organization).
    const owner = await createUser(t.database.db, { orgId: a.orgId, email: 'owner@acme.example', password: 'correct horse battery' });
    const down = await ok(await a.request('POST', '/v1/automations', { name: 'Tell me', instructions: 'When a channel stops working, email me', status: 'active' }), 201);
    await t.database.db.update(automations).set({ createdVia: { type: 'user', id: owner.id, name: 'Owner' } }).where(eq(automations.id, down.id));
    const up = await ok(await a.request('POST', '/v1/automations', { name: 'Back', instructions: 'When a channel works again, email ops@acme.example', status: 'active' }), 201);
    await engine.runOnce();
    expect(await ok(await a.request('GET', `/v1/automations/${down.id}`))).toMatchObject({ status: 'active', triggerEvent: 'channel.error' });
    expect(await ok(await a.request('GET', `/v1/automations/${up.id}`))).toMatchObject({ status: 'active', triggerEvent: 'channel.recovered' });

    // The provider refuses the token (401, Twilio's 20003), twice: the channel is in error once.
    twilio.script({ kind: 'status', status: 401, code: 20003 }, { kind: 'status', status: 401, code: 20003 });
    await sendText(shop.id, '+12122004002');
    await settle();
    await sendText(shop.id, '+12122004003');
    await settle();
    const broken = await channelOf(shop.id);
    expect(broken.status).toBe('error');
    expect(broken.lastError).toMatch(/^provider: The text API: The provider answered 401 \(error 20003\).*check provider\.accountSid and provider\.authToken \(PATCH \/v1\/channels\/[0-9a-f-]{36}\)/);
    expect(broken.lastError).not.toContain(twilio.authToken);
    const errors = await eventsOf('channel.error');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ resourceId: shop.id, data: { id: shop.id, status: 'error', lastError: broken.lastError } });

    // The automation's notice went through the email channel that works, to the person.
    const [notice] = await relay.waitFor(1);
    expect(notice!.to).toEqual(['owner@acme.example']);
    const parsed = await simpleParser(notice!.raw);
    expect(parsed.subject).toBe('Channel "Shop" stopped working');
    expect(parsed.text).toContain('The channel "Shop" (+12122004001) stopped working');
    expect(parsed.text).toContain(`What failed: ${broken.lastError}`);
    expect(parsed.from?.value[0]?.address).toBe(office.address);

    // The next text the provider takes: active again, channel.recovered, and its automation's email.
    await sendText(shop.id, '+12122004004');
    await settle();
    expect(await channelOf(shop.id)).toMatchObject({ status: 'active', lastError: null });
    expect(await eventsOf('channel.recovered')).toMatchObject([{ resourceId: shop.id, data: { status: 'active', lastError: null } }]);
    const [, back] = await relay.waitFor(2);
    expect(back!.to).toEqual(['ops@acme.example']);
    expect((await simpleParser(back!.raw)).subject).toBe('Channel "Shop" works again');

    // Both reached the webhook endpoint.
    const delivered = receiver.received.map((r) => (JSON.parse(r.body) as { type: string; data: { id: string } }));
    expect(delivered.map((d) => [d.type, d.data.id])).toEqual([
      ['channel.error', shop.id],
      ['channel.recovered', shop.id],
    ]);
  });

  it('an email relay that refuses the login: error naming outbound.username and outbound.password, and the notice leaves through another channel', async () => {
    const before = relay.received.length;
    // (The first test's automation has mailed its person today already: automatic mail reaches a recipient once a day.)
    const it_ = await ok(await a.request('POST', '/v1/automations', { name: 'IT', instructions: 'When an email channel stops working, email it@acme.example', status: 'active' }), 201);
    await engine.runOnce();
    expect(await ok(await a.request('GET', `/v1/automations/${it_.id}`))).toMatchObject({ status: 'active', condition: { field: 'type', operator: 'equals', value: 'email' } });
    const broken = await relayChannel(t.database.db, a, { name: 'Sales', address: 'sales@acme.example', port: relay.port, username: relay.user, password: 'not-the-password' });
    await ok(await a.request('POST', '/v1/messages/send', { channelId: broken.id, to: ['ada@customer.example'], subject: 'Hello', text: 'Hi' }), 201);
    await settle(); // the send fails: channel.error
    await settle(); // the automation's notice
    const channel = await channelOf(broken.id);
    expect(channel.status).toBe('error');
    expect(channel.lastError).toMatch(/^relay: Sending through 127\.0\.0\.1: .*535.*check outbound\.username and outbound\.password/);
    expect((await eventsOf('channel.error')).map((e) => e.resourceId)).toContain(broken.id);
    // The notice about Sales went out through Office, the channel that works.
    const received = await relay.waitFor(before + 1);
    const notice = received.at(-1)!;
    expect(notice.to).toEqual(['it@acme.example']);
    expect((await simpleParser(notice.raw)).subject).toBe('Channel "Sales" stopped working');
    expect(notice.from).toBe('office@acme.example');
  });
});

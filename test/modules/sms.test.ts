import { randomBytes, randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smsOutbox } from '../../src/db/schema.js';
import { keywordOf } from '../../src/modules/channels/sms/sms.repository.js';
import { smsSize } from '../../src/modules/channels/sms/segments.js';
import { twilioSignature, validTwilioSignature } from '../../src/modules/channels/sms/providers/twilio.js';
import { createSmsSender, SMS_UNKNOWN_OUTCOME } from '../../src/workers/sms-sender.js';
import { TEST_ORIGIN, useTestApp, type Tenant } from '../helpers/app.js';
import { postWebhook, startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';

/**
 * Text messages end to end over a Twilio-compatible API: a local server plays Twilio as documented
 * (test/helpers/twilio.ts); webhooks are signed with the real algorithm; the SMS sender sends the outbox.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const silent = { error: () => {}, warn: () => {} };
const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true', SMS_HOOK_RATE_LIMIT: '30' } } });
let twilio: FakeTwilio;
let sender: ReturnType<typeof createSmsSender>;

beforeAll(async () => {
  twilio = await startFakeTwilio();
  sender = createSmsSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 1500, random: () => 0.5, sleep: async () => {} });
});
afterAll(async () => {
  await sender?.stop();
  await twilio?.close();
});

let numbers = 0;
/** A fresh valid US number (+1 212 2xx xxxx), unique in the file (a block of 1000 per call). */
const number = () => `+1212${String(2000000 + ++numbers * 1000 + Math.floor(Math.random() * 1000)).padStart(7, '0')}`;

async function addChannel(who: Tenant, extra: Json = {}) {
  const res = await who.request('POST', '/v1/channels', {
    type: 'sms',
    name: 'Support line',
    address: number(),
    provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url },
    ...extra,
  });
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

let sids = 0;
const sid = () => `SM${String(++sids).padStart(32, '0')}${randomBytes(2).toString('hex')}`;

/** A customer's text, delivered by the provider's webhook. */
async function incoming(channel: Json, from: string, body: string, messageSid = sid()) {
  const res = await postWebhook(t.app, `/hooks/sms/${channel.id}`, { MessageSid: messageSid, AccountSid: twilio.accountSid, From: from, To: channel.address, Body: body, NumMedia: '0' }, twilio.authToken);
  expect(res.status, res.body).toBe(200);
  return messageSid;
}

async function messageBy(who: Tenant, channelId: string, providerMessageId: string) {
  const list = (await who.request('GET', '/v1/messages?limit=100')).json.data as Json[];
  return list.find((m) => m.channelId === channelId && m.providerMessageId === providerMessageId);
}

const get = async (who: Tenant, id: string) => (await who.request('GET', `/v1/messages/${id}`)).json.data as Json;

async function drain() {
  await sender.runOnce();
  await sender.idle();
}

async function eventsOf(who: Tenant, type: string, resourceId: string) {
  const list = (await who.request('GET', `/v1/events?type=${type}&limit=100`)).json.data as Json[];
  return list.filter((e) => e.resourceId === resourceId);
}

describe('Twilio signature', () => {
  it("matches Twilio's published example", () => {
    const params = { CallSid: 'CA1234567890ABCDE', Caller: '+14158675310', Digits: '1234', From: '+14158675310', To: '+18005551212' };
    expect(twilioSignature('12345', 'https://mycompany.com/myapp.php?foo=1&bar=2', params)).toBe('GvWf1cFY/Q7PnoempGyD5oXAezc=');
    expect(validTwilioSignature('12345', 'https://mycompany.com/myapp.php?foo=1&bar=2', params, 'GvWf1cFY/Q7PnoempGyD5oXAezc=')).toBe(true);
    expect(validTwilioSignature('12345', 'https://mycompany.com/myapp.php?foo=1&bar=3', params, 'GvWf1cFY/Q7PnoempGyD5oXAezc=')).toBe(false);
    expect(validTwilioSignature('12345', 'https://mycompany.com/myapp.php?foo=1&bar=2', params, undefined)).toBe(false);
  });

  it('sizes texts in GSM-7 and UCS-2 segments; reads carrier keywords', () => {
    expect(smsSize('a'.repeat(160))).toMatchObject({ encoding: 'GSM-7', segments: 1 });
    expect(smsSize('a'.repeat(161))).toMatchObject({ encoding: 'GSM-7', segments: 2 });
    expect(smsSize('€'.repeat(80))).toMatchObject({ encoding: 'GSM-7', segments: 1 });
    expect(smsSize(`${'a'.repeat(69)}ł`)).toMatchObject({ encoding: 'UCS-2', segments: 1 });
    expect(smsSize(`${'a'.repeat(70)}ł`)).toMatchObject({ encoding: 'UCS-2', segments: 2 });
    expect(['stop', ' Stop ', 'UNSUBSCRIBE', 'quit.'].map(keywordOf)).toEqual(['stop', 'stop', 'stop', 'stop']);
    expect(['start', 'Yes', 'unstop', 'help', 'stop please'].map(keywordOf)).toEqual(['start', 'start', 'start', 'help', undefined]);
  });
});

describe('text channels', () => {
  it('creates a Twilio-style channel: the auth token is never answered, the webhook URLs are', async () => {
    const channel = await addChannel(a, { helpText: 'Acme support: reply STOP to stop.' });
    expect(channel).toMatchObject({ type: 'sms', inbound: { mode: 'sms', webhookUrl: `${TEST_ORIGIN}/hooks/sms/${channel.id}`, statusUrl: `${TEST_ORIGIN}/hooks/sms/${channel.id}/status` }, outbound: null, provider: { kind: 'twilio', accountSid: twilio.accountSid, authTokenSet: true }, rate: 1 });
    expect(JSON.stringify(channel)).not.toContain(twilio.authToken);
    const got = await a.request('GET', `/v1/channels/${channel.id}`);
    expect(JSON.stringify(got.json)).not.toContain(twilio.authToken);
    expect((await b.request('GET', `/v1/channels/${channel.id}`)).status).toBe(404);
    const test = await a.request('POST', `/v1/channels/${channel.id}/test`);
    expect(test.json.data).toMatchObject({ ok: true, outbound: { ok: true } });
    const patched = await a.request('PATCH', `/v1/channels/${channel.id}`, { rate: 5, provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } });
    expect(patched.status, patched.body).toBe(200);
    expect(patched.json.data).toMatchObject({ rate: 5, provider: { authTokenSet: true } });
  });

  it('refuses a bad address or provider at its field', async () => {
    const bad = await a.request('POST', '/v1/channels', { type: 'sms', name: 'x', address: 'not a number!', provider: { kind: 'twilio', accountSid: 'AC1', authToken: 't' } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.details.properties.address).toBeDefined();
    const noToken = await a.request('POST', '/v1/channels', { type: 'sms', name: 'x', address: number(), provider: { kind: 'twilio', accountSid: 'AC1' } });
    expect(noToken.status).toBe(400);
    expect(noToken.json.error.details.properties.provider).toBeDefined();
  });
});

describe('receiving', () => {
  it('a signed text becomes one incoming message, linked to the contact number, in the thread of the number', async () => {
    const channel = await addChannel(a);
    const customer = number();
    const contact = await a.request('POST', '/v1/contacts', { firstName: 'Ada', lastName: 'L' });
    const phone = await a.request('POST', `/v1/contacts/${contact.json.data.id}/phone-numbers`, { phoneNumber: customer, label: 'mobile' });
    expect(phone.status, phone.body).toBe(201);
    const res = await postWebhook(t.app, `/hooks/sms/${channel.id}`, { MessageSid: 'SMaaa1', From: customer, To: channel.address, Body: 'Hello there', NumMedia: '0' }, twilio.authToken);
    expect(res.status).toBe(200);
    expect(res.body).toContain('<Response/>');
    expect(res.headers['content-type']).toMatch(/xml/);
    const m = await messageBy(a, channel.id, 'SMaaa1');
    expect(m).toMatchObject({ type: 'sms', direction: 'incoming', text: 'Hello there', sender: { phoneNumber: customer }, recipient: { phoneNumber: channel.address }, providerName: 'twilio', phoneNumberId: phone.json.data.id, metadata: { sms: { encoding: 'GSM-7', segments: 1 } } });
    expect((await eventsOf(a, 'message.received', m!.id)).length).toBe(1);
    const second = await incoming(channel, customer, 'Again');
    const m2 = await messageBy(a, channel.id, second);
    expect(m2!.threadId).toBe(m!.threadId);
    const thread = await a.request('GET', `/v1/messages?threadId=${m!.threadId}`);
    expect(thread.json.data.map((x: Json) => x.id).sort()).toEqual([m!.id, m2!.id].sort());
  });

  it('a missing or wrong signature is a 403 that writes nothing; so is a signature over another URL', async () => {
    const channel = await addChannel(a);
    const params = { MessageSid: 'SMforged', From: number(), To: channel.address, Body: 'forged' };
    expect((await postWebhook(t.app, `/hooks/sms/${channel.id}`, params, twilio.authToken, { signature: '' })).status).toBe(403);
    expect((await postWebhook(t.app, `/hooks/sms/${channel.id}`, params, 'wrong-token')).status).toBe(403);
    const other = twilioSignature(twilio.authToken, `${TEST_ORIGIN}/hooks/sms/${randomUUID()}`, params);
    expect((await postWebhook(t.app, `/hooks/sms/${channel.id}`, params, twilio.authToken, { signature: other })).status).toBe(403);
    expect(await messageBy(a, channel.id, 'SMforged')).toBeUndefined();
    expect((await postWebhook(t.app, `/hooks/sms/${randomUUID()}`, params, twilio.authToken)).status).toBe(404);
  });

  it('the same MessageSid twice, also concurrently, is one message and both answers are 200', async () => {
    const channel = await addChannel(a);
    const from = number();
    const params = { MessageSid: 'SMdup1', From: from, To: channel.address, Body: 'Once' };
    const answers = await Promise.all([1, 2, 3].map(() => postWebhook(t.app, `/hooks/sms/${channel.id}`, params, twilio.authToken)));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
    const list = (await a.request('GET', '/v1/messages?limit=100')).json.data as Json[];
    expect(list.filter((m) => m.channelId === channel.id && m.providerMessageId === 'SMdup1')).toHaveLength(1);
  });

  it('bounds bodies, takes form posts only and limits webhooks per channel', async () => {
    const channel = await addChannel(a);
    const big = await postWebhook(t.app, `/hooks/sms/${channel.id}`, { MessageSid: 'SMbig', From: number(), To: channel.address, Body: 'x'.repeat(70 * 1024) }, twilio.authToken);
    expect(big.status).toBe(413);
    const json = await t.app.inject({ method: 'POST', url: `/hooks/sms/${channel.id}`, headers: { 'content-type': 'application/json' }, payload: '{}' });
    expect(json.statusCode).toBe(400);
    const answers = [];
    for (let i = 0; i < 32; i++) answers.push((await postWebhook(t.app, `/hooks/sms/${channel.id}/status`, { MessageSid: `SMnone${i}`, MessageStatus: 'sent' }, twilio.authToken)).status);
    expect(answers.filter((s) => s === 429).length).toBeGreaterThan(0);
    const limited = await postWebhook(t.app, `/hooks/sms/${channel.id}/status`, { MessageSid: 'SMx', MessageStatus: 'sent' }, twilio.authToken);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // Another channel is not limited by this one.
    const other = await addChannel(a);
    expect((await postWebhook(t.app, `/hooks/sms/${other.id}/status`, { MessageSid: 'SMy', MessageStatus: 'sent' }, twilio.authToken)).status).toBe(200);
  });

  it("unsigned posts spend neither the channel's rate nor lookups past their address's limit: the provider's signed text is taken", async () => {
    const channel = await addChannel(a);
    const statuses: Record<number, number> = {};
    for (let i = 0; i < 3000; i++) {
      const res = await postWebhook(t.app, `/hooks/sms/${channel.id}`, { MessageSid: `SMforged${i}`, From: number(), To: channel.address, Body: 'forged' }, 'not-the-token', { ip: '203.0.113.66' });
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    }
    // SMS_HOOK_FAILURE_LIMIT (60 a minute) refusals from one address, then 429 before anything is looked up.
    expect(statuses).toEqual({ 403: 60, 429: 2940 });
    const sid = await incoming(channel, number(), 'The real one');
    expect(await messageBy(a, channel.id, sid)).toMatchObject({ text: 'The real one' });
  });

  it('keeps short codes and alphanumeric senders raw', async () => {
    const channel = await addChannel(a);
    const s1 = await incoming(channel, '72345', 'Your code is 1234');
    const s2 = await incoming(channel, 'ACME', 'Hello');
    expect((await messageBy(a, channel.id, s1))!.sender).toEqual({ phoneNumber: '72345' });
    expect((await messageBy(a, channel.id, s2))!.sender).toEqual({ phoneNumber: 'ACME' });
  });
});

describe('sending', () => {
  it('sends through the outbox: queued, then the provider gets the documented request, then sent with its sid; receipts move it to delivered, never back', async () => {
    const channel = await addChannel(a);
    const to = number();
    const res = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Your order shipped' });
    expect(res.status, res.body).toBe(201);
    const queued = res.json.data;
    expect(queued).toMatchObject({ type: 'sms', direction: 'outgoing', status: 'queued', recipient: { phoneNumber: to }, sender: { phoneNumber: channel.address }, metadata: { sms: { encoding: 'GSM-7', segments: 1 } } });
    const before = twilio.sent.length;
    await drain();
    const request = twilio.sent[before]!;
    expect(request.auth).toBe(`Basic ${Buffer.from(`${twilio.accountSid}:${twilio.authToken}`).toString('base64')}`);
    expect(Object.fromEntries(request.form)).toMatchObject({ To: to, From: channel.address, Body: 'Your order shipped' });
    expect(request.form.get('StatusCallback')).toBe(`${TEST_ORIGIN}/hooks/sms/${channel.id}/status?m=${queued.id}`);
    const sent = await get(a, queued.id);
    expect(sent).toMatchObject({ status: 'sent', providerMessageId: request.sid });
    expect(await eventsOf(a, 'message.sent', queued.id)).toHaveLength(1);

    const status = (s: string, query = '') => postWebhook(t.app, `/hooks/sms/${channel.id}/status${query}`, { MessageSid: request.sid!, MessageStatus: s, To: to, From: channel.address }, twilio.authToken);
    expect((await status('delivered')).status).toBe(200);
    expect((await get(a, queued.id)).status).toBe('delivered');
    expect(await eventsOf(a, 'message.delivered', queued.id)).toHaveLength(1);
    expect((await status('sent')).status).toBe(200);
    expect((await status('delivered')).status).toBe(200);
    expect((await get(a, queued.id)).status).toBe('delivered');
    expect(await eventsOf(a, 'message.delivered', queued.id)).toHaveLength(1);
    // Nothing is sent twice.
    await drain();
    expect(twilio.sent.filter((s) => s.form.get('To') === to)).toHaveLength(1);
  });

  it('a delivery report that arrives before the send is answered still finds its message', async () => {
    const channel = await addChannel(a);
    const to = number();
    const res = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Fast' });
    twilio.script({
      kind: 'accept',
      before: async (sid, form) => {
        const callback = new URL(form.get('StatusCallback')!);
        const answer = await postWebhook(t.app, `${callback.pathname}${callback.search}`, { MessageSid: sid, MessageStatus: 'delivered', To: to }, twilio.authToken);
        expect(answer.status).toBe(200);
      },
    });
    await drain();
    const m = await get(a, res.json.data.id);
    expect(m.status).toBe('delivered');
    expect(m.providerMessageId).toMatch(/^SM/);
    expect(await eventsOf(a, 'message.delivered', m.id)).toHaveLength(1);
    expect(await eventsOf(a, 'message.sent', m.id)).toHaveLength(0);
  });

  it('retries 429 after Retry-After and 500 with backoff, then sends', async () => {
    const channel = await addChannel(a);
    const res = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [number()], text: 'Retry me' });
    const id = res.json.data.id as string;
    twilio.script({ kind: 'status', status: 429, code: 20429, retryAfter: '120' }, { kind: 'status', status: 500 });
    await drain();
    const [row] = await t.database.db.select().from(smsOutbox).where(eq(smsOutbox.messageId, id));
    expect(row!.status).toBe('pending');
    expect(row!.nextAttemptAt.getTime() - Date.now() - offsetMs).toBeGreaterThan(100_000);
    expect((await get(a, id)).status).toBe('queued');
    offsetMs += 121_000;
    await drain();
    expect((await t.database.db.select().from(smsOutbox).where(eq(smsOutbox.messageId, id)))[0]!.status).toBe('pending');
    offsetMs += 3600_000;
    await drain();
    expect((await get(a, id)).status).toBe('sent');
  });

  it('a 400 fails with the provider code; 21610 also records the opt-out with its event, and the next send is refused with 409', async () => {
    const channel = await addChannel(a);
    const to = number();
    const res = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Hi' });
    twilio.script({ kind: 'status', status: 400, code: 21610 });
    await drain();
    const m = await get(a, res.json.data.id);
    expect(m.status).toBe('failed');
    expect(m.statusReason).toContain('21610');
    expect(await eventsOf(a, 'message.failed', m.id)).toHaveLength(1);
    const optOuts = await a.request('GET', `/v1/channels/${channel.id}/opt-outs`);
    expect(optOuts.json.data).toEqual([expect.objectContaining({ phoneNumber: to, source: 'provider' })]);
    // Recorded like a STOP's opt-out: webhooks and automations hear of it.
    expect(await eventsOf(a, 'channel.opt_out.created', optOuts.json.data[0].id)).toHaveLength(1);
    const again = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Hi again' });
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe('RECIPIENT_OPTED_OUT');
    expect(again.json.error.message).toContain(to);
  });

  it('a request that left and got no answer is an unknown outcome: failed, never sent again', async () => {
    const channel = await addChannel(a);
    const to = number();
    const res = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Hang' });
    twilio.script({ kind: 'hang' });
    await drain();
    const m = await get(a, res.json.data.id);
    expect(m.status).toBe('failed');
    expect(m.statusReason).toContain(SMS_UNKNOWN_OUTCOME);
    offsetMs += 24 * 3600_000;
    await drain();
    expect(twilio.sent.filter((s) => s.form.get('To') === to)).toHaveLength(1);
  });

  it("paces a channel's texts at its rate (segments per second)", async () => {
    const channel = await addChannel(a, { rate: 5 });
    const paced = createSmsSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 1500 });
    const to = [number(), number(), number()];
    await a.request('POST', '/v1/messages/send', { channelId: channel.id, to, text: 'Paced' });
    for (let i = 0; i < 3; i++) {
      await paced.runOnce();
      await paced.idle();
    }
    const times = twilio.sent.filter((s) => to.includes(s.form.get('To')!)).map((s) => s.at);
    expect(times).toHaveLength(3);
    // 1 segment at 5 per second: at least 200 ms apart (a loaded machine only makes the gaps longer).
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(190);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(190);
  });

  it("takes over a dead process's claim: sent when the request had not left, an unknown outcome when it had", async () => {
    const channel = await addChannel(a);
    const [n1, n2] = [number(), number()];
    const first = (await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [n1], text: 'One' })).json.data;
    const second = (await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [n2], text: 'Two' })).json.data;
    const past = new Date(Date.now() + offsetMs - 1000);
    // As a process that died holding them left them: the first before its request left, the second after.
    await t.database.db.update(smsOutbox).set({ status: 'sending', attempt: 1, leaseUntil: past, transmittedAt: null }).where(eq(smsOutbox.messageId, first.id));
    await t.database.db.update(smsOutbox).set({ status: 'sending', attempt: 1, leaseUntil: past, transmittedAt: past }).where(eq(smsOutbox.messageId, second.id));
    await drain();
    await drain();
    expect((await get(a, first.id)).status).toBe('sent');
    expect(await get(a, second.id)).toMatchObject({ status: 'failed', statusReason: SMS_UNKNOWN_OUTCOME });
    expect(twilio.sent.filter((s) => s.form.get('To') === n1)).toHaveLength(1);
    expect(twilio.sent.filter((s) => s.form.get('To') === n2)).toHaveLength(0);
  });

  it("one channel's dead provider does not hold up another's texts", async () => {
    const slow = await addChannel(a);
    const fast = await addChannel(b);
    await a.request('POST', '/v1/messages/send', { channelId: slow.id, to: [number()], text: 'Slow' });
    twilio.script({ kind: 'hang' });
    await sender.runOnce(); // the slow channel's chain starts and hangs
    const res = await b.request('POST', '/v1/messages/send', { channelId: fast.id, to: [number()], text: 'Fast' });
    const started = Date.now();
    await sender.runOnce();
    for (let i = 0; i < 100 && (await get(b, res.json.data.id)).status !== 'sent'; i++) await new Promise((r) => setTimeout(r, 20));
    expect((await get(b, res.json.data.id)).status).toBe('sent');
    // Sent while the other channel's request still hangs (its timeout is 1.5 s).
    expect(Date.now() - started).toBeLessThan(1500);
    await sender.idle();
  });

  it("an organization's hanging provider with a backlog of 70 texts does not hold up another organization's text queued behind it", async () => {
    const dead = await startFakeTwilio();
    const live = createSmsSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, pollMs: 60_000 });
    try {
      dead.script(...Array.from({ length: 80 }, () => ({ kind: 'hang' }) as const));
      const slow = await addChannel(a, { provider: { kind: 'twilio', accountSid: dead.accountSid, authToken: dead.authToken, apiBaseUrl: dead.url } });
      const fast = await addChannel(b);
      const backlog: string[] = [];
      for (let i = 0; i < 70; i += 35) {
        const res = await a.request('POST', '/v1/messages/send', { channelId: slow.id, to: Array.from({ length: 35 }, number), text: 'Backlog' });
        expect(res.status, res.body).toBe(201);
        backlog.push(res.json.data.id as string);
      }
      const other = (await b.request('POST', '/v1/messages/send', { channelId: fast.id, to: [number()], text: 'Behind the backlog' })).json.data;
      live.start();
      for (let i = 0; i < 400 && (await get(b, other.id)).status !== 'sent'; i++) await new Promise((r) => setTimeout(r, 25));
      expect((await get(b, other.id)).status).toBe('sent');
      // Sent while the first of the backlog still hangs at the other organization's provider (its deadline is 5 s).
      expect(dead.sent.length).toBeGreaterThan(0);
      expect((await get(a, backlog[0]!)).status).toBe('queued');
    } finally {
      await live.stop();
      await dead.close();
    }
  });

  it('validates numbers and length; replies to a text by text in its thread', async () => {
    const channel = await addChannel(a);
    const bad = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: ['+1212555'], text: 'x' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json.error.details)).toContain('+1212555');
    const long = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [number()], text: 'a'.repeat(153 * 10 + 1) });
    expect(long.status).toBe(400);
    expect(long.json.error.details.properties.text).toBeDefined();
    const from = number();
    const inSid = await incoming(channel, from, 'Is my order ready?');
    const original = await messageBy(a, channel.id, inSid);
    const reply = await a.request('POST', `/v1/messages/${original!.id}/reply`, { text: 'Yes, ready for pickup ✅' });
    expect(reply.status, reply.body).toBe(201);
    expect(reply.json.data).toMatchObject({ type: 'sms', status: 'queued', recipient: { phoneNumber: from }, threadId: original!.threadId, metadata: { sms: { encoding: 'UCS-2', segments: 1 } } });
    await drain();
    expect((await get(a, reply.json.data.id)).status).toBe('sent');
    // An email channel still takes email.
    const email = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: ['ada@example.com'], subject: 'x', text: 'y' });
    expect(email.status).toBe(400);
  });
});

describe('opt-outs', () => {
  it('STOP records an opt-out and fails queued texts; START removes it; HELP answers the help text', async () => {
    const channel = await addChannel(a, { helpText: 'Acme: reply STOP to stop' });
    const from = number();
    const queued = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [from], text: 'Promo' });
    await incoming(channel, from, ' Stop ');
    expect((await get(a, queued.json.data.id)).status).toBe('failed');
    const list = await a.request('GET', `/v1/channels/${channel.id}/opt-outs`);
    expect(list.json.data).toEqual([expect.objectContaining({ phoneNumber: from, source: 'keyword' })]);
    expect((await a.request('GET', '/v1/events?type=channel.opt_out.created&limit=100')).json.data.some((e: Json) => e.data?.phoneNumber === from)).toBe(true);
    const refused = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [from], text: 'More' });
    expect(refused.status).toBe(409);
    await drain();
    expect(twilio.sent.filter((s) => s.form.get('To') === from)).toHaveLength(0);
    await incoming(channel, from, 'START');
    expect((await a.request('GET', `/v1/channels/${channel.id}/opt-outs`)).json.data).toEqual([]);
    await incoming(channel, from, 'help');
    await drain();
    expect(twilio.sent.filter((s) => s.form.get('To') === from).map((s) => s.form.get('Body'))).toEqual(['Acme: reply STOP to stop']);
  });

  it("Twilio's 21610 in a status callback opts out only the recipient of the channel's outgoing text it names, never the To it states", async () => {
    const channel = await addChannel(a);
    const other = await addChannel(a);
    const bystander = number();
    const status = (ch: Json, params: Record<string, string>, query = '') => postWebhook(t.app, `/hooks/sms/${ch.id}/status${query}`, params, twilio.authToken);
    // Naming no text of the channel: nobody is opted out.
    expect((await status(channel, { MessageSid: 'SMnothing', MessageStatus: 'undelivered', ErrorCode: '21610', To: bystander })).status).toBe(200);
    // Naming another channel's text, by its sid and by its id: not this channel's.
    const elsewhere = await a.request('POST', '/v1/messages/send', { channelId: other.id, to: [bystander], text: 'Elsewhere' });
    await drain();
    const theirs = await get(a, elsewhere.json.data.id);
    expect((await status(channel, { MessageSid: theirs.providerMessageId, MessageStatus: 'undelivered', ErrorCode: '21610', To: bystander }, `?m=${theirs.id}`)).status).toBe(200);
    expect((await get(a, theirs.id)).status).toBe('sent');
    expect((await a.request('GET', `/v1/channels/${channel.id}/opt-outs`)).json.data).toEqual([]);
    expect((await a.request('GET', `/v1/channels/${other.id}/opt-outs`)).json.data).toEqual([]);
    // Naming the channel's own text: its recipient, whatever To says.
    const to = number();
    const res = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Deal' });
    await drain();
    const mine = await get(a, res.json.data.id);
    expect((await status(channel, { MessageSid: mine.providerMessageId, MessageStatus: 'undelivered', ErrorCode: '21610', To: bystander })).status).toBe(200);
    expect(await get(a, mine.id)).toMatchObject({ status: 'failed', statusReason: expect.stringContaining('21610') });
    expect((await a.request('GET', `/v1/channels/${channel.id}/opt-outs`)).json.data).toEqual([expect.objectContaining({ phoneNumber: to, source: 'provider' })]);
  });

  it('a 21610 status callback replayed after the business removed the opt-out does not bring it back', async () => {
    const channel = await addChannel(a);
    const to = number();
    const res = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Offer' });
    await drain();
    const m = await get(a, res.json.data.id);
    const callback = { MessageSid: m.providerMessageId, MessageStatus: 'undelivered', ErrorCode: '21610', To: to };
    const post = (query = '') => postWebhook(t.app, `/hooks/sms/${channel.id}/status${query}`, callback, twilio.authToken);
    expect((await post(`?m=${m.id}`)).status).toBe(200);
    expect((await a.request('GET', `/v1/channels/${channel.id}/opt-outs`)).json.data).toEqual([expect.objectContaining({ phoneNumber: to, source: 'provider' })]);
    expect((await a.request('DELETE', `/v1/channels/${channel.id}/opt-outs/${encodeURIComponent(to)}`)).status).toBe(200);
    // The same signed callback, captured and posted again (with and without the message id in its URL).
    expect((await post(`?m=${m.id}`)).status).toBe(200);
    expect((await post()).status).toBe(200);
    expect((await a.request('GET', `/v1/channels/${channel.id}/opt-outs`)).json.data).toEqual([]);
    const again = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Welcome back' });
    expect(again.status, again.body).toBe(201);
  });

  it('are added, listed and removed through the API, only in the own organization', async () => {
    const channel = await addChannel(a);
    const n = number();
    const added = await a.request('POST', `/v1/channels/${channel.id}/opt-outs`, { phoneNumber: n });
    expect(added.status, added.body).toBe(201);
    expect(added.json.data).toMatchObject({ phoneNumber: n, source: 'api', channelId: channel.id });
    expect((await b.request('GET', `/v1/channels/${channel.id}/opt-outs`)).status).toBe(404);
    expect((await b.request('POST', `/v1/channels/${channel.id}/opt-outs`, { phoneNumber: n })).status).toBe(404);
    expect((await b.request('DELETE', `/v1/channels/${channel.id}/opt-outs/${encodeURIComponent(n)}`)).status).toBe(404);
    const bad = await a.request('POST', `/v1/channels/${channel.id}/opt-outs`, { phoneNumber: 'abc' });
    expect(bad.status).toBe(400);
    const removed = await a.request('DELETE', `/v1/channels/${channel.id}/opt-outs/${encodeURIComponent(n)}`);
    expect(removed.status, removed.body).toBe(200);
    expect((await a.request('GET', `/v1/channels/${channel.id}/opt-outs`)).json.data).toEqual([]);
    expect((await a.request('DELETE', `/v1/channels/${channel.id}/opt-outs/${encodeURIComponent(n)}`)).status).toBe(404);
  });
});

describe('SignalWire', () => {
  const signingKey = `PSK_${randomBytes(12).toString('hex')}`;
  /** A call signed as SignalWire signs it: Twilio's algorithm, keyed with the project's signing key, in X-SignalWire-Signature. */
  const signalwireHook = (path: string, params: Record<string, string>, key = signingKey, header = 'x-signalwire-signature') =>
    t.app.inject({
      method: 'POST',
      url: path,
      headers: { 'content-type': 'application/x-www-form-urlencoded', [header]: twilioSignature(key, `${TEST_ORIGIN}${path}`, params) },
      payload: new URLSearchParams(params).toString(),
    });

  it('takes webhooks signed with the signing key (X-SignalWire-Signature), sends with the API token, and its status callbacks reach delivered', async () => {
    const res = await a.request('POST', '/v1/channels', {
      type: 'sms',
      name: 'SignalWire line',
      address: number(),
      provider: { kind: 'signalwire', accountSid: twilio.accountSid, apiBaseUrl: twilio.url, authToken: twilio.authToken, signingKey },
    });
    expect(res.status, res.body).toBe(201);
    const channel = res.json.data as Json;
    expect(channel.provider).toMatchObject({ kind: 'signalwire', accountSid: twilio.accountSid, authTokenSet: true, signingKeySet: true });
    expect(JSON.stringify(channel)).not.toContain(signingKey);
    expect(JSON.stringify(channel)).not.toContain(twilio.authToken);
    expect(channel.inbound.webhookUrl).toBe(`${TEST_ORIGIN}/hooks/sms/${channel.id}`);

    const from = number();
    const params = { MessageSid: sid(), From: from, To: channel.address, Body: 'Hello from SignalWire', NumMedia: '0' };
    // Signed with the API token (as Twilio would), or in Twilio's header: not SignalWire's, refused.
    expect((await signalwireHook(`/hooks/sms/${channel.id}`, params, twilio.authToken)).statusCode).toBe(403);
    expect((await signalwireHook(`/hooks/sms/${channel.id}`, params, signingKey, 'x-twilio-signature')).statusCode).toBe(403);
    expect(await messageBy(a, channel.id, params.MessageSid)).toBeUndefined();
    const received = await signalwireHook(`/hooks/sms/${channel.id}`, params);
    expect(received.statusCode, received.body).toBe(200);
    expect(await messageBy(a, channel.id, params.MessageSid)).toMatchObject({ direction: 'incoming', text: 'Hello from SignalWire', providerName: 'signalwire' });

    const queued = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [from], text: 'Thanks' });
    expect(queued.status, queued.body).toBe(201);
    const before = twilio.sent.length;
    await drain();
    const request = twilio.sent[before]!;
    expect(request.auth).toBe(`Basic ${Buffer.from(`${twilio.accountSid}:${twilio.authToken}`).toString('base64')}`);
    expect(await get(a, queued.json.data.id)).toMatchObject({ status: 'sent', providerName: 'signalwire' });
    const statusPath = `/hooks/sms/${channel.id}/status?m=${queued.json.data.id}`;
    const report = { MessageSid: request.sid!, MessageStatus: 'delivered', To: from, From: channel.address };
    expect((await signalwireHook(statusPath, report, twilio.authToken)).statusCode).toBe(403);
    expect((await signalwireHook(statusPath, report)).statusCode).toBe(200);
    expect(await get(a, queued.json.data.id)).toMatchObject({ status: 'delivered' });
    expect(await eventsOf(a, 'message.delivered', queued.json.data.id)).toHaveLength(1);
  });

  it('a SignalWire channel whose credentials are refused says what to check in SignalWire', async () => {
    const res = await a.request('POST', '/v1/channels', {
      type: 'sms',
      name: 'SignalWire, wrong token',
      address: number(),
      provider: { kind: 'signalwire', accountSid: twilio.accountSid, apiBaseUrl: twilio.url, authToken: 'not-the-token', signingKey },
    });
    expect(res.status, res.body).toBe(201);
    const channel = res.json.data as Json;
    const queued = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [number()], text: 'Hello' });
    expect(queued.status, queued.body).toBe(201);
    await drain();
    const shown = (await a.request('GET', `/v1/channels/${channel.id}`)).json.data as Json;
    expect(shown.status).toBe('error');
    expect(shown.lastError).toMatch(/^provider: The text API: The provider answered 401 \(error 20003\).*the project in the SignalWire space/);
  });

  it('needs the signing key and the API base URL of the space, each at its field', async () => {
    const res = await a.request('POST', '/v1/channels', { type: 'sms', name: 'x', address: number(), provider: { kind: 'signalwire', accountSid: 'p', authToken: 't' } });
    expect(res.status).toBe(400);
    expect(Object.keys(res.json.error.details.properties.provider.properties).sort()).toEqual(['apiBaseUrl', 'signingKey']);
  });
});

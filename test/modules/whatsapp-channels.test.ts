import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { channels, whatsappOutbox } from '../../src/db/schema.js';
import type { Db } from '../../src/db/client.js';
import { createOutboxWorker } from '../../src/workers/outbox-worker.js';
import { whatsappSending } from '../../src/modules/channels/whatsapp/whatsapp.sender.js';
import { TEST_ORIGIN, toTestResponse, useTestApp, type Tenant } from '../helpers/app.js';
import { hubSignature, messagesChange, metaJson, textMessage, webhookBody } from '../helpers/meta-graph.js';
import { useFakeGraph, whatsappTestEnv } from '../helpers/whatsapp-app.js';

/** WhatsApp channels through the REST API (CONTRACT §10): create, read, change, test, send and reply. */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const { t, a, b } = useTestApp({ app: { env: whatsappTestEnv() } });
const graph = useFakeGraph();

let numbers = 0;
const number = () => `+49151${String(20_000_000 + ++numbers * 1000 + Math.floor(Math.random() * 1000)).padStart(8, '0')}`;
let ids = 0;
const phoneNumberId = () => String(300_000_000_000_000 + ++ids * 1000 + Math.floor(Math.random() * 1000));

async function addChannel(who: Tenant, provider: Json = {}, extra: Json = {}): Promise<Json> {
  const appSecret = randomBytes(16).toString('hex');
  const res = await who.request('POST', '/v1/channels', {
    type: 'whatsapp',
    name: 'Support on WhatsApp',
    address: number(),
    provider: { kind: 'meta', phoneNumberId: phoneNumberId(), accessToken: graph.accessToken, appSecret, apiBaseUrl: graph.url, ...provider },
    ...extra,
  });
  expect(res.status, res.body).toBe(201);
  return { ...(res.json.data as Json), appSecret };
}

async function customerWrites(channel: Json, from: string, body: string) {
  const m = textMessage(from.slice(1), body);
  const raw = metaJson(webhookBody([messagesChange(channel.provider.phoneNumberId, { contacts: [{ waId: from.slice(1), name: 'Ada' }], messages: [m] })]));
  const res = toTestResponse(await t.app.inject({ method: 'POST', url: `/hooks/whatsapp/${channel.id}`, headers: { 'content-type': 'application/json', 'x-hub-signature-256': hubSignature(channel.appSecret, raw) }, payload: raw }));
  expect(res.status, res.body).toBe(200);
  const list = (await a.request('GET', '/v1/messages?limit=100')).json.data as Json[];
  return list.find((x) => x.providerMessageId === m.id)!;
}

describe('WhatsApp channels', () => {
  it('creates a channel: secrets write-only and encrypted, the webhook URL and a verify token to paste into Meta', async () => {
    const channel = await addChannel(a, { businessAccountId: '102290129340398' });
    expect(channel).toMatchObject({
      type: 'whatsapp',
      status: 'active',
      inbound: { mode: 'whatsapp', webhookUrl: `${TEST_ORIGIN}/hooks/whatsapp/${channel.id}` },
      outbound: null,
      provider: { kind: 'meta', businessAccountId: '102290129340398', apiBaseUrl: graph.url, apiVersion: 'v24.0', accessTokenSet: true, appSecretSet: true },
      rate: 20,
    });
    expect(channel.inbound.verifyToken).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    const read = (await a.request('GET', `/v1/channels/${channel.id}`)).json.data;
    expect(read.inbound.verifyToken).toBe(channel.inbound.verifyToken);
    const body = JSON.stringify(read) + JSON.stringify((await a.request('GET', '/v1/channels')).json);
    expect(body).not.toContain(graph.accessToken);
    expect(body).not.toContain(channel.appSecret);
    const [row] = await t.database.db.select().from(channels).where(eq(channels.id, channel.id));
    expect(JSON.stringify(row)).not.toContain(graph.accessToken);
    expect(JSON.stringify(row)).not.toContain(channel.appSecret);
    // Another organization never sees it.
    expect((await b.request('GET', `/v1/channels/${channel.id}`)).status).toBe(404);
  });

  it('refuses bad settings at their own fields', async () => {
    const res = await a.request('POST', '/v1/channels', { type: 'whatsapp', name: 'x', address: 'not a number', provider: { kind: 'meta', phoneNumberId: 'abc', accessToken: 't', apiVersion: '24' } });
    expect(res.status).toBe(400);
    const props = res.json.error.details.properties;
    expect(Object.keys(props).sort()).toEqual(['address', 'provider']);
    expect(Object.keys(props.provider.properties).sort()).toEqual(['apiVersion', 'appSecret', 'phoneNumberId']);
  });

  it('changes rate and provider (a secret left out is kept); refuses what does not apply', async () => {
    const channel = await addChannel(a);
    const patched = await a.request('PATCH', `/v1/channels/${channel.id}`, { rate: 5, provider: { kind: 'meta', phoneNumberId: channel.provider.phoneNumberId, apiBaseUrl: graph.url, apiVersion: 'v23.0' } });
    expect(patched.status, patched.body).toBe(200);
    expect(patched.json.data).toMatchObject({ rate: 5, provider: { apiVersion: 'v23.0', accessTokenSet: true, appSecretSet: true } });
    // The fake speaks v24.0 only: the version is used, and the secrets kept work once it is set back.
    expect((await a.request('POST', `/v1/channels/${channel.id}/test`)).json.data.ok).toBe(false);
    await a.request('PATCH', `/v1/channels/${channel.id}`, { provider: { kind: 'meta', phoneNumberId: channel.provider.phoneNumberId, apiBaseUrl: graph.url } });
    expect((await a.request('POST', `/v1/channels/${channel.id}/test`)).json.data.ok).toBe(true);
    for (const [body, field] of [
      [{ provider: { kind: 'twilio', accountSid: 'AC1', authToken: 'x' } }, 'provider'],
      [{ helpText: 'Reply STOP' }, 'helpText'],
      [{ address: number() }, 'address'],
      [{ inbound: { mode: 'smtp' } }, 'inbound'],
    ] as const) {
      const res = await a.request('PATCH', `/v1/channels/${channel.id}`, body);
      expect(res.status, res.body).toBe(400);
      expect(Object.keys(res.json.error.details.properties)).toEqual([field]);
    }
  });

  it('tests the channel against Meta', async () => {
    const channel = await addChannel(a);
    const res = await a.request('POST', `/v1/channels/${channel.id}/test`);
    expect(res.status, res.body).toBe(200);
    expect(res.json.data).toMatchObject({ ok: true, inbound: { mode: 'whatsapp', ok: true }, outbound: { ok: true } });
  });
});

describe('sending through a WhatsApp channel', () => {
  it('refuses free-form text outside the 24-hour window with 409 WHATSAPP_WINDOW_CLOSED before anything reaches Meta; a template goes', async () => {
    const channel = await addChannel(a);
    const to = number();
    const before = graph.requests.length;
    const closed = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text: 'Hello' });
    expect(closed.status, closed.body).toBe(409);
    expect(closed.json.error.code).toBe('WHATSAPP_WINDOW_CLOSED');
    expect(graph.requests.length).toBe(before);
    const template = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], template: { name: 'order_update', language: 'en_US', components: [{ type: 'body', parameters: [{ type: 'text', text: 'Ada' }] }] } });
    expect(template.status, template.body).toBe(201);
    expect(template.json.data).toMatchObject({ type: 'whatsapp', direction: 'outgoing', status: 'queued', recipient: { phoneNumber: to }, text: null, metadata: { whatsapp: { type: 'template', template: { name: 'order_update' } } } });
    const neither = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to] });
    expect(neither.status).toBe(400);
  });

  it('sends text within the window, and replies to a received message answering it', async () => {
    const channel = await addChannel(a);
    const from = number();
    const received = await customerWrites(channel, from, 'Where is my order?');
    const sent = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [from], text: 'Checking' });
    expect(sent.status, sent.body).toBe(201);
    expect(sent.json.data.threadId).toBe(received.threadId);
    const reply = await a.request('POST', `/v1/messages/${received.id}/reply`, { text: 'It left today' });
    expect(reply.status, reply.body).toBe(201);
    expect(reply.json.data).toMatchObject({ type: 'whatsapp', recipient: { phoneNumber: from }, text: 'It left today', threadId: received.threadId, metadata: { whatsapp: { contextId: received.providerMessageId } } });
    const [row] = await t.database.db.select().from(whatsappOutbox).where(eq(whatsappOutbox.messageId, reply.json.data.id));
    // The recipient as its opt-out would be keyed (E.164); Meta is given the digits when it leaves.
    expect(row!.whatsapp).toEqual({ to: from, text: 'It left today', contextId: received.providerMessageId });
    expect((await a.request('POST', `/v1/messages/${received.id}/reply`, { text: 'x', html: '<b>x</b>' })).status).toBe(400);
  });
});

describe('the WhatsApp sender (the queue engine with Meta as its transmit step)', () => {
  const silent = { error: () => {}, warn: () => {} };
  const sendAll = async () => {
    const worker = createOutboxWorker({ name: 'senders', db: t.database.db, clock: () => new Date(), log: silent, pollMs: 60_000, queues: [whatsappSending({ db: t.database.db, clock: () => new Date(), log: silent, allowPrivate: true, sendTimeoutMs: 3000, random: () => 0.5 })] });
    await worker.pass();
    await worker.idle();
  };
  const read = async (id: string) => (await a.request('GET', `/v1/messages/${id}`)).json.data as Json;

  it("sends the queued messages in order: Meta's wamid becomes the providerMessageId, message.sent recorded; a reply carries its context", async () => {
    const channel = await addChannel(a);
    const from = number();
    const received = await customerWrites(channel, from, 'Hello?');
    const first = (await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [from], text: 'One' })).json.data as Json;
    const second = (await a.request('POST', `/v1/messages/${received.id}/reply`, { text: 'Two' })).json.data as Json;
    const before = graph.sent.length;
    await sendAll();
    const mine = graph.sent.slice(before).filter((s) => (s.body as Json).to === from.slice(1));
    const bodies = mine.map((s) => s.body as Json);
    expect(bodies).toMatchObject([
      { to: from.slice(1), type: 'text', text: { body: 'One' } },
      { to: from.slice(1), type: 'text', text: { body: 'Two' }, context: { message_id: received.providerMessageId } },
    ]);
    const [one, two] = [await read(first.id), await read(second.id)];
    expect(one).toMatchObject({ status: 'sent', providerMessageId: mine[0]!.wamid });
    expect(two).toMatchObject({ status: 'sent', providerMessageId: mine[1]!.wamid });
    const events = (await a.request('GET', '/v1/events?type=message.sent&limit=100')).json.data as Json[];
    expect(events.filter((e) => e.resourceId === first.id || e.resourceId === second.id)).toHaveLength(2);
    const after = graph.sent.length;
    await sendAll();
    expect(graph.sent.length).toBe(after); // each sent once
  });

  it("a token Meta refuses: the message fails with Meta's code and the channel shows the error", async () => {
    const channel = await addChannel(a);
    const to = number();
    const queued = (await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], template: { name: 'hello_world', language: 'en_US' } })).json.data as Json;
    graph.revoke();
    try {
      await sendAll();
    } finally {
      graph.revoke(false);
    }
    expect((await a.request('GET', `/v1/channels/${channel.id}`)).json.data.status).toBe('error');
    const message = await read(queued.id);
    expect(message.status).toBe('failed');
    expect(message.statusReason).toMatch(/190/);
  });

  it('queues a recipient as opt-outs key it: an opt-out recorded after queueing keeps the message from leaving; Meta gets the digits', async () => {
    const channel = await addChannel(a);
    const [stopped, other] = [number(), number()];
    const template = { name: 'hello_world', language: 'en_US' };
    const kept = (await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [stopped], template })).json.data as Json;
    const goes = (await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [other], template })).json.data as Json;
    const [row] = await t.database.db.select().from(whatsappOutbox).where(eq(whatsappOutbox.messageId, kept.id));
    expect(row!.whatsapp.to).toBe(stopped);
    expect((await a.request('POST', `/v1/channels/${channel.id}/opt-outs`, { phoneNumber: stopped })).status).toBe(201);
    const before = graph.sent.length;
    await sendAll();
    const bodies = graph.sent.slice(before).map((s) => s.body as Json);
    expect(bodies.map((x) => x.to)).toEqual([other.slice(1)]);
    expect(await read(kept.id)).toMatchObject({ status: 'failed', statusReason: expect.stringMatching(/opted out/) });
    expect((await read(goes.id)).status).toBe('sent');
  });

  it('an opt-out added through the API fails the messages still queued to the number at once, with their events, as for texts', async () => {
    const channel = await addChannel(a);
    const [stopped, other] = [number(), number()];
    const template = { name: 'hello_world', language: 'en_US' };
    const kept = (await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [stopped], template })).json.data as Json;
    const goes = (await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [other], template })).json.data as Json;
    expect((await a.request('POST', `/v1/channels/${channel.id}/opt-outs`, { phoneNumber: stopped })).status).toBe(201);
    // No sender has run: the opt-out itself failed it.
    expect(await read(kept.id)).toMatchObject({ status: 'failed', statusReason: expect.stringMatching(/opted out/) });
    expect((await read(goes.id)).status).toBe('queued');
    const [row] = await t.database.db.select().from(whatsappOutbox).where(eq(whatsappOutbox.messageId, kept.id));
    expect(row!.status).toBe('failed');
    const events = (await a.request('GET', `/v1/events?type=message.failed&limit=100`)).json.data as Json[];
    expect(events.filter((e) => e.resourceId === kept.id)).toHaveLength(1);
    // The other number's message still leaves.
    await sendAll();
    expect((await read(goes.id)).status).toBe('sent');
    expect((await read(kept.id)).status).toBe('failed');
  });

  it('fails a batch in one statement whatever its size (a disabled channel: every queued message fails, each with its event)', async () => {
    const channel = await addChannel(a);
    const template = { name: 'hello_world', language: 'en_US' };
    const queued: Json[] = [];
    for (let i = 0; i < 5; i++) queued.push((await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [number()], template })).json.data as Json);
    expect((await a.request('PATCH', `/v1/channels/${channel.id}`, { status: 'disabled' })).status).toBe(200);
    // The sender's statements that settle (its composed statements, in or out of a transaction) and its
    // outbox updates inside a transaction; the claim is an update outside one, not counted.
    let outboxWrites = 0;
    const db = t.database.db;
    const counted = <T extends object>(handle: T): T =>
      new Proxy(handle, {
        get(target, key, receiver) {
          if (key === 'execute') return (query: never) => (outboxWrites++, (target as { execute: (q: never) => unknown }).execute(query));
          if (key === 'transaction')
            return (fn: (tx: unknown) => Promise<unknown>) =>
              (target as unknown as Db).transaction((tx) =>
                fn(new Proxy(counted(tx), { get: (tt, k, r) => (k === 'update' ? (table: unknown) => (table === whatsappOutbox && outboxWrites++, tx.update(table as never)) : Reflect.get(tt, k, r)) })),
              );
          return Reflect.get(target, key, receiver);
        },
      });
    const counting = counted(db);
    const worker = createOutboxWorker({ name: 'senders', db, clock: () => new Date(), log: silent, pollMs: 60_000, queues: [whatsappSending({ db: counting, clock: () => new Date(), log: silent, allowPrivate: true, sendTimeoutMs: 3000, random: () => 0.5 })] });
    await worker.pass();
    await worker.idle();
    for (const m of queued) expect(await read(m.id)).toMatchObject({ status: 'failed', statusReason: 'The channel is disabled' });
    expect(outboxWrites).toBe(1);
    const events = (await a.request('GET', '/v1/events?type=message.failed&limit=100')).json.data as Json[];
    expect(events.filter((e) => queued.some((m) => m.id === e.resourceId))).toHaveLength(5);
  });
});

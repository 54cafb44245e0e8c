import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/core/operation.js';
import { contactPhoneNumbers, whatsappOutbox } from '../../src/db/schema.js';
import { channelRows } from '../../src/modules/channels/channels.repository.js';
import { createWhatsAppChannel, queueWhatsApp, type WhatsAppContent } from '../../src/modules/channels/whatsapp/whatsapp.repository.js';
import { WhatsAppChannelCreateInput } from '../../src/modules/channels/whatsapp/whatsapp.schemas.js';
import type { OperationRunner } from '../../src/modules/channels/runner.js';
import { applyDelivery, hookChannel } from '../../src/modules/channels/whatsapp/whatsapp.hooks.js';
import { runOperation } from '../../src/run-operation.js';
import { toTestResponse, useTestApp, type Tenant } from '../helpers/app.js';
import { hubSignature, messagesChange, metaJson, startFakeGraph, statusReport, textMessage, wamid, webhookBody, type FakeGraph } from '../helpers/meta-graph.js';

/**
 * WhatsApp's webhook end to end (CONTRACT §10): Meta's handshake and signed deliveries through the HTTP route,
 * into messages, events, windows and opt-outs on the real database.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true', SMS_HOOK_RATE_LIMIT: '40', SMS_HOOK_FAILURE_LIMIT: '1000' } } });
let graph: FakeGraph;
beforeAll(async () => {
  graph = await startFakeGraph();
});
afterAll(() => graph?.close());

let numbers = 0;
/** A fresh valid German mobile number, unique in the file. */
const number = () => `+49151${String(10_000_000 + ++numbers * 1000 + Math.floor(Math.random() * 1000)).padStart(8, '0')}`;
const digits = (n: string) => n.slice(1);
let ids = 0;
const phoneNumberId = () => String(200_000_000_000_000 + ++ids * 1000 + Math.floor(Math.random() * 1000));

interface Channel {
  id: string;
  address: string;
  phoneNumberId: string;
  appSecret: string;
  verifyToken: string;
}

async function addChannel(who: Tenant, opts: { appSecret?: string; phoneNumberId?: string } = {}): Promise<Channel> {
  const appSecret = opts.appSecret ?? randomBytes(16).toString('hex');
  const id = opts.phoneNumberId ?? phoneNumberId();
  const input = WhatsAppChannelCreateInput.parse({ type: 'whatsapp', name: 'Support on WhatsApp', address: number(), provider: { kind: 'meta', phoneNumberId: id, accessToken: graph.accessToken, appSecret, apiBaseUrl: graph.url } });
  const channel = await createWhatsAppChannel(t.database.db, who.orgId, input);
  return { id: channel.id, address: channel.address, phoneNumberId: id, appSecret, verifyToken: channel.inbound.verifyToken };
}

/** A delivery as Meta posts it: its own JSON bytes, signed with the app secret (or the given signature). */
async function deliver(channel: Pick<Channel, 'id' | 'appSecret'>, body: unknown, opts: { signature?: string | null; raw?: string; ip?: string } = {}) {
  const raw = opts.raw ?? metaJson(body);
  const signature = opts.signature === undefined ? hubSignature(channel.appSecret, raw) : opts.signature;
  const res = await t.app.inject({
    method: 'POST',
    url: `/hooks/whatsapp/${channel.id}`,
    ...(opts.ip ? { remoteAddress: opts.ip } : {}),
    headers: { 'content-type': 'application/json', ...(signature !== null ? { 'x-hub-signature-256': signature } : {}) },
    payload: raw,
  });
  return toTestResponse(res);
}

const one = (channel: Channel, value: Parameters<typeof messagesChange>[1]) => webhookBody([messagesChange(channel.phoneNumberId, value)]);

async function messagesOf(who: Tenant, channelId: string): Promise<Json[]> {
  const list = (await who.request('GET', '/v1/messages?limit=100')).json.data as Json[];
  return list.filter((m) => m.channelId === channelId);
}
const byWamid = async (who: Tenant, channelId: string, id: string) => (await messagesOf(who, channelId)).find((m) => m.providerMessageId === id);

async function eventsOf(who: Tenant, type: string, resourceId: string) {
  const list = (await who.request('GET', `/v1/events?type=${type}&limit=100`)).json.data as Json[];
  return list.filter((e) => e.resourceId === resourceId);
}

const SYSTEM: Actor = { type: 'system', id: null, depth: 0 };
async function queue(who: Tenant, channelId: string, to: string, content: WhatsAppContent, actor: Actor = SYSTEM, contextId?: string) {
  const row = await channelRows.get(t.database.db, who.orgId, channelId);
  return t.database.db.transaction((tx) => queueWhatsApp(tx, who.orgId, actor, row, to, content, { contextId }));
}
/** Records an outgoing message as sent by Meta with this wamid (what the sender does after Meta's answer). */
async function sentMessage(who: Tenant, channel: Channel, to: string) {
  const m = await queue(who, channel.id, to, { template: { name: 'hello_world', language: 'en_US' } });
  const id = wamid();
  await t.database.db.execute(`UPDATE messages SET provider_message_id = '${id}', status = 'sent' WHERE id = '${m.id}'` as never);
  return { messageId: m.id, wamid: id };
}

describe('subscription handshake', () => {
  it('answers the challenge as text for the right token and mode, 403 otherwise, 404 for no channel', async () => {
    const channel = await addChannel(a);
    expect(channel.verifyToken).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    const get = (query: string, id = channel.id) => t.app.inject({ method: 'GET', url: `/hooks/whatsapp/${id}?${query}` });
    const okRes = await get(`hub.mode=subscribe&hub.verify_token=${channel.verifyToken}&hub.challenge=1158201444`);
    expect(okRes.statusCode).toBe(200);
    expect(okRes.body).toBe('1158201444');
    expect(okRes.headers['content-type']).toMatch(/^text\/plain/);
    expect((await get(`hub.mode=subscribe&hub.verify_token=${channel.verifyToken.slice(1)}x&hub.challenge=1`)).statusCode).toBe(403);
    expect((await get(`hub.mode=unsubscribe&hub.verify_token=${channel.verifyToken}&hub.challenge=1`)).statusCode).toBe(403);
    expect((await get(`hub.verify_token=${channel.verifyToken}&hub.challenge=1`)).statusCode).toBe(403);
    expect((await get(`hub.mode=subscribe&hub.verify_token=${channel.verifyToken}&hub.challenge=1`, '00000000-0000-4000-8000-000000000000')).statusCode).toBe(404);
  });
});

describe('signature', () => {
  it('stores a delivery signed over its bytes as Meta wrote them (escaped "/" and non-ASCII)', async () => {
    const channel = await addChannel(a);
    const from = number();
    const m = textMessage(digits(from), 'Zoë asks: is https://shop.example/a/b in stock?');
    const raw = metaJson(one(channel, { contacts: [{ waId: digits(from), name: 'Zoë' }], messages: [m] }));
    expect(raw).toContain('\\/');
    expect(raw).toContain('\\u00eb');
    const res = await deliver(channel, undefined, { raw });
    expect(res.status, res.body).toBe(200);
    expect((await byWamid(a, channel.id, m.id))?.text).toBe('Zoë asks: is https://shop.example/a/b in stock?');
  });

  it('refuses (401) a missing or wrong signature, and the same JSON re-serialized with other spacing, storing nothing', async () => {
    const channel = await addChannel(a);
    const m = textMessage(digits(number()), 'Café / crème');
    const body = one(channel, { messages: [m] });
    const raw = metaJson(body);
    const signature = hubSignature(channel.appSecret, raw);
    for (const [signatureSent, rawSent] of [
      [null, raw],
      ['sha256=', raw],
      [hubSignature('another secret', raw), raw],
      [signature, JSON.stringify(body)],
      [signature, JSON.stringify(JSON.parse(raw), null, 1)],
      [signature, raw.replace(/":"/g, '": "')],
    ] as const) {
      const res = await deliver(channel, undefined, { raw: rawSent, signature: signatureSent });
      expect(res.status, res.body).toBe(401);
      expect(res.json.error.code).toBe('UNAUTHORIZED');
    }
    expect(await messagesOf(a, channel.id)).toHaveLength(0);
    expect((await deliver(channel, undefined, { raw, signature })).status).toBe(200);
  });

  it('bounds the body (413) and refuses an unreadable signed body (400)', async () => {
    const channel = await addChannel(a);
    const huge = 'x'.repeat(1024 * 1024 + 10);
    expect((await deliver(channel, undefined, { raw: huge })).status).toBe(413);
    const res = await deliver(channel, undefined, { raw: '{"entry": 5' });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('BAD_REQUEST');
  });
});

describe('received messages', () => {
  it("stores a text with its wamid, its own timestamp, the sender from contacts[], the channel's address as recipient", async () => {
    const channel = await addChannel(a);
    const from = number();
    const m = { ...textMessage(digits(from), 'Does it come in blue?'), timestamp: '1764316800' };
    expect((await deliver(channel, one(channel, { contacts: [{ waId: digits(from), name: 'Sheena' }], messages: [m] }))).status).toBe(200);
    const stored = await byWamid(a, channel.id, m.id);
    expect(stored).toMatchObject({
      type: 'whatsapp',
      direction: 'incoming',
      providerMessageId: m.id,
      providerName: 'meta',
      timestamp: '2025-11-28T08:00:00.000Z',
      sender: { phoneNumber: from, whatsappId: digits(from), name: 'Sheena' },
      recipient: { phoneNumber: channel.address },
      text: 'Does it come in blue?',
      metadata: { whatsapp: { type: 'text' } },
    });
    expect(await eventsOf(a, 'message.received', stored!.id)).toHaveLength(1);
  });

  it('stores a delivery with NUL characters in its strings without them, so Meta does not retry it for ever', async () => {
    const channel = await addChannel(a);
    const from = number();
    const m = textMessage(digits(from), 'Null\u0000 inside');
    const res = await deliver(channel, one(channel, { contacts: [{ waId: digits(from), name: 'She\u0000ena' }], messages: [m] }));
    expect(res.status).toBe(200);
    expect(await byWamid(a, channel.id, m.id)).toMatchObject({ sender: { name: 'Sheena' }, text: 'Null inside' });
  });

  it('processes every entry, change, message and status of a batch', async () => {
    const channel = await addChannel(a);
    const [x, y] = [number(), number()];
    const sent = await sentMessage(a, channel, x);
    const msgs = [textMessage(digits(x), 'one'), textMessage(digits(y), 'two'), textMessage(digits(x), 'three'), textMessage(digits(y), 'four')];
    const body = webhookBody(
      [messagesChange(channel.phoneNumberId, { contacts: [{ waId: digits(x) }, { waId: digits(y) }], messages: [msgs[0], msgs[1]] }), messagesChange(channel.phoneNumberId, { statuses: [statusReport(sent.wamid, 'delivered', digits(x))] })],
      [messagesChange(channel.phoneNumberId, { contacts: [{ waId: digits(x) }, { waId: digits(y) }], messages: [msgs[2], msgs[3]] })],
    );
    expect((await deliver(channel, body)).status).toBe(200);
    const stored = await messagesOf(a, channel.id);
    expect(stored.filter((m) => m.direction === 'incoming').map((m) => m.text).sort()).toEqual(['four', 'one', 'three', 'two']);
    expect((await a.request('GET', `/v1/messages/${sent.messageId}`)).json.data.status).toBe('delivered');
  });

  it('routes a change by phone_number_id to the channel of the same organization with the same app secret; ignores any other', async () => {
    const secret = randomBytes(16).toString('hex');
    const first = await addChannel(a, { appSecret: secret });
    const second = await addChannel(a, { appSecret: secret });
    const otherSecret = await addChannel(a);
    const otherOrg = await addChannel(b, { appSecret: secret });
    const [m1, m2, m3, m4, m5] = Array.from({ length: 5 }, (_, i) => textMessage(digits(number()), `routed ${i}`));
    const body = webhookBody([
      messagesChange(first.phoneNumberId, { messages: [m1] }),
      messagesChange(second.phoneNumberId, { messages: [m2] }),
      messagesChange(otherSecret.phoneNumberId, { messages: [m3] }),
      messagesChange(otherOrg.phoneNumberId, { messages: [m4] }),
      messagesChange('999999999', { messages: [m5] }),
    ]);
    expect((await deliver(first, body)).status).toBe(200);
    expect((await messagesOf(a, first.id)).map((m) => m.text)).toEqual(['routed 0']);
    expect((await messagesOf(a, second.id)).map((m) => m.text)).toEqual(['routed 1']);
    expect(await messagesOf(a, otherSecret.id)).toHaveLength(0);
    expect(await messagesOf(b, otherOrg.id)).toHaveLength(0);
  });

  it('stores the same wamid once, with one event, also when two deliveries arrive at once', async () => {
    const channel = await addChannel(a);
    const m = textMessage(digits(number()), 'twice');
    const body = one(channel, { messages: [m] });
    expect((await deliver(channel, body)).status).toBe(200);
    expect((await deliver(channel, body)).status).toBe(200);
    const at = textMessage(digits(number()), 'at once');
    const both = await Promise.all([deliver(channel, one(channel, { messages: [at] })), deliver(channel, one(channel, { messages: [at] }))]);
    expect(both.map((r) => r.status)).toEqual([200, 200]);
    for (const id of [m.id, at.id]) {
      const stored = (await messagesOf(a, channel.id)).filter((x) => x.providerMessageId === id);
      expect(stored).toHaveLength(1);
      expect(await eventsOf(a, 'message.created', stored[0]!.id)).toHaveLength(1);
    }
  });

  it('keeps every kind with its text, and an unknown or unsupported kind with text null, without holding back the batch', async () => {
    const channel = await addChannel(a);
    const from = digits(number());
    const base = (type: string, part: Json) => ({ from, id: wamid(), timestamp: String(Math.floor(Date.now() / 1000)), type, ...part });
    const list = [
      base('reaction', { reaction: { message_id: 'wamid.X', emoji: '❤️' } }),
      base('button', { button: { payload: 'STOP_PROMOS', text: 'No more offers' } }),
      base('interactive', { interactive: { type: 'button_reply', button_reply: { id: 'b1', title: 'Track order' } } }),
      base('interactive', { interactive: { type: 'list_reply', list_reply: { id: 'r1', title: 'Returns' } } }),
      base('location', { location: { latitude: 52.52, longitude: 13.405 } }),
      base('contacts', { contacts: [{ name: { formatted_name: 'Cy' }, phones: [{ phone: '+1 555 0100' }] }] }),
      base('unsupported', { errors: [{ code: 131051, title: 'Message type unknown' }] }),
      base('hologram', { hologram: {} }),
      base('text', { text: { body: 'after the unknown ones' } }),
    ];
    expect((await deliver(channel, one(channel, { messages: list }))).status).toBe(200);
    const stored = await messagesOf(a, channel.id);
    const kind = (id: string) => stored.find((m) => m.providerMessageId === id)!;
    expect(list.map((m) => [kind(m.id).metadata.whatsapp.type, kind(m.id).text])).toEqual([
      ['reaction', '❤️'],
      ['button', 'No more offers'],
      ['interactive', 'Track order'],
      ['interactive', 'Returns'],
      ['location', null],
      ['contacts', null],
      ['unsupported', null],
      ['hologram', null],
      ['text', 'after the unknown ones'],
    ]);
    expect(kind(list[4]!.id).metadata.whatsapp.location).toMatchObject({ latitude: 52.52, longitude: 13.405 });
  });

  it("threads a reply by context.id into that message's thread, otherwise per (channel, sender)", async () => {
    const channel = await addChannel(a);
    const [x, y] = [number(), number()];
    const sent = await sentMessage(a, channel, x);
    const sentRow = (await a.request('GET', `/v1/messages/${sent.messageId}`)).json.data;
    // y answers the template x got (a forwarded message): the context puts it in that thread.
    const answer = textMessage(digits(y), 'about that', { context: { from: digits(channel.address), id: sent.wamid } });
    const plain = textMessage(digits(y), 'new topic');
    await deliver(channel, one(channel, { messages: [answer, plain] }));
    expect((await byWamid(a, channel.id, answer.id))!.threadId).toBe(sentRow.threadId);
    expect((await byWamid(a, channel.id, answer.id))!.metadata.whatsapp.contextId).toBe(sent.wamid);
    const plainRow = (await byWamid(a, channel.id, plain.id))!;
    expect(plainRow.threadId).not.toBe(sentRow.threadId);
    const later = textMessage(digits(y), 'again');
    await deliver(channel, one(channel, { messages: [later] }));
    expect((await byWamid(a, channel.id, later.id))!.threadId).toBe(plainRow.threadId);
  });

  it('keeps a sender known only by its business-scoped user id, and answers it by that id', async () => {
    const channel = await addChannel(a);
    const userId = `US.${Date.now()}${Math.floor(Math.random() * 1e6)}`;
    const m = { from_user_id: userId, id: wamid(), timestamp: String(Math.floor(Date.now() / 1000)), type: 'text', text: { body: 'no number here' } };
    await deliver(channel, one(channel, { contacts: [{ userId, name: 'Anon' }], messages: [m] }));
    const stored = (await byWamid(a, channel.id, m.id))!;
    expect(stored.sender).toEqual({ userId, name: 'Anon' });
    const reply = await queue(a, channel.id, userId, { text: 'We can help' });
    expect(reply.recipient).toEqual({ userId });
    expect(reply.threadId).toBe(stored.threadId);
    const [row] = await t.database.db.select().from(whatsappOutbox).where(eq(whatsappOutbox.messageId, reply.id));
    expect(row!.whatsapp.to).toBe(userId);
  });

  it('finds the contact by phone number, so one customer over SMS and WhatsApp is one contact', async () => {
    const channel = await addChannel(a);
    const from = number();
    const contact = (await a.request('POST', '/v1/contacts', { name: 'Ada' })).json.data;
    expect((await a.request('POST', `/v1/contacts/${contact.id}/phone-numbers`, { phoneNumber: from })).status).toBe(201);
    const [phone] = await t.database.db.select().from(contactPhoneNumbers).where(eq(contactPhoneNumbers.phoneNumber, from));
    const m = textMessage(digits(from), 'hello');
    await deliver(channel, one(channel, { messages: [m] }));
    expect((await byWamid(a, channel.id, m.id))!.phoneNumberId).toBe(phone!.id);
  });
});

describe('status', () => {
  it('moves forward only; read without delivered records both events; a late report changes nothing', async () => {
    const channel = await addChannel(a);
    const to = number();
    const sent = await sentMessage(a, channel, to);
    await deliver(channel, one(channel, { statuses: [statusReport(sent.wamid, 'read', digits(to))] }));
    expect((await a.request('GET', `/v1/messages/${sent.messageId}`)).json.data.status).toBe('read');
    expect(await eventsOf(a, 'message.delivered', sent.messageId)).toHaveLength(1);
    expect(await eventsOf(a, 'message.read', sent.messageId)).toHaveLength(1);
    await deliver(channel, one(channel, { statuses: [statusReport(sent.wamid, 'delivered', digits(to)), statusReport(sent.wamid, 'sent', digits(to))] }));
    expect((await a.request('GET', `/v1/messages/${sent.messageId}`)).json.data.status).toBe('read');
    expect(await eventsOf(a, 'message.delivered', sent.messageId)).toHaveLength(1);
  });

  it("asks Meta to deliver again (503) a status that arrives before its send's answer, and applies it then", async () => {
    const channel = await addChannel(a);
    const to = number();
    await deliver(channel, one(channel, { messages: [textMessage(digits(to), 'hi')] }));
    const m = await queue(a, channel.id, to, { text: 'on its way' });
    const id = wamid();
    // The send left (transmitted_at committed) and Meta's answer is not written yet.
    await t.database.db.update(whatsappOutbox).set({ status: 'sending', transmittedAt: new Date(), leaseUntil: new Date(Date.now() + 60_000) }).where(eq(whatsappOutbox.messageId, m.id));
    const early = await deliver(channel, one(channel, { statuses: [statusReport(id, 'delivered', digits(to))] }));
    expect(early.status).toBe(503);
    expect(early.headers['retry-after']).toBe('5');
    await t.database.db.execute(`UPDATE messages SET provider_message_id = '${id}', status = 'sent' WHERE id = '${m.id}'` as never);
    await t.database.db.update(whatsappOutbox).set({ status: 'sent', leaseUntil: null }).where(eq(whatsappOutbox.messageId, m.id));
    expect((await deliver(channel, one(channel, { statuses: [statusReport(id, 'delivered', digits(to))] }))).status).toBe(200);
    expect((await a.request('GET', `/v1/messages/${m.id}`)).json.data.status).toBe('delivered');
    // A status of a message this service never sent is acknowledged when no send is under way.
    expect((await deliver(channel, one(channel, { statuses: [statusReport(wamid(), 'read', digits(to))] }))).status).toBe(200);
  });

  it('applies status reports through the operation runner (messages.report), as received messages are (messages.receive)', async () => {
    const channel = await addChannel(a);
    const to = number();
    const sent = await sentMessage(a, channel, to);
    const ran: string[] = [];
    const run: OperationRunner = (op, raw, caller) => (ran.push(op.id), runOperation(op, raw, caller));
    const raw = Buffer.from(metaJson(one(channel, { messages: [textMessage(digits(to), 'thanks')], statuses: [statusReport(sent.wamid, 'delivered', digits(to)), statusReport(sent.wamid, 'read', digits(to))] })));
    const summary = await applyDelivery({ run, db: t.database.db }, (await hookChannel(t.database.db, channel.id))!, raw);
    expect(summary).toMatchObject({ received: 1, statuses: 2 });
    expect(ran).toEqual(['messages.receive', 'messages.report']);
    expect((await a.request('GET', `/v1/messages/${sent.messageId}`)).json.data.status).toBe('read');
    expect(await eventsOf(a, 'message.read', sent.messageId)).toHaveLength(1);
  });

  it("fails with Meta's code and title", async () => {
    const channel = await addChannel(a);
    const to = number();
    const sent = await sentMessage(a, channel, to);
    await deliver(channel, one(channel, { statuses: [statusReport(sent.wamid, 'failed', digits(to), { code: 131026, title: 'Message undeliverable' })] }));
    const m = (await a.request('GET', `/v1/messages/${sent.messageId}`)).json.data;
    expect(m.status).toBe('failed');
    expect(m.statusReason).toBe('Meta reported the message failed (error 131026: Message undeliverable)');
    expect(await eventsOf(a, 'message.failed', sent.messageId)).toHaveLength(1);
  });
});

describe('window and opt-outs', () => {
  it('refuses free-form text outside the 24-hour window (409 WHATSAPP_WINDOW_CLOSED, nothing queued); a template goes any time', async () => {
    const channel = await addChannel(a);
    const to = number();
    await expect(queue(a, channel.id, to, { text: 'hi' })).rejects.toMatchObject({ code: 'WHATSAPP_WINDOW_CLOSED', status: 409 });
    await expect(queue(a, channel.id, to, { text: 'hi' }, { type: 'automation', id: '00000000-0000-4000-8000-000000000001', depth: 1 })).rejects.toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringContaining('24 hours') });
    const rows = await t.database.db.select().from(whatsappOutbox).where(eq(whatsappOutbox.channelId, channel.id));
    expect(rows).toHaveLength(0);
    expect((await queue(a, channel.id, to, { template: { name: 'hello_world', language: 'en_US' } })).status).toBe('queued');
    // An old message does not open the window; a recent one does.
    await deliver(channel, one(channel, { messages: [{ ...textMessage(digits(to), 'old'), timestamp: String(Math.floor(Date.now() / 1000) - 25 * 3600) }] }));
    await expect(queue(a, channel.id, to, { text: 'hi' })).rejects.toMatchObject({ code: 'WHATSAPP_WINDOW_CLOSED' });
    await deliver(channel, one(channel, { messages: [textMessage(digits(to), 'now')] }));
    expect((await queue(a, channel.id, to, { text: 'hi' })).status).toBe('queued');
  });

  it('records STOP as an opt-out: sending to it is 409 RECIPIENT_OPTED_OUT; START removes it', async () => {
    const channel = await addChannel(a);
    const from = number();
    await deliver(channel, one(channel, { messages: [textMessage(digits(from), 'hello')] }));
    const queued = await queue(a, channel.id, from, { text: 'still waiting' });
    await deliver(channel, one(channel, { messages: [textMessage(digits(from), 'STOP')] }));
    const optOuts = (await a.request('GET', `/v1/channels/${channel.id}/opt-outs`)).json.data as Json[];
    expect(optOuts.map((o) => [o.phoneNumber, o.source])).toEqual([[from, 'keyword']]);
    expect((await a.request('GET', `/v1/messages/${queued.id}`)).json.data.status).toBe('failed');
    await expect(queue(a, channel.id, from, { text: 'hi' })).rejects.toMatchObject({ code: 'RECIPIENT_OPTED_OUT', status: 409 });
    await deliver(channel, one(channel, { messages: [textMessage(digits(from), 'START')] }));
    expect((await a.request('GET', `/v1/channels/${channel.id}/opt-outs`)).json.data).toHaveLength(0);
  });
});

describe('limits', () => {
  it('rate limits signed deliveries per channel (429 with Retry-After), not another channel', async () => {
    const channel = await addChannel(a);
    const other = await addChannel(a);
    let limited;
    for (let i = 0; i < 45 && !limited; i++) {
      const res = await deliver(channel, one(channel, { statuses: [] }));
      if (res.status === 429) limited = res;
    }
    expect(limited?.headers['retry-after']).toBeDefined();
    expect((await deliver(other, one(other, { statuses: [] }))).status).toBe(200);
  });
});

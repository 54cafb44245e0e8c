import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWhatsAppChannel } from '../../src/modules/channels/whatsapp/whatsapp.repository.js';
import { WhatsAppChannelCreateInput } from '../../src/modules/channels/whatsapp/whatsapp.schemas.js';
import { createMediaFetcher } from '../../src/workers/media-fetcher.js';
import { toTestResponse, useTestApp, type Tenant } from '../helpers/app.js';
import { hubSignature, messagesChange, metaJson, startFakeGraph, wamid, webhookBody, type FakeGraph } from '../helpers/meta-graph.js';

/**
 * Media of received WhatsApp messages (CONTRACT §10): listed pending by the webhook, fetched by the media
 * worker in Meta's two steps (the media id answers a URL on Meta's media host, that URL answers the bytes, both
 * with the token), checked against sha256, kept as attachments. The token goes only to the API and to the URL
 * it named, never along a redirect. Meta is a local fake (test/helpers/meta-graph.ts).
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const silent = { error: () => {}, warn: () => {} };
const { t, a } = useTestApp({ app: { env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' } } });
let graph: FakeGraph;
let worker: ReturnType<typeof createMediaFetcher>;
beforeAll(async () => {
  graph = await startFakeGraph();
  worker = createMediaFetcher({ db: t.database.db, clock: () => new Date(), log: silent, allowPrivate: true, timeoutMs: 2000, maxBytes: 64 * 1024, random: () => 0.5 });
});
afterAll(async () => {
  await worker?.stop();
  await graph?.close();
});

let numbers = 0;
const number = () => `+49151${String(30_000_000 + ++numbers * 1000 + Math.floor(Math.random() * 1000)).padStart(8, '0')}`;
let ids = 0;
const phoneNumberId = () => String(400_000_000_000_000 + ++ids * 1000 + Math.floor(Math.random() * 1000));

async function addChannel(who: Tenant) {
  const appSecret = randomBytes(16).toString('hex');
  const id = phoneNumberId();
  const input = WhatsAppChannelCreateInput.parse({ type: 'whatsapp', name: 'Support', address: number(), provider: { kind: 'meta', phoneNumberId: id, accessToken: graph.accessToken, appSecret, apiBaseUrl: graph.url } });
  const channel = await createWhatsAppChannel(t.database.db, who.orgId, input);
  return { id: channel.id, phoneNumberId: id, appSecret };
}

/** A customer sends a media message (`type`: image, document, …) naming the media id; the stored message. */
async function receive(who: Tenant, channel: Awaited<ReturnType<typeof addChannel>>, type: string, part: Json): Promise<Json> {
  const from = number().slice(1);
  const message = { from, id: wamid(), timestamp: String(Math.floor(Date.now() / 1000)), type, [type]: part };
  const raw = metaJson(webhookBody([messagesChange(channel.phoneNumberId, { contacts: [{ waId: from }], messages: [message] })]));
  const res = toTestResponse(await t.app.inject({ method: 'POST', url: `/hooks/whatsapp/${channel.id}`, headers: { 'content-type': 'application/json', 'x-hub-signature-256': hubSignature(channel.appSecret, raw) }, payload: raw }));
  expect(res.status, res.body).toBe(200);
  const list = (await who.request('GET', '/v1/messages?limit=100')).json.data as Json[];
  return list.find((m) => m.providerMessageId === message.id)!;
}

async function drain() {
  for (let i = 0; i < 10 && (await worker.runOnce()) > 0; i++) await worker.idle();
}
const get = async (who: Tenant, id: string) => (await who.request('GET', `/v1/messages/${id}`)).json.data as Json;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('base64');

describe('WhatsApp media', () => {
  it("lists an image pending, fetches it in Meta's two steps with the token, checks sha256 and keeps it as an attachment", async () => {
    const channel = await addChannel(a);
    const photo = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), randomBytes(4000)]);
    const mediaId = graph.addMedia({ content: photo, mimeType: 'image/jpeg' });
    const before = graph.requests.length;
    const message = await receive(a, channel, 'image', { id: mediaId, mime_type: 'image/jpeg', sha256: sha(photo), caption: 'The broken part' });
    expect(message).toMatchObject({ text: 'The broken part', metadata: { whatsapp: { type: 'image', media: [{ id: null, mediaId, contentType: 'image/jpeg', status: 'pending' }] } } });
    expect(graph.requests.length).toBe(before); // the webhook fetched nothing

    await drain();
    const [item] = (await get(a, message.id)).metadata.whatsapp.media as Json[];
    expect(item).toMatchObject({ status: 'stored', mediaId, contentType: 'image/jpeg', size: photo.length });
    const asked = graph.requests.slice(before);
    expect(asked.map((r) => [r.server, r.method, r.auth])).toEqual([
      ['api', 'GET', `Bearer ${graph.accessToken}`],
      ['media', 'GET', `Bearer ${graph.accessToken}`],
    ]);
    expect(asked[0]!.path).toBe(`/${graph.version}/${mediaId}`);
    const download = await a.request('GET', `/v1/messages/${message.id}/attachments/${item!.id}`);
    expect(download.status, download.body).toBe(200);
    expect(Buffer.from(download.json.data.content, 'base64').equals(photo)).toBe(true);
    const updated = ((await a.request('GET', '/v1/events?type=message.updated&limit=100')).json.data as Json[]).filter((e) => e.resourceId === message.id);
    expect(updated).toHaveLength(1);
  });

  it("keeps a document's file name from the webhook", async () => {
    const channel = await addChannel(a);
    const pdf = Buffer.from('%PDF-1.4 invoice');
    const mediaId = graph.addMedia({ content: pdf, mimeType: 'application/pdf' });
    const message = await receive(a, channel, 'document', { id: mediaId, mime_type: 'application/pdf', filename: 'invoice-42.pdf' });
    await drain();
    const [item] = (await get(a, message.id)).metadata.whatsapp.media as Json[];
    expect(item).toMatchObject({ status: 'stored', filename: 'invoice-42.pdf', contentType: 'application/pdf', size: pdf.length });
    expect((await a.request('GET', `/v1/messages/${message.id}/attachments/${item!.id}`)).json.data).toMatchObject({ filename: 'invoice-42.pdf' });
  });

  it('refuses bytes that do not match the sha256 Meta states, keeping nothing', async () => {
    const channel = await addChannel(a);
    const mediaId = graph.addMedia({ content: Buffer.from('the real bytes'), mimeType: 'image/png', sha256: createHash('sha256').update('other bytes').digest('hex') });
    const message = await receive(a, channel, 'image', { id: mediaId, mime_type: 'image/png' });
    await drain();
    const [item] = (await get(a, message.id)).metadata.whatsapp.media as Json[];
    expect(item).toMatchObject({ status: 'failed', id: null });
    expect(item!.reason).toMatch(/do not match the sha256/);
    expect((await a.request('GET', `/v1/messages/${message.id}/attachments`)).json.data).toEqual([]);
  });

  it('never sends the token along a redirect of the media host to another host', async () => {
    const channel = await addChannel(a);
    const mediaId = graph.addMedia({ content: Buffer.from('sticker'), mimeType: 'image/webp', redirect: true });
    const before = graph.requests.length;
    const message = await receive(a, channel, 'sticker', { id: mediaId, mime_type: 'image/webp' });
    await drain();
    const asked = graph.requests.slice(before);
    const elsewhere = asked.filter((r) => r.server === 'elsewhere');
    expect(elsewhere.length).toBeGreaterThan(0);
    expect(elsewhere.every((r) => r.auth === undefined)).toBe(true);
    expect(asked.filter((r) => r.auth !== undefined).every((r) => r.server === 'api' || r.server === 'media')).toBe(true);
    // What the other host answered is not Meta's media: refused by its sha256.
    const [item] = (await get(a, message.id)).metadata.whatsapp.media as Json[];
    expect(item).toMatchObject({ status: 'failed' });
  });

  it('a token Meta refuses while fetching puts the channel in error at once, with an event; the item waits for the fix', async () => {
    const channel = await addChannel(a);
    const photo = Buffer.from('after the fix');
    const mediaId = graph.addMedia({ content: photo, mimeType: 'image/jpeg' });
    const message = await receive(a, channel, 'image', { id: mediaId, mime_type: 'image/jpeg' });
    graph.revoke();
    try {
      await drain();
    } finally {
      graph.revoke(false);
    }
    const broken = (await a.request('GET', `/v1/channels/${channel.id}`)).json.data as Json;
    expect(broken.status).toBe('error');
    expect(broken.lastError).toMatch(/error 190/);
    const events = ((await a.request('GET', '/v1/events?type=channel.error&limit=100')).json.data as Json[]).filter((e) => e.resourceId === channel.id);
    expect(events).toHaveLength(1);
    const [item] = (await get(a, message.id)).metadata.whatsapp.media as Json[];
    expect(item).toMatchObject({ status: 'pending' });
  });
});

import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messageAttachments, smsMedia } from '../../src/db/schema.js';
import { createMediaFetcher, MAX_MEDIA_ATTEMPTS } from '../../src/workers/media-fetcher.js';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { postWebhook, startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';

/**
 * MMS media of received texts: the webhook lists them pending, the media worker fetches them (Twilio's
 * basic auth only on the API host, its 307 to the CDN followed without it) and keeps them as attachments
 * downloaded like mail attachments. The provider and its CDN are local servers (test/helpers/twilio.ts).
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const silent = { error: () => {}, warn: () => {} };
const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' } } });
let twilio: FakeTwilio;
/** Another host, never the provider's: records what it is sent. */
let elsewhere: Server;
let elsewhereUrl: string;
const elsewhereAuth: (string | undefined)[] = [];
const MAX_BYTES = 64 * 1024;
const fetcher = (pollMs?: number) => createMediaFetcher({ db: t.database.db, clock, log: silent, allowPrivate: true, timeoutMs: 2000, maxBytes: MAX_BYTES, random: () => 0.5, ...(pollMs ? { pollMs } : {}) });
let worker: ReturnType<typeof fetcher>;

beforeAll(async () => {
  twilio = await startFakeTwilio();
  worker = fetcher();
  elsewhere = createServer((req, res) => {
    elsewhereAuth.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'image/gif' }).end(Buffer.from('GIF89a-elsewhere'));
  });
  await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
  elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await worker?.stop();
  await twilio?.close();
  elsewhere?.closeAllConnections();
  await new Promise<void>((resolve) => (elsewhere ? elsewhere.close(() => resolve()) : resolve()));
});

let numbers = 0;
const number = () => `+1212${String(3000000 + ++numbers * 1000 + Math.floor(Math.random() * 1000))}`;
let sids = 0;
const sid = () => `MM${String(++sids).padStart(32, '0')}${randomBytes(2).toString('hex')}`;

async function addChannel(who: Tenant) {
  const res = await who.request('POST', '/v1/channels', {
    type: 'sms',
    name: 'MMS line',
    address: number(),
    provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url },
  });
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

/** An MMS as Twilio posts it: NumMedia, MediaUrl{i}, MediaContentType{i}; the message as the API answers it. */
async function mms(who: Tenant, channel: Json, media: { url: string; contentType: string }[], messageSid = sid()) {
  const params: Record<string, string> = { MessageSid: messageSid, AccountSid: twilio.accountSid, From: number(), To: channel.address, Body: 'Photo attached', NumMedia: String(media.length) };
  media.forEach((m, i) => {
    params[`MediaUrl${i}`] = m.url;
    params[`MediaContentType${i}`] = m.contentType;
  });
  const res = await postWebhook(t.app, `/hooks/sms/${channel.id}`, params, twilio.authToken);
  expect(res.status, res.body).toBe(200);
  const list = (await who.request('GET', '/v1/messages?limit=100')).json.data as Json[];
  const found = list.find((m) => m.channelId === channel.id && m.providerMessageId === messageSid);
  expect(found).toBeDefined();
  return found!;
}

async function drain(w = worker) {
  await w.runOnce();
  await w.idle();
}

/** Runs passes until no item is due now (one item per channel per pass). */
async function drainAll(w = worker) {
  for (let i = 0; i < 20 && (await w.runOnce()) > 0; i++) await w.idle();
}

const get = async (who: Tenant, id: string) => (await who.request('GET', `/v1/messages/${id}`)).json.data as Json;
const jpeg = (n: number) => Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), randomBytes(n)]);

describe('MMS media', () => {
  it('lists media pending at once, fetches them with the credentials only on the API host, and serves them like mail attachments', async () => {
    const channel = await addChannel(a);
    const photo = jpeg(5000);
    const messageSid = sid();
    const first = twilio.addMedia(messageSid, { content: photo, contentType: 'image/jpeg', filename: 'IMG_0001.jpg' });
    const second = twilio.addMedia(messageSid, { content: Buffer.from('BEGIN:VCARD\r\nFN:Ada\r\nEND:VCARD\r\n'), contentType: 'text/vcard' });
    const cdnBefore = twilio.cdnRequests.length;
    const message = await mms(a, channel, [
      { url: first.url, contentType: 'image/jpeg' },
      { url: second.url, contentType: 'text/vcard' },
    ], messageSid);

    // The webhook answered without fetching anything: both items listed, pending.
    expect(twilio.cdnRequests.length).toBe(cdnBefore);
    expect(message.metadata.sms.media).toEqual([
      { id: null, url: first.url, contentType: 'image/jpeg', size: null, filename: null, status: 'pending' },
      { id: null, url: second.url, contentType: 'text/vcard', size: null, filename: null, status: 'pending' },
    ]);

    await drainAll();
    const got = await get(a, message.id);
    const [m0, m1] = got.metadata.sms.media as Json[];
    expect(m0).toMatchObject({ status: 'stored', contentType: 'image/jpeg', size: photo.length, filename: 'IMG_0001.jpg', url: first.url });
    expect(m1).toMatchObject({ status: 'stored', contentType: 'text/vcard', filename: null });
    expect(m0!.id).toMatch(/^[0-9a-f-]{36}$/);

    // Basic auth on the API host; the CDN it redirected to got no Authorization header.
    const expected = `Basic ${Buffer.from(`${twilio.accountSid}:${twilio.authToken}`).toString('base64')}`;
    const apiAsked = twilio.mediaRequests.filter((r) => r.path.includes(`/Messages/${messageSid}/Media/`));
    expect(apiAsked).toHaveLength(2);
    expect(apiAsked.every((r) => r.auth === expected)).toBe(true);
    const cdnAsked = twilio.cdnRequests.slice(cdnBefore);
    expect(cdnAsked.map((r) => r.path).sort()).toEqual([new URL(first.cdnUrl).pathname, new URL(second.cdnUrl).pathname].sort());
    expect(cdnAsked.every((r) => r.auth === undefined)).toBe(true);

    // Downloaded through the attachment endpoint of mail: the bytes and the type.
    const download = await a.request('GET', `/v1/messages/${message.id}/attachments/${m0!.id}`);
    expect(download.status, download.body).toBe(200);
    expect(download.json.data).toMatchObject({ id: m0!.id, messageId: message.id, contentType: 'image/jpeg', size: photo.length, filename: 'IMG_0001.jpg' });
    expect(Buffer.from(download.json.data.content, 'base64').equals(photo)).toBe(true);
    const listed = await a.request('GET', `/v1/messages/${message.id}/attachments`);
    expect((listed.json.data as Json[]).map((x) => x.id).sort()).toEqual([m0!.id, m1!.id].sort());
    // Another organization: 404, as for any message of another organization.
    expect((await b.request('GET', `/v1/messages/${message.id}/attachments/${m0!.id}`)).status).toBe(404);

    // Each item changed the message: a message.updated event each.
    const events = ((await a.request('GET', '/v1/events?type=message.updated&limit=100')).json.data as Json[]).filter((e) => e.resourceId === message.id);
    expect(events).toHaveLength(2);
  });

  it('never sends the credentials to another host, and checks every redirect target', async () => {
    const channel = await addChannel(a);
    const apiBefore = twilio.mediaRequests.length;
    // A MediaUrl on another host is fetched without credentials (the CDN directly, and an unrelated server).
    const direct = twilio.addMedia('MMdirect', { content: Buffer.from('direct bytes'), contentType: 'image/png' });
    const message = await mms(a, channel, [
      { url: direct.cdnUrl, contentType: 'image/png' },
      { url: `${elsewhereUrl}/media/1`, contentType: 'image/gif' },
    ]);
    const cdnBefore = twilio.cdnRequests.length;
    await drainAll();
    const media = (await get(a, message.id)).metadata.sms.media as Json[];
    expect(media.map((m) => m.status)).toEqual(['stored', 'stored']);
    expect(twilio.cdnRequests.slice(cdnBefore).every((r) => r.auth === undefined)).toBe(true);
    expect(elsewhereAuth.length).toBeGreaterThan(0);
    expect(elsewhereAuth.every((h) => h === undefined)).toBe(true);
    expect(twilio.mediaRequests.length).toBe(apiBefore);

    // A redirect to a target the outbound check refuses (plain http to a public host) fails the item at once.
    const redirector = createServer((_req, res) => res.writeHead(302, { location: 'http://example.com/photo.jpg' }).end());
    await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
    try {
      const port = (redirector.address() as AddressInfo).port;
      const refused = await mms(a, channel, [{ url: `http://127.0.0.1:${port}/r`, contentType: 'image/jpeg' }]);
      await drainAll();
      const [item] = (await get(a, refused.id)).metadata.sms.media as Json[];
      expect(item).toMatchObject({ status: 'failed', id: null });
      expect(item!.reason).toMatch(/http:\/\/example\.com\/photo\.jpg may not be reached: Must use https/);
    } finally {
      redirector.closeAllConnections();
      await new Promise<void>((resolve) => redirector.close(() => resolve()));
    }
  });

  it('refuses private and loopback addresses unless CHANNELS_ALLOW_PRIVATE', async () => {
    const channel = await addChannel(a);
    const message = await mms(a, channel, [{ url: `https://127.0.0.1:${new URL(twilio.cdn).port}/media/x`, contentType: 'image/png' }]);
    const strict = createMediaFetcher({ db: t.database.db, clock, log: silent, allowPrivate: false, timeoutMs: 2000, maxBytes: MAX_BYTES });
    const cdnBefore = twilio.cdnRequests.length;
    await drainAll(strict);
    const [entry] = (await get(a, message.id)).metadata.sms.media as Json[];
    expect(entry).toMatchObject({ status: 'failed' });
    expect(entry!.reason).toMatch(/private, loopback/);
    expect(twilio.cdnRequests.length).toBe(cdnBefore);
  });

  it('fails an item over the size limit cleanly, and keeps the others', async () => {
    const channel = await addChannel(a);
    const messageSid = sid();
    const big = twilio.addMedia(messageSid, { content: jpeg(MAX_BYTES + 10), contentType: 'image/jpeg' });
    const small = twilio.addMedia(messageSid, { content: jpeg(100), contentType: 'image/jpeg' });
    const message = await mms(a, channel, [
      { url: big.url, contentType: 'image/jpeg' },
      { url: small.url, contentType: 'image/jpeg' },
    ], messageSid);
    await drainAll();
    const [m0, m1] = (await get(a, message.id)).metadata.sms.media as Json[];
    expect(m0).toMatchObject({ status: 'failed', id: null, size: null });
    expect(m0!.reason).toMatch(/larger than/);
    expect(m0!.reason).toContain('EMAIL_ATTACHMENT_MAX_BYTES');
    expect(m1).toMatchObject({ status: 'stored', size: 104 });
    const rows = await t.database.db.select({ id: messageAttachments.id }).from(messageAttachments).where(eq(messageAttachments.messageId, message.id));
    expect(rows).toHaveLength(1);
    // Tried once: a size over the limit is not retried.
    const [queued] = await t.database.db.select().from(smsMedia).where(eq(smsMedia.url, big.url));
    expect(queued).toMatchObject({ status: 'failed', attempt: 1 });
  });

  it('retries a failing host with backoff, then gives up with the reason', async () => {
    const channel = await addChannel(a);
    const messageSid = sid();
    const flaky = twilio.addMedia(messageSid, { content: jpeg(50), contentType: 'image/jpeg', failFirst: [503] });
    const dead = twilio.addMedia(messageSid, { content: jpeg(50), contentType: 'image/jpeg', failFirst: Array.from({ length: MAX_MEDIA_ATTEMPTS + 2 }, () => 500) });
    const message = await mms(a, channel, [
      { url: flaky.url, contentType: 'image/jpeg' },
      { url: dead.url, contentType: 'image/jpeg' },
    ], messageSid);
    await drainAll();
    let media = (await get(a, message.id)).metadata.sms.media as Json[];
    expect(media.map((m) => m.status)).toEqual(['pending', 'pending']);
    const [row] = await t.database.db.select().from(smsMedia).where(eq(smsMedia.url, flaky.url));
    expect(row).toMatchObject({ status: 'pending', attempt: 1, lastError: expect.stringContaining('answered 503') });
    expect(row!.nextAttemptAt.getTime()).toBeGreaterThan(Date.now() + 20_000);

    for (let i = 0; i < MAX_MEDIA_ATTEMPTS; i++) {
      offsetMs += 2 * 60 * 60_000;
      await drainAll();
    }
    media = (await get(a, message.id)).metadata.sms.media as Json[];
    expect(media[0]).toMatchObject({ status: 'stored', size: 54 });
    expect(media[1]).toMatchObject({ status: 'failed' });
    expect(media[1]!.reason).toBe(`Gave up after ${MAX_MEDIA_ATTEMPTS} attempts; the last: ${new URL(twilio.cdn).origin} answered 500`);
  });

  it('fetches each item once when several processes run the worker', async () => {
    const channel = await addChannel(a);
    const messageSid = sid();
    const item = twilio.addMedia(messageSid, { content: jpeg(300), contentType: 'image/jpeg' });
    const message = await mms(a, channel, [{ url: item.url, contentType: 'image/jpeg' }], messageSid);
    const other = fetcher();
    const path = new URL(item.cdnUrl).pathname;
    await Promise.all([worker.runOnce(), other.runOnce(), worker.runOnce()]);
    await Promise.all([worker.idle(), other.idle()]);
    await drainAll();
    await drainAll(other);
    expect(twilio.cdnRequests.filter((r) => r.path === path)).toHaveLength(1);
    const rows = await t.database.db.select({ id: messageAttachments.id }).from(messageAttachments).where(eq(messageAttachments.messageId, message.id));
    expect(rows).toHaveLength(1);

    // A claim whose process died (its lease ran out) is taken over.
    const again = twilio.addMedia(messageSid, { content: jpeg(10), contentType: 'image/jpeg' });
    const second = await mms(a, channel, [{ url: again.url, contentType: 'image/jpeg' }]);
    await t.database.db.update(smsMedia).set({ status: 'fetching', attempt: 1, leaseUntil: new Date(Date.now() - 1000 + offsetMs) }).where(eq(smsMedia.messageId, second.id));
    await drain(other);
    expect(((await get(a, second.id)).metadata.sms.media as Json[])[0]).toMatchObject({ status: 'stored', size: 14 });
  });

  it('fetches as soon as the text is committed: the webhook wakes the running worker', async () => {
    const live = fetcher(10 * 60_000); // no second poll within the test: only the wake can start a pass
    live.start();
    try {
      await new Promise((r) => setTimeout(r, 200)); // the pass start() runs at once finds nothing
      const channel = await addChannel(a);
      const messageSid = sid();
      const item = twilio.addMedia(messageSid, { content: jpeg(20), contentType: 'image/jpeg' });
      const message = await mms(a, channel, [{ url: item.url, contentType: 'image/jpeg' }], messageSid);
      let entry: Json | undefined;
      for (let i = 0; i < 50 && entry?.status !== 'stored'; i++) {
        await new Promise((r) => setTimeout(r, 100));
        entry = ((await get(a, message.id)).metadata.sms.media as Json[])[0];
      }
      expect(entry).toMatchObject({ status: 'stored', size: 24 });
    } finally {
      await live.stop();
    }
  });
});

import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { events, webhookDeliveries } from '../../src/db/schema.js';
import { createTestApp, type Tenant, type TestApp } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { installStatementLog, roundTrips } from '../helpers/statement-log.js';
import { postWebhook, startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';

/**
 * A signed text through the SMS hook costs one statement: the message with its contact number, its thread's
 * upkeep (a reopen included), its events and their webhook deliveries, and the check that the channel is still
 * the one whose auth token verified the signature (the hook keeps the channel it read for the next texts; the
 * first text of a channel costs its read as well). Counted with a statement log of the driver, as
 * write-round-trips.test.ts does.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let t: TestApp;
let a: Tenant;
let twilio: FakeTwilio;
let uninstall: () => void;
beforeAll(async () => {
  t = await createTestApp({ env: { API_KEY_CACHE_MS: '60000', SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_INSECURE: 'true' } });
  a = await t.tenant();
  twilio = await startFakeTwilio();
  uninstall = installStatementLog(t);
});
afterAll(async () => {
  uninstall?.();
  await twilio?.close();
  await t?.close();
});

let sids = 0;
const sid = () => `SMtrips${++sids}${randomBytes(4).toString('hex')}`;

/** Posts a signed text; answers its round trips to the database. */
async function text(channel: Json, from: string, body: string, messageSid = sid(), authToken = twilio.authToken, status = 200) {
  const { value: res, trips, statements } = await roundTrips(() =>
    postWebhook(t.app, `/hooks/sms/${channel.id}`, { MessageSid: messageSid, AccountSid: twilio.accountSid, From: from, To: channel.address, Body: body, NumMedia: '0' }, authToken),
  );
  expect(res.status, res.body).toBe(status);
  return { messageSid, trips, statements: statements.join('\n') };
}

const storedCount = async (channelId: string, messageSid: string) =>
  ((await t.database.db.execute(sql`SELECT count(*)::int AS n FROM messages WHERE channel_id = ${channelId} AND provider_message_id = ${messageSid}`)).rows as { n: number }[])[0]!.n;

const messagesOf = async (channelId: string, providerMessageId: string) =>
  ((await a.request('GET', '/v1/messages?limit=100')).json.data as Json[]).filter((m) => m.channelId === channelId && m.providerMessageId === providerMessageId);

const eventsOf = (resourceId: string) =>
  t.database.db.select({ type: events.type, data: events.data }).from(events).where(sql`${events.organizationId} = ${a.orgId} AND ${events.resourceId} = ${resourceId}`).orderBy(events.occurredAt, events.type);

describe('the SMS hook', () => {
  it('a signed text is one statement: the message, its contact, its thread reopened, its events and their deliveries', async () => {
    const channel = (await a.request('POST', '/v1/channels', { type: 'sms', name: 'Trips', address: '+12125550170', provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } })).json.data as Json;
    const endpoint = (await a.request('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', eventTypes: ['message.received', 'thread.reopened'] })).json.data as Json;
    const customer = '+12125550171';
    const contact = (await a.request('POST', '/v1/contacts', { name: 'Ada' })).json.data as Json;
    const phone = (await a.request('POST', `/v1/contacts/${contact.id}/phone-numbers`, { phoneNumber: customer })).json.data as Json;
    // Warm-up: connections open, statements prepared, the channel's receiving side recorded as working, the channel kept.
    await text(channel, customer, 'warm');

    const first = await text(channel, customer, 'Where is my order?');
    expect(first.trips, first.statements).toBe(1);
    // The channel is held to the commit without a lock on its row (see the PostgreSQL tests below).
    expect(first.statements).not.toMatch(/\bFOR (SHARE|UPDATE|NO KEY UPDATE|KEY SHARE)\b/i);
    const [m] = await messagesOf(channel.id, first.messageSid);
    expect(m).toMatchObject({ direction: 'incoming', type: 'sms', status: 'received', text: 'Where is my order?', phoneNumberId: phone.id, sender: { phoneNumber: customer }, providerName: 'twilio' });
    const recorded = await eventsOf(m!.id);
    expect(recorded.map((e) => e.type)).toEqual(['message.created', 'message.received']);
    // The events carry the message as the API answers it.
    expect(recorded[1]!.data).toEqual((await a.request('GET', `/v1/messages/${m!.id}`)).json.data);
    const deliveries = await t.database.db.select({ type: webhookDeliveries.eventType }).from(webhookDeliveries).where(sql`${webhookDeliveries.endpointId} = ${endpoint.id}`);
    expect(deliveries.map((d) => d.type)).toEqual(['message.received', 'message.received']);

    // A provider's retry of the same MessageSid: one message, the retry answered from the existing one.
    const retry = await text(channel, customer, 'Where is my order?', first.messageSid);
    expect(retry.trips, retry.statements).toBeLessThanOrEqual(2);
    expect(await messagesOf(channel.id, first.messageSid)).toHaveLength(1);

    // A closed thread opens again, with its events, in the same statement.
    expect((await a.request('PATCH', `/v1/threads/${m!.threadId}`, { status: 'closed' })).status).toBe(200);
    const again = await text(channel, customer, 'Hello?');
    expect(again.trips, again.statements).toBe(1);
    expect((await a.request('GET', `/v1/threads/${m!.threadId}`)).json.data).toMatchObject({ status: 'open', messageCount: 3 });
    const reopened = await t.database.db.select({ type: events.type, data: events.data }).from(events).where(sql`${events.organizationId} = ${a.orgId} AND ${events.type} = 'thread.reopened'`);
    expect(reopened.map((e) => (e.data as Json).reason)).toEqual(['message']);
    const delivered = await t.database.db.select({ type: webhookDeliveries.eventType }).from(webhookDeliveries).where(sql`${webhookDeliveries.endpointId} = ${endpoint.id}`);
    expect(delivered.map((d) => d.type).sort()).toEqual(['message.received', 'message.received', 'message.received', 'thread.reopened']);
  });

  it("a new channel's first text writes the channel's lastSyncAt on its own, then is the one statement (not the full path)", async () => {
    const channel = (await a.request('POST', '/v1/channels', { type: 'sms', name: 'Trips new', address: '+12125550174', provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } })).json.data as Json;
    expect(channel.lastSyncAt).toBeNull();
    // The channel's read, the one statement (refused: no lastSyncAt), the update of lastSyncAt, the one statement.
    const first = await text(channel, '+12125550175', 'First');
    expect(first.trips, first.statements).toBe(4);
    expect(first.statements).not.toMatch(/\bBEGIN\b/i);
    const [m] = await messagesOf(channel.id, first.messageSid);
    expect((await eventsOf(m!.id)).map((e) => e.type)).toEqual(['message.created', 'message.received']);
    expect((await a.request('GET', `/v1/channels/${channel.id}`)).json.data).toMatchObject({ status: 'active', lastError: null, lastSyncAt: expect.any(String) });
  });

  it('a channel whose receiving side shows an error takes the full path, which clears it', async () => {
    const channel = (await a.request('POST', '/v1/channels', { type: 'sms', name: 'Trips 2', address: '+12125550172', provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } })).json.data as Json;
    await text(channel, '+12125550173', 'warm');
    await t.database.db.execute(sql`UPDATE channels SET status = 'error', last_error = 'mailbox: broken' WHERE id = ${channel.id}`);
    const sent = await text(channel, '+12125550173', 'Still there?');
    expect(sent.trips).toBeGreaterThan(2);
    expect(await messagesOf(channel.id, sent.messageSid)).toHaveLength(1);
    expect((await a.request('GET', `/v1/channels/${channel.id}`)).json.data).toMatchObject({ status: 'active', lastError: null });
  });
});

/** The channel the hook keeps is checked against the channel's row in the text's statement: never honoured once it changed. */
describe('the SMS hook with its channel kept', () => {
  const newChannel = async (name: string, address: string) => {
    const channel = (await a.request('POST', '/v1/channels', { type: 'sms', name, address, provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } })).json.data as Json;
    await text(channel, '+12125550191', 'warm');
    // Kept: the next text is the one statement alone.
    expect((await text(channel, '+12125550191', 'kept')).trips).toBe(1);
    return channel;
  };

  const rotate = async (channel: Json) => {
    const rotated = `rotated${randomBytes(8).toString('hex')}`;
    const patched = await a.request('PATCH', `/v1/channels/${channel.id}`, { provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: rotated, apiBaseUrl: twilio.url } });
    expect(patched.status, JSON.stringify(patched.json)).toBe(200);
    return rotated;
  };

  it('after its auth token changes, a text signed with the old token is refused at once, and one signed with the new token stored', async () => {
    const channel = await newChannel('Rotated', '+12125550190');
    const rotated = await rotate(channel);
    const old = await text(channel, '+12125550191', 'Signed with the old token', sid(), twilio.authToken, 403);
    expect(await storedCount(channel.id, old.messageSid)).toBe(0);
    // Again, now that the hook has read the channel as it is.
    const again = await text(channel, '+12125550191', 'Signed with the old token', sid(), twilio.authToken, 403);
    expect(await storedCount(channel.id, again.messageSid)).toBe(0);

    const fresh = await text(channel, '+12125550191', 'Signed with the new token', sid(), rotated);
    expect(await storedCount(channel.id, fresh.messageSid)).toBe(1);
    expect((await text(channel, '+12125550191', 'Kept again', sid(), rotated)).trips).toBe(1);
    await text(channel, '+12125550191', 'Signed with the old token', sid(), twilio.authToken, 403);
  });

  it('after its auth token changes, a retry of a stored text signed with the old token is refused, not answered from the message', async () => {
    const channel = await newChannel('Rotated retry', '+12125550194');
    const earlier = await text(channel, '+12125550191', 'Before the rotation');
    await rotate(channel);
    await text(channel, '+12125550191', 'Before the rotation', earlier.messageSid, twilio.authToken, 403);
  });

  it('a text to a channel deleted since it was kept stores nothing', async () => {
    const channel = await newChannel('Gone', '+12125550192');
    expect((await a.request('DELETE', `/v1/channels/${channel.id}`)).status).toBe(200);
    const after = await text(channel, '+12125550191', 'After the delete', sid(), twilio.authToken, 404);
    expect(await storedCount(channel.id, after.messageSid)).toBe(0);
  });

  it('a retry of a stored text to a channel deleted since it was kept is not answered 200', async () => {
    const channel = await newChannel('Gone retry', '+12125550195');
    const earlier = await text(channel, '+12125550191', 'Before the delete');
    expect((await a.request('DELETE', `/v1/channels/${channel.id}`)).status).toBe(200);
    await text(channel, '+12125550191', 'Before the delete', earlier.messageSid, twilio.authToken, 404);
  });

  it('a text to a channel disabled since it was kept is acknowledged and dropped', async () => {
    const channel = await newChannel('Disabled', '+12125550193');
    expect((await a.request('PATCH', `/v1/channels/${channel.id}`, { status: 'disabled' })).status).toBe(200);
    const dropped = await text(channel, '+12125550191', 'While disabled');
    expect(await storedCount(channel.id, dropped.messageSid)).toBe(0);
  });
});

/** The channel's row is not locked by its texts; its delete waits for the texts being written, and they for it. */
describe.runIf(testDbKind === 'postgres')('the SMS hook beside other transactions of its channel', () => {
  const newChannel = async (name: string, address: string) => {
    const channel = (await a.request('POST', '/v1/channels', { type: 'sms', name, address, provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } })).json.data as Json;
    await text(channel, '+12125550181', 'warm');
    return channel;
  };
  const post = (channel: Json, messageSid: string) =>
    postWebhook(t.app, `/hooks/sms/${channel.id}`, { MessageSid: messageSid, AccountSid: twilio.accountSid, From: '+12125550181', To: channel.address, Body: 'Hi', NumMedia: '0' }, twilio.authToken);
  /** Whether `p` settles within `ms`. */
  const settlesWithin = (p: Promise<unknown>, ms: number) => Promise.race([p.then(() => true, () => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
  let client: pg.Client;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: (t.database as unknown as { url: string }).url });
    await client.connect();
  });
  afterAll(() => client?.end());

  it('a text is not held up by an uncommitted update of its channel (its health, its settings)', async () => {
    const channel = await newChannel('Busy row', '+12125550180');
    await client.query('BEGIN');
    try {
      await client.query('UPDATE channels SET updated_at = now() WHERE id = $1', [channel.id]);
      const sent = post(channel, sid());
      expect(await settlesWithin(sent, 2000)).toBe(true);
      expect((await sent).status).toBe(200);
    } finally {
      await client.query('ROLLBACK');
    }
  });

  it('a delete waits for the text being written; a text written while a delete is uncommitted stores nothing', async () => {
    const channel = await newChannel('Deleted', '+12125550182');
    // A write of the channel in progress (as the hook's statement holds it): the DELETE answers after its commit.
    await client.query('BEGIN');
    let deleted: Promise<unknown> | undefined;
    try {
      expect((await client.query('SELECT id FROM held_channel($1)', [channel.id])).rows).toHaveLength(1);
      deleted = a.request('DELETE', `/v1/channels/${channel.id}`);
      expect(await settlesWithin(deleted, 500)).toBe(false);
    } finally {
      await client.query('COMMIT');
    }
    expect(((await deleted) as { status: number }).status).toBe(200);

    // A delete made and not yet committed: the text waits for it, then finds the channel gone and stores nothing.
    const other = await newChannel('Deleted meanwhile', '+12125550183');
    const messageSid = sid();
    await client.query('BEGIN');
    let sent: ReturnType<typeof post> | undefined;
    try {
      await client.query('UPDATE channels SET deleted_at = now() WHERE id = $1', [other.id]);
      sent = post(other, messageSid);
      expect(await settlesWithin(sent, 500)).toBe(false);
    } finally {
      await client.query('COMMIT');
    }
    expect((await sent!).status).not.toBe(200);
    const [stored] = (await t.database.db.execute(sql`SELECT count(*)::int AS n FROM messages WHERE channel_id = ${other.id} AND provider_message_id = ${messageSid}`)).rows as { n: number }[];
    expect(stored!.n).toBe(0);
  });
});

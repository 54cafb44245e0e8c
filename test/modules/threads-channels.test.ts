import { randomBytes } from 'node:crypto';
import { count, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { openDatabase } from '../../src/db/client.js';
import { mailOutbox, smsOutbox } from '../../src/db/schema.js';
import { createSmsSender } from '../../src/workers/sms-sender.js';
import { createSnoozeWorker } from '../../src/workers/snoozes.js';
import { createWebhookDelivery } from '../../src/workers/webhook-delivery.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { ok, toTestResponse, useTestApp } from '../helpers/app.js';
import { postWebhook, startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';

/**
 * Threads over a real text channel (a local server plays Twilio, webhooks signed with the real algorithm)
 * and, on PostgreSQL, with several processes on one database.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const silent = { error: () => {}, warn: () => {} };
const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true', SMS_HOOK_RATE_LIMIT: '1000', WEBHOOK_ALLOW_INSECURE: 'true' } } });
let receiver: Receiver;
let twilio: FakeTwilio;
let sender: ReturnType<typeof createSmsSender>;

beforeAll(async () => {
  twilio = await startFakeTwilio();
  receiver = await startReceiver();
  sender = createSmsSender({ db: t.database.db, clock: () => new Date(), log: silent, allowPrivate: true, sendTimeoutMs: 1500, random: () => 0.5, sleep: async () => {} });
});
afterAll(async () => {
  await sender?.stop();
  await twilio?.close();
  await receiver?.close();
});

let sids = 0;
const sid = () => `SM${String(++sids).padStart(32, '0')}`;

async function textChannel(address: string) {
  return ok(
    await a.request('POST', '/v1/channels', {
      type: 'sms',
      name: 'Support line',
      address,
      provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url },
    }),
    201,
  ) as Json;
}

async function customerTexts(channel: Json, from: string, body: string) {
  const res = await postWebhook(t.app, `/hooks/sms/${channel.id}`, { MessageSid: sid(), AccountSid: twilio.accountSid, From: from, To: channel.address, Body: body, NumMedia: '0' }, twilio.authToken);
  expect(res.status, res.body).toBe(200);
}

const threadOf = async (channelId: string) => ((ok(await a.request('GET', `/v1/threads?channelId=${channelId}`)) as Json[])[0]!);
const outgoing = async () => {
  const [texts] = await t.database.db.select({ n: count() }).from(smsOutbox);
  const [mails] = await t.database.db.select({ n: count() }).from(mailOutbox);
  return Number(texts!.n) + Number(mails!.n);
};

describe('threads of a text channel', () => {
  it('threads a customer’s texts, reopens the closed thread on a reply, and sends no note anywhere', async () => {
    ok(await a.request('POST', '/v1/webhooks', { url: receiver.url, eventTypes: ['*'] }), 201);
    const channel = await textChannel('+12125550100');
    const contact = ok(await a.request('POST', '/v1/contacts', { firstName: 'Rita' }), 201) as Json;
    ok(await a.request('POST', `/v1/contacts/${contact.id}/phone-numbers`, { phoneNumber: '+12125550199' }), 201);
    await customerTexts(channel, '+12125550199', 'Is my order 42 on its way?');
    const thread = await threadOf(channel.id);
    expect(thread).toMatchObject({ channelId: channel.id, contactId: contact.id, subject: null, status: 'open', messageCount: 1 });
    const messages = ok(await a.request('GET', `/v1/messages?threadId=${thread.id}`)) as Json[];
    expect(messages.map((m) => m.text)).toEqual(['Is my order 42 on its way?']);

    const before = await outgoing();
    for (let i = 0; i < 100; i++) ok(await a.request('POST', `/v1/threads/${thread.id}/notes`, { text: `Note ${i}: call the customer back at +12125550199` }), 201);
    await sender.runOnce();
    await sender.idle();
    expect(await outgoing()).toBe(before);
    expect(twilio.sent).toHaveLength(0);
    expect(ok(await a.request('GET', `/v1/threads/${thread.id}`)).messageCount).toBe(1);
    expect((ok(await a.request('GET', `/v1/threads/${thread.id}/notes?limit=100`)) as Json[]).length).toBe(100);

    ok(await a.request('PATCH', `/v1/threads/${thread.id}`, { status: 'closed' }));
    await customerTexts(channel, '+12125550199', 'Still waiting!');
    const reopened = ok(await a.request('GET', `/v1/threads/${thread.id}`));
    expect(reopened).toMatchObject({ status: 'open', messageCount: 2 });
    const events = (ok(await a.request('GET', '/v1/events?type=thread.reopened&limit=100')) as Json[]).filter((e) => e.data.id === thread.id);
    expect(events.map((e) => [e.data.reason, e.resourceId, e.actor.type])).toEqual([['message', thread.id, 'system']]);

    // Delivered to webhooks like every other event; a note's text travels only in its own event.
    const delivery = createWebhookDelivery({ db: t.database.db, clock: () => new Date(), log: silent, allowInsecure: true, random: () => 0.5 });
    while ((await delivery.runOnce()) > 0);
    const bodies = receiver.received.map((r) => JSON.parse(r.body) as Json);
    const types = bodies.map((e) => e.type as string);
    expect(types.filter((x) => x === 'thread.note_added')).toHaveLength(100);
    expect(bodies.filter((e) => JSON.stringify(e).includes('call the customer back')).every((e) => e.type === 'thread.note_added')).toBe(true);
    const updated = bodies.filter((e) => e.type === 'thread.updated' && e.data.id === thread.id).map((e) => e.data.changes);
    expect(updated).toEqual([{ status: { before: 'open', after: 'closed' } }, { status: { before: 'closed', after: 'open' } }]);
    expect(bodies.find((e) => e.type === 'thread.reopened')?.data).toMatchObject({ id: thread.id, reason: 'message', status: 'open' });
  });
});

describe.runIf(process.env.SB_TEST_DB === 'postgres')('threads with several processes on one PostgreSQL', () => {
  it('counts every message of a thread written by two processes at once', async () => {
    const second = await openDatabase({ url: (t.database as { url?: string }).url!, poolSize: 5 });
    const other = await buildApp({ config: t.config, database: second });
    try {
      const threadId = `busy-${Date.now()}`;
      const post = (app: typeof other) =>
        app
          .inject({ method: 'POST', url: '/v1/messages', headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' }, payload: JSON.stringify({ direction: 'incoming', type: 'sms', text: 'x', threadId }) })
          .then(toTestResponse);
      const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => post(i % 2 ? other : t.app)));
      expect(answers.filter((r) => r.status !== 201)).toEqual([]);
      expect(ok(await a.request('GET', `/v1/threads/${threadId}`)).messageCount).toBe(60);
    } finally {
      await other.close();
      await second.close();
    }
  });

  it('ends a snooze exactly once with two processes, and after a restart', async () => {
    const threadId = `snooze-${Date.now()}`;
    ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'sms', text: 'x', threadId }), 201);
    ok(await a.request('PATCH', `/v1/threads/${threadId}`, { status: 'snoozed', snoozedUntil: new Date(Date.now() + 60_000).toISOString() }));
    const url = (t.database as { url?: string }).url!;
    // A process that stops before the snooze is due: nothing was held in memory, so nothing is lost.
    const first = await openDatabase({ url, poolSize: 2 });
    expect(await createSnoozeWorker({ db: first.db, clock: () => new Date(), log: silent }).runOnce()).toBe(0);
    await first.close();
    // Two processes, started after it, both past the time.
    const [one, two] = await Promise.all([openDatabase({ url, poolSize: 2 }), openDatabase({ url, poolSize: 2 })]);
    try {
      const later = () => new Date(Date.now() + 61_000);
      const workers = [one, two].map((d) => createSnoozeWorker({ db: d.db, clock: later, log: silent }));
      const ended = await Promise.all([...workers, ...workers].map((w) => w.runOnce()));
      expect(ended.reduce((x, y) => x + y, 0)).toBe(1);
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
    const events = (ok(await a.request('GET', '/v1/events?type=thread.reopened&limit=100')) as Json[]).filter((e) => e.data.id === threadId);
    expect(events.map((e) => e.data.reason)).toEqual(['snooze_ended']);
    expect(ok(await a.request('GET', `/v1/threads/${threadId}`))).toMatchObject({ status: 'open', snoozedUntil: null });
    const [row] = (await t.database.db.execute(sql`SELECT count(*)::int AS n FROM events WHERE type = 'thread.updated' AND data::jsonb->>'id' = ${threadId}`)).rows as { n: number }[];
    expect(row!.n).toBe(2);
  });
});

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { showChannelOutcome } from '../../src/modules/channels/channel-health.js';
import { toChannel } from '../../src/modules/channels/kinds.js';
import { createSmsSender, SEND_CONCURRENCY } from '../../src/workers/sms-sender.js';
import { createTestApp, type Tenant, type TestApp } from '../helpers/app.js';
import { installStatementLog, roundTrips } from '../helpers/statement-log.js';
import { startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';

/**
 * What texts cost the database, counted with the driver's statement log (as sms-hook-round-trips.test.ts
 * does): a send to many numbers is the same few statements as a send to two, and the sender spends two
 * statements per wave (its `transmitted_at`, then its outcomes with their events), whatever the wave's size.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let t: TestApp;
let a: Tenant;
let twilio: FakeTwilio;
let uninstall: () => void;
let sender: ReturnType<typeof createSmsSender>;
beforeAll(async () => {
  t = await createTestApp({ env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' } });
  a = await t.tenant();
  twilio = await startFakeTwilio();
  sender = createSmsSender({ db: t.database.db, clock: () => new Date(), log: { error: () => {}, warn: () => {} }, allowPrivate: true, sendTimeoutMs: 5000, sleep: async () => {} });
  uninstall = installStatementLog(t);
});
afterAll(async () => {
  uninstall?.();
  await sender?.stop();
  await twilio?.close();
  await t?.close();
});

let block = 0;
const numbers = (n: number) => {
  block++;
  return Array.from({ length: n }, (_, i) => `+1212${2000000 + block * 1000 + i}`);
};

async function send(channelId: string, to: string[]) {
  const { value: res, trips } = await roundTrips(() => a.request('POST', '/v1/messages/send', { channelId, to, text: 'Your order shipped' }));
  expect(res.status, res.body).toBe(201);
  return trips;
}

/** One pass of the sender and its runs: the round trips. */
const drain = async () => (await roundTrips(async () => (await sender.runOnce(), await sender.idle()))).trips;

it('a send to 40 numbers costs what a send to 2 costs; a batch of 40 texts is 2 statements per wave, and the next batch does not read the channel again', async () => {
  const res = await a.request('POST', '/v1/channels', { type: 'sms', name: 'Trips', address: '+12125550100', rate: 1000, provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } });
  expect(res.status, res.body).toBe(201);
  const channel = res.json.data as Json;

  const two = await send(channel.id, numbers(2));
  expect(await drain()).toBeGreaterThan(0);
  const forty = await send(channel.id, numbers(40));
  expect(forty).toBe(two);

  const waves = Math.ceil(40 / SEND_CONCURRENCY);
  const before = twilio.sent.length;
  // The pass: abandoned claims, the claim, the claim that finds nothing more; the batch: its check (messages,
  // opt-outs and the channel's row), then per wave its transmitted_at and its outcomes. The channel was read
  // for the first batch and has not changed since.
  expect(await drain()).toBe(3 + 1 + 2 * waves);
  expect(twilio.sent.length - before).toBe(40);

  const list = (await a.request('GET', '/v1/messages?limit=100')).json.data as Json[];
  const sent = list.filter((m) => m.channelId === channel.id && m.status === 'sent');
  expect(sent).toHaveLength(42);
  const events = (await a.request('GET', '/v1/events?type=message.sent&limit=100')).json.data as Json[];
  expect(new Set(events.map((e) => e.resourceId))).toEqual(new Set(sent.map((m) => m.id)));
});

it("the channel's health written to its row (a received text's) does not make the next batch read it again; a change of its settings does", async () => {
  const res = await a.request('POST', '/v1/channels', { type: 'sms', name: 'Health', address: '+12125550101', rate: 1000, provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } });
  expect(res.status, res.body).toBe(201);
  const channel = res.json.data as Json;
  await send(channel.id, numbers(2));
  await drain();

  // What a received text records on the channel (its receiving side works): a write to the row.
  await showChannelOutcome(t.database.db, channel.id, { ok: true, side: 'mailbox' }, { view: toChannel });
  await send(channel.id, numbers(2));
  // The pass's 3 statements, the batch's check, one wave's 2: the channel not read again.
  expect(await drain()).toBe(3 + 1 + 2);

  const patched = await a.request('PATCH', `/v1/channels/${channel.id}`, { rate: 500 });
  expect(patched.status, patched.body).toBe(200);
  await send(channel.id, numbers(2));
  // Its settings changed: read again (one statement more).
  expect(await drain()).toBe(3 + 1 + 1 + 2);
});

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { eq, inArray } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channels, mailOutbox } from '../../src/db/schema.js';
import { CHANNEL_PAUSE_MS, createMailSender } from '../../src/workers/mail-sender.js';
import type { SmtpReceiver } from '../../src/workers/smtp-receiver.js';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { startTestReceiver } from '../helpers/smtp-receiver.js';
import { headerOf, refusedPort, startHangingServer, startRelay, type Relay } from '../helpers/smtp-relay.js';

/**
 * Sending through relays that fail the way real ones do: one that refuses the connection, one that hangs
 * without a greeting, one with a certificate nobody signed. Each ends its attempt with its real cause, puts
 * its channel in `error`, and delays no other channel's mail.
 */

let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const silent = { error: () => {}, warn: () => {} };

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' } } });
let relay: Relay;
let receiver: SmtpReceiver;
let receiverPort = 0;

beforeAll(async () => {
  relay = await startRelay();
  ({ receiver, port: receiverPort } = await startTestReceiver(t.database.db));
});
afterAll(async () => {
  await receiver?.stop();
  await relay?.close();
});

let n = 0;
async function addChannel(who: Tenant, outbound: Json, extra: Json = {}) {
  // A domain of its own per organization: receiving at it needs it verified, by one organization only.
  const address = `support-${++n}-${Math.random().toString(36).slice(2, 8)}@relays-${who.orgId.slice(0, 8)}.example`;
  await verifyDomainFor(t.database.db, who.orgId, address);
  const res = await who.request('POST', '/v1/channels', {
    type: 'email',
    name: 'Support',
    address,
    inbound: { mode: 'smtp' },
    outbound: { host: '127.0.0.1', secure: false, username: relay.user, password: relay.pass, tls: 'none', ...outbound },
    ...extra,
  });
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; address: string };
}
const healthy = () => ({ port: relay.port });

async function send(who: Tenant, channelId: string, subject: string) {
  const res = await who.request('POST', '/v1/messages/send', { channelId, to: ['ada@example.com'], subject, text: 'x' });
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}
const outbox = async (messageId: string) => (await t.database.db.select().from(mailOutbox).where(eq(mailOutbox.messageId, messageId)))[0]!;
const channelOf = async (who: Tenant, id: string) => (await who.request('GET', `/v1/channels/${id}`)).json.data as Json;
const relayed = (m: Json) => relay.received.filter((r) => headerOf(r.raw, 'Message-ID') === `<${m.metadata.email.messageId}>`);

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a relay that fails', () => {
  it('refusing the connection: the attempt ends at once with ECONNREFUSED, not at the send timeout', async () => {
    const sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 60_000, random: () => 0.5 });
    const channel = await addChannel(a, { port: await refusedPort() });
    const m = await send(a, channel.id, 'Refused');
    const started = Date.now();
    await sender.runOnce();
    const took = Date.now() - started;
    expect(took).toBeLessThan(30_000); // the send timeout is 60 s
    const row = await outbox(m.id);
    expect(row).toMatchObject({ status: 'pending', attempt: 1 });
    expect(row.lastError).toMatch(/ECONNREFUSED/);
    expect(row.lastError).not.toMatch(/did not finish|ETIMEDOUT/);
    expect(await channelOf(a, channel.id)).toMatchObject({ status: 'error', lastError: expect.stringMatching(/^relay: Sending through 127\.0\.0\.1: .*ECONNREFUSED/) });
  });

  it('presenting a self-signed certificate: the attempt ends at once with the certificate error', async () => {
    const fixtures = new URL('../fixtures/tls/', import.meta.url);
    const tlsRelay = await startRelay({ implicitTls: { key: readFileSync(new URL('key.pem', fixtures)), cert: readFileSync(new URL('cert.pem', fixtures)) } });
    try {
      const sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 60_000, random: () => 0.5 });
      const channel = await addChannel(a, { port: tlsRelay.port, secure: true, username: tlsRelay.user, password: tlsRelay.pass });
      const m = await send(a, channel.id, 'Bad certificate');
      const started = Date.now();
      await sender.runOnce();
      expect(Date.now() - started).toBeLessThan(30_000);
      const row = await outbox(m.id);
      expect(row.status).toBe('pending');
      expect(row.lastError).toMatch(/certificate/i);
      expect(tlsRelay.logins).toBe(0); // the password never went to a server that could not prove who it is
      expect(await channelOf(a, channel.id)).toMatchObject({ status: 'error', lastError: expect.stringMatching(/^relay: .*certificate/i) });
    } finally {
      await tlsRelay.close();
    }
  });

  it('hanging: another organization\'s mail through a healthy relay leaves while the attempt on the hung relay is still under way', async () => {
    const hung = await startHangingServer();
    let blocked: Json = {};
    const sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 20_000, pollMs: 100, random: () => 0.5 });
    sender.start();
    try {
      const stuck = await addChannel(a, { port: hung.port });
      const fine = await addChannel(b, healthy());
      blocked = await send(a, stuck.id, 'Into the void');
      await until('the hung relay to be connected', async () => hung.connections > 0 && (await outbox(blocked.id)).status === 'sending');
      const other = await send(b, fine.id, 'On time');
      const started = Date.now();
      await until('the healthy relay to receive the other mail', async () => relayed(other).length === 1);
      const took = Date.now() - started;
      // The hung attempt still holds its own channel, and only it.
      expect((await outbox(blocked.id)).status).toBe('sending');
      expect(took).toBeLessThan(10_000);
      await until('the other mail to be recorded sent', async () => (await outbox(other.id)).status === 'sent');
    } finally {
      await sender.stop();
      await hung.close();
    }
    // The stop ended the hung attempt and gave its claim back, uncounted, for the next process to take.
    expect(await outbox(blocked.id)).toMatchObject({ status: 'pending', attempt: 0, leaseUntil: null });
  });

  it('one channel\'s backlog behind a hung relay does not hold another channel\'s mail back', async () => {
    const hung = await startHangingServer();
    const sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 40_000, pollMs: 100, random: () => 0.5 });
    try {
      const stuck = await addChannel(a, { port: hung.port });
      for (let i = 0; i < 80; i++) await send(a, stuck.id, `Backlog ${i}`);
      const fine = await addChannel(b, healthy());
      sender.start();
      await until('the hung relay to be connected', async () => hung.connections > 0);
      const other = await send(b, fine.id, 'Behind the backlog');
      const started = Date.now();
      await until('the healthy relay to receive the other mail', async () => relayed(other).length === 1, 30_000);
      // Long before the hung attempts give up (the greeting wait is 15 s).
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await sender.stop();
      await hung.close();
    }
  });

  it("an organization whose five relays all hang holds its share of the sender only: another organization's mail leaves at once", async () => {
    const hung = await startHangingServer();
    const sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 20_000, pollMs: 60_000, random: () => 0.5 });
    const stuck: Json[] = [];
    try {
      for (let c = 0; c < 5; c++) {
        const channel = await addChannel(a, { port: hung.port });
        for (let i = 0; i < 4; i++) stuck.push(await send(a, channel.id, `Stuck ${c}.${i}`));
      }
      const fine = await addChannel(b, healthy());
      const other = await send(b, fine.id, 'Queued last');
      sender.start();
      await until('the healthy relay to receive the other mail', async () => relayed(other).length === 1, 30_000);
      // Sent while every attempt on the hung relays is still under way (their greeting wait is 15 s).
      const rows = await Promise.all(stuck.map((m) => outbox(m.id)));
      expect(rows.filter((r) => r.status === 'sending').length).toBeGreaterThan(0);
      expect(rows.every((r) => r.status !== 'pending' || r.attempt === 0)).toBe(true);
    } finally {
      await sender.stop();
      await hung.close();
      // Out of the way of the next tests (the organization's share would still count them).
      await t.database.db.update(mailOutbox).set({ status: 'failed', leaseUntil: null }).where(inArray(mailOutbox.messageId, stuck.map((m) => m.id as string)));
    }
  });

  it('the issue\'s two-relay run: with a 60 s send timeout, a message through the healthy relay is not held by one whose relay refuses', async () => {
    const sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 60_000, pollMs: 1000, random: () => 0.5 });
    sender.start();
    try {
      const dead = await addChannel(a, { port: await refusedPort() });
      const fine = await addChannel(b, healthy());
      const refused = await send(a, dead.id, 'Refused');
      // The healthy relay's message is queued once the pass has claimed the other one.
      await until('the refused message to be claimed', async () => (await outbox(refused.id)).attempt > 0);
      const started = Date.now();
      const other = await send(b, fine.id, 'On time');
      await until('the healthy relay to receive the mail', async () => relayed(other).length === 1, 70_000);
      const took = Date.now() - started;
      console.info(`two-relay run: the message through the healthy relay was sent ${took} ms after it was queued`);
      expect(took).toBeLessThan(30_000);
      await until('the refused attempt to end', async () => (await outbox(refused.id)).status === 'pending');
      expect((await outbox(refused.id)).lastError).toMatch(/ECONNREFUSED/);
    } finally {
      await sender.stop();
    }
  }, 90_000);
});

describe('per-channel backoff and status', () => {
  it('repeated relay failures pause the channel\'s sending; the next success makes it active again', async () => {
    const sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
    const channel = await addChannel(a, healthy());
    // The relay refuses logins for a while (a temporary 454).
    let refusing = true;
    relay.script = { beforeAuth: async () => { if (refusing) throw Object.assign(new Error('Temporary authentication failure'), { responseCode: 454 }); } }; // prettier-ignore
    try {
      const first = await send(a, channel.id, 'One');
      await sender.runOnce();
      expect((await outbox(first.id)).status).toBe('pending');
      expect(await channelOf(a, channel.id)).toMatchObject({ status: 'error', lastError: expect.stringMatching(/^relay: .*454/) });
      // The message's own retry is due; the second failure in a row pauses the channel.
      offsetMs += 60_000;
      await sender.runOnce();
      const [row] = await t.database.db.select().from(channels).where(eq(channels.id, channel.id));
      expect(row!.sendFailures).toBe(2);
      expect(row!.sendPausedUntil!.getTime() - clock().getTime()).toBeGreaterThan(CHANNEL_PAUSE_MS[1]! - 5000);
      expect(row!.lastError).toMatch(/2 attempts in a row failed; the next after /);
      // A new message waits for the pause instead of trying the relay again.
      const logins = relay.logins;
      const second = await send(a, channel.id, 'Two');
      await sender.runOnce();
      expect(relay.logins).toBe(logins);
      expect((await outbox(second.id)).attempt).toBe(0);
      // Once the relay works and the pause is over, both leave and the channel is active again.
      refusing = false;
      offsetMs += 60 * 60_000;
      await sender.runOnce();
      expect(relayed(first)).toHaveLength(1);
      expect(relayed(second)).toHaveLength(1);
      expect(await channelOf(a, channel.id)).toMatchObject({ status: 'active', lastError: null });
    } finally {
      relay.script = {};
    }
  });

  it('a relay error does not stop receiving; a mailbox error answers 451, never 550; a change of inbound mode resets the status', async () => {
    const channel = await addChannel(a, { port: await refusedPort() });
    const sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
    await send(a, channel.id, 'Refused');
    await sender.runOnce();
    expect((await channelOf(a, channel.id)).status).toBe('error');
    const deliver = () =>
      nodemailer
        .createTransport({ host: '127.0.0.1', port: receiverPort, secure: false, ignoreTLS: true, connectionTimeout: 5000 })
        .sendMail({ from: 'customer@example.org', to: channel.address, subject: 'Hello', text: 'Hello' })
        .then((info) => info.response, (err: { responseCode?: number }) => `${err.responseCode}`);
    expect(await deliver()).toMatch(/^250 /);

    // In IMAP mode the mailbox fails ("mailbox: …"); back in SMTP mode the channel starts afresh and receives.
    const toImap = await a.request('PATCH', `/v1/channels/${channel.id}`, {
      inbound: { mode: 'imap', host: '127.0.0.1', port: await refusedPort(), secure: false, username: 'u', password: 'p' },
    });
    expect(toImap.status, toImap.body).toBe(200);
    await t.database.db.update(channels).set({ status: 'error', lastError: 'mailbox: IMAP: connect ECONNREFUSED' }).where(eq(channels.id, channel.id));
    const back = await a.request('PATCH', `/v1/channels/${channel.id}`, { inbound: { mode: 'smtp' } });
    expect(back.status, back.body).toBe(200);
    expect(back.json.data).toMatchObject({ status: 'active', lastError: null });
    expect(await deliver()).toMatch(/^250 /);

    // A channel in error on its mailbox side defers mail (451); the sending server tries again later.
    await t.database.db.update(channels).set({ status: 'error', lastError: 'mailbox: The mailbox is unavailable' }).where(eq(channels.id, channel.id));
    expect(await deliver()).toBe('451');
  });
});

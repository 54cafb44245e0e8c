import { randomBytes, randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.js';
import { mailOutbox } from '../../src/db/schema.js';
import { operationById } from '../../src/operations.js';
import { AutomaticMessageRefused } from '../../src/modules/channels/email/sending.repository.js';
import { runOperation } from '../../src/run-operation.js';
import type { SmtpReceiver } from '../../src/workers/smtp-receiver.js';
import { startTestReceiver } from '../helpers/smtp-receiver.js';
import { verifyDomainFor } from '../helpers/domains.js';
import nodemailer from 'nodemailer';
import { createMailSender, MAX_SEND_ATTEMPTS } from '../../src/workers/mail-sender.js';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { headerOf, startRelay, type Relay } from '../helpers/smtp-relay.js';

/**
 * Sending email end to end: the operations queue, the mail sender sends through a real SMTP server
 * (`smtp-server`, with AUTH) playing the channel's relay, and what it receives is read back (mailparser,
 * and mailauth for the DKIM signature).
 */

let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const silent = { error: () => {}, warn: () => {} };

const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true' } } });
let relay: Relay;
let sender: ReturnType<typeof createMailSender>;
/** The service's own SMTP receiver: customers' mail arrives through it. */
let receiver: SmtpReceiver;
let receiverPort = 0;

beforeAll(async () => {
  relay = await startRelay();
  sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
  ({ receiver, port: receiverPort } = await startTestReceiver(t.database.db));
});
afterAll(async () => {
  await receiver?.stop();
  await relay?.close();
});

/** A customer's email, delivered by nodemailer into the service's SMTP receiver; answers the message it became. */
async function receive(who: Tenant, channelId: string, mail: Json) {
  const info = await nodemailer
    .createTransport({ host: '127.0.0.1', port: receiverPort, secure: false, ignoreTLS: true, connectionTimeout: 5000 })
    .sendMail({ text: 'Hello', ...mail });
  expect(info.response).toMatch(/^250 /);
  const id = `${String(info.messageId).replace(/^<|>$/g, '')}`;
  const list = (await who.request('GET', '/v1/messages/incoming?limit=100')).json.data as Json[];
  const found = list.find((m) => m.channelId === channelId && m.providerMessageId === id);
  expect(found, `received ${id}`).toBeDefined();
  return found!;
}

let n = 0;
const unique = (domain = 'acme.example') => `support-${++n}-${Math.random().toString(36).slice(2, 8)}@${domain}`;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function addChannel(who: Tenant, extra: Json = {}) {
  const body = {
    type: 'email',
    name: 'Acme Support',
    address: unique(),
    inbound: { mode: 'smtp' },
    // The test relay offers no STARTTLS (a LAN relay: CHANNELS_ALLOW_PRIVATE).
    outbound: { host: '127.0.0.1', port: relay.port, secure: false, username: relay.user, password: relay.pass, tls: 'none' },
    ...extra,
  };
  await verifyDomainFor(t.database.db, who.orgId, body.address as string);
  const res = await who.request('POST', '/v1/channels', body);
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; address: string };
}

async function send(who: Tenant, body: Json, headers?: Record<string, string>) {
  const res = await who.request('POST', '/v1/messages/send', body, headers);
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

const get = async (who: Tenant, id: string) => (await who.request('GET', `/v1/messages/${id}`)).json.data as Json;
const eventsOf = async (who: Tenant, type: string, id: string) =>
  ((await who.request('GET', `/v1/events?type=${type}&limit=100`)).json.data as Json[]).filter((e) => e.resourceId === id);
const outbox = async (messageId: string) => (await t.database.db.select().from(mailOutbox).where(eq(mailOutbox.messageId, messageId)))[0]!;
const relayed = (messageId: string) => relay.received.filter((m) => headerOf(m.raw, 'Message-ID') === `<${messageId}>`);

/** Runs the sender until it has nothing left to do now. */
async function drain() {
  while ((await sender.runOnce()) > 0);
}

describe('POST /messages/send', () => {
  it('records the message queued with its outbox row, then sends it through the relay: sent, with its Message-ID and events', async () => {
    const channel = await addChannel(a);
    const m = await send(a, {
      channelId: channel.id,
      to: [{ email: 'ada@example.com', name: 'Ada Lovelace' }],
      cc: ['grace@example.com'],
      bcc: ['boss@example.com'],
      subject: 'Your invoice',
      text: 'Thanks, we received your invoice.',
      html: '<p>Thanks, we received your invoice.</p>',
    });
    expect(m).toMatchObject({ direction: 'outgoing', type: 'email', status: 'queued', statusReason: null, channelId: channel.id, providerMessageId: null, providerName: 'smtp' });
    expect(m.threadId).toEqual(expect.any(String));
    expect(m.sender).toEqual({ email: channel.address, name: 'Acme Support' });
    expect(m.recipient).toEqual({ email: 'ada@example.com', name: 'Ada Lovelace' });
    const messageId = m.metadata.email.messageId as string;
    expect(messageId).toMatch(/^[0-9a-f-]{36}@acme\.example$/);
    expect((await outbox(m.id)).status).toBe('pending');
    expect(await eventsOf(a, 'message.created', m.id)).toHaveLength(1);

    await drain();
    const [copy] = relayed(messageId);
    expect(relayed(messageId)).toHaveLength(1);
    expect(copy!.user).toBe(relay.user);
    expect(copy!.from).toBe(channel.address);
    expect(copy!.to.sort()).toEqual(['ada@example.com', 'boss@example.com', 'grace@example.com']);
    const parsed = await simpleParser(copy!.raw);
    expect(parsed.subject).toBe('Your invoice');
    expect(parsed.text?.trim()).toBe('Thanks, we received your invoice.');
    expect(parsed.html).toContain('<p>Thanks, we received your invoice.</p>');
    expect(headerOf(copy!.raw, 'To')).toBe('Ada Lovelace <ada@example.com>');
    expect(headerOf(copy!.raw, 'Cc')).toBe('grace@example.com');
    expect(headerOf(copy!.raw, 'Bcc')).toBeUndefined();
    expect(headerOf(copy!.raw, 'From')).toBe(`Acme Support <${channel.address}>`);
    expect(headerOf(copy!.raw, 'Auto-Submitted')).toBeUndefined();

    const sent = await get(a, m.id);
    expect(sent).toMatchObject({ status: 'sent', statusReason: null, providerMessageId: messageId });
    const events = await eventsOf(a, 'message.sent', m.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data.status).toBe('sent');
    // Nothing is sent twice.
    await drain();
    expect(relayed(messageId)).toHaveLength(1);
  });

  it('links the message to the contact email of its first recipient', async () => {
    const channel = await addChannel(a);
    const contact = (await a.request('POST', '/v1/contacts', { firstName: 'Ada' })).json.data as Json;
    const email = (await a.request('POST', `/v1/contacts/${contact.id}/emails`, { email: 'Ada.Linked@Example.com', label: 'work' })).json.data as Json;
    const m = await send(a, { channelId: channel.id, to: ['ada.linked@example.com'], subject: 'Linked', text: 'x' });
    expect(m.emailAddressId).toBe(email.id);
  });

  it('honours Idempotency-Key: the same request twice records and sends one message', async () => {
    const channel = await addChannel(a);
    const body = { channelId: channel.id, to: ['ada@example.com'], subject: 'Once', text: 'Only once' };
    const first = await send(a, body, { 'idempotency-key': 'send-once-1' });
    const again = await a.request('POST', '/v1/messages/send', body, { 'idempotency-key': 'send-once-1' });
    expect(again.status).toBe(201);
    expect(again.json.data.id).toBe(first.id);
    await drain();
    expect(relayed(first.metadata.email.messageId)).toHaveLength(1);
  });

  it('refuses header injection and bad addresses with a 400 at the field, and queues nothing', async () => {
    const channel = await addChannel(a);
    const base = { channelId: channel.id, to: ['ada@example.com'], subject: 'Hello', text: 'Hi' };
    const cases: [Json, (details: Json) => unknown][] = [
      [{ subject: 'Hello\r\nBcc: victim@example.com' }, (d) => d.properties.subject.errors[0]],
      [{ subject: 'Hello\nX-Injected: 1' }, (d) => d.properties.subject.errors[0]],
      [{ to: ['ada@example.com\r\nBcc: victim@example.com'] }, (d) => d.properties.to.items[0].errors[0]],
      [{ to: [{ email: 'ada@example.com', name: 'Ada\r\nBcc: victim@example.com' }] }, (d) => d.properties.to.items[0].properties.name.errors[0]],
      [{ cc: [{ email: 'grace@example.com\n', name: 'Grace' }] }, (d) => d.properties.cc.items[0].properties.email.errors[0]],
      [{ bcc: ['not an address'] }, (d) => d.properties.bcc.items[0].errors[0]],
      [{ to: [] }, (d) => d.properties.to.errors[0]],
      [{ to: ['ada@example.com'], cc: Array.from({ length: 50 }, (_, i) => `c${i}@example.com`) }, (d) => d.properties.to.errors[0]],
      [{ channelId: '5b0f1d52-4f5a-4c3e-9d7a-8c9b0a1e2f3d' }, (d) => d.properties.channelId.errors[0]],
    ];
    for (const [change, at] of cases) {
      const res = await a.request('POST', '/v1/messages/send', { ...base, ...change });
      expect(res.status, JSON.stringify(change)).toBe(400);
      expect(res.json.error.code).toBe('VALIDATION_ERROR');
      expect(at(res.json.error.details), `${JSON.stringify(change)} → ${JSON.stringify(res.json.error.details)}`).toEqual(expect.any(String));
    }
    // Another organization's channel, and a channel that cannot send.
    const foreign = await addChannel(b, { address: unique('beta.example') });
    expect((await a.request('POST', '/v1/messages/send', { ...base, channelId: foreign.id })).json.error.details.properties.channelId.errors[0]).toMatch(/No channel/);
    const receiveOnly = await addChannel(a, { outbound: null });
    expect((await a.request('POST', '/v1/messages/send', { ...base, channelId: receiveOnly.id })).json.error.details.properties.channelId.errors[0]).toMatch(/outbound/);
    const outgoing = (await a.request('GET', '/v1/messages/outgoing?limit=100')).json.data as Json[];
    expect(outgoing.filter((m) => m.channelId === channel.id || m.channelId === receiveOnly.id)).toEqual([]);
  });

  it('retries a temporary refusal with backoff, then sends', async () => {
    const channel = await addChannel(a);
    relay.script.rcpt = () => ({ code: 451, message: 'Greylisted, try again later' });
    const m = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Retry me', text: 'Soon' });
    try {
      await drain();
      let row = await outbox(m.id);
      expect(row).toMatchObject({ status: 'pending', attempt: 1 });
      expect(row.lastError).toMatch(/451/);
      expect(row.nextAttemptAt.getTime()).toBeGreaterThan(Date.now() + 20_000);
      expect((await get(a, m.id)).status).toBe('queued');
      await drain(); // not due yet
      expect((await outbox(m.id)).attempt).toBe(1);
      relay.script.rcpt = undefined;
      offsetMs += 60_000;
      await drain();
      row = await outbox(m.id);
      expect(row).toMatchObject({ status: 'sent', attempt: 2 });
      expect((await get(a, m.id)).status).toBe('sent');
      expect(relayed(m.metadata.email.messageId)).toHaveLength(1);
    } finally {
      relay.script.rcpt = undefined;
    }
  });

  it('marks a permanent refusal failed with the reason and the event message.failed', async () => {
    const channel = await addChannel(a);
    relay.script.rcpt = () => ({ code: 550, message: 'No such user here' });
    try {
      const m = await send(a, { channelId: channel.id, to: ['nobody@example.com'], subject: 'Bounce', text: 'x' });
      await drain();
      const failed = await get(a, m.id);
      expect(failed.status).toBe('failed');
      expect(failed.statusReason).toMatch(/550/);
      expect(failed.statusReason).toMatch(/No such user/);
      expect(await eventsOf(a, 'message.failed', m.id)).toHaveLength(1);
      expect(await eventsOf(a, 'message.sent', m.id)).toHaveLength(0);
    } finally {
      relay.script.rcpt = undefined;
    }
  });

  it('gives up after the last retry', async () => {
    const channel = await addChannel(a);
    relay.script.data = () => ({ code: 452, message: 'Mailbox full, try later' });
    try {
      const m = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Full', text: 'x' });
      for (let i = 0; i < MAX_SEND_ATTEMPTS; i++) {
        await drain();
        offsetMs += 9 * 3600_000;
      }
      const failed = await get(a, m.id);
      expect(failed.status).toBe('failed');
      expect(failed.statusReason).toMatch(new RegExp(`Gave up after ${MAX_SEND_ATTEMPTS} attempts.*452`));
      expect((await outbox(m.id)).attempt).toBe(MAX_SEND_ATTEMPTS);
      expect(await eventsOf(a, 'message.failed', m.id)).toHaveLength(1);
    } finally {
      relay.script.data = undefined;
    }
  });

  it('sends to the recipients the relay accepts and names the refused ones', async () => {
    const channel = await addChannel(a);
    relay.script.rcpt = (address) => (address === 'gone@example.com' ? { code: 550, message: 'No such user' } : undefined);
    try {
      const m = await send(a, { channelId: channel.id, to: ['ada@example.com', 'gone@example.com'], subject: 'Partly', text: 'x' });
      await drain();
      const sent = await get(a, m.id);
      expect(sent.status).toBe('sent');
      expect(sent.statusReason).toMatch(/gone@example\.com/);
      expect(relayed(m.metadata.email.messageId)[0]!.to).toEqual(['ada@example.com']);
    } finally {
      relay.script.rcpt = undefined;
    }
  });

  it('an attempt that outlasts its time is abandoned and retried; after the whole message, it is never sent again', async () => {
    const channel = await addChannel(a);
    const quick = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 800, random: () => 0.5 });
    relay.script.beforeAuth = () => new Promise<void>(() => {}); // the relay never answers the login
    try {
      const m = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Slow relay', text: 'x' });
      const started = Date.now();
      while ((await quick.runOnce()) > 0);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(await outbox(m.id)).toMatchObject({ status: 'pending', attempt: 1, lastError: expect.stringMatching(/did not finish within 800 ms/) });
      relay.script.beforeAuth = undefined;
      // The relay has the whole message but does not answer: the outcome is unknown, so it is not sent again.
      relay.script.recordFirst = true;
      relay.script.data = () => new Promise<undefined>(() => {});
      offsetMs += 60_000;
      while ((await quick.runOnce()) > 0);
      const failed = await get(a, m.id);
      expect(failed.status).toBe('failed');
      expect(failed.statusReason).toMatch(/outcome unknown/);
      expect(relayed(m.metadata.email.messageId)).toHaveLength(1);
    } finally {
      relay.script = {};
    }
  });

  it('fails when the relay refuses the login', async () => {
    const channel = await addChannel(a, { outbound: { host: '127.0.0.1', port: relay.port, secure: false, username: relay.user, password: 'wrong-password', tls: 'none' } });
    const m = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Login', text: 'x' });
    await drain();
    const failed = await get(a, m.id);
    expect(failed.status).toBe('failed');
    expect(failed.statusReason).toMatch(/535/);
    // The relay's refusal shows on the channel (which still receives), until new relay settings or a send through it succeeds.
    expect((await a.request('GET', `/v1/channels/${channel.id}`)).json.data).toMatchObject({ status: 'error', lastError: expect.stringMatching(/^relay: Sending through 127\.0\.0\.1: .*535/) });
    const fixed = await a.request('PATCH', `/v1/channels/${channel.id}`, { outbound: { host: '127.0.0.1', port: relay.port, secure: false, username: relay.user, password: relay.pass, tls: 'none' } });
    expect(fixed.status, fixed.body).toBe(200);
    await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Login again', text: 'x' });
    await drain();
    expect((await a.request('GET', `/v1/channels/${channel.id}`)).json.data).toMatchObject({ status: 'active', lastError: null });
  });

  it('deleting a queued message cancels its sending', async () => {
    const channel = await addChannel(a);
    const m = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Cancel me', text: 'x' });
    expect((await a.request('DELETE', `/v1/messages/${m.id}`)).status).toBe(200);
    await drain();
    expect(relayed(m.metadata.email.messageId)).toHaveLength(0);
    expect((await outbox(m.id)).status).toBe('failed');
  });

  it('is an operation that reaches the outside world (MCP annotation)', () => {
    for (const id of ['messages.send', 'messages.reply', 'messages.forward']) expect(operationById(id)?.effects?.openWorld, id).toBe(true);
  });
});

describe('replies and forwards', () => {
  it('a follow-up reply answers the same recipients, "Re:", In-Reply-To and References, in the same thread', async () => {
    const channel = await addChannel(a);
    const first = await send(a, { channelId: channel.id, to: [{ email: 'ada@example.com', name: 'Ada' }], subject: 'Quote', text: 'Here is the quote' });
    await drain();
    const res = await a.request('POST', `/v1/messages/${first.id}/reply`, { text: 'Any questions?' });
    expect(res.status, res.body).toBe(201);
    const reply = res.json.data as Json;
    expect(reply).toMatchObject({ status: 'queued', threadId: first.threadId, channelId: channel.id, recipient: { email: 'ada@example.com', name: 'Ada' } });
    expect(reply.metadata.email).toMatchObject({ subject: 'Re: Quote', inReplyTo: first.metadata.email.messageId, references: [first.metadata.email.messageId] });
    await drain();
    const [copy] = relayed(reply.metadata.email.messageId);
    expect(headerOf(copy!.raw, 'In-Reply-To')).toBe(`<${first.metadata.email.messageId}>`);
    expect(headerOf(copy!.raw, 'References')).toBe(`<${first.metadata.email.messageId}>`);
    expect(headerOf(copy!.raw, 'Subject')).toBe('Re: Quote');
    // "Re: Re:" is not made.
    const again = (await a.request('POST', `/v1/messages/${reply.id}/reply`, { text: 'Still there?' })).json.data as Json;
    expect(again.metadata.email.subject).toBe('Re: Quote');
    expect(again.metadata.email.references).toEqual([first.metadata.email.messageId, reply.metadata.email.messageId]);
    expect(again.threadId).toBe(first.threadId);
  });

  it('send with replyToMessageId joins the thread of that message', async () => {
    const channel = await addChannel(a);
    const first = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Order', text: 'x' });
    const next = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Re: Order', text: 'y', replyToMessageId: first.id });
    expect(next.threadId).toBe(first.threadId);
    expect(next.metadata.email.inReplyTo).toBe(first.metadata.email.messageId);
    const bad = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: ['ada@example.com'], subject: 'x', text: 'y', replyToMessageId: '5b0f1d52-4f5a-4c3e-9d7a-8c9b0a1e2f3d' });
    expect(bad.json.error.details.properties.replyToMessageId.errors[0]).toMatch(/No message/);
  });

  it('forwards a message inline, "Fwd:", in its thread', async () => {
    const channel = await addChannel(a);
    const first = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Invoice 42', text: 'The invoice text' });
    const res = await a.request('POST', `/v1/messages/${first.id}/forward`, { to: ['sales@example.com'], text: 'FYI' });
    expect(res.status, res.body).toBe(201);
    const fwd = res.json.data as Json;
    expect(fwd).toMatchObject({ threadId: first.threadId, recipient: { email: 'sales@example.com' } });
    await drain();
    const parsed = await simpleParser(relayed(fwd.metadata.email.messageId)[0]!.raw);
    expect(parsed.subject).toBe('Fwd: Invoice 42');
    expect(parsed.text).toContain('FYI');
    expect(parsed.text).toContain('---------- Forwarded message ---------');
    expect(parsed.text).toContain('Subject: Invoice 42');
    expect(parsed.text).toContain('The invoice text');
  });

  it('answers 404 for another organization\'s message, and 400 for a message without a channel', async () => {
    const channel = await addChannel(a);
    const first = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Mine', text: 'x' });
    expect((await b.request('POST', `/v1/messages/${first.id}/reply`, { text: 'x' })).status).toBe(404);
    expect((await b.request('POST', `/v1/messages/${first.id}/forward`, { to: ['x@example.com'] })).status).toBe(404);
    const recorded = (await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', sender: { email: 'ada@example.com' } })).json.data as Json;
    const reply = await a.request('POST', `/v1/messages/${recorded.id}/reply`, { text: 'x' });
    expect(reply.status).toBe(400);
    expect(reply.json.error.details.properties.id.errors[0]).toMatch(/channel/);
    const fwd = await a.request('POST', `/v1/messages/${recorded.id}/forward`, { to: ['x@example.com'] });
    expect(fwd.json.error.details.properties.channelId.errors[0]).toMatch(/channel/);
    expect((await a.request('POST', `/v1/messages/${recorded.id}/forward`, { to: ['x@example.com'], channelId: channel.id })).status).toBe(201);
  });
});

describe('attachments', () => {
  const pdf = Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(3000)]);
  const csv = Buffer.from('id;amount\n1;42,00\n');
  const attachmentsOf = async (messageId: string) => (await simpleParser(relayed(messageId)[0]!.raw)).attachments.map((x) => [x.filename, x.contentType, x.content.toString('base64')]);

  it('send and reply take uploaded files and attachments the organization has; the relay receives them', async () => {
    const channel = await addChannel(a);
    const m = await send(a, {
      channelId: channel.id,
      to: ['ada@example.com'],
      subject: 'Your invoice',
      text: 'Attached.',
      attachments: [{ filename: 'invoice.pdf', contentType: 'application/pdf', content: pdf.toString('base64') }, { filename: 'lines.csv', contentType: 'text/csv', content: csv.toString('base64') }],
    });
    expect(m.metadata.email.attachments).toEqual([
      { id: expect.any(String), filename: 'invoice.pdf', contentType: 'application/pdf', size: pdf.length, stored: true },
      { id: expect.any(String), filename: 'lines.csv', contentType: 'text/csv', size: csv.length, stored: true },
    ]);
    const listed = (await a.request('GET', `/v1/messages/${m.id}/attachments`)).json.data as Json[];
    expect(listed.map((x) => x.filename).sort()).toEqual(['invoice.pdf', 'lines.csv']);
    await drain();
    expect((await get(a, m.id)).status).toBe('sent');
    expect(await attachmentsOf(m.metadata.email.messageId)).toEqual([
      ['invoice.pdf', 'application/pdf', pdf.toString('base64')],
      ['lines.csv', 'text/csv', csv.toString('base64')],
    ]);

    // A reply re-sends one of them by its id (copied, so it outlives the first message).
    const reply = await a.request('POST', `/v1/messages/${m.id}/reply`, { text: 'Again', attachments: [{ attachmentId: m.metadata.email.attachments[0].id }] });
    expect(reply.status, reply.body).toBe(201);
    expect(reply.json.data.metadata.email.attachments[0].id).not.toBe(m.metadata.email.attachments[0].id);
    await drain();
    expect(await attachmentsOf(reply.json.data.metadata.email.messageId)).toEqual([['invoice.pdf', 'application/pdf', pdf.toString('base64')]]);
  });

  it('refuses another organization\'s attachment id, bad content and too many files with a 400 at the field, queueing nothing', async () => {
    const channel = await addChannel(a);
    const mine = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'x', text: 'x', attachments: [{ filename: 'a.txt', content: Buffer.from('a').toString('base64') }] });
    expect(mine.metadata.email.attachments[0].contentType).toBe('application/octet-stream');
    const otherChannel = await addChannel(b, { address: unique('other.example') });
    const base = { channelId: otherChannel.id, to: ['ada@example.com'], subject: 'x', text: 'x' };
    const foreign = await b.request('POST', '/v1/messages/send', { ...base, attachments: [{ attachmentId: mine.metadata.email.attachments[0].id }] });
    expect(foreign.status).toBe(400);
    expect(foreign.json.error.details.properties.attachments.items[0].properties.attachmentId.errors[0]).toMatch(/No attachment/);
    const bad = await b.request('POST', '/v1/messages/send', { ...base, attachments: [{ filename: 'a.txt', content: 'not base64!' }] });
    expect(bad.status).toBe(400);
    const injected = await b.request('POST', '/v1/messages/send', { ...base, attachments: [{ filename: 'a.txt\r\nBcc: x@evil.example', content: 'YQ==' }] });
    expect(injected.status).toBe(400);
    const many = await b.request('POST', '/v1/messages/send', { ...base, attachments: Array.from({ length: 21 }, (_, i) => ({ filename: `${i}.txt`, content: 'YQ==' })) });
    expect(many.status).toBe(400);
    const listed = (await b.request('GET', '/v1/messages?limit=100')).json.data as Json[];
    expect(listed.filter((x) => x.channelId === otherChannel.id)).toHaveLength(0);
  });

  it('forward carries the original\'s attachments by default (three received, three leave); includeAttachments false leaves them out', async () => {
    const channel = await addChannel(a);
    const received = await receive(a, channel.id, {
      from: 'supplier@example.org',
      to: channel.address,
      subject: 'Invoices',
      attachments: [
        { filename: 'one.pdf', content: pdf, contentType: 'application/pdf' },
        { filename: 'two.csv', content: csv, contentType: 'text/csv' },
        { filename: 'three.txt', content: 'three', contentType: 'text/plain' },
      ],
    });
    expect(received.metadata.email.attachments).toHaveLength(3);
    const fwd = await a.request('POST', `/v1/messages/${received.id}/forward`, { to: ['accounts@example.com'], text: 'For booking' });
    expect(fwd.status, fwd.body).toBe(201);
    const without = await a.request('POST', `/v1/messages/${received.id}/forward`, { to: ['accounts@example.com'], includeAttachments: false });
    expect(without.status, without.body).toBe(201);
    await drain();
    expect(await attachmentsOf(fwd.json.data.metadata.email.messageId)).toEqual([
      ['one.pdf', 'application/pdf', pdf.toString('base64')],
      ['two.csv', 'text/csv', csv.toString('base64')],
      ['three.txt', 'text/plain', Buffer.from('three').toString('base64')],
    ]);
    expect(await attachmentsOf(without.json.data.metadata.email.messageId)).toEqual([]);
  });
});

describe('answering received mail', () => {
  it('a customer writes, we reply, the customer answers: one thread, the reply threaded by its headers', async () => {
    const channel = await addChannel(a);
    const incoming = await receive(a, channel.id, {
      from: '"Ada Lovelace" <ada@customer.example>',
      to: `"Acme Support" <${channel.address}>`,
      subject: 'Invoice 42',
      text: 'Is invoice 42 paid?',
      messageId: `<q-${randomUUID()}@customer.example>`,
    });
    const res = await a.request('POST', `/v1/messages/${incoming.id}/reply`, { text: 'Yes, paid on Monday.' });
    expect(res.status, res.body).toBe(201);
    const reply = res.json.data as Json;
    expect(reply).toMatchObject({ channelId: channel.id, threadId: incoming.threadId, recipient: { email: 'ada@customer.example', name: 'Ada Lovelace' } });
    await drain();
    const [copy] = relayed(reply.metadata.email.messageId);
    expect(copy!.to).toEqual(['ada@customer.example']);
    expect(copy!.from).toBe(channel.address);
    expect(headerOf(copy!.raw, 'Subject')).toBe('Re: Invoice 42');
    expect(headerOf(copy!.raw, 'In-Reply-To')).toBe(`<${incoming.providerMessageId}>`);
    expect(headerOf(copy!.raw, 'References')).toBe(`<${incoming.providerMessageId}>`);

    // The customer's answer to our reply lands in the same thread (a second later: a Date header counts whole seconds).
    await new Promise((r) => setTimeout(r, 1100));
    const answer = await receive(a, channel.id, {
      from: 'ada@customer.example',
      to: channel.address,
      subject: 'Re: Re: Invoice 42',
      text: 'Thanks!',
      inReplyTo: `<${reply.metadata.email.messageId}>`,
      references: [`<${incoming.providerMessageId}>`, `<${reply.metadata.email.messageId}>`],
    });
    expect(answer.threadId).toBe(incoming.threadId);
    const thread = (await a.request('GET', `/v1/messages?threadId=${encodeURIComponent(incoming.threadId)}`)).json.data as Json[];
    expect(thread.map((m) => m.id)).toEqual([incoming.id, reply.id, answer.id]);
  });

  it('answers the Reply-To; replyAll adds the other To and Cc addresses, never the organization\'s own', async () => {
    const channel = await addChannel(a);
    const colleague = await addChannel(a);
    const incoming = await receive(a, channel.id, {
      from: 'ada@customer.example',
      replyTo: 'billing@customer.example',
      to: [channel.address, 'bob@customer.example', colleague.address],
      cc: ['"Charles" <charles@customer.example>'],
      subject: 'Team question',
    });
    const single = (await a.request('POST', `/v1/messages/${incoming.id}/reply`, { text: 'One' })).json.data as Json;
    expect(single.metadata.email.to).toEqual([{ email: 'billing@customer.example' }]);
    expect(single.metadata.email.cc).toEqual([]);
    const all = (await a.request('POST', `/v1/messages/${incoming.id}/reply`, { text: 'All', replyAll: true })).json.data as Json;
    expect(all.metadata.email.to).toEqual([{ email: 'billing@customer.example' }]);
    expect(all.metadata.email.cc).toEqual([{ email: 'bob@customer.example' }, { email: 'charles@customer.example', name: 'Charles' }]);
    await drain();
    expect(relayed(all.metadata.email.messageId)[0]!.to.sort()).toEqual(['billing@customer.example', 'bob@customer.example', 'charles@customer.example']);
  });
});

describe('automatic mail (RFC 3834)', () => {
  const asAutomation = (automationId: string) => ({ orgId: a.orgId, actor: { type: 'automation' as const, id: automationId, depth: 1 }, permissions: ['*'], db: t.database.db });

  it('an automation\'s mail carries Auto-Submitted: auto-generated, and never goes to the organization\'s own addresses', async () => {
    const channel = await addChannel(a);
    const other = await addChannel(a);
    const automationId = randomUUID();
    const sent = await runOperation(operationById('messages.send')!, { channelId: channel.id, to: ['ada@example.com'], subject: 'Automatic', text: 'x' }, asAutomation(automationId));
    const m = sent.data as Json;
    expect(m.metadata.email.autoSubmitted).toBe('auto-generated');
    await drain();
    expect(headerOf(relayed(m.metadata.email.messageId)[0]!.raw, 'Auto-Submitted')).toBe('auto-generated');
    expect(await eventsOf(a, 'message.sent', m.id)).toMatchObject([{ actor: { type: 'automation', id: automationId } }]);

    const looping = runOperation(operationById('messages.send')!, { channelId: channel.id, to: [other.address.toUpperCase()], subject: 'Loop', text: 'x' }, asAutomation(automationId));
    await expect(looping).rejects.toBeInstanceOf(AutomaticMessageRefused);
    await expect(looping).rejects.toThrow(/own channel addresses/);
    const forwarding = runOperation(operationById('messages.forward')!, { id: m.id, to: [channel.address] }, asAutomation(automationId));
    await expect(forwarding).rejects.toThrow(/own channel addresses/);
    // A person may write to the organization's own address.
    expect((await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [other.address], subject: 'Internal', text: 'x' })).status).toBe(201);
  });

  it('an automation answers with Auto-Submitted: auto-replied, never automatic, bulk or list mail nor its own addresses, and a sender once a day', async () => {
    const channel = await addChannel(a);
    const colleague = await addChannel(a);
    const automationId = randomUUID();
    const reply = (id: string, who = automationId) => runOperation(operationById('messages.reply')!, { id, text: 'Thanks, we received your invoice.' }, asAutomation(who));
    const from = `ada-${randomUUID().slice(0, 8)}@customer.example`;
    const mail = (headers: Record<string, string> = {}, sender = from) => receive(a, channel.id, { from: sender, to: channel.address, subject: 'Invoice', headers });

    for (const [headers, reason] of [
      [{ 'Auto-Submitted': 'auto-replied' }, /itself automatic/],
      [{ 'Auto-Submitted': 'auto-generated' }, /itself automatic/],
      [{ Precedence: 'bulk' }, /bulk or list/],
      [{ Precedence: 'list' }, /bulk or list/],
      [{ 'List-Id': '<news.customer.example>' }, /mailing list/],
    ] as const) {
      const m = await mail(headers);
      const refused = reply(m.id);
      await expect(refused, JSON.stringify(headers)).rejects.toBeInstanceOf(AutomaticMessageRefused);
      await expect(refused).rejects.toThrow(reason);
    }
    await expect(reply((await mail({}, colleague.address)).id)).rejects.toThrow(/own channel addresses/);

    const first = await mail({ 'Auto-Submitted': 'no' });
    const answered = (await reply(first.id)).data as Json;
    expect(answered.metadata.email.autoSubmitted).toBe('auto-replied');
    await drain();
    expect(headerOf(relayed(answered.metadata.email.messageId)[0]!.raw, 'Auto-Submitted')).toBe('auto-replied');
    // The same sender again the same day: not answered by this automation, answered by another one.
    const second = await mail();
    await expect(reply(second.id)).rejects.toThrow(/already answered/);
    expect(((await reply(second.id, randomUUID())).data as Json).status).toBe('queued');
    // A person may answer anything.
    const bulk = await mail({ Precedence: 'bulk' });
    expect((await a.request('POST', `/v1/messages/${bulk.id}/reply`, { text: 'Personal answer' })).status).toBe(201);
  });
});

describe('DKIM', () => {
  it('signs what a channel at a domain with a key sends; the private key is never answered; the DNS records verify the signature', async () => {
    const domainName = `dkim-${Math.random().toString(36).slice(2, 8)}.example`;
    const domain = (await a.request('POST', '/v1/domains', { name: domainName })).json.data as Json;
    expect(domain.dkim).toBeNull();
    const keyed = await a.request('POST', `/v1/domains/${domain.id}/dkim-key`, {});
    expect(keyed.status, keyed.body).toBe(201);
    const dkim = keyed.json.data.dkim as Json;
    expect(dkim).toMatchObject({ algorithm: 'rsa-sha256', selector: expect.stringMatching(/^sb\d{8}[0-9a-f]{4}$/) });
    for (const body of [keyed.body, (await a.request('GET', `/v1/domains/${domain.id}`)).body, (await a.request('GET', '/v1/domains?limit=100')).body, (await a.request('GET', '/v1/events?type=domain.updated')).body]) {
      expect(body).not.toMatch(/PRIVATE KEY|dkimPrivateKey/);
    }
    expect((await b.request('POST', `/v1/domains/${domain.id}/dkim-key`, {})).status).toBe(404);

    const channel = await addChannel(a, { address: `hello@${domainName}` });
    const records = (await a.request('GET', `/v1/domains/${domain.id}/dns-records`)).json.data as Json[];
    expect(records.map((r) => `${r.type} ${r.name}`)).toEqual([
      `MX ${domainName}`,
      `TXT ${domainName}`,
      `TXT _switchboard.${domainName}`,
      `TXT ${dkim.selector}._domainkey.${domainName}`,
      `TXT _dmarc.${domainName}`,
    ]);
    // A relay given by IP is an ip4: mechanism (a: takes a host name only).
    expect(records[1]!.value).toBe('v=spf1 ip4:127.0.0.1 ~all');
    expect(records[2]!.value).toBe(domain.verification.token);
    expect(records[4]!.value).toMatch(/^v=DMARC1; p=none/);
    const dkimRecord = records[3]!;
    expect(dkimRecord.value).toBe(`v=DKIM1; k=rsa; p=${dkim.publicKey}`);
    // The long DKIM value also as character-strings of at most 255 bytes, which join to the value.
    expect(dkimRecord.strings.length).toBeGreaterThan(1);
    expect(dkimRecord.strings.every((x: string) => Buffer.byteLength(x) <= 255)).toBe(true);
    expect(dkimRecord.strings.join('')).toBe(dkimRecord.value);

    const m = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Signed', text: 'Signed mail' });
    await drain();
    const raw = relayed(m.metadata.email.messageId)[0]!.raw;
    expect(headerOf(raw, 'DKIM-Signature')).toContain(`d=${domainName}`);
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === dkimRecord.name) return [[dkimRecord.value]];
      throw Object.assign(new Error(`no ${type} record for ${name}`), { code: 'ENOTFOUND' });
    };
    const verified = await dkimVerify(raw, { resolver });
    expect(verified.results.map((r) => [r.signingDomain, r.selector, r.status.result])).toEqual([[domainName, dkim.selector, 'pass']]);
    // Altered in transit: the signature no longer verifies (mailauth calls a body-hash mismatch "neutral").
    const altered = Buffer.from(raw.toString('utf8').replace('Signed mail', 'Changed mail'));
    expect((await dkimVerify(altered, { resolver })).results[0]!.status.result).toMatch(/^(fail|neutral)$/);

    // A rotated key signs under its new selector.
    const rotated = (await a.request('POST', `/v1/domains/${domain.id}/dkim-key`, {})).json.data.dkim as Json;
    expect(rotated.selector).not.toBe(dkim.selector);
    const m2 = await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: 'Signed again', text: 'x' });
    await drain();
    expect(headerOf(relayed(m2.metadata.email.messageId)[0]!.raw, 'DKIM-Signature')).toContain(`s=${rotated.selector}`);

    // A channel whose domain has no key sends unsigned.
    const plain = await addChannel(a);
    const m3 = await send(a, { channelId: plain.id, to: ['ada@example.com'], subject: 'Unsigned', text: 'x' });
    await drain();
    expect(headerOf(relayed(m3.metadata.email.messageId)[0]!.raw, 'DKIM-Signature')).toBeUndefined();
  });
});

describe('several senders at once', () => {
  it('send each message exactly once', async () => {
    const second = testDbKind === 'postgres' ? await openDatabase({ url: (t.database as Database & { url: string }).url, poolSize: 5 }) : undefined;
    try {
      const channel = await addChannel(a);
      await drain();
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) ids.push((await send(a, { channelId: channel.id, to: ['ada@example.com'], subject: `Bulk ${i}`, text: 'x' })).metadata.email.messageId);
      const senders = [t.database, second ?? t.database, t.database].map((d) =>
        createMailSender({ db: d.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000 }),
      );
      for (;;) {
        const done = await Promise.all(senders.map((s) => s.runOnce()));
        if (done.every((x) => x === 0)) break;
      }
      expect(ids.map((id) => relayed(id).length)).toEqual(ids.map(() => 1));
    } finally {
      await second?.close();
    }
  });
});

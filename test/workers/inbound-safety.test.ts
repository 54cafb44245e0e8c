import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { and, eq, isNull } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inboundFailures, messages } from '../../src/db/schema.js';
import { receiveEmail } from '../../src/modules/channels/email/inbound.js';
import { createImapSync } from '../../src/workers/imap-sync.js';
import type { SmtpReceiver } from '../../src/workers/smtp-receiver.js';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { rawEmail, skipWithoutDovecot, startDovecot, type Dovecot } from '../helpers/dovecot.js';
import { deliverRaw } from '../helpers/smtp-client.js';
import { noDns, startTestReceiver } from '../helpers/smtp-receiver.js';

/**
 * One message never stops a mailbox, and mail from the open internet is read safely: identifiers bounded in
 * bytes, a message that keeps failing recorded as not importable (SMTP 554, the IMAP checkpoint moves on),
 * HTML anywhere in the MIME tree turned into text, a reused Message-ID with other content kept as its own
 * message. Real SMTP (a bare socket) into the receiver, real IMAP (Dovecot) into the sync.
 */

const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true' } } });
const silent = { error() {}, warn() {}, info() {} };

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any


let n = 0;
async function smtpChannel(tenant: Tenant) {
  const address = `inbox-${++n}-${Math.random().toString(36).slice(2, 8)}@acme-${tenant.orgId.slice(0, 8)}.example`;
  await verifyDomainFor(t.database.db, tenant.orgId, address);
  const res = await tenant.request('POST', '/v1/channels', { type: 'email', name: 'Inbox', address, inbound: { mode: 'smtp' } });
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; address: string };
}

const received = async (channelId: string) =>
  t.database.db.select().from(messages).where(and(eq(messages.channelId, channelId), isNull(messages.deletedAt))).orderBy(messages.createdAt);
const failuresOf = async (channelId: string) => t.database.db.select().from(inboundFailures).where(eq(inboundFailures.channelId, channelId));

const mail = (opts: { to: string; messageId: string; subject?: string; body?: string; extra?: string }) =>
  `From: Ada <ada@outside.example>\r\nTo: ${opts.to}\r\nSubject: ${opts.subject ?? 'Hello'}\r\nDate: Thu, 26 Nov 2026 10:00:00 +0000\r\nMessage-ID: <${opts.messageId}>\r\nMIME-Version: 1.0\r\n${opts.extra ?? 'Content-Type: text/plain; charset=utf-8\r\n'}\r\n${opts.body ?? 'Hello there.'}\r\n`;

/** 990 CJK characters: 2,970 bytes, over PostgreSQL's 2,704-byte btree row limit. */
const CJK_ID = `${'漢'.repeat(990)}@outside.example`;
/** HTML that mailparser converts in seconds, not milliseconds (the review's was 300,000 cells: 50 s). */
const bigTable = (cells: number) => `<html><body><table>${`<tr>${'<td>cell</td>'.repeat(10)}</tr>`.repeat(cells / 10)}</table></body></html>`;

describe('SMTP: one message never stops a mailbox', () => {
  let receiver: SmtpReceiver;
  let port = 0;
  let slow: SmtpReceiver;
  let slowPort = 0;
  beforeAll(async () => {
    ({ receiver, port } = await startTestReceiver(t.database.db, { maxBytes: 6_000_000, attachmentMaxBytes: 100_000 }));
    // A deadline no real reading of the big table meets (its HTML is converted to text only up to 128 KB, which
    // a fast machine reads in a fraction of a second).
    ({ receiver: slow, port: slowPort } = await startTestReceiver(t.database.db, { maxBytes: 6_000_000, parseTimeoutMs: 5, resolver: noDns }));
  });
  afterAll(async () => {
    await receiver?.stop();
    await slow?.stop();
  });

  it('stores a 990-CJK-character Message-ID hashed, and threads a reply to it the same way', async () => {
    const channel = await smtpChannel(a);
    expect((await deliverRaw(port, channel.address, mail({ to: channel.address, messageId: CJK_ID, subject: 'Long id' }))).code).toBe(250);
    const reply = mail({ to: channel.address, messageId: 'reply-1@outside.example', subject: 'Re: Long id', extra: `In-Reply-To: <${CJK_ID}>\r\nReferences: <${CJK_ID}>\r\nContent-Type: text/plain\r\n` });
    expect((await deliverRaw(port, channel.address, reply)).code).toBe(250);
    // The same message again is the same message.
    expect((await deliverRaw(port, channel.address, mail({ to: channel.address, messageId: CJK_ID, subject: 'Long id' }))).code).toBe(250);
    const rows = await received(channel.id);
    expect(rows).toHaveLength(2);
    expect(Buffer.byteLength(rows[0]!.providerMessageId!)).toBeLessThanOrEqual(250);
    expect(rows[0]!.providerMessageId).toMatch(/^[0-9a-f]{64}@long-id\.switchboard\.invalid$/);
    expect(rows[1]!.threadId).toBe(rows[0]!.threadId);
  });

  it('refuses a header block over the bounds for good (554) and records it as not importable', async () => {
    const channel = await smtpChannel(a);
    const folded = mail({ to: channel.address, messageId: 'folded@outside.example', subject: 'Folded', extra: `X-Folded: a${'\n b'.repeat(10_000)}\r\nContent-Type: text/plain\r\n` });
    const res = await deliverRaw(port, channel.address, folded);
    expect(res.code).toBe(554);
    expect(res.text).toContain('header block');
    const [failure] = await failuresOf(channel.id);
    expect(failure).toMatchObject({ provider: 'smtp', subject: 'Folded', sender: 'Ada <ada@outside.example>', size: expect.any(Number) });
    expect(failure!.notImportableAt).not.toBeNull();
    expect(failure!.reason).toContain('header block');
    // Operators see it on the channel; another organization does not.
    const listed = await a.request('GET', `/v1/channels/${channel.id}/not-imported`);
    expect(listed.status, listed.body).toBe(200);
    expect(listed.json.data).toEqual([expect.objectContaining({ id: failure!.id, provider: 'smtp', subject: 'Folded', attempts: 1, notImportableAt: expect.any(String) })]);
    expect((await b.request('GET', `/v1/channels/${channel.id}/not-imported`)).status).toBe(404);
  });

  it('answers 451 while a message takes too long to read, and 554 the third time, recorded as not importable', async () => {
    const channel = await smtpChannel(a);
    const table = mail({ to: channel.address, messageId: 'table@outside.example', subject: 'Table', extra: 'Content-Type: text/html\r\n', body: bigTable(100_000) });
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) codes.push((await deliverRaw(slowPort, channel.address, table)).code);
    expect(codes).toEqual([451, 451, 554]);
    const [failure] = await failuresOf(channel.id);
    expect(failure).toMatchObject({ attempts: 3, subject: 'Table' });
    expect(failure!.notImportableAt).not.toBeNull();
    expect(failure!.reason).toMatch(/longer than/);
    // The receiver still takes other mail at once (with the usual deadline).
    expect((await deliverRaw(port, channel.address, mail({ to: channel.address, messageId: 'after@outside.example' }))).code).toBe(250);
  });

  it('keeps a second, different message that reuses a known Message-ID as its own message', async () => {
    const channel = await smtpChannel(a);
    const first = mail({ to: channel.address, messageId: 'same@outside.example', subject: 'Forged', body: 'Pay to account 666' });
    const second = mail({ to: channel.address, messageId: 'same@outside.example', subject: 'Invoice', body: 'Pay to account 42' });
    for (const raw of [first, second, second, first]) expect((await deliverRaw(port, channel.address, raw)).code).toBe(250);
    const rows = await received(channel.id);
    expect(rows.map((r) => r.summary)).toEqual(['Forged', 'Invoice']);
    expect(rows.map((r) => (r.metadata as Json).email.messageId)).toEqual(['same@outside.example', 'same@outside.example']);
  });

  it('turns HTML inside multipart/mixed and multipart/related into text and keeps the HTML as message.html', async () => {
    const channel = await smtpChannel(a);
    const b = 'xyz';
    const mixed = mail({
      to: channel.address,
      messageId: 'mixed@outside.example',
      subject: 'Scan',
      extra: `Content-Type: multipart/mixed; boundary="${b}"\r\n`,
      body: `--${b}\r\nContent-Type: text/html\r\n\r\n<p>Your <b>scan</b> is attached</p>\r\n--${b}\r\nContent-Type: application/pdf; name="scan.pdf"\r\nContent-Disposition: attachment; filename="scan.pdf"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQ=\r\n--${b}--`,
    });
    const mhtml = mail({
      to: channel.address,
      messageId: 'mhtml@outside.example',
      subject: 'Page',
      extra: `Content-Type: multipart/related; boundary="${b}"; type="text/html"\r\n`,
      body: `--${b}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Location: https://example.com/\r\n\r\n<h1>Ticket 7</h1><p>Printer is down</p><img src="logo.png">\r\n--${b}\r\nContent-Type: image/png\r\nContent-Location: https://example.com/logo.png\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n--${b}--`,
    });
    for (const raw of [mixed, mhtml]) expect((await deliverRaw(port, channel.address, raw)).code).toBe(250);
    const [scan, page] = await received(channel.id);
    expect(scan!.text).toContain('Your scan is attached');
    expect(page!.text).toContain('Printer is down');
    const parts = ((scan!.metadata as Json).email.attachments as Json[]).map((p) => p.filename);
    expect(parts).toEqual(['scan.pdf', 'message.html']);
    const html = ((scan!.metadata as Json).email.attachments as Json[])[1]!;
    const got = await a.request('GET', `/v1/messages/${scan!.id}/attachments/${html.id}`);
    expect(got.status, got.body).toBe(200);
    expect(Buffer.from(got.json.data.content as string, 'base64').toString()).toContain('<b>scan</b>');
  });
});

describe.skipIf(skipWithoutDovecot())('IMAP: one message never stops a mailbox (skipped: Dovecot is not installed)', () => {
  let dovecot: Dovecot;
  beforeAll(async () => {
    dovecot = await startDovecot();
  });
  afterAll(() => dovecot?.close());

  it('moves past a message that fails three times, records it, and takes the mail after it; lastError holds no SQL', async () => {
    const mailbox = `Box${Math.random().toString(36).slice(2, 8)}`;
    const c = await dovecot.client();
    await c.mailboxCreate(mailbox);
    await c.logout();
    const res = await a.request('POST', '/v1/channels', {
      type: 'email',
      name: 'IMAP',
      address: `${mailbox.toLowerCase()}@acme.example`,
      inbound: { mode: 'imap', host: dovecot.host, port: dovecot.port, secure: false, username: dovecot.user, password: dovecot.password, mailbox, tls: 'none' },
    });
    expect(res.status, res.body).toBe(201);
    const channelId = res.json.data.id as string;
    const table = mail({ to: 'x@acme.example', messageId: 'imap-table@outside.example', subject: 'Table', extra: 'Content-Type: text/html\r\n', body: bigTable(100_000) });
    await dovecot.append([rawEmail({ messageId: CJK_ID, subject: 'Long id' }), table, rawEmail({ messageId: 'after-table@outside.example', subject: 'After' })], { mailbox });

    const errors: string[] = [];
    // A deadline no real reading of the table meets, and the usual one for the other messages.
    const sync = createImapSync({
      db: t.database.db, clock: () => new Date(), log: silent, initialDays: 30, pollMs: 60_000, allowPrivate: true, reconnectDelaysMs: [50],
      receive: (channel, raw, inTransaction) => receiveEmail({ db: t.database.db, resolver: noDns, parseTimeoutMs: raw.includes('imap-table@') ? 5 : 30_000 }, channel, raw, 'imap', undefined, { inTransaction }),
    });
    try {
      sync.start();
      const deadline = Date.now() + 60_000;
      while ((await received(channelId)).length < 2 && Date.now() < deadline) {
        const ch = (await a.request('GET', `/v1/channels/${channelId}`)).json.data as { lastError: string | null };
        if (ch.lastError) errors.push(ch.lastError);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await sync.stop();
    }
    const rows = await received(channelId);
    expect(rows.map((r) => r.summary)).toEqual(['Long id', 'After']);
    const [failure] = await failuresOf(channelId);
    expect(failure).toMatchObject({ provider: 'imap', attempts: 3, subject: 'Table' });
    expect(failure!.notImportableAt).not.toBeNull();
    for (const e of errors) expect(e).not.toMatch(/insert|select|values|\$1|cell/i);
    // Authentication results name no undefined client IP or sender for mail without a Received header.
    const header = (rows[1]!.metadata as Json).email.authentication.header as string;
    expect(header).not.toContain('undefined');
    expect((rows[1]!.metadata as Json).email.authentication.spf).toBe('none');
  }, 90_000);
});

/** Opens an SMTP session and gives `commands` one by one; answers each reply code, and whether the server closed the connection. */
function converse(port: number, commands: string[]): Promise<{ codes: number[]; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const codes: number[] = [];
    let buffered = '';
    let next = 0;
    let quit = false;
    socket.setEncoding('utf8');
    socket.on('error', reject);
    // The greeting's code is not an answer to a command.
    socket.on('close', () => resolve({ codes: codes.slice(1, commands.length + 1), closed: !quit }));
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split('\r\n');
      buffered = lines.pop()!;
      for (const l of lines) {
        if (!/^\d{3} /.test(l)) continue;
        codes.push(Number(l.slice(0, 3)));
        if (next < commands.length) socket.write(commands[next++]!);
        else if (!quit) {
          quit = true;
          socket.end('QUIT\r\n');
        }
      }
    });
  });
}

describe('SMTP: fair under abuse', () => {
  it('closes a connection after 20 refused recipients, and limits RCPTs per IP address, refused ones included', async () => {
    const { receiver, port } = await startTestReceiver(t.database.db, { rcptPerMinute: 30 });
    try {
      const channel = await smtpChannel(a);
      const probes = Array.from({ length: 25 }, (_, i) => `RCPT TO:<nobody-${i}@acme.example>\r\n`);
      const first = await converse(port, ['EHLO p.example\r\n', 'MAIL FROM:<p@p.example>\r\n', ...probes]);
      expect(first.codes.slice(2)).toEqual([...Array(19).fill(550), 421]);
      expect(first.closed).toBe(true);
      // 20 RCPTs of the 30 a minute are spent: the rest of the minute is refused, a real address too.
      const second = await converse(port, ['EHLO p.example\r\n', 'MAIL FROM:<p@p.example>\r\n', ...Array.from({ length: 10 }, (_, i) => `RCPT TO:<nobody-x${i}@acme.example>\r\n`), `RCPT TO:<${channel.address}>\r\n`]);
      expect(second.codes.slice(2)).toEqual([...Array(10).fill(550), 450]);
    } finally {
      await receiver.stop();
    }
  });

  it('counts an IPv6 address by its /64', async () => {
    const { ipKey } = await import('../../src/workers/smtp-addresses.js');
    expect(ipKey('2001:db8:1:2:aaaa::1')).toBe(ipKey('2001:db8:1:2:bbbb::2'));
    expect(ipKey('2001:db8:1:3::1')).not.toBe(ipKey('2001:db8:1:2::1'));
    expect(ipKey('::ffff:192.0.2.7')).toBe('192.0.2.7');
  });

  it('knows a channel made by this process at once, and one made elsewhere within the refresh', async () => {
    const { receiver, port } = await startTestReceiver(t.database.db, { addressRefreshMs: 200 });
    try {
      const channel = await smtpChannel(a);
      expect((await converse(port, ['EHLO p.example\r\n', 'MAIL FROM:<p@p.example>\r\n', `RCPT TO:<${channel.address}>\r\n`])).codes[2]).toBe(250);
      // Another process's write: no event in this one.
      const { channels } = await import('../../src/db/schema.js');
      const [row] = await t.database.db.select().from(channels).where(eq(channels.id, channel.id));
      const address = `elsewhere-${Math.random().toString(36).slice(2, 8)}@acme.example`;
      await t.database.db.insert(channels).values({ ...row!, id: undefined as never, address, createdAt: new Date(), updatedAt: new Date() });
      await new Promise((r) => setTimeout(r, 600));
      expect((await converse(port, ['EHLO p.example\r\n', 'MAIL FROM:<p@p.example>\r\n', `RCPT TO:<${address}>\r\n`])).codes[2]).toBe(250);
    } finally {
      await receiver.stop();
    }
  });

  it('drops DATA that trickles in (slow-loris), so that the slots come free', async () => {
    const { receiver, port } = await startTestReceiver(t.database.db, { maxConnections: 5, maxConnectionsPerIp: 5, dataMinRate: 100, dataGraceMs: 500 });
    try {
      const channel = await smtpChannel(a);
      const started = Date.now();
      const slow = Array.from(
        { length: 5 },
        () =>
          new Promise<number>((resolve, reject) => {
            const socket = connect(port, '127.0.0.1');
            const steps = ['EHLO s.example\r\n', 'MAIL FROM:<s@s.example>\r\n', `RCPT TO:<${channel.address}>\r\n`, 'DATA\r\n'];
            let trickle: NodeJS.Timeout | undefined;
            socket.setEncoding('utf8');
            socket.on('error', reject);
            socket.on('close', () => (clearInterval(trickle), resolve(Date.now() - started)));
            socket.on('data', (chunk: string) => {
              if (steps.length > 0) return void socket.write(steps.shift()!);
              // After 354: one byte every 300 ms.
              if (!trickle && chunk.startsWith('354')) trickle = setInterval(() => socket.write('x'), 300);
            });
          }),
      );
      const closedAfter = await Promise.all(slow);
      // Dropped within seconds (the grace and a check), not held for the socket's minutes.
      for (const ms of closedAfter) expect(ms).toBeLessThan(10_000);
      expect((await deliverRaw(port, channel.address, mail({ to: channel.address, messageId: 'after-loris@outside.example' }))).code).toBe(250);
    } finally {
      await receiver.stop();
    }
  });

  it('drops a connection whose commands trickle in before DATA, so that the slots come free', async () => {
    const { receiver, port } = await startTestReceiver(t.database.db, { maxConnections: 3, maxConnectionsPerIp: 3, commandTimeoutMs: 1000 });
    try {
      const channel = await smtpChannel(a);
      const started = Date.now();
      const slow = Array.from(
        { length: 3 },
        () =>
          new Promise<{ ms: number; text: string }>((resolve, reject) => {
            const socket = connect(port, '127.0.0.1');
            let text = '';
            let trickle: NodeJS.Timeout | undefined;
            socket.setEncoding('utf8');
            socket.on('error', reject);
            socket.on('close', () => (clearInterval(trickle), resolve({ ms: Date.now() - started, text })));
            socket.on('data', (chunk: string) => {
              text += chunk;
              if (text.includes('250 ') && !trickle) {
                // After EHLO: a command one byte every 200 ms, which never ends; the socket is never idle.
                const command = `MAIL FROM:<${'s'.repeat(200)}@s.example>\r\n`;
                let i = 0;
                trickle = setInterval(() => socket.write(command[i++ % command.length]!), 200);
              } else if (!text.includes('250 ') && text.startsWith('220')) socket.write('EHLO s.example\r\n');
            });
          }),
      );
      const closed = await Promise.all(slow);
      for (const { ms, text } of closed) {
        expect(ms).toBeLessThan(8000);
        expect(text).toMatch(/421 .*No command completed/);
      }
      expect((await deliverRaw(port, channel.address, mail({ to: channel.address, messageId: 'after-command-loris@outside.example' }))).code).toBe(250);
    } finally {
      await receiver.stop();
    }
  });

  it('receives at an IDN address, whether the recipient is given in A-labels or in Unicode', async () => {
    const { receiver, port } = await startTestReceiver(t.database.db);
    try {
      const local = `support-${Math.random().toString(36).slice(2, 8)}`;
      await verifyDomainFor(t.database.db, a.orgId, 'xn--bcher-kva.example');
      const res = await a.request('POST', '/v1/channels', { type: 'email', name: 'IDN', address: `${local}@xn--bcher-kva.example`, inbound: { mode: 'smtp' } });
      expect(res.status, res.body).toBe(201);
      expect((await deliverRaw(port, `${local}@xn--bcher-kva.example`, mail({ to: `${local}@xn--bcher-kva.example`, messageId: 'idn-1@outside.example' }))).code).toBe(250);
      const unicode = await converse(port, ['EHLO p.example\r\n', 'MAIL FROM:<p@p.example> SMTPUTF8\r\n', `RCPT TO:<${local}@bücher.example>\r\n`]);
      expect(unicode.codes[2]).toBe(250);
      expect(await received(res.json.data.id as string)).toHaveLength(1);
    } finally {
      await receiver.stop();
    }
  });
});

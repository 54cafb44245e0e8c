import { execFileSync } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluateCondition } from '../../src/modules/automations/condition.js';
import { createAutomationEngine } from '../../src/workers/automation-engine.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import type { SmtpReceiver } from '../../src/workers/smtp-receiver.js';
import { startTestReceiver } from '../helpers/smtp-receiver.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { createTestApp, useTestApp, type Tenant } from '../helpers/app.js';

/**
 * The SMTP receiver, for real: nodemailer delivers into it over TCP, the message is read back over REST.
 * DNS is a table (SPF, DKIM and DMARC records of `sender.example`), so authentication runs offline.
 */

const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY } } });

const dkimKeys = generateKeyPairSync('rsa', { modulusLength: 2048 });
const dkimPublic = dkimKeys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
const dkimPrivate = dkimKeys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();

const DNS: Record<string, string[][]> = {
  'TXT sender.example': [['v=spf1 ip4:127.0.0.1 ip6:::1 -all']],
  'TXT sel._domainkey.sender.example': [[`v=DKIM1; k=rsa; p=${dkimPublic}`]],
  'TXT _dmarc.sender.example': [['v=DMARC1; p=reject']],
};
/** An offline resolver: the table above, NXDOMAIN for everything else. */
const resolver = async (name: string, rrtype: string) => {
  const found = DNS[`${rrtype} ${name.toLowerCase()}`];
  if (found) return found;
  throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
};

let receiver: SmtpReceiver;
let port = 0;
const ATTACHMENT_LIMIT = 2000;

const transport = () =>
  nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, tls: { rejectUnauthorized: false }, connectionTimeout: 5000 });

let n = 0;
const uniqueAddress = (who = 'support') => `${who}-${++n}-${Math.random().toString(36).slice(2, 8)}@acme.example`;

async function smtpChannel(tenant: Tenant, address = uniqueAddress(), db = t.database.db) {
  await verifyDomainFor(db, tenant.orgId, address);
  const res = await tenant.request('POST', '/v1/channels', { type: 'email', name: 'Support', address, inbound: { mode: 'smtp' } });
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; address: string };
}

async function messagesOf(tenant: Tenant, channelId: string) {
  const res = await tenant.request('GET', '/v1/messages?limit=100');
  return (res.json.data as { channelId: string }[]).filter((m) => m.channelId === channelId) as Record<string, any>[]; // eslint-disable-line @typescript-eslint/no-explicit-any
}

beforeAll(async () => {
  ({ receiver, port } = await startTestReceiver(t.database.db, { attachmentMaxBytes: ATTACHMENT_LIMIT, resolver }));
});
afterAll(() => receiver?.stop());

describe('SMTP receiver', () => {
  it('turns a delivered email into one incoming message with its events, every field filled', async () => {
    const channel = await smtpChannel(a);
    const contact = await a.request('POST', '/v1/contacts', { firstName: 'Ada' });
    const contactEmail = await a.request('POST', `/v1/contacts/${contact.json.data.id}/emails`, { email: 'Ada@Sender.Example', label: 'work' });
    expect(contactEmail.status, contactEmail.body).toBe(201);
    const contactEmailId = contactEmail.json.data.id as string;

    const info = await transport().sendMail({
      from: '"Ada Lovelace" <ada@sender.example>',
      to: `"Acme Support" <${channel.address}>`,
      cc: 'Charles <charles@sender.example>',
      replyTo: 'replies@sender.example',
      subject: 'Invoice 42 — question',
      text: 'Hello, is invoice 42 paid?',
      html: '<p>Hello, is <b>invoice 42</b> paid?</p>',
      date: new Date('2026-03-01T10:00:00Z'),
      messageId: '<first-42@sender.example>',
      headers: { 'List-Id': '<news.sender.example>' },
    });
    expect(info.response).toMatch(/^250 /);

    const [m] = await messagesOf(a, channel.id);
    expect(m).toMatchObject({
      type: 'email',
      direction: 'incoming',
      status: 'received',
      providerName: 'smtp',
      providerMessageId: 'first-42@sender.example',
      channelId: channel.id,
      sender: { email: 'ada@sender.example', name: 'Ada Lovelace' },
      recipient: { email: channel.address, name: 'Acme Support' },
      text: 'Hello, is invoice 42 paid?',
      summary: 'Invoice 42 — question',
      timestamp: '2026-03-01T10:00:00.000Z',
      emailAddressId: contactEmailId,
    });
    expect(m!.threadId).toMatch(/^[0-9a-f-]{36}$/);
    expect(m!.metadata.email).toMatchObject({
      messageId: 'first-42@sender.example',
      subject: 'Invoice 42 — question',
      cc: [{ email: 'charles@sender.example', name: 'Charles' }],
      replyTo: [{ email: 'replies@sender.example', name: null }],
      listId: '<news.sender.example>',
      inReplyTo: null,
      references: [],
      attachments: [],
    });

    const events = (await a.request('GET', '/v1/events?limit=100')).json.data.filter((e: { resourceId: string }) => e.resourceId === m!.id);
    expect(events.map((e: { type: string }) => e.type).sort()).toEqual(['message.created', 'message.received']);
    expect(events[0].data.metadata.email.subject).toBe('Invoice 42 — question');

    // The channel says when it last received.
    expect((await a.request('GET', `/v1/channels/${channel.id}`)).json.data.lastSyncAt).not.toBeNull();
    // Nothing reached the other organization.
    expect(await messagesOf(b, channel.id)).toEqual([]);
  });

  it('refuses recipients that are not an active inbound-SMTP channel with 550, and never relays', async () => {
    const channel = await smtpChannel(a);
    await expect(transport().sendMail({ from: 'x@sender.example', to: 'someone@elsewhere.example', text: 'relay me' })).rejects.toMatchObject({ responseCode: 550 });
    const disabled = await smtpChannel(a);
    expect((await a.request('PATCH', `/v1/channels/${disabled.id}`, { status: 'disabled' })).status).toBe(200);
    await expect(transport().sendMail({ from: 'x@sender.example', to: disabled.address, text: 'hi' })).rejects.toMatchObject({ responseCode: 550 });
    const imap = await a.request('POST', '/v1/channels', {
      type: 'email', name: 'Imap', address: uniqueAddress(), inbound: { mode: 'imap', host: 'imap.acme.example', username: 'u', password: 'p' },
    });
    await expect(transport().sendMail({ from: 'x@sender.example', to: imap.json.data.address, text: 'hi' })).rejects.toMatchObject({ responseCode: 550 });
    // A message to a known and an unknown address: only the known one gets it.
    const info = await transport().sendMail({ from: 'x@sender.example', to: [channel.address, 'nobody@elsewhere.example'], text: 'partly' });
    expect(info.rejected).toEqual(['nobody@elsewhere.example']);
    expect(await messagesOf(a, channel.id)).toHaveLength(1);
  });

  it('makes one message of the same Message-ID delivered twice', async () => {
    const channel = await smtpChannel(a);
    const mail = { from: 'ada@sender.example', to: channel.address, subject: 'Twice', text: 'once', messageId: '<twice-1@sender.example>', date: new Date('2026-04-01T08:00:00Z') };
    // A redelivery is the same bytes: the Date is fixed (nodemailer stamps the current second on each send otherwise).
    await transport().sendMail(mail);
    const again = await transport().sendMail(mail);
    expect(again.response).toMatch(/^250 /);
    expect(await messagesOf(a, channel.id)).toHaveLength(1);
  });

  it('threads replies by In-Reply-To and References; GET /messages?threadId lists the thread oldest first', async () => {
    const channel = await smtpChannel(a);
    await transport().sendMail({ from: 'ada@sender.example', to: channel.address, subject: 'Order', text: 'first', messageId: '<t1@sender.example>', date: new Date('2026-04-01T09:00:00Z') });
    await transport().sendMail({
      from: 'ada@sender.example', to: channel.address, subject: 'Re: Order', text: 'second', messageId: '<t2@sender.example>',
      inReplyTo: '<t1@sender.example>', references: ['<t1@sender.example>'], date: new Date('2026-04-01T10:00:00Z'),
    });
    // Only References, naming an unknown id first and the thread's last message after it.
    await transport().sendMail({
      from: 'ada@sender.example', to: channel.address, subject: 'Re: Re: Order', text: 'third', messageId: '<t3@sender.example>',
      references: ['<unknown@elsewhere.example>', '<t1@sender.example>', '<t2@sender.example>'], date: new Date('2026-04-01T11:00:00Z'),
    });
    await transport().sendMail({ from: 'ada@sender.example', to: channel.address, subject: 'Other', text: 'unrelated', messageId: '<t4@sender.example>' });

    const all = await messagesOf(a, channel.id);
    const byText = Object.fromEntries(all.map((m) => [m.text, m]));
    const thread = byText.first!.threadId as string;
    expect(byText.second!.threadId).toBe(thread);
    expect(byText.third!.threadId).toBe(thread);
    expect(byText.unrelated!.threadId).not.toBe(thread);

    const listed = await a.request('GET', `/v1/messages?threadId=${thread}`);
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((m: { text: string }) => m.text)).toEqual(['first', 'second', 'third']);
    const newestFirst = await a.request('GET', `/v1/messages?threadId=${thread}&sortOrder=desc&limit=2`);
    expect(newestFirst.json.data.map((m: { text: string }) => m.text)).toEqual(['third', 'second']);
    expect((await b.request('GET', `/v1/messages?threadId=${thread}`)).json.data).toEqual([]);
  });

  it('believes the Date header only within sane bounds', async () => {
    const channel = await smtpChannel(a);
    const before = Date.now();
    await transport().sendMail({ from: 'ada@sender.example', to: channel.address, text: 'future', date: new Date('2100-01-01T00:00:00Z') });
    await transport().sendMail({ from: 'ada@sender.example', to: channel.address, text: 'ancient', date: new Date('1970-01-02T00:00:00Z') });
    await transport().sendMail({ from: 'ada@sender.example', to: channel.address, text: 'sane', date: new Date('2020-05-05T05:05:05Z') });
    const byText = Object.fromEntries((await messagesOf(a, channel.id)).map((m) => [m.text, m]));
    for (const text of ['future', 'ancient']) {
      const at = Date.parse(byText[text]!.timestamp);
      expect(at, text).toBeGreaterThanOrEqual(before - 1000);
      expect(at, text).toBeLessThanOrEqual(Date.now() + 1000);
    }
    expect(byText.sane!.timestamp).toBe('2020-05-05T05:05:05.000Z');
    expect(byText.future!.metadata.email.date).toMatch(/2100/);
  });

  it('converts an HTML-only body to text', async () => {
    const channel = await smtpChannel(a);
    await transport().sendMail({ from: 'ada@sender.example', to: channel.address, subject: 'Html', html: '<h1>Welcome</h1><p>Your <a href="https://x.example">order</a> shipped.</p>' });
    const [m] = await messagesOf(a, channel.id);
    expect(m!.text).toMatch(/WELCOME|Welcome/);
    expect(m!.text).toMatch(/order/);
    expect(m!.text).not.toMatch(/<p>/);
  });

  it('keeps attachments up to the per-message limit and serves them; drops the rest with a note', async () => {
    const channel = await smtpChannel(a);
    const small = Buffer.from('%PDF-1.4 small invoice');
    await transport().sendMail({
      from: 'ada@sender.example', to: channel.address, subject: 'Files', text: 'see attached',
      attachments: [
        { filename: 'invoice.pdf', content: small, contentType: 'application/pdf' },
        { filename: 'big.bin', content: randomBytes(ATTACHMENT_LIMIT), contentType: 'application/octet-stream' },
      ],
    });
    const [m] = await messagesOf(a, channel.id);
    const [pdf, big] = m!.metadata.email.attachments;
    expect(pdf).toMatchObject({ filename: 'invoice.pdf', contentType: 'application/pdf', size: small.length, stored: true });
    expect(big).toMatchObject({ filename: 'big.bin', size: ATTACHMENT_LIMIT, stored: false, id: null });
    expect(m!.metadata.email.notes.join(' ')).toMatch(/big\.bin/);

    const got = await a.request('GET', `/v1/messages/${m!.id}/attachments/${pdf.id}`);
    expect(got.status, got.body).toBe(200);
    expect(got.json.data).toMatchObject({ id: pdf.id, messageId: m!.id, filename: 'invoice.pdf', size: small.length });
    expect(Buffer.from(got.json.data.content, 'base64').equals(small)).toBe(true);
    expect((await b.request('GET', `/v1/messages/${m!.id}/attachments/${pdf.id}`)).status).toBe(404);
    const listed = await a.request('GET', `/v1/messages/${m!.id}/attachments`);
    expect(listed.json.data).toEqual([{ id: pdf.id, messageId: m!.id, filename: 'invoice.pdf', contentType: 'application/pdf', size: small.length, contentId: null, createdAt: expect.any(String) }]);
    expect((await b.request('GET', `/v1/messages/${m!.id}/attachments`)).status).toBe(404);
    // Gone with its message.
    await a.request('DELETE', `/v1/messages/${m!.id}`);
    expect((await a.request('GET', `/v1/messages/${m!.id}/attachments/${pdf.id}`)).status).toBe(404);
  });

  it('stores an attachment once per organization, however many of its channels and organizations the message is for', async () => {
    const first = await smtpChannel(a);
    const second = await smtpChannel(a);
    const other = await smtpChannel(b, uniqueAddress().replace('@acme.example', '@other-org.example'));
    const invoice = randomBytes(600);
    const sha256 = createHash('sha256').update(invoice).digest('hex');
    await transport().sendMail({
      from: 'ada@sender.example', to: [first.address, second.address, other.address], subject: 'Invoice for all', text: 'see attached',
      attachments: [{ filename: 'invoice.pdf', content: invoice, contentType: 'application/pdf' }],
    });
    const received = [...(await messagesOf(a, first.id)), ...(await messagesOf(a, second.id)), ...(await messagesOf(b, other.id))];
    expect(received).toHaveLength(3);
    // Each message has its own attachment id, and each serves the same bytes to its own organization.
    for (const [m, tenant] of received.map((m, i) => [m, i < 2 ? a : b] as const)) {
      const [info] = m.metadata.email.attachments;
      const got = await tenant.request('GET', `/v1/messages/${m.id}/attachments/${info.id}`);
      expect(got.status, got.body).toBe(200);
      expect(Buffer.from(got.json.data.content, 'base64').equals(invoice)).toBe(true);
    }
    // The bytes: one copy for each organization, not one per channel.
    const copies = await t.database.db.execute(sql`SELECT organization_id FROM attachment_contents WHERE sha256 = ${sha256}`);
    expect((copies.rows as { organization_id: string }[]).map((r) => r.organization_id).sort()).toEqual([a.orgId, b.orgId].sort());
  });

  it('records SPF, DKIM and DMARC; automation conditions can use them', async () => {
    const channel = await smtpChannel(a);
    await transport().sendMail({
      from: 'Ada <ada@sender.example>', to: channel.address, subject: 'Signed', text: 'signed body',
      envelope: { from: 'bounces@sender.example', to: [channel.address] },
      dkim: { domainName: 'sender.example', keySelector: 'sel', privateKey: dkimPrivate },
    });
    // Forged: claims sender.example without its signature.
    await transport().sendMail({ from: 'ceo@sender.example', to: channel.address, subject: 'Forged', text: 'wire money', envelope: { from: 'ceo@forger.example', to: [channel.address] } });

    const all = await messagesOf(a, channel.id);
    const signed = all.find((m) => m.text === 'signed body')!;
    const forged = all.find((m) => m.text === 'wire money')!;
    expect(signed.metadata.email.authentication).toMatchObject({ spf: 'pass', dkim: 'pass', dmarc: 'pass', dkimDomains: ['sender.example'], spfDomain: 'sender.example' });
    expect(forged.metadata.email.authentication).toMatchObject({ dkim: 'none', dmarc: 'fail', dmarcPolicy: 'reject' });

    const condition = { field: 'metadata.email.authentication.dmarc', operator: 'equals', value: 'pass' } as const;
    expect(evaluateCondition(condition, signed)).toBe(true);
    expect(evaluateCondition(condition, forged)).toBe(false);
  });

  it('triggers automations like any message: only mail that passes DMARC is marked read', async () => {
    const channel = await smtpChannel(a);
    const engine = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock: () => new Date(), log: { error() {}, warn() {} } });
    const created = await a.request('POST', '/v1/automations', {
      name: 'Trusted mail',
      instructions: 'When a new email arrives, mark it as read',
      condition: { field: 'metadata.email.authentication.dmarc', operator: 'equals', value: 'pass' },
    });
    expect(created.status, created.body).toBe(201);
    await engine.runOnce();
    const approved = await a.request('POST', `/v1/automations/${created.json.data.id}/approve`);
    expect(approved.json.data?.status, approved.body).toBe('active');

    await transport().sendMail({
      from: 'ada@sender.example', to: channel.address, subject: 'Signed', text: 'trusted',
      envelope: { from: 'ada@sender.example', to: [channel.address] },
      dkim: { domainName: 'sender.example', keySelector: 'sel', privateKey: dkimPrivate },
    });
    await transport().sendMail({ from: 'ada@sender.example', to: channel.address, subject: 'Forged', text: 'untrusted', envelope: { from: 'x@forger.example', to: [channel.address] } });
    await engine.runOnce();
    await engine.runOnce();
    const all = await messagesOf(a, channel.id);
    expect(all.find((m) => m.text === 'trusted')!.readAt).not.toBeNull();
    expect(all.find((m) => m.text === 'untrusted')!.readAt).toBeNull();
  });

  it('answers 552 to a message over SMTP_MAX_BYTES and keeps nothing', async () => {
    const channel = await smtpChannel(a);
    await expect(transport().sendMail({ from: 'ada@sender.example', to: channel.address, text: 'x'.repeat(250_000) })).rejects.toMatchObject({ responseCode: 552 });
    expect(await messagesOf(a, channel.id)).toEqual([]);
  });

  it('takes hostile mail as ordinary input: stored as well as it can be, never a crash, and keeps serving', async () => {
    const channel = await smtpChannel(a);
    const nested = (depth: number): string =>
      depth === 0 ? 'Content-Type: text/plain\r\n\r\ndeep\r\n' : `Content-Type: multipart/mixed; boundary="b${depth}"\r\n\r\n--b${depth}\r\n${nested(depth - 1)}--b${depth}--\r\n`;
    const head = (subject: string, extra = '') => `From: hostile@sender.example\r\nTo: ${channel.address}\r\nSubject: ${subject}\r\n${extra}`;
    const corpus: [string, Buffer][] = [
      ['malformed MIME', Buffer.from(`${head('broken')}MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="never"\r\n\r\n--nope\r\nContent-Type: text/plain\r\n\r\nno closing boundary\r\n`)],
      ['nesting bomb', Buffer.from(`${head('bomb')}MIME-Version: 1.0\r\n${nested(1500)}`)],
      ['huge header', Buffer.from(`${head('huge')}X-Huge: ${'a'.repeat(150_000)}\r\n\r\nbody after a huge header\r\n`)],
      ['many headers', Buffer.from(`${head('many')}${'X-Many: 1\r\n'.repeat(5000)}\r\nbody\r\n`)],
      ['invalid charset', Buffer.from(`${head('charset')}Content-Type: text/plain; charset=x-no-such-charset\r\n\r\nbytes \xff\xfe here\r\n`, 'latin1')],
      ['invalid UTF-8 and base64', Buffer.from(`${head('=?utf-8?B?////?=')}Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64 at all\xc3\x28\r\n`, 'latin1')],
      ['8-bit headers', Buffer.from(`From: "J\xfcrgen" <j@sender.example>\r\nTo: ${channel.address}\r\nSubject: Caf\xe9 cr\xe8me\r\nX-Utf8: \xc3\xa9t\xc3\xa9\r\n\r\n8-bit header body\r\n`, 'latin1')],
      ['NUL bytes', Buffer.from(`${head('nul\u0000subject')}\r\nbody with \u0000 NUL\u0000 bytes\r\n`)],
      ['no headers at all', Buffer.from('just some text\r\nwithout headers\r\n')],
      ['encoded-word bomb', Buffer.from(`${head('=?utf-8?Q?' + '=C3=A9'.repeat(5000) + '?=')}\r\nbody\r\n`)],
    ];
    const outcomes: Record<string, string> = {};
    for (const [name, raw] of corpus) {
      try {
        const info = await transport().sendMail({ envelope: { from: 'hostile@sender.example', to: [channel.address] }, raw });
        outcomes[name] = info.response.slice(0, 3);
      } catch (err) {
        const code = (err as { responseCode?: number }).responseCode;
        outcomes[name] = String(code ?? (err as Error).message);
      }
    }
    // Each is stored (250) or refused with a permanent SMTP error; none made the receiver fail.
    for (const [name, outcome] of Object.entries(outcomes)) expect(outcome, name).toMatch(/^(250|5\d\d)$/);
    const stored = await a.request('GET', '/v1/messages?limit=100');
    expect(stored.status).toBe(200);
    const mine = (stored.json.data as Record<string, any>[]).filter((m) => m.channelId === channel.id); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(mine.length).toBe(Object.values(outcomes).filter((o) => o === '250').length);
    for (const m of mine) expect(JSON.stringify(m)).not.toContain('\\u0000');
    const nul = mine.find((m) => String(m.text).includes('body with'));
    expect(nul?.text).toBe('body with  NUL bytes');
    expect(mine.find((m) => String(m.text).startsWith('just some text'))?.text).toBe('just some text\r\nwithout headers');
    // Legacy 8-bit (Latin-1) headers are read as Latin-1, not as replacement characters.
    const eightBit = mine.find((m) => m.text === '8-bit header body')!;
    expect(eightBit.summary).toBe('Café crème');
    expect(eightBit.sender).toEqual({ email: 'j@sender.example', name: 'Jürgen' });
    expect(mine.filter((m) => m.metadata.email.parseError).length).toBeGreaterThanOrEqual(1); // the nesting bomb: kept as raw text

    // Still serving.
    const ok = await transport().sendMail({ from: 'ada@sender.example', to: channel.address, subject: 'after', text: 'still here' });
    expect(ok.response).toMatch(/^250 /);
  });
});

describe('SMTP receiver with the database down', () => {
  it('answers 451 so that the sender tries again', async () => {
    const app = await createTestApp({ env: { SECRETS_KEY } });
    const tenant = await app.tenant();
    const channel = await smtpChannel(tenant, uniqueAddress(), app.database.db);
    const { receiver: down, port: downPort } = await startTestReceiver(app.database.db, { maxBytes: 100_000, maxConnections: 5, maxConnectionsPerIp: 5, attachmentMaxBytes: 1000, resolver });
    const send = () =>
      nodemailer.createTransport({ host: '127.0.0.1', port: downPort, secure: false, ignoreTLS: true }).sendMail({ from: 'ada@sender.example', to: channel.address, text: 'hello' });
    try {
      expect((await send()).response).toMatch(/^250 /);
      await app.app.close();
      await app.database.close();
      await expect(send()).rejects.toMatchObject({ responseCode: 451 });
    } finally {
      await down.stop();
    }
  });
});

describe('SMTP receiver with a certificate', () => {
  it('offers STARTTLS and receives over it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-smtp-tls-'));
    try {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=mx.switchboard.test'], { stdio: 'ignore' });
      const channel = await smtpChannel(a);
      const { receiver: tls, port: p } = await startTestReceiver(t.database.db, {
        maxBytes: 100_000, maxConnections: 5, maxConnectionsPerIp: 5, attachmentMaxBytes: 1000, resolver,
        tls: { cert: readFileSync(join(dir, 'cert.pem')), key: readFileSync(join(dir, 'key.pem')) },
      });
      try {
        const info = await nodemailer
          .createTransport({ host: '127.0.0.1', port: p, secure: false, requireTLS: true, tls: { rejectUnauthorized: false } })
          .sendMail({ from: 'ada@sender.example', to: channel.address, subject: 'tls', text: 'over TLS' });
        expect(info.response).toMatch(/^250 /);
        expect((await messagesOf(a, channel.id)).map((m) => m.text)).toEqual(['over TLS']);
      } finally {
        await tls.stop();
      }
      // Without a certificate STARTTLS is not offered: a client that requires it gives up.
      await expect(
        nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, requireTLS: true }).sendMail({ from: 'ada@sender.example', to: channel.address, text: 'x' }),
      ).rejects.toThrow(/STARTTLS/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SMTP receiver limits', () => {
  it('limits connections and messages per IP address', async () => {
    const channel = await smtpChannel(a);
    const { receiver: limited, port: p } = await startTestReceiver(t.database.db, { maxBytes: 100_000, maxConnections: 10, maxConnectionsPerIp: 1, ratePerMinute: 2, attachmentMaxBytes: 1000, resolver });
    try {
      const pooled = nodemailer.createTransport({ host: '127.0.0.1', port: p, secure: false, ignoreTLS: true, pool: true, maxConnections: 1 });
      expect((await pooled.sendMail({ from: 'ada@sender.example', to: channel.address, text: 'one' })).response).toMatch(/^250/);
      // A second connection from the same address while the pooled one is open: refused.
      const second = nodemailer.createTransport({ host: '127.0.0.1', port: p, secure: false, ignoreTLS: true });
      await expect(second.sendMail({ from: 'ada@sender.example', to: channel.address, text: 'two' })).rejects.toMatchObject({ responseCode: 421 });
      // The refused connection's end does not free the open one's place.
      await new Promise((r) => setTimeout(r, 100));
      await expect(second.sendMail({ from: 'ada@sender.example', to: channel.address, text: 'two again' })).rejects.toMatchObject({ responseCode: 421 });
      expect((await pooled.sendMail({ from: 'ada@sender.example', to: channel.address, text: 'three' })).response).toMatch(/^250/);
      await expect(pooled.sendMail({ from: 'ada@sender.example', to: channel.address, text: 'four' })).rejects.toMatchObject({ responseCode: 450 });
      pooled.close();
      // Once it is closed, another connection is let in (and meets the message rate limit, not the connection limit).
      await new Promise((r) => setTimeout(r, 300));
      await expect(second.sendMail({ from: 'ada@sender.example', to: channel.address, text: 'five' })).rejects.toMatchObject({ responseCode: 450 });
      expect((await messagesOf(a, channel.id)).map((m) => m.text).sort()).toEqual(['one', 'three']);
    } finally {
      await limited.stop();
    }
  });
});

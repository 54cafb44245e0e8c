import { randomBytes } from 'node:crypto';
import nodemailer from 'nodemailer';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forceVerifyDomain } from '../../src/modules/domains/domains.repository.js';
import type { SmtpReceiver } from '../../src/workers/smtp-receiver.js';
import { useTestApp } from '../helpers/app.js';
import { startTestReceiver } from '../helpers/smtp-receiver.js';

/**
 * Internationalised domain names in channel addresses: given in Unicode or in A-labels, stored in A-labels,
 * one channel whichever form is used, and mail to either form over SMTP reaches it.
 */

// IMAP passwords are stored encrypted: with PostgreSQL the key must be given.
const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY: randomBytes(32).toString('base64') } } });

const UNICODE = 'bücher.example';
const ASCII = 'xn--bcher-kva.example';

let receiver: SmtpReceiver;
let port = 0;

beforeAll(async () => {
  ({ receiver, port } = await startTestReceiver(t.database.db));
});
afterAll(() => receiver?.stop());

const create = (tenant: typeof a, address: string, inbound: Record<string, unknown> = { mode: 'smtp' }) =>
  tenant.request('POST', '/v1/channels', { type: 'email', name: 'Bücher', address, inbound });

async function verify(tenant: typeof a, name: string) {
  const added = await tenant.request('POST', '/v1/domains', { name });
  expect(added.status, added.body).toBe(201);
  // The operator's `domain verify --force`: no DNS here.
  await forceVerifyDomain(t.database.db, tenant.orgId, added.json.data.name as string, new Date());
  return added.json.data.name as string;
}

describe('channel addresses at internationalised domains', () => {
  it('needs the domain verified, and names it in A-labels', async () => {
    const res = await create(a, `support@${UNICODE}`);
    expect(res.status, res.body).toBe(400);
    expect(JSON.stringify(res.json.error)).toContain(ASCII);
  });

  it('stores a Unicode domain in A-labels, lower-cased, and counts both forms as one address', async () => {
    // The domain added in Unicode is the A-label domain, and verifies addresses given in either form.
    expect(await verify(a, 'Bücher.Example')).toBe(ASCII);

    const created = await create(a, 'Support@BÜCHER.example');
    expect(created.status, created.body).toBe(201);
    expect(created.json.data.address).toBe(`support@${ASCII}`);
    expect((await a.request('GET', `/v1/channels/${created.json.data.id}`)).json.data.address).toBe(`support@${ASCII}`);

    // The other form is the same address: the duplicate answer, as for any address given twice.
    const again = await create(a, `support@${ASCII}`);
    expect(again.status, again.body).toBe(400);
    expect(again.json.error.details.properties.address.errors[0]).toMatch(/already exists/);
    expect((await create(a, `Support@${UNICODE}`)).status).toBe(400);

    // A change of address is stored the same way.
    const other = await create(a, `sales@${ASCII}`);
    expect(other.status, other.body).toBe(201);
    const patched = await a.request('PATCH', `/v1/channels/${other.json.data.id}`, { address: `Verkauf@${UNICODE}` });
    expect(patched.status, patched.body).toBe(200);
    expect(patched.json.data.address).toBe(`verkauf@${ASCII}`);
    expect((await a.request('PATCH', `/v1/channels/${other.json.data.id}`, { address: `support@${UNICODE}` })).status).toBe(400);
  });

  it('keeps another organization out of the domain in either form (409), for IMAP too', async () => {
    for (const address of [`help@${UNICODE}`, `help@${ASCII}`]) {
      expect((await create(b, address)).status).toBe(409);
      const imap = await create(b, address, { mode: 'imap', host: 'imap.example.com', username: 'help', password: 'secret' });
      expect(imap.status, imap.body).toBe(409);
    }
  });

  it('takes the channel\'s own address as outbound.from in either form', async () => {
    // IMAP: no verified domain needed, so only "the channel's own address" lets this sender through.
    const res = await a.request('POST', '/v1/channels', {
      type: 'email',
      name: 'Läden',
      address: 'info@läden.example',
      inbound: { mode: 'imap', host: 'imap.example.com', username: 'info', password: 'secret' },
      outbound: { host: 'smtp.example.com', from: 'Läden <Info@Läden.example>' },
    });
    expect(res.status, res.body).toBe(201);
    expect(res.json.data.address).toBe('info@xn--lden-loa.example');
    const other = await a.request('PATCH', `/v1/channels/${res.json.data.id}`, { outbound: { host: 'smtp.example.com', from: 'sales@läden.example' } });
    expect(other.status, other.body).toBe(400);
  });

  it('refuses what is no address, in either form', async () => {
    for (const address of ['support@', '@bücher.example', 'support@bü cher.example', 'support@-bücher.example', 'support@bücher', 'süpport@bücher.example', 'a@b@bücher.example']) {
      const res = await create(a, address);
      expect(res.status, address).toBe(400);
      expect(res.json.error.details.properties.address.errors, address).toEqual(['Must be a valid email address']);
    }
  });

  it('receives mail sent to the Unicode form and to the A-label form', async () => {
    const channel = await create(a, `post@${UNICODE}`);
    expect(channel.status, channel.body).toBe(201);
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, connectionTimeout: 5000 });
    for (const [i, to] of [`post@${UNICODE}`, `post@${ASCII}`, `POST@BÜCHER.EXAMPLE`].entries()) {
      const info = await transport.sendMail({ from: 'reader@outside.example', to, subject: `Order ${i}`, text: 'Hello', messageId: `<idn-${i}@outside.example>` });
      expect(info.rejected, to).toEqual([]);
    }
    // nodemailer's transport sends the domain in A-labels; a sender that uses SMTPUTF8 gives it in Unicode.
    const connection = new SMTPConnection({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, connectionTimeout: 5000 });
    await new Promise<void>((resolve, reject) => connection.connect((err?: Error) => (err ? reject(err) : resolve())));
    const sent = await new Promise<SMTPConnection.SentMessageInfo>((resolve, reject) =>
      connection.send({ from: 'reader@outside.example', to: [`post@${UNICODE}`] }, 'Subject: Order 3\r\nMessage-ID: <idn-3@outside.example>\r\n\r\nHello\r\n', (err, info) =>
        err ? reject(err) : resolve(info),
      ),
    );
    connection.quit();
    expect(sent.accepted).toEqual([`post@${UNICODE}`]);
    const listed = await a.request('GET', '/v1/messages?limit=100');
    const subjects = (listed.json.data as { channelId: string; summary: string }[]).filter((m) => m.channelId === channel.json.data.id).map((m) => m.summary);
    expect(subjects.sort()).toEqual(['Order 0', 'Order 1', 'Order 2', 'Order 3']);
  });
});

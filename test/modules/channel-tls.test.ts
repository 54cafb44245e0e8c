import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mailOutbox } from '../../src/db/schema.js';
import { createMailSender } from '../../src/workers/mail-sender.js';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { selfSignedCertificate, startRelay, type Relay } from '../helpers/smtp-relay.js';

/**
 * CONTRACT §8 "TLS to mail servers": a password goes only over TLS unless the channel says `tls: "none"`
 * (CHANNELS_ALLOW_PRIVATE only, shown as a warning); `ca` trusts a server's own certificate.
 */

const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true' } } });
const silent = { error: () => {}, warn: () => {} };
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let plain: Relay;
let selfSigned: Relay;
let cert: { key: string; cert: string };
/** A minimal IMAP server without STARTTLS that records every command it is sent. */
let imap: Server;
let imapPort = 0;
const imapCommands: string[] = [];

beforeAll(async () => {
  await verifyDomainFor(t.database.db, a.orgId, 'acme.example');
  plain = await startRelay();
  cert = selfSignedCertificate();
  selfSigned = await startRelay({ tls: cert });
  imap = createServer((socket) => {
    socket.on('error', () => {});
    socket.write('* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] ready\r\n');
    let buffer = '';
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      let end;
      while ((end = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        imapCommands.push(line);
        const [tag, command] = line.split(' ');
        if (command?.toUpperCase() === 'CAPABILITY') socket.write(`* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n${tag} OK done\r\n`);
        else if (command?.toUpperCase() === 'LOGOUT') socket.end(`* BYE\r\n${tag} OK bye\r\n`);
        else socket.write(`${tag} NO not here\r\n`);
      }
    });
  });
  await new Promise<void>((resolve) => imap.listen(0, '127.0.0.1', resolve));
  imapPort = (imap.address() as AddressInfo).port;
});
afterAll(async () => {
  await plain?.close();
  await selfSigned?.close();
  await new Promise<void>((resolve) => (imap ? imap.close(() => resolve()) : resolve()));
});

let n = 0;
const address = () => `tls-${++n}-${Math.random().toString(36).slice(2, 6)}@acme.example`;

async function channelThrough(relay: Relay, outbound: Json = {}, who: Tenant = a) {
  const res = await who.request('POST', '/v1/channels', {
    type: 'email',
    name: 'Out',
    address: address(),
    inbound: { mode: 'smtp' },
    outbound: { host: '127.0.0.1', port: relay.port, username: relay.user, password: relay.pass, ...outbound },
  });
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

/** Queues a message through the channel and runs one pass of the sender; answers its outbox row. */
async function sendOnce(channelId: string) {
  const sent = await a.request('POST', '/v1/messages/send', { channelId, to: ['ada@example.com'], subject: 'TLS', text: 'hello' });
  expect(sent.status, sent.body).toBe(201);
  const sender = createMailSender({ db: t.database.db, clock: () => new Date(), log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
  await sender.runOnce();
  const [row] = await t.database.db.select().from(mailOutbox).where(eq(mailOutbox.messageId, sent.json.data.id));
  return row!;
}

describe('secrets only over TLS', () => {
  it('a relay without STARTTLS never receives AUTH when TLS is required (the default)', async () => {
    const channel = await channelThrough(plain);
    expect(channel.outbound).toMatchObject({ tls: 'required', ca: null, verifyCertificate: true });
    expect(channel.warnings).toEqual([]);
    const logins = plain.logins;
    const test = (await a.request('POST', `/v1/channels/${channel.id}/test`, {})).json.data;
    expect(test.outbound.ok).toBe(false);
    expect(test.outbound.error).toMatch(/STARTTLS|TLS/i);
    const row = await sendOnce(channel.id);
    expect(row.status).not.toBe('sent');
    // The sender's attempt ends without a login (when it ends is the sender's connection handling's business).
    expect(row.lastError).toBeTruthy();
    expect(plain.logins).toBe(logins);
    expect(plain.received.length).toBe(0);

    // "none" sends in clear, and says so on the channel.
    const open = await channelThrough(plain, { tls: 'none' });
    expect(open.warnings).toEqual([expect.stringMatching(/SMTP relay.*without requiring TLS/)]);
    expect((await sendOnce(open.id)).status).toBe('sent');
    expect(plain.logins).toBe(logins + 1);
  });

  it('an IMAP server without STARTTLS never receives LOGIN when TLS is required', async () => {
    const res = await a.request('POST', '/v1/channels', {
      type: 'email',
      name: 'Box',
      address: address(),
      inbound: { mode: 'imap', host: '127.0.0.1', port: imapPort, secure: false, username: 'ada', password: 'imap-secret' },
    });
    expect(res.status, res.body).toBe(201);
    expect(res.json.data.inbound).toMatchObject({ tls: 'required', verifyCertificate: true, ca: null });
    const test = (await a.request('POST', `/v1/channels/${res.json.data.id}/test`, {})).json.data;
    expect(test.inbound.ok).toBe(false);
    expect(imapCommands.join('\n')).not.toMatch(/LOGIN|AUTHENTICATE|imap-secret/i);
  });

  it('trusts a self-signed relay with outbound.ca, and refuses it without', async () => {
    const without = await channelThrough(selfSigned);
    const logins = selfSigned.logins;
    const refused = (await a.request('POST', `/v1/channels/${without.id}/test`, {})).json.data;
    expect(refused.outbound.ok).toBe(false);
    expect(refused.outbound.error).toMatch(/self[- ]signed|certificate/i);
    expect(selfSigned.logins).toBe(logins);

    const trusting = await channelThrough(selfSigned, { ca: cert.cert });
    expect(trusting.outbound.ca).toBe(cert.cert);
    const ok = (await a.request('POST', `/v1/channels/${trusting.id}/test`, {})).json.data;
    expect(ok.outbound, JSON.stringify(ok)).toMatchObject({ ok: true });
    expect((await sendOnce(trusting.id)).status).toBe('sent');
    expect(selfSigned.received.length).toBe(1);
    expect(selfSigned.logins).toBe(logins + 2);

    // Not checking the certificate at all works too, on a LAN, with a warning.
    const unchecked = await channelThrough(selfSigned, { verifyCertificate: false });
    expect(unchecked.warnings).toEqual([expect.stringMatching(/certificate is not checked/)]);
    expect((await a.request('POST', `/v1/channels/${unchecked.id}/test`, {})).json.data.outbound.ok).toBe(true);
  });

  it('refuses a PEM that is not a certificate', async () => {
    const res = await a.request('POST', '/v1/channels', {
      type: 'email', name: 'Out', address: address(), inbound: { mode: 'smtp' }, outbound: { host: '127.0.0.1', port: 25, ca: 'not a certificate' },
    });
    expect(res.status).toBe(400);
    expect(res.json.error.details.properties.outbound.properties.ca.errors[0]).toMatch(/PEM/);
  });
});

describe('without CHANNELS_ALLOW_PRIVATE', () => {
  const { t: app, a: tenant } = useTestApp({ app: { env: { SECRETS_KEY } } });
  it('refuses tls "none" and verifyCertificate false with a 400 at the field, writing nothing', async () => {
    await verifyDomainFor(app.database.db, tenant.orgId, 'acme.example');
    const base = { type: 'email', name: 'Out', address: 'out@acme.example', inbound: { mode: 'smtp' } };
    const relay = { host: 'smtp.provider.example', port: 587, username: 'u', password: 'p' };
    const none = await tenant.request('POST', '/v1/channels', { ...base, outbound: { ...relay, tls: 'none' } });
    expect(none.status).toBe(400);
    expect(none.json.error.details.properties.outbound.properties.tls.errors[0]).toMatch(/CHANNELS_ALLOW_PRIVATE/);
    const unchecked = await tenant.request('POST', '/v1/channels', { ...base, outbound: { ...relay, verifyCertificate: false } });
    expect(unchecked.json.error.details.properties.outbound.properties.verifyCertificate.errors[0]).toMatch(/CHANNELS_ALLOW_PRIVATE/);
    const imapNone = await tenant.request('POST', '/v1/channels', {
      ...base, inbound: { mode: 'imap', host: 'imap.provider.example', username: 'u', password: 'p', tls: 'none' },
    });
    expect(imapNone.json.error.details.properties.inbound.properties.tls.errors[0]).toMatch(/CHANNELS_ALLOW_PRIVATE/);
    expect((await tenant.request('GET', '/v1/channels')).json.data).toEqual([]);
    // With TLS required it is created.
    expect((await tenant.request('POST', '/v1/channels', { ...base, outbound: relay })).status).toBe(201);
  });
});

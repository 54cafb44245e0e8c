import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { promises as nodeDns } from 'node:dns';
import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messages } from '../../src/db/schema.js';
import type { SmtpReceiver } from '../../src/workers/smtp-receiver.js';
import { createTestApp, type Tenant, type TestApp } from '../helpers/app.js';
import { skipWithoutDnsmasq, startDnsmasq, type DnsServer } from '../helpers/dnsmasq.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { startTestReceiver } from '../helpers/smtp-receiver.js';

/**
 * Authentication of received mail for real: a dnsmasq serves the SPF, DKIM and DMARC records of a sender
 * domain, the service asks it through DNS_SERVERS as in production (the receiver gets no resolver of its own,
 * so it uses the service's), and mail delivered over SMTP from 127.0.0.1 that passes, fails and is forged is
 * recorded as such in `metadata.email.authentication` and its Authentication-Results header.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const noDnsmasq = skipWithoutDnsmasq();
const tag = Math.random().toString(36).slice(2, 8);
/** Signs its mail, sends from 127.0.0.1 (its SPF), publishes DMARC p=reject. */
const SENDER = `sender-${tag}.example`;
/** Its SPF does not include 127.0.0.1; it has no DKIM key and no DMARC record. */
const OTHER = `elsewhere-${tag}.example`;
const SELECTOR = 'sel2026';

const rsaKey = () => generateKeyPairSync('rsa', { modulusLength: 2048 });
const senderKey = rsaKey();
const forgerKey = rsaKey();
const pem = (key: ReturnType<typeof rsaKey>) => key.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();

/** The DKIM TXT value of a 2048-bit key (about 410 bytes) as DNS carries it: strings of at most 255 bytes. */
function dkimTxtStrings(key: ReturnType<typeof rsaKey>): string[] {
  const value = `v=DKIM1; k=rsa; p=${key.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
  const parts: string[] = [];
  for (let i = 0; i < value.length; i += 255) parts.push(value.slice(i, i + 255));
  return parts;
}
const DKIM_STRINGS = dkimTxtStrings(senderKey);
/**
 * One record of several strings: dnsmasq's `--txt-record=name,part1,part2` (a shell's `"part1","part2"`
 * after its quotes are gone; the helper starts dnsmasq without a shell, so quotes would be kept as text).
 */
const strings = (parts: string[]) => parts.join(',');

let dns: DnsServer;
let t: TestApp;
let a: Tenant;
let receiver: SmtpReceiver | undefined;
let port = 0;

beforeAll(async () => {
  if (noDnsmasq) return;
  dns = await startDnsmasq({
    [SENDER]: strings(['v=spf1 ip4:127.0.0.1 -all']),
    [`${SELECTOR}._domainkey.${SENDER}`]: strings(DKIM_STRINGS),
    [`_dmarc.${SENDER}`]: strings(['v=DMARC1; p=reject']),
    [OTHER]: strings(['v=spf1 ip4:192.0.2.1 -all']),
  });
  t = await createTestApp({ env: { DNS_SERVERS: dns.server, SECRETS_KEY: randomBytes(32).toString('base64') } });
  a = await t.tenant();
  // No resolver given: the receiver uses the service's (DNS_SERVERS), as in production.
  ({ receiver, port } = await startTestReceiver(t.database.db, { resolver: undefined }));
}, 60_000);
afterAll(async () => {
  await receiver?.stop();
  await t?.close();
  await dns?.close();
});

const transport = () => nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, connectionTimeout: 5000 });

let n = 0;
async function smtpChannel(): Promise<{ id: string; address: string }> {
  const address = `support-${++n}@acme-${tag}.example`;
  await verifyDomainFor(t.database.db, a.orgId, address);
  const res = await a.request('POST', '/v1/channels', { type: 'email', name: 'Support', address, inbound: { mode: 'smtp' } });
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; address: string };
}

/** Delivers one email over SMTP and answers the message stored for it, read back over REST. */
async function deliver(mail: Parameters<ReturnType<typeof transport>['sendMail']>[0] & { envelope: { from: string; to: string[] } }): Promise<Json> {
  const info = await transport().sendMail(mail);
  expect(info.response).toMatch(/^250 /);
  const res = await a.request('GET', '/v1/messages?limit=100');
  expect(res.status, res.body).toBe(200);
  const found = (res.json.data as Json[]).filter((m) => m.text?.trim() === String(mail.text).trim());
  expect(found).toHaveLength(1);
  return found[0]!;
}

describe.skipIf(noDnsmasq)('authentication of received mail against a real DNS server', () => {
  it('the records are served as DNS carries them: the DKIM key in strings of at most 255 bytes', async () => {
    const resolver = new nodeDns.Resolver({ timeout: 1000, tries: 2 });
    resolver.setServers([dns.server]);
    const [dkim] = await resolver.resolveTxt(`${SELECTOR}._domainkey.${SENDER}`);
    expect(dkim!.length).toBeGreaterThan(1);
    expect(dkim!.every((s) => Buffer.byteLength(s) <= 255)).toBe(true);
    expect(dkim!.join('')).toBe(DKIM_STRINGS.join(''));
    expect(await resolver.resolveTxt(`_dmarc.${SENDER}`)).toEqual([['v=DMARC1; p=reject']]);
  });

  it('mail signed by the sender domain and sent from its SPF address passes SPF, DKIM and DMARC', async () => {
    const channel = await smtpChannel();
    const m = await deliver({
      from: `Ada <ada@${SENDER}>`,
      to: channel.address,
      subject: 'Signed',
      text: 'signed and sent from the right place',
      envelope: { from: `bounces@${SENDER}`, to: [channel.address] },
      dkim: { domainName: SENDER, keySelector: SELECTOR, privateKey: pem(senderKey) },
    });
    const auth = m.metadata.email.authentication as Json;
    expect(auth).toMatchObject({ spf: 'pass', dkim: 'pass', dmarc: 'pass', spfDomain: SENDER, dkimDomains: [SENDER], dmarcPolicy: 'reject' });
    expect(auth.header).toContain(`dkim=pass header.i=@${SENDER} header.s=${SELECTOR}`);
    expect(auth.header).toContain(`spf=pass (mx.switchboard.test: domain of bounces@${SENDER} designates 127.0.0.1 as permitted sender)`);
    expect(auth.header).toContain(`dmarc=pass (p=REJECT) header.from=${SENDER}`);
    // What REST answered is what the database holds.
    const [row] = await t.database.db.select({ metadata: messages.metadata }).from(messages).where(eq(messages.id, m.id as string));
    expect((row!.metadata as Json).email.authentication).toEqual(auth);
  });

  it('mail whose MAIL FROM domain does not allow 127.0.0.1 fails SPF', async () => {
    const channel = await smtpChannel();
    const m = await deliver({
      from: `Bob <bob@${OTHER}>`,
      to: channel.address,
      subject: 'Unsigned',
      text: 'sent from an address my domain does not allow',
      envelope: { from: `bob@${OTHER}`, to: [channel.address] },
    });
    const auth = m.metadata.email.authentication as Json;
    expect(auth).toMatchObject({ spf: 'fail', dkim: 'none', dmarc: 'none', spfDomain: OTHER, dkimDomains: [], dmarcPolicy: null });
    expect(auth.header).toContain(`spf=fail (mx.switchboard.test: domain of bob@${OTHER} does not designate 127.0.0.1 as permitted sender)`);
  });

  it('forged mail in the sender domain\'s name, signed with another key or not at all, fails DMARC', async () => {
    const channel = await smtpChannel();
    const forged = {
      from: `CEO <ceo@${SENDER}>`,
      to: channel.address,
      subject: 'Urgent transfer',
      envelope: { from: `ceo@${OTHER}`, to: [channel.address] },
    };
    const wrongKey = await deliver({ ...forged, text: 'wire the money (signed with a key that is not the domain\'s)', dkim: { domainName: SENDER, keySelector: SELECTOR, privateKey: pem(forgerKey) } });
    const unsigned = await deliver({ ...forged, text: 'wire the money (not signed)' });

    expect(wrongKey.metadata.email.authentication).toMatchObject({ spf: 'fail', spfDomain: OTHER, dkim: 'fail', dkimDomains: [], dmarc: 'fail', dmarcPolicy: 'reject' });
    expect(wrongKey.metadata.email.authentication.header).toContain(`dkim=fail (bad signature) header.i=@${SENDER} header.s=${SELECTOR}`);
    expect(unsigned.metadata.email.authentication.header).toContain('dkim=none (message not signed)');
    expect(unsigned.metadata.email.authentication).toMatchObject({ spf: 'fail', spfDomain: OTHER, dkim: 'none', dkimDomains: [], dmarc: 'fail', dmarcPolicy: 'reject' });
    for (const m of [wrongKey, unsigned]) expect(m.metadata.email.authentication.header).toContain(`dmarc=fail (p=REJECT) header.from=${SENDER}`);
  });
});

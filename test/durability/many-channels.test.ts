import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createApiKey, createOrganization } from '../../src/accounts/accounts.js';
import { openDatabase } from '../../src/db/client.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { freePort } from '../helpers/listen.js';
import { deliverRaw } from '../helpers/smtp-client.js';
import { probeWhile, send, startServer, useStore, type ServerProcess } from './server-process.js';

/**
 * One mail to many channels of one organization is read once and written without holding the event loop
 * (timing-sensitive: it measures /healthz gaps, so it runs alone, with the fault tests). A 1 MB mail (a
 * text and an attachment) to 40 inbound channels of one organization, over real SMTP to the real server,
 * while /healthz is asked every 20 ms: no gap reaches 250 ms (it stopped for about a second when each
 * channel's copy was built and written in one stretch).
 */

const store = useStore();
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const CHANNELS = 40;
const DOMAIN = 'many.example';

async function call(server: ServerProcess, key: string, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await send(server.url, method, path, key, body);
  expect(res.status, res.body).toBeLessThan(300);
  return JSON.parse(res.body).data as Json;
}

/** An organization with a key and the verified domain, written before the server holds the store. */
async function organization() {
  const database = await openDatabase(store.env.DATABASE_URL ? { url: store.env.DATABASE_URL, poolSize: 1 } : { dataDir: store.env.DATA_DIR! });
  try {
    const org = await createOrganization(database.db, { name: 'Many channels' });
    await verifyDomainFor(database.db, org.id, DOMAIN);
    return (await createApiKey(database.db, { orgId: org.id })).key;
  } finally {
    await database.close();
  }
}

/** About 1 MB: a text of 100,000 characters and a 660 KB attachment (base64). */
function largeMail(to: string[]) {
  const b = 'b0undary';
  const attachment = randomBytes(660 * 1024).toString('base64').replace(/.{76}/g, '$&\r\n');
  return (
    `From: Sender <sender@outside.example>\r\nTo: ${to.join(', ')}\r\nSubject: To everyone\r\nMessage-ID: <many.${Date.now()}@outside.example>\r\nDate: ${new Date().toUTCString()}\r\nMIME-Version: 1.0\r\n` +
    `Content-Type: multipart/mixed; boundary="${b}"\r\n\r\n--${b}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${'Quarterly figures for every desk. '.repeat(3000).replace(/(.{70}) /g, '$1\r\n')}\r\n` +
    `--${b}\r\nContent-Type: application/pdf; name="report.pdf"\r\nContent-Disposition: attachment; filename="report.pdf"\r\nContent-Transfer-Encoding: base64\r\n\r\n${attachment}\r\n--${b}--\r\n`
  );
}

describe('one mail to many channels of one organization', () => {
  it(`is read once and written to ${CHANNELS} channels without a /healthz gap of 250 ms`, async () => {
    const key = await organization();
    const smtpPort = await freePort();
    const server = await startServer({ ...store.env, SMTP_PORT: String(smtpPort), SMTP_HOST: '127.0.0.1', EMAIL_PARSE_IDLE_MS: '60000' });
    const addresses = Array.from({ length: CHANNELS }, (_, i) => `desk${i}@${DOMAIN}`);
    for (const [i, address] of addresses.entries()) await call(server, key, 'POST', '/v1/channels', { type: 'email', name: `Desk ${i}`, address, inbound: { mode: 'smtp' } });

    // The service has read mail before (its reading threads have started).
    expect((await deliverRaw(smtpPort, addresses[0]!, `From: a@outside.example\r\nTo: ${addresses[0]}\r\nSubject: First\r\n\r\nHello\r\n`)).code).toBe(250);
    const raw = largeMail(addresses);
    expect(raw.length).toBeGreaterThan(1_000_000);

    let reply = 0;
    const { probes, maxGapMs, ownLagMs } = await probeWhile(server, async () => {
      reply = (await deliverRaw(smtpPort, addresses, raw)).code;
    });
    console.log(`/healthz during a ${(raw.length / 1e6).toFixed(1)} MB mail to ${CHANNELS} channels: largest gap ${maxGapMs.toFixed(0)} ms in ${probes} probes (the prober itself held up to ${ownLagMs.toFixed(0)} ms)`);
    expect(reply).toBe(250);
    expect(probes).toBeGreaterThan(10);
    expect(maxGapMs, `${probes} probes; the prober held ${ownLagMs.toFixed(0)} ms`).toBeLessThan(250 + ownLagMs);

    // Every channel has its message, with its attachment.
    const list = (await call(server, key, 'GET', '/v1/messages?limit=100')) as unknown as Json[];
    const copies = list.filter((m) => m.summary === 'To everyone');
    expect(new Set(copies.map((m) => m.channelId)).size).toBe(CHANNELS);
    const attachments = (await call(server, key, 'GET', `/v1/messages/${copies[0]!.id}/attachments`)) as unknown as Json[];
    expect(attachments.map((a) => a.filename)).toEqual(['report.pdf']);
  }, 300_000);
});

import { and, eq, sql } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import type { Db } from '../src/db/client.js';
import { events, messages } from '../src/db/schema.js';
import { forceVerifyDomain } from '../src/modules/domains/domains.repository.js';
import { DOVECOT, rawEmail, startDovecot } from '../test/helpers/dovecot.js';
import type { Row } from './report.js';

/** REST calls of the bench's tenant. */
function caller(origin: string, auth: Record<string, string>) {
  const headers = { ...auth, 'content-type': 'application/json' };
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${origin}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const json = (await res.json()) as { data?: { id: string } };
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
    return json.data!;
  };
}

/**
 * The domain of the bench's inbound-SMTP channel, verified for the caller's organization as the operator's
 * `domain verify --force` does (receiving through the SMTP receiver needs it).
 */
async function verifyDomain(call: ReturnType<typeof caller>, db: Db, name: string) {
  const created = (await call('POST', '/v1/domains', { name }).catch(() => undefined)) as { organizationId?: string } | undefined;
  const listed = created ? undefined : ((await call('GET', '/v1/domains?limit=100')) as unknown as { name: string; organizationId: string }[]).find((d) => d.name === name);
  const orgId = created?.organizationId ?? listed?.organizationId;
  if (!orgId) throw new Error(`could not add the domain ${name}`);
  await forceVerifyDomain(db, orgId, name, new Date());
}

/** Messages of a channel with both their events (`message.created`, `message.received`) committed. */
async function committedWithEvents(db: Db, channelId: string): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(messages)
    .where(
      and(
        eq(messages.channelId, channelId),
        sql`(SELECT count(*) FROM ${events} e WHERE e.resource_id = ${messages.id} AND e.type IN ('message.created', 'message.received')) = 2`,
      ),
    );
  return row?.n ?? 0;
}

/**
 * Received messages per second through the built-in SMTP receiver: `count` messages sent by nodemailer
 * over 10 pooled connections to an inbound-SMTP channel, from the first MAIL FROM to the last 250 (which
 * the receiver answers only once the message and its events are committed). The service must run with
 * SMTP_PORT and SMTP_RATE_LIMIT=0.
 */
export async function smtpReceiveThroughput(database: string, origin: string, auth: Record<string, string>, db: Db, smtpPort: number, count = 1000): Promise<Row> {
  const scenario = 'SMTP received messages/s (to a committed message with its events)';
  const call = caller(origin, auth);
  let channelId: string | undefined;
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 10, maxMessages: Infinity });
  try {
    const address = `bench-smtp-${Date.now()}@example.com`;
    await verifyDomain(call, db, 'example.com');
    channelId = (await call('POST', '/v1/channels', { type: 'email', name: 'Bench SMTP', address, inbound: { mode: 'smtp' } })).id;
    const start = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (next < count) {
          const i = next++;
          await transport.sendMail({
            envelope: { from: 'customer@example.com', to: [address] },
            raw: rawEmail({ messageId: `bench-smtp-${i}-${start}@example.com`, from: 'customer@example.com', to: address, subject: `Order ${i}`, text: `Hello, this is message ${i}.` }),
          });
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    const stored = await committedWithEvents(db, channelId);
    if (stored !== count) return { database, scenario, status: 'invalid', note: `${stored} of ${count} messages committed with their events` };
    return { database, scenario, status: 'measured', note: `${(count / seconds).toFixed(0)} messages/s: ${count} messages over 10 connections in ${seconds.toFixed(1)} s` };
  } catch (err) {
    return { database, scenario, status: 'unavailable', note: (err as Error).message };
  } finally {
    transport.close();
    if (channelId) await call('DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
  }
}

/**
 * The time to sync an IMAP mailbox of `count` messages: a throwaway Dovecot is filled (not measured), then
 * an inbound-IMAP channel on it is created through the API; the figure is the time from that request to
 * the last message committed with its events. The service must run with CHANNELS_ALLOW_PRIVATE=true (Dovecot
 * is on loopback), the IMAP sync worker and a SECRETS_KEY.
 */
export async function imapSyncTime(database: string, origin: string, auth: Record<string, string>, db: Db, count = 10_000): Promise<Row> {
  const scenario = `IMAP sync of a ${count >= 1000 ? `${count / 1000}k` : count}-message mailbox`;
  if (!DOVECOT) return { database, scenario, status: 'unavailable', note: 'Dovecot is not installed (apt-get install dovecot-imapd)' };
  const call = caller(origin, auth);
  const dovecot = await startDovecot();
  let channelId: string | undefined;
  try {
    const fillStart = performance.now();
    const stamp = Date.now();
    // Four connections append side by side.
    const per = Math.ceil(count / 4);
    await Promise.all(
      Array.from({ length: 4 }, (_, k) =>
        dovecot.append(
          Array.from({ length: Math.max(0, Math.min(per, count - k * per)) }, (_, j) => {
            const i = k * per + j;
            return rawEmail({ messageId: `bench-imap-${i}-${stamp}@example.com`, subject: `Invoice ${i}`, text: `Please find invoice ${i} attached.\r\nRegards` });
          }),
        ),
      ),
    );
    const fillSeconds = (performance.now() - fillStart) / 1000;

    const start = performance.now();
    channelId = (
      await call('POST', '/v1/channels', {
        type: 'email',
        name: 'Bench IMAP',
        address: `bench-imap-${stamp}@example.com`,
        inbound: { mode: 'imap', host: dovecot.host, port: dovecot.port, secure: false, username: dovecot.user, password: dovecot.password, tls: 'none' },
      })
    ).id;
    const deadline = Date.now() + Math.max(120_000, count * 50);
    let stored = 0;
    while ((stored = await committedWithEvents(db, channelId)) < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    const seconds = (performance.now() - start) / 1000;
    if (stored < count) return { database, scenario, status: 'unavailable', note: `${stored} of ${count} messages after ${seconds.toFixed(0)} s` };
    return {
      database,
      scenario,
      status: 'measured',
      note: `${seconds.toFixed(1)} s (${(count / seconds).toFixed(0)} messages/s) from creating the channel to the last message committed; filling Dovecot took ${fillSeconds.toFixed(1)} s`,
    };
  } catch (err) {
    return { database, scenario, status: 'unavailable', note: (err as Error).message };
  } finally {
    if (channelId) await call('DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
    await dovecot.close();
  }
}

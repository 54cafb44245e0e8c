import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../src/db/client.js';
import { messages } from '../src/db/schema.js';
import { twilioSignature } from '../src/modules/sms/providers/twilio.js';
import { startFakeTwilio } from '../test/helpers/twilio.js';
import type { Row } from './report.js';

/**
 * The text-message rows: signed provider webhooks per second to a committed message (a fifth of them
 * duplicates, as providers retry), and texts sent per second through the SMS sender to a local server
 * playing Twilio. The service must run with CHANNELS_ALLOW_PRIVATE=true and a SECRETS_KEY; its PUBLIC_URL is
 * `origin` (the webhooks are signed over it). SMPP receipts: no row until the SMPP provider lands.
 */

async function call(origin: string, auth: Record<string, string>, method: string, path: string, body?: unknown) {
  const res = await fetch(`${origin}${path}`, { method, headers: { ...auth, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const json = (await res.json()) as { data?: { id: string } };
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json.data!;
}

const number = (i: number) => `+1212${String(2000000 + i).padStart(7, '0')}`;

export async function smsWebhookThroughput(database: string, origin: string, auth: Record<string, string>, db: Db, count = 2000): Promise<Row> {
  const scenario = 'SMS signed webhooks/s (to a committed message, 20% duplicates)';
  const twilio = await startFakeTwilio();
  let channelId: string | undefined;
  try {
    const channel = await call(origin, auth, 'POST', '/v1/channels', { type: 'sms', name: 'Bench SMS', address: number(9_000_000 + (Date.now() % 900_000)), provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } });
    channelId = channel.id;
    const url = `${origin}/hooks/sms/${channelId}`;
    const unique = Math.ceil(count * 0.8);
    const stamp = Date.now();
    const posts = Array.from({ length: count }, (_, i) => {
      const n = i < unique ? i : i % unique; // the last fifth repeats earlier MessageSids
      const params = { MessageSid: `SMbench${stamp}x${n}`, From: number(n % 5000), To: '+12122000000', Body: `Order ${n} please` };
      return { params, signature: twilioSignature(twilio.authToken, url, params) };
    });
    const start = performance.now();
    let next = 0;
    let failures = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < posts.length) {
          const post = posts[next++]!;
          const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': post.signature }, body: new URLSearchParams(post.params) });
          await res.text();
          if (res.status !== 200) failures++;
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(messages).where(eq(messages.channelId, channelId));
    if (failures > 0 || row?.n !== unique) return { database, scenario, status: 'invalid', note: `${failures} non-200 answers; ${row?.n} of ${unique} messages` };
    return { database, scenario, status: 'measured', note: `${(count / seconds).toFixed(0)} webhooks/s: ${count} (${unique} distinct) over 20 connections in ${seconds.toFixed(1)} s` };
  } catch (err) {
    return { database, scenario, status: 'unavailable', note: (err as Error).message };
  } finally {
    await twilio.close();
    if (channelId) await call(origin, auth, 'DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
  }
}

export async function smsSendThroughput(database: string, origin: string, auth: Record<string, string>, db: Db, count = 500): Promise<Row> {
  const scenario = 'SMS texts sent/s (outbox to a local Twilio-compatible API)';
  const twilio = await startFakeTwilio();
  let channelId: string | undefined;
  try {
    // A high rate: the row measures the sender, not the pacing.
    const channel = await call(origin, auth, 'POST', '/v1/channels', { type: 'sms', name: 'Bench SMS out', address: number(8_000_000 + (Date.now() % 900_000)), rate: 1000, provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } });
    channelId = channel.id;
    const ids: string[] = [];
    const start = performance.now();
    for (let i = 0; i < count; i += 50) {
      const to = Array.from({ length: Math.min(50, count - i) }, (_, k) => number(i + k));
      ids.push((await call(origin, auth, 'POST', '/v1/messages/send', { channelId, to, text: 'Your order shipped' })).id);
    }
    const deadline = Date.now() + 10 * 60_000;
    let sent = 0;
    while (Date.now() < deadline) {
      const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(messages).where(and(eq(messages.channelId, channelId), inArray(messages.status, ['sent', 'failed'])));
      sent = row?.n ?? 0;
      if (sent >= count) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - start) / 1000;
    if (sent < count || twilio.sent.length !== count) return { database, scenario, status: 'invalid', note: `${sent} of ${count} settled, ${twilio.sent.length} requests` };
    return { database, scenario, status: 'measured', note: `${(count / seconds).toFixed(0)} texts/s: ${count} texts queued and sent in ${seconds.toFixed(1)} s` };
  } catch (err) {
    return { database, scenario, status: 'unavailable', note: (err as Error).message };
  } finally {
    await twilio.close();
    if (channelId) await call(origin, auth, 'DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
  }
}

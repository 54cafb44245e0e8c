import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../src/db/client.js';
import { messages } from '../src/db/schema.js';
import { twilioSignature } from '../src/modules/channels/sms/providers/twilio.js';
import { startFakeTwilio } from '../test/helpers/twilio.js';
import type { Measurement } from './measure.js';
import type { Row } from './report.js';

/**
 * The text-message rows: signed provider webhooks per second to a committed message (a fifth of them
 * duplicates, as providers retry), and texts sent per second through the SMS sender to a local server
 * playing Twilio. Each row comes with its baseline, measured in the same run with the same client:
 * - webhooks: `POST /v1/messages` (an incoming message through the API's write path) from the same 20
 *   concurrent clients, as many requests: the ratio is what the signature check, the duplicate check, the
 *   thread and the TwiML answer cost over a plain write;
 * - texts: the same POSTs sent straight to the local provider, one after another (the sender sends one
 *   channel's texts in turn): the ratio is the share of the provider's serial rate the outbox reaches.
 * The service must run with CHANNELS_ALLOW_PRIVATE=true and a SECRETS_KEY; its PUBLIC_URL is `origin` (the
 * webhooks are signed over it). SMPP receipts: `smppReceiptThroughput`.
 */

export async function call(origin: string, auth: Record<string, string>, method: string, path: string, body?: unknown) {
  const res = await fetch(`${origin}${path}`, { method, headers: { ...auth, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const json = (await res.json()) as { data?: { id: string } };
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json.data!;
}

/** How many messages of a channel are in one of `statuses` (any status when absent). */
export type MessageCounter = (channelId: string, statuses?: string[]) => Promise<number>;

/** Counts in the database itself (PostgreSQL: a connection of the bench's own). */
export const sqlCounter =
  (db: Db): MessageCounter =>
  async (channelId, statuses) => {
    const [row] = await db
      .select({ n: sql<number>`count(*)::int` })
      .from(messages)
      .where(and(eq(messages.channelId, channelId), statuses ? inArray(messages.status, statuses) : undefined));
    return row?.n ?? 0;
  };

/** Counts through the API, page by page (PGlite: the service holds the only connection to its database). */
export const apiCounter =
  (origin: string, auth: Record<string, string>): MessageCounter =>
  async (channelId, statuses) => {
    let n = 0;
    for (let offset = 0; ; offset += 100) {
      const res = await fetch(`${origin}/v1/messages?limit=100&offset=${offset}`, { headers: auth });
      const page = ((await res.json()) as { data?: { channelId: string | null; status: string | null }[] }).data ?? [];
      n += page.filter((m) => m.channelId === channelId && (!statuses || statuses.includes(m.status ?? ''))).length;
      if (page.length < 100) return n;
    }
  };

/** A valid New York number: customers are +1 212 2xx xxxx, the channels +1 212 3xx xxxx and 4xx xxxx. */
const number = (i: number) => `+1212${2000000 + i}`;
const channelNumber = (block: 3 | 4) => `+1212${block * 1_000_000 + (Date.now() % 1_000_000)}`;

/** Runs `tasks` on `clients` concurrent clients; the rate, latencies and failures. */
export async function load(count: number, clients: number, task: (i: number) => Promise<boolean>): Promise<Measurement & { seconds: number }> {
  const latencies: number[] = [];
  let next = 0;
  let failures = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < count) {
        const i = next++;
        const t0 = performance.now();
        if (!(await task(i))) failures++;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((x, y) => x - y);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0);
  return {
    seconds,
    reqPerSec: count / seconds,
    p50: at(0.5),
    p99: at(0.99),
    mean: latencies.reduce((s, x) => s + x, 0) / Math.max(1, latencies.length),
    requests: count,
    non2xx: failures,
    errors: 0,
    statusCodes: {},
  };
}

export const CLIENTS = 20;

export async function smsWebhookThroughput(database: string, origin: string, auth: Record<string, string>, counter: MessageCounter, count = 2000): Promise<Row[]> {
  const scenario = 'SMS signed webhooks/s (to a committed message, 20% duplicates)';
  const baseName = `POST /v1/messages (incoming), ${CLIENTS} clients`;
  const twilio = await startFakeTwilio();
  let channelId: string | undefined;
  try {
    const channel = await call(origin, auth, 'POST', '/v1/channels', { type: 'sms', name: 'Bench SMS', address: channelNumber(3), provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } });
    channelId = channel.id;
    const url = `${origin}/hooks/sms/${channelId}`;
    const unique = Math.ceil(count * 0.8);
    const stamp = Date.now();
    const posts = Array.from({ length: count }, (_, i) => {
      const n = i < unique ? i : i % unique; // the last fifth repeats earlier MessageSids
      const params = { MessageSid: `SMbench${stamp}x${n}`, From: number(n % 5000), To: '+12122000000', Body: `Order ${n} please`, NumMedia: '0' };
      return { params, signature: twilioSignature(twilio.authToken, url, params) };
    });
    const base = await load(count, CLIENTS, async () => {
      const res = await fetch(`${origin}/v1/messages`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ direction: 'incoming', type: 'sms', text: 'Order 1 please' }) });
      await res.text();
      return res.status === 201;
    });
    const baseRow: Row = { database, scenario: `  baseline: ${baseName}`, status: base.non2xx ? 'invalid' : 'measured', measurement: base, note: `${count} writes in ${base.seconds.toFixed(1)} s` };
    const m = await load(count, CLIENTS, async (i) => {
      const post = posts[i]!;
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': post.signature }, body: new URLSearchParams(post.params) });
      await res.text();
      return res.status === 200;
    });
    const stored = await counter(channelId);
    const note = `${count} webhooks (${unique} distinct MessageSids) over ${CLIENTS} clients in ${m.seconds.toFixed(1)} s`;
    if (m.non2xx > 0 || stored !== unique) return [baseRow, { database, scenario, status: 'invalid', note: `${m.non2xx} non-200 answers; ${stored} of ${unique} messages; ${note}` }];
    const row: Row = { database, scenario, status: 'measured', measurement: m, note };
    if (baseRow.status === 'measured') Object.assign(row, { ratio: m.reqPerSec / base.reqPerSec, ratioOf: 'API incoming write' });
    return [baseRow, row];
  } catch (err) {
    return [{ database, scenario, status: 'unavailable', note: (err as Error).message }];
  } finally {
    await twilio.close();
    if (channelId) await call(origin, auth, 'DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
  }
}

export async function smsSendThroughput(database: string, origin: string, auth: Record<string, string>, counter: MessageCounter, count = 500): Promise<Row[]> {
  const scenario = 'SMS texts sent/s (outbox to a local Twilio-compatible API)';
  const twilio = await startFakeTwilio();
  let channelId: string | undefined;
  try {
    // The provider alone: the same POSTs with the same credentials, one at a time, from the bench.
    const authorization = `Basic ${Buffer.from(`${twilio.accountSid}:${twilio.authToken}`).toString('base64')}`;
    const base = await load(count, 1, async (i) => {
      const form = new URLSearchParams({ To: number(i), From: '+12122000001', Body: 'Your order shipped', StatusCallback: `${origin}/hooks/sms/bench/status` });
      const res = await fetch(`${twilio.url}/2010-04-01/Accounts/${twilio.accountSid}/Messages.json`, { method: 'POST', headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' }, body: form });
      await res.text();
      return res.status === 201;
    });
    const baseRow: Row = { database, scenario: '  baseline: the local provider alone, 1 client', status: base.non2xx ? 'invalid' : 'measured', measurement: base, note: `${count} POSTs in ${base.seconds.toFixed(1)} s` };
    twilio.sent.length = 0;
    // A high rate: the row measures the sender, not the pacing.
    const channel = await call(origin, auth, 'POST', '/v1/channels', { type: 'sms', name: 'Bench SMS out', address: channelNumber(4), rate: 1000, provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } });
    channelId = channel.id;
    const start = performance.now();
    for (let i = 0; i < count; i += 50) {
      const to = Array.from({ length: Math.min(50, count - i) }, (_, k) => number(i + k));
      await call(origin, auth, 'POST', '/v1/messages/send', { channelId, to, text: 'Your order shipped' });
    }
    const deadline = Date.now() + 10 * 60_000;
    let sent = 0;
    while (Date.now() < deadline) {
      sent = await counter(channelId, ['sent', 'failed']);
      if (sent >= count) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const seconds = (performance.now() - start) / 1000;
    if (sent < count || twilio.sent.length !== count) return [baseRow, { database, scenario, status: 'invalid', note: `${sent} of ${count} settled, ${twilio.sent.length} requests` }];
    const measurement: Measurement = { reqPerSec: count / seconds, p50: Number.NaN, p99: Number.NaN, mean: (seconds * 1000) / count, requests: count, non2xx: 0, errors: 0, statusCodes: {} };
    const row: Row = { database, scenario, status: 'measured', measurement, note: `${count} texts queued (${count / 50} sends of 50 numbers) and sent in ${seconds.toFixed(1)} s` };
    if (baseRow.status === 'measured') Object.assign(row, { ratio: measurement.reqPerSec / base.reqPerSec, ratioOf: 'provider alone' });
    return [baseRow, row];
  } catch (err) {
    return [{ database, scenario, status: 'unavailable', note: (err as Error).message }];
  } finally {
    await twilio.close();
    if (channelId) await call(origin, auth, 'DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
  }
}

/**
 * SMPP delivery receipts per second to a committed status: an SMSC in this process (the tests') takes the
 * bind of the service's channel and `count` texts, then delivers one receipt each (half in the
 * receipted_message_id form in hex, half in the `id:… stat:DELIVRD` text in decimal), 20 in flight over the
 * one bind; each deliver_sm_resp comes once its status is committed. Every text must be `delivered`
 * afterwards. Informational (no baseline).
 */
export async function smppReceiptThroughput(database: string, origin: string, auth: Record<string, string>, count: MessageCounter, receipts = 1000): Promise<Row[]> {
  const scenario = 'SMPP receipts/s (deliver_sm to a committed delivered status)';
  const { startSmsc, receiptText } = await import('../test/helpers/smsc.js');
  const smsc = await startSmsc({ bench: 'benchpw' });
  let channelId: string | undefined;
  try {
    const channel = await call(origin, auth, 'POST', '/v1/channels', { type: 'sms', name: 'Bench SMPP', address: `+1212${5_000_000 + (Date.now() % 1_000_000)}`, rate: 1000, provider: { kind: 'smpp', host: '127.0.0.1', port: smsc.port, tls: false, systemId: 'bench', password: 'benchpw' } });
    channelId = channel.id;
    await smsc.until(() => smsc.bound().length > 0, 60_000, 'the bind');
    for (let i = 0; i < receipts; i += 50) {
      const to = Array.from({ length: Math.min(50, receipts - i) }, (_, k) => number(i + k));
      await call(origin, auth, 'POST', '/v1/messages/send', { channelId, to, text: 'Your order shipped' });
    }
    const deadline = Date.now() + 10 * 60_000;
    while ((await count(channelId, ['sent'])) < receipts && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const sent = await count(channelId, ['sent']);
    if (sent < receipts) return [{ database, scenario, status: 'invalid', note: `only ${sent} of ${receipts} texts sent` }];
    const ids = smsc.submits.slice(-receipts).map((s) => s.messageId);
    const m = await load(receipts, 20, async (i) => {
      const id = ids[i]!;
      const receipt = i % 2 ? { short_message: receiptText(BigInt(`0x${id}`).toString(10), 'DELIVRD') } : { short_message: '', receipted_message_id: id, message_state: 2 };
      return (await smsc.deliver({ esm_class: 0x04, source_addr: number(i).slice(1), source_addr_ton: 1, destination_addr: channel.id.slice(0, 8), ...receipt })) === 0;
    });
    const delivered = await count(channelId, ['delivered']);
    const note = `${receipts} receipts (hex TLV and decimal text forms) over one bind, 20 in flight, in ${m.seconds.toFixed(1)} s`;
    if (m.non2xx > 0 || delivered !== receipts) return [{ database, scenario, status: 'invalid', note: `${m.non2xx} receipts refused; ${delivered} of ${receipts} delivered; ${note}` }];
    return [{ database, scenario, status: 'measured', measurement: m, note }];
  } catch (err) {
    return [{ database, scenario, status: 'unavailable', note: (err as Error).message }];
  } finally {
    if (channelId) await call(origin, auth, 'DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
    await smsc.close();
  }
}

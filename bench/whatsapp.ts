import { hubSignature, messagesChange, metaJson, startFakeGraph, textMessage, webhookBody } from '../test/helpers/meta-graph.js';
import type { Measurement } from './measure.js';
import type { Row } from './report.js';
import { call, CLIENTS, load, type MessageCounter } from './sms.js';

/**
 * The WhatsApp rows, each with its baseline measured in the same run with the same client:
 * - signed webhook batches per second to committed messages: Meta's batches of 5 messages, signed with the app
 *   secret, from 20 concurrent clients; the baseline is `POST /v1/messages` (an incoming message through the
 *   API's write path) from the same clients, as many requests: the ratio is what a batch (its signature, 5
 *   messages with their duplicate checks, threads and windows) costs over one plain write;
 * - messages sent per second through the WhatsApp sender to a local server playing Meta's Graph API; the
 *   baseline is the same POSTs sent straight to that server, one after another (the sender sends one channel's
 *   messages in turn): the ratio is the share of the API's serial rate the outbox reaches.
 * The service must run with CHANNELS_ALLOW_PRIVATE=true and a SECRETS_KEY.
 */

const BATCH = 5;
/** A Graph phone number id (15 digits) and a business number of this run. */
const phoneNumberId = (n: number) => String(109_000_000_000_000 + (Date.now() % 1_000_000_000) * 10 + n);
const channelNumber = (block: 6 | 7) => `+1212${block * 1_000_000 + (Date.now() % 1_000_000)}`;
const customer = (i: number) => `1212${2000000 + (i % 5000)}`;

export async function whatsappWebhookThroughput(database: string, origin: string, auth: Record<string, string>, counter: MessageCounter, batches = 400): Promise<Row[]> {
  const scenario = `WhatsApp signed webhook batches/s (${BATCH} messages each, to committed messages)`;
  const graph = await startFakeGraph();
  let channelId: string | undefined;
  try {
    const appSecret = `bench-secret-${Date.now()}`;
    const id = phoneNumberId(1);
    const channel = await call(origin, auth, 'POST', '/v1/channels', { type: 'whatsapp', name: 'Bench WhatsApp', address: channelNumber(6), provider: { kind: 'meta', phoneNumberId: id, accessToken: graph.accessToken, appSecret, apiBaseUrl: graph.url } });
    channelId = channel.id;
    const url = `${origin}/hooks/whatsapp/${channelId}`;
    const bodies = Array.from({ length: batches }, (_, b) => {
      const messages = Array.from({ length: BATCH }, (_, k) => textMessage(customer(b * BATCH + k), `Order ${b * BATCH + k} please`));
      const raw = metaJson(webhookBody([messagesChange(id, { contacts: messages.map((m) => ({ waId: m.from, name: 'Customer' })), messages })]));
      return { raw, signature: hubSignature(appSecret, raw) };
    });
    const base = await load(batches, CLIENTS, async () => {
      const res = await fetch(`${origin}/v1/messages`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ direction: 'incoming', type: 'whatsapp', text: 'Order 1 please' }) });
      await res.text();
      return res.status === 201;
    });
    const baseRow: Row = { database, scenario: `  baseline: POST /v1/messages (incoming), ${CLIENTS} clients`, status: base.non2xx ? 'invalid' : 'measured', measurement: base, note: `${batches} writes in ${base.seconds.toFixed(1)} s` };
    const m = await load(batches, CLIENTS, async (i) => {
      const body = bodies[i]!;
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': body.signature }, body: body.raw });
      await res.text();
      return res.status === 200;
    });
    const stored = await counter(channelId);
    const expected = batches * BATCH;
    const note = `${batches} batches (${expected} messages, ${(expected / m.seconds).toFixed(0)} messages/s) over ${CLIENTS} clients in ${m.seconds.toFixed(1)} s`;
    if (m.non2xx > 0 || stored !== expected) return [baseRow, { database, scenario, status: 'invalid', note: `${m.non2xx} non-200 answers; ${stored} of ${expected} messages; ${note}` }];
    const row: Row = { database, scenario, status: 'measured', measurement: m, note };
    if (baseRow.status === 'measured') Object.assign(row, { ratio: m.reqPerSec / base.reqPerSec, ratioOf: 'API incoming write' });
    return [baseRow, row];
  } catch (err) {
    return [{ database, scenario, status: 'unavailable', note: (err as Error).message }];
  } finally {
    await graph.close();
    if (channelId) await call(origin, auth, 'DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
  }
}

export async function whatsappSendThroughput(database: string, origin: string, auth: Record<string, string>, counter: MessageCounter, count = 500): Promise<Row[]> {
  const scenario = 'WhatsApp messages sent/s (outbox to a local Graph API)';
  const graph = await startFakeGraph();
  let channelId: string | undefined;
  try {
    const id = phoneNumberId(2);
    const template = { name: 'order_update', language: 'en_US' };
    // The Graph API alone: the same POSTs with the same token, one at a time, from the bench.
    const base = await load(count, 1, async (i) => {
      const res = await fetch(`${graph.url}/${graph.version}/${id}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${graph.accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messaging_product: 'whatsapp', recipient_type: 'individual', to: customer(i), type: 'template', template: { name: template.name, language: { code: template.language } } }),
      });
      await res.text();
      return res.status === 200;
    });
    const baseRow: Row = { database, scenario: '  baseline: the local Graph API alone, 1 client', status: base.non2xx ? 'invalid' : 'measured', measurement: base, note: `${count} POSTs in ${base.seconds.toFixed(1)} s` };
    graph.sent.length = 0;
    // A high rate: the row measures the sender, not the pacing. Templates: no 24-hour window to open first.
    const channel = await call(origin, auth, 'POST', '/v1/channels', { type: 'whatsapp', name: 'Bench WhatsApp out', address: channelNumber(7), rate: 1000, provider: { kind: 'meta', phoneNumberId: id, accessToken: graph.accessToken, appSecret: 'bench', apiBaseUrl: graph.url } });
    channelId = channel.id;
    const start = performance.now();
    for (let i = 0; i < count; i += 50) {
      const to = Array.from({ length: Math.min(50, count - i) }, (_, k) => `+${customer(i + k)}`);
      await call(origin, auth, 'POST', '/v1/messages/send', { channelId, to, template });
    }
    const deadline = Date.now() + 10 * 60_000;
    let settled = 0;
    while (Date.now() < deadline) {
      settled = await counter(channelId, ['sent', 'failed']);
      if (settled >= count) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const seconds = (performance.now() - start) / 1000;
    const sent = await counter(channelId, ['sent']);
    if (sent < count || graph.sent.length !== count) return [baseRow, { database, scenario, status: 'invalid', note: `${sent} of ${count} sent (${settled} settled), ${graph.sent.length} requests` }];
    const measurement: Measurement = { reqPerSec: count / seconds, p50: Number.NaN, p99: Number.NaN, mean: (seconds * 1000) / count, requests: count, non2xx: 0, errors: 0, statusCodes: {} };
    const row: Row = { database, scenario, status: 'measured', measurement, note: `${count} templates queued (${Math.ceil(count / 50)} sends of 50 numbers) and sent in ${seconds.toFixed(1)} s` };
    if (baseRow.status === 'measured') Object.assign(row, { ratio: measurement.reqPerSec / base.reqPerSec, ratioOf: 'Graph API alone' });
    return [baseRow, row];
  } catch (err) {
    return [{ database, scenario, status: 'unavailable', note: (err as Error).message }];
  } finally {
    await graph.close();
    if (channelId) await call(origin, auth, 'DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
  }
}

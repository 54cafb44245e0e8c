import { hubSignature, messagesChange, metaJson, startFakeGraph, textMessage, webhookBody, type FakeGraph } from '../test/helpers/meta-graph.js';
import { channelNumber, customerNumber, sendRows, webhookRows, type Target } from './channels.js';
import type { Row } from './report.js';

/**
 * The WhatsApp rows (the shared shape and the baselines: bench/channels.ts): signed webhook batches per second
 * to committed messages (Meta's batches of 5 messages, signed with the app secret; the ratio is what a batch,
 * its signature and 5 messages with their duplicate checks, threads and windows, costs over one plain write),
 * and templates sent per second through the WhatsApp sender to a local server playing Meta's Graph API.
 */

const BATCH = 5;
/** A Graph phone number id (15 digits) of this run. */
const phoneNumberId = (n: number) => String(109_000_000_000_000 + (Date.now() % 1_000_000_000) * 10 + n);
/** Meta writes a customer's number without the `+` (its `wa_id`). */
const waId = (i: number) => customerNumber(i).slice(1);

const metaChannel = (graph: FakeGraph, name: string, block: number, phoneNumberId: string, appSecret: string, rate?: number) => ({
  type: 'whatsapp',
  name,
  address: channelNumber(block),
  ...(rate ? { rate } : {}),
  provider: { kind: 'meta', phoneNumberId, accessToken: graph.accessToken, appSecret, apiBaseUrl: graph.url },
});

export function whatsappWebhookThroughput(target: Target, batches = 400): Promise<Row[]> {
  const appSecret = `bench-secret-${Date.now()}`;
  const id = phoneNumberId(1);
  return webhookRows(
    target,
    {
      scenario: `WhatsApp signed webhook batches/s (${BATCH} messages each, to committed messages)`,
      type: 'whatsapp',
      start: startFakeGraph,
      channel: (graph) => metaChannel(graph, 'Bench WhatsApp', 6, id, appSecret),
      posts: (_graph, url) =>
        Array.from({ length: batches }, (_, b) => {
          const messages = Array.from({ length: BATCH }, (_, k) => textMessage(waId(b * BATCH + k), `Order ${b * BATCH + k} please`));
          const raw = metaJson(webhookBody([messagesChange(id, { contacts: messages.map((m) => ({ waId: m.from, name: 'Customer' })), messages })]));
          return { url, init: { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': hubSignature(appSecret, raw) }, body: raw }, ok: 200 };
        }),
      expected: batches * BATCH,
      what: `${batches} batches (${batches * BATCH} messages)`,
    },
    batches,
  );
}

export function whatsappSendThroughput(target: Target, count = 500): Promise<Row[]> {
  const id = phoneNumberId(2);
  // Templates: no 24-hour window to open first.
  const template = { name: 'order_update', language: 'en_US' };
  return sendRows(
    target,
    {
      scenario: 'WhatsApp messages sent/s (outbox to a local Graph API)',
      start: startFakeGraph,
      alone: 'the local Graph API',
      direct: (graph, i) => ({
        url: `${graph.url}/${graph.version}/${id}/messages`,
        init: {
          method: 'POST',
          headers: { authorization: `Bearer ${graph.accessToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ messaging_product: 'whatsapp', recipient_type: 'individual', to: waId(i), type: 'template', template: { name: template.name, language: { code: template.language } } }),
        },
        ok: 200,
      }),
      channel: (graph) => metaChannel(graph, 'Bench WhatsApp out', 7, id, 'bench', 1000),
      message: { template },
      to: customerNumber,
      what: 'templates',
    },
    count,
  );
}

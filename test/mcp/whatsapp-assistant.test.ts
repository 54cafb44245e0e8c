import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createOutboxWorker } from '../../src/workers/outbox-worker.js';
import { whatsappSending } from '../../src/modules/channels/whatsapp/whatsapp.sender.js';
import { connectAssistant, useLiveTenant } from '../helpers/live-tenant.js';
import { hubSignature, messagesChange, metaJson, textMessage, webhookBody } from '../helpers/meta-graph.js';
import { useFakeGraph, whatsappTestEnv } from '../helpers/whatsapp-app.js';

/**
 * An assistant connected over MCP (OAuth, the official SDK's client) reads a customer's WhatsApp thread and
 * answers it through the same tools as texts and email; the answer leaves through the WhatsApp sender to a
 * local server that plays Meta's Graph API, to the customer's number, answering the customer's message.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const { t, a } = useLiveTenant(whatsappTestEnv());
const graph = useFakeGraph();
const silent = { error: () => {}, warn: () => {} };

describe('an assistant over MCP and a WhatsApp thread', () => {
  it('reads the thread of a customer who wrote on WhatsApp and replies with the same tools; the reply leaves through Meta', async () => {
    const appSecret = randomBytes(16).toString('hex');
    const channel = await a.request('POST', '/v1/channels', {
      type: 'whatsapp', name: 'Shop on WhatsApp', address: '+12122006001',
      provider: { kind: 'meta', phoneNumberId: graph.phoneNumberId, accessToken: graph.accessToken, appSecret, apiBaseUrl: graph.url },
    });
    expect(channel.status, channel.body).toBe(201);
    const ch = channel.json.data as Json;
    // Meta's timestamps are seconds: the first a minute before the second.
    const written = [textMessage('12122006002', 'Hello, is my order ready?', { timestamp: String(Math.floor(Date.now() / 1000) - 60) }), textMessage('12122006002', 'It is order 42')];
    const raw = metaJson(webhookBody([messagesChange(graph.phoneNumberId, { contacts: [{ waId: '12122006002', name: 'Ada' }], messages: written })]));
    const hook = await t.app.inject({ method: 'POST', url: `/hooks/whatsapp/${ch.id}`, headers: { 'content-type': 'application/json', 'x-hub-signature-256': hubSignature(appSecret, raw) }, payload: raw });
    expect(hook.statusCode, hook.body).toBe(200);

    const { client, call } = await connectAssistant(t, a);
    try {
      const incoming = (await call('messages_read', { method: 'list_incoming', limit: 10 })) as Json[];
      const latest = incoming.find((m) => m.channelId === ch.id && m.providerMessageId === written[1]!.id)!;
      const thread = (await call('messages_read', { method: 'list', threadId: latest.threadId })) as Json[];
      expect(thread.map((m) => m.text)).toEqual(['Hello, is my order ready?', 'It is order 42']);
      expect(thread.every((m) => m.type === 'whatsapp' && m.sender.phoneNumber === '+12122006002' && m.sender.name === 'Ada')).toBe(true);

      const reply = await call('messages_write', { method: 'reply', id: latest.id, text: 'Order 42 is ready for pickup' });
      expect(reply).toMatchObject({ type: 'whatsapp', direction: 'outgoing', status: 'queued', threadId: latest.threadId, recipient: { phoneNumber: '+12122006002' } });
      const worker = createOutboxWorker({ name: 'senders', db: t.database.db, clock: () => new Date(), log: silent, pollMs: 60_000, queues: [whatsappSending({ db: t.database.db, clock: () => new Date(), log: silent, allowPrivate: true, sendTimeoutMs: 5000 })] });
      await worker.pass();
      await worker.idle();
      const sent = graph.sent.find((s) => (s.body.text as Json | undefined)?.body === 'Order 42 is ready for pickup')!;
      expect(sent.body).toMatchObject({ messaging_product: 'whatsapp', to: '12122006002', type: 'text', context: { message_id: written[1]!.id } });
      const after = await call('messages_read', { method: 'get', id: reply.id });
      expect(after).toMatchObject({ status: 'sent', providerMessageId: sent.wamid });
    } finally {
      await client.close();
    }
  });
});

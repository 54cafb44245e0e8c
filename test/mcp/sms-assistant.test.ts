import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twilioSignature } from '../../src/modules/channels/sms/providers/twilio.js';
import { createSmsSender } from '../../src/workers/sms-sender.js';
import { connectAssistant, useLiveTenant } from '../helpers/live-tenant.js';
import { postWebhook, startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';

/**
 * An assistant connected over MCP (OAuth, the official SDK's client) reads a customer's text thread and
 * answers it through the same tools as email; the answer leaves through the SMS sender to a local server
 * that plays Twilio, from the channel's number to the customer's.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const { t, a } = useLiveTenant({ SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' });
let twilio: FakeTwilio;
let sender: ReturnType<typeof createSmsSender>;

beforeAll(async () => {
  twilio = await startFakeTwilio();
  sender = createSmsSender({ db: t.database.db, clock: () => new Date(), log: { error: () => {}, warn: () => {} }, allowPrivate: true, sendTimeoutMs: 5000 });
});
afterAll(async () => {
  await sender?.stop();
  await twilio?.close();
});

describe('an assistant over MCP and a text thread', () => {
  it('reads the thread of a customer who texted and replies; the reply leaves from the channel to the customer', async () => {
    const channel = await a.request('POST', '/v1/channels', {
      type: 'sms', name: 'Shop', address: '+12122004001',
      provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url },
    });
    expect(channel.status, channel.body).toBe(201);
    const ch = channel.json.data as Json;
    for (const [sid, body] of [['SMa1', 'Hello, is my order ready?'], ['SMa2', 'It is order 42']]) {
      const params = { MessageSid: sid!, From: '+12122004002', To: ch.address as string, Body: body! };
      // Signed over this app's own PUBLIC_URL, as Twilio signs the URL it posts to.
      const signature = twilioSignature(twilio.authToken, `${t.origin}/hooks/sms/${ch.id}`, params);
      const res = await postWebhook(t.app, `/hooks/sms/${ch.id}`, params, twilio.authToken, { signature });
      expect(res.status, res.body).toBe(200);
    }

    // Sending is a consent of its own; the person gave it on the consent page.
    const { client, call } = await connectAssistant(t, a);
    try {
      const incoming = (await call('messages_read', { method: 'list_incoming', limit: 10 })) as Json[];
      const latest = incoming.find((m) => m.channelId === ch.id)!;
      const thread = (await call('messages_read', { method: 'list', threadId: latest.threadId })) as Json[];
      expect(thread.map((m) => m.text)).toEqual(['Hello, is my order ready?', 'It is order 42']);
      expect(thread.every((m) => m.type === 'sms' && m.sender.phoneNumber === '+12122004002')).toBe(true);

      const reply = await call('messages_write', { method: 'reply', id: latest.id, text: 'Order 42 is ready for pickup' });
      expect(reply).toMatchObject({ type: 'sms', direction: 'outgoing', status: 'queued', threadId: latest.threadId, recipient: { phoneNumber: '+12122004002' } });
      await sender.runOnce();
      await sender.idle();
      const sent = twilio.sent.find((s) => s.form.get('Body') === 'Order 42 is ready for pickup')!;
      expect(Object.fromEntries(sent.form)).toMatchObject({ From: '+12122004001', To: '+12122004002' });
      const after = await call('messages_read', { method: 'get', id: reply.id });
      expect(after).toMatchObject({ status: 'sent', providerMessageId: sent.sid });
    } finally {
      await client.close();
    }
  });
});

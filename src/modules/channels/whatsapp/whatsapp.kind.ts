import { z } from 'zod';
import { fieldError } from '../../../core/errors.js';
import { channelPolicy } from '../channels.connect.js';
import { CheckResult } from '../channels.schemas.js';
import type { ChannelKind } from '../kind.js';
import { WHATSAPP_CREDENTIALS_FIX } from './rules.js';
import { whatsappHook } from './whatsapp.hooks.js';
import { whatsappSending } from './whatsapp.sender.js';
import { createWhatsAppChannel, failQueuedTo, setWhatsAppPublicUrl, graphOf, replyWhatsApp, sendWhatsApp, toWhatsAppChannel, updateWhatsAppChannel, withSecrets, type WhatsAppChannelPatch } from './whatsapp.repository.js';
import { MetaProviderOut, WhatsAppChannelCreateInput, WhatsAppChannelUpdateFields, WhatsAppInboundOut, WhatsAppSendInput, type WhatsAppChannelCreate, type WhatsAppSendValues } from './whatsapp.schemas.js';
import { testWhatsAppChannel } from './whatsapp.test-channel.js';

/** Why a field of `PATCH /channels/{id}` does not apply to a WhatsApp channel. */
const REFUSED: Record<string, string> = {
  address: "A WhatsApp channel's number cannot be changed: add a channel for the new number",
  inbound: 'WhatsApp channels have no inbound settings: Meta delivers to `inbound.webhookUrl`',
  outbound: 'WhatsApp channels send through their `provider`',
};

/**
 * WhatsApp channels: a WhatsApp Business number at Meta's Cloud API (`meta.ts`). Messages arrive at
 * `/hooks/whatsapp/{channelId}` (signed by the Meta app), and leave through the WhatsApp outbox at the
 * channel's rate (messages a second); free-form text only within the 24-hour window, templates any time.
 */
export const whatsappKind: ChannelKind = {
  type: 'whatsapp',
  noun: 'WhatsApp',
  heading: 'WhatsApp',
  outboxTable: 'whatsapp_outbox',
  schemas: {
    create: { schema: WhatsAppChannelCreateInput, shape: WhatsAppChannelCreateInput.shape },
    update: WhatsAppChannelUpdateFields,
    output: { provider: MetaProviderOut.optional(), rate: z.number().optional().describe('Messages (texts: segments) per second sent at most') },
    inbound: WhatsAppInboundOut,
    testInbound: CheckResult.extend({ mode: z.literal('whatsapp') }),
    send: { schema: WhatsAppSendInput, shape: WhatsAppSendInput.shape },
  },
  toJson: toWhatsAppChannel,
  create: (db, orgId, input) => createWhatsAppChannel(db, orgId, input as WhatsAppChannelCreate),
  update: (db, orgId, current, patch) => updateWhatsAppChannel(db, orgId, current, patch as WhatsAppChannelPatch),
  refuse: (field) => REFUSED[field],
  test: async (_ctx, row) => {
    const channel = withSecrets(row);
    if (!channel) throw fieldError('id', 'The channel has no stored access token or app secret: set provider.accessToken and provider.appSecret');
    return testWhatsAppChannel(channel, { allowPrivate: channelPolicy().allowPrivate, timeoutMs: 10_000 });
  },
  send: (ctx, _channel, input) => sendWhatsApp(ctx, input as WhatsAppSendValues),
  reply: (ctx, message, input) => {
    if (input.html !== undefined) throw fieldError('html', 'A WhatsApp message has no HTML: give `text` only');
    if (input.attachments !== undefined) throw fieldError('attachments', 'Attachments cannot be sent on WhatsApp yet: give `text` only');
    return replyWhatsApp(ctx, message, input.text);
  },
  // A received item in Meta's two steps (meta.ts); a refused token says what to fix on the channel.
  fetchMedia: async (row, mediaId, limits) => {
    const channel = withSecrets(row);
    if (!channel) return { kind: 'failed', error: 'The channel has no stored access token' };
    const outcome = await graphOf(channel).fetchMedia(mediaId, limits);
    return outcome.kind === 'failed' && outcome.credentials ? { ...outcome, error: `Meta: ${outcome.error}`, fix: WHATSAPP_CREDENTIALS_FIX } : outcome;
  },
  failQueuedTo,
  init: (config) => setWhatsAppPublicUrl(config.publicUrl),
  hook: whatsappHook,
  // One request to Meta may take as long as one to a text provider (SMS_SEND_TIMEOUT_MS).
  sender: (deps) => whatsappSending({ ...deps, sendTimeoutMs: deps.config.sms.sendTimeoutMs }),
  pacing: (row) => ({ perSecond: row.whatsapp?.rate ?? 20 }),
};

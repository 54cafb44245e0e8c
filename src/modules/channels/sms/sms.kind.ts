import { fieldError } from '../../../core/errors.js';
import type { ChannelKind } from '../kind.js';
import { providerFor } from './providers/index.js';
import { smsHook } from './sms.hooks.js';
import { createSmsChannel, failQueuedTo, setSmsPublicUrl, replyText, sendText, toSmsChannel, onlyTextChannel, updateSmsChannel, withProviderSecret } from './sms.repository.js';
import { SmsChannelCreateInput, SmsChannelUpdateFields, SmsInboundOut, SmsOutputFields, SmsSendInput, SmsTestInbound, type SmsChannelCreate, type SmsSendValues } from './sms.schemas.js';
import { testSmsChannel } from './sms.test-channel.js';

/** Why a field of `PATCH /channels/{id}` does not apply to a text channel. */
const REFUSED: Record<string, string> = {
  address: "A text channel's number cannot be changed: add a channel for the new number",
  inbound: 'Text channels have no inbound settings: their provider delivers to `inbound.webhookUrl`',
  outbound: 'Text channels send through their `provider`',
};

/**
 * Text channels (SMS, MMS): a number (or sender id) at a provider, one file each in `providers/` (Twilio's
 * API and the APIs that copy it, an SMPP bind). Texts arrive at the provider-neutral hook route or over the
 * bind, and leave through the text outbox at the channel's rate (segments a second).
 */
export const smsKind: ChannelKind = {
  type: 'sms',
  noun: 'text',
  heading: 'Texts',
  outboxTable: 'sms_outbox',
  schemas: {
    create: { schema: SmsChannelCreateInput, shape: SmsChannelCreateInput.shape },
    update: SmsChannelUpdateFields,
    output: SmsOutputFields,
    inbound: SmsInboundOut,
    testInbound: SmsTestInbound,
    send: { schema: SmsSendInput, shape: SmsSendInput.shape },
  },
  toJson: toSmsChannel,
  create: (db, orgId, input) => createSmsChannel(db, orgId, input as SmsChannelCreate),
  update: (db, orgId, current, patch) => updateSmsChannel(db, orgId, current, patch),
  refuse: (field) => REFUSED[field],
  test: (_ctx, row) => testSmsChannel(row),
  send: (ctx, _channel, input) => sendText(ctx, input as SmsSendValues),
  reply: (ctx, message, input) => {
    if (input.html !== undefined) throw fieldError('html', 'A text has no HTML: give `text` only');
    return replyText(ctx, message, input.text);
  },
  defaultChannel: onlyTextChannel,
  // An MMS's item by the URL the provider's webhook named (its file fetches it: credentials on its API host only).
  fetchMedia: async (row, url, limits) => {
    const channel = withProviderSecret(row);
    if (!channel) return { kind: 'failed', error: 'The channel has no stored provider credentials' };
    const provider = providerFor(channel.provider);
    if (!provider.fetchMedia) return { kind: 'failed', error: `The ${provider.name} provider carries no media` };
    return provider.fetchMedia(url, limits);
  },
  failQueuedTo,
  init: (config) => setSmsPublicUrl(config.publicUrl),
  planWording: { noun: 'text', unverifiedSenderNote: 'The sender is the number the provider reports, which is not authenticated everywhere (numbers can be spoofed).' },
  hook: smsHook,
  pacing: (row) => ({ perSecond: row.sms?.rate ?? 1 }),
};

import { channelPolicy, testChannel } from '../channels.connect.js';
import { withSecrets } from '../channels.repository.js';
import type { ChannelKind } from '../kind.js';
import { createEmailChannel, updateEmailChannel } from './email.channels.js';
import { ChannelCreateInput, EmailTestInbound, EmailUpdateFields, InboundOut, OutboundOut, type ChannelCreate } from './email.schemas.js';
import { signSample } from './email.sign.js';
import { toEmailChannel } from './email.view.js';
import { forwardMessage, replyToMessage, sendMessage } from './sending.repository.js';
import { MessageSendInput, type MessageForwardValues, type MessageReplyValues, type MessageSendValues } from './sending.schemas.js';

/**
 * Email channels: mail arrives at the built-in SMTP receiver or from an IMAP mailbox (workers/smtp-receiver.ts,
 * workers/imap-sync.ts, both through `receiveEmail`), and leaves through the channel's SMTP relay (the mail
 * outbox, sent by the mail sender). The relay's answers pace it: a channel whose relay refuses is paused.
 */
export const emailKind: ChannelKind = {
  type: 'email',
  noun: 'email',
  heading: 'Email',
  outboxTable: 'mail_outbox',
  schemas: {
    create: { schema: ChannelCreateInput, shape: ChannelCreateInput.shape },
    update: EmailUpdateFields,
    output: { outbound: OutboundOut },
    inbound: InboundOut,
    testInbound: EmailTestInbound,
    send: { schema: MessageSendInput, shape: MessageSendInput.shape },
  },
  toJson: toEmailChannel,
  create: (db, orgId, input) => createEmailChannel(db, orgId, input as ChannelCreate),
  update: (db, orgId, current, patch) => updateEmailChannel(db, orgId, current, patch),
  test: (ctx, row) => testChannel(withSecrets(row), channelPolicy().allowPrivate, () => signSample(ctx.db, ctx.orgId, row)),
  send: (ctx, _channel, input) => sendMessage(ctx, input as MessageSendValues),
  reply: (ctx, _message, input) => replyToMessage(ctx, input as MessageReplyValues),
  forward: (ctx, input) => forwardMessage(ctx, input as MessageForwardValues),
  unreadDigest: 'unreadEmails',
  pacing: () => undefined,
};

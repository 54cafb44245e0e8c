import { defineOperation, type Operation } from '../../core/operation.js';
import { Message } from './messages.schemas.js';
import { forwardMessage, replyToMessage, sendMessage } from './sending.repository.js';
import { MessageForwardInput, MessageReplyInput, MessageSendInput } from './sending.schemas.js';

const QUEUED =
  'Answers the outgoing message, `status` "queued"; it then becomes "sent" (`providerMessageId` = Message-ID, event `message.sent`) ' +
  'or "failed" (`statusReason`, event `message.failed`); temporary refusals are retried. Cannot be undone.';

/** Sending email: each reaches the outside world (`effects.openWorld`) and cannot be undone. */
export const sendingOperations: Operation[] = [
  defineOperation({
    id: 'messages.send',
    method: 'POST',
    event: 'message.created',
    path: '/messages/send',
    summary: 'Send an email',
    description:
      "Sends an email through a channel's relay, from its address (or `outbound.from`); `bcc` stays out of the headers. " +
      `\`replyToMessageId\` makes it an answer (In-Reply-To, References, same thread). ${QUEUED}`,
    input: MessageSendInput,
    output: Message,
    effects: { openWorld: true },
    handler: (input, ctx) => sendMessage(ctx, input),
  }),
  defineOperation({
    id: 'messages.reply',
    method: 'POST',
    event: 'message.created',
    path: '/messages/{id}/reply',
    summary: 'Reply to a message',
    description:
      'Answers through the channel the message came through, to its Reply-To or sender (`replyAll`: also its To and Cc, never the channel itself); ' +
      `"Re: …", In-Reply-To, References, same thread. ${QUEUED} At most 50 addresses (a 400 past it). An automation answers one address, never automatic, bulk or list mail nor bounces, and one sender at most once a day.`,
    input: MessageReplyInput,
    output: Message,
    effects: { openWorld: true },
    handler: (input, ctx) => replyToMessage(ctx, input),
  }),
  defineOperation({
    id: 'messages.forward',
    method: 'POST',
    event: 'message.created',
    path: '/messages/{id}/forward',
    summary: 'Forward a message',
    description: `Forwards inline ("Fwd: …", the note, then the original), through \`channelId\` or the message's channel, in its thread. ${QUEUED}`,
    input: MessageForwardInput,
    output: Message,
    effects: { openWorld: true },
    handler: (input, ctx) => forwardMessage(ctx, input),
  }),
];

import { defineOperation, type Operation } from '../../core/operation.js';
import { Message } from '../messages/messages.schemas.js';
import { forwardMessage, replyToMessage, sendMessage } from './email/sending.repository.js';
import { MessageForwardInput, MessageReplyInput, MessageSendInput } from './email/sending.schemas.js';
import { fieldError } from '../../core/errors.js';
import { routedObject, type Routed } from './routed.js';
import { replyText, sendText, textMessage } from './sms/sms.repository.js';
import { looksLikeText, SmsSendInput } from './sms/sms.schemas.js';

/** An email (`subject`, addresses) or a text (`to`: numbers, through a text channel): each checked by its own shape. */
const AnySendInput = routedObject({ schema: MessageSendInput, shape: MessageSendInput.shape }, { schema: SmsSendInput, shape: SmsSendInput.shape }, (v) => (looksLikeText(v) ? 'second' : 'first'), {
  channelId: '3f0e5c1a-8b7d-4c2e-9f10-5a6b7c8d9e0f',
  to: ['ada@example.com'],
  subject: 'Your invoice',
  text: 'Thanks, we received your invoice.',
});

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
    summary: 'Send an email or a text',
    description:
      "Sends an email through a channel's relay, from its address (or `outbound.from`); `bcc` stays out of the headers. " +
      `\`replyToMessageId\` makes it an answer (In-Reply-To, References, same thread). ` +
      'Texts (SMS channel; `channelId` optional with one): `to` numbers, `text` (≤ 10 segments), no subject; one message per number; 409 `RECIPIENT_OPTED_OUT` after STOP; then "delivered". ' +
      QUEUED,
    input: AnySendInput,
    output: Message,
    errors: ['RECIPIENT_OPTED_OUT'],
    effects: { openWorld: true, sends: true },
    handler: (raw, ctx) => {
      const input = raw as unknown as Routed<typeof MessageSendInput, typeof SmsSendInput>;
      return input.variant === 'second' ? sendText(ctx, input) : sendMessage(ctx, input);
    },
  }),
  defineOperation({
    id: 'messages.reply',
    method: 'POST',
    event: 'message.created',
    path: '/messages/{id}/reply',
    summary: 'Reply to a message',
    description:
      'Answers through the channel the message came through, to its Reply-To or sender (`replyAll`: also its To and Cc, never the channel itself); ' +
      `"Re: …", In-Reply-To, References, same thread. ${QUEUED} At most 50 addresses. An automation answers one address, never automatic, bulk or list mail, once a day. ` +
      'A text is answered by text in its thread (automations never answer short codes, sender ids, STOP/HELP).',
    input: MessageReplyInput,
    output: Message,
    errors: ['RECIPIENT_OPTED_OUT'],
    effects: { openWorld: true, sends: true },
    handler: async (input, ctx) => {
      const text = await textMessage(ctx.db, ctx.orgId, input.id);
      if (!text) return replyToMessage(ctx, input);
      if (input.html !== undefined) throw fieldError('html', 'A text has no HTML: give `text` only');
      return replyText(ctx, text, input.text);
    },
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
    effects: { openWorld: true, sends: true },
    handler: (input, ctx) => forwardMessage(ctx, input),
  }),
];

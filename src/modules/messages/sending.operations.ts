import { defineOperation, type Operation } from '../../core/operation.js';
import { Message } from './messages.schemas.js';
import { forwardMessage, replyToMessage, sendMessage } from './sending.repository.js';
import { MessageForwardInput, MessageReplyInput, MessageSendInput } from './sending.schemas.js';

const QUEUED =
  'Answers the recorded outgoing message with `status` "queued"; the service then sends it through the channel\'s SMTP relay and sets `status` "sent" ' +
  '(with `providerMessageId`, the Message-ID, and the event `message.sent`) or "failed" (with `statusReason` and the event `message.failed`). ' +
  'Temporary refusals are retried with backoff. Sent mail cannot be called back. With an `Idempotency-Key`, a repeated request sends nothing twice.';

const AUTOMATIC =
  'Sent by an automation, the mail carries `Auto-Submitted` (RFC 3834) and is never addressed to the organization\'s own channel addresses';

/** Sending email: each reaches the outside world (`effects.openWorld`) and cannot be undone. */
export const sendingOperations: Operation[] = [
  defineOperation({
    id: 'messages.send',
    method: 'POST',
    event: 'message.created',
    path: '/messages/send',
    summary: 'Send an email',
    description:
      `Sends an email through a channel: From is the channel's \`outbound.from\` (default its address), \`bcc\` never appears in the headers. ` +
      'With `replyToMessageId` the email answers that message (In-Reply-To, References, same thread); otherwise it starts a thread. ' +
      `Addresses, names and the subject with a line break are refused (400 at the field). ${QUEUED} ${AUTOMATIC} (\`Auto-Submitted: auto-generated\`).`,
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
      'Answers a message through the channel it came through: to its Reply-To (else its sender), with `replyAll` also to its other To and Cc ' +
      'addresses (never the organization\'s own channel addresses); subject "Re: …", In-Reply-To and References from the original, in its thread. ' +
      `A message recorded without a channel cannot be answered here (400 at \`id\`; use \`POST /messages/send\`). ${QUEUED} ` +
      `${AUTOMATIC} (\`Auto-Submitted: auto-replied\`); an automation never answers automatic, bulk or mailing-list mail (Auto-Submitted, Precedence, List-Id) ` +
      'nor the organization\'s own addresses, and answers one sender at most once a day.',
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
    description:
      'Forwards a message inline: subject "Fwd: …", the optional `text` as a note, then the original\'s sender, date, subject, recipients and text. ' +
      `Sent through \`channelId\`, default the channel the message came through; the forward joins the message's thread. ${QUEUED} ${AUTOMATIC} (\`Auto-Submitted: auto-generated\`).`,
    input: MessageForwardInput,
    output: Message,
    effects: { openWorld: true },
    handler: (input, ctx) => forwardMessage(ctx, input),
  }),
];

import { and, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import { fieldError } from '../../core/errors.js';
import { defineOperation, type Operation, type OperationContext } from '../../core/operation.js';
import { Uuid } from '../../core/schemas.js';
import { channels, messages } from '../../db/schema.js';
import { Message } from '../messages/messages.schemas.js';
import type { MessageRow } from '../messages/messages.repository.js';
import { MessageForwardInput, MessageReplyInput } from './email/sending.schemas.js';
import { defaultSendingChannel, FIRST_KIND, kindOf, MessageSendAnyInput, parseAs } from './kinds.js';
import type { ChannelRow } from './channels.repository.js';

const QUEUED =
  'Answers the outgoing message, `status` "queued"; it then becomes "sent" (`providerMessageId` = Message-ID, event `message.sent`) ' +
  'or "failed" (`statusReason`, event `message.failed`); temporary refusals are retried. Cannot be undone.';

/** The live channel of the organization with this id, whatever its kind; a 400 at `field` when there is none. */
async function channelNamed(ctx: OperationContext, id: string, field: string): Promise<ChannelRow> {
  const [row] = await ctx.db
    .select()
    .from(channels)
    .where(and(eq(channels.organizationId, ctx.orgId), eq(channels.id, id), isNull(channels.deletedAt)))
    .limit(1);
  if (!row) throw fieldError(field, 'No channel with this id exists in the organization');
  return row;
}

/** The live message with the channel it came through (any, deleted ones too: a reply explains), or undefined when there is no such message. */
async function messageWithChannel(ctx: OperationContext, id: string): Promise<{ message: MessageRow; channel: ChannelRow | undefined } | undefined> {
  const [found] = await ctx.db
    .select({ message: messages, channel: channels })
    .from(messages)
    .leftJoin(channels, eq(channels.id, messages.channelId))
    .where(and(eq(messages.organizationId, ctx.orgId), eq(messages.id, id), isNull(messages.deletedAt)))
    .limit(1);
  if (!found) return undefined;
  const { searchVector: _s, ...message } = found.message;
  return { message, channel: found.channel ?? undefined };
}

const ChannelChoice = z.looseObject({ channelId: Uuid.optional() });

/**
 * Sending: one set of operations for every kind. Each finds the channel the message leaves through (the
 * one named, the message's own, or the kind's default) and hands the request to that channel's kind
 * (kinds.ts), which checks it with its own shape and queues it; the outbox sends it later. Each reaches the
 * outside world (`effects.openWorld`) and cannot be undone.
 */
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
      'The request is checked by the kind of the channel it names. ' +
      QUEUED,
    input: MessageSendAnyInput,
    output: Message,
    errors: ['RECIPIENT_OPTED_OUT'],
    effects: { openWorld: true, sends: true },
    handler: async (raw, ctx) => {
      const { channelId } = parseAs<{ channelId?: string }>(ChannelChoice, raw);
      const channel = await channelNamed(ctx, channelId ?? (await defaultSendingChannel(ctx.db, ctx.orgId)), 'channelId');
      const kind = kindOf(channel);
      return kind.send(ctx, channel, parseAs(kind.schemas.send.schema, { ...raw, channelId: channel.id }));
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
      const found = await messageWithChannel(ctx, input.id);
      // A message without a channel (or none at all) goes to the first kind, whose answer says what is missing.
      const kind = found?.channel ? kindOf(found.channel) : FIRST_KIND;
      return kind.reply(ctx, found?.message as MessageRow, input);
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
    handler: async (input, ctx) => {
      const found = input.channelId ? { channel: await channelNamed(ctx, input.channelId, 'channelId') } : await messageWithChannel(ctx, input.id);
      const kind = found?.channel ? kindOf(found.channel) : FIRST_KIND;
      if (!kind.forward) throw fieldError(input.channelId ? 'channelId' : 'id', `A ${kind.noun} channel cannot forward a message: give the channelId of an email channel`);
      return kind.forward(ctx, input);
    },
  }),
];

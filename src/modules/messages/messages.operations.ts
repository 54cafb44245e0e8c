import { z } from 'zod';
import { defineOperation, type Operation } from '../../core/operation.js';
import {
  countSnoozed,
  createMessage,
  deleteMessage,
  getMessage,
  listMessages,
  searchMessages,
  updateMessageFlags,
  type Direction,
} from './messages.repository.js';
import { DIRECTIONS, Message, MessageCreateInput, MessageId, MessageListInput, MessageSearchInput, MessageUpdateInput, searchTextOf } from './messages.schemas.js';

const ORDER = 'Newest first by default (`sortOrder=asc` for oldest first).';

const listByDirection = (direction: Direction) =>
  defineOperation({
    id: `messages.list_${direction}`,
    kind: 'list',
    method: 'GET',
    path: `/messages/${direction}`,
    summary: `List ${direction} messages`,
    description: `Messages of the organization whose \`direction\` is "${direction}". ${ORDER}`,
    input: MessageListInput,
    output: Message,
    handler: (input, ctx) => listMessages(ctx.db, ctx.orgId, input, direction),
  });

// Fastify matches static segments before `{id}`, so `/messages/search`, `/messages/incoming`, ... are never read as ids.
export const messagesOperations: Operation[] = [
  defineOperation({
    id: 'messages.list',
    kind: 'list',
    method: 'GET',
    path: '/messages',
    summary: 'List messages',
    description: `Messages of the organization, incoming and outgoing. ${ORDER}`,
    input: MessageListInput.extend({ direction: z.enum(DIRECTIONS).optional().describe('Only messages of this direction') }).strict(),
    output: Message,
    handler: (input, ctx) => listMessages(ctx.db, ctx.orgId, input, input.direction),
  }),
  listByDirection('incoming'),
  listByDirection('outgoing'),
  defineOperation({
    id: 'messages.search',
    kind: 'list',
    method: 'GET',
    path: '/messages/search',
    summary: 'Search messages',
    description:
      'Messages whose text, summary, sender or recipient contain the words of `q` (alias `query`), case-insensitively. ' +
      'Words must all match; "quoted phrases", `or` and `-excluded` words follow web-search syntax. Whole words match, ' +
      `not prefixes. A missing or empty \`q\` is a 400 VALIDATION_ERROR. ${ORDER}`,
    input: MessageSearchInput,
    output: Message,
    handler: (input, ctx) => searchMessages(ctx.db, ctx.orgId, searchTextOf(input), input),
  }),
  defineOperation({
    id: 'messages.snoozed_count',
    method: 'GET',
    path: '/messages/snoozed/count',
    summary: 'Count snoozed messages',
    description: 'The number of messages of the organization whose `snoozedUntil` is set (whether or not that time has passed).',
    input: z.strictObject({}),
    output: z.number().int().min(0).describe('Number of messages with `snoozedUntil` set'),
    handler: (_input, ctx) => countSnoozed(ctx.db, ctx.orgId),
  }),
  defineOperation({
    id: 'messages.get',
    method: 'GET',
    path: '/messages/{id}',
    summary: 'Get a message',
    input: MessageId,
    output: Message,
    handler: (input, ctx) => getMessage(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'messages.update',
    method: 'PATCH',
    event: 'message.updated',
    path: '/messages/{id}',
    summary: "Set or clear a message's read, archived and snoozed flags and its triage fields",
    description:
      'Each of `readAt`, `archivedAt`, `snoozedUntil`: a date-time sets it, null clears it, absent leaves it unchanged. `importance`, `urgency`, `status` and `action` likewise take a short text or null. No other field can be changed.',
    input: MessageUpdateInput,
    output: Message,
    handler: ({ id, ...flags }, ctx) => updateMessageFlags(ctx.db, ctx.orgId, id, flags),
  }),
  defineOperation({
    id: 'messages.create',
    method: 'POST',
    event: (m) => ['message.created', m.direction === 'incoming' ? 'message.received' : 'message.sent'],
    path: '/messages',
    summary: 'Record a message',
    description: 'Records a message that was sent or received. `direction` and `type` are required; every other field is optional. It does not send anything.',
    input: MessageCreateInput,
    output: Message,
    handler: (input, ctx) => createMessage(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'messages.delete',
    method: 'DELETE',
    event: 'message.deleted',
    path: '/messages/{id}',
    summary: 'Delete a message',
    description: 'Soft delete: the message gets `deletedAt` and disappears from lists, search, the snoozed count and gets.',
    input: MessageId,
    output: Message,
    handler: (input, ctx) => deleteMessage(ctx.db, ctx.orgId, input.id),
  }),
];

import { z } from 'zod';
import { ShortText } from '../../core/schemas.js';
import { Pagination } from '../../core/pagination.js';
import { defineOperation, type Operation } from '../../core/operation.js';
import {
  countSnoozed,
  createMessage,
  deleteMessage,
  getAttachment,
  listAttachments,
  getMessage,
  listMessages,
  listThread,
  searchMessages,
  updateMessageFlags,
  type Direction,
} from './messages.repository.js';
import { Attachment, AttachmentId, AttachmentInfo, DIRECTIONS, Message, MessageCreateInput, MessageId, MessageListInput, MessageSearchInput, MessageUpdateInput, searchTextOf } from './messages.schemas.js';

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
    description:
      `Messages of the organization, incoming and outgoing. ${ORDER} ` +
      'With `threadId`: the messages of that conversation (email replies join the thread of the message they answer), ordered by `timestamp`, oldest first unless `sortOrder=desc`.',
    input: MessageListInput.extend({
      direction: z.enum(DIRECTIONS).optional().describe('Only messages of this direction'),
      threadId: ShortText(255).min(1).optional().describe('Only the messages of this thread (conversation), oldest first'),
      sortOrder: z.enum(['asc', 'desc']).optional().describe('Order by creation date (ties broken by id); default "desc", or "asc" (by `timestamp`) with `threadId`'),
    }).strict(),
    output: Message,
    handler: (input, ctx) =>
      input.threadId !== undefined
        ? listThread(ctx.db, ctx.orgId, input.threadId, { ...input, sortOrder: input.sortOrder ?? 'asc' })
        : listMessages(ctx.db, ctx.orgId, { ...input, sortOrder: input.sortOrder ?? 'desc' }, input.direction),
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
    id: 'messages.list_attachments',
    kind: 'list',
    method: 'GET',
    path: '/messages/{id}/attachments',
    summary: 'List the kept attachments of a received email or text (MMS media)',
    description: 'The attachments whose content was kept, without the content (download one with its id). Oldest first unless `sortOrder=desc`.',
    input: MessageId.extend(Pagination.shape).extend({ sortOrder: z.enum(['asc', 'desc']).default('asc').describe('Order of the attachments in the email') }).strict(),
    output: AttachmentInfo,
    handler: (input, ctx) => listAttachments(ctx.db, ctx.orgId, input.id, input),
  }),
  defineOperation({
    id: 'messages.get_attachment',
    method: 'GET',
    path: '/messages/{id}/attachments/{attachmentId}',
    summary: 'Download an attachment of a received email or text (MMS media)',
    description:
      'The attachment with its content in base64. A received email lists its attachments in `metadata.email.attachments` (`id`, `filename`, `contentType`, `size`); ' +
      'an attachment whose content was not kept (over the per-message limit) has `id` null and cannot be downloaded. ' +
      'A received text lists its MMS media in `metadata.sms.media` (`status` pending, stored or failed); a stored item has its `id` here.',
    input: AttachmentId,
    output: Attachment,
    handler: (input, ctx) => getAttachment(ctx.db, ctx.orgId, input.id, input.attachmentId),
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

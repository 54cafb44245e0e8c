import { z } from 'zod';
import { Pagination } from '../../core/pagination.js';
import { AuditFields, components, DateTimeInput, IdParam, JsonValue, LongText, NullableTimestamp, ShortText, Timestamp, Uuid } from '../../core/schemas.js';

export const DIRECTIONS = ['incoming', 'outgoing'] as const;

const openValue = (what: string, examples: string) =>
  `${what}; any short string (the set of values is open), e.g. ${examples}`;

/** A message as every operation returns it. */
export const Message = z.object({
  ...AuditFields,
  timestamp: Timestamp.describe('When the message was sent or received (ISO 8601 UTC)'),
  readAt: NullableTimestamp.describe('When the message was read; null while unread'),
  archivedAt: NullableTimestamp.describe('When the message was archived; null when not archived'),
  snoozedUntil: NullableTimestamp.describe('Until when the message is snoozed; null when not snoozed'),
  phoneNumberId: Uuid.nullable().describe('Phone number the message went through (phone-based messages); null when none'),
  emailAddressId: Uuid.nullable().describe('Email address the message went through (email-based messages); null when none'),
  type: z.string().describe(openValue('Kind of message', '"email", "phone", "sms"')),
  direction: z.enum(DIRECTIONS).describe('"incoming" (received) or "outgoing" (sent)'),
  providerMessageId: z.string().nullable().describe("The message's id at the provider that carried it"),
  providerName: z.string().nullable().describe('Name of the provider that carried the message'),
  threadId: z.string().nullable().describe('Conversation the message belongs to'),
  text: z.string().nullable().describe('Body text'),
  action: z.string().nullable().describe(openValue('Action the message calls for', '"reply", "none"')),
  importance: z.string().nullable().describe(openValue('Importance', '"low", "normal", "high"')),
  status: z.string().nullable().describe(openValue('Delivery or handling status', '"received", "queued", "sent", "failed"')),
  statusReason: z.string().nullable().describe('Why the message has its status, e.g. why sending failed; null otherwise'),
  summary: z.string().nullable().describe('Short summary of the message'),
  urgency: z.string().nullable().describe(openValue('Urgency', '"low", "normal", "high"')),
  sender: JsonValue.describe('Who sent the message: any JSON value, e.g. "ada@example.com" or {"name": "Ada", "email": "ada@example.com"}'),
  recipient: JsonValue.describe('Who received the message: any JSON value, like `sender`'),
  category: JsonValue.describe('Category of the message: any JSON value, e.g. "billing" or ["billing", "urgent"]'),
  metadata: JsonValue.describe('Free-form JSON value; for email, `metadata.email` holds the subject, headers, attachments and SPF/DKIM/DMARC results'),
  channelId: Uuid.nullable().describe('Channel that received or sent the message; null when recorded by POST /messages'),
});

export const MessageIdParam = { id: IdParam('message') };

const shortValue = (what: string, examples: string) => ShortText(64).min(1).optional().describe(openValue(what, examples));
const provider = (what: string) => ShortText(255).optional().describe(what);

/** The list filters of the message lists. */
export const MessageListInput = Pagination.extend({
  unread: z.boolean().optional().describe('true: only messages not read yet (`readAt` null)'),
}).strict();

/** POST /messages: records a message. Only `direction` and `type` are required. */
export const MessageCreateInput = z.strictObject({
  direction: z.enum(DIRECTIONS).describe('Required. "incoming" (received) or "outgoing" (sent)'),
  type: ShortText(64).min(1).describe(`Required. ${openValue('Kind of message', '"email", "phone", "sms"')}`),
  timestamp: DateTimeInput.optional().describe('When the message was sent or received (ISO 8601); defaults to now'),
  readAt: DateTimeInput.nullable().optional().describe('When the message was read; null or absent while unread'),
  archivedAt: DateTimeInput.nullable().optional().describe('When the message was archived'),
  snoozedUntil: DateTimeInput.nullable().optional().describe('Until when the message is snoozed'),
  phoneNumberId: Uuid.nullable().optional().describe('Phone number the message went through (any UUID; not checked)'),
  emailAddressId: Uuid.nullable().optional().describe('Email address the message went through (any UUID; not checked)'),
  providerMessageId: provider("The message's id at the provider that carried it, up to 255 characters"),
  providerName: provider('Name of the provider that carried the message, up to 255 characters'),
  threadId: provider('Conversation the message belongs to, up to 255 characters'),
  text: LongText.optional().describe('Body text, up to 100,000 characters; searchable'),
  summary: ShortText(10_000).optional().describe('Short summary, up to 10,000 characters; searchable'),
  action: shortValue('Action the message calls for', '"reply", "none"'),
  importance: shortValue('Importance', '"low", "normal", "high"'),
  status: shortValue('Delivery or handling status', '"received", "sent", "delivered", "failed"'),
  urgency: shortValue('Urgency', '"low", "normal", "high"'),
  sender: JsonValue.optional().describe('Who sent the message: any JSON value (e.g. an address or {"name", "email"}); its words are searchable'),
  recipient: JsonValue.optional().describe('Who received the message: any JSON value; its words are searchable'),
  category: JsonValue.optional().describe('Category: any JSON value'),
  metadata: JsonValue.optional().describe('Free-form JSON value'),
});

const flag = (what: string) => DateTimeInput.nullable().optional().describe(`${what} (null clears it)`);

const triage = (what: string, examples: string) =>
  ShortText(64).min(1).nullable().optional().describe(`${openValue(what, examples)} (null clears it)`);

/** PATCH /messages/{id}: the three flags of the specification, and the triage fields automations set. */
export const MessageUpdateInput = z.strictObject({
  ...MessageIdParam,
  readAt: flag('When the message was read'),
  archivedAt: flag('When the message was archived'),
  snoozedUntil: flag('Until when the message is snoozed'),
  importance: triage('Importance', '"low", "normal", "high"'),
  urgency: triage('Urgency', '"low", "normal", "high"'),
  status: triage('Delivery or handling status', '"received", "handled"'),
  action: triage('Action the message calls for', '"reply", "none"'),
});

export const MessageId = z.strictObject(MessageIdParam);

const searchText = (what: string) => z.string().trim().max(500).optional().describe(what);

/**
 * GET /messages/search: the text comes in `q` (or its alias `query`). Words, "quoted phrases", `or` and
 * `-word` follow web-search syntax; matching is case-insensitive over text, summary, sender and recipient.
 */
export const MessageSearchInput = Pagination.extend({
    q: searchText('Search text (required unless `query` is given), up to 500 characters: words, "quoted phrases", `or`, `-excluded`'),
    query: searchText('Alias of `q`'),
  })
  .strict()
  .superRefine((v, ctx) => {
    const text = v.q ?? v.query;
    if (!text) ctx.addIssue({ code: 'custom', path: [v.q === undefined && v.query !== undefined ? 'query' : 'q'], message: 'The search text must not be empty' });
  });

export const searchTextOf = (input: { q?: string | undefined; query?: string | undefined }) => (input.q ?? input.query)!;

export const AttachmentId = z.strictObject({ ...MessageIdParam, attachmentId: IdParam('attachment') });

/** An attachment of a received email, without its content. */
export const AttachmentInfo = z.object({
  id: Uuid.describe('Id of the attachment'),
  messageId: Uuid.describe('Message the attachment belongs to'),
  filename: z.string().nullable().describe('File name as the sender gave it; null when none'),
  contentType: z.string().describe('MIME type, e.g. "application/pdf"'),
  size: z.number().int().describe('Size in bytes'),
  contentId: z.string().nullable().describe('Content-ID, for images an HTML body refers to; null when none'),
  createdAt: Timestamp.describe('When the message was received'),
});

/** An attachment of a received email, with its content. */
export const Attachment = AttachmentInfo.extend({ content: z.string().describe('The content, base64-encoded') });

// Named schemas of the OpenAPI document (components/schemas).
components.add(Message, { id: 'Message' });
components.add(AttachmentInfo, { id: 'AttachmentInfo' });
components.add(Attachment, { id: 'Attachment' });

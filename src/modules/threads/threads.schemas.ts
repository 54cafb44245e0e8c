import { z } from 'zod';
import { Pagination } from '../../core/pagination.js';
import { components, DateTimeInput, IdParam, NullableTimestamp, ShortText, Timestamp, Uuid } from '../../core/schemas.js';

export const THREAD_STATUSES = ['open', 'pending', 'snoozed', 'closed'] as const;
export type ThreadStatus = (typeof THREAD_STATUSES)[number];

export const MAX_TAGS = 20;
export const MAX_TAG_LENGTH = 50;
export const MAX_NOTE_LENGTH = 10_000;

/** A thread's id is the `threadId` its messages carry (a UUID for email and texts, any id a recorded message was given). */
const ThreadIdParam = ShortText(255).min(1).describe('Id of the thread: the `threadId` of its messages');

/** A tag as stored: trimmed and lower-cased (`VIP ` is `vip`). */
const Tag = z
  .string()
  .trim()
  .min(1)
  .max(MAX_TAG_LENGTH)
  .transform((t) => t.toLowerCase())
  .describe(`A tag, up to ${MAX_TAG_LENGTH} characters (stored lower-case)`);

export const Thread = z.object({
  id: z.string().describe('Id of the thread: the `threadId` of its messages'),
  createdAt: Timestamp.describe('When its first message was recorded'),
  updatedAt: Timestamp.describe('When the thread last changed'),
  organizationId: Uuid.describe('Organization that owns the thread'),
  channelId: Uuid.nullable().describe('The channel of its messages; null for recorded messages'),
  subject: z.string().nullable().describe('The subject of its first email; null for texts'),
  contactId: Uuid.nullable().describe('The contact its messages are with, where known'),
  status: z.enum(THREAD_STATUSES).describe('open, pending (waiting on someone), snoozed (until `snoozedUntil`) or closed'),
  assigneeId: Uuid.nullable().describe('The member it is assigned to (see GET /members); null when unassigned'),
  snoozedUntil: NullableTimestamp.describe('When a snoozed thread opens again by itself; null unless snoozed'),
  tags: z.array(z.string()).describe('Its tags (a set, lower-case)'),
  lastMessageAt: Timestamp.describe('The time of its latest message'),
  lastIncomingAt: NullableTimestamp.describe('The time of its latest incoming message'),
  messageCount: z.number().int().describe('How many messages it holds'),
});
components.add(Thread, { id: 'Thread' });

export const ThreadListInput = Pagination.extend({
  sortOrder: z.enum(['asc', 'desc']).default('desc').describe('By `lastMessageAt` (ties by id): newest first by default'),
  status: z.enum(THREAD_STATUSES).optional().describe('Filter by status'),
  assigneeId: z.union([Uuid, z.literal('none')]).optional().describe('Filter by assignee (`none`: unassigned)'),
  tag: Tag.optional().describe('Filter by tag'),
  channelId: Uuid.optional().describe('Filter by channel'),
  contactId: Uuid.optional().describe('Filter by contact'),
}).strict();

export const ThreadId = z.strictObject({ id: ThreadIdParam });

export const ThreadUpdateInput = z.strictObject({
  id: ThreadIdParam,
  status: z.enum(THREAD_STATUSES).optional().describe('The new status; `snoozed` needs `snoozedUntil`, any other status clears it'),
  snoozedUntil: DateTimeInput.nullable()
    .optional()
    .describe('When the snooze ends, in the future; given alone it snoozes the thread, null alone ends its snooze'),
  assigneeId: Uuid.nullable().optional().describe('A member of the organization (GET /members), or null to unassign'),
  assigneeEmail: z.email().optional().describe("Assigns to the member with this email instead (what an automation's plan names)"),
  tags: z
    .array(Tag)
    .max(MAX_TAGS)
    .optional()
    .describe(`Replaces the set of tags (at most ${MAX_TAGS}; duplicates count once)`),
  addTags: z
    .array(Tag)
    .min(1)
    .max(MAX_TAGS)
    .optional()
    .describe(`Adds these tags to the set, keeping the others (the set holds at most ${MAX_TAGS}); not with \`tags\``),
  removeTags: z
    .array(Tag)
    .min(1)
    .max(MAX_TAGS)
    .optional()
    .describe('Removes these tags from the set (a tag it does not hold is no change); not with `tags`'),
});

export const Member = z.object({
  id: Uuid.describe('Id of the person (a user of the organization)'),
  name: z.string().nullable().describe('Their name'),
  email: z.string().describe('Their email address'),
});
components.add(Member, { id: 'Member' });

export const NoteAuthor = z.object({
  type: z.enum(['user', 'apiKey']).describe('A person (also through an assistant) or an API key'),
  id: Uuid.nullable().describe('Id of the user or API key'),
  name: z.string().nullable().describe('Their name'),
  client: z.string().optional().describe('The assistant (OAuth client) the person wrote through, when they did'),
});

export const Note = z.object({
  id: Uuid.describe('Id of the note'),
  threadId: z.string().describe('Id of its thread'),
  text: z.string().describe('The note'),
  author: NoteAuthor.describe('Who wrote it'),
  createdAt: Timestamp.describe('When it was written'),
});
components.add(Note, { id: 'Note' });

export const NoteCreateInput = z.strictObject({
  id: ThreadIdParam,
  text: z.string().trim().min(1).max(MAX_NOTE_LENGTH).describe(`The note, up to ${MAX_NOTE_LENGTH.toLocaleString('en')} characters; never sent to anyone`),
});

export const NoteListInput = Pagination.strict().extend({ id: ThreadIdParam });

export const NoteId = z.strictObject({ id: ThreadIdParam, noteId: IdParam('note') });

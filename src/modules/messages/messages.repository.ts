import { count, eq, getTableColumns, isNotNull, sql, type SQL } from 'drizzle-orm';
import { notFound } from '../../core/errors.js';
import { pageOrder, pageWindow, type Page, type PageInput } from '../../core/pagination.js';
import { toDate } from '../../core/schemas.js';
import type { DbOrTx } from '../../db/client.js';
import { messages } from '../../db/schema.js';
import { definedOnly, scopedRepository } from '../../db/scoped.js';

export const messageRows = scopedRepository(messages, 'Message');

/**
 * Every column but `search_vector`: it is an index input, not part of the resource, and as large as
 * the text itself, so no query reads it back.
 */
const { searchVector: _searchVector, ...columns } = getTableColumns(messages);

export type MessageRow = Omit<typeof messages.$inferSelect, 'searchVector'>;
export type Direction = 'incoming' | 'outgoing';

const byId = (orgId: string, id: string) => messageRows.live(orgId, eq(messages.id, id));

export async function getMessage(db: DbOrTx, orgId: string, id: string): Promise<MessageRow> {
  const [row] = await db.select(columns).from(messages).where(byId(orgId, id)).limit(1);
  if (!row) throw notFound('Message');
  return row;
}

async function page(db: DbOrTx, orgId: string, input: PageInput, filter?: SQL): Promise<Page<MessageRow>> {
  const { limit, offset } = pageWindow(input);
  const items = await db
    .select(columns)
    .from(messages)
    .where(messageRows.live(orgId, filter))
    .orderBy(...pageOrder(input, messages.createdAt, messages.id))
    .limit(limit)
    .offset(offset);
  return { items };
}

/** All directions (index `messages_list`) or one (index `messages_direction_list`). No total: org-wide. */
export const listMessages = (db: DbOrTx, orgId: string, input: PageInput, direction?: Direction) =>
  page(db, orgId, input, direction ? eq(messages.direction, direction) : undefined);

/** Below this many matches a search sorts the matches themselves; from it on it walks the creation-date index. */
const FEW_MATCHES = 1000;

/**
 * Full-text search over the stored `search_vector` (text, summary, sender, recipient; 'simple' config, so
 * case-folded and unstemmed), organization-scoped and live rows only.
 *
 * The planner cannot know how many messages hold a word it has no statistics for, and when it guesses
 * "many" it walks `messages_list` newest first, filtering every row: for a rare or absent word that reads the
 * whole organization (hundreds of ms at 1,000,000 messages). So a cheap probe counts the matches first,
 * capped at FEW_MATCHES: with few matches the page is sorted from the GIN index result (its ORDER BY is an
 * expression no index provides, so the walk is impossible); with many, the walk finds a page within a few
 * hundred rows. Not prepared on purpose: each search is planned with its own words.
 */
export async function searchMessages(db: DbOrTx, orgId: string, text: string, input: PageInput): Promise<Page<MessageRow>> {
  const match = sql`${messages.searchVector} @@ websearch_to_tsquery('simple', ${text})`;
  const where = messageRows.live(orgId, match);
  const capped = db.select({ one: sql`1` }).from(messages).where(where).limit(FEW_MATCHES).as('capped');
  const [probe] = await db.select({ n: sql<number>`count(*)::int` }).from(capped);
  if ((probe?.n ?? 0) >= FEW_MATCHES) return page(db, orgId, input, match);
  const dir = input.sortOrder === 'asc' ? sql`ASC` : sql`DESC`;
  const { limit, offset } = pageWindow(input);
  const items = await db
    .select(columns)
    .from(messages)
    .where(where)
    .orderBy(sql`(${messages.createdAt} + interval '0 seconds') ${dir}`, sql`${messages.id} ${dir}`)
    .limit(limit)
    .offset(offset);
  return { items };
}

/** Live messages with `snoozedUntil` set (index `messages_snoozed`). */
export async function countSnoozed(db: DbOrTx, orgId: string): Promise<number> {
  const [row] = await db.select({ n: count() }).from(messages).where(messageRows.live(orgId, isNotNull(messages.snoozedUntil)));
  return Number(row?.n ?? 0);
}

type DateField = 'timestamp' | 'readAt' | 'archivedAt' | 'snoozedUntil';
/** A validated create body: dates still as ISO strings. */
export type MessageValues = Omit<
  typeof messages.$inferInsert,
  'id' | 'organizationId' | 'createdAt' | 'updatedAt' | 'deletedAt' | 'searchVector' | DateField
> & { [K in DateField]?: string | null | undefined };

export async function createMessage(db: DbOrTx, orgId: string, values: MessageValues): Promise<MessageRow> {
  const { timestamp, readAt, archivedAt, snoozedUntil, ...rest } = values;
  const [row] = await db
    .insert(messages)
    .values({
      ...rest,
      organizationId: orgId,
      // Absent timestamp: the column default (now).
      ...(timestamp ? { timestamp: new Date(timestamp) } : {}),
      readAt: toDate(readAt),
      archivedAt: toDate(archivedAt),
      snoozedUntil: toDate(snoozedUntil),
    })
    .returning(columns);
  return row!;
}

export type MessageFlags = { [K in 'readAt' | 'archivedAt' | 'snoozedUntil']?: string | null | undefined };

/** Sets (date-time), clears (null) or keeps (absent) each flag; 404 unless the message is live. */
export async function updateMessageFlags(db: DbOrTx, orgId: string, id: string, flags: MessageFlags): Promise<MessageRow> {
  const patch = definedOnly({ readAt: toDate(flags.readAt), archivedAt: toDate(flags.archivedAt), snoozedUntil: toDate(flags.snoozedUntil) });
  if (Object.keys(patch).length === 0) return getMessage(db, orgId, id);
  const [row] = await db
    .update(messages)
    .set({ ...patch, updatedAt: sql`now()` })
    .where(byId(orgId, id))
    .returning(columns);
  if (!row) throw notFound('Message');
  return row;
}

export async function deleteMessage(db: DbOrTx, orgId: string, id: string): Promise<MessageRow> {
  const [row] = await db
    .update(messages)
    .set({ deletedAt: sql`now()`, updatedAt: sql`now()` })
    .where(byId(orgId, id))
    .returning(columns);
  if (!row) throw notFound('Message');
  return row;
}

import { createHash, randomUUID } from 'node:crypto';
import { and, count, eq, getTableColumns, inArray, isNotNull, isNull, sql, type SQL } from 'drizzle-orm';
import type { z } from 'zod';
import { notFound } from '../../core/errors.js';
import { pageOrder, pageWindow, type Page, type PageInput } from '../../core/pagination.js';
import { toDate } from '../../core/schemas.js';
import type { DbOrTx } from '../../db/client.js';
import { attachmentContents, contactEmails, messageAttachments, messages } from '../../db/schema.js';
import { jsonRow } from '../../db/json.js';
import { definedOnly, scopedRepository, softDeleteLive } from '../../db/scoped.js';
import { placeholder, writeShapes, Write } from '../../db/write.js';
import type { Message } from './messages.schemas.js';
import { LRUCache } from 'lru-cache';

export const messageRows = scopedRepository(messages, 'Message');

/**
 * Every column but `search_vector`: it is an index input, not part of the resource, and as large as
 * the text itself, so no query reads it back.
 */
const { searchVector: _searchVector, ...columns } = getTableColumns(messages);
/** The columns a write of a message returns (every column but `search_vector`). */
export const messageColumns = columns;

export type MessageRow = Omit<typeof messages.$inferSelect, 'searchVector'>;
export type Direction = 'incoming' | 'outgoing';

const byId = (orgId: string, id: string) => messageRows.live(orgId, eq(messages.id, id));

/** A message as the JSON document of the API, built by PostgreSQL (no per-row mapping in Node). */
export type MessageJson = z.input<typeof Message>;
export const messageJson = sql<MessageJson>`${jsonRow(messages, {}, ['searchVector'])}`;

/**
 * The hot reads are prepared statements (planned once per connection): get, and the list pages of each
 * direction filter and sort order. Prepared once per database handle, named so node-postgres keeps the plans.
 */
const org = sql.placeholder('orgId');
type ListKey = `${'all' | Direction}_${'asc' | 'desc'}_${'any' | 'unread'}`;
const prepareGet = (db: DbOrTx) =>
  db
    .select({ m: messageJson })
    .from(messages)
    .where(and(eq(messages.organizationId, org), isNull(messages.deletedAt), eq(messages.id, sql.placeholder('id'))))
    .limit(1)
    .prepare('messages_get');
const prepareList = (db: DbOrTx, key: ListKey) => {
  const [filter, dir, read] = key.split('_') as ['all' | Direction, 'asc' | 'desc', 'any' | 'unread'];
  return db
    .select({ m: messageJson })
    .from(messages)
    .where(
      and(
        eq(messages.organizationId, org),
        isNull(messages.deletedAt),
        filter === 'all' ? undefined : eq(messages.direction, filter),
        read === 'unread' ? isNull(messages.readAt) : undefined,
      ),
    )
    .orderBy(...pageOrder({ sortOrder: dir, limit: 1, offset: 0 }, messages.createdAt, messages.id))
    .limit(sql.placeholder('limit') as unknown as number)
    .offset(sql.placeholder('offset') as unknown as number)
    .prepare(`messages_list_${key}`);
};
type Statements = { get: ReturnType<typeof prepareGet> } & Partial<Record<ListKey, ReturnType<typeof prepareList>>> &
  Partial<Record<`window_${'asc' | 'desc'}`, ReturnType<typeof prepareWindow>>> &
  Partial<Record<`${MatchesPlan}_${'asc' | 'desc'}`, ReturnType<typeof prepareMatches>>>;
const prepared = new WeakMap<DbOrTx, Statements>();
function statements(db: DbOrTx): Statements {
  let found = prepared.get(db);
  if (!found) prepared.set(db, (found = { get: prepareGet(db) }));
  return found;
}

export async function getMessage(db: DbOrTx, orgId: string, id: string): Promise<MessageJson> {
  const [row] = await statements(db).get.execute({ orgId, id });
  if (!row) throw notFound('Message');
  return row.m;
}

/** All directions (index `messages_list`) or one (index `messages_direction_list`). No total: org-wide. */
export async function listMessages(db: DbOrTx, orgId: string, input: PageInput & { unread?: boolean | undefined }, direction?: Direction): Promise<Page<MessageJson>> {
  const key: ListKey = `${direction ?? 'all'}_${input.sortOrder}_${input.unread ? 'unread' : 'any'}`;
  const all = statements(db);
  const statement = (all[key] ??= prepareList(db, key));
  const rows = await statement.execute({ orgId, ...pageWindow(input) });
  return { items: rows.map((r) => r.m) };
}

/** The full-text condition of a search, on a row's `search_vector` ('simple' config: case-folded, unstemmed). */
const matches = (vector: unknown, text: unknown) => sql`${vector} @@ websearch_to_tsquery('simple', ${text})`;

/**
 * A value of a prepared search step that the planner does not see: a one-row subquery (`(SELECT $n::type)`),
 * evaluated once when the statement runs. For the window step and the `rare` step the best plan is the same
 * whatever the words, the organization and the page (a walk of the creation-date index; one scan of the
 * full-text index, which is keyed by organization too); with the values in sight PostgreSQL estimated each
 * call's plan cheaper than the generic one and planned every call again (no generic plan in
 * `pg_prepared_statements`), reading the full-text statistics each time: on a million messages that planning
 * took longer than the search (0.6 ms against 0.3). Hidden, each keeps one generic plan after five calls.
 */
const unseen = (name: string, type: 'int' | 'uuid' | 'text') => sql`(SELECT ${sql.placeholder(name)}::${sql.raw(type)})`;

/** How many of the newest (or oldest) messages a search reads per row of the page before it changes plan. */
const WINDOW_PER_ROW = 10;
const MIN_WINDOW = 300;
/** Below this many matches in all, the matches are sorted; from it on, the creation-date index is walked. */
const FEW_MATCHES = 2000;

/**
 * Step 1 of a search, prepared (planned once per connection): its plan is the same for every word, a walk
 * of the creation-date index over at most `window` rows. The later steps are planned per search.
 */
const prepareWindow = (db: DbOrTx, dir: 'asc' | 'desc') => {
  const order = dir === 'asc' ? sql`ASC` : sql`DESC`;
  const recent = db
    .select({ id: messages.id, createdAt: messages.createdAt, vector: messages.searchVector })
    .from(messages)
    .where(and(sql`${messages.organizationId} = ${unseen('orgId', 'uuid')}`, isNull(messages.deletedAt)))
    .orderBy(...pageOrder({ sortOrder: dir, limit: 1, offset: 0 }, messages.createdAt, messages.id))
    .limit(unseen('window', 'int') as unknown as number)
    .as('recent');
  const hits = db
    .select({ id: recent.id, createdAt: recent.createdAt })
    .from(recent)
    .where(matches(recent.vector, unseen('text', 'text')))
    .orderBy(sql`${recent.createdAt} ${order}`, sql`${recent.id} ${order}`)
    .limit(unseen('limit', 'int') as unknown as number)
    .offset(unseen('offset', 'int') as unknown as number)
    .as('hits');
  return db
    .select({ m: messageJson })
    .from(messages)
    .innerJoin(hits, eq(messages.id, hits.id))
    .orderBy(sql`${hits.createdAt} ${order}`, sql`${hits.id} ${order}`)
    .prepare(`messages_search_window_${dir}`);
};

/**
 * Which plan answered a search: the window of newest rows, all matches sorted (found with one plan for every
 * word, `rare`, or with a plan made for the words, `few`), or the date-index walk.
 */
type SearchPlan = 'window' | MatchesPlan | 'walk';
type MatchesPlan = 'rare' | 'few';

/**
 * The plan that answered a search of these words lately, per organization and order (a bounded map, entries
 * trusted for a minute). It only decides which question is asked first: every plan checks that its answer
 * is complete and hands over to the next when it is not, so a stale entry costs time, never a wrong page.
 */
const PLAN_TTL_MS = 60_000;
const PLAN_MEMORY = 2000;
const planMemory = new LRUCache<string, SearchPlan>({ max: PLAN_MEMORY, ttl: PLAN_TTL_MS });

/**
 * Full-text search over the stored `search_vector` (text, summary, sender, recipient; 'simple' config, so
 * case-folded and unstemmed), organization-scoped and live rows only. The first two steps are prepared
 * (their plans do not depend on the words); the walk is planned with its own words.
 *
 * The planner cannot know how often a word it has no statistics for occurs, and when it guesses "often"
 * it walks the whole organization newest-first for a word that is rare. So the plan is chosen from what
 * the data says, cheapest question first (or the plan that answered these words last, see planMemory):
 * 1. `window`: read a small window of the newest messages in index order and keep the matches. When that
 *    fills the page it is the right page (every match outside the window is older): common words.
 * 2. `rare` or `few`: one statement takes the matches, capped at FEW_MATCHES, and answers their count with
 *    the sorted page. Under the cap the page is right: rare and absent words, one round trip. The ORDER BY
 *    runs over the capped set, so the planner cannot choose the date-index walk for a rare word. When the
 *    window held no match at all the word is most likely rare or absent: `rare` asks with its one plan, a
 *    scan of the full-text index (planned once; the scan reads every match, so a word that is common only in
 *    older messages costs one long scan before the walk takes over, and is remembered). When the window held
 *    some matches, too few for the page, the word may be common further back: `few` is planned with the
 *    words' statistics, so that for a common word it reads rows only until the cap is reached.
 * 3. `walk`: at or over the cap, walk the creation-date index: at that density a page is only a few rows away.
 */
export async function searchMessages(db: DbOrTx, orgId: string, text: string, input: PageInput): Promise<Page<MessageJson>> {
  const { limit, offset } = pageWindow(input);
  const key = `${orgId}\u0000${input.sortOrder}\u0000${text}`;
  const plan = planMemory.get(key);

  let matchesPlan: MatchesPlan = plan === 'rare' ? 'rare' : 'few';
  if (plan === undefined || plan === 'window') {
    const window = statements(db)[`window_${input.sortOrder}`] ??= prepareWindow(db, input.sortOrder);
    const fromWindow = await window.execute({ orgId, text, window: Math.max(MIN_WINDOW, (offset + limit) * WINDOW_PER_ROW), limit, offset });
    if (fromWindow.length === limit) {
      planMemory.set(key, 'window');
      return { items: fromWindow.map((r) => r.m) };
    }
    // On the first page an empty answer means that the window held no match at all (on a later page it may have held a few).
    matchesPlan = offset === 0 && fromWindow.length === 0 ? 'rare' : 'few';
  }

  if (plan !== 'walk') {
    const found = await allMatches(db, matchesPlan, orgId, text, input.sortOrder, limit, offset);
    if (found) {
      planMemory.set(key, matchesPlan);
      return found;
    }
  }
  planMemory.set(key, 'walk');
  const where = messageRows.live(orgId, matches(messages.searchVector, text));
  const rows = await db.select({ m: messageJson }).from(messages).where(where).orderBy(...pageOrder(input, messages.createdAt, messages.id)).limit(limit).offset(offset);
  return { items: rows.map((r) => r.m) };
}

/**
 * Step 2, prepared: the matches (at most FEW_MATCHES, in no order), their count, and the sorted page, in one
 * statement. The count rides on a one-row LEFT JOIN, so that an empty page still says how many matched.
 * `rare` hides its values (`unseen`): one plan, a scan of the full-text index. `few` shows them: planned
 * per call with the words' statistics.
 */
const prepareMatches = (db: DbOrTx, kind: MatchesPlan, sortOrder: 'asc' | 'desc') => {
  const dir = sortOrder === 'asc' ? sql`ASC` : sql`DESC`;
  const value = kind === 'rare' ? unseen : (name: string) => sql.placeholder(name);
  const hits = db.$with('hits').as(
    db
      .select({ id: messages.id, createdAt: messages.createdAt })
      .from(messages)
      .where(and(sql`${messages.organizationId} = ${value('orgId', 'uuid')}`, isNull(messages.deletedAt), matches(messages.searchVector, value('text', 'text'))))
      .limit(FEW_MATCHES),
  );
  const page = db.$with('page').as(
    db
      .select({ id: hits.id, createdAt: hits.createdAt })
      .from(hits)
      .orderBy(sql`${hits.createdAt} ${dir}`, sql`${hits.id} ${dir}`)
      .limit(value('limit', 'int') as unknown as number)
      .offset(value('offset', 'int') as unknown as number),
  );
  return db
    .with(hits, page)
    .select({ n: sql<number>`(SELECT count(*) FROM ${hits})::int`, m: sql<MessageJson | null>`CASE WHEN ${messages.id} IS NULL THEN NULL ELSE ${messageJson} END` })
    .from(sql`(SELECT 1) AS one`)
    .leftJoin(page, sql`true`)
    .leftJoin(messages, eq(messages.id, page.id))
    .orderBy(sql`${page.createdAt} ${dir}`, sql`${page.id} ${dir}`)
    .prepare(`messages_search_${kind}_${sortOrder}`);
};

/** The page from all matches when there are fewer than FEW_MATCHES; undefined when there are as many or more. */
async function allMatches(db: DbOrTx, kind: MatchesPlan, orgId: string, text: string, sortOrder: PageInput['sortOrder'], limit: number, offset: number): Promise<Page<MessageJson> | undefined> {
  const statement = statements(db)[`${kind}_${sortOrder}`] ??= prepareMatches(db, kind, sortOrder);
  const rows = await statement.execute({ orgId, text, limit, offset });
  if ((rows[0]?.n ?? 0) >= FEW_MATCHES) return undefined;
  return { items: rows.flatMap((r) => (r.m === null ? [] : [r.m])) };
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

/** The placeholders every statement below shares: the organization and the message. */
const orgParam = placeholder('orgId');
const idParam = placeholder('id');

/**
 * The writes are `Write`s (one statement each, composed with their events by the operation runner), built
 * once per shape of input (which fields are given, which are null) with placeholders for the values.
 */
const createShapes = writeShapes<Omit<typeof messages.$inferInsert, 'organizationId'>>((fields, db) => ({
  statement: db
    .insert(messages)
    .values({ ...fields, organizationId: orgParam })
    .returning(columns)
    .getSQL(),
  table: messages,
  answer: messageJson,
  label: 'Message',
}));

const updateShapes = writeShapes<Partial<typeof messages.$inferInsert>>((fields, db) => ({
  statement: db
    .update(messages)
    .set({ ...fields, updatedAt: sql`now()` })
    .where(byId(orgParam, idParam))
    .returning(columns)
    .getSQL(),
  table: messages,
  answer: messageJson,
  label: 'Message',
}));

const deleteShapes = writeShapes<Record<string, never>>((_fields, db) => ({
  statement: softDeleteLive(db, messages, orgParam, eq(messages.id, idParam)).returning(columns).getSQL(),
  table: messages,
  answer: messageJson,
  label: 'Message',
}));

/** One statement: the insert, answering the message as the API shows it. */
export function createMessage(db: DbOrTx, orgId: string, values: MessageValues): Write<MessageJson> {
  const { timestamp, readAt, archivedAt, snoozedUntil, ...rest } = values;
  const { spec, values: filled } = createShapes(db, {
    ...rest,
    // Absent timestamp: the column default (now).
    ...(timestamp ? { timestamp: new Date(timestamp) } : {}),
    readAt: toDate(readAt),
    archivedAt: toDate(archivedAt),
    snoozedUntil: toDate(snoozedUntil),
  });
  return new Write(db, spec, { ...filled, orgId });
}

/** A message a sending operation queues: its values; `phoneNumberId` may be a subquery evaluated in the insert. */
export type OutgoingValues = Omit<typeof messages.$inferInsert, 'id' | 'organizationId' | 'createdAt' | 'updatedAt' | 'deletedAt' | 'searchVector' | 'phoneNumberId'> & { phoneNumberId: string | null | SQL };

/**
 * Inserts several messages in one statement (a send to many recipients); answers them as the API shows
 * them, in the order given, each with the id it was written under.
 */
export async function insertMessages(db: DbOrTx, orgId: string, values: OutgoingValues[]): Promise<{ id: string; data: MessageJson }[]> {
  if (values.length === 0) return [];
  const ids = values.map(() => randomUUID());
  const rows = await db
    .insert(messages)
    .values(values.map((v, i) => ({ ...v, id: ids[i]!, organizationId: orgId })))
    .returning({ id: messages.id, data: messageJson });
  const byId = new Map(rows.map((r) => [r.id, r.data]));
  return ids.map((id) => ({ id, data: byId.get(id)! }));
}

export type MessageFlags = { [K in 'readAt' | 'archivedAt' | 'snoozedUntil' | 'importance' | 'urgency' | 'status' | 'action']?: string | null | undefined };

/**
 * Sets (date-time), clears (null) or keeps (absent) each flag; 404 unless the message is live. One
 * statement; with no flag given, the message as it is.
 */
export function updateMessageFlags(db: DbOrTx, orgId: string, id: string, flags: MessageFlags): Promise<MessageJson> {
  const { readAt, archivedAt, snoozedUntil, ...triage } = flags;
  const patch = definedOnly({ readAt: toDate(readAt), archivedAt: toDate(archivedAt), snoozedUntil: toDate(snoozedUntil), ...triage });
  if (Object.keys(patch).length === 0) return getMessage(db, orgId, id);
  const { spec, values: filled } = updateShapes(db, patch);
  return new Write(db, spec, { ...filled, orgId, id });
}

/** One statement: the soft delete. */
export function deleteMessage(db: DbOrTx, orgId: string, id: string): Write<MessageJson> {
  return new Write(db, deleteShapes(db, {}).spec, { orgId, id });
}

// ---------------------------------------------------------------- received email

/** A received message's values (`receiveEmail`): dates as ISO strings, like a create body. */
export type ReceivedValues = MessageValues & { channelId: string };

/**
 * Inserts a received message unless the channel already holds its Message-ID (the partial unique index
 * `messages_channel_provider_id` decides, also between concurrent deliveries); undefined when it does.
 */
export async function insertReceivedMessage(db: DbOrTx, orgId: string, values: ReceivedValues): Promise<MessageRow | undefined> {
  const { timestamp, readAt: _r, archivedAt: _a, snoozedUntil: _s, ...rest } = values;
  const [row] = await db
    .insert(messages)
    .values({ ...rest, organizationId: orgId, ...(timestamp ? { timestamp: new Date(timestamp) } : {}) })
    .onConflictDoNothing({
      target: [messages.organizationId, messages.channelId, messages.providerMessageId],
      where: sql`${messages.providerMessageId} IS NOT NULL AND ${messages.deletedAt} IS NULL`,
    })
    .returning(columns);
  return row;
}

/** The live message of a channel with this Message-ID, with its content fingerprint (null on messages received before they were kept). */
export async function receivedOnChannel(db: DbOrTx, orgId: string, channelId: string, providerMessageId: string): Promise<{ id: string; contentHash: string | null } | undefined> {
  const [row] = await db
    .select({ id: messages.id, contentHash: sql<string | null>`${messages.metadata}->'email'->>'contentHash'` })
    .from(messages)
    .where(messageRows.live(orgId, eq(messages.channelId, channelId), eq(messages.providerMessageId, providerMessageId)))
    .limit(1);
  return row;
}

/** The organization's contact email matching an address (case-insensitive), oldest first; null when none. */
export async function contactEmailIdFor(db: DbOrTx, orgId: string, email: string): Promise<string | null> {
  const [row] = await db
    .select({ id: contactEmails.id })
    .from(contactEmails)
    .where(and(eq(contactEmails.organizationId, orgId), isNull(contactEmails.deletedAt), eq(sql`lower(${contactEmails.email})`, email.toLowerCase())))
    .orderBy(contactEmails.createdAt, contactEmails.id)
    .limit(1);
  return row?.id ?? null;
}

export interface NewAttachment {
  id: string;
  filename: string | null;
  contentType: string;
  size: number;
  contentId: string | null;
  content: Buffer;
}

const sha256Hex = (content: Buffer) => createHash('sha256').update(content).digest('hex');

/**
 * Stores a message's attachments: their bytes once per organization and content (`attachment_contents`; the
 * same file received on several channels, forwarded or sent again is kept once), and a row per attachment.
 */
export async function insertAttachments(db: DbOrTx, orgId: string, messageId: string, list: NewAttachment[]): Promise<void> {
  if (list.length === 0) return;
  const rows = list.map(({ content, ...a }) => ({ ...a, organizationId: orgId, messageId, contentSha256: sha256Hex(content), content }));
  const contents = new Map(rows.map((r) => [r.contentSha256, { organizationId: orgId, sha256: r.contentSha256, size: r.content.length, content: r.content }]));
  // Bytes the organization holds already are not sent again (one mail for many channels: once, not once per channel).
  const held = await db
    .select({ sha256: attachmentContents.sha256 })
    .from(attachmentContents)
    .where(and(eq(attachmentContents.organizationId, orgId), inArray(attachmentContents.sha256, [...contents.keys()])));
  for (const h of held) contents.delete(h.sha256);
  if (contents.size > 0) await db.insert(attachmentContents).values([...contents.values()]).onConflictDoNothing();
  await db.insert(messageAttachments).values(rows.map(({ content: _content, ...r }) => r));
}

/** Copies an attachment of the organization onto another message (a forward, a send): a new row naming the same bytes. */
export async function copyAttachment(db: DbOrTx, orgId: string, messageId: string, copy: { id: string; copyOf: string }): Promise<void> {
  await db.execute(sql`
    INSERT INTO ${messageAttachments} (id, organization_id, message_id, filename, content_type, size, content_id, content_sha256)
    SELECT ${copy.id}, organization_id, ${messageId}, filename, content_type, size, content_id, content_sha256
    FROM ${messageAttachments} WHERE id = ${copy.copyOf} AND organization_id = ${orgId}`);
}

/** The bytes of a message's attachments, by id (the mail sender reads them when it sends). */
export async function attachmentBytes(db: DbOrTx, messageId: string, ids: string[]): Promise<Map<string, Buffer>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select({ id: messageAttachments.id, content: attachmentContents.content })
    .from(messageAttachments)
    .innerJoin(attachmentContents, and(eq(attachmentContents.organizationId, messageAttachments.organizationId), eq(attachmentContents.sha256, messageAttachments.contentSha256)))
    .where(and(eq(messageAttachments.messageId, messageId), inArray(messageAttachments.id, ids)));
  return new Map(rows.map((r) => [r.id, r.content]));
}

const attachmentInfo = {
  id: messageAttachments.id,
  messageId: messageAttachments.messageId,
  filename: messageAttachments.filename,
  contentType: messageAttachments.contentType,
  size: messageAttachments.size,
  contentId: messageAttachments.contentId,
  createdAt: messageAttachments.createdAt,
};

/** The kept attachments of a live message of the organization (404 when the message is not), without content. */
export async function listAttachments(db: DbOrTx, orgId: string, messageId: string, page: PageInput) {
  if (!(await messageRows.exists(db, orgId, messageId))) throw notFound('Message');
  const dir = page.sortOrder === 'desc' ? sql`DESC` : sql`ASC`;
  const items = await db
    .select(attachmentInfo)
    .from(messageAttachments)
    .where(and(eq(messageAttachments.organizationId, orgId), eq(messageAttachments.messageId, messageId)))
    .orderBy(sql`${messageAttachments.createdAt} ${dir}`, sql`${messageAttachments.id} ${dir}`)
    .limit(pageWindow(page).limit)
    .offset(pageWindow(page).offset);
  return { items };
}

/** An attachment of a live message of the organization, content as base64; 404 otherwise. */
export async function getAttachment(db: DbOrTx, orgId: string, messageId: string, attachmentId: string) {
  const [row] = await db
    .select({ ...attachmentInfo, content: sql<string>`encode(${attachmentContents.content}, 'base64')` })
    .from(messageAttachments)
    .innerJoin(messages, eq(messages.id, messageAttachments.messageId))
    .innerJoin(attachmentContents, and(eq(attachmentContents.organizationId, messageAttachments.organizationId), eq(attachmentContents.sha256, messageAttachments.contentSha256)))
    .where(and(eq(messageAttachments.organizationId, orgId), eq(messageAttachments.messageId, messageId), eq(messageAttachments.id, attachmentId), isNull(messages.deletedAt), eq(messages.organizationId, orgId)))
    .limit(1);
  if (!row) throw notFound('Attachment');
  // PostgreSQL's base64 breaks lines every 76 characters.
  return { ...row, content: row.content.replace(/\n/g, '') };
}

/** One thread, ordered by the messages' `timestamp` (then id): oldest first unless `desc` is asked. */
export async function listThread(db: DbOrTx, orgId: string, threadId: string, input: PageInput & { unread?: boolean | undefined; direction?: Direction | undefined }): Promise<Page<MessageJson>> {
  const dir = input.sortOrder === 'desc' ? sql`DESC` : sql`ASC`;
  const rows = await db
    .select({ m: messageJson })
    .from(messages)
    .where(
      messageRows.live(
        orgId,
        eq(messages.threadId, threadId),
        input.direction ? eq(messages.direction, input.direction) : undefined,
        input.unread ? isNull(messages.readAt) : undefined,
      ),
    )
    .orderBy(sql`${messages.timestamp} ${dir}`, sql`${messages.id} ${dir}`)
    .limit(pageWindow(input).limit)
    .offset(pageWindow(input).offset);
  return { items: rows.map((r) => r.m) };
}

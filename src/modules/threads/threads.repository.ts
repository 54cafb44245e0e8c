import { and, asc, desc, eq, isNull, sql, type SQL } from 'drizzle-orm';
import type { z } from 'zod';
import { fieldError, notFound } from '../../core/errors.js';
import type { Actor } from '../../core/operation.js';
import { pageWindow, type Page, type PageInput } from '../../core/pagination.js';
import type { JsonText } from '../../core/json-text.js';
import type { DbOrTx } from '../../db/client.js';
import { jsonColumns } from '../../db/json.js';
import { textRead } from '../../db/text-read.js';
import { apiKeys, automations, oauthClients, oauthGrants, threadNotes, threads, users } from '../../db/schema.js';
import { MAX_TAGS, type Note, type ThreadListInput, type ThreadStatus, type ThreadUpdateInput } from './threads.schemas.js';

export type ThreadRow = typeof threads.$inferSelect;
type NoteJson = z.input<typeof Note>;

/** The columns of the API's thread, in its order. */
export const threadColumns = {
  id: threads.id,
  createdAt: threads.createdAt,
  updatedAt: threads.updatedAt,
  organizationId: threads.organizationId,
  channelId: threads.channelId,
  subject: threads.subject,
  contactId: threads.contactId,
  status: threads.status,
  assigneeId: threads.assigneeId,
  snoozedUntil: threads.snoozedUntil,
  tags: threads.tags,
  lastMessageAt: threads.lastMessageAt,
  lastIncomingAt: threads.lastIncomingAt,
  messageCount: threads.messageCount,
};

const byId = (orgId: string, id: string) => and(eq(threads.organizationId, orgId), eq(threads.id, id));

/** A thread as the API's JSON, built by PostgreSQL (the keys in `threadColumns`' order, the schema's). */
const threadJson = jsonColumns(threadColumns);

type ListInput = z.output<typeof ThreadListInput>;

/**
 * The statement of a page for one combination of filters and one order, each a prepared statement of its
 * own (`textRead`): the filters are conditions of the statement, not `x IS NULL OR` placeholders, so each
 * one's plan is the scan of its index ending in the page order (`threads_assignee` for a member's open
 * threads, `threads_status`, `threads_contact`, `threads_channel`, `threads_tags`, or `threads_list`
 * without a filter). At most 96 of them, made when first asked for.
 */
const listStatements = new Map<string, ReturnType<typeof textRead>>();
function listStatement(input: ListInput) {
  const assignee = input.assigneeId === 'none' ? 'none' : input.assigneeId ? 'assignee' : '';
  const parts = [input.sortOrder, input.status && 'status', assignee, input.tag && 'tag', input.channelId && 'channel', input.contactId && 'contact'].filter(Boolean);
  const key = parts.join('_');
  let statement = listStatements.get(key);
  if (!statement) {
    const dir = input.sortOrder === 'asc' ? asc : desc;
    const where = and(
      eq(threads.organizationId, sql.placeholder('orgId')),
      input.status ? eq(threads.status, sql.placeholder('status')) : undefined,
      assignee === 'none' ? isNull(threads.assigneeId) : assignee ? eq(threads.assigneeId, sql.placeholder('assigneeId')) : undefined,
      input.tag ? sql`${threads.tags} @> ARRAY[${sql.placeholder('tag')}]::text[]` : undefined,
      input.channelId ? eq(threads.channelId, sql.placeholder('channelId')) : undefined,
      input.contactId ? eq(threads.contactId, sql.placeholder('contactId')) : undefined,
    );
    statement = textRead(`threads_list_${key}_json`, (db) =>
      db
        .select({ thread: sql<string>`${threadJson}::text` })
        .from(threads)
        .where(where)
        .orderBy(dir(threads.lastMessageAt), dir(threads.id))
        .limit(sql.placeholder('limit') as unknown as number)
        .offset(sql.placeholder('offset') as unknown as number)
        .getSQL(),
    );
    listStatements.set(key, statement);
  }
  return statement;
}

/**
 * One page of the organization's threads, newest `lastMessageAt` first, as the JSON text PostgreSQL built
 * (`JsonText`, written into the answer as it is): one prepared statement on the index of its filter.
 */
export async function listThreads(db: DbOrTx, orgId: string, input: ListInput): Promise<Page<JsonText>> {
  const { status, assigneeId, tag, channelId, contactId } = input;
  return { items: await listStatement(input)(db, { orgId, status, assigneeId, tag, channelId, contactId, ...pageWindow(input) }) };
}

export async function getThread(db: DbOrTx, orgId: string, id: string): Promise<ThreadRow> {
  const [row] = await db.select(threadColumns).from(threads).where(byId(orgId, id)).limit(1);
  if (!row) throw notFound('Thread');
  return row;
}

/** The people a thread can be assigned to: the organization's users who may sign in. */
export async function listMembers(db: DbOrTx, orgId: string, page: PageInput) {
  const { limit, offset } = pageWindow(page);
  const dir = page.sortOrder === 'asc' ? asc : desc;
  const items = await db
    .select({ id: users.id, name: users.name, email: users.email })
    .from(users)
    .where(memberWhere(orgId))
    .orderBy(dir(users.createdAt), dir(users.id))
    .limit(limit)
    .offset(offset);
  return { items };
}
const memberWhere = (orgId: string, ...extra: SQL[]) => and(eq(users.organizationId, orgId), isNull(users.deletedAt), isNull(users.disabledAt), ...extra);

/** A change of a field: what it was and what it is. */
export type Changes = Record<string, { before: unknown; after: unknown }>;
type Patch = Omit<z.output<typeof ThreadUpdateInput>, 'id'>;

/**
 * The rules of a PATCH: `snoozed` needs a future `snoozedUntil`; a `snoozedUntil` alone snoozes (null alone
 * ends a snooze); any other status clears it. The assignee must be a member of the organization.
 */
function nextState(current: ThreadRow, patch: Omit<Patch, 'assigneeEmail'>, now: Date): Partial<ThreadRow> {
  const next: Partial<ThreadRow> = {};
  let status: ThreadStatus | undefined = patch.status;
  if (status === undefined && patch.snoozedUntil !== undefined) status = patch.snoozedUntil === null ? (current.status === 'snoozed' ? 'open' : undefined) : 'snoozed';
  if (status === 'snoozed') {
    if (!patch.snoozedUntil) throw fieldError('snoozedUntil', 'Required with status "snoozed": when the snooze ends');
    const until = new Date(patch.snoozedUntil);
    if (until.getTime() <= now.getTime()) throw fieldError('snoozedUntil', 'Must be in the future');
    next.snoozedUntil = until;
  } else if (status !== undefined) {
    if (patch.snoozedUntil) throw fieldError('snoozedUntil', `Only with status "snoozed" (status "${status}" clears it)`);
    next.snoozedUntil = null;
  }
  if (status !== undefined) next.status = status;
  if (patch.assigneeId !== undefined) next.assigneeId = patch.assigneeId;
  if (patch.tags !== undefined && (patch.addTags !== undefined || patch.removeTags !== undefined)) {
    throw fieldError(patch.addTags !== undefined ? 'addTags' : 'removeTags', 'Give tags (the whole set) or addTags/removeTags, not both');
  }
  if (patch.tags !== undefined) next.tags = [...new Set(patch.tags)].sort();
  if (patch.addTags !== undefined || patch.removeTags !== undefined) {
    const removed = new Set(patch.removeTags ?? []);
    const tags = [...new Set([...current.tags, ...(patch.addTags ?? [])])].filter((t) => !removed.has(t)).sort();
    if (tags.length > MAX_TAGS) throw fieldError('addTags', `A thread holds at most ${MAX_TAGS} tags; it has ${current.tags.length}`);
    next.tags = tags;
  }
  return next;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Applies a PATCH in the caller's transaction: the thread is read under a row lock, the rules applied, and
 * only the fields that change are written. Answers the thread and its changes (before and after).
 */
export async function updateThread(db: DbOrTx, orgId: string, id: string, given: Patch, now = new Date()): Promise<{ thread: ThreadRow; changes: Changes }> {
  const { assigneeEmail, ...patch } = given;
  if (assigneeEmail !== undefined) {
    if (patch.assigneeId !== undefined) throw fieldError('assigneeEmail', 'Give assigneeId or assigneeEmail, not both');
    const [member] = await db.select({ id: users.id }).from(users).where(memberWhere(orgId, eq(sql`lower(${users.email})`, assigneeEmail.toLowerCase()))).limit(1);
    if (!member) throw fieldError('assigneeEmail', 'Not a member of the organization (see GET /members)');
    patch.assigneeId = member.id;
  } else if (patch.assigneeId) {
    const [member] = await db.select({ id: users.id }).from(users).where(memberWhere(orgId, eq(users.id, patch.assigneeId))).limit(1);
    if (!member) throw fieldError('assigneeId', 'Not a member of the organization (see GET /members)');
  }
  const [current] = await db.select(threadColumns).from(threads).where(byId(orgId, id)).for('update').limit(1);
  if (!current) throw notFound('Thread');
  const next = nextState(current, patch, now);
  const changes: Changes = {};
  for (const [key, after] of Object.entries(next)) {
    const before = current[key as keyof ThreadRow];
    if (!same(before, after)) changes[key] = { before, after };
  }
  if (Object.keys(changes).length === 0) return { thread: current, changes };
  const set = Object.fromEntries(Object.keys(changes).map((k) => [k, next[k as keyof ThreadRow]]));
  const [thread] = await db
    .update(threads)
    .set({ ...set, updatedAt: sql`now()` })
    .where(byId(orgId, id))
    .returning(threadColumns);
  return { thread: thread!, changes };
}

// ---------------------------------------------------------------- notes

const noteColumns = {
  id: threadNotes.id,
  threadId: threadNotes.threadId,
  text: threadNotes.text,
  authorType: threadNotes.authorType,
  authorId: threadNotes.authorId,
  authorName: threadNotes.authorName,
  authorClient: threadNotes.authorClient,
  createdAt: threadNotes.createdAt,
};
type NoteRow = { [K in keyof typeof noteColumns]: (typeof threadNotes.$inferSelect)[K] };

const toNote = (r: NoteRow): NoteJson => ({
  id: r.id,
  threadId: r.threadId,
  text: r.text,
  author: {
    type: r.authorType as 'user' | 'apiKey',
    id: r.authorId,
    name: r.authorName,
    ...(r.authorClient ? { client: r.authorClient } : {}),
  },
  createdAt: r.createdAt.toISOString(),
});

interface Author {
  type: 'user' | 'apiKey';
  id: string | null;
  name: string | null;
  client: string | null;
}

async function personOrKey(db: DbOrTx, orgId: string, id: string, type?: 'user' | 'api_key'): Promise<Omit<Author, 'client'> | undefined> {
  if (type !== 'api_key') {
    const [user] = await db.select({ name: users.name, email: users.email }).from(users).where(and(eq(users.organizationId, orgId), eq(users.id, id))).limit(1);
    if (user) return { type: 'user', id, name: user.name ?? user.email };
  }
  if (type !== 'user') {
    const [key] = await db.select({ name: apiKeys.name, prefix: apiKeys.prefix }).from(apiKeys).where(and(eq(apiKeys.organizationId, orgId), eq(apiKeys.id, id))).limit(1);
    if (key) return { type: 'apiKey', id, name: key.name ?? key.prefix };
  }
  return undefined;
}

/**
 * Who writes a note: the person (and the assistant, the OAuth client, they write through), the API key,
 * or for an automation the person or key that set it up, with the automation named as the client.
 */
async function authorOf(db: DbOrTx, orgId: string, actor: Actor): Promise<Author> {
  if (actor.type === 'automation' && actor.id) {
    const [a] = await db.select({ name: automations.name, createdBy: automations.createdBy }).from(automations).where(eq(automations.id, actor.id)).limit(1);
    const owner = a ? await personOrKey(db, orgId, a.createdBy) : undefined;
    return { ...(owner ?? { type: 'apiKey', id: null, name: null }), client: a ? `automation: ${a.name}` : 'automation' };
  }
  const found = actor.id && (actor.type === 'user' || actor.type === 'api_key') ? await personOrKey(db, orgId, actor.id, actor.type) : undefined;
  let client: string | null = null;
  if (actor.grantId) {
    const [g] = await db
      .select({ name: oauthClients.clientName, id: oauthClients.id })
      .from(oauthGrants)
      .innerJoin(oauthClients, eq(oauthClients.id, oauthGrants.clientId))
      .where(eq(oauthGrants.id, actor.grantId))
      .limit(1);
    client = g ? (g.name ?? g.id) : null;
  }
  return { ...(found ?? { type: actor.type === 'user' ? 'user' : 'apiKey', id: actor.id, name: null }), client };
}

const threadExists = async (db: DbOrTx, orgId: string, id: string) => {
  const [row] = await db.select({ id: threads.id }).from(threads).where(byId(orgId, id)).limit(1);
  if (!row) throw notFound('Thread');
};

export async function addNote(db: DbOrTx, orgId: string, actor: Actor, threadId: string, text: string): Promise<NoteJson> {
  await threadExists(db, orgId, threadId);
  const author = await authorOf(db, orgId, actor);
  const [row] = await db
    .insert(threadNotes)
    .values({ organizationId: orgId, threadId, text, authorType: author.type, authorId: author.id, authorName: author.name, authorClient: author.client })
    .returning(noteColumns);
  return toNote(row!);
}

/** A thread's live notes, oldest first unless `desc` is asked. */
export async function listNotes(db: DbOrTx, orgId: string, threadId: string, page: PageInput): Promise<Page<NoteJson>> {
  await threadExists(db, orgId, threadId);
  const dir = page.sortOrder === 'asc' ? asc : desc;
  const { limit, offset } = pageWindow(page);
  const rows = await db
    .select(noteColumns)
    .from(threadNotes)
    .where(and(eq(threadNotes.organizationId, orgId), eq(threadNotes.threadId, threadId), isNull(threadNotes.deletedAt)))
    .orderBy(dir(threadNotes.createdAt), dir(threadNotes.id))
    .limit(limit)
    .offset(offset);
  return { items: rows.map(toNote) };
}

/** Soft-deletes a live note of the thread; 404 otherwise. */
export async function deleteNote(db: DbOrTx, orgId: string, threadId: string, noteId: string): Promise<NoteJson> {
  const [row] = await db
    .update(threadNotes)
    .set({ deletedAt: sql`now()`, updatedAt: sql`now()` })
    .where(and(eq(threadNotes.organizationId, orgId), eq(threadNotes.threadId, threadId), eq(threadNotes.id, noteId), isNull(threadNotes.deletedAt)))
    .returning(noteColumns);
  if (!row) throw notFound('Note');
  return toNote(row);
}

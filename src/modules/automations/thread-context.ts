import { and, eq, or } from 'drizzle-orm';
import type { DbOrTx } from '../../db/client.js';
import { threads } from '../../db/schema.js';
import { threadColumns } from '../threads/threads.repository.js';
import type { Condition } from './plan.js';

/**
 * What a condition reads of the thread of its event: `thread.tags` ("a message arrives in a thread tagged
 * vip"), and any other field of the thread (`thread.status`, `thread.assigneeId`). For `thread.updated` and
 * `thread.reopened` the event's record is the thread itself; for a message or a note it is the thread the
 * record's `threadId` names, read when the condition is tested (its tags now, not when the message came).
 * A record without a thread has no `thread`: a test on it holds only as `not_exists` (or a `not_*`).
 */

/** The events whose record is a thread (`id` is the thread's); the other thread and message events carry a `threadId`. */
export const THREAD_RECORD_EVENTS: ReadonlySet<string> = new Set(['thread.updated', 'thread.reopened']);

const THREAD_FIELD = /^thread(?:\.|$)/;

/** Whether the condition tests a field of the event's thread (`thread.…`). */
export function readsThread(c: Condition): boolean {
  if ('field' in c) return THREAD_FIELD.test(c.field);
  if ('all' in c) return c.all.some(readsThread);
  if ('any' in c) return c.any.some(readsThread);
  if ('not' in c) return readsThread(c.not);
  return false;
}

interface EventLike {
  organizationId: string;
  type: string;
  data: unknown;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The id of the thread the event's record belongs to, when it is read from the database; null otherwise. */
function storedThreadOf(event: EventLike): string | null {
  if (THREAD_RECORD_EVENTS.has(event.type) || !isRecord(event.data)) return null;
  return typeof event.data.threadId === 'string' ? event.data.threadId : null;
}

const key = (orgId: string, id: string) => `${orgId}\u0000${id}`;

/** The threads (as the API shows them) of the events' records, read in one query, by organization and id. */
export async function threadsOfEvents(db: DbOrTx, events: readonly EventLike[]): Promise<Map<string, Record<string, unknown>>> {
  const wanted = new Map<string, { orgId: string; id: string }>();
  for (const e of events) {
    const id = storedThreadOf(e);
    if (id) wanted.set(key(e.organizationId, id), { orgId: e.organizationId, id });
  }
  const found = new Map<string, Record<string, unknown>>();
  if (wanted.size === 0) return found;
  const rows = await db
    .select(threadColumns)
    .from(threads)
    .where(or(...[...wanted.values()].map((w) => and(eq(threads.organizationId, w.orgId), eq(threads.id, w.id)))));
  for (const row of rows) found.set(key(row.organizationId, row.id), JSON.parse(JSON.stringify(row)) as Record<string, unknown>);
  return found;
}

/** The record a condition is tested on: the event's, with its `thread` (from `threadsOfEvents`) when it has one. */
export function withThread(event: EventLike, found: ReadonlyMap<string, Record<string, unknown>>): unknown {
  if (!isRecord(event.data)) return event.data;
  if (THREAD_RECORD_EVENTS.has(event.type)) return { ...event.data, thread: event.data };
  const id = storedThreadOf(event);
  const thread = id ? found.get(key(event.organizationId, id)) : undefined;
  return thread ? { ...event.data, thread } : event.data;
}

import { and, eq, type SQL } from 'drizzle-orm';
import { notFound } from '../../core/errors.js';
import { pageOrder, pageWindow, type Page, type PageInput } from '../../core/pagination.js';
import type { DbOrTx } from '../../db/client.js';
import { events } from '../../db/schema.js';
import type { EventRecord } from './events.recorder.js';

/** The response shape of an event. */
export function toEvent(row: EventRecord) {
  return {
    id: row.id,
    type: row.type,
    organizationId: row.organizationId,
    resourceId: row.resourceId,
    occurredAt: row.occurredAt,
    actor: { type: row.actorType as 'api_key' | 'user' | 'automation' | 'system', id: row.actorId },
    data: row.data,
  };
}

/** Events are not soft-deleted: every row of the organization still within retention is visible. */
export async function listEvents(db: DbOrTx, orgId: string, page: PageInput & { type?: string | undefined }): Promise<Page<ReturnType<typeof toEvent>>> {
  const where: SQL = and(eq(events.organizationId, orgId), page.type ? eq(events.type, page.type) : undefined)!;
  const { limit, offset } = pageWindow(page);
  const rows = await db.select().from(events).where(where).orderBy(...pageOrder(page, events.occurredAt, events.id)).limit(limit).offset(offset);
  return { items: rows.map(toEvent) };
}

export async function getEvent(db: DbOrTx, orgId: string, id: string) {
  const [row] = await db.select().from(events).where(and(eq(events.organizationId, orgId), eq(events.id, id))).limit(1);
  if (!row) throw notFound('Event');
  return toEvent(row);
}

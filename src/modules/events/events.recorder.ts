import { sql } from 'drizzle-orm';
import type { Actor } from '../../core/operation.js';
import type { DbOrTx } from '../../db/client.js';
import type { events } from '../../db/schema.js';
import type { EventType } from './events.catalog.js';

export type { Actor };

export interface NewEvent {
  type: EventType;
  organizationId: string;
  resourceId: string | null;
  /** The record after the write. */
  data: unknown;
}

export type EventRecord = typeof events.$inferSelect;

/**
 * Records events in the caller's transaction, and queues their webhook deliveries (one per event and
 * enabled endpoint whose types match) in the same statement: a write that rolls back leaves neither, an
 * acknowledged write always has both, for one round trip. Dispatch to the automations happens later from
 * the table. Answers how many events were recorded.
 */
export async function recordEvents(tx: DbOrTx, actor: Actor, list: NewEvent[]): Promise<number> {
  if (list.length === 0) return 0;
  const rows = list.map((e) => ({ organization_id: e.organizationId, type: e.type, resource_id: e.resourceId, data: e.data }));
  const result = await tx.execute(sql`
    WITH ev AS (
      INSERT INTO events (organization_id, type, resource_id, data, actor_type, actor_id, depth)
      SELECT x.organization_id, x.type, x.resource_id, x.data, ${actor.type}, ${actor.id}::uuid, ${actor.depth}
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS x(organization_id uuid, type text, resource_id uuid, data jsonb)
      RETURNING id, organization_id, type
    ), queued AS (
      INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type)
      SELECT ev.organization_id, w.id, ev.id, ev.type
        FROM ev
        JOIN webhook_endpoints w ON w.organization_id = ev.organization_id AND w.enabled AND w.deleted_at IS NULL
                                AND (ev.type = ANY (w.event_types) OR '*' = ANY (w.event_types))
      ON CONFLICT DO NOTHING
    )
    SELECT count(*)::int AS n FROM ev`);
  return Number((result.rows[0] as { n: number } | undefined)?.n ?? 0);
}

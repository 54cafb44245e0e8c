import { sql, type Placeholder, type SQL } from 'drizzle-orm';
import type { Actor } from '../../core/operation.js';
import type { DbOrTx } from '../../db/client.js';
import type { events } from '../../db/schema.js';
import { TRIGGER_EVENT_SEPARATOR, type EventType } from './events.catalog.js';

export type { Actor };

export interface NewEvent {
  type: EventType;
  organizationId: string;
  resourceId: string | null;
  /** The record after the write. */
  data: unknown;
}

export type EventRecord = typeof events.$inferSelect;

/** The actor's fields as values or as placeholders (`sql.placeholder`) of a statement rendered once. */
export type ActorValues = { [K in keyof Actor]: Actor[K] | Placeholder | SQL };

/**
 * The events of a write as two CTEs of the write's statement: `ev` inserts one event per row of `source`
 * (columns `organization_id uuid, type text, resource_id uuid, data json`), `queued` queues their webhook
 * deliveries (one per event and enabled endpoint whose types match). Being part of the write's statement,
 * they are written exactly when the write is: an acknowledged write has both, a failed one neither.
 *
 * An event no automation of its organization listens for is recorded as dispatched already: the automation
 * engine has nothing to do with it, and it neither wakes the engine nor costs it an update. An automation
 * activated while the write runs is not seen by it, so its event comes before the automation in every
 * order the database could tell, as if the write had committed first. `committedColumns` (read with
 * `committedOf`) says what the statement queued.
 */
export function eventCtes(source: SQL, actor: ActorValues): SQL[] {
  return [
    sql`ev AS (
      INSERT INTO events (organization_id, type, resource_id, data, actor_type, actor_id, depth, dispatched_at)
      SELECT x.organization_id, x.type, x.resource_id, x.data, ${actor.type}, ${actor.id}::uuid, ${actor.depth}::int,
             CASE WHEN EXISTS (
               SELECT 1 FROM automations a
                WHERE a.organization_id = x.organization_id AND a.status = 'active' AND a.deleted_at IS NULL
                  AND a.trigger_type = 'event' AND (a.trigger_event = x.type OR a.trigger_event LIKE ${`%${TRIGGER_EVENT_SEPARATOR}%`})
             ) THEN NULL ELSE now() END
        FROM (${source}) AS x
      RETURNING id, organization_id, type, dispatched_at
    )`,
    sql`queued AS (
      INSERT INTO webhook_deliveries (organization_id, endpoint_id, event_id, event_type)
      SELECT ev.organization_id, w.id, ev.id, ev.type
        FROM ev
        JOIN webhook_endpoints w ON w.organization_id = ev.organization_id AND w.enabled AND w.deleted_at IS NULL
                                AND (ev.type = ANY (w.event_types) OR '*' = ANY (w.event_types))
      ON CONFLICT DO NOTHING
      RETURNING 1
    )`,
  ];
}

/** The columns that say what a statement with `eventCtes` recorded and queued (read them with `committedOf`). */
export const committedColumns: SQL[] = [
  sql`(SELECT count(*) FROM ev)::int AS n`,
  sql`(SELECT count(*) FROM ev WHERE dispatched_at IS NULL)::int AS undispatched`,
  sql`(SELECT count(*) FROM queued)::int AS deliveries`,
];

/** What a write recorded: its events, and the work they left for the background workers. */
export interface Recorded {
  events: number;
  /** Events left for the automation engine to dispatch. */
  undispatched: number;
  /** Webhook deliveries queued. */
  deliveries: number;
}

export const nothingRecorded: Recorded = { events: 0, undispatched: 0, deliveries: 0 };

/** The `committedColumns` of a statement's row. */
export const committedOf = (row: Record<string, unknown> | undefined): Recorded => ({
  events: Number(row?.n ?? 0),
  undispatched: Number(row?.undispatched ?? 0),
  deliveries: Number(row?.deliveries ?? 0),
});

/**
 * The events of a write whose record the statement itself answers (the CTE `answer` of a composed write,
 * `src/db/write.ts`): one event of each type (`typesJson`: a JSON array of `EventType`s) per answered
 * row, carrying the row as its data.
 */
export function answerEventsSource(orgId: string | Placeholder, typesJson: string | Placeholder): SQL {
  return sql`SELECT ${orgId}::uuid AS organization_id, t.type, answer.id AS resource_id, answer.data::json AS data
    FROM answer CROSS JOIN jsonb_array_elements_text(${typesJson}::jsonb) AS t(type)`;
}

/**
 * Records events in the caller's transaction, and queues their webhook deliveries in the same statement
 * (`eventCtes`): for writes whose handler ran statements of its own. Dispatch to the automations happens
 * later from the table. Answers what was recorded.
 */
export async function recordEvents(tx: DbOrTx, actor: Actor, list: NewEvent[]): Promise<Recorded> {
  if (list.length === 0) return nothingRecorded;
  const rows = list.map((e) => ({ organization_id: e.organizationId, type: e.type, resource_id: e.resourceId, data: e.data }));
  const source = sql`SELECT * FROM json_to_recordset(${JSON.stringify(rows)}::json) AS r(organization_id uuid, type text, resource_id uuid, data json)`;
  const result = await tx.execute(sql`WITH ${sql.join(eventCtes(source, actor), sql`, `)} SELECT ${sql.join(committedColumns, sql`, `)}`);
  return committedOf(result.rows[0] as Record<string, unknown> | undefined);
}

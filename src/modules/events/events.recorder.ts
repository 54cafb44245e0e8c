import type { DbOrTx } from '../../db/client.js';
import { events } from '../../db/schema.js';
import type { Actor } from '../../core/operation.js';
import { enqueueWebhookDeliveries } from '../webhooks/webhooks.repository.js';
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
 * Records events in the caller's transaction: a write that rolls back leaves none, an acknowledged
 * write always has its events, and its webhook deliveries queued. Dispatch to the automations happens
 * later from the table.
 */
export async function recordEvents(tx: DbOrTx, actor: Actor, list: NewEvent[]): Promise<EventRecord[]> {
  if (list.length === 0) return [];
  const rows = await tx
    .insert(events)
    .values(list.map((e) => ({ ...e, actorType: actor.type, actorId: actor.id, depth: actor.depth })))
    .returning();
  await enqueueWebhookDeliveries(
    tx,
    rows.map((r) => r.id),
  );
  return rows;
}

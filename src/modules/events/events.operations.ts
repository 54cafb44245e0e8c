import { defineOperation, type Operation } from '../../core/operation.js';
import { hasPermission, type Permission } from '../../core/permissions.js';
import { eventReadPermission } from './events.catalog.js';
import { getEvent, listEvents, type toEvent } from './events.repository.js';
import { Event, EventId, EventListInput } from './events.schemas.js';

/** The event as the caller may see it: its record only with the read permission of the record's area. */
function forCaller(event: ReturnType<typeof toEvent>, permissions: readonly string[]) {
  const needs: Permission = eventReadPermission(event.type);
  if (hasPermission(permissions, needs)) return { ...event, dataWithheld: null };
  return { ...event, data: null, dataWithheld: { reason: 'permission' as const, needs } };
}

const WITHHELD =
  "An event's `data` (the record) is shown only to a caller who may also read the record's area (e.g. `contacts:read` for `contact.*` events); otherwise the event is listed with `data: null` and `dataWithheld` naming the missing permission.";

export const eventsOperations: Operation[] = [
  defineOperation({
    id: 'events.list',
    kind: 'list',
    method: 'GET',
    path: '/events',
    summary: 'List events',
    description: [
      'Every successful write (REST, MCP, CLI or an automation) records one or more events in the same transaction: a write that rolls back leaves none. Newest first; `type` filters by event type. Events are kept for `EVENT_RETENTION_DAYS` (30 by default).',
      'The event catalog is the enum of `type`: `<resource>.created|updated|deleted` for every resource, plus `message.received` and `message.sent` beside `message.created` for a new incoming or outgoing message.',
      WITHHELD,
    ].join('\n\n'),
    input: EventListInput,
    output: Event,
    handler: async (input, ctx) => {
      const page = await listEvents(ctx.db, ctx.orgId, input);
      return { ...page, items: page.items.map((e) => forCaller(e, ctx.permissions)) };
    },
  }),
  defineOperation({
    id: 'events.get',
    method: 'GET',
    path: '/events/{id}',
    summary: 'Get an event',
    description: WITHHELD,
    input: EventId,
    output: Event,
    handler: async (input, ctx) => forCaller(await getEvent(ctx.db, ctx.orgId, input.id), ctx.permissions),
  }),
];

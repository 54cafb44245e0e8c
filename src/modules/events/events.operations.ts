import { defineOperation, type Operation } from '../../core/operation.js';
import { getEvent, listEvents } from './events.repository.js';
import { Event, EventId, EventListInput } from './events.schemas.js';

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
    ].join('\n\n'),
    input: EventListInput,
    output: Event,
    handler: (input, ctx) => listEvents(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'events.get',
    method: 'GET',
    path: '/events/{id}',
    summary: 'Get an event',
    input: EventId,
    output: Event,
    handler: (input, ctx) => getEvent(ctx.db, ctx.orgId, input.id),
  }),
];

import { z } from 'zod';
import { Pagination } from '../../core/pagination.js';
import { components, IdParam, JsonValue, Timestamp, Uuid } from '../../core/schemas.js';
import { EVENT_TYPES } from './events.catalog.js';

export const EventTypeSchema = z.enum(EVENT_TYPES).describe('Event type, a dotted resource.action name (see the event catalog)');

export const Event = z.object({
  id: Uuid.describe('Unique id of the event'),
  type: EventTypeSchema,
  organizationId: Uuid.describe('Organization the event belongs to'),
  resourceId: Uuid.nullable().describe('Id of the record the write touched'),
  occurredAt: Timestamp.describe('When the write committed (ISO 8601 UTC)'),
  actor: z
    .object({
      type: z.enum(['api_key', 'user', 'automation', 'system']).describe('What caused the write'),
      id: Uuid.nullable().describe('Id of the API key, user or automation'),
    })
    .describe('Who caused the write'),
  data: JsonValue.describe(
    "The record after the write, as the operation answered it; null when the caller may not read the event's area (see `dataWithheld`)",
  ),
  dataWithheld: z
    .object({
      reason: z.literal('permission').describe('Why `data` is null'),
      needs: z.string().describe('The permission that shows it, e.g. "contacts:read": the read permission of the area the record belongs to'),
    })
    .nullable()
    .describe("null when `data` is shown. Every event is listed to a caller with events:read, but its record only to a caller who may also read the record's area; otherwise `data` is null and this says which permission is missing"),
});

export const EventListInput = Pagination.extend({
  sortOrder: Pagination.shape.sortOrder.describe('Order by occurrence (ties broken by id); newest first by default'),
  type: EventTypeSchema.optional().describe('Only events of this type'),
}).strict();

export const EventIdParam = { id: IdParam('event') };
export const EventId = z.strictObject(EventIdParam);

// Named schemas of the OpenAPI document (components/schemas).
components.add(Event, { id: 'Event' });

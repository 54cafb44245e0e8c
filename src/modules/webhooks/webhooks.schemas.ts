import { z } from 'zod';
import { Pagination } from '../../core/pagination.js';
import { AuditFields, components, IdParam, JsonObject, NullableTimestamp, ShortText, Timestamp, Uuid } from '../../core/schemas.js';
import { EVENT_TYPES, WEBHOOK_TEST_EVENT } from '../events/events.catalog.js';

export const WebhookIdParam = { id: IdParam('webhook endpoint') };

/** Endpoints an organization may have (deleted ones do not count). */
export const MAX_WEBHOOKS_PER_ORGANIZATION = 20;

const EventTypes = z
  .array(z.enum([...EVENT_TYPES, '*']))
  .min(1)
  .max(EVENT_TYPES.length + 1)
  .describe('Event types to deliver, from the event catalog, or ["*"] for every type');

const Url = z
  .string()
  .max(2048)
  .describe('Where events are POSTed: an https URL on the public internet (http to a loopback host only when the server sets WEBHOOK_ALLOW_INSECURE=true)');

export const WebhookCreateInput = z.strictObject({
  url: Url,
  eventTypes: EventTypes.optional().describe('Event types to deliver, from the event catalog, or ["*"] (the default) for every type'),
  enabled: z.boolean().optional().describe('Whether events are delivered (default true)'),
  description: ShortText(1000).nullable().optional().describe('What the endpoint is for, up to 1,000 characters'),
  metadata: JsonObject.optional().describe('Free-form JSON object (default {})'),
});

export const WebhookUpdateInput = z.strictObject({
  ...WebhookIdParam,
  url: Url.optional(),
  eventTypes: EventTypes.optional(),
  enabled: z.boolean().optional().describe('true re-enables an endpoint (also one the service disabled, clearing `disabledReason`); false pauses deliveries'),
  description: ShortText(1000).nullable().optional(),
  metadata: JsonObject.optional().describe('Replaces the whole metadata object'),
});

export const WebhookId = z.strictObject(WebhookIdParam);

export const Webhook = z.object({
  ...AuditFields,
  url: z.string().describe('Where events are POSTed'),
  eventTypes: z.array(z.string()).describe('Event types delivered; ["*"] for all'),
  enabled: z.boolean().describe('Whether events are delivered'),
  disabledReason: z.string().nullable().describe('Why the service disabled the endpoint (deliveries failing for 3 days); null otherwise'),
  description: z.string().nullable(),
  metadata: JsonObject,
});

export const WebhookWithSecret = Webhook.extend({
  secret: z
    .string()
    .describe('The signing secret (`whsec_…`), shown only in this answer: verify the `webhook-signature` header with it (Standard Webhooks)'),
});

export const DELIVERY_STATUSES = ['pending', 'delivering', 'succeeded', 'failed'] as const;

export const WebhookDelivery = z.object({
  id: Uuid.describe('Id of the delivery'),
  webhookId: Uuid.describe('The endpoint'),
  eventId: Uuid.describe(`The event delivered (the \`webhook-id\` header); for "${WEBHOOK_TEST_EVENT}" an id made for the test`),
  eventType: z.string().describe('Type of the event'),
  status: z
    .enum(DELIVERY_STATUSES)
    .describe('pending (waiting for `nextAttemptAt`), delivering (an attempt is under way), succeeded, or failed (retries gave up after 3 days)'),
  attempt: z.number().int().describe('Attempts made so far'),
  statusCode: z.number().int().nullable().describe("HTTP status of the last attempt's answer; null when none came"),
  durationMs: z.number().int().nullable().describe('How long the last attempt took'),
  error: z.string().nullable().describe('Why the last attempt failed; null when it succeeded or none was made'),
  nextAttemptAt: NullableTimestamp.describe('When the next attempt is due; null once succeeded or failed'),
  lastAttemptAt: NullableTimestamp.describe('When the last attempt started'),
  deliveredAt: NullableTimestamp.describe('When a 2xx answer was received'),
  createdAt: Timestamp.describe('When the delivery was queued'),
});

export const DeliveryListInput = Pagination.extend({
  ...WebhookIdParam,
  sortOrder: Pagination.shape.sortOrder.describe('Order by queueing time; newest first by default'),
}).strict();

export const DeliveryRetryInput = z.strictObject({ ...WebhookIdParam, deliveryId: IdParam('delivery') });

// Named schemas of the OpenAPI document (components/schemas).
components.add(Webhook, { id: 'Webhook' });
components.add(WebhookWithSecret, { id: 'WebhookWithSecret' });
components.add(WebhookDelivery, { id: 'WebhookDelivery' });

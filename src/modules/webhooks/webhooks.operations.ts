import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { WEBHOOK_TEST_EVENT } from '../events/events.catalog.js';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listDeliveries,
  listWebhooks,
  retryDelivery,
  rotateWebhookSecret,
  sendTestEvent,
  updateWebhook,
} from './webhooks.repository.js';
import {
  DeliveryListInput,
  DeliveryRetryInput,
  MAX_WEBHOOKS_PER_ORGANIZATION,
  Webhook,
  WebhookCreateInput,
  WebhookDelivery,
  WebhookId,
  WebhookUpdateInput,
  WebhookWithSecret,
} from './webhooks.schemas.js';

const DELIVERY_RULES =
  'Each matching event is POSTed as JSON (`id`, `type`, `occurredAt`, `data`) and signed by the Standard Webhooks specification (`webhook-id`, `webhook-timestamp`, `webhook-signature` headers). A 2xx answer within 10 s counts as delivered; otherwise it is retried after about 5 s, 1 min, 10 min, 1 h, 6 h, then every 12 h (with jitter), for 3 days, after which the endpoint is disabled with a `disabledReason`. Delivery is at least once: receivers should ignore an event id they have already handled.';

const SUBSCRIBING =
  'An endpoint receives the records of the events it subscribes to, so the caller must hold the read permission of every area those events belong to (e.g. `contacts:read` for `contact.created`; every area for `["*"]`): 403 otherwise, naming the missing permissions.';

/** Events record the endpoint, never its secret: events are listed and delivered to other endpoints. */
const withoutSecret = ({ secret: _secret, ...endpoint }: Record<string, unknown>) => endpoint;

export const webhooksOperations: Operation[] = [
  defineOperation({
    id: 'webhooks.list',
    kind: 'list',
    method: 'GET',
    path: '/webhooks',
    summary: 'List webhook endpoints',
    input: Pagination.strict(),
    output: Webhook,
    handler: (input, ctx) => listWebhooks(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'webhooks.create',
    method: 'POST',
    event: 'webhook.created',
    // Subscribing to an area's events needs that area's read permission (the endpoint receives its records).
    errors: ['FORBIDDEN'],
    eventData: withoutSecret,
    path: '/webhooks',
    summary: 'Create a webhook endpoint',
    description: `${DELIVERY_RULES}\n\n${SUBSCRIBING}\n\nThe answer holds the signing secret; it is not shown again (rotate it to get a new one). An organization may have up to ${MAX_WEBHOOKS_PER_ORGANIZATION} endpoints.`,
    input: WebhookCreateInput,
    output: WebhookWithSecret,
    handler: (input, ctx) => createWebhook(ctx, input),
  }),
  defineOperation({
    id: 'webhooks.get',
    method: 'GET',
    path: '/webhooks/{id}',
    summary: 'Get a webhook endpoint',
    input: WebhookId,
    output: Webhook,
    handler: (input, ctx) => getWebhook(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'webhooks.update',
    method: 'PATCH',
    event: 'webhook.updated',
    errors: ['FORBIDDEN'],
    path: '/webhooks/{id}',
    summary: 'Update a webhook endpoint',
    description: `Absent fields stay as they are. \`enabled: true\` also re-enables an endpoint the service disabled after 3 days of failures.\n\n${SUBSCRIBING} This holds for a change of \`url\` or \`eventTypes\` (checked against the resulting subscription).`,
    input: WebhookUpdateInput,
    output: Webhook,
    handler: (input, ctx) => updateWebhook(ctx, input.id, input),
  }),
  defineOperation({
    id: 'webhooks.delete',
    method: 'DELETE',
    event: 'webhook.deleted',
    path: '/webhooks/{id}',
    summary: 'Delete a webhook endpoint',
    description: 'Soft delete: nothing more is delivered to it; its queued deliveries are given up.',
    input: WebhookId,
    output: Webhook,
    handler: (input, ctx) => deleteWebhook(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'webhooks.rotate_secret',
    method: 'POST',
    effects: { destructive: true },
    status: 200,
    event: 'webhook.updated',
    eventData: withoutSecret,
    path: '/webhooks/{id}/rotate-secret',
    summary: 'Rotate the signing secret of a webhook endpoint',
    description:
      'Answers the endpoint with its new secret. For 24 hours every delivery carries two signatures in `webhook-signature`, one with the new secret and one with the old, so a receiver can switch secrets without losing events.',
    input: WebhookId,
    output: WebhookWithSecret,
    handler: (input, ctx) => rotateWebhookSecret(ctx.db, ctx.orgId, input.id, new Date()),
  }),
  defineOperation({
    id: 'webhooks.test',
    method: 'POST',
    effects: { openWorld: true },
    status: 200,
    path: '/webhooks/{id}/test',
    summary: 'Send a test event to a webhook endpoint',
    description: `Queues a "${WEBHOOK_TEST_EVENT}" event for this endpoint alone (also when it is disabled) and answers the delivery; follow it in the deliveries list.`,
    input: WebhookId,
    output: WebhookDelivery,
    handler: (input, ctx) => sendTestEvent(ctx.db, ctx.orgId, input.id, new Date()),
  }),
  defineOperation({
    id: 'webhooks.list_deliveries',
    kind: 'list',
    method: 'GET',
    path: '/webhooks/{id}/deliveries',
    summary: 'List the deliveries of a webhook endpoint',
    description: 'One entry per event queued for the endpoint: its attempts so far, the last answer (status code, duration, error) and when the next attempt is due.',
    input: DeliveryListInput,
    output: WebhookDelivery,
    handler: (input, ctx) => listDeliveries(ctx.db, ctx.orgId, input.id, input),
  }),
  defineOperation({
    id: 'webhooks.retry_delivery',
    method: 'POST',
    effects: { openWorld: true },
    status: 200,
    path: '/webhooks/{id}/deliveries/{deliveryId}/retry',
    summary: 'Retry a delivery now',
    description: 'Queues the delivery for an attempt right away: a failed one, or a succeeded one to send it once more. 400 while an attempt is under way.',
    input: DeliveryRetryInput,
    output: WebhookDelivery,
    handler: (input, ctx) => retryDelivery(ctx.db, ctx.orgId, input.id, input.deliveryId, new Date()),
  }),
];

import type { Category } from '../../core/categories.js';

/**
 * The catalog of event types. Every successful write through the operation table records one or more
 * of these in the same transaction as the write; automations trigger on them and webhooks deliver them.
 * Names are dotted `resource.action`.
 */
const RESOURCES = [
  'contact',
  'contact.email',
  'contact.phone_number',
  'contact.address',
  'message',
  'customer',
  'customer.transaction',
  'business',
  'folder',
  'automation',
  'domain',
  'domain.registration',
  'webhook',
  'channel',
] as const;

export type EventResource = (typeof RESOURCES)[number];
export type EventAction = 'created' | 'updated' | 'deleted';

const CRUD = RESOURCES.flatMap((r) => (['created', 'updated', 'deleted'] as const).map((a) => `${r}.${a}` as const));

/**
 * Every event type, in catalog order. `message.received` accompanies `message.created`; `message.sent` too
 * for a message recorded as sent (POST /messages), or follows when the relay accepted an email the service
 * sent; `message.failed` when it could not be sent. `channel.error` when a working channel's mailbox, relay or provider
 * fails, `channel.recovered` when it works again.
 */
export const EVENT_TYPES = [
  ...CRUD,
  'message.received',
  'message.sent',
  'message.failed',
  'message.delivered',
  'message.read',
  'channel.opt_out.created',
  'channel.opt_out.deleted',
  'channel.error',
  'channel.recovered',
  'thread.updated',
  'thread.reopened',
  'thread.note_added',
  'thread.note_deleted',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const isEventType = (value: string): value is EventType => (EVENT_TYPES as readonly string[]).includes(value);

/** The area of every resource of the catalog (typed so that a new resource cannot be left out). */
type TopResource = EventResource extends infer R ? (R extends `${infer Top}.${string}` ? Top : R) : never;
const AREA_OF_RESOURCE: Record<TopResource, Category> & Record<string, Category | undefined> = {
  contact: 'contacts',
  message: 'messages',
  customer: 'customers',
  business: 'businesses',
  folder: 'folders',
  automation: 'automations',
  domain: 'domains',
  webhook: 'webhooks',
  channel: 'channels',
  thread: 'threads',
};

/**
 * The permission area of the records an event type carries (`contact.email.created` → `contacts`): an
 * event's `data` is shown, and delivered to a webhook endpoint, only with that area's read permission.
 */
export const eventArea = (type: string): Category | undefined => AREA_OF_RESOURCE[type.slice(0, type.indexOf('.'))];

/** The permission that shows an event's record: its area's read permission (`*` for a type of no known area). */
export const eventReadPermission = (type: string): `${Category}:read` | '*' => {
  const area = eventArea(type);
  return area ? `${area}:read` : '*';
};

/** One line per event type: what happened. Used by docs/automations.md, the OpenAPI document and the MCP tool docs. */
export function describeEventType(type: EventType): string {
  if (type === 'message.received') return 'A new incoming message was recorded (alongside message.created)';
  if (type === 'message.sent') return 'An outgoing message was sent: recorded as sent (alongside message.created), or an email accepted by its channel\'s relay';
  if (type === 'message.failed') return 'An outgoing email or text could not be sent or delivered (its statusReason says why)';
  if (type === 'message.delivered') return "An outgoing text was delivered to the phone (its provider's delivery report)";
  if (type === 'message.read') return 'An outgoing message was read by its recipient, on channels whose provider reports reads (a read report without a delivery report records message.delivered first)';
  if (type === 'channel.error') return 'A channel stopped working: its mailbox, relay or provider failed or refused its credentials (its lastError says what to fix); once per outage';
  if (type === 'thread.updated') return "A thread's status, snooze, assignee or tags changed (its `changes` hold the fields before and after)";
  if (type === 'thread.reopened') return 'A pending, snoozed or closed thread opened again (its `reason`: `message`, an incoming message; `snooze_ended`)';
  if (type === 'thread.note_added') return 'An internal note was added to a thread';
  if (type === 'thread.note_deleted') return 'An internal note was deleted';
  if (type === 'channel.recovered') return 'A channel in error works again (the side that failed succeeded)';
  const dot = type.lastIndexOf('.');
  const resource = type.slice(0, dot).replace('.', ' ').replace('_', ' ');
  return `A ${resource} was ${type.slice(dot + 1)}`;
}

/**
 * The pseudo event type of scheduled automations: it names no recorded event, only the tick of the
 * automation's `cronExpression`.
 */
export const SCHEDULE_TRIGGER = 'schedule.tick';

/**
 * The type of the event `POST /webhooks/{id}/test` sends: delivered to that one endpoint, never recorded
 * and never offered to automations.
 */
export const WEBHOOK_TEST_EVENT = 'webhook.test';

/**
 * A plan triggered by several event types (`contact.created,contact.updated`: "created or updated")
 * lists them in `triggerEvent`, separated by commas, without spaces.
 */
export const TRIGGER_EVENT_SEPARATOR = ',';

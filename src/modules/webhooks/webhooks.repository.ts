import { randomBytes, randomUUID } from 'node:crypto';
import { and, count, eq, inArray, sql } from 'drizzle-orm';
import { AppError, fieldError, notFound } from '../../core/errors.js';
import type { OperationContext } from '../../core/operation.js';
import type { Page, PageInput } from '../../core/pagination.js';
import type { DbOrTx } from '../../db/client.js';
import { webhookDeliveries, webhookEndpoints } from '../../db/schema.js';
import { listPage, live, scopedRepository } from '../../db/scoped.js';
import { hasPermission, type Permission } from '../../core/permissions.js';
import { EVENT_TYPES, eventReadPermission, WEBHOOK_TEST_EVENT } from '../events/events.catalog.js';
import { urlProblem } from '../../core/outbound.js';
import { MAX_WEBHOOKS_PER_ORGANIZATION } from './webhooks.schemas.js';

export const endpointRows = scopedRepository(webhookEndpoints, 'Webhook endpoint');
type EndpointRow = typeof webhookEndpoints.$inferSelect;
type DeliveryRow = typeof webhookDeliveries.$inferSelect;

/** How long a rotated-out secret keeps signing beside the new one. */
export const SECRET_OVERLAP_MS = 24 * 60 * 60 * 1000;

/**
 * Whether endpoints may be plain http on loopback and reach private addresses: set once from the
 * server's configuration (`WEBHOOK_ALLOW_INSECURE`), for development and tests only.
 */
const policy = { allowInsecure: false };
export const setWebhookPolicy = (p: { allowInsecure: boolean }) => void (policy.allowInsecure = p.allowInsecure);
export const webhookPolicy = (): Readonly<typeof policy> => policy;

/** A new Standard Webhooks secret: `whsec_` and 32 random bytes in base64. */
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

export function toWebhook(row: EndpointRow) {
  return {
    id: row.id,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    deletedAt: row.deletedAt,
    organizationId: row.organizationId,
    url: row.url,
    eventTypes: row.eventTypes,
    enabled: row.enabled,
    disabledReason: row.disabledReason,
    description: row.description,
    metadata: row.metadata,
  };
}

export function toDelivery(row: DeliveryRow) {
  const open = row.status === 'pending' || row.status === 'delivering';
  return {
    id: row.id,
    webhookId: row.endpointId,
    eventId: row.eventId,
    eventType: row.eventType,
    status: row.status,
    attempt: row.attempt,
    statusCode: row.lastStatusCode,
    durationMs: row.lastDurationMs,
    error: row.lastError,
    nextAttemptAt: open ? row.nextAttemptAt : null,
    lastAttemptAt: row.lastAttemptAt,
    deliveredAt: row.deliveredAt,
    createdAt: row.createdAt,
  };
}

/**
 * An endpoint receives the records its events carry, so whoever points an endpoint somewhere (creates it,
 * changes its URL or its event types) must be able to read every area it subscribes to (["*"]: all).
 */
function assertMayReceive(permissions: readonly string[], eventTypes: readonly string[]) {
  const types = eventTypes.includes('*') ? EVENT_TYPES : eventTypes;
  const needed = [...new Set(types.map((t): Permission => eventReadPermission(t)))];
  const missing = needed.filter((p) => !hasPermission(permissions, p));
  if (missing.length) {
    throw new AppError('FORBIDDEN', `An endpoint receives the records of the events it subscribes to: subscribing to ${eventTypes.join(', ')} needs ${missing.join(', ')}, which this caller does not hold`);
  }
}

function assertUrl(url: string) {
  const problem = urlProblem(url, policy.allowInsecure);
  if (problem) throw fieldError('url', problem);
}

export async function createWebhook(
  ctx: OperationContext,
  input: { url: string; eventTypes?: string[] | undefined; enabled?: boolean | undefined; description?: string | null | undefined; metadata?: Record<string, unknown> | undefined },
) {
  assertUrl(input.url);
  assertMayReceive(ctx.permissions, input.eventTypes ?? ['*']);
  // Serializes creations of one organization, so two at once cannot pass the cap together.
  await ctx.db.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${`webhooks:${ctx.orgId}`}, 0))`);
  const [existing] = await ctx.db.select({ n: count() }).from(webhookEndpoints).where(live(webhookEndpoints, ctx.orgId));
  if (Number(existing?.n ?? 0) >= MAX_WEBHOOKS_PER_ORGANIZATION) {
    throw new AppError('VALIDATION_ERROR', `An organization may have at most ${MAX_WEBHOOKS_PER_ORGANIZATION} webhook endpoints`);
  }
  const row = await endpointRows.insert(ctx.db, {
    organizationId: ctx.orgId,
    url: input.url,
    eventTypes: unique(input.eventTypes ?? ['*']),
    enabled: input.enabled ?? true,
    description: input.description ?? null,
    metadata: input.metadata ?? {},
    secret: newSecret(),
  });
  return { ...toWebhook(row), secret: row.secret };
}

const unique = (types: string[]) => (types.includes('*') ? ['*'] : [...new Set(types)]);

export async function getWebhook(db: DbOrTx, orgId: string, id: string) {
  return toWebhook(await endpointRows.get(db, orgId, id));
}

export async function listWebhooks(db: DbOrTx, orgId: string, page: PageInput): Promise<Page<ReturnType<typeof toWebhook>>> {
  const { items } = await endpointRows.list(db, orgId, page);
  return { items: items.map(toWebhook) };
}

export async function updateWebhook(
  ctx: OperationContext,
  id: string,
  patch: { url?: string | undefined; eventTypes?: string[] | undefined; enabled?: boolean | undefined; description?: string | null | undefined; metadata?: Record<string, unknown> | undefined },
) {
  const { db, orgId } = ctx;
  if (patch.url !== undefined) assertUrl(patch.url);
  if (patch.url !== undefined || patch.eventTypes !== undefined) {
    assertMayReceive(ctx.permissions, patch.eventTypes ?? (await endpointRows.get(db, orgId, id)).eventTypes);
  }
  const row = await endpointRows.update(db, orgId, id, {
    ...(patch.url !== undefined ? { url: patch.url } : {}),
    ...(patch.eventTypes !== undefined ? { eventTypes: unique(patch.eventTypes) } : {}),
    ...(patch.enabled !== undefined ? { enabled: patch.enabled, disabledReason: null } : {}),
    ...(patch.description !== undefined ? { description: patch.description } : {}),
    ...(patch.metadata !== undefined ? { metadata: patch.metadata } : {}),
  });
  return toWebhook(row);
}

/** Soft-deletes the endpoint; its queued deliveries are given up. */
export async function deleteWebhook(db: DbOrTx, orgId: string, id: string) {
  const row = await endpointRows.softDelete(db, orgId, id);
  await db
    .update(webhookDeliveries)
    .set({ status: 'failed', lastError: 'The endpoint was deleted', leaseUntil: null })
    .where(and(eq(webhookDeliveries.endpointId, id), inArray(webhookDeliveries.status, ['pending'])));
  return toWebhook(row);
}

/** A new secret; the old one keeps signing beside it for 24 hours, so receivers can switch without losing events. */
export async function rotateWebhookSecret(db: DbOrTx, orgId: string, id: string, now: Date) {
  const current = await endpointRows.get(db, orgId, id);
  const row = await endpointRows.update(db, orgId, id, {
    secret: newSecret(),
    previousSecret: current.secret,
    previousSecretExpiresAt: new Date(now.getTime() + SECRET_OVERLAP_MS),
  });
  return { ...toWebhook(row), secret: row.secret };
}

export async function listDeliveries(db: DbOrTx, orgId: string, endpointId: string, page: PageInput): Promise<Page<ReturnType<typeof toDelivery>>> {
  await endpointRows.get(db, orgId, endpointId);
  const rows = await listPage(db, webhookDeliveries, and(eq(webhookDeliveries.organizationId, orgId), eq(webhookDeliveries.endpointId, endpointId)), page);
  return { items: rows.map(toDelivery) };
}

/** Queues a delivery again now (a failed one, or a succeeded one to send it once more). */
export async function retryDelivery(db: DbOrTx, orgId: string, endpointId: string, deliveryId: string, now: Date) {
  await endpointRows.get(db, orgId, endpointId);
  const where = and(eq(webhookDeliveries.organizationId, orgId), eq(webhookDeliveries.endpointId, endpointId), eq(webhookDeliveries.id, deliveryId));
  const [row] = await db.select().from(webhookDeliveries).where(where).limit(1);
  if (!row) throw notFound('Delivery');
  if (row.status === 'delivering') throw fieldError('deliveryId', 'An attempt of this delivery is under way; retry once it has finished');
  const [updated] = await db
    .update(webhookDeliveries)
    .set({ status: 'pending', nextAttemptAt: now, leaseUntil: null, deliveredAt: null })
    .where(and(where, sql`${webhookDeliveries.status} <> 'delivering'`))
    .returning();
  if (!updated) throw fieldError('deliveryId', 'An attempt of this delivery is under way; retry once it has finished');
  return toDelivery(updated);
}

/** Queues a `webhook.test` event for this endpoint alone (also when it is disabled: testing is how one checks it). */
export async function sendTestEvent(db: DbOrTx, orgId: string, endpointId: string, now: Date) {
  const endpoint = await endpointRows.get(db, orgId, endpointId);
  const eventId = randomUUID();
  const [row] = await db
    .insert(webhookDeliveries)
    .values({
      organizationId: orgId,
      endpointId,
      eventId,
      eventType: WEBHOOK_TEST_EVENT,
      payload: { id: eventId, type: WEBHOOK_TEST_EVENT, occurredAt: now.toISOString(), data: { webhookId: endpoint.id, url: endpoint.url } },
      nextAttemptAt: now,
    })
    .returning();
  return toDelivery(row!);
}

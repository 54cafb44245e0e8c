import { and, eq, inArray, sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import { Webhook as Signer } from 'standardwebhooks';
import type { Clock } from '../core/clock.js';
import type { Db } from '../db/client.js';
import { events, webhookDeliveries, webhookEndpoints } from '../db/schema.js';
import { onEventsCommitted } from '../modules/events/events.signal.js';
import { toEvent } from '../modules/events/events.repository.js';
import { outboundRequest, OutboundProblem } from '../core/outbound.js';
import { createWorkerLoop, type WorkerLoop } from './loop.js';

/** A 2xx within this time counts as delivered. */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** An attempt's claim: longer than the timeout, so a live attempt is never taken over; a crashed one is after this. */
const LEASE_MS = 20_000;
/** Response bodies are read up to this size (and then dropped): a receiver cannot make us buffer more. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** Waits before attempts 2, 3, …; after the last, every 12 hours until the delivery is 3 days old. */
export const RETRY_DELAYS_MS = [5_000, 60_000, 10 * 60_000, 60 * 60_000, 6 * 60 * 60_000];
const LATER_RETRY_MS = 12 * 60 * 60_000;
export const GIVE_UP_AFTER_MS = 3 * 24 * 60 * 60_000;
const BATCH = 64;
/** Due deliveries of one endpoint sent one after another in a pass (in order), before others get their turn. */
const PER_ENDPOINT = 8;

/** The wait before the next attempt after `attempt` failures, with ±10% jitter so retries of many deliveries spread out. */
export function retryDelay(attempt: number, random: () => number = Math.random): number {
  const base = RETRY_DELAYS_MS[attempt - 1] ?? LATER_RETRY_MS;
  return Math.round(base * (0.9 + 0.2 * random()));
}

export interface DeliveryResult {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** POSTs one signed body; never follows redirects; reads at most 64 KiB of the answer (and drops it). */
export async function postWebhook(url: string, body: string, headers: Record<string, string>, allowInsecure: boolean): Promise<DeliveryResult> {
  const started = performance.now();
  const done = (statusCode: number | null, error: string | null): DeliveryResult => ({ statusCode, error, durationMs: Math.round(performance.now() - started) });
  try {
    const answer = await outboundRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'Switchboard-Webhooks/1', ...headers },
      body,
      allowInsecure,
      timeoutMs: DELIVERY_TIMEOUT_MS,
      maxBytes: MAX_RESPONSE_BYTES,
      overflow: 'truncate',
    });
    return done(answer.status, answer.status >= 200 && answer.status < 300 ? null : `The endpoint answered HTTP ${answer.status}`);
  } catch (err) {
    if (!(err instanceof OutboundProblem)) throw err;
    return done(null, err.kind === 'forbidden' ? err.message : `Could not deliver: ${err.message}`);
  }
}

export interface WebhookDeliveryDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  allowInsecure: boolean;
  pollMs?: number;
  random?: () => number;
}

type DeliveryRow = typeof webhookDeliveries.$inferSelect;
type EndpointRow = typeof webhookEndpoints.$inferSelect;

/**
 * Delivers queued webhook events. Each pass claims due deliveries in the database (`FOR UPDATE SKIP
 * LOCKED`, a lease): up to PER_ENDPOINT per endpoint, sent one after another in their order, and none
 * for an endpoint with an attempt under way elsewhere, so deliveries to one endpoint go out in order where
 * they can, endpoints are served side by side, and two processes never attempt the same delivery at once. An attempt that a crash interrupts is taken over when its lease runs out: delivery
 * is at least once.
 */
export function createWebhookDelivery(deps: WebhookDeliveryDeps): WorkerLoop & { runOnce(): Promise<number> } {
  const { db, clock } = deps;

  async function claim(now: Date): Promise<DeliveryRow[][]> {
    return db.transaction(async (tx) => {
      const due = await tx
        .select()
        .from(webhookDeliveries)
        .where(
          and(
            sql`(${webhookDeliveries.status} = 'pending' OR (${webhookDeliveries.status} = 'delivering' AND ${webhookDeliveries.leaseUntil} <= ${now}))`,
            sql`${webhookDeliveries.nextAttemptAt} <= ${now}`,
            sql`NOT EXISTS (SELECT 1 FROM webhook_deliveries x WHERE x.endpoint_id = ${webhookDeliveries.endpointId}
                 AND x.status = 'delivering' AND x.lease_until > ${now})`,
          ),
        )
        .orderBy(webhookDeliveries.nextAttemptAt, webhookDeliveries.createdAt)
        .limit(BATCH)
        .for('update', { skipLocked: true });
      const byEndpoint = new Map<string, DeliveryRow[]>();
      for (const d of due) {
        const queue = byEndpoint.get(d.endpointId) ?? [];
        if (queue.length < PER_ENDPOINT) byEndpoint.set(d.endpointId, [...queue, d]);
      }
      if (byEndpoint.size === 0) return [];
      const claimed = await tx
        .update(webhookDeliveries)
        .set({ status: 'delivering', leaseUntil: new Date(now.getTime() + LEASE_MS), attempt: sql`${webhookDeliveries.attempt} + 1`, lastAttemptAt: now })
        .where(inArray(webhookDeliveries.id, [...byEndpoint.values()].flat().map((d) => d.id)))
        .returning();
      const queues = new Map<string, DeliveryRow[]>();
      for (const d of claimed.sort((x, y) => x.nextAttemptAt.getTime() - y.nextAttemptAt.getTime() || x.createdAt.getTime() - y.createdAt.getTime())) {
        queues.set(d.endpointId, [...(queues.get(d.endpointId) ?? []), d]);
      }
      return [...queues.values()];
    });
  }

  async function extendLease(rest: DeliveryRow[]) {
    await db
      .update(webhookDeliveries)
      .set({ leaseUntil: new Date(clock().getTime() + LEASE_MS) })
      .where(and(inArray(webhookDeliveries.id, rest.map((d) => d.id)), eq(webhookDeliveries.status, 'delivering')));
  }

  async function bodyOf(d: DeliveryRow): Promise<string | undefined> {
    if (d.payload !== null) return JSON.stringify(d.payload);
    const [row] = await db.select().from(events).where(eq(events.id, d.eventId)).limit(1);
    if (!row) return undefined;
    const { id, type, occurredAt, data } = toEvent(row);
    return JSON.stringify({ id, type, occurredAt, data });
  }

  /** `v1,<sig>` with the current secret, and with the previous one while it still signs. */
  function signatures(endpoint: EndpointRow, msgId: string, at: Date, body: string): string {
    const secrets = [endpoint.secret];
    if (endpoint.previousSecret && endpoint.previousSecretExpiresAt && endpoint.previousSecretExpiresAt > at) secrets.push(endpoint.previousSecret);
    return secrets.map((s) => new Signer(s).sign(msgId, at, body)).join(' ');
  }

  async function attempt(d: DeliveryRow, endpoint: EndpointRow | undefined): Promise<void> {
    const now = clock();
    let result: DeliveryResult;
    const body = endpoint && !endpoint.deletedAt ? await bodyOf(d) : undefined;
    if (!endpoint || endpoint.deletedAt) {
      result = { statusCode: null, error: 'The endpoint was deleted', durationMs: 0 };
    } else if (!endpoint.enabled && d.eventType !== 'webhook.test') {
      result = { statusCode: null, error: endpoint.disabledReason ? `The endpoint is disabled: ${endpoint.disabledReason}` : 'The endpoint is disabled', durationMs: 0 };
    } else if (body === undefined) {
      result = { statusCode: null, error: 'The event is no longer kept', durationMs: 0 };
    } else {
      const headers = { 'webhook-id': d.eventId, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': signatures(endpoint, d.eventId, now, body) };
      result = await postWebhook(endpoint.url, body, headers, deps.allowInsecure);
    }
    await record(d, endpoint, result, body !== undefined && !!endpoint?.enabled);
  }

  async function record(d: DeliveryRow, endpoint: EndpointRow | undefined, result: DeliveryResult, retryable: boolean) {
    const now = clock();
    const last = { lastStatusCode: result.statusCode, lastDurationMs: result.durationMs, lastError: result.error, leaseUntil: null };
    const mine = and(eq(webhookDeliveries.id, d.id), eq(webhookDeliveries.status, 'delivering'), eq(webhookDeliveries.attempt, d.attempt));
    if (result.error === null) {
      await db.update(webhookDeliveries).set({ ...last, status: 'succeeded', deliveredAt: now }).where(mine);
      return;
    }
    const next = new Date(now.getTime() + retryDelay(d.attempt, deps.random));
    const givingUp = !retryable || next.getTime() - d.createdAt.getTime() > GIVE_UP_AFTER_MS;
    await db.transaction(async (tx) => {
      await tx
        .update(webhookDeliveries)
        .set({ ...last, status: givingUp ? 'failed' : 'pending', nextAttemptAt: givingUp ? now : next })
        .where(mine);
      // Three days of failures: the endpoint is disabled with the reason, until its owner enables it again.
      if (givingUp && retryable && endpoint) {
        await tx
          .update(webhookEndpoints)
          .set({ enabled: false, disabledReason: `Deliveries failed for 3 days; the last error: ${result.error}`, updatedAt: now })
          .where(and(eq(webhookEndpoints.id, endpoint.id), eq(webhookEndpoints.enabled, true)));
      }
    });
  }

  async function runOnce(): Promise<number> {
    let total = 0;
    for (let round = 0; round < 50; round++) {
      const queues = await claim(clock());
      if (queues.length === 0) break;
      await Promise.all(
        queues.map(async (queue) => {
          const [endpoint] = await db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, queue[0]!.endpointId)).limit(1);
          for (const [i, d] of queue.entries()) {
            // The rest of the queue stays claimed while this attempt runs (a crash frees it after the lease).
            if (i > 0) await extendLease(queue.slice(i));
            await attempt(d, endpoint).catch((err: unknown) => {
              deps.log.error({ err, deliveryId: d.id }, 'webhook delivery attempt failed');
            });
          }
        }),
      );
      total += queues.reduce((n, q) => n + q.length, 0);
    }
    return total;
  }

  const loop = createWorkerLoop({ name: 'webhook delivery', pass: runOnce, intervalMs: deps.pollMs ?? 1000, wake: (kick) => onEventsCommitted(kick, (c) => c.deliveries > 0), wakeDelayMs: 10, log: deps.log });
  return { ...loop, runOnce };
}

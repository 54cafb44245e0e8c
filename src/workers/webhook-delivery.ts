import { and, eq } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import { Webhook as Signer } from 'standardwebhooks';
import type { Clock } from '../core/clock.js';
import type { Db } from '../db/client.js';
import { events, webhookDeliveries, webhookEndpoints } from '../db/schema.js';
import { onEventsCommitted } from '../modules/events/events.signal.js';
import { toEvent } from '../modules/events/events.repository.js';
import { outboundRequest, OutboundProblem } from '../core/outbound.js';
import { createQueue, retryDelay as backoff } from '../modules/outbox.js';
import { createOutboxWorker, type OutboxWorker, type QueueWork } from './outbox-worker.js';

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
/** Deliveries under way in one process. */
const MAX_IN_FLIGHT = 256;
/** Due deliveries of one endpoint sent one after another in a pass (in order), before others get their turn. */
const PER_ENDPOINT = 8;
const DELAYS_MS = [...RETRY_DELAYS_MS, LATER_RETRY_MS];

/** The wait before the next attempt after `attempt` failures (the queue engine's backoff, ±10% jitter). */
export const retryDelay = (attempt: number, random: () => number = Math.random): number => backoff(DELAYS_MS, attempt, undefined, random);

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
 * Delivers queued webhook events through the queue engine (`src/modules/outbox.ts`): each pass claims due
 * deliveries (`FOR UPDATE SKIP LOCKED`, a lease) as a batch of up to PER_ENDPOINT per endpoint, sent one after
 * another in their order, and none for an endpoint with an attempt under way elsewhere, so deliveries to one
 * endpoint go out in order where they can, endpoints (and organizations) take turns and are served side by
 * side, and two processes never attempt the same delivery at once. An attempt that a crash interrupts is
 * taken over when its lease runs out: delivery is at least once.
 */
export function createWebhookDelivery(deps: WebhookDeliveryDeps): OutboxWorker & { runOnce(): Promise<number> } {
  const { db, clock } = deps;
  const queue = createQueue(
    db,
    {
      table: webhookDeliveries,
      lane: webhookDeliveries.endpointId,
      working: 'delivering',
      leaseMs: LEASE_MS,
      retryDelaysMs: DELAYS_MS,
      maxAttempts: Number.POSITIVE_INFINITY,
      onClaim: (now) => ({ lastAttemptAt: now }),
    },
    deps.random,
  );

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
    const mine = queue.mine(d);
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

  /** One endpoint's batch, in order; the rest of it stays claimed while each attempt runs. */
  async function run(batch: DeliveryRow[], stopping: () => boolean) {
    const [endpoint] = await db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, batch[0]!.endpointId)).limit(1);
    for (const [i, d] of batch.entries()) {
      if (stopping()) return queue.release(clock(), batch.slice(i));
      if (i > 0) await queue.markTransmitted(clock(), [], batch.slice(i));
      await attempt(d, endpoint).catch((err: unknown) => {
        deps.log.error({ err, deliveryId: d.id }, 'webhook delivery attempt failed');
      });
    }
  }

  const worker = createOutboxWorker({
    name: 'webhook delivery',
    db,
    clock,
    log: deps.log,
    pollMs: deps.pollMs ?? 1000,
    queues: [
      {
        name: 'webhook delivery',
        table: 'webhook_deliveries',
        maxInFlight: MAX_IN_FLIGHT,
        claim: (now, limit) => queue.claim(now, { limit, mode: 'batch', perLane: PER_ENDPOINT }),
        laneOf: (d: DeliveryRow) => d.endpointId,
        run,
        recover: async () => {},
        // The events' own statement says how many deliveries it queued (`Recorded.deliveries`).
        wake: (kick: () => void) => onEventsCommitted(kick, (c) => c.deliveries > 0),
        // A delivery under way ends within its timeout; what is left is taken over when its lease runs out.
        stopWaitMs: DELIVERY_TIMEOUT_MS,
      } satisfies QueueWork<DeliveryRow>,
    ],
  });
  /** Passes until nothing is due, each waiting for the deliveries it started (tests). */
  async function runOnce(): Promise<number> {
    let total = 0;
    for (let round = 0; round < 50; round++) {
      const claimed = await worker.pass();
      await worker.idle();
      if (claimed === 0) break;
      total += claimed;
    }
    return total;
  }
  return { ...worker, runOnce };
}

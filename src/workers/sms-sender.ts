import { and, eq, gt, inArray, isNull, notInArray, or, sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import { toAppError } from '../core/errors.js';
import type { ActorType } from '../core/operation.js';
import type { Db, DbOrTx } from '../db/client.js';
import { channels, messages, smsOutbox } from '../db/schema.js';
import { recordEvents } from '../modules/events/events.recorder.js';
import { CommittedWork, onEventsCommitted } from '../modules/events/events.signal.js';
import { getMessage } from '../modules/messages/messages.repository.js';
import { sendingOperations } from '../modules/channels/sending.operations.js';
import type { SendOutcome } from '../modules/channels/sms/provider.js';
import { providerFor } from '../modules/channels/sms/providers/index.js';
import { boundSmppChannels } from '../modules/channels/sms/providers/smpp.js';
import { CREDENTIALS_FIX } from '../modules/channels/channels.repository.js';
import { showChannelOutcome } from '../modules/channels/channel-health.js';
import { addOptOut, announceFailed, hookUrl, isOptedOut, loadSmsChannel, OPTED_OUT_REASON } from '../modules/channels/sms/sms.repository.js';
import { busyWork, createWorkerLoop, type WorkerLoop } from './loop.js';

/**
 * Sends the texts the sending operations queued (the `sms_outbox` table) through each channel's provider.
 *
 * - Claimed in the database (`FOR UPDATE SKIP LOCKED`, a lease), so several processes never send one text twice.
 * - Each channel has its own chain of sends in this process, paced at the channel's `rate` (segments per
 *   second); a pass only starts chains and never waits for them, so one organization's slow or dead
 *   provider holds up nothing but its own channel.
 * - `transmitted_at` is committed just before the request leaves. A request that left without an answer (a
 *   timeout, a connection lost) is an unknown outcome: the text is marked failed with a reason that says so
 *   and never sent again, so a customer never gets it twice (the provider most likely sent it). The same
 *   for an attempt whose process died after that commit.
 * - 429 and 5xx are retried with backoff (at least the provider's `Retry-After`); other 4xx fail with the
 *   provider's code in `statusReason`; Twilio's 21610 (the number unsubscribed) also records an opt-out.
 * - An SMPP channel's texts are claimed only by the process that holds its bind (src/workers/smpp-binds.ts)
 *   and submitted over it; SMPP refusals map onto the same outcomes (throttling is retried, others fail).
 */

export const SMS_RETRY_DELAYS_MS = [10_000, 60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000];
export const MAX_SMS_ATTEMPTS = SMS_RETRY_DELAYS_MS.length + 1;
export const SMS_UNKNOWN_OUTCOME =
  'Delivery outcome unknown: the request reached the provider but no answer came. It is not sent again, so that it cannot arrive twice; the provider most likely sent it.';
const BATCH = 64;
/**
 * Texts of one channel claimed per pass: one, so that its lease (twice the request timeout) never has to
 * cover a wait for pacing, and a dead process's claim is taken over within that lease. The channel's chain
 * ends after its pacing pause and kicks the next pass at once.
 */
const PER_CHANNEL = 1;

const QUEUEING = new Set<string>([...sendingOperations.map((op) => op.id), 'messages.receive']);

export interface SmsSenderDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  allowPrivate: boolean;
  sendTimeoutMs: number;
  pollMs?: number;
  random?: () => number;
  /** Waits `ms` (pacing); tests may shorten it. */
  sleep?: (ms: number) => Promise<void>;
}

type OutboxRow = typeof smsOutbox.$inferSelect;

export function smsRetryDelay(attempt: number, retryAfterMs: number | undefined, random: () => number = Math.random): number {
  const base = SMS_RETRY_DELAYS_MS[attempt - 1] ?? SMS_RETRY_DELAYS_MS.at(-1)!;
  return Math.max(retryAfterMs ?? 0, Math.round(base * (0.9 + 0.2 * random())));
}

export function createSmsSender(deps: SmsSenderDeps): WorkerLoop & { runOnce(): Promise<number>; idle(): Promise<void> } {
  const { db, clock } = deps;
  let stopping = false;
  const wakers = new Set<() => void>();
  /** A pause that ends early when the sender stops. */
  const pause =
    deps.sleep ??
    ((ms: number) =>
      new Promise<void>((resolve) => {
        const done = () => (clearTimeout(timer), wakers.delete(done), resolve());
        const timer = setTimeout(done, ms);
        wakers.add(done);
      }));
  const sleep = (ms: number) => (stopping ? Promise.resolve() : pause(ms));
  /** Channels with a chain of sends running in this process, and the chains. */
  const work = busyWork<string>();
  const { busy } = work;
  const leaseMs = deps.sendTimeoutMs * 2;

  const mine = (row: OutboxRow) => and(eq(smsOutbox.id, row.id), eq(smsOutbox.status, 'sending'), eq(smsOutbox.attempt, row.attempt));
  const actorOf = (row: OutboxRow) => ({ type: row.actorType as ActorType, id: row.actorId, depth: row.depth });

  async function event(tx: DbOrTx, row: OutboxRow, type: 'message.sent' | 'message.failed', work: CommittedWork) {
    const data = await getMessage(tx, row.organizationId, row.messageId).catch(() => null);
    if (!data) return;
    const recorded = await recordEvents(tx, actorOf(row), [{ type, organizationId: row.organizationId, resourceId: row.messageId, data }]);
    work.add({ ...recorded, types: [type] });
  }

  async function fail(row: OutboxRow, error: string, opts: { optOut?: string } = {}) {
    const now = clock();
    const work = new CommittedWork();
    await db.transaction(async (tx) => {
      const [updated] = await tx.update(smsOutbox).set({ status: 'failed', lastError: error, leaseUntil: null, updatedAt: now }).where(mine(row)).returning({ id: smsOutbox.id });
      if (!updated) return;
      // Forward only: a delivery report that came first stays.
      const [changed] = await tx
        .update(messages)
        .set({ status: 'failed', statusReason: error, updatedAt: now })
        .where(and(eq(messages.id, row.messageId), inArray(messages.status, ['queued', 'sent'])))
        .returning({ id: messages.id });
      if (changed) await event(tx, row, 'message.failed', work);
      if (opts.optOut) {
        const { failed } = await addOptOut(tx, row.organizationId, row.channelId, opts.optOut, 'provider');
        await announceFailed(tx, row.organizationId, { type: 'system', id: null, depth: 0 }, failed, work);
      }
    });
    work.announce();
  }

  async function settleAbandoned(now: Date) {
    const rows = await db
      .select()
      .from(smsOutbox)
      .where(and(eq(smsOutbox.status, 'sending'), sql`${smsOutbox.leaseUntil} <= ${now}`, sql`${smsOutbox.transmittedAt} IS NOT NULL`))
      .limit(BATCH);
    for (const row of rows) await fail(row, SMS_UNKNOWN_OUTCOME);
  }

  async function claim(now: Date): Promise<OutboxRow[]> {
    const skip = [...busy.keys()];
    // An SMPP channel's texts go over its bind: only the process holding it (src/workers/smpp-binds.ts) claims them.
    const bound = boundSmppChannels();
    const smppElsewhere = sql`EXISTS (SELECT 1 FROM ${channels} WHERE ${channels.id} = ${smsOutbox.channelId} AND ${channels.sms}->'provider'->>'kind' = 'smpp')`;
    return db.transaction(async (tx) => {
      const due = await tx
        .select({ id: smsOutbox.id, channelId: smsOutbox.channelId })
        .from(smsOutbox)
        .where(
          and(
            sql`((${smsOutbox.status} = 'pending' AND ${smsOutbox.nextAttemptAt} <= ${now})
                 OR (${smsOutbox.status} = 'sending' AND ${smsOutbox.leaseUntil} <= ${now} AND ${smsOutbox.transmittedAt} IS NULL))`,
            skip.length ? notInArray(smsOutbox.channelId, skip) : undefined,
            bound.length ? or(sql`NOT ${smppElsewhere}`, inArray(smsOutbox.channelId, bound)) : sql`NOT ${smppElsewhere}`,
          ),
        )
        .orderBy(smsOutbox.nextAttemptAt, smsOutbox.createdAt)
        .limit(BATCH)
        .for('update', { skipLocked: true });
      const perChannel = new Map<string, number>();
      const ids = due
        .filter((d) => {
          const n = perChannel.get(d.channelId) ?? 0;
          perChannel.set(d.channelId, n + 1);
          return n < PER_CHANNEL;
        })
        .map((d) => d.id);
      if (ids.length === 0) return [];
      return tx
        .update(smsOutbox)
        .set({ status: 'sending', leaseUntil: new Date(now.getTime() + leaseMs), attempt: sql`${smsOutbox.attempt} + 1`, transmittedAt: null, updatedAt: now })
        .where(inArray(smsOutbox.id, ids))
        .returning();
    });
  }

  async function attempt(row: OutboxRow): Promise<number> {
    const [message] = await db.select({ deletedAt: messages.deletedAt }).from(messages).where(eq(messages.id, row.messageId)).limit(1);
    if (!message || message.deletedAt) return void (await fail(row, 'The message was deleted before it was sent')), 0;
    const channel = await loadSmsChannel(db, row.channelId);
    if (!channel) return void (await fail(row, 'The channel was deleted before the text could be sent')), 0;
    if (channel.status === 'disabled') return void (await fail(row, 'The channel is disabled')), 0;
    if (await isOptedOut(db, channel.id, row.sms.to)) return void (await fail(row, OPTED_OUT_REASON)), 0;
    // Committed before the request leaves: from here on the outcome may be "sent" whatever happens to this process.
    const now = clock();
    const [held] = await db.update(smsOutbox).set({ transmittedAt: now, updatedAt: now }).where(and(mine(row), gt(smsOutbox.leaseUntil, now))).returning({ id: smsOutbox.id });
    if (!held) return 0;
    const provider = providerFor(channel.provider, channel.id);
    let outcome: SendOutcome;
    try {
      outcome = await provider.send(
        { from: row.sms.from, to: row.sms.to, text: row.sms.text, statusCallback: `${hookUrl(channel.id, true)}?m=${row.messageId}`, messageId: row.messageId },
        { allowPrivate: deps.allowPrivate, timeoutMs: deps.sendTimeoutMs },
      );
    } catch (err) {
      outcome = { kind: 'unknown', error: err instanceof Error ? err.message : String(err) };
    }
    // The channel's health (its provider side): in error when the provider refuses its credentials, active
    // again at the next text it takes. A channel that is fine costs nothing here.
    if (outcome.kind === 'failed' && outcome.credentials) {
      await showChannelOutcome(db, channel.id, { ok: false, side: 'provider', error: `${provider.name === 'smpp' ? 'SMPP' : 'The text API'}: ${outcome.error}`, fix: CREDENTIALS_FIX.twilio });
    } else if (outcome.kind === 'sent' && (channel.status === 'error' || channel.lastError !== null)) {
      await showChannelOutcome(db, channel.id, { ok: true, side: 'provider' });
    }
    if (outcome.kind === 'sent') {
      const providerMessageId = outcome.providerMessageId;
      const at = clock();
      const work = new CommittedWork();
      await db.transaction(async (tx) => {
        // The message first, then its outbox row: the order a delivery report's write takes them in
        // (`applyStatus`), so that a report racing this answer (an SMPP receipt right behind its
        // submit_sm_resp) waits for it rather than deadlocking with it.
        // Forward only: a delivery report that arrived before this answer already moved the message on.
        const [changed] = await tx
          .update(messages)
          .set({ status: 'sent', statusReason: null, providerMessageId, updatedAt: at })
          .where(and(eq(messages.id, row.messageId), eq(messages.status, 'queued')))
          .returning({ id: messages.id });
        if (changed) await event(tx, row, 'message.sent', work);
        else await tx.update(messages).set({ providerMessageId }).where(and(eq(messages.id, row.messageId), isNull(messages.providerMessageId)));
        await tx.update(smsOutbox).set({ status: 'sent', sentAt: at, leaseUntil: null, lastError: null, updatedAt: at }).where(mine(row));
      });
      work.announce();
      return row.sms.segments;
    }
    if (outcome.kind === 'unknown') return void (await fail(row, `${SMS_UNKNOWN_OUTCOME} (${outcome.error})`)), row.sms.segments;
    if (outcome.kind === 'failed') return void (await fail(row, outcome.error, outcome.code === '21610' ? { optOut: row.sms.to } : {})), 0;
    await retryLater(row, outcome.error, outcome.retryAfterMs);
    return 0;
  }

  async function retryLater(row: OutboxRow, error: string, retryAfterMs?: number) {
    if (row.attempt >= MAX_SMS_ATTEMPTS) return fail(row, `Gave up after ${row.attempt} attempts; the last: ${error}`);
    const now = clock();
    await db
      .update(smsOutbox)
      .set({ status: 'pending', lastError: error, leaseUntil: null, transmittedAt: null, nextAttemptAt: new Date(now.getTime() + smsRetryDelay(row.attempt, retryAfterMs, deps.random)), updatedAt: now })
      .where(mine(row));
  }

  /** One channel's claimed texts, one after another, paced at its rate. */
  function chain(channelId: string, rows: OutboxRow[]) {
    const run = (async () => {
      for (const row of rows) {
        if (stopping) {
          // Not attempted: back to the queue at once, for whichever process runs next.
          await db.update(smsOutbox).set({ status: 'pending', leaseUntil: null, attempt: sql`${smsOutbox.attempt} - 1`, updatedAt: clock() }).where(mine(row)).catch(() => {});
          continue;
        }
        let segments = 0;
        try {
          segments = await attempt(row);
        } catch (err) {
          if (toAppError(err).code !== 'SERVICE_UNAVAILABLE') {
            deps.log.error({ err, outboxId: row.id }, 'text send attempt failed');
            await retryLater(row, 'The attempt failed unexpectedly').catch(() => {});
          }
        }
        if (segments > 0) {
          const channel = await loadSmsChannel(db, channelId).catch(() => undefined);
          const rate = channel?.sms?.rate ?? 1;
          await sleep(Math.ceil((segments / rate) * 1000));
        }
      }
    })().finally(() => {
      busy.delete(channelId);
      loop.kick();
    });
    busy.set(channelId, run);
  }

  async function runOnce(): Promise<number> {
    await settleAbandoned(clock());
    const claimed = await claim(clock());
    const byChannel = new Map<string, OutboxRow[]>();
    for (const row of claimed) byChannel.set(row.channelId, [...(byChannel.get(row.channelId) ?? []), row]);
    for (const [channelId, rows] of byChannel) chain(channelId, rows);
    return claimed.length;
  }

  const loop = createWorkerLoop({
    name: 'text sender',
    pass: runOnce,
    intervalMs: deps.pollMs ?? 1000,
    wake: (kick) => onEventsCommitted(kick, (c) => c.operation === undefined || QUEUEING.has(c.operation)),
    wakeDelayMs: 10,
    log: deps.log,
  });
  return {
    ...loop,
    runOnce,
    start() {
      stopping = false;
      loop.start();
    },
    async stop() {
      stopping = true;
      for (const wake of [...wakers]) wake();
      await loop.stop();
      // A request under way may take up to its timeout: shutdown waits at most 2 s for it. Its row keeps its
      // lease; as the request may have left, whoever finds the lease expired marks it an unknown outcome.
      await work.settleWithin(2000);
    },
    /** Waits until every chain under way has ended (tests). */
    idle: work.idle,
  };
}

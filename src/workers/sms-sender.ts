import { inArray, sql } from 'drizzle-orm';
import { LRUCache } from 'lru-cache';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import type { Db } from '../db/client.js';
import { channels, messages, smsOptOuts, smsOutbox } from '../db/schema.js';
import { recordEvents } from '../modules/events/events.recorder.js';
import { createQueue, messageOutbox, messageQueue } from '../modules/outbox.js';
import type { SendOutcome } from '../modules/channels/sms/provider.js';
import { providerDefinition, providerFor } from '../modules/channels/sms/providers/index.js';
import { boundSmppChannels } from '../modules/channels/sms/providers/smpp.js';
import { showChannelOutcome } from '../modules/channels/channel-health.js';
import { kindOf, toChannel } from '../modules/channels/kinds.js';
import { addOptOut, announceFailed, hookUrl, loadSmsChannel, OPTED_OUT_REASON } from '../modules/channels/sms/sms.repository.js';
import { createOutboxWorker, type OutboxWorker, type QueueWork } from './outbox-worker.js';

/**
 * Sends the texts the sending operations queued (the `sms_outbox` table) through each channel's provider.
 *
 * - Claimed through the queue engine (`src/modules/outbox.ts`): one statement claims a batch per channel (as
 *   many texts as the channel's rate sends within half the lease, at most 50), only for a channel with no
 *   batch under way in any process, the channels and organizations taking turns. A pass never waits for a
 *   batch, so one organization's slow or dead provider holds up nothing but its own channel's batch.
 * - A batch checks deleted messages, opt-outs and its channel's row for all its texts in one statement; the
 *   channel is read and decrypted again only when its row changed since this process last read it. It sends
 *   in waves: as many texts at once as the channel's token bucket allows (its `rate` in segments per second,
 *   bursts of a tenth of a second's worth), at most `SEND_CONCURRENCY`. Each wave commits its
 *   `transmitted_at` in one statement before it leaves (renewing the rest of the batch's lease once a quarter
 *   of it has passed), and its outcomes are written set-based (one statement for the texts sent, with their
 *   events), while the next wave goes.
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
/** The most texts of one channel claimed as one batch. */
const MAX_BATCH = 50;
/** The most requests of one channel under way at once. */
export const SEND_CONCURRENCY = 16;
/** Texts under way in one process, over all channels. */
const MAX_IN_FLIGHT = 1000;

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
type Channel = NonNullable<Awaited<ReturnType<typeof loadSmsChannel>>>;

/**
 * A channel's pacing in this process: a token bucket of segments, filled at `rate` a second and holding a
 * tenth of a second's worth (at least one segment). `take` answers how many of the next texts may leave now
 * (at least one, after waiting for its tokens).
 */
function tokenBucket(rate: number, clock: () => number) {
  const capacity = Math.max(1, Math.floor(rate / 10));
  let tokens = capacity;
  let at = clock();
  const refill = () => {
    const now = clock();
    tokens = Math.min(capacity, tokens + ((now - at) / 1000) * rate);
    at = now;
  };
  return {
    rate,
    /** The wait (ms) before `segments` may leave; 0 when they may leave now. */
    wait(segments: number) {
      refill();
      const need = Math.min(segments, capacity);
      return tokens >= need ? 0 : Math.ceil(((need - tokens) / rate) * 1000);
    },
    /** The segments that may leave now. */
    available() {
      refill();
      return tokens;
    },
    /** Spends `segments` as they leave (the bucket may go below zero for a text larger than it holds). */
    take(segments: number) {
      refill();
      tokens -= segments;
    },
    /**
     * After a wave's answers: a bucket the wave emptied refills from now, not from when the requests left, so
     * that a channel sending at its pace keeps its interval between the requests as the provider sees them
     * arrive (however long the requests took on their way).
     */
    answered() {
      if (tokens < 1) at = clock();
    },
    /** Full again (nothing owed): the bucket may be dropped. */
    get idle() {
      refill();
      return tokens >= capacity;
    },
  };
}

/** Texts to send, as a queue of the queue engine: the batch claim, and the transmit step through the channel's provider. */
export function textSending(deps: SmsSenderDeps): QueueWork<OutboxRow> {
  const { db, clock } = deps;
  const leaseMs = deps.sendTimeoutMs * 2;
  const queue = createQueue(db, messageQueue(smsOutbox, { leaseMs, retryDelaysMs: SMS_RETRY_DELAYS_MS, maxAttempts: MAX_SMS_ATTEMPTS }), deps.random);
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
  const sleep = (ms: number) => (stopping || ms <= 0 ? Promise.resolve() : pause(ms));
  /** The channels' pacing in this process (kept between batches, dropped once full again). */
  const buckets = new Map<string, ReturnType<typeof tokenBucket>>();
  const bucketOf = (channel: Channel) => {
    const rate = kindOf(channel).pacing(channel)?.perSecond ?? 1;
    let bucket = buckets.get(channel.id);
    if (!bucket || bucket.rate !== rate) buckets.set(channel.id, (bucket = tokenBucket(rate, () => Date.now())));
    return bucket;
  };

  const outbox = messageOutbox(db, queue, clock, { unknownOutcome: SMS_UNKNOWN_OUTCOME, from: { sent: ['queued'], failed: ['queued', 'sent'] } });
  const { fail, sent, retryLater } = outbox;
  /** The provider reported the recipient unsubscribed: the text fails and the recipient is opted out, in one transaction. */
  const failOptedOut = (row: OutboxRow, reason: string) =>
    fail([{ row, reason }], async (tx, work) => {
      const system = { type: 'system' as const, id: null, depth: 0 };
      const { optOut, created, failed: also } = await addOptOut(tx, row.organizationId, row.channelId, row.sms.to, 'provider');
      // An opt-out the provider reports is recorded like any other: its event, for webhooks and automations.
      if (created) {
        const recorded = await recordEvents(tx, system, [{ type: 'channel.opt_out.created', organizationId: row.organizationId, resourceId: optOut.id, data: optOut }]);
        work.add({ ...recorded, types: ['channel.opt_out.created'] });
      }
      await announceFailed(tx, row.organizationId, system, also, work);
    });

  /**
   * One statement: the texts that must not leave (their message was deleted, or the recipient opted out),
   * and the channel's row as it stands (a fingerprint of it; null once the channel is deleted).
   */
  async function check(channelId: string, rows: OutboxRow[]): Promise<{ refusals: { row: OutboxRow; reason: string }[]; version: string | null }> {
    const found = await db
      .select({
        id: smsOutbox.id,
        live: sql<boolean>`EXISTS (SELECT 1 FROM ${messages} WHERE ${messages.id} = ${smsOutbox.messageId} AND ${messages.deletedAt} IS NULL)`,
        optedOut: sql<boolean>`EXISTS (SELECT 1 FROM ${smsOptOuts} WHERE ${smsOptOuts.channelId} = ${smsOutbox.channelId} AND ${smsOptOuts.phoneNumber} = ${smsOutbox.sms}->>'to')`,
        version: sql<string | null>`(SELECT md5(c::text) FROM ${channels} c WHERE c.id = ${channelId}::uuid AND c.deleted_at IS NULL)`,
      })
      .from(smsOutbox)
      .where(inArray(smsOutbox.id, rows.map((r) => r.id)));
    const byId = new Map(found.map((f) => [f.id, f]));
    const refusals = rows.flatMap((row) => {
      const f = byId.get(row.id);
      if (!f?.live) return [{ row, reason: 'The message was deleted before it was sent' }];
      if (f.optedOut) return [{ row, reason: OPTED_OUT_REASON }];
      return [];
    });
    return { refusals, version: found[0]?.version ?? null };
  }

  /**
   * The channels read and decrypted in this process, each with the fingerprint of the row it was read from:
   * a batch reads its channel again only when the row changed since (any write to it: its settings, its
   * credentials, its status, its health).
   */
  const channelCache = new LRUCache<string, { version: string; channel: Channel }>({ max: 1000, ttl: 60_000 });
  async function channelOf(channelId: string, version: string | null): Promise<Channel | undefined> {
    if (version === null) return (channelCache.delete(channelId), undefined);
    const cached = channelCache.get(channelId);
    if (cached?.version === version) return cached.channel;
    const channel = await loadSmsChannel(db, channelId);
    if (channel) channelCache.set(channelId, { version, channel: { ...channel } });
    return channel;
  }

  /** The channel's health (its provider side): in error when the provider refuses its credentials, active again at the next text it takes. */
  async function showHealth(channel: Channel, outcomes: SendOutcome[]) {
    const definition = providerDefinition(channel.provider.kind);
    const refusal = outcomes.find((o): o is Extract<SendOutcome, { kind: 'failed' }> => o.kind === 'failed' && Boolean(o.credentials));
    if (refusal) {
      await showChannelOutcome(db, channel.id, { ok: false, side: 'provider', error: `${definition.label}: ${refusal.error}`, fix: definition.credentialsFix }, { view: toChannel });
    } else if (outcomes.some((o) => o.kind === 'sent') && (channel.status === 'error' || channel.lastError !== null)) {
      await showChannelOutcome(db, channel.id, { ok: true, side: 'provider' }, { view: toChannel });
      channel.status = 'active';
      channel.lastError = null;
    }
  }

  /** One channel's batch: checked, then sent in waves paced by its bucket, the outcomes written per wave. */
  async function run(batch: OutboxRow[], isStopping: () => boolean) {
    const channelId = batch[0]!.channelId;
    const { refusals, version } = await check(channelId, batch);
    const channel = await channelOf(channelId, version);
    if (!channel) return fail(batch.map((row) => ({ row, reason: 'The channel was deleted before the text could be sent' })));
    if (channel.status === 'disabled') return fail(batch.map((row) => ({ row, reason: 'The channel is disabled' })));
    await fail(refusals);
    const skip = new Set(refusals.map((r) => r.row.id));
    let rest = batch.filter((row) => !skip.has(row.id));
    const provider = providerFor(channel.provider, channel.id);
    const bucket = bucketOf(channel);
    /** When the batch's lease was last renewed (its claim took it). */
    let renewedAt = Date.now();
    /** The outcomes of the waves sent, written in order while the next wave goes. */
    let written: Promise<void> = Promise.resolve();
    try {
      while (rest.length > 0) {
        if (isStopping()) return await queue.release(clock(), rest);
        await sleep(bucket.wait(rest[0]!.sms.segments));
        if (isStopping()) return await queue.release(clock(), rest);
        // The wave: as many texts as the bucket holds now (at least the first), at most SEND_CONCURRENCY.
        const wave: OutboxRow[] = [];
        let segments = 0;
        const available = bucket.available();
        for (const row of rest) {
          if (wave.length >= SEND_CONCURRENCY || (wave.length > 0 && segments + row.sms.segments > available)) break;
          segments += row.sms.segments;
          wave.push(row);
        }
        rest = rest.slice(wave.length);
        // Committed before the requests leave: from here on their outcome may be "sent" whatever happens to this
        // process. The rest of the batch has its lease renewed with it once a quarter of the lease has passed.
        const renew = Date.now() - renewedAt >= leaseMs / 4;
        const held = await queue.markTransmitted(clock(), wave, renew ? rest : []);
        const leaving = wave.filter((row) => held.has(row.id));
        if (renew) {
          rest = rest.filter((row) => held.has(row.id));
          renewedAt = Date.now();
        }
        // Spent as they leave: the channel's pace is counted from the requests, not from the commit before them.
        bucket.take(segments);
        const outcomes = await Promise.all(
          leaving.map((row) =>
            provider
              .send(
                { from: row.sms.from, to: row.sms.to, text: row.sms.text, statusCallback: `${hookUrl(channel.id, true)}?m=${row.messageId}`, messageId: row.messageId },
                { allowPrivate: deps.allowPrivate, timeoutMs: deps.sendTimeoutMs },
              )
              .catch((err: unknown): SendOutcome => ({ kind: 'unknown', error: err instanceof Error ? err.message : String(err) })),
          ),
        );
        bucket.answered();
        const settle = async () => {
          await showHealth(channel, outcomes);
          const done = leaving.map((row, i) => ({ row, outcome: outcomes[i]! }));
          await sent(done.flatMap(({ row, outcome }) => (outcome.kind === 'sent' ? [{ row, providerMessageId: outcome.providerMessageId }] : [])));
          await fail(done.flatMap(({ row, outcome }) => (outcome.kind === 'unknown' ? [{ row, reason: `${SMS_UNKNOWN_OUTCOME} (${outcome.error})` }] : [])));
          await fail(done.flatMap(({ row, outcome }) => (outcome.kind === 'failed' && !outcome.unsubscribed ? [{ row, reason: outcome.error }] : [])));
          for (const { row, outcome } of done) {
            if (outcome.kind === 'failed' && outcome.unsubscribed) await failOptedOut(row, outcome.error);
            if (outcome.kind === 'retry') await retryLater([row], outcome.error, outcome.retryAfterMs);
          }
        };
        written = written.then(settle);
        // A provider refusing the channel's credentials refuses the rest of the batch too: it waits for its retry.
        if (outcomes.some((o) => o.kind === 'failed' && o.credentials)) {
          await written;
          await retryLater(rest, 'Not sent: the provider refused the channel\'s credentials');
          rest = [];
        }
      }
    } finally {
      await written;
      if (bucket.idle) buckets.delete(channel.id);
    }
  }

  return {
    name: 'text send',
    table: 'sms_outbox',
    maxInFlight: MAX_IN_FLIGHT,
    claim(now, limit) {
      // An SMPP channel's texts go over its bind: only the process holding it (src/workers/smpp-binds.ts) claims them.
      const bound = boundSmppChannels();
      const smpp = sql`EXISTS (SELECT 1 FROM ${channels} WHERE ${channels.id} = ${smsOutbox.channelId} AND ${channels.sms}->'provider'->>'kind' = 'smpp')`;
      const leaseSeconds = leaseMs / 1000;
      return queue.claim(now, {
        limit,
        mode: 'batch',
        // What the channel's rate sends within half the lease (the lease is renewed at each wave).
        perLane: sql`(SELECT least(${MAX_BATCH}, greatest(1, floor(coalesce((${channels.sms}->>'rate')::numeric, 1) * ${leaseSeconds / 2})))::int FROM ${channels} WHERE ${channels.id} = ${smsOutbox.channelId})`,
        where: bound.length ? sql`(NOT ${smpp} OR ${inArray(smsOutbox.channelId, bound)})` : sql`NOT ${smpp}`,
      });
    },
    laneOf: (row) => row.channelId,
    run,
    recover: outbox.recover,
    settleAbandoned: (now) => outbox.settleAbandoned(now),
    start() {
      stopping = false;
    },
    stop() {
      stopping = true;
      for (const wake of [...wakers]) wake();
    },
    // A request under way may take up to its timeout: shutdown waits at most 2 s for it. Its row keeps its
    // lease; as the request may have left, whoever finds the lease expired marks it an unknown outcome.
    stopWaitMs: 2000,
  };
}

export function createSmsSender(deps: SmsSenderDeps): OutboxWorker & { runOnce(): Promise<number> } {
  const worker = createOutboxWorker({ name: 'text sender', db: deps.db, clock: deps.clock, log: deps.log, pollMs: deps.pollMs ?? 1000, queues: [textSending(deps)] });
  return { ...worker, runOnce: worker.pass };
}

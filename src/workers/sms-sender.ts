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
import { createOutboxWorker, type NextBatch, type OutboxWorker, type QueueWork } from './outbox-worker.js';

/**
 * Sends the texts the sending operations queued (the `sms_outbox` table) through each channel's provider.
 *
 * - Claimed through the queue engine (`src/modules/outbox.ts`): one statement claims a batch per channel (as
 *   many texts as the channel's rate sends within half the lease, at most 50), only for a channel with no
 *   batch under way in any process, the channels and organizations taking turns. A pass never waits for a
 *   batch, so one organization's slow or dead provider holds up nothing but its own channel's batch. A
 *   channel's run goes on with the channel's next batch while texts wait behind it: claimed and checked as
 *   the last wave leaves, sent once that wave's answers are in (still one wave out per channel).
 * - A batch checks deleted messages, opt-outs and its channel's row for all its texts in one statement; the
 *   channel is read and decrypted again only when its sending settings changed since this process last read
 *   it (not when its health is written). It sends in waves: as many texts at once as the channel's token
 *   bucket allows (its `rate` in segments per second, bursts of a tenth of a second's worth), at most
 *   `SEND_CONCURRENCY`, one wave out at a time. Each wave commits its `transmitted_at` in one statement
 *   before it leaves (renewing the rest of the batch's lease once a quarter of it has passed), never before
 *   the wave ahead of it has answered: a text counted as left has been handed to the provider. Its outcomes are written set-based (one statement for the texts sent, with their events), while the next
 *   wave goes.
 * - `transmitted_at` is committed before the request leaves. A request that left without an answer (a
 *   timeout, a connection lost) is an unknown outcome: the text is marked failed with a reason that says so
 *   and never sent again, so a customer never gets it twice (the provider most likely sent it). The same
 *   for an attempt whose process died after that commit. A stop gives back what has not left.
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
/** The channel's row as a batch's check reads it: the fingerprint of its sending settings, its health. */
interface ChannelState {
  settings: string;
  status: Channel['status'];
  lastError: string | null;
}

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
   * and the channel as it stands: a fingerprint of its sending settings (its provider settings and rate, its
   * encrypted secret), its status and its last error (null once the channel is deleted).
   */
  async function check(channelId: string, rows: OutboxRow[]): Promise<{ refusals: { row: OutboxRow; reason: string }[]; state: ChannelState | null }> {
    const found = await db
      .select({
        id: smsOutbox.id,
        live: sql<boolean>`EXISTS (SELECT 1 FROM ${messages} WHERE ${messages.id} = ${smsOutbox.messageId} AND ${messages.deletedAt} IS NULL)`,
        optedOut: sql<boolean>`EXISTS (SELECT 1 FROM ${smsOptOuts} WHERE ${smsOptOuts.channelId} = ${smsOutbox.channelId} AND ${smsOptOuts.phoneNumber} = ${smsOutbox.sms}->>'to')`,
        state: sql<[string, Channel['status'], string | null] | null>`(SELECT jsonb_build_array(md5(jsonb_build_array(c.sms, c.outbound_secret)::text), c.status, c.last_error) FROM ${channels} c WHERE c.id = ${channelId}::uuid AND c.deleted_at IS NULL)`,
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
    const state = found[0]?.state;
    return { refusals, state: state ? { settings: state[0], status: state[1], lastError: state[2] } : null };
  }

  /**
   * The channels read and decrypted in this process, each with the fingerprint of the sending settings it
   * was read with: a batch reads its channel again only when those changed since (its provider settings, its
   * rate, its credentials), not at every write to the row (the health a received text or a send records).
   * The status and last error come fresh with each batch's check.
   */
  const channelCache = new LRUCache<string, { settings: string; channel: Channel }>({ max: 1000, ttl: 60_000 });
  async function channelOf(channelId: string, state: ChannelState | null): Promise<Channel | undefined> {
    if (state === null) return (channelCache.delete(channelId), undefined);
    const cached = channelCache.get(channelId);
    let channel = cached?.settings === state.settings ? cached.channel : undefined;
    if (!channel) {
      const loaded = await loadSmsChannel(db, channelId);
      if (!loaded) return undefined;
      channel = { ...loaded };
      channelCache.set(channelId, { settings: state.settings, channel });
    }
    channel.status = state.status;
    channel.lastError = state.lastError;
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

  /** The most texts a claim gives a channel: what its rate sends within half the lease (renewed at each wave), at most `MAX_BATCH`. */
  const leaseSeconds = leaseMs / 1000;
  const batchSize = (rate: number) => Math.min(MAX_BATCH, Math.max(1, Math.floor(rate * (leaseSeconds / 2))));

  /** A batch's check and its channel, read before its first wave. */
  interface Prepared {
    batch: OutboxRow[];
    refusals: { row: OutboxRow; reason: string }[];
    channel: Channel | undefined;
  }
  async function prepare(batch: OutboxRow[]): Promise<Prepared> {
    const { refusals, state } = await check(batch[0]!.channelId, batch);
    return { batch, refusals, channel: await channelOf(batch[0]!.channelId, state) };
  }

  /** A run's state across its batches: the outcomes written in order (one chain for all its waves). */
  interface Run {
    isStopping: () => boolean;
    next: NextBatch<OutboxRow>;
    written: Promise<void>;
  }
  /** Adds a write to the run's chain (its failure is the run's, seen when the chain is awaited). */
  const write = (run: Run, step: () => Promise<void>) => {
    run.written = run.written.then(step);
    run.written.catch(() => {});
  };

  /**
   * One channel's run: its batch, then (while the lane has texts waiting) the batches it goes on with, each
   * claimed and checked while the previous one's last wave is out, and sent while that wave's outcomes are
   * being written.
   */
  async function run(batch: OutboxRow[], isStopping: () => boolean, next: NextBatch<OutboxRow>) {
    const state: Run = { isStopping, next, written: Promise.resolve() };
    const channelId = batch[0]!.channelId;
    try {
      let ready: Prepared | undefined = await prepare(batch);
      while (ready) ready = await send(ready, state);
    } finally {
      await state.written;
      if (buckets.get(channelId)?.idle) buckets.delete(channelId);
    }
  }

  /**
   * One batch: sent in waves paced by its channel's bucket, the outcomes written per wave while the next wave
   * goes. As its last wave leaves, the lane's next batch is claimed (`next`) and checked; that wave's outcomes
   * are written once the claim is in, so that the lane never looks free to another process between the two.
   * Answers the next batch, checked, or none.
   */
  async function send({ batch, refusals, channel }: Prepared, run: Run): Promise<Prepared | undefined> {
    const { isStopping } = run;
    if (!channel) return void (await fail(batch.map((row) => ({ row, reason: 'The channel was deleted before the text could be sent' }))));
    if (channel.status === 'disabled') return void (await fail(batch.map((row) => ({ row, reason: 'The channel is disabled' }))));
    await fail(refusals);
    const skip = new Set(refusals.map((r) => r.row.id));
    let rest = batch.filter((row) => !skip.has(row.id));
    const provider = providerFor(channel.provider, channel.id);
    const bucket = bucketOf(channel);
    /** When the batch's lease was last renewed (its claim took it). */
    let renewedAt = Date.now();
    /** The lane's next batch, claimed as this one's last wave leaves, then checked. */
    let following: Promise<Prepared | undefined> | undefined;
    while (rest.length > 0) {
      if (isStopping()) return void (await queue.release(clock(), rest));
      await sleep(bucket.wait(rest[0]!.sms.segments));
      if (isStopping()) return void (await queue.release(clock(), rest));
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
      // The last wave: the lane's next batch is claimed and checked while it is out (it leaves after its answers).
      let claim: Promise<OutboxRow[]> | undefined;
      if (rest.length === 0 && !isStopping()) {
        claim = run.next(batch.length >= batchSize(bucket.rate));
        following = claim.then((rows) => (rows.length > 0 ? prepare(rows) : undefined));
        following.catch(() => {}); // awaited below; its failure is the run's
      }
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
      write(run, async () => {
        // The next batch's claim first: until this wave's outcomes commit, the lane's claim is this wave's.
        await claim?.catch(() => {});
        await showHealth(channel, outcomes);
        const done = leaving.map((row, i) => ({ row, outcome: outcomes[i]! }));
        await sent(done.flatMap(({ row, outcome }) => (outcome.kind === 'sent' ? [{ row, providerMessageId: outcome.providerMessageId }] : [])));
        await fail(done.flatMap(({ row, outcome }) => (outcome.kind === 'unknown' ? [{ row, reason: `${SMS_UNKNOWN_OUTCOME} (${outcome.error})` }] : [])));
        await fail(done.flatMap(({ row, outcome }) => (outcome.kind === 'failed' && !outcome.unsubscribed ? [{ row, reason: outcome.error }] : [])));
        for (const { row, outcome } of done) {
          if (outcome.kind === 'failed' && outcome.unsubscribed) await failOptedOut(row, outcome.error);
          if (outcome.kind === 'retry') await retryLater([row], outcome.error, outcome.retryAfterMs);
        }
      });
      // A provider refusing the channel's credentials refuses the rest of the batch too: it waits for its retry,
      // and a next batch claimed is given back.
      if (outcomes.some((o) => o.kind === 'failed' && o.credentials)) {
        await run.written;
        await retryLater(rest, 'Not sent: the provider refused the channel\'s credentials');
        rest = [];
        const given = await following;
        if (given) await queue.release(clock(), given.batch);
        following = undefined;
      }
    }
    return following && (await following);
  }

  /** A claim of texts: a batch per channel with none under way, or the next batch of `lane` for the run that holds it. */
  function claimTexts(now: Date, limit: number, lane?: string) {
    // An SMPP channel's texts go over its bind: only the process holding it (src/workers/smpp-binds.ts) claims them.
    const bound = boundSmppChannels();
    const smpp = sql`EXISTS (SELECT 1 FROM ${channels} WHERE ${channels.id} = ${smsOutbox.channelId} AND ${channels.sms}->'provider'->>'kind' = 'smpp')`;
    return queue.claim(now, {
      limit,
      mode: 'batch',
      ...(lane !== undefined ? { lane } : {}),
      // What the channel's rate sends within half the lease (the lease is renewed at each wave): `batchSize`.
      perLane: sql`(SELECT least(${MAX_BATCH}, greatest(1, floor(coalesce((${channels.sms}->>'rate')::numeric, 1) * ${leaseSeconds / 2})))::int FROM ${channels} WHERE ${channels.id} = ${smsOutbox.channelId})`,
      where: bound.length ? sql`(NOT ${smpp} OR ${inArray(smsOutbox.channelId, bound)})` : sql`NOT ${smpp}`,
    });
  }

  return {
    name: 'text send',
    table: 'sms_outbox',
    maxInFlight: MAX_IN_FLIGHT,
    claim: (now, limit) => claimTexts(now, limit),
    claimNext: (now, lane, limit) => claimTexts(now, limit, lane),
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

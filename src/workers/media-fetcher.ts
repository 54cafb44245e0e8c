import { randomUUID } from 'node:crypto';
import { and, eq, gt, isNull } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import type { Actor } from '../core/operation.js';
import type { Db, DbOrTx } from '../db/client.js';
import { channels, messages, smsMedia } from '../db/schema.js';
import { recordEvents } from '../modules/events/events.recorder.js';
import { CommittedWork } from '../modules/events/events.signal.js';
import { getMessage, insertAttachments } from '../modules/messages/messages.repository.js';
import { showChannelOutcome } from '../modules/channels/channel-health.js';
import { kindOf, toChannel } from '../modules/channels/kinds.js';
import { MAX_MEDIA_REDIRECTS, mediaType, type MediaOutcome } from '../modules/channels/media.js';
import { listedFilename, storedMediaBytes, updateMediaEntry } from '../modules/channels/media.repository.js';
import { createQueue } from '../modules/outbox.js';
import { createOutboxWorker, type OutboxWorker, type QueueWork } from './outbox-worker.js';

/**
 * Fetches the media of received messages (an MMS's items, an image or document of another kind), queued in
 * `sms_media` by the webhook in the message's transaction, so the webhook answers without waiting for them.
 *
 * - Claimed through the queue engine (`src/modules/outbox.ts`; a lease covering every redirect's deadline),
 *   so several processes never fetch one item at once, and a dead process's claim is taken over.
 * - One item per channel at a time (over all processes), the channels and organizations taking turns; a pass
 *   never waits for a fetch: one organization's slow or dead media host holds up nothing but its own channel.
 * - The channel's kind fetches (`fetchMedia` in the registry: a text provider's file, Meta's two steps), all of
 *   them through the channels' one bounded fetch (`channels/media.ts`): credentials only where the provider
 *   said, everything through the outbound address check, at most EMAIL_ATTACHMENT_MAX_BYTES for all the media
 *   of one message.
 * - Network errors, 408, 429 and 5xx are retried with backoff (at least the host's `Retry-After`), at most
 *   MAX_MEDIA_ATTEMPTS times; a refused address, another 4xx or an item over the limit fails at once. Credentials
 *   the provider refuses put the channel in `error` (`channel.error`) and the item is retried.
 * - A kept item becomes an attachment of the message (the repository's `insertAttachments`), its
 *   `metadata.<type>.media[i]` gets `id`, `size`, `contentType`, `filename`, and the message a `message.updated`
 *   event; a failed one gets `status: "failed"` and the reason, with the same event.
 */

export const MEDIA_RETRY_DELAYS_MS = [30_000, 2 * 60_000, 10 * 60_000, 30 * 60_000];
export const MAX_MEDIA_ATTEMPTS = MEDIA_RETRY_DELAYS_MS.length + 1;
/** Fetches under way in one process. */
const MAX_IN_FLIGHT = 32;
const SYSTEM: Actor = { type: 'system', id: null, depth: 0 };

export interface MediaFetcherDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  allowPrivate: boolean;
  /** The longest one request may take, its body included. */
  timeoutMs: number;
  /** The most media bytes kept per message. */
  maxBytes: number;
  pollMs?: number;
  random?: () => number;
}

type MediaRow = typeof smsMedia.$inferSelect;

/** The claim was taken over (its lease ran out): what this attempt wrote is rolled back. */
class LeaseLost extends Error {}

export function createMediaFetcher(deps: MediaFetcherDeps): OutboxWorker & { runOnce(): Promise<number> } {
  const { db, clock } = deps;
  const queue = createQueue(
    db,
    {
      table: smsMedia,
      lane: smsMedia.channelId,
      working: 'fetching',
      updatedAt: smsMedia.updatedAt,
      // Every request (Meta's lookup of the media id, the media URL and its redirects) has its own deadline.
      leaseMs: deps.timeoutMs * (MAX_MEDIA_REDIRECTS + 2) + 10_000,
      retryDelaysMs: MEDIA_RETRY_DELAYS_MS,
      maxAttempts: MAX_MEDIA_ATTEMPTS,
    },
    deps.random,
  );
  const { mine } = queue;

  /** The item's metadata entry and its message's `message.updated` event, in `tx`. */
  async function announce(tx: DbOrTx, row: MediaRow, patch: Record<string, unknown>, work: CommittedWork) {
    if (!(await updateMediaEntry(tx, row.messageId, row.position, patch, clock()))) return;
    const data = await getMessage(tx, row.organizationId, row.messageId).catch(() => null);
    if (!data) return;
    const recorded = await recordEvents(tx, SYSTEM, [{ type: 'message.updated', organizationId: row.organizationId, resourceId: row.messageId, data }]);
    work.add({ ...recorded, types: ['message.updated'] });
  }

  async function fail(row: MediaRow, reason: string) {
    const now = clock();
    const work = new CommittedWork();
    await db.transaction(async (tx) => {
      const [updated] = await tx.update(smsMedia).set({ status: 'failed', lastError: reason, leaseUntil: null, updatedAt: now }).where(mine(row)).returning({ id: smsMedia.id });
      if (updated) await announce(tx, row, { status: 'failed', reason }, work);
    });
    work.announce();
  }

  async function retryLater(row: MediaRow, error: string, retryAfterMs?: number) {
    if (!(await queue.retryLater(clock(), row, error, retryAfterMs))) await fail(row, `Gave up after ${row.attempt} attempts; the last: ${error}`);
  }

  async function store(row: MediaRow, fetched: Extract<MediaOutcome, { kind: 'fetched' }>) {
    const now = clock();
    const work = new CommittedWork();
    const contentType = mediaType(row.contentType) ?? fetched.contentType ?? 'application/octet-stream';
    // The name the host gives, else the one the webhook listed (a document's `filename`).
    const filename = fetched.filename ?? (await listedFilename(db, row.messageId, row.position));
    const size = fetched.content.length;
    let over = false;
    try {
      await db.transaction(async (tx) => {
        // The message's items, locked: two processes storing two items of one message count each other's bytes.
        await tx.select({ id: smsMedia.id }).from(smsMedia).where(eq(smsMedia.messageId, row.messageId)).for('update');
        if ((await storedMediaBytes(tx, row.messageId)) + size > deps.maxBytes) return void (over = true);
        const id = randomUUID();
        const [held] = await tx
          .update(smsMedia)
          .set({ status: 'stored', attachmentId: id, size, lastError: null, leaseUntil: null, updatedAt: now })
          .where(and(mine(row), gt(smsMedia.leaseUntil, now)))
          .returning({ id: smsMedia.id });
        if (!held) throw new LeaseLost();
        await insertAttachments(tx, row.organizationId, row.messageId, [{ id, filename, contentType, size, contentId: null, content: fetched.content }]);
        await announce(tx, row, { id, contentType, size, filename, status: 'stored' }, work);
      });
    } catch (err) {
      if (err instanceof LeaseLost) return;
      throw err;
    }
    if (over) return fail(row, `The message's media are larger than the ${deps.maxBytes} bytes kept per message (EMAIL_ATTACHMENT_MAX_BYTES)`);
    work.announce();
  }

  async function attempt(row: MediaRow) {
    if (row.attempt > MAX_MEDIA_ATTEMPTS) return fail(row, `Gave up after ${MAX_MEDIA_ATTEMPTS} attempts: ${row.lastError ?? 'the fetching process stopped'}`);
    const [message] = await db.select({ deletedAt: messages.deletedAt }).from(messages).where(eq(messages.id, row.messageId)).limit(1);
    if (!message || message.deletedAt) return fail(row, 'The message was deleted before its media were fetched');
    const [channel] = await db
      .select()
      .from(channels)
      .where(and(eq(channels.id, row.channelId), isNull(channels.deletedAt)))
      .limit(1);
    if (!channel) return fail(row, 'The channel was deleted before the media could be fetched');
    const kind = kindOf(channel);
    if (!kind.fetchMedia) return fail(row, `${kind.heading} channels carry no media`);
    const room = deps.maxBytes - (await storedMediaBytes(db, row.messageId));
    if (room <= 0) return fail(row, `The message's media are larger than the ${deps.maxBytes} bytes kept per message (EMAIL_ATTACHMENT_MAX_BYTES)`);
    let outcome: MediaOutcome;
    try {
      outcome = await kind.fetchMedia(channel, row.url, { allowPrivate: deps.allowPrivate, timeoutMs: deps.timeoutMs, maxBytes: room });
    } catch (err) {
      outcome = { kind: 'retry', error: err instanceof Error ? err.message : String(err) };
    }
    if (outcome.kind === 'failed' && outcome.credentials) {
      // The channel's token was refused: the channel shows it at once (`error`, an event), and the item is
      // fetched once the token is fixed (within its retries), not failed.
      await showChannelOutcome(db, channel.id, { ok: false, side: 'provider', error: outcome.error, ...(outcome.fix ? { fix: outcome.fix } : {}) }, { view: toChannel });
      return retryLater(row, outcome.error);
    }
    if (outcome.kind === 'fetched') return store(row, outcome);
    if (outcome.kind === 'failed') return fail(row, outcome.tooLarge ? `${outcome.error} (EMAIL_ATTACHMENT_MAX_BYTES: ${deps.maxBytes} bytes per message)` : outcome.error);
    return retryLater(row, outcome.error, outcome.retryAfterMs);
  }

  const worker = createOutboxWorker({
    name: 'media fetcher',
    db,
    clock,
    log: deps.log,
    pollMs: deps.pollMs ?? 2000,
    queues: [
      {
        name: 'media fetch',
        table: 'sms_media',
        maxInFlight: MAX_IN_FLIGHT,
        claim: (now, limit) => queue.claim(now, { limit, mode: 'batch', perLane: 1 }),
        laneOf: (row: MediaRow) => row.channelId,
        run: ([row]: MediaRow[]) => attempt(row!),
        async recover(rows: MediaRow[]) {
          for (const row of rows) await retryLater(row, 'The attempt failed unexpectedly').catch(() => {});
        },
        // A fetch under way may take up to its deadlines: shutdown waits at most 2 s; its lease then runs out
        // and whichever process comes next fetches the item again.
        stopWaitMs: 2000,
      } satisfies QueueWork<MediaRow>,
    ],
  });
  return { ...worker, runOnce: worker.pass };
}

import { inArray, sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../../core/clock.js';
import type { Db } from '../../../db/client.js';
import { whatsappOutbox } from '../../../db/schema.js';
import { createQueue, messageOutbox, messageQueue } from '../../outbox.js';
import type { QueueWork } from '../../queue-work.js';
import type { GraphSendOutcome } from './meta.js';
import { loadWhatsAppChannel, WHATSAPP_OPTED_OUT_REASON, type WhatsAppChannel } from './whatsapp.repository.js';
import { refusedReason, transmitWhatsApp } from './whatsapp.transmit.js';

/**
 * Sends the WhatsApp messages the sending operations queued (`whatsapp_outbox`) to Meta's Cloud API, as a
 * queue of the queue engine (`src/modules/outbox.ts`): a batch per channel in one fair claim, the channel read
 * and decrypted once per batch, deleted messages and opt-outs checked for the batch in one statement, then the
 * messages one after another in their order (a customer reads them in the order they were written), each with
 * `transmitted_at` committed before its request leaves. Meta's answer decides: sent (Meta's `wamid` becomes
 * the message's `providerMessageId`), retried later (HTTP 429, 130429, 5xx), failed with Meta's code and title,
 * or an unknown outcome (the request left, no answer came: never sent again, so that it cannot arrive twice).
 * A token Meta refuses puts the channel in `error` (`transmitWhatsApp`) and the rest of the batch waits for its
 * retry.
 */

export const WHATSAPP_RETRY_DELAYS_MS = [10_000, 60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000];
export const WHATSAPP_UNKNOWN_OUTCOME =
  'Delivery outcome unknown: the request reached Meta but no answer came. It is not sent again, so that it cannot arrive twice; Meta most likely sent it.';
/** The most messages of one channel claimed as one batch. */
const MAX_BATCH = 20;

export interface WhatsAppSenderDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  allowPrivate: boolean;
  sendTimeoutMs: number;
  random?: () => number;
}

type OutboxRow = typeof whatsappOutbox.$inferSelect;

export function whatsappSending(deps: WhatsAppSenderDeps): QueueWork<OutboxRow> {
  const { db, clock } = deps;
  const queue = createQueue(db, messageQueue(whatsappOutbox, { leaseMs: deps.sendTimeoutMs * 2, retryDelaysMs: WHATSAPP_RETRY_DELAYS_MS, maxAttempts: WHATSAPP_RETRY_DELAYS_MS.length + 1 }), deps.random);

  const outbox = messageOutbox(db, queue, clock, { unknownOutcome: WHATSAPP_UNKNOWN_OUTCOME, from: { sent: ['queued'], failed: ['queued', 'sent'] } });
  const { fail, retryLater } = outbox;

  /** Messages that must not leave: deleted, or to a recipient who opted out since (one statement; the outbox names a recipient as opt-outs key it). */
  async function refused(channel: WhatsAppChannel, rows: OutboxRow[]): Promise<{ row: OutboxRow; reason: string }[]> {
    const found = await db.execute(sql`
      SELECT o.id,
             EXISTS (SELECT 1 FROM messages m WHERE m.id = o.message_id AND m.deleted_at IS NULL) AS live,
             EXISTS (SELECT 1 FROM sms_opt_outs s WHERE s.channel_id = o.channel_id AND s.phone_number = o.whatsapp->>'to') AS opted_out
        FROM whatsapp_outbox o
       WHERE o.channel_id = ${channel.id} AND ${inArray(sql`o.id`, rows.map((r) => r.id))}`);
    const byId = new Map((found.rows as { id: string; live: boolean; opted_out: boolean }[]).map((f) => [f.id, f]));
    return rows.flatMap((row) => {
      const f = byId.get(row.id);
      if (!f?.live) return [{ row, reason: 'The message was deleted before it was sent' }];
      if (f.opted_out) return [{ row, reason: WHATSAPP_OPTED_OUT_REASON }];
      return [];
    });
  }

  async function settle(row: OutboxRow, outcome: GraphSendOutcome) {
    if (outcome.kind === 'sent') return outbox.sent([{ row, providerMessageId: outcome.providerMessageId }]);
    if (outcome.kind === 'retry') return retryLater([row], outcome.error, outcome.retryAfterMs);
    if (outcome.kind === 'unknown') return fail([{ row, reason: `${WHATSAPP_UNKNOWN_OUTCOME} (${outcome.error})` }]);
    return fail([{ row, reason: refusedReason(outcome) }]);
  }

  async function run(batch: OutboxRow[], isStopping: () => boolean) {
    const channel = await loadWhatsAppChannel(db, batch[0]!.channelId);
    if (!channel) return fail(batch.map((row) => ({ row, reason: 'The channel was deleted before the message could be sent' })));
    if (channel.status === 'disabled') return fail(batch.map((row) => ({ row, reason: 'The channel is disabled' })));
    const refusals = await refused(channel, batch);
    await fail(refusals);
    const skip = new Set(refusals.map((r) => r.row.id));
    const rest = batch.filter((row) => !skip.has(row.id));
    for (let i = 0; i < rest.length; i++) {
      const row = rest[i]!;
      if (isStopping()) return queue.release(clock(), rest.slice(i));
      // Committed before the request leaves: from here on its outcome may be "sent" whatever happens to this process.
      const held = await queue.markTransmitted(clock(), [row], rest.slice(i + 1));
      if (!held.has(row.id)) continue;
      const outcome = await transmitWhatsApp(db, channel, row.whatsapp, { allowPrivate: deps.allowPrivate, timeoutMs: deps.sendTimeoutMs }).catch(
        (err: unknown): GraphSendOutcome => ({ kind: 'unknown', error: err instanceof Error ? err.message : String(err) }),
      );
      await settle(row, outcome);
      // Meta refused the channel's token: the rest of the batch waits for its retry, after the channel is fixed.
      if (outcome.kind === 'failed' && outcome.credentials) {
        await retryLater(rest.slice(i + 1), "Not sent: Meta refused the channel's access token");
        return;
      }
    }
  }

  return {
    name: 'WhatsApp send',
    table: 'whatsapp_outbox',
    maxInFlight: 200,
    claim: (now, limit) => queue.claim(now, { limit, mode: 'batch', perLane: MAX_BATCH }),
    laneOf: (row) => row.channelId,
    run,
    recover: outbox.recover,
    settleAbandoned: (now) => outbox.settleAbandoned(now),
    // A request under way may take up to its timeout: shutdown waits at most 2 s for it (see the text sender).
    stopWaitMs: 2000,
  };
}

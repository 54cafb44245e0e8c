import { randomUUID } from 'node:crypto';
import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import type smpp from 'smpp';
import { storableText } from '../../../core/storable.js';
import type { Db } from '../../../db/client.js';
import { messages, smsParts } from '../../../db/schema.js';
import { CommittedWork } from '../../events/events.signal.js';
import type { ChannelRow } from '../channels.repository.js';
import type { OperationRunner } from '../runner.js';
import { isReceipt, messageIdForms, parseIncoming, parseReceipt } from './providers/smpp.js';
import { receiveText } from './sms.inbound.js';
import { applyStatus, loadSmsChannel } from './sms.repository.js';

/**
 * What an SMSC delivers over a bind (deliver_sm): a delivery receipt updates the outgoing text it names (the
 * same forward-only path as Twilio's status callback); a text becomes an incoming message through
 * `receiveText` (as Twilio's webhook); a part of a long text is stored (`sms_parts`) until its message is
 * complete, then the parts are joined into one message and deleted in its transaction. Each returns once
 * its write is committed: the caller answers the deliver_sm only then.
 *
 * Between its reads and its write each waits for the next turn of the event loop: the embedded database
 * answers without one, so a flooding SMSC's writes would otherwise run back to back while other requests
 * (another organization's) wait for a turn.
 */

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Parts of a long text that never completed are deleted after this long. An SMSC delivers the parts of one
 * text within seconds, or after a reconnect within minutes.
 */
export const PART_TTL_MS = 30 * 60 * 1000;

/**
 * What one channel keeps of long texts that have not completed: at most this many open texts, parts and
 * characters of parts. Past any of them its texts whose latest part is the oldest are dropped whole (their
 * sender, reference and count of parts are free, so a bind could otherwise store parts without end).
 */
export const PART_LIMITS = { texts: 100, parts: 1000, characters: 1_000_000 };
/** The limits are enforced every this many parts a channel stores, and after each part longer than `LONG_PART` characters. */
const CAP_EVERY = 20;
const LONG_PART = 1000;

/** What the bind knows of its own submits: a receipt may come before the send's answer is committed, or even before the SMSC's answer. */
export interface RecentSubmits {
  /** The message an id names among the submits this bind had answered lately (any form of the SMSC's id). */
  find(forms: string[]): { messageId: string; smscId: string } | undefined;
  /**
   * Waits while submits of this bind are still unanswered (an SMSC may send a text's receipt before its
   * submit_sm_resp), for a while, until one of them names `forms`; then answers as `find` does.
   */
  awaitAnswers(forms: string[]): Promise<{ messageId: string; smscId: string } | undefined>;
}

export type DeliverOutcome = 'receipt' | 'receipt-unmatched' | 'text' | 'part' | 'ignored';

export async function receiveDeliverSm(run: OperationRunner, db: Db, channel: ChannelRow, pdu: smpp.PDU, recent?: RecentSubmits): Promise<DeliverOutcome> {
  if (isReceipt(pdu)) {
    const report = parseReceipt(pdu);
    if (!report) return 'ignored';
    const forms = messageIdForms(report.providerMessageId);
    let just = recent?.find(forms);
    let messageId = just?.messageId;
    if (!messageId) {
      const [row] = await db
        .select({ id: messages.id })
        .from(messages)
        .where(and(eq(messages.organizationId, channel.organizationId), eq(messages.channelId, channel.id), inArray(messages.providerMessageId, forms), eq(messages.direction, 'outgoing'), isNull(messages.deletedAt)))
        .limit(1);
      messageId = row?.id;
      // A receipt read in the same chunk as its submit_sm_resp comes before the submit's answer is handled:
      // by now (after a round trip to the database) that answer has been, so the submit is known. One read
      // before its submit_sm_resp waits for the answers still to come.
      if (!messageId) {
        just = recent?.find(forms) ?? (await recent?.awaitAnswers(forms));
        messageId = just?.messageId;
      }
    }
    if (!messageId) return 'receipt-unmatched';
    await nextTurn();
    const work = new CommittedWork();
    await db.transaction((tx) => applyStatus(tx, channel, { ...report, providerMessageId: just?.smscId ?? report.providerMessageId }, messageId, work));
    work.announce();
    return 'receipt';
  }

  const parsed = parseIncoming(pdu);
  // UCS-2 and Latin-1 texts can carry U+0000, which PostgreSQL's text cannot: a part stored with it would
  // fail, be answered with a temporary error and be delivered again for ever. Dropped, as from every text.
  const incoming = { ...parsed, text: storableText(parsed.text) };
  const part = incoming.part;
  if (!part || part.total <= 1 || part.seq < 1 || part.seq > part.total) {
    const current = await currentChannel(db, channel.id);
    if (!current) return 'ignored';
    await nextTurn();
    await receiveText(run, db, current, { providerMessageId: `smpp-${randomUUID()}`, from: incoming.from, to: incoming.to, text: incoming.text, media: [] });
    return 'text';
  }
  // A part costs one statement: stored with the ones before it read back (the statement's snapshot does not
  // see the row it inserts, hence the union).
  const { rows: parts } = await db.execute<{ id: string; seq: number; text: string; recipient: string }>(sql`
    WITH stored AS (
      INSERT INTO ${smsParts} (organization_id, channel_id, sender, recipient, ref, total, seq, text)
      VALUES (${channel.organizationId}, ${channel.id}, ${incoming.from}, ${incoming.to}, ${part.ref}, ${part.total}, ${part.seq}, ${incoming.text})
      ON CONFLICT DO NOTHING RETURNING id, seq, text, recipient)
    SELECT id, seq, text, recipient FROM ${smsParts} WHERE channel_id = ${channel.id} AND sender = ${incoming.from} AND ref = ${part.ref} AND total = ${part.total}
    UNION ALL SELECT id, seq, text, recipient FROM stored
    ORDER BY seq`);
  if (parts.length < part.total) {
    await keepPartsBounded(db, channel.id, incoming.text.length);
    return 'part';
  }
  const ids = parts.map((p) => p.id);
  const current = await currentChannel(db, channel.id);
  if (!current) {
    await db.delete(smsParts).where(inArray(smsParts.id, ids));
    return 'ignored';
  }
  await nextTurn();
  // Named by its first part's row. The parts go in the message's transaction: a last part delivered again
  // after that (its answer lost) is kept alone and deleted with the stale parts, never a second message.
  const result = await receiveText(
    run,
    db,
    current,
    { providerMessageId: `smpp-${parts[0]!.id}`, from: incoming.from, to: parts[0]!.recipient, text: parts.map((p) => p.text).join(''), media: [] },
    { inTransaction: async (tx) => void (await tx.delete(smsParts).where(inArray(smsParts.id, ids))) },
  );
  if (result.duplicate) await db.delete(smsParts).where(inArray(smsParts.id, ids));
  return 'text';
}

/**
 * The channel as it is now (its help text may have changed since the bind); undefined when it is disabled or
 * gone: its texts are dropped, as Twilio's webhook does (the SMSC keeps its log).
 */
async function currentChannel(db: Db, channelId: string) {
  const current = await loadSmsChannel(db, channelId);
  return current && current.status !== 'disabled' ? current : undefined;
}

/** Parts stored per channel (by this process) since its limits were last enforced. */
const partsSinceCap = new Map<string, number>();

/**
 * Keeps a channel's open long texts within `PART_LIMITS`, checked every `CAP_EVERY` parts stored and after
 * any long part, with room left for the parts in between so that the limits always hold.
 */
async function keepPartsBounded(db: Db, channelId: string, characters: number): Promise<void> {
  const stored = (partsSinceCap.get(channelId) ?? 0) + 1;
  if (stored < CAP_EVERY && characters <= LONG_PART) return void partsSinceCap.set(channelId, stored);
  partsSinceCap.delete(channelId);
  await capParts(db, channelId, { texts: PART_LIMITS.texts - CAP_EVERY, parts: PART_LIMITS.parts - CAP_EVERY, characters: PART_LIMITS.characters - CAP_EVERY * LONG_PART });
}

/** Drops a channel's open texts whose latest part is the oldest, whole, until it keeps at most `limits`. */
async function capParts(db: Db, channelId: string, limits: typeof PART_LIMITS): Promise<void> {
  const { texts, parts, characters } = limits;
  await db.execute(sql`
    WITH open AS (
      SELECT sender, ref, total, max(received_at) AS latest, count(*) AS parts, sum(length(text)) AS characters
        FROM ${smsParts} WHERE channel_id = ${channelId} GROUP BY sender, ref, total
    ), ranked AS (
      SELECT sender, ref, total, row_number() OVER w AS n, sum(parts) OVER w AS parts, sum(characters) OVER w AS characters
        FROM open WINDOW w AS (ORDER BY latest DESC, sender DESC, ref DESC, total DESC)
    )
    DELETE FROM ${smsParts} p USING ranked r
     WHERE p.channel_id = ${channelId} AND p.sender = r.sender AND p.ref = r.ref AND p.total = r.total
       AND (r.n > ${texts} OR r.parts > ${parts} OR r.characters > ${characters})`);
}

/** Deletes the parts of long texts older than `before` (their message never completed); answers how many. */
export async function deleteStaleParts(db: Db, before: Date): Promise<number> {
  const rows = await db.delete(smsParts).where(lt(smsParts.receivedAt, before)).returning({ id: smsParts.id });
  return rows.length;
}

import { randomUUID } from 'node:crypto';
import { and, asc, eq, inArray, isNull, lt } from 'drizzle-orm';
import type smpp from 'smpp';
import type { Db } from '../../db/client.js';
import { messages, smsParts } from '../../db/schema.js';
import { CommittedWork } from '../events/events.signal.js';
import type { ChannelRow } from '../channels/channels.repository.js';
import type { OperationRunner } from '../messages/inbound.js';
import { isReceipt, messageIdForms, parseIncoming, parseReceipt } from './providers/smpp.js';
import { receiveText } from './sms.inbound.js';
import { applyStatus, loadSmsChannel } from './sms.repository.js';

/**
 * What an SMSC delivers over a bind (deliver_sm): a delivery receipt updates the outgoing text it names (the
 * same forward-only path as Twilio's status callback); a text becomes an incoming message through
 * `receiveText` (as Twilio's webhook); a part of a long text is stored (`sms_parts`) until its message is
 * complete, then the parts are joined into one message and deleted in its transaction. Each returns once
 * its write is committed: the caller answers the deliver_sm only then.
 */

/** Parts of a long text that never completed are deleted after this long. */
export const PART_TTL_MS = 24 * 60 * 60 * 1000;

/** Ids this process just submitted, by every form of the SMSC's id: a receipt that arrives before the send's answer is committed still finds its message. */
export type RecentSubmits = (forms: string[]) => { messageId: string; smscId: string } | undefined;

export type DeliverOutcome = 'receipt' | 'receipt-unmatched' | 'text' | 'part' | 'ignored';

export async function receiveDeliverSm(run: OperationRunner, db: Db, channel: ChannelRow, pdu: smpp.PDU, recent?: RecentSubmits): Promise<DeliverOutcome> {
  if (isReceipt(pdu)) {
    const report = parseReceipt(pdu);
    if (!report) return 'ignored';
    const forms = messageIdForms(report.providerMessageId);
    let just = recent?.(forms);
    let messageId = just?.messageId;
    if (!messageId) {
      const [row] = await db
        .select({ id: messages.id })
        .from(messages)
        .where(and(eq(messages.organizationId, channel.organizationId), eq(messages.channelId, channel.id), inArray(messages.providerMessageId, forms), eq(messages.direction, 'outgoing'), isNull(messages.deletedAt)))
        .limit(1);
      messageId = row?.id;
      // A receipt read in the same chunk as its submit_sm_resp comes before the submit's answer is handled:
      // by now (after a round trip to the database) that answer has been, so the submit is known.
      if (!messageId) {
        just = recent?.(forms);
        messageId = just?.messageId;
      }
    }
    if (!messageId) return 'receipt-unmatched';
    const work = new CommittedWork();
    await db.transaction((tx) => applyStatus(tx, channel, { ...report, providerMessageId: just?.smscId ?? report.providerMessageId }, messageId, work));
    work.announce();
    return 'receipt';
  }

  // The channel as it is now (its help text may have changed since the bind); a disabled one drops texts, as
  // Twilio's webhook does (the SMSC keeps its log).
  const current = await loadSmsChannel(db, channel.id);
  if (!current || current.status === 'disabled') return 'ignored';
  channel = current;
  const incoming = parseIncoming(pdu);
  const part = incoming.part;
  if (!part || part.total <= 1 || part.seq < 1 || part.seq > part.total) {
    await receiveText(run, db, channel, { providerMessageId: `smpp-${randomUUID()}`, from: incoming.from, to: incoming.to, text: incoming.text, media: [] });
    return 'text';
  }
  const key = and(eq(smsParts.channelId, channel.id), eq(smsParts.sender, incoming.from), eq(smsParts.ref, part.ref), eq(smsParts.total, part.total));
  await db
    .insert(smsParts)
    .values({ organizationId: channel.organizationId, channelId: channel.id, sender: incoming.from, recipient: incoming.to, ref: part.ref, total: part.total, seq: part.seq, text: incoming.text })
    .onConflictDoNothing();
  const parts = await db.select().from(smsParts).where(key).orderBy(asc(smsParts.seq));
  if (parts.length < part.total) return 'part';
  const ids = parts.map((p) => p.id);
  // Named by its first part's row. The parts go in the message's transaction: a last part delivered again
  // after that (its answer lost) is kept alone and deleted with the stale parts, never a second message.
  const result = await receiveText(
    run,
    db,
    channel,
    { providerMessageId: `smpp-${parts[0]!.id}`, from: incoming.from, to: parts[0]!.recipient, text: parts.map((p) => p.text).join(''), media: [] },
    { inTransaction: async (tx) => void (await tx.delete(smsParts).where(inArray(smsParts.id, ids))) },
  );
  if (result.duplicate) await db.delete(smsParts).where(inArray(smsParts.id, ids));
  return 'text';
}

/** Deletes the parts of long texts older than `before` (their message never completed); answers how many. */
export async function deleteStaleParts(db: Db, before: Date): Promise<number> {
  const rows = await db.delete(smsParts).where(lt(smsParts.receivedAt, before)).returning({ id: smsParts.id });
  return rows.length;
}

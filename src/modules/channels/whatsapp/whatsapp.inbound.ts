import { z } from 'zod';
import { isUniqueViolation } from '../../../core/errors.js';
import { defineOperation, type Operation } from '../../../core/operation.js';
import { JsonObject, Uuid } from '../../../core/schemas.js';
import type { Db, DbOrTx } from '../../../db/client.js';
import { messages } from '../../../db/schema.js';
import { recordEvents } from '../../events/events.recorder.js';
import { notifyEventsCommitted } from '../../events/events.signal.js';
import { insertReceivedMessage, receivedOnChannel } from '../../messages/messages.repository.js';
import { Message } from '../../messages/messages.schemas.js';
import { recordChannelOutcome } from '../channel-health.js';
import { assertChannelLive } from '../channels.repository.js';
import { queueMedia } from '../media.repository.js';
import { cleanText } from '../email/inbound.js';
import type { OperationRunner } from '../runner.js';
import { addOptOut, announceFailed, contactPhoneIdFor, keywordOf, removeOptOut } from '../sms/sms.repository.js';
import type { IncomingWhatsApp } from './webhook.js';
import { addressOf, failQueuedTo, optOutKey, PROVIDER_NAME, SYSTEM, touchWindow, whatsappThreadId, type WhatsAppChannel, toWhatsAppChannel } from './whatsapp.repository.js';
import { and, eq, isNull } from 'drizzle-orm';

/**
 * Receiving a WhatsApp message: one message of Meta's webhook becomes one incoming message through the
 * operation runner (`messages.receive`, as for email and texts), so it has its events, webhooks and
 * automations; its 24-hour window, its contact, its media item queued for the media worker, and a STOP or
 * START in the same transaction.
 */

class DuplicateMessage extends Error {}

const ReceiveWhatsAppInput = z.strictObject({
  channelId: Uuid,
  providerMessageId: z.string().min(1).max(200),
  timestamp: z.string(),
  sender: JsonObject,
  text: z.string().nullable(),
  contextId: z.string().nullable(),
  metadata: JsonObject,
});

function receiveOperation(channel: WhatsAppChannel, incoming: IncomingWhatsApp, address: string): Operation {
  return defineOperation({
    id: 'messages.receive',
    method: 'POST',
    event: () => ['message.created', 'message.received'],
    path: '/messages/receive',
    summary: 'Record a received WhatsApp message',
    input: ReceiveWhatsAppInput,
    output: Message,
    handler: async (input, ctx) => {
      const orgId = ctx.orgId;
      // `context.id` naming one of the channel's messages: the answer joins that message's thread.
      const [answered] = input.contextId
        ? await ctx.db
            .select({ threadId: messages.threadId })
            .from(messages)
            .where(and(eq(messages.organizationId, orgId), eq(messages.channelId, channel.id), eq(messages.providerMessageId, input.contextId), isNull(messages.deletedAt)))
            .limit(1)
        : [];
      const phoneNumber = incoming.sender.phoneNumber;
      const row = await insertReceivedMessage(ctx.db, orgId, {
        type: 'whatsapp',
        direction: 'incoming',
        status: 'received',
        channelId: channel.id,
        providerName: PROVIDER_NAME,
        providerMessageId: input.providerMessageId,
        timestamp: input.timestamp,
        threadId: answered?.threadId ?? whatsappThreadId(channel.id, address),
        sender: input.sender,
        recipient: { phoneNumber: channel.address },
        text: input.text,
        phoneNumberId: phoneNumber ? await contactPhoneIdFor(ctx.db, orgId, phoneNumber) : null,
        metadata: input.metadata,
      });
      if (!row) throw new DuplicateMessage();
      // Listed pending now, fetched from Meta by the media worker after the commit (src/workers/media-fetcher.ts).
      if (incoming.media) await queueMedia(ctx.db, orgId, row.id, channel.id, [{ url: incoming.media.id, contentType: incoming.media.mimeType }]);
      await touchWindow(ctx.db, orgId, channel.id, address, incoming.timestamp);
      await recordChannelOutcome(ctx.db, channel.id, { ok: true, side: 'mailbox' }, { view: toWhatsAppChannel });
      // A channel deleted meanwhile (by any process) stores nothing: checked, and held, until the commit.
      await assertChannelLive(ctx.db, channel.id);
      await keywordEffects(ctx.db, channel, incoming);
      return row;
    },
  });
}

/** STOP records an opt-out (and fails the messages still queued to the sender), START removes it: as for texts. */
async function keywordEffects(db: DbOrTx, channel: WhatsAppChannel, incoming: IncomingWhatsApp) {
  const keyword = incoming.type === 'text' && incoming.text ? keywordOf(incoming.text) : undefined;
  const key = optOutKey(incoming.sender);
  if (!key || (keyword !== 'stop' && keyword !== 'start')) return;
  const orgId = channel.organizationId;
  if (keyword === 'stop') {
    const { optOut, created, failed } = await addOptOut(db, orgId, channel.id, key, 'keyword', failQueuedTo);
    if (created) await recordEvents(db, SYSTEM, [{ type: 'channel.opt_out.created', organizationId: orgId, resourceId: optOut.id, data: optOut }]);
    await announceFailed(db, orgId, SYSTEM, failed);
  } else {
    const removed = await removeOptOut(db, orgId, channel.id, key);
    if (removed) await recordEvents(db, SYSTEM, [{ type: 'channel.opt_out.deleted', organizationId: orgId, resourceId: removed.id, data: removed }]);
  }
}

export interface ReceivedWhatsApp {
  messageId: string;
  duplicate: boolean;
}

/**
 * Writes one received message with its events in one transaction (through the operation runner, so it has
 * its webhooks and automations); the same `wamid` on the same channel answers the existing message
 * (`duplicate`), also when two deliveries race (the unique index decides, the second waits for the first).
 */
export async function receiveWhatsApp(run: OperationRunner, db: Db, channel: WhatsAppChannel, incoming: IncomingWhatsApp): Promise<ReceivedWhatsApp> {
  const address = addressOf(incoming.sender) ?? 'unknown';
  const metadata = {
    whatsapp: {
      type: incoming.type,
      ...(incoming.contextId ? { contextId: incoming.contextId } : {}),
      ...incoming.details,
      ...(incoming.media ? { media: [{ id: null, mediaId: incoming.media.id, contentType: incoming.media.mimeType, filename: incoming.media.filename, size: null, status: 'pending' as const }] } : {}),
    },
  };
  const input = {
    channelId: channel.id,
    providerMessageId: cleanText(incoming.wamid, 200),
    timestamp: incoming.timestamp.toISOString(),
    sender: incoming.sender as Record<string, unknown>,
    text: incoming.text === null ? null : cleanText(incoming.text, 65_536),
    contextId: incoming.contextId,
    metadata,
  };
  try {
    const out = await run(receiveOperation(channel, incoming, address), input, { orgId: channel.organizationId, actor: SYSTEM, permissions: ['*'], db });
    if (incoming.type === 'text' && incoming.text && keywordOf(incoming.text)) notifyEventsCommitted();
    return { messageId: (out.data as { id: string }).id, duplicate: false };
  } catch (err) {
    if (!(err instanceof DuplicateMessage) && !isUniqueViolation(err)) throw err;
    const existing = (await receivedOnChannel(db, channel.organizationId, channel.id, input.providerMessageId))?.id;
    if (!existing) throw err;
    return { messageId: existing, duplicate: true };
  }
}

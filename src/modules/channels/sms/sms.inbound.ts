import { sql } from 'drizzle-orm';
import { z } from 'zod';
import { AppError, isUniqueViolation } from '../../../core/errors.js';
import { defineOperation, type Actor, type Operation } from '../../../core/operation.js';
import { JsonObject, Uuid } from '../../../core/schemas.js';
import type { Db, DbOrTx } from '../../../db/client.js';
import { contactPhoneNumbers, messages } from '../../../db/schema.js';
import { placeholder, writeShapes, Write, type WriteCheck } from '../../../db/write.js';
import { recordEvents } from '../../events/events.recorder.js';
import { assertChannelLive, MAILBOX_ERROR_PREFIX, SYNC_TIME_GRANULARITY_S, type ChannelRow } from '../channels.repository.js';
import { recordChannelOutcome, touchReceivingTime } from '../channel-health.js';
import { cleanText } from '../email/inbound.js';
import type { OperationRunner } from '../runner.js';
import { getMessage, insertReceivedMessage, messageColumns, messageJson, receivedOnChannel } from '../../messages/messages.repository.js';
import { Message } from '../../messages/messages.schemas.js';
import { partyNumber } from './numbers.js';
import { pendingEntry, queueMedia, type ListedMedia } from '../media.repository.js';
import type { IncomingText } from './provider.js';
import { providerNameOf } from './providers/index.js';
import { addOptOut, announceFailed, contactPhoneIdFor, isOptedOut, keywordOf, queueText, removeOptOut, smsChannelVersion, smsThreadId, toSmsChannel } from './sms.repository.js';
import { smsSize } from './segments.js';

/**
 * Receiving a text: whatever the provider (a Twilio-compatible webhook, an SMPP deliver_sm), one received
 * text becomes one incoming message through the operation runner (`messages.receive`, as for email), so it
 * has its events, webhooks and automations. A whole-message STOP/START/HELP is handled in the same
 * transaction: the opt-out is recorded (or removed), the help text queued.
 */

const SYSTEM: Actor = { type: 'system', id: null, depth: 0 };

class DuplicateText extends Error {}

const ReceiveTextInput = z.strictObject({
  channelId: Uuid,
  providerName: z.string().min(1).max(64),
  providerMessageId: z.string().min(1).max(200),
  from: z.string().max(64),
  to: z.string().max(64),
  text: z.string(),
  metadata: JsonObject,
});
/** The received message a text is, the same on the one-statement path and the full one. */
function receivedText(input: z.infer<typeof ReceiveTextInput>) {
  return {
    type: 'sms' as const,
    direction: 'incoming' as const,
    status: 'received' as const,
    channelId: input.channelId,
    providerName: input.providerName,
    providerMessageId: input.providerMessageId,
    threadId: smsThreadId(input.channelId, input.from),
    sender: { phoneNumber: input.from },
    recipient: { phoneNumber: input.to },
    text: input.text,
  };
}


/** `media`: the MMS items, queued for the media worker with the message; `inTransaction` runs in the message's transaction. */
function receiveTextOperation(channel: ChannelRow, media: ListedMedia[], inTransaction?: (tx: DbOrTx) => Promise<void>): Operation {
  return defineOperation({
    id: 'messages.receive',
    method: 'POST',
    event: () => ['message.created', 'message.received'],
    path: '/messages/receive',
    summary: 'Record a received text',
    input: ReceiveTextInput,
    output: Message,
    handler: async (input, ctx) => {
      const row = await insertReceivedMessage(ctx.db, ctx.orgId, {
        ...receivedText(input),
        phoneNumberId: await contactPhoneIdFor(ctx.db, ctx.orgId, input.from),
        metadata: input.metadata,
      });
      if (!row) throw new DuplicateText();
      await queueMedia(ctx.db, ctx.orgId, row.id, input.channelId, media);
      await inTransaction?.(ctx.db);
      await recordChannelOutcome(ctx.db, input.channelId, { ok: true, side: 'mailbox' }, { view: toSmsChannel });
      // A channel deleted meanwhile (by any process) stores nothing: checked, and held, until the commit.
      await assertChannelLive(ctx.db, input.channelId);
      await keywordEffects(ctx.db, channel, input.from, input.text);
      return row;
    },
  });
}

/** The fast path could not take the text (its channel is gone, or its health needs a write): the full path takes it. */
class NotAlone extends Error {}
const NOT_ALONE = 'switchboard:received-text-not-alone';

const orgParam = placeholder('orgId');
const channelParam = placeholder('channelId');
const fromParam = placeholder<string>('from');

/**
 * An ordinary received text (no media, no keyword, a number as its sender, nothing else to run in its
 * transaction) as one statement, which the operation runner sends with its events, their webhook deliveries
 * and the thread's upkeep (the messages trigger, reopen included) as one round trip: the insert unless the
 * channel holds the provider's id already (nothing written then), the sender's contact number looked up in it,
 * and the checks the full path makes, in the same statement: the channel live (and held to the commit by
 * `held_channel`, as `assertChannelLive`: no lock on the channel's row, so the texts of one channel never wait
 * on each other or on an update of its health), and its health needing no write (`recordChannelOutcome` of a
 * mailbox success: no receiving error to clear, `lastSyncAt` recent). When a check fails nothing is written,
 * and the full path takes the text.
 */
const receivedStatement = (fields: Omit<typeof messages.$inferInsert, 'organizationId' | 'phoneNumberId'>, db: DbOrTx) =>
  db
    .insert(messages)
    .values({
      ...fields,
      organizationId: orgParam,
      phoneNumberId: sql`(SELECT ${contactPhoneNumbers.id} FROM ${contactPhoneNumbers}
        WHERE ${contactPhoneNumbers.organizationId} = ${orgParam}::uuid AND ${contactPhoneNumbers.phoneNumber} = ${fromParam}::text AND ${contactPhoneNumbers.deletedAt} IS NULL
        ORDER BY ${contactPhoneNumbers.createdAt}, ${contactPhoneNumbers.id} LIMIT 1)`,
    })
    .onConflictDoNothing({
      target: [messages.organizationId, messages.channelId, messages.providerMessageId],
      where: sql`${messages.providerMessageId} IS NOT NULL AND ${messages.deletedAt} IS NULL`,
    })
    .returning(messageColumns)
    .getSQL();

/** The channel's health needs no write (`c` is its row as `held_channel` answers it). */
const healthNeedsNoWrite = sql`NOT coalesce(c.last_error LIKE ${`${MAILBOX_ERROR_PREFIX}%`}, false)
  AND c.last_sync_at >= now() - interval '${sql.raw(String(SYNC_TIME_GRANULARITY_S))} seconds'`;

/** The one statement with its `checks` (see `receivedShapes`, `keptChannelShapes`). */
const receivedShapesWith = (checks: WriteCheck[]) =>
  writeShapes<Omit<typeof messages.$inferInsert, 'organizationId' | 'phoneNumberId'>>((fields, db) => ({
    statement: receivedStatement(fields, db),
    table: messages,
    answer: messageJson,
    label: 'Message',
    checks,
  }));

const receivedShapes = receivedShapesWith([
  {
    holds: sql`EXISTS (SELECT 1 FROM held_channel(${channelParam}::uuid) c WHERE ${healthNeedsNoWrite})`,
    marker: NOT_ALONE,
    error: () => new NotAlone(),
  },
]);

/**
 * The channel was a kept copy (the SMS hook's, see `sms.hooks.ts`) that its row no longer matches (its secret or
 * settings changed, it was deleted), or the one statement could not take the text: nothing was written, and the
 * caller reads the channel again, verifies the call against what it reads, and only then writes.
 */
export class ChannelToRead extends Error {}
const NOT_AS_KEPT = 'switchboard:received-text-channel-not-as-kept';
const versionParam = placeholder<string>('channelVersion');

/**
 * The same statement for a channel the caller kept from an earlier read (its signature was verified against the
 * kept secret): the channel's row, read fresh under `held_channel`, must still be the one kept (`smsChannelVersion`:
 * its secret, provider settings, status and address), checked whether or not the text was written, so that a
 * provider's retry is not answered from a kept copy either; and, when it was written, its health needs no write.
 */
const keptChannelShapes = receivedShapesWith([
  {
    holds: sql`EXISTS (SELECT 1 FROM held_channel(${channelParam}::uuid) c
      WHERE ${smsChannelVersion(sql`c`)} = ${versionParam}::text AND (answer.data IS NULL OR (${healthNeedsNoWrite})))`,
    marker: NOT_AS_KEPT,
    error: () => new ChannelToRead(),
    always: true,
  },
]);

/**
 * `messages.receive` for an ordinary text answered by one statement (`shapes`), unsent: `receivedShapes`, or
 * `keptChannelShapes` with the kept channel's version (its input's `channelVersion`).
 */
function oneStatementOperation(input: typeof ReceiveTextInput | typeof KeptChannelTextInput, shapes: typeof receivedShapes): Operation {
  return defineOperation({
    id: 'messages.receive',
    method: 'POST',
    event: () => ['message.created', 'message.received'],
    path: '/messages/receive',
    summary: 'Record a received text',
    input,
    output: Message,
    handler: (text: z.infer<typeof KeptChannelTextInput> | z.infer<typeof ReceiveTextInput>, ctx) => {
      const { spec, values } = shapes(ctx.db, { ...receivedText(text), metadata: text.metadata });
      return new Write(ctx.db, spec, { ...values, orgId: ctx.orgId, from: text.from, ...('channelVersion' in text ? { channelVersion: text.channelVersion } : {}) });
    },
  });
}
const KeptChannelTextInput = ReceiveTextInput.extend({ channelVersion: z.string().min(1).max(64) });
const receiveTextAlone = oneStatementOperation(ReceiveTextInput, receivedShapes);
const receiveKeptChannelText = oneStatementOperation(KeptChannelTextInput, keptChannelShapes);

/** STOP records an opt-out (and fails the texts still queued to the number), START removes it, HELP answers the channel's help text. */
async function keywordEffects(db: Parameters<typeof recordEvents>[0], channel: ChannelRow, from: string, text: string) {
  const keyword = keywordOf(text);
  if (!keyword || !from.startsWith('+')) return;
  const orgId = channel.organizationId;
  if (keyword === 'stop') {
    const { optOut, created, failed } = await addOptOut(db, orgId, channel.id, from, 'keyword');
    if (created) await recordEvents(db, SYSTEM, [{ type: 'channel.opt_out.created', organizationId: orgId, resourceId: optOut.id, data: optOut }]);
    await announceFailed(db, orgId, SYSTEM, failed);
  } else if (keyword === 'start') {
    const removed = await removeOptOut(db, orgId, channel.id, from);
    if (removed) await recordEvents(db, SYSTEM, [{ type: 'channel.opt_out.deleted', organizationId: orgId, resourceId: removed.id, data: removed }]);
  } else if (channel.sms?.helpText && !(await isOptedOut(db, channel.id, from))) {
    const reply = await queueText(db, orgId, SYSTEM, channel, from, channel.sms.helpText);
    await recordEvents(db, SYSTEM, [{ type: 'message.created', organizationId: orgId, resourceId: reply.id, data: await getMessage(db, orgId, reply.id) }]);
  }
}

/** The longest received text kept whole (characters): as much as one SMPP `message_payload` carries. */
const MAX_TEXT = 65_536;

export interface ReceivedText {
  messageId: string;
  duplicate: boolean;
}

/**
 * Writes one received text with its events, in one transaction; the same provider id on the same channel
 * answers the existing message (`duplicate`), also when two deliveries race (the unique index decides).
 * `inTransaction` runs in the message's transaction (SMPP: the joined parts are deleted with it).
 */
export async function receiveText(
  run: OperationRunner,
  db: Db,
  channel: ChannelRow,
  incoming: IncomingText,
  opts: { inTransaction?: (tx: DbOrTx) => Promise<void>; keptVersion?: string } = {},
): Promise<ReceivedText> {
  const from = partyNumber(incoming.from);
  const text = cleanText(incoming.text, MAX_TEXT);
  const size = smsSize(text);
  const media = incoming.media.map((m) => ({ url: cleanText(m.url, 2000), contentType: m.contentType && cleanText(m.contentType, 200) }));
  const metadata = {
    sms: {
      encoding: size.encoding,
      segments: size.segments,
      // Listed now, fetched by the media worker after the commit (src/workers/media-fetcher.ts).
      ...(media.length ? { media: media.map(pendingEntry) } : {}),
      ...(keywordOf(text) ? { keyword: keywordOf(text) } : {}),
    },
  };
  const input = {
    channelId: channel.id,
    providerName: providerNameOf(channel.sms!.provider),
    providerMessageId: cleanText(incoming.providerMessageId, 200),
    from,
    to: partyNumber(incoming.to || channel.address),
    text,
    metadata,
  };
  const caller = { orgId: channel.organizationId, actor: SYSTEM, permissions: ['*'], db };
  const existing = async () => (await receivedOnChannel(db, channel.organizationId, channel.id, input.providerMessageId))?.id;
  const ordinary = media.length === 0 && !opts.inTransaction && !keywordOf(text) && from.startsWith('+');
  if (opts.keptVersion !== undefined) {
    // A kept channel: the one statement, checked against the channel's row, or nothing (`ChannelToRead`).
    if (!ordinary) throw new ChannelToRead();
    try {
      const out = await run(receiveKeptChannelText, { ...input, channelVersion: opts.keptVersion }, caller);
      return { messageId: (out.data as { id: string }).id, duplicate: false };
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'NOT_FOUND')) throw err;
      // Nothing written, and the channel is as kept: the provider's id is on the channel already (a retry).
      const id = await existing();
      if (!id) throw new ChannelToRead();
      return { messageId: id, duplicate: true };
    }
  }
  for (let attempt = 0; ordinary; attempt++) {
    try {
      const out = await run(receiveTextAlone, input, caller);
      return { messageId: (out.data as { id: string }).id, duplicate: false };
    } catch (err) {
      // Nothing written: the channel holds the provider's id already (a provider's retry), or the full path must take it.
      if (!(err instanceof NotAlone) && !(err instanceof AppError && err.code === 'NOT_FOUND')) throw err;
      // Once: when the channel's `lastSyncAt` is all its health needs, written on its own, then the one statement again.
      if (err instanceof NotAlone && attempt === 0) {
        await touchReceivingTime(db, channel.id);
        continue;
      }
      const id = err instanceof NotAlone ? undefined : await existing();
      if (id) return { messageId: id, duplicate: true };
      break;
    }
  }
  try {
    const out = await run(receiveTextOperation(channel, media, opts.inTransaction), input, caller);
    return { messageId: (out.data as { id: string }).id, duplicate: false };
  } catch (err) {
    if (!(err instanceof DuplicateText) && !isUniqueViolation(err)) throw err;
    const id = await existing();
    if (!id) throw err;
    return { messageId: id, duplicate: true };
  }
}

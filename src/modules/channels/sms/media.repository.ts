import { and, eq, sql } from 'drizzle-orm';
import type { DbOrTx } from '../../../db/client.js';
import { messages, smsMedia } from '../../../db/schema.js';
import { queuedNotice } from '../../outbox.js';

/**
 * The media of received texts (MMS) as the message lists them, `metadata.sms.media[i]`:
 * - on arrival `{id: null, url, contentType, size: null, filename: null, status: "pending"}`, the item
 *   queued in `sms_media` in the message's transaction;
 * - once fetched `{id, url, contentType, size, filename, status: "stored"}`: `id` is an attachment of the
 *   message, downloaded like a mail attachment (`GET /messages/{id}/attachments/{attachmentId}`);
 * - or `{…, status: "failed", reason}` when it could not be fetched (the reason says why).
 */

export interface ListedMedia {
  url: string;
  contentType: string | null;
}

/** The metadata entry of an item not fetched yet. */
export const pendingEntry = (m: ListedMedia) => ({ id: null, url: m.url, contentType: m.contentType, size: null, filename: null, status: 'pending' as const });

/** Queues the items of a received text for the media worker (in the message's transaction). */
export async function queueMedia(db: DbOrTx, orgId: string, messageId: string, channelId: string, list: ListedMedia[]): Promise<void> {
  if (list.length === 0) return;
  await db
    .insert(smsMedia)
    .values(list.map((m, position) => ({ organizationId: orgId, messageId, channelId, position, url: m.url, contentType: m.contentType })))
    .returning({ queued: queuedNotice('sms_media') });
}

/** Bytes of the message's media already kept. */
export async function storedMediaBytes(db: DbOrTx, messageId: string): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`coalesce(sum(${smsMedia.size}), 0)::int` })
    .from(smsMedia)
    .where(and(eq(smsMedia.messageId, messageId), eq(smsMedia.status, 'stored')));
  return row?.n ?? 0;
}

/**
 * Merges `patch` into the message's `metadata.sms.media[position]`; nothing when that entry is no longer an
 * object (the metadata was replaced through the API). Whether the message changed.
 */
export async function updateMediaEntry(db: DbOrTx, messageId: string, position: number, patch: Record<string, unknown>, now: Date): Promise<boolean> {
  const path = sql`ARRAY['sms', 'media', ${String(position)}]::text[]`;
  const changed = await db
    .update(messages)
    .set({ metadata: sql`jsonb_set(${messages.metadata}, ${path}, (${messages.metadata} #> ${path}) || ${JSON.stringify(patch)}::jsonb)`, updatedAt: now })
    .where(and(eq(messages.id, messageId), sql`jsonb_typeof(${messages.metadata} #> ${path}) = 'object'`))
    .returning({ id: messages.id });
  return changed.length > 0;
}

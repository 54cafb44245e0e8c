import { and, eq, sql } from 'drizzle-orm';
import type { DbOrTx } from '../../db/client.js';
import { messages, smsMedia } from '../../db/schema.js';
import { queuedNotice } from '../outbox.js';

/**
 * The media of received messages as the message lists them, under its own type (`metadata.<type>.media[i]`:
 * an MMS's items, an image, audio, video, document or sticker of another kind):
 * - on arrival `{id: null, url | mediaId, contentType, size: null, filename, status: "pending"}`, the item
 *   queued in `sms_media` in the message's transaction (`url`: the provider's reference to it, a URL, or a
 *   media id the kind's `fetchMedia` resolves);
 * - once fetched `{id, url, contentType, size, filename, status: "stored"}`: `id` is an attachment of the
 *   message, downloaded like a mail attachment (`GET /messages/{id}/attachments/{attachmentId}`);
 * - or `{…, status: "failed", reason}` when it could not be fetched (the reason says why).
 */

export interface ListedMedia {
  /** How the provider names the item: its URL, or a media id (its kind's `fetchMedia` knows which). */
  url: string;
  contentType: string | null;
}

/** The metadata entry of an item not fetched yet. */
export const pendingEntry = (m: ListedMedia) => ({ id: null, url: m.url, contentType: m.contentType, size: null, filename: null, status: 'pending' as const });

/** Queues the items of a received message for the media worker (in the message's transaction). */
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

/** The path of an item's entry: under the message's own type (its kind), `media`, its position. */
const entryPath = (position: number) => sql`ARRAY[${messages.type}, 'media', ${String(position)}]::text[]`;

/** The file name the message lists for an item (a document's, when the webhook named it), or null. */
export async function listedFilename(db: DbOrTx, messageId: string, position: number): Promise<string | null> {
  const [row] = await db
    .select({ name: sql<string | null>`${messages.metadata} #>> (${entryPath(position)} || ARRAY['filename'])` })
    .from(messages)
    .where(eq(messages.id, messageId));
  return row?.name || null;
}

/**
 * Merges `patch` into the message's `metadata.<type>.media[position]`; nothing when that entry is no longer an
 * object (the metadata was replaced through the API). Whether the message changed.
 */
export async function updateMediaEntry(db: DbOrTx, messageId: string, position: number, patch: Record<string, unknown>, now: Date): Promise<boolean> {
  const path = entryPath(position);
  const changed = await db
    .update(messages)
    .set({ metadata: sql`jsonb_set(${messages.metadata}, ${path}, (${messages.metadata} #> ${path}) || ${JSON.stringify(patch)}::jsonb)`, updatedAt: now })
    .where(and(eq(messages.id, messageId), sql`jsonb_typeof(${messages.metadata} #> ${path}) = 'object'`))
    .returning({ id: messages.id });
  return changed.length > 0;
}

import { and, desc, eq, inArray, isNotNull, isNull } from 'drizzle-orm';
import { createHash, randomUUID } from 'node:crypto';
import type { DbOrTx } from '../../db/client.js';
import { messages } from '../../db/schema.js';

/**
 * The longest identifier (Message-ID, a References entry) stored as given, in UTF-8 bytes. A longer one is
 * stored as its hash (`LONG_ID_SUFFIX`), and a reference to it is hashed the same way, so threads still
 * join; indexed columns stay far below PostgreSQL's 2,704-byte btree row limit.
 */
export const MAX_ID_BYTES = 250;
const LONG_ID_SUFFIX = '@long-id.switchboard.invalid';

/** An identifier as stored: itself up to MAX_ID_BYTES, else `<sha256 hex>@long-id.switchboard.invalid`. */
export function boundedId(id: string): string {
  return Buffer.byteLength(id, 'utf8') <= MAX_ID_BYTES ? id : `${createHash('sha256').update(id, 'utf8').digest('hex')}${LONG_ID_SUFFIX}`;
}

/** A Message-ID as stored: without angle brackets and surrounding space (`abc@example.com`), bounded by `boundedId`. */
export function normalizeMessageId(value: string | null | undefined): string | undefined {
  if (!value) return undefined;
  // Strips the brackets by index: a `>+$` pattern rescans the tail from every `>` (quadratic on hostile input).
  let text = value.trim();
  let start = 0;
  let end = text.length;
  while (start < end && text[start] === '<') start++;
  while (end > start && text[end - 1] === '>') end--;
  text = text.slice(start, end);
  const trimmed = text.trim();
  return trimmed ? boundedId(trimmed) : undefined;
}

/** The Message-IDs of a References / In-Reply-To header (a string of `<id>`s, or mailparser's array). */
export function messageIdList(value: string | string[] | null | undefined): string[] {
  if (!value) return [];
  const text = Array.isArray(value) ? value.join(' ') : value;
  const bracketed = [...text.matchAll(/<([^<>\s]+)>/g)].map((m) => m[1]!);
  const ids = bracketed.length > 0 ? bracketed : text.split(/[\s,]+/);
  return ids.map((id) => normalizeMessageId(id)).filter((id): id is string => id !== undefined);
}

export interface ThreadHeaders {
  /** This message's own Message-ID (unused for the look-up, kept for symmetry with the headers). */
  messageId?: string | null | undefined;
  inReplyTo?: string | string[] | null | undefined;
  references?: string | string[] | null | undefined;
}

/** At most this many referenced ids are looked up (a References header can be made arbitrarily long). */
const MAX_REFERENCES = 50;

/**
 * The thread a message joins: the thread of the earliest message of this organization whose
 * `providerMessageId` is named by In-Reply-To or References (In-Reply-To first, then References newest
 * first), or else a new thread id (a UUID). Used by receiving and sending alike.
 */
export async function resolveThreadId(tx: DbOrTx, orgId: string, headers: ThreadHeaders): Promise<string> {
  const named = [...messageIdList(headers.inReplyTo), ...messageIdList(headers.references).reverse()];
  const wanted = [...new Set(named)].slice(0, MAX_REFERENCES);
  if (wanted.length > 0) {
    const rows = await tx
      .select({ providerMessageId: messages.providerMessageId, threadId: messages.threadId })
      .from(messages)
      .where(
        and(
          eq(messages.organizationId, orgId),
          isNull(messages.deletedAt),
          isNotNull(messages.threadId),
          inArray(messages.providerMessageId, wanted),
        ),
      )
      .orderBy(desc(messages.createdAt))
      .limit(MAX_REFERENCES * 2);
    for (const id of wanted) {
      const hit = rows.findLast((r) => r.providerMessageId === id);
      if (hit?.threadId) return hit.threadId;
    }
  }
  return randomUUID();
}

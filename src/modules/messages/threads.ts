import { and, desc, eq, inArray, isNotNull, isNull } from 'drizzle-orm';
import { randomUUID } from 'node:crypto';
import type { DbOrTx } from '../../db/client.js';
import { messages } from '../../db/schema.js';

/** A Message-ID as stored: without angle brackets and surrounding space (`abc@example.com`). */
export function normalizeMessageId(value: string | null | undefined): string | undefined {
  if (!value) return undefined;
  const trimmed = value.trim().replace(/^<+|>+$/g, '').trim();
  return trimmed && trimmed.length <= 998 ? trimmed : undefined;
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

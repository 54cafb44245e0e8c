import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '../../db/client.js';
import { inboundFailures } from '../../db/schema.js';
import { cleanText } from './inbound-parse.js';

/**
 * Received emails that fail to be imported (`inbound_failures`). A failure is counted per channel and
 * email; the third failure in a row with the same reason, or a permanent refusal (a header block over the
 * bounds), makes the email not importable: the IMAP sync moves its checkpoint past it and the SMTP receiver
 * answers 554, so that one email never stops a mailbox. Operators read them on the channel
 * (`GET /channels/{id}/not-imported`).
 */

/** Failures the same way after which an email is given up on. */
export const MAX_ATTEMPTS = 3;

/** The fingerprint of an email received over SMTP: its bytes. */
export const smtpFingerprint = (raw: Buffer) => createHash('sha256').update(raw).digest('hex');

/** The first From and Subject values of the header block (raw, unfolded, bounded): what is readable without a parser. */
export function peekHeaders(raw: Buffer): { sender: string | null; subject: string | null } {
  const head = raw.subarray(0, 64 * 1024).toString('latin1');
  const found: Record<string, string> = {};
  let current: string | null = null;
  for (const line of head.split('\n', 2000)) {
    const l = line.replace(/\r$/, '');
    if (l === '') break;
    if ((l.startsWith(' ') || l.startsWith('\t')) && current) {
      if (found[current]!.length < 500) found[current] += ` ${l.trim()}`;
      continue;
    }
    current = null;
    const colon = l.indexOf(':');
    const name = colon > 0 ? l.slice(0, colon).toLowerCase() : '';
    if ((name === 'from' || name === 'subject') && found[name] === undefined) {
      found[name] = l.slice(colon + 1).trim();
      current = name;
    }
  }
  const clean = (v: string | undefined) => (v ? cleanText(v, 300) || null : null);
  return { sender: clean(found.from), subject: clean(found.subject) };
}

/**
 * Counts one failure of an email on a channel; answers whether it is now not importable. `permanent`
 * gives it up at once. A different reason than last time starts the count again.
 */
export async function recordInboundFailure(
  db: DbOrTx,
  f: { organizationId: string; channelId: string; provider: 'smtp' | 'imap'; fingerprint: string; reason: string; raw: Buffer; permanent?: boolean },
): Promise<{ attempts: number; notImportable: boolean }> {
  const { sender, subject } = peekHeaders(f.raw);
  const reason = cleanText(f.reason, 500);
  const giveUpNow = f.permanent ? sql`now()` : sql`NULL`;
  const [row] = await db
    .insert(inboundFailures)
    .values({ organizationId: f.organizationId, channelId: f.channelId, provider: f.provider, fingerprint: f.fingerprint, reason, size: f.raw.length, sender, subject, notImportableAt: f.permanent ? new Date() : null })
    .onConflictDoUpdate({
      target: [inboundFailures.channelId, inboundFailures.fingerprint],
      set: {
        attempts: sql`CASE WHEN ${inboundFailures.reason} = excluded.reason THEN ${inboundFailures.attempts} + 1 ELSE 1 END`,
        reason: sql`excluded.reason`,
        notImportableAt: sql`COALESCE(${inboundFailures.notImportableAt}, ${giveUpNow}, CASE WHEN ${inboundFailures.reason} = excluded.reason AND ${inboundFailures.attempts} + 1 >= ${MAX_ATTEMPTS} THEN now() END)`,
        updatedAt: sql`now()`,
      },
    })
    .returning({ attempts: inboundFailures.attempts, notImportableAt: inboundFailures.notImportableAt });
  return { attempts: row!.attempts, notImportable: row!.notImportableAt !== null };
}

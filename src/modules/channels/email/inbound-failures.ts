import { createHash } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { notFound } from '../../../core/errors.js';
import { defineOperation, type Operation } from '../../../core/operation.js';
import { Pagination, pageWindow, type Page, type PageInput } from '../../../core/pagination.js';
import type { DbOrTx } from '../../../db/client.js';
import { inboundFailures } from '../../../db/schema.js';
import { channelRows } from '../channels.repository.js';
import { ChannelIdParam } from '../channels.schemas.js';
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

/** The emails of a channel that failed to be imported, newest first unless `sortOrder=asc`; 404 when the channel is not the organization's. */
export async function listInboundFailures(db: DbOrTx, orgId: string, channelId: string, page: PageInput): Promise<Page<typeof inboundFailures.$inferSelect>> {
  if (!(await channelRows.exists(db, orgId, channelId))) throw notFound('Channel');
  const dir = page.sortOrder === 'asc' ? sql`ASC` : sql`DESC`;
  const { limit, offset } = pageWindow(page);
  const items = await db
    .select()
    .from(inboundFailures)
    .where(and(eq(inboundFailures.organizationId, orgId), eq(inboundFailures.channelId, channelId)))
    .orderBy(sql`${inboundFailures.createdAt} ${dir}`, sql`${inboundFailures.id} ${dir}`)
    .limit(limit)
    .offset(offset);
  return { items };
}

export const InboundFailure = z
  .object({
    id: z.uuid().describe('Id of the record'),
    channelId: z.uuid().describe('The channel the email was for'),
    provider: z.enum(['smtp', 'imap']).describe('How it arrived: the SMTP receiver or the IMAP sync'),
    reason: z.string().describe('Why it failed (the last failure), for a person; never SQL or the email\'s content'),
    size: z.number().int().describe('Its size in bytes'),
    sender: z.string().nullable().describe('Its From header as written, where readable'),
    subject: z.string().nullable().describe('Its Subject header as written (not decoded), where readable'),
    attempts: z.number().int().describe(`Failures in a row with this reason; at ${MAX_ATTEMPTS} it is given up on`),
    notImportableAt: z.iso.datetime({ offset: true }).nullable().describe('When it was given up on (SMTP answered 554, the IMAP sync moved past it); null while it may still be tried again'),
    createdAt: z.iso.datetime({ offset: true }).describe('First failure'),
    updatedAt: z.iso.datetime({ offset: true }).describe('Last failure'),
  })
  .describe('A received email that failed to be imported');

export const inboundFailuresOperations: Operation[] = [
  defineOperation({
    id: 'channels.list_not_imported',
    kind: 'list',
    method: 'GET',
    path: '/channels/{id}/not-imported',
    summary: 'List the emails a channel could not import',
    description:
      'Received emails that failed to be imported on this channel: each with the reason, its size, sender and subject where readable, and how often it failed. ' +
      `An email that fails the same way ${MAX_ATTEMPTS} times, or is refused for good (a header block over the bounds), is not importable: the SMTP receiver answers 554 and the IMAP sync moves past it, so that later mail arrives. Newest first unless \`sortOrder=asc\`.`,
    input: z.strictObject({ ...ChannelIdParam, ...Pagination.shape }),
    output: InboundFailure,
    handler: (input, ctx) => listInboundFailures(ctx.db, ctx.orgId, input.id, input),
  }),
];

import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import { AppError, type ErrorTree } from '../../core/errors.js';
import type { DbOrTx } from '../../db/client.js';
import { automaticMails, messages } from '../../db/schema.js';

/**
 * When automatic mail stays silent (RFC 3834 §2 and §5, RFC 5321 §4.5.5, as vacation programs, Sieve's
 * vacation extension (RFC 5230 §4.6) and Exim's autoreply do), and how much of it an automation and an
 * organization may send. The automation engine applies it to every step that mails (`MAILING_OPERATIONS`),
 * whatever the step's recipients are: the triggering message is checked before the step runs, and the
 * step's recipients are counted after it queued its message, in the run's transaction.
 */

/**
 * A refusal of automatic mail by these rules: a 400 whose message says why, at the field the reason
 * concerns. Its own class, so that the automation engine can tell an expected refusal (a newsletter an
 * automation must not answer) from a failing step: the run is recorded as skipped with the reason.
 */
export class AutomaticMailRefused extends AppError {
  constructor(field: string, reason: string) {
    const details: ErrorTree = { errors: [], properties: { [field]: { errors: [reason] } } };
    super('VALIDATION_ERROR', `Not sent: ${reason}`, details);
  }
}

/** The operations that send mail: an automation's step of one of these is automatic mail. */
export const MAILING_OPERATIONS: ReadonlySet<string> = new Set(['messages.send', 'messages.reply', 'messages.forward']);

/** Default of `AUTOMATIC_MAIL_PER_HOUR`: recipients of automatic mail per organization in any hour. */
export const DEFAULT_AUTOMATIC_MAIL_PER_HOUR = 300;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** The address of a stored party (`"a@x"`, `"Name <a@x>"`, `{email}`, `{address}`), lower-cased. */
function addressOf(value: unknown): string | undefined {
  if (Array.isArray(value)) return addressOf(value[0]);
  if (typeof value === 'string') {
    const angle = /<([^<>]*)>\s*$/.exec(value.slice(0, 1000));
    return (angle ? angle[1]! : value).trim().toLowerCase();
  }
  if (isRecord(value)) return text(value.email)?.toLowerCase() ?? text(value.address)?.toLowerCase();
  return undefined;
}

/**
 * Local parts that are never answered: the mail system itself (RFC 5321 §4.5.5: MAILER-DAEMON, postmaster)
 * and list machinery (RFC 3834 §2, RFC 5230 §4.6: owner-…, …-request, LISTSERV, majordomo).
 */
function machineSender(address: string): string | undefined {
  const at = address.lastIndexOf('@');
  const local = (at > 0 ? address.slice(0, at) : address).toLowerCase();
  if (local === 'mailer-daemon' || local === 'postmaster' || local === 'listserv' || local.startsWith('majordom')) return local;
  if (local.startsWith('owner-') || local.endsWith('-request')) return local;
  return undefined;
}

/** A stored message as far as the rules read it: its sender and its `metadata.email`. */
export interface TriggeringMessage {
  sender: unknown;
  metadata: unknown;
}

/**
 * Why automatic mail must not be sent about this message, or undefined. Reads what receiving records in
 * `metadata.email` (return path, Auto-Submitted, Precedence, List-* headers, content type,
 * X-Auto-Response-Suppress) and the sender; a message recorded without them (`POST /messages`) is judged
 * by its sender alone.
 */
export function silenceReason(message: TriggeringMessage): string | undefined {
  const email = isRecord(message.metadata) && isRecord(message.metadata.email) ? message.metadata.email : {};
  const returnPath = text(email.returnPath);
  // SMTP records the envelope's MAIL FROM (empty for `<>`), IMAP the Return-Path header (`<>`).
  if (returnPath !== undefined && returnPath.replace(/[<>\s]/g, '') === '') {
    return 'the message has a null return path (MAIL FROM:<>): it is a bounce or another notice of the mail system, which is never answered (RFC 5321 §4.5.5)';
  }
  const senders = [addressOf(message.sender), addressOf(email.from), returnPath ? addressOf(returnPath) : undefined].filter((a): a is string => !!a);
  for (const address of senders) {
    const local = machineSender(address);
    if (local) return `the message comes from ${address}, an address of the mail system or of a mailing list ("${local}"), which is never answered (RFC 3834 §2)`;
  }
  const contentType = text(email.contentType)?.trim().toLowerCase();
  if (contentType?.startsWith('multipart/report')) return 'the message is a report (multipart/report: a bounce or a read receipt), which is never answered (RFC 3834 §2)';
  const autoSubmitted = text(email.autoSubmitted)?.trim().toLowerCase();
  if (autoSubmitted && !/^no\b/.test(autoSubmitted)) return `the message is itself automatic (Auto-Submitted: ${autoSubmitted.slice(0, 60)}); automations never answer automatic mail (RFC 3834 §2)`;
  const precedence = text(email.precedence)?.trim().toLowerCase();
  if (precedence && ['bulk', 'list', 'junk', 'auto_reply'].includes(precedence)) return `the message is bulk or list mail (Precedence: ${precedence}); automations never answer it (RFC 3834 §2)`;
  const lists = Array.isArray(email.listHeaders) ? email.listHeaders.filter((h): h is string => typeof h === 'string') : [];
  if (text(email.listId)) lists.unshift('list-id');
  if (lists.length > 0) return `the message comes from a mailing list (${[...new Set(lists)].slice(0, 3).join(', ')}); automations never answer it (RFC 3834 §2)`;
  const suppress = text(email.autoResponseSuppress)?.trim();
  if (suppress && suppress.toLowerCase() !== 'none') return `the message asks for no automatic answers (X-Auto-Response-Suppress: ${suppress.slice(0, 60)})`;
  return undefined;
}

/** The triggering message of a run or step: a live message of the organization, or null. */
export async function triggeringMessage(db: DbOrTx, orgId: string, id: unknown): Promise<TriggeringMessage | null> {
  if (typeof id !== 'string' || !/^[0-9a-f-]{36}$/i.test(id)) return null;
  const [row] = await db
    .select({ sender: messages.sender, metadata: messages.metadata })
    .from(messages)
    .where(and(eq(messages.organizationId, orgId), eq(messages.id, id), isNull(messages.deletedAt)))
    .limit(1);
  return row ?? null;
}

/** Refuses the step when a triggering message must not be answered (the run is then skipped with the reason). */
export function refuseSilenced(found: (TriggeringMessage | null)[]) {
  for (const message of found) {
    const reason = message && silenceReason(message);
    if (reason) throw new AutomaticMailRefused('id', reason);
  }
}

/** The recipients (to, cc, bcc) a queued message's answer names, lower-cased, each once. */
export function recipientsOf(queued: unknown): string[] {
  const email = isRecord(queued) && isRecord(queued.metadata) && isRecord(queued.metadata.email) ? queued.metadata.email : {};
  const all = [email.to, email.cc, email.bcc].flatMap((list) => (Array.isArray(list) ? list : [])).map(addressOf);
  return [...new Set(all.filter((a): a is string => !!a))];
}

export interface AutomaticMailClaim {
  orgId: string;
  automationId: string;
  messageId: string | null;
  recipients: string[];
  now: Date;
  /** Recipients of automatic mail the organization may have in any hour. */
  perHour: number;
  /**
   * Whether the step is held to one mail per recipient per day: in runs an event triggered (an answer to
   * what arrived, the loops RFC 3834 is about). A scheduled run mails as often as its schedule says.
   */
  oncePerDay: boolean;
}

/**
 * Counts a step's automatic mail against the caps, in the run's transaction: one mail per (automation,
 * recipient) per UTC day when `oncePerDay` (a unique key, so concurrent processes cannot both send) and `perHour` recipients
 * per organization (counted under a transaction-scoped advisory lock of the organization, so processes
 * count one after the other). Throws `AutomaticMailRefused` past a cap: the run's savepoint, and with it the
 * queued message, is rolled back.
 */
export async function claimAutomaticMail(tx: DbOrTx, claim: AutomaticMailClaim): Promise<void> {
  if (claim.recipients.length === 0) return;
  await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext(${`automatic-mail:${claim.orgId}`}))`);
  const [recent] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(automaticMails)
    .where(and(eq(automaticMails.organizationId, claim.orgId), gt(automaticMails.createdAt, new Date(claim.now.getTime() - 3600_000))));
  const sent = Number(recent?.n ?? 0);
  if (sent + claim.recipients.length > claim.perHour) {
    throw new AutomaticMailRefused(
      'to',
      `the organization's automations already mailed ${sent} recipients in the last hour; at most ${claim.perHour} an hour (AUTOMATIC_MAIL_PER_HOUR)`,
    );
  }
  const day = claim.oncePerDay ? claim.now.toISOString().slice(0, 10) : null;
  const written = await tx
    .insert(automaticMails)
    .values(claim.recipients.map((recipient) => ({ organizationId: claim.orgId, automationId: claim.automationId, recipient, day, messageId: claim.messageId, createdAt: claim.now })))
    .onConflictDoNothing()
    .returning({ recipient: automaticMails.recipient });
  if (written.length < claim.recipients.length) {
    const got = new Set(written.map((w) => w.recipient));
    const again = claim.recipients.find((r) => !got.has(r));
    throw new AutomaticMailRefused('to', `this automation already mailed ${again} today; an automation mails each recipient at most once a day (RFC 3834 §2)`);
  }
}

import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import { AppError, type ErrorTree } from '../../core/errors.js';
import type { DbOrTx } from '../../db/client.js';
import { automaticMessages, messages } from '../../db/schema.js';

/**
 * The rules of automatic messages: when an automation stays silent (RFC 3834 §2 and §5, RFC 5321 §4.5.5, as
 * vacation programs, Sieve's vacation extension (RFC 5230 §4.6) and Exim's autoreply do), and how many
 * messages an automation and an organization may send. They hold for every kind of message alike (mail,
 * texts, and any kind added later): a kind declares how its messages name their recipients and, when it has
 * some, its own reasons to stay silent (`defineAutomaticMessageKind`, called by the module that sends it).
 * The automation engine applies them to every step that sends (an operation with `effects.sends`: send,
 * reply, forward), whatever the step's recipients are: the triggering message is checked before the step
 * runs, and the recipients of every message the step queued are counted after it, in the run's transaction.
 */

/**
 * A refusal of an automatic message by these rules: a 400 whose message says why, at the field the reason
 * concerns. Its own class, so that the automation engine can tell an expected refusal (a newsletter an
 * automation must not answer) from a failing step: the run is recorded as skipped with the reason.
 */
export class AutomaticMessageRefused extends AppError {
  constructor(field: string, reason: string) {
    const details: ErrorTree = { errors: [], properties: { [field]: { errors: [reason] } } };
    super('VALIDATION_ERROR', `Not sent: ${reason}`, details);
  }
}

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

/** A stored message as far as the rules read it: its kind, direction, sender, text and `metadata`. */
export interface TriggeringMessage {
  type: string;
  direction: string;
  sender: unknown;
  text: string | null;
  metadata: unknown;
}

/**
 * Why no automatic message may be sent about this message by the rules of mail, or undefined. Reads what
 * receiving records in `metadata.email` (return path, Auto-Submitted, Precedence, List-* headers, content
 * type, X-Auto-Response-Suppress) and the sender; a message recorded without them (`POST /messages`) is
 * judged by its sender alone, and a message of another kind (a text) has neither.
 */
export function silenceReason(message: Pick<TriggeringMessage, 'sender' | 'metadata'>): string | undefined {
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
    .select({ type: messages.type, direction: messages.direction, sender: messages.sender, text: messages.text, metadata: messages.metadata })
    .from(messages)
    .where(and(eq(messages.organizationId, orgId), eq(messages.id, id), isNull(messages.deletedAt)))
    .limit(1);
  return row ?? null;
}

// ------------------------------------------------------------------ kinds of message

/** How the rules read the messages of one kind (a message `type`: "email", "sms", …). */
export interface AutomaticMessageKind {
  /**
   * The recipients a queued message of the kind names (the operation's answer), each as the identity the
   * rules count: an email address (lower-cased), a phone number (E.164).
   */
  recipients(queued: Record<string, unknown>): (string | undefined)[];
  /** Why an automation must not answer a stored message of the kind, beyond the rules of mail every message is read by; or undefined. */
  silence?(db: DbOrTx, orgId: string, message: TriggeringMessage): Promise<string | undefined>;
}

const kinds = new Map<string, AutomaticMessageKind>();

/** Declares how the rules read one kind of message: called once by the module that sends that kind. */
export function defineAutomaticMessageKind(type: string, kind: AutomaticMessageKind) {
  kinds.set(type, kind);
}

/**
 * Refuses the step when a triggering message must not be answered (the run is then skipped with the reason):
 * by the rules of mail, then by its kind's own.
 */
export async function refuseSilenced(db: DbOrTx, orgId: string, found: (TriggeringMessage | null)[]) {
  for (const message of found) {
    if (!message) continue;
    const reason = silenceReason(message) ?? (await kinds.get(message.type)?.silence?.(db, orgId, message));
    if (reason) throw new AutomaticMessageRefused('id', reason);
  }
}

/**
 * The recipients of the messages a step queued, each once, as their kinds name them. A message of a kind
 * that declared none, or that names no recipient, is an error of the service, never a message that goes
 * uncounted.
 */
export function recipientsOf(queued: unknown[]): string[] {
  const all = new Set<string>();
  for (const message of queued) {
    const type = isRecord(message) && typeof message.type === 'string' ? message.type : undefined;
    const kind = type === undefined ? undefined : kinds.get(type);
    if (!kind) throw new Error(`Automatic messages of type "${type ?? '?'}" have no recipients declared (defineAutomaticMessageKind)`);
    const named = kind.recipients(message as Record<string, unknown>).filter((r): r is string => !!r);
    if (named.length === 0) throw new Error(`A queued message of type "${type}" names no recipient`);
    for (const r of named) all.add(r);
  }
  return [...all];
}

// ------------------------------------------------------------------ caps

export interface AutomaticMessageClaim {
  orgId: string;
  automationId: string;
  messageId: string | null;
  recipients: string[];
  now: Date;
  /** Recipients of automatic messages the organization may have in any hour. */
  perHour: number;
  /**
   * Whether the step is held to one message per recipient per day: in runs an event triggered (an answer to
   * what arrived, the loops RFC 3834 is about). A scheduled run sends as often as its schedule says.
   */
  oncePerDay: boolean;
}

/**
 * Counts a step's automatic messages against the caps, in the run's transaction: one message per
 * (automation, recipient) per UTC day when `oncePerDay` (a unique key, so concurrent processes cannot both
 * send) and `perHour` recipients per organization (counted under a transaction-scoped advisory lock of the
 * organization, so processes count one after the other). Throws `AutomaticMessageRefused` past a cap: the
 * run's savepoint, and with it the queued messages, is rolled back.
 */
export async function claimAutomaticMessages(tx: DbOrTx, claim: AutomaticMessageClaim): Promise<void> {
  if (claim.recipients.length === 0) return;
  await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext(${`automatic-messages:${claim.orgId}`}))`);
  const [recent] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(automaticMessages)
    .where(and(eq(automaticMessages.organizationId, claim.orgId), gt(automaticMessages.createdAt, new Date(claim.now.getTime() - 3600_000))));
  const sent = Number(recent?.n ?? 0);
  if (sent + claim.recipients.length > claim.perHour) {
    throw new AutomaticMessageRefused(
      'to',
      `the organization's automations already sent automatic messages to ${sent} recipients in the last hour; at most ${claim.perHour} an hour (AUTOMATIC_MESSAGES_PER_HOUR)`,
    );
  }
  const day = claim.oncePerDay ? claim.now.toISOString().slice(0, 10) : null;
  const written = await tx
    .insert(automaticMessages)
    .values(claim.recipients.map((recipient) => ({ organizationId: claim.orgId, automationId: claim.automationId, recipient, day, messageId: claim.messageId, createdAt: claim.now })))
    .onConflictDoNothing()
    .returning({ recipient: automaticMessages.recipient });
  if (written.length < claim.recipients.length) {
    const got = new Set(written.map((w) => w.recipient));
    const again = claim.recipients.find((r) => !got.has(r));
    throw new AutomaticMessageRefused('to', `this automation already sent ${again} an automatic message today; an automation sends each recipient at most one a day (RFC 3834 §2)`);
  }
}

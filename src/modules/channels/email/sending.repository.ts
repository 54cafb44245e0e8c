import { randomUUID } from 'node:crypto';
import { and, asc, eq, inArray, isNull } from 'drizzle-orm';
import addressparser from 'nodemailer/lib/addressparser';
import { AppError, fieldError, notFound, type ErrorTree } from '../../../core/errors.js';
import type { Actor, OperationContext } from '../../../core/operation.js';
import type { DbOrTx } from '../../../db/client.js';
import { channels, mailOutbox, messageAttachments, messages, type OutboxMail } from '../../../db/schema.js';
import { sendingChannelOf } from '../channels.repository.js';
import { AutomaticMessageRefused, defineAutomaticMessageKind, silenceReason } from '../automatic-messages.js';
import { contactEmailIdFor, copyAttachment, createMessage, insertAttachments, type MessageJson, type MessageRow } from '../../messages/messages.repository.js';
import { queuedNotice } from '../../outbox.js';
import { newMessageId } from './outgoing-mail.js';
import {
  emailProblem,
  headerValueProblem,
  MAX_ATTACHMENTS,
  MAX_RECIPIENTS,
  OUTGOING_ATTACHMENTS_MAX_BYTES,
  type AttachmentValues,
  type MailAddress,
  type MessageForwardValues,
  type MessageReplyValues,
  type MessageSendValues,
} from './sending.schemas.js';
import { messageIdList, normalizeMessageId, resolveThreadId } from '../../messages/threads.js';

/**
 * Sending: each operation records the outgoing message (`status` "queued") and its outbox row in the
 * operation's transaction; the mail sender (src/workers/mail-sender.ts) sends it later through the
 * channel's relay. Loop safety of automatic mail (RFC 3834) is enforced here, for writes by an automation.
 */

type ChannelRow = typeof channels.$inferSelect;

/** A live channel of the organization that can send; a 400 at `field` otherwise. */
const sendingChannel = (db: DbOrTx, orgId: string, channelId: string, field: string): Promise<ChannelRow> =>
  sendingChannelOf(db, orgId, channelId, field, (channel) => (channel.outbound ? undefined : { message: 'The channel has no outbound relay: set its `outbound` settings to send through it' }));

/** The From of a channel's mail: its `outbound.from` ("Name <address>" or an address), else its address with its name. */
export function senderOf(channel: Pick<ChannelRow, 'address' | 'name' | 'outbound'>): MailAddress {
  const configured = channel.outbound?.from ? addressparser(channel.outbound.from, { flatten: true })[0] : undefined;
  if (configured?.address && !emailProblem(configured.address)) {
    return configured.name && !headerValueProblem(configured.name) ? { email: configured.address, name: configured.name } : { email: configured.address };
  }
  return channel.name && !headerValueProblem(channel.name) ? { email: channel.address, name: channel.name } : { email: channel.address };
}

/** The addresses a stored value names: `"a@x"`, `{email|address, name}`, a list of them, or mailparser's `{value: [...]}`. */
export function addressesOf(value: unknown): MailAddress[] {
  if (value === null || value === undefined) return [];
  if (Array.isArray(value)) return value.flatMap(addressesOf);
  if (typeof value === 'string') {
    return addressparser(value, { flatten: true })
      .filter((a) => a.address && !emailProblem(a.address))
      .map((a) => (a.name && !headerValueProblem(a.name) ? { email: a.address, name: a.name } : { email: a.address }));
  }
  if (typeof value !== 'object') return [];
  const record = value as Record<string, unknown>;
  if (Array.isArray(record.value)) return addressesOf(record.value);
  const email = typeof record.email === 'string' ? record.email : typeof record.address === 'string' ? record.address : undefined;
  if (!email || emailProblem(email)) return [];
  const name = typeof record.name === 'string' && record.name && !headerValueProblem(record.name) ? record.name : undefined;
  return [name ? { email, name } : { email }];
}

const lower = (a: MailAddress) => a.email.toLowerCase();

/** Each address once (case-insensitively), in order, leaving out those in `except`. */
function distinct(list: MailAddress[], except: Set<string> = new Set()): MailAddress[] {
  const seen = new Set(except);
  return list.filter((a) => (seen.has(lower(a)) ? false : (seen.add(lower(a)), true)));
}

/** The addresses of the organization's live channels, lower-cased: automatic mail never goes to them. */
async function ownAddresses(db: DbOrTx, orgId: string): Promise<Set<string>> {
  const rows = await db
    .select({ address: channels.address })
    .from(channels)
    .where(and(eq(channels.organizationId, orgId), isNull(channels.deletedAt)));
  return new Set(rows.map((r) => r.address.toLowerCase()));
}

/** The `metadata.email` of a stored message (as receiving and sending record it), or an empty object. */
function emailMetadata(message: MessageRow): Record<string, unknown> {
  const metadata = message.metadata as { email?: unknown } | null;
  return metadata && typeof metadata.email === 'object' && metadata.email !== null ? (metadata.email as Record<string, unknown>) : {};
}

const text = (value: unknown) => (typeof value === 'string' ? value : undefined);

async function liveMessage(db: DbOrTx, orgId: string, id: string): Promise<MessageRow> {
  const [row] = await db
    .select()
    .from(messages)
    .where(and(eq(messages.organizationId, orgId), eq(messages.id, id), isNull(messages.deletedAt)))
    .limit(1);
  if (!row) throw notFound('Message');
  const { searchVector: _searchVector, ...message } = row;
  return message;
}

/** The headers of the message a new one answers: its Message-ID, the references, the subject. */
function threadOf(original: MessageRow) {
  const email = emailMetadata(original);
  const messageId = normalizeMessageId(text(email.messageId)) ?? normalizeMessageId(original.providerMessageId);
  const references = messageIdList(email.references as string | string[] | undefined);
  return {
    messageId,
    // RFC 5322 §3.6.4: the parent's References (or In-Reply-To) followed by the parent's id; the last 20 are kept.
    references: messageId ? [...references.filter((r) => r !== messageId), messageId].slice(-20) : references.slice(-20),
    subject: text(email.subject) ?? '',
  };
}

const prefixed = (prefix: string, pattern: RegExp, subject: string) => {
  const clean = subject.replace(/[\r\n]+/g, ' ').trim();
  return (pattern.test(clean) ? clean : `${prefix}${clean}`).slice(0, 998);
};

// ------------------------------------------------------------------ loop safety (RFC 3834)

// The rules themselves (which messages stay unanswered, the daily and hourly caps) live in
// src/modules/automations/automatic-messages.ts; the automation engine applies them to every step that sends.
export { AutomaticMessageRefused };
const loopRefusal = (field: string, reason: string) => new AutomaticMessageRefused(field, reason);

// An email's recipients, as the rules count them: every address of its to, cc and bcc, lower-cased.
defineAutomaticMessageKind('email', {
  recipients(queued) {
    const email = (queued.metadata as { email?: Record<string, unknown> } | null)?.email ?? {};
    return [email.to, email.cc, email.bcc].flatMap(addressesOf).map(lower);
  },
});

const utcDay = (at: Date) => at.toISOString().slice(0, 10);

/** Refuses automatic mail to the organization's own channel addresses (each would come back as a new message). */
async function refuseOwnAddresses(db: DbOrTx, orgId: string, recipients: MailAddress[], field: string) {
  const own = await ownAddresses(db, orgId);
  const looping = recipients.find((a) => own.has(lower(a)));
  if (looping) throw loopRefusal(field, `${looping.email} is one of the organization's own channel addresses; automations never send mail to them`);
}

// ------------------------------------------------------------------ attachments

/** An attachment of a message being queued: uploaded bytes, or a copy of an attachment the organization has. */
type OutgoingAttachment =
  | { id: string; filename: string; contentType: string; size: number; contentId: null; content: Buffer }
  | { id: string; filename: string | null; contentType: string; size: number; contentId: string | null; copyOf: string };

type KeptAttachment = { id: string; filename: string | null; contentType: string; size: number; contentId: string | null };

const keptColumns = {
  id: messageAttachments.id,
  filename: messageAttachments.filename,
  contentType: messageAttachments.contentType,
  size: messageAttachments.size,
  contentId: messageAttachments.contentId,
};

/** The kept attachments of a live message of the organization, or those with the given ids, without content. */
async function keptAttachments(db: DbOrTx, orgId: string, where: { messageId: string } | { ids: string[] }): Promise<KeptAttachment[]> {
  if ('ids' in where && where.ids.length === 0) return [];
  return db
    .select(keptColumns)
    .from(messageAttachments)
    .innerJoin(messages, eq(messages.id, messageAttachments.messageId))
    .where(
      and(
        eq(messageAttachments.organizationId, orgId),
        eq(messages.organizationId, orgId),
        isNull(messages.deletedAt),
        'ids' in where ? inArray(messageAttachments.id, where.ids) : eq(messageAttachments.messageId, where.messageId),
      ),
    )
    .orderBy(asc(messageAttachments.createdAt), asc(messageAttachments.id));
}

/**
 * The attachments of a request (uploads decoded, ids looked up in the organization: another organization's
 * is unknown here), after `carried` (a forward's originals); a 400 at the field for an unknown id, and at
 * `attachments` past the count or the size limit.
 */
async function outgoingAttachments(db: DbOrTx, orgId: string, given: AttachmentValues[] | undefined, carried: KeptAttachment[] = []): Promise<OutgoingAttachment[]> {
  const list = given ?? [];
  const ids = list.flatMap((a) => (a.attachmentId !== undefined ? [a.attachmentId] : []));
  const found = new Map((await keptAttachments(db, orgId, { ids })).map((a) => [a.id, a]));
  const copy = (a: KeptAttachment): OutgoingAttachment => ({ id: randomUUID(), filename: a.filename, contentType: a.contentType, size: a.size, contentId: a.contentId, copyOf: a.id });
  const out: OutgoingAttachment[] = carried.map(copy);
  list.forEach((a, i) => {
    if (a.attachmentId !== undefined) {
      const kept = found.get(a.attachmentId);
      if (!kept) throw attachmentIdError(i);
      out.push(copy(kept));
      return;
    }
    // The schema made sure an upload has its content and name.
    const content = Buffer.from(a.content ?? '', 'base64');
    out.push({ id: randomUUID(), filename: a.filename ?? 'attachment', contentType: (a.contentType ?? 'application/octet-stream').toLowerCase(), size: content.length, contentId: null, content });
  });
  if (out.length > MAX_ATTACHMENTS) throw fieldError('attachments', `At most ${MAX_ATTACHMENTS} attachments in all (the forwarded message's included)`);
  const total = out.reduce((sum, a) => sum + a.size, 0);
  if (total > OUTGOING_ATTACHMENTS_MAX_BYTES) {
    throw fieldError('attachments', `The attachments come to ${total} bytes; at most ${OUTGOING_ATTACHMENTS_MAX_BYTES} bytes in all (the forwarded message's included)`);
  }
  return out;
}

/** Kept attachments in the order the message lists them (`metadata.email.attachments`, as they came in the mail). */
function inListedOrder(kept: KeptAttachment[], listed: unknown): KeptAttachment[] {
  const ids = Array.isArray(listed) ? listed.map((a) => (a && typeof a === 'object' ? (a as { id?: unknown }).id : undefined)) : [];
  const at = (id: string) => (ids.includes(id) ? ids.indexOf(id) : ids.length);
  return [...kept].sort((x, y) => at(x.id) - at(y.id));
}

/** A 400 at `attachments[i].attachmentId`, in the shape of the validation's tree (`items`). */
function attachmentIdError(i: number): AppError {
  const item: ErrorTree = { errors: [], properties: { attachmentId: { errors: ['No attachment with this id exists in the organization'] } } };
  const details: ErrorTree = { errors: [], properties: { attachments: { errors: [], items: Array.from({ length: i + 1 }, (_, k) => (k === i ? item : null)) } } };
  return new AppError('VALIDATION_ERROR', 'The request is invalid', details);
}

/** Stores a queued message's attachments: uploads as given, copies inside the database (the bytes never pass through here). */
async function storeAttachments(db: DbOrTx, orgId: string, messageId: string, list: OutgoingAttachment[]) {
  await insertAttachments(
    db,
    orgId,
    messageId,
    list.flatMap((a) => ('content' in a ? [{ id: a.id, filename: a.filename, contentType: a.contentType, size: a.size, contentId: null, content: a.content }] : [])),
  );
  for (const a of list) if ('copyOf' in a) await copyAttachment(db, orgId, messageId, a);
}

// ------------------------------------------------------------------ queueing

interface Outgoing {
  channel: ChannelRow;
  to: MailAddress[];
  cc: MailAddress[];
  bcc: MailAddress[];
  subject: string;
  text: string;
  html?: string | undefined;
  inReplyTo?: string | undefined;
  references: string[];
  threadId: string;
  /** For an automatic reply: the key that allows one reply per sender per automation per day. */
  autoReplyKey?: string | undefined;
  autoSubmitted?: OutboxMail['autoSubmitted'];
  attachments?: OutgoingAttachment[];
}

/**
 * Records the outgoing message (`queued`) and its outbox row, in the caller's transaction. The Message-ID
 * is made here, once: every attempt of the sender sends this same id.
 */
async function queue(db: DbOrTx, orgId: string, actor: Actor, out: Outgoing): Promise<MessageJson> {
  const from = senderOf(out.channel);
  const now = new Date();
  const mail: OutboxMail = {
    messageId: newMessageId(from.email),
    date: now.toISOString(),
    from,
    to: out.to,
    cc: out.cc,
    bcc: out.bcc,
    subject: out.subject,
    text: out.text,
    ...(out.html !== undefined ? { html: out.html } : {}),
    ...(out.inReplyTo ? { inReplyTo: out.inReplyTo } : {}),
    references: out.references,
    ...(out.autoSubmitted ? { autoSubmitted: out.autoSubmitted } : {}),
    ...(out.attachments?.length ? { attachments: out.attachments.map((a) => ({ id: a.id, filename: a.filename, contentType: a.contentType, contentId: a.contentId })) } : {}),
  };
  const message = await createMessage(db, orgId, {
    type: 'email',
    direction: 'outgoing',
    status: 'queued',
    channelId: out.channel.id,
    providerName: 'smtp',
    threadId: out.threadId,
    text: out.text,
    // As for received mail, the subject is the summary until someone writes a better one (lists show it, search finds it).
    ...(out.subject ? { summary: out.subject } : {}),
    timestamp: mail.date,
    sender: from,
    recipient: out.to[0]!,
    // The organization's contact email the mail goes to (its first To), as a received message names its sender's.
    emailAddressId: await contactEmailIdFor(db, orgId, out.to[0]!.email),
    metadata: {
      email: {
        messageId: mail.messageId,
        inReplyTo: mail.inReplyTo ?? null,
        references: mail.references,
        subject: mail.subject,
        to: mail.to,
        cc: mail.cc,
        bcc: mail.bcc,
        ...(mail.html !== undefined ? { html: true } : {}),
        autoSubmitted: mail.autoSubmitted ?? null,
        attachments: (out.attachments ?? []).map((a) => ({ id: a.id, filename: a.filename, contentType: a.contentType, size: a.size, stored: true })),
      },
    },
  });
  if (out.attachments?.length) await storeAttachments(db, orgId, message.id, out.attachments);
  const [queued] = await db
    .insert(mailOutbox)
    .values({
      organizationId: orgId,
      messageId: message.id,
      channelId: out.channel.id,
      mail,
      actorType: actor.type,
      actorId: actor.id,
      depth: actor.depth,
      autoReplyKey: out.autoReplyKey ?? null,
    })
    .onConflictDoNothing()
    .returning({ id: mailOutbox.id, queued: queuedNotice('mail_outbox') });
  // The one conflict possible is the daily automatic-reply key (the message id is new).
  if (!queued) throw loopRefusal('id', `this automation already answered ${out.to[0]!.email} today; automations answer a sender at most once a day`);
  return message;
}

const automatic = (ctx: OperationContext) => ctx.actor.type === 'automation';

/** POST /messages/send. */
export async function sendMessage(ctx: OperationContext, input: MessageSendValues): Promise<MessageJson> {
  const channel = await sendingChannel(ctx.db, ctx.orgId, input.channelId, 'channelId');
  let inReplyTo: string | undefined;
  let references: string[] = [];
  let threadId: string | undefined;
  if (input.replyToMessageId) {
    const original = await liveMessage(ctx.db, ctx.orgId, input.replyToMessageId).catch((err: unknown) => {
      throw err instanceof AppError && err.code === 'NOT_FOUND' ? fieldError('replyToMessageId', 'No message with this id exists in the organization') : err;
    });
    const thread = threadOf(original);
    inReplyTo = thread.messageId;
    references = thread.references;
    threadId = original.threadId ?? undefined;
  }
  const to = distinct(input.to);
  const cc = distinct(input.cc ?? [], new Set(to.map(lower)));
  const bcc = distinct(input.bcc ?? [], new Set([...to, ...cc].map(lower)));
  if (automatic(ctx)) await refuseOwnAddresses(ctx.db, ctx.orgId, [...to, ...cc, ...bcc], 'to');
  const attachments = await outgoingAttachments(ctx.db, ctx.orgId, input.attachments);
  threadId ??= await resolveThreadId(ctx.db, ctx.orgId, { inReplyTo, references });
  return queue(ctx.db, ctx.orgId, ctx.actor, {
    channel,
    to,
    cc,
    bcc,
    subject: input.subject,
    text: input.text,
    html: input.html,
    attachments,
    inReplyTo,
    references,
    threadId,
    ...(automatic(ctx) ? { autoSubmitted: 'auto-generated' as const } : {}),
  });
}

/** POST /messages/{id}/reply. */
export async function replyToMessage(ctx: OperationContext, input: MessageReplyValues): Promise<MessageJson> {
  const original = await liveMessage(ctx.db, ctx.orgId, input.id);
  if (!original.channelId) {
    throw fieldError('id', 'The message did not come through a channel, so there is no channel to answer through: use POST /messages/send with a channelId');
  }
  const channel = await sendingChannel(ctx.db, ctx.orgId, original.channelId, 'id');
  const email = emailMetadata(original);
  const own = await ownAddresses(ctx.db, ctx.orgId);
  own.add(channel.address.toLowerCase());
  const incoming = original.direction === 'incoming';
  // Incoming: answer its Reply-To, else its sender. Outgoing (a follow-up to our own message): its recipients again.
  const primary = incoming ? (addressesOf(email.replyTo).length ? addressesOf(email.replyTo) : addressesOf(original.sender)) : addressesOf(email.to ?? original.recipient);
  const others = input.replyAll ? [...(incoming ? [...addressesOf(email.to ?? original.recipient)] : []), ...addressesOf(email.cc)] : [];
  let to = distinct(primary, incoming ? own : new Set());
  let cc = distinct(others, new Set([...own, ...to.map(lower)]));
  // An automatic reply goes to one address, its first Reply-To or its sender, however many it names (RFC 3834 §4).
  if (automatic(ctx)) [to, cc] = [to.slice(0, 1), []];
  if (to.length + cc.length > MAX_RECIPIENTS) {
    throw fieldError('id', `The reply would go to ${to.length + cc.length} addresses (its Reply-To${input.replyAll ? ', To and Cc' : ''}); at most ${MAX_RECIPIENTS}: use POST /messages/send to choose them`);
  }

  let autoReplyKey: string | undefined;
  if (automatic(ctx)) {
    const reason = silenceReason(original);
    if (reason) throw loopRefusal('id', reason);
    const sender = addressesOf(original.sender)[0];
    if (sender && own.has(lower(sender))) throw loopRefusal('id', `the message comes from ${sender.email}, one of the organization's own channel addresses; automations never answer it`);
    const looping = [...to, ...cc].find((a) => own.has(lower(a)));
    if (looping) throw loopRefusal('id', `${looping.email} is one of the organization's own channel addresses; automations never send mail to them`);
    const answered = sender ?? to[0] ?? cc[0];
    autoReplyKey = answered && `${ctx.actor.id}:${lower(answered)}:${utcDay(new Date())}`;
  }

  if (to.length === 0 && cc.length === 0) throw fieldError('id', 'The message names no address to answer (no sender or Reply-To, or only the organization\'s own addresses)');

  const thread = threadOf(original);
  const attachments = await outgoingAttachments(ctx.db, ctx.orgId, input.attachments);
  return queue(ctx.db, ctx.orgId, ctx.actor, {
    channel,
    attachments,
    to: to.length ? to : cc,
    cc: to.length ? cc : [],
    bcc: [],
    subject: prefixed('Re: ', /^re:/i, thread.subject),
    text: input.text,
    html: input.html,
    inReplyTo: thread.messageId,
    references: thread.references,
    threadId: original.threadId ?? (await resolveThreadId(ctx.db, ctx.orgId, { inReplyTo: thread.messageId, references: thread.references })),
    autoReplyKey,
    ...(automatic(ctx) ? { autoSubmitted: 'auto-replied' as const } : {}),
  });
}

const describeAddresses = (list: MailAddress[]) => list.map((a) => (a.name ? `${a.name} <${a.email}>` : a.email)).join(', ');

/** POST /messages/{id}/forward: the message's text below a note and a header block, in the message's thread. */
export async function forwardMessage(ctx: OperationContext, input: MessageForwardValues): Promise<MessageJson> {
  const original = await liveMessage(ctx.db, ctx.orgId, input.id);
  const channelId = input.channelId ?? original.channelId;
  if (!channelId) throw fieldError('channelId', 'The message did not come through a channel: give the channelId to send through');
  const channel = await sendingChannel(ctx.db, ctx.orgId, channelId, input.channelId ? 'channelId' : 'id');
  const to = distinct(input.to);
  if (automatic(ctx)) await refuseOwnAddresses(ctx.db, ctx.orgId, to, 'to');
  const email = emailMetadata(original);
  const thread = threadOf(original);
  const block = [
    '---------- Forwarded message ---------',
    `From: ${describeAddresses(addressesOf(original.sender))}`,
    `Date: ${original.timestamp.toUTCString()}`,
    `Subject: ${thread.subject}`,
    `To: ${describeAddresses(addressesOf(email.to ?? original.recipient))}`,
    ...(addressesOf(email.cc).length ? [`Cc: ${describeAddresses(addressesOf(email.cc))}`] : []),
    '',
    original.text ?? '',
  ].join('\n');
  // The original's kept attachments go along (copied in the database), then any given.
  const carried = input.includeAttachments ? inListedOrder(await keptAttachments(ctx.db, ctx.orgId, { messageId: original.id }), email.attachments) : [];
  const attachments = await outgoingAttachments(ctx.db, ctx.orgId, input.attachments, carried);
  return queue(ctx.db, ctx.orgId, ctx.actor, {
    channel,
    attachments,
    to,
    cc: [],
    bcc: [],
    subject: prefixed('Fwd: ', /^(fwd?|fw):/i, thread.subject),
    text: (input.text ? `${input.text}\n\n${block}` : block).slice(0, 100_000),
    references: [],
    // A forward stays in the conversation it came from (as in a shared inbox): answers to it join it too.
    threadId: original.threadId ?? (await resolveThreadId(ctx.db, ctx.orgId, {})),
    ...(automatic(ctx) ? { autoSubmitted: 'auto-generated' as const } : {}),
  });
}

/** Ids of outbox rows by message, for tests and the sender. */
export const outboxOf = (db: DbOrTx, messageIds: string[]) => db.select().from(mailOutbox).where(inArray(mailOutbox.messageId, messageIds));

import { createHash } from 'node:crypto';
import { and, asc, eq, inArray, isNull, or, sql, type SQL } from 'drizzle-orm';
import { decryptSecret } from '../../../core/encryption.js';
import { AppError, fieldError } from '../../../core/errors.js';
import type { Actor, OperationContext } from '../../../core/operation.js';
import type { Page, PageInput } from '../../../core/pagination.js';
import type { DbOrTx } from '../../../db/client.js';
import { channels, contactPhoneNumbers, messages, smsOptOuts, smsOutbox, type SmsChannelSettings } from '../../../db/schema.js';
import { recordEvents } from '../../events/events.recorder.js';
import type { CommittedWork } from '../../events/events.signal.js';
import { channelRows, sealSecret, sendingChannelOf, type ChannelRow } from '../channels.repository.js';
import { getMessage, insertMessages, type MessageJson, type MessageRow } from '../../messages/messages.repository.js';
import { AutomaticMessageRefused, defineAutomaticMessageKind } from '../automatic-messages.js';
import { queuedNotice } from '../../outbox.js';
import { isAlphanumericSender, isShortCode } from './numbers.js';
import type { ProviderWithSecret, StatusReport } from './provider.js';
import { providerDefinition, providerNameOf } from './providers/index.js';
import type { SmsChannelCreate, SmsSendValues } from './sms.schemas.js';
import { smsSize } from './segments.js';
import type { SmsProviderUpdate } from './sms.schemas.js';
import type { z } from 'zod';

/** The origin the hooks' URLs are built from (PUBLIC_URL); set once by the application. */
let publicUrl = 'http://localhost:3000';
export const setSmsPublicUrl = (url: string) => void (publicUrl = url.replace(/(?<!\/)\/+$/, ''));
export const hookUrl = (channelId: string, status = false) => `${publicUrl}/hooks/sms/${channelId}${status ? '/status' : ''}`;

// ------------------------------------------------------------------ channels

/** A text channel as the API answers it: the provider without its secrets, the URLs to paste into its console (a provider with a webhook). */
export function toSmsChannel(row: ChannelRow) {
  const { inboundSecret: _i, outboundSecret, inbound: _in, outbound: _out, sms, sendFailures: _failures, sendPausedUntil: _paused, ...rest } = row;
  const settings = sms!;
  const provider = providerDefinition(settings.provider.kind);
  const hooks = provider.webhook !== undefined;
  return {
    ...rest,
    inbound: { mode: 'sms' as const, webhookUrl: hooks ? hookUrl(row.id) : null, statusUrl: hooks ? hookUrl(row.id, true) : null },
    outbound: null,
    provider: provider.json(settings.provider, outboundSecret !== null),
    rate: settings.rate,
    helpText: settings.helpText,
    warnings: [] as string[],
  };
}

type ProviderInput = z.output<typeof SmsProviderUpdate>;

/** The provider's stored settings (without its secrets) and its secret with the field it came in. */
const providerSettings = (provider: ProviderInput) => providerDefinition((provider as { kind: string }).kind).store(provider as Record<string, unknown>);
const seal = (secret: string, field: string) => sealSecret(secret, ['provider', field]);

export async function createSmsChannel(db: DbOrTx, orgId: string, input: SmsChannelCreate) {
  const provider = providerSettings(input.provider);
  const taken = await db
    .select({ id: channels.id })
    .from(channels)
    .where(channelRows.live(orgId, eq(channels.address, input.address)))
    .limit(1);
  if (taken.length > 0) throw fieldError('address', 'A channel with this address already exists in the organization');
  const secret = seal(provider.secret, provider.field);
  const settings: SmsChannelSettings = { provider: provider.settings, rate: input.rate, helpText: input.helpText ?? null };
  const row = await channelRows.insert(db, {
    organizationId: orgId,
    type: 'sms',
    name: input.name,
    address: input.address,
    inbound: { mode: 'sms' },
    outbound: null,
    outboundSecret: secret,
    sms: settings,
  });
  return toSmsChannel(row);
}

export interface SmsChannelPatch {
  name?: string | undefined;
  status?: 'active' | 'disabled' | undefined;
  provider?: z.output<typeof SmsProviderUpdate> | undefined;
  rate?: number | undefined;
  helpText?: string | null | undefined;
}

/** PATCH of a text channel: name, status, provider (a secret left out is kept), rate, help text. */
export async function updateSmsChannel(db: DbOrTx, orgId: string, current: ChannelRow, patch: SmsChannelPatch) {
  const settings = { ...current.sms! };
  const values: Partial<typeof channels.$inferInsert> = {};
  if (patch.provider !== undefined) {
    const provider = providerSettings(patch.provider);
    values.outboundSecret = seal(provider.secret, provider.field);
    settings.provider = provider.settings;
    // New provider settings start afresh, as new relay settings do for email: the provider's error ends (the
    // next failure sets it again).
    if (current.lastError !== null && /^(provider|SMPP): /.test(current.lastError)) {
      values.lastError = null;
      if (current.status === 'error') values.status = 'active';
    }
  }
  if (patch.rate !== undefined) settings.rate = patch.rate;
  if (patch.helpText !== undefined) settings.helpText = patch.helpText;
  values.sms = settings;
  if (patch.name !== undefined) values.name = patch.name;
  if (patch.status !== undefined) {
    values.status = patch.status;
    if (patch.status === 'active') values.lastError = null;
  }
  return toSmsChannel(await channelRows.update(db, orgId, current.id, values));
}

/** A live text channel with its decrypted secret; undefined when it is missing, deleted or not a text channel. Not organization-scoped (the hooks and workers know the id only). */
export async function loadSmsChannel(db: DbOrTx, channelId: string): Promise<(ChannelRow & { provider: ProviderWithSecret }) | undefined> {
  const [row] = await db
    .select()
    .from(channels)
    .where(and(eq(channels.id, channelId), isNull(channels.deletedAt), eq(channels.type, 'sms')))
    .limit(1);
  return row && withProviderSecret(row);
}

/**
 * What a text channel's received texts depend on, as one value: its provider's secret (as stored, encrypted),
 * its provider settings, its status and its address. `row` names the channel's row in the statement. Any change
 * of these (a rotated auth token or signing key, another provider, the channel disabled, a secret encrypted
 * again with a new key) gives another value.
 */
export const smsChannelVersion = (row: SQL) => sql<string>`md5(ROW(${row}.outbound_secret, ${row}.sms, ${row}.status, ${row}.address, ${row}.type)::text)`;

/** `loadSmsChannel` with the channel's version (`smsChannelVersion`), read in the same round trip. */
export async function loadVersionedSmsChannel(db: DbOrTx, channelId: string): Promise<{ channel: ChannelRow & { provider: ProviderWithSecret }; version: string } | undefined> {
  const [found] = await db
    .select({ row: channels, version: smsChannelVersion(sql`${sql.identifier('channels')}`) })
    .from(channels)
    .where(and(eq(channels.id, channelId), isNull(channels.deletedAt), eq(channels.type, 'sms')))
    .limit(1);
  const channel = found && withProviderSecret(found.row);
  return channel && { channel, version: found.version };
}

/** A text channel with its provider's decrypted secret; undefined without one. */
export function withProviderSecret(row: ChannelRow): (ChannelRow & { provider: ProviderWithSecret }) | undefined {
  if (!row.sms || row.outboundSecret === null) return undefined;
  return { ...row, provider: { ...row.sms.provider, secret: decryptSecret(row.outboundSecret) } };
}


// ------------------------------------------------------------------ threads and contacts

/** One thread per (channel, other party's number): the same id whichever message comes first. */
export function smsThreadId(channelId: string, number: string): string {
  const h = createHash('sha256').update(`sms:${channelId}:${number}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((Number.parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The organization's contact phone number equal to `number` (E.164), oldest first; null when none. */
export async function contactPhoneIdFor(db: DbOrTx, orgId: string, number: string): Promise<string | null> {
  if (!number.startsWith('+')) return null;
  const [row] = await contactPhoneQuery(db, orgId, number);
  return row?.id ?? null;
}

/** The same as a subquery, for a statement that writes it (null for a number that is not E.164). */
export const contactPhoneIdOf = (db: DbOrTx, orgId: string, number: string) => (number.startsWith('+') ? sql<string | null>`(${contactPhoneQuery(db, orgId, number)})` : null);

const contactPhoneQuery = (db: DbOrTx, orgId: string, number: string) =>
  db
    .select({ id: contactPhoneNumbers.id })
    .from(contactPhoneNumbers)
    .where(and(eq(contactPhoneNumbers.organizationId, orgId), eq(contactPhoneNumbers.phoneNumber, number), isNull(contactPhoneNumbers.deletedAt)))
    .orderBy(contactPhoneNumbers.createdAt, contactPhoneNumbers.id)
    .limit(1);

// ------------------------------------------------------------------ opt-outs

export type OptOutRow = typeof smsOptOuts.$inferSelect;
const optOutJson = (row: OptOutRow) => ({ id: row.id, channelId: row.channelId, phoneNumber: row.phoneNumber, source: row.source as 'keyword' | 'provider' | 'api', createdAt: row.createdAt.toISOString() });
export type OptOutJson = ReturnType<typeof optOutJson>;

/**
 * The live channel of the organization; 404 otherwise. Opt-outs are read and written on any channel (only
 * text channels consult them), so that the channel routes behave alike whatever the kind.
 */
export async function smsChannelOf(db: DbOrTx, orgId: string, channelId: string): Promise<ChannelRow> {
  return channelRows.get(db, orgId, channelId);
}

export async function listOptOuts(db: DbOrTx, orgId: string, channelId: string, page: PageInput): Promise<Page<OptOutJson>> {
  await smsChannelOf(db, orgId, channelId);
  const where = and(eq(smsOptOuts.organizationId, orgId), eq(smsOptOuts.channelId, channelId));
  const [rows, [count]] = await Promise.all([
    db.select().from(smsOptOuts).where(where).orderBy(asc(smsOptOuts.createdAt), asc(smsOptOuts.id)).limit(page.limit).offset(page.offset ?? 0),
    db.select({ n: sql<number>`count(*)::int` }).from(smsOptOuts).where(where),
  ]);
  return { items: rows.map(optOutJson), total: count?.n ?? 0 };
}

/**
 * Records an opt-out (kept when it exists) and fails the messages to the number still queued on the channel
 * (`failQueued`: its kind's outbox; texts' by default). Answers the opt-out and whether it is new. The caller
 * records the events.
 */
export async function addOptOut(
  db: DbOrTx,
  orgId: string,
  channelId: string,
  phoneNumber: string,
  source: 'keyword' | 'provider' | 'api',
  failQueued: (db: DbOrTx, channelId: string, phoneNumber: string) => Promise<string[]> = failQueuedTo,
): Promise<{ optOut: OptOutJson; created: boolean; failed: string[] }> {
  const [inserted] = await db.insert(smsOptOuts).values({ organizationId: orgId, channelId, phoneNumber, source }).onConflictDoNothing().returning();
  const row = inserted ?? (await db.select().from(smsOptOuts).where(and(eq(smsOptOuts.channelId, channelId), eq(smsOptOuts.phoneNumber, phoneNumber))).limit(1))[0]!;
  const failed = await failQueued(db, channelId, phoneNumber);
  return { optOut: optOutJson(row), created: Boolean(inserted), failed };
}

export const OPTED_OUT_REASON = 'The recipient opted out of texts from this channel (STOP); it was not sent';

/** Texts to the number still waiting in the outbox (not yet transmitted) fail; answers their message ids. */
export async function failQueuedTo(db: DbOrTx, channelId: string, phoneNumber: string): Promise<string[]> {
  const rows = await db
    .update(smsOutbox)
    .set({ status: 'failed', lastError: OPTED_OUT_REASON, leaseUntil: null, updatedAt: new Date() })
    .where(and(eq(smsOutbox.channelId, channelId), sql`${smsOutbox.sms}->>'to' = ${phoneNumber}`, or(eq(smsOutbox.status, 'pending'), and(eq(smsOutbox.status, 'sending'), isNull(smsOutbox.transmittedAt)))))
    .returning({ messageId: smsOutbox.messageId });
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.messageId);
  await db.update(messages).set({ status: 'failed', statusReason: OPTED_OUT_REASON, updatedAt: new Date() }).where(inArray(messages.id, ids));
  return ids;
}

/** Removes the opt-out of a number (or with this id, when `numberOrId` is a UUID). */
export async function removeOptOut(db: DbOrTx, orgId: string, channelId: string, numberOrId: string): Promise<OptOutJson | undefined> {
  const which = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(numberOrId) ? eq(smsOptOuts.id, numberOrId) : eq(smsOptOuts.phoneNumber, numberOrId);
  const [row] = await db
    .delete(smsOptOuts)
    .where(and(eq(smsOptOuts.organizationId, orgId), eq(smsOptOuts.channelId, channelId), which))
    .returning();
  return row && optOutJson(row);
}

export async function isOptedOut(db: DbOrTx, channelId: string, phoneNumber: string): Promise<boolean> {
  return (await optedOutAmong(db, channelId, [phoneNumber])).size > 0;
}

/** Which of `numbers` opted out of the channel's texts (one statement). */
export async function optedOutAmong(db: DbOrTx, channelId: string, numbers: string[]): Promise<Set<string>> {
  if (numbers.length === 0) return new Set();
  const rows = await db
    .select({ number: smsOptOuts.phoneNumber })
    .from(smsOptOuts)
    .where(and(eq(smsOptOuts.channelId, channelId), inArray(smsOptOuts.phoneNumber, numbers)));
  return new Set(rows.map((r) => r.number));
}

/** Records the message events of texts failed by an opt-out (`message.failed`, one each). */
export async function announceFailed(db: DbOrTx, orgId: string, actor: Actor, ids: string[], work?: CommittedWork) {
  const list = [];
  for (const id of ids) {
    const data = await getMessage(db, orgId, id).catch(() => null);
    if (data) list.push({ type: 'message.failed' as const, organizationId: orgId, resourceId: id, data });
  }
  const recorded = await recordEvents(db, actor, list);
  work?.add({ ...recorded, types: ['message.failed'] });
}

// ------------------------------------------------------------------ keywords

const STOP = new Set(['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT']);
const START = new Set(['START', 'YES', 'UNSTOP']);

/** The carrier keyword a whole text is (any case, surrounding space and a final full stop ignored), if any. */
export function keywordOf(text: string): 'stop' | 'start' | 'help' | undefined {
  const word = text.trim().replace(/[.!]$/, '').toUpperCase();
  if (STOP.has(word)) return 'stop';
  if (START.has(word)) return 'start';
  if (word === 'HELP' || word === 'INFO') return 'help';
  return undefined;
}

/** Why a received text must not be answered automatically, or undefined. */
export function automaticTextReason(original: Pick<MessageRow, 'sender' | 'text'>, ownNumbers: Set<string>): string | undefined {
  const from = partyOf(original.sender);
  if (!from) return 'the text names no sender number';
  if (isShortCode(from)) return `${from} is a short code; automations never answer short codes`;
  if (!from.startsWith('+') && isAlphanumericSender(from)) return `${from} is an alphanumeric sender, which cannot receive texts`;
  if (ownNumbers.has(from)) return `${from} is one of the organization's own numbers; automations never answer it`;
  if (original.text && keywordOf(original.text)) return 'the text is a STOP, START or HELP keyword, answered by the service itself';
  return undefined;
}

export const partyOf = (value: unknown): string | undefined => {
  const n = (value as { phoneNumber?: unknown } | null)?.phoneNumber;
  return typeof n === 'string' ? n : undefined;
};

// ------------------------------------------------------------------ sending

export const RECIPIENT_OPTED_OUT = (number: string) => new AppError('RECIPIENT_OPTED_OUT', `${number} opted out of texts from this channel (it texted STOP); nothing was sent`, { errors: [], properties: { to: { errors: [`${number} opted out`] } } });

/** A live text channel of the organization that can send; a 400 at `field` otherwise. */
const sendingSmsChannel = (db: DbOrTx, orgId: string, channelId: string, field: string): Promise<ChannelRow> => sendingChannelOf(db, orgId, channelId, field, () => undefined);

/**
 * Records outgoing texts (`queued`), one per number, with their outbox rows in the caller's transaction, in
 * three statements whatever their number: the opt-outs, the messages (each linked to its contact's number in
 * the insert), the outbox rows. Refuses at once (409 RECIPIENT_OPTED_OUT, the first such number) a number
 * that opted out. Answers the messages in the order of `numbers`.
 */
export async function queueTexts(db: DbOrTx, orgId: string, actor: Actor, channel: ChannelRow, numbers: string[], text: string, opts: { autoReplyKey?: string | undefined } = {}): Promise<MessageJson[]> {
  const opted = await optedOutAmong(db, channel.id, numbers);
  const refused = numbers.find((n) => opted.has(n));
  if (refused) {
    // An automation's text to an opted-out number is skipped (a refusal by the rules), not a failing step.
    throw actor.type === 'automation' ? new AutomaticMessageRefused('to', `${refused} opted out of texts from this channel (STOP)`) : RECIPIENT_OPTED_OUT(refused);
  }
  const size = smsSize(text);
  const written = await insertMessages(
    db,
    orgId,
    numbers.map((to) => ({
      type: 'sms',
      direction: 'outgoing',
      status: 'queued',
      channelId: channel.id,
      providerName: providerNameOf(channel.sms!.provider),
      threadId: smsThreadId(channel.id, to),
      text,
      sender: { phoneNumber: channel.address },
      recipient: { phoneNumber: to },
      phoneNumberId: contactPhoneIdOf(db, orgId, to),
      metadata: { sms: { encoding: size.encoding, segments: size.segments } },
    })),
  );
  const queued = await db
    .insert(smsOutbox)
    .values(
      written.map(({ id }, i) => ({
        organizationId: orgId,
        messageId: id,
        channelId: channel.id,
        sms: { from: channel.address, to: numbers[i]!, text, segments: size.segments },
        actorType: actor.type,
        actorId: actor.id,
        depth: actor.depth ?? 0,
        autoReplyKey: opts.autoReplyKey ?? null,
      })),
    )
    .onConflictDoNothing()
    .returning({ id: smsOutbox.id, queued: queuedNotice('sms_outbox') });
  if (queued.length < numbers.length) throw new AutomaticMessageRefused('id', `this automation already answered ${numbers[0]} today; automations answer a number at most once a day`);
  return written.map((w) => w.data);
}

/** Records one outgoing text and its outbox row (`queueTexts`). */
export async function queueText(db: DbOrTx, orgId: string, actor: Actor, channel: ChannelRow, to: string, text: string, opts: { autoReplyKey?: string | undefined } = {}): Promise<MessageJson> {
  const [message] = await queueTexts(db, orgId, actor, channel, [to], text, opts);
  return message!;
}

/** POST /messages/send with a text channel: one message per number (the answer is the first; the others follow as events). */
export async function sendText(ctx: OperationContext, input: SmsSendValues): Promise<MessageJson> {
  const channel = await sendingSmsChannel(ctx.db, ctx.orgId, input.channelId ?? (await onlyTextChannelId(ctx.db, ctx.orgId)), 'channelId');
  const numbers = [...new Set(input.to)];
  if (ctx.actor.type === 'automation') {
    const own = await ownNumbers(ctx.db, ctx.orgId);
    const looping = numbers.find((n) => own.has(n));
    if (looping) throw new AutomaticMessageRefused('to', `${looping} is one of the organization's own numbers; automations never text it`);
  }
  const [first, ...others] = await queueTexts(ctx.db, ctx.orgId, ctx.actor, channel, numbers, input.text);
  for (const m of others) ctx.alsoQueued?.(m);
  return first!;
}

/** POST /messages/{id}/reply on a text: to its sender (or, for an outgoing text, its recipient) on its channel. */
export async function replyText(ctx: OperationContext, original: MessageRow, text: string): Promise<MessageJson> {
  const channel = await sendingSmsChannel(ctx.db, ctx.orgId, original.channelId!, 'id');
  const to = original.direction === 'incoming' ? partyOf(original.sender) : partyOf(original.recipient);
  // An automation's reply is checked for loops first: a short code or a sender id is a reason to stay silent
  // (the run is skipped), not a failure that would count against the automation.
  const reason = ctx.actor.type === 'automation' && original.direction === 'incoming' ? automaticTextReason(original, await ownNumbers(ctx.db, ctx.orgId)) : undefined;
  if (reason) throw new AutomaticMessageRefused('id', reason);
  if (!to || !to.startsWith('+')) throw fieldError('id', `The text came from ${to ?? 'no number'}, which cannot receive texts (a short code or an alphanumeric sender)`);
  const autoReplyKey = ctx.actor.type === 'automation' ? `${ctx.actor.id}:${to}:${new Date().toISOString().slice(0, 10)}` : undefined;
  const size = smsSize(text);
  if (size.segments > 10) throw fieldError('text', `Too long for a text: ${size.segments} segments (${size.encoding}); at most 10`);
  return queueText(ctx.db, ctx.orgId, ctx.actor, channel, to, text, { autoReplyKey });
}

/** The organization's one live text channel that can send, the channel of a text sent without `channelId`; the reason when it has none or several. */
export async function onlyTextChannel(db: DbOrTx, orgId: string): Promise<{ id: string } | { error: string }> {
  const rows = await db
    .select({ id: channels.id })
    .from(channels)
    .where(and(eq(channels.organizationId, orgId), eq(channels.type, 'sms'), isNull(channels.deletedAt), eq(channels.status, 'active')))
    .limit(2);
  if (rows.length === 1) return rows[0]!;
  return { error: rows.length === 0 ? 'The organization has no text channel: add one (POST /channels with type "sms")' : 'The organization has several text channels: name the one to send through' };
}

async function onlyTextChannelId(db: DbOrTx, orgId: string): Promise<string> {
  const only = await onlyTextChannel(db, orgId);
  if ('error' in only) throw fieldError('channelId', only.error);
  return only.id;
}

/** The numbers of the organization's live text channels. */
async function ownNumbers(db: DbOrTx, orgId: string): Promise<Set<string>> {
  const rows = await db
    .select({ address: channels.address })
    .from(channels)
    .where(and(eq(channels.organizationId, orgId), eq(channels.type, 'sms'), isNull(channels.deletedAt)));
  return new Set(rows.map((r) => r.address));
}

// A text as the rules of automatic messages read it: its recipient is its number; a received text from a
// short code, a sender id or one of the organization's own numbers, or a keyword, is never answered.
defineAutomaticMessageKind('sms', {
  recipients: (queued) => [partyOf(queued.recipient)],
  silence: async (db, orgId, message) => (message.direction === 'incoming' ? automaticTextReason(message, await ownNumbers(db, orgId)) : undefined),
});

// ------------------------------------------------------------------ delivery status

const RANK: Record<string, number> = { queued: 0, sent: 1, delivered: 2, failed: 2 };

/**
 * Applies a delivery report to the outgoing text it names (by our message id when the callback URL carries
 * it, else by the provider's id on the channel): `status` only moves forward (queued → sent → delivered, or
 * failed; a late "sent" after "delivered" changes nothing), each change with its event. Answers the message
 * (its id and recipient) and whether the report moved it forward, or undefined when no message matches.
 */
export async function applyStatus(
  db: DbOrTx,
  channel: Pick<ChannelRow, 'id' | 'organizationId'>,
  report: StatusReport,
  messageId: string | undefined,
  work: CommittedWork,
): Promise<{ id: string; recipient: string | undefined; forward: boolean } | undefined> {
  const where = messageId
    ? and(eq(messages.id, messageId), eq(messages.channelId, channel.id))
    : and(eq(messages.organizationId, channel.organizationId), eq(messages.channelId, channel.id), eq(messages.providerMessageId, report.providerMessageId));
  const [row] = await db
    .select({ id: messages.id, status: messages.status, providerMessageId: messages.providerMessageId, recipient: messages.recipient })
    .from(messages)
    .where(and(where, eq(messages.direction, 'outgoing'), isNull(messages.deletedAt)))
    .limit(1)
    .for('update');
  if (!row) return undefined;
  const now = new Date();
  const current = RANK[row.status ?? 'queued'] ?? 0;
  const next = RANK[report.status] ?? 0;
  const forward = next > current;
  const reason = report.status === 'failed' ? `The provider reported the text ${report.raw}${report.errorCode ? ` (error ${report.errorCode})` : ''}` : null;
  const set = {
    ...(forward ? { status: report.status, statusReason: reason, updatedAt: now } : {}),
    ...(row.providerMessageId ? {} : { providerMessageId: report.providerMessageId }),
  };
  if (Object.keys(set).length > 0) await db.update(messages).set(set).where(eq(messages.id, row.id));
  const matched = { id: row.id, recipient: partyOf(row.recipient), forward };
  if (!forward) return matched;
  // A report ahead of the send's own answer settles the outbox too: nothing is sent again.
  if (report.status !== 'queued') {
    await db.update(smsOutbox).set({ status: report.status === 'failed' ? 'failed' : 'sent', leaseUntil: null, sentAt: now, updatedAt: now }).where(and(eq(smsOutbox.messageId, row.id), inArray(smsOutbox.status, ['pending', 'sending'])));
  }
  const type = report.status === 'delivered' ? 'message.delivered' : report.status === 'failed' ? 'message.failed' : report.status === 'sent' ? 'message.sent' : undefined;
  if (type) {
    const data = await getMessage(db, channel.organizationId, row.id);
    const recorded = await recordEvents(db, { type: 'system', id: null, depth: 0 }, [{ type, organizationId: channel.organizationId, resourceId: row.id, data }]);
    work.add({ ...recorded, types: [type] });
  }
  return matched;
}

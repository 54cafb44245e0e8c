import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { and, eq, inArray, isNotNull, isNull, or, sql } from 'drizzle-orm';
import type { z } from 'zod';
import { AppError, fieldError } from '../../../core/errors.js';
import { canStoreSecrets, decryptSecret, encryptSecret, missingKeyError } from '../../../core/encryption.js';
import type { Actor, OperationContext } from '../../../core/operation.js';
import type { DbOrTx } from '../../../db/client.js';
import { channels, messages, whatsappOutbox, whatsappWindows, type OutboxWhatsApp, type WhatsAppChannelSettings } from '../../../db/schema.js';
import { AutomaticMessageRefused, defineAutomaticMessageKind } from '../automatic-messages.js';
import { recordEvents } from '../../events/events.recorder.js';
import type { CommittedWork } from '../../events/events.signal.js';
import { createMessage, getMessage, type MessageJson, type MessageRow } from '../../messages/messages.repository.js';
import { queuedNotice } from '../../outbox.js';
import { contactPhoneIdFor, isOptedOut, keywordOf } from '../sms/sms.repository.js';
import { channelRows, sendingChannelOf, type ChannelRow } from '../channels.repository.js';
import { META_API_VERSION, META_GRAPH_URL, metaGraph, recipientId, type OutgoingWhatsApp } from './meta.js';
import { advance, failureReason, windowClosed, windowClosedReason, windowOpen } from './rules.js';
import type { WhatsAppSender, WhatsAppStatus } from './webhook.js';
import type { MetaProviderInput, MetaProviderUpdate, WhatsAppChannelCreate, WhatsAppSendValues } from './whatsapp.schemas.js';

/**
 * WhatsApp channels in the database: the channel (settings, its two encrypted secrets, the verify token),
 * received messages and their 24-hour windows, status reports, and queued messages with their outbox rows.
 */

/** The origin the hook URLs are built from (PUBLIC_URL); set once by the application. */
let publicUrl = 'http://localhost:3000';
export const setWhatsAppPublicUrl = (url: string) => void (publicUrl = url.replace(/(?<!\/)\/+$/, ''));
export const whatsappHookUrl = (channelId: string) => `${publicUrl}/hooks/whatsapp/${channelId}`;

export const SYSTEM: Actor = { type: 'system', id: null, depth: 0 };
export const PROVIDER_NAME = 'meta';

// ------------------------------------------------------------------ channels

/** A WhatsApp channel as the API answers it: its provider without its secrets, and what to paste into Meta's dashboard. */
export function toWhatsAppChannel(row: ChannelRow) {
  const { inboundSecret, outboundSecret, inbound: _in, outbound: _out, sms: _sms, whatsapp, sendFailures: _f, sendPausedUntil: _p, ...rest } = row;
  const settings = whatsapp!;
  return {
    ...rest,
    inbound: { mode: 'whatsapp' as const, webhookUrl: whatsappHookUrl(row.id), verifyToken: settings.verifyToken },
    outbound: null,
    provider: { ...settings.provider, accessTokenSet: outboundSecret !== null, appSecretSet: inboundSecret !== null },
    rate: settings.rate,
    warnings: [] as string[],
  };
}

function seal(secret: string, field: string): string {
  if (!canStoreSecrets()) throw missingKeyError(['provider', field]);
  return encryptSecret(secret);
}

/** At least 32 random URL-safe characters (CONTRACT §10): 32 bytes, base64url. */
const newVerifyToken = () => randomBytes(32).toString('base64url');

const providerSettings = (p: z.output<typeof MetaProviderInput> | z.output<typeof MetaProviderUpdate>): WhatsAppChannelSettings['provider'] => ({
  kind: 'meta',
  phoneNumberId: p.phoneNumberId,
  businessAccountId: p.businessAccountId ?? null,
  apiBaseUrl: p.apiBaseUrl.replace(/(?<!\/)\/+$/, ''),
  apiVersion: p.apiVersion,
});

/** 400 when another live WhatsApp channel of the organization has the number (or the phone number id). */
async function assertFree(db: DbOrTx, orgId: string, address: string | undefined, phoneNumberId: string, except?: string) {
  const taken = await db
    .select({ id: channels.id, address: channels.address })
    .from(channels)
    .where(channelRows.live(orgId, or(address ? eq(channels.address, address) : sql`false`, and(eq(channels.type, 'whatsapp'), sql`${channels.whatsapp}->'provider'->>'phoneNumberId' = ${phoneNumberId}`))))
    .limit(2);
  const other = taken.find((t) => t.id !== except);
  if (!other) return;
  if (address && other.address === address) throw fieldError('address', 'A channel with this address already exists in the organization');
  throw fieldError('provider', `Another WhatsApp channel of the organization has the phone number id ${phoneNumberId}`);
}

export async function createWhatsAppChannel(db: DbOrTx, orgId: string, input: WhatsAppChannelCreate) {
  const provider = providerSettings(input.provider);
  await assertFree(db, orgId, input.address, provider.phoneNumberId);
  const settings: WhatsAppChannelSettings = { provider, verifyToken: newVerifyToken(), rate: input.rate };
  const row = await channelRows.insert(db, {
    organizationId: orgId,
    type: 'whatsapp',
    name: input.name,
    address: input.address,
    inbound: { mode: 'whatsapp' },
    outbound: null,
    outboundSecret: seal(input.provider.accessToken, 'accessToken'),
    inboundSecret: seal(input.provider.appSecret, 'appSecret'),
    whatsapp: settings,
  });
  return toWhatsAppChannel(row);
}

export interface WhatsAppChannelPatch {
  name?: string | undefined;
  address?: string | undefined;
  status?: 'active' | 'disabled' | undefined;
  provider?: z.output<typeof MetaProviderUpdate> | undefined;
  rate?: number | undefined;
  inbound?: unknown;
  outbound?: unknown;
}

/** PATCH of a WhatsApp channel: name, status, provider (a secret left out is kept), rate. */
export async function updateWhatsAppChannel(db: DbOrTx, orgId: string, current: ChannelRow, patch: WhatsAppChannelPatch) {
  if (patch.address !== undefined) throw fieldError('address', "A WhatsApp channel's number cannot be changed: add a channel for the new number");
  if (patch.inbound !== undefined) throw fieldError('inbound', 'WhatsApp channels have no inbound settings: Meta delivers to `inbound.webhookUrl`');
  if (patch.outbound !== undefined) throw fieldError('outbound', 'WhatsApp channels send through their `provider`');
  const settings = { ...current.whatsapp! };
  const values: Partial<typeof channels.$inferInsert> = {};
  if (patch.provider !== undefined) {
    settings.provider = providerSettings(patch.provider);
    await assertFree(db, orgId, undefined, settings.provider.phoneNumberId, current.id);
    if (patch.provider.accessToken !== undefined) values.outboundSecret = seal(patch.provider.accessToken, 'accessToken');
    if (patch.provider.appSecret !== undefined) values.inboundSecret = seal(patch.provider.appSecret, 'appSecret');
    // New provider settings start afresh: a refused token's error ends (the next failure sets it again).
    if (current.lastError !== null && current.lastError.startsWith('provider: ')) {
      values.lastError = null;
      if (current.status === 'error') values.status = 'active';
    }
  }
  if (patch.rate !== undefined) settings.rate = patch.rate;
  values.whatsapp = settings;
  if (patch.name !== undefined) values.name = patch.name;
  if (patch.status !== undefined) {
    values.status = patch.status;
    if (patch.status === 'active') values.lastError = null;
  }
  return toWhatsAppChannel(await channelRows.update(db, orgId, current.id, values));
}

/** A WhatsApp channel with its decrypted secrets. */
export type WhatsAppChannel = ChannelRow & { whatsapp: WhatsAppChannelSettings; accessToken: string; appSecret: string };

export const withSecrets = (row: ChannelRow): WhatsAppChannel | undefined =>
  row.whatsapp && row.outboundSecret !== null && row.inboundSecret !== null ? { ...row, whatsapp: row.whatsapp, accessToken: decryptSecret(row.outboundSecret), appSecret: decryptSecret(row.inboundSecret) } : undefined;

/** A live WhatsApp channel with its secrets; undefined when missing, deleted or of another kind. Not organization-scoped (the hook knows the id only). */
export async function loadWhatsAppChannel(db: DbOrTx, channelId: string): Promise<WhatsAppChannel | undefined> {
  const [row] = await db
    .select()
    .from(channels)
    .where(and(eq(channels.id, channelId), isNull(channels.deletedAt), eq(channels.type, 'whatsapp')))
    .limit(1);
  return row && withSecrets(row);
}

/** The Graph API client of a channel. */
export const graphOf = (channel: WhatsAppChannel) =>
  metaGraph({ phoneNumberId: channel.whatsapp.provider.phoneNumberId, accessToken: channel.accessToken, apiBaseUrl: channel.whatsapp.provider.apiBaseUrl || META_GRAPH_URL, apiVersion: channel.whatsapp.provider.apiVersion || META_API_VERSION });

const sameSecret = (a: string, b: string) => {
  const x = createHash('sha256').update(a).digest();
  const y = createHash('sha256').update(b).digest();
  return timingSafeEqual(x, y);
};

/**
 * The channel each phone number id of a webhook is for: the hook's own channel for its own id; for another id,
 * the live WhatsApp channel of the same organization with that id and the same app secret (one Meta app serving
 * several numbers); any other id is absent (its changes are ignored).
 */
export async function routeByPhoneNumberId(db: DbOrTx, channel: WhatsAppChannel, phoneNumberIds: string[]): Promise<Map<string, WhatsAppChannel>> {
  const routes = new Map<string, WhatsAppChannel>();
  const own = channel.whatsapp.provider.phoneNumberId;
  if (phoneNumberIds.includes(own)) routes.set(own, channel);
  const others = [...new Set(phoneNumberIds.filter((id) => id !== own))];
  if (others.length === 0) return routes;
  const rows = await db
    .select()
    .from(channels)
    .where(channelRows.live(channel.organizationId, eq(channels.type, 'whatsapp'), inArray(sql<string>`${channels.whatsapp}->'provider'->>'phoneNumberId'`, others)));
  for (const row of rows) {
    const other = withSecrets(row);
    if (other && sameSecret(other.appSecret, channel.appSecret)) routes.set(other.whatsapp.provider.phoneNumberId, other);
  }
  return routes;
}

// ------------------------------------------------------------------ parties, threads, windows

/** The sender as WhatsApp addresses it (`to`): the digits of its number, else its business-scoped user id. */
export const addressOf = (party: WhatsAppSender | Record<string, unknown> | null | undefined): string | undefined => {
  const p = (party ?? {}) as { phoneNumber?: unknown; userId?: unknown; whatsappId?: unknown };
  return recipientId({ phoneNumber: typeof p.phoneNumber === 'string' ? p.phoneNumber : null, userId: typeof p.userId === 'string' ? p.userId : null }) ?? (typeof p.whatsappId === 'string' ? p.whatsappId : undefined);
};

/** One thread per (channel, the other party as WhatsApp addresses it): the same id whichever message comes first. */
export function whatsappThreadId(channelId: string, address: string): string {
  const h = createHash('sha256').update(`whatsapp:${channelId}:${address}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((Number.parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The key opt-outs are kept under: the number (E.164) when known, else the business-scoped user id. */
export const optOutKey = (party: { phoneNumber?: string | undefined; userId?: string | undefined }) => party.phoneNumber ?? party.userId;

/** When the recipient last wrote to the channel (its latest message's own time), or null. */
export async function lastIncoming(db: DbOrTx, channelId: string, address: string): Promise<Date | null> {
  const [row] = await db
    .select({ at: whatsappWindows.lastIncomingAt })
    .from(whatsappWindows)
    .where(and(eq(whatsappWindows.channelId, channelId), eq(whatsappWindows.recipient, address)))
    .limit(1);
  return row?.at ?? null;
}

export async function touchWindow(db: DbOrTx, orgId: string, channelId: string, address: string, at: Date) {
  await db
    .insert(whatsappWindows)
    .values({ organizationId: orgId, channelId, recipient: address, lastIncomingAt: at })
    .onConflictDoUpdate({ target: [whatsappWindows.channelId, whatsappWindows.recipient], set: { lastIncomingAt: sql`greatest(${whatsappWindows.lastIncomingAt}, excluded.last_incoming_at)` } });
}

// ------------------------------------------------------------------ opt-outs

export const WHATSAPP_OPTED_OUT_REASON = 'The recipient opted out of messages from this channel (STOP); it was not sent';

/** Messages to the recipient (as opt-outs key it: `optOutKey`) still waiting in the outbox (not yet transmitted) fail; answers their ids. */
export async function failQueuedTo(db: DbOrTx, channelId: string, to: string): Promise<string[]> {
  const rows = await db
    .update(whatsappOutbox)
    .set({ status: 'failed', lastError: WHATSAPP_OPTED_OUT_REASON, leaseUntil: null, updatedAt: new Date() })
    .where(and(eq(whatsappOutbox.channelId, channelId), sql`${whatsappOutbox.whatsapp}->>'to' = ${to}`, or(eq(whatsappOutbox.status, 'pending'), and(eq(whatsappOutbox.status, 'sending'), isNull(whatsappOutbox.transmittedAt)))))
    .returning({ messageId: whatsappOutbox.messageId });
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.messageId);
  await db.update(messages).set({ status: 'failed', statusReason: WHATSAPP_OPTED_OUT_REASON, updatedAt: new Date() }).where(inArray(messages.id, ids));
  return ids;
}

// ------------------------------------------------------------------ status

/**
 * Applies one status report to the outgoing message it names (by `wamid` on the channel): forward only, each
 * change with its events (`read` straight after `sent` records `message.delivered` too); `failed` with Meta's
 * code and title in `statusReason`. Answers whether it matched and moved the message.
 */
export async function applyWhatsAppStatus(db: DbOrTx, channel: Pick<ChannelRow, 'id' | 'organizationId'>, report: WhatsAppStatus, work: CommittedWork): Promise<{ id: string; forward: boolean } | undefined> {
  const [row] = await db
    .select({ id: messages.id, status: messages.status })
    .from(messages)
    .where(and(eq(messages.organizationId, channel.organizationId), eq(messages.channelId, channel.id), eq(messages.providerMessageId, report.wamid), eq(messages.direction, 'outgoing'), isNull(messages.deletedAt)))
    .limit(1)
    .for('update');
  if (!row) return undefined;
  const step = advance(row.status, report.status);
  if (!step) return { id: row.id, forward: false };
  const now = new Date();
  const reason = step.status === 'failed' ? failureReason(report.errorCode, report.errorTitle) : null;
  await db.update(messages).set({ status: step.status, statusReason: reason, updatedAt: now }).where(eq(messages.id, row.id));
  // A report ahead of the send's own answer settles the outbox too: nothing is sent again.
  await db
    .update(whatsappOutbox)
    .set({ status: step.status === 'failed' ? 'failed' : 'sent', leaseUntil: null, sentAt: now, updatedAt: now })
    .where(and(eq(whatsappOutbox.messageId, row.id), inArray(whatsappOutbox.status, ['pending', 'sending'])));
  const data = await getMessage(db, channel.organizationId, row.id);
  const recorded = await recordEvents(
    db,
    SYSTEM,
    step.events.map((type) => ({ type, organizationId: channel.organizationId, resourceId: row.id, data })),
  );
  work.add({ ...recorded, types: step.events });
  return { id: row.id, forward: true };
}

/** Whether a message of the channel has left for Meta and its answer (the wamid) is not written yet. */
export async function sendAwaitingAnswer(db: DbOrTx, channelId: string): Promise<boolean> {
  const [row] = await db
    .select({ id: whatsappOutbox.id })
    .from(whatsappOutbox)
    .where(and(eq(whatsappOutbox.channelId, channelId), eq(whatsappOutbox.status, 'sending'), isNotNull(whatsappOutbox.transmittedAt)))
    .limit(1);
  return Boolean(row);
}

// ------------------------------------------------------------------ sending

export type WhatsAppContent = { text: string } | { template: NonNullable<OutboxWhatsApp['template']> };

/** A recipient as stored on a message: its number (E.164) or its business-scoped user id. */
const partyOf = (to: string): { phoneNumber: string } | { userId: string } => (to.startsWith('+') ? { phoneNumber: to } : { userId: to });

/**
 * Records one outgoing WhatsApp message (`queued`) and its outbox row in the caller's transaction. Refuses at
 * once, before anything reaches Meta: an opted-out recipient (409 `RECIPIENT_OPTED_OUT`), free-form text outside
 * the 24-hour window (409 `WHATSAPP_WINDOW_CLOSED`). An automation's message is skipped with the reason instead.
 */
export async function queueWhatsApp(
  db: DbOrTx,
  orgId: string,
  actor: Actor,
  channel: ChannelRow,
  to: string,
  content: WhatsAppContent,
  opts: { contextId?: string | null | undefined; autoReplyKey?: string | undefined; now?: Date } = {},
): Promise<MessageJson> {
  const party = partyOf(to);
  const address = recipientId(party)!;
  if (await isOptedOut(db, channel.id, to)) {
    const reason = `${to} opted out of messages from this channel (STOP)`;
    if (actor.type === 'automation') throw new AutomaticMessageRefused('to', reason);
    throw new AppError('RECIPIENT_OPTED_OUT', `${reason}; nothing was sent`, { errors: [], properties: { to: { errors: [`${to} opted out`] } } });
  }
  if ('text' in content) {
    const last = await lastIncoming(db, channel.id, address);
    if (!windowOpen(last, opts.now ?? new Date())) {
      if (actor.type === 'automation') throw new AutomaticMessageRefused('text', windowClosedReason(to, last));
      throw windowClosed(to, last);
    }
  }
  const message = await createMessage(db, orgId, {
    type: 'whatsapp',
    direction: 'outgoing',
    status: 'queued',
    channelId: channel.id,
    providerName: PROVIDER_NAME,
    threadId: whatsappThreadId(channel.id, address),
    text: 'text' in content ? content.text : null,
    sender: { phoneNumber: channel.address },
    recipient: party,
    phoneNumberId: 'phoneNumber' in party ? await contactPhoneIdFor(db, orgId, party.phoneNumber) : null,
    metadata: { whatsapp: { type: 'text' in content ? 'text' : 'template', ...('template' in content ? { template: content.template } : {}), ...(opts.contextId ? { contextId: opts.contextId } : {}) } },
  });
  const [queued] = await db
    .insert(whatsappOutbox)
    .values({
      organizationId: orgId,
      messageId: message.id,
      channelId: channel.id,
      // The recipient as opt-outs are keyed (E.164 with its `+`, or a user id); Meta's form is made when it leaves (`outgoingOf`).
      whatsapp: { to, ...content, ...(opts.contextId ? { contextId: opts.contextId } : {}) },
      actorType: actor.type,
      actorId: actor.id,
      depth: actor.depth ?? 0,
      autoReplyKey: opts.autoReplyKey ?? null,
    })
    .onConflictDoNothing()
    .returning({ id: whatsappOutbox.id, queued: queuedNotice('whatsapp_outbox') });
  if (!queued) throw new AutomaticMessageRefused('id', `this automation already answered ${to} today; automations answer a recipient at most once a day`);
  return message;
}

/** A live WhatsApp channel of the organization that can send; a 400 at `field` otherwise. */
export const sendingWhatsAppChannel = (db: DbOrTx, orgId: string, channelId: string, field: string): Promise<ChannelRow> =>
  sendingChannelOf(db, orgId, channelId, field, (channel) => (channel.type !== 'whatsapp' ? { field: 'channelId', message: 'The channel is not a WhatsApp channel' } : undefined));

/** POST /messages/send through a WhatsApp channel: one message per recipient (the answer is the first; the others follow as events). */
export async function sendWhatsApp(ctx: OperationContext, input: WhatsAppSendValues): Promise<MessageJson> {
  const channel = await sendingWhatsAppChannel(ctx.db, ctx.orgId, input.channelId, 'channelId');
  const content: WhatsAppContent = input.template ? { template: input.template } : { text: input.text! };
  let first: MessageJson | undefined;
  for (const to of [...new Set(input.to)]) {
    const m = await queueWhatsApp(ctx.db, ctx.orgId, ctx.actor, channel, to, content);
    if (first) ctx.alsoQueued?.(m);
    else first = m;
  }
  return first!;
}

/** POST /messages/{id}/reply on a WhatsApp message: to its sender (or, for an outgoing one, its recipient), answering it. */
export async function replyWhatsApp(ctx: OperationContext, original: MessageRow, text: string): Promise<MessageJson> {
  const channel = await sendingWhatsAppChannel(ctx.db, ctx.orgId, original.channelId!, 'id');
  const party = (original.direction === 'incoming' ? original.sender : original.recipient) as Record<string, unknown> | null;
  const to = typeof party?.phoneNumber === 'string' ? party.phoneNumber : typeof party?.userId === 'string' ? party.userId : undefined;
  if (!to) throw fieldError('id', 'The message names no WhatsApp number or user id to answer');
  const autoReplyKey = ctx.actor.type === 'automation' ? `${ctx.actor.id}:${to}:${new Date().toISOString().slice(0, 10)}` : undefined;
  return queueWhatsApp(ctx.db, ctx.orgId, ctx.actor, channel, to, { text }, { contextId: original.direction === 'incoming' ? original.providerMessageId : null, autoReplyKey });
}

/** What the sender transmits for one outbox row. */
export const outgoingOf = (payload: OutboxWhatsApp): OutgoingWhatsApp => {
  const to = recipientId(partyOf(payload.to)) ?? payload.to;
  return payload.template ? { to, template: payload.template, contextId: payload.contextId ?? null } : { to, text: payload.text ?? '', contextId: payload.contextId ?? null };
};

// A WhatsApp message as the rules of automatic messages read it: its recipient is its number or user id.
defineAutomaticMessageKind('whatsapp', {
  recipients: (queued) => {
    const r = queued.recipient as Record<string, unknown> | null;
    return [typeof r?.phoneNumber === 'string' ? r.phoneNumber : typeof r?.userId === 'string' ? r.userId : undefined];
  },
  silence: async (_db, _orgId, message) => {
    if (message.direction !== 'incoming') return undefined;
    if (message.text && keywordOf(message.text)) return 'the message is a STOP or START keyword, answered by the service itself';
    return undefined;
  },
});

import { createHmac, timingSafeEqual } from 'node:crypto';
import { storableReviver } from '../../../core/storable.js';

/**
 * Meta's webhook for WhatsApp (the `messages` field of a WhatsApp Business Account subscription):
 *
 * - the subscription handshake, `GET ?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C`, answered with
 *   `C` when `T` is the channel's verify token (compared in constant time);
 * - the signature, `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 with the app secret over the body's bytes
 *   exactly as received (Meta escapes `/` and non-ASCII characters, so a re-serialized body never verifies):
 *   checked before anything is parsed;
 * - the batch, read whole: every `entry[]`, every `changes[]` with `field: "messages"`, every message and
 *   status in it, each change with the `phone_number_id` it is for. A part that is not what Meta documents is
 *   skipped (and counted), never a reason to drop the rest.
 */

/** The largest webhook body read (Meta batches at most a few hundred small events per POST). */
export const WEBHOOK_BODY_LIMIT = 1024 * 1024;

const equalText = (a: string, b: string): boolean => {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  // Compared at equal length so the time does not depend on where they differ; the length itself is not secret.
  return x.length === y.length && timingSafeEqual(x, y);
};

const first = (v: unknown): string | undefined => (Array.isArray(v) ? first(v[0]) : typeof v === 'string' ? v : undefined);

/**
 * The challenge to answer for a subscription request, or undefined (answer 403): `hub.mode` must be
 * `subscribe` and `hub.verify_token` the channel's token.
 */
export function subscriptionChallenge(query: Record<string, unknown>, verifyToken: string): string | undefined {
  const mode = first(query['hub.mode']);
  const token = first(query['hub.verify_token']);
  const challenge = first(query['hub.challenge']);
  if (mode !== 'subscribe' || token === undefined || challenge === undefined) return undefined;
  if (!equalText(token, verifyToken)) return undefined;
  return challenge;
}

/** `sha256=<hex>` of the body, as Meta signs it. */
export function metaSignature(appSecret: string, raw: Buffer | string): string {
  return `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}`;
}

/** Whether `header` is Meta's signature of exactly these bytes with this app secret, compared in constant time. */
export function validMetaSignature(appSecret: string, raw: Buffer, header: string | string[] | undefined): boolean {
  const given = first(header)?.trim();
  if (!given || !/^sha256=[0-9a-fA-F]{64}$/.test(given)) return false;
  const expected = createHmac('sha256', appSecret).update(raw).digest();
  return timingSafeEqual(Buffer.from(given.slice(7), 'hex'), expected);
}

// ------------------------------------------------------------------ the batch, typed

/** Who wrote: Meta names a sender by number (`wa_id`), by business-scoped user id (`user_id`), or both. */
export interface WhatsAppSender {
  /** E.164, only when Meta gave the number. */
  phoneNumber?: string;
  /** Meta's WhatsApp id (the number's digits). */
  whatsappId?: string;
  /** The business-scoped user id, when Meta gave one. */
  userId?: string;
  /** The profile name the person chose. */
  name?: string;
}

/** A media item of a received message, fetched later by its id. */
export interface WhatsAppMedia {
  id: string;
  mimeType: string | null;
  sha256: string | null;
  filename: string | null;
}

/** One received message, whatever its kind. */
export interface IncomingWhatsApp {
  /** The `wamid`. */
  wamid: string;
  /** The message's own time (`timestamp`, seconds), not the arrival's. */
  timestamp: Date;
  sender: WhatsAppSender;
  /** Meta's kind (`text`, `reaction`, `button`, `interactive`, `location`, `contacts`, `image`, … or one this service does not know). */
  type: string;
  /** The body, emoji, title or caption; null for a kind without words (and any unknown kind). */
  text: string | null;
  /** `context.id`: the message it answers. */
  contextId: string | null;
  media: WhatsAppMedia | null;
  /** What the kind carries beyond its text, kept in `metadata.whatsapp`. */
  details: Record<string, unknown>;
}

/** A status report of a message the channel sent. */
export interface WhatsAppStatus {
  wamid: string;
  /** Meta's word: `sent`, `delivered`, `read`, `failed` (others are passed on and ignored by the rules). */
  status: string;
  timestamp: Date | null;
  recipientId: string | null;
  /** `errors[0]` of a failure. */
  errorCode: string | null;
  errorTitle: string | null;
}

/** One `changes[]` of `field: "messages"`: what it holds and the phone number it is for. */
export interface WhatsAppChange {
  phoneNumberId: string;
  displayPhoneNumber: string | null;
  messages: IncomingWhatsApp[];
  statuses: WhatsAppStatus[];
}

export interface WhatsAppBatch {
  changes: WhatsAppChange[];
  /** Parts that were not what Meta documents (skipped). */
  skipped: number;
}

/** The longest text kept from one field. */
const MAX_TEXT = 65_536;
const MEDIA_KINDS = new Set(['image', 'audio', 'video', 'document', 'sticker']);

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : undefined);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown, max = 1000): string | null => (typeof v === 'string' && v.length > 0 ? v.slice(0, max) : typeof v === 'number' ? String(v) : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : null);

/** Seconds since the epoch (Meta's `timestamp`, a string) as a date; null when unreadable. */
function secondsDate(v: unknown): Date | null {
  const n = num(v);
  if (n === null || n <= 0 || n > 1e11) return null;
  return new Date(n * 1000);
}

/** `+<digits>` of a WhatsApp id that is a number; undefined otherwise. */
export const numberOfWaId = (waId: string | null | undefined): string | undefined => (waId && /^\d{6,15}$/.test(waId) ? `+${waId}` : undefined);

function senderOf(message: Obj, contacts: Obj[]): WhatsAppSender {
  const from = str(message.from, 64);
  const fromUserId = str(message.from_user_id, 200);
  const contact = contacts.find((c) => (from && str(c.wa_id, 64) === from) || (fromUserId && str(c.user_id, 200) === fromUserId)) ?? (contacts.length === 1 ? contacts[0] : undefined);
  const waId = from ?? str(contact?.wa_id, 64);
  const userId = fromUserId ?? str(contact?.user_id, 200);
  const name = str(obj(contact?.profile)?.name, 200);
  const phoneNumber = numberOfWaId(waId);
  return { ...(phoneNumber ? { phoneNumber } : {}), ...(waId ? { whatsappId: waId } : {}), ...(userId ? { userId } : {}), ...(name ? { name } : {}) };
}

/** The text and the details of a message, by kind; an unknown kind has no text and keeps its own object. */
function content(type: string, message: Obj): { text: string | null; media: WhatsAppMedia | null; details: Obj } {
  const part = obj(message[type]) ?? {};
  switch (type) {
    case 'text':
      return { text: str(part.body, MAX_TEXT), media: null, details: {} };
    case 'reaction':
      // An empty emoji removes an earlier reaction.
      return { text: str(part.emoji, 64), media: null, details: { reaction: { messageId: str(part.message_id, 200), emoji: str(part.emoji, 64) } } };
    case 'button':
      return { text: str(part.text, 1000), media: null, details: { button: { payload: str(part.payload, 1000), text: str(part.text, 1000) } } };
    case 'interactive': {
      const kind = str(part.type, 64);
      const reply = obj(kind ? part[kind] : undefined) ?? obj(part.button_reply) ?? obj(part.list_reply);
      return { text: str(reply?.title, 1000), media: null, details: { interactive: { type: kind, id: str(reply?.id, 1000), title: str(reply?.title, 1000), description: str(reply?.description, 1000) } } };
    }
    case 'location': {
      const location = { latitude: num(part.latitude), longitude: num(part.longitude), name: str(part.name, 1000), address: str(part.address, 1000), url: str(part.url, 2000) };
      const words = [location.name, location.address].filter(Boolean).join(', ');
      return { text: words || null, media: null, details: { location } };
    }
    case 'contacts': {
      const cards = list(message.contacts)
        .map(obj)
        .filter((c): c is Obj => Boolean(c))
        .slice(0, 50)
        .map((c) => ({
          name: str(obj(c.name)?.formatted_name, 1000),
          phones: list(c.phones)
            .map(obj)
            .map((p) => ({ phone: str(p?.phone, 64), waId: str(p?.wa_id, 64), type: str(p?.type, 64) }))
            .slice(0, 20),
          emails: list(c.emails)
            .map(obj)
            .map((e) => str(e?.email, 320))
            .filter(Boolean)
            .slice(0, 20),
        }));
      return { text: null, media: null, details: { contacts: cards } };
    }
    default:
      if (MEDIA_KINDS.has(type) && str(part.id, 200)) {
        const media = { id: str(part.id, 200)!, mimeType: str(part.mime_type, 200), sha256: str(part.sha256, 200), filename: str(part.filename, 255) };
        return { text: str(part.caption, MAX_TEXT), media, details: {} };
      }
      // `unsupported` and kinds this service does not know: kept as such, with Meta's own errors when it gave any.
      return { text: null, media: null, details: list(message.errors).length ? { errors: list(message.errors).slice(0, 5).map(obj).map((e) => ({ code: num(e?.code), title: str(e?.title, 300) })) } : {} };
  }
}

function messageOf(raw: unknown, contacts: Obj[]): IncomingWhatsApp | undefined {
  const message = obj(raw);
  const wamid = str(message?.id, 200);
  if (!message || !wamid) return undefined;
  const type = str(message.type, 64) ?? 'unknown';
  const { text, media, details } = content(type, message);
  return {
    wamid,
    timestamp: secondsDate(message.timestamp) ?? new Date(),
    sender: senderOf(message, contacts),
    type,
    text,
    contextId: str(obj(message.context)?.id, 200),
    media,
    details,
  };
}

function statusOf(raw: unknown): WhatsAppStatus | undefined {
  const s = obj(raw);
  const wamid = str(s?.id, 200);
  const status = str(s?.status, 64);
  if (!s || !wamid || !status) return undefined;
  const error = obj(list(s.errors)[0]);
  return {
    wamid,
    status,
    timestamp: secondsDate(s.timestamp),
    recipientId: str(s.recipient_id, 200) ?? str(s.recipient_user_id, 200),
    errorCode: error ? str(error.code, 32) : null,
    errorTitle: error ? (str(error.title, 300) ?? str(error.message, 300)) : null,
  };
}

/** Thrown for a body that is not a JSON object of Meta's shape at all (a 400 once the signature is valid). */
export class UnreadableWebhook extends Error {}

/** Every message and status of a webhook body (already verified), grouped by change. */
export function parseWebhook(raw: Buffer | string): WhatsAppBatch {
  let body: unknown;
  try {
    // Strings PostgreSQL can store: a NUL in a name or a text would refuse the whole batch, and Meta retries it.
    body = JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8'), storableReviver);
  } catch {
    throw new UnreadableWebhook('The body is not JSON');
  }
  const root = obj(body);
  if (!root || !Array.isArray(root.entry)) throw new UnreadableWebhook('The body has no `entry` list');
  const changes: WhatsAppChange[] = [];
  let skipped = 0;
  for (const entry of root.entry) {
    const changeList = obj(entry)?.changes;
    if (!Array.isArray(changeList)) {
      skipped++;
      continue;
    }
    for (const rawChange of changeList) {
      const change = obj(rawChange);
      // Other fields (template status, quality, account updates) are not messages: nothing to store.
      if (change?.field !== 'messages') continue;
      const value = obj(change.value);
      const metadata = obj(value?.metadata);
      const phoneNumberId = str(metadata?.phone_number_id, 64);
      if (!value || !phoneNumberId) {
        skipped++;
        continue;
      }
      const contacts = list(value.contacts).map(obj).filter((c): c is Obj => Boolean(c));
      const messages: IncomingWhatsApp[] = [];
      for (const m of list(value.messages)) {
        const parsed = messageOf(m, contacts);
        if (parsed) messages.push(parsed);
        else skipped++;
      }
      const statuses: WhatsAppStatus[] = [];
      for (const s of list(value.statuses)) {
        const parsed = statusOf(s);
        if (parsed) statuses.push(parsed);
        else skipped++;
      }
      changes.push({ phoneNumberId, displayPhoneNumber: str(metadata?.display_phone_number, 64), messages, statuses });
    }
  }
  return { changes, skipped };
}

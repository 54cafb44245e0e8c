/**
 * The one database schema (Drizzle pg-core). Migrations in ./drizzle are generated from it and run
 * unchanged on PGlite and PostgreSQL. Conventions:
 * - every business table has `organization_id`, audit timestamps and a nullable `deleted_at`;
 * - list indexes are `(organization_id, created_at, id) WHERE deleted_at IS NULL`, declared ascending
 *   because PostgreSQL reads them backwards for `desc` pages;
 * - unique indexes are partial on `deleted_at IS NULL`, so a soft-deleted row never blocks a new one.
 */
import { relations, sql, type SQL } from 'drizzle-orm';
import { DEFAULT_CREDITS } from '../core/secrets.js';
import {
  bigint,
  boolean,
  customType,
  foreignKey,
  index,
  integer,
  json,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
  type AnyPgColumn,
} from 'drizzle-orm/pg-core';

type Json = Record<string, unknown>;

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date', precision: 3 });

const audit = {
  id: uuid('id').primaryKey().defaultRandom(),
  createdAt: ts('created_at').notNull().defaultNow(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
  deletedAt: ts('deleted_at'),
};

const tsvector = customType<{ data: string }>({ dataType: () => 'tsvector' });
const bytea = customType<{ data: Buffer; driverData: Buffer | Uint8Array }>({
  dataType: () => 'bytea',
  fromDriver: (value) => (Buffer.isBuffer(value) ? value : Buffer.from(value)),
});

const orgRef = () =>
  uuid('organization_id')
    .notNull()
    .references(() => organizations.id);

/**
 * The organization of a row that a write of that organization's records derives in the same statement
 * (an event, a webhook delivery): the written row's own `orgRef` has checked it already. No foreign key,
 * on purpose: every key check takes a lock on the organization's row, and concurrent writes of one
 * organization would take it once more per event (PostgreSQL makes a new multixact for each locker), for
 * a check that cannot fail. Organizations are never deleted (only soft-deleted), so nothing dangles.
 */
const derivedOrgId = () => uuid('organization_id').notNull();

/** `(organization_id, created_at, id)` over live rows: backs every organization-wide list page. */
const listIndex = (name: string, t: { organizationId: AnyPgColumn; createdAt: AnyPgColumn; id: AnyPgColumn; deletedAt: AnyPgColumn }) =>
  index(name).on(t.organizationId, t.createdAt, t.id).where(sql`${t.deletedAt} IS NULL`);

// ---------------------------------------------------------------- tenancy, people, keys

export const organizations = pgTable('organizations', {
  ...audit,
  name: text('name').notNull(),
  credits: integer('credits').notNull().default(DEFAULT_CREDITS),
});

export const users = pgTable(
  'users',
  {
    ...audit,
    organizationId: orgRef(),
    email: text('email').notNull(),
    name: text('name'),
    passwordHash: text('password_hash').notNull(),
    /** Set by an operator (`user disable`): the user cannot sign in and holds no live grant. */
    disabledAt: ts('disabled_at'),
  },
  (t) => [uniqueIndex('users_email_live').on(sql`lower(${t.email})`).where(sql`${t.deletedAt} IS NULL`)],
);

export const apiKeys = pgTable(
  'api_keys',
  {
    ...audit,
    organizationId: orgRef(),
    name: text('name'),
    /** First characters of the key, safe to show so a person can tell keys apart. */
    prefix: text('prefix').notNull(),
    /** SHA-256 of the whole key (hex). The key itself is never stored. */
    keyHash: text('key_hash').notNull(),
    permissions: text('permissions').array().notNull(),
    revokedAt: ts('revoked_at'),
    lastUsedAt: ts('last_used_at'),
  },
  (t) => [uniqueIndex('api_keys_key_hash').on(t.keyHash), index('api_keys_org').on(t.organizationId)],
);

// ---------------------------------------------------------------- contacts

export const contacts = pgTable(
  'contacts',
  {
    ...audit,
    organizationId: orgRef(),
    firstName: text('first_name'),
    lastName: text('last_name'),
    company: text('company'),
    jobTitle: text('job_title'),
    notes: text('notes'),
    title: text('title'),
    name: text('name'),
    picture: text('picture'),
    data: jsonb('data').$type<Json>().notNull().default({}),
  },
  (t) => [listIndex('contacts_list', t)],
);

const contactChild = {
  ...audit,
  organizationId: orgRef(),
  contactId: uuid('contact_id')
    .notNull()
    .references(() => contacts.id),
};

export const contactEmails = pgTable(
  'contact_emails',
  {
    ...contactChild,
    email: text('email').notNull(),
    label: text('label').notNull(),
    data: jsonb('data').$type<Json>().notNull().default({}),
  },
  (t) => [index('contact_emails_contact').on(t.contactId, t.createdAt, t.id).where(sql`${t.deletedAt} IS NULL`)],
);

export const contactPhoneNumbers = pgTable(
  'contact_phone_numbers',
  {
    ...contactChild,
    phoneNumber: text('phone_number').notNull(),
    countryCode: text('country_code').notNull(),
    nationalNumber: text('national_number').notNull(),
    label: text('label').notNull(),
    data: jsonb('data').$type<Json>().notNull().default({}),
  },
  (t) => [
    index('contact_phone_numbers_contact').on(t.contactId, t.createdAt, t.id).where(sql`${t.deletedAt} IS NULL`),
    // A received text's sender is matched to the organization's contact phone number (E.164) by this index.
    index('contact_phone_numbers_number').on(t.organizationId, t.phoneNumber).where(sql`${t.deletedAt} IS NULL`),
  ],
);

export const contactAddresses = pgTable(
  'contact_addresses',
  {
    ...contactChild,
    country: text('country').notNull(),
    label: text('label').notNull(),
    address1: text('address1').notNull(),
    address2: text('address2').notNull(),
    city: text('city').notNull(),
    state: text('state').notNull(),
    postalCode: text('postal_code').notNull(),
    data: jsonb('data').$type<Json>().notNull().default({}),
  },
  (t) => [index('contact_addresses_contact').on(t.contactId, t.createdAt, t.id).where(sql`${t.deletedAt} IS NULL`)],
);

// ---------------------------------------------------------------- messages

/** Words searched by GET /messages/search: text, summary, sender and recipient, case-folded, unstemmed. */
const messageSearchVector: SQL = sql`to_tsvector('simple'::regconfig,
  coalesce("text", '') || ' ' || coalesce("summary", '') || ' ' ||
  coalesce("sender"::text, '') || ' ' || coalesce("recipient"::text, ''))`;

export const messages = pgTable(
  'messages',
  {
    ...audit,
    organizationId: orgRef(),
    timestamp: ts('timestamp').notNull().defaultNow(),
    readAt: ts('read_at'),
    archivedAt: ts('archived_at'),
    snoozedUntil: ts('snoozed_until'),
    phoneNumberId: uuid('phone_number_id'),
    emailAddressId: uuid('email_address_id'),
    type: text('type').notNull(),
    direction: text('direction').notNull(),
    providerMessageId: text('provider_message_id'),
    providerName: text('provider_name'),
    threadId: text('thread_id'),
    text: text('text'),
    action: text('action'),
    importance: text('importance'),
    status: text('status'),
    /** Why the message has its status, e.g. why sending failed; null otherwise. */
    statusReason: text('status_reason'),
    summary: text('summary'),
    urgency: text('urgency'),
    sender: jsonb('sender').$type<unknown>(),
    recipient: jsonb('recipient').$type<unknown>(),
    category: jsonb('category').$type<unknown>(),
    metadata: jsonb('metadata').$type<unknown>(),
    /** The channel that received or sent the message; null for messages recorded through POST /messages. */
    channelId: uuid('channel_id').references((): AnyPgColumn => channels.id),
    searchVector: tsvector('search_vector').generatedAlwaysAs(messageSearchVector),
  },
  (t) => [
    listIndex('messages_list', t),
    // The same Message-ID on the same channel never makes a second message (received twice, synced again).
    uniqueIndex('messages_channel_provider_id')
      .on(t.organizationId, t.channelId, t.providerMessageId)
      .where(sql`${t.providerMessageId} IS NOT NULL AND ${t.deletedAt} IS NULL`),
    index('messages_thread').on(t.organizationId, t.threadId, t.timestamp, t.id).where(sql`${t.threadId} IS NOT NULL AND ${t.deletedAt} IS NULL`),
    index('messages_provider_id').on(t.organizationId, t.providerMessageId).where(sql`${t.providerMessageId} IS NOT NULL AND ${t.deletedAt} IS NULL`),
    index('messages_direction_list')
      .on(t.organizationId, t.direction, t.createdAt, t.id)
      .where(sql`${t.deletedAt} IS NULL`),
    index('messages_snoozed').on(t.organizationId).where(sql`${t.deletedAt} IS NULL AND ${t.snoozedUntil} IS NOT NULL`),
    // The full-text index, keyed by organization too (btree_gin): a search's two conditions are one index
    // scan whatever the organization's size, so the search's statement keeps one plan (migration 0010).
    // New rows wait in the index's pending list until it is merged, and every search through the index reads
    // the whole list: at PostgreSQL's default (4 MB) a search of a rare or absent word took 1.2 ms after 4,000
    // received messages instead of 0.03. Merged at 128 kB, a search reads at most 16 pending pages (0.1 ms);
    // inserts cost the same (migration 0009).
    index('messages_search')
      .using('gin', t.organizationId, t.searchVector)
      .where(sql`${t.deletedAt} IS NULL`)
      .with({ gin_pending_list_limit: 128 }),
  ],
);

// ---------------------------------------------------------------- threads (conversations)

/**
 * A conversation: the messages that share a `thread_id`, as a team works them (CONTRACT §11). Its `id` is
 * that `thread_id` (text: a UUID for email, a derived id for texts, any id a recorded message was given).
 * `last_message_at`, `last_incoming_at` and `message_count` are kept by the trigger `threads_upkeep`
 * (migration 0022) in the statement that inserts or deletes a message, whichever path writes it: one
 * atomic upsert of the row, so concurrent writers of one thread queue on it and no count drifts.
 */
export const threads = pgTable(
  'threads',
  {
    organizationId: orgRef(),
    id: text('id').notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
    /** Null for recorded messages (POST /messages). */
    channelId: uuid('channel_id'),
    /** The first email's subject; null for texts. */
    subject: text('subject'),
    contactId: uuid('contact_id'),
    /** open | pending | snoozed | closed */
    status: text('status').notNull().default('open'),
    assigneeId: uuid('assignee_id').references(() => users.id),
    /** Set exactly while `status` is `snoozed`. */
    snoozedUntil: ts('snoozed_until'),
    tags: text('tags').array().notNull().default(sql`'{}'::text[]`),
    lastMessageAt: ts('last_message_at').notNull(),
    lastIncomingAt: ts('last_incoming_at'),
    messageCount: integer('message_count').notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.id] }),
    // One index per filter, each ending in the page order (newest `last_message_at` first, ties by id).
    index('threads_list').on(t.organizationId, t.lastMessageAt, t.id),
    index('threads_status').on(t.organizationId, t.status, t.lastMessageAt, t.id),
    index('threads_assignee').on(t.organizationId, t.assigneeId, t.status, t.lastMessageAt, t.id),
    index('threads_contact').on(t.organizationId, t.contactId, t.lastMessageAt, t.id).where(sql`${t.contactId} IS NOT NULL`),
    index('threads_channel').on(t.organizationId, t.channelId, t.lastMessageAt, t.id).where(sql`${t.channelId} IS NOT NULL`),
    index('threads_tags').using('gin', t.organizationId, t.tags),
    // The snoozes to end, across organizations (the snooze worker).
    index('threads_snoozed').on(t.snoozedUntil).where(sql`${t.status} = 'snoozed'`),
  ],
);

/** Internal notes on a thread: kept in the service, never sent (no outbox row, no provider call). */
export const threadNotes = pgTable(
  'thread_notes',
  {
    ...audit,
    organizationId: orgRef(),
    threadId: text('thread_id').notNull(),
    text: text('text').notNull(),
    /** user | apiKey */
    authorType: text('author_type').notNull(),
    authorId: uuid('author_id'),
    authorName: text('author_name'),
    /** The OAuth client an assistant wrote it through (its name), when it did. */
    authorClient: text('author_client'),
  },
  (t) => [
    foreignKey({ columns: [t.organizationId, t.threadId], foreignColumns: [threads.organizationId, threads.id] }),
    index('thread_notes_thread').on(t.organizationId, t.threadId, t.createdAt, t.id).where(sql`${t.deletedAt} IS NULL`),
  ],
);

/**
 * The bytes of attachments, once per organization and content (`sha256` of the bytes, hex): a message
 * received on several channels of one organization, a forward and a copy all name the same row. Never
 * shared between organizations (whether another one holds a file must not be observable). Rows are never
 * removed while a `message_attachments` row names them; messages are only soft-deleted.
 */
export const attachmentContents = pgTable(
  'attachment_contents',
  {
    organizationId: orgRef(),
    sha256: text('sha256').notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
    size: integer('size').notNull(),
    content: bytea('content').notNull(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.sha256] })],
);

/**
 * A message's attachments, kept up to `EMAIL_ATTACHMENT_MAX_BYTES` per message (their name, type and size
 * are also in the message's `metadata.email.attachments`); the bytes are in `attachment_contents`.
 */
export const messageAttachments = pgTable(
  'message_attachments',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: orgRef(),
    messageId: uuid('message_id')
      .notNull()
      .references(() => messages.id),
    createdAt: ts('created_at').notNull().defaultNow(),
    filename: text('filename'),
    contentType: text('content_type').notNull(),
    size: integer('size').notNull(),
    contentId: text('content_id'),
    contentSha256: text('content_sha256').notNull(),
  },
  (t) => [
    index('message_attachments_message').on(t.organizationId, t.messageId),
    foreignKey({ name: 'message_attachments_content_fk', columns: [t.organizationId, t.contentSha256], foreignColumns: [attachmentContents.organizationId, attachmentContents.sha256] }),
  ],
);

// ---------------------------------------------------------------- channels

export interface ChannelInboundSettings {
  /** "sms": a text channel, whose provider settings are in `sms` (email settings unused). */
  mode: 'smtp' | 'imap' | 'sms';
  host?: string;
  port?: number;
  secure?: boolean;
  username?: string;
  mailbox?: string;
  /** IMAP: as `ChannelOutboundSettings.tls`. */
  tls?: 'required' | 'none';
  ca?: string | null;
  verifyCertificate?: boolean;
}

export interface ChannelOutboundSettings {
  host: string;
  port: number;
  secure: boolean;
  username?: string | null;
  from?: string | null;
  /** "required" (absent: required) or "none" (CHANNELS_ALLOW_PRIVATE only). */
  tls?: 'required' | 'none';
  /** A PEM certificate to trust for this server. */
  ca?: string | null;
  /** false: the server's certificate is not checked (CHANNELS_ALLOW_PRIVATE only); absent: true. */
  verifyCertificate?: boolean;
}

/**
 * An address the organization receives and sends mail as. Passwords are never in the settings: they are
 * in `inbound_secret` / `outbound_secret`, encrypted (AES-256-GCM, `src/core/encryption.ts`).
 */
export const channels = pgTable(
  'channels',
  {
    ...audit,
    organizationId: orgRef(),
    type: text('type').$type<'email' | 'sms'>().notNull(),
    name: text('name').notNull(),
    /** Lower-cased. */
    address: text('address').notNull(),
    inbound: jsonb('inbound').$type<ChannelInboundSettings>().notNull(),
    outbound: jsonb('outbound').$type<ChannelOutboundSettings | null>(),
    inboundSecret: text('inbound_secret'),
    outboundSecret: text('outbound_secret'),
    status: text('status').$type<'active' | 'error' | 'disabled'>().notNull().default('active'),
    lastError: text('last_error'),
    lastSyncAt: ts('last_sync_at'),
    /** A text channel's provider settings without its secret (the secret is in `outbound_secret`, encrypted); null for email. */
    sms: jsonb('sms').$type<SmsChannelSettings | null>(),
    /** Attempts in a row that could not get through to the relay (connection, TLS, login); 0 after a success. */
    sendFailures: integer('send_failures').notNull().default(0),
    /** After repeated relay failures, no attempt goes to the relay before this time (per-channel backoff). */
    sendPausedUntil: ts('send_paused_until'),
  },
  (t) => [
    listIndex('channels_list', t),
    uniqueIndex('channels_address_live').on(t.organizationId, t.address).where(sql`${t.deletedAt} IS NULL`),
    // The SMTP receiver's look-up of a recipient address, across organizations: one live inbound-SMTP
    // channel per address, so that no organization can claim another's mail by naming its address.
    uniqueIndex('channels_smtp_address').on(t.address).where(sql`${t.deletedAt} IS NULL AND ${t.inbound}->>'mode' = 'smtp'`),
  ],
);

/**
 * The IMAP sync of an inbound-IMAP channel: which process syncs it (a lease, renewed while it syncs) and how
 * far it got. `uid_validity` and `last_uid` are written in the transaction of the message they produced, so a
 * restart resumes after the last committed message, neither skipping nor repeating one.
 */
export const channelSyncStates = pgTable(
  'channel_sync_states',
  {
    channelId: uuid('channel_id')
      .primaryKey()
      .references(() => channels.id),
    organizationId: orgRef(),
    /** The mailbox the checkpoint is for; another mailbox starts over (with the initial window). */
    mailbox: text('mailbox').notNull(),
    /** The mailbox's UIDVALIDITY when `last_uid` was taken; null before the first sync. */
    uidValidity: bigint('uid_validity', { mode: 'number' }),
    /** The highest UID whose message is committed (or that was looked at and left out). */
    lastUid: bigint('last_uid', { mode: 'number' }).notNull().default(0),
    /** Whether the first sync (the last IMAP_INITIAL_DAYS days) is complete for this UIDVALIDITY. */
    initialDone: boolean('initial_done').notNull().default(false),
    /** The process syncing the channel, until `lease_until`. */
    leaseOwner: text('lease_owner'),
    leaseUntil: ts('lease_until'),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [index('channel_sync_states_lease').on(t.leaseUntil)],

);

/** A text channel's provider (Twilio-compatible or SMPP), without the secret; see src/modules/channels/sms. */
export type SmsProviderSettings =
  | { kind: 'twilio'; accountSid: string; apiBaseUrl: string; messagingServiceSid: string | null }
  | { kind: 'smpp'; host: string; port: number; tls: boolean; systemId: string; systemType: string | null };

export interface SmsChannelSettings {
  provider: SmsProviderSettings;
  /** Segments per second the sender sends at most on this channel. */
  rate: number;
  /** Answered to a HELP text; null: HELP is not answered. */
  helpText: string | null;
}

/**
 * Opt-outs of a text channel: numbers that texted STOP (or that the provider reports as unsubscribed, Twilio
 * error 21610). Nothing is sent to them on the channel until they text START or a person removes the row.
 */
export const smsOptOuts = pgTable(
  'sms_opt_outs',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: orgRef(),
    channelId: uuid('channel_id')
      .notNull()
      .references(() => channels.id),
    phoneNumber: text('phone_number').notNull(),
    /** "keyword" (the number texted STOP), "provider" (error 21610), "api" (added by a person or program). */
    source: text('source').notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('sms_opt_outs_number').on(t.channelId, t.phoneNumber), index('sms_opt_outs_list').on(t.organizationId, t.channelId, t.createdAt, t.id)],
);

/** What the SMS sender needs to send one text: fixed when queued. */
export interface OutboxText {
  from: string;
  to: string;
  text: string;
  segments: number;
}

/**
 * The columns every outbox shares (mail and text messages): the message and its channel, the state of its
 * sending (pending, sending (claimed until `lease_until`), sent or failed), its attempts, who queued it, and
 * the key that keeps automatic replies to one per recipient per automation per day. `transmitted_at` is
 * committed before the request leaves: a claim whose lease ran out with it set may have been accepted, so
 * it is never sent again (at most once).
 */
const outboxColumns = () => ({
  id: uuid('id').primaryKey().defaultRandom(),
  organizationId: orgRef(),
  messageId: uuid('message_id')
    .notNull()
    .references(() => messages.id),
  channelId: uuid('channel_id')
    .notNull()
    .references(() => channels.id),
  status: text('status').$type<'pending' | 'sending' | 'sent' | 'failed'>().notNull().default('pending'),
  attempt: integer('attempt').notNull().default(0),
  nextAttemptAt: ts('next_attempt_at').notNull().defaultNow(),
  leaseUntil: ts('lease_until'),
  transmittedAt: ts('transmitted_at'),
  lastError: text('last_error'),
  /** Who queued the message: the events of its sending carry the same actor and depth. */
  actorType: text('actor_type').notNull(),
  actorId: uuid('actor_id'),
  depth: integer('depth').notNull().default(0),
  /** For an automatic reply: `<automation id>:<recipient>:<UTC day>`, unique (RFC 3834: once a day). */
  autoReplyKey: text('auto_reply_key'),
  createdAt: ts('created_at').notNull().defaultNow(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
  sentAt: ts('sent_at'),
});

/** The outbox of texts (`outboxColumns`): one row per outgoing text, written in the message's transaction, claimed by the SMS sender. */
export const smsOutbox = pgTable(
  'sms_outbox',
  {
    ...outboxColumns(),
    sms: jsonb('sms').$type<OutboxText>().notNull(),
  },
  (t) => [
    uniqueIndex('sms_outbox_message').on(t.messageId),
    uniqueIndex('sms_outbox_auto_reply').on(t.autoReplyKey).where(sql`${t.autoReplyKey} IS NOT NULL`),
    index('sms_outbox_due').on(t.nextAttemptAt).where(sql`${t.status} IN ('pending', 'sending')`),
  ],
);

/**
 * The media of received MMS, one row per item (its place in the message's `metadata.sms.media`): written
 * `pending` in the message's transaction, then fetched by the media worker (claimed with a lease, retried
 * with backoff) and kept as an attachment of the message (`attachment_id`), or given up (`failed`, the
 * reason in `last_error`).
 */
export const smsMedia = pgTable(
  'sms_media',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: orgRef(),
    messageId: uuid('message_id')
      .notNull()
      .references(() => messages.id),
    channelId: uuid('channel_id')
      .notNull()
      .references(() => channels.id),
    position: integer('position').notNull(),
    url: text('url').notNull(),
    /** The type the provider declared (MediaContentType{i}), if any. */
    contentType: text('content_type'),
    status: text('status').$type<'pending' | 'fetching' | 'stored' | 'failed'>().notNull().default('pending'),
    attempt: integer('attempt').notNull().default(0),
    nextAttemptAt: ts('next_attempt_at').notNull().defaultNow(),
    leaseUntil: ts('lease_until'),
    lastError: text('last_error'),
    /** The attachment it was kept as, and its size. */
    attachmentId: uuid('attachment_id'),
    size: integer('size'),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('sms_media_item').on(t.messageId, t.position), index('sms_media_due').on(t.nextAttemptAt).where(sql`${t.status} IN ('pending', 'fetching')`)],
);

/**
 * The parts of a long text received over SMPP (concatenated with a UDH or the sar_* TLVs), kept as they arrive
 * until the last one: then they are joined into one message and deleted in its transaction. A part's
 * deliver_sm is answered once its row is committed, so a reconnect loses nothing; parts of a message that
 * never completes are deleted after a day.
 */
export const smsParts = pgTable(
  'sms_parts',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: orgRef(),
    channelId: uuid('channel_id')
      .notNull()
      .references(() => channels.id),
    /** The sender as the SMSC named it (source_addr). */
    sender: text('sender').notNull(),
    recipient: text('recipient').notNull(),
    /** The concatenation reference (8 or 16 bits), the number of parts and this part's number (from 1). */
    ref: integer('ref').notNull(),
    total: integer('total').notNull(),
    seq: integer('seq').notNull(),
    text: text('text').notNull(),
    receivedAt: ts('received_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('sms_parts_part').on(t.channelId, t.sender, t.ref, t.total, t.seq), index('sms_parts_received').on(t.receivedAt)],
);

/**
 * A received email that failed to be imported: counted per channel and email while it fails the same way,
 * and given up on (`not_importable_at`) after the third such failure or a permanent refusal; the IMAP
 * checkpoint then moves past it and SMTP answers 5xx. Holds what is readable of it, never its content.
 */
export const inboundFailures = pgTable(
  'inbound_failures',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: orgRef(),
    channelId: uuid('channel_id')
      .notNull()
      .references(() => channels.id),
    /** `smtp` or `imap`. */
    provider: text('provider').notNull(),
    /** The same email across attempts: `imap:<uidvalidity>:<uid>`, or the sha256 of the bytes received over SMTP. */
    fingerprint: text('fingerprint').notNull(),
    /** Why it failed, for a person: never SQL, never the email's content. */
    reason: text('reason').notNull(),
    size: integer('size').notNull(),
    sender: text('sender'),
    subject: text('subject'),
    /** Failures in a row with this reason. */
    attempts: integer('attempts').notNull().default(1),
    notImportableAt: ts('not_importable_at'),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('inbound_failures_email').on(t.channelId, t.fingerprint), index('inbound_failures_list').on(t.organizationId, t.channelId, t.createdAt, t.id)],
);

/** What the mail sender needs to send one outgoing message: the message as composed when it was queued. */
export interface OutboxMail {
  /** The Message-ID, fixed when queued (without the angle brackets): every attempt sends the same one. */
  messageId: string;
  /** The Date header (ISO 8601), fixed when queued. */
  date: string;
  from: { email: string; name?: string | undefined };
  to: { email: string; name?: string | undefined }[];
  cc: { email: string; name?: string | undefined }[];
  bcc: { email: string; name?: string | undefined }[];
  subject: string;
  text: string;
  html?: string | undefined;
  inReplyTo?: string | undefined;
  references: string[];
  /** RFC 3834: set on mail an automation sends. */
  autoSubmitted?: 'auto-replied' | 'auto-generated' | undefined;
  /** The attachments, in order: rows of `message_attachments` of this message (their content is read when sending). */
  attachments?: { id: string; filename: string | null; contentType: string; contentId?: string | null | undefined }[] | undefined;
}

/**
 * The outbox of mail (`outboxColumns`): one row per outgoing email message, written in the same transaction
 * as the message. `transmitted_at` is set just before the end of the message data is sent to the relay.
 */
export const mailOutbox = pgTable(
  'mail_outbox',
  {
    ...outboxColumns(),
    mail: jsonb('mail').$type<OutboxMail>().notNull(),
  },
  (t) => [
    uniqueIndex('mail_outbox_message').on(t.messageId),
    uniqueIndex('mail_outbox_auto_reply').on(t.autoReplyKey).where(sql`${t.autoReplyKey} IS NOT NULL`),
    index('mail_outbox_due').on(t.nextAttemptAt).where(sql`${t.status} IN ('pending', 'sending')`),
    // The attempts under way per channel: the claim keeps each channel's concurrency bounded.
    index('mail_outbox_sending').on(t.channelId).where(sql`${t.status} = 'sending'`),
  ],
);

// ---------------------------------------------------------------- businesses, customers, transactions

export const businesses = pgTable(
  'businesses',
  {
    ...audit,
    organizationId: orgRef(),
    createdBy: uuid('created_by').notNull(),
    name: text('name').notNull(),
    data: jsonb('data').$type<Json>().notNull().default({}),
  },
  (t) => [listIndex('businesses_list', t)],
);

export const customers = pgTable(
  'customers',
  {
    ...audit,
    organizationId: orgRef(),
    businessId: uuid('business_id').references(() => businesses.id),
    contactId: uuid('contact_id').references(() => contacts.id),
    type: text('type'),
    name: text('name'),
    email: text('email'),
    phone: text('phone'),
    notes: text('notes'),
    status: text('status'),
    customerSince: ts('customer_since'),
    data: jsonb('data').$type<Json>().notNull().default({}),
  },
  (t) => [listIndex('customers_list', t)],
);

export const customerTransactions = pgTable(
  'customer_transactions',
  {
    ...audit,
    organizationId: orgRef(),
    businessId: uuid('business_id').references(() => businesses.id),
    customerId: uuid('customer_id')
      .notNull()
      .references(() => customers.id),
    /** Exact decimal; `numeric` keeps the scale the client sent ("10.50" stays "10.50"). */
    amount: numeric('amount').notNull(),
    currency: text('currency').notNull(),
    status: text('status').notNull(),
    type: text('type').notNull(),
    description: text('description'),
    transactionDate: ts('transaction_date'),
  },
  (t) => [index('customer_transactions_customer').on(t.customerId, t.createdAt, t.id).where(sql`${t.deletedAt} IS NULL`)],
);

// ---------------------------------------------------------------- folders and files

export const folders = pgTable(
  'folders',
  {
    ...audit,
    organizationId: orgRef(),
    name: text('name').notNull(),
    parentFolderId: uuid('parent_folder_id').references((): AnyPgColumn => folders.id),
    createdBy: uuid('created_by').notNull(),
    metadata: jsonb('metadata').$type<Json>().notNull().default({}),
  },
  (t) => [listIndex('folders_list', t), index('folders_parent').on(t.parentFolderId).where(sql`${t.deletedAt} IS NULL`)],
);

/** Files kept in folders. No endpoint writes them yet; they exist so `fileCount` is a real count. */
export const files = pgTable(
  'files',
  {
    ...audit,
    organizationId: orgRef(),
    folderId: uuid('folder_id').references(() => folders.id),
    name: text('name').notNull(),
    mimeType: text('mime_type'),
    size: integer('size').notNull().default(0),
    createdBy: uuid('created_by').notNull(),
  },
  (t) => [index('files_folder').on(t.folderId).where(sql`${t.deletedAt} IS NULL`)],
);

// ---------------------------------------------------------------- automations

export const automations = pgTable(
  'automations',
  {
    ...audit,
    organizationId: orgRef(),
    name: text('name').notNull(),
    description: text('description'),
    triggerEvent: text('trigger_event').notNull(),
    /** Kept for evaluation; never part of a response (the spec leaves it out). */
    triggerType: text('trigger_type').notNull(),
    cronExpression: text('cron_expression'),
    condition: jsonb('condition').$type<Json>(),
    instructions: text('instructions').notNull(),
    createdBy: uuid('created_by').notNull(),
    enabled: boolean('enabled').notNull().default(true),
    permissions: jsonb('permissions').$type<Json>(),
    groupId: uuid('group_id'),
    groupName: text('group_name'),
    groupMetadata: jsonb('group_metadata').$type<Json>(),
    maxExecutions: integer('max_executions'),
    currentExecutions: integer('current_executions').notNull().default(0),
    expiresAt: ts('expires_at'),
    status: text('status').notNull(),
    /** The plan's steps (set by evaluation); null until a plan exists. */
    actions: jsonb('actions').$type<{ operation: string; input: Json }[]>(),
    /** IANA time zone of `cron_expression`; null means UTC. */
    timezone: text('timezone'),
    /** Why evaluation or the last run failed; null otherwise. */
    statusReason: text('status_reason'),
    /** The trigger fields the client set himself (`triggerType`, `triggerEvent`, `cronExpression`, `condition`): evaluation keeps them. */
    explicitTrigger: jsonb('explicit_trigger').$type<Json>().notNull().default(sql`'{}'::jsonb`),
    /** The creator's permissions when the automation was created or its instructions changed: a plan may not exceed them. */
    creatorPermissions: text('creator_permissions').array().notNull().default(sql`'{}'::text[]`),
    /** Set while an evaluation is due (at or after this time); null when none is pending. */
    evaluateAfter: ts('evaluate_after'),
    evaluationAttempts: integer('evaluation_attempts').notNull().default(0),
    /** Next cron tick of an active scheduled automation; null otherwise. */
    nextRunAt: ts('next_run_at'),
    /** When the last successful run finished. */
    lastRunAt: ts('last_run_at'),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    /** One or two plain sentences describing the plan, generated from it; null while there is no plan. */
    planSummary: text('plan_summary'),
    /**
     * The credential the automation acts for: `api_key` (`acts_for_id` is the key) or `user` (`acts_for_id`
     * is the person, `acts_for_grant_id` the OAuth grant they called through). Checked before every run.
     */
    actsForType: text('acts_for_type'),
    actsForId: uuid('acts_for_id'),
    actsForGrantId: uuid('acts_for_grant_id'),
    /** SHA-256 of the person's password hash when the credential was recorded: a changed password stops the automation. */
    actsForPasswordStamp: text('acts_for_password_stamp'),
    /** Who made it active last (`{ type, id, name, client? }`, the answer's `approvedBy`) and when; null until then. */
    approvedBy: jsonb('approved_by').$type<Json>(),
    approvedAt: ts('approved_at'),
    /** Who created it (`{ type, id, name, client? }`): the app an assistant called through is shown on the approval page. */
    createdVia: jsonb('created_via').$type<Json>(),
    /** The last call through an OAuth token that asked for it to become active, and when (shown on the approval page). */
    approvalRequestedBy: jsonb('approval_requested_by').$type<Json>(),
    approvalRequestedAt: ts('approval_requested_at'),
  },
  (t) => [
    listIndex('automations_list', t),
    index('automations_evaluation_due').on(t.evaluateAfter).where(sql`${t.evaluateAfter} IS NOT NULL AND ${t.deletedAt} IS NULL`),
    index('automations_scheduled_active')
      .on(t.nextRunAt)
      .where(sql`${t.triggerType} = 'scheduled' AND ${t.status} = 'active' AND ${t.deletedAt} IS NULL`),
    index('automations_trigger').on(t.organizationId, t.triggerEvent).where(sql`${t.status} = 'active' AND ${t.deletedAt} IS NULL`),
  ],
);

/** The steps' effects of one run: the operation and the id of the record it touched. */
export interface ExecutionStepRecord {
  operation: string;
  resourceId: string | null;
}

/**
 * One run of an automation: for an event (unique per automation and event) or for a cron tick
 * (unique per automation and tick). `pending` rows are the work queue, claimed with SKIP LOCKED.
 */
export const automationExecutions = pgTable(
  'automation_executions',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: orgRef(),
    automationId: uuid('automation_id')
      .notNull()
      .references(() => automations.id),
    eventId: uuid('event_id'),
    scheduledFor: ts('scheduled_for'),
    /** pending, succeeded, failed, skipped */
    status: text('status').notNull(),
    error: text('error'),
    steps: jsonb('steps').$type<ExecutionStepRecord[]>().notNull().default(sql`'[]'::jsonb`),
    /** Chain depth: 1 for a run caused by a person's write, n+1 for one caused by a run of depth n. */
    depth: integer('depth').notNull().default(1),
    /** The write (event) or cron tick (execution id) at the root of the chain of runs this one belongs to: the fan-out cap counts per origin. */
    originId: uuid('origin_id'),
    createdAt: ts('created_at').notNull().defaultNow(),
    startedAt: ts('started_at'),
    finishedAt: ts('finished_at'),
  },
  (t) => [
    uniqueIndex('automation_executions_event').on(t.automationId, t.eventId).where(sql`${t.eventId} IS NOT NULL`),
    uniqueIndex('automation_executions_tick').on(t.automationId, t.scheduledFor).where(sql`${t.scheduledFor} IS NOT NULL`),
    index('automation_executions_list').on(t.automationId, t.createdAt, t.id),
    index('automation_executions_pending').on(t.createdAt).where(sql`${t.status} = 'pending'`),
    index('automation_executions_origin').on(t.originId).where(sql`${t.originId} IS NOT NULL`),
    index('automation_executions_org_recent').on(t.organizationId, t.createdAt),
  ],
);

/**
 * Automatic messages an automation sent (mail, texts, any kind): one row per recipient, written in the run's
 * transaction beside the queued message. The unique key holds an automation to one message per recipient per
 * UTC day across processes (RFC 3834 §2) in runs an event triggered; the rows of the last hour are the
 * organization's rate of automatic messages. Kept two days, then removed by the cleanup.
 */
export const automaticMessages = pgTable(
  'automatic_messages',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: orgRef(),
    automationId: uuid('automation_id')
      .notNull()
      .references(() => automations.id),
    /** The recipient as its kind names it: an email address (lower-cased), a phone number (E.164). */
    recipient: text('recipient').notNull(),
    /** The UTC day, `YYYY-MM-DD`; null for the messages of a scheduled run, which its schedule bounds instead (nulls never conflict). */
    day: text('day'),
    messageId: uuid('message_id'),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('automatic_messages_once_a_day').on(t.automationId, t.recipient, t.day), index('automatic_messages_org_recent').on(t.organizationId, t.createdAt)],
);

// ---------------------------------------------------------------- events

/**
 * Every write through the operation table records its events here, in the write's transaction. Events
 * are not soft-deleted: they are kept `EVENT_RETENTION_DAYS` and then removed. `dispatched_at` null
 * marks an event not yet offered to the automations (the dispatcher's queue).
 */
export const events = pgTable(
  'events',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: derivedOrgId(),
    type: text('type').notNull(),
    resourceId: uuid('resource_id'),
    occurredAt: ts('occurred_at').notNull().defaultNow(),
    /** api_key, user, automation or system */
    actorType: text('actor_type').notNull(),
    actorId: uuid('actor_id'),
    /**
     * The record as the write answered it, stored as JSON text (`json`, not `jsonb`): the write's statement
     * builds it as JSON already, so storing it costs no parse per event, and it reads back with the keys in
     * the record's own order. Nothing queries inside it in SQL.
     */
    data: json('data').$type<unknown>(),
    /** 0 for a write by a person or key; n for a write by an automation run of depth n. */
    depth: integer('depth').notNull().default(0),
    /** For an event written by an automation run: the origin of that run (see automation_executions.origin_id); null for a person's write. */
    originId: uuid('origin_id'),
    dispatchedAt: ts('dispatched_at'),
  },
  (t) => [
    index('events_list').on(t.organizationId, t.occurredAt, t.id),
    index('events_type').on(t.organizationId, t.type, t.occurredAt, t.id),
    index('events_undispatched').on(t.occurredAt).where(sql`${t.dispatchedAt} IS NULL`),
  ],
);

// ---------------------------------------------------------------- idempotency

/**
 * Idempotency keys of creating calls, per caller (a REST API key, or an MCP client's grant): the request's
 * hash and, once it has run, its answer. `response_status` null means the first request is still running
 * (since `locked_at`). Kept 24 hours.
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    /** The API key (REST) or OAuth grant (MCP) the key belongs to. */
    callerId: uuid('caller_id').notNull(),
    key: text('key').notNull(),
    organizationId: orgRef(),
    requestHash: text('request_hash').notNull(),
    responseStatus: integer('response_status'),
    responseBody: jsonb('response_body').$type<unknown>(),
    lockedAt: ts('locked_at').notNull().defaultNow(),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.callerId, t.key] }), index('idempotency_keys_created').on(t.createdAt)],
);

// ---------------------------------------------------------------- webhooks

/**
 * An organization's receiver of events. The signing secret is kept as it is given out (it must sign
 * every delivery, so it cannot be hashed); the previous secret keeps signing beside the new one until
 * `previous_secret_expires_at` after a rotation.
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    ...audit,
    organizationId: orgRef(),
    url: text('url').notNull(),
    description: text('description'),
    /** Event types delivered; `*` for all. */
    eventTypes: text('event_types').array().notNull(),
    enabled: boolean('enabled').notNull().default(true),
    /** Why the service disabled the endpoint (deliveries failing for 3 days); null otherwise. */
    disabledReason: text('disabled_reason'),
    metadata: jsonb('metadata').$type<Json>().notNull().default({}),
    secret: text('secret').notNull(),
    previousSecret: text('previous_secret'),
    previousSecretExpiresAt: ts('previous_secret_expires_at'),
  },
  (t) => [listIndex('webhook_endpoints_list', t)],
);

/**
 * One event for one endpoint: the durable delivery queue. `status` pending (waiting for
 * `next_attempt_at`), delivering (claimed until `lease_until`), succeeded or failed (given up). One row
 * per (endpoint, event), so an event reaches an endpoint through one delivery at a time.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    createdAt: ts('created_at').notNull().defaultNow(),
    organizationId: derivedOrgId(),
    endpointId: uuid('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id),
    /** The event delivered (no foreign key: events expire on their own schedule). */
    eventId: uuid('event_id').notNull(),
    eventType: text('event_type').notNull(),
    /** The body to send when it is not a recorded event (the `webhook.test` event); null reads the event. */
    payload: jsonb('payload').$type<unknown>(),
    status: text('status').$type<'pending' | 'delivering' | 'succeeded' | 'failed'>().notNull().default('pending'),
    attempt: integer('attempt').notNull().default(0),
    nextAttemptAt: ts('next_attempt_at').notNull().defaultNow(),
    leaseUntil: ts('lease_until'),
    lastStatusCode: integer('last_status_code'),
    lastDurationMs: integer('last_duration_ms'),
    lastError: text('last_error'),
    lastAttemptAt: ts('last_attempt_at'),
    deliveredAt: ts('delivered_at'),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_endpoint_event').on(t.endpointId, t.eventId),
    index('webhook_deliveries_list').on(t.endpointId, t.createdAt, t.id),
    index('webhook_deliveries_due').on(t.nextAttemptAt).where(sql`${t.status} IN ('pending', 'delivering')`),
  ],
);

// ---------------------------------------------------------------- secrets keys

/**
 * Where each key of stored secrets (`src/core/encryption.ts`) lived when a server last used it: a server that
 * finds secrets under a key it does not have names the key and where it used to be. The key itself is never
 * stored here (only its id, the first 8 hex digits of its SHA-256).
 */
export const secretKeys = pgTable('secret_keys', {
  keyId: text('key_id').primaryKey(),
  /** `SECRETS_KEY`, or the path of the key file (`DATA_DIR/secrets.key`). */
  location: text('location').notNull(),
  /** The machine it was on (its host name). */
  host: text('host').notNull(),
  lastUsedAt: ts('last_used_at').notNull().defaultNow(),
});

// ---------------------------------------------------------------- domains

export const domains = pgTable(
  'domains',
  {
    ...audit,
    organizationId: orgRef(),
    name: text('name').notNull(),
    createdBy: uuid('created_by').notNull(),
    /** DKIM: the selector of the current signing key (`<selector>._domainkey.<name>`); null while the domain has none. */
    dkimSelector: text('dkim_selector'),
    /** The public key (base64 DER, SubjectPublicKeyInfo), as published in DNS. */
    dkimPublicKey: text('dkim_public_key'),
    /** The private key (PEM), encrypted like every stored secret; never returned. */
    dkimPrivateKey: text('dkim_private_key'),
    dkimCreatedAt: ts('dkim_created_at'),
    /**
     * Ownership: the token the domain's TXT record `_switchboard.<name>` must hold (random, per domain row),
     * and when that record was found (or the operator marked it verified); null while pending.
     */
    verificationToken: text('verification_token')
      .notNull()
      .default(sql`'switchboard-verification=' || replace(gen_random_uuid()::text, '-', '')`),
    verifiedAt: ts('verified_at'),
  },
  (t) => [
    listIndex('domains_list', t),
    uniqueIndex('domains_name_live').on(t.organizationId, sql`lower(${t.name})`).where(sql`${t.deletedAt} IS NULL`),
    // A domain is verified by one organization at most: a second organization's verification is refused.
    uniqueIndex('domains_verified_name').on(sql`lower(${t.name})`).where(sql`${t.deletedAt} IS NULL AND ${t.verifiedAt} IS NOT NULL`),
  ],
);

export const domainRegistrations = pgTable(
  'domain_registrations',
  {
    ...audit,
    organizationId: orgRef(),
    domainId: uuid('domain_id')
      .notNull()
      .references(() => domains.id),
    state: text('state').notNull(),
    externalDomainId: text('external_domain_id'),
    externalId: text('external_id'),
    autoRenew: boolean('auto_renew').notNull().default(true),
    whoisPrivacy: boolean('whois_privacy').notNull().default(true),
    transferLock: boolean('transfer_lock').notNull().default(true),
    period: integer('period').notNull().default(1),
    createdBy: uuid('created_by').notNull(),
  },
  (t) => [index('domain_registrations_domain').on(t.domainId, t.createdAt, t.id).where(sql`${t.deletedAt} IS NULL`)],
);

// ---------------------------------------------------------------- OAuth 2.1 authorization server

export const oauthClients = pgTable('oauth_clients', {
  /** The public `client_id`. */
  id: text('id').primaryKey(),
  createdAt: ts('created_at').notNull().defaultNow(),
  /** SHA-256 of the client secret, for confidential clients; null for public clients. */
  secretHash: text('secret_hash'),
  tokenEndpointAuthMethod: text('token_endpoint_auth_method').notNull(),
  redirectUris: text('redirect_uris').array().notNull(),
  grantTypes: text('grant_types').array().notNull(),
  responseTypes: text('response_types').array().notNull(),
  clientName: text('client_name'),
  clientUri: text('client_uri'),
  logoUri: text('logo_uri'),
  scope: text('scope'),
  /** The registration request as received, echoed in the registration response. */
  metadata: jsonb('metadata').$type<Json>().notNull().default({}),
  /** Clients known by a metadata document (id = its URL): when the document must be fetched again. Null for registered clients. */
  documentExpiresAt: ts('document_expires_at'),
});

/** One user's approval of one client: the scopes and tool categories granted. Tokens hang off it. */
export const oauthGrants = pgTable(
  'oauth_grants',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id),
    organizationId: orgRef(),
    clientId: text('client_id')
      .notNull()
      .references(() => oauthClients.id),
    scopes: text('scopes').array().notNull(),
    categories: text('categories').array().notNull(),
    resource: text('resource').notNull(),
    /** The person chose "read only" at consent: the grant's tools are those that only read. */
    readOnly: boolean('read_only').notNull().default(false),
    /** The person ticked "Send email and text messages on your behalf": without it send, reply and forward are refused. */
    send: boolean('send').notNull().default(false),
    revokedAt: ts('revoked_at'),
  },
  (t) => [index('oauth_grants_user_client').on(t.userId, t.clientId)],
);

export const oauthCodes = pgTable('oauth_codes', {
  /** SHA-256 of the authorization code. */
  codeHash: text('code_hash').primaryKey(),
  createdAt: ts('created_at').notNull().defaultNow(),
  expiresAt: ts('expires_at').notNull(),
  /** Set by the one atomic UPDATE that redeems the code; a second redemption finds it set. */
  usedAt: ts('used_at'),
  grantId: uuid('grant_id')
    .notNull()
    .references(() => oauthGrants.id),
  clientId: text('client_id').notNull(),
  redirectUri: text('redirect_uri').notNull(),
  codeChallenge: text('code_challenge').notNull(),
});

export const oauthTokens = pgTable(
  'oauth_tokens',
  {
    /** SHA-256 of the opaque token. */
    tokenHash: text('token_hash').primaryKey(),
    kind: text('kind').$type<'access' | 'refresh'>().notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
    expiresAt: ts('expires_at').notNull(),
    /** Refresh tokens: set when rotated; presenting it again revokes the whole grant. */
    usedAt: ts('used_at'),
    revokedAt: ts('revoked_at'),
    grantId: uuid('grant_id')
      .notNull()
      .references(() => oauthGrants.id),
    /**
     * The grant's tool categories and read-only choice when the token was issued: a later consent to the
     * same client updates the grant, not the tokens already out (they keep these until they expire or
     * rotate); a change on the connected-apps page applies to them too. Null: the grant's (older tokens).
     */
    categories: text('categories').array(),
    readOnly: boolean('read_only'),
  },
  (t) => [index('oauth_tokens_grant').on(t.grantId)],
);

/** Browser sessions of the sign-in page (cookie value stored as a SHA-256 hash). */
export const oauthSessions = pgTable('oauth_sessions', {
  idHash: text('id_hash').primaryKey(),
  createdAt: ts('created_at').notNull().defaultNow(),
  expiresAt: ts('expires_at').notNull(),
  userId: uuid('user_id')
    .notNull()
    .references(() => users.id),
});

// ---------------------------------------------------------------- relations (for single-query embeds)

export const contactsRelations = relations(contacts, ({ many }) => ({
  emails: many(contactEmails),
  phoneNumbers: many(contactPhoneNumbers),
  addresses: many(contactAddresses),
}));
export const contactEmailsRelations = relations(contactEmails, ({ one }) => ({
  contact: one(contacts, { fields: [contactEmails.contactId], references: [contacts.id] }),
}));
export const contactPhoneNumbersRelations = relations(contactPhoneNumbers, ({ one }) => ({
  contact: one(contacts, { fields: [contactPhoneNumbers.contactId], references: [contacts.id] }),
}));
export const contactAddressesRelations = relations(contactAddresses, ({ one }) => ({
  contact: one(contacts, { fields: [contactAddresses.contactId], references: [contacts.id] }),
}));

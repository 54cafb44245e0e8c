import { createHash, randomUUID } from 'node:crypto';
import { resolveDns } from '../../../core/dns.js';
import { LRUCache } from 'lru-cache';
import type { DnsResolver } from 'mailauth';
import { z } from 'zod';
import type { Clock } from '../../../core/clock.js';
import { systemClock } from '../../../core/clock.js';
import { isUniqueViolation, pgErrorCode } from '../../../core/errors.js';
import { defineOperation, type Actor, type Operation } from '../../../core/operation.js';
import { maybeInboundRunner, type OperationRunner } from '../runner.js';
import { JsonObject, Uuid } from '../../../core/schemas.js';
import type { Db, DbOrTx } from '../../../db/client.js';
import { assertChannelLive } from '../channels.repository.js';
import { recordChannelOutcome } from '../channel-health.js';
import { withTimeout, type AnalyzedEmail, type SmtpEnvelope } from './inbound-parse.js';
import { contactEmailIdFor, insertAttachments, insertReceivedMessage, receivedOnChannel, type NewAttachment } from '../../messages/messages.repository.js';
import { Message } from '../../messages/messages.schemas.js';
import { MailRefused, readEmail, type ParsePlace } from './parse-pool.js';
import { resolveThreadId } from '../../messages/threads.js';
import { toEmailChannel } from './email.view.js';

export { cleanText, legacyHeadersAsUtf8, type AuthenticationSummary, type Party, type SmtpEnvelope } from './inbound-parse.js';
export { MailBusy, MailRefused } from './parse-pool.js';

/**
 * Receiving email: one raw message (from the SMTP receiver or the IMAP sync) becomes one incoming message
 * per channel it is for. Read (parsed with mailparser, authenticated with mailauth: SPF, DKIM, DMARC) once, in
 * a worker thread with a deadline (`parse-pool.ts`), and written through the operation table's runner, so the
 * write has its events (`message.created`, `message.received`), webhooks and automations like every other.
 * Hostile input is ordinary input: whatever cannot be parsed is stored as well as it can be (the raw text,
 * with `metadata.email.parseError`); what cannot be read in time is refused (`MailRefused`).
 */

export interface InboundDeps {
  db: Db;
  /** Default: the runner set by `setInboundRunner`. */
  run?: OperationRunner | undefined;
  /** DNS for SPF, DKIM and DMARC: `(name, rrtype) => records`, like `dns.promises.resolve`. Tests inject one. */
  resolver?: DnsResolver | undefined;
  clock?: Clock | undefined;
  /** Attachment content kept per message (bytes); default 10 MB. */
  attachmentMaxBytes?: number | undefined;
  /** This server's name in the authentication results; default the machine's host name. */
  mta?: string | undefined;
  /** The longest the reading (parsing, authentication) of one email may take; default EMAIL_PARSE_TIMEOUT_MS. */
  parseTimeoutMs?: number | undefined;
}

export interface InboundChannel {
  id: string;
  organizationId: string;
  address: string;
}

/** Per email: `inTransaction` runs inside the message's transaction, after its write (the IMAP sync's checkpoint); it does not run for a duplicate. */
export interface ReceiveOptions {
  inTransaction?: ((tx: DbOrTx) => Promise<void>) | undefined;
}

export interface ReceiveResult {
  messageId: string;
  duplicate: boolean;
}

const SYSTEM_ACTOR: Actor = { type: 'system', id: null, depth: 0 };
const DEFAULT_ATTACHMENT_MAX_BYTES = 10 * 1024 * 1024;
const DNS_TIMEOUT_MS = 5000;

/** Raised inside the write when the channel already holds this message: the transaction rolls back. */
class DuplicateEmail extends Error {
  constructor(readonly existingId?: string) {
    super('duplicate');
  }
}

/** Node's answers that the name or the record does not exist: kept like records (negative caching, RFC 2308). */
const ABSENT = new Set(['ENOTFOUND', 'ENODATA']);

/**
 * A resolver that keeps `resolve`'s answers for `ttlMs`, records and absent answers alike, as a caching
 * resolver would: a receiver asks the same few questions for every message of one sender (its domain's SPF
 * and DMARC records, its address's PTR), and concurrent identical questions share one query. Timeouts and
 * server failures are not kept. Each caller gets its own copy of the records. Written here because Node's
 * resolver keeps nothing and caching lookups (cacheable-lookup) cover addresses only, not TXT or PTR.
 */
export function cachingResolver(resolve: DnsResolver, opts: { ttlMs?: number; max?: number } = {}): DnsResolver {
  const cache = new LRUCache<string, { records: unknown } | { absent: Error }>({
    max: opts.max ?? 5000,
    ttl: opts.ttlMs ?? 60_000,
    fetchMethod: async (key) => {
      const space = key.indexOf(' ');
      try {
        return { records: await resolve(key.slice(space + 1), key.slice(0, space)) };
      } catch (err) {
        if (ABSENT.has((err as { code?: string }).code ?? '')) return { absent: err as Error };
        throw err;
      }
    },
  });
  return async (name, rrtype) => {
    const answer = await cache.fetch(`${rrtype} ${name.toLowerCase()}`);
    if (!answer) throw new Error(`DNS ${rrtype} ${name}: no answer`);
    if ('absent' in answer) throw answer.absent;
    return structuredClone(answer.records);
  };
}

/** The system resolver, each query bounded in time, its answers kept for a minute. */
const systemResolver: DnsResolver = cachingResolver((name, rrtype) => withTimeout(resolveDns(name, rrtype), DNS_TIMEOUT_MS, `DNS ${rrtype} ${name}`));

const ReceiveInput = z.strictObject({
  channelId: Uuid,
  provider: z.enum(['smtp', 'imap']),
  message: JsonObject,
  thread: z.object({ messageId: z.string(), inReplyTo: z.array(z.string()), references: z.array(z.string()) }),
  senderEmail: z.string().nullable(),
  contentHash: z.string(),
});

/**
 * The Message-ID a second, different message with a known Message-ID is stored under: derived from the id
 * and the content, so that this second message received again is still recognised.
 */
const reusedIdVariant = (messageId: string, contentHash: string) =>
  `${createHash('sha256').update(`${messageId}\n${contentHash}`).digest('hex').slice(0, 40)}@reused-id.switchboard.invalid`;

/**
 * The internal operation a received email is written by (not in the table: no REST route or MCP tool
 * reaches it). Made per email because the attachments' bytes travel beside the input, not in it.
 *
 * Duplicates: a message is the one already on the channel when it has the same Message-ID and the same
 * content fingerprint (From, Date, Subject and body bytes; `contentHash`), or the same Message-ID on a message
 * received before fingerprints were kept. The same Message-ID with other content is a different message:
 * it is stored too, under a Message-ID derived from both (`metadata.email.messageId` keeps the real one).
 */
function receiveOperation(attachments: NewAttachment[], at: Date, inTransaction?: (tx: DbOrTx) => Promise<void>): Operation {
  return defineOperation({
    id: 'messages.receive',
    method: 'POST',
    event: () => ['message.created', 'message.received'],
    path: '/messages/receive',
    summary: 'Record a received email',
    input: ReceiveInput,
    output: Message,
    handler: async (input, ctx) => {
      let providerMessageId = input.thread.messageId;
      const known = await receivedOnChannel(ctx.db, ctx.orgId, input.channelId, providerMessageId);
      if (known) {
        if (known.contentHash === null || known.contentHash === input.contentHash) throw new DuplicateEmail(known.id);
        providerMessageId = reusedIdVariant(providerMessageId, input.contentHash);
      }
      const [threadId, emailAddressId] = await Promise.all([
        resolveThreadId(ctx.db, ctx.orgId, input.thread),
        input.senderEmail ? contactEmailIdFor(ctx.db, ctx.orgId, input.senderEmail) : Promise.resolve(null),
      ]);
      const row = await insertReceivedMessage(ctx.db, ctx.orgId, {
        ...(input.message as object),
        type: 'email',
        direction: 'incoming',
        status: 'received',
        providerName: input.provider,
        providerMessageId,
        channelId: input.channelId,
        threadId,
        emailAddressId,
      });
      if (!row) throw new DuplicateEmail((await receivedOnChannel(ctx.db, ctx.orgId, input.channelId, providerMessageId))?.id);
      await insertAttachments(ctx.db, ctx.orgId, row.id, attachments);
      await recordChannelOutcome(ctx.db, input.channelId, { ok: true, side: 'mailbox', at }, { view: toEmailChannel });
      // A channel deleted meanwhile (by any process) stores nothing: checked, and held, until the commit.
      await assertChannelLive(ctx.db, input.channelId);
      await inTransaction?.(ctx.db);
      return row;
    },
  });
}

/**
 * Reads (parses and authenticates) a raw email once, in a parse worker thread within the deadline, whatever
 * channels it is for. `client` names who delivered it (an SMTP client's address, an IMAP channel's session):
 * one email per client is read at a time; `place` is the one held for it in the queue when its sender announced it. Throws `MailRefused` when it cannot be read: its header block is
 * over the bounds (permanent) or its reading took too long or failed (temporary), or `MailBusy` when the
 * readers are busy (temporary, no fault of the email's).
 */
export function readReceivedEmail(deps: Omit<InboundDeps, 'db'>, raw: Buffer, provider: 'smtp' | 'imap', envelope?: SmtpEnvelope, client?: string, place?: ParsePlace): Promise<AnalyzedEmail> {
  return readEmail(raw, provider, {
    client: client ?? (envelope?.remoteAddress ? `${provider}:${envelope.remoteAddress}` : provider),
    envelope,
    resolver: deps.resolver ?? systemResolver,
    now: (deps.clock ?? systemClock)(),
    attachmentMaxBytes: deps.attachmentMaxBytes ?? DEFAULT_ATTACHMENT_MAX_BYTES,
    mta: deps.mta,
    timeoutMs: deps.parseTimeoutMs,
    place,
  });
}

/** The values of one channel's message from a read email: its recipient, and attachment ids of its own. */
function forChannel(read: AnalyzedEmail, channel: InboundChannel): { message: Record<string, unknown>; attachments: NewAttachment[] } {
  const message = structuredClone(read.message);
  const info = message.metadata.email.attachments ?? [];
  const attachments = read.attachments.map(({ index, ...a }) => {
    const id = randomUUID();
    if (info[index]) info[index].id = id;
    return { id, ...a };
  });
  const name = read.addressees.find((p) => p.email === channel.address)?.name ?? null;
  return { message: { ...message, recipient: { email: channel.address, name } }, attachments };
}

/**
 * Writes a read email as one incoming message of a channel with its events, in one transaction. The same
 * message on the same channel (see `receiveOperation`) answers the existing one with `duplicate: true` and
 * writes nothing. Throws `ChannelGone` when the channel was deleted meanwhile (nothing is written), and when
 * the database fails.
 */
export async function writeReceivedEmail(deps: InboundDeps, channel: InboundChannel, read: AnalyzedEmail, provider: 'smtp' | 'imap', opts: ReceiveOptions = {}): Promise<ReceiveResult> {
  const run = deps.run ?? maybeInboundRunner();
  if (!run) throw new Error('receiveEmail: no operation runner (setInboundRunner)');
  const { message, attachments } = forChannel(read, channel);
  const input = { channelId: channel.id, provider, message, thread: read.thread, senderEmail: read.senderEmail, contentHash: read.contentHash };
  try {
    const envelopeOut = await run(receiveOperation(attachments, (deps.clock ?? systemClock)(), opts.inTransaction), input, { orgId: channel.organizationId, actor: SYSTEM_ACTOR, permissions: ['*'], db: deps.db });
    return { messageId: (envelopeOut.data as { id: string }).id, duplicate: false };
  } catch (err) {
    if (err instanceof DuplicateEmail && err.existingId) return { messageId: err.existingId, duplicate: true };
    if (!(err instanceof DuplicateEmail) && !isUniqueViolation(err)) throw err;
    // Two deliveries of the same message at once: the other one's write won.
    const known = await receivedOnChannel(deps.db, channel.organizationId, channel.id, read.thread.messageId);
    if (known && (known.contentHash === null || known.contentHash === read.contentHash)) return { messageId: known.id, duplicate: true };
    const variant = await receivedOnChannel(deps.db, channel.organizationId, channel.id, reusedIdVariant(read.thread.messageId, read.contentHash));
    if (!variant) throw err;
    return { messageId: variant.id, duplicate: true };
  }
}

/**
 * Receives one raw email on a channel: reads it (`readReceivedEmail`) and writes it (`writeReceivedEmail`).
 * Throws `MailRefused` when it cannot be read, and when the database fails.
 */
export async function receiveEmail(deps: InboundDeps, channel: InboundChannel, raw: Buffer, provider: 'smtp' | 'imap', envelope?: SmtpEnvelope, opts: ReceiveOptions = {}): Promise<ReceiveResult> {
  // A mailbox's session reads one email at a time: the channel is its client.
  const read = await readReceivedEmail(deps, raw, provider, envelope, provider === 'imap' ? `imap:${channel.id}` : undefined);
  return writeReceivedEmail(deps, channel, read, provider, opts);
}

/**
 * Why receiving an email failed, for `lastError`, the not-importable record and the logs: never SQL, never
 * the message's content (a database error is named by its SQLSTATE only).
 */
export function failureReason(err: unknown): string {
  if (err instanceof MailRefused) return err.message;
  const state = pgErrorCode(err);
  return state ? `The database refused the message (SQLSTATE ${state})` : `The message could not be stored (${err instanceof Error ? err.name : 'unknown error'})`;
}

/** A database error named by its SQLSTATE alone (its message holds the statement and its values), or undefined for another error. */
export function databaseErrorReason(err: unknown): string | undefined {
  const state = pgErrorCode(err);
  return state ? `A database error (SQLSTATE ${state})` : undefined;
}


import { isUtf8 } from 'node:buffer';
import { createHash, randomUUID } from 'node:crypto';
import { resolveDns } from '../../core/dns.js';
import { hostname } from 'node:os';
import { LRUCache } from 'lru-cache';
import type { AuthenticateResult, DnsResolver } from 'mailauth';
import type { AddressObject, ParsedMail } from 'mailparser';
import { z } from 'zod';
import type { Clock } from '../../core/clock.js';
import { systemClock } from '../../core/clock.js';
import { defineOperation, type Actor, type Envelope, type Operation } from '../../core/operation.js';
import { JsonObject, Uuid } from '../../core/schemas.js';
import type { Db, DbOrTx } from '../../db/client.js';
import { recordChannelOutcome } from '../channels/channels.repository.js';
import { contactEmailIdFor, insertAttachments, insertReceivedMessage, messageIdOnChannel, type NewAttachment } from './messages.repository.js';
import { Message } from './messages.schemas.js';
import { messageIdList, normalizeMessageId, resolveThreadId } from './threads.js';

/**
 * Receiving email: one raw message (from the SMTP receiver or the IMAP sync) becomes one incoming message.
 * Parsed with mailparser, authenticated with mailauth (SPF, DKIM, DMARC), and written through the operation
 * table's runner, so the write has its events (`message.created`, `message.received`), webhooks and
 * automations like every other. Hostile input is ordinary input: whatever cannot be parsed is stored as
 * well as it can be (the raw text, with `metadata.email.parseError`), never thrown.
 */

/** The runner of the operation table (`runOperation`), handed in by the layer that owns it. */
export type OperationRunner = (op: Operation, raw: unknown, caller: { orgId: string; actor: Actor; permissions: readonly string[]; db: Db }) => Promise<Envelope>;

let registeredRunner: OperationRunner | undefined;
/** Set once by the application (`buildApp`): the runner `receiveEmail` uses when its deps name none. */
export const setInboundRunner = (run: OperationRunner) => void (registeredRunner = run);

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
}

export interface InboundChannel {
  id: string;
  organizationId: string;
  address: string;
}

/** What the SMTP session knew about the sender (SPF needs the connecting IP and the MAIL FROM). */
export interface SmtpEnvelope {
  remoteAddress?: string | undefined;
  helo?: string | undefined;
  mailFrom?: string | undefined;
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
const MAX_TEXT = 100_000;
const MAX_FIELD = 10_000;
const DEFAULT_ATTACHMENT_MAX_BYTES = 10 * 1024 * 1024;
/** Dates before this, or more than a day ahead, are not believed: the message gets the time it arrived. */
const EARLIEST_DATE = Date.UTC(1990, 0, 1);
const FUTURE_SLACK_MS = 24 * 60 * 60 * 1000;
const DNS_TIMEOUT_MS = 5000;
const AUTH_TIMEOUT_MS = 20_000;

/** Raised inside the write when the channel already holds this Message-ID: the transaction rolls back. */
class DuplicateEmail extends Error {}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Text PostgreSQL can store and JSON can carry: no NUL characters (text and jsonb refuse them), no lone
 * surrogates (invalid encodings decoded leave them), bounded length.
 */
export function cleanText(value: string, max = MAX_FIELD): string {
  const s = value.replaceAll('\u0000', '').replace(LONE_SURROGATE, '\uFFFD');
  return s.length > max ? s.slice(0, max) : s;
}

function cleanDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return cleanText(value);
  if (Array.isArray(value)) return depth > 16 ? [] : value.map((v) => cleanDeep(v, depth + 1));
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [cleanText(k, 200), cleanDeep(v, depth + 1)]));
  }
  return value;
}

export interface Party {
  email: string | null;
  name: string | null;
}

/** The addresses of an address header (groups flattened), lower-cased, at most 100. */
function partiesOf(value: AddressObject | AddressObject[] | undefined): Party[] {
  const list = value ? (Array.isArray(value) ? value : [value]) : [];
  const out: Party[] = [];
  const walk = (entries: AddressObject['value']) => {
    for (const e of entries) {
      if (out.length >= 100) return;
      if (e.group) walk(e.group);
      else if (e.address || e.name) out.push({ email: e.address ? cleanText(e.address, 320).toLowerCase() : null, name: e.name ? cleanText(e.name, 500) : null });
    }
  };
  for (const a of list) walk(a.value);
  return out;
}

/** A header's raw value (unfolded), or null; from the raw lines so that unknown headers read the same as known ones. */
function rawHeader(parsed: ParsedMail, name: string): string | null {
  const line = parsed.headerLines.find((h) => h.key === name)?.line;
  if (line === undefined) return null;
  const colon = line.indexOf(':');
  return cleanText(line.slice(colon + 1).replace(/\r?\n[ \t]+/g, ' ').trim(), 2000) || null;
}

function sensibleDate(date: Date | undefined, now: Date): Date {
  const t = date?.getTime();
  return t !== undefined && Number.isFinite(t) && t >= EARLIEST_DATE && t <= now.getTime() + FUTURE_SLACK_MS ? date! : now;
}

const withTimeout = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms);
    promise.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e as Error)),
    );
  });

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

export interface AuthenticationSummary {
  spf: string;
  dkim: string;
  dmarc: string;
  /** Domains whose DKIM signature verified. */
  dkimDomains: string[];
  /** The domain SPF was checked for (the MAIL FROM's), when there was one. */
  spfDomain: string | null;
  /** The From domain's published DMARC policy (none, quarantine, reject), when there is one. */
  dmarcPolicy: string | null;
  /** The Authentication-Results header this server would add (RFC 8601). */
  header: string | null;
}

/** SPF, DKIM and DMARC of a raw message with mailauth; a failure of the checks themselves is `temperror`, never thrown. */
export async function authenticateEmail(raw: Buffer, opts: { envelope?: SmtpEnvelope | undefined; provider: 'smtp' | 'imap'; resolver?: DnsResolver | undefined; mta?: string | undefined }): Promise<AuthenticationSummary> {
  let result: AuthenticateResult;
  try {
    // Loaded on first use, as the parser below: a process that receives no mail does not hold them (about 15 MB of heap).
    const { authenticate } = await import('mailauth');
    result = await withTimeout(
      authenticate(raw, {
        ip: opts.envelope?.remoteAddress,
        helo: opts.envelope?.helo,
        sender: opts.envelope?.mailFrom || undefined,
        // Mail fetched over IMAP has no SMTP session here: the mailbox server's own Received header names the sender's IP.
        trustReceived: opts.provider === 'imap' || !opts.envelope?.remoteAddress,
        mta: opts.mta ?? hostname(),
        resolver: opts.resolver ?? systemResolver,
        disableArc: true,
        disableBimi: true,
      }),
      AUTH_TIMEOUT_MS,
      'Authentication',
    );
  } catch {
    return { spf: 'temperror', dkim: 'temperror', dmarc: 'temperror', dkimDomains: [], spfDomain: null, dmarcPolicy: null, header: null };
  }
  const dkimResults = result.dkim?.results ?? [];
  const passed = dkimResults.filter((r) => r.status.result === 'pass');
  const dkim = passed.length > 0 ? 'pass' : (dkimResults[0]?.status.result ?? 'none');
  return {
    spf: result.spf ? result.spf.status.result : 'none',
    dkim,
    dmarc: result.dmarc ? result.dmarc.status.result : 'none',
    dkimDomains: passed.map((r) => r.signingDomain ?? '').filter(Boolean),
    spfDomain: result.spf ? (result.spf.domain ?? null) : null,
    dmarcPolicy: result.dmarc ? (result.dmarc.policy ?? result.dmarc.p ?? null) : null,
    header: result.headers ? cleanText(result.headers.replace(/\r\n/g, '\n').trim(), 4000) : null,
  };
}

/** mailparser's limits: a bounded header block per part and a bounded number of parts (MIME nesting bombs). */
const PARSER_OPTIONS = {
  maxHeadSize: 256 * 1024,
  maxChildNodes: 500,
  maxHtmlLengthToParse: 5 * 1024 * 1024,
  keepCidLinks: true,
  skipTextToHtml: true,
  skipImageLinks: true,
  checksumAlgo: 'sha256',
} as const;

/**
 * Raw 8-bit header lines (RFC 5322 wants ASCII, RFC 6532 allows UTF-8) that are not valid UTF-8 are read as
 * Latin-1, the usual legacy encoding, instead of becoming replacement characters. Line by line, so that a
 * UTF-8 header beside a Latin-1 one keeps its text. Only the parser's copy: authentication sees the bytes
 * as they came (DKIM signs them).
 */
export function legacyHeadersAsUtf8(raw: Buffer): Buffer {
  let end = raw.indexOf('\r\n\r\n');
  if (end < 0) end = raw.indexOf('\n\n');
  if (end < 0) end = raw.length;
  const head = raw.subarray(0, end);
  if (!head.some((b) => b >= 0x80) || isUtf8(head)) return raw;
  const lines: Buffer[] = [];
  let start = 0;
  while (start < head.length) {
    let next = head.indexOf(0x0a, start);
    next = next < 0 ? head.length : next + 1;
    const line = head.subarray(start, next);
    lines.push(isUtf8(line) ? line : Buffer.from(line.toString('latin1'), 'utf8'));
    start = next;
  }
  return Buffer.concat([...lines, raw.subarray(end)]);
}

async function parse(raw: Buffer): Promise<{ parsed?: ParsedMail; error?: string }> {
  try {
    const { simpleParser } = await import('mailparser');
    return { parsed: await simpleParser(legacyHeadersAsUtf8(raw), PARSER_OPTIONS) };
  } catch (err) {
    return { error: cleanText(err instanceof Error ? err.message : String(err), 500) };
  }
}

/** The parts of a received email the write needs: the message's values, its thread headers, its attachments. */
export interface PreparedEmail {
  message: Record<string, unknown>;
  thread: { messageId: string; inReplyTo: string[]; references: string[] };
  senderEmail: string | null;
  attachments: NewAttachment[];
}

/** Parses and authenticates a raw email into the values of one incoming message (no database access). */
export async function prepareEmail(
  raw: Buffer,
  channel: InboundChannel,
  provider: 'smtp' | 'imap',
  opts: { envelope?: SmtpEnvelope | undefined; resolver?: DnsResolver | undefined; now: Date; attachmentMaxBytes: number; mta?: string | undefined },
): Promise<PreparedEmail> {
  const [{ parsed, error }, authentication] = await Promise.all([parse(raw), authenticateEmail(raw, { envelope: opts.envelope, provider, resolver: opts.resolver, mta: opts.mta })]);
  const notes: string[] = [];
  // No Message-ID (or an unreadable message): one made from the content, so that the same bytes received twice are still one message.
  const generatedId = `${createHash('sha256').update(raw).digest('hex').slice(0, 40)}@generated.switchboard.invalid`;

  if (!parsed) {
    const text = cleanText(raw.toString('utf8'), MAX_TEXT).trimEnd();
    return {
      message: {
        sender: { email: opts.envelope?.mailFrom?.toLowerCase() || null, name: null },
        recipient: { email: channel.address, name: null },
        text,
        providerMessageId: generatedId,
        timestamp: opts.now.toISOString(),
        metadata: { email: { messageId: generatedId, messageIdGenerated: true, parseError: error ?? 'unreadable', notes: ['The message could not be parsed; its raw text is kept as the text'], authentication } },
      },
      thread: { messageId: generatedId, inReplyTo: [], references: [] },
      senderEmail: null,
      attachments: [],
    };
  }

  const from = partiesOf(parsed.from)[0] ?? { email: opts.envelope?.mailFrom?.toLowerCase() || null, name: null };
  const to = partiesOf(parsed.to);
  const cc = partiesOf(parsed.cc);
  const replyTo = partiesOf(parsed.replyTo);
  const ownName = [...to, ...cc].find((p) => p.email === channel.address)?.name ?? null;
  const ownMessageId = normalizeMessageId(parsed.messageId);
  const messageId = ownMessageId ?? generatedId;
  const inReplyTo = messageIdList(parsed.inReplyTo ?? null).slice(0, 10);
  const references = messageIdList(parsed.references ?? null).slice(-100);
  const subject = parsed.subject !== undefined ? cleanText(parsed.subject, 2000) : null;

  let text = cleanText(parsed.text ?? '', Number.MAX_SAFE_INTEGER).trimEnd();
  // Text without a header block (its first lines were read as headers): the raw text is what there is.
  if (!text && !parsed.html && parsed.attachments.length === 0 && !parsed.headerLines.some((h) => ['from', 'to', 'subject', 'date', 'message-id'].includes(h.key))) {
    text = cleanText(raw.toString('utf8'), Number.MAX_SAFE_INTEGER).trimEnd();
    notes.push('The message has no recognisable headers; its raw text is kept as the text');
  }
  if (text.length > MAX_TEXT) {
    text = text.slice(0, MAX_TEXT);
    notes.push(`The text was cut to its first ${MAX_TEXT} characters`);
  }

  let kept = 0;
  const dropped: string[] = [];
  const attachments: NewAttachment[] = [];
  const attachmentInfo = parsed.attachments.slice(0, 200).map((a) => {
    const id = randomUUID();
    const size = a.size ?? a.content.length;
    const fits = kept + a.content.length <= opts.attachmentMaxBytes;
    const info = {
      id: fits ? id : null,
      filename: a.filename ? cleanText(a.filename, 500) : null,
      contentType: cleanText(a.contentType || 'application/octet-stream', 200),
      size,
      contentId: a.contentId ? cleanText(a.contentId, 500) : null,
      inline: a.contentDisposition === 'inline',
      stored: fits,
    };
    if (fits) {
      kept += a.content.length;
      attachments.push({ id, filename: info.filename, contentType: info.contentType, size, contentId: info.contentId, content: a.content });
    } else dropped.push(info.filename ?? info.contentType);
    return info;
  });
  if (parsed.attachments.length > 200) notes.push(`Only the first 200 of ${parsed.attachments.length} attachments are listed`);
  if (dropped.length > 0) notes.push(`The content of ${dropped.length} attachment(s) was not kept (over the ${opts.attachmentMaxBytes} bytes kept per message): ${dropped.slice(0, 20).join(', ')}`);

  const email = cleanDeep({
    messageId,
    ...(ownMessageId ? {} : { messageIdGenerated: true }),
    inReplyTo: inReplyTo[0] ?? null,
    references,
    subject,
    from,
    to,
    cc,
    replyTo,
    date: rawHeader(parsed, 'date'),
    autoSubmitted: rawHeader(parsed, 'auto-submitted'),
    precedence: rawHeader(parsed, 'precedence'),
    listId: rawHeader(parsed, 'list-id'),
    returnPath: opts.envelope?.mailFrom ?? rawHeader(parsed, 'return-path'),
    attachments: attachmentInfo,
    ...(notes.length > 0 ? { notes } : {}),
    authentication,
  });

  return {
    message: {
      sender: cleanDeep(from),
      recipient: { email: channel.address, name: ownName },
      text,
      // The subject is also the summary until someone (an automation, a person) writes a better one: it is what
      // lists show and what search finds.
      ...(subject ? { summary: subject } : {}),
      providerMessageId: messageId,
      timestamp: sensibleDate(parsed.date, opts.now).toISOString(),
      metadata: { email },
    },
    thread: { messageId, inReplyTo, references },
    senderEmail: from.email,
    attachments,
  };
}

const ReceiveInput = z.strictObject({
  channelId: Uuid,
  provider: z.enum(['smtp', 'imap']),
  message: JsonObject,
  thread: z.object({ messageId: z.string(), inReplyTo: z.array(z.string()), references: z.array(z.string()) }),
  senderEmail: z.string().nullable(),
});

/**
 * The internal operation a received email is written by (not in the table: no REST route or MCP tool
 * reaches it). Made per email because the attachments' bytes travel beside the input, not in it.
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
        channelId: input.channelId,
        threadId,
        emailAddressId,
      });
      if (!row) throw new DuplicateEmail();
      await insertAttachments(ctx.db, ctx.orgId, row.id, attachments);
      await recordChannelOutcome(ctx.db, input.channelId, { ok: true, at });
      await inTransaction?.(ctx.db);
      return row;
    },
  });
}

/**
 * Receives one raw email on a channel: parses, authenticates and writes it as one incoming message with its
 * events, in one transaction. The same Message-ID on the same channel answers the existing message with
 * `duplicate: true` and writes nothing. Throws only when the database fails (the SMTP receiver answers 451).
 */
export async function receiveEmail(deps: InboundDeps, channel: InboundChannel, raw: Buffer, provider: 'smtp' | 'imap', envelope?: SmtpEnvelope, opts: ReceiveOptions = {}): Promise<ReceiveResult> {
  const run = deps.run ?? registeredRunner;
  if (!run) throw new Error('receiveEmail: no operation runner (setInboundRunner)');
  const now = (deps.clock ?? systemClock)();
  const prepared = await prepareEmail(raw, channel, provider, {
    envelope,
    resolver: deps.resolver,
    now,
    attachmentMaxBytes: deps.attachmentMaxBytes ?? DEFAULT_ATTACHMENT_MAX_BYTES,
    mta: deps.mta,
  });
  const input = { channelId: channel.id, provider, message: prepared.message, thread: prepared.thread, senderEmail: prepared.senderEmail };
  try {
    const envelopeOut = await run(receiveOperation(prepared.attachments, now, opts.inTransaction), input, { orgId: channel.organizationId, actor: SYSTEM_ACTOR, permissions: ['*'], db: deps.db });
    return { messageId: (envelopeOut.data as { id: string }).id, duplicate: false };
  } catch (err) {
    if (!(err instanceof DuplicateEmail) && !isUniqueViolation(err)) throw err;
    const existing = await findByProviderId(deps.db, channel, prepared.thread.messageId);
    if (!existing) throw err;
    return { messageId: existing, duplicate: true };
  }
}

const isUniqueViolation = (err: unknown): boolean => {
  for (let e: unknown = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) if ((e as { code?: unknown }).code === '23505') return true;
  return false;
};

const findByProviderId = (db: Db, channel: InboundChannel, providerMessageId: string) => messageIdOnChannel(db, channel.organizationId, channel.id, providerMessageId);

import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import type { AuthenticateResult, DnsResolver } from 'mailauth';
import type { ReceivedRow } from 'mailauth/lib/parse-received.js';
import type { AddressObject, ParsedMail } from 'mailparser';
import { storableText } from '../../../core/storable.js';
import { messageIdList, normalizeMessageId } from '../../messages/threads.js';

/**
 * The reading of a received email: parsing (mailparser) and authentication (mailauth: SPF, DKIM, DMARC) into
 * the values of an incoming message, with no database and no channel. It runs in the parse worker threads
 * (`parse-pool.ts`), never on the main thread: CPU spent here cannot stall the service. Hostile input is
 * ordinary input: whatever cannot be parsed is kept as well as it can be (the raw text, with
 * `metadata.email.parseError`), never thrown.
 */

/** What the SMTP session knew about the sender (SPF needs the connecting IP and the MAIL FROM). */
export interface SmtpEnvelope {
  remoteAddress?: string | undefined;
  helo?: string | undefined;
  mailFrom?: string | undefined;
}

const MAX_TEXT = 100_000;
const MAX_FIELD = 10_000;
/** Dates before this, or more than a day ahead, are not believed: the message gets the time it arrived. */
const EARLIEST_DATE = Date.UTC(1990, 0, 1);
const FUTURE_SLACK_MS = 24 * 60 * 60 * 1000;
const AUTH_TIMEOUT_MS = 20_000;

/**
 * Text PostgreSQL can store and JSON can carry: no NUL characters (text and jsonb refuse them), no lone
 * surrogates (invalid encodings decoded leave them), bounded length.
 */
export function cleanText(value: string, max = MAX_FIELD): string {
  const s = storableText(value);
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

export const withTimeout = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms);
    promise.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e as Error)),
    );
  });


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

/** The IP address, HELO name and MAIL FROM the mailbox server's own `Received` header names (mail fetched over IMAP). */
function fromReceived(headers: { key: string; line: Buffer | string }[] | undefined, parseReceived: (line: Buffer | string) => ReceivedRow) {
  const row = headers?.filter((h) => h.key === 'received').map((h) => parseReceived(h.line)).find((r) => r.from?.value);
  if (!row) return {};
  // Bounded and linear: the comment is at most one header line, and the class excludes the closing bracket.
  const ip = /\[([^\]]{1,100})\]/.exec(row.from?.comment ?? '')?.[1]?.replace(/^IPv6:/i, '');
  return { ip, helo: row.from?.value, sender: row['envelope-from']?.value?.replace(/[<>]/g, '').trim() };
}

/**
 * SPF, DKIM and DMARC of a raw message, as mailauth's `authenticate` composes them with ARC and BIMI off:
 * only these three verifiers are loaded (the reading threads hold less), each from its own module.
 */
async function authenticate(raw: Buffer, opts: { ip?: string | undefined; helo?: string | undefined; sender?: string | undefined; trustReceived: boolean; mta: string; resolver: DnsResolver }): Promise<AuthenticateResult> {
  const [{ dkimVerify }, { spf: spfVerify }, { dmarc: dmarcVerify }, { parseReceived }] = await Promise.all([
    import('mailauth/lib/dkim/verify.js'),
    import('mailauth/lib/spf/index.js'),
    import('mailauth/lib/dmarc/index.js'),
    import('mailauth/lib/parse-received.js'),
  ]);
  const dkim = await dkimVerify(raw, { resolver: opts.resolver, sender: opts.sender });
  let { ip, helo, sender } = opts;
  if (opts.trustReceived) {
    const received = fromReceived(dkim.headers?.parsed, parseReceived);
    if (received.ip && !ip) ip = received.ip;
    // With an IP address, HELO is not taken from the header even when it is missing.
    if (received.helo && !helo && !ip) helo = received.helo;
    if (received.sender && !sender) sender = received.sender;
    if (dkim.envelopeFrom && !sender) sender = dkim.envelopeFrom;
  }
  if (!helo && ip) helo = ip;
  if (helo && isIP(helo)) helo = `[${helo}]`;
  const spf = await spfVerify({ ip, helo, sender, mta: opts.mta, resolver: opts.resolver });
  const rows = dkim.results.map((r) => r.info ?? '');
  if (spf) rows.push(spf.info ?? '');
  let dmarc: AuthenticateResult['dmarc'] = false;
  if (dkim.headerFrom) {
    dmarc = await dmarcVerify({
      headerFrom: dkim.headerFrom,
      spfDomains: spf && spf.status.result === 'pass' && spf.domain ? [spf.domain] : [],
      dkimDomains: dkim.results.filter((r) => r.status.result === 'pass').map((r) => ({ id: r.id, domain: r.signingDomain, aligned: r.status.aligned, underSized: r.status.underSized })),
      resolver: opts.resolver,
    });
    if (dmarc && dmarc.info) rows.push(dmarc.info);
  }
  const authResults = `Authentication-Results: ${opts.mta};\r\n ${rows.filter(Boolean).join(';\r\n ')}`;
  return { dkim, spf, dmarc, arc: false, bimi: false, headers: `${spf && spf.header ? `${spf.header}\r\n` : ''}${authResults}\r\n` };
}

/** SPF, DKIM and DMARC of a raw message with mailauth; a failure of the checks themselves is `temperror`, never thrown. */
export async function authenticateEmail(raw: Buffer, opts: { envelope?: SmtpEnvelope | undefined; provider: 'smtp' | 'imap'; resolver: DnsResolver; mta?: string | undefined }): Promise<AuthenticationSummary> {
  let result: AuthenticateResult;
  try {
    result = await withTimeout(
      authenticate(raw, {
        ip: opts.envelope?.remoteAddress,
        helo: opts.envelope?.helo,
        sender: opts.envelope?.mailFrom || undefined,
        // Mail fetched over IMAP has no SMTP session here: the mailbox server's own Received header names the sender's IP.
        trustReceived: opts.provider === 'imap' || !opts.envelope?.remoteAddress,
        mta: opts.mta ?? hostname(),
        resolver: opts.resolver,
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
  // Mail fetched over IMAP whose Received headers name no connecting IP: SPF has nothing to check (mailauth
  // would report `client-ip=undefined; smtp.mailfrom=postmaster@undefined`), so it is `none` and says why.
  const spf = result.spf && result.spf['client-ip'] ? result.spf : false;
  let header = result.headers;
  if (result.spf && !spf) {
    const parts = [...dkimResults.map((r) => r.info), 'spf=none (no connecting IP address is known)', result.dmarc ? result.dmarc.info : undefined].filter(Boolean);
    header = `Authentication-Results: ${opts.mta ?? hostname()};\r\n ${parts.join(';\r\n ')}`;
  }
  return {
    spf: spf ? spf.status.result : 'none',
    dkim,
    dmarc: result.dmarc ? result.dmarc.status.result : 'none',
    dkimDomains: passed.map((r) => r.signingDomain ?? '').filter(Boolean),
    spfDomain: spf ? (spf.domain ?? null) : null,
    dmarcPolicy: result.dmarc ? (result.dmarc.policy ?? result.dmarc.p ?? null) : null,
    header: header ? cleanText(header.replace(/\r\n/g, '\n').trim(), 4000) : null,
  };
}

/**
 * mailparser's limits: a bounded header block per part and a bounded number of parts (MIME nesting bombs).
 * It converts no HTML to text itself (it would convert every HTML part up to 5 MB each, seconds of CPU per
 * crafted table): `textFromHtml` converts the message's HTML once, within its own bound.
 */
const PARSER_OPTIONS = {
  maxHeadSize: 256 * 1024,
  maxChildNodes: 500,
  skipHtmlToText: true,
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

/** An attachment as read, before a channel's message gives it its id. */
export interface ReadAttachment {
  filename: string | null;
  contentType: string;
  size: number;
  contentId: string | null;
  content: Buffer;
  /** Its place in `metadata.email.attachments`, whose `id` is filled in per message. */
  index: number;
}

/**
 * A received email read once, whatever channels it is for: the values of its message except the recipient,
 * its thread headers, the kept attachments and the fingerprint duplicates are recognised by.
 */
export interface AnalyzedEmail {
  message: Record<string, unknown> & { metadata: { email: Record<string, unknown> & { attachments?: { id: string | null }[] } } };
  thread: { messageId: string; inReplyTo: string[]; references: string[] };
  senderEmail: string | null;
  /** To and Cc: the channel's own entry names the recipient. */
  addressees: Party[];
  attachments: ReadAttachment[];
  /** sha256 of the From, Date and Subject headers and the body bytes: with the Message-ID, what makes two receipts the same message. */
  contentHash: string;
}

/** The body's bytes: what follows the first empty line (the whole message when there is none). */
function bodyOf(raw: Buffer): Buffer {
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  if (crlf < 0 && lf < 0) return raw;
  return crlf >= 0 && (lf < 0 || crlf < lf) ? raw.subarray(crlf + 4) : raw.subarray(lf + 2);
}

/** The fingerprint of a message's content (see `AnalyzedEmail.contentHash`). */
export function contentHashOf(raw: Buffer, headers: { from?: string | null; date?: string | null; subject?: string | null }): string {
  return createHash('sha256')
    .update(JSON.stringify([headers.from ?? null, headers.date ?? null, headers.subject ?? null]))
    .update(bodyOf(raw))
    .digest('hex');
}

/**
 * HTML converted to text at most (characters). Converting costs far more than its size suggests (a table of
 * 300,000 cells, 4.2 MB, took seconds of a thread): the text of what lies past it is dropped, with a note in
 * the text, and the whole HTML is kept as the part `message.html`.
 */
export const MAX_HTML_TO_TEXT = 128 * 1024;

/**
 * The text of an email's HTML wherever that sits in the MIME tree (mailparser converts none: see
 * PARSER_OPTIONS), at most its first MAX_HTML_TO_TEXT characters; `cut` says how much was left out. Empty
 * when there is no HTML or it cannot be converted.
 */
async function textFromHtml(html: string): Promise<{ text: string; cut: number }> {
  if (!html) return { text: '', cut: 0 };
  // Cut before a tag rather than inside one, where the text allows.
  const tag = html.length > MAX_HTML_TO_TEXT ? html.lastIndexOf('<', MAX_HTML_TO_TEXT) : -1;
  const end = html.length <= MAX_HTML_TO_TEXT ? html.length : tag > MAX_HTML_TO_TEXT / 2 ? tag : MAX_HTML_TO_TEXT;
  try {
    const { convert } = await import('html-to-text');
    return { text: convert(html.slice(0, end), { limits: { maxDepth: 1000 } }), cut: html.length - end };
  } catch {
    return { text: '', cut: 0 };
  }
}

/** The text of the HTML, with a note at its end where the HTML was longer than what is converted. */
async function htmlText(html: string, notes: string[]): Promise<string> {
  const { text, cut } = await textFromHtml(html);
  if (cut === 0) return text;
  const kb = Math.ceil(cut / 1024);
  notes.push(`Only the first ${MAX_HTML_TO_TEXT / 1024} KB of the HTML were converted to text; the text of the remaining ${kb} KB was dropped`);
  return `${text.trimEnd()}\n\n[The rest of the message (${kb} KB of HTML) is not shown as text; the HTML is kept whole as message.html]`;
}

/** Parses and authenticates a raw email into the channel-independent values of its incoming message (no database access). */
export async function analyzeEmail(
  raw: Buffer,
  provider: 'smtp' | 'imap',
  opts: { envelope?: SmtpEnvelope | undefined; resolver: DnsResolver; now: Date; attachmentMaxBytes: number; mta?: string | undefined },
): Promise<AnalyzedEmail> {
  const [{ parsed, error }, authentication] = await Promise.all([parse(raw), authenticateEmail(raw, { envelope: opts.envelope, provider, resolver: opts.resolver, mta: opts.mta })]);
  const notes: string[] = [];
  // No Message-ID (or an unreadable message): one made from the content, so that the same bytes received twice are still one message.
  const generatedId = `${createHash('sha256').update(raw).digest('hex').slice(0, 40)}@generated.switchboard.invalid`;

  if (!parsed) {
    const text = cleanText(raw.toString('utf8'), MAX_TEXT).trimEnd();
    const contentHash = contentHashOf(raw, {});
    return {
      message: {
        sender: { email: opts.envelope?.mailFrom?.toLowerCase() || null, name: null },
        text,
        providerMessageId: generatedId,
        timestamp: opts.now.toISOString(),
        metadata: { email: { messageId: generatedId, messageIdGenerated: true, contentHash, parseError: error ?? 'unreadable', notes: ['The message could not be parsed; its raw text is kept as the text'], authentication } },
      },
      thread: { messageId: generatedId, inReplyTo: [], references: [] },
      senderEmail: null,
      addressees: [],
      attachments: [],
      contentHash,
    };
  }

  const from = partiesOf(parsed.from)[0] ?? { email: opts.envelope?.mailFrom?.toLowerCase() || null, name: null };
  const to = partiesOf(parsed.to);
  const cc = partiesOf(parsed.cc);
  const replyTo = partiesOf(parsed.replyTo);
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
  // No plain part: the text comes from the HTML, wherever it sat (mailparser converts a top-level HTML part
  // itself), and the HTML is kept as a part (`message.html`).
  const html = typeof parsed.html === 'string' ? parsed.html : '';
  const topLevelHtml = (parsed.headers.get('content-type') as { value?: string } | undefined)?.value?.toLowerCase() === 'text/html';
  const fromHtml = html !== '' && (!text || topLevelHtml);
  if (fromHtml && !text) text = cleanText(await htmlText(html, notes), Number.MAX_SAFE_INTEGER).trim();
  // An unnamed text part that mailparser took for an attachment (its Content-Disposition is one it does not
  // know, e.g. an encoded word) is the body when nothing else is: its text (from its HTML) is the text.
  const bodyPart = text ? undefined : parsed.attachments.find((a) => !a.filename && a.contentDisposition !== 'attachment' && /^text\/(?:plain|html)$/i.test(a.contentType));
  if (bodyPart) {
    const content = bodyPart.content.toString('utf8');
    text = cleanText(bodyPart.contentType.toLowerCase() === 'text/html' ? await htmlText(content, notes) : content, Number.MAX_SAFE_INTEGER).trim();
    if (text) notes.push('The body came as an unnamed part with an unknown Content-Disposition; it was read as the text');
  }
  if (text.length > MAX_TEXT) {
    text = text.slice(0, MAX_TEXT);
    notes.push(`The text was cut to its first ${MAX_TEXT} characters`);
  }

  let kept = 0;
  const dropped: string[] = [];
  const attachments: ReadAttachment[] = [];
  const parts = parsed.attachments.slice(0, 200).map((a) => ({
    filename: a.filename ? cleanText(a.filename, 500) : null,
    contentType: cleanText(a.contentType || 'application/octet-stream', 200),
    size: a.size ?? a.content.length,
    contentId: a.contentId ? cleanText(a.contentId, 500) : null,
    inline: a.contentDisposition === 'inline',
    content: a.content,
  }));
  if (fromHtml) {
    const content = Buffer.from(html, 'utf8');
    parts.push({ filename: 'message.html', contentType: 'text/html', size: content.length, contentId: null, inline: false, content });
    notes.push('The message has no plain-text part: its text was made from the HTML, which is kept as the part message.html');
  }
  const attachmentInfo = parts.map(({ content, ...part }, index) => {
    const fits = kept + content.length <= opts.attachmentMaxBytes;
    if (fits) {
      kept += content.length;
      attachments.push({ filename: part.filename, contentType: part.contentType, size: part.size, contentId: part.contentId, content, index });
    } else dropped.push(part.filename ?? part.contentType);
    return { id: null, ...part, stored: fits };
  });
  if (parsed.attachments.length > 200) notes.push(`Only the first 200 of ${parsed.attachments.length} attachments are listed`);
  if (dropped.length > 0) notes.push(`The content of ${dropped.length} attachment(s) was not kept (over the ${opts.attachmentMaxBytes} bytes kept per message): ${dropped.slice(0, 20).join(', ')}`);

  const date = rawHeader(parsed, 'date');
  const contentHash = contentHashOf(raw, { from: rawHeader(parsed, 'from'), date, subject });
  const email = cleanDeep({
    messageId,
    contentHash,
    ...(ownMessageId ? {} : { messageIdGenerated: true }),
    inReplyTo: inReplyTo[0] ?? null,
    references,
    subject,
    from,
    to,
    cc,
    replyTo,
    date,
    autoSubmitted: rawHeader(parsed, 'auto-submitted'),
    precedence: rawHeader(parsed, 'precedence'),
    listId: rawHeader(parsed, 'list-id'),
    // What automatic mail reads to stay silent (RFC 3834): every List-* header's name, the top-level content type, Microsoft's suppression header.
    listHeaders: [...new Set(parsed.headerLines.filter((h) => h.key.startsWith('list-')).map((h) => h.key))].slice(0, 20),
    contentType: rawHeader(parsed, 'content-type')?.split(';')[0]?.trim().toLowerCase() || null,
    autoResponseSuppress: rawHeader(parsed, 'x-auto-response-suppress'),
    returnPath: opts.envelope?.mailFrom ?? rawHeader(parsed, 'return-path'),
    attachments: attachmentInfo,
    ...(notes.length > 0 ? { notes } : {}),
    authentication,
  }) as AnalyzedEmail['message']['metadata']['email'];

  return {
    message: {
      sender: cleanDeep(from),
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
    addressees: [...to, ...cc],
    attachments,
    contentHash,
  };
}

/** The header block a received email may have, in bytes and in lines (folded lines counted one by one). */
export const MAX_HEADER_BYTES = 256 * 1024;
export const MAX_HEADER_LINES = 5_000;

/**
 * Why an email's header block is refused before any library reads it (mailauth's header parser is quadratic
 * in folded lines), or null when it is within the bounds. One linear pass over the bytes.
 */
export function headerBlockProblem(raw: Buffer, limits = { bytes: MAX_HEADER_BYTES, lines: MAX_HEADER_LINES }): string | null {
  let lines = 1;
  let lineStart = 0;
  const end = Math.min(raw.length, limits.bytes + 1);
  for (let i = 0; i < end; i++) {
    if (raw[i] !== 0x0a) continue;
    // An empty line (LF or CRLF alone) ends the header block.
    if (i === lineStart || (i === lineStart + 1 && raw[lineStart] === 0x0d)) return null;
    if (++lines > limits.lines) return `The header block has more than ${limits.lines} lines`;
    lineStart = i + 1;
  }
  return raw.length > limits.bytes ? `The header block is larger than ${limits.bytes} bytes` : null;
}
